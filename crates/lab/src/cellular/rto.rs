//! Seed 003's fix: a retransmission timeout that survives the radio's
//! promotion.
//!
//! "Because of the high variability in latency when a cellular end device
//! goes from idle to active, retaining TCP's RTT estimate across this
//! transition results in spurious timeouts [...] we suggest using a more
//! conservative way to manage the RTO estimate."
//!
//! How Linux lets one do that decides the design:
//!
//! - The timer armed when data is sent after an idle period is
//!   `icsk_rto`, computed at the last RTT sample *before* the idle period
//!   (`tcp_set_rto` runs only on samples). Nothing may raise it at the
//!   moment the connection wakes up: a sock_ops program cannot write it,
//!   a BPF congestion control may write only the window fields
//!   (`bpf_tcp_ca_btf_struct_access`), and `TCP_BPF_RTO_MIN` (like the
//!   socket option `TCP_RTO_MIN_US` of 6.15) only *lowers* the floor:
//!   the kernel refuses values above 200 ms (`net/core/filter.c`).
//! - Raising the floor in the middle of a connection does not raise the
//!   estimate either: the floor enters `rttvar` at the first sample and is
//!   afterwards only the level `rttvar` decays towards
//!   (`tcp_rtt_estimator`).
//! - What does hold a floor above 200 ms from the first sample on is the
//!   route's `rto_min` metric (locked, it takes precedence over the
//!   socket's own floor): `RTO = srtt + max(rto_min, 4·mdev)`.
//!
//! So the fix has two parts:
//!
//! - established connections: a floor on the routes that lead over the
//!   radio, equal to the radio's longest promotion plus Linux's own 200 ms:
//!   every connection to a phone then waits out a promotion before it
//!   resends. The cost is a later timeout when a segment really is lost
//!   and neither fast retransmit nor the tail loss probe (which keep their
//!   own, shorter clocks) repairs it;
//! - handshakes: the first SYN and SYN-ACK timeout (1 s in Linux, shorter
//!   than a 3G promotion), which only a sock_ops program may set
//!   (`BPF_SOCK_OPS_TIMEOUT_INIT`): [`mewa_cc_bpf::rto`], attached to a
//!   cgroup of the lab's own ([`LabCgroup`]) so that it sees the lab's
//!   sockets and nothing else on the machine.

use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use mewa_link::runtime::Topology;

use crate::experiment::ExperimentError;

/// Linux's own minimum retransmission timeout (`TCP_RTO_MIN`).
pub const LINUX_RTO_MIN: Duration = Duration::from_millis(200);

/// The floor for a radio whose longest promotion is `promotion`.
pub fn floor_for(promotion: Duration) -> Duration {
    promotion + LINUX_RTO_MIN
}

/// Linux's first handshake timeout (`TCP_TIMEOUT_INIT`).
pub const LINUX_SYN_RTO: Duration = Duration::from_secs(1);

/// The first SYN / SYN-ACK timeout over a radio whose longest promotion is
/// `promotion`: Linux's usual second on top of it.
pub fn syn_rto_for(promotion: Duration) -> Duration {
    promotion + LINUX_SYN_RTO
}

/// The mount point of the cgroup v2 hierarchy in `/proc/self/mounts`'s
/// text (`/sys/fs/cgroup` on a unified system, `/sys/fs/cgroup/unified` on
/// a hybrid one).
pub fn cgroup2_mount(mounts: &str) -> Option<PathBuf> {
    mounts.lines().find_map(|l| {
        let mut f = l.split_whitespace();
        let (_, at, kind) = (f.next()?, f.next()?, f.next()?);
        (kind == "cgroup2").then(|| PathBuf::from(at))
    })
}

/// This process's cgroup v2 path in `/proc/self/cgroup`'s text (the
/// `0::` line).
pub fn cgroup2_path(cgroup: &str) -> Option<&str> {
    cgroup.lines().find_map(|l| l.strip_prefix("0::"))
}

/// A cgroup (v2) of the lab's own that this process sits in while it
/// lives: the sock_ops program attached to it sees the sockets the lab
/// opens (client and origin are threads of this process) and no one
/// else's. Dropping it moves the process back and removes the cgroup.
#[derive(Debug)]
pub struct LabCgroup {
    path: PathBuf,
    back: PathBuf,
}

impl LabCgroup {
    /// Creates `mewa-lab-<pid>` under the cgroup v2 mount and moves this
    /// process into it.
    pub fn enter() -> Result<LabCgroup, ExperimentError> {
        let mounts = std::fs::read_to_string("/proc/self/mounts")
            .map_err(ExperimentError::io("reading", "/proc/self/mounts"))?;
        let root = cgroup2_mount(&mounts).ok_or_else(|| ExperimentError::Rto {
            what: "no cgroup2 hierarchy is mounted; the RTO fix's sock_ops program needs one \
                   (mount -t cgroup2 none /sys/fs/cgroup/unified)"
                .into(),
            source: None,
        })?;
        let own = std::fs::read_to_string("/proc/self/cgroup")
            .map_err(ExperimentError::io("reading", "/proc/self/cgroup"))?;
        let back = root.join(cgroup2_path(&own).unwrap_or("/").trim_start_matches('/'));
        remove_stale(&root);
        let path = root.join(format!("mewa-lab-{}", std::process::id()));
        std::fs::create_dir_all(&path)
            .map_err(ExperimentError::io("creating the cgroup", &path))?;
        let pid = std::process::id().to_string();
        if let Err(e) = std::fs::write(path.join("cgroup.procs"), &pid) {
            let _ = std::fs::remove_dir(&path);
            return Err(ExperimentError::io(
                "moving this process into the cgroup",
                &path,
            )(e));
        }
        Ok(LabCgroup { path, back })
    }

    /// The cgroup's directory.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// Removes the `mewa-lab-*` cgroups of lab runs that were killed before
/// they could remove their own (the kernel refuses to remove one that
/// still has a process, so a running lab's is safe).
fn remove_stale(root: &Path) {
    let Ok(dir) = std::fs::read_dir(root) else {
        return;
    };
    for e in dir.flatten() {
        let name = e.file_name();
        if !name.to_string_lossy().starts_with("mewa-lab-") {
            continue;
        }
        let empty = std::fs::read_to_string(e.path().join("cgroup.procs"))
            .is_ok_and(|p| p.trim().is_empty());
        if empty && std::fs::remove_dir(e.path()).is_ok() {
            tracing::info!("removed the stale cgroup {}", e.path().display());
        }
    }
}

impl Drop for LabCgroup {
    fn drop(&mut self) {
        let pid = std::process::id().to_string();
        if let Err(e) = std::fs::write(self.back.join("cgroup.procs"), &pid) {
            tracing::warn!("moving back to {}: {e}", self.back.display());
        }
        if let Err(e) = std::fs::remove_dir(&self.path) {
            tracing::warn!("removing {}: {e}", self.path.display());
        }
    }
}

/// Attaches the handshake half of the fix to `cgroup`: every peer in
/// `peers` gets `syn_rto` as its first SYN / SYN-ACK timeout.
pub fn attach_syn_rto(
    cgroup: &Path,
    peers: &[IpAddr],
    syn_rto: Duration,
) -> Result<mewa_cc_bpf::rto::SynRto, ExperimentError> {
    let rules: Vec<mewa_cc_bpf::rto::Rule> = peers
        .iter()
        .filter_map(|p| match p {
            IpAddr::V4(a) => Some(mewa_cc_bpf::rto::Rule {
                addr: *a,
                len: 32,
                syn_rto,
            }),
            IpAddr::V6(_) => None,
        })
        .collect();
    mewa_cc_bpf::rto::attach(cgroup, &rules).map_err(|e| ExperimentError::Rto {
        what: format!(
            "attaching the mewa_rto sock_ops program to {}",
            cgroup.display()
        ),
        source: Some(Box::new(e)),
    })
}

/// The arguments of `ip route replace` that put `floor` on the route from
/// a host to `peer`, given what `ip route get` said about that route: the
/// same device, gateway and source, as a host route, with `rto_min`.
pub fn route_args(peer: IpAddr, route_get: &str, floor: Duration) -> Result<Vec<String>, String> {
    let words: Vec<&str> = route_get.split_whitespace().collect();
    let after = |key: &str| {
        words
            .iter()
            .position(|w| *w == key)
            .and_then(|i| words.get(i + 1))
            .map(|s| s.to_string())
    };
    let dev =
        after("dev").ok_or_else(|| format!("no device in `ip route get {peer}`: {route_get:?}"))?;
    let mut args = vec![
        "route".to_string(),
        "replace".into(),
        format!("{peer}/{}", if peer.is_ipv4() { 32 } else { 128 }),
    ];
    if let Some(via) = after("via") {
        args.extend(["via".into(), via]);
    }
    args.extend(["dev".into(), dev]);
    if let Some(src) = after("src") {
        args.extend(["src".into(), src]);
    }
    // iproute2 always locks rto_min (`ip route show` prints "rto_min
    // lock"), which is what makes it override the socket's own floor.
    args.extend(["rto_min".into(), format!("{}ms", floor.as_millis())]);
    Ok(args)
}

/// Puts `floor` on the routes from `host` to each of `peers`.
pub fn apply_floor(
    topo: &Topology,
    host: &str,
    peers: &[IpAddr],
    floor: Duration,
) -> Result<(), ExperimentError> {
    let ns = topo
        .netns_name(host)
        .map_err(|e| ExperimentError::Bed(e.into()))?
        .map(str::to_owned);
    let ip = |args: &[String]| -> Result<String, ExperimentError> {
        let mut cmd = Command::new("ip");
        if let Some(ns) = &ns {
            cmd.args(["-n", ns]);
        }
        let out = cmd.args(args).output().map_err(|e| ExperimentError::Rto {
            what: "running ip (iproute2)".into(),
            source: Some(Box::new(e)),
        })?;
        if !out.status.success() {
            return Err(ExperimentError::Rto {
                what: format!(
                    "ip {} in {host}: {}",
                    args.join(" "),
                    String::from_utf8_lossy(&out.stderr).trim()
                ),
                source: None,
            });
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    };
    for &peer in peers {
        let got = ip(&["route".into(), "get".into(), peer.to_string()])?;
        let args = route_args(peer, got.lines().next().unwrap_or(""), floor)
            .map_err(|what| ExperimentError::Rto { what, source: None })?;
        ip(&args)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cgroup2_mount_and_path_are_found() {
        let hybrid = "cgroup /sys/fs/cgroup/cpu cgroup rw 0 0\n\
                      cgroup2 /sys/fs/cgroup/unified cgroup2 rw,nsdelegate 0 0\n";
        assert_eq!(
            cgroup2_mount(hybrid),
            Some(PathBuf::from("/sys/fs/cgroup/unified"))
        );
        assert_eq!(cgroup2_mount("proc /proc proc rw 0 0\n"), None);
        assert_eq!(
            cgroup2_path("1:cpu:/\n0::/user.slice/x\n"),
            Some("/user.slice/x")
        );
        assert_eq!(cgroup2_path("1:cpu:/\n"), None);
        assert_eq!(syn_rto_for(Duration::from_secs(2)), Duration::from_secs(3));
    }

    #[test]
    fn the_floor_covers_the_promotion() {
        assert_eq!(
            floor_for(Duration::from_secs(2)),
            Duration::from_millis(2200)
        );
        assert_eq!(
            floor_for(Duration::from_millis(400)),
            Duration::from_millis(600)
        );
    }

    #[test]
    fn the_host_route_keeps_device_gateway_and_source() {
        let peer: IpAddr = "10.0.0.1".parse().unwrap();
        let a = route_args(
            peer,
            "10.0.0.1 dev mewa-c0 src 10.0.0.2 uid 0 \n    cache ",
            Duration::from_millis(2200),
        )
        .unwrap();
        assert_eq!(
            a.join(" "),
            "route replace 10.0.0.1/32 dev mewa-c0 src 10.0.0.2 rto_min 2200ms"
        );
        let a = route_args(
            peer,
            "10.0.0.1 via 10.9.0.1 dev eth0 src 10.9.0.2",
            Duration::from_millis(600),
        )
        .unwrap();
        assert_eq!(
            a.join(" "),
            "route replace 10.0.0.1/32 via 10.9.0.1 dev eth0 src 10.9.0.2 rto_min 600ms"
        );
        assert!(route_args(peer, "unreachable", Duration::ZERO).is_err());
    }
}
