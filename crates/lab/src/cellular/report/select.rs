//! What the report's tables and plots pick from the loads: the loads of
//! one cell, the browsers and the grid the tables run over, the settings
//! the fix is compared within, and the small figures of a load.

use mewa_loader::record::Protocol;

use super::super::config::Config;
use super::super::radio::{Network, Radio};
use super::super::record::CellRun;
use super::super::setting::Setting;
use crate::experiment::Browser;

/// How a browser is named in the tables.
pub fn label(browser: Browser) -> &'static str {
    match browser {
        Browser::Loader => "loader",
        Browser::Chromium => "Chromium",
    }
}

/// The largest of `v`.
pub fn max(v: &[f64]) -> Option<f64> {
    v.iter()
        .copied()
        .fold(None, |m, x| Some(m.map_or(x, |m: f64| m.max(x))))
}

/// A run's spurious retransmissions on the wire, both directions, SYNs
/// included.
pub fn spurious(r: &CellRun) -> u32 {
    r.wire_down.spurious + r.wire_up.spurious + r.wire_down.spurious_syn + r.wire_up.spurious_syn
}

/// `new` against `base` in per cent (+: larger), if `base` is positive.
pub fn change_pct(base: Option<f64>, new: Option<f64>) -> Option<f64> {
    match (base, new) {
        (Some(b), Some(n)) if b > 0.0 => Some((n / b - 1.0) * 100.0),
        _ => None,
    }
}

/// Loads that began with the radio asleep on connections kept from an
/// earlier load: where a promotion meets TCP's old RTT estimate.
pub fn after_promotion(r: &CellRun) -> bool {
    r.seq > 0 && r.promotions > 0
}

/// One browser, radio, network and protocol: a row of the grid.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cell {
    /// The browser.
    pub browser: Browser,
    /// The radio.
    pub radio: Radio,
    /// The network.
    pub network: Network,
    /// The protocol.
    pub protocol: Protocol,
}

impl Cell {
    /// The cell's loads under `setting`.
    pub fn loads<'a>(&self, runs: &'a [CellRun], setting: &Setting) -> Vec<&'a CellRun> {
        runs.iter()
            .filter(|x| {
                x.browser == self.browser
                    && x.radio == self.radio
                    && x.network == self.network
                    && x.protocol == self.protocol
                    && x.setting == *setting
            })
            .collect()
    }

    /// The cells' first columns: browser, radio, network, protocol.
    pub fn columns(&self) -> Vec<String> {
        vec![
            label(self.browser).to_string(),
            self.radio.to_string(),
            self.network.to_string(),
            self.protocol.to_string(),
        ]
    }
}

/// The browsers of `runs` (the loader first), or the configured one when
/// there are none: each table has a block per browser, since their page
/// load times measure different ends (last object, onload).
pub fn browsers(config: &Config, runs: &[CellRun]) -> Vec<Browser> {
    let mut v: Vec<Browser> = Vec::new();
    for r in runs {
        if !v.contains(&r.browser) {
            v.push(r.browser);
        }
    }
    if v.is_empty() {
        v.push(config.browser);
    }
    v.sort_by_key(|b| (*b != Browser::Loader, b.name()));
    v
}

/// Every browser × radio × network × protocol of a report, in order.
pub fn grid(browsers: &[Browser], config: &Config) -> Vec<Cell> {
    let mut out = Vec::new();
    for &browser in browsers {
        for &radio in &config.radios {
            for &network in &config.networks {
                for &protocol in &config.protocols {
                    out.push(Cell {
                        browser,
                        radio,
                        network,
                        protocol,
                    });
                }
            }
        }
    }
    out
}

/// The radio of Table 2 and of the plots: 3G when the run has it, else its
/// first.
pub fn headline_radio(config: &Config) -> Option<Radio> {
    if config.radios.contains(&Radio::ThreeG) {
        Some(Radio::ThreeG)
    } else {
        config.radios.first().copied()
    }
}

/// Each setting with the fix and the same knobs without it (`base` →
/// `rto-floor`, `frto-off` → `frto-off+rto-floor`), where the run has
/// both: (without, with).
pub fn fix_pairs(config: &Config) -> Vec<(&Setting, &Setting)> {
    config
        .settings
        .iter()
        .flat_map(|with| {
            config
                .settings
                .iter()
                .filter(|k| k.is_without_fix_of(with))
                .map(move |without| (without, with))
        })
        .collect()
}
