//! `mewa-edge`: the Mobile Edge Hint server (seed 000 §II).
//!
//! The edge keeps page metadata and edge→origin latency and answers DNS with
//! a compact hint (crate `mewa-hint` defines the hint and its DNS carriers).
//!
//! Modules:
//! - [`app`]: wires the edge together: binds the sockets and starts the DNS
//!   server, the admin API and the periodic jobs (`mewa edge serve`).
//! - [`state`]: the edge's shared state (store, DNS service, zone,
//!   counters) and its jobs (hint rebuild, count flush, latency probes,
//!   tracer passes); what the admin API reads.
//! - [`admin`]: read-only HTTP admin API, status page, Prometheus metrics.
//! - [`config`]: the TOML configuration, every knob documented.
//! - [`cookie`]: DNS cookies (RFC 7873, RFC 9018 server cookies) that
//!   exempt a client proving its address from rate limiting.
//! - [`dns`]: the answering rules without I/O (zone, hint option, TXT
//!   fallback, forwarding decision, size limits): shared types in `dns`,
//!   the rules in `dns::general`, and its child `dns::general::fast`, the
//!   common query shape answered from its wire bytes.
//! - [`monitor`]: edge→origin RTT by TCP connect time, smoothed (EWMA).
//! - [`net`]: a network `addr/prefix`, the clients queries are forwarded
//!   for.
//! - [`server`]: the DNS runtime (UDP with SO_REUSEPORT, TCP, forwarding,
//!   metrics).
//! - [`hints`]: the hint book, every known page's hint encoded ahead of time.
//! - [`store`]: the SQLite store of pages, objects, origins, latency samples
//!   and query counts.
//! - [`tracer`]: the page tracer: headless Chromium over CDP records a
//!   page's objects, sizes and computation latency.

pub mod admin;
pub mod app;
pub mod config;
pub mod cookie;
pub mod dns;
pub mod egress;

pub mod hints;
pub mod monitor;
pub mod net;
pub mod rrl;
pub mod server;
pub mod state;
pub mod store;
pub mod tracer;
