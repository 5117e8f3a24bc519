//! `mewa-origin`: the origin server of the lab.
//!
//! One process serves a whole [`mewa_corpus::Corpus`] for all of its
//! hostnames (virtual hosts chosen by `Host` / `:authority`):
//!
//! - HTTP/1.1 and HTTP/2 over TLS, chosen by ALPN (`h2`, `http/1.1`);
//! - cleartext HTTP/1.1 and h2c by prior knowledge on the same port, told
//!   apart by the h2 preface;
//! - HTTP/3 over QUIC (quinn + h3), with the congestion controller taken from
//!   a [`quinn::congestion::ControllerFactory`] the caller passes in (quinn's
//!   own, or FLD_TCP / Reno from `mewa-cc`: [`quic_cc`]).
//!
//! Modules:
//! - [`store`]: every body generated once at start, with its validators
//!   (`ETag`, `Last-Modified`), looked up by host and path.
//! - [`h2`]: our own HTTP/2 server (HTTP/1.1 is hyper's).
//! - [`respond`]: the pure request → response function (virtual hosts,
//!   methods, conditional requests, traversal checks), shared by all HTTP
//!   versions.
//! - [`early_hints`]: `103 Early Hints` for a page's document (the links
//!   a CDN would send, from the page), served over HTTP/2 behind a switch.
//! - [`tls`]: the local test CA (created once, reused) and the leaf
//!   certificate for every corpus host.
//! - [`tcp`]: listener sockets with a per-socket TCP congestion control,
//!   buffers and an accept hook.
//! - [`quic_cc`]: FLD_TCP and Reno (`mewa-cc`) as quinn congestion
//!   controllers, and the names `--quic-cc` takes for every controller.
//! - [`iw`]: seed 001's initial window as the client asks for it
//!   (`mewa-iw`), set per connection over Linux TCP (BPF) and QUIC.
//! - [`headguard`]: an HTTP/1.1 connection's keep-alive wait told apart
//!   from the wait for a request that has started.
//! - [`server`]: [`Origin`], which binds the listeners and serves until told
//!   to stop.
//!
//! docs/ORIGIN.md describes what is served and how to trust the certificates.

pub mod early_hints;
pub mod h2;
pub mod headguard;
pub mod iw;
pub mod quic_cc;
pub mod respond;
pub mod server;
pub mod store;
pub mod tcp;
pub mod tls;

mod h3srv;

pub use early_hints::{early_hints, EarlyHints, EarlyHintsTable};
pub use iw::IwPolicy;
pub use quic_cc::{QuicCc, QuicCcError, QuicCongestion};
pub use respond::{respond, HttpOptions};
pub use server::{run_until_ctrl_c, serve, Origin, OriginConfig, OriginError};
pub use store::{Entry, Store, StoreError};
pub use tcp::{
    available_congestion_controls, bind_tcp, congestion_of, AcceptHook, TcpError, TcpOptions,
};
pub use tls::{Ca, Certs, TlsError};
