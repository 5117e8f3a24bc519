//! `mewa-testkit`: fixtures the workspace's tests share, so that each test
//! says what it checks rather than how to stand up an origin or an edge.
//! A dev-dependency only: nothing here ships.
//!
//! - [`skip()`] and the conditions beside it ([`skip_unless_root`],
//!   `skip_unless_bpf_cc`, [`chromium_or_skip`], [`h2spec_or_skip`],
//!   [`shared_data_or_skip`]): the one way a test skips, reported as
//!   skipped with its reason ([`skipping`] says how).
//! - [`TempDir`]: a fresh directory, removed on drop.
//! - [`run_h2spec`]: h2spec against one port.
//! - [`synthetic_har`]: a seeded HAR 1.2 recording of an ad-heavy page
//!   ([`HarSpec`]: hosts, objects, random tracking requests), for imports
//!   and replays of pages nobody here tuned to ([`har`] says why).
//! - With the `servers` feature, `LoopbackOrigin` (`mewa-origin` serving a
//!   corpus on 127.0.0.1) and `LoopbackEdge` (`mewa-edge`'s DNS server
//!   with a hint book on 127.0.0.1, built from an `EdgeSpec`).
#![allow(clippy::unwrap_used)]

pub mod har;
pub mod skipping;

pub use har::{synthetic_har, HarSpec};

#[cfg(feature = "bpf")]
pub use skipping::skip_unless_bpf_cc;
pub use skipping::{
    chromium_or_skip, current_test, find_chromium, find_h2spec, h2spec_or_skip, shared_data,
    shared_data_or_skip, skip, skip_part, skip_unless_root, SKIP_LOG,
};

use std::path::{Path, PathBuf};

#[cfg(feature = "servers")]
mod servers;
#[cfg(feature = "servers")]
pub use servers::{origin_config, EdgeSpec, LoopbackEdge, LoopbackOrigin};

/// A fresh directory under the system's temporary folder, named after the
/// test and the process, removed (with its contents) on drop.
#[derive(Debug)]
pub struct TempDir {
    path: PathBuf,
}

impl TempDir {
    /// `mewa-<tag>-<pid>-<n>` (n counts this process's directories, so
    /// two tests with one tag do not share one), emptied if a crashed run
    /// left it behind.
    pub fn new(tag: &str) -> TempDir {
        static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let path = std::env::temp_dir().join(format!("mewa-{tag}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).unwrap();
        TempDir { path }
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// A path inside it.
    pub fn join(&self, p: impl AsRef<Path>) -> PathBuf {
        self.path.join(p)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

/// What an h2spec run against one port said.
#[derive(Debug)]
pub struct H2specRun {
    /// Its summary line (`145 tests, 145 passed, 0 skipped, 0 failed`).
    pub summary: String,
    /// The lines of failed cases, minus those `allowed` names.
    pub failures: Vec<String>,
    /// Everything it printed.
    pub output: String,
}

impl H2specRun {
    /// Prints the summary and fails the test unless h2spec ran and every
    /// case not allowed passed; `name` says which listener.
    pub fn assert_clean(&self, name: &str) {
        eprintln!("h2spec ({name}): {}", self.summary);
        assert!(
            self.summary.contains("passed"),
            "h2spec ({name}) did not run:\n{}",
            self.output
        );
        assert!(
            self.failures.is_empty(),
            "h2spec ({name}) failures:\n{}\n\n{}",
            self.failures.join("\n"),
            self.output
        );
    }
}

/// Runs h2spec against 127.0.0.1:`port` (over TLS with `tls`, trusting
/// any certificate), 5 s per case, its JUnit report in `report`. Failed
/// cases whose line contains one of `allowed` are not listed. Blocking:
/// call it from `spawn_blocking` in an async test.
pub fn run_h2spec(
    bin: &Path,
    port: u16,
    tls: bool,
    extra: &[&str],
    allowed: &[&str],
    report: &Path,
) -> H2specRun {
    let mut cmd = std::process::Command::new(bin);
    cmd.args(["-h", "127.0.0.1", "-p", &port.to_string(), "-o", "5", "-j"])
        .arg(report)
        .args(extra);
    if tls {
        cmd.args(["-t", "-k"]);
    }
    let out = cmd.output().unwrap();
    let output = String::from_utf8_lossy(&out.stdout).into_owned();
    let summary = output
        .lines()
        .rev()
        .find(|l| l.contains("tests,"))
        .unwrap_or("")
        .to_string();
    let failures = output
        .lines()
        .filter(|l| l.contains('×'))
        .filter(|l| !allowed.iter().any(|a| l.contains(a)))
        .map(str::to_string)
        .collect();
    H2specRun {
        summary,
        failures,
        output,
    }
}
