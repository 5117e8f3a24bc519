//! Small system helpers: privilege checks, iproute2, sysctls, sockets with a
//! chosen congestion control, CPU clocks.

use std::io::Write;
use std::net::{SocketAddrV4, TcpListener, TcpStream};
use std::os::fd::AsFd;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use nix::sys::resource::{getrusage, UsageWho};
use nix::sys::socket::{self, sockopt, AddressFamily, SockFlag, SockType, SockaddrIn};

use super::Error;

/// `CAP_NET_ADMIN` (TUN devices, addresses, routes).
const CAP_NET_ADMIN: u32 = 12;
/// `CAP_SYS_ADMIN` (`setns`, the bind mounts of named namespaces).
const CAP_SYS_ADMIN: u32 = 21;

/// Root, or the two capabilities the runtime needs, in the effective set.
pub(crate) fn has_net_privileges() -> bool {
    if nix::unistd::geteuid().is_root() {
        return true;
    }
    let Ok(status) = std::fs::read_to_string("/proc/self/status") else {
        return false;
    };
    let eff = status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
        .unwrap_or(0);
    let has = |cap: u32| eff & (1u64 << cap) != 0;
    has(CAP_NET_ADMIN) && has(CAP_SYS_ADMIN)
}

/// The absolute path of a system tool (`ip`, `nsenter`, `setpriv`), from
/// the system's directories.
pub fn which(tool: &str) -> Option<PathBuf> {
    // The system's directories only, never $PATH: mewa runs these as root,
    // and a PATH kept through sudo could name a user's `ip`.
    ["/usr/sbin", "/sbin", "/usr/bin", "/bin"]
        .map(PathBuf::from)
        .into_iter()
        .map(|d| d.join(tool))
        .find(|p| p.is_file())
}

/// Runs iproute2's `ip` with `args`; returns stdout.
pub(crate) fn ip(args: &[&str]) -> Result<String, Error> {
    ip_with_input(args, None)
}

/// Runs `ip -batch -` in namespace `ns` (or the root namespace) with one
/// command per line: one process for a whole host's configuration.
pub(crate) fn ip_batch(ns: Option<&str>, commands: &[String]) -> Result<(), Error> {
    if commands.is_empty() {
        return Ok(());
    }
    let mut args = Vec::new();
    if let Some(ns) = ns {
        args.extend(["-n", ns]);
    }
    args.extend(["-batch", "-"]);
    let input = commands.join("\n") + "\n";
    ip_with_input(&args, Some(&input)).map(|_| ())
}

fn ip_with_input(args: &[&str], input: Option<&str>) -> Result<String, Error> {
    let ip = which("ip").ok_or(Error::MissingTool {
        tool: "ip",
        package: "iproute2",
    })?;
    let command = format!("ip {}", args.join(" "));
    let mut child = Command::new(ip)
        .args(args)
        .stdin(if input.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| Error::io(format!("starting `{command}`"), e))?;
    if let (Some(text), Some(mut stdin)) = (input, child.stdin.take()) {
        stdin
            .write_all(text.as_bytes())
            .map_err(|e| Error::io(format!("feeding `{command}`"), e))?;
    }
    let out = child
        .wait_with_output()
        .map_err(|e| Error::io(format!("waiting for `{command}`"), e))?;
    if !out.status.success() {
        let mut stderr = String::from_utf8_lossy(&out.stderr).trim().to_string();
        if stderr.is_empty() {
            stderr = out.status.to_string();
        }
        if let Some(text) = input {
            stderr = format!("{stderr} (input: {})", text.trim().replace('\n', "; "));
        }
        return Err(Error::Command { command, stderr });
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Writes a sysctl of the calling thread's network namespace (`/proc/sys/net`
/// follows the namespace of the thread that opens it).
pub(crate) fn write_sysctl(key: &str, value: &str) -> Result<(), Error> {
    let path = format!("/proc/sys/{}", key.replace('.', "/"));
    std::fs::write(&path, value).map_err(|e| Error::io(format!("setting {key} = {value}"), e))
}

/// Like [`write_sysctl`] for a per-device key (`net.ipv6.conf.<dev>.…`),
/// whose device name may itself contain dots.
pub(crate) fn write_dev_sysctl(
    prefix: &str,
    dev: &str,
    leaf: &str,
    value: &str,
) -> Result<(), Error> {
    let path = format!("/proc/sys/{}/{dev}/{leaf}", prefix.replace('.', "/"));
    std::fs::write(&path, value)
        .map_err(|e| Error::io(format!("setting {prefix}.{dev}.{leaf} = {value}"), e))
}

/// Sets the congestion control of one TCP socket (`TCP_CONGESTION`).
///
/// The default here is bbr and a network namespace cannot change it,
/// so experiments choose per socket: cubic, reno, bbr or a BPF
/// `struct_ops` algorithm by name.
pub fn set_tcp_congestion<F: AsFd>(socket: &F, name: &str) -> std::io::Result<()> {
    socket::setsockopt(
        socket,
        sockopt::TcpCongestion,
        &std::ffi::OsString::from(name),
    )
    .map_err(std::io::Error::from)
}

/// A new IPv4 TCP socket (close-on-exec).
fn tcp_socket() -> nix::Result<std::os::fd::OwnedFd> {
    socket::socket(
        AddressFamily::Inet,
        SockType::Stream,
        SockFlag::SOCK_CLOEXEC,
        None,
    )
}

/// Connects a TCP socket whose congestion control is set *before* the
/// handshake, so the whole connection runs it.
pub fn tcp_connect_with(addr: SocketAddrV4, congestion: &str) -> std::io::Result<TcpStream> {
    let fd = tcp_socket()?;
    set_tcp_congestion(&fd, congestion)?;
    socket::connect(
        std::os::fd::AsRawFd::as_raw_fd(&fd),
        &SockaddrIn::from(addr),
    )?;
    Ok(TcpStream::from(fd))
}

/// A listening TCP socket with a congestion control that accepted sockets
/// inherit.
pub fn tcp_listener_with(addr: SocketAddrV4, congestion: &str) -> std::io::Result<TcpListener> {
    let fd = tcp_socket()?;
    socket::setsockopt(&fd, sockopt::ReuseAddr, &true)?;
    set_tcp_congestion(&fd, congestion)?;
    socket::bind(
        std::os::fd::AsRawFd::as_raw_fd(&fd),
        &SockaddrIn::from(addr),
    )?;
    socket::listen(
        &fd,
        socket::Backlog::new(128).unwrap_or(socket::Backlog::MAXCONN),
    )?;
    Ok(TcpListener::from(fd))
}

/// Whose CPU time [`cpu_time`] reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CpuClock {
    /// All threads of this process.
    Process,
    /// The calling thread only.
    Thread,
}

/// User + system CPU time used so far (`getrusage`).
pub fn cpu_time(clock: CpuClock) -> std::io::Result<Duration> {
    let who = match clock {
        CpuClock::Process => UsageWho::RUSAGE_SELF,
        CpuClock::Thread => UsageWho::RUSAGE_THREAD,
    };
    let u = getrusage(who)?;
    let tv = |t: nix::sys::time::TimeVal| {
        Duration::new(
            u64::try_from(t.tv_sec()).unwrap_or(0),
            u32::try_from(t.tv_usec()).unwrap_or(0) * 1000,
        )
    };
    Ok(tv(u.user_time()) + tv(u.system_time()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn which_finds_sh() {
        assert!(which("sh").is_some());
        assert!(which("surely-not-a-program-mewa").is_none());
    }

    #[test]
    fn cpu_time_moves() {
        let a = cpu_time(CpuClock::Thread).unwrap();
        let mut x = 0u64;
        for i in 0..5_000_000u64 {
            x = x.wrapping_mul(31).wrapping_add(i);
        }
        std::hint::black_box(x);
        let b = cpu_time(CpuClock::Thread).unwrap();
        assert!(b >= a);
        assert!(cpu_time(CpuClock::Process).unwrap() >= b);
    }
}
