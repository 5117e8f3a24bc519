//! What the experiment keeps of each load, one journal record each: a
//! load by the built-in loader, a load by headless Chromium, and the
//! wired round trip a testbed's edge measured when it started.
//!
//! A record holds, beside its row of the report, what the client's
//! planning state took from the load (the load's peak delivery, its
//! quickest handshake), as integers that JSON carries exactly: a resumed
//! run replays them into fresh estimators and plans its next load from the
//! same state as the run it continues ([`super::planner`]).
//!
//! Older result folders have no journal: their `result.json` holds the
//! same rows ([`OlderResult`]). Fields added after the first version are
//! optional or default, so that those still read.

use serde::{Deserialize, Serialize};

use super::config::Arm;

/// One journal record.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum Record {
    /// A load by the built-in loader, with the hint or without.
    Load(Box<MehRun>),
    /// A load by headless Chromium, through the local proxy or on its own.
    Chromium(Box<BrowserRun>),
    /// A testbed started: what its edge measured.
    Edge(EdgeStart),
}

/// One load by the built-in loader.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MehRun {
    /// Page name.
    pub page: String,
    /// Page bytes.
    pub page_bytes: u64,
    /// Objects.
    pub objects: usize,
    /// Run index.
    pub run: usize,
    /// With the hint (planned n) or without (one connection).
    pub with_hint: bool,
    /// Whether every object arrived.
    pub ok: bool,
    /// First SYN to last data byte (seed 000's definition), seconds.
    pub plt_s: Option<f64>,
    /// Connections the plan chose (1 without the hint or on fallback).
    pub n: u32,
    /// Connections actually opened.
    pub connections: usize,
    /// The DNS exchange with the edge (radio RTT estimate), ms.
    pub dns_ms: f64,
    /// Size of the hint received, bytes (0 without).
    pub hint_bytes: usize,
    /// Whether the hint came over TCP.
    pub hint_over_tcp: bool,
    /// Size of the edge's UDP answer, bytes (the whole DNS message).
    #[serde(default)]
    pub answer_bytes: usize,
    /// The UDP answer carried the compact hint and the URL list came over
    /// TCP.
    #[serde(default)]
    pub urls_over_tcp: bool,
    /// When the client had the page's object URLs, ms from the start of
    /// the load (0 when the UDP answer carried them; none without).
    pub urls_ms: Option<f64>,
    /// When the first connection to the page's host was ready for
    /// requests (TCP, TLS, HTTP/2 preface), ms from the start of the load.
    pub ready_ms: Option<f64>,
    /// Why the client did not follow the hint, if it did not.
    pub fallback: Option<String>,
    /// Idle share of the load (seed 002's idle time / PLT).
    pub idle_share: Option<f64>,
    /// The first error, when not ok.
    pub error: Option<String>,
    /// The most body bytes the load received in one end-to-end round trip
    /// ([`mewa_client::rate::DeliveryRate::peak_window_bytes`]; none when
    /// the load was shorter than one): what the client's bandwidth
    /// estimate took from it.
    pub peak_window_bytes: Option<u64>,
    /// The quickest TCP handshake of the load's connections, µs: what the
    /// client's round-trip memory ([`mewa_client::rate::RecentRtt`]) took
    /// from it.
    pub handshake_us: Option<u64>,
}

/// One page load by headless Chromium: through the local proxy with the
/// hint, on its own without.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BrowserRun {
    /// Page name.
    pub page: String,
    /// Run index.
    pub run: usize,
    /// With the hint (through the local proxy); without, Chromium loads the
    /// page on its own, a browser's own behaviour and the strongest
    /// baseline.
    pub with_hint: bool,
    /// The page's own load in Chromium's NetLog, seconds: from the request
    /// for the page's URL to the last event of a request for one of its
    /// objects ([`mewa_chromium::netlog_times`]).
    pub plt_s: Option<f64>,
    /// From the same start to the start of the page's last request: how
    /// long Chromium took to ask for everything. What follows it is the
    /// only part of the load more connections can shorten.
    pub requested_s: Option<f64>,
    /// Connections the proxy opened for the page's host (0 without the
    /// hint: Chromium's own).
    pub n: usize,
    /// The proxy's UDP answer from the edge, bytes (0 without the hint).
    #[serde(default)]
    pub answer_bytes: usize,
    /// The URL list came over TCP beside a compact UDP hint.
    #[serde(default)]
    pub urls_over_tcp: bool,
    /// How long before the proxy's connections to the page's host were
    /// ready it had the URL list, ms (negative: after; none: never).
    pub urls_lead_ms: Option<f64>,
    /// Objects the proxy prefetched for the page (every host).
    #[serde(default)]
    pub prefetched: u64,
    /// What went wrong, if anything.
    pub error: Option<String>,
    /// The proxy's handshake round trip to the page's host, ns (none
    /// without the hint): what the proxy's round-trip memory of later
    /// loads took from this one.
    pub handshake_ns: Option<u64>,
    /// The arm (none in older folders: `meh` with the hint, `cold`
    /// without; read it with [`BrowserRun::arm`]).
    #[serde(default)]
    pub arm: Option<Arm>,
    /// The renderer's slowdown the load ran with (none: 1).
    #[serde(default)]
    pub cpu_slowdown: Option<f64>,
    /// What the page showed and when ([`Metrics`]; none in older folders).
    #[serde(default)]
    pub metrics: Option<Metrics>,
    /// What Chromium did before the document's response came: the proof
    /// that an arm did what it claims (preconnects from the predictor,
    /// preloads from 103 Early Hints).
    #[serde(default)]
    pub early: Option<mewa_chromium::EarlyActions>,
    /// The origins Chromium's loading predictor had learned for the page's
    /// host before the measured load (the `predictor` arm).
    #[serde(default)]
    pub predicted: Vec<String>,
    /// The document's protocol as Chromium reports it (`h2`, `h3`).
    #[serde(default)]
    pub protocol: Option<String>,
    /// The page's physical floor on this stretch of the trace, s
    /// ([`super::floor`]).
    #[serde(default)]
    pub floor_s: Option<f64>,
}

impl BrowserRun {
    /// The arm the load was made in.
    pub fn arm(&self) -> Arm {
        self.arm
            .unwrap_or(if self.with_hint { Arm::Meh } else { Arm::Cold })
    }

    /// Whether the load is the hint's side (`with`: `meh`) or the cold
    /// side (not `with`: `cold`) of the with/without tables.
    pub fn is_side(&self, with: bool) -> bool {
        self.arm() == if with { Arm::Meh } else { Arm::Cold }
    }
}

/// What users of web-performance tools look at in one Chromium load.
pub use crate::measured::Metrics;

/// A testbed's start.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct EdgeStart {
    /// The wired RTT the edge's latency monitor measured to the origin of
    /// the corpus' first page, ms (none: it has no host).
    pub wired_rtt_ms: Option<f64>,
    /// When, Unix seconds (the time stamp of the hints built then; none
    /// in a folder from before the journal).
    #[serde(default)]
    pub at_unix_s: Option<u64>,
}

/// What an older result folder's `result.json` (written before the
/// journal) holds of the loads.
#[derive(Debug, Deserialize)]
pub(crate) struct OlderResult {
    /// Every load by the loader.
    runs: Vec<MehRun>,
    /// Every Chromium load.
    #[serde(default)]
    browser: Vec<BrowserRun>,
    /// The wired RTT the edge measured.
    #[serde(default)]
    measured_wired_rtt_ms: Option<f64>,
}

impl OlderResult {
    /// Its loads as the journal would hold them: the testbed's start, the
    /// loader's loads, Chromium's.
    pub(crate) fn into_records(self) -> Vec<Record> {
        let mut out = vec![Record::Edge(EdgeStart {
            wired_rtt_ms: self.measured_wired_rtt_ms,
            at_unix_s: None,
        })];
        out.extend(self.runs.into_iter().map(|r| Record::Load(Box::new(r))));
        out.extend(
            self.browser
                .into_iter()
                .map(|b| Record::Chromium(Box::new(b))),
        );
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_say_what_they_are_and_read_back() {
        let edge = Record::Edge(EdgeStart {
            wired_rtt_ms: Some(20.125),
            at_unix_s: Some(1_800_000_000),
        });
        let text = serde_json::to_string(&edge).expect("json");
        assert_eq!(
            text,
            r#"{"kind":"edge","wired_rtt_ms":20.125,"at_unix_s":1800000000}"#
        );
        let back: Record = serde_json::from_str(&text).expect("back");
        assert!(matches!(back, Record::Edge(e) if e.wired_rtt_ms == Some(20.125)));
        // A Chromium load of an older folder (before the proxy's figures).
        let old = r#"{"kind":"chromium","page":"p","run":0,"with_hint":true,
                      "plt_s":1.5,"requested_s":null,"n":3,"urls_lead_ms":null,
                      "error":null}"#;
        let Ok(Record::Chromium(b)) = serde_json::from_str::<Record>(old) else {
            panic!("not a Chromium load")
        };
        assert_eq!((b.n, b.prefetched, b.handshake_ns), (3, 0, None));
    }
}
