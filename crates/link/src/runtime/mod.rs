//! The Linux runtime: the sans-IO [`crate::core::Link`] driven by real packets.
//!
//! Every host of a [`Topology`] is a network namespace named
//! `mewa-<pid>-<n>-<host>` (the owning process id, a per-process topology
//! number, the host name). Every link is a pair of TUN devices, one in each
//! host's namespace, and one emulator thread that reads both, feeds the core
//! and writes what the core lets out to the other side (see `emulator.rs`).
//! Addresses come from 100.64.0.0/16 (RFC 6598 shared space, unlikely to
//! clash with anything on a test machine), one /30 per link; routes between
//! hosts that are not neighbours go through the hosts in between, which
//! forward.
//!
//! Teardown: dropping a [`Topology`] stops its threads (closing a TUN's file
//! descriptor deletes the device), kills what still runs in its namespaces and
//! deletes them. A process that dies without dropping (SIGKILL, a crash)
//! leaves named namespaces behind; [`cleanup_stale`] finds those whose owning
//! process is gone and removes them, and [`teardown_on_signals`] makes SIGINT,
//! SIGTERM and SIGHUP tear down before exiting.
//!
//! Everything here needs root (or `CAP_NET_ADMIN` and `CAP_SYS_ADMIN`):
//! [`probe`] says whether this process can, without changing anything.

mod emulator;
mod netns;
mod signals;
mod sys;
mod topology;

use std::path::PathBuf;

pub use emulator::LinkStats;
pub use netns::{cleanup_stale, CleanupReport};
pub use signals::{forward_signals, teardown_on_signals, SignalForwarder};
pub use sys::{
    cpu_time, set_tcp_congestion, tcp_connect_with, tcp_listener_with, which as system_tool,
    CpuClock,
};
pub use topology::{LinkOptions, Topology, TopologyBuilder};

/// Why the runtime could not do what was asked.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The process lacks the privileges for namespaces and TUN devices.
    #[error(
        "needs root or CAP_NET_ADMIN: network namespaces and TUN devices \
         (run as root, e.g. with sudo)"
    )]
    NotPrivileged,
    /// A tool the runtime calls is not installed.
    #[error("`{tool}` was not found: install the Debian package {package} (scripts/setup does)")]
    MissingTool {
        /// The program that was not found.
        tool: &'static str,
        /// The Debian package that provides it.
        package: &'static str,
    },
    /// The kernel lacks a feature the runtime needs.
    #[error("{0}")]
    Unsupported(String),
    /// An external command (iproute2) failed.
    #[error("`{command}` failed: {stderr}")]
    Command {
        /// The command line.
        command: String,
        /// What it printed on stderr (or its exit status).
        stderr: String,
    },
    /// A system call or file operation failed.
    #[error("{what}: {source}")]
    Io {
        /// What the runtime was doing.
        what: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// A file for the pcap or event log could not be created.
    #[error("cannot create {path}: {source} (does the directory exist and is it writable?)")]
    Output {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// The topology description is not valid.
    #[error("invalid topology: {0}")]
    Topology(String),
    /// A host name that the topology does not have.
    #[error("no host named {0:?} in this topology")]
    UnknownHost(String),
    /// Two hosts that no emulated link joins.
    #[error("no emulated link between {0:?} and {1:?}")]
    UnknownLink(String, String),
    /// 100.64.0.0/16 has no free /30 left in the root namespace.
    #[error(
        "no free /30 left in 100.64.0.0/16 in the root namespace; remove stale \
         addresses (ip -4 addr) or run fewer links at once"
    )]
    NoFreeSubnet,
    /// An emulated link's thread stopped while its topology was still up,
    /// so nothing crosses that link any more.
    #[error("the link emulator between {link} stopped: {reason}")]
    LinkStopped {
        /// The two hosts, as `a ⇄ b`.
        link: String,
        /// The error it stopped on.
        reason: String,
    },
    /// A closure run inside a namespace panicked.
    #[error("the code run in namespace {0} panicked")]
    Panicked(String),
}

impl Error {
    pub(crate) fn io(what: impl Into<String>, source: std::io::Error) -> Error {
        Error::Io {
            what: what.into(),
            source,
        }
    }

    pub(crate) fn errno(what: impl Into<String>, e: nix::errno::Errno) -> Error {
        Error::io(what, std::io::Error::from(e))
    }
}

/// Checks, without changing anything, that this process can build
/// topologies: privileges, `/dev/net/tun`, iproute2 and nsenter.
///
/// Tests call this to skip with a clear message on machines where they
/// cannot run.
pub fn probe() -> Result<(), Error> {
    if !sys::has_net_privileges() {
        return Err(Error::NotPrivileged);
    }
    if !std::path::Path::new("/dev/net/tun").exists() {
        return Err(Error::Unsupported(
            "/dev/net/tun is missing: load the tun module (modprobe tun) or give the \
             container the device"
                .into(),
        ));
    }
    sys::which("ip").ok_or(Error::MissingTool {
        tool: "ip",
        package: "iproute2",
    })?;
    sys::which("nsenter").ok_or(Error::MissingTool {
        tool: "nsenter",
        package: "util-linux",
    })?;
    Ok(())
}
