//! Every load, one row each.

use mewa_report::table::opt;
use mewa_report::{Section, Table};

use super::super::record::CellRun;
use super::select::label;

/// The table.
pub fn every_load(runs: &[CellRun]) -> Section {
    let mut all = Table::new(&[
        "browser",
        "radio",
        "network",
        "setting",
        "protocol",
        "page",
        "seq",
        "radio at start",
        "promotions",
        "PLT s",
        "FCP s",
        "LCP s",
        "KB/s avg",
        "KB/s max",
        "cwnd avg",
        "cwnd max",
        "srv timeouts",
        "srv spurious RTOs",
        "cli timeouts",
        "TLPs",
        "wire spurious down",
        "wire spurious up",
        "wire genuine",
        "new conns",
        "reused conns",
        "handshakes on wire",
        "failed",
    ]);
    for r in runs {
        all.push(vec![
            label(r.browser).to_string(),
            r.radio.to_string(),
            r.network.to_string(),
            r.setting.to_string(),
            r.protocol.to_string(),
            r.page.clone(),
            r.seq.to_string(),
            r.radio_state.clone(),
            r.promotions.to_string(),
            opt(r.plt_s, 3),
            opt(r.fcp_s, 3),
            opt(r.lcp_s, 3),
            opt(r.avg_kbps, 1),
            opt(r.max_kbps, 1),
            opt(r.cwnd_avg, 1),
            r.cwnd_max.map_or("-".into(), |c| c.to_string()),
            r.server.timeouts.to_string(),
            r.server.spurious_rtos.to_string(),
            r.client.timeouts.to_string(),
            (r.server.loss_probes + r.client.loss_probes).to_string(),
            (r.wire_down.spurious + r.wire_down.spurious_syn).to_string(),
            (r.wire_up.spurious + r.wire_up.spurious_syn).to_string(),
            (r.wire_down.genuine + r.wire_up.genuine).to_string(),
            r.new_connections.to_string(),
            r.reused_connections.to_string(),
            r.handshakes.to_string(),
            r.failed.to_string(),
        ]);
    }
    Section {
        title: "Every load".into(),
        csv: "runs.csv",
        table: all,
        note: String::new(),
    }
}
