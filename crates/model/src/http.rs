//! Completion time and idle time of an HTTP/2 page load over TCP slow start, and
//! the choice of the number of parallel connections (seed 000 §III).

use serde::Serialize;

use crate::{
    ceil_tol, floor_tol, log_base, ModelError, DEFAULT_IW, DEFAULT_MSS, DELAYED_ACK_GROWTH,
};

/// The end-to-end path a page load runs over, and the TCP parameters that shape
/// slow start on it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct TcpPath {
    /// Bottleneck bandwidth μ, bit/s.
    pub bandwidth_bps: f64,
    /// Round-trip time, seconds (radio + wired: seed 000 §II takes "the
    /// concatenation of wired and wireless latency").
    pub rtt_s: f64,
    /// Segment size S_mss, bytes.
    pub mss_bytes: u32,
    /// Initial window IW per connection, segments.
    pub iw_segments: u32,
}

impl TcpPath {
    /// A path with the default MSS (1500 B) and IW (10), after validating the
    /// inputs.
    pub fn new(bandwidth_bps: f64, rtt_s: f64) -> Result<TcpPath, ModelError> {
        TcpPath::with_tcp(bandwidth_bps, rtt_s, DEFAULT_MSS, DEFAULT_IW)
    }

    /// A path with explicit MSS and IW, after validating every input.
    pub fn with_tcp(
        bandwidth_bps: f64,
        rtt_s: f64,
        mss_bytes: u32,
        iw_segments: u32,
    ) -> Result<TcpPath, ModelError> {
        if !(bandwidth_bps.is_finite() && bandwidth_bps > 0.0) {
            return Err(ModelError::Bandwidth(bandwidth_bps));
        }
        if !(rtt_s.is_finite() && rtt_s >= 0.0) {
            return Err(ModelError::Rtt(rtt_s));
        }
        if mss_bytes == 0 {
            return Err(ModelError::Mss);
        }
        if iw_segments == 0 {
            return Err(ModelError::InitialWindow);
        }
        Ok(TcpPath {
            bandwidth_bps,
            rtt_s,
            mss_bytes,
            iw_segments,
        })
    }

    /// Bandwidth-delay product in bytes.
    pub fn bdp_bytes(&self) -> f64 {
        self.bandwidth_bps / 8.0 * self.rtt_s
    }

    /// Seconds to serialise `bytes` at the bottleneck rate.
    fn tx_time(&self, bytes: f64) -> f64 {
        bytes * 8.0 / self.bandwidth_bps
    }
}

/// The model's breakdown of one page load.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Completion {
    /// Parallel connections the page was spread over.
    pub connections: u32,
    /// γ: slow-start rounds in which the sender waits for ACKs.
    pub rounds: u32,
    /// T_HTTP, seconds (eq. 1).
    pub total_s: f64,
    /// T_idle, seconds (eq. 2): time the bottleneck sits unused during slow start.
    pub idle_s: f64,
}

impl Completion {
    /// Idle share T_idle / T_HTTP, in [0, 1).
    pub fn idle_share(&self) -> f64 {
        if self.total_s > 0.0 {
            self.idle_s / self.total_s
        } else {
            0.0
        }
    }
}

/// γ of seed 000 eq. 1 for an aggregate initial window of `iw_agg` segments.
///
/// ```text
/// γ = min{ ⌊log_1.5(1 + RTT / (2·IW·S_mss/μ))⌋ + 1 ,  ⌈log_1.5(S_page/(IW·S_mss)) + 1⌉ − 1 }
/// ```
///
/// The first bracket was lost in the PDF. We read it as a floor: with a floor
/// every counted round has a non-negative idle gap (the window of the last
/// counted round, IW·1.5^(γ−1) segments, still takes no longer than the RTT to
/// send), while a ceiling counts one round in which the window already exceeds
/// the pipe. The floor also reproduces Table I best (docs/MODEL.md). The second
/// bracket is printed as a ceiling and kept so. γ is never negative.
fn rounds(page_bytes: f64, path: &TcpPath, iw_agg: f64) -> u32 {
    let mss = f64::from(path.mss_bytes);
    let iw_time = path.tx_time(iw_agg * mss);
    let pipe_rounds = floor_tol(log_base(
        1.0 + path.rtt_s / (2.0 * iw_time),
        DELAYED_ACK_GROWTH,
    )) + 1.0;
    let page_rounds = if page_bytes > 0.0 {
        ceil_tol(log_base(page_bytes / (iw_agg * mss), DELAYED_ACK_GROWTH) + 1.0) - 1.0
    } else {
        0.0
    };
    let g = pipe_rounds.min(page_rounds).max(0.0);
    // γ is at most a few dozen for any physical input; the cast saturates anyway.
    g as u32
}

/// T_HTTP and T_idle for a page of `page_bytes` loaded over `connections`
/// parallel connections that share the bottleneck.
///
/// Seed 000 eq. 1 and 2:
///
/// ```text
/// T_HTTP = 2·RTT + S_page/μ + γ·[RTT + S_mss/μ] − 2·(1.5^γ − 1)·IW·S_mss/μ
/// T_idle =                    γ·[RTT + S_mss/μ] − 2·(1.5^γ − 1)·IW·S_mss/μ
/// ```
///
/// For n connections, seed 000 §II: "the network idle time during TCP slow start
/// can be overcome by aggregating the congestion window of parallel TCP
/// connections". Each connection carries S_page/n at μ/n with its own IW, which
/// in eq. 1 is the same as one connection with an initial window of n·IW: the
/// slow-start rounds shrink, the serialisation term S_page/μ does not. The
/// handshakes run in parallel, so 2·RTT stays. `connections` of 0 is treated
/// as 1.
pub fn t_http(page_bytes: u64, path: &TcpPath, connections: u32) -> Completion {
    let n = connections.max(1);
    let s = page_bytes as f64;
    let iw_agg = f64::from(path.iw_segments) * f64::from(n);
    let g = rounds(s, path, iw_agg);
    let mss = f64::from(path.mss_bytes);
    let idle = f64::from(g) * (path.rtt_s + path.tx_time(mss))
        - 2.0 * (DELAYED_ACK_GROWTH.powi(g as i32) - 1.0) * path.tx_time(iw_agg * mss);
    // The floor in `rounds` keeps every round's gap >= 0; clamp float noise.
    let idle = idle.max(0.0);
    Completion {
        connections: n,
        rounds: g,
        total_s: 2.0 * path.rtt_s + path.tx_time(s) + idle,
        idle_s: idle,
    }
}

/// Which completion-time model Algorithm 1 evaluates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum SlowStartModel {
    /// Seed 000 eq. 1–2 as printed ([`t_http`]). Reproduces Table I best, but is
    /// not monotone in bandwidth (see [`t_http`]).
    #[default]
    Printed,
    /// The same slow-start picture counted round by round ([`t_http_rounds`]):
    /// monotone in bandwidth and RTT.
    Rounds,
}

impl SlowStartModel {
    /// Completion time of `page_bytes` over `connections` with this model.
    pub fn completion(self, page_bytes: u64, path: &TcpPath, connections: u32) -> Completion {
        match self {
            SlowStartModel::Printed => t_http(page_bytes, path, connections),
            SlowStartModel::Rounds => t_http_rounds(page_bytes, path, connections),
        }
    }
}

/// T_HTTP and T_idle counted round by round, for the same picture eq. 1
/// describes: the aggregate window of `connections` connections starts at
/// n·IW segments and grows ×1.5 per round; after each round the sender waits
/// `RTT + S_mss/μ − W_k·S_mss/μ` for ACKs while that is positive; the page ends
/// in round j*, the first whose cumulative data 2·n·IW·(1.5^j* − 1)·S_mss
/// covers S_page, and no wait follows the last round.
///
/// Why a second model: the printed γ mixes two round counts (the pipe bound
/// comes from cumulative data, the page bound from the window), so eq. 1 can
/// count a slow-start round for data the page does not have, which subtracts
/// more transmission time than the page takes and makes T_HTTP *rise* with
/// bandwidth in places (e.g. 157.5 KB, 388 ms RTT, 32.3 → 32.6 Mbit/s). Here
/// the data of the idle rounds is always less than the page, so T falls as μ
/// grows and rises with RTT (property-tested). docs/MODEL.md compares both.
pub fn t_http_rounds(page_bytes: u64, path: &TcpPath, connections: u32) -> Completion {
    let n = connections.max(1);
    let s = page_bytes as f64;
    let mss = f64::from(path.mss_bytes);
    let iw_agg = f64::from(path.iw_segments) * f64::from(n);
    let last_round = if s > 0.0 {
        ceil_tol(log_base(s / (2.0 * iw_agg * mss) + 1.0, DELAYED_ACK_GROWTH)).max(1.0)
    } else {
        0.0
    };
    let mut idle = 0.0;
    let mut g = 0u32;
    let mut window = iw_agg;
    while f64::from(g) + 1.0 < last_round {
        let gap = path.rtt_s + path.tx_time(mss) - path.tx_time(window * mss);
        if gap <= 0.0 {
            break;
        }
        idle += gap;
        g += 1;
        window *= DELAYED_ACK_GROWTH;
    }
    Completion {
        connections: n,
        rounds: g,
        total_s: 2.0 * path.rtt_s + path.tx_time(s) + idle,
        idle_s: idle,
    }
}

/// The outcome of seed 000 Algorithm 1.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ConnectionChoice {
    /// Chosen number of parallel connections n, in [1, `n_max`].
    pub n: u32,
    /// ConnectionNumber_max (after any caller cap).
    pub n_max: u32,
    /// Cost of each added connection, C = 1/ConnectionNumber_max.
    pub cost: f64,
    /// Gains G(i) = (T(i−1) − T(i)) / T(1) evaluated, for i = 2, 3, …
    pub gains: Vec<f64>,
    /// Predicted T_HTTP with one connection, seconds.
    pub t1_s: f64,
    /// Predicted T_HTTP with n connections, seconds.
    pub tn_s: f64,
}

impl ConnectionChoice {
    /// Predicted relative reduction of the page load time, (T(1) − T(n)) / T(1).
    /// This is the "G(n)" column of seed 000 Table I.
    pub fn reduction(&self) -> f64 {
        if self.t1_s > 0.0 {
            (self.t1_s - self.tn_s) / self.t1_s
        } else {
            0.0
        }
    }
}

/// ConnectionNumber_max of seed 000 Algorithm 1:
/// `min(ceil(BDP/(IW·MSS)), ceil(S_page/(IW·MSS)))`, at least 1.
///
/// "the maximum number of connections to fully utilize this given BDP pipe is
/// fixed as ceil(BDP/(IW·MSS)), or for page whose size is less than the BDP
/// size, … ceil(S_page/(IW·MSS))".
pub fn max_connections(page_bytes: u64, path: &TcpPath) -> u32 {
    let iw_bytes = f64::from(path.iw_segments) * f64::from(path.mss_bytes);
    let by_bdp = ceil_tol(path.bdp_bytes() / iw_bytes);
    let by_page = ceil_tol(page_bytes as f64 / iw_bytes);
    // Both are finite for a validated path; the cast saturates at u32::MAX.
    (by_bdp.min(by_page).max(1.0)) as u32
}

/// Seed 000 Algorithm 1: add connections while the gain of the next one is at
/// least its cost.
///
/// ```text
/// i = 2, C(i) = 1/ConnectionNumber_max, G(i) = (T_HTTP(i−1) − T_HTTP(i)) / T_HTTP(1)
/// while G(i) ≥ C(i): i = i + 1
/// n = i − 1
/// ```
///
/// The printed loop has no upper bound; we stop at ConnectionNumber_max, which
/// the paper defines as the largest useful number. `cap` lets a caller bound n
/// further (a client that never opens more than 6 connections passes 6; pass
/// `u32::MAX` for the paper's behaviour). The cost stays 1/ConnectionNumber_max
/// of the uncapped algorithm so that a cap never changes which connections pay.
/// `model` picks the completion-time model the gains are computed with.
pub fn choose_connections(
    page_bytes: u64,
    path: &TcpPath,
    cap: u32,
    model: SlowStartModel,
) -> ConnectionChoice {
    let n_max_paper = max_connections(page_bytes, path);
    let n_max = n_max_paper.min(cap.max(1));
    let cost = 1.0 / f64::from(n_max_paper);
    let t1 = model.completion(page_bytes, path, 1).total_s;
    let mut gains = Vec::new();
    let mut prev = t1;
    let mut n = 1;
    for i in 2..=n_max {
        let ti = model.completion(page_bytes, path, i).total_s;
        let g = if t1 > 0.0 { (prev - ti) / t1 } else { 0.0 };
        gains.push(g);
        if g >= cost {
            n = i;
            prev = ti;
        } else {
            break;
        }
    }
    ConnectionChoice {
        n,
        n_max,
        cost,
        gains,
        t1_s: t1,
        tn_s: prev,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{KB, MBPS};

    fn path(rtt_ms: f64) -> TcpPath {
        TcpPath::new(20.0 * MBPS, rtt_ms / 1000.0).unwrap()
    }

    #[test]
    fn rejects_bad_inputs() {
        assert!(matches!(
            TcpPath::new(0.0, 0.1),
            Err(ModelError::Bandwidth(_))
        ));
        assert!(matches!(
            TcpPath::new(f64::NAN, 0.1),
            Err(ModelError::Bandwidth(_))
        ));
        assert!(matches!(TcpPath::new(1e6, -1.0), Err(ModelError::Rtt(_))));
        assert!(matches!(
            TcpPath::with_tcp(1e6, 0.1, 0, 10),
            Err(ModelError::Mss)
        ));
        assert!(matches!(
            TcpPath::with_tcp(1e6, 0.1, 1500, 0),
            Err(ModelError::InitialWindow)
        ));
    }

    #[test]
    fn hand_computed_400kb_50ms() {
        // μ = 20 Mbit/s, RTT = 50 ms, IW·MSS = 15 000 B → 6 ms to send.
        // γ1 = ⌊log1.5(1 + 0.05/0.012)⌋ + 1 = ⌊4.05⌋ + 1 = 5
        // γ2 = ⌈log1.5(400 000/15 000) + 1⌉ − 1 = ⌈9.09⌉ − 1 = 9
        // idle = 5·(0.05 + 0.0006) − 2·(1.5^5 − 1)·0.006 = 0.253 − 0.07912 5 = 0.173875
        let c = t_http(400 * KB, &path(50.0), 1);
        assert_eq!(c.rounds, 5);
        assert!((c.idle_s - 0.173_875).abs() < 1e-9, "{c:?}");
        assert!((c.total_s - (0.1 + 0.16 + 0.173_875)).abs() < 1e-9);
    }

    #[test]
    fn small_page_has_no_idle_round() {
        // A page that fits the initial window is sent in one flight.
        let c = t_http(10_000, &path(100.0), 1);
        assert_eq!(c.rounds, 0);
        assert_eq!(c.idle_s, 0.0);
    }

    #[test]
    fn more_connections_never_slower() {
        for n in 1..8 {
            let a = t_http(1_200 * KB, &path(100.0), n).total_s;
            let b = t_http(1_200 * KB, &path(100.0), n + 1).total_s;
            assert!(b <= a + 1e-12, "n={n}: {a} -> {b}");
        }
    }

    #[test]
    fn table1_corner_cells() {
        // Seed 000 Table I: 3600 KB at 50 ms keeps one connection; 400 KB at
        // 150 ms opens 4.
        assert_eq!(
            choose_connections(3600 * KB, &path(50.0), u32::MAX, SlowStartModel::Printed).n,
            1
        );
        assert_eq!(
            choose_connections(400 * KB, &path(150.0), u32::MAX, SlowStartModel::Printed).n,
            4
        );
    }

    #[test]
    fn cap_bounds_n() {
        let c = choose_connections(400 * KB, &path(150.0), 2, SlowStartModel::Printed);
        assert_eq!(c.n, 2);
        assert_eq!(c.n_max, 2);
    }

    #[test]
    fn n_max_formula() {
        // BDP = 125 000 B at 50 ms; 125 000 / 15 000 → 9. Page 20 KB → 2.
        assert_eq!(max_connections(400 * KB, &path(50.0)), 9);
        assert_eq!(max_connections(20 * KB, &path(50.0)), 2);
        assert_eq!(max_connections(0, &path(50.0)), 1);
    }

    #[test]
    fn printed_model_is_not_monotone_in_bandwidth() {
        // The documented defect of eq. 1 as printed (docs/MODEL.md §1.3): in the
        // page-bound regime a faster link predicts a slower load.
        let slow = TcpPath::new(32.3 * MBPS, 0.3888).unwrap();
        let fast = TcpPath::new(32.3 * 1.01 * MBPS, 0.3888).unwrap();
        assert!(t_http(157_501, &fast, 1).total_s > t_http(157_501, &slow, 1).total_s);
        assert!(
            t_http_rounds(157_501, &fast, 1).total_s <= t_http_rounds(157_501, &slow, 1).total_s
        );
    }

    #[test]
    fn rounds_model_hand_computed() {
        // 400 KB, 50 ms, 20 Mbit/s: j* = ⌈log1.5(400 000/30 000 + 1)⌉ = ⌈6.56⌉ = 7.
        // Gaps 0.0506 − W·0.0006 for W = 10, 15, 22.5, 33.75, 50.6, 75.9 (k < 6):
        // 0.0446, 0.0416, 0.0371, 0.030350, 0.020225, 0.005038; W=113.9 → < 0.
        let c = t_http_rounds(400 * KB, &path(50.0), 1);
        assert_eq!(c.rounds, 6);
        let expect: f64 = (0..6)
            .map(|k| 0.0506 - 10.0 * 1.5f64.powi(k) * 0.0006)
            .sum();
        assert!((c.idle_s - expect).abs() < 1e-12, "{c:?}");
    }

    mod props {
        use super::*;
        use proptest::prelude::*;

        proptest! {
            #[test]
            fn n_in_range(page in 1u64..20_000_000, mbps in 0.5f64..200.0, rtt_ms in 1.0f64..600.0, rounds in any::<bool>()) {
                let p = TcpPath::new(mbps * MBPS, rtt_ms / 1000.0).unwrap();
                let model = if rounds { SlowStartModel::Rounds } else { SlowStartModel::Printed };
                let c = choose_connections(page, &p, u32::MAX, model);
                prop_assert!(c.n >= 1 && c.n <= c.n_max);
                prop_assert_eq!(c.n_max, max_connections(page, &p));
                prop_assert!(c.tn_s <= c.t1_s + 1e-12);
            }

            #[test]
            fn rounds_model_faster_link_never_slower(page in 1u64..10_000_000, mbps in 0.5f64..100.0, k in 1.0001f64..4.0, rtt_ms in 0.0f64..400.0, n in 1u32..8) {
                let slow = TcpPath::new(mbps * MBPS, rtt_ms / 1000.0).unwrap();
                let fast = TcpPath::new(mbps * k * MBPS, rtt_ms / 1000.0).unwrap();
                prop_assert!(t_http_rounds(page, &fast, n).total_s <= t_http_rounds(page, &slow, n).total_s + 1e-12);
            }

            #[test]
            fn rounds_model_longer_rtt_never_faster(page in 1u64..10_000_000, mbps in 0.5f64..100.0, rtt_ms in 0.0f64..400.0, extra in 0.001f64..200.0, n in 1u32..8) {
                let near = TcpPath::new(mbps * MBPS, rtt_ms / 1000.0).unwrap();
                let far = TcpPath::new(mbps * MBPS, (rtt_ms + extra) / 1000.0).unwrap();
                prop_assert!(t_http_rounds(page, &far, n).total_s >= t_http_rounds(page, &near, n).total_s - 1e-12);
            }

            #[test]
            fn printed_model_longer_rtt_never_faster(page in 1u64..10_000_000, mbps in 0.5f64..100.0, rtt_ms in 0.0f64..400.0, extra in 0.001f64..200.0, n in 1u32..8) {
                let near = TcpPath::new(mbps * MBPS, rtt_ms / 1000.0).unwrap();
                let far = TcpPath::new(mbps * MBPS, (rtt_ms + extra) / 1000.0).unwrap();
                prop_assert!(t_http(page, &far, n).total_s >= t_http(page, &near, n).total_s - 1e-12);
            }

            #[test]
            fn idle_is_part_of_total(page in 0u64..20_000_000, mbps in 0.5f64..200.0, rtt_ms in 0.0f64..600.0, n in 1u32..10) {
                let p = TcpPath::new(mbps * MBPS, rtt_ms / 1000.0).unwrap();
                for c in [t_http(page, &p, n), t_http_rounds(page, &p, n)] {
                    prop_assert!(c.idle_s >= 0.0 && c.idle_s <= c.total_s);
                }
            }
        }
    }
}
