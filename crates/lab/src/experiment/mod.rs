//! One contract for every experiment, so that each says only what it
//! measures and none of them writes its scaffolding again.
//!
//! An experiment is an [`Experiment`]: a typed `Config` (serde; its
//! `Default` is the CLI's defaults; choices are enums, see [`kinds`]),
//! [`Experiment::prepare`] that checks it and reads its inputs before
//! anything starts, [`Experiment::check_machine`] for what the machine
//! must offer (root, a kernel control, a browser), the list of its
//! [`Unit`]s up front (so a progress bar has a total from the first
//! moment), [`Experiment::execute`] that runs the units not yet done, and
//! [`Experiment::report`] that builds its report from the records alone.
//!
//! The provided methods are the same for every experiment:
//! - [`Experiment::run`] makes the result folder (`config.json`,
//!   `meta.json`), then runs every unit, each appended to the folder's
//!   journal (`runs.jsonl`) the moment it ends;
//! - [`Experiment::resume`] continues an interrupted run from its folder:
//!   the same configuration, the units its journal lacks;
//! - [`Experiment::report_again`] rebuilds a folder's report from its
//!   journal, with this build's tables, without loading anything.
//!
//! A unit is what can be redone on its own: a load, a pair of loads that
//! share a stretch of a trace, a browsing session whose loads share
//! connections. Its key names it within the run; keys are made from what
//! the unit varies (setting, page, run…), so a resumed run finds the same
//! keys. Work that belongs to no planned unit (a testbed's link figures,
//! read once it is torn down) goes in with [`Run::note`].

mod error;
pub mod inputs;
pub mod kinds;
mod progress;
pub mod traces;

use std::collections::HashMap;
use std::path::Path;

use mewa_report::{read_config, Journal, Report, ResultFolder};
use serde::de::DeserializeOwned;
use serde::Serialize;

pub use error::{at_least_one, needs_root, rtt_in_range, ExperimentError};
pub use inputs::{
    ca_dir_or_default, default_ca_dir, import_recordings, CorpusChoice, OriginChoice,
};
pub use kinds::{Browser, Congestion, UnknownName};
pub use progress::{Progress, Step};
pub use traces::{find_trace, read_trace, read_traces, SHARED_TRACES};

/// One unit of an experiment's work, as planned before it starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unit {
    /// Its key, unique within the run and the same in a resumed run.
    pub key: String,
    /// What the progress line says while it runs.
    pub what: String,
    /// How many page loads (or transfers) it makes: the progress total is
    /// their sum.
    pub loads: usize,
}

impl Unit {
    /// A unit of one load.
    pub fn one(key: String, what: String) -> Unit {
        Unit {
            key,
            what,
            loads: 1,
        }
    }
}

/// An experiment under way: its units, the journal of those done, and the
/// progress it reports. [`Experiment::execute`] asks it which units are
/// left and tells it each one it finishes.
pub struct Run<'a, R> {
    units: Vec<Unit>,
    index: HashMap<String, usize>,
    journal: Journal<R>,
    progress: &'a Progress,
    done: usize,
    total: usize,
    folder: Option<&'a Path>,
}

impl<R> std::fmt::Debug for Run<'_, R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Run")
            .field("units", &self.units.len())
            .field("done", &self.done)
            .field("total", &self.total)
            .finish_non_exhaustive()
    }
}

impl<'a, R: Serialize + DeserializeOwned> Run<'a, R> {
    fn new(
        units: Vec<Unit>,
        journal: Journal<R>,
        progress: &'a Progress,
        folder: Option<&'a Path>,
    ) -> Run<'a, R> {
        let index = units
            .iter()
            .enumerate()
            .map(|(i, u)| (u.key.clone(), i))
            .collect();
        let total = units.iter().map(|u| u.loads).sum();
        let done = units
            .iter()
            .filter(|u| journal.contains(&u.key))
            .map(|u| u.loads)
            .sum();
        Run {
            units,
            index,
            journal,
            progress,
            done,
            total,
            folder,
        }
    }

    /// Whether the unit `key` is done (in this run or before it was
    /// interrupted).
    pub fn is_done(&self, key: &str) -> bool {
        self.journal.contains(key)
    }

    /// Whether any planned unit whose key starts with `prefix` is still to
    /// do: a testbed shared by those units need not start when none is.
    pub fn any_left(&self, prefix: &str) -> bool {
        self.units
            .iter()
            .any(|u| u.key.starts_with(prefix) && !self.journal.contains(&u.key))
    }

    /// Reports that the unit `key` starts.
    pub fn begin(&self, key: &str) {
        let what = self
            .index
            .get(key)
            .and_then(|&i| self.units.get(i))
            .map_or(key, |u| u.what.as_str());
        self.progress.step(self.done, self.total, what);
    }

    /// Reports progress inside a unit of several loads: `k` of them done.
    pub fn within(&self, k: usize, what: &str) {
        self.progress.step(self.done + k, self.total, what);
    }

    /// The unit `key` finished with `records`: appended to the journal
    /// before it counts as done.
    pub fn finish(&mut self, key: &str, records: Vec<R>) -> Result<(), ExperimentError> {
        self.journal.append(key, records)?;
        if let Some(u) = self.index.get(key).and_then(|&i| self.units.get(i)) {
            self.done += u.loads;
        }
        Ok(())
    }

    /// Records that belong to no planned unit (a testbed's link figures,
    /// read once it is torn down), under `prefix` and a number that keeps
    /// them apart from an earlier, interrupted attempt's.
    pub fn note(&mut self, prefix: &str, records: Vec<R>) -> Result<(), ExperimentError> {
        let mut n = 0;
        while self.journal.contains(&format!("{prefix}#{n}")) {
            n += 1;
        }
        self.journal.append(&format!("{prefix}#{n}"), records)?;
        Ok(())
    }

    /// Every record so far, in the order the units finished.
    pub fn records(&self) -> impl Iterator<Item = &R> {
        self.journal.records()
    }

    /// The result folder, if the run writes one.
    pub fn folder(&self) -> Option<&Path> {
        self.folder
    }

    fn finished(self) -> Vec<R> {
        self.progress.step(self.total, self.total, "done");
        self.journal.into_records()
    }
}

/// An experiment: see the module's documentation. `Self` is the prepared
/// experiment: its configuration with the inputs read.
pub trait Experiment: Sized {
    /// The result folder's prefix and `meta.json`'s name (`fld-pages`).
    const NAME: &'static str;
    /// How it is started (`mewa lab fld pages`).
    const COMMAND: &'static str;
    /// Its settings.
    type Config: Serialize + DeserializeOwned;
    /// What a unit produces, one journal record each.
    type Record: Serialize + DeserializeOwned;
    /// Its report.
    type Report: Report;

    /// Checks `config` and reads its inputs (pages, traces): every mistake
    /// in the configuration is found here, without root and before
    /// anything starts.
    fn prepare(config: &Self::Config) -> Result<Self, ExperimentError>;

    /// Its configuration.
    fn config(&self) -> &Self::Config;

    /// The parent of the result folder (`None`: the run writes none).
    fn out(&self) -> Option<&Path>;

    /// Checks what the machine must offer: root for the testbed, a kernel
    /// congestion control, a browser.
    fn check_machine(&self) -> Result<(), ExperimentError>;

    /// Every unit of the run, in order.
    fn units(&self) -> Vec<Unit>;

    /// Runs every unit `run` does not have yet, telling it each one that
    /// finishes.
    fn execute(&self, run: &mut Run<'_, Self::Record>) -> Result<(), ExperimentError>;

    /// The report of `records` (every unit's, in the order they finished).
    fn report(
        &self,
        records: Vec<Self::Record>,
        folder: Option<ResultFolder>,
    ) -> Result<Self::Report, ExperimentError>;

    /// The records of a result folder written before the experiment kept a
    /// journal of units, read from its `result.json`; `None` when the
    /// experiment had no such folders or the folder has no such file.
    /// Asked only when the journal is empty or holds nothing but an older
    /// journal's bare records (which may be less than `result.json`
    /// holds: figures joined after the loads were written).
    fn older_records(_dir: &Path) -> Option<Result<Vec<Self::Record>, ExperimentError>> {
        None
    }

    /// Runs the experiment: checks, makes the result folder, runs every
    /// unit, and returns the report (the caller writes it).
    fn run(config: &Self::Config, progress: &Progress) -> Result<Self::Report, ExperimentError> {
        let exp = Self::prepare(config)?;
        exp.check_machine()?;
        let folder = match exp.out() {
            Some(out) => Some(ResultFolder::create(
                out,
                Self::NAME,
                Self::COMMAND,
                exp.config(),
            )?),
            None => None,
        };
        let journal = match &folder {
            Some(f) => Journal::open(f.path())?,
            None => Journal::in_memory(),
        };
        let records = exp.run_units(journal, folder.as_ref().map(ResultFolder::path), progress)?;
        exp.report(records, folder)
    }

    /// Continues the interrupted run in the result folder `dir`: its own
    /// configuration, the units its journal lacks; `meta.json` notes it.
    fn resume(dir: &Path, progress: &Progress) -> Result<Self::Report, ExperimentError> {
        let config: Self::Config = read_config(&dir.join(mewa_report::folder::CONFIG))?;
        let exp = Self::prepare(&config)?;
        exp.check_machine()?;
        let mut folder = ResultFolder::existing(dir)?;
        let journal = Journal::open(dir)?;
        folder.note_resumed()?;
        let records = exp.run_units(journal, Some(dir), progress)?;
        exp.report(records, Some(folder))
    }

    /// The report of the result folder `dir`, rebuilt from its journal
    /// with this build's tables; nothing is loaded and nothing needs root.
    fn report_again(dir: &Path) -> Result<Self::Report, ExperimentError> {
        let config: Self::Config = read_config(&dir.join(mewa_report::folder::CONFIG))?;
        let exp = Self::prepare(&config)?;
        let folder = ResultFolder::existing(dir)?;
        let journal: Journal<Self::Record> = Journal::open(dir)?;
        let older = journal.is_empty() || journal.is_older();
        let records = match (older, Self::older_records(dir)) {
            (true, Some(older)) => older?,
            _ => journal.into_records(),
        };
        exp.report(records, Some(folder))
    }

    /// Runs the units `journal` lacks and returns every record.
    #[doc(hidden)]
    fn run_units(
        &self,
        journal: Journal<Self::Record>,
        folder: Option<&Path>,
        progress: &Progress,
    ) -> Result<Vec<Self::Record>, ExperimentError> {
        let mut run = Run::new(self.units(), journal, progress, folder);
        run.progress.step(run.done, run.total, "starting");
        self.execute(&mut run)?;
        Ok(run.finished())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mewa_report::{ReportError, Table};
    use serde::Deserialize;
    use std::path::PathBuf;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// Counts every unit it runs; stops with an error once it has run
    /// `stop_after` of them (an interrupted run).
    #[derive(Debug, Clone, Serialize, Deserialize)]
    struct Config {
        units: usize,
        stop_after: Option<usize>,
        out: PathBuf,
    }

    static RAN: AtomicUsize = AtomicUsize::new(0);

    struct Counting(Config);

    struct Counted {
        records: Vec<usize>,
        folder: Option<ResultFolder>,
    }

    impl Report for Counted {
        fn text(&self) -> String {
            format!("{:?}", self.records)
        }
        fn csv(&self) -> Vec<(&'static str, Table)> {
            Vec::new()
        }
        fn json(&self) -> Result<String, ReportError> {
            mewa_report::to_json("the records", &self.records)
        }
        fn plots(&self, _: &Path) -> Result<Vec<PathBuf>, ReportError> {
            Ok(Vec::new())
        }
        fn markdown(&self) -> String {
            self.text()
        }
        fn folder(&self) -> Option<&ResultFolder> {
            self.folder.as_ref()
        }
    }

    impl Experiment for Counting {
        const NAME: &'static str = "counting";
        const COMMAND: &'static str = "mewa lab counting";
        type Config = Config;
        type Record = usize;
        type Report = Counted;

        fn prepare(config: &Config) -> Result<Counting, ExperimentError> {
            at_least_one("--units", config.units)?;
            Ok(Counting(config.clone()))
        }
        fn config(&self) -> &Config {
            &self.0
        }
        fn out(&self) -> Option<&Path> {
            Some(&self.0.out)
        }
        fn check_machine(&self) -> Result<(), ExperimentError> {
            Ok(())
        }
        fn units(&self) -> Vec<Unit> {
            (0..self.0.units)
                .map(|i| Unit::one(format!("u{i}"), format!("unit {i}")))
                .collect()
        }
        fn execute(&self, run: &mut Run<'_, usize>) -> Result<(), ExperimentError> {
            let mut ran = 0;
            for i in 0..self.0.units {
                let key = format!("u{i}");
                if run.is_done(&key) {
                    continue;
                }
                if self.0.stop_after == Some(ran) {
                    return Err(ExperimentError::Config {
                        field: "--stop",
                        message: "interrupted".into(),
                    });
                }
                run.begin(&key);
                RAN.fetch_add(1, Ordering::SeqCst);
                run.finish(&key, vec![i * 10])?;
                ran += 1;
            }
            run.note("extra", vec![999])?;
            Ok(())
        }
        fn report(
            &self,
            records: Vec<usize>,
            folder: Option<ResultFolder>,
        ) -> Result<Counted, ExperimentError> {
            Ok(Counted { records, folder })
        }
    }

    #[test]
    fn an_interrupted_run_resumes_where_it_stopped_and_its_report_is_rebuilt() {
        let out = std::env::temp_dir().join(format!("mewa-contract-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&out);
        let config = Config {
            units: 5,
            stop_after: Some(3),
            out: out.clone(),
        };
        let steps = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let seen = steps.clone();
        let progress = Progress::new(move |s| {
            mewa_model::sync::lock(&seen).push((s.done, s.total));
        });
        let before = RAN.load(Ordering::SeqCst);
        let e = Counting::run(&config, &progress)
            .err()
            .expect("interrupted");
        assert!(e.to_string().contains("interrupted"), "{e}");
        assert_eq!(RAN.load(Ordering::SeqCst) - before, 3);
        // The folder holds the configuration and the three units done.
        let dir = std::fs::read_dir(&out)
            .expect("out")
            .filter_map(Result::ok)
            .map(|e| e.path())
            .next()
            .expect("a result folder");
        let journal =
            std::fs::read_to_string(dir.join(mewa_report::journal::JOURNAL)).expect("journal");
        assert_eq!(journal.lines().count(), 3);
        // Every step had the total from the start.
        assert!(mewa_model::sync::lock(&steps).iter().all(|&(_, t)| t == 5));
        // Resumed (the saved configuration still says stop after three of
        // those it runs): the two left run, the three done do not.
        let report = Counting::resume(&dir, &progress).expect("resumed");
        assert_eq!(RAN.load(Ordering::SeqCst) - before, 5);
        assert_eq!(report.records, vec![0, 10, 20, 30, 40, 999]);
        let meta: mewa_report::Provenance =
            read_config(&dir.join(mewa_report::folder::META)).expect("meta");
        assert_eq!(meta.resumed.len(), 1);
        assert_eq!(
            mewa_model::sync::lock(&steps).first().copied(),
            Some((0, 5))
        );
        assert!(mewa_model::sync::lock(&steps).contains(&(3, 5)));
        // Rebuilt without running anything.
        let again = Counting::report_again(&dir).expect("rebuilt");
        assert_eq!(again.records, report.records);
        assert_eq!(RAN.load(Ordering::SeqCst) - before, 5);
        assert_eq!(again.folder().map(ResultFolder::path), Some(dir.as_path()));
        // A configuration that does not check out is refused before any
        // folder is made.
        let bad = Config { units: 0, ..config };
        assert!(Counting::run(&bad, &Progress::none()).is_err());
        assert_eq!(std::fs::read_dir(&out).expect("out").count(), 1);
        let _ = std::fs::remove_dir_all(&out);
    }
}
