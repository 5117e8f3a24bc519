//! What every experiment shares: the corpus it loads, the progress it
//! reports, and the result folder it writes with the configuration and the
//! provenance that produced it.
//!
//! An experiment is a `Config` (serde, its `Default` the CLI's defaults), a
//! `run(&Config, &Progress) -> Result<Report, ExperimentError>`, and a
//! report implementing [`mewa_report::Report`]. A run that writes results
//! makes its [`mewa_report::ResultFolder`] first, with `config.json` and `meta.json`
//! inside, so that even a run that fails half-way leaves what it was asked
//! to do, and any figure can be re-run with
//! `mewa lab <experiment> --config FOLDER/config.json`.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use mewa_corpus::{generate, Corpus, Preset};
use mewa_link::core::trace::DeliveryTrace;
use serde::{Deserialize, Serialize};

use crate::bed::{BedError, OriginSettings};
use mewa_report::ReportError;

/// Why an experiment could not run or finish.
#[derive(Debug, thiserror::Error)]
pub enum ExperimentError {
    /// The corpus file could not be read.
    #[error("reading corpus {path}: {source}")]
    CorpusRead {
        /// The file named in the configuration.
        path: PathBuf,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// The corpus file is not a valid corpus.
    #[error("corpus {path}: {source} (make one with `mewa corpus gen` or `mewa corpus import`)")]
    Corpus {
        /// The file named in the configuration.
        path: PathBuf,
        /// What is wrong with it.
        source: mewa_corpus::CorpusError,
    },
    /// The page filter left no page.
    #[error("no page name contains any of {0:?}; list them with `mewa corpus show`")]
    NoPage(Vec<String>),
    /// A setting is out of range or contradicts another.
    #[error("{field}: {message}")]
    Config {
        /// The configuration field (as the CLI spells its flag).
        field: &'static str,
        /// What is wrong and what to give instead.
        message: String,
    },
    /// The machine cannot build the testbed (not root, no TUN).
    #[error(
        "the lab builds network namespaces and TUN links: run as root on Linux \
         (`sudo mewa lab …`): {0}"
    )]
    NeedsRoot(mewa_link::runtime::Error),
    /// The testbed failed.
    #[error(transparent)]
    Bed(#[from] BedError),
    /// The result folder could not be written.
    #[error(transparent)]
    Report(#[from] ReportError),
    /// An input file (a trace) could not be read or parsed.
    #[error("{path}: {message}")]
    Input {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        message: String,
    },
}

/// Refuses a count of zero for `field` (runs, pages…).
pub fn at_least_one(field: &'static str, n: usize) -> Result<(), ExperimentError> {
    if n == 0 {
        return Err(ExperimentError::Config {
            field,
            message: "must be at least 1".into(),
        });
    }
    Ok(())
}

/// Refuses a round trip outside 1 ms ..= 10 s for `field`.
pub fn rtt_in_range(field: &'static str, ms: u64) -> Result<(), ExperimentError> {
    if ms == 0 || ms > 10_000 {
        return Err(ExperimentError::Config {
            field,
            message: format!("{ms} ms: give a round trip between 1 ms and 10 s"),
        });
    }
    Ok(())
}

/// Checks that this process may build namespaces and TUN links.
pub fn needs_root() -> Result<(), ExperimentError> {
    mewa_link::runtime::probe().map_err(ExperimentError::NeedsRoot)
}

/// Which pages an experiment loads.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CorpusChoice {
    /// A corpus JSON file (`mewa corpus gen` / `mewa corpus import`), or
    /// recordings imported on the fly (a HAR, a DevTools log, a Lighthouse
    /// folder, or a folder of them; see [`import_recordings`]); none: the
    /// `meh15` preset with seed 1.
    pub path: Option<PathBuf>,
    /// Only pages whose name contains one of these (empty: every page).
    pub pages: Vec<String>,
}

impl CorpusChoice {
    /// Reads (or generates) the corpus and applies the page filter.
    pub fn load(&self) -> Result<Corpus, ExperimentError> {
        let mut corpus = match &self.path {
            Some(p) if p.is_dir() => imported(p)?,
            Some(p) => {
                let bytes = std::fs::read(p).map_err(|source| ExperimentError::CorpusRead {
                    path: p.clone(),
                    source,
                })?;
                match Corpus::from_json(&bytes) {
                    Ok(c) => c,
                    // Not a corpus: perhaps a recording. If it is not one
                    // either, the corpus error is the one to show.
                    Err(source) => imported(p).map_err(|_| ExperimentError::Corpus {
                        path: p.clone(),
                        source,
                    })?,
                }
            }
            None => generate(Preset::Meh15, 1),
        };
        if !self.pages.is_empty() {
            corpus
                .pages
                .retain(|p| self.pages.iter().any(|want| p.name.contains(want.as_str())));
            if corpus.pages.is_empty() {
                return Err(ExperimentError::NoPage(self.pages.clone()));
            }
        }
        Ok(corpus)
    }
}

/// Recordings at `path` as a corpus, as `mewa corpus import` makes it: a
/// HAR, a DevTools log or a Lighthouse folder, or a folder of them (files
/// that are not recordings are skipped and listed). Errors when nothing
/// importable is there.
pub fn import_recordings(
    path: &Path,
) -> Result<(mewa_corpus::Imported, Vec<String>), ExperimentError> {
    use mewa_hint::import::{import_dir, import_path, ImportReport};
    let input = |message: String| ExperimentError::Input {
        path: path.to_path_buf(),
        message,
    };
    let mut merged = ImportReport::default();
    let mut sources = Vec::new();
    let mut skipped = Vec::new();
    if path.is_dir() && !path.join("devtoolslog.json.gz").exists() {
        for (file, res) in import_dir(path) {
            match res {
                Ok(r) => {
                    sources.push(file.display().to_string());
                    merged.pages.extend(r.pages);
                    merged.missing_sizes.extend(r.missing_sizes);
                    merged.notes.extend(r.notes);
                }
                Err(e) => skipped.push(format!("skipped {}: {e}", file.display())),
            }
        }
    } else {
        merged = import_path(path).map_err(|e| input(e.to_string()))?;
        sources.push(path.display().to_string());
    }
    if merged.pages.is_empty() {
        return Err(input("no importable page recordings".into()));
    }
    let name = path.file_stem().map_or_else(
        || "imported".to_string(),
        |s| s.to_string_lossy().into_owned(),
    );
    let imported = mewa_corpus::from_import_report(&merged, &name, sources);
    if imported.corpus.pages.is_empty() {
        return Err(input(format!(
            "every page was skipped: {}",
            imported.notes.join("; ")
        )));
    }
    Ok((imported, skipped))
}

/// [`import_recordings`] for an experiment: the corpus, with a log line.
fn imported(p: &Path) -> Result<Corpus, ExperimentError> {
    let (imp, skipped) = import_recordings(p)?;
    tracing::info!(
        "imported {} pages from {} ({} notes, {} files skipped; `mewa corpus import` shows them)",
        imp.corpus.pages.len(),
        p.display(),
        imp.notes.len(),
        skipped.len()
    );
    Ok(imp.corpus)
}

/// How every experiment's origin serves: its TCP congestion control and
/// the test CA that signs its certificates.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct OriginChoice {
    /// The local test CA's folder (none: [`default_ca_dir`]).
    pub ca_dir: Option<PathBuf>,
    /// TCP congestion control of the origin's sockets (the kernel's name:
    /// cubic, reno, bbr).
    pub cc: String,
}

impl Default for OriginChoice {
    /// cubic (Linux's default before bbr, and what the seeds' servers ran),
    /// the default CA folder.
    fn default() -> OriginChoice {
        OriginChoice {
            ca_dir: None,
            cc: "cubic".into(),
        }
    }
}

impl OriginChoice {
    /// The testbed's origin settings, with the CA folder resolved.
    pub fn settings(&self) -> Result<OriginSettings, ExperimentError> {
        Ok(OriginSettings {
            congestion: self.cc.clone(),
            ca_dir: ca_dir_or_default(&self.ca_dir)?,
            iw: None,
        })
    }
}

/// The local test CA's default directory: `$XDG_DATA_HOME/mewa/ca`, else
/// `~/.local/share/mewa/ca` (one CA for every run, so a browser that was
/// told to trust it once keeps trusting it).
pub fn default_ca_dir() -> Option<PathBuf> {
    if let Some(d) = std::env::var_os("XDG_DATA_HOME").filter(|d| !d.is_empty()) {
        return Some(PathBuf::from(d).join("mewa/ca"));
    }
    std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".local/share/mewa/ca"))
}

/// `ca_dir` if given, else [`default_ca_dir`].
pub fn ca_dir_or_default(ca_dir: &Option<PathBuf>) -> Result<PathBuf, ExperimentError> {
    match ca_dir {
        Some(d) => Ok(d.clone()),
        None => default_ca_dir().ok_or(ExperimentError::Config {
            field: "--ca-dir",
            message: "neither XDG_DATA_HOME nor HOME is set; give the CA's directory".into(),
        }),
    }
}

/// Where a bare trace name is looked up (the shared data folder beside the
/// checkout).
pub const SHARED_TRACES: &str = "../shared/data/traces";

/// The downlink and uplink files of a mahimahi trace: `p` itself (any
/// file; its uplink is `uplink` when given, else `X.up` beside a `X.down`),
/// or a bare name found in [`SHARED_TRACES`] (with or without `.down`).
pub fn find_trace(p: &Path, uplink: Option<&Path>) -> Result<(PathBuf, PathBuf), ExperimentError> {
    let bad = |message: String| ExperimentError::Config {
        field: "--trace",
        message,
    };
    let down = if p.exists() {
        p.to_path_buf()
    } else {
        let shared = Path::new(SHARED_TRACES).join(p);
        let with_ext = shared.with_extension("down");
        if shared.exists() {
            shared
        } else if with_ext.exists() {
            with_ext
        } else {
            return Err(bad(format!(
                "{}: no such file, nor in {SHARED_TRACES} (e.g. Verizon-LTE-short.down)",
                p.display()
            )));
        }
    };
    let name = down.to_string_lossy().to_string();
    if let Some(up) = uplink {
        if !up.is_file() {
            return Err(ExperimentError::Config {
                field: "--uplink",
                message: format!("{}: no such file", up.display()),
            });
        }
        return Ok((down, up.to_path_buf()));
    }
    let Some(stem) = name.strip_suffix(".down") else {
        return Err(bad(format!(
            "{name}: name the uplink trace with --uplink FILE (or name the two X.down and X.up)"
        )));
    };
    let up = PathBuf::from(format!("{stem}.up"));
    if !up.exists() {
        return Err(bad(format!(
            "{name}: the uplink trace {} is missing",
            up.display()
        )));
    }
    Ok((down, up))
}

/// Reads and parses a mahimahi delivery trace.
pub fn read_trace(p: &Path) -> Result<DeliveryTrace, ExperimentError> {
    let input = |message: String| ExperimentError::Input {
        path: p.to_path_buf(),
        message,
    };
    let text = std::fs::read_to_string(p).map_err(|e| input(format!("reading the trace: {e}")))?;
    DeliveryTrace::parse(&text).map_err(|e| input(format!("not a mahimahi trace: {e}")))
}

/// A trace's two files found ([`find_trace`]) and read ([`read_trace`]):
/// the downlink file's path, the downlink and the uplink.
pub fn read_traces(
    trace: &Path,
    uplink: Option<&Path>,
) -> Result<(PathBuf, DeliveryTrace, DeliveryTrace), ExperimentError> {
    let (down, up) = find_trace(trace, uplink)?;
    let (d, u) = (read_trace(&down)?, read_trace(&up)?);
    Ok((down, d, u))
}

/// One step of a running experiment.
#[derive(Debug, Clone, Copy)]
pub struct Step<'a> {
    /// Loads done so far.
    pub done: usize,
    /// Loads in all.
    pub total: usize,
    /// What is running now (page, variant).
    pub what: &'a str,
}

/// Where an experiment reports its progress: a progress bar in the CLI,
/// nothing in tests. Shared by reference with the runner, which may call it
/// from the thread that drives the loads.
pub struct Progress {
    sink: Option<Mutex<Sink>>,
}

/// The callback behind a [`Progress`].
type Sink = Box<dyn FnMut(Step<'_>) + Send>;

impl Progress {
    /// Progress that goes nowhere.
    pub fn none() -> Progress {
        Progress { sink: None }
    }

    /// Progress that calls `f` on every step.
    pub fn new(f: impl FnMut(Step<'_>) + Send + 'static) -> Progress {
        Progress {
            sink: Some(Mutex::new(Box::new(f))),
        }
    }

    /// Reports a step.
    pub fn step(&self, done: usize, total: usize, what: &str) {
        if let Some(sink) = &self.sink {
            let mut f = mewa_model::sync::lock(sink);
            f(Step { done, total, what });
        }
    }
}

impl std::fmt::Debug for Progress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.sink.is_some() {
            "Progress(sink)"
        } else {
            "Progress(none)"
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_corpus_can_be_recordings_imported_on_the_fly() {
        let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("../hint/tests/fixtures");
        let har = fixtures.join("chrome-two-pages.har");
        let one = CorpusChoice {
            path: Some(har.clone()),
            pages: Vec::new(),
        };
        let c = one.load().expect("a HAR is a corpus");
        assert_eq!(c.pages.len(), 2);
        assert!(matches!(
            c.provenance,
            mewa_corpus::Provenance::Imported { .. }
        ));
        // A folder: its recordings, the broken ones skipped and listed.
        let (imp, skipped) = import_recordings(&fixtures).expect("folder");
        assert!(imp.corpus.pages.len() >= 4, "{}", imp.corpus.pages.len());
        assert!(
            skipped.iter().any(|s| s.contains("truncated.har")),
            "{skipped:?}"
        );
        // Neither a corpus nor a recording: the corpus error is shown.
        let bad = std::env::temp_dir().join(format!("mewa-notcorpus-{}.json", std::process::id()));
        std::fs::write(&bad, b"{\"name\": 3}").expect("write");
        let e = CorpusChoice {
            path: Some(bad.clone()),
            pages: Vec::new(),
        }
        .load()
        .expect_err("not a corpus");
        assert!(matches!(e, ExperimentError::Corpus { .. }), "{e}");
        let _ = std::fs::remove_file(&bad);
    }

    #[test]
    fn a_trace_needs_its_uplink_beside_it() {
        let dir = std::env::temp_dir().join(format!("mewa-tr-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let down = dir.join("x.down");
        std::fs::write(&down, "1\n2\n").expect("write");
        let e = find_trace(&down, None).expect_err("no uplink");
        assert!(e.to_string().contains("x.up"), "{e}");
        std::fs::write(dir.join("x.up"), "1\n").expect("write");
        assert_eq!(find_trace(&down, None).expect("found").1, dir.join("x.up"));
        let e = find_trace(&dir.join("y.down"), None).expect_err("missing");
        assert!(e.to_string().contains("no such file"), "{e}");
        // Any file name, with the uplink named.
        let (mine, up) = (dir.join("phone-1.trace"), dir.join("phone-1-up.trace"));
        std::fs::write(&mine, "3\n").expect("write");
        let e = find_trace(&mine, None).expect_err("uplink unknown");
        assert!(e.to_string().contains("--uplink"), "{e}");
        let e = find_trace(&mine, Some(&up)).expect_err("uplink missing");
        assert!(e.to_string().contains("phone-1-up.trace"), "{e}");
        std::fs::write(&up, "3\n").expect("write");
        assert_eq!(find_trace(&mine, Some(&up)).expect("found"), (mine, up));
        assert!(read_trace(&down).is_ok());
        std::fs::write(dir.join("bad.down"), "fast\n").expect("write");
        assert!(read_trace(&dir.join("bad.down")).is_err());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn corpus_filter_that_matches_nothing_is_an_error() {
        let c = CorpusChoice {
            path: None,
            pages: vec!["no-such-page".into()],
        };
        assert!(matches!(c.load(), Err(ExperimentError::NoPage(_))));
        let c = CorpusChoice {
            path: Some("/nonexistent/corpus.json".into()),
            pages: vec![],
        };
        assert!(matches!(c.load(), Err(ExperimentError::CorpusRead { .. })));
    }
}
