//! SVG charts (plotters): line and point series, and box plots, for the
//! figures the experiments and the model reproductions draw.

use std::path::Path;

use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;

use crate::stats::{cdf, quantile};
use crate::ReportError;

/// A plotters error, whose type carries the backend, as text.
fn plot_err<E: std::fmt::Display>(path: &Path, e: E) -> ReportError {
    ReportError::Plot {
        path: path.to_path_buf(),
        message: e.to_string(),
    }
}

/// How a series is drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mark {
    /// A solid line with small dots (our model).
    Line,
    /// Bare markers (numbers a paper prints).
    Points,
}

/// One named series of (x, y) points.
#[derive(Debug, Clone)]
pub struct Series {
    /// Legend label.
    pub name: String,
    /// The (x, y) points, in drawing order.
    pub points: Vec<(f64, f64)>,
    /// Line or bare markers.
    pub mark: Mark,
    /// Index into the palette, so ours and the paper's share a colour.
    pub colour: usize,
}

/// Axis titles and scale of a chart.
pub struct Chart<'a> {
    /// Caption above the chart.
    pub title: &'a str,
    /// X axis title.
    pub x_label: &'a str,
    /// Y axis title.
    pub y_label: &'a str,
    /// Plot log10(y) and label the axis with y (for exponential growth).
    pub log_y: bool,
}

/// The chart type both drawings use: f64 on both axes, into an SVG.
type SvgChart<'a, 'b> =
    ChartContext<'a, SVGBackend<'b>, Cartesian2d<RangedCoordf64, RangedCoordf64>>;

/// Draws the legend at `position` and writes the SVG to its file.
fn finish<'a>(
    c: &mut SvgChart<'a, 'a>,
    position: SeriesLabelPosition,
    root: &DrawingArea<SVGBackend<'a>, plotters::coord::Shift>,
    path: &Path,
) -> Result<(), ReportError> {
    c.configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .position(position)
        .draw()
        .map_err(|e| plot_err(path, e))?;
    root.present().map_err(|e| plot_err(path, e))
}

/// Draws the series to an SVG file, with a legend.
pub fn draw(path: &Path, chart: &Chart<'_>, series: &[Series]) -> Result<(), ReportError> {
    let ty = |y: f64| if chart.log_y { y.max(1e-12).log10() } else { y };
    let pts = series
        .iter()
        .flat_map(|s| s.points.iter().map(|&(x, y)| (x, ty(y))));
    let (mut x0, mut x1, mut y0, mut y1) = (f64::MAX, f64::MIN, f64::MAX, f64::MIN);
    for (x, y) in pts {
        x0 = x0.min(x);
        x1 = x1.max(x);
        y0 = y0.min(y);
        y1 = y1.max(y);
    }
    if !(x0 <= x1 && y0 <= y1) {
        return Err(ReportError::NothingToPlot(path.to_path_buf()));
    }
    if !chart.log_y {
        y0 = y0.min(0.0);
    }
    let pad = ((y1 - y0) * 0.08).max(1e-9);
    let (y0, y1) = (y0 - if chart.log_y { pad } else { 0.0 }, y1 + pad);
    let x1 = if x1 > x0 { x1 } else { x0 + 1.0 };

    let root = SVGBackend::new(path, (900, 560)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| plot_err(path, e))?;
    let mut c = ChartBuilder::on(&root)
        .caption(chart.title, ("sans-serif", 20))
        .margin(16)
        .x_label_area_size(44)
        .y_label_area_size(64)
        .build_cartesian_2d(x0..x1, y0..y1)
        .map_err(|e| plot_err(path, e))?;
    let log = chart.log_y;
    // Enough decimals that neighbouring ticks differ on small ranges.
    let span = y1 - y0;
    let digits = if span < 1.0 {
        2
    } else if span < 10.0 {
        1
    } else {
        0
    };
    let fmt_y = move |v: &f64| {
        if log {
            format!("{:.0}", 10f64.powf(*v))
        } else {
            format!("{v:.digits$}")
        }
    };
    c.configure_mesh()
        .x_desc(chart.x_label)
        .y_desc(chart.y_label)
        .y_label_formatter(&fmt_y)
        .draw()
        .map_err(|e| plot_err(path, e))?;
    for s in series {
        let colour = Palette99::pick(s.colour).to_rgba();
        let data: Vec<(f64, f64)> = s.points.iter().map(|&(x, y)| (x, ty(y))).collect();
        match s.mark {
            Mark::Line => {
                c.draw_series(LineSeries::new(data.clone(), colour.stroke_width(2)))
                    .map_err(|e| plot_err(path, e))?
                    .label(&s.name)
                    .legend(move |(x, y)| {
                        PathElement::new(vec![(x, y), (x + 18, y)], colour.stroke_width(2))
                    });
                c.draw_series(data.iter().map(|&p| Circle::new(p, 2, colour.filled())))
                    .map_err(|e| plot_err(path, e))?;
            }
            Mark::Points => {
                c.draw_series(
                    data.iter()
                        .map(|&p| Cross::new(p, 6, colour.stroke_width(2))),
                )
                .map_err(|e| plot_err(path, e))?
                .label(&s.name)
                .legend(move |(x, y)| Cross::new((x + 9, y), 5, colour.stroke_width(2)));
            }
        }
    }
    finish(&mut c, SeriesLabelPosition::UpperRight, &root, path)
}

/// One labelled group of box plots (e.g. one page: without and with).
pub struct BoxGroup {
    /// Label under the group.
    pub label: String,
    /// One sample per box, in the order of the legend.
    pub boxes: Vec<Vec<f64>>,
}

/// Min, quartiles and max ([`quantile`] at 0, ¼, ½, ¾ and 1).
fn quartiles(v: &[f64]) -> Option<[f64; 5]> {
    Some([
        quantile(v, 0.0)?,
        quantile(v, 0.25)?,
        quantile(v, 0.5)?,
        quantile(v, 0.75)?,
        quantile(v, 1.0)?,
    ])
}

/// Box plots (min, quartiles, median, max) per group, side by side, to an
/// SVG file; `names` label the boxes of every group in the legend.
pub fn draw_boxes(
    path: &Path,
    title: &str,
    y_label: &str,
    names: &[&str],
    groups: &[BoxGroup],
) -> Result<(), ReportError> {
    let stats: Vec<Vec<Option<[f64; 5]>>> = groups
        .iter()
        .map(|g| g.boxes.iter().map(|b| quartiles(b)).collect())
        .collect();
    let hi = stats
        .iter()
        .flatten()
        .flatten()
        .map(|q| q[4])
        .fold(0.0f64, f64::max);
    if hi <= 0.0 {
        return Err(ReportError::NothingToPlot(path.to_path_buf()));
    }
    let per = names.len().max(1) as f64;
    let width = (groups.len() as u32 * 60).clamp(900, 2400);
    let root = SVGBackend::new(path, (width, 600)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| plot_err(path, e))?;
    let n = groups.len() as f64;
    let labels: Vec<String> = groups.iter().map(|g| g.label.clone()).collect();
    let mut c = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 18))
        .margin(16)
        .x_label_area_size(40)
        .y_label_area_size(64)
        .build_cartesian_2d(-0.5..(n - 0.5), 0.0..hi * 1.08)
        .map_err(|e| plot_err(path, e))?;
    let fmt_x = move |x: &f64| {
        let i = x.round();
        if (x - i).abs() < 1e-6 && i >= 0.0 {
            labels.get(i as usize).cloned().unwrap_or_default()
        } else {
            String::new()
        }
    };
    c.configure_mesh()
        .disable_x_mesh()
        .x_labels(groups.len().max(1) * 2 + 1)
        .x_label_formatter(&fmt_x)
        .x_label_style(("sans-serif", 12))
        .y_desc(y_label)
        .draw()
        .map_err(|e| plot_err(path, e))?;
    let slot = 0.8 / per;
    for (k, name) in names.iter().enumerate() {
        let colour = Palette99::pick(k).to_rgba();
        let mut shapes = Vec::new();
        for (g, st) in stats.iter().enumerate() {
            let Some(Some(q)) = st.get(k) else { continue };
            let x0 = g as f64 - 0.4 + slot * k as f64 + slot * 0.1;
            let x1 = x0 + slot * 0.8;
            let mid = (x0 + x1) / 2.0;
            shapes.push(PathElement::new(vec![(mid, q[0]), (mid, q[1])], colour));
            shapes.push(PathElement::new(vec![(mid, q[3]), (mid, q[4])], colour));
            shapes.push(PathElement::new(
                vec![(x0, q[1]), (x1, q[1]), (x1, q[3]), (x0, q[3]), (x0, q[1])],
                colour.stroke_width(2),
            ));
            shapes.push(PathElement::new(
                vec![(x0, q[2]), (x1, q[2])],
                colour.stroke_width(3),
            ));
        }
        c.draw_series(shapes)
            .map_err(|e| plot_err(path, e))?
            .label(*name)
            .legend(move |(x, y)| {
                Rectangle::new([(x, y - 5), (x + 14, y + 5)], colour.stroke_width(2))
            });
    }
    finish(&mut c, SeriesLabelPosition::UpperLeft, &root, path)
}

/// A line of the empirical CDF of `values` ([`cdf`]).
pub fn cdf_series(name: &str, values: &[f64], colour: usize) -> Series {
    Series {
        name: name.into(),
        points: cdf(values),
        mark: Mark::Line,
        colour,
    }
}
