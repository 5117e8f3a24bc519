//! # mewa-accel
//!
//! The pure core of seed 004's accelerator: a reverse-proxy cache that
//! rewrites a page's references to other domains so that one HTTP/2
//! connection carries the whole page ("the SPDY accelerator rewrites the file
//! itself so that its page resources (site-b.com) belong to the same domain
//! as the main HTML file (site-a.com)", seed 004 §III).
//!
//! - [`site`]: which hosts a site serves, which it may fold (the allowlist),
//!   and the folded path form; validated configuration.
//! - [`mapping`]: [`fold`](mapping::fold) a resource URL into a path on the
//!   document's host and [`unfold`](mapping::unfold) a request path back into
//!   the URL to fetch, refusing anything that could make the accelerator an
//!   open proxy.
//! - [`rewrite`]: streaming rewriters for HTML (on `lol_html`), CSS and
//!   `srcset`, with counts for metrics.
//! - [`csp`]: `Content-Security-Policy` values adjusted so that the folded
//!   forms of the hosts a policy allows are allowed too.
//!
//! - [`cache`]: stored responses by RFC 9111's rules (memory with a byte
//!   bound, optional disk), time passed in.
//! - [`server`]: `mewa accel serve`, the runtime: listeners, the request
//!   path, the upstream client, admin (metrics, status page, purge).
//!
//! Everything but [`server`] is sans-IO (the cache's disk copy aside):
//! values in, values out (docs/ACCEL.md).

pub mod cache;
pub mod csp;
pub mod mapping;
pub mod rewrite;
pub mod server;
pub mod site;
