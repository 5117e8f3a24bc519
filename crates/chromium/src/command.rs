//! How mewa starts Chromium: the flags every headless Chromium gets, the
//! account it runs as (never root: Chromium will not sandbox itself as
//! root, and a page breaking out of a renderer must not find root's
//! rights), the command of a one-shot headless load that writes a NetLog,
//! and how a failed start is reported.

use std::path::{Path, PathBuf};

/// Where Debian installs Chromium (`apt-get install chromium`).
pub const DEFAULT_CHROMIUM: &str = "/usr/bin/chromium";

/// Why `run_as` will not start Chromium as the configured account.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{user:?}: {why}")]
pub struct UserRefused {
    /// The configured user.
    pub user: String,
    /// What is wrong with it.
    pub why: String,
}

/// A Chromium binary that is not there.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("no Chromium at {}: apt-get install chromium, or give its path", path.display())]
pub struct NoChromium {
    /// Where it was looked for.
    pub path: PathBuf,
}

/// Refuses a Chromium binary that is not a file, naming the path.
pub fn check_binary(chromium: &Path) -> Result<(), NoChromium> {
    if chromium.is_file() {
        Ok(())
    } else {
        Err(NoChromium {
            path: chromium.to_path_buf(),
        })
    }
}

/// The major version of the Chromium at `chromium` (`chromium --version`
/// says `Chromium 156.0.8078.108 …`); `None` when it does not say.
pub fn major_version(chromium: &Path) -> Option<u32> {
    let out = std::process::Command::new(chromium)
        .arg("--version")
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .output()
        .ok()?;
    parse_major_version(&String::from_utf8_lossy(&out.stdout))
}

/// The major version in a `--version` line: the first word that starts
/// with digits and a dot.
fn parse_major_version(line: &str) -> Option<u32> {
    line.split_whitespace()
        .find_map(|w| w.split_once('.').and_then(|(m, _)| m.parse().ok()))
}

/// Chromium flags (without the leading `--`) every headless Chromium of
/// mewa's gets, besides the headless mode, the profile and the DevTools
/// port: without the background-networking ones Chromium floods a closed
/// network with lookups (Google's hosts, component updates); no GPU in a
/// server.
pub const CHROMIUM_FLAGS: [&str; 5] = [
    "disable-gpu",
    "no-first-run",
    "disable-background-networking",
    "disable-component-update",
    "disable-sync",
];

/// The flags chromiumoxide's launcher added (puppeteer's defaults), kept
/// when the edge's tracer began to start Chromium itself so that traces (and the
/// computation latencies measured with them) do not change: no throttled
/// timers or backgrounded renderers in a headless tab, `/tmp` rather than
/// a small `/dev/shm`, no extensions, no automation prompts.
const AUTOMATION_FLAGS: [&str; 24] = [
    "enable-features=NetworkService,NetworkServiceInProcess",
    "disable-background-timer-throttling",
    "disable-backgrounding-occluded-windows",
    "disable-breakpad",
    "disable-client-side-phishing-detection",
    "disable-component-extensions-with-background-pages",
    "disable-default-apps",
    "disable-dev-shm-usage",
    "disable-features=TranslateUI",
    "disable-hang-monitor",
    "disable-ipc-flooding-protection",
    "disable-popup-blocking",
    "disable-prompt-on-repost",
    "disable-renderer-backgrounding",
    "force-color-profile=srgb",
    "metrics-recording-only",
    "enable-automation",
    "password-store=basic",
    "use-mock-keychain",
    "enable-blink-features=IdleDetection",
    "lang=en_US",
    "disable-extensions",
    "hide-scrollbars",
    "mute-audio",
];

/// [`CHROMIUM_FLAGS`] with their `--` and headless, without the sandbox:
/// a Chromium started as root inside a lab namespace, where nothing it
/// loads comes from outside the testbed. Add a fresh `--user-data-dir`.
pub fn lab_headless_flags() -> Vec<String> {
    ["headless", "no-sandbox"]
        .iter()
        .chain(CHROMIUM_FLAGS.iter())
        .map(|f| format!("--{f}"))
        .collect()
}

/// `cmd` (Chromium in a lab namespace) made headless
/// ([`lab_headless_flags`]) with the profile at `profile` (a fresh
/// directory) and the key whose SHA-256 SPKI hash is `spki` (base64)
/// trusted for every certificate it signs, over TCP and QUIC alike.
pub fn headless<'c>(
    cmd: &'c mut std::process::Command,
    profile: &Path,
    spki: &str,
) -> &'c mut std::process::Command {
    cmd.args(lab_headless_flags())
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg(format!("--ignore-certificate-errors-spki-list={spki}"))
}

/// `cmd` set up for one headless page load ([`headless`]) that writes its
/// NetLog to `netlog` and dumps the DOM when the page settles, within 30 s
/// of virtual time. Add the page's URL last.
pub fn headless_load<'c>(
    cmd: &'c mut std::process::Command,
    profile: &Path,
    netlog: &Path,
    spki: &str,
) -> &'c mut std::process::Command {
    headless(cmd, profile, spki)
        .arg(format!("--log-net-log={}", netlog.display()))
        .arg("--virtual-time-budget=30000")
        .arg("--dump-dom")
}

/// Why Chromium failed, in one line: its exit status and the last line it
/// wrote to standard error.
pub fn exit_failure(o: &std::process::Output) -> String {
    format!(
        "chromium exited with {}: {}",
        o.status,
        String::from_utf8_lossy(&o.stderr)
            .lines()
            .last()
            .unwrap_or("")
    )
}

/// An account Chromium runs as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Account {
    /// Its user ID.
    pub uid: u32,
    /// Its primary group ID.
    pub gid: u32,
}

/// `name`'s account from the system's user database.
pub fn lookup_user(name: &str) -> Result<Option<Account>, String> {
    match nix::unistd::User::from_name(name) {
        Ok(u) => Ok(u.map(|u| Account {
            uid: u.uid.as_raw(),
            gid: u.gid.as_raw(),
        })),
        Err(e) => Err(e.to_string()),
    }
}

/// Whom Chromium runs as when the tracer's effective user ID is `euid`:
/// `None` (the edge's own user) unless that is root; as root, `user`'s
/// account found by `lookup`, which must exist and not be root itself
/// (Chromium will not sandbox itself as root, and a page breaking out of
/// a renderer must not find root's rights). Pure but for `lookup`.
pub fn run_as(
    euid: u32,
    user: &str,
    lookup: impl FnOnce(&str) -> Result<Option<Account>, String>,
) -> Result<Option<Account>, UserRefused> {
    if euid != 0 {
        return Ok(None);
    }
    let bad = |why: String| UserRefused {
        user: user.to_string(),
        why,
    };
    match lookup(user) {
        Err(e) => Err(bad(format!("looking it up failed: {e}"))),
        Ok(None) => Err(bad("no such user".into())),
        Ok(Some(a)) if a.uid == 0 => Err(bad(
            "is root; Chromium must run as an unprivileged user".into()
        )),
        Ok(Some(a)) => Ok(Some(a)),
    }
}

/// How Chromium is started for one load: the program, its arguments, the
/// environment it gets on top of the edge's, and the account it runs as
/// (`None`: the edge's own).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChromiumCommand {
    /// The binary.
    pub program: PathBuf,
    /// Its arguments, each with its leading `--`.
    pub args: Vec<String>,
    /// Variables set for it.
    pub env: Vec<(String, PathBuf)>,
    /// The account it runs as.
    pub run_as: Option<Account>,
}

impl ChromiumCommand {
    /// The process to start: the program with its arguments and
    /// environment, as [`ChromiumCommand::run_as`] (setting a uid as root
    /// also drops root's supplementary groups: the standard library calls
    /// setgroups(0)).
    pub fn to_command(&self) -> std::process::Command {
        use std::os::unix::process::CommandExt;
        let mut cmd = std::process::Command::new(&self.program);
        cmd.args(&self.args)
            .envs(self.env.iter().map(|(k, v)| (k, v)));
        if let Some(a) = self.run_as {
            cmd.uid(a.uid).gid(a.gid);
        }
        cmd
    }
}

/// The command that starts `chromium` for one cold load in the profile
/// directory `profile`, as `run_as` ([`run_as`]): headless, the flags of
/// [`CHROMIUM_FLAGS`], chromiumoxide's former defaults, the `extra` flags
/// (with or without their leading `--`), DevTools on a port of Chromium's
/// choosing, and the sandbox unless `no_sandbox`. Run as another user,
/// Chromium's `HOME` and XDG directories are in the profile: the edge's
/// `HOME` (root's) is not that user's to write. Pure.
pub fn chromium_command(
    chromium: &Path,
    profile: &Path,
    extra: &[String],
    no_sandbox: bool,
    run_as: Option<Account>,
) -> ChromiumCommand {
    let mut args: Vec<String> = AUTOMATION_FLAGS
        .iter()
        .chain(CHROMIUM_FLAGS.iter())
        .map(|f| format!("--{f}"))
        .collect();
    args.extend(
        extra
            .iter()
            .map(|a| format!("--{}", a.trim_start_matches('-'))),
    );
    args.push("--headless".into());
    args.push("--remote-debugging-port=0".into());
    args.push(format!("--user-data-dir={}", profile.display()));
    if no_sandbox {
        args.push("--no-sandbox".into());
        args.push("--disable-setuid-sandbox".into());
    }
    let env = match run_as {
        None => Vec::new(),
        Some(_) => vec![
            ("HOME".to_string(), profile.to_path_buf()),
            ("XDG_CONFIG_HOME".to_string(), profile.join(".config")),
            ("XDG_CACHE_HOME".to_string(), profile.join(".cache")),
        ],
    };
    ChromiumCommand {
        program: chromium.to_path_buf(),
        args,
        env,
        run_as,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_major_version_is_read_from_the_version_line() {
        assert_eq!(
            parse_major_version("Chromium 156.0.8078.108 built on Debian GNU/Linux 12"),
            Some(156)
        );
        assert_eq!(parse_major_version("Google Chrome 99.0.1.2"), Some(99));
        assert_eq!(parse_major_version("nothing here"), None);
        assert_eq!(parse_major_version(""), None);
        assert_eq!(major_version(Path::new("/nonexistent/chromium")), None);
    }
}
