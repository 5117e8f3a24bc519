//! `mewa link plot LOG`: throughput, capacity and delay over time from a
//! link event log, as one SVG with two panels, and a text summary.

use std::path::Path;
use std::time::Duration;

use mewa_link::core::EventKind;
use mewa_link::eventlog::EventLog;
use plotters::prelude::*;

use crate::ReportError;

/// Reads one figure of a bin, where the bin has it.
type BinDelay = fn(&Bin) -> Option<f64>;

/// Per-bin figures.
#[derive(Debug, Clone, PartialEq)]
pub struct Bin {
    /// Bin start, seconds.
    pub t: f64,
    /// Delivered (departed) Mbit/s.
    pub throughput: f64,
    /// Mbit/s the link could have carried (departures + unused opportunities).
    pub capacity: f64,
    /// Offered (arrived) Mbit/s.
    pub offered: f64,
    /// Median one-way delay of packets departing in the bin, ms.
    pub delay_p50: Option<f64>,
    /// 95th percentile of the same, ms.
    pub delay_p95: Option<f64>,
}

/// Bins the log's events.
pub fn bins(log: &EventLog, width: Duration) -> Vec<Bin> {
    let end = log.events.iter().map(|e| e.at).max().unwrap_or_default();
    let w = width.max(Duration::from_millis(1));
    let n = (end.as_nanos() / w.as_nanos()) as usize + 1;
    let mut dep = vec![0u64; n];
    let mut unused = vec![0u64; n];
    let mut arr = vec![0u64; n];
    let mut delays: Vec<Vec<f64>> = vec![Vec::new(); n];
    for e in &log.events {
        let i = ((e.at.as_nanos() / w.as_nanos()) as usize).min(n - 1);
        match e.kind {
            EventKind::Departure => {
                dep[i] += e.bytes as u64;
                if let Some(d) = e.delay {
                    delays[i].push(d.as_secs_f64() * 1e3);
                }
            }
            EventKind::Unused => unused[i] += e.bytes as u64,
            EventKind::Arrival => arr[i] += e.bytes as u64,
            EventKind::DropLoss | EventKind::DropQueue => {}
        }
    }
    let mbps = |b: u64| b as f64 * 8.0 / w.as_secs_f64() / 1e6;
    (0..n)
        .map(|i| {
            let d = &mut delays[i];
            d.sort_by(f64::total_cmp);
            let q =
                |p: f64| (!d.is_empty()).then(|| d[((d.len() - 1) as f64 * p).round() as usize]);
            Bin {
                t: (w * i as u32).as_secs_f64(),
                throughput: mbps(dep[i]),
                capacity: mbps(dep[i] + unused[i]),
                offered: mbps(arr[i]),
                delay_p50: q(0.5),
                delay_p95: q(0.95),
            }
        })
        .collect()
}

/// A bin width giving about 200 bins: a multiple of 10 ms, 10 ms to 1 s.
pub fn auto_width(log: &EventLog) -> Duration {
    let end = log.events.iter().map(|e| e.at).max().unwrap_or_default();
    let ms = (end.as_millis() as u64 / 200).clamp(10, 1000);
    Duration::from_millis(ms.div_ceil(10) * 10)
}

/// Reads `log`, draws `out_svg`, and returns the summary to print.
pub fn plot_log(log: &Path, out_svg: &Path) -> Result<String, ReportError> {
    let input = |message: String| ReportError::Input {
        path: log.to_path_buf(),
        message,
    };
    let text = std::fs::read_to_string(log).map_err(|source| ReportError::Io {
        path: log.to_path_buf(),
        source,
    })?;
    let parsed = EventLog::parse(&text).map_err(|e| input(e.to_string()))?;
    if parsed.events.is_empty() {
        return Err(input(
            "no events: was any traffic sent through the link?".into(),
        ));
    }
    let width = auto_width(&parsed);
    let b = bins(&parsed, width);
    draw(&parsed, &b, width, out_svg)?;
    Ok(summary(&parsed, &b))
}

/// Delivered bytes and rate, capacity and utilisation (on a trace), delay
/// percentiles and drops, one line each.
pub fn summary(log: &EventLog, b: &[Bin]) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    let count = |k: EventKind| log.events.iter().filter(|e| e.kind == k).count();
    let bytes = |k: EventKind| {
        log.events
            .iter()
            .filter(|e| e.kind == k)
            .map(|e| e.bytes as u64)
            .sum::<u64>()
    };
    let start = log.events.first().map(|e| e.at).unwrap_or_default();
    let end = log.events.iter().map(|e| e.at).max().unwrap_or_default();
    let secs = (end - start).as_secs_f64().max(1e-9);
    let delivered = bytes(EventKind::Departure);
    let unused = bytes(EventKind::Unused);
    let mut delays: Vec<f64> = log
        .events
        .iter()
        .filter_map(|e| e.delay)
        .map(|d| d.as_secs_f64() * 1e3)
        .collect();
    delays.sort_by(f64::total_cmp);
    let q = |p: f64| {
        delays
            .get(((delays.len().max(1) - 1) as f64 * p).round() as usize)
            .copied()
            .unwrap_or(0.0)
    };
    let _ = writeln!(
        out,
        "link      {} ({})",
        log.description,
        log.dir.map_or("?", |d| d.name())
    );
    let _ = writeln!(out, "duration  {secs:.3} s, {} bins", b.len());
    let _ = writeln!(
        out,
        "delivered {} packets, {:.3} MB, {:.2} Mbit/s",
        count(EventKind::Departure),
        delivered as f64 / 1e6,
        delivered as f64 * 8.0 / secs / 1e6
    );
    if unused > 0 {
        let cap = (delivered + unused) as f64;
        let _ = writeln!(
            out,
            "capacity  {:.2} Mbit/s (trace), utilisation {:.1}%",
            cap * 8.0 / secs / 1e6,
            100.0 * delivered as f64 / cap
        );
    }
    let _ = writeln!(
        out,
        "delay     p50 {:.2} ms, p95 {:.2} ms, max {:.2} ms",
        q(0.5),
        q(0.95),
        q(1.0)
    );
    let _ = writeln!(
        out,
        "drops     {} by loss, {} by the queue",
        count(EventKind::DropLoss),
        count(EventKind::DropQueue)
    );
    out
}

/// One named line of a panel: a value per bin, where there is one.
type Line = (&'static str, RGBColor, BinDelay);

/// Draws the two panels (rates, delays) of `b` to `out`.
pub fn draw(log: &EventLog, b: &[Bin], width: Duration, out: &Path) -> Result<(), ReportError> {
    let e = |e: &dyn std::fmt::Display| ReportError::Plot {
        path: out.to_path_buf(),
        message: e.to_string(),
    };
    let root = SVGBackend::new(out, (1000, 720)).into_drawing_area();
    root.fill(&WHITE).map_err(|x| e(&x))?;
    let (top, bottom) = root.split_vertically(380);
    let t_end = b.last().map_or(1.0, |x| x.t) + width.as_secs_f64();
    // Capacity is known only where a trace reported unused opportunities.
    let has_cap = log.events.iter().any(|e| e.kind == EventKind::Unused);
    // The full description is in the printed summary; the title stays short.
    let mut what: String = log.description.chars().take(70).collect();
    if log.description.chars().count() > 70 {
        what.push('…');
    }
    let title = format!(
        "{} ({}), per {} ms",
        what,
        log.dir.map_or("?", |d| d.name()),
        width.as_millis()
    );
    let mut rates: Vec<Line> = Vec::new();
    if has_cap {
        rates.push(("capacity", RGBColor(150, 150, 150), |x| Some(x.capacity)));
    }
    rates.push(("offered", RGBColor(230, 140, 30), |x| Some(x.offered)));
    rates.push(("delivered", RGBColor(30, 90, 200), |x| Some(x.throughput)));
    panel(&top, &title, "Mbit/s", b, t_end, &rates).map_err(|x| e(&x))?;
    let delays: [Line; 2] = [
        ("p95", RGBColor(200, 60, 60), |x| x.delay_p95),
        ("median", RGBColor(30, 90, 200), |x| x.delay_p50),
    ];
    panel(
        &bottom,
        "one-way delay of departing packets",
        "ms",
        b,
        t_end,
        &delays,
    )
    .map_err(|x| e(&x))?;
    root.present().map_err(|x| e(&x))?;
    Ok(())
}

/// Draws `lines` over time on one panel, its y axis sized to fit them.
fn panel(
    area: &DrawingArea<SVGBackend<'_>, plotters::coord::Shift>,
    caption: &str,
    y_desc: &str,
    b: &[Bin],
    t_end: f64,
    lines: &[Line],
) -> Result<(), Box<dyn std::error::Error>> {
    let y_max = lines
        .iter()
        .flat_map(|(_, _, f)| b.iter().filter_map(f))
        .fold(0.0, f64::max);
    let mut c = ChartBuilder::on(area)
        .caption(caption, ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(60)
        .build_cartesian_2d(0.0..t_end, 0.0..(y_max * 1.1).max(0.1))?;
    c.configure_mesh()
        .x_desc("time (s)")
        .y_desc(y_desc)
        .draw()?;
    for &(name, colour, f) in lines {
        c.draw_series(LineSeries::new(
            b.iter().filter_map(|x| f(x).map(|v| (x.t, v))),
            colour.stroke_width(2),
        ))?
        .label(name)
        .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], colour.stroke_width(2)));
    }
    c.configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use mewa_link::core::{Dir, Event};
    use mewa_link::eventlog::EventLogWriter;

    fn log() -> EventLog {
        let mut w = EventLogWriter::new(Vec::new(), Dir::Down, "test link").unwrap();
        // 1 s at 12 Mbit/s capacity (1500 B per ms), half of it used.
        for ms in 0..1000u64 {
            let at = Duration::from_millis(ms);
            let kind = if ms % 2 == 0 {
                EventKind::Departure
            } else {
                EventKind::Unused
            };
            let delay =
                (kind == EventKind::Departure).then(|| Duration::from_millis(20 + ms / 100));
            w.write(&Event {
                dir: Dir::Down,
                at,
                kind,
                bytes: 1500,
                delay,
            })
            .unwrap();
            if kind == EventKind::Departure {
                w.write(&Event {
                    dir: Dir::Down,
                    at,
                    kind: EventKind::Arrival,
                    bytes: 1500,
                    delay: None,
                })
                .unwrap();
            }
        }
        EventLog::parse(&String::from_utf8(w.into_inner()).unwrap()).unwrap()
    }

    #[test]
    fn bins_add_up() {
        let b = bins(&log(), Duration::from_millis(100));
        assert_eq!(b.len(), 10);
        for x in &b {
            assert!((x.capacity - 12.0).abs() < 1e-9, "{x:?}");
            assert!((x.throughput - 6.0).abs() < 1e-9);
            assert!((x.offered - 6.0).abs() < 1e-9);
        }
        assert_eq!(b[0].delay_p50, Some(20.0));
        assert_eq!(b[9].delay_p95, Some(29.0));
    }

    #[test]
    fn draws_svg() {
        let dir = std::env::temp_dir().join(format!("mewa-linkplot-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let svg = dir.join("p.svg");
        let l = log();
        let b = bins(&l, auto_width(&l));
        draw(&l, &b, auto_width(&l), &svg).unwrap();
        let s = std::fs::read_to_string(&svg).unwrap();
        let _ = std::fs::remove_dir_all(&dir);
        assert!(s.contains("<svg") && s.contains("polyline"));
    }
}
