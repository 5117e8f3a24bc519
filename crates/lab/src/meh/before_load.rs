//! The radio link before each load, for the loader's loads and Chromium's
//! alike: quiet, at the pair's stretch of the trace, the radio asleep.

use std::time::Duration;

use mewa_link::runtime::Topology;

use super::config::Rrc;
use super::setup::{RadioLink, Setup};
use crate::bed::{BedError, CLIENT, EDGE};

/// Offset between the trace stretches two successive pairs of loads replay
/// on a trace link, ms (a prime, so pairs do not fall into step with a
/// trace's period).
pub const TRACE_STRIDE_MS: u64 = 9_973;

/// Before each load of pair `pair`: on a trace radio link, restarts the
/// traces at the pair's stretch (pairs spread over the trace by
/// [`TRACE_STRIDE_MS`]) from the load's first packet on, so that both
/// loads of a pair replay the same stretch and their difference is the
/// hint's, not the trace's nor the browser's start-up time; with an
/// RRC model, puts the radio to sleep, the idle gap a phone has between
/// two pages, so every load pays the promotion.
pub(crate) fn prepare_load(topo: &Topology, cfg: &Setup, pair: usize) -> Result<(), BedError> {
    // The last load's connections close after it ends (FINs, the origin's
    // last ACKs): let them cross first, or they would wake the radio and
    // start the trace's stretch before this load begins.
    let stray = wait_for_quiet_link(topo)?;
    if stray > 0 {
        tracing::debug!("lab: {stray} packets of the last load crossed the radio after it");
    }
    if matches!(cfg.radio, RadioLink::Trace { .. }) {
        let at_ms = (pair as u64).saturating_mul(TRACE_STRIDE_MS);
        topo.rewind_traces_at_next_packet(CLIENT, EDGE, at_ms)?;
    }
    if cfg.rrc != Rrc::Off {
        topo.radio_idle(CLIENT, EDGE)?;
    }
    Ok(())
}

/// How long the radio link must carry nothing before a load is prepared.
const QUIET: Duration = Duration::from_millis(300);
/// The longest wait for [`QUIET`]: a link that never goes quiet (some
/// other traffic) must not stop the experiment.
const QUIET_AT_MOST: Duration = Duration::from_secs(3);

/// Waits until the radio link has been without packets for [`QUIET`] (at
/// most [`QUIET_AT_MOST`]); the packets that crossed meanwhile.
fn wait_for_quiet_link(topo: &Topology) -> Result<u64, BedError> {
    let count = || -> Result<(u64, bool), BedError> {
        let s = topo.link_stats(CLIENT, EDGE)?;
        let empty = s.up_queued_bytes == 0 && s.down_queued_bytes == 0;
        Ok((s.up.arrivals + s.down.arrivals, empty))
    };
    let start = std::time::Instant::now();
    let (first, _) = count()?;
    let (mut last, mut since) = (first, start);
    while start.elapsed() < QUIET_AT_MOST {
        std::thread::sleep(Duration::from_millis(50));
        let (now, empty) = count()?;
        if now != last || !empty {
            (last, since) = (now, std::time::Instant::now());
        } else if since.elapsed() >= QUIET {
            break;
        }
    }
    Ok(last - first)
}
