//! `mewa lab cellular`: seed 003's study of HTTP/1.1 against HTTP/2 over a
//! cellular radio, with the TCP knobs it examined and the fix it proposes.
//!
//! Seed 003 loaded pages one after another on a phone, and found that the
//! radio's state machine and TCP interact: "because of the high variability
//! in latency when a cellular end device goes from idle to active,
//! retaining TCP's RTT estimate across this transition results in spurious
//! timeouts and a corresponding burst of retransmissions. This particularly
//! punishes SPDY which depends on the single TCP connection".
//!
//! Here a client loads pages in sequence with think time between them,
//! through the link with the 3G or LTE radio model
//! ([`mewa_link::core::radio`]), over fixed rates or a cellular trace, on
//! one browsing session per protocol, so the connections go idle with the
//! radio. The session's browser is the built-in loader, which keeps its
//! connections across loads ([`mewa_loader::Session`]) as a browser does
//! (the sweeps), or headless Chromium itself, one process and one profile
//! per session driven over DevTools ([`mewa_chromium::ChromiumSession`]; the headline
//! table). Each setting changes one knob from
//! the base (Linux's defaults: Cubic, slow start after idle on, the metrics
//! cache on):
//!
//! - `ssai-off`: `net.ipv4.tcp_slow_start_after_idle = 0` (both ends);
//! - `no-metrics`: `net.ipv4.tcp_no_metrics_save = 1` (seed 003 §6.2.4);
//! - `reno`, `bbr`: the server's congestion control (seed 003 §6.2.3);
//! - `rto-floor`: the fix, a retransmission timeout that covers the radio's
//!   promotion (see [`rto`] for how and why it is built this way);
//! - `frto-off`: `net.ipv4.tcp_frto = 0` (both ends), a sender without
//!   F-RTO (RFC 5682). Linux's F-RTO tells a spurious timeout from a real
//!   one by the first ACKs after it and, when spurious, sends new data
//!   instead of the whole flight again and undoes the window's cut;
//! - `ts-off`: `net.ipv4.tcp_timestamps = 0` (both ends), a peer without
//!   TCP timestamps (Windows' default). Linux also finds a spurious timeout
//!   by the timestamp an ACK echoes (Eifel detection, RFC 3522), F-RTO or
//!   not; with both knobs only DSACK is left to find it, a round trip
//!   later: the sender closest to seed 003's "corresponding burst of
//!   retransmissions".
//!
//! Knobs combine with `+` (`frto-off+ts-off+rto-floor`): the fix is then
//! measured against the same knobs without it.
//!
//! Per load: the page load time (the loader's last object done, or
//! Chromium's own onload time), the throughput the link delivered (average
//! and the best second), the server's congestion window (sampled from
//! `TCP_INFO` through sock_diag, [`mewa_probe::tcpinfo`]), both ends'
//! retransmissions and timeouts (the namespaces' TCP counters), and the
//! retransmissions the link saw, spurious or genuine ([`mewa_probe::retrans`]),
//! with the radio's state when the load began.
//!
//! The unit of the run is one testbed (radio × network × setting): its
//! sessions' loads share connections, and their wire figures come from the
//! testbed's pcaps once it is torn down, so a testbed is journaled, and
//! redone after an interruption, whole. Its records are its loads and the
//! traces of those that woke the radio.
//!
//! - `config`: the settings; `radio`: the radios, networks and their
//!   links; `setting`: the knobs and their combinations;
//! - `testbed`: a bed with a setting's knobs applied ([`rto`]: the fix);
//! - `session` and `driver`: one browsing session in the loader or
//!   Chromium;
//! - `wire` and `figures`: the pcaps read, each load's figures filled in;
//! - `run`: one testbed's sessions and figures; `record`: what is kept;
//! - `report`: the tables and plots, one function each.

mod config;
mod driver;
mod figures;
mod radio;
mod record;
mod report;
pub mod rto;
mod run;
mod session;
mod setting;
mod testbed;
mod wire;

use std::path::{Path, PathBuf};

use mewa_corpus::Corpus;
use mewa_link::core::LinkConfig;
use mewa_report::{ResultFolder, SectionReport};

use crate::bed::OriginSettings;
use crate::experiment::{
    at_least_one, needs_root, Browser, Experiment, ExperimentError, Run, Unit,
};

pub use config::{runs_with, Config};
pub use radio::{Network, Radio, RadioProfile};
pub use record::{CellRun, LoadTrace, Record};
pub use report::TABLE2;
pub use setting::{Knob, Setting, SettingError};

/// `mewa lab cellular`, prepared: the configuration, its pages, the
/// origin's settings and the link of each radio over each network.
#[derive(Debug)]
pub struct Cellular {
    config: Config,
    corpus: Corpus,
    origin: OriginSettings,
    /// The link of each radio over each network, in the run's order.
    links: Vec<(Radio, Network, LinkConfig)>,
}

/// One testbed of the run: its radio, network and link, its setting, and
/// how many sessions (protocols) it runs.
type PlannedBed<'a> = (Radio, Network, &'a LinkConfig, &'a Setting, usize);

/// A testbed's unit key (`3g-fixed-frto-off+rto-floor`): also the name of
/// its pcaps' folder, and the key older journals gave its loads.
fn key(radio: Radio, network: Network, setting: &Setting) -> String {
    format!("{radio}-{network}-{setting}")
}

impl Cellular {
    /// Every testbed of the run, in order; a setting no protocol runs
    /// with has none.
    fn testbeds(&self) -> Vec<PlannedBed<'_>> {
        let c = &self.config;
        let mut out = Vec::new();
        for (radio, network, link) in &self.links {
            for setting in &c.settings {
                let sessions = c
                    .protocols
                    .iter()
                    .filter(|&&p| runs_with(p, setting))
                    .count();
                if sessions > 0 {
                    out.push((*radio, *network, link, setting, sessions));
                }
            }
        }
        out
    }
}

impl Experiment for Cellular {
    const NAME: &'static str = "cellular";
    const COMMAND: &'static str = "mewa lab cellular";
    type Config = Config;
    type Record = Record;
    type Report = SectionReport;

    fn prepare(config: &Config) -> Result<Cellular, ExperimentError> {
        at_least_one("--loads", config.loads)?;
        at_least_one("--radio", config.radios.len())?;
        at_least_one("--network", config.networks.len())?;
        at_least_one("--setting", config.settings.len())?;
        at_least_one("--protocol", config.protocols.len())?;
        if !(0.0..=600.0).contains(&config.think_s) {
            return Err(ExperimentError::Config {
                field: "--think",
                message: format!("{} s: give 0 to 600 seconds", config.think_s),
            });
        }
        let mut links = Vec::new();
        for &radio in &config.radios {
            for &network in &config.networks {
                links.push((
                    radio,
                    network,
                    radio.profile().link(network, config.queue_ms)?,
                ));
            }
        }
        let corpus = config.corpus.load()?;
        let origin = config.origin.settings()?;
        Ok(Cellular {
            config: config.clone(),
            corpus,
            origin,
            links,
        })
    }

    fn config(&self) -> &Config {
        &self.config
    }

    fn out(&self) -> Option<&Path> {
        Some(&self.config.out)
    }

    fn check_machine(&self) -> Result<(), ExperimentError> {
        if self.config.browser == Browser::Chromium {
            crate::browser::check_binary(&self.config.chromium, ", or use --browser loader")?;
        }
        needs_root()
    }

    fn units(&self) -> Vec<Unit> {
        let per_session = self.config.loads * self.corpus.pages.len();
        self.testbeds()
            .into_iter()
            .map(|(radio, network, _, setting, sessions)| {
                let key = key(radio, network, setting);
                Unit {
                    what: key.clone(),
                    key,
                    loads: sessions * per_session,
                }
            })
            .collect()
    }

    /// One testbed per radio, network and setting; on each, one session
    /// per protocol.
    fn execute(&self, run: &mut Run<'_, Record>) -> Result<(), ExperimentError> {
        let left: Vec<PlannedBed<'_>> = self
            .testbeds()
            .into_iter()
            .filter(|&(r, n, _, s, _)| !run.is_done(&key(r, n, s)))
            .collect();
        if left.is_empty() {
            return Ok(());
        }
        // The handshake half of the fix is a sock_ops program on a cgroup
        // of the lab's own; the process moves there before any bed makes
        // a socket.
        let cgroup = if left.iter().any(|(_, _, _, s, _)| s.rto_floor()) {
            Some(rto::LabCgroup::enter()?)
        } else {
            None
        };
        let folder: PathBuf = run.folder().map_or_else(
            || std::env::temp_dir().join(format!("mewa-cellular-{}", std::process::id())),
            Path::to_path_buf,
        );
        // The link's pcaps, a folder per testbed; Chromium's profiles, one
        // per session, removed after it.
        let (pcaps, work) = (folder.join("pcap"), folder.join("work"));
        let shared = run::Shared {
            config: &self.config,
            corpus: &self.corpus,
            origin: &self.origin,
            cgroup: cgroup.as_ref(),
            pcaps: &pcaps,
            work: &work,
        };
        for (radio, network, link, setting, _) in left {
            let key = key(radio, network, setting);
            run.begin(&key);
            let plan = run::Plan {
                radio,
                network,
                setting,
                tag: &key,
                link,
            };
            let records = {
                let progress: &Run<'_, Record> = run;
                run::testbed(&shared, plan, |k, what| progress.within(k, what))?
            };
            run.finish(&key, records)?;
        }
        if !self.config.keep_pcaps {
            let _ = std::fs::remove_dir(&pcaps);
        }
        let _ = std::fs::remove_dir_all(&work);
        drop(cgroup);
        Ok(())
    }

    fn report(
        &self,
        records: Vec<Record>,
        folder: Option<ResultFolder>,
    ) -> Result<SectionReport, ExperimentError> {
        let (runs, traces) = record::split(records);
        Ok(report::report(&self.config, runs, traces, folder))
    }

    /// Folders written before the journal held the traces keep them in
    /// `result.json` only.
    fn older_records(dir: &Path) -> Option<Result<Vec<Record>, ExperimentError>> {
        record::older_records(dir)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(settings: &[&str], protocols: &[&str]) -> Config {
        Config {
            corpus: crate::experiment::CorpusChoice {
                path: None,
                pages: vec!["meh15-01".into(), "meh15-02".into()],
            },
            radios: vec![Radio::ThreeG],
            settings: settings.iter().map(|s| s.parse().expect(s)).collect(),
            protocols: protocols.iter().map(|p| p.parse().expect(p)).collect(),
            loads: 3,
            ..Config::default()
        }
    }

    #[test]
    fn a_unit_is_a_testbed_with_every_load_of_its_sessions() {
        let exp = Cellular::prepare(&config(&["base", "frto-off+rto-floor"], &["h2", "h3"]))
            .expect("prepared");
        let units = exp.units();
        let keys: Vec<&str> = units.iter().map(|u| u.key.as_str()).collect();
        assert_eq!(keys, ["3g-fixed-base", "3g-fixed-frto-off+rto-floor"]);
        // Two pages three times; HTTP/3 runs under the base only.
        let loads: Vec<usize> = units.iter().map(|u| u.loads).collect();
        assert_eq!(loads, [2 * 6, 6]);
        // A setting no protocol runs with has no testbed.
        let exp = Cellular::prepare(&config(&["base", "reno"], &["h3"])).expect("prepared");
        assert_eq!(exp.units().len(), 1);
    }

    #[test]
    fn mistakes_in_the_configuration_are_found_before_anything_starts() {
        let c = config(&["base"], &["h2"]);
        for bad in [
            Config {
                loads: 0,
                ..c.clone()
            },
            Config {
                settings: Vec::new(),
                ..c.clone()
            },
            Config {
                think_s: 601.0,
                ..c.clone()
            },
            Config {
                corpus: crate::experiment::CorpusChoice {
                    path: None,
                    pages: vec!["no-such-page".into()],
                },
                ..c.clone()
            },
        ] {
            assert!(Cellular::prepare(&bad).is_err(), "{bad:?}");
        }
        assert!(Cellular::prepare(&c).is_ok());
    }

    #[test]
    fn the_report_is_rebuilt_from_the_journal_and_an_older_folder_from_its_result() {
        use mewa_report::{Journal, Report};
        let out = std::env::temp_dir().join(format!("mewa-cell-report-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&out);
        let config = Config {
            out: out.clone(),
            ..config(&["base", "rto-floor"], &["h2"])
        };
        let folder = ResultFolder::create(&out, Cellular::NAME, Cellular::COMMAND, &config)
            .expect("a folder");
        let dir = folder.path().to_path_buf();
        let load = |setting: &str, plt: f64| -> CellRun {
            serde_json::from_value(record::tests::old_line(setting, "h2", plt)).expect("a load")
        };
        // One line per testbed: its loads, then the traces of those that
        // woke the radio.
        let mut journal = Journal::<Record>::open(&dir).expect("journal");
        journal
            .append("3g-fixed-base", vec![Record::Load(load("base", 2.0))])
            .expect("append");
        journal
            .append(
                "3g-fixed-rto-floor",
                vec![
                    Record::Load(load("rto-floor", 1.5)),
                    Record::Trace(record::tests::trace()),
                ],
            )
            .expect("append");
        let r = Cellular::report_again(&dir).expect("rebuilt");
        let csvs: Vec<&str> = r.sections.iter().map(|s| s.csv).collect();
        assert_eq!(csvs, ["table2.csv", "knobs.csv", "fix.csv", "runs.csv"]);
        assert_eq!(r.json["runs"].as_array().map(Vec::len), Some(2));
        assert_eq!(r.json["traces"].as_array().map(Vec::len), Some(1));
        // The loader's Cubic HTTP/2 mean PLT, ms (Table 2's ninth column).
        let t2 = &r.sections[0].table;
        assert_eq!(t2.rows[0][8], "2000");
        assert!(r.text().contains("Seed 003 Table 2 beside ours"));
        // A folder of an older build: one bare load per line, the traces
        // in result.json only.
        let bare: Vec<String> = [load("base", 2.0), load("rto-floor", 1.5)]
            .iter()
            .map(|l| serde_json::to_string(l).expect("json"))
            .collect();
        std::fs::write(
            dir.join(mewa_report::journal::JOURNAL),
            bare.join("\n") + "\n",
        )
        .expect("write");
        std::fs::write(dir.join("result.json"), r.json.to_string()).expect("write");
        let older = Cellular::report_again(&dir).expect("rebuilt");
        assert_eq!(older.json, r.json);
        assert_eq!(older.text(), r.text());
        let _ = std::fs::remove_dir_all(&out);
    }
}
