//! The result of any of `mewa lab fld`'s experiments: tables, CDF plots
//! and the JSON of every measurement, in the common result folder layout.

use std::path::{Path, PathBuf};

use crate::experiment::ResultFolder;
pub use crate::report::plot::quantile;
use crate::report::plot::{self, Chart, Mark, Series};
use crate::report::{Report, ReportError, Table};

/// One table of the report, with the CSV it is written to.
#[derive(Debug, Clone)]
pub struct Section {
    /// Heading.
    pub title: String,
    /// CSV file name.
    pub csv: &'static str,
    /// The table.
    pub table: Table,
    /// A paragraph under it (the paper's figure beside ours, the target).
    pub note: String,
}

/// One SVG plot of the report.
#[derive(Debug, Clone)]
pub struct Plot {
    /// File name.
    pub file: String,
    /// Caption.
    pub title: String,
    /// X axis title.
    pub x_label: String,
    /// Y axis title.
    pub y_label: String,
    /// The lines.
    pub series: Vec<Series>,
}

/// What `mewa lab fld bulk|fairness|pages` and `mewa lab iw` produced.
#[derive(Debug)]
pub struct LabReport {
    /// Which experiment, as `mewa lab` names it (`fld pages`, `iw`).
    pub name: &'static str,
    /// The tables, in order.
    pub sections: Vec<Section>,
    /// The plots.
    pub plots: Vec<Plot>,
    /// Every measurement, for `result.json`.
    pub json: serde_json::Value,
    /// Extra files (name, contents): the cross-traffic logs.
    pub extra: Vec<(String, String)>,
    /// Where it was written.
    pub folder: Option<ResultFolder>,
}

impl Report for LabReport {
    fn text(&self) -> String {
        let mut s = String::new();
        for sec in &self.sections {
            s.push_str(&format!("\n{}\n{}", sec.title, sec.table.to_text()));
            if !sec.note.is_empty() {
                s.push_str(&format!("{}\n", sec.note));
            }
        }
        s
    }

    fn csv(&self) -> Vec<(&'static str, Table)> {
        self.sections
            .iter()
            .map(|s| (s.csv, s.table.clone()))
            .collect()
    }

    fn json(&self) -> Result<String, ReportError> {
        crate::report::to_json("fld result", &self.json)
    }

    fn plots(&self, dir: &Path) -> Result<Vec<PathBuf>, ReportError> {
        let mut out = Vec::new();
        for p in &self.plots {
            if p.series.iter().all(|s| s.points.is_empty()) {
                continue;
            }
            let path = dir.join(&p.file);
            let chart = Chart {
                title: &p.title,
                x_label: &p.x_label,
                y_label: &p.y_label,
                log_y: false,
            };
            plot::draw(&path, &chart, &p.series)?;
            out.push(path);
        }
        Ok(out)
    }

    fn markdown(&self) -> String {
        let mut s = format!("# mewa lab {}\n", self.name);
        for sec in &self.sections {
            s.push_str(&format!(
                "\n## {}\n\n{}",
                sec.title,
                sec.table.to_markdown()
            ));
            if !sec.note.is_empty() {
                s.push_str(&format!("\n{}\n", sec.note));
            }
        }
        for p in &self.plots {
            s.push_str(&format!("\n![{}]({})\n", p.title, p.file));
        }
        s
    }

    fn folder(&self) -> Option<&ResultFolder> {
        self.folder.as_ref()
    }

    fn write_extra(&self, dir: &Path) -> Result<(), ReportError> {
        for (name, text) in &self.extra {
            crate::report::write_file(&dir.join(name), text)?;
        }
        Ok(())
    }
}

/// The empirical CDF of `values` as plot points (x sorted, y from 1/n to 1).
pub fn cdf(values: &[f64]) -> Vec<(f64, f64)> {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
    v.sort_by(f64::total_cmp);
    let n = v.len() as f64;
    v.into_iter()
        .enumerate()
        .map(|(i, x)| (x, (i + 1) as f64 / n))
        .collect()
}

/// A CDF series.
pub fn cdf_series(name: &str, values: &[f64], colour: usize) -> Series {
    Series {
        name: name.into(),
        points: cdf(values),
        mark: Mark::Line,
        colour,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cdf_and_quantiles() {
        assert_eq!(
            cdf(&[3.0, 1.0, 2.0, f64::NAN]),
            vec![(1.0, 1.0 / 3.0), (2.0, 2.0 / 3.0), (3.0, 1.0)]
        );
        assert_eq!(quantile(&[4.0, 1.0, 3.0, 2.0], 0.5), Some(2.5));
        assert_eq!(quantile(&[], 0.5), None);
        assert_eq!(quantile(&[7.0], 0.9), Some(7.0));
    }
}
