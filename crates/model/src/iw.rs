//! Content-aware initial congestion window (seed 001 §3).
//!
//! A page whose loading pauses for client-side computation loses throughput:
//! slow start stalls while the script runs. Seed 001 compensates by raising the
//! initial window IW so the transfer itself finishes sooner, bounded by a
//! policy α that weighs the QoE gain against the extra initial bandwidth.

use serde::Serialize;

/// The request header in which a client asks for its window, in whole
/// segments (seed 001: the value "will be embedded in the very first HTTP
/// message to be enforced by the remote web server"). Client and server
/// both name it from here, so they cannot drift apart.
pub const HEADER: &str = "mewa-iw";
/// The response header in which the server says what it granted (or why
/// not); docs/CLIENT.md.
pub const GRANTED_HEADER: &str = "mewa-iw-granted";

use crate::{
    ceil_tol, floor_tol, log_base, ModelError, DEFAULT_IW, DEFAULT_MSS, DELAYED_ACK_GROWTH,
};

/// How the stop test of Algorithm 1 compares gain with cost.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RatioMode {
    /// As printed: ΔQoE(IW_test) / ΔCost(IW_test), both measured from the
    /// default window (eq. 2 and the ΔCost definition).
    Cumulative,
    /// Per step: the QoE gained and the cost added by the last ×γ step alone,
    /// the way seed 000 Algorithm 1 weighs each added connection.
    Marginal,
}

/// Inputs of the IW algorithm.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct IwInputs {
    /// Content size S, bytes.
    pub page_bytes: u64,
    /// Client↔server RTT, seconds (the client measures it from the handshake).
    pub rtt_s: f64,
    /// Computation latency t_computation, seconds (from the edge hint).
    pub computation_s: f64,
    /// Policy threshold α (seed 001 uses 1/3).
    pub alpha: f64,
    /// Segment size s_mss, bytes.
    pub mss_bytes: u32,
    /// IW_default, segments.
    pub iw_default: u32,
    /// Growth factor γ (1.5 with delayed ACKs).
    pub gamma: f64,
    /// The time unit of ΔCost, seconds: ΔCost is counted in extra segments per
    /// this unit. 1 ms makes α = 1/3 meaningful (docs/MODEL.md).
    pub cost_unit_s: f64,
    /// How the stop test compares gain with cost.
    pub mode: RatioMode,
}

impl IwInputs {
    /// The paper's setting: IW_default 10, MSS 1500 B, γ = 1.5, α = 1/3,
    /// ΔCost in segments per millisecond, the printed (cumulative) stop test.
    pub fn paper(page_bytes: u64, rtt_s: f64, computation_s: f64) -> IwInputs {
        IwInputs {
            page_bytes,
            rtt_s,
            computation_s,
            alpha: 1.0 / 3.0,
            mss_bytes: DEFAULT_MSS,
            iw_default: DEFAULT_IW,
            gamma: DELAYED_ACK_GROWTH,
            cost_unit_s: 1e-3,
            mode: RatioMode::Cumulative,
        }
    }

    fn validate(&self) -> Result<(), ModelError> {
        if !(self.rtt_s.is_finite() && self.rtt_s > 0.0) {
            return Err(ModelError::Rtt(self.rtt_s));
        }
        if !(self.computation_s.is_finite() && self.computation_s >= 0.0) {
            return Err(ModelError::Time {
                what: "computation latency",
                value: self.computation_s,
            });
        }
        if !(self.alpha.is_finite() && self.alpha >= 0.0) {
            return Err(ModelError::Parameter {
                what: "alpha",
                value: self.alpha,
                expected: "a finite number >= 0",
            });
        }
        if !(self.gamma.is_finite() && self.gamma > 1.0) {
            return Err(ModelError::Parameter {
                what: "gamma",
                value: self.gamma,
                expected: "a finite number > 1",
            });
        }
        if !(self.cost_unit_s.is_finite() && self.cost_unit_s > 0.0) {
            return Err(ModelError::Parameter {
                what: "cost unit",
                value: self.cost_unit_s,
                expected: "a finite number of seconds > 0",
            });
        }
        if self.mss_bytes == 0 {
            return Err(ModelError::Mss);
        }
        if self.iw_default == 0 {
            return Err(ModelError::InitialWindow);
        }
        Ok(())
    }
}

/// Slow-start rounds to send `page_bytes` starting from `iw` segments, as in
/// seed 001 eq. 1: ⌈log_γ(S / (IW·s_mss))⌉, never negative.
fn rounds(page_bytes: u64, iw: f64, mss: u32, gamma: f64) -> f64 {
    let x = page_bytes as f64 / (iw * f64::from(mss));
    if x <= 1.0 {
        0.0
    } else {
        ceil_tol(log_base(x, gamma))
    }
}

/// Seed 001 eq. 1 (after Cardwell et al.):
/// `t_principle = RTT · ⌈log_γ(S / (IW·s_mss))⌉`: the transfer time of `S`
/// bytes in slow start with no computation pause.
pub fn t_transfer(page_bytes: u64, rtt_s: f64, iw: f64, mss: u32, gamma: f64) -> f64 {
    rtt_s * rounds(page_bytes, iw, mss, gamma)
}

/// The result of seed 001 Algorithm 1.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct IwChoice {
    /// IW_opt, segments (real-valued: IW_default·γ^i or IW_max).
    pub iw_opt: f64,
    /// IW_max, segments: the upper bound of the search.
    pub iw_max: f64,
    /// i: the number of ×γ steps accepted.
    pub steps: u32,
    /// t_principle with IW_default and no computation, seconds.
    pub t_principle_s: f64,
    /// t_default = t_principle + t_computation, seconds.
    pub t_default_s: f64,
    /// t_opt = transfer time with IW_opt + t_computation, seconds.
    pub t_opt_s: f64,
}

impl IwChoice {
    /// IW_opt rounded to whole segments.
    pub fn segments(&self) -> u32 {
        // IW_opt is at most S/s_mss for any u64 S; the cast saturates anyway.
        self.iw_opt.round() as u32
    }

    /// Predicted completion-time reduction (t_default − t_opt) / t_default.
    pub fn reduction(&self) -> f64 {
        if self.t_default_s > 0.0 {
            (self.t_default_s - self.t_opt_s) / self.t_default_s
        } else {
            0.0
        }
    }
}

/// Computation latency that makes up `share` of the computation + principle
/// time: seed 001 §4.1 plots IW against "the proportion of computation latency
/// which is obtained by a combination of estimated data transfer time (from Eq.
/// (1)) and the computation latency", i.e. share = t_c / (t_c + t_principle).
pub fn computation_for_share(share: f64, t_principle_s: f64) -> Result<f64, ModelError> {
    if !(share.is_finite() && (0.0..1.0).contains(&share)) {
        return Err(ModelError::Parameter {
            what: "computation share",
            value: share,
            expected: "0 <= share < 1",
        });
    }
    Ok(share * t_principle_s / (1.0 - share))
}

/// Seed 001 Algorithm 1: the throughput-compensating initial window.
///
/// ```text
/// if t_computation ≥ t_principle: IW_max = S/s_mss
/// else:                           IW_max = f(S, t_computation, RTT)
/// IW_test = IW_default, i = 0
/// while IW_test < IW_max:
///     IW_test = min(IW_test·γ, IW_max)
///     if ΔQoE/ΔCost < α: break
///     i++
/// IW_opt = min(IW_default·γ^i, IW_max)
/// ```
///
/// with ΔQoE = ln(t_default / t_opt) (eq. 2) and
/// ΔCost = (IW_opt − IW_default)·S_mss/RTT. Conventions (docs/MODEL.md):
///
/// - f(S, t_c, RTT) is the window that shortens the transfer to
///   t_principle − t_computation by eq. 1: with k = ⌊(t_principle − t_c)/RTT⌋
///   rounds left, IW = S / (s_mss·γ^k).
/// - IW_max is never below IW_default (when t_c < RTT no round can be saved and
///   the default stands).
/// - t_default = t_principle + t_c and t_opt = t_transfer(IW) + t_c: the
///   computation pause adds to the transfer (seed 001 Fig. 2b).
/// - ΔCost is counted in extra segments per `cost_unit_s` (1 ms), which is
///   S_mss/RTT up to the constant factor of the unit.
pub fn optimal_iw(inp: &IwInputs) -> Result<IwChoice, ModelError> {
    inp.validate()?;
    let iw_def = f64::from(inp.iw_default);
    let t_tx = |iw: f64| t_transfer(inp.page_bytes, inp.rtt_s, iw, inp.mss_bytes, inp.gamma);
    let t_p = t_tx(iw_def);
    let t_c = inp.computation_s;
    let whole_page = (inp.page_bytes as f64 / f64::from(inp.mss_bytes)).max(iw_def);
    let iw_max = if t_c >= t_p {
        whole_page
    } else {
        let k = floor_tol((t_p - t_c) / inp.rtt_s);
        (inp.page_bytes as f64 / (f64::from(inp.mss_bytes) * inp.gamma.powf(k)))
            .clamp(iw_def, whole_page)
    };
    let t = |iw: f64| t_tx(iw) + t_c;
    let t_default = t_p + t_c;
    let cost = |from: f64, to: f64| (to - from) / (inp.rtt_s / inp.cost_unit_s);

    let mut iw_test = iw_def;
    let mut steps = 0u32;
    while iw_test < iw_max {
        let prev = iw_test;
        iw_test = (iw_test * inp.gamma).min(iw_max);
        let (dq, dc) = match inp.mode {
            RatioMode::Cumulative => (ratio_ln(t_default, t(iw_test)), cost(iw_def, iw_test)),
            RatioMode::Marginal => (ratio_ln(t(prev), t(iw_test)), cost(prev, iw_test)),
        };
        if dc <= 0.0 || dq / dc < inp.alpha {
            break;
        }
        steps += 1;
    }
    let iw_opt = (iw_def * inp.gamma.powi(steps as i32)).min(iw_max);
    Ok(IwChoice {
        iw_opt,
        iw_max,
        steps,
        t_principle_s: t_p,
        t_default_s: t_default,
        t_opt_s: t(iw_opt),
    })
}

/// ln(a/b), 0 when either is not positive (no time, no gain).
fn ratio_ln(a: f64, b: f64) -> f64 {
    if a > 0.0 && b > 0.0 {
        (a / b).ln()
    } else {
        0.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::KB;
    use proptest::prelude::*;

    #[test]
    fn t_principle_400kb_100ms() {
        // S/(IW·mss) = 400 000/15 000 = 26.7; log1.5 = 8.09 → 9 rounds.
        let t = t_transfer(400 * KB, 0.1, 10.0, 1500, 1.5);
        assert!((t - 0.9).abs() < 1e-12);
        // Exactly γ^k windows: 10·1.5^3 segments of 1500 B = 50 625 B → 0 rounds
        // more than k, i.e. ⌈log1.5(1.5^3)⌉ = 3, not 4 from float noise.
        let s = (15_000.0 * 1.5f64.powi(3)).round() as u64;
        assert_eq!(t_transfer(s, 1.0, 10.0, 1500, 1.5), 3.0);
    }

    #[test]
    fn no_computation_keeps_default() {
        let c = optimal_iw(&IwInputs::paper(1000 * KB, 0.1, 0.0)).unwrap();
        assert_eq!(c.iw_opt, 10.0);
        assert_eq!(c.steps, 0);
    }

    #[test]
    fn long_computation_returns_to_default() {
        // Seed 001 §4.1: at 85% computation share the IW is back to 10.
        let tp = t_transfer(400 * KB, 0.1, 10.0, 1500, 1.5);
        let tc = computation_for_share(0.87, tp).unwrap();
        let c = optimal_iw(&IwInputs::paper(400 * KB, 0.1, tc)).unwrap();
        assert_eq!(c.segments(), 10);
    }

    #[test]
    fn mid_computation_raises_iw() {
        let tp = t_transfer(400 * KB, 0.1, 10.0, 1500, 1.5);
        let tc = computation_for_share(0.35, tp).unwrap();
        let c = optimal_iw(&IwInputs::paper(400 * KB, 0.1, tc)).unwrap();
        assert!(c.iw_opt > 10.0 && c.t_opt_s < c.t_default_s, "{c:?}");
    }

    #[test]
    fn rejects_bad_inputs() {
        let mut i = IwInputs::paper(1, 0.1, 0.0);
        i.rtt_s = 0.0;
        assert!(optimal_iw(&i).is_err());
        let mut i = IwInputs::paper(1, 0.1, -1.0);
        assert!(optimal_iw(&i).is_err());
        i.computation_s = 0.0;
        i.gamma = 1.0;
        assert!(optimal_iw(&i).is_err());
        assert!(computation_for_share(1.0, 1.0).is_err());
    }

    proptest! {
        #[test]
        fn iw_opt_within_bounds(page in 1u64..20_000_000, rtt_ms in 1.0f64..500.0, tc in 0.0f64..20.0,
                                alpha in 0.0f64..5.0, marginal in any::<bool>()) {
            let mut inp = IwInputs::paper(page, rtt_ms / 1000.0, tc);
            inp.alpha = alpha;
            inp.mode = if marginal { RatioMode::Marginal } else { RatioMode::Cumulative };
            let c = optimal_iw(&inp).unwrap();
            prop_assert!(c.iw_opt >= f64::from(inp.iw_default) - 1e-9);
            prop_assert!(c.iw_opt <= c.iw_max + 1e-9);
            prop_assert!(c.t_opt_s <= c.t_default_s + 1e-12);
        }

        #[test]
        fn transfer_time_falls_with_bigger_iw(page in 1u64..20_000_000, iw in 1.0f64..500.0, k in 1.0f64..10.0) {
            prop_assert!(t_transfer(page, 0.1, iw * k, 1500, 1.5) <= t_transfer(page, 0.1, iw, 1500, 1.5));
        }

        #[test]
        fn transfer_time_rises_with_rtt(page in 1u64..20_000_000, rtt in 0.001f64..1.0, extra in 0.0f64..1.0) {
            prop_assert!(t_transfer(page, rtt + extra, 10.0, 1500, 1.5) >= t_transfer(page, rtt, 10.0, 1500, 1.5));
        }
    }
}
