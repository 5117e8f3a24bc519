//! One browsing session: every page a number of times, in order, with the
//! think time before each load after the first, on one browser whose
//! connections are kept from load to load, in the client's namespace. For
//! each load, the radio's state when it began, the promotions during it,
//! and both ends' TCP counters over it.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use mewa_corpus::Page;
use mewa_link::core::radio::RadioState;
use mewa_link::runtime::Topology;
use mewa_probe::tcpinfo::{self, RepairCounters};

use super::driver::{Driver, Loaded, SessionBrowser};
use crate::bed::{Bed, BedError, CLIENT, SERVER};
use crate::experiment::ExperimentError;

/// The radio and counters when a load began, and the counters' change
/// over it.
#[derive(Debug, Clone)]
pub struct AtStart {
    /// Load start, µs since the Unix epoch.
    pub start_unix_us: u64,
    /// The radio's state as the report prints it.
    pub radio_state: String,
    /// Promotions during the load.
    pub promotions: u64,
    /// The server namespace's TCP counters over the load.
    pub server: RepairCounters,
    /// The client namespace's.
    pub client: RepairCounters,
}

/// One load of a session.
#[derive(Debug, Clone)]
pub struct SessionLoad {
    /// The page's name.
    pub page: String,
    /// What the browser said.
    pub loaded: Loaded,
    /// The radio and the counters.
    pub at_start: AtStart,
}

/// How a session loads its pages.
#[derive(Debug, Clone, Copy)]
pub struct Pace {
    /// Times each page is loaded.
    pub loads: usize,
    /// Think time before each load after the first.
    pub think: Duration,
}

/// Runs one session of `browser` over `pages`, `pace.loads` times each;
/// `step(k, page)` is told before the session's load `k` starts.
pub fn session(
    bed: &Bed,
    topo: &Topology,
    browser: SessionBrowser,
    pages: &[Page],
    pace: Pace,
    step: impl Fn(usize, &Page) + Sync,
) -> Result<Vec<SessionLoad>, ExperimentError> {
    let urls: Vec<String> = pages
        .iter()
        .map(|p| crate::replay::browser_url(bed, p))
        .collect();
    bed.in_client(|| async {
        let mut driver = Driver::start(browser).await?;
        let mut out = Vec::new();
        let mut seq = 0;
        for _ in 0..pace.loads {
            for (page, url) in pages.iter().zip(&urls) {
                step(seq, page);
                if seq > 0 {
                    tokio::time::sleep(pace.think).await;
                }
                // A session holds one browser for all its loads, so this is
                // where a link that died during the last load is noticed.
                topo.health().map_err(BedError::from)?;
                let stats = topo.link_stats(CLIENT, SERVER).ok();
                let before = (
                    tcpinfo::counters_in(topo, SERVER),
                    tcpinfo::counters_in(topo, CLIENT),
                );
                let start_unix_us = unix_us();
                let loaded = driver.load(page, url).await?;
                let after_stats = topo.link_stats(CLIENT, SERVER).ok();
                let after = (
                    tcpinfo::counters_in(topo, SERVER),
                    tcpinfo::counters_in(topo, CLIENT),
                );
                out.push(SessionLoad {
                    page: page.name.clone(),
                    loaded,
                    at_start: AtStart {
                        start_unix_us,
                        radio_state: stats
                            .as_ref()
                            .map(|s| radio_name(&s.radio))
                            .unwrap_or_default(),
                        promotions: match (&stats, &after_stats) {
                            (Some(a), Some(b)) => {
                                b.radio_promotions.saturating_sub(a.radio_promotions)
                            }
                            _ => 0,
                        },
                        server: after.0.since(&before.0).repair(),
                        client: after.1.since(&before.1).repair(),
                    },
                });
                seq += 1;
            }
        }
        driver.close().await;
        Ok(out)
    })?
}

/// Now, µs since the Unix epoch (the pcaps' clock).
pub fn unix_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as u64)
}

/// The radio state's name as the report prints it (`umts_fach`).
fn radio_name(s: &RadioState) -> String {
    serde_json::to_value(s)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_else(|| format!("{s:?}").to_lowercase())
}
