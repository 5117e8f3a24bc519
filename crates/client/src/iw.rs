//! The client half of seed 001's content-aware initial window, without I/O:
//! from the hint's page size, computation latency and α, and the RTT the
//! client measured on its handshake, the window to ask the server for.
//!
//! Seed 001 §2: "Upon receiving the DNS response, the client will perform a
//! handshake to the resolved web server and hence calculate the round trip
//! time (RTT) by inspecting the corresponding handshake messages. [...] an
//! optimal IW can be computed by our proposed algorithm that is executed at
//! the mobile phone side [...] and such a value will be embedded in the very
//! first HTTP message to be enforced by the remote web server."
//!
//! The algorithm is `mewa_model::iw::optimal_iw` (Algorithm 1, conventions
//! in docs/MODEL.md §3); this module only bounds its inputs, since the hint
//! comes from an unauthenticated channel: a hint without a computation
//! latency, or with an absurd value, leaves the default window, with the
//! reason.

use std::time::Duration;

use mewa_hint::wire::Hint;
use mewa_model::iw::{optimal_iw, IwInputs};
use mewa_model::DEFAULT_IW;
use serde::Serialize;

pub use mewa_model::iw::{GRANTED_HEADER, HEADER};

/// Longest computation latency taken from a hint (a page that computes for
/// a minute is not one whose transfer an initial window shortens).
pub const MAX_COMPUTATION_MS: u32 = 60_000;
/// Largest α taken from a hint: ΔQoE/ΔCost of a useful step is well below.
pub const MAX_ALPHA: f64 = 100.0;
/// Handshake RTTs outside (0, 5 s] are measurement errors.
pub const MAX_RTT: Duration = Duration::from_secs(5);

/// What Algorithm 1 needs from the hint.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct PageFacts {
    /// The page's size S, bytes.
    pub page_bytes: u64,
    /// Its computation latency, ms, when the edge knows it.
    pub computation_ms: Option<u32>,
    /// The edge's policy threshold α.
    pub alpha: f64,
}

impl PageFacts {
    /// The facts a hint carries.
    pub fn of_hint(hint: &Hint) -> PageFacts {
        PageFacts {
            page_bytes: hint.total_bytes,
            computation_ms: hint.computation_ms,
            alpha: hint.alpha(),
        }
    }
}

/// The window chosen for one connection, with what it was chosen from (the
/// client logs it).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct IwChoice {
    /// The window to ask for, segments.
    pub segments: u32,
    /// The hint's facts.
    pub facts: PageFacts,
    /// The handshake RTT, ms.
    pub rtt_ms: f64,
    /// Algorithm 1's predicted completion-time reduction (0 on fallback).
    pub predicted_reduction: f64,
    /// Why the default window was kept instead of Algorithm 1's, if it was.
    pub fallback: Option<String>,
}

impl IwChoice {
    /// Whether the choice is worth asking for: a window above the default.
    /// Asking for the default would only cost the server a switch.
    pub fn worth_asking(&self) -> bool {
        self.segments > DEFAULT_IW
    }
}

/// Seed 001's window for a connection with handshake RTT `rtt` to a page
/// described by `facts`; the default window (10) with a reason when the
/// facts cannot be trusted or say nothing.
pub fn choose(facts: PageFacts, rtt: Duration) -> IwChoice {
    let rtt_ms = rtt.as_secs_f64() * 1e3;
    let fallback = |why: String| IwChoice {
        segments: DEFAULT_IW,
        facts,
        rtt_ms,
        predicted_reduction: 0.0,
        fallback: Some(why),
    };
    let Some(comp) = facts.computation_ms else {
        return fallback("the hint has no computation latency".into());
    };
    if comp > MAX_COMPUTATION_MS {
        return fallback(format!(
            "computation latency {comp} ms is absurd (over {MAX_COMPUTATION_MS} ms)"
        ));
    }
    if facts.page_bytes == 0 || facts.page_bytes > crate::advice::MAX_PAGE_BYTES {
        return fallback(format!("page size {} B is absurd", facts.page_bytes));
    }
    if !(facts.alpha.is_finite() && (0.0..=MAX_ALPHA).contains(&facts.alpha)) {
        return fallback(format!("alpha {} is out of [0, {MAX_ALPHA}]", facts.alpha));
    }
    if rtt.is_zero() || rtt > MAX_RTT {
        return fallback(format!("handshake RTT {rtt_ms:.1} ms is not a measurement"));
    }
    let mut inp = IwInputs::paper(facts.page_bytes, rtt.as_secs_f64(), f64::from(comp) / 1e3);
    inp.alpha = facts.alpha;
    match optimal_iw(&inp) {
        Ok(c) => IwChoice {
            segments: c.segments().max(1),
            facts,
            rtt_ms,
            predicted_reduction: c.reduction(),
            fallback: None,
        },
        Err(e) => fallback(format!("Algorithm 1 refused the inputs: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mewa_model::iw::{computation_for_share, t_transfer};
    use proptest::prelude::*;

    fn facts(kb: u64, comp_ms: Option<u32>) -> PageFacts {
        PageFacts {
            page_bytes: kb * 1000,
            computation_ms: comp_ms,
            alpha: 1.0 / 3.0,
        }
    }

    #[test]
    fn equals_the_model_for_the_same_inputs() {
        // 400 KB at 100 ms RTT, 35 % computation share (seed 001 Fig. 4's
        // peak), the same numbers `mewa model iw` takes.
        let tp = t_transfer(400_000, 0.1, 10.0, 1500, 1.5);
        let tc = computation_for_share(0.35, tp).unwrap();
        let ms = (tc * 1e3).round() as u32;
        let c = choose(facts(400, Some(ms)), Duration::from_millis(100));
        let m = optimal_iw(&IwInputs::paper(400_000, 0.1, f64::from(ms) / 1e3)).unwrap();
        assert_eq!(c.segments, m.segments());
        assert!(c.segments > 10, "{c:?}");
        assert!(c.fallback.is_none());
        assert!(c.worth_asking());
    }

    #[test]
    fn missing_or_absurd_facts_keep_the_default_with_a_reason() {
        let rtt = Duration::from_millis(100);
        for (f, r) in [
            (facts(400, None), rtt),
            (facts(400, Some(MAX_COMPUTATION_MS + 1)), rtt),
            (facts(0, Some(300)), rtt),
            (facts(400, Some(300)), Duration::ZERO),
            (facts(400, Some(300)), Duration::from_secs(9)),
            (
                PageFacts {
                    alpha: f64::NAN,
                    ..facts(400, Some(300))
                },
                rtt,
            ),
        ] {
            let c = choose(f, r);
            assert_eq!(c.segments, DEFAULT_IW, "{f:?}");
            assert!(c.fallback.is_some(), "{f:?}");
            assert!(!c.worth_asking());
        }
    }

    proptest! {
        #[test]
        fn never_below_one_segment_nor_above_the_page(bytes in 1u64..50_000_000, comp in 0u32..70_000,
                                                       rtt_ms in 0u64..6000, alpha in 0.0f64..200.0) {
            let f = PageFacts { page_bytes: bytes, computation_ms: Some(comp), alpha };
            let c = choose(f, Duration::from_millis(rtt_ms));
            prop_assert!(c.segments >= 1);
            let whole = (bytes as f64 / 1500.0).ceil().max(10.0) as u32;
            prop_assert!(c.segments <= whole, "{c:?}");
        }
    }
}
