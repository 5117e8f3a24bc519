//! A run's journal, `runs.jsonl` in its result folder: every unit of work
//! the run finished, with what it produced, one JSON line per unit,
//! appended the moment the unit ends. A run stopped half-way (a crash, a
//! killed process, a full disk) keeps every unit it finished; the run can
//! be continued from it and its report rebuilt from it.
//!
//! A unit is what an experiment can redo on its own: one page load, a
//! pair of loads that must share a stretch of a trace, or one browsing
//! session whose loads share their connections. A line is written with
//! one `write` after the unit's records are complete, so a unit is either
//! in the journal whole or not at all; a line torn by a crash (the last
//! one, without its newline) is dropped when the journal is read, and cut
//! off before the next line is appended.
//!
//! Journals written before units existed hold one record per line; they
//! are read too (each record a unit of its own, under a key no unit of a
//! new run has), so older folders' reports can still be rebuilt.

use std::collections::HashSet;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::ReportError;

/// The journal's file in a result folder.
pub const JOURNAL: &str = "runs.jsonl";

/// One line of the journal.
#[derive(Serialize, Deserialize)]
struct Line<R> {
    /// The unit's key, unique within the run.
    unit: String,
    /// What the unit produced.
    records: Vec<R>,
}

/// A line as read: a unit, or a bare record of an older journal.
#[derive(Deserialize)]
#[serde(untagged)]
enum Stored<R> {
    Unit(Line<R>),
    Bare(R),
}

/// The journal of one run: the units it finished and their records, in the
/// order they finished. Without a file (a run that writes no folder) it
/// keeps them in memory only.
#[derive(Debug)]
pub struct Journal<R> {
    path: Option<PathBuf>,
    units: Vec<(String, Vec<R>)>,
    keys: HashSet<String>,
    /// Units read from bare lines of an older journal.
    older: usize,
}

impl<R> Journal<R> {
    /// A journal kept in memory only.
    pub fn in_memory() -> Journal<R> {
        Journal {
            path: None,
            units: Vec::new(),
            keys: HashSet::new(),
            older: 0,
        }
    }

    /// Whether the unit `key` is done.
    pub fn contains(&self, key: &str) -> bool {
        self.keys.contains(key)
    }

    /// Units done.
    pub fn len(&self) -> usize {
        self.units.len()
    }

    /// Whether no unit is done.
    pub fn is_empty(&self) -> bool {
        self.units.is_empty()
    }

    /// Whether the journal holds units and every one of them is a bare
    /// record of an older journal: a folder written before units existed,
    /// whose `result.json` may hold more than its journal.
    pub fn is_older(&self) -> bool {
        !self.units.is_empty() && self.older == self.units.len()
    }

    /// Every record, unit by unit in the order they finished.
    pub fn records(&self) -> impl Iterator<Item = &R> {
        self.units.iter().flat_map(|(_, r)| r)
    }

    /// Every record, unit by unit in the order they finished.
    pub fn into_records(self) -> Vec<R> {
        self.units.into_iter().flat_map(|(_, r)| r).collect()
    }

    /// The journal's file, if it has one.
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }
}

impl<R: Serialize + DeserializeOwned> Journal<R> {
    /// The journal of the result folder `dir`: what is in it already (none
    /// when the file does not exist yet), appended to from now on. A torn
    /// last line is dropped and cut off the file; any other line that is
    /// not a unit of this experiment is an error naming it.
    pub fn open(dir: &Path) -> Result<Journal<R>, ReportError> {
        let path = dir.join(JOURNAL);
        let mut journal = Journal {
            path: Some(path.clone()),
            units: Vec::new(),
            keys: HashSet::new(),
            older: 0,
        };
        let text = match std::fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(journal),
            Err(source) => return Err(ReportError::Io { path, source }),
        };
        // Everything after the last newline is a line the run did not
        // finish writing.
        let whole = text.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
        if whole < text.len() {
            tracing::warn!(
                "{}: dropping a torn last line ({} bytes) of an interrupted run",
                path.display(),
                text.len() - whole
            );
            let f = std::fs::OpenOptions::new()
                .write(true)
                .open(&path)
                .map_err(|source| ReportError::Io {
                    path: path.clone(),
                    source,
                })?;
            f.set_len(whole as u64).map_err(|source| ReportError::Io {
                path: path.clone(),
                source,
            })?;
        }
        for (i, line) in text[..whole].split(|&b| b == b'\n').enumerate() {
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            let stored: Stored<R> =
                serde_json::from_slice(line).map_err(|e| ReportError::ReadBack {
                    path: path.clone(),
                    message: format!("line {} is not a unit of this experiment: {e}", i + 1),
                    source: Box::new(e),
                })?;
            match stored {
                Stored::Unit(l) => journal.remember(l.unit, l.records),
                Stored::Bare(r) => {
                    journal.older += 1;
                    journal.remember(format!("#line-{}", i + 1), vec![r]);
                }
            }
        }
        Ok(journal)
    }

    /// Records that the unit `key` finished with `records`: one line
    /// appended to the file (and flushed) before it counts as done.
    pub fn append(&mut self, key: &str, records: Vec<R>) -> Result<(), ReportError> {
        if let Some(path) = &self.path {
            let line = Line {
                unit: key.to_string(),
                records,
            };
            let mut text = serde_json::to_string(&line).map_err(|source| ReportError::Json {
                what: "a journal line",
                source,
            })?;
            text.push('\n');
            let io = |source| ReportError::Io {
                path: path.clone(),
                source,
            };
            let mut f = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .map_err(io)?;
            f.write_all(text.as_bytes()).map_err(io)?;
            f.flush().map_err(io)?;
            self.remember(line.unit, line.records);
        } else {
            self.remember(key.to_string(), records);
        }
        Ok(())
    }

    fn remember(&mut self, key: String, records: Vec<R>) {
        self.keys.insert(key.clone());
        self.units.push((key, records));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    struct Load {
        page: String,
        plt_s: Option<f64>,
    }

    fn load(page: &str, plt: f64) -> Load {
        Load {
            page: page.into(),
            plt_s: Some(plt),
        }
    }

    fn dir(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("mewa-journal-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).expect("dir");
        d
    }

    #[test]
    fn units_survive_a_reopen_in_order() {
        let d = dir("reopen");
        let mut j = Journal::<Load>::open(&d).expect("new");
        assert!(j.is_empty());
        j.append("a/0", vec![load("a", 1.0)]).expect("append");
        j.append("b/0", vec![load("b", 2.0), load("b", 2.5)])
            .expect("append");
        let back = Journal::<Load>::open(&d).expect("reopen");
        assert!(back.contains("a/0") && back.contains("b/0") && !back.contains("c/0"));
        assert_eq!(back.len(), 2);
        assert_eq!(
            back.into_records(),
            vec![load("a", 1.0), load("b", 2.0), load("b", 2.5)]
        );
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn a_torn_last_line_is_dropped_and_cut_off() {
        let d = dir("torn");
        let mut j = Journal::<Load>::open(&d).expect("new");
        j.append("a/0", vec![load("a", 1.0)]).expect("append");
        let path = d.join(JOURNAL);
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .expect("open");
        f.write_all(br#"{"unit":"b/0","records":[{"pa"#)
            .expect("tear");
        let mut j = Journal::<Load>::open(&d).expect("reopen");
        assert!(j.contains("a/0") && !j.contains("b/0"));
        j.append("b/0", vec![load("b", 2.0)]).expect("append after");
        let back = Journal::<Load>::open(&d).expect("reopen again");
        assert_eq!(back.into_records(), vec![load("a", 1.0), load("b", 2.0)]);
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn a_foreign_line_is_named_and_older_bare_records_are_read() {
        let d = dir("foreign");
        let path = d.join(JOURNAL);
        std::fs::write(
            &path,
            "{\"page\":\"a\",\"plt_s\":1.0}\n{\"unit\":\"b\",\"records\":[{\"page\":\"b\",\"plt_s\":null}]}\n",
        )
        .expect("write");
        let j = Journal::<Load>::open(&d).expect("older journal");
        assert_eq!(j.len(), 2);
        assert!(j.contains("b"));
        assert!(!j.is_older(), "a unit line among them");
        std::fs::write(&path, "{\"page\":\"a\",\"plt_s\":1.0}\n").expect("write");
        let j = Journal::<Load>::open(&d).expect("older journal");
        assert!(j.is_older());
        assert!(!Journal::<Load>::in_memory().is_older());
        std::fs::write(&path, "{\"page\":\"a\",\"plt_s\":1.0}\n[1, 2]\n").expect("write");
        let e = Journal::<Load>::open(&d).expect_err("not a unit");
        assert!(e.to_string().contains("line 2"), "{e}");
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn in_memory_journals_keep_units_without_a_file() {
        let mut j = Journal::<Load>::in_memory();
        j.append("a", vec![load("a", 1.0)]).expect("append");
        assert!(j.contains("a") && j.path().is_none());
        assert_eq!(j.records().count(), 1);
    }
}
