//! SVG line charts (plotters) for the figures the CLI reproduces.

use std::path::Path;

use anyhow::Context;
use plotters::prelude::*;

/// How a series is drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mark {
    /// A solid line with small dots (our model).
    Line,
    /// Bare markers (numbers a paper prints).
    Points,
}

/// One named series of (x, y) points.
pub struct Series {
    pub name: String,
    pub points: Vec<(f64, f64)>,
    pub mark: Mark,
    /// Index into the palette, so ours and the paper's share a colour.
    pub colour: usize,
}

/// Axis titles and scale of a chart.
pub struct Chart<'a> {
    pub title: &'a str,
    pub x_label: &'a str,
    pub y_label: &'a str,
    /// Plot log10(y) and label the axis with y (for exponential growth).
    pub log_y: bool,
}

/// Draws the series to an SVG file, with a legend.
pub fn draw(path: &Path, chart: &Chart<'_>, series: &[Series]) -> anyhow::Result<()> {
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
    anyhow::ensure!(x0 <= x1 && y0 <= y1, "nothing to plot");
    if !chart.log_y {
        y0 = y0.min(0.0);
    }
    let pad = ((y1 - y0) * 0.08).max(1e-9);
    let (y0, y1) = (y0 - if chart.log_y { pad } else { 0.0 }, y1 + pad);
    let x1 = if x1 > x0 { x1 } else { x0 + 1.0 };

    let root = SVGBackend::new(path, (900, 560)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| anyhow::anyhow!("{e}"))?;
    let mut c = ChartBuilder::on(&root)
        .caption(chart.title, ("sans-serif", 20))
        .margin(16)
        .x_label_area_size(44)
        .y_label_area_size(64)
        .build_cartesian_2d(x0..x1, y0..y1)
        .map_err(|e| anyhow::anyhow!("{e}"))?;
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
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    for s in series {
        let colour = Palette99::pick(s.colour).to_rgba();
        let data: Vec<(f64, f64)> = s.points.iter().map(|&(x, y)| (x, ty(y))).collect();
        match s.mark {
            Mark::Line => {
                c.draw_series(LineSeries::new(data.clone(), colour.stroke_width(2)))
                    .map_err(|e| anyhow::anyhow!("{e}"))?
                    .label(&s.name)
                    .legend(move |(x, y)| {
                        PathElement::new(vec![(x, y), (x + 18, y)], colour.stroke_width(2))
                    });
                c.draw_series(data.iter().map(|&p| Circle::new(p, 2, colour.filled())))
                    .map_err(|e| anyhow::anyhow!("{e}"))?;
            }
            Mark::Points => {
                c.draw_series(
                    data.iter()
                        .map(|&p| Cross::new(p, 6, colour.stroke_width(2))),
                )
                .map_err(|e| anyhow::anyhow!("{e}"))?
                .label(&s.name)
                .legend(move |(x, y)| Cross::new((x + 9, y), 5, colour.stroke_width(2)));
            }
        }
    }
    c.configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .position(SeriesLabelPosition::UpperRight)
        .draw()
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    root.present()
        .with_context(|| format!("writing {}", path.display()))?;
    eprintln!("wrote {}", path.display());
    Ok(())
}
