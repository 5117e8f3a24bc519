//! One measured Chromium load on a testbed, the way every browser
//! experiment makes it: a fresh Chromium process in the client namespace
//! (the caller's command: its resolver, proxy, protocol flags), driven over
//! DevTools ([`ChromiumSession`]) with its NetLog on; for a returning
//! visitor an earlier visit first; the caller's step just before the
//! measured navigation (the radio link made ready); the load with the
//! renderer slowed, screenshots and paint marks; then what its NetLog says
//! (the page's own span, what came, what Chromium did before the
//! document's response).
//!
//! A load is complete when the page's load event fires: objects the
//! replayed page never asks for are coverage ([`Metrics`]), not a failed
//! load.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use mewa_chromium::{BrowserLoad, ChromiumSession, DevtoolsError, EarlyActions, Measure};
use mewa_corpus::Page;
use serde::{Deserialize, Serialize};

use crate::bed::{Bed, BedError};

/// What users of web-performance tools look at in one Chromium load,
/// seconds from the navigation's start, and how much of the page came.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Metrics {
    /// First Contentful Paint.
    pub fcp_s: Option<f64>,
    /// Largest Contentful Paint.
    pub lcp_s: Option<f64>,
    /// The end of the load event (`loadEventEnd`): the page load time
    /// browsers report.
    pub onload_s: Option<f64>,
    /// Speed Index: the mean time the page's visible content took to show
    /// (from screenshots during the load).
    pub speed_index_s: Option<f64>,
    /// When the last visual change came.
    pub visually_complete_s: Option<f64>,
    /// Screenshots the visual figures were computed from.
    pub frames: usize,
    /// The page's objects that arrived, of `objects`: those the replayed
    /// page never asks for (ad and tracking URLs with random parameters)
    /// are coverage, not a failed load.
    pub objects_arrived: usize,
    /// The page's objects.
    pub objects: usize,
    /// The bytes of the objects that arrived, of `bytes`.
    pub bytes_arrived: u64,
    /// The page's bytes.
    pub bytes: u64,
}

/// How long a measured load watches for paints after its load event.
pub const SETTLE: Duration = Duration::from_secs(3);

/// The browser window: a phone's width, so that screenshots and layout
/// are a phone's.
pub const WINDOW: &str = "--window-size=412,823";

/// One load to measure.
pub struct Load<'a> {
    /// The testbed.
    pub bed: &'a Bed,
    /// The Chromium binary (named in errors).
    pub chromium: &'a Path,
    /// Chromium in the client namespace as the caller wraps it (resolver,
    /// proxy, protocol flags); made headless here.
    pub cmd: Command,
    /// The SPKI hash of the key the testbed's certificates use.
    pub spki: &'a str,
    /// Where the profile and the NetLog go while it runs.
    pub work_dir: &'a Path,
    /// Names the profile and the NetLog (`TAG.netlog.json`).
    pub tag: &'a str,
    /// The page.
    pub page: &'a Page,
    /// The URL Chromium navigates to.
    pub url: String,
    /// Slowdown, screenshots, watch after the load event.
    pub measure: Measure,
    /// A returning visitor: the page visited in the same profile first,
    /// then caches and sockets cleared ([`revisit`]).
    pub revisit: bool,
    /// Keep the NetLog in `work_dir` (else it is removed).
    pub keep_netlog: bool,
    /// The longest the load may take.
    pub timeout: Duration,
}

/// What one measured load gave.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Measured {
    /// The page's own span in the NetLog, s.
    pub plt_s: Option<f64>,
    /// To the start of the page's last request, s.
    pub requested_s: Option<f64>,
    /// What the page showed and when, and what came.
    pub metrics: Option<Metrics>,
    /// What Chromium did before the document's response came.
    pub early: Option<EarlyActions>,
    /// The origins the loading predictor knew before the measured load
    /// (a returning visitor).
    pub predicted: Vec<String>,
    /// The document's protocol as Chromium reports it.
    pub protocol: Option<String>,
    /// Why the load is not complete (no load event, no request for the
    /// page in the NetLog, Chromium failed).
    pub error: Option<String>,
}

/// Why a visit between measured loads stopped: the testbed, or the browser.
enum Visit {
    Bed(BedError),
    Browser(DevtoolsError),
}

impl From<DevtoolsError> for Visit {
    fn from(e: DevtoolsError) -> Visit {
        Visit::Browser(e)
    }
}

/// Makes `l`; `ready` runs inside the client namespace just before the
/// measured navigation (after a returning visitor's earlier visit). A
/// browser that fails is a [`Measured`] with an error; `Err` is a testbed
/// that failed.
pub fn measure(
    mut l: Load<'_>,
    ready: impl FnOnce() -> Result<(), BedError> + Send,
) -> Result<Measured, BedError> {
    let profile = l.work_dir.join(format!("profile-{}", l.tag));
    let netlog = l.work_dir.join(format!("{}.netlog.json", l.tag));
    let _ = std::fs::remove_dir_all(&profile);
    let _ = std::fs::remove_file(&netlog);
    mewa_chromium::headless(&mut l.cmd, &profile, l.spki)
        .arg(format!("--log-net-log={}", netlog.display()))
        .arg("--remote-debugging-port=0")
        .arg(WINDOW)
        .arg("about:blank");
    let host = mewa_hint::page::host_of(&l.page.main).unwrap_or_default();
    let shown = shown_host(l.page);
    let (cmd, chromium, timeout, url, revisit, m) = (
        l.cmd,
        l.chromium,
        l.timeout,
        l.url.as_str(),
        l.revisit,
        &l.measure,
    );
    let loaded = l.bed.in_client(|| async {
        let mut s = match ChromiumSession::start(cmd, chromium, timeout).await {
            Ok(s) => s,
            Err(e) => return Ok(Err(e.to_string())),
        };
        let r = async {
            let predicted = if revisit {
                visit_before(&mut s, url, (&host, &shown)).await?
            } else {
                Vec::new()
            };
            ready().map_err(Visit::Bed)?;
            let load = s.load_with(url, m).await?;
            Ok::<_, Visit>((load, predicted))
        }
        .await;
        s.close().await;
        match r {
            Ok(x) => Ok(Ok(x)),
            Err(Visit::Bed(e)) => Err(e),
            Err(Visit::Browser(e)) => Ok(Err(e.to_string())),
        }
    })??;
    let _ = std::fs::remove_dir_all(&profile);
    let bytes = std::fs::read(&netlog);
    if !l.keep_netlog {
        let _ = std::fs::remove_file(&netlog);
    }
    let mut out = Measured::default();
    let (load, predicted) = match loaded {
        Ok(x) => x,
        Err(why) => {
            out.error = Some(why);
            return Ok(out);
        }
    };
    out.predicted = predicted;
    out.protocol = load.document_protocol.clone();
    out.error = load.error.clone();
    match bytes {
        Ok(bytes) => read_netlog(&bytes, l.page, &load, &mut out),
        Err(e) => {
            out.error
                .get_or_insert_with(|| format!("reading {}: {e}", netlog.display()));
        }
    }
    Ok(out)
}

/// How long the page stays open after a warm-up load before Chromium's
/// loading predictor is asked what it learned: it records a page's
/// origins a while after the load completes, and a tab that leaves at
/// once teaches it nothing (seen in Chromium 156).
const LEARN_WAIT: Duration = Duration::from_secs(3);

/// A returning visitor's earlier visit, in session `s`: a first page load
/// on the page's host (a path the origin does not have: the predictor
/// opens its database at the first load that completes and learns nothing
/// from that one), then the page itself, kept open until the predictor
/// has learned its origins (a second visit if the first taught it
/// nothing), then the HTTP cache, sockets and host cache cleared
/// ([`ChromiumSession::clear_for_revisit`]). Returns the origins the
/// predictor knows for `shown`, the host of the document the page ends up
/// showing ([`shown_host`]).
async fn visit_before(
    s: &mut ChromiumSession,
    url: &str,
    (host, shown): (&str, &str),
) -> Result<Vec<String>, Visit> {
    let scheme = url.split("://").next().unwrap_or("https");
    s.visit(&format!("{scheme}://{host}/mewa-first-visit"))
        .await?;
    let mut learned = Vec::new();
    for _ in 0..2 {
        s.visit(url).await?;
        tokio::time::sleep(LEARN_WAIT).await;
        learned = s.predicted_origins(shown).await?;
        if !learned.is_empty() {
            break;
        }
    }
    s.clear_for_revisit().await?;
    Ok(learned)
}

/// The host Chromium's loading predictor files a visit of `page` under:
/// that of the document the browser ends up showing, at the end of the
/// root's redirect chain (bing.com → cn.bing.com), as its table is keyed
/// by the main frame's committed host; the page URL's host when the page
/// has no document.
fn shown_host(page: &Page) -> String {
    page.document()
        .map(|d| d.host.clone())
        .or_else(|| mewa_hint::page::host_of(&page.main))
        .unwrap_or_default()
}

/// The measured navigation's part of a NetLog: its times, what arrived,
/// what Chromium did before the document came. The NetLog of a browser
/// that made earlier visits is cut at the measured navigation's start.
fn read_netlog(bytes: &[u8], page: &Page, l: &BrowserLoad, out: &mut Measured) {
    let cut;
    let bytes = match l.paints.time_origin_ms {
        Some(origin) => match mewa_chromium::netlog_after(bytes, origin, 50.0) {
            Ok(c) => {
                cut = c;
                &cut[..]
            }
            Err(e) => {
                out.error.get_or_insert_with(|| e.to_string());
                return;
            }
        },
        None => bytes,
    };
    if let Ok(t) = mewa_chromium::netlog_times(bytes, page) {
        out.plt_s = Some(t.plt_s);
        out.requested_s = Some(t.requested_s);
    }
    out.early = mewa_chromium::early_actions(bytes, page).ok();
    let mut m = Metrics {
        fcp_s: l.paints.fcp_s,
        lcp_s: l.paints.lcp_s,
        onload_s: l.paints.onload_s.or(l.plt_s),
        objects: page.objects.len(),
        bytes: page.total_bytes(),
        ..Metrics::default()
    };
    if let Ok(reqs) = mewa_chromium::netlog_requests(bytes, page) {
        for o in &page.objects {
            if reqs.arrived.contains_key(&o.url("")) {
                m.objects_arrived += 1;
                m.bytes_arrived += o.size;
            }
        }
    }
    if let Some(origin) = l.paints.time_origin_ms {
        if let Some(v) = mewa_chromium::speed_index(&l.frames, origin) {
            // A screen that stayed blank has no Speed Index: its 0 would
            // read as an instant page and pair as 0 against 0.
            if v.painted {
                m.speed_index_s = Some(v.speed_index_ms / 1000.0);
                m.visually_complete_s = Some(v.visually_complete_ms / 1000.0);
            }
            m.frames = v.frames;
        }
    }
    if out.error.is_none() && out.plt_s.is_none() {
        out.error = Some(format!("the NetLog has no request for {}", page.main));
    }
    out.metrics = Some(m);
}

#[cfg(test)]
mod tests {
    use super::*;
    use mewa_corpus::{Discovery, Object};

    fn obj(id: u32, host: &str, parent: Option<u32>, how: Discovery) -> Object {
        Object {
            id,
            host: host.into(),
            path: "/".into(),
            size: 2000,
            content_type: "text/html".into(),
            parent,
            discovery: how,
            compute_ms: 0,
            status: None,
            think_ms: 0,
            recorded_size: None,
        }
    }

    /// The predictor is asked about the host the redirects end on, not
    /// the one the page's URL names.
    #[test]
    fn the_predictor_host_is_where_the_redirects_end() {
        let mut root = obj(0, "bing.com", None, Discovery::Html);
        root.status = Some(302);
        let mut page = Page {
            name: "p".into(),
            main: "https://bing.com/".into(),
            objects: vec![
                root,
                obj(1, "cn.bing.com", Some(0), Discovery::Redirect),
                obj(2, "img.example", Some(1), Discovery::Html),
            ],
            shared_connections: Vec::new(),
        };
        assert_eq!(shown_host(&page), "cn.bing.com");
        page.objects.truncate(1);
        page.objects[0].status = None;
        assert_eq!(shown_host(&page), "bing.com");
        page.objects.clear();
        assert_eq!(shown_host(&page), "bing.com");
    }
}
