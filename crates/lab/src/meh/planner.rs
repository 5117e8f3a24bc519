//! What the client remembers from load to load to plan the next one: the
//! bandwidth its loads delivered ([`DeliveryRate`]) and the round trips its
//! handshakes took ([`RecentRtt`]); and the same round-trip memory of the
//! browser runs' proxy.
//!
//! Each is rebuilt from the journal: a record keeps what the estimator
//! took from its load, and replaying the records in the order they
//! finished gives the state the interrupted run had before its next load.

use std::time::Duration;

use mewa_client::rate::{DeliveryRate, RecentRtt};
use mewa_loader::record::LoadRecord;

use super::record::{BrowserRun, MehRun, Record};
use super::setup::{PlanRate, Setup};

/// What the client takes from one load of its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Observation {
    /// [`DeliveryRate::peak_window_bytes`] of the load's arrivals.
    pub(crate) peak_window_bytes: Option<u64>,
    /// The quickest TCP handshake of the load's connections, µs.
    pub(crate) handshake_us: Option<u64>,
}

/// The client's planning state.
#[derive(Debug, Clone)]
pub(crate) struct Planner {
    plan_rate: PlanRate,
    /// What the phone has seen its loads deliver, over windows of one
    /// end-to-end round trip.
    seen: DeliveryRate,
    /// The round trips its handshakes took after the radio's promotion.
    recent: RecentRtt,
}

impl Planner {
    /// A client that has loaded nothing yet.
    pub(crate) fn new(setup: &Setup) -> Planner {
        Planner {
            plan_rate: setup.plan_rate,
            seen: DeliveryRate::new(setup.delivery_window_us()),
            recent: RecentRtt::new(),
        }
    }

    /// The client after the loader's loads in `records`, in their order.
    pub(crate) fn replayed<'a>(
        setup: &Setup,
        records: impl IntoIterator<Item = &'a Record>,
    ) -> Planner {
        let mut p = Planner::new(setup);
        for r in records {
            if let Record::Load(l) = r {
                p.observe(Observation::of_row(l));
            }
        }
        p
    }

    /// The planning bandwidth now, bit/s: told, or what its recent loads
    /// delivered (the prior before any).
    pub(crate) fn bandwidth_bps(&self) -> f64 {
        match self.plan_rate {
            PlanRate::Fixed(b) => b,
            PlanRate::Observed { prior_bps } => self.seen.estimate_bps().unwrap_or(prior_bps),
        }
    }

    /// The smallest of its recent handshakes, seconds.
    pub(crate) fn recent_rtt_s(&self) -> Option<f64> {
        self.recent.estimate_s()
    }

    /// What the client takes from `rec`, a load it made.
    pub(crate) fn observation(&self, rec: &LoadRecord) -> Observation {
        Observation {
            peak_window_bytes: self.seen.peak_window_bytes(&arrivals(rec)),
            handshake_us: quickest_handshake_us(rec),
        }
    }

    /// Takes one load into the state.
    pub(crate) fn observe(&mut self, o: Observation) {
        if let Some(b) = o.peak_window_bytes {
            self.seen.observe_window_bytes(b);
        }
        if let Some(us) = o.handshake_us {
            self.recent.observe(us as f64 / 1e6);
        }
    }
}

impl Observation {
    /// What a journal row says the client took from its load.
    fn of_row(r: &MehRun) -> Observation {
        Observation {
            peak_window_bytes: r.peak_window_bytes,
            handshake_us: r.handshake_us,
        }
    }
}

/// The browser runs' proxy's memory of its handshakes, as the phone's
/// ([`RecentRtt`]): a new proxy per load starts from it.
#[derive(Debug, Clone, Default)]
pub(crate) struct ProxyRtt {
    recent: RecentRtt,
}

impl ProxyRtt {
    /// The memory after the Chromium loads in `records`, in their order.
    pub(crate) fn replayed<'a>(records: impl IntoIterator<Item = &'a Record>) -> ProxyRtt {
        let mut p = ProxyRtt::default();
        for r in records {
            if let Record::Chromium(b) = r {
                p.observe(b);
            }
        }
        p
    }

    /// The round trip the next proxy starts with.
    pub(crate) fn estimate(&self) -> Option<Duration> {
        self.recent
            .estimate_s()
            .and_then(|s| Duration::try_from_secs_f64(s).ok())
    }

    /// Takes one Chromium load into the memory.
    pub(crate) fn observe(&mut self, b: &BrowserRun) {
        if let Some(ns) = b.handshake_ns {
            self.recent.observe(Duration::from_nanos(ns).as_secs_f64());
        }
    }
}

/// The quickest TCP handshake of a load's connections, µs.
fn quickest_handshake_us(rec: &LoadRecord) -> Option<u64> {
    rec.connections
        .iter()
        .filter_map(|c| c.connected_us.map(|t| t.saturating_sub(c.open_us)))
        .filter(|&us| us > 0)
        .min()
}

/// A load's body arrivals `(µs, bytes)` in time order.
fn arrivals(rec: &LoadRecord) -> Vec<(u64, u64)> {
    let mut a: Vec<(u64, u64)> = rec
        .objects
        .iter()
        .flat_map(|o| o.chunks.iter().map(|c| (c.t_us, c.bytes)))
        .collect();
    a.sort_unstable();
    a
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::meh::config::Config;

    fn row(peak: Option<u64>, hs: Option<u64>) -> Record {
        Record::Load(Box::new(MehRun {
            page: "p".into(),
            page_bytes: 1,
            objects: 1,
            run: 0,
            with_hint: false,
            ok: true,
            plt_s: Some(1.0),
            n: 1,
            connections: 1,
            dns_ms: 45.0,
            hint_bytes: 0,
            hint_over_tcp: false,
            answer_bytes: 0,
            urls_over_tcp: false,
            urls_ms: None,
            ready_ms: None,
            fallback: None,
            idle_share: None,
            error: None,
            peak_window_bytes: peak,
            handshake_us: hs,
        }))
    }

    #[test]
    fn replaying_the_journal_gives_the_state_the_loads_left() {
        let setup = Setup::resolve(&Config {
            origin: crate::experiment::OriginChoice {
                ca_dir: Some("/nonexistent/ca".into()),
                ..Default::default()
            },
            ..Config::default()
        })
        .expect("resolves");
        let loads = [
            (Some(100_000), Some(66_000)),
            (None, Some(65_500)),
            (Some(300_000), None),
            (Some(50_000), Some(70_000)),
            (Some(60_000), Some(90_000)),
        ];
        let mut live = Planner::new(&setup);
        // Before any load: the prior, no round trip.
        assert_eq!(live.bandwidth_bps(), 10e6);
        assert_eq!(live.recent_rtt_s(), None);
        let mut journal = Vec::new();
        for (peak, hs) in loads {
            live.observe(Observation {
                peak_window_bytes: peak,
                handshake_us: hs,
            });
            journal.push(row(peak, hs));
            journal.push(Record::Edge(super::super::record::EdgeStart {
                wired_rtt_ms: None,
                at_unix_s: None,
            }));
        }
        let again = Planner::replayed(&setup, &journal);
        assert_eq!(again.bandwidth_bps(), live.bandwidth_bps());
        assert_eq!(again.recent_rtt_s(), live.recent_rtt_s());
        // 300 000 B per 65 ms round trip is the best of the last three.
        assert!((live.bandwidth_bps() - 300_000.0 * 8.0 / 0.065).abs() < 1.0);
        assert_eq!(live.recent_rtt_s(), Some(0.0655));
    }
}
