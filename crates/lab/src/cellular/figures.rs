//! Each load's figures that are known only once its testbed is torn down:
//! from the link's pcaps ([`Wire`]) the bytes and best second it
//! delivered, the retransmissions on the wire and the client's handshakes;
//! from the server's `TCP_INFO` samples its congestion window; and for a
//! load that woke the radio, the window and timeout over its first
//! seconds ([`LoadTrace`]). Nothing here reads a clock or a file.

use std::collections::BTreeMap;

use mewa_loader::record::Protocol;
use mewa_probe::retrans::{self, Counts, Retransmission};
use mewa_probe::tcpinfo::{Sample, SocketSeries};

use super::record::{CellRun, LoadTrace};
use super::wire::Wire;

/// A load as its session measured it, before the pcaps are read.
#[derive(Debug, Clone)]
pub struct Pending {
    /// The load, its wire and window figures still empty.
    pub run: CellRun,
    /// When it ended (or gave up), µs since the epoch.
    pub end_unix_us: u64,
}

/// The server's `TCP_INFO` samples of one session.
#[derive(Debug, Clone)]
pub struct SessionSamples {
    /// The session's protocol.
    pub protocol: Protocol,
    /// Each server socket's samples.
    pub sockets: Vec<SocketSeries>,
    /// When the sampler started (its samples count from it), µs since the
    /// epoch.
    pub t0_unix_us: u64,
}

/// How much of a load that woke the radio its trace keeps, µs.
const TRACE_US: u64 = 8_000_000;

/// Fills in what the pcaps and the `TCP_INFO` samples say about each load
/// of a testbed (its sessions' loads in order): throughput, congestion
/// window, retransmissions on the wire; and returns the traces of the
/// loads that woke the radio after their session's first. A load's window
/// for retransmissions runs from its start to the next load's start (a
/// late duplicate still belongs to the load that caused it).
pub fn fill_in(pending: &mut [Pending], wire: &Wire, samples: &[SessionSamples]) -> Vec<LoadTrace> {
    let mut traces = Vec::new();
    let n = pending.len();
    for i in 0..n {
        let start = pending[i].run.start_unix_us;
        let next = if i + 1 < n && pending[i + 1].run.protocol == pending[i].run.protocol {
            pending[i + 1].run.start_unix_us
        } else {
            pending[i].end_unix_us + 2_000_000
        };
        let end = pending[i].end_unix_us.max(start + 1);
        let run = &mut pending[i].run;
        throughput(run, wire, start, end);
        let in_window = |r: &&Retransmission| r.at_us >= start && r.at_us < next;
        run.wire_down = Counts::of(wire.down.iter().filter(in_window));
        run.wire_up = Counts::of(wire.up.iter().filter(in_window));
        run.handshakes = wire
            .up_syns
            .iter()
            .filter(|&&t| t >= start && t < next)
            .count() as u32;
        let Some(s) = samples.iter().find(|s| s.protocol == run.protocol) else {
            continue;
        };
        let (avg, max) = cwnd_over(&s.sockets, s.t0_unix_us, start, end);
        run.cwnd_avg = avg;
        run.cwnd_max = max;
        // The figure: loads that began with the radio asleep, after the
        // session's first, and a few seconds of them.
        if run.seq > 0 && run.promotions > 0 {
            traces.push(trace_of(run, wire, s, start));
        }
    }
    traces
}

/// The bytes the link delivered downstream over `[start, end)`, their
/// average over the load time and the best whole second.
fn throughput(run: &mut CellRun, wire: &Wire, start: u64, end: u64) {
    let in_load = |t: u64| t >= start && t < end;
    let bytes: u64 = wire
        .down_packets
        .iter()
        .filter(|(t, _)| in_load(*t))
        .map(|&(_, b)| u64::from(b))
        .sum();
    run.down_bytes = bytes;
    let Some(plt) = run.plt_s.filter(|&p| p > 0.0) else {
        return;
    };
    run.avg_kbps = Some(bytes as f64 / 1000.0 / plt);
    let mut bins: BTreeMap<u64, u64> = BTreeMap::new();
    for &(t, b) in wire.down_packets.iter().filter(|(t, _)| in_load(*t)) {
        *bins.entry((t - start) / 1_000_000).or_default() += u64::from(b);
    }
    // A last partial second is scaled to a full one only if it lasted at
    // least half a second.
    let whole = ((end - start) / 1_000_000).max(1);
    run.max_kbps = bins
        .iter()
        .filter(|(k, _)| **k < whole)
        .map(|(_, b)| *b as f64 / 1000.0)
        .fold(None, |m: Option<f64>, v| Some(m.map_or(v, |m| m.max(v))));
}

/// The first seconds of `run`, which began at `start`.
fn trace_of(run: &CellRun, wire: &Wire, s: &SessionSamples, start: u64) -> LoadTrace {
    let until = start + TRACE_US;
    LoadTrace {
        browser: run.browser,
        radio: run.radio,
        network: run.network,
        setting: run.setting.clone(),
        protocol: run.protocol,
        seq: run.seq,
        radio_state: run.radio_state.clone(),
        cwnd: window_series(&s.sockets, s.t0_unix_us, start, until, |x| x.cwnd),
        rto: window_series(&s.sockets, s.t0_unix_us, start, until, |x| x.rto_us / 1000),
        retransmissions: wire
            .down
            .iter()
            .filter(|r| r.at_us >= start && r.at_us < until && !r.syn)
            .map(|r| {
                (
                    (r.at_us - start) as f64 / 1e6,
                    r.verdict == retrans::Verdict::Spurious,
                )
            })
            .collect(),
    }
}

/// One field of each socket's samples within `[start, until)`, as (s since
/// `start`, value); sockets without a sample there are left out.
fn window_series(
    sockets: &[SocketSeries],
    t0: u64,
    start: u64,
    until: u64,
    f: impl Fn(&Sample) -> u32,
) -> Vec<Vec<(f64, u32)>> {
    sockets
        .iter()
        .map(|s| {
            // Samples are kept when something changed: the value in force
            // when the window opens is the last one before it.
            let carried = s
                .samples
                .iter()
                .take_while(|x| t0 + x.t_us < start)
                .last()
                .map(|x| (0.0, f(x)));
            let inside = s.samples.iter().filter_map(|x| {
                let t = t0 + x.t_us;
                (t >= start && t < until).then(|| ((t - start) as f64 / 1e6, f(x)))
            });
            let v: Vec<(f64, u32)> = carried.into_iter().chain(inside).collect();
            // A socket with nothing inside the window did not take part.
            if v.len() > usize::from(carried.is_some()) {
                v
            } else {
                Vec::new()
            }
        })
        .filter(|v| !v.is_empty())
        .collect()
}

/// The server's congestion window over `[start, end)` (µs since the
/// epoch; the samples count from `t0`): the time-weighted mean of each
/// socket that sent data in the window, averaged over those sockets, and
/// the largest value any of them had (a socket that sent nothing keeps a
/// window it is not using).
fn cwnd_over(
    sockets: &[SocketSeries],
    t0: u64,
    start: u64,
    end: u64,
) -> (Option<f64>, Option<u32>) {
    let mut means = Vec::new();
    let mut max: Option<u32> = None;
    for s in sockets {
        // The value in force at each instant: the last sample at or before
        // it (samples are kept when something changed).
        let mut prev: Option<(u64, u32, u64)> = None;
        let mut weighted = 0f64;
        let mut span = 0u64;
        let mut sent_from: Option<u64> = None;
        let mut sent_to = 0u64;
        let mut most: Option<u32> = None;
        for x in &s.samples {
            let t = t0 + x.t_us;
            if t >= end {
                break;
            }
            let sent_now = x.bytes_sent.or(x.bytes_acked).unwrap_or(0);
            if t >= start {
                sent_from.get_or_insert(sent_now);
                sent_to = sent_now;
                most = Some(most.map_or(x.cwnd, |m| m.max(x.cwnd)));
                if let Some((pt, pc, _)) = prev {
                    let from = pt.max(start);
                    weighted += f64::from(pc) * (t - from) as f64;
                    span += t - from;
                }
            } else {
                sent_from = Some(sent_now);
            }
            prev = Some((t, x.cwnd, sent_now));
        }
        if let Some((pt, pc, _)) = prev {
            let from = pt.max(start);
            if end > from {
                weighted += f64::from(pc) * (end - from) as f64;
                span += end - from;
            }
        }
        // A closing socket of an earlier session sends a few bytes (a TLS
        // close_notify); one that took part sent at least a segment.
        let sent = sent_from.is_some_and(|f| sent_to >= f + 1448);
        if sent && span > 0 {
            means.push(weighted / span as f64);
            // The value in force when the window opened counts too.
            let carried = s
                .samples
                .iter()
                .take_while(|x| t0 + x.t_us < start)
                .last()
                .map(|x| x.cwnd);
            for c in most.into_iter().chain(carried) {
                max = Some(max.map_or(c, |m| m.max(c)));
            }
        }
    }
    (mewa_report::mean(&means), max)
}

#[cfg(test)]
mod tests {
    use super::*;
    use mewa_probe::tcpinfo::SocketKey;

    fn sample(t_us: u64, cwnd: u32, sent: u64) -> Sample {
        Sample {
            t_us,
            state: 1,
            ca_state: 0,
            cwnd,
            ssthresh: u32::MAX,
            rtt_us: 150_000,
            rttvar_us: 50_000,
            rto_us: 400_000,
            total_retrans: 0,
            total_rto: None,
            bytes_acked: Some(sent),
            bytes_sent: Some(sent),
            bytes_retrans: None,
            delivery_rate: None,
        }
    }

    fn socket(port: u16, samples: Vec<Sample>) -> SocketSeries {
        let last = *samples.last().unwrap();
        SocketSeries {
            key: SocketKey {
                src: "10.0.0.2:443".parse().unwrap(),
                dst: format!("10.0.0.1:{port}").parse().unwrap(),
                cookie: u64::from(port),
            },
            inode: 1,
            cong: Some("cubic".into()),
            first_us: samples[0].t_us,
            last_us: last.t_us,
            samples,
            dropped: 0,
            last,
        }
    }

    #[test]
    fn the_window_is_time_weighted_over_the_load_and_idle_sockets_do_not_count() {
        // t0 = 1_000: a socket at 10 segments until 1 s into the window,
        // then 30 for the remaining 3 s (mean 25); it sent during the load.
        let busy = socket(
            40000,
            vec![
                sample(0, 10, 0),
                sample(1_000_000, 30, 50_000),
                sample(2_000_000, 30, 90_000),
            ],
        );
        // Another that sent nothing in the window: its large window is not
        // in use.
        let idle = socket(40001, vec![sample(0, 99, 7)]);
        let (avg, max) = cwnd_over(&[busy.clone(), idle], 1_000, 1_000, 4_001_000);
        assert!((avg.unwrap() - 25.0).abs() < 1e-9, "{avg:?}");
        assert_eq!(max, Some(30));
        // A window before any sample: nothing sent, no mean.
        let (avg, _) = cwnd_over(&[busy], 1_000, 5_000_000, 6_000_000);
        assert_eq!(avg, None);
    }

    #[test]
    fn a_load_that_woke_the_radio_gets_its_figures_and_a_trace() {
        let mut run: CellRun =
            serde_json::from_value(super::super::record::tests::old_line("base", "h2", 2.0))
                .unwrap();
        run.start_unix_us = 10_000_000;
        let mut second = run.clone();
        second.seq = 1;
        second.start_unix_us = 20_000_000;
        let mut pending = vec![
            Pending {
                run,
                end_unix_us: 12_000_000,
            },
            Pending {
                run: second,
                end_unix_us: 22_000_000,
            },
        ];
        // 1500 bytes every 100 ms over the first load's two seconds.
        let wire = Wire {
            down_packets: (0..20).map(|i| (10_000_000 + i * 100_000, 1500)).collect(),
            up_syns: vec![10_000_100],
            ..Wire::default()
        };
        let samples = [SessionSamples {
            protocol: Protocol::H2,
            sockets: vec![socket(
                40000,
                vec![sample(0, 10, 0), sample(20_500_000, 20, 100_000)],
            )],
            t0_unix_us: 0,
        }];
        let traces = fill_in(&mut pending, &wire, &samples);
        let first = &pending[0].run;
        assert_eq!(first.down_bytes, 30_000);
        assert_eq!(first.avg_kbps, Some(15.0));
        assert_eq!(first.max_kbps, Some(15.0));
        assert_eq!((first.handshakes, pending[1].run.handshakes), (1, 0));
        // Only the second load woke the radio after the session's first.
        assert_eq!(traces.len(), 1);
        assert_eq!(traces[0].seq, 1);
        assert_eq!(traces[0].cwnd, vec![vec![(0.0, 10), (0.5, 20)]]);
        assert_eq!(pending[1].run.cwnd_max, Some(20));
    }
}
