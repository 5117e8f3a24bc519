//! `mewa-loader`: the built-in browser stand-in — it loads a corpus page
//! the way a browser does and records every object and connection — and
//! what is computed from its records: the seeds' page-load metrics and
//! HAR 1.2.
//!
//! - [`record`]: what one page load leaves behind, per object and per
//!   connection, in microseconds. Pure data, JSON on disk.
//! - [`metrics`]: the seeds' page-load metrics computed from a record
//!   (pure).
//! - [`har`]: a record as HAR 1.2, so that existing tools read it (pure).
//! - [`options`], [`assign`], [`session`]: how a page is loaded, which
//!   connection carries each object, and the loads themselves (tokio).
//!
//! How a load proceeds:
//!
//! The loader fetches one corpus page the way a browser
//! does and records every object and connection ([`record`]).
//!
//! Discovery follows the browser's order:
//! - the root document first;
//! - an HTML document's references (`discovery: html`) are requested as its
//!   bytes arrive, each once the bytes holding its URL are in (a browser's
//!   preload scanner; [`LoadOptions::streaming`], on by default);
//! - when a CSS file has arrived completely, the objects its rules
//!   reference (`discovery: css`) are requested at once, in page order;
//! - a redirect's target when the redirect has arrived (recorded pages);
//! - when a script has arrived, it runs on the page's single main thread for
//!   its `compute_ms` (scripts queue behind each other, as on a browser's
//!   main thread), and only then are the objects it fetches
//!   (`discovery: script`) requested.
//!
//! - with [`LoadOptions::prefetch`] (a client that knows the page's object
//!   URLs from a hint), those objects are requested right after the
//!   document, and discovery later finds them already requested.
//!
//! Requests carry Chromium's RFC 9218 `priority` header
//! ([`chromium_priorities`]), which the origin's HTTP/2 server schedules
//! by, so the no-hint baseline is served as Chromium would be.
//!
//! Connections:
//! - **HTTP/1.1**: one request at a time per connection, up to
//!   [`LoadOptions::connections`] (default 6, Chrome's limit) per host; a
//!   request waits for a free connection when all are busy.
//! - **HTTP/2 and HTTP/3**: [`LoadOptions::connections`] multiplexed
//!   connections per origin group (1 = a browser's behaviour); an [`Assign`]
//!   policy decides which connection carries each object. With
//!   [`LoadOptions::coalesce`], hosts that resolve to the same address share
//!   the group, as Chrome coalesces HTTP/2 connections when the certificate
//!   covers every name.
//! - **Across loads**: [`load`] starts cold and closes its connections
//!   when it ends; a [`Session`] keeps them open for its next load (a
//!   browser's page views with think time between, seed 003), replacing
//!   those that died meanwhile.

pub mod assign;
mod conn;
pub mod har;
pub mod metrics;
pub mod options;
mod pool;
pub mod record;
pub mod session;

pub use assign::{Assign, Fixed, LeastOutstanding, RoundRobin, WarmFirst};
pub use conn::ConnectError;
pub use options::{chromium_priorities, IwAsk, LateUrls, LoadOptions, Resolver};
pub use session::{load, LoadError, Session};
