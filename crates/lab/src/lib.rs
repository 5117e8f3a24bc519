//! `mewa-lab`: loading pages and measuring the loads (issue 4).
//!
//! - [`record`]: what one page load leaves behind — per object (connection,
//!   discovery, request, first byte, end, bytes, the body's arrivals over
//!   time) and per connection (open, connected, handshake done, close). Pure
//!   data, JSON on disk.
//! - [`metrics`]: the seeds' page-load metrics computed from a record (pure).
//! - [`har`]: a record as HAR 1.2, so that existing tools read it (pure).
//! - [`loader`]: the built-in browser stand-in that produces records over
//!   HTTP/1.1, HTTP/2 and HTTP/3 (tokio runtime).
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
//! - [`chromium`]: headless Chromium as a browsing session (one profile,
//!   one tab, many loads, sockets kept) driven over DevTools; the
//!   cellular study's headline browser.
//! - [`meh`]: seed 000's Mobile Edge Hint experiment — client, edge and
//!   origin in three namespaces, each page with and without the hint.

pub mod accel;
pub mod baseline;
pub mod bed;
pub mod bulk;
pub mod cellular;
pub mod chromium;
pub mod cross;
pub mod experiment;
pub mod fld;
pub mod har;
pub mod iw;
pub mod load;
pub mod loader;
pub mod meh;
pub mod metrics;
pub mod parity;
pub mod record;
pub mod replay;
pub mod repro;
