//! Headless Chromium as a browsing session: one browser process with one
//! profile, one tab, many page loads, driven over the DevTools protocol
//! ([`mewa_edge::devtools`]). The headline browser of `mewa lab cellular`
//! (`--browser chromium`), where the built-in loader's
//! [`mewa_loader::Session`] is the sweep browser.
//!
//! What a session keeps from load to load is what seed 003 is about: the
//! browser's sockets. Chromium keeps an HTTP/2 session per origin and idle
//! HTTP/1.1 sockets (up to six per host) across navigations, so after a
//! user's think time the next page goes over connections that sat idle
//! with the radio. Everything else is made to match the loader, so that
//! the two browsers' tables differ by the browser alone: the HTTP cache is
//! off (`Network.setCacheDisabled`; every load fetches every object, as
//! the loader does; open sockets are not affected), the pages' names
//! resolve through `--host-resolver-rules` as the testbed serves them (no
//! DNS traffic) and no other name does (Chromium's own background requests
//! would otherwise cross the radio link), and the lab's leaf key is
//! trusted by its SPKI.
//!
//! Each load navigates the same tab to the page's URL and waits for the
//! load event; the page load time is the browser's own onload time,
//! `loadEventEnd − startTime` of the Navigation Timing entry
//! (`performance.getEntriesByType('navigation')[0]`, read with
//! `Runtime.evaluate`): from the start of the navigation (before the
//! request is sent, including any connection it waits for) to the end of
//! the load event — not the loader's "last object done".
//!
//! Connections: each `Network.responseReceived` names the connection the
//! response came on (`connectionId`, the socket's NetLog id, unique in the
//! browser process). A load's connection is *reused* when an earlier load
//! of the session had a response on it, *new* otherwise. Connections that
//! carried no response (a preconnect never used) are not counted; the
//! link's SYNs count every handshake.

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::time::Duration;

use serde_json::{json, Value};

use crate::measure::{
    click_js, exception_text, paints_from_evaluate, predicted_origins, screencast_frame,
    screencast_params, Measure, Paints, PAINTS_JS, PREDICTOR_ROWS_JS, SETTLE_QUIET,
};
use crate::visual::ScreencastFrame as Frame;
use crate::{Cdp, Chromium, DevtoolsError};

/// How long Chromium may take to start and offer its DevTools endpoint.
const LAUNCH_TIMEOUT: Duration = Duration::from_secs(30);

/// How long the Navigation Timing entry may take to show `loadEventEnd`
/// once the load event fired (the handlers run first).
const TIMING_WAIT: Duration = Duration::from_secs(2);

/// What one load of a session gave.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct BrowserLoad {
    /// The browser's onload time, s (`loadEventEnd − startTime`); `None`
    /// when the load failed or timed out.
    pub plt_s: Option<f64>,
    /// Requests that failed (`Network.loadingFailed`, cancellations not
    /// counted).
    pub failed: usize,
    /// The first of them: its URL and Chromium's error.
    pub first_failure: Option<String>,
    /// Connections with a response in this load and none in an earlier one.
    pub new_connections: usize,
    /// Connections with a response in this load and in an earlier one.
    pub reused_connections: usize,
    /// The document's protocol as Chromium reports it (`h2`, `http/1.1`,
    /// `h3`).
    pub document_protocol: Option<String>,
    /// Why the load has no PLT.
    pub error: Option<String>,
    /// The page's paint and Navigation Timing marks (none read when the
    /// load event never fired).
    pub paints: Paints,
    /// Screenshots taken while it loaded ([`Measure::screenshots`]), in
    /// the order they came.
    pub frames: Vec<Frame>,
}

/// Seconds since the Unix epoch now (0 on a clock before it).
fn now_epoch_s() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// One headless Chromium, one profile, one tab, kept across loads. Start,
/// load and close it on one runtime inside the client's namespace
/// ([`Bed::in_client`]): the DevTools port is on that namespace's
/// loopback, and the browser is killed when the session is dropped.
#[derive(Debug)]
pub struct ChromiumSession {
    browser: Chromium,
    cdp: Cdp,
    /// The tab's flat session.
    tab: String,
    /// The tab's child targets (out-of-process iframes, workers).
    children: HashSet<String>,
    /// Every connection that carried a response in an earlier load.
    seen: HashSet<u64>,
    timeout: Duration,
}

impl ChromiumSession {
    /// Starts `cmd` ([`session_command`]; `path` names the browser in
    /// errors) and opens the session's tab. Each load may take `timeout`.
    pub async fn start(
        cmd: std::process::Command,
        path: &Path,
        timeout: Duration,
    ) -> Result<ChromiumSession, DevtoolsError> {
        let deadline = tokio::time::Instant::now() + LAUNCH_TIMEOUT;
        let mut browser = Chromium::launch(cmd, path, deadline).await?;
        let mut cdp = match browser.connect(deadline).await {
            Ok(c) => c,
            Err(e) => {
                browser.close(None).await;
                return Err(e);
            }
        };
        let tab = match cdp.open_uncached_tab().await {
            Ok(Some(tab)) => tab,
            Ok(None) => {
                browser.close(Some(&mut cdp)).await;
                return Err(DevtoolsError::Protocol(format!(
                    "no tab within {} s",
                    LAUNCH_TIMEOUT.as_secs()
                )));
            }
            Err(e) => {
                browser.close(Some(&mut cdp)).await;
                return Err(e);
            }
        };
        Ok(ChromiumSession {
            browser,
            cdp,
            tab,
            children: HashSet::new(),
            seen: HashSet::new(),
            timeout,
        })
    }

    /// Navigates the tab to `url` and waits for its load event (at most the
    /// session's timeout). A page that does not load is a load without a
    /// PLT ([`BrowserLoad::error`]); an `Err` is a browser that can no
    /// longer be driven (it crashed, or closed the connection).
    pub async fn load(&mut self, url: &str) -> Result<BrowserLoad, DevtoolsError> {
        self.load_with(url, &Measure::default()).await
    }

    /// [`ChromiumSession::load`] with what `m` asks beyond the load event:
    /// the renderer throttled, screenshots during the load, a watch for
    /// late paints after it; the paint marks are read at its end. The
    /// throttling is lifted again afterwards, for the session's next load.
    pub async fn load_with(
        &mut self,
        url: &str,
        m: &Measure,
    ) -> Result<BrowserLoad, DevtoolsError> {
        let start = tokio::time::Instant::now();
        // What arrived since the last load (a request the last page made
        // after its load event) is not this load's.
        self.cdp.set_deadline(start);
        while self.cdp.event(start).await?.is_some() {}
        self.cdp.clear_queued();
        self.cdp.set_deadline(start + self.timeout);
        let mut out = BrowserLoad::default();
        let mut ids: HashSet<u64> = HashSet::new();
        // Request id → URL, to name a failure.
        let mut urls: HashMap<String, String> = HashMap::new();
        let timeout_s = self.timeout.as_secs();
        let timed_out = || format!("no load event within {timeout_s} s");
        let throttled = m.cpu_slowdown.is_finite() && m.cpu_slowdown > 1.0;
        if throttled {
            self.cdp
                .call(
                    "Emulation.setCPUThrottlingRate",
                    Some(&self.tab),
                    json!({"rate": m.cpu_slowdown}),
                )
                .await?;
        }
        if m.screenshots {
            self.cdp
                .call("Page.startScreencast", Some(&self.tab), screencast_params())
                .await?;
        }
        let nav = self
            .cdp
            .call("Page.navigate", Some(&self.tab), json!({"url": url}))
            .await?;
        match nav {
            None => out.error = Some(timed_out()),
            Some(v) => {
                if let Some(e) = v.get("errorText").and_then(Value::as_str) {
                    out.error = Some(format!("{url}: {e}"));
                }
            }
        }
        let mut loaded = false;
        while out.error.is_none() && !loaded {
            let Some(ev) = self.cdp.event(start + self.timeout).await? else {
                out.error = Some(timed_out());
                break;
            };
            let from_page = ev
                .session_id
                .as_deref()
                .is_some_and(|s| s == self.tab || self.children.contains(s));
            if !from_page {
                continue;
            }
            match &*ev.method {
                "Target.attachedToTarget" => {
                    if let Some(child) = self.cdp.follow_child(&ev.params)? {
                        self.children.insert(child);
                    }
                }
                "Network.requestWillBeSent" => {
                    let id = ev.params.get("requestId").and_then(Value::as_str);
                    let u = ev.params["request"].get("url").and_then(Value::as_str);
                    if let (Some(id), Some(u)) = (id, u) {
                        urls.insert(id.to_owned(), u.to_owned());
                    }
                }
                "Network.responseReceived" => {
                    let r = &ev.params["response"];
                    if let Some(id) = r
                        .get("connectionId")
                        .and_then(Value::as_f64)
                        .filter(|id| *id >= 1.0 && id.is_finite())
                    {
                        ids.insert(id as u64);
                    }
                    if ev.params.get("type").and_then(Value::as_str) == Some("Document")
                        && ev.session_id.as_deref() == Some(self.tab.as_str())
                    {
                        out.document_protocol =
                            r.get("protocol").and_then(Value::as_str).map(str::to_owned);
                    }
                }
                "Network.loadingFailed"
                    if ev.params.get("canceled").and_then(Value::as_bool) != Some(true) =>
                {
                    out.failed += 1;
                    if out.first_failure.is_none() {
                        let p = &ev.params;
                        let url = p
                            .get("requestId")
                            .and_then(Value::as_str)
                            .and_then(|id| urls.get(id))
                            .map_or("?", String::as_str);
                        let why = p.get("errorText").and_then(Value::as_str).unwrap_or("");
                        let blocked = p.get("blockedReason").and_then(Value::as_str);
                        out.first_failure = Some(match blocked {
                            Some(b) => format!("{url}: {why} (blocked: {b})"),
                            None => format!("{url}: {why}"),
                        });
                    }
                }
                "Page.loadEventFired" if ev.session_id.as_deref() == Some(self.tab.as_str()) => {
                    loaded = true;
                }
                "Page.screencastFrame" => self.take_frame(&ev.params, &mut out.frames)?,
                _ => {}
            }
        }
        if loaded && m.settle > Duration::ZERO {
            self.settle(m.settle, &mut out.frames).await?;
        }
        if m.screenshots {
            self.cdp
                .call("Page.stopScreencast", Some(&self.tab), json!({}))
                .await?;
        }
        out.new_connections = ids.difference(&self.seen).count();
        out.reused_connections = ids.intersection(&self.seen).count();
        self.seen.extend(ids);
        if loaded {
            match self.onload_time().await? {
                Ok(s) => out.plt_s = Some(s),
                Err(why) => out.error = Some(why),
            }
            match self.paints().await? {
                Ok(p) => out.paints = p,
                Err(why) => tracing::warn!("{url}: {why}"),
            }
        }
        if throttled {
            self.cdp
                .set_deadline(tokio::time::Instant::now() + TIMING_WAIT);
            self.cdp
                .call(
                    "Emulation.setCPUThrottlingRate",
                    Some(&self.tab),
                    json!({"rate": 1}),
                )
                .await?;
        }
        Ok(out)
    }

    /// Keeps a screencast frame and acknowledges it (Chromium sends the
    /// next only after the last is acknowledged).
    fn take_frame(&mut self, params: &Value, frames: &mut Vec<Frame>) -> Result<(), DevtoolsError> {
        if let Some((frame, ack)) = screencast_frame(params, now_epoch_s()) {
            frames.push(frame);
            self.cdp.send(
                "Page.screencastFrameAck",
                Some(&self.tab),
                json!({"sessionId": ack}),
            )?;
        }
        Ok(())
    }

    /// After the load event: goes on taking frames until [`SETTLE_QUIET`]
    /// passes without one, or `at_most`.
    async fn settle(
        &mut self,
        at_most: Duration,
        frames: &mut Vec<Frame>,
    ) -> Result<(), DevtoolsError> {
        let end = tokio::time::Instant::now() + at_most;
        self.cdp.set_deadline(end);
        let mut quiet_until = tokio::time::Instant::now() + SETTLE_QUIET;
        while let Some(ev) = self.cdp.event(quiet_until.min(end)).await? {
            match &*ev.method {
                "Page.screencastFrame" => {
                    self.take_frame(&ev.params, frames)?;
                    quiet_until = tokio::time::Instant::now() + SETTLE_QUIET;
                }
                "Target.attachedToTarget" => {
                    if let Some(child) = self.cdp.follow_child(&ev.params)? {
                        self.children.insert(child);
                    }
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// The page's paint marks ([`PAINTS_JS`]); the inner `Err` says why
    /// there are none.
    async fn paints(&mut self) -> Result<Result<Paints, String>, DevtoolsError> {
        self.cdp
            .set_deadline(tokio::time::Instant::now() + TIMING_WAIT);
        let answer = self
            .cdp
            .call(
                "Runtime.evaluate",
                Some(&self.tab),
                json!({"expression": PAINTS_JS, "returnByValue": true, "awaitPromise": true}),
            )
            .await?;
        Ok(match answer {
            Some(a) => paints_from_evaluate(&a),
            None => Err("no answer to the paint times".into()),
        })
    }

    /// Navigates the tab to `url` and waits for its load event (at most
    /// the session's timeout), taking nothing from it: the steps between
    /// measured loads (a warm-up, `chrome://` pages). `false` when the
    /// load event did not come.
    pub async fn visit(&mut self, url: &str) -> Result<bool, DevtoolsError> {
        let end = tokio::time::Instant::now() + self.timeout;
        self.cdp.set_deadline(end);
        let nav = self
            .cdp
            .call("Page.navigate", Some(&self.tab), json!({"url": url}))
            .await?;
        if nav.is_none() {
            return Ok(false);
        }
        while let Some(ev) = self.cdp.event(end).await? {
            match &*ev.method {
                "Page.loadEventFired" if ev.session_id.as_deref() == Some(self.tab.as_str()) => {
                    return Ok(true)
                }
                "Target.attachedToTarget" => {
                    if let Some(child) = self.cdp.follow_child(&ev.params)? {
                        self.children.insert(child);
                    }
                }
                _ => {}
            }
        }
        Ok(false)
    }

    /// Evaluates `expression` in the tab; its value (`None`: no answer in
    /// time).
    async fn evaluate(&mut self, expression: &str) -> Result<Option<Value>, DevtoolsError> {
        self.cdp
            .set_deadline(tokio::time::Instant::now() + TIMING_WAIT);
        self.cdp
            .call(
                "Runtime.evaluate",
                Some(&self.tab),
                json!({"expression": expression, "returnByValue": true}),
            )
            .await
    }

    /// A returning visitor's browser between two visits: the HTTP cache
    /// cleared (`Network.clearBrowserCache`), the socket pools flushed and
    /// the host-resolver cache cleared (the buttons of
    /// `chrome://net-internals`, which DevTools has no command for); what
    /// Chromium learned of the page (its loading predictor) is kept. The
    /// tab is left on `about:blank`. `Err` names a step that did not
    /// happen (a Chromium whose net-internals page lacks the button).
    pub async fn clear_for_revisit(&mut self) -> Result<(), DevtoolsError> {
        self.cdp
            .set_deadline(tokio::time::Instant::now() + TIMING_WAIT);
        self.cdp
            .call("Network.clearBrowserCache", Some(&self.tab), json!({}))
            .await?;
        for (page, button) in [
            (
                "chrome://net-internals/#sockets",
                "sockets-view-flush-button",
            ),
            ("chrome://net-internals/#dns", "dns-view-clear-cache"),
        ] {
            // Each view is its own navigation: a hash change alone would
            // not fire a load event.
            self.visit("about:blank").await?;
            if !self.visit(page).await? {
                return Err(DevtoolsError::Protocol(format!("{page} did not load")));
            }
            let said = self.evaluate(&click_js(button)).await?;
            let said = said
                .as_ref()
                .and_then(|a| a["result"]["value"].as_str())
                .unwrap_or("no answer");
            if said != "done" {
                return Err(DevtoolsError::Protocol(format!("{page}: {said}")));
            }
        }
        self.visit("about:blank").await?;
        Ok(())
    }

    /// The origins Chromium's loading predictor has learned for pages of
    /// `host`, as `chrome://predictors` lists them (it fills its table a
    /// moment after loading, so it is read until it has rows, for at most
    /// a second). The tab is left there.
    pub async fn predicted_origins(&mut self, host: &str) -> Result<Vec<String>, DevtoolsError> {
        if !self.visit("chrome://predictors").await? {
            return Err(DevtoolsError::Protocol(
                "chrome://predictors did not load".into(),
            ));
        }
        let until = tokio::time::Instant::now() + Duration::from_secs(1);
        loop {
            let answer = self
                .evaluate(PREDICTOR_ROWS_JS)
                .await?
                .unwrap_or(Value::Null);
            let found = predicted_origins(&answer, host).map_err(DevtoolsError::Protocol)?;
            if !found.is_empty() || tokio::time::Instant::now() >= until {
                return Ok(found);
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// The tab's Navigation Timing `loadEventEnd − startTime`, s: read once
    /// the load event has fired; `loadEventEnd` is 0 until its handlers
    /// have run, so it is asked again for a moment. The inner `Err` says
    /// why there is no time (the page has none, or it stayed 0).
    async fn onload_time(&mut self) -> Result<Result<f64, String>, DevtoolsError> {
        const EXPR: &str = "(() => { const n = performance.getEntriesByType('navigation')[0]; \
                            return n ? [n.startTime, n.loadEventEnd] : null; })()";
        let until = tokio::time::Instant::now() + TIMING_WAIT;
        self.cdp.set_deadline(until);
        loop {
            let answer = self
                .cdp
                .call(
                    "Runtime.evaluate",
                    Some(&self.tab),
                    json!({"expression": EXPR, "returnByValue": true}),
                )
                .await?;
            let Some(answer) = answer else {
                return Ok(Err("no answer to Runtime.evaluate".into()));
            };
            match onload_from_evaluate(&answer) {
                Ok(Some(s)) => return Ok(Ok(s)),
                Ok(None) if tokio::time::Instant::now() < until => {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                Ok(None) => return Ok(Err("loadEventEnd stayed 0".into())),
                Err(why) => return Ok(Err(why)),
            }
        }
    }

    /// Closes the browser (gracefully, killed if it hangs).
    pub async fn close(mut self) {
        self.browser.close(Some(&mut self.cdp)).await;
    }
}

/// The onload time, s, from a `Runtime.evaluate` answer holding
/// `[startTime, loadEventEnd]` (ms): `Ok(None)` while `loadEventEnd` is
/// still 0; `Err` for an answer of any other shape (an exception, no
/// navigation entry).
pub fn onload_from_evaluate(answer: &Value) -> Result<Option<f64>, String> {
    if let Some(text) = exception_text(answer) {
        return Err(format!("reading Navigation Timing: {text}"));
    }
    let value = &answer["result"]["value"];
    let pair = value.as_array().and_then(|a| match a.as_slice() {
        [s, e] => Some((s.as_f64()?, e.as_f64()?)),
        _ => None,
    });
    match pair {
        None => Err(format!("no Navigation Timing entry (got {value})")),
        Some((_, end)) if end <= 0.0 => Ok(None),
        Some((start, end)) if end >= start && end.is_finite() => Ok(Some((end - start) / 1000.0)),
        Some((start, end)) => Err(format!("loadEventEnd {end} before startTime {start}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_onload_time_is_read_from_navigation_timing_and_never_panics() {
        let ok = json!({"result": {"type": "object", "value": [0, 1234.5]}});
        assert_eq!(onload_from_evaluate(&ok), Ok(Some(1.2345)));
        // The load event's handlers have not finished yet.
        let early = json!({"result": {"value": [0, 0]}});
        assert_eq!(onload_from_evaluate(&early), Ok(None));
        for bad in [
            json!({"result": {"type": "object", "subtype": "null", "value": null}}),
            json!({"result": {"value": ["0", 5]}}),
            json!({"result": {"value": [10, 5]}}),
            json!({}),
            json!({"exceptionDetails": {"text": "Uncaught", "exception": {"description": "ReferenceError: performance"}}}),
        ] {
            assert!(onload_from_evaluate(&bad).is_err(), "{bad}");
        }
    }
}
