//! The work of `mewa lab iw`: its pages, one load with the window its arm
//! asks for, and the link's figures of a testbed's loads, read from the
//! link's event logs once the testbed is torn down.

use std::path::Path;
use std::time::{Duration, Instant};

use mewa_corpus::{generate, generate_with, Corpus, Page, Preset};
use mewa_link::core::EventKind;
use mewa_link::eventlog::EventLog;
use mewa_loader::record::{LoadRecord, Protocol};
use mewa_loader::{IwAsk, LoadOptions};
use mewa_report::quantile;

use super::{Arm, Config, IwRun, LinkFigures, Transport};
use crate::bed::{Bed, SERVER};
use crate::experiment::ExperimentError;
use crate::fld::TcpCounters;

/// The pages: the user's, or `complat` at the configured shares; filtered
/// by name.
pub(super) fn pages(config: &Config) -> Result<Corpus, ExperimentError> {
    config.corpus.load_or(|| {
        {
            let mut corpus = generate(Preset::Complat, 1);
            corpus.pages.clear();
            for &s in &config.shares {
                if !(0.0..=0.95).contains(&s) {
                    return Err(ExperimentError::Config {
                        field: "--shares",
                        message: format!("{s}: give computation shares from 0 to 0.95"),
                    });
                }
                let opts = mewa_corpus::gen::Options {
                    share: Some(s.max(0.05)),
                    ..Default::default()
                };
                let c = generate_with(Preset::Complat, 1, &opts).map_err(|source| {
                    ExperimentError::Generate {
                        what: format!("complat (computation share {s})"),
                        source,
                    }
                })?;
                for mut p in c.pages {
                    if s == 0.0 {
                        // The same page with nothing to compute.
                        for o in &mut p.objects {
                            o.compute_ms = 0;
                        }
                        p.name = p.name.replace("-s05", "-s00");
                    }
                    corpus.pages.push(p);
                }
            }
            Ok(corpus)
        }
    })
}

/// One load, with its place in time.
#[allow(clippy::too_many_arguments)]
pub(super) fn load_one(
    bed: &Bed,
    config: &Config,
    page: &Page,
    proto: Transport,
    arm: Arm,
    rtt_ms: u64,
    run: usize,
    t_ref: Instant,
) -> Result<(IwRun, Duration, Duration), ExperimentError> {
    let protocol = proto.protocol();
    let mut opts = bed.options(LoadOptions::browser(protocol, true));
    opts.iw = match arm {
        Arm::Aware => Some(IwAsk::Aware(facts(page, config.alpha))),
        Arm::Fixed => Some(IwAsk::Fixed(config.fixed_iw)),
        Arm::Default => None,
    };
    // The origin's namespace holds only the origin's sockets.
    let counters = || bed.running().ok().map(|t| TcpCounters::read(t, SERVER));
    let before = if protocol == Protocol::H3 {
        None
    } else {
        counters()
    };
    let start = t_ref.elapsed();
    let record = bed.load(page, &opts)?;
    let end = t_ref.elapsed();
    let server_tcp = before.zip(counters()).map(|(b, a)| a.since(b));
    // Let the queue drain and the connections close before the next load.
    std::thread::sleep(Duration::from_millis(rtt_ms * 2));
    Ok((
        run_of(&record, page, proto, arm, rtt_ms, run, server_tcp),
        start,
        end,
    ))
}

/// The facts the edge's hint gives for `page`: its size, its computation
/// latency (the sum of its scripts' compute time) and α.
pub fn facts(page: &Page, alpha: f64) -> mewa_client::iw::PageFacts {
    mewa_client::iw::PageFacts {
        page_bytes: page.total_bytes(),
        computation_ms: Some(u32::try_from(page.total_compute_ms()).unwrap_or(u32::MAX)),
        alpha,
    }
}

fn run_of(
    record: &LoadRecord,
    page: &Page,
    proto: Transport,
    arm: Arm,
    rtt_ms: u64,
    run: usize,
    server_tcp: Option<TcpCounters>,
) -> IwRun {
    let first = record.connections.first();
    let iw = first.and_then(|c| c.iw.as_ref());
    IwRun {
        rtt_ms,
        protocol: proto,
        arm,
        page: page.name.clone(),
        page_bytes: page.total_bytes(),
        computation_ms: page.total_compute_ms(),
        run,
        completion_s: record
            .ok()
            .then_some(record.done_us)
            .flatten()
            .map(|us| us as f64 / 1e6),
        asked: iw.and_then(|i| i.asked),
        granted: iw.and_then(|i| i.granted_segments()),
        handshake_ms: first.and_then(|c| {
            c.connected_us
                .map(|t| t.saturating_sub(c.open_us) as f64 / 1e3)
        }),
        drops: None,
        queue_p95_ms: None,
        queue_max_ms: None,
        server_tcp,
    }
}

fn read_log(path: &Path) -> Option<EventLog> {
    let text = std::fs::read_to_string(path).ok()?;
    EventLog::parse(&text).ok()
}

/// The link's drops and queueing delay during each of `timed` (a load's
/// key, start and end from the testbed's reference instant), read from the
/// link's event logs in `logs` once the testbed is torn down; empty when
/// the logs cannot be read. The link's clock starts with the link; it is
/// tied to the loads' clock by the first packet of the first load (its SYN
/// or QUIC Initial, sent as the load starts).
pub(super) fn link_figures(
    logs: &Path,
    timed: &[(String, Duration, Duration)],
    one_way: Duration,
    bps: u64,
) -> Vec<LinkFigures> {
    let (Some(up), Some(down)) = (
        read_log(&logs.join("iw.up.log")),
        read_log(&logs.join("iw.down.log")),
    ) else {
        return Vec::new();
    };
    let first_up = up
        .events
        .iter()
        .find(|e| e.kind == EventKind::Arrival)
        .map(|e| e.at);
    let first_load = timed.first().map(|t| t.1);
    let (Some(first_up), Some(first_load)) = (first_up, first_load) else {
        return Vec::new();
    };
    // link time = load time + shift
    let shift = first_up.as_secs_f64() - first_load.as_secs_f64();
    let at = |d: Duration| d.as_secs_f64() + shift;
    timed
        .iter()
        .map(|(key, start, end)| {
            let (s, e) = (at(*start), at(*end) + one_way.as_secs_f64());
            let within = |t: Duration| (s..=e).contains(&t.as_secs_f64());
            let drops = up
                .events
                .iter()
                .chain(&down.events)
                .filter(|ev| ev.kind == EventKind::DropQueue && within(ev.at))
                .count() as u64;
            let waits: Vec<f64> = down
                .events
                .iter()
                .filter(|ev| ev.kind == EventKind::Departure && within(ev.at))
                .filter_map(|ev| {
                    let serial = ev.bytes as f64 * 8.0 / bps.max(1) as f64;
                    ev.delay
                        .map(|d| (d.as_secs_f64() - one_way.as_secs_f64() - serial).max(0.0) * 1e3)
                })
                .collect();
            LinkFigures {
                load: key.clone(),
                drops,
                queue_p95_ms: quantile(&waits, 0.95),
                queue_max_ms: waits.iter().copied().reduce(f64::max),
            }
        })
        .collect()
}
