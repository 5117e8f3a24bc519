//! Does a corpus replay? Each page loaded through the testbed by the
//! built-in loader and by headless Chromium, and what arrived compared with
//! what the page (a recording, or a generated page) holds.
//!
//! The testbed serves an imported corpus as the recordings were served
//! ([`crate::bed::Bed::start`]): each host (or group of hosts the recording
//! coalesced) at its own address with its own certificate, the recorded
//! statuses, redirects and server think times; a request for anything else
//! gets a 404 at once (the origin counts them) and an unrecorded host does
//! not resolve.

use std::net::SocketAddr;
use std::path::Path;

use mewa_corpus::Page;
use serde::Serialize;

use crate::bed::{Bed, BedError, CLIENT};
use crate::meh::browser::headless_load;
use crate::meh::netlog_requests;
use mewa_loader::record::Protocol;
use mewa_loader::LoadOptions;

/// What one load of a page brought, against the page's objects.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Arrival {
    /// Page name.
    pub page: String,
    /// Objects in the page.
    pub objects: usize,
    /// URLs of the page's objects that did not arrive (with the status the
    /// page expects), with why.
    pub missing: Vec<String>,
    /// Requests for URLs the page does not have (answered 404, or a host
    /// that does not resolve).
    pub unrecorded: Vec<String>,
    /// Seconds from the first request to the last byte (the loader's
    /// `done_us`, Chromium's NetLog span).
    pub plt_s: Option<f64>,
    /// Seconds from the same start to the last request for one of the
    /// page's objects: how long discovery took (the moment the request
    /// was decided: Chromium's `URL_REQUEST_START_JOB`, the loader's
    /// `discovered_us`; both before any connection it waits for).
    pub requested_s: Option<f64>,
}

/// `program` in the client namespace, in a private mount namespace where
/// `ours` is bind-mounted over `over` (the machine's file or folder is
/// not touched).
pub(crate) fn with_bind_mount(
    topo: &mewa_link::runtime::Topology,
    ours: &std::path::Path,
    over: &str,
    program: &std::path::Path,
) -> Result<std::process::Command, BedError> {
    let mut c = topo.command(CLIENT, "unshare")?;
    c.args(["--mount", "--", "sh", "-c"])
        .arg(format!(
            "mount --bind '{}' {over} && exec \"$0\" \"$@\"",
            ours.display()
        ))
        .arg(program);
    Ok(c)
}

/// Loads `page` with the built-in loader (HTTP/2 over TLS, a browser's
/// settings) and lists what did not arrive as the page expects.
pub fn with_loader(bed: &Bed, page: &Page) -> Result<Arrival, BedError> {
    let opts = bed.options(LoadOptions::browser(Protocol::H2, true));
    let record = bed.load(page, &opts)?;
    let mut missing: Vec<String> = page
        .objects
        .iter()
        .filter(|o| !record.objects.iter().any(|t| t.id == o.id && t.ok()))
        .map(|o| {
            let why = record
                .objects
                .iter()
                .find(|t| t.id == o.id)
                .and_then(|t| t.error.clone())
                .unwrap_or_else(|| "never requested".into());
            format!("{} ({why})", o.url("https"))
        })
        .collect();
    missing.extend(record.errors.iter().cloned());
    Ok(Arrival {
        page: page.name.clone(),
        objects: page.objects.len(),
        missing,
        unrecorded: Vec::new(),
        plt_s: record.done_us.map(|us| us as f64 / 1e6),
        // When the loader decided to ask (a connection may still be
        // opening), as Chromium's NetLog starts a request's job.
        requested_s: record
            .objects
            .iter()
            .map(|t| t.discovered_us)
            .max()
            .map(|us| us as f64 / 1e6),
    })
}

/// A Chromium binary and the flags a load starts it with beyond the lab's
/// own ([`crate::chromium::protocol_flags`] to choose the protocol).
#[derive(Debug, Clone, Copy)]
pub struct Browser<'a> {
    /// The binary.
    pub binary: &'a Path,
    /// Extra command-line flags.
    pub flags: &'a [&'a str],
    /// Load a generated page over `http://` from the origin's plain port:
    /// HTTP/1.1 in the clear, with the connections Chromium opens itself
    /// (seed 002's unencrypted pages). Recordings keep their own schemes.
    pub clear_text: bool,
}

impl<'a> Browser<'a> {
    /// `binary` with Chromium's defaults (HTTP/2 over TLS).
    pub fn plain(binary: &'a Path) -> Browser<'a> {
        Browser {
            binary,
            flags: &[],
            clear_text: false,
        }
    }
}

/// Loads `page` in headless Chromium (fresh profile, the origin's leaf
/// trusted by its SPKI) and lists what did not arrive, from its NetLog.
/// Names resolve as the testbed serves them: with `dns`, by Chromium's own
/// resolver asking that DNS server (the edge, over the radio link, as a
/// phone does); without, by `--host-resolver-rules` (no DNS traffic).
/// `work` holds the profile and the NetLog while it runs; `keep_netlog`
/// moves the NetLog there afterwards instead of deleting it (to see where
/// a load's time went).
pub fn with_chromium(
    bed: &Bed,
    page: &Page,
    chromium: &Browser,
    ca_dir: &Path,
    work: &Path,
    dns: Option<SocketAddr>,
    keep_netlog: Option<&Path>,
) -> Result<Arrival, BedError> {
    let topo = bed.running()?;
    let certs = mewa_origin::Ca::load_or_create(ca_dir)
        .and_then(|ca| ca.issue(&[]))
        .map_err(|e| BedError::Runtime(format!("the origin's certificate: {e}")))?;
    let profile = work.join(format!("profile-{}", page.name));
    let netlog = work.join(format!("{}.netlog.json", page.name));
    let url = if chromium.clear_text {
        clear_text_url(bed, page)?
    } else {
        browser_url(bed, page)
    };
    let mut cmd = match dns {
        // Chromium's own resolver, asking `dns` over the link: a private
        // mount namespace puts a resolv.conf naming it over the machine's.
        Some(server) => {
            let conf = work.join(format!("resolv-{}.conf", page.name));
            std::fs::write(
                &conf,
                format!("nameserver {}\noptions timeout:2 attempts:2\n", server.ip()),
            )
            .map_err(|e| BedError::Runtime(format!("writing {}: {e}", conf.display())))?;
            with_bind_mount(topo, &conf, "/etc/resolv.conf", chromium.binary)?
        }
        None => {
            let mut c = topo.command(CLIENT, chromium.binary)?;
            c.arg(format!(
                "--host-resolver-rules={}",
                bed.chromium_resolver_rules()
            ));
            c
        }
    };
    let out = headless_load(&mut cmd, &profile, &netlog, &certs)
        .args(chromium.flags)
        .arg(&url)
        .output()
        .map_err(|e| BedError::Runtime(format!("starting {}: {e}", chromium.binary.display())))?;
    let _ = std::fs::remove_dir_all(&profile);
    if !out.status.success() {
        return Err(BedError::Runtime(crate::meh::browser::exit_failure(&out)));
    }
    let bytes = std::fs::read(&netlog)
        .map_err(|e| BedError::Runtime(format!("reading {}: {e}", netlog.display())))?;
    match keep_netlog {
        Some(to) => {
            if let Err(e) = std::fs::rename(&netlog, to) {
                tracing::warn!("keeping {} as {}: {e}", netlog.display(), to.display());
            }
        }
        None => {
            let _ = std::fs::remove_file(&netlog);
        }
    }
    arrival_from_netlog(&bytes, page).map_err(|e| BedError::Runtime(e.to_string()))
}

/// What a Chromium NetLog says a load of `page` brought: the objects that
/// did not arrive with their expected status, the requests beyond the
/// page, and the load's times ([`crate::meh::netlog_times`]).
pub fn arrival_from_netlog(bytes: &[u8], page: &Page) -> Result<Arrival, crate::meh::NetlogError> {
    let reqs = netlog_requests(bytes, page)?;
    let times = crate::meh::netlog_times(bytes, page).ok();
    let scheme = page.main.split("://").next().unwrap_or("http");
    let mut missing: Vec<String> = page
        .objects
        .iter()
        .filter_map(|o| {
            let u = o.url(scheme);
            match reqs.arrived.get(&o.url("")) {
                Some(Some(st)) if *st != o.status() => Some(format!(
                    "{u} (HTTP status {st}, the page expects {})",
                    o.status()
                )),
                Some(_) => None,
                None => Some(
                    match reqs.failed.iter().find(|(f, _)| f.ends_with(&o.url(""))) {
                        Some((_, code)) => format!("{u} (net_error {code})"),
                        None => format!("{u} (never requested)"),
                    },
                ),
            }
        })
        .collect();
    missing.sort();
    Ok(Arrival {
        page: page.name.clone(),
        objects: page.objects.len(),
        missing,
        unrecorded: reqs.unrecorded,
        plt_s: times.map(|t| t.plt_s),
        requested_s: times.map(|t| t.requested_s),
    })
}

/// The `http://` URL of a generated page, served by the origin's plain
/// port with `http://` references: every object then loads over HTTP/1.1
/// in the clear. A recording (or a testbed with an address per host)
/// refers to its objects by the schemes it was recorded with, so it cannot
/// be loaded in the clear.
pub fn clear_text_url(bed: &Bed, page: &Page) -> Result<String, BedError> {
    match page.root() {
        Some(root) if !bed.per_host() => Ok(root.url("http")),
        _ => Err(BedError::Runtime(format!(
            "{}: a recorded page keeps its recorded schemes and cannot be loaded \
             in the clear; use generated pages (meh15, general) for it",
            page.name
        ))),
    }
}

/// The URL Chromium loads `page` from: a recording's as recorded; a
/// generated page's over `https://`, which the origin serves too: Chromium
/// speaks HTTP/2 only over TLS (no h2c), and over `http://` it would use
/// HTTP/1.1 with six connections per host, not the loader's protocol.
pub fn browser_url(bed: &Bed, page: &Page) -> String {
    match page.root() {
        Some(root) if !bed.per_host() => root.url("https"),
        _ => page.main.clone(),
    }
}
