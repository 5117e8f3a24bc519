//! Computation latency from a Chrome trace.
//!
//! Seed 001 counts the client's computation latency as time that "blocks the
//! network transmission": while the renderer's main thread runs a task
//! (parsing, script evaluation, style, layout), the objects that task would
//! discover are not requested yet. The trace records every such task, so the
//! latency is read as the renderer main thread's busy time during the load.
//!
//! # The rule
//!
//! 1. **Main frame**: the frame of `TracingStartedInBrowser`'s
//!    `args.data.frames` that has no `parent` (the outermost main frame), else
//!    `TracingStartedInPage`'s `args.data.page` (older Chrome).
//! 2. **Navigation**: the first `navigationStart` of that frame with a
//!    non-empty `documentLoaderURL` other than `about:blank` (without a known
//!    main frame: the first such event with `isLoadingMainFrame`). The many
//!    `navigationStart`s of SVG-image documents, which Chrome also marks as
//!    main frames, belong to other frames and are ignored. The window starts
//!    at its `ts`.
//! 3. **Thread**: the renderer main thread of that process: the thread of the
//!    `navigationStart` event (the renderer main thread emits it), checked
//!    against the `CrRendererMain` `thread_name` metadata. Without a
//!    navigation, the `CrRendererMain` thread with the most task time, over
//!    the whole trace.
//! 4. **End**: the first `loadEventEnd` of the main frame after the start,
//!    else its `MarkLoad`, else the end of the trace.
//! 5. **Time**: the union of the top-level task intervals on that thread —
//!    complete (`ph: "X"`) or `B`/`E` events named `RunTask`,
//!    `ThreadControllerImpl::RunTask`, `ThreadControllerImpl::DoWork` or
//!    `TaskQueueManager::ProcessTaskFromWorkQueue` (the names have changed
//!    across Chrome versions) — clipped to the window. Taking the union means
//!    nested or overlapping task events are never counted twice.
//!
//! The result is in milliseconds, rounded to the nearest. It slightly
//! overstates the blocking time (tasks that only handle network IPC count
//! too) and ignores off-main-thread work (compositor, workers), which does not
//! block discovery.

use std::collections::HashMap;

use serde_json::Value;

use super::util::{num, str_of, type_name, Ctx};
use super::{parse_json, ImportError};

/// Task event names that mark one top-level main-thread task.
const TASK_NAMES: [&str; 4] = [
    "RunTask",
    "ThreadControllerImpl::RunTask",
    "ThreadControllerImpl::DoWork",
    "TaskQueueManager::ProcessTaskFromWorkQueue",
];

/// What [`trace_summary`] measured, for callers that want more than the
/// number (a CLI printing statistics, a test checking the rule).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceSummary {
    /// Main-thread task time in the window, milliseconds, rounded.
    pub computation_ms: u32,
    /// Renderer process id measured.
    pub pid: i64,
    /// Renderer main thread id measured.
    pub tid: i64,
    /// Window start, trace clock microseconds (the `navigationStart`, or the
    /// first event without one).
    pub start_us: i64,
    /// Window end, trace clock microseconds.
    pub end_us: i64,
    /// What ended the window: `loadEventEnd`, `MarkLoad` or `end of trace`.
    pub end_marker: String,
    /// Number of top-level tasks that overlap the window.
    pub tasks: usize,
    /// The navigation's URL (`documentLoaderURL`), when found.
    pub navigation_url: Option<String>,
    /// Remarks on fallbacks taken.
    pub notes: Vec<String>,
}

/// Main-thread computation latency of the page load in a Chrome trace, in
/// milliseconds (see the module documentation for the exact rule). The input
/// may be `{"traceEvents": [...]}` or a bare array, optionally gzipped.
pub fn computation_ms_from_trace(bytes: &[u8], source: &str) -> Result<u32, ImportError> {
    trace_summary(bytes, source).map(|s| s.computation_ms)
}

/// Like [`computation_ms_from_trace`], with the details of what was measured.
pub fn trace_summary(bytes: &[u8], source: &str) -> Result<TraceSummary, ImportError> {
    let value = parse_json(bytes, source)?;
    summarize(&value, source)
}

/// A `navigationStart` event.
#[derive(Debug, Clone)]
struct Nav {
    pid: i64,
    tid: i64,
    ts: f64,
    frame: Option<String>,
    url: Option<String>,
    main_frame_flag: Option<bool>,
}

/// A load-end marker.
#[derive(Debug)]
struct LoadMark {
    ts: f64,
    frame: Option<String>,
    is_mark_load: bool,
}

/// Task intervals of one thread, `(start, end)` in µs.
type Intervals = Vec<(f64, f64)>;

/// The trace's events: a bare array, or `traceEvents` of an object; an
/// empty trace is an error.
fn trace_events<'v>(value: &'v Value, input: &str) -> Result<&'v [Value], ImportError> {
    let events: &[Value] = match value {
        Value::Array(a) => a,
        Value::Object(m) => match m.get("traceEvents") {
            Some(Value::Array(a)) => a,
            _ => {
                return Err(ImportError::NotTrace {
                    input: input.to_string(),
                    reason: "expected an object with a `traceEvents` array, or an array of events"
                        .to_string(),
                })
            }
        },
        other => {
            return Err(ImportError::NotTrace {
                input: input.to_string(),
                reason: format!("expected an array of events, found {}", type_name(other)),
            })
        }
    };
    if events.is_empty() {
        return Err(ImportError::Empty {
            input: input.to_string(),
            reason: "the trace has no events".to_string(),
        });
    }

    Ok(events)
}

/// What one pass over the events collects: thread names, the main frame,
/// navigations, load marks, and every thread's task intervals.
#[derive(Debug)]
struct TraceScan {
    thread_names: HashMap<(i64, i64), String>,
    main_frame: Option<String>,
    navs: Vec<Nav>,
    marks: Vec<LoadMark>,
    tasks: HashMap<(i64, i64), Intervals>,
    first_ts: f64,
    last_ts: f64,
}

impl TraceScan {
    /// The pass over `events` (timing fields of the events the rule uses
    /// must be numbers).
    fn read(ctx: &Ctx<'_>, events: &[Value]) -> Result<TraceScan, ImportError> {
        let mut thread_names: HashMap<(i64, i64), String> = HashMap::new();
        let mut main_frame: Option<String> = None;
        let mut navs: Vec<Nav> = Vec::new();
        let mut marks: Vec<LoadMark> = Vec::new();
        let mut tasks: HashMap<(i64, i64), Intervals> = HashMap::new();
        // Open B events per thread: (is a task, ts).
        let mut open: HashMap<(i64, i64), Vec<(bool, f64)>> = HashMap::new();
        let (mut first_ts, mut last_ts) = (f64::INFINITY, f64::NEG_INFINITY);

        for (i, ev) in events.iter().enumerate() {
            if !ev.is_object() {
                return Err(ctx.bad(
                    i,
                    format!("traceEvents[{i}]"),
                    format!("should be an object, found {}", type_name(ev)),
                ));
            }
            let ph = str_of(ev, "ph").unwrap_or("");
            let name = str_of(ev, "name").unwrap_or("");
            let is_task = TASK_NAMES.contains(&name);
            // Timing fields must be numbers on the events the rule uses; on any
            // other event a malformed field is ignored.
            let relevant =
                is_task || matches!(name, "navigationStart" | "loadEventEnd" | "MarkLoad");
            let field_num = |key: &str| -> Result<Option<f64>, ImportError> {
                match ev.get(key) {
                    None | Some(Value::Null) => Ok(None),
                    Some(Value::Number(n)) => Ok(n.as_f64()),
                    Some(other) if relevant => Err(ctx.bad(
                        i,
                        format!("traceEvents[{i}].{key}"),
                        format!("should be a number, found {}", type_name(other)),
                    )),
                    Some(_) => Ok(None),
                }
            };
            let ts = field_num("ts")?;
            let dur = field_num("dur")?;
            let pid = num(ev.get("pid")).ok().flatten().unwrap_or(0);
            let tid = num(ev.get("tid")).ok().flatten().unwrap_or(0);
            if let Some(t) = ts.filter(|t| *t > 0.0) {
                first_ts = first_ts.min(t);
                last_ts = last_ts.max(t + dur.unwrap_or(0.0).max(0.0));
            }
            let args = ev.get("args");
            let data = args.and_then(|a| a.get("data"));

            match (ph, name) {
                ("M", "thread_name") => {
                    if let Some(n) = args.and_then(|a| str_of(a, "name")) {
                        thread_names.insert((pid, tid), n.to_string());
                    }
                }
                (_, "TracingStartedInBrowser") if main_frame.is_none() => {
                    main_frame = data
                        .and_then(|d| d.get("frames"))
                        .and_then(Value::as_array)
                        .and_then(|frames| {
                            frames.iter().find(|f| {
                                f.get("parent").is_none()
                                    && f.get("isOutermostMainFrame").and_then(Value::as_bool)
                                        != Some(false)
                            })
                        })
                        .and_then(|f| str_of(f, "frame"))
                        .map(str::to_string);
                }
                (_, "TracingStartedInPage") if main_frame.is_none() => {
                    main_frame = data.and_then(|d| str_of(d, "page")).map(str::to_string);
                }
                (_, "navigationStart") => {
                    if let Some(ts) = ts {
                        navs.push(Nav {
                            pid,
                            tid,
                            ts,
                            frame: args.and_then(|a| str_of(a, "frame")).map(str::to_string),
                            url: data
                                .and_then(|d| str_of(d, "documentLoaderURL"))
                                .map(str::to_string),
                            main_frame_flag: data
                                .and_then(|d| d.get("isLoadingMainFrame"))
                                .and_then(Value::as_bool),
                        });
                    }
                }
                (_, "loadEventEnd") | (_, "MarkLoad") => {
                    if let Some(ts) = ts {
                        let frame = args
                            .and_then(|a| str_of(a, "frame"))
                            .or_else(|| data.and_then(|d| str_of(d, "frame")));
                        marks.push(LoadMark {
                            ts,
                            frame: frame.map(str::to_string),
                            is_mark_load: name == "MarkLoad",
                        });
                    }
                }
                ("X", _) if is_task => {
                    if let (Some(ts), Some(dur)) = (ts, dur) {
                        if dur >= 0.0 {
                            tasks.entry((pid, tid)).or_default().push((ts, ts + dur));
                        }
                    }
                }
                ("B", _) => {
                    if let Some(ts) = ts {
                        open.entry((pid, tid)).or_default().push((is_task, ts));
                    }
                }
                ("E", _) => {
                    if let (Some(ts), Some((was_task, start))) =
                        (ts, open.get_mut(&(pid, tid)).and_then(Vec::pop))
                    {
                        if was_task && ts >= start {
                            tasks.entry((pid, tid)).or_default().push((start, ts));
                        }
                    }
                }
                _ => {}
            }
        }
        Ok(TraceScan {
            thread_names,
            main_frame,
            navs,
            marks,
            tasks,
            first_ts,
            last_ts,
        })
    }

    /// The main frame's navigation with a real URL (or none recorded).
    fn navigation(&self) -> Option<Nav> {
        let (navs, main_frame) = (&self.navs, &self.main_frame);
        let real_url = |n: &Nav| {
            n.url
                .as_deref()
                .is_some_and(|u| !u.is_empty() && u != "about:blank")
        };
        match &main_frame {
            Some(mf) => navs.iter().find(|n| {
                n.frame.as_deref() == Some(mf.as_str()) && (real_url(n) || n.url.is_none())
            }),
            None => navs
                .iter()
                .find(|n| n.main_frame_flag != Some(false) && (real_url(n) || n.url.is_none())),
        }
        .cloned()
    }

    /// The renderer main thread to measure: the navigation's (or the
    /// CrRendererMain thread of its process), else the busiest
    /// CrRendererMain thread of the trace, noted.
    fn main_thread(
        &self,
        nav: &Option<Nav>,
        input: &str,
        notes: &mut Vec<String>,
    ) -> Result<(i64, i64), ImportError> {
        let (thread_names, tasks) = (&self.thread_names, &self.tasks);
        let is_main_thread =
            |key: &(i64, i64)| thread_names.get(key).is_some_and(|n| n == "CrRendererMain");
        Ok(match nav {
            Some(n) => {
                if thread_names.is_empty() || is_main_thread(&(n.pid, n.tid)) {
                    (n.pid, n.tid)
                } else {
                    let named = thread_names
                        .keys()
                        .filter(|k| k.0 == n.pid && is_main_thread(k))
                        .min()
                        .copied();
                    named.unwrap_or((n.pid, n.tid))
                }
            }
            None => {
                notes.push(format!(
                    "{input}: no main-frame navigationStart; measured the busiest CrRendererMain thread over the whole trace"
                ));
                let mut candidates: Vec<(i64, i64)> = thread_names
                    .keys()
                    .filter(|k| is_main_thread(k))
                    .copied()
                    .collect();
                candidates.sort();
                candidates
                    .into_iter()
                    .max_by(|a, b| {
                        let busy = |k: &(i64, i64)| {
                            union_time(
                                tasks.get(k).map_or(&[][..], Vec::as_slice),
                                f64::MIN,
                                f64::MAX,
                            )
                            .0
                        };
                        busy(a).total_cmp(&busy(b))
                    })
                    .ok_or_else(|| ImportError::NoMainThread {
                        input: input.to_string(),
                    })?
            }
        })
    }

    /// The measured window: from the navigation (or the trace's first
    /// event) to the main frame's load event (or MarkLoad, or the trace's
    /// end, noted), with the marker's name.
    fn window(
        &self,
        nav: &Option<Nav>,
        input: &str,
        notes: &mut Vec<String>,
    ) -> (f64, f64, &'static str) {
        let (marks, main_frame, first_ts, last_ts) =
            (&self.marks, &self.main_frame, self.first_ts, self.last_ts);
        let start = nav.as_ref().map_or(first_ts, |n| n.ts);
        let frame = main_frame
            .clone()
            .or_else(|| nav.as_ref().and_then(|n| n.frame.clone()));
        let after = |m: &&LoadMark| m.ts >= start && frame.is_some() && m.frame == frame;
        let (end, end_marker) = match marks
            .iter()
            .filter(|m| !m.is_mark_load)
            .find(after)
            .or_else(|| marks.iter().filter(|m| m.is_mark_load).find(after))
        {
            Some(m) if nav.is_some() => (
                m.ts,
                if m.is_mark_load {
                    "MarkLoad"
                } else {
                    "loadEventEnd"
                },
            ),
            _ => {
                if nav.is_some() {
                    notes.push(format!(
                        "{input}: no load event for the main frame; window ends with the trace"
                    ));
                }
                (last_ts, "end of trace")
            }
        };
        (start, end, end_marker)
    }
}

/// Computation latency from a parsed trace: the main thread's task time
/// over the page's load window.
fn summarize(value: &Value, input: &str) -> Result<TraceSummary, ImportError> {
    let ctx = Ctx { input };
    let events = trace_events(value, input)?;
    let scan = TraceScan::read(&ctx, events)?;
    let mut notes = Vec::new();
    let nav = scan.navigation();
    let (pid, tid) = scan.main_thread(&nav, input, &mut notes)?;
    let (start, end, end_marker) = scan.window(&nav, input, &mut notes);
    let tasks = &scan.tasks;
    let (busy_us, count) = if start.is_finite() && end.is_finite() && end >= start {
        union_time(
            tasks.get(&(pid, tid)).map_or(&[][..], Vec::as_slice),
            start,
            end,
        )
    } else {
        (0.0, 0)
    };
    let ms = (busy_us / 1000.0).round();
    let computation_ms = if ms >= f64::from(u32::MAX) {
        u32::MAX
    } else {
        ms.max(0.0) as u32
    };
    notes.push(format!(
        "{input}: computation {computation_ms} ms = main-thread task time of renderer {pid}/{tid} over {:.0} ms from navigationStart to {end_marker} ({count} tasks)",
        if end >= start && start.is_finite() { (end - start) / 1000.0 } else { 0.0 }
    ));
    let to_i64 = |f: f64| if f.is_finite() { f.round() as i64 } else { 0 };
    Ok(TraceSummary {
        computation_ms,
        pid,
        tid,
        start_us: to_i64(start),
        end_us: to_i64(end),
        end_marker: end_marker.to_string(),
        tasks: count,
        navigation_url: nav.and_then(|n| n.url).filter(|u| !u.is_empty()),
        notes,
    })
}

/// Total length of the union of `intervals` clipped to `[lo, hi]`, and the
/// number of intervals that overlap the window. Nested and overlapping
/// intervals count once. Also the edge tracer's network-busy time.
pub fn union_time(intervals: &[(f64, f64)], lo: f64, hi: f64) -> (f64, usize) {
    let mut v: Vec<(f64, f64)> = intervals
        .iter()
        .map(|&(s, e)| (s.max(lo), e.min(hi)))
        .filter(|(s, e)| e > s)
        .collect();
    let count = v.len();
    v.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut total = 0.0;
    let mut cur: Option<(f64, f64)> = None;
    for (s, e) in v {
        cur = match cur {
            Some((cs, ce)) if s <= ce => Some((cs, ce.max(e))),
            Some((cs, ce)) => {
                total += ce - cs;
                Some((s, e))
            }
            None => Some((s, e)),
        };
    }
    if let Some((cs, ce)) = cur {
        total += ce - cs;
    }
    (total, count)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn x(name: &str, pid: i64, tid: i64, ts: i64, dur: i64) -> Value {
        json!({"ph": "X", "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur, "cat": "toplevel", "args": {}})
    }

    /// Two renderer processes; the page's renderer (pid 10) has a main thread
    /// with nested and overlapping tasks and a compositor thread that must be
    /// ignored; pid 20 is an SVG-image-like renderer.
    fn trace() -> Value {
        json!({"traceEvents": [
            {"ph": "M", "name": "thread_name", "pid": 10, "tid": 1, "args": {"name": "CrRendererMain"}},
            {"ph": "M", "name": "thread_name", "pid": 10, "tid": 2, "args": {"name": "Compositor"}},
            {"ph": "M", "name": "thread_name", "pid": 20, "tid": 1, "args": {"name": "CrRendererMain"}},
            {"ph": "I", "name": "TracingStartedInBrowser", "pid": 1, "tid": 1, "ts": 500,
             "args": {"data": {"frames": [{"frame": "MAIN", "processId": 10, "url": "about:blank"}]}}},
            x("RunTask", 10, 1, 100, 300),         // before navigation: ignored
            {"ph": "R", "name": "navigationStart", "pid": 10, "tid": 1, "ts": 1000,
             "args": {"frame": "SVG", "data": {"documentLoaderURL": "", "isLoadingMainFrame": true}}},
            {"ph": "R", "name": "navigationStart", "pid": 10, "tid": 1, "ts": 1000,
             "args": {"frame": "MAIN", "data": {"documentLoaderURL": "https://p.example/", "isLoadingMainFrame": true}}},
            x("RunTask", 10, 1, 900, 200),         // straddles the start: 100 µs count
            x("RunTask", 10, 1, 2000, 10_000),     // 10 ms
            x("ThreadControllerImpl::RunTask", 10, 1, 3000, 2000), // nested: not again
            x("RunTask", 10, 1, 11_000, 2000),     // overlaps the previous: +1 ms
            {"ph": "B", "name": "RunTask", "pid": 10, "tid": 1, "ts": 20_000},
            {"ph": "B", "name": "FunctionCall", "pid": 10, "tid": 1, "ts": 20_100},
            {"ph": "E", "pid": 10, "tid": 1, "ts": 20_200},
            {"ph": "E", "pid": 10, "tid": 1, "ts": 23_000}, // 3 ms
            x("RunTask", 10, 2, 2000, 50_000),     // compositor: ignored
            x("RunTask", 20, 1, 2000, 50_000),     // other renderer: ignored
            {"ph": "R", "name": "loadEventEnd", "pid": 10, "tid": 1, "ts": 1500, "args": {"frame": "SVG"}},
            {"ph": "R", "name": "loadEventEnd", "pid": 10, "tid": 1, "ts": 30_000, "args": {"frame": "MAIN"}},
            x("RunTask", 10, 1, 29_500, 5000),     // straddles the end: 0.5 ms
            x("RunTask", 10, 1, 40_000, 9000)      // after load: ignored
        ]})
    }

    #[test]
    fn nested_tasks_counted_once_within_window() {
        let bytes = serde_json::to_vec(&trace()).unwrap();
        let s = trace_summary(&bytes, "t").unwrap();
        assert_eq!((s.pid, s.tid), (10, 1));
        assert_eq!((s.start_us, s.end_us), (1000, 30_000));
        assert_eq!(s.end_marker, "loadEventEnd");
        assert_eq!(s.navigation_url.as_deref(), Some("https://p.example/"));
        // 0.1 + 11 + 3 + 0.5 = 14.6 ms
        assert_eq!(s.computation_ms, 15);
        assert_eq!(computation_ms_from_trace(&bytes, "t").unwrap(), 15);
    }

    #[test]
    fn bare_array_without_navigation_uses_busiest_main_thread() {
        let v = json!([
            {"ph": "M", "name": "thread_name", "pid": 1, "tid": 1, "args": {"name": "CrRendererMain"}},
            {"ph": "M", "name": "thread_name", "pid": 2, "tid": 7, "args": {"name": "CrRendererMain"}},
            x("RunTask", 1, 1, 10, 1000),
            x("RunTask", 2, 7, 10, 2_600_000),
            x("RunTask", 2, 7, 100, 50)
        ]);
        let s = trace_summary(&serde_json::to_vec(&v).unwrap(), "t").unwrap();
        assert_eq!((s.pid, s.tid, s.computation_ms), (2, 7, 2600));
        assert_eq!(s.end_marker, "end of trace");
    }

    #[test]
    fn errors() {
        assert!(matches!(
            computation_ms_from_trace(b"{\"traceEvents\": [", "t"),
            Err(ImportError::Json { .. })
        ));
        assert!(matches!(
            computation_ms_from_trace(b"{\"a\": 1}", "t"),
            Err(ImportError::NotTrace { .. })
        ));
        assert!(matches!(
            computation_ms_from_trace(b"7", "t"),
            Err(ImportError::NotTrace { .. })
        ));
        assert!(matches!(
            computation_ms_from_trace(b"[]", "t"),
            Err(ImportError::Empty { .. })
        ));
        assert!(matches!(
            computation_ms_from_trace(br#"[{"ph": "X", "name": "Foo", "ts": 1, "dur": 2}]"#, "t"),
            Err(ImportError::NoMainThread { .. })
        ));
        let e = computation_ms_from_trace(
            br#"[{"ph": "X", "name": "RunTask", "ts": "soon", "dur": 2}]"#,
            "t",
        )
        .unwrap_err();
        assert!(
            matches!(e, ImportError::BadField { entry: 0, ref field, .. } if field == "traceEvents[0].ts"),
            "{e:?}"
        );
        let e = computation_ms_from_trace(br#"[{"ph": "X"}, null]"#, "t").unwrap_err();
        assert!(matches!(e, ImportError::BadField { entry: 1, .. }), "{e:?}");
        // Irrelevant events may be odd.
        let ok = computation_ms_from_trace(
            br#"[{"ph": "M", "name": "thread_name", "pid": 1, "tid": 1, "args": {"name": "CrRendererMain"}}, {"ph": "i", "name": "x", "ts": "?"}]"#,
            "t",
        );
        assert_eq!(ok, Ok(0));
    }

    #[test]
    fn union_handles_nesting() {
        let (t, n) = union_time(
            &[(0.0, 10.0), (2.0, 3.0), (5.0, 12.0), (20.0, 21.0)],
            f64::MIN,
            f64::MAX,
        );
        assert_eq!((t, n), (13.0, 4));
        assert_eq!(union_time(&[(0.0, 10.0)], 4.0, 6.0).0, 2.0);
        assert_eq!(union_time(&[], 0.0, 1.0), (0.0, 0));
    }
}
