//! `mewa cc …`: register, remove and inspect the BPF congestion controls
//! (FLD_TCP as `mewa_fld`; cubic with a granted initial window as `mewa_iw`)
//! that sockets can then pick by name.

use clap::{Args, Subcommand};
use mewa_cc_bpf::{CcError, Loaded, CONTROLS, FLD, IW};

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
}

pub fn run(c: CcCmd) -> anyhow::Result<()> {
    match c.which {
        Which::Load => {
            let names = CONTROLS.join(" and ");
            match mewa_cc_bpf::load().map_err(explain)? {
                Loaded::Now(_) => println!("{names} registered; pick FLD_TCP with `mewa origin serve --cc {FLD}`; `--iw-max` makes the origin grant initial windows through {IW}"),
                Loaded::Already(_) => println!("{names} were already registered"),
            }
            Ok(())
        }
        Which::Unload => {
            let names = CONTROLS.join(" and ");
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
    }
}

/// The library's error, as the command's.
fn explain(e: CcError) -> anyhow::Error {
    anyhow::anyhow!("{e}")
}
