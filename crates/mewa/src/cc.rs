//! `mewa cc …`: register, remove and inspect the BPF congestion controls
//! (FLD_TCP as `mewa_fld`; cubic with a granted initial window as `mewa_iw`)
//! that sockets can then pick by name.

use clap::{Args, Subcommand};
use mewa_cc_bpf::{CcError, Loaded, CONTROLS, FLD, FLD_PACED, IW};

use crate::units;

#[derive(Debug, Args)]
pub struct CcCmd {
    #[command(subcommand)]
    which: Which,
}

#[derive(Debug, Subcommand)]
enum Which {
    /// Register mewa_fld (FLD_TCP, seed 002) and mewa_iw (cubic started
    /// from the initial window the client asked for, seed 001) with the
    /// kernel. They stay registered after this command exits, in every
    /// network namespace, until `mewa cc unload` or a reboot (needs root).
    Load,
    /// Remove them; connections using one keep it until they close.
    Unload,
    /// Whether they are registered, and what the kernel offers.
    Status,
    /// Seed 003's fix for handshakes over a sleeping radio: attach the
    /// mewa_rto sock_ops program to a cgroup (v2) so that every TCP socket
    /// of its processes whose peer is in one of the --peer prefixes waits
    /// --syn-rto before resending its first SYN or SYN-ACK (Linux: 1 s,
    /// shorter than a 3G promotion). It stays attached while this command
    /// runs (run it under a service manager; stop it to detach). Put the
    /// floor for established connections on the routes to the same peers:
    /// `ip route replace PREFIX via GW dev DEV rto_min 2200ms` (docs/LAB.md,
    /// "The fix"). Needs root.
    Rto(RtoArgs),
}

#[derive(Debug, Args)]
struct RtoArgs {
    /// The cgroup v2 directory whose sockets the program sees, e.g.
    /// /sys/fs/cgroup/system.slice/nginx.service.
    #[arg(long)]
    cgroup: std::path::PathBuf,
    /// Peers behind a radio, IPv4 prefixes (A.B.C.D/LEN; repeatable).
    #[arg(long = "peer", required = true)]
    peers: Vec<String>,
    /// The first SYN / SYN-ACK timeout for them, e.g. 3s [default: 3s, 3G's
    /// 2 s promotion plus Linux's usual second].
    #[arg(long, value_name = "DURATION", default_value = "3s", value_parser = units::timeout)]
    syn_rto: std::time::Duration,
}

/// `A.B.C.D/LEN` (or a bare address, /32) as a mewa_rto rule.
fn rule(prefix: &str, syn_rto: std::time::Duration) -> anyhow::Result<mewa_cc_bpf::rto::Rule> {
    let (addr, len) = prefix.split_once('/').unwrap_or((prefix, "32"));
    let addr: std::net::Ipv4Addr = addr
        .parse()
        .map_err(|e| anyhow::anyhow!("--peer {prefix}: {e} (give A.B.C.D/LEN, IPv4)"))?;
    let len: u8 = len
        .parse()
        .ok()
        .filter(|l| *l <= 32)
        .ok_or_else(|| anyhow::anyhow!("--peer {prefix}: the prefix length must be 0 to 32"))?;
    Ok(mewa_cc_bpf::rto::Rule { addr, len, syn_rto })
}

pub fn run(c: CcCmd) -> anyhow::Result<()> {
    match c.which {
        Which::Load => {
            let names = CONTROLS.join(", ");
            match mewa_cc_bpf::load().map_err(explain)? {
                Loaded::Now(_) => println!("{names} registered; pick FLD_TCP with `mewa origin serve --cc {FLD}` (paced: `--cc {FLD_PACED}`); `--iw-max` makes the origin grant initial windows through {IW}"),
                Loaded::Already(_) => println!("{names} were already registered"),
            }
            Ok(())
        }
        Which::Unload => {
            let names = CONTROLS.join(", ");
            if mewa_cc_bpf::unload().map_err(explain)? {
                println!("{names} removed");
            } else {
                println!("{names} were not registered; nothing to do");
            }
            Ok(())
        }
        Which::Status => {
            let all = mewa_cc_bpf::status();
            for s in &all {
                let state = match (s.available, s.map_id) {
                    (true, Some(id)) => format!("registered (struct_ops map {id})"),
                    (true, None) => "listed by the kernel, but not as mewa's struct_ops map (registered by hand, or listing maps needs root)".to_owned(),
                    (false, _) => "not registered (`mewa cc load`)".to_owned(),
                };
                println!("{}: {state}", s.name);
            }
            let btf = all.first().is_some_and(|s| s.btf);
            println!(
                "  BPF program in this build: {}",
                match mewa_cc_bpf::built() {
                    Ok(()) => "yes".to_owned(),
                    Err(e) => format!("no: {e}"),
                }
            );
            println!("  kernel BTF: {}", if btf { "yes" } else { "no" });
            println!(
                "  available controls: {}",
                mewa_cc_bpf::available().join(" ")
            );
            Ok(())
        }
        Which::Rto(a) => {
            let syn_rto = a.syn_rto;
            let rules = a
                .peers
                .iter()
                .map(|p| rule(p, syn_rto))
                .collect::<anyhow::Result<Vec<_>>>()?;
            let attached = mewa_cc_bpf::rto::attach(&a.cgroup, &rules).map_err(explain)?;
            println!(
                "mewa_rto attached to {} for {} prefix(es), first handshake timeout {:?}; \
                 stop this command to detach",
                a.cgroup.display(),
                rules.len(),
                a.syn_rto
            );
            let mut last = 0;
            loop {
                std::thread::sleep(std::time::Duration::from_secs(10));
                let n = attached.applied();
                if n != last {
                    println!("handshakes given the longer timeout so far: {n}");
                    last = n;
                }
            }
        }
    }
}

/// The library's error, as the command's.
fn explain(e: CcError) -> anyhow::Error {
    anyhow::anyhow!("{e}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(subcommand)]
        which: Which,
    }

    fn syn_rto(extra: &[&str]) -> Result<std::time::Duration, String> {
        let argv = [
            "cc",
            "rto",
            "--cgroup",
            "/sys/fs/cgroup/x",
            "--peer",
            "10.0.0.0/8",
        ];
        match Cli::try_parse_from(argv.iter().chain(extra)) {
            Ok(Cli {
                which: Which::Rto(a),
            }) => Ok(a.syn_rto),
            Ok(other) => panic!("not rto: {other:?}"),
            Err(e) => Err(e.to_string()),
        }
    }

    #[test]
    fn syn_rto_takes_a_duration_and_refuses_a_bare_number() {
        assert_eq!(syn_rto(&[]), Ok(std::time::Duration::from_secs(3)));
        assert_eq!(
            syn_rto(&["--syn-rto", "2200ms"]),
            Ok(std::time::Duration::from_millis(2200))
        );
        let e = syn_rto(&["--syn-rto", "3000"]).unwrap_err();
        assert!(e.contains("--syn-rto") && e.contains("150ms, 2s"), "{e}");
        assert!(syn_rto(&["--syn-rto", "0s"]).is_err());
    }

    #[test]
    fn peers_parse_as_prefixes_and_bad_ones_say_why() {
        let t = std::time::Duration::from_secs(3);
        let r = rule("100.64.0.0/10", t).unwrap();
        assert_eq!(
            (r.addr, r.len),
            (std::net::Ipv4Addr::new(100, 64, 0, 0), 10)
        );
        assert_eq!(rule("10.0.0.1", t).unwrap().len, 32);
        let e = rule("10.0.0.0/33", t).unwrap_err().to_string();
        assert!(e.contains("0 to 32"), "{e}");
        assert!(rule("fe80::1/64", t).is_err());
    }
}
