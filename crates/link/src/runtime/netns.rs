//! Named network namespaces owned by mewa: naming, creation, entering,
//! deletion, and the removal of stale ones left by dead processes.
//!
//! A name is `mewa-<pid>-<rest>`: the owning process id is part of the name
//! so that a later run can tell a namespace of a live run (leave it alone)
//! from one whose owner died without cleaning up (remove it). Names that do
//! not start with `mewa-<digits>-` are never touched.

use std::collections::BTreeSet;
use std::fs::File;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Mutex;
use std::thread::JoinHandle;

use nix::sched::CloneFlags;
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

use super::sys::ip;
use super::Error;

/// Directory where iproute2 keeps the bind mounts of named namespaces.
pub(crate) const NETNS_DIR: &str = "/run/netns";

/// Prefix of everything mewa names (namespaces, devices in the root namespace).
pub(crate) const PREFIX: &str = "mewa-";

/// Topologies built by this process so far (part of their namespace names).
static TOPOLOGY_SEQ: AtomicU32 = AtomicU32::new(0);

/// Devices this process created in the root namespace so far.
static ROOT_DEV_SEQ: AtomicU32 = AtomicU32::new(0);

/// Namespaces this process owns right now, for teardown on a signal.
static LIVE: Mutex<BTreeSet<String>> = Mutex::new(BTreeSet::new());

/// The next topology number of this process.
pub(crate) fn next_topology() -> u32 {
    TOPOLOGY_SEQ.fetch_add(1, Ordering::Relaxed)
}

/// A fresh device name for the root namespace, `mewa-<pid>-<n>`: at most 15
/// bytes (IFNAMSIZ − 1) for any pid up to 2²² and n < 100.
pub(crate) fn root_device_name() -> Result<String, Error> {
    let n = ROOT_DEV_SEQ.fetch_add(1, Ordering::Relaxed);
    let name = format!("{PREFIX}{}-{n}", std::process::id());
    if name.len() > 15 {
        return Err(Error::Topology(format!(
            "device name {name} is longer than Linux allows (15 bytes); this process has \
             created too many root-namespace devices"
        )));
    }
    Ok(name)
}

/// The namespace name of `host` in topology number `seq` of this process.
pub(crate) fn namespace_name(seq: u32, host: &str) -> String {
    format!("{PREFIX}{}-{seq}-{host}", std::process::id())
}

/// The owning process id encoded in a mewa name, or `None` for names mewa
/// does not own.
pub(crate) fn owner_pid(name: &str) -> Option<u32> {
    let rest = name.strip_prefix(PREFIX)?;
    let (pid, tail) = rest.split_once('-')?;
    if pid.is_empty() || tail.is_empty() || !pid.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    pid.parse().ok().filter(|&p| p > 0)
}

fn alive(pid: u32) -> bool {
    pid == std::process::id() || std::path::Path::new(&format!("/proc/{pid}")).exists()
}

/// A named namespace this process created; deleted on drop.
#[derive(Debug)]
pub(crate) struct Namespace {
    name: String,
}

impl Namespace {
    /// Creates `name` (`ip netns add`).
    pub(crate) fn create(name: &str) -> Result<Namespace, Error> {
        ip(&["netns", "add", name]).map_err(|e| match e {
            Error::Command { stderr, .. } if stderr.contains("Operation not permitted") => {
                Error::NotPrivileged
            }
            e => e,
        })?;
        if let Ok(mut live) = LIVE.lock() {
            live.insert(name.to_string());
        }
        Ok(Namespace {
            name: name.to_string(),
        })
    }

    /// Its name.
    pub(crate) fn name(&self) -> &str {
        &self.name
    }
}

impl Drop for Namespace {
    fn drop(&mut self) {
        // Teardown must not panic; a failure leaves a stale namespace that
        // the next run's cleanup_stale removes once this process is gone.
        let _ = delete(&self.name);
        if let Ok(mut live) = LIVE.lock() {
            live.remove(&self.name);
        }
    }
}

/// Kills what still runs in a namespace, then deletes it. Returns the pids
/// killed.
pub(crate) fn delete(name: &str) -> Result<Vec<u32>, Error> {
    let killed = kill_inside(name);
    ip(&["netns", "del", name])?;
    Ok(killed)
}

/// SIGKILLs the processes whose network namespace is `name` (not this one).
fn kill_inside(name: &str) -> Vec<u32> {
    let Ok(out) = ip(&["netns", "pids", name]) else {
        return Vec::new();
    };
    let me = std::process::id();
    let mut killed = Vec::new();
    for pid in out.split_whitespace().filter_map(|p| p.parse::<u32>().ok()) {
        if pid == me {
            continue;
        }
        let Ok(raw) = i32::try_from(pid) else {
            continue;
        };
        if kill(Pid::from_raw(raw), Signal::SIGKILL).is_ok() {
            killed.push(pid);
        }
    }
    killed
}

/// Deletes every namespace this process still owns (signal teardown).
pub(crate) fn delete_all_live() {
    let names: Vec<String> = match LIVE.lock() {
        Ok(mut live) => std::mem::take(&mut *live).into_iter().collect(),
        Err(_) => return,
    };
    for n in names {
        let _ = delete(&n);
    }
}

/// Moves the calling thread into a namespace: a name under [`NETNS_DIR`] or
/// a path (`/proc/1/ns/net`).
pub(crate) fn enter(name: &str) -> Result<(), Error> {
    let path = if name.starts_with('/') {
        name.to_string()
    } else {
        format!("{NETNS_DIR}/{name}")
    };
    let f = File::open(&path).map_err(|e| Error::io(format!("opening {path}"), e))?;
    nix::sched::setns(&f, CloneFlags::CLONE_NEWNET)
        .map_err(|e| Error::errno(format!("entering network namespace {name} (setns)"), e))
}

/// Runs `f` on a thread inside namespace `ns` (or the root namespace for
/// `None`) and waits for it. The closure may borrow from the caller.
pub(crate) fn run_in<R: Send>(ns: Option<&str>, f: impl FnOnce() -> R + Send) -> Result<R, Error> {
    let label = ns.unwrap_or("root").to_string();
    std::thread::scope(|s| {
        let h = std::thread::Builder::new()
            .name(format!("mewa-ns-{label}"))
            .spawn_scoped(s, move || -> Result<R, Error> {
                if let Some(ns) = ns {
                    enter(ns)?;
                }
                Ok(f())
            })
            .map_err(|e| Error::io("starting a thread", e))?;
        h.join().map_err(|_| Error::Panicked(label.clone()))?
    })
}

/// Starts `f` on a thread inside namespace `ns` and returns once the thread
/// is inside (so an error entering is reported here, not at join).
pub(crate) fn spawn_in<R: Send + 'static>(
    ns: Option<String>,
    thread_name: String,
    f: impl FnOnce() -> R + Send + 'static,
) -> Result<JoinHandle<R>, Error> {
    let (tx, rx) = std::sync::mpsc::sync_channel::<Result<(), Error>>(1);
    let h = std::thread::Builder::new()
        .name(thread_name)
        .spawn(move || {
            if let Some(ns) = &ns {
                if let Err(e) = enter(ns) {
                    let _ = tx.send(Err(e));
                    // The caller gets the error from the channel and drops
                    // the handle; end the thread without running `f` (and
                    // without the panic hook's message).
                    std::panic::resume_unwind(Box::new(()));
                }
            }
            let _ = tx.send(Ok(()));
            f()
        })
        .map_err(|e| Error::io("starting a thread", e))?;
    match rx.recv() {
        Ok(Ok(())) => Ok(h),
        Ok(Err(e)) => Err(e),
        Err(_) => Err(Error::Panicked("thread start".into())),
    }
}

/// What [`cleanup_stale`] removed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CleanupReport {
    /// Namespaces deleted.
    pub namespaces: Vec<String>,
    /// Root-namespace devices deleted.
    pub devices: Vec<String>,
    /// Processes killed because they still ran inside a stale namespace.
    pub killed: Vec<u32>,
}

impl CleanupReport {
    /// Nothing was stale.
    pub fn is_empty(&self) -> bool {
        self.namespaces.is_empty() && self.devices.is_empty() && self.killed.is_empty()
    }
}

/// Removes namespaces and root-namespace devices named `mewa-<pid>-…` whose
/// process `<pid>` no longer exists, killing anything left running inside
/// such a namespace. Names of live processes and names mewa does not own are
/// left alone.
///
/// (A pid reused by an unrelated process keeps its stale namespaces until
/// that process ends too: the safe side of the mistake.)
pub fn cleanup_stale() -> Result<CleanupReport, Error> {
    super::probe()?;
    let mut report = CleanupReport::default();
    let list = ip(&["netns", "list"])?;
    for name in list.lines().filter_map(|l| l.split_whitespace().next()) {
        let Some(pid) = owner_pid(name) else {
            continue;
        };
        if alive(pid) {
            continue;
        }
        report.killed.extend(delete(name)?);
        report.namespaces.push(name.to_string());
    }
    let links = ip(&["-o", "link", "show"])?;
    for dev in links.lines().filter_map(link_name) {
        let Some(pid) = owner_pid(dev) else {
            continue;
        };
        if alive(pid) {
            continue;
        }
        ip(&["link", "del", "dev", dev])?;
        report.devices.push(dev.to_string());
    }
    Ok(report)
}

/// The device name of an `ip -o link show` line (`5: name@peer: <…>`).
pub(crate) fn link_name(line: &str) -> Option<&str> {
    let rest = line.split_once(": ")?.1;
    let name = rest.split(':').next()?;
    Some(name.split('@').next().unwrap_or(name).trim())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owner_pids() {
        assert_eq!(owner_pid("mewa-1234-0-client"), Some(1234));
        assert_eq!(owner_pid("mewa-1234-7"), Some(1234));
        assert_eq!(owner_pid("mewa-0-x"), None);
        assert_eq!(owner_pid("mewa-12a-x"), None);
        assert_eq!(owner_pid("mewa-1234"), None);
        assert_eq!(owner_pid("mewa--1"), None);
        assert_eq!(owner_pid("other-1234-x"), None);
        assert_eq!(owner_pid("mewa-lab"), None);
    }

    #[test]
    fn names() {
        let me = std::process::id();
        assert_eq!(namespace_name(3, "edge"), format!("mewa-{me}-3-edge"));
        assert_eq!(owner_pid(&namespace_name(3, "edge")), Some(me));
        let d = root_device_name().unwrap();
        assert!(d.len() <= 15);
        assert_eq!(owner_pid(&d), Some(me));
        assert!(alive(me));
    }

    #[test]
    fn link_names() {
        assert_eq!(
            link_name("5: mewa-12-0: <POINTOPOINT,NOARP,UP> mtu 1500"),
            Some("mewa-12-0")
        );
        assert_eq!(
            link_name("7: mewa-12-v0@if8: <BROADCAST> mtu 1500"),
            Some("mewa-12-v0")
        );
        assert_eq!(link_name("garbage"), None);
    }
}
