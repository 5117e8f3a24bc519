//! # mewa-link
//!
//! The emulated mobile network every mewa measurement runs on.
//!
//! - [`core`]: the sans-IO link: packets and `now` go in, packets due out and
//!   the next timeout come back. Delay (fixed or from a delay trace), rate
//!   (constant or a mahimahi delivery-opportunity trace), a queue discipline
//!   (drop-tail, drop-head, CoDel), seeded random loss, RRC radio states (LTE,
//!   3G) and per-direction counters. Runs in virtual time in tests.
//! - `runtime` (Linux): TUN devices between network namespaces driven by the
//!   core, a topology API.
//! - [`pcap`] and [`eventlog`]: what crossed the link, for tcpdump/Wireshark
//!   and for `mewa link plot`.

pub mod core;
pub mod eventlog;
pub mod pcap;
#[cfg(target_os = "linux")]
pub mod runtime;
