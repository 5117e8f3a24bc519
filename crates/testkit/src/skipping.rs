//! The one way a test skips.
//!
//! libtest has no "skipped" outcome at run time: a test that returns early
//! passes. So a test that cannot run on this machine calls [`skip`] with
//! its reason and returns, or asks one of the conditions below, which do
//! that for it:
//!
//! ```ignore
//! if mewa_testkit::skip_unless_root() {
//!     return;
//! }
//! let Some(chromium) = mewa_testkit::chromium_or_skip() else {
//!     return;
//! };
//! ```
//!
//! [`skip`] prints `skipped: <test>: <reason>` on stderr and, when the
//! environment variable [`SKIP_LOG`] (`MEWA_SKIP_LOG`) names a file,
//! appends the line `<test>\t<reason>` to it; `scripts/test` sets it and
//! counts those tests as skipped, not passed. A test that loses only a part
//! (the browser half, say) and still asserts the rest says so with
//! [`skip_part`], which is not logged: the test did run.
//!
//! `<test>` is `<package>/<libtest name>` (`mewa-link/core::tests::real_lte_trace_rate`):
//! libtest runs every test on a thread named after the test's path, also
//! with `--test-threads=1`, and cargo tells the test binary its package in
//! `CARGO_PKG_NAME`. Call these from the test's own thread (an async
//! test's body is: `#[tokio::test]` blocks on it there), not from a task or
//! thread it spawned.
//!
//! Only std, `mewa-link` (its namespace probe) and, with the `bpf`
//! feature, `mewa-cc-bpf`: no fixture type crosses this module, so a crate
//! below testkit (link, hint, corpus) can skip through it from its own
//! tests.

use std::fmt::Display;
use std::io::Write;
use std::path::{Path, PathBuf};

/// The environment variable naming the file skipped tests are appended to.
pub const SKIP_LOG: &str = "MEWA_SKIP_LOG";

/// Where Debian and Ubuntu install Chromium.
const CHROMIUM: [&str; 2] = ["/usr/bin/chromium", "/usr/bin/chromium-browser"];

/// Marks the running test skipped for `reason`: prints
/// `skipped: <test>: <reason>` on stderr and appends `<test>\t<reason>` to
/// the file named by `MEWA_SKIP_LOG`, if set (append mode, one `write` per
/// line, so tests skipping in parallel do not interleave). The test then
/// returns. Panics if `MEWA_SKIP_LOG` is set but cannot be written: a skip
/// that `scripts/test` cannot see would count as a pass.
pub fn skip(reason: impl Display) {
    let test = current_test();
    let reason = one_line(&reason.to_string());
    eprintln!("skipped: {test}: {reason}");
    let Some(log) = std::env::var_os(SKIP_LOG) else {
        return;
    };
    if let Err(e) = append(Path::new(&log), &format!("{test}\t{reason}\n")) {
        panic!(
            "{test} skipped, but {SKIP_LOG}={} cannot be written: {e}",
            Path::new(&log).display()
        );
    }
}

/// Appends `line` to `log` with one `write` (O_APPEND: lines written at
/// once by parallel tests, or test binaries, land whole).
fn append(log: &Path, line: &str) -> std::io::Result<()> {
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)?;
    let n = f.write(line.as_bytes())?;
    if n == line.len() {
        Ok(())
    } else {
        Err(std::io::Error::new(
            std::io::ErrorKind::WriteZero,
            format!("wrote {n} of {} bytes", line.len()),
        ))
    }
}

/// Says on stderr that `part` of the running test does not run, for
/// `reason`, while the rest of it does and still asserts: the test is not
/// logged as skipped.
pub fn skip_part(part: &str, reason: impl Display) {
    eprintln!(
        "skipped part of {}: {part}: {}",
        current_test(),
        one_line(&reason.to_string())
    );
}

/// The running test as [`skip`] names it: `<package>/<libtest name>`. Off
/// a libtest thread (the main thread of a `harness = false` binary) the
/// binary's file name stands in for the test's.
pub fn current_test() -> String {
    let thread = std::thread::current();
    let name = match thread.name() {
        Some(n) if n != "main" => n.to_owned(),
        _ => std::env::args_os()
            .next()
            .as_deref()
            .and_then(|a| Path::new(a).file_name())
            .map_or_else(
                || "(unknown test)".to_owned(),
                |f| f.to_string_lossy().into_owned(),
            ),
    };
    match std::env::var("CARGO_PKG_NAME") {
        Ok(pkg) if !pkg.is_empty() => format!("{pkg}/{name}"),
        _ => name,
    }
}

/// Tabs and line breaks as spaces: one skip, one line of the log.
fn one_line(s: &str) -> String {
    s.split(['\t', '\n', '\r'])
        .filter(|p| !p.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}

/// Skips the running test unless this process can build network
/// namespaces and TUN links (root, or CAP_NET_ADMIN + CAP_SYS_ADMIN, with
/// `/dev/net/tun`, `ip` and `nsenter`: [`mewa_link::runtime::probe`]).
/// `true`: skipped, return.
pub fn skip_unless_root() -> bool {
    match root() {
        Ok(()) => false,
        Err(why) => {
            skip(format!("needs root (network namespaces, TUN): {why}"));
            true
        }
    }
}

#[cfg(target_os = "linux")]
fn root() -> Result<(), String> {
    mewa_link::runtime::probe().map_err(|e| e.to_string())
}

#[cfg(not(target_os = "linux"))]
fn root() -> Result<(), String> {
    Err("the link runtime is Linux only".to_owned())
}

/// Skips the running test unless it can use mewa's BPF congestion
/// controls: root (as [`skip_unless_root`]) and a kernel that registers
/// them, which this does (`mewa cc load`; they stay registered). A build
/// without the BPF programs is a failure, not a skip: `scripts/setup`
/// installs clang and bpftool, so as root (CI) it is a broken setup.
/// `true`: skipped, return.
#[cfg(feature = "bpf")]
pub fn skip_unless_bpf_cc() -> bool {
    if skip_unless_root() {
        return true;
    }
    match mewa_cc_bpf::load() {
        Ok(_) => false,
        Err(e @ mewa_cc_bpf::CcError::NotBuilt(_)) => panic!("{}: {e}", current_test()),
        Err(e) => {
            skip(format!(
                "needs a kernel that loads BPF congestion control: {e}"
            ));
            true
        }
    }
}

/// The Chromium binary, if installed where Debian and Ubuntu put it.
/// Nothing is printed: for a test that runs without it.
pub fn find_chromium() -> Option<PathBuf> {
    CHROMIUM.iter().map(PathBuf::from).find(|p| p.exists())
}

/// The Chromium binary, or `None` after skipping the running test.
pub fn chromium_or_skip() -> Option<PathBuf> {
    let found = find_chromium();
    if found.is_none() {
        skip(format!(
            "no Chromium at {CHROMIUM:?} (apt-get install chromium, or scripts/setup)"
        ));
    }
    found
}

/// The h2spec binary (HTTP/2 conformance), on PATH or in ~/go/bin where
/// `go install` puts it. Nothing is printed.
pub fn find_h2spec() -> Option<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect())
        .unwrap_or_default();
    if let Some(home) = std::env::var_os("HOME") {
        dirs.push(PathBuf::from(home).join("go/bin"));
    }
    dirs.into_iter()
        .map(|d| d.join("h2spec"))
        .find(|p| p.is_file())
}

/// The h2spec binary, or `None` after skipping the running test.
pub fn h2spec_or_skip() -> Option<PathBuf> {
    let found = find_h2spec();
    if found.is_none() {
        skip(
            "h2spec not found on PATH or in ~/go/bin \
             (go install github.com/summerwind/h2spec/cmd/h2spec@latest, or scripts/setup)",
        );
    }
    found
}

/// `rel` under `../shared/data` (beside the workspace: recordings in
/// `pages`, mahimahi traces in `traces`), whether or not it exists.
pub fn shared_data(rel: impl AsRef<Path>) -> PathBuf {
    // crates/testkit → the workspace → the folder holding it.
    let beside = Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(3)
        .unwrap_or(Path::new("/"));
    beside.join("shared/data").join(rel)
}

/// `rel` under `../shared/data` if it exists (a file or a folder), or
/// `None` after skipping the running test.
pub fn shared_data_or_skip(rel: impl AsRef<Path>) -> Option<PathBuf> {
    let rel = rel.as_ref();
    let path = shared_data(rel);
    if path.exists() {
        return Some(path);
    }
    skip(format!(
        "../shared/data/{} not found ({})",
        rel.display(),
        path.display()
    ));
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_test_is_named_after_its_package_and_libtest_thread() {
        let name = "skipping::tests::the_test_is_named_after_its_package_and_libtest_thread";
        // cargo tells the binaries it runs their package.
        let want = match std::env::var("CARGO_PKG_NAME") {
            Ok(p) => format!("{p}/{name}"),
            Err(_) => name.to_owned(),
        };
        assert_eq!(current_test(), want);
    }

    #[test]
    fn a_reason_is_one_line() {
        assert_eq!(one_line("a\tb\nc\r\n d"), "a b c  d");
    }

    #[test]
    fn lines_appended_in_parallel_stay_whole() {
        let dir = crate::TempDir::new("skip-log");
        let log = dir.join("skips");
        let threads: Vec<_> = (0..8)
            .map(|t| {
                let log = log.clone();
                std::thread::spawn(move || {
                    for i in 0..200 {
                        let line = format!("t{t}/test{i}\t{}\n", "why ".repeat(40));
                        append(&log, &line).expect("append");
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().expect("appender");
        }
        let text = std::fs::read_to_string(&log).expect("read the log");
        assert_eq!(text.lines().count(), 8 * 200);
        let whole = format!("\t{}", "why ".repeat(40));
        assert!(text
            .lines()
            .all(|l| l.ends_with(&whole) && l.starts_with('t')));
    }

    #[test]
    fn shared_data_sits_beside_the_workspace() {
        let p = shared_data("traces");
        assert!(p.ends_with("shared/data/traces"), "{}", p.display());
        let mut up = Path::new(env!("CARGO_MANIFEST_DIR")).ancestors();
        let workspace = up.nth(2).expect("crates/testkit in a workspace");
        assert!(!p.starts_with(workspace), "{}", p.display());
        assert_eq!(workspace.parent(), p.ancestors().nth(3));
    }
}
