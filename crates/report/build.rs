//! Records the git commit the crate is built from (`MEWA_GIT_COMMIT`), so
//! that every result folder's `meta.json` says which code produced it.
//! Outside a git checkout (a source tarball) the variable is empty and the
//! folder says `unknown`.

use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    if !out.status.success() {
        return None;
    }
    Some(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// Asks cargo to run this again when `path` changes; only for a path that
/// exists, since cargo reruns a build script on every build while a path it
/// watches is missing.
fn watch(path: &str) {
    if std::path::Path::new(path).exists() {
        println!("cargo:rerun-if-changed={path}");
    }
}

fn main() {
    let commit = git(&["rev-parse", "HEAD"]).unwrap_or_default();
    println!("cargo:rustc-env=MEWA_GIT_COMMIT={commit}");
    // Build again when HEAD moves: HEAD itself (a checkout), the branch it
    // points at (a commit), and packed-refs (after `git gc`).
    if let Some(dir) = git(&["rev-parse", "--git-dir"]) {
        watch(&format!("{dir}/HEAD"));
        watch(&format!("{dir}/packed-refs"));
        if let Some(r) = git(&["symbolic-ref", "-q", "HEAD"]) {
            watch(&format!("{dir}/{r}"));
        }
    }
    if let Some(common) = git(&["rev-parse", "--git-common-dir"]) {
        if let Some(r) = git(&["symbolic-ref", "-q", "HEAD"]) {
            watch(&format!("{common}/{r}"));
        }
    }
    println!("cargo:rerun-if-changed=build.rs");
}
