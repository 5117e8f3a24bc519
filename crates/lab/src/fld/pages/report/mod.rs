//! The pages experiment's report, from its journal's records alone: seed
//! 002's figures ([`figures`]), the queue sweep ([`sweep`]) when there is
//! one, and what the testbed did ([`testbed`]); [`groups`] gathers the
//! loads the way the tables read them.

pub mod figures;
pub mod groups;
pub mod sweep;
pub mod testbed;

use mewa_report::{ResultFolder, SectionReport};

use super::config::Config;
use super::record::{CrossEntry, PageRun};
use figures::PerLoad;

/// The pages experiment's tables (Figs. 6–11, the connection sizes, loss
/// repair, cross traffic) and plots.
pub fn report(
    config: &Config,
    runs: Vec<PageRun>,
    cross: Vec<CrossEntry>,
    folder: Option<ResultFolder>,
) -> SectionReport {
    let labels: Vec<String> = config.cells().into_iter().map(|c| c.label).collect();
    let loader_types: Vec<_> = figures::loader_types(config).collect();
    let mut sections = vec![figures::net_transfer_table(config, &labels, &runs)];
    let mut plots = Vec::new();
    if config.queue_ms.len() > 1 {
        sections.push(sweep::sweep_table(config, &runs));
        plots.extend(
            config
                .settings
                .iter()
                .map(|&s| sweep::sweep_plot(config, s, &runs)),
        );
    }
    for fig in [PerLoad::IdleShare, PerLoad::Concurrency] {
        sections.push(figures::per_load_table(fig, config, &labels, &runs));
        for s in &labels {
            for &p in &loader_types {
                plots.push(figures::per_load_plot(fig, config, s, p, &runs));
            }
        }
    }
    sections.push(figures::durations_table(config, &labels, &runs));
    for s in &labels {
        for &p in &loader_types {
            plots.push(figures::durations_plot(config, s, p, &runs));
        }
    }
    sections.push(figures::rtt_bins_table(config, &labels, &runs));
    plots.extend(
        labels
            .iter()
            .map(|s| figures::rtt_bins_plot(config, s, &runs)),
    );
    sections.push(testbed::server_tcp_table(config, &labels, &runs));
    sections.push(figures::sizes_table(config, &labels, &runs));
    let (cross_section, extra) = testbed::cross_table(&labels, &cross, &runs);
    sections.push(cross_section);
    SectionReport {
        name: "fld pages",
        sections,
        plots,
        json: serde_json::json!({ "runs": runs, "cross": cross }),
        extra,
        folder,
    }
}
