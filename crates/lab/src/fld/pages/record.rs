//! What `mewa lab fld pages` keeps in its journal: each load's figures,
//! and each testbed's cross-traffic log, read once it is torn down.

use serde::{Deserialize, Serialize};

use super::config::{Network, PageType};
use crate::cross::CrossLog;
use crate::experiment::Congestion;
use crate::fld::counters::TcpCounters;

/// One journal record: a load, or a testbed's cross-traffic log (untagged,
/// so each reads as the object `result.json` has always held).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Record {
    /// A page load.
    Load(PageRun),
    /// A testbed's background, once it stopped.
    Cross(CrossEntry),
}

/// One page load of the pages experiment.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PageRun {
    /// Network setting, with `-q<ms>` in a queue sweep
    /// ([`super::config::Cell::label`]).
    pub setting: String,
    /// The bottleneck queue, ms (`None` in runs recorded before it was
    /// kept).
    #[serde(default)]
    pub queue_ms: Option<u64>,
    /// Page type.
    pub protocol: PageType,
    /// The server's control.
    pub cc: Congestion,
    /// The page.
    pub page: String,
    /// Load index.
    pub run: usize,
    /// Wire load time (first SYN to last byte), s.
    pub plt_s: Option<f64>,
    /// Page net transfer time: load time minus idle time, s.
    pub net_transfer_s: Option<f64>,
    /// Idle share of the load.
    pub idle_share: Option<f64>,
    /// Effective concurrency.
    pub effective_concurrency: Option<f64>,
    /// Each connection's duration, s.
    pub connection_s: Vec<f64>,
    /// Each connection's body bytes.
    pub connection_bytes: Vec<u64>,
    /// Seed 002 Fig. 11: per RTT bin, the most bytes a connection's first
    /// object received.
    pub first_object_bins: Vec<u64>,
    /// Objects that failed.
    pub failed: usize,
    /// Median TCP handshake time of the load's connections, ms: the round
    /// trip the page saw, queueing included.
    pub handshake_ms: Option<f64>,
    /// What the origin's TCP did to repair losses during the load (`None`
    /// for Chromium loads and for runs recorded before it was counted).
    #[serde(default)]
    pub server_tcp: Option<TcpCounters>,
    /// What a Chromium load showed and when (FCP, LCP, Speed Index,
    /// coverage; none for the loader and in older folders).
    #[serde(default)]
    pub metrics: Option<Box<crate::measured::Metrics>>,
}

/// What the background carried while one testbed ran.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CrossEntry {
    /// The testbed's setting.
    pub setting: Network,
    /// The background's log, per flow and second.
    pub log: CrossLog,
    /// The loads made on this testbed (`None` in runs recorded before it
    /// was kept: all of the setting's). A testbed stopped by an
    /// interruption leaves no log, so a resumed setting's logs may cover
    /// fewer loads than it has.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loads: Option<usize>,
}
