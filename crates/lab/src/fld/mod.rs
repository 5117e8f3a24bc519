//! `mewa lab fld`: seed 002's evaluation of FLD_TCP against Cubic at the
//! server, with real kernel TCP (`mewa_fld`, the BPF version of
//! [`mewa_cc::Window::fld`]). Three experiments, each its own
//! [`Experiment`](crate::experiment::Experiment):
//!
//! - [`bulk`]: one transfer of each size (500 kB, 2 MB) at 40 ms RTT per
//!   congestion control, the flow-size claim of seed 002 §2.1 ("a flow of
//!   size 500 kB [...] FLD_TCP would finish the flow in 4 RTT while RENO's
//!   Slow-start would require 6 RTT").
//! - [`fairness`]: a long FLD_TCP flow against a long flow of another
//!   control over a bounded queue, Jain's index once FLD_TCP is past 2 MB
//!   (it must be TCP-friendly then).
//! - [`pages`]: pages loaded through a link with cross traffic (LTE: 100
//!   Mbit/s brought down by background flows, 13 ms one way; 3G: 21 Mbit/s,
//!   25 ms), the server's connections alternating between Cubic and
//!   FLD_TCP load by load, with seed 002's page metrics (Figs. 6–11) and its
//!   connection-size study.
//!
//! This file holds what the three share (and `mewa lab iw` with them): the
//! control's name, the client's receive buffer, the queue in bytes, the
//! check that the kernel offers the controls; [`counters`] reads how the
//! origin repaired its losses.

pub mod bulk;
pub mod counters;
pub mod fairness;
pub mod pages;

use std::fmt::Display;
use std::time::Duration;

use mewa_link::core::LinkConfig;
use mewa_link::runtime::Topology;

use crate::experiment::ExperimentError;

pub use counters::TcpCounters;

/// The name sockets pick FLD_TCP by (`mewa cc load` registers it).
pub const FLD: &str = "mewa_fld";

/// Android's initial `tcp_rmem` for LTE (1 MB): the receive buffer the
/// experiments give the client. With Linux's stock 128 KB the advertised
/// window, not the sender, limits a window that triples by its third round
/// trip (crates/lab/tests/cc.rs measured 56 segments instead of 90).
pub const CLIENT_RMEM: usize = 1 << 20;

/// `ms` of queue at `bps`, in bytes (at least 10 full packets).
pub(crate) fn queue_bytes(bps: u64, ms: u64) -> usize {
    ((bps / 8).saturating_mul(ms) / 1000).max(15_000) as usize
}

/// A link of `one_way` delay each way, `bps` both ways and `queue_bytes`.
pub(crate) fn link(one_way: Duration, bps: u64, queue_bytes: Option<usize>) -> LinkConfig {
    crate::bulk::fixed_link(one_way, bps, bps, queue_bytes)
}

/// Checks the congestion controls named exist (after `mewa cc load` for
/// FLD_TCP), so a run does not fail half-way. Takes the kernel's names
/// (`String`) or [`crate::experiment::Congestion`]s.
pub(crate) fn check_controls<C: Display>(ccs: &[C]) -> Result<(), ExperimentError> {
    let available = mewa_origin::available_congestion_controls();
    for cc in ccs {
        let cc = cc.to_string();
        if !available.contains(&cc) {
            let hint = if cc.starts_with("mewa_") {
                " (run `mewa cc load` first)"
            } else {
                ""
            };
            return Err(ExperimentError::Config {
                field: "--cc",
                message: format!(
                    "{cc} is not available{hint}; the kernel offers: {}",
                    available.join(" ")
                ),
            });
        }
    }
    Ok(())
}

/// Sets the client namespace's initial receive buffer to `rmem` bytes.
pub(crate) fn set_client_rmem(
    topo: &Topology,
    host: &str,
    rmem: usize,
) -> Result<(), ExperimentError> {
    crate::bed::set_tcp_rmem(topo, host, rmem).map_err(ExperimentError::Bed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_queue_in_ms_is_bytes_at_the_rate_with_ten_packets_at_least() {
        assert_eq!(queue_bytes(100_000_000, 20), 250_000);
        assert_eq!(queue_bytes(1_000_000, 20), 15_000);
    }
}
