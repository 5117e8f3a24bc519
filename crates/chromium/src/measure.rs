//! What a measured load asks of Chromium beyond its load event: the
//! renderer slowed down as a phone's CPU would be, screenshots while the
//! page paints (for Speed Index), and the paint times web-performance
//! tools report (First Contentful Paint, Largest Contentful Paint) with
//! the Navigation Timing marks, all read from the page itself.
//!
//! The times are the browser's own: `performance.getEntriesByName(
//! 'first-contentful-paint')`, the last `largest-contentful-paint` entry
//! (buffered, so entries from before the observer count) and the
//! navigation entry's `domContentLoadedEventEnd` and `loadEventEnd`, all
//! from the navigation's start (`startTime`, 0 for a navigation).
//! `performance.timeOrigin` places that start on the wall clock, where
//! the screenshots' time stamps and the NetLog's are.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::visual::ScreencastFrame;

/// What a measured load does beyond navigating.
#[derive(Debug, Clone, PartialEq)]
pub struct Measure {
    /// How many times slower the renderer runs
    /// (`Emulation.setCPUThrottlingRate`; 1: the machine's speed). A
    /// phone's CPU is about 4× slower than a desktop's, Lighthouse's
    /// mobile default.
    pub cpu_slowdown: f64,
    /// Capture screenshots during the load (`Page.startScreencast`), for
    /// Speed Index.
    pub screenshots: bool,
    /// After the load event, how long to go on watching for paints (late
    /// images, the last LCP candidate) at most; the watch ends sooner when
    /// [`SETTLE_QUIET`] passes without a new screenshot.
    pub settle: Duration,
}

impl Default for Measure {
    /// The load event alone: no throttling, no screenshots, no watch after
    /// it (a browsing session's loads, as the cellular study makes them).
    fn default() -> Measure {
        Measure {
            cpu_slowdown: 1.0,
            screenshots: false,
            settle: Duration::ZERO,
        }
    }
}

/// A watch after the load event ends once this long passes without a new
/// screenshot: the page has stopped painting.
pub const SETTLE_QUIET: Duration = Duration::from_millis(500);

/// The screencast's settings: JPEG (small over the WebSocket), at a
/// phone's width; every frame Chromium paints.
pub fn screencast_params() -> Value {
    serde_json::json!({
        "format": "jpeg",
        "quality": 40,
        "maxWidth": 412,
        "maxHeight": 823,
        "everyNthFrame": 1
    })
}

/// A `Page.screencastFrame` event's frame and the id to acknowledge it
/// with; `None` for an event without data. `now_epoch_s` stands in for a
/// missing time stamp.
pub fn screencast_frame(params: &Value, now_epoch_s: f64) -> Option<(ScreencastFrame, Value)> {
    let data = params.get("data").and_then(Value::as_str)?;
    let ack = params.get("sessionId").cloned().unwrap_or(Value::Null);
    let at = params["metadata"]
        .get("timestamp")
        .and_then(Value::as_f64)
        .filter(|t| t.is_finite() && *t > 0.0)
        .unwrap_or(now_epoch_s);
    Some((
        ScreencastFrame {
            data: data.to_owned(),
            timestamp_s: at,
        },
        ack,
    ))
}

/// The paint and Navigation Timing marks of a load, seconds from the
/// navigation's start; `None` where the page has no such mark (a page that
/// paints no content has no FCP).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Paints {
    /// First Contentful Paint.
    pub fcp_s: Option<f64>,
    /// Largest Contentful Paint (the last candidate when the watch ended).
    pub lcp_s: Option<f64>,
    /// The end of `DOMContentLoaded`.
    pub dcl_s: Option<f64>,
    /// The end of the load event (`loadEventEnd`).
    pub onload_s: Option<f64>,
    /// The navigation's start on the wall clock, ms since the Unix epoch
    /// (`performance.timeOrigin`).
    pub time_origin_ms: Option<f64>,
}

/// The expression that reads [`Paints`] from the page (evaluated with
/// `awaitPromise`): the LCP observer delivers its buffered entries in a
/// task of its own, so the answer waits a moment for them.
pub const PAINTS_JS: &str = "(async () => {
  const nav = performance.getEntriesByType('navigation')[0] || null;
  const fcp = performance.getEntriesByName('first-contentful-paint')[0] || null;
  let lcp = null;
  try {
    await new Promise((done) => {
      new PerformanceObserver((list) => {
        const e = list.getEntries();
        if (e.length) { lcp = e[e.length - 1]; }
      }).observe({ type: 'largest-contentful-paint', buffered: true });
      setTimeout(done, 50);
    });
  } catch (e) {}
  return [performance.timeOrigin,
          nav ? nav.startTime : null,
          fcp ? fcp.startTime : null,
          lcp ? lcp.startTime : null,
          nav ? nav.domContentLoadedEventEnd : null,
          nav ? nav.loadEventEnd : null];
})()";

/// [`Paints`] from the answer to [`PAINTS_JS`]: an array of six numbers
/// (ms) or nulls. Marks before the start, non-finite, or 0 (not reached)
/// are left out; an answer of another shape is an error naming it.
pub fn paints_from_evaluate(answer: &Value) -> Result<Paints, String> {
    if let Some(text) = exception_text(answer) {
        return Err(format!("reading the paint times: {text}"));
    }
    let value = &answer["result"]["value"];
    let Some(a) = value.as_array().filter(|a| a.len() == 6) else {
        return Err(format!("paint times of an unknown shape: {value}"));
    };
    let num = |i: usize| a[i].as_f64().filter(|x| x.is_finite());
    let start = num(1).unwrap_or(0.0);
    let mark = |i: usize| {
        num(i)
            .filter(|t| *t > 0.0 && *t >= start)
            .map(|t| (t - start) / 1000.0)
    };
    Ok(Paints {
        fcp_s: mark(2),
        lcp_s: mark(3),
        dcl_s: mark(4),
        onload_s: mark(5),
        time_origin_ms: num(0).filter(|t| *t > 0.0).map(|t| t + start),
    })
}

/// What went wrong in a `Runtime.evaluate` answer that threw: the
/// exception's description, or its text; `None` when it did not throw.
pub(crate) fn exception_text(answer: &Value) -> Option<&str> {
    let e = answer.get("exceptionDetails")?;
    Some(
        e.get("exception")
            .and_then(|x| x.get("description"))
            .or_else(|| e.get("text"))
            .and_then(Value::as_str)
            .unwrap_or("an exception"),
    )
}

/// The expression that clicks a button of a `chrome://net-internals` page
/// by its element id, answering `"done"` or why not.
pub fn click_js(id: &str) -> String {
    format!(
        "(() => {{ const b = document.getElementById('{id}'); \
         if (!b) {{ return 'no element #{id}'; }} b.click(); return 'done'; }})()"
    )
}

/// The expression that lists the rows of the loading predictor's table on
/// `chrome://predictors`: the text of every cell, row by row.
pub const PREDICTOR_ROWS_JS: &str = "(() => {
  const body = document.getElementById('rpp_origin_body');
  if (!body) { return null; }
  return Array.from(body.rows).map((r) => Array.from(r.cells).map((c) => c.innerText));
})()";

/// The origins the loading predictor learned for `host` from the answer to
/// [`PREDICTOR_ROWS_JS`]. A host's first row starts with the host, then
/// its origin; its other rows start with an origin (the host cell spans
/// them), or with an empty host cell. `Err` when the page has no predictor
/// table (a Chromium without it).
pub fn predicted_origins(answer: &Value, host: &str) -> Result<Vec<String>, String> {
    let Some(rows) = answer["result"]["value"].as_array() else {
        return Err("chrome://predictors has no loading-predictor table".into());
    };
    let is_origin = |c: &str| c.starts_with("http://") || c.starts_with("https://");
    let mut current = String::new();
    let mut out = Vec::new();
    for r in rows {
        let cell = |i: usize| r.get(i).and_then(Value::as_str).unwrap_or("").trim();
        let origin = if is_origin(cell(0)) {
            cell(0)
        } else {
            if !cell(0).is_empty() {
                current = cell(0).to_owned();
            }
            cell(1)
        };
        if current == host && is_origin(origin) {
            out.push(origin.to_owned());
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn paint_times_are_read_from_the_page_and_never_panic() {
        let ok = json!({"result": {"value": [1.7e12, 0, 850.5, 1200, 900, 2000]}});
        let p = paints_from_evaluate(&ok).expect("paints");
        assert_eq!(p.fcp_s, Some(0.8505));
        assert_eq!(p.lcp_s, Some(1.2));
        assert_eq!(p.dcl_s, Some(0.9));
        assert_eq!(p.onload_s, Some(2.0));
        assert_eq!(p.time_origin_ms, Some(1.7e12));
        // A page that painted nothing and whose load event has not ended.
        let none = json!({"result": {"value": [1.7e12, 0, null, null, 300, 0]}});
        let p = paints_from_evaluate(&none).expect("paints");
        assert_eq!((p.fcp_s, p.lcp_s, p.onload_s), (None, None, None));
        for bad in [
            json!({"result": {"value": null}}),
            json!({"result": {"value": [1, 2, 3]}}),
            json!({}),
            json!({"exceptionDetails": {"text": "Uncaught"}}),
        ] {
            assert!(paints_from_evaluate(&bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn frames_take_chromiums_time_stamp_or_the_arrival() {
        let ev = json!({"data": "AAAA", "sessionId": 7, "metadata": {"timestamp": 1.5e9}});
        let (f, ack) = screencast_frame(&ev, 9.0).expect("frame");
        assert_eq!((f.timestamp_s, ack), (1.5e9, json!(7)));
        let bare = json!({"data": "AAAA", "sessionId": 8, "metadata": {}});
        assert_eq!(
            screencast_frame(&bare, 9.0).map(|f| f.0.timestamp_s),
            Some(9.0)
        );
        assert!(screencast_frame(&json!({"sessionId": 1}), 9.0).is_none());
    }

    #[test]
    fn predictor_rows_continue_their_host() {
        let answer = json!({"result": {"value": [
            ["www.p.example", "https://www.p.example/", "2", "0"],
            ["https://cdn.example/", "2", "0"],
            ["", "https://img.example/", "1"],
            ["other.example", "https://x.example/", "1"],
        ]}});
        assert_eq!(
            predicted_origins(&answer, "www.p.example").expect("rows"),
            [
                "https://www.p.example/",
                "https://cdn.example/",
                "https://img.example/"
            ]
        );
        assert!(predicted_origins(&answer, "none.example")
            .expect("rows")
            .is_empty());
        assert!(predicted_origins(&json!({"result": {"value": null}}), "h").is_err());
        assert!(click_js("dns-view-clear-cache").contains("getElementById('dns-view-clear-cache')"));
    }
}
