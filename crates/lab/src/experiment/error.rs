//! Why an experiment could not run or finish, and the checks every
//! experiment makes of its configuration before anything starts. Every
//! error that wraps another keeps it as its source, so `{:#}` (the CLI's
//! way of printing) shows the whole chain.

use std::path::PathBuf;

use mewa_report::ReportError;

use crate::bed::BedError;

/// Why an experiment could not run or finish.
#[derive(Debug, thiserror::Error)]
pub enum ExperimentError {
    /// The corpus file could not be read.
    #[error("reading corpus {path}")]
    CorpusRead {
        /// The file named in the configuration.
        path: PathBuf,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
    /// The corpus file is not a valid corpus.
    #[error("corpus {path} (make one with `mewa corpus gen` or `mewa corpus import`)")]
    Corpus {
        /// The file named in the configuration.
        path: PathBuf,
        /// What is wrong with it.
        #[source]
        source: mewa_corpus::CorpusError,
    },
    /// Recordings could not be imported as a corpus.
    #[error("importing the recordings at {path}")]
    Import {
        /// The recording or folder.
        path: PathBuf,
        /// The importer's error.
        #[source]
        source: mewa_hint::import::ImportError,
    },
    /// A folder or file held no page that could be imported.
    #[error("{path}: {why}")]
    NoRecordings {
        /// The recording or folder.
        path: PathBuf,
        /// What was found instead.
        why: String,
    },
    /// The corpus generator refused the options an experiment gave it.
    #[error("generating the {what} pages")]
    Generate {
        /// Which pages (the preset and what varies).
        what: String,
        /// The generator's error.
        #[source]
        source: mewa_corpus::GenError,
    },
    /// The accelerator's configuration, as the experiment wrote it, is
    /// not valid.
    #[error("the accelerator's configuration")]
    AccelConfig(#[source] mewa_accel::server::ServeConfigError),
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
         (`sudo mewa lab …`)"
    )]
    NeedsRoot(#[source] mewa_link::runtime::Error),
    /// The testbed failed.
    #[error(transparent)]
    Bed(#[from] BedError),
    /// The result folder or its journal could not be written or read.
    #[error(transparent)]
    Report(#[from] ReportError),
    /// A mahimahi trace is not one.
    #[error("{path}: not a mahimahi trace")]
    Trace {
        /// The file.
        path: PathBuf,
        /// The parser's error.
        #[source]
        source: mewa_link::core::trace::TraceError,
    },
    /// A file or folder the run needs could not be made, read or written.
    #[error("{what} {path}")]
    Io {
        /// What the run was doing (`creating`, `reading the trace`).
        what: &'static str,
        /// The file or folder.
        path: PathBuf,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
    /// A bulk transfer failed.
    #[error("the transfer {what}")]
    Transfer {
        /// Which one (size and control).
        what: String,
        /// Why.
        #[source]
        source: crate::bulk::BulkError,
    },
    /// The background flows could not start.
    #[error("cross traffic")]
    Cross(#[source] crate::cross::CrossError),
    /// The `tcp_info` sampler could not start.
    #[error("sampling TCP_INFO")]
    Sampler(#[source] mewa_probe::tcpinfo::SamplerError),
    /// A link's capture could not be read.
    #[error("reading the capture {path}")]
    Pcap {
        /// The pcap file.
        path: PathBuf,
        /// The reader's error.
        #[source]
        source: mewa_link::pcap::PcapError,
    },
    /// The mobile edge's store could not be made or filled with the
    /// corpus' pages.
    #[error("the edge's store")]
    EdgeStore(#[source] mewa_edge::store::StoreError),
    /// The client could not ask the edge's DNS for a page's host (no answer
    /// over UDP or TCP, or a name no query can hold).
    #[error("asking the edge for {host}")]
    Resolve {
        /// The host asked for.
        host: String,
        /// The resolver's error.
        #[source]
        source: mewa_client::resolve::ResolveError,
    },
    /// A certificate or TLS configuration could not be made from the test
    /// CA (the local proxy's, say).
    #[error("{what}")]
    Tls {
        /// What was being made.
        what: &'static str,
        /// The TLS layer's error.
        #[source]
        source: mewa_origin::TlsError,
    },
    /// The RTO fix (a sock_ops program, or routes with `rto_min`) could
    /// not be put in place.
    #[error("the RTO floor: {what}")]
    Rto {
        /// What failed, with its cause when it is not an error value.
        what: String,
        /// The underlying error, when there is one.
        #[source]
        source: Option<Box<dyn std::error::Error + Send + Sync>>,
    },
    /// Headless Chromium could not be started, or stopped answering in
    /// the middle of a browsing session.
    #[error("Chromium")]
    Chromium(#[source] mewa_chromium::DevtoolsError),
    /// The Chromium binary the configuration names is not there.
    #[error("headless Chromium is needed{instead}")]
    NoChromium {
        /// Where it was looked for, and how to get one.
        #[source]
        source: mewa_chromium::NoChromium,
        /// What the experiment can do without it (`, or use --browser
        /// loader`); empty when nothing.
        instead: &'static str,
    },
}

impl ExperimentError {
    /// An I/O error while `what` on `path`.
    pub fn io(what: &'static str, path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> Self {
        let path = path.into();
        move |source| ExperimentError::Io { what, path, source }
    }
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
