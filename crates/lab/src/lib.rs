//! `mewa-lab`: the testbed and the experiments that measure page loads on it.
//!
//! - [`bed`]: a client and an origin in network namespaces joined by an
//!   emulated link, loads run from the client's side.
//! - [`bulk`]: single TCP transfers with a chosen congestion control, and
//!   the bytes they put on the link per round trip (seed 002).
//! - [`cross`]: background flows (TCP with a chosen congestion control,
//!   or constant-rate UDP) between two extra hosts across the bottleneck.
//! - [`baseline`]: the first experiment — measured load times over one
//!   HTTP/2 connection beside seed 000's T_HTTP model.
//! - [`experiment`]: what every experiment shares — the corpus choice,
//!   the origin choice, traces and progress; its result folder and report
//!   are `mewa_report`'s.
//! - [`replay`]: whether a corpus (recorded pages above all) replays:
//!   every object arrives, with the loader and with Chromium.
//! - [`parity`]: the loader against Chromium without hints, the check
//!   that the baseline every gain is measured against is a browser's.
//! - [`fld`]: seed 002's FLD_TCP experiments — bulk transfers, fairness,
//!   and pages under cross traffic with Cubic or FLD_TCP at the server.
//! - [`accel`]: seed 004's accelerator experiment — the `accel7` page over
//!   HTTP/1.1, HTTPS, HTTP/2 per domain and HTTP/2 through `mewa accel`.
//! - [`cellular`]: seed 003's cellular TCP study — pages in sequence over
//!   the 3G and LTE radio models, the TCP knobs, and the RTO floor.
//! - [`browser`]: Chromium in the testbed: protocol flags, a browsing
//!   session's command, the binary check (driving it is `mewa_chromium`'s).
//! - [`measured`]: one measured Chromium load (paint marks, Speed Index,
//!   coverage, what came before the document), as every browser
//!   experiment makes it.
//! - [`meh`]: seed 000's Mobile Edge Hint experiment — client, edge and
//!   origin in three namespaces, each page with and without the hint.

pub mod accel;
pub mod baseline;
pub mod bed;
pub mod browser;
pub mod bulk;
pub mod cellular;
pub mod cross;
pub mod experiment;
pub mod fld;
pub mod iw;
pub mod load;
pub mod measured;
pub mod meh;
pub mod parity;
pub mod replay;
pub mod repro;
