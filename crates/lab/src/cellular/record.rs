//! What the study keeps of each load: its figures ([`CellRun`]) and, for
//! loads that woke the radio, a few seconds of the server's window and
//! timeout ([`LoadTrace`]); both are journal records ([`Record`]), and
//! both are read back from the `result.json` of a folder written before
//! the journal held the traces.

use std::path::Path;

use mewa_loader::record::Protocol;
use mewa_probe::retrans::Counts;
use mewa_probe::tcpinfo::RepairCounters;
use mewa_report::ReportError;
use serde::{Deserialize, Serialize};

use super::radio::{Network, Radio};
use super::setting::Setting;
use crate::experiment::{Browser, ExperimentError};

/// The browser of loads written before there was a choice.
fn loader() -> Browser {
    Browser::Loader
}

/// One page load of the study.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CellRun {
    /// The browser that loaded it.
    #[serde(default = "loader")]
    pub browser: Browser,
    /// Radio.
    pub radio: Radio,
    /// Network.
    pub network: Network,
    /// Knob setting.
    pub setting: Setting,
    /// Protocol.
    pub protocol: Protocol,
    /// The page.
    pub page: String,
    /// Position in the session (0: the first load, on new connections).
    pub seq: usize,
    /// The radio's state when the load began (`idle`, `fach`, `dch`,
    /// `continuous`, `short_drx`, `long_drx`).
    pub radio_state: String,
    /// Radio promotions during the load.
    pub promotions: u64,
    /// Page load time, s; `None` if it failed. The loader's: from its first
    /// request to the last object done; Chromium's: its own onload time
    /// (Navigation Timing `loadEventEnd − startTime`).
    pub plt_s: Option<f64>,
    /// Objects that failed (Chromium: requests that failed, cancellations
    /// not counted).
    pub failed: usize,
    /// Connections the load opened, and those it reused from earlier loads
    /// (Chromium: connections that carried a response in this load, by
    /// whether an earlier load had one on them; see
    /// [`mewa_chromium::ChromiumSession`]).
    pub new_connections: usize,
    /// See [`CellRun::new_connections`].
    pub reused_connections: usize,
    /// Chromium's First Contentful Paint and Largest Contentful Paint, s
    /// from the navigation's start (none for the loader and in older
    /// folders).
    #[serde(default)]
    pub fcp_s: Option<f64>,
    /// See [`CellRun::fcp_s`].
    #[serde(default)]
    pub lcp_s: Option<f64>,
    /// TCP handshakes the client began during the load as the link saw
    /// them (distinct connections whose SYN crossed upstream, from the
    /// load's start to the next load's): whatever the browser reports, a
    /// load on kept connections has none.
    #[serde(default)]
    pub handshakes: u32,
    /// Load start, µs since the Unix epoch (to match the pcaps).
    pub start_unix_us: u64,
    /// Bytes the link delivered downstream during the load (IP).
    pub down_bytes: u64,
    /// Average downlink throughput over the load, KB/s.
    pub avg_kbps: Option<f64>,
    /// The best one-second downlink throughput of the load, KB/s.
    pub max_kbps: Option<f64>,
    /// The server's congestion window, segments: time-weighted mean over
    /// the load of each socket that sent, averaged over those sockets.
    pub cwnd_avg: Option<f64>,
    /// The largest congestion window of any server socket during the load.
    pub cwnd_max: Option<u32>,
    /// The server namespace's TCP counters over the load (differences of
    /// `/proc/net/snmp` and `/proc/net/netstat`).
    pub server: RepairCounters,
    /// The client namespace's.
    pub client: RepairCounters,
    /// The server's retransmissions as the link delivered them.
    pub wire_down: Counts,
    /// The client's.
    pub wire_up: Counts,
}

/// A few seconds of one load around its start, for the figure of the
/// congestion window and retransmissions around a promotion.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LoadTrace {
    /// Which load ([`CellRun`] fields).
    #[serde(default = "loader")]
    pub browser: Browser,
    /// Radio.
    pub radio: Radio,
    /// Network.
    pub network: Network,
    /// Setting.
    pub setting: Setting,
    /// Protocol.
    pub protocol: Protocol,
    /// Position in its session.
    pub seq: usize,
    /// The radio's state at the start.
    pub radio_state: String,
    /// Each server socket's congestion window: (s since the load's start,
    /// segments).
    pub cwnd: Vec<Vec<(f64, u32)>>,
    /// Each server socket's retransmission timeout: (s, ms).
    #[serde(default)]
    pub rto: Vec<Vec<(f64, u32)>>,
    /// The server's retransmissions on the wire: (s, spurious).
    pub retransmissions: Vec<(f64, bool)>,
}

/// A record of the journal: a testbed's unit holds its loads, then the
/// traces of those that woke the radio. Untagged, so that the bare loads
/// of older journals read as they are. Most records are loads, so a load
/// is kept inline: boxing each would only add an allocation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
#[allow(clippy::large_enum_variant)]
pub enum Record {
    /// One load.
    Load(CellRun),
    /// A few seconds of a load that began with a promotion.
    Trace(LoadTrace),
}

/// The loads and the traces of `records`, each in order.
pub fn split(records: Vec<Record>) -> (Vec<CellRun>, Vec<LoadTrace>) {
    let mut runs = Vec::new();
    let mut traces = Vec::new();
    for r in records {
        match r {
            Record::Load(x) => runs.push(x),
            Record::Trace(t) => traces.push(t),
        }
    }
    (runs, traces)
}

/// What `result.json` holds (the report's JSON).
#[derive(Debug, Deserialize)]
struct OlderResult {
    runs: Vec<CellRun>,
    traces: Vec<LoadTrace>,
}

/// The records of the `result.json` in `dir`, if there is one: the whole
/// of a folder whose journal holds the loads alone.
pub fn older_records(dir: &Path) -> Option<Result<Vec<Record>, ExperimentError>> {
    let path = dir.join("result.json");
    path.is_file().then(|| {
        let text = std::fs::read(&path).map_err(ExperimentError::io("reading", &path))?;
        let r: OlderResult = serde_json::from_slice(&text).map_err(|e| ReportError::ReadBack {
            path: path.clone(),
            message: "not the result of `mewa lab cellular`".into(),
            source: Box::new(e),
        })?;
        Ok(r.runs
            .into_iter()
            .map(Record::Load)
            .chain(r.traces.into_iter().map(Record::Trace))
            .collect())
    })
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    /// A load as an older `runs.jsonl` line has it: no `browser`, no
    /// `handshakes`.
    pub(in crate::cellular) fn old_line(
        setting: &str,
        protocol: &str,
        plt: f64,
    ) -> serde_json::Value {
        serde_json::json!({
            "radio": "3g", "network": "fixed", "setting": setting, "protocol": protocol,
            "page": "p", "seq": 0, "radio_state": "umts_idle", "promotions": 1,
            "plt_s": plt, "failed": 0, "new_connections": 1, "reused_connections": 0,
            "start_unix_us": 0, "down_bytes": 0, "avg_kbps": null, "max_kbps": null,
            "cwnd_avg": null, "cwnd_max": null, "server": {}, "client": {},
            "wire_down": {"spurious": 0, "genuine": 0, "partial": 0, "spurious_syn": 0},
            "wire_up": {"spurious": 0, "genuine": 0, "partial": 0, "spurious_syn": 0}
        })
    }

    /// A trace of a load that woke the radio, under `rto-floor`.
    pub(in crate::cellular) fn trace() -> LoadTrace {
        LoadTrace {
            browser: Browser::Chromium,
            radio: Radio::ThreeG,
            network: Network::Fixed,
            setting: "rto-floor".parse().expect("setting"),
            protocol: Protocol::H2,
            seq: 1,
            radio_state: "umts_fach".into(),
            cwnd: vec![vec![(0.0, 10), (0.5, 20)]],
            rto: vec![vec![(0.0, 2400)]],
            retransmissions: vec![(0.3, true)],
        }
    }

    #[test]
    fn loads_and_traces_are_told_apart_and_older_loads_read() {
        let old: Record = serde_json::from_value(old_line("base", "h2", 2.0)).expect("old");
        let Record::Load(run) = &old else {
            panic!("an older line is a load: {old:?}");
        };
        assert_eq!((run.browser, run.handshakes), (Browser::Loader, 0));
        assert_eq!(run.setting, Setting::base());
        let t = Record::Trace(trace());
        let back: Record =
            serde_json::from_str(&serde_json::to_string(&t).expect("json")).expect("back");
        assert_eq!(back, t);
        let back: Record =
            serde_json::from_str(&serde_json::to_string(&old).expect("json")).expect("back");
        assert_eq!(back, old);
        let (runs, traces) = split(vec![t, old]);
        assert_eq!((runs.len(), traces.len()), (1, 1));
    }

    #[test]
    fn an_older_folders_result_gives_its_loads_and_traces() {
        let dir = std::env::temp_dir().join(format!("mewa-cell-older-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("dir");
        assert!(older_records(&dir).is_none());
        let result = serde_json::json!({
            "runs": [old_line("base", "h1", 1.0), old_line("reno", "h2", 2.0)],
            "traces": [serde_json::to_value(trace()).expect("json")],
        });
        std::fs::write(dir.join("result.json"), result.to_string()).expect("write");
        let records = older_records(&dir).expect("a result").expect("reads");
        let (runs, traces) = split(records);
        assert_eq!((runs.len(), traces.len()), (2, 1));
        assert_eq!(runs[1].setting.to_string(), "reno");
        std::fs::write(dir.join("result.json"), "{\"cells\": []}").expect("write");
        let e = older_records(&dir)
            .expect("a result")
            .expect_err("not ours");
        assert!(e.to_string().contains("mewa lab cellular"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
