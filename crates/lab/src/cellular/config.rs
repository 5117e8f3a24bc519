//! `mewa lab cellular`'s settings, as `config.json` keeps them and the
//! command line gives them.

use std::path::PathBuf;

use mewa_loader::record::Protocol;
use serde::{Deserialize, Serialize};

use super::radio::{Network, Radio};
use super::setting::Setting;
use crate::experiment::{Browser, CorpusChoice, OriginChoice};

/// `mewa lab cellular`'s settings. `Default` is what the CLI shows.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// The pages.
    pub corpus: CorpusChoice,
    /// The CA. The server's control is the setting's (cubic unless it
    /// names reno or bbr), whatever `origin.cc` says.
    pub origin: OriginChoice,
    /// Radios.
    pub radios: Vec<Radio>,
    /// Networks: the radio's fixed rates, its trace.
    pub networks: Vec<Network>,
    /// Knob settings ([`Setting::singles`] by default).
    pub settings: Vec<Setting>,
    /// Protocols: `h1` (HTTP/1.1 over TLS, 6 connections per host), `h2`
    /// (HTTP/2 over TLS, one per origin), `h3` (under `base` only:
    /// [`runs_with`]).
    pub protocols: Vec<Protocol>,
    /// The browser of every session: the built-in loader (for sweeps) or
    /// headless Chromium (for the headline table).
    pub browser: Browser,
    /// The Chromium binary, with [`Browser::Chromium`].
    pub chromium: PathBuf,
    /// Times each page is loaded in a session.
    pub loads: usize,
    /// Think time before each load, s (3G demotes to CELL_FACH after 5 s
    /// and to IDLE 12 s later; LTE to RRC_IDLE after 11.5 s).
    pub think_s: f64,
    /// `TCP_INFO` sampling period, ms.
    pub sample_ms: u64,
    /// A drop-tail queue of this many ms at the profile's fixed rate in
    /// each direction (so a full queue drops and losses set `ssthresh`,
    /// which the metrics cache then hands on); `None`: unbounded.
    pub queue_ms: Option<u64>,
    /// Give up on a load after this long, s.
    pub timeout_s: u64,
    /// Keep the link's pcaps in the result folder.
    pub keep_pcaps: bool,
    /// Parent of the result folder.
    pub out: PathBuf,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            corpus: CorpusChoice::default(),
            origin: OriginChoice::default(),
            radios: vec![Radio::ThreeG, Radio::Lte],
            networks: vec![Network::Fixed],
            settings: Setting::singles(),
            protocols: vec![Protocol::H1, Protocol::H2],
            browser: Browser::Loader,
            chromium: PathBuf::from(mewa_chromium::DEFAULT_CHROMIUM),
            loads: 2,
            think_s: 8.0,
            sample_ms: 20,
            queue_ms: None,
            timeout_s: 60,
            keep_pcaps: false,
            out: PathBuf::from("out/lab"),
        }
    }
}

/// Whether `protocol` is loaded under `setting`: every knob is a Linux
/// TCP setting, which QUIC (HTTP/3, quinn's own congestion control and
/// timers in user space) does not read, so HTTP/3 runs under the base
/// only.
pub fn runs_with(protocol: Protocol, setting: &Setting) -> bool {
    protocol != Protocol::H3 || setting.is_base()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_config_json_of_today_reads_with_its_names() {
        let json = r#"{
            "corpus": {"path": null, "pages": ["meh15-01"]},
            "origin": {"ca_dir": null, "cc": "cubic"},
            "radios": ["3g"], "networks": ["fixed"],
            "settings": ["base", "no-metrics", "reno", "rto-floor"],
            "protocols": ["h1", "h2"], "browser": "loader",
            "chromium": "/usr/bin/chromium", "loads": 2, "think_s": 8.0,
            "sample_ms": 20, "queue_ms": null, "timeout_s": 60,
            "keep_pcaps": false, "out": "out/lab"
        }"#;
        let c: Config = serde_json::from_str(json).expect("reads");
        assert_eq!(c.radios, [Radio::ThreeG]);
        assert_eq!(c.settings[3].to_string(), "rto-floor");
        assert_eq!(c.protocols, [Protocol::H1, Protocol::H2]);
        let back = serde_json::to_value(&c).expect("json");
        let want: serde_json::Value = serde_json::from_str(json).expect("json");
        assert_eq!(back, want);
        let bad = json.replace("\"3g\"", "\"5g\"");
        assert!(serde_json::from_str::<Config>(&bad).is_err());
    }

    #[test]
    fn http3_runs_under_the_base_only() {
        let base = Setting::base();
        let floor: Setting = "rto-floor".parse().expect("setting");
        assert!(runs_with(Protocol::H3, &base) && !runs_with(Protocol::H3, &floor));
        assert!(runs_with(Protocol::H2, &floor));
    }
}
