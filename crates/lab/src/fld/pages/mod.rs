//! `mewa lab fld pages`: pages loaded through a link shared with cross
//! traffic (seed 002 §3's LTE and 3G settings, optionally swept over the
//! bottleneck queue), the server's connections alternating between cubic
//! and the controls compared with it load by load, with seed 002's page
//! metrics (Figs. 6–11) and its connection-size study.
//!
//! A unit is one load (setting with its queue, run, page, page type,
//! control); each setting and queue has a testbed of its own, started only
//! while it has loads left. A testbed's cross-traffic log is known once it
//! is torn down and goes into the journal then ([`Run::note`]); a resumed
//! setting has a log per testbed that finished. No state passes from load
//! to load: which control goes first follows from the run's index.
//!
//! - [`config`]: the settings, page types, and the loads in order;
//! - [`run`]: one setting's testbed and its loads;
//! - [`load`]: the figures of a load;
//! - [`record`]: what the journal keeps;
//! - [`report`]: the tables and plots.

pub mod config;
pub mod load;
pub mod record;
pub mod report;
pub mod run;

use std::path::Path;

use mewa_corpus::Corpus;
use mewa_report::{ResultFolder, SectionReport};
use serde::Deserialize;

pub use config::{Cell, Config, Network, PageType, Setting};
pub use record::{CrossEntry, PageRun, Record};

use crate::bed::OriginSettings;
use crate::experiment::{
    at_least_one, needs_root, Congestion, Experiment, ExperimentError, Run, Unit,
};
use crate::fld::check_controls;

/// `mewa lab fld pages`, prepared: the configuration, its pages, the
/// origin's settings.
#[derive(Debug)]
pub struct Pages {
    config: Config,
    corpus: Corpus,
    origin: OriginSettings,
}

/// What `result.json` of a run from before the journal holds.
#[derive(Deserialize)]
struct Older {
    runs: Vec<PageRun>,
    cross: Vec<CrossEntry>,
}

impl Experiment for Pages {
    const NAME: &'static str = "fld-pages";
    const COMMAND: &'static str = "mewa lab fld pages";
    type Config = Config;
    type Record = Record;
    type Report = SectionReport;

    fn prepare(config: &Config) -> Result<Pages, ExperimentError> {
        at_least_one("--loads", config.loads)?;
        at_least_one("--cc", config.ccs.len())?;
        at_least_one("--setting", config.settings.len())?;
        at_least_one("--type", config.protocols.len())?;
        at_least_one("--queue", config.queue_ms.len())?;
        if let Some(q) = config.queue_ms.iter().find(|&&q| q == 0 || q > 10_000) {
            return Err(ExperimentError::Config {
                field: "--queue",
                message: format!("{q} ms: give 1ms to 10000ms"),
            });
        }
        let corpus = config.corpus.load()?;
        if config.protocols.contains(&PageType::ChromiumHttp)
            && !matches!(corpus.provenance, mewa_corpus::Provenance::Generated { .. })
        {
            return Err(ExperimentError::Config {
                field: "--type",
                message: format!(
                    "{}: recorded pages keep their recorded schemes and cannot be \
                     loaded in the clear; use it with generated pages (meh15, general), or \
                     {} for HTTP/1.1 over TLS",
                    PageType::ChromiumHttp,
                    PageType::ChromiumH1
                ),
            });
        }
        let origin = config.origin.settings()?;
        Ok(Pages {
            config: config.clone(),
            corpus,
            origin,
        })
    }

    fn config(&self) -> &Config {
        &self.config
    }

    fn out(&self) -> Option<&Path> {
        Some(&self.config.out)
    }

    /// Root, the controls (cubic as well: the origin's listener runs it),
    /// and Chromium when a page type needs it.
    fn check_machine(&self) -> Result<(), ExperimentError> {
        if self.config.protocols.iter().any(|p| p.chromium().is_some()) {
            crate::browser::check_binary(&self.config.chromium, "")?;
        }
        needs_root()?;
        let mut ccs = self.config.ccs.clone();
        ccs.push(Congestion::Cubic);
        check_controls(&ccs)
    }

    fn units(&self) -> Vec<Unit> {
        let cells = self.config.cells();
        cells
            .iter()
            .flat_map(|cell| self.config.loads(cell, &self.corpus.pages))
            .map(|id| Unit::one(id.key(), id.what()))
            .collect()
    }

    /// Each setting and queue on a testbed of its own, one after another.
    fn execute(&self, run: &mut Run<'_, Record>) -> Result<(), ExperimentError> {
        let work = std::env::temp_dir().join(format!("mewa-fld-{}", std::process::id()));
        std::fs::create_dir_all(&work).map_err(ExperimentError::io("creating", &work))?;
        let inputs = run::Inputs {
            config: &self.config,
            corpus: &self.corpus,
            origin: &self.origin,
            work: &work,
        };
        for cell in self.config.cells() {
            run::setting(&inputs, &cell, run)?;
        }
        let _ = std::fs::remove_dir_all(&work);
        Ok(())
    }

    fn report(
        &self,
        records: Vec<Record>,
        folder: Option<ResultFolder>,
    ) -> Result<SectionReport, ExperimentError> {
        let mut runs = Vec::new();
        let mut cross = Vec::new();
        for r in records {
            match r {
                Record::Load(l) => runs.push(l),
                Record::Cross(c) => cross.push(c),
            }
        }
        Ok(report::report(&self.config, runs, cross, folder))
    }

    /// A folder from before the journal: its `result.json`'s loads and
    /// cross-traffic logs.
    fn older_records(dir: &Path) -> Option<Result<Vec<Record>, ExperimentError>> {
        let older = mewa_report::read_config::<Older>(&dir.join("result.json"));
        Some(older.map_err(ExperimentError::from).map(|o| {
            o.runs
                .into_iter()
                .map(Record::Load)
                .chain(o.cross.into_iter().map(Record::Cross))
                .collect()
        }))
    }
}

#[cfg(test)]
mod tests;
