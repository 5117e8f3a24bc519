//! `mewa cc …`: register, remove and inspect the BPF congestion controls
//! (FLD_TCP as `mewa_fld`) that sockets can then pick by name.

use clap::{Args, Subcommand};
use mewa_cc_bpf::{CcError, Loaded, FLD};

#[derive(Debug, Args)]
pub struct CcCmd {
    #[command(subcommand)]
    which: Which,
}

#[derive(Debug, Subcommand)]
enum Which {
    /// Register mewa_fld (FLD_TCP, seed 002) with the kernel. It stays
    /// registered after this command exits, in every network namespace,
    /// until `mewa cc unload` or a reboot (needs root).
    Load,
    /// Remove mewa_fld; connections using it keep it until they close.
    Unload,
    /// Whether mewa_fld is registered, and what the kernel offers.
    Status,
}

pub fn run(c: CcCmd) -> anyhow::Result<()> {
    match c.which {
        Which::Load => {
            match mewa_cc_bpf::load().map_err(explain)? {
                Loaded::Now(id) => println!("{FLD} registered (struct_ops map {id}); pick it with `mewa origin serve --cc {FLD}`"),
                Loaded::Already(id) => println!("{FLD} was already registered (struct_ops map {id})"),
            }
            Ok(())
        }
        Which::Unload => {
            if mewa_cc_bpf::unload().map_err(explain)? {
                println!("{FLD} removed");
            } else {
                println!("{FLD} was not registered; nothing to do");
            }
            Ok(())
        }
        Which::Status => {
            let s = mewa_cc_bpf::status();
            let state = match (s.available, s.map_id) {
                (true, Some(id)) => format!("registered (struct_ops map {id})"),
                (true, None) => "listed by the kernel, but not as mewa's struct_ops map (registered by hand, or listing maps needs root)".to_owned(),
                (false, _) => "not registered (`mewa cc load`)".to_owned(),
            };
            println!("{}: {state}", s.name);
            println!(
                "  BPF program in this build: {}",
                match mewa_cc_bpf::built() {
                    Ok(()) => "yes".to_owned(),
                    Err(e) => format!("no: {e}"),
                }
            );
            println!("  kernel BTF: {}", if s.btf { "yes" } else { "no" });
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
