//! The server's congestion window and retransmission timeout around a
//! promotion: the first load of 3G HTTP/2 that woke the radio, in each
//! setting the fix is compared within, without the fix and with it.

use mewa_loader::record::Protocol;
use mewa_report::plot::{Mark, Series};
use mewa_report::Plot;

use super::super::config::Config;
use super::super::record::LoadTrace;
use super::super::setting::{Knob, Setting};
use super::select::{headline_radio, label};

/// The plots: `rto-<setting>.svg` and `cwnd-<setting>.svg` for `base`,
/// `rto-floor` and each setting of `pairs`, where a trace shows one.
pub fn plots(config: &Config, traces: &[LoadTrace], pairs: &[(&Setting, &Setting)]) -> Vec<Plot> {
    let radio = headline_radio(config);
    let mut shown: Vec<Setting> = vec![Setting::base(), Setting::single(Knob::RtoFloor)];
    for &(without, with) in pairs {
        for s in [without, with] {
            if !shown.contains(s) {
                shown.push(s.clone());
            }
        }
    }
    let mut plots = Vec::new();
    for setting in &shown {
        let of_setting = |t: &&LoadTrace| t.setting == *setting && Some(t.radio) == radio;
        let Some(t) = traces
            .iter()
            .filter(of_setting)
            .find(|t| t.protocol == Protocol::H2)
            .or_else(|| traces.iter().find(of_setting))
        else {
            continue;
        };
        plots.push(rto_plot(t));
        plots.push(cwnd_plot(t));
    }
    plots
}

/// The server's RTO over the trace.
fn rto_plot(t: &LoadTrace) -> Plot {
    Plot {
        file: format!("rto-{}.svg", t.setting),
        title: format!(
            "{} {} {} {}: server RTO after a promotion (TCP_INFO)",
            label(t.browser),
            t.radio,
            t.protocol,
            t.setting
        ),
        x_label: "s since the load began".into(),
        y_label: "ms".into(),
        series: per_socket("RTO", &t.rto),
    }
}

/// The server's window over the trace, with the retransmissions the link
/// saw.
fn cwnd_plot(t: &LoadTrace) -> Plot {
    let mut series = per_socket("cwnd", &t.cwnd);
    for (spur, name, colour) in [
        (true, "spurious retransmission", 7),
        (false, "genuine retransmission", 8),
    ] {
        let pts: Vec<(f64, f64)> = t
            .retransmissions
            .iter()
            .filter(|(_, s)| *s == spur)
            .map(|&(x, _)| (x, 0.0))
            .collect();
        if !pts.is_empty() {
            series.push(Series {
                name: name.into(),
                points: pts,
                mark: Mark::Points,
                colour,
            });
        }
    }
    Plot {
        file: format!("cwnd-{}.svg", t.setting),
        title: format!(
            "{} {} {} {}: server cwnd after a promotion (radio {} at start, load {})",
            label(t.browser),
            t.radio,
            t.protocol,
            t.setting,
            t.radio_state,
            t.seq
        ),
        x_label: "s since the load began".into(),
        y_label: "segments".into(),
        series,
    }
}

/// One line per server socket of a [`LoadTrace`] field.
fn per_socket(what: &str, sockets: &[Vec<(f64, u32)>]) -> Vec<Series> {
    sockets
        .iter()
        .enumerate()
        .map(|(i, pts)| Series {
            name: format!("{what}, server socket {}", i + 1),
            points: pts.iter().map(|&(s, c)| (s, f64::from(c))).collect(),
            mark: Mark::Line,
            colour: i % 6,
        })
        .collect()
}
