//! `mewa-report`: how mewa shows what it measured — aligned text for the
//! terminal, CSV and JSON for other tools, SVG plots for people, and a
//! result folder that holds all of them beside the configuration that
//! produced them and the journal of the work done.
//!
//! Every experiment's report implements [`Report`]; the folder layout, the
//! provenance file, the journal and the file writing live here once, so a
//! new experiment only says which tables, plots and prose it has. The
//! benchmarks and the command line print their tables with [`Table`] too,
//! without depending on the lab.
//!
//! - [`table`]: aligned text, Markdown and CSV tables.
//! - [`plot`]: SVG line, point, CDF and box plots; [`linklog`]: a link's
//!   event log drawn over time.
//! - [`stats`]: mean, median, quantiles, the empirical CDF; [`paired`]:
//!   A/B pairs, their bootstrap intervals and Wilcoxon signed-rank test.
//! - [`sections`]: a report of titled tables and plots.
//! - [`folder`]: the result folder, its `config.json` and `meta.json`;
//!   [`journal`]: its `runs.jsonl`, what a run finished, unit by unit.
//! - [`time`]: RFC 3339 times and folder stamps.

pub mod folder;
pub mod journal;
pub mod linklog;
pub mod paired;
pub mod plot;
pub mod sections;
pub mod stats;
pub mod table;
pub mod time;

use std::path::{Path, PathBuf};

pub use folder::{read_config, Provenance, ResultFolder};
pub use journal::Journal;
pub use paired::{compare_pages, compare_pairs, PairedStats, Verdict};
pub use plot::{cdf_series, draw, draw_boxes, BoxGroup, Chart, Mark, Series};
pub use sections::{Plot, Section, SectionReport};
pub use stats::{cdf, mean, median, quantile};
pub use table::{opt, pct, Table};

/// Why a report could not be rendered or written.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// plotters refused to draw or to write the SVG file.
    #[error("drawing {path}: {message}")]
    Plot {
        /// The SVG file.
        path: PathBuf,
        /// plotters' own message.
        message: String,
    },
    /// A plot had no finite point (every load failed, or no sample).
    #[error("{0}: nothing to plot (no finite sample)")]
    NothingToPlot(PathBuf),
    /// An input file (a link event log) is not what it should be.
    #[error("{path}: {message}")]
    Input {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        message: String,
    },
    /// A file of the result folder could not be written.
    #[error("writing {path}: {source} (is the disk full or the folder read-only?)")]
    Io {
        /// The file.
        path: PathBuf,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// A file of an earlier run (`config.json`, `meta.json`, the journal)
    /// could not be read back.
    #[error("{path}: {message}")]
    ReadBack {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        message: String,
        /// The underlying error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// A value could not be turned into JSON (a non-finite float in a
    /// field that JSON cannot hold, for instance).
    #[error("serialising {what} as JSON: {source}")]
    Json {
        /// What was being serialised.
        what: &'static str,
        /// serde_json's error.
        source: serde_json::Error,
    },
}

/// Writes `text` to `path`, naming the file in the error.
pub fn write_file(path: &Path, text: &str) -> Result<(), ReportError> {
    std::fs::write(path, text).map_err(|source| ReportError::Io {
        path: path.to_path_buf(),
        source,
    })
}

/// Pretty JSON of `value`, naming `what` in the error.
pub fn to_json<T: serde::Serialize + ?Sized>(
    what: &'static str,
    value: &T,
) -> Result<String, ReportError> {
    serde_json::to_string_pretty(value).map_err(|source| ReportError::Json { what, source })
}

/// What an experiment's result renders as. The default [`Report::write`]
/// lays out every result folder the same way: `result.json`, one CSV per
/// table, the plots, `report.md`, and whatever [`Report::write_extra`]
/// adds (`config.json` and `meta.json` are already there: the
/// [`ResultFolder`] wrote them when the run started).
pub trait Report {
    /// The aligned text tables printed on the terminal at the end of a run.
    fn text(&self) -> String;
    /// The tables written as CSV, with their file names (`runs.csv`, …).
    fn csv(&self) -> Vec<(&'static str, Table)>;
    /// The whole result as JSON (`result.json`).
    fn json(&self) -> Result<String, ReportError>;
    /// Draws the report's SVG plots into `dir`; returns the files drawn.
    fn plots(&self, dir: &Path) -> Result<Vec<PathBuf>, ReportError>;
    /// The Markdown report (`report.md`), which links the plots.
    fn markdown(&self) -> String;
    /// The result folder the run created, if it made one.
    fn folder(&self) -> Option<&ResultFolder>;
    /// Files other than the common ones (HAR captures, …).
    fn write_extra(&self, _dir: &Path) -> Result<(), ReportError> {
        Ok(())
    }

    /// Writes everything into the run's result folder (nothing when the run
    /// made none); returns the folder.
    fn write(&self) -> Result<Option<PathBuf>, ReportError> {
        let Some(folder) = self.folder() else {
            return Ok(None);
        };
        let dir = folder.path();
        write_file(&dir.join("result.json"), &self.json()?)?;
        for (name, table) in self.csv() {
            write_file(&dir.join(name), &table.to_csv())?;
        }
        self.plots(dir)?;
        self.write_extra(dir)?;
        write_file(&dir.join("report.md"), &self.markdown())?;
        Ok(Some(dir.to_path_buf()))
    }
}
