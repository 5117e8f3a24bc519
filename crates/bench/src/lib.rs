//! `mewa-bench`: the benchmarks behind `mewa bench link|origin|edge|proxy`.
//! Each prints figures beside a baseline measured in the same run (a veth
//! pair, nghttpd and nginx, NSD, direct h2c), never a bare number: the
//! machine is shared and noisy, a ratio in one run is what can be compared.
//!
//! - [`link`]: the link emulator's throughput and CPU per packet against a
//!   veth pair (and the `mewa bench` command tree, [`BenchCmd`]).
//! - [`origin`]: the origin's requests/s against nghttpd and nginx over
//!   h2load.
//! - [`edge`]: the edge's DNS queries/s with and without hints against NSD
//!   over dnsperf.
//! - [`proxy`]: the local proxy's added latency and throughput against
//!   direct h2c.
//! - [`accel`]: the accelerator's cache hits against nginx `proxy_cache`
//!   in front of the same origin, and the latency each adds.
//! - [`util`]: one temporary directory, one program finder, /proc CPU time.
//!
//! The command-line shapes (`clap::Args`) live here with the benchmarks
//! they configure, so that the `mewa` binary only forwards to them.

pub mod accel;
pub mod edge;
pub mod link;
pub mod origin;
pub mod proxy;
pub mod util;

pub use link::{run, BenchCmd};

/// Why a benchmark could not run or finish. The message names the step
/// that failed (starting a server, parsing a tool's output, a namespace)
/// and what to do where there is something to do (install a tool, run as
/// root, build with --release).
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// A step of the benchmark failed; the text says which and why.
    #[error("{0}")]
    Failed(String),
    /// Namespaces or TUN links could not be set up (not root?).
    #[error(transparent)]
    Link(#[from] mewa_link::runtime::Error),
    /// A system call or file operation failed.
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// A result could not be written as JSON.
    #[error(transparent)]
    Json(#[from] serde_json::Error),
    /// An HTTP exchange with the proxy or the origin failed.
    #[error("HTTP: {0}")]
    Hyper(#[from] hyper::Error),
    /// A DNS message could not be built or parsed.
    #[error("DNS: {0}")]
    Dns(#[from] hickory_proto::ProtoError),
    /// A DNS answer could not be decoded.
    #[error("DNS answer: {0}")]
    DnsDecode(#[from] hickory_proto::serialize::binary::DecodeError),
    /// The hint option in a DNS message was malformed.
    #[error("hint option: {0}")]
    HintOption(#[from] mewa_hint::dns::DnsError),
    /// A hint did not decode.
    #[error("hint: {0}")]
    Hint(#[from] mewa_hint::wire::WireError),
    /// The edge's store failed.
    #[error("edge store: {0}")]
    Store(#[from] mewa_edge::store::StoreError),
    /// An HTTP request could not be built.
    #[error("HTTP request: {0}")]
    Http(#[from] http::Error),
}

/// A benchmark step's result.
pub type Result<T, E = BenchError> = std::result::Result<T, E>;

/// Adds what was being done to an error or a missing value, as
/// `doing: cause`.
pub trait Context<T> {
    /// With a fixed description.
    fn context(self, what: &str) -> Result<T, BenchError>;
    /// With a description built only on failure.
    fn with_context<S: std::fmt::Display>(self, what: impl FnOnce() -> S) -> Result<T, BenchError>;
}

impl<T, E: std::fmt::Display> Context<T> for Result<T, E> {
    fn context(self, what: &str) -> Result<T, BenchError> {
        self.map_err(|e| BenchError::Failed(format!("{what}: {e}")))
    }
    fn with_context<S: std::fmt::Display>(self, what: impl FnOnce() -> S) -> Result<T, BenchError> {
        self.map_err(|e| BenchError::Failed(format!("{}: {e}", what())))
    }
}

impl<T> Context<T> for Option<T> {
    fn context(self, what: &str) -> Result<T, BenchError> {
        self.ok_or_else(|| BenchError::Failed(what.to_string()))
    }
    fn with_context<S: std::fmt::Display>(self, what: impl FnOnce() -> S) -> Result<T, BenchError> {
        self.ok_or_else(|| BenchError::Failed(what().to_string()))
    }
}

/// Returns a [`BenchError::Failed`] with a formatted message.
macro_rules! bail {
    ($($arg:tt)*) => {
        return Err($crate::BenchError::Failed(format!($($arg)*)))
    };
}
pub(crate) use bail;
