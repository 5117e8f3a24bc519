//! `mewa lab fld bulk`: one transfer per size and sender at a fixed round
//! trip and rate, seed 002's flow-size claim (500 kB in 4 round trips with
//! FLD_TCP against Reno's 6). A sender is a TCP congestion control or a
//! QUIC controller (`quic/<name>`); each transfer builds its own
//! namespaces, so a unit is one transfer.

use std::path::{Path, PathBuf};
use std::time::Duration;

use mewa_origin::quic_cc::QuicCc;
use mewa_report::table::{opt, pct};
use mewa_report::{median, ResultFolder, Section, SectionReport, Table};
use serde::{Deserialize, Serialize};

use super::{check_controls, CLIENT_RMEM};
use crate::bulk::{self as transfer, Setup as TransferSetup};
use crate::experiment::{
    at_least_one, ca_dir_or_default, needs_root, rtt_in_range, Congestion, Experiment,
    ExperimentError, Run, Unit, UnknownName,
};

/// `mewa lab fld bulk`'s settings; `Default` is what the CLI shows.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// Round trip, ms.
    pub rtt_ms: u64,
    /// Bottleneck rate both ways, bit/s.
    pub rate_bps: u64,
    /// Bottleneck queue, bytes (`None`: unbounded).
    pub queue_bytes: Option<usize>,
    /// Transfer sizes, bytes.
    pub sizes: Vec<u64>,
    /// TCP congestion controls at the sender.
    pub ccs: Vec<Congestion>,
    /// QUIC controllers at the sender (`mewa origin serve --quic-cc`
    /// names), shown as `quic/<name>`.
    #[serde(with = "quic_names")]
    pub quic_ccs: Vec<QuicCc>,
    /// The test CA's folder for the QUIC sender (none: the default).
    pub ca_dir: Option<PathBuf>,
    /// Transfers per size and control.
    pub runs: usize,
    /// The receiver's `SO_RCVBUF` (`None`: the kernel's autotuning).
    pub client_rmem: Option<usize>,
    /// Parent of the result folder.
    pub out: PathBuf,
}

impl Default for Config {
    /// Seed 002's flow-size comparison: 500 kB and 2 MB at 40 ms RTT, 20 Mbit/s,
    /// unbounded queue, reno, cubic, bbr and FLD_TCP over TCP and over QUIC
    /// (quinn's newreno, cubic and bbr, and mewa's fld), 5 runs.
    fn default() -> Config {
        Config {
            rtt_ms: 40,
            rate_bps: 20_000_000,
            queue_bytes: None,
            sizes: vec![500_000, 2_000_000],
            ccs: vec![
                Congestion::Reno,
                Congestion::Cubic,
                Congestion::Bbr,
                Congestion::Fld,
            ],
            quic_ccs: vec![QuicCc::NewReno, QuicCc::Cubic, QuicCc::Bbr, QuicCc::Fld],
            ca_dir: None,
            runs: 5,
            client_rmem: Some(CLIENT_RMEM),
            out: PathBuf::from("out/lab"),
        }
    }
}

/// `QuicCc` in `config.json` by the name `--quic-cc` takes (the origin's
/// type has no serde of its own).
mod quic_names {
    use mewa_origin::quic_cc::QuicCc;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(v: &[QuicCc], s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(v.iter().map(|q| q.name()))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<QuicCc>, D::Error> {
        Vec::<String>::deserialize(d)?
            .iter()
            .map(|n| n.parse().map_err(serde::de::Error::custom))
            .collect()
    }
}

/// Who sends a transfer: a TCP congestion control, or a QUIC controller
/// (written `quic/<name>`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub enum Sender {
    /// Kernel TCP with this control.
    Tcp(Congestion),
    /// quinn with this controller.
    Quic(QuicCc),
}

impl Sender {
    /// The sender each one is compared with: cubic over the same transport.
    pub fn cubic_of_its_transport(&self) -> Sender {
        match self {
            Sender::Tcp(_) => Sender::Tcp(Congestion::Cubic),
            Sender::Quic(_) => Sender::Quic(QuicCc::Cubic),
        }
    }
}

impl std::fmt::Display for Sender {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Sender::Tcp(c) => write!(f, "{c}"),
            Sender::Quic(q) => write!(f, "quic/{q}"),
        }
    }
}

impl std::str::FromStr for Sender {
    type Err = UnknownName;
    fn from_str(s: &str) -> Result<Sender, UnknownName> {
        match s.strip_prefix("quic/") {
            Some(q) => q.parse().map(Sender::Quic).map_err(|_| UnknownName {
                what: "QUIC controller",
                got: q.to_string(),
                choices: "cubic, newreno, bbr, fld or reno",
            }),
            None => s.parse().map(Sender::Tcp),
        }
    }
}

impl TryFrom<String> for Sender {
    type Error = UnknownName;
    fn try_from(s: String) -> Result<Sender, UnknownName> {
        s.parse()
    }
}

impl From<Sender> for String {
    fn from(s: Sender) -> String {
        s.to_string()
    }
}

/// One transfer: the journal's record.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BulkRun {
    /// Bytes sent.
    pub bytes: u64,
    /// The sender (`quic/<name>` over QUIC).
    pub cc: Sender,
    /// Run index.
    pub run: usize,
    /// `connect()` to last byte, seconds.
    pub completion_s: f64,
    /// Handshake done (`connect()` returned) to last byte, seconds: the
    /// round trips of data alone, which seed 002 counts.
    pub transfer_s: f64,
    /// Data segments per round trip.
    pub rounds: Vec<u64>,
    /// Data packets dropped at the bottleneck.
    pub drops: u64,
}

/// `mewa lab fld bulk`, prepared: the configuration and the CA folder.
#[derive(Debug)]
pub struct Bulk {
    config: Config,
    ca_dir: PathBuf,
}

impl Bulk {
    /// Every sender: the TCP controls, then `quic/<name>`.
    fn senders(&self) -> Vec<Sender> {
        senders(&self.config)
    }
}

/// Every sender of `config`: the TCP controls, then `quic/<name>`.
fn senders(config: &Config) -> Vec<Sender> {
    config
        .ccs
        .iter()
        .cloned()
        .map(Sender::Tcp)
        .chain(config.quic_ccs.iter().copied().map(Sender::Quic))
        .collect()
}

/// A unit's key: the run, the size and the sender.
fn key(run: usize, bytes: u64, sender: &Sender) -> String {
    format!("run{run}/{bytes}B/{sender}")
}

/// What `result.json` of a run from before the journal holds.
#[derive(Deserialize)]
struct Older {
    runs: Vec<BulkRun>,
}

impl Experiment for Bulk {
    const NAME: &'static str = "fld-bulk";
    const COMMAND: &'static str = "mewa lab fld bulk";
    type Config = Config;
    type Record = BulkRun;
    type Report = SectionReport;

    fn prepare(config: &Config) -> Result<Bulk, ExperimentError> {
        at_least_one("--runs", config.runs)?;
        at_least_one("--size", config.sizes.len())?;
        at_least_one("--cc", config.ccs.len())?;
        rtt_in_range("--rtt", config.rtt_ms)?;
        if config.rate_bps == 0 {
            return Err(ExperimentError::Config {
                field: "--rate",
                message: "give a rate above 0 (e.g. 20mbit)".into(),
            });
        }
        Ok(Bulk {
            config: config.clone(),
            ca_dir: ca_dir_or_default(&config.ca_dir)?,
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
        check_controls(&self.config.ccs)
    }

    fn units(&self) -> Vec<Unit> {
        let mut units = Vec::new();
        for run in 0..self.config.runs {
            for &bytes in &self.config.sizes {
                for s in self.senders() {
                    units.push(Unit::one(
                        key(run, bytes, &s),
                        format!("{bytes} B with {s}"),
                    ));
                }
            }
        }
        units
    }

    /// Each transfer in namespaces of its own; the link's logs under
    /// `links/` in the result folder.
    fn execute(&self, run: &mut Run<'_, BulkRun>) -> Result<(), ExperimentError> {
        let logs = match run.folder() {
            Some(f) => f.join("links"),
            None => std::env::temp_dir().join(format!("mewa-fld-bulk-{}", std::process::id())),
        };
        let c = &self.config;
        for r in 0..c.runs {
            for &bytes in &c.sizes {
                for sender in self.senders() {
                    let key = key(r, bytes, &sender);
                    if run.is_done(&key) {
                        continue;
                    }
                    run.begin(&key);
                    let t = self.transfer(&sender, bytes, &logs, r)?;
                    let record = BulkRun {
                        bytes,
                        cc: sender,
                        run: r,
                        completion_s: t.completion.as_secs_f64(),
                        transfer_s: t.transfer.as_secs_f64(),
                        rounds: t.rounds,
                        drops: t.drops,
                    };
                    run.finish(&key, vec![record])?;
                }
            }
        }
        Ok(())
    }

    fn report(
        &self,
        records: Vec<BulkRun>,
        folder: Option<ResultFolder>,
    ) -> Result<SectionReport, ExperimentError> {
        Ok(SectionReport {
            name: "fld bulk",
            sections: vec![completion_table(&self.config, &records)],
            plots: Vec::new(),
            json: serde_json::json!({ "runs": records }),
            extra: Vec::new(),
            folder,
        })
    }

    /// A folder from before the journal: its `result.json`'s runs.
    fn older_records(dir: &Path) -> Option<Result<Vec<BulkRun>, ExperimentError>> {
        let older = mewa_report::read_config::<Older>(&dir.join("result.json"));
        Some(older.map(|o| o.runs).map_err(ExperimentError::from))
    }
}

impl Bulk {
    /// One transfer of `bytes` by `sender`, its link logs in `logs`.
    fn transfer(
        &self,
        sender: &Sender,
        bytes: u64,
        logs: &Path,
        run: usize,
    ) -> Result<transfer::Transfer, ExperimentError> {
        let c = &self.config;
        let congestion = match sender {
            Sender::Tcp(cc) => cc.to_string(),
            Sender::Quic(q) => q.name().to_string(),
        };
        let s = TransferSetup {
            rtt: Duration::from_millis(c.rtt_ms),
            down_bps: c.rate_bps,
            up_bps: c.rate_bps,
            queue_bytes: c.queue_bytes,
            bytes,
            congestion,
            receive_buffer: c.client_rmem,
        };
        let label = sender.to_string();
        let dir = logs.join(format!("{}-{bytes}-{run}", label.replace('/', "-")));
        match sender {
            Sender::Quic(_) => transfer::run_quic(&s, &self.ca_dir, &dir),
            Sender::Tcp(_) => transfer::run(&s, &dir),
        }
        .map_err(|source| ExperimentError::Transfer {
            what: format!("of {bytes} B with {label}"),
            source,
        })
    }
}

/// The bulk table: median completion per size and sender, and the
/// reduction against cubic over the same transport.
fn completion_table(config: &Config, runs: &[BulkRun]) -> Section {
    let mut t = Table::new(&[
        "size",
        "cc",
        "completion s",
        "vs cubic %",
        "data s",
        "vs cubic %",
        "min-max completion s",
        "round trips",
        "drops",
    ]);
    for &bytes in &config.sizes {
        let of = |cc: &Sender| -> Vec<&BulkRun> {
            runs.iter()
                .filter(|r| r.bytes == bytes && r.cc == *cc)
                .collect()
        };
        let med = |cc: &Sender, f: fn(&BulkRun) -> f64| {
            median(&of(cc).iter().map(|r| f(r)).collect::<Vec<_>>())
        };
        for cc in &senders(config) {
            let base = cc.cubic_of_its_transport();
            let (cubic_c, cubic_d) = (med(&base, |r| r.completion_s), med(&base, |r| r.transfer_s));
            let rs = of(cc);
            let times: Vec<f64> = rs.iter().map(|r| r.completion_s).collect();
            let (m, d) = (med(cc, |r| r.completion_s), med(cc, |r| r.transfer_s));
            let vs = |x: Option<f64>, against: Option<f64>| match (x, against) {
                (Some(x), Some(b)) if b > 0.0 && *cc != base => pct(100.0 * (b - x) / b),
                _ => "-".into(),
            };
            let rounds: Vec<f64> = rs.iter().map(|r| r.rounds.len() as f64).collect();
            t.push(vec![
                format!("{} kB", bytes / 1000),
                cc.to_string(),
                opt(m, 3),
                vs(m, cubic_c),
                opt(d, 3),
                vs(d, cubic_d),
                format!(
                    "{}-{}",
                    opt(times.iter().copied().reduce(f64::min), 3),
                    opt(times.iter().copied().reduce(f64::max), 3)
                ),
                opt(median(&rounds), 0),
                rs.iter().map(|r| r.drops).sum::<u64>().to_string(),
            ]);
        }
    }
    let note = format!(
        "{} ms RTT, {} Mbit/s, queue {}; medians over the runs. Completion: connect() to the \
         last byte (one handshake included); data: handshake done to the last byte; round \
         trips: RTTs in which data crossed the link. Seed 002: 500 kB takes FLD_TCP 4 round trips against Reno's 6 \
         (33 % fewer). Target: FLD completes 500 kB at least 30 % faster than cubic.",
        config.rtt_ms,
        config.rate_bps as f64 / 1e6,
        config
            .queue_bytes
            .map_or_else(|| "unbounded".to_string(), |b| format!("{b} B"))
    );
    Section {
        title: "Bulk transfers: completion time per congestion control".into(),
        csv: "bulk.csv",
        table: t,
        note,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bulk_report_compares_each_transport_with_its_own_cubic() {
        let config = Config {
            sizes: vec![500_000],
            ccs: vec![Congestion::Cubic, Congestion::Fld],
            quic_ccs: vec![QuicCc::Cubic, QuicCc::Fld],
            ca_dir: Some("/tmp/ca".into()),
            ..Config::default()
        };
        let run = |cc: &str, s: f64| BulkRun {
            bytes: 500_000,
            cc: cc.parse().expect("a sender"),
            run: 0,
            completion_s: s + 0.04,
            transfer_s: s,
            rounds: vec![10, 30],
            drops: 0,
        };
        let runs = vec![
            run("cubic", 0.4),
            run(super::super::FLD, 0.3),
            run("quic/cubic", 0.5),
            run("quic/fld", 0.4),
        ];
        let r = Bulk::prepare(&config)
            .expect("prepared")
            .report(runs, None)
            .expect("a report");
        let t = &r.sections[0].table;
        let row = |cc: &str| t.rows.iter().find(|r| r[1] == cc).expect("a row");
        // Data time: 25 % below cubic over TCP, 20 % below quic/cubic.
        assert_eq!(row(super::super::FLD)[5], "25.0");
        assert_eq!(row("quic/fld")[5], "20.0");
        assert_eq!(row("cubic")[5], "-");
        assert_eq!(row("quic/cubic")[5], "-");
    }

    #[test]
    fn senders_and_configs_read_as_they_were_written() {
        for s in ["cubic", "mewa_fld", "quic/newreno", "quic/fld"] {
            let sender: Sender = s.parse().expect(s);
            assert_eq!(sender.to_string(), s);
        }
        assert!("quic/vegas".parse::<Sender>().is_err());
        // An older config.json, with the names as strings.
        let old: Config = serde_json::from_str(
            r#"{"ccs": ["reno", "mewa_fld"], "quic_ccs": ["newreno", "fld"], "runs": 2}"#,
        )
        .expect("an older config");
        assert_eq!(old.ccs, vec![Congestion::Reno, Congestion::Fld]);
        assert_eq!(old.quic_ccs, vec![QuicCc::NewReno, QuicCc::Fld]);
        let back: Config =
            serde_json::from_str(&serde_json::to_string(&old).expect("json")).expect("back");
        assert_eq!(back, old);
        assert!(serde_json::from_str::<Config>(r#"{"quic_ccs": ["vegas"]}"#).is_err());
        // One unit per transfer, each key once.
        let b = Bulk::prepare(&Config {
            ca_dir: Some("/tmp/ca".into()),
            ..Config::default()
        })
        .expect("prepared");
        let units = b.units();
        assert_eq!(units.len(), 5 * 2 * 8);
        let keys: std::collections::HashSet<&str> = units.iter().map(|u| u.key.as_str()).collect();
        assert_eq!(keys.len(), units.len());
    }
}
