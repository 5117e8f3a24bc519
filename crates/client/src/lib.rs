//! `mewa-client`: the hint-aware client of seed 000.
//!
//! - [`advice`] (pure): checks a received hint against sane bounds — it
//!   comes from an unauthenticated channel — and turns it into a plan: the
//!   number of parallel HTTP/2 connections (seed 000 Algorithm 1 with
//!   BDP = radio bandwidth × (radio RTT + wired RTT)) and the size-balanced
//!   object → connection map.
//! - [`rate`] (pure): the radio bandwidth the client plans with, from what
//!   its own recent loads delivered (no configured or trace-mean rate).
//! - [`resolve`]: the DNS exchange with the edge (hint request option, UDP
//!   then TCP when told to), timing it as the radio RTT.
//! - [`cookie`]: DNS cookies (RFC 7873) the resolver sends and echoes, so
//!   that the edge's rate limiter knows our address is real.
//! - [`dispatch`]: the books of n connections behind a lock, and the one
//!   wait loop that places a request when a connection has room (the
//!   proxy's and the lab loader's).
//! - [`iw`] (pure): seed 001's initial window to ask the server for, from
//!   the hint's page size, computation latency and α and the handshake RTT.
//! - [`proxy`]: the local forward proxy a browser uses: hint, plan, n h2c
//!   connections, requests on the planned connections ([`proxy::Session`]
//!   without the proxy).

pub mod advice;
pub mod cookie;
pub mod dispatch;
pub mod iw;
pub mod proxy;
pub mod rate;
pub mod resolve;
