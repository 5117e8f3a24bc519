use std::time::{Duration, Instant};

use mewa_model::fld::Schedule;
use proptest::prelude::*;

use super::*;

/// One round trip in virtual time: the sender sends a whole window in
/// segments of the controller's MSS, every segment is acknowledged at the
/// end of the round trip, one acknowledgement each. Returns the bytes sent.
fn round_trip(c: &mut Window, now: Instant) -> u64 {
    let w = c.window();
    let mss = c.params().mss;
    let mut left = w;
    while left > 0 {
        let seg = left.min(mss);
        c.on_ack(
            now,
            Ack {
                bytes: seg,
                cwnd_limited: true,
            },
        );
        left -= seg;
    }
    w
}

/// Bytes delivered by the end of each of the first `k` round trips.
fn cumulative(mut c: Window, k: u32) -> Vec<u64> {
    let t0 = Instant::now();
    let mut sum = 0;
    (1..=k)
        .map(|i| {
            sum += round_trip(&mut c, t0 + Duration::from_millis(100) * i);
            sum
        })
        .collect()
}

/// Round trips to deliver `bytes`.
fn rtts_for(mut c: Window, bytes: u64) -> u32 {
    let t0 = Instant::now();
    let (mut sum, mut k) = (0, 0);
    while sum < bytes {
        k += 1;
        sum += round_trip(&mut c, t0 + Duration::from_millis(100) * k);
    }
    k
}

#[test]
fn slow_start_follows_the_model_schedule() {
    // "after the 1st RTT, both transfer 15 kB, and by the 2nd RTT, FLD_TCP
    // transfers 60 kB while RENO transfers just 45 kB"
    let fld = cumulative(Window::fld(SEED_MSS), 8);
    let reno = cumulative(Window::reno(SEED_MSS), 8);
    assert_eq!((fld[0], fld[1]), (15_000, 60_000));
    assert_eq!((reno[0], reno[1]), (15_000, 45_000));
    for k in 1..=8u32 {
        let i = k as usize - 1;
        // The model's schedule triples for ever; the sender stops tripling
        // once 2 MB are delivered, which happens during the 6th round trip.
        if k <= 6 {
            assert_eq!(fld[i], Schedule::fld().cumulative_bytes(k), "FLD, RTT {k}");
        }
        assert_eq!(
            reno[i],
            Schedule::reno().cumulative_bytes(k),
            "Reno, RTT {k}"
        );
    }
}

#[test]
fn past_two_megabytes_slow_start_doubles_as_renos() {
    // "after the TCP flow exceeds the threshold value, FLD_TCP functions in
    // traditional RENO behavior": 1.815 MB are delivered after five round
    // trips, so the sixth (3.645 MB) crosses 2 MB early on and grows the
    // window by one segment per acknowledged segment from then on.
    let fld = cumulative(Window::fld(SEED_MSS), 7);
    assert_eq!(fld[4], 1_815_000);
    let sixth = fld[5] - fld[4];
    assert_eq!(sixth, 3_645_000);
    let seventh = fld[6] - fld[5];
    // Tripling until 2 MB, 185 kB into the round trip: the 123 segments
    // (184.5 kB) acknowledged while fewer than 2 MB are delivered add two
    // segments each; the 124th reaches 2 MB and it and the rest add one.
    let tripled = 123 * SEED_MSS;
    assert!(fld[4] + tripled < FLD_THRESHOLD_BYTES);
    assert!(fld[4] + tripled + SEED_MSS >= FLD_THRESHOLD_BYTES);
    assert_eq!(seventh, sixth + 2 * tripled + (sixth - tripled));
    assert!(seventh < 3 * sixth);
}

#[test]
fn a_500_kb_flow_takes_four_round_trips_against_renos_six() {
    // "If we consider a flow of size 500 kB, we see that FLD_TCP would
    // finish the flow in 4 RTT while RENO's Slow-start would require 6 RTT."
    assert_eq!(rtts_for(Window::fld(SEED_MSS), 500_000), 4);
    assert_eq!(rtts_for(Window::reno(SEED_MSS), 500_000), 6);
    assert_eq!(Schedule::fld().rtts_to_finish(500_000), Some(4));
    assert_eq!(Schedule::reno().rtts_to_finish(500_000), Some(6));
}

#[test]
fn a_short_flow_loses_only_the_lost_segments() {
    let t0 = Instant::now();
    let mut c = Window::fld(SEED_MSS);
    round_trip(&mut c, t0);
    round_trip(&mut c, t0);
    assert_eq!(c.window(), 90 * SEED_MSS);
    assert!(c.relentless() && c.phase() == Phase::SlowStart);
    // Three segments lost: three segments off, slow start over.
    c.on_loss(t0, t0, 3 * SEED_MSS);
    assert_eq!(c.window(), 87 * SEED_MSS);
    assert_eq!(c.phase(), Phase::CongestionAvoidance);
    // Every further loss counts, even of the same window.
    c.on_loss(t0, t0, SEED_MSS);
    assert_eq!(c.window(), 86 * SEED_MSS);
    // Congestion avoidance: one segment per window acknowledged.
    let w = c.window();
    round_trip(&mut c, t0);
    assert_eq!(c.window(), w + SEED_MSS);
    // Never below two segments.
    c.on_loss(t0, t0, u64::MAX);
    assert_eq!(c.window(), 2 * SEED_MSS);
}

#[test]
fn past_two_megabytes_a_loss_halves_the_window_once_a_window() {
    let t0 = Instant::now();
    let mut c = Window::fld(SEED_MSS);
    let mut delivered = 0;
    let mut rtt = 0;
    while delivered < FLD_THRESHOLD_BYTES {
        rtt += 1;
        delivered += round_trip(&mut c, t0 + Duration::from_millis(100) * rtt);
    }
    assert_eq!(c.delivered(), delivered);
    assert!(!c.relentless());
    let w = c.window();
    let now = t0 + Duration::from_secs(10);
    c.on_loss(now, now - Duration::from_millis(50), 3 * SEED_MSS);
    assert_eq!(c.window(), w / 2);
    assert_eq!(c.ssthresh(), w / 2);
    // A loss of data sent before the recovery began: the same event.
    c.on_loss(now + Duration::from_millis(1), now, SEED_MSS);
    assert_eq!(c.window(), w / 2);
    // Data sent after it: a new one.
    let later = now + Duration::from_millis(200);
    c.on_loss(later, now + Duration::from_millis(100), SEED_MSS);
    assert_eq!(c.window(), w / 4);
}

#[test]
fn reno_halves_from_the_first_byte() {
    let t0 = Instant::now();
    let mut c = Window::reno(SEED_MSS);
    round_trip(&mut c, t0);
    assert!(!c.relentless());
    c.on_loss(t0, t0, SEED_MSS);
    assert_eq!(c.window(), 10 * SEED_MSS);
}

#[test]
fn a_timeout_restarts_from_one_segment() {
    let t0 = Instant::now();
    let mut c = Window::fld(SEED_MSS);
    round_trip(&mut c, t0);
    let w = c.window();
    c.on_rto(t0);
    assert_eq!(c.window(), SEED_MSS);
    assert_eq!(c.ssthresh(), w / 2);
    // Slow start again, stopping at the threshold.
    for _ in 0..8 {
        round_trip(&mut c, t0);
    }
    assert!(c.window() >= w / 2);
    assert_eq!(c.phase(), Phase::CongestionAvoidance);
}

#[test]
fn an_application_limited_flow_does_not_grow_its_window() {
    let t0 = Instant::now();
    let mut c = Window::fld(SEED_MSS);
    c.on_ack(
        t0,
        Ack {
            bytes: 5 * SEED_MSS,
            cwnd_limited: false,
        },
    );
    assert_eq!(c.window(), 10 * SEED_MSS);
    assert_eq!(c.delivered(), 5 * SEED_MSS);
}

proptest! {
    /// Whatever the events, the window stays at least one segment, a loss
    /// never leaves it below two, and a Relentless loss takes no more than
    /// the lost bytes (down to that floor).
    #[test]
    fn the_window_stays_sane(events in proptest::collection::vec((0u8..4, 1u64..200_000), 1..200)) {
        let t0 = Instant::now();
        let mut c = Window::fld(SEED_MSS);
        for (i, (kind, bytes)) in events.into_iter().enumerate() {
            let now = t0 + Duration::from_millis(10 * i as u64);
            let before = c.window();
            match kind {
                0 | 1 => c.on_ack(now, Ack { bytes, cwnd_limited: kind == 0 }),
                2 => {
                    let relentless = c.relentless();
                    c.on_loss(now, now, bytes);
                    prop_assert!(c.window() >= 2 * SEED_MSS);
                    if relentless {
                        prop_assert!(c.window() >= before.saturating_sub(bytes).max(2 * SEED_MSS));
                    }
                }
                _ => c.on_rto(now),
            }
            prop_assert!(c.window() >= SEED_MSS);
        }
    }
}
