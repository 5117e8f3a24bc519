//! A run's result folder: `OUT/<experiment>-<stamp>/`, made when the run
//! starts with the configuration (`config.json`) and what produced it
//! (`meta.json`) inside, so that even a run that fails half-way leaves what
//! it was asked to do, and any figure can be re-run from its folder. The
//! run's work goes into the folder's journal ([`crate::journal`]) as it is
//! done; the report's files are written at the end.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::time::{rfc3339_ms, stamp, unix_ms};
use crate::{to_json, write_file, ReportError};

/// The configuration's file in a result folder.
pub const CONFIG: &str = "config.json";
/// The provenance's file in a result folder.
pub const META: &str = "meta.json";

/// What produced a result folder, written as `meta.json`: enough to tell
/// two runs' machines and builds apart and to re-run the figure.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Provenance {
    /// The experiment (`baseline`, `meh`, `fld-pages`, …).
    pub experiment: String,
    /// `mewa`'s version.
    pub mewa_version: String,
    /// The git commit the binary was built from (`unknown` outside a
    /// checkout).
    pub git_commit: String,
    /// The running kernel's release (`/proc/sys/kernel/osrelease`).
    pub kernel: String,
    /// CPUs available to this process.
    pub cpus: usize,
    /// When the run started, RFC 3339 UTC.
    pub started: String,
    /// How to run it again.
    pub rerun: String,
    /// Each time an interrupted run was continued from its journal: when,
    /// and by which build (a run finished by another commit says so).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resumed: Vec<Resumption>,
}

/// One continuation of an interrupted run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Resumption {
    /// When, RFC 3339 UTC.
    pub at: String,
    /// The git commit of the build that continued it.
    pub git_commit: String,
}

/// The commit this crate was built from (`unknown` outside a checkout).
fn git_commit() -> String {
    option_env!("MEWA_GIT_COMMIT")
        .filter(|c| !c.is_empty())
        .unwrap_or("unknown")
        .to_string()
}

impl Provenance {
    /// This build and machine, now; `command` is how the experiment is
    /// started (`mewa lab fld pages`).
    pub fn now(experiment: &str, command: &str, dir: &Path) -> Provenance {
        let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .map(|s| s.trim().to_string())
            .unwrap_or_else(|_| "unknown".into());
        Provenance {
            experiment: experiment.to_string(),
            mewa_version: env!("CARGO_PKG_VERSION").to_string(),
            git_commit: git_commit(),
            kernel,
            cpus: std::thread::available_parallelism().map_or(1, |n| n.get()),
            started: rfc3339_ms(unix_ms()),
            rerun: format!("{command} --config {}", dir.join(CONFIG).display()),
            resumed: Vec::new(),
        }
    }
}

/// A run's result folder, holding the configuration and provenance from
/// the moment the run starts.
#[derive(Debug, Clone)]
pub struct ResultFolder {
    path: PathBuf,
    provenance: Provenance,
}

impl ResultFolder {
    /// Creates `out/<experiment>-<stamp>` (with a numeric suffix if two
    /// runs start in the same second) and writes `config.json` and
    /// `meta.json` into it; `command` is how the experiment is started.
    pub fn create<C: Serialize>(
        out: &Path,
        experiment: &str,
        command: &str,
        config: &C,
    ) -> Result<ResultFolder, ReportError> {
        let base = format!("{experiment}-{}", stamp());
        let mut path = out.join(&base);
        let mut k = 1;
        while path.exists() {
            k += 1;
            path = out.join(format!("{base}-{k}"));
        }
        std::fs::create_dir_all(&path).map_err(|source| ReportError::Io {
            path: path.clone(),
            source,
        })?;
        let provenance = Provenance::now(experiment, command, &path);
        write_file(&path.join(CONFIG), &to_json("the configuration", config)?)?;
        write_file(&path.join(META), &to_json("the provenance", &provenance)?)?;
        Ok(ResultFolder { path, provenance })
    }

    /// An existing result folder, its `meta.json` read back: to write its
    /// report again, or to continue its run.
    pub fn existing(path: &Path) -> Result<ResultFolder, ReportError> {
        let provenance = read_config(&path.join(META))?;
        Ok(ResultFolder {
            path: path.to_path_buf(),
            provenance,
        })
    }

    /// Notes in `meta.json` that the run is being continued now, by this
    /// build.
    pub fn note_resumed(&mut self) -> Result<(), ReportError> {
        self.provenance.resumed.push(Resumption {
            at: rfc3339_ms(unix_ms()),
            git_commit: git_commit(),
        });
        write_file(
            &self.path.join(META),
            &to_json("the provenance", &self.provenance)?,
        )
    }

    /// The folder.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// What produced it.
    pub fn provenance(&self) -> &Provenance {
        &self.provenance
    }
}

/// Reads a JSON file of a result folder back: an experiment's
/// `config.json` (or any file of that form), `meta.json`.
pub fn read_config<C: serde::de::DeserializeOwned>(path: &Path) -> Result<C, ReportError> {
    let text = std::fs::read_to_string(path).map_err(|e| ReportError::ReadBack {
        path: path.to_path_buf(),
        message: format!("reading it: {e}"),
        source: Box::new(e),
    })?;
    serde_json::from_str(&text).map_err(|e| ReportError::ReadBack {
        path: path.to_path_buf(),
        message: format!("not this experiment's configuration: {e}"),
        source: Box::new(e),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct Probe {
        pages: Vec<String>,
    }

    #[test]
    fn result_folder_holds_config_and_provenance() {
        let out = std::env::temp_dir().join(format!("mewa-rf-{}", std::process::id()));
        let cfg = Probe {
            pages: vec!["622".into()],
        };
        let a = ResultFolder::create(&out, "probe", "mewa lab probe", &cfg).expect("create");
        let b = ResultFolder::create(&out, "probe", "mewa lab probe", &cfg).expect("create twice");
        assert_ne!(a.path(), b.path(), "two runs in one second share a folder");
        let back: Probe = read_config(&a.path().join(CONFIG)).expect("read back");
        assert_eq!(back, cfg);
        let meta: Provenance = read_config(&a.path().join(META)).expect("meta");
        assert_eq!(meta.experiment, "probe");
        assert!(meta.cpus >= 1);
        assert!(
            meta.rerun.starts_with("mewa lab probe --config"),
            "{}",
            meta.rerun
        );
        assert!(meta.resumed.is_empty());
        let mut again = ResultFolder::existing(a.path()).expect("existing");
        again.note_resumed().expect("note");
        let meta: Provenance = read_config(&a.path().join(META)).expect("meta");
        assert_eq!(meta.resumed.len(), 1);
        assert_eq!(meta.started, a.provenance().started);
        let e = read_config::<Probe>(&a.path().join(META)).expect_err("meta is not a config");
        assert!(e.to_string().contains(META), "{e}");
        let _ = std::fs::remove_dir_all(&out);
    }
}
