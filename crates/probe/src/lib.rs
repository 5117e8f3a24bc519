//! `mewa-probe`: what TCP did during a page load, read from the kernel and
//! from the wire rather than from either end's own account — so that the
//! cellular study's figures (windows, timeouts, spurious retransmissions)
//! do not depend on what the loader or the browser believed.
//!
//! - [`tcpinfo`]: every TCP socket's `tcp_info` in a namespace over time
//!   (sock_diag dumps, pure wire parsers under a thin sampler), and the
//!   namespace's TCP counters.
//! - [`retrans`] (pure): retransmissions on the wire, spurious or genuine,
//!   from a link's pcap records.

pub mod retrans;
pub mod tcpinfo;
