//! The page tracer: loads a page in headless Chromium and records what the
//! edge must know about it — every object with its size and type, and the
//! page's computation latency.
//!
//! Seed 000 §II: "We select the Chrome browser with *chrome-har-capturer*
//! tool to periodically load and trace the target web page. The HTTP response
//! headers of each embedded object are local maintained to build up the
//! meta-data cache of traced page." chrome-har-capturer drives Chrome over the
//! DevTools protocol and turns its `Network.*` and `Page.*` events into a
//! HAR; this module does the same and hands the events to the importer that
//! `mewa edge import` uses for DevTools logs
//! ([`mewa_hint::import::import_cdp`]), so a traced page and an imported
//! recording follow one set of rules (sizes, redirects, discovery, parents).
//!
//! # How a page is traced
//!
//! 1. [`trace_page`] launches Chromium ([`chromium_command`]) with the
//!    flags of [`mewa_chromium::CHROMIUM_FLAGS`] and a fresh private profile in a
//!    temporary directory (a cold load: empty cache, no cookies), removed
//!    afterwards; with Chromium's sandbox, and, when the edge is root, as
//!    an unprivileged user ([`TraceOptions::user`], see "Privileges").
//! 2. It speaks CDP itself ([`mewa_chromium::Cdp`], over chromiumoxide's
//!    WebSocket connection), with events kept as raw JSON. chromiumoxide's
//!    typed event decoder follows one protocol revision and drops any event
//!    it cannot decode — a newer Chromium adding one enum value (a resource
//!    type, a security state) would silently lose requests — whereas the
//!    importer reads only the fields it needs and tolerates the rest.
//! 3. A blank tab is created and attached (flat sessions); `Page` and
//!    `Network` are enabled, and auto-attach makes out-of-process iframes and
//!    workers report their requests too. Then `Page.navigate`.
//! 4. Events are recorded until `Page.loadEventFired`, then until the
//!    network has been quiet for [`TraceOptions::quiet`] (fetches a script
//!    issues after `onload` belong to the page) or
//!    [`TraceOptions::after_load`] has passed; everything within
//!    [`TraceOptions::timeout`].
//! 5. The browser is closed (killed if it does not exit), the profile
//!    removed, and the log turned into the store's page form
//!    ([`TracedPage::from_log`]).
//!
//! # Privileges
//!
//! The tracer loads pages that clients named, so a page that exploits a
//! renderer bug is to be expected. Chromium's sandbox (a user and PID
//! namespace and seccomp per renderer) confines such a page; without it
//! (`--no-sandbox`) the page has every right of Chromium's user, which in
//! a deployment started by root is root. Chromium refuses to start its
//! sandbox as root, so when the edge runs as root Chromium runs as
//! [`TraceOptions::user`] (`tracer.user`, `nobody` by default) with its
//! sandbox, in a profile directory that user owns (mode 0700), its `HOME`
//! there too. Not root: Chromium runs as the edge's user, with its
//! sandbox. Where unprivileged user namespaces are off the sandbox cannot
//! start; the trace then fails with [`TraceError::Sandbox`], which names
//! the explicit switch `tracer.no_sandbox` ([`TraceOptions::no_sandbox`]).
//! chromiumoxide's launcher cannot start a process as another user, so
//! the tracer starts Chromium itself and reads the DevTools address from
//! its stderr, as chromiumoxide does.
//!
//! # Computation latency
//!
//! Seed 001 §2 names the quantity: "the computation latency to be
//! experienced by the mobile device which represents the network idle time
//! while delivering webpage objects". The tracer measures exactly that on its
//! own load, from the DevTools timestamps (one monotonic clock for every
//! process of the browser), in [`load_timing`]:
//!
//! ```text
//! window      = [document request sent, Page.loadEventFired]
//! busy        = | ∪ [requestWillBeSent, loadingFinished or loadingFailed] ∩ window |
//! computation = max(0, |window| − busy)
//! ```
//!
//! Time with any request in flight counts as network time, even when the
//! main thread computes meanwhile, so the value never blames the network's
//! waits on computation; it is the time in which the page *could* have been
//! fetching and was not. It differs from the main-thread busy time that
//! [`mewa_hint::import::computation_ms_from_trace`] reads from Chrome traces
//! (imported Lighthouse recordings): computation overlapping a transfer
//! counts there and not here. Two caveats: the edge is not a phone, and seed
//! 001 §2 cites WProf-M for computation being "very much different for
//! computers/laptops" — the tracer measures on the edge's CPU, a lower bound
//! for a phone; and on a slow edge→origin path parsing hides behind
//! transfers, which lowers the figure too.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use mewa_hint::import::{import_cdp, ImportError};
use mewa_hint::page::{host_of, strip_fragment, PageMeta};
use serde::Serialize;
use serde_json::{json, Value};

use mewa_chromium::{
    chromium_command, lookup_user, run_as, Cdp, Chromium, DevtoolsError, Profile, ProfileError,
    UserRefused,
};

/// The CDP events the log keeps: what the importer reads, plus the load
/// event for the timing.
const RECORDED: [&str; 10] = [
    "Network.requestWillBeSent",
    "Network.responseReceived",
    "Network.responseReceivedExtraInfo",
    "Network.dataReceived",
    "Network.loadingFinished",
    "Network.loadingFailed",
    "Network.requestServedFromCache",
    "Page.frameAttached",
    "Page.frameNavigated",
    "Page.loadEventFired",
];

/// How a page is traced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceOptions {
    /// The whole trace at most: launch, load, settling. A page whose load
    /// event has not fired by then fails with [`TraceError::Timeout`].
    pub timeout: Duration,
    /// After the load event, stop once no request has been in flight for
    /// this long.
    pub quiet: Duration,
    /// After the load event, stop after this long even if requests are still
    /// in flight (a long poll never ends).
    pub after_load: Duration,
    /// More Chromium flags, without the leading `--`, e.g.
    /// `host-resolver-rules=MAP * 10.0.0.2` (see
    /// [`host_resolver_rules`]).
    pub extra_args: Vec<String>,
    /// The user Chromium runs as when the edge is root (`tracer.user`):
    /// Chromium will not start its sandbox as root, and a page loaded as
    /// root would own the machine if it broke out of the renderer.
    pub user: String,
    /// Chromium without its sandbox (`tracer.no_sandbox`): only for
    /// machines where it cannot start (no unprivileged user namespaces).
    pub no_sandbox: bool,
}

impl Default for TraceOptions {
    /// 30 s in all, 500 ms of quiet, at most 3 s after the load event; as
    /// `nobody` when root, always with the sandbox.
    fn default() -> Self {
        TraceOptions {
            timeout: Duration::from_secs(30),
            quiet: Duration::from_millis(500),
            after_load: Duration::from_secs(3),
            extra_args: Vec::new(),
            user: DEFAULT_USER.to_string(),
            no_sandbox: false,
        }
    }
}

/// Whom Chromium runs as when the edge is root, by default.
pub const DEFAULT_USER: &str = "nobody";

/// Why a page could not be traced. Every message says what to do.
#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    /// The Chromium binary is not there.
    #[error("no Chromium at {}: install it (`apt-get install chromium`) or set `tracer.chromium` in the edge config to its path", path.display())]
    NoChromium {
        /// Where it was looked for.
        path: PathBuf,
    },
    /// The URL cannot be loaded by a tracer.
    #[error("{url}: not an absolute http(s) URL")]
    BadUrl {
        /// The URL.
        url: String,
    },
    /// Chromium did not start or did not offer its DevTools endpoint.
    #[error("starting {}: {message}", path.display())]
    Launch {
        /// The binary.
        path: PathBuf,
        /// chromiumoxide's message, with Chromium's stderr when it has one.
        message: String,
    },
    /// The edge is root and `tracer.user` cannot run Chromium.
    #[error("tracer.user = {user:?}: {why}; set `tracer.user` in the edge config to an unprivileged account (e.g. nobody)")]
    User {
        /// The configured user.
        user: String,
        /// What is wrong with it.
        why: String,
    },
    /// Chromium said its sandbox cannot start here.
    #[error("Chromium's sandbox cannot start on this machine ({line}): allow unprivileged user namespaces (sysctl user.max_user_namespaces > 0, and kernel.unprivileged_userns_clone = 1 or kernel.apparmor_restrict_unprivileged_userns = 0 where they exist), or, accepting that traced pages then run unconfined, set `tracer.no_sandbox = true` in the edge config")]
    Sandbox {
        /// Chromium's line that said so.
        line: String,
    },
    /// The temporary profile directory could not be made.
    #[error("creating a Chromium profile in {}: {error}", path.display())]
    Profile {
        /// The directory.
        path: PathBuf,
        /// The OS error.
        error: std::io::Error,
    },
    /// The DevTools connection failed or Chromium refused a command.
    #[error("DevTools protocol: {0}")]
    Protocol(String),
    /// Chromium could not load the page (DNS, refused connection, TLS…).
    #[error("{url}: Chromium could not load it: {error}")]
    Navigation {
        /// The URL.
        url: String,
        /// Chromium's error text, e.g. `net::ERR_NAME_NOT_RESOLVED`.
        error: String,
    },
    /// The load event did not fire in time.
    #[error("{url}: no load event within {} s (tracer timeout)", after.as_secs_f64())]
    Timeout {
        /// The URL.
        url: String,
        /// The timeout.
        after: Duration,
    },
    /// The log holds no usable load (no document request, or no load event
    /// after it).
    #[error("{url}: incomplete recording: {what}")]
    Incomplete {
        /// The URL.
        url: String,
        /// What is missing.
        what: String,
    },
    /// The recorded log could not be turned into a page.
    #[error(transparent)]
    Import(#[from] ImportError),
}

impl From<UserRefused> for TraceError {
    fn from(e: UserRefused) -> TraceError {
        TraceError::User {
            user: e.user,
            why: e.why,
        }
    }
}

impl From<ProfileError> for TraceError {
    fn from(e: ProfileError) -> TraceError {
        TraceError::Profile {
            path: e.path,
            error: e.error,
        }
    }
}

impl From<DevtoolsError> for TraceError {
    fn from(e: DevtoolsError) -> TraceError {
        match e {
            DevtoolsError::Launch { path, message } => TraceError::Launch { path, message },
            DevtoolsError::Sandbox { line } => TraceError::Sandbox { line },
            DevtoolsError::Protocol(m) => TraceError::Protocol(m),
        }
    }
}

/// The load's timing, from the DevTools timestamps (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct LoadTiming {
    /// From sending the document request to the load event, milliseconds.
    pub onload_ms: f64,
    /// Time in that window with at least one request in flight, ms.
    pub network_busy_ms: f64,
    /// `onload_ms − network_busy_ms`, at least 0, rounded: the computation
    /// latency.
    pub computation_ms: u32,
    /// Requests sent before the load event.
    pub requests_before_load: usize,
}

/// One traced page.
#[derive(Debug, Clone, Serialize)]
pub struct TracedPage {
    /// The URL asked for (without fragment).
    pub url: String,
    /// The page in the store's form: objects (URL, host, body bytes on the
    /// wire, type, validators, discovery, parent) and the computation
    /// latency.
    pub page: PageMeta,
    /// The timing the computation latency comes from.
    pub timing: LoadTiming,
    /// What was left out or is uncertain (Chromium's favicon request,
    /// non-http requests, requests without a size, size rules the importer
    /// fell back on), one line each.
    pub notes: Vec<String>,
    /// The recorded DevTools log (`[{method, params, sessionId}]`), which
    /// `mewa edge import` reads back.
    #[serde(skip)]
    pub log: Vec<Value>,
    /// How long the whole trace took (launch to close).
    pub elapsed: Duration,
}

impl TracedPage {
    /// The pure half of the tracer: a recorded DevTools log of one load of
    /// `url` → the page (through [`import_cdp`], the importer of
    /// `mewa edge import`) with [`load_timing`]'s computation latency.
    ///
    /// The page is the one the importer found for `url` (its URL is the
    /// navigation's first URL, before redirects), else the log's first.
    pub fn from_log(url: &str, mut log: Vec<Value>) -> Result<TracedPage, TraceError> {
        let url = strip_fragment(url).to_string();
        let mut notes = Vec::new();
        let probes = favicon_probes(&log);
        if !probes.is_empty() {
            log.retain(|e| {
                !e.get("params")
                    .and_then(|p| p.get("requestId"))
                    .and_then(Value::as_str)
                    .is_some_and(|id| probes.contains(id))
            });
            notes.push("left out Chromium's own /favicon.ico request".into());
        }
        let timing = load_timing(&log).ok_or_else(|| TraceError::Incomplete {
            url: url.clone(),
            what: "no document request followed by a load event".into(),
        })?;
        let bytes = serde_json::to_vec(&log).map_err(|e| TraceError::Incomplete {
            url: url.clone(),
            what: format!("log not serialisable: {e}"),
        })?;
        let report = import_cdp(&bytes, &format!("trace of {url}"))?;
        notes.extend(report.notes);
        if report.skipped > 0 {
            notes.push(format!(
                "{} non-http request(s) (data:, blob:, …) left out",
                report.skipped
            ));
        }
        for m in &report.missing_sizes {
            notes.push(format!("{}: no size ({})", m.object_url, m.reason));
        }
        let mut pages = report.pages;
        let i = pages.iter().position(|p| p.url == url).unwrap_or(0);
        if pages.len() > 1 {
            notes.push(format!(
                "the log holds {} top-level navigations; kept {}",
                pages.len(),
                pages.get(i).map_or("none", |p| p.url.as_str())
            ));
        }
        if i < pages.len() {
            let mut page = pages.swap_remove(i);
            if page.url != url {
                notes.push(format!("{url} was recorded as {}", page.url));
            }
            page.computation_ms = Some(timing.computation_ms);
            Ok(TracedPage {
                url,
                page,
                timing,
                notes,
                log,
                elapsed: Duration::ZERO,
            })
        } else {
            Err(TraceError::Incomplete {
                url,
                what: "no page in the log".into(),
            })
        }
    }
}

/// Request ids of the `/favicon.ico` requests Chromium makes on its own
/// (type `Other`, initiator `other`, at the root of a document's origin):
/// the browser's tab icon, not an object of the page — no page references
/// it, it usually comes after the load event, and it is mostly a 404.
fn favicon_probes(log: &[Value]) -> HashSet<String> {
    log.iter()
        .filter(|e| e.get("method").and_then(Value::as_str) == Some("Network.requestWillBeSent"))
        .filter_map(|e| e.get("params"))
        .filter(|p| {
            fn s(v: Option<&Value>) -> Option<&str> {
                v.and_then(Value::as_str)
            }
            let url = s(p.get("request").and_then(|r| r.get("url"))).unwrap_or("");
            s(p.get("type")) == Some("Other")
                && s(p.get("initiator").and_then(|i| i.get("type"))) == Some("other")
                && url
                    .split_once("://")
                    .and_then(|(_, rest)| rest.split_once('/'))
                    .is_some_and(|(_, path)| path == "favicon.ico")
        })
        .filter_map(|p| {
            p.get("requestId")
                .and_then(Value::as_str)
                .map(str::to_string)
        })
        .collect()
}

/// The load's timing from a DevTools log (see the module docs): the window
/// runs from the first document request (`Network.requestWillBeSent` of
/// type `Document`) to the first `Page.loadEventFired` after it; a request
/// is in flight from its first `requestWillBeSent` (redirect hops share its
/// `requestId`) to its `loadingFinished` or `loadingFailed`, or to the end of
/// the window when neither came. `None` without a document request or a load
/// event after it. Events without a numeric `params.timestamp` are ignored.
pub fn load_timing(log: &[Value]) -> Option<LoadTiming> {
    let mut start: Option<f64> = None;
    let mut load: Option<f64> = None;
    let mut spans: HashMap<&str, (f64, Option<f64>)> = HashMap::new();
    for ev in log {
        let (Some(method), Some(p)) = (ev.get("method").and_then(Value::as_str), ev.get("params"))
        else {
            continue;
        };
        let Some(ts) = p.get("timestamp").and_then(Value::as_f64) else {
            continue;
        };
        let id = p.get("requestId").and_then(Value::as_str);
        match (method, id) {
            ("Network.requestWillBeSent", Some(id)) => {
                if start.is_none() && p.get("type").and_then(Value::as_str) == Some("Document") {
                    start = Some(ts);
                }
                spans.entry(id).or_insert((ts, None));
            }
            ("Network.loadingFinished" | "Network.loadingFailed", Some(id)) => {
                if let Some(s) = spans.get_mut(id) {
                    s.1.get_or_insert(ts);
                }
            }
            ("Page.loadEventFired", _) if load.is_none() && start.is_some_and(|s| ts >= s) => {
                load = Some(ts);
            }
            _ => {}
        }
    }
    let (start, load) = (start?, load?);
    let spans: Vec<(f64, f64)> = spans
        .values()
        .filter(|(s, _)| *s <= load)
        .map(|&(s, e)| (s, e.unwrap_or(load)))
        .collect();
    let busy = busy_time((start, load), &spans);
    let onload = load - start;
    Some(LoadTiming {
        onload_ms: onload * 1000.0,
        network_busy_ms: busy * 1000.0,
        computation_ms: computation_ms(onload, busy),
        requests_before_load: spans.len(),
    })
}

/// Length of the union of `spans` clipped to `window` (same unit as the
/// inputs). Overlapping requests count once; spans with the end before the
/// start are empty.
pub fn busy_time(window: (f64, f64), spans: &[(f64, f64)]) -> f64 {
    mewa_hint::import::union_time(spans, window.0, window.1).0
}

/// `onload − busy` (seconds) in whole milliseconds, at least 0 (clock
/// granularity can make busy exceed the window by a hair).
fn computation_ms(onload_s: f64, busy_s: f64) -> u32 {
    let ms = ((onload_s - busy_s) * 1000.0).round();
    if ms.is_finite() && ms > 0.0 {
        ms.min(f64::from(u32::MAX)) as u32
    } else {
        0
    }
}

/// `--host-resolver-rules` for Chromium (without `--`) that sends each host
/// to its first address, as the edge's zone answers it, or `None` for no
/// hosts. A port in the URL is kept (the rule has none).
pub fn host_resolver_rules<'a>(
    hosts: impl IntoIterator<Item = (&'a str, &'a [std::net::IpAddr])>,
) -> Option<String> {
    let rules: Vec<String> = hosts
        .into_iter()
        .filter_map(|(h, addrs)| {
            addrs.first().map(|a| match a {
                std::net::IpAddr::V4(v4) => format!("MAP {h} {v4}"),
                std::net::IpAddr::V6(v6) => format!("MAP {h} [{v6}]"),
            })
        })
        .collect();
    (!rules.is_empty()).then(|| format!("host-resolver-rules={}", rules.join(",")))
}

/// Why a URL taken from client queries must not be traced, or `None` when
/// it may be.
///
/// Popular pages are whatever clients ask hints for, so without a check any
/// client could make the edge's browser fetch from inside the edge's network
/// (request forgery) and read the object sizes back in a hint. The URL is
/// parsed as a browser parses it (WHATWG URL Standard, the `url` crate), so
/// that the host checked is the host Chromium would connect to: a textual
/// check let `http://127.0.0.1\@a.example/` (a backslash is a slash),
/// `http://127.0.0%2e1/` (percent-decoded hosts) and `http://127.0.0.１/`
/// (full-width digits, mapped by IDNA) through. Refused: other schemes than
/// http(s); URLs with credentials; hosts that are IP addresses in any form
/// the standard reads as one (`2130706433`, `0x7f.1`, `0177.0.0.1`);
/// `localhost` and `*.localhost` (Chromium answers them with loopback
/// itself); single-label names. A DNS name that resolves to a private
/// address is not caught here: run the edge's Chromium where it reaches
/// only what clients may reach anyway.
pub fn popular_url_refusal(url: &str) -> Option<&'static str> {
    let Ok(u) = url::Url::parse(url) else {
        return Some("not a URL a browser would load");
    };
    if !matches!(u.scheme(), "http" | "https") {
        return Some("not an http(s) URL");
    }
    if !u.username().is_empty() || u.password().is_some() {
        return Some("the URL carries credentials");
    }
    let host = match u.host() {
        None => return Some("no host"),
        Some(url::Host::Ipv4(_) | url::Host::Ipv6(_)) => return Some("the host is an IP address"),
        Some(url::Host::Domain(d)) => d.trim_end_matches('.'),
    };
    if host.is_empty() {
        return Some("no host");
    }
    if host == "localhost" || host.ends_with(".localhost") {
        return Some("the host is the edge itself");
    }
    if !host.contains('.') {
        return Some("the host is a single-label name");
    }
    None
}

/// Loads `url` in headless Chromium at `chromium` and returns its objects and
/// computation latency (see the module docs for the steps and the rules).
/// Nothing is stored; [`TracedPage::page`] is ready for
/// [`crate::store::Store::put_page`] with source `tracer`.
pub async fn trace_page(
    chromium: &Path,
    url: &str,
    opts: &TraceOptions,
) -> Result<TracedPage, TraceError> {
    let started = Instant::now();
    let url = strip_fragment(url).to_string();
    let scheme = url.split_once("://").map(|(s, _)| s.to_ascii_lowercase());
    if !matches!(scheme.as_deref(), Some("http" | "https")) || host_of(&url).is_none() {
        return Err(TraceError::BadUrl { url });
    }
    if !chromium.is_file() {
        return Err(TraceError::NoChromium {
            path: chromium.to_path_buf(),
        });
    }
    // A day stands in for a timeout too long to add to the clock.
    let deadline = tokio::time::Instant::from_std(
        started
            .checked_add(opts.timeout)
            .unwrap_or(started + Duration::from_secs(86_400)),
    );
    let run_as = run_as(nix::unistd::geteuid().as_raw(), &opts.user, lookup_user)?;
    let profile = Profile::private(run_as)?;
    let command = chromium_command(
        chromium,
        profile.path(),
        &opts.extra_args,
        opts.no_sandbox,
        run_as,
    );
    let mut browser = Chromium::launch(command.to_command(), chromium, deadline).await?;
    let mut cdp = match browser.connect(deadline).await {
        Ok(cdp) => cdp,
        Err(e) => {
            browser.close(None).await;
            return Err(e.into());
        }
    };
    let recorded = record(&mut cdp, &url, opts).await;
    browser.close(Some(&mut cdp)).await;
    drop(profile);
    let log = recorded?;
    let mut traced = TracedPage::from_log(&url, log)?;
    traced.elapsed = started.elapsed();
    Ok(traced)
}

/// Loads `url` in a new tab and returns the recorded log.
async fn record(cdp: &mut Cdp, url: &str, opts: &TraceOptions) -> Result<Vec<Value>, TraceError> {
    let timeout = || TraceError::Timeout {
        url: url.to_string(),
        after: opts.timeout,
    };
    let main = cdp.open_uncached_tab().await?.ok_or_else(timeout)?;
    // Whatever about:blank produced is not part of the page.
    cdp.clear_queued();
    let nav = cdp
        .call("Page.navigate", Some(&main), json!({"url": url}))
        .await?
        .ok_or_else(timeout)?;
    if let Some(error) = nav.get("errorText").and_then(Value::as_str) {
        return Err(TraceError::Navigation {
            url: url.to_string(),
            error: error.to_string(),
        });
    }

    let mut log: Vec<Value> = Vec::new();
    let mut sessions: HashSet<String> = HashSet::from([main.clone()]);
    let mut in_flight: HashSet<String> = HashSet::new();
    let mut loaded: Option<tokio::time::Instant> = None;
    let mut last_network = tokio::time::Instant::now();
    loop {
        let deadline = cdp.deadline();
        let after = |t: tokio::time::Instant, d: Duration| t.checked_add(d).unwrap_or(deadline);
        let until = match loaded {
            None => deadline,
            Some(at) if in_flight.is_empty() => {
                after(at, opts.after_load).min(after(last_network, opts.quiet))
            }
            Some(at) => after(at, opts.after_load),
        };
        let Some(ev) = cdp.event(until).await? else {
            if loaded.is_none() {
                return Err(timeout());
            }
            break;
        };
        let Some(session) = ev.session_id.as_deref().filter(|s| sessions.contains(*s)) else {
            continue;
        };
        let session = session.to_string();
        let method = ev.method.as_ref();
        if method == "Target.attachedToTarget" {
            if let Some(child) = cdp.follow_child(&ev.params)? {
                sessions.insert(child);
            }
            continue;
        }
        if !RECORDED.contains(&method) {
            continue;
        }
        if method == "Page.loadEventFired" {
            if session != main || loaded.is_some() {
                continue;
            }
            loaded = Some(tokio::time::Instant::now());
        }
        if let Some(id) = ev.params.get("requestId").and_then(Value::as_str) {
            match method {
                "Network.requestWillBeSent" => {
                    in_flight.insert(id.to_string());
                }
                "Network.loadingFinished" | "Network.loadingFailed" => {
                    in_flight.remove(id);
                }
                _ => {}
            }
            last_network = tokio::time::Instant::now();
        }
        log.push(json!({"method": method, "params": ev.params, "sessionId": session}));
    }
    Ok(log)
}

#[cfg(test)]
mod tests {
    use super::*;
    use mewa_chromium::{sandbox_failure, Account, DEFAULT_CHROMIUM};

    fn ev(method: &str, params: Value) -> Value {
        json!({"method": method, "params": params})
    }

    fn req(id: &str, url: &str, ty: &str, ts: f64) -> Value {
        ev(
            "Network.requestWillBeSent",
            json!({"requestId": id, "frameId": "F", "type": ty, "timestamp": ts,
                   "request": {"url": url}, "initiator": {"type": "parser", "url": "http://a.example/"}}),
        )
    }

    fn resp(id: &str, mime: &str, ts: f64) -> Value {
        ev(
            "Network.responseReceived",
            json!({"requestId": id, "timestamp": ts, "type": "Other",
                   "response": {"url": "", "status": 200, "mimeType": mime, "headers": {},
                                "headersText": "HTTP/1.1 200 OK\r\n\r\n"}}),
        )
    }

    fn done(id: &str, bytes: u64, ts: f64) -> Value {
        ev(
            "Network.loadingFinished",
            json!({"requestId": id, "timestamp": ts, "encodedDataLength": bytes}),
        )
    }

    /// A document at 10.000 s, two images overlapping, a gap (the script's
    /// computation), one more image, the load event at 10.500 s.
    fn log() -> Vec<Value> {
        let hdr = "HTTP/1.1 200 OK\r\n\r\n".len() as u64;
        vec![
            ev(
                "Page.frameNavigated",
                json!({"frame": {"id": "F", "url": "http://a.example/"}}),
            ),
            req("1", "http://a.example/", "Document", 10.000),
            resp("1", "text/html", 10.010),
            done("1", 1000 + hdr, 10.020),
            req("2", "http://a.example/a.png", "Image", 10.030),
            req("3", "http://cdn.example/b.png", "Image", 10.040),
            resp("2", "image/png", 10.050),
            done("2", 2000 + hdr, 10.060),
            resp("3", "image/png", 10.070),
            done("3", 3000 + hdr, 10.100),
            // 10.100 → 10.400: nothing in flight.
            req("4", "http://a.example/c.png", "Image", 10.400),
            resp("4", "image/png", 10.420),
            done("4", 4000 + hdr, 10.450),
            ev(
                "Network.requestWillBeSent",
                json!({"requestId": "5", "frameId": "F", "type": "Other", "timestamp": 10.460,
                       "request": {"url": "http://a.example/favicon.ico"}, "initiator": {"type": "other"}}),
            ),
            ev("Page.loadEventFired", json!({"timestamp": 10.500})),
        ]
    }

    #[test]
    fn busy_time_is_the_union_clipped_to_the_window() {
        assert_eq!(busy_time((0.0, 10.0), &[]), 0.0);
        assert_eq!(busy_time((0.0, 10.0), &[(1.0, 3.0), (2.0, 4.0)]), 3.0);
        assert_eq!(
            busy_time((0.0, 10.0), &[(2.0, 4.0), (1.0, 3.0), (6.0, 7.0)]),
            4.0
        );
        assert_eq!(
            busy_time((0.0, 10.0), &[(1.0, 9.0), (2.0, 3.0)]),
            8.0,
            "nested"
        );
        assert_eq!(
            busy_time((2.0, 5.0), &[(0.0, 3.0), (4.0, 8.0)]),
            2.0,
            "clipped"
        );
        assert_eq!(busy_time((0.0, 10.0), &[(5.0, 4.0), (11.0, 12.0)]), 0.0);
        assert_eq!(
            busy_time((0.0, 10.0), &[(1.0, 2.0), (2.0, 3.0)]),
            2.0,
            "touching"
        );
    }

    #[test]
    fn computation_is_onload_minus_network_time_never_negative() {
        assert_eq!(computation_ms(0.5, 0.2), 300);
        assert_eq!(computation_ms(0.5, 0.5004), 0);
        assert_eq!(computation_ms(f64::NAN, 0.0), 0);
        assert_eq!(computation_ms(1e12, 0.0), u32::MAX);
    }

    #[test]
    fn timing_from_a_log() {
        let t = load_timing(&log()).unwrap();
        assert!((t.onload_ms - 500.0).abs() < 1e-6, "{t:?}");
        // Busy: 10.000-10.020, 10.030-10.100, 10.400-10.450, 10.460-10.500
        // (the favicon never finished: in flight until the load event).
        assert!((t.network_busy_ms - 180.0).abs() < 1e-6, "{t:?}");
        assert_eq!(t.computation_ms, 320);
        assert_eq!(t.requests_before_load, 5);
        // No load event, or no document: no timing.
        let mut l = log();
        l.pop();
        assert!(load_timing(&l).is_none());
        assert!(load_timing(&log()[4..]).is_none());
    }

    #[test]
    fn from_log_goes_through_the_importer() {
        let t = TracedPage::from_log("http://a.example/#top", log()).unwrap();
        assert_eq!(t.url, "http://a.example/");
        assert_eq!(t.page.url, "http://a.example/");
        let objs: Vec<(&str, Option<u64>, Option<&str>)> = t
            .page
            .objects
            .iter()
            .map(|o| (o.url.as_str(), o.size, o.content_type.as_deref()))
            .collect();
        assert_eq!(
            objs,
            vec![
                ("http://a.example/", Some(1000), Some("text/html")),
                ("http://a.example/a.png", Some(2000), Some("image/png")),
                ("http://cdn.example/b.png", Some(3000), Some("image/png")),
                ("http://a.example/c.png", Some(4000), Some("image/png")),
            ],
            "the favicon probe is left out"
        );
        assert_eq!(t.page.objects[2].host, "cdn.example");
        assert_eq!(t.page.computation_ms, Some(t.timing.computation_ms));
        assert_eq!(t.timing.computation_ms, 360, "without the favicon's 40 ms");
        assert!(
            t.notes.iter().any(|n| n.contains("favicon")),
            "{:?}",
            t.notes
        );
        assert!(
            !t.log.iter().any(|e| e.to_string().contains("favicon")),
            "the kept log is what was imported"
        );
        assert!(matches!(
            TracedPage::from_log("http://a.example/", vec![]),
            Err(TraceError::Incomplete { .. })
        ));
    }

    #[test]
    fn popular_urls_that_point_inside_are_refused() {
        for ok in [
            "http://www.a.example/",
            "https://cdn.b.example:8443/x?y#z",
            "http://www.a.example./",
            "HTTP://WWW.A.EXAMPLE/",
            "http://1a.example/",
        ] {
            assert_eq!(popular_url_refusal(ok), None, "{ok}");
        }
        for bad in [
            "ftp://a.example/",
            "a.example/",
            "http://127.0.0.1/",
            "http://[::1]:8053/",
            "http://169.254.169.254/latest/meta-data/",
            "http://2130706433/",
            "http://0x7f.1/",
            "http://10.0.0.010/",
            "http://localhost:8053/metrics",
            "http://admin.localhost/",
            "http://intranet/",
            "http:///nohost",
            // Forms a textual filter lets through.
            "http://127.0.0.1\\@a.example/",
            "http://127.0.0%2e1/",
            "http://127.0.0.\u{ff11}/",
            "http://0177.0.0.1/",
            "http://[::ffff:127.0.0.1]/",
            "http://user:pw@a.example/",
            "http://a.example@127.0.0.1/",
            "http://LOCALHOST./",
        ] {
            assert!(popular_url_refusal(bad).is_some(), "{bad}");
        }
    }

    /// The command line: the sandbox stays on unless switched off, and as
    /// root Chromium runs as the unprivileged account, its HOME in the
    /// profile; not root, as the edge's own user.
    #[test]
    fn chromium_runs_sandboxed_and_unprivileged_by_default() {
        let nobody = Account {
            uid: 65534,
            gid: 65534,
        };
        let users = |name: &str| match name {
            "nobody" => Ok(Some(nobody)),
            "root" => Ok(Some(Account { uid: 0, gid: 0 })),
            "broken" => Err("the user database cannot be read".to_string()),
            _ => Ok(None),
        };
        let opts = TraceOptions {
            extra_args: vec!["--host-resolver-rules=MAP * 127.0.0.1".into()],
            ..TraceOptions::default()
        };
        assert_eq!(opts.user, "nobody");
        assert!(!opts.no_sandbox);
        let as_root = run_as(0, &opts.user, users).unwrap();
        assert_eq!(as_root, Some(nobody));
        let profile = Path::new("/tmp/mewa-tracer-x");
        let c = chromium_command(
            Path::new(DEFAULT_CHROMIUM),
            profile,
            &opts.extra_args,
            opts.no_sandbox,
            as_root,
        );
        assert!(!c.args.iter().any(|a| a.contains("no-sandbox")), "{c:?}");
        assert_eq!(c.run_as.map(|a| a.uid), Some(65534));
        assert!(c.args.contains(&"--headless".to_string()));
        assert!(c
            .args
            .contains(&"--user-data-dir=/tmp/mewa-tracer-x".to_string()));
        assert!(c
            .args
            .contains(&"--host-resolver-rules=MAP * 127.0.0.1".to_string()));
        assert!(c
            .args
            .iter()
            .all(|a| a.starts_with("--") && !a.starts_with("---")));
        assert!(c.env.contains(&("HOME".to_string(), profile.to_path_buf())));
        // Not root: the edge's own user, its own HOME, still sandboxed.
        let as_user = run_as(1000, &opts.user, users).unwrap();
        assert_eq!(as_user, None);
        let c = chromium_command(
            Path::new(DEFAULT_CHROMIUM),
            profile,
            &opts.extra_args,
            opts.no_sandbox,
            as_user,
        );
        assert!(c.run_as.is_none() && c.env.is_empty());
        assert!(!c.args.iter().any(|a| a.contains("no-sandbox")));
        // The explicit switch.
        let off = TraceOptions {
            no_sandbox: true,
            ..opts.clone()
        };
        let c = chromium_command(
            Path::new(DEFAULT_CHROMIUM),
            profile,
            &off.extra_args,
            off.no_sandbox,
            as_root,
        );
        assert!(c.args.contains(&"--no-sandbox".to_string()));
        // As root, a user that is root, unknown or unreadable is refused,
        // naming the key to set.
        for user in ["root", "no-such-user", "broken"] {
            let e = TraceError::from(run_as(0, user, users).unwrap_err());
            assert!(matches!(e, TraceError::User { .. }), "{e:?}");
            assert!(e.to_string().contains("tracer.user"), "{e}");
        }
    }

    #[test]
    fn a_sandbox_that_cannot_start_is_recognised() {
        for line in [
            "[1:1:0101/000000.000:FATAL:zygote_host_impl_linux.cc(128)] No usable sandbox! If you are running on Ubuntu 23.10+ ...",
            "[1:1:0101/000000.000:ERROR:zygote_host_impl_linux.cc(103)] Running as root without --no-sandbox is not supported. See https://crbug.com/638180.",
            "[1:1:0101/000000.000:FATAL:setuid_sandbox_host.cc(158)] The SUID sandbox helper binary was found, but is not configured correctly.",
            "[1:1:0101/000000.000:FATAL:credentials.cc(131)] Failed to move to new namespace: PID namespaces supported, Network namespace supported, but failed: errno = Operation not permitted",
        ] {
            let stderr = format!("[1:2:ERROR:dbus/bus.cc:405] Failed to connect to the bus\n{line}\n");
            assert_eq!(sandbox_failure(&stderr), Some(line));
        }
        assert_eq!(
            sandbox_failure("[1:2:ERROR:dbus/bus.cc:405] Failed to connect to the bus\n"),
            None
        );
        let e = TraceError::Sandbox {
            line: "No usable sandbox!".into(),
        };
        assert!(e.to_string().contains("tracer.no_sandbox = true"), "{e}");
    }

    #[test]
    fn resolver_rules_follow_the_zone() {
        let v4: Vec<std::net::IpAddr> = vec!["10.0.0.2".parse().unwrap()];
        let v6: Vec<std::net::IpAddr> = vec!["fd00::2".parse().unwrap()];
        let none: Vec<std::net::IpAddr> = vec![];
        assert_eq!(
            host_resolver_rules([
                ("www.a.example", v4.as_slice()),
                ("cdn.a.example", v6.as_slice()),
                ("x.example", none.as_slice()),
            ]),
            Some(
                "host-resolver-rules=MAP www.a.example 10.0.0.2,MAP cdn.a.example [fd00::2]".into()
            )
        );
        assert_eq!(host_resolver_rules([]), None);
    }
}
