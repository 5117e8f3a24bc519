//! Helpers every benchmark shares: a temporary directory that removes
//! itself, finding an outside program, a process's CPU time from /proc, and
//! whole seconds in the command line's one unit grammar.

use std::path::PathBuf;
use std::process::Command;

use crate::{BenchError, Context};

/// A temporary directory, removed on drop. World-readable, because nginx
/// started as root serves files as `nobody`.
pub struct TempDir {
    /// The directory.
    pub path: PathBuf,
}

impl TempDir {
    /// A fresh directory under the system's temporary folder.
    pub fn new() -> Result<TempDir, BenchError> {
        use std::os::unix::fs::PermissionsExt;
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let path = std::env::temp_dir().join(format!("mewa-bench-{}-{nanos}", std::process::id()));
        std::fs::create_dir(&path).with_context(|| format!("creating {}", path.display()))?;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))
            .with_context(|| format!("chmod {}", path.display()))?;
        Ok(TempDir { path })
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

/// utime + stime of a process (all its threads), in clock ticks.
pub fn proc_ticks(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name (which may hold spaces): state is
    // field 3, utime 14, stime 15.
    let rest = &stat[stat.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    Some(f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?)
}

/// `getconf CLK_TCK`, 100 if that fails (the Linux value everywhere).
pub fn clk_tck() -> f64 {
    Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8_lossy(&o.stdout).trim().parse().ok())
        .filter(|&v: &f64| v > 0.0)
        .unwrap_or(100.0)
}

/// `name` on `PATH` or in the sbin directories (nginx lives in /usr/sbin).
pub fn find_program(name: &str) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/sbin", "/sbin", "/usr/local/sbin"].map(PathBuf::from))
        .map(|d| d.join(name))
        .find(|p| {
            std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
}

/// A duration in whole seconds (`2s`, `600s`), for tools that count in
/// seconds (dnsperf -l). A bare number is refused like every duration on
/// mewa's command line, with the form it takes.
pub fn whole_secs(s: &str) -> Result<u64, String> {
    mewa_link::core::parse_whole_secs(s).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whole_secs_take_their_unit() {
        assert_eq!(whole_secs("600s"), Ok(600));
        assert!(whole_secs("600").unwrap_err().contains("2s"));
        assert!(whole_secs("1.5s").is_err());
    }
}
