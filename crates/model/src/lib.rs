//! # mewa-model
//!
//! Pure page-load models and the decision algorithms of the mewa seeds. No I/O,
//! no clocks: every function takes numbers and returns numbers, so the edge, the
//! client and the lab can all call the same code, and tests run anywhere.
//!
//! | module | seed | what |
//! |---|---|---|
//! | [`http`] | 000 eq. 1–2, Alg. 1 | T_HTTP, T_idle, n parallel connections, connection-count choice |
//! | [`balance`] | 000 §II | size-balanced assignment of objects to n connections |
//! | [`pull`] | 000 §II, ours | rate-following pull dispatch of held objects over n connections |
//! | [`iw`] | 001 eq. 1–2, Alg. 1 | t_principle, content-aware initial window |
//! | [`fld`] | 002 §2.1 | FLD_TCP vs Reno slow-start schedule |
//! | [`repro`] | all | the papers' tables and figures, recomputed, with the papers' numbers |
//!
//! ## Units and conventions (see `docs/MODEL.md` for why)
//!
//! - Sizes in bytes; 1 KB = 1000 bytes (the papers' "KB" and "kB").
//! - Bandwidth in bit/s; 1 Mbit/s = 10^6 bit/s.
//! - Times in seconds (`f64`).
//! - Segment size [`DEFAULT_MSS`] = 1500 bytes (seed 002 states it; it also fits
//!   seed 000 Table I best), initial window [`DEFAULT_IW`] = 10 segments.

pub mod balance;
pub mod fld;
pub mod http;
pub mod iw;
pub mod pull;
pub mod repro;
pub mod sync;

/// Default TCP segment size in bytes. Seed 002 §2.1: "each segment holds 1500
/// bytes for simplicity".
pub const DEFAULT_MSS: u32 = 1500;

/// Default initial congestion window in segments. Seed 000 §III: "IW is the
/// initial congestion window which equals to 10" (RFC 6928).
pub const DEFAULT_IW: u32 = 10;

/// Slow-start growth factor per RTT with delayed ACKs. Seed 000 §III: "The
/// constant 1.5 in this equation indicates that the delayed-ack is enabled".
pub const DELAYED_ACK_GROWTH: f64 = 1.5;

/// Bytes in one KB, as the papers use it.
pub const KB: u64 = 1000;

/// Bits per second in one Mbit/s.
pub const MBPS: f64 = 1e6;

/// Why a model input was rejected.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ModelError {
    /// Bandwidth must be a finite number of bit/s above zero.
    #[error("bandwidth must be finite and > 0 bit/s, got {0}")]
    Bandwidth(f64),
    /// RTT must be a finite, non-negative number of seconds.
    #[error("RTT must be finite and >= 0 s, got {0}")]
    Rtt(f64),
    /// Segment size must be at least one byte.
    #[error("segment size (MSS) must be > 0 bytes")]
    Mss,
    /// Initial window must be at least one segment.
    #[error("initial window must be > 0 segments")]
    InitialWindow,
    /// A time input (computation latency) must be finite and non-negative.
    #[error("{what} must be finite and >= 0 s, got {value}")]
    Time {
        /// Which input.
        what: &'static str,
        /// The rejected value.
        value: f64,
    },
    /// A policy or growth parameter is outside its meaningful range.
    #[error("{what} is out of range: {value} ({expected})")]
    Parameter {
        /// Which parameter.
        what: &'static str,
        /// The rejected value.
        value: f64,
        /// What would be accepted.
        expected: &'static str,
    },
}

/// `ceil` that ignores floating-point noise just above an integer, so that
/// `log_1.5(1.5^k)` computed as `k + 1e-15` still counts as `k` rounds.
pub(crate) fn ceil_tol(x: f64) -> f64 {
    (x - 1e-9).ceil()
}

/// `floor` that ignores floating-point noise just below an integer.
pub(crate) fn floor_tol(x: f64) -> f64 {
    (x + 1e-9).floor()
}

/// Logarithm to base `b`.
pub(crate) fn log_base(x: f64, b: f64) -> f64 {
    x.ln() / b.ln()
}
