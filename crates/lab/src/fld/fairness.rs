//! `mewa lab fld fairness`: a long FLD_TCP flow against a long flow of
//! another control over one bounded queue, with the throughput of each per
//! second and Jain's index once FLD_TCP has delivered 2 MB (from then on
//! it must behave as Reno). A unit is one pair of flows: FLD_TCP against
//! one control, on a link of its own.

use std::path::{Path, PathBuf};
use std::time::Duration;

use mewa_link::runtime::Topology;
use mewa_report::plot::{Mark, Series};
use mewa_report::table::opt;
use mewa_report::{Plot, ResultFolder, Section, SectionReport, Table};
use serde::{Deserialize, Serialize};

use super::{check_controls, link, set_client_rmem, CLIENT_RMEM, FLD};
use crate::cross::{jain, Cross, CrossLog, Flow, XRECV, XSEND};
use crate::experiment::{
    at_least_one, needs_root, rtt_in_range, Congestion, Experiment, ExperimentError, Run, Unit,
};

/// `mewa lab fld fairness`'s settings; `Default` is what the CLI shows.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// Round trip, ms.
    pub rtt_ms: u64,
    /// Bottleneck rate, bit/s.
    pub rate_bps: u64,
    /// Bottleneck queue, bytes: bounded, or no flow ever sees a loss.
    pub queue_bytes: usize,
    /// How long both flows run, seconds.
    pub duration_s: u64,
    /// The controls FLD_TCP runs against, one run each.
    pub against: Vec<Congestion>,
    /// Parent of the result folder.
    pub out: PathBuf,
}

impl Default for Config {
    /// 60 s at 40 ms RTT and 20 Mbit/s, a queue of one bandwidth-delay
    /// product (100 kB), against cubic and reno.
    fn default() -> Config {
        Config {
            rtt_ms: 40,
            rate_bps: 20_000_000,
            queue_bytes: 100_000,
            duration_s: 60,
            against: vec![Congestion::Cubic, Congestion::Reno],
            out: PathBuf::from("out/lab"),
        }
    }
}

/// One pair of flows: the journal's record.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FairnessRun {
    /// The other flow's control.
    pub against: Congestion,
    /// Both flows' log (flow 0 is FLD_TCP).
    pub log: CrossLog,
    /// Interval from which FLD_TCP had delivered 2 MB.
    pub past_2mb_from: usize,
    /// Mean throughputs from then on, bit/s.
    pub mean_bps: Vec<f64>,
    /// Jain's index from then on.
    pub jain: Option<f64>,
}

impl FairnessRun {
    /// The figures of a pair's `log` against `against`.
    pub fn of(against: Congestion, log: CrossLog) -> FairnessRun {
        let mut sum = 0u64;
        let past = log
            .bytes
            .first()
            .and_then(|b| {
                b.iter().position(|&x| {
                    sum += x;
                    sum >= mewa_cc::FLD_THRESHOLD_BYTES
                })
            })
            .map_or(0, |k| k + 1);
        let mean_bps = log.mean_bps(past);
        FairnessRun {
            against,
            jain: jain(&mean_bps),
            past_2mb_from: past,
            mean_bps,
            log,
        }
    }
}

/// `mewa lab fld fairness`, prepared.
#[derive(Debug)]
pub struct Fairness {
    config: Config,
}

/// A unit's key: the control FLD_TCP runs against.
fn key(against: &Congestion) -> String {
    format!("against-{against}")
}

/// What `result.json` of a run from before the journal holds.
#[derive(Deserialize)]
struct Older {
    runs: Vec<FairnessRun>,
}

impl Experiment for Fairness {
    const NAME: &'static str = "fld-fairness";
    const COMMAND: &'static str = "mewa lab fld fairness";
    type Config = Config;
    type Record = FairnessRun;
    type Report = SectionReport;

    fn prepare(config: &Config) -> Result<Fairness, ExperimentError> {
        at_least_one("--against", config.against.len())?;
        rtt_in_range("--rtt", config.rtt_ms)?;
        if config.duration_s < 5 {
            return Err(ExperimentError::Config {
                field: "--duration",
                message: "give at least 5 s".into(),
            });
        }
        Ok(Fairness {
            config: config.clone(),
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
        let mut all = self.config.against.clone();
        all.push(Congestion::Fld);
        check_controls(&all)
    }

    fn units(&self) -> Vec<Unit> {
        self.config
            .against
            .iter()
            .map(|other| Unit::one(key(other), format!("{FLD} against {other}")))
            .collect()
    }

    fn execute(&self, run: &mut Run<'_, FairnessRun>) -> Result<(), ExperimentError> {
        for other in &self.config.against {
            let key = key(other);
            if run.is_done(&key) {
                continue;
            }
            run.begin(&key);
            let log = self.pair(other)?;
            run.finish(&key, vec![FairnessRun::of(other.clone(), log)])?;
        }
        Ok(())
    }

    fn report(
        &self,
        records: Vec<FairnessRun>,
        folder: Option<ResultFolder>,
    ) -> Result<SectionReport, ExperimentError> {
        let c = &self.config;
        Ok(SectionReport {
            name: "fld fairness",
            sections: vec![fairness_table(c, &records)],
            plots: records.iter().map(|r| throughput_plot(c, r)).collect(),
            extra: records
                .iter()
                .map(|r| (format!("fairness-{}.csv", r.against), r.log.to_csv()))
                .collect(),
            json: serde_json::json!({ "runs": records }),
            folder,
        })
    }

    /// A folder from before the journal: its `result.json`'s runs.
    fn older_records(dir: &Path) -> Option<Result<Vec<FairnessRun>, ExperimentError>> {
        let older = mewa_report::read_config::<Older>(&dir.join("result.json"));
        Some(older.map(|o| o.runs).map_err(ExperimentError::from))
    }
}

impl Fairness {
    /// FLD_TCP against `other` for the configured time on a link of their
    /// own: both flows' log.
    fn pair(&self, other: &Congestion) -> Result<CrossLog, ExperimentError> {
        let c = &self.config;
        let topo = Topology::builder()
            .host(XRECV)
            .host(XSEND)
            .link(
                XRECV,
                XSEND,
                link(
                    Duration::from_millis(c.rtt_ms) / 2,
                    c.rate_bps,
                    Some(c.queue_bytes),
                ),
            )
            .build()
            .map_err(|e| ExperimentError::Bed(e.into()))?;
        set_client_rmem(&topo, XRECV, CLIENT_RMEM)?;
        let flows = [
            Flow::Tcp { cc: FLD.into() },
            Flow::Tcp {
                cc: other.to_string(),
            },
        ];
        let cross =
            Cross::start(&topo, &flows, Duration::from_secs(1)).map_err(ExperimentError::Cross)?;
        std::thread::sleep(Duration::from_secs(c.duration_s));
        let log = cross.stop();
        topo.shutdown()
            .map_err(|e| ExperimentError::Bed(e.into()))?;
        Ok(log)
    }
}

/// The fairness table: each pair's means and Jain's index past 2 MB.
fn fairness_table(config: &Config, runs: &[FairnessRun]) -> Section {
    let mut t = Table::new(&[
        "against",
        "FLD Mbit/s",
        "other Mbit/s",
        "Jain's index",
        "from s",
    ]);
    for r in runs {
        let mbps = |i: usize| r.mean_bps.get(i).map(|v| format!("{:.2}", v / 1e6));
        t.push(vec![
            r.against.to_string(),
            mbps(0).unwrap_or_default(),
            mbps(1).unwrap_or_default(),
            opt(r.jain, 3),
            format!("{:.0}", r.past_2mb_from as f64 * r.log.interval_s),
        ]);
    }
    Section {
        title: "Fairness once FLD_TCP is past 2 MB".into(),
        csv: "fairness.csv",
        table: t,
        note: format!(
            "Two long flows over {} Mbit/s, {} ms RTT, a {} B drop-tail queue, {} s. \
             Means and Jain's index over the seconds after FLD_TCP delivered 2 MB. \
             Target: Jain's index >= 0.9 against reno.",
            config.rate_bps as f64 / 1e6,
            config.rtt_ms,
            config.queue_bytes,
            config.duration_s
        ),
    }
}

/// One pair's throughput per second, a line per flow.
fn throughput_plot(config: &Config, r: &FairnessRun) -> Plot {
    let series = r
        .log
        .bytes
        .iter()
        .zip(&r.log.flows)
        .enumerate()
        .map(|(i, (b, f))| Series {
            name: f.label(),
            points: b
                .iter()
                .enumerate()
                .map(|(k, &x)| {
                    (
                        (k + 1) as f64 * r.log.interval_s,
                        x as f64 * 8.0 / r.log.interval_s / 1e6,
                    )
                })
                .collect(),
            mark: Mark::Line,
            colour: i,
        })
        .collect();
    Plot {
        file: format!("fairness-{}.svg", r.against),
        title: format!(
            "{FLD} against {} ({} Mbit/s, {} ms RTT)",
            r.against,
            config.rate_bps / 1_000_000,
            config.rtt_ms
        ),
        x_label: "time (s)".into(),
        y_label: "throughput (Mbit/s)".into(),
        series,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fairness_report_is_built_from_its_pairs_alone() {
        // FLD_TCP delivers 1 MB a second: 2 MB by the end of the second
        // interval; from then on both flows carry 1 MB a second.
        let log = CrossLog {
            flows: vec![
                Flow::Tcp { cc: FLD.into() },
                Flow::Tcp { cc: "reno".into() },
            ],
            interval_s: 1.0,
            bytes: vec![
                vec![1_000_000; 6],
                vec![0, 0, 1_000_000, 1_000_000, 1_000_000, 1_000_000],
            ],
        };
        let run = FairnessRun::of(Congestion::Reno, log);
        assert_eq!(run.past_2mb_from, 2);
        assert_eq!(run.jain.map(|j| (j * 1000.0).round()), Some(1000.0));
        let f = Fairness::prepare(&Config {
            against: vec![Congestion::Reno],
            ..Config::default()
        })
        .expect("prepared");
        assert_eq!(f.units()[0].key, "against-reno");
        let r = f.report(vec![run], None).expect("a report");
        assert_eq!(
            r.sections[0].table.rows[0],
            ["reno", "8.00", "8.00", "1.000", "2"]
        );
        assert_eq!(r.plots[0].file, "fairness-reno.svg");
        assert_eq!(r.extra[0].0, "fairness-reno.csv");
        // Too short a run is refused before anything starts.
        assert!(Fairness::prepare(&Config {
            duration_s: 2,
            ..Config::default()
        })
        .is_err());
    }
}
