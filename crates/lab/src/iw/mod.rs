//! `mewa lab iw`: seed 001's evaluation of the content-aware initial window.
//!
//! The `complat` pages (400, 1000 and 2400 KB, computation 0–95 % of the
//! load) over a radio link of 25 ms RTT at 60 Mbit/s plus a wired RTT of
//! 25, 75 or 125 ms, loaded back to back with three windows: the default
//! (IW 10, nothing asked), the content-aware one (the loader runs seed 001's
//! Algorithm 1 on the page's size, computation latency and α with the RTT it
//! measured on its handshake, and asks for it in its first request), and a
//! fixed large one for every page (what an operator would try instead). The
//! origin grants what is asked (BPF `mewa_iw` over TCP, the wrapped quinn
//! controller over QUIC; `mewa cc load` first).
//!
//! Per load: the completion time, the window asked and granted, the link's
//! queue drops and its queueing delay (what a flow sharing the bottleneck
//! would wait) while the load ran, and the origin's TCP retransmissions.
//! The report puts seed 001's figures beside ours: the optimal IW against
//! the computation share (Figs. 4–5), throughput compensation (Figs. 6–7),
//! estimated against measured computation share (Figs. 8–9) and completion
//! time (up to −25.1 %).
//!
//! - this module: the configuration, the journal's records and the
//!   [`Experiment`] (one unit per load);
//! - `run`: the pages, one load, and the link's figures read back from its
//!   event logs once a testbed is torn down;
//! - `report`: the tables and plots, one function each.

mod report;
mod run;

use std::path::{Path, PathBuf};
use std::time::Instant;

use mewa_corpus::Corpus;
use mewa_link::runtime::LinkOptions;
use mewa_loader::record::Protocol;
use mewa_report::{ResultFolder, SectionReport};
use serde::{Deserialize, Serialize};

use crate::bed::{set_tcp_rmem, Bed, OriginSettings, CLIENT, SERVER};
use crate::bulk::fixed_link;
use crate::experiment::kinds::named_enum;
use crate::experiment::{
    at_least_one, needs_root, CorpusChoice, Experiment, ExperimentError, OriginChoice, Run, Unit,
};
use crate::fld::{check_controls, queue_bytes, TcpCounters};

pub use report::estimated_share;
pub use run::facts;

// Variants in the order of their names, so tables keyed by them keep the
// order they had when the names were strings.
named_enum! {
    /// The window a load's first connection asks for.
    pub enum Arm ("arm", "default, aware or fixed") {
        /// Seed 001's content-aware window.
        Aware = "aware",
        /// Nothing asked: the default IW 10.
        Default = "default",
        /// The same large window for every page.
        Fixed = "fixed",
    }
}

named_enum! {
    /// The transport a load runs over.
    pub enum Transport ("transport", "h3 (HTTP/3 over QUIC) or h2 (HTTP/2 over TCP)") {
        /// HTTP/2 over TLS over Linux TCP.
        H2 = "h2",
        /// HTTP/3 over QUIC (seed 001's).
        H3 = "h3",
    }
}

impl Transport {
    /// The loader's protocol.
    pub fn protocol(self) -> Protocol {
        match self {
            Transport::H3 => Protocol::H3,
            Transport::H2 => Protocol::H2,
        }
    }
}

/// `mewa lab iw`'s settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// The pages: your own (a corpus or recordings; their computation
    /// latency is the sum of their scripts' compute time), or by default
    /// `complat` at [`Config::shares`]; filtered by name.
    pub corpus: CorpusChoice,
    /// The local test CA (the origin's control is cubic, switched per
    /// connection to the granted window's).
    pub origin: OriginChoice,
    /// `complat` computation shares (0 to 0.95); 0 is the 5 % page with its
    /// computation taken out.
    pub shares: Vec<f64>,
    /// The radio's round trip, ms.
    pub radio_rtt_ms: u64,
    /// The radio's rate both ways, bit/s.
    pub radio_bps: u64,
    /// Wired round trips added to the radio's, ms.
    pub wired_rtts_ms: Vec<u64>,
    /// Transports.
    pub protocols: Vec<Transport>,
    /// Arms.
    pub arms: Vec<Arm>,
    /// The `fixed` arm's window, segments.
    pub fixed_iw: u32,
    /// Seed 001's α (the edge's policy).
    pub alpha: f64,
    /// The origin's largest grant (`--iw-max`).
    pub iw_max: u32,
    /// Back-to-back loads per page, arm, transport and RTT.
    pub runs: usize,
    /// The bottleneck queue, ms at the radio's rate.
    pub queue_ms: u64,
    /// The client's initial receive buffer (`tcp_rmem`): what a phone
    /// advertises bounds the window a server may use.
    pub client_rmem: usize,
    /// The origin's `net.ipv4.tcp_slow_start_after_idle` (`None`: the
    /// kernel's, on). On, a TCP connection idle for longer than its RTO
    /// (a page computing) starts again from the initial window of 10 however
    /// large the granted one was; QUIC (quinn) keeps its window.
    pub slow_start_after_idle: Option<bool>,
    /// Parent of the result folder.
    pub out: PathBuf,
}

impl Default for Config {
    fn default() -> Config {
        let mut shares = vec![0.0];
        shares.extend((1..=19).map(|k| f64::from(k) * 0.05));
        Config {
            corpus: CorpusChoice::default(),
            origin: OriginChoice::default(),
            shares,
            radio_rtt_ms: 25,
            radio_bps: 60_000_000,
            wired_rtts_ms: vec![25, 75, 125],
            protocols: vec![Transport::H3, Transport::H2],
            arms: vec![Arm::Default, Arm::Aware, Arm::Fixed],
            fixed_iw: 100,
            alpha: 1.0 / 3.0,
            iw_max: mewa_origin::iw::DEFAULT_MAX_SEGMENTS,
            runs: 30,
            queue_ms: 100,
            client_rmem: crate::fld::CLIENT_RMEM,
            slow_start_after_idle: None,
            out: PathBuf::from("out/lab"),
        }
    }
}

/// One load of the experiment.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IwRun {
    /// Total RTT (radio + wired), ms.
    pub rtt_ms: u64,
    /// The transport.
    pub protocol: Transport,
    /// The arm.
    pub arm: Arm,
    /// The page.
    pub page: String,
    /// Its bytes.
    pub page_bytes: u64,
    /// Its computation latency, ms.
    pub computation_ms: u64,
    /// Load index.
    pub run: usize,
    /// Completion time (the loader's: first connection to last byte), s;
    /// `None` if the load failed.
    pub completion_s: Option<f64>,
    /// The window the first connection asked for.
    pub asked: Option<u32>,
    /// What the origin granted it.
    pub granted: Option<u32>,
    /// The first connection's handshake RTT, ms.
    pub handshake_ms: Option<f64>,
    /// Packets the bottleneck queue dropped during the load (either way);
    /// `None` until the link's figures are known (a testbed interrupted
    /// before it was torn down never gives them).
    #[serde(default)]
    pub drops: Option<u64>,
    /// Queueing delay of the downlink's packets during the load, ms: the
    /// 95th percentile and the largest (what a competing flow waited).
    pub queue_p95_ms: Option<f64>,
    /// See `queue_p95_ms`.
    pub queue_max_ms: Option<f64>,
    /// The origin's TCP repairs during the load (TCP only).
    pub server_tcp: Option<TcpCounters>,
}

/// The link's figures of one load, known once its testbed is torn down.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LinkFigures {
    /// The load's unit key.
    pub load: String,
    /// Packets dropped at the bottleneck during it.
    pub drops: u64,
    /// The downlink's queueing delay, 95th percentile, ms.
    pub queue_p95_ms: Option<f64>,
    /// The largest, ms.
    pub queue_max_ms: Option<f64>,
}

/// A line of the journal: a load as it ended, or the link's figures of a
/// testbed's loads. Untagged, so that older journals of bare loads read.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum IwRecord {
    /// One load.
    Load(IwRun),
    /// The link's figures of a testbed's loads.
    Link {
        /// One entry per load that testbed ran.
        link: Vec<LinkFigures>,
    },
}

/// `mewa lab iw`, prepared: the configuration, its pages and the CA.
#[derive(Debug)]
pub struct Iw {
    config: Config,
    corpus: Corpus,
    ca_dir: PathBuf,
}

/// A load's key.
fn key(rtt_ms: u64, run: usize, page: &str, proto: Transport, arm: Arm) -> String {
    format!("rtt{rtt_ms}/run{run}/{page}/{proto}/{arm}")
}

/// The key's testbed prefix.
fn bed_prefix(rtt_ms: u64) -> String {
    format!("rtt{rtt_ms}/")
}

impl Iw {
    /// The loads in order: per wired RTT, run, page and transport, the
    /// arms (their order alternates run by run, so a drift favours none).
    fn loads(&self) -> Vec<(u64, usize, usize, Transport, Arm)> {
        let c = &self.config;
        let mut out = Vec::new();
        for &wired in &c.wired_rtts_ms {
            let rtt_ms = c.radio_rtt_ms + wired;
            for run in 0..c.runs {
                for (i, _) in self.corpus.pages.iter().enumerate() {
                    for &proto in &c.protocols {
                        let mut arms = c.arms.clone();
                        if run % 2 == 1 {
                            arms.reverse();
                        }
                        for arm in arms {
                            out.push((rtt_ms, run, i, proto, arm));
                        }
                    }
                }
            }
        }
        out
    }
}

impl Experiment for Iw {
    const NAME: &'static str = "iw";
    const COMMAND: &'static str = "mewa lab iw";
    type Config = Config;
    type Record = IwRecord;
    type Report = SectionReport;

    fn prepare(config: &Config) -> Result<Iw, ExperimentError> {
        at_least_one("--runs", config.runs)?;
        at_least_one("--wired-rtt", config.wired_rtts_ms.len())?;
        at_least_one("--transport", config.protocols.len())?;
        at_least_one("--arm", config.arms.len())?;
        if !(config.alpha.is_finite() && config.alpha >= 0.0) {
            return Err(ExperimentError::Config {
                field: "--alpha",
                message: format!("{}: give a number >= 0", config.alpha),
            });
        }
        let corpus = run::pages(config)?;
        let ca_dir = config.origin.settings()?.ca_dir;
        Ok(Iw {
            config: config.clone(),
            corpus,
            ca_dir,
        })
    }

    fn config(&self) -> &Config {
        &self.config
    }

    fn out(&self) -> Option<&Path> {
        Some(&self.config.out)
    }

    fn check_machine(&self) -> Result<(), ExperimentError> {
        needs_root()?;
        check_controls(&[mewa_origin::IwPolicy::default().tcp_control])
    }

    fn units(&self) -> Vec<Unit> {
        self.loads()
            .into_iter()
            .map(|(rtt, run, i, proto, arm)| {
                let page = &self.corpus.pages[i].name;
                Unit::one(
                    key(rtt, run, page, proto, arm),
                    format!("{rtt} ms {page} {proto} {arm}"),
                )
            })
            .collect()
    }

    /// One testbed per wired RTT; its loads in order, each journaled as it
    /// ends; the link's figures of the loads once the testbed is down.
    fn execute(&self, run: &mut Run<'_, IwRecord>) -> Result<(), ExperimentError> {
        let c = &self.config;
        let logs = std::env::temp_dir().join(format!("mewa-iw-{}", std::process::id()));
        let loads = self.loads();
        for &wired in &c.wired_rtts_ms {
            let rtt_ms = c.radio_rtt_ms + wired;
            if !run.any_left(&bed_prefix(rtt_ms)) {
                continue;
            }
            let one_way = std::time::Duration::from_micros(rtt_ms * 500);
            std::fs::create_dir_all(&logs).map_err(ExperimentError::io("creating", &logs))?;
            let options = LinkOptions {
                log_dir: Some(logs.clone()),
                file_prefix: Some("iw.".into()),
                ..LinkOptions::default()
            };
            let bed = Bed::start(
                &self.corpus,
                fixed_link(
                    one_way,
                    c.radio_bps,
                    c.radio_bps,
                    Some(queue_bytes(c.radio_bps, c.queue_ms)),
                ),
                options,
                &OriginSettings {
                    congestion: "cubic".into(),
                    ca_dir: self.ca_dir.clone(),
                    iw: Some(mewa_origin::IwPolicy {
                        max_segments: c.iw_max,
                        ..mewa_origin::IwPolicy::default()
                    }),
                },
            )?;
            let topo = bed.running()?;
            set_tcp_rmem(topo, CLIENT, c.client_rmem)?;
            if let Some(on) = c.slow_start_after_idle {
                let v = if on { "1" } else { "0" };
                crate::bed::set_sysctl(topo, SERVER, "net.ipv4.tcp_slow_start_after_idle", v)?;
            }
            let t_ref = Instant::now();
            let mut timed = Vec::new();
            for &(rtt, r, i, proto, arm) in loads.iter().filter(|l| l.0 == rtt_ms) {
                let page = &self.corpus.pages[i];
                let key = key(rtt, r, &page.name, proto, arm);
                if run.is_done(&key) {
                    continue;
                }
                run.begin(&key);
                let (load, start, end) = run::load_one(&bed, c, page, proto, arm, rtt, r, t_ref)?;
                run.finish(&key, vec![IwRecord::Load(load)])?;
                timed.push((key, start, end));
            }
            bed.shutdown()?;
            let link = run::link_figures(&logs, &timed, one_way, c.radio_bps);
            if !link.is_empty() {
                run.note(
                    &format!("link/{}", bed_prefix(rtt_ms)),
                    vec![IwRecord::Link { link }],
                )?;
            }
            let _ = std::fs::remove_dir_all(&logs);
        }
        Ok(())
    }

    fn report(
        &self,
        records: Vec<IwRecord>,
        folder: Option<ResultFolder>,
    ) -> Result<SectionReport, ExperimentError> {
        Ok(report::report(&self.config, with_link(records), folder))
    }
}

/// The loads with the link's figures attached where they are known.
fn with_link(records: Vec<IwRecord>) -> Vec<IwRun> {
    let mut figures = std::collections::HashMap::new();
    let mut loads = Vec::new();
    for r in records {
        match r {
            IwRecord::Load(l) => loads.push(l),
            IwRecord::Link { link } => {
                for f in link {
                    figures.insert(f.load.clone(), f);
                }
            }
        }
    }
    for l in &mut loads {
        let k = key(l.rtt_ms, l.run, &l.page, l.protocol, l.arm);
        if let Some(f) = figures.get(&k) {
            l.drops = Some(f.drops);
            l.queue_p95_ms = f.queue_p95_ms;
            l.queue_max_ms = f.queue_max_ms;
        }
    }
    loads
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(arm: Arm, page: &str, comp: u64, t: f64, asked: Option<u32>) -> IwRun {
        IwRun {
            rtt_ms: 100,
            protocol: Transport::H3,
            arm,
            page: page.into(),
            page_bytes: 400_000,
            computation_ms: comp,
            run: 0,
            completion_s: Some(t),
            asked,
            granted: asked,
            handshake_ms: Some(100.0),
            drops: Some(0),
            queue_p95_ms: Some(1.0),
            queue_max_ms: Some(2.0),
            server_tcp: None,
        }
    }

    #[test]
    fn complat_pages_cover_the_shares_with_a_zero_page() {
        let c = Config {
            shares: vec![0.0, 0.35],
            ..Config::default()
        };
        let corpus = run::pages(&c).unwrap();
        assert_eq!(corpus.pages.len(), 6);
        let zero: Vec<&mewa_corpus::Page> = corpus
            .pages
            .iter()
            .filter(|p| p.name.contains("-s00"))
            .collect();
        assert_eq!(zero.len(), 3);
        assert!(zero.iter().all(|p| p.total_compute_ms() == 0));
        assert!(corpus
            .pages
            .iter()
            .filter(|p| p.name.contains("-s35"))
            .all(|p| p.total_compute_ms() > 0));
        let bad = Config {
            shares: vec![0.99],
            ..Config::default()
        };
        assert!(run::pages(&bad).is_err());
    }

    #[test]
    fn report_compares_each_arm_with_the_default() {
        // 35 % share at 100 ms: 400 KB's t_principle is 0.9 s, so t_c is
        // about 485 ms.
        let runs = vec![
            run(Arm::Default, "p", 485, 1.40, None),
            run(Arm::Aware, "p", 485, 1.00, Some(60)),
            run(Arm::Fixed, "p", 485, 1.12, Some(100)),
        ];
        let r = report::report(&Config::default(), runs, None);
        let text = mewa_report::Report::text(&r);
        // (1.40 − 1.00)/1.40 = 28.6 %; throughput 1.40/1.00 − 1 = 40 %.
        assert!(text.contains("28.6"), "{text}");
        assert!(text.contains("40.0"), "{text}");
        assert!(text.contains("20–50 %"), "{text}");
    }

    #[test]
    fn estimated_share_follows_equation_one() {
        // 400 KB at 100 ms: 9 rounds, 0.9 s.
        let s = estimated_share(400_000, 900, 100);
        assert!((s - 0.5).abs() < 1e-9, "{s}");
        assert_eq!(estimated_share(400_000, 0, 100), 0.0);
    }
}

#[cfg(test)]
mod journal_tests {
    use super::*;

    fn load(arm: Arm, run: usize) -> IwRun {
        IwRun {
            rtt_ms: 50,
            protocol: Transport::H2,
            arm,
            page: "p".into(),
            page_bytes: 400_000,
            computation_ms: 100,
            run,
            completion_s: Some(1.0),
            asked: None,
            granted: None,
            handshake_ms: None,
            drops: None,
            queue_p95_ms: None,
            queue_max_ms: None,
            server_tcp: None,
        }
    }

    #[test]
    fn link_figures_join_their_loads_and_loads_without_them_say_so() {
        let a = load(Arm::Default, 0);
        let b = load(Arm::Aware, 0);
        let figures = LinkFigures {
            load: key(a.rtt_ms, a.run, &a.page, a.protocol, a.arm),
            drops: 3,
            queue_p95_ms: Some(4.0),
            queue_max_ms: Some(5.0),
        };
        let records = vec![
            IwRecord::Load(a),
            IwRecord::Load(b),
            IwRecord::Link {
                link: vec![figures],
            },
        ];
        // Through the journal's JSON, as a rebuilt report reads them.
        let back: Vec<IwRecord> = records
            .iter()
            .map(|r| serde_json::from_str(&serde_json::to_string(r).unwrap()).unwrap())
            .collect();
        assert_eq!(back, records);
        let loads = with_link(back);
        assert_eq!(loads[0].drops, Some(3));
        assert_eq!(loads[0].queue_max_ms, Some(5.0));
        assert_eq!(loads[1].drops, None);
        let r = report::report(&Config::default(), loads, None);
        let text = mewa_report::Report::text(&r);
        assert!(text.contains("1 loads have no link figures"), "{text}");
    }

    #[test]
    fn an_older_journal_line_of_a_bare_load_reads() {
        let old = r#"{"rtt_ms":50,"protocol":"h3","arm":"aware","page":"p","page_bytes":1,"computation_ms":0,"run":0,"completion_s":0.5,"asked":60,"granted":60,"handshake_ms":50.0,"drops":0,"queue_p95_ms":null,"queue_max_ms":null,"server_tcp":null}"#;
        let r: IwRecord = serde_json::from_str(old).unwrap();
        assert!(matches!(
            r,
            IwRecord::Load(IwRun {
                arm: Arm::Aware,
                drops: Some(0),
                ..
            })
        ));
    }
}
