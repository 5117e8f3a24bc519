//! The arguments every `mewa lab` experiment shares, declared once and
//! flattened into each: how a run starts (`--config`, `--resume`,
//! `--report`, `--out`), the pages, the origin, a cellular trace.

use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::Args;
use mewa_lab::experiment::{find_trace, Congestion, CorpusChoice, OriginChoice};
use mewa_report::read_config;

/// How a run starts and where it writes.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// Start from this configuration (a result folder's config.json);
    /// flags given as well override its values.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["resume", "report"])]
    pub config: Option<PathBuf>,
    /// Continue the interrupted run in this result folder with its own
    /// configuration: the loads its journal (runs.jsonl) lacks are run,
    /// then the report is written.
    #[arg(long, value_name = "DIR", conflicts_with = "report")]
    pub resume: Option<PathBuf>,
    /// Rebuild the report of an earlier run from its result folder's
    /// journal with this build's tables (no loads, no root).
    #[arg(long, value_name = "DIR")]
    pub report: Option<PathBuf>,
    /// Parent of the timestamped result folder [default: out/lab].
    #[arg(long, short)]
    pub out: Option<PathBuf>,
}

impl RunArgs {
    /// The configuration to start from: `--config`'s, or the default.
    pub fn base<C: serde::de::DeserializeOwned + Default>(&self) -> anyhow::Result<C> {
        match &self.config {
            Some(p) => Ok(read_config(p)?),
            None => Ok(C::default()),
        }
    }
}

/// The pages.
#[derive(Debug, Args)]
pub struct CorpusArgs {
    /// Corpus JSON (`mewa corpus gen/import`), or recordings imported on the
    /// fly (a HAR, a DevTools log, a Lighthouse folder, or a folder of them)
    /// [default: the experiment's own pages].
    #[arg(long)]
    pub corpus: Option<PathBuf>,
    /// Only pages whose name contains this text (repeatable).
    #[arg(long = "page")]
    pub pages: Vec<String>,
}

impl CorpusArgs {
    /// Applies the flags given.
    pub fn apply(&self, corpus: &mut CorpusChoice) -> anyhow::Result<()> {
        if let Some(p) = &self.corpus {
            // Absolute, so that config.json re-runs from anywhere.
            corpus.path = Some(absolute(p)?);
        }
        if !self.pages.is_empty() {
            corpus.pages = self.pages.clone();
        }
        Ok(())
    }
}

/// The local test CA.
#[derive(Debug, Args)]
pub struct CaArgs {
    /// Directory of the local test CA (default: $XDG_DATA_HOME/mewa/ca or
    /// ~/.local/share/mewa/ca).
    #[arg(long)]
    pub ca_dir: Option<PathBuf>,
}

impl CaArgs {
    /// Applies the flag given.
    pub fn apply(&self, origin: &mut OriginChoice) -> anyhow::Result<()> {
        if let Some(d) = &self.ca_dir {
            origin.ca_dir = Some(absolute(d)?);
        }
        Ok(())
    }
}

/// The origin: the test CA and its congestion control.
#[derive(Debug, Args)]
pub struct OriginArgs {
    #[command(flatten)]
    pub ca: CaArgs,
    /// TCP congestion control of the origin's sockets [default: cubic].
    #[arg(long)]
    pub cc: Option<Congestion>,
}

impl OriginArgs {
    /// Applies the flags given.
    pub fn apply(&self, origin: &mut OriginChoice) -> anyhow::Result<()> {
        self.ca.apply(origin)?;
        if let Some(c) = &self.cc {
            origin.cc = c.clone();
        }
        Ok(())
    }
}

/// A cellular trace instead of a fixed rate.
#[derive(Debug, Args)]
pub struct TraceArgs {
    /// Instead of a fixed rate: a mahimahi downlink trace, any file (your
    /// own recording, or a bare name looked up in ../shared/data/traces).
    /// Its uplink is `X.up` beside a `X.down`, or the file --uplink names.
    #[arg(long)]
    pub trace: Option<PathBuf>,
    /// The uplink trace of --trace, when it is not `X.up` beside `X.down`.
    #[arg(long, requires = "trace")]
    pub uplink: Option<PathBuf>,
}

impl TraceArgs {
    /// Sets the configuration's trace files: found, checked and absolute,
    /// so that config.json names the same trace from any directory.
    pub fn apply(
        &self,
        trace: &mut Option<PathBuf>,
        uplink: &mut Option<PathBuf>,
    ) -> anyhow::Result<()> {
        if let Some(t) = &self.trace {
            let (down, up) = find_trace(t, self.uplink.as_deref())?;
            *trace = Some(absolute(&down)?);
            *uplink = match &self.uplink {
                Some(_) => Some(absolute(&up)?),
                None => None,
            };
        }
        Ok(())
    }
}

/// `p` made absolute against the working directory: resolved (no `..`,
/// no links) when it exists, else as given (a CA folder made later).
pub fn absolute(p: &Path) -> anyhow::Result<PathBuf> {
    match std::fs::canonicalize(p) {
        Ok(c) => Ok(c),
        Err(_) => {
            std::path::absolute(p).with_context(|| format!("{}: not a usable path", p.display()))
        }
    }
}
