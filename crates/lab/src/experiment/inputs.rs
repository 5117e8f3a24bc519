//! The inputs every experiment shares: the pages it loads (a corpus file,
//! recordings imported on the fly, or the experiment's own generated
//! pages, filtered by name) and how its origin serves them (congestion
//! control, the test CA).

use std::path::{Path, PathBuf};

use mewa_corpus::{generate, Corpus, Preset};
use serde::{Deserialize, Serialize};

use super::kinds::Congestion;
use super::ExperimentError;
use crate::bed::OriginSettings;

/// Which pages an experiment loads.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CorpusChoice {
    /// A corpus JSON file (`mewa corpus gen` / `mewa corpus import`), or
    /// recordings imported on the fly (a HAR, a DevTools log, a Lighthouse
    /// folder, or a folder of them; see [`import_recordings`]); none: the
    /// experiment's own pages (`meh15` with seed 1 unless it says other).
    pub path: Option<PathBuf>,
    /// Only pages whose name contains one of these (empty: every page).
    pub pages: Vec<String>,
}

impl CorpusChoice {
    /// Reads the corpus (`meh15` with seed 1 when none is named) and
    /// applies the page filter.
    pub fn load(&self) -> Result<Corpus, ExperimentError> {
        self.load_or(|| Ok(generate(Preset::Meh15, 1)))
    }

    /// Reads the corpus, or makes the experiment's own with `default` when
    /// none is named, and applies the page filter.
    pub fn load_or(
        &self,
        default: impl FnOnce() -> Result<Corpus, ExperimentError>,
    ) -> Result<Corpus, ExperimentError> {
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
            None => default()?,
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
    let none = |why: String| ExperimentError::NoRecordings {
        path: path.to_path_buf(),
        why,
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
        merged = import_path(path).map_err(|source| ExperimentError::Import {
            path: path.to_path_buf(),
            source,
        })?;
        sources.push(path.display().to_string());
    }
    if merged.pages.is_empty() {
        return Err(none("no importable page recordings".into()));
    }
    let name = path.file_stem().map_or_else(
        || "imported".to_string(),
        |s| s.to_string_lossy().into_owned(),
    );
    let imported = mewa_corpus::from_import_report(&merged, &name, sources);
    if imported.corpus.pages.is_empty() {
        return Err(none(format!(
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
    /// TCP congestion control of the origin's sockets.
    pub cc: Congestion,
}

impl Default for OriginChoice {
    /// cubic (Linux's default before bbr, and what the seeds' servers ran),
    /// the default CA folder.
    fn default() -> OriginChoice {
        OriginChoice {
            ca_dir: None,
            cc: Congestion::Cubic,
        }
    }
}

impl OriginChoice {
    /// The testbed's origin settings, with the CA folder resolved.
    pub fn settings(&self) -> Result<OriginSettings, ExperimentError> {
        Ok(OriginSettings {
            congestion: self.cc.to_string(),
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
