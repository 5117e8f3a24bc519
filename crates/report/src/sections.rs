//! A report made of titled tables with a note under each, SVG line plots
//! and the JSON of every measurement: the shape most experiments' results
//! take, so that each of them only builds its sections.

use std::path::{Path, PathBuf};

use crate::plot::{self, Chart, Series};
use crate::{Report, ReportError, ResultFolder, Table};

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

/// A report of [`Section`]s and [`Plot`]s.
#[derive(Debug)]
pub struct SectionReport {
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

impl Report for SectionReport {
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
        crate::to_json("the result", &self.json)
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
            crate::write_file(&dir.join(name), text)?;
        }
        Ok(())
    }
}
