//! The papers' tables and figures recomputed by `mewa_model::repro`,
//! rendered: the machine table (CSV, JSON), the text in the paper's layout
//! where it has one, and the chart beside the paper's numbers. `mewa model`
//! prints and draws these; the numbers themselves are the model's.

use std::fmt::Write as _;
use std::path::Path;

use mewa_model::http::SlowStartModel;
use mewa_model::iw::RatioMode;
use mewa_model::repro::{self, FldRow, IdleCell, IwCurve, Table1Cell};
use mewa_model::ModelError;
use serde::Serialize;

use mewa_report::{draw, pct, Chart, Mark, ReportError, Series, Table};

/// One reproduced table or figure.
#[derive(Debug)]
pub struct Figure<T: Serialize> {
    /// The numbers, as `--json` prints them.
    pub data: T,
    /// The machine table (`--csv`, and the text where there is no layout).
    pub table: Table,
    /// The text in the paper's layout, with a summary line, when the figure
    /// has one.
    pub layout: Option<String>,
    /// A line printed after the text (not with `--json`/`--csv`).
    pub note: Option<String>,
    /// Chart title.
    pub title: &'static str,
    /// X axis title.
    pub x_label: &'static str,
    /// Y axis title.
    pub y_label: &'static str,
    /// Log scale for y.
    pub log_y: bool,
    /// Our series beside the paper's.
    pub series: Vec<Series>,
}

impl<T: Serialize> Figure<T> {
    /// What a terminal shows: the paper's layout or the table, then the
    /// note.
    pub fn text(&self) -> String {
        let mut s = self.layout.clone().unwrap_or_else(|| self.table.to_text());
        if let Some(n) = &self.note {
            s.push_str(n);
            s.push('\n');
        }
        s
    }

    /// Draws the chart to `path` (SVG).
    pub fn draw(&self, path: &Path) -> Result<(), ReportError> {
        let chart = Chart {
            title: self.title,
            x_label: self.x_label,
            y_label: self.y_label,
            log_y: self.log_y,
        };
        draw(path, &chart, &self.series)
    }
}

/// One line per page size of seed 000's grid (ours, over RTT) and the
/// paper's points for that size where it printed any (`paper_label` in the
/// legend), one colour per size.
fn per_size<C>(
    cells: &[C],
    size_and_x: fn(&C) -> (u64, f64),
    ours: fn(&C) -> f64,
    paper: fn(&C) -> Option<f64>,
    paper_label: &str,
) -> Vec<Series> {
    let mut series = Vec::new();
    for (i, size) in repro::TABLE1_SIZES_KB.into_iter().enumerate() {
        let row: Vec<&C> = cells.iter().filter(|c| size_and_x(c).0 == size).collect();
        series.push(Series {
            name: format!("{size} KB (model)"),
            points: row.iter().map(|c| (size_and_x(c).1, ours(c))).collect(),
            mark: Mark::Line,
            colour: i,
        });
        let printed: Vec<(f64, f64)> = row
            .iter()
            .filter_map(|c| paper(c).map(|v| (size_and_x(c).1, v)))
            .collect();
        if !printed.is_empty() {
            series.push(Series {
                name: format!("{size} KB ({paper_label})"),
                points: printed,
                mark: Mark::Points,
                colour: i,
            });
        }
    }
    series
}

/// Seed 000 Table I: connections chosen and load-time reduction, 20 Mbit/s.
pub fn table1(model: SlowStartModel, iw: u32) -> Result<Figure<Vec<Table1Cell>>, ModelError> {
    let cells = repro::table1(model, iw)?;
    let mut t = Table::new(&[
        "size_kb",
        "rtt_ms",
        "n",
        "reduction_%",
        "paper_n",
        "paper_reduction_%",
        "reduction_at_paper_n_%",
        "n_max",
    ]);
    for c in &cells {
        t.push(vec![
            c.size_kb.to_string(),
            c.rtt_ms.to_string(),
            c.n.to_string(),
            pct(c.reduction_pct),
            c.paper_n.to_string(),
            format!("{:.2}", c.paper_reduction_pct),
            pct(c.reduction_at_paper_n_pct),
            c.n_max.to_string(),
        ]);
    }
    let layout = {
        // The paper's layout: one row per size, one column pair per RTT.
        let mut headers = vec!["size KB".to_string()];
        headers.extend(
            repro::TABLE1_RTTS_MS
                .iter()
                .map(|r| format!("{r} ms: ours | paper")),
        );
        let mut t = Table {
            headers,
            rows: Vec::new(),
        };
        for size in repro::TABLE1_SIZES_KB {
            let mut row = vec![size.to_string()];
            for c in cells.iter().filter(|c| c.size_kb == size) {
                row.push(format!(
                    "{:5.1}% n={} | {:5.2}% n={}",
                    c.reduction_pct, c.n, c.paper_reduction_pct, c.paper_n
                ));
            }
            t.push(row);
        }
        let mut text = t.to_text();
        let same = cells.iter().filter(|c| c.n == c.paper_n).count();
        let mae = cells
            .iter()
            .map(|c| (c.reduction_pct - c.paper_reduction_pct).abs())
            .sum::<f64>()
            / cells.len() as f64;
        let mae_at = cells
            .iter()
            .map(|c| (c.reduction_at_paper_n_pct - c.paper_reduction_pct).abs())
            .sum::<f64>()
            / cells.len() as f64;
        let _ = writeln!(
            text,
            "same n as the paper: {same}/{}; mean |reduction − paper| = {mae:.1} points; \
         with the paper's n: {mae_at:.1} points",
            cells.len()
        );
        text
    };
    let series = per_size(
        &cells,
        |c| (c.size_kb, f64::from(c.rtt_ms)),
        |c| c.reduction_pct,
        |c| Some(c.paper_reduction_pct),
        "paper",
    );
    Ok(Figure {
        data: cells,
        table: t,
        layout: Some(layout),
        note: None,
        title: "Seed 000 Table I / Fig. 5: load-time reduction with n connections, 20 Mbit/s",
        x_label: "RTT (ms)",
        y_label: "reduction (%)",
        log_y: false,
        series,
    })
}

/// Seed 000 Fig. 4: idle share of one HTTP/2 connection, 20 Mbit/s.
pub fn idle(model: SlowStartModel, iw: u32) -> Result<Figure<Vec<IdleCell>>, ModelError> {
    let cells = repro::idle_grid(model, iw)?;
    let mut t = Table::new(&["size_kb", "rtt_ms", "idle_%", "t_http_s", "paper_idle_%"]);
    for c in &cells {
        t.push(vec![
            c.size_kb.to_string(),
            c.rtt_ms.to_string(),
            pct(c.idle_pct),
            format!("{:.3}", c.t_http_s),
            c.paper_idle_pct.map_or("-".into(), pct),
        ]);
    }
    let layout = {
        let mut headers = vec!["size KB".to_string()];
        headers.extend(repro::TABLE1_RTTS_MS.iter().map(|r| format!("{r} ms")));
        let mut t = Table {
            headers,
            rows: Vec::new(),
        };
        for size in repro::TABLE1_SIZES_KB {
            let mut row = vec![size.to_string()];
            for c in cells.iter().filter(|c| c.size_kb == size) {
                row.push(match c.paper_idle_pct {
                    Some(p) => format!("{:.1}% (paper {p:.1}%)", c.idle_pct),
                    None => format!("{:.1}%", c.idle_pct),
                });
            }
            t.push(row);
        }
        t.to_text()
    };
    let series = per_size(
        &cells,
        |c| (c.size_kb, f64::from(c.rtt_ms)),
        |c| c.idle_pct,
        |c| c.paper_idle_pct,
        "paper text",
    );
    Ok(Figure {
        data: cells,
        table: t,
        layout: Some(layout),
        note: None,
        title: "Seed 000 Fig. 4: idle share of one connection, 20 Mbit/s",
        x_label: "RTT (ms)",
        y_label: "T_idle / T_HTTP (%)",
        log_y: false,
        series,
    })
}

/// Seed 001 Figs. 4–5: content-aware IW against computation share; every
/// curve point in the table with `points`, else only the peaks.
pub fn iw(mode: RatioMode, points: bool) -> Result<Figure<Vec<IwCurve>>, ModelError> {
    let curves = repro::iw_curves(mode)?;
    let t = if points {
        let mut t = Table::new(&["size_kb", "rtt_ms", "computation_%", "iw_opt"]);
        for c in &curves {
            for &(p, iw) in &c.points {
                t.push(vec![
                    c.size_kb.to_string(),
                    c.rtt_ms.to_string(),
                    p.to_string(),
                    format!("{iw:.1}"),
                ]);
            }
        }
        t
    } else {
        let mut t = Table::new(&[
            "size_kb",
            "rtt_ms",
            "peak_iw",
            "paper_peak",
            "at_%",
            "back_to_10_at_%",
            "paper_back_to_10_%",
        ]);
        for c in &curves {
            t.push(vec![
                c.size_kb.to_string(),
                c.rtt_ms.to_string(),
                format!("{:.0}", c.peak_iw),
                c.paper_peak_iw.map_or("-".into(), |v| format!("{v:.0}")),
                c.peak_share_pct.to_string(),
                c.back_to_default_pct
                    .map_or("never".into(), |v| v.to_string()),
                if c.size_kb == 400 && c.rtt_ms == 100 {
                    repro::IW_PAPER_BACK_TO_DEFAULT_PCT.to_string()
                } else {
                    "-".into()
                },
            ]);
        }
        t
    };
    let mut series = Vec::new();
    for (i, c) in curves.iter().enumerate() {
        series.push(Series {
            name: format!("{} KB, {} ms", c.size_kb, c.rtt_ms),
            points: c.points.iter().map(|&(s, iw)| (f64::from(s), iw)).collect(),
            mark: Mark::Line,
            colour: i,
        });
        if let Some(pk) = c.paper_peak_iw {
            series.push(Series {
                name: format!("paper peak {pk:.0}"),
                points: vec![(f64::from(c.peak_share_pct), pk)],
                mark: Mark::Points,
                colour: i,
            });
        }
    }
    Ok(Figure {
        data: curves,
        table: t,
        layout: None,
        note: None,
        title: "Seed 001 Figs. 4-5: content-aware IW (alpha = 1/3)",
        x_label: "computation share of t_c + t_principle (%)",
        y_label: "IW_opt (segments)",
        log_y: false,
        series,
    })
}

/// Seed 002 Fig. 1: FLD_TCP (×3) against Reno (×2) slow start.
pub fn fld(rtts: u32) -> Figure<Vec<FldRow>> {
    let rows = repro::fld_table(rtts);
    let mut t = Table::new(&[
        "rtt",
        "reno_window",
        "fld_window",
        "reno_cum_kB",
        "fld_cum_kB",
    ]);
    for r in &rows {
        t.push(vec![
            r.rtt.to_string(),
            r.reno_window.to_string(),
            r.fld_window.to_string(),
            format!("{}", r.reno_cumulative / 1000),
            format!("{}", r.fld_cumulative / 1000),
        ]);
    }
    let (r, f) = (
        mewa_model::fld::Schedule::reno(),
        mewa_model::fld::Schedule::fld(),
    );
    let note = format!(
        "500 kB flow: FLD_TCP {} RTTs, Reno {} RTTs (paper: 4 and 6)",
        f.rtts_to_finish(500_000).unwrap_or(0),
        r.rtts_to_finish(500_000).unwrap_or(0)
    );
    let series = vec![
        Series {
            name: "Reno (x2 per RTT)".into(),
            points: rows
                .iter()
                .map(|r| (f64::from(r.rtt), r.reno_cumulative as f64 / 1000.0))
                .collect(),
            mark: Mark::Line,
            colour: 0,
        },
        Series {
            name: "FLD_TCP (x3 per RTT)".into(),
            points: rows
                .iter()
                .map(|r| (f64::from(r.rtt), r.fld_cumulative as f64 / 1000.0))
                .collect(),
            mark: Mark::Line,
            colour: 1,
        },
    ];
    Figure {
        data: rows,
        table: t,
        layout: None,
        note: Some(note),
        title: "Seed 002 Fig. 1: cumulative bytes per round trip (IW 10 x 1500 B)",
        x_label: "round trip",
        y_label: "cumulative kB (log scale)",
        log_y: true,
        series,
    }
}
