//! The link core in virtual time.

use super::*;
use proptest::prelude::*;

/// A packet with an id, to check order and duplication.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Pkt {
    id: u64,
    len: usize,
}

impl Payload for Pkt {
    fn wire_len(&self) -> usize {
        self.len
    }
}

fn ms(v: u64) -> Duration {
    Duration::from_millis(v)
}

fn us(v: u64) -> Duration {
    Duration::from_micros(v)
}

/// Drives a link: offers `arrivals` (time, dir, packet) and collects what
/// comes out, stepping from event to event, until nothing is left.
fn run(link: &mut Link<Pkt>, mut arrivals: Vec<(Duration, Dir, Pkt)>) -> Vec<(Duration, Dir, Pkt)> {
    arrivals.sort_by_key(|a| a.0);
    let mut arrivals: VecDeque<_> = arrivals.into();
    let mut out = Vec::new();
    let mut now = Duration::ZERO;
    loop {
        while arrivals.front().is_some_and(|a| a.0 <= now) {
            let (t, d, p) = arrivals.pop_front().unwrap();
            link.handle_packet(d, p, t);
        }
        for d in Dir::BOTH {
            while let Some(p) = link.poll_transmit(d, now) {
                out.push((now, d, p));
            }
        }
        let next = match (arrivals.front().map(|a| a.0), link.poll_timeout()) {
            (Some(a), Some(b)) => a.min(b),
            (a, b) => match a.or(b) {
                Some(t) => t,
                None => return out,
            },
        };
        assert!(next >= now, "time went back: {next:?} < {now:?}");
        now = next;
    }
}

fn pkts(n: u64, len: usize, at: Duration, dir: Dir) -> Vec<(Duration, Dir, Pkt)> {
    (0..n).map(|id| (at, dir, Pkt { id, len })).collect()
}

fn cfg(down: DirectionConfig) -> LinkConfig {
    LinkConfig {
        down,
        ..LinkConfig::default()
    }
}

#[test]
fn fixed_delay_exact_to_the_microsecond() {
    let mut l = Link::new(cfg(DirectionConfig {
        delay: DelaySpec::Fixed(ms(20)),
        ..Default::default()
    }));
    l.handle_packet(Dir::Down, Pkt { id: 1, len: 100 }, us(1_000_123));
    assert_eq!(l.poll_timeout(), Some(us(1_020_123)));
    assert_eq!(l.poll_transmit(Dir::Down, us(1_020_122)), None);
    assert_eq!(
        l.poll_transmit(Dir::Down, us(1_020_123)),
        Some(Pkt { id: 1, len: 100 })
    );
    assert_eq!(l.poll_timeout(), None);
    // The other direction is untouched.
    assert_eq!(l.stats(Dir::Up).arrivals, 0);
}

#[test]
fn constant_rate_exact_over_a_long_run() {
    // 10 000 × 1500 B at 20 Mbit/s: 600 µs each, the last out at 6 s sharp.
    let rate = RateSpec::Constant { bps: 20_000_000 };
    let mut l = Link::new(cfg(DirectionConfig {
        rate,
        ..Default::default()
    }));
    let out = run(&mut l, pkts(10_000, 1500, Duration::ZERO, Dir::Down));
    assert_eq!(out.len(), 10_000);
    assert_eq!(out[0].0, us(600));
    assert_eq!(out[4_999].0, ms(3_000));
    assert_eq!(out[9_999].0, ms(6_000));
    let s = l.stats(Dir::Down);
    assert_eq!(s.delivered_bytes, 15_000_000);
    assert_eq!(s.queue_delay_max, us(600 * 9_999));
}

#[test]
fn trace_opportunities_one_by_one() {
    // Opportunities at 0, 0, 5, 10 | 10, 10, 15, 20 | …
    let t = trace::DeliveryTrace::parse("0\n0\n5\n10\n").unwrap();
    let rate = RateSpec::Trace(t);
    let mut l = Link::new(LinkConfig {
        log_events: true,
        ..cfg(DirectionConfig {
            rate,
            ..Default::default()
        })
    });
    let out = run(&mut l, pkts(5, 1500, Duration::ZERO, Dir::Down));
    let times: Vec<u64> = out.iter().map(|o| o.0.as_millis() as u64).collect();
    // The two opportunities at 0 ms pass before the packets arrive (mahimahi).
    assert_eq!(times, [5, 10, 10, 10, 15]);
    assert_eq!(l.stats(Dir::Down).unused_opportunities, 2);
    let unused: Vec<_> = std::iter::from_fn(|| l.poll_event())
        .filter(|e| e.kind == EventKind::Unused)
        .collect();
    assert_eq!(unused.len(), 2);
}

#[test]
fn rewound_traces_replay_the_same_stretch() {
    // Opportunities at 1, 2, 3, 50, 100 ms, repeating every 100 ms.
    let rate = RateSpec::Trace(trace::DeliveryTrace::parse("1\n2\n3\n50\n100\n").unwrap());
    let mut l = Link::new(cfg(DirectionConfig {
        rate,
        ..Default::default()
    }));
    let mut burst = |at: u64| -> Vec<u64> {
        // The trace's moment 3 is now; the opportunity at it passes before
        // the packets arrive (as at time 0 in mahimahi), then 50, 100, and
        // the next cycle's 1.
        l.rewind_traces(3, ms(at));
        run(&mut l, pkts(3, 1500, ms(at), Dir::Down))
            .iter()
            .map(|o| o.0.as_millis() as u64 - at)
            .collect()
    };
    assert_eq!(burst(200), [47, 97, 98]);
    // Later, at a time out of step with the period: the same stretch.
    assert_eq!(burst(1037), [47, 97, 98]);
    assert_eq!(burst(2222), [47, 97, 98]);
}

#[test]
fn an_armed_rewind_starts_the_stretch_at_the_first_packet() {
    // Opportunities at 1, 2, 3, 50, 100 ms, repeating every 100 ms.
    let rate = RateSpec::Trace(trace::DeliveryTrace::parse("1\n2\n3\n50\n100\n").unwrap());
    let mut l = Link::new(cfg(DirectionConfig {
        rate,
        ..Default::default()
    }));
    // Armed at `armed`, the first packet `late` ms after: the stretch
    // starts at the packet, whatever the delay.
    let mut burst = |armed: u64, late: u64| -> Vec<u64> {
        l.rewind_traces_at_next_packet(3);
        assert_eq!(l.poll_transmit(Dir::Down, ms(armed)), None);
        let at = armed + late;
        run(&mut l, pkts(3, 1500, ms(at), Dir::Down))
            .iter()
            .map(|o| o.0.as_millis() as u64 - at)
            .collect()
    };
    // The first packet is at the trace's moment 3 and takes its
    // opportunity, then 50 and 100.
    assert_eq!(burst(200, 0), [0, 47, 97]);
    assert_eq!(burst(1000, 37), [0, 47, 97]);
    assert_eq!(burst(2000, 411), [0, 47, 97]);
    // Disarmed after use: a packet 120 ms later (the trace's moment 123)
    // waits for the next cycle's 50, not for a fresh stretch's.
    let out = run(&mut l, pkts(1, 1500, ms(2411 + 120), Dir::Down));
    assert_eq!(out[0].0.as_millis() as u64 - 2531, 27);
}

#[test]
fn trace_packets_straddle_opportunities() {
    // 1000-byte packets, 1500-byte opportunities every ms (at 1, 2, 3 ms).
    let rate = RateSpec::Trace(trace::DeliveryTrace::parse("1\n").unwrap());
    let mut l = Link::new(cfg(DirectionConfig {
        rate,
        ..Default::default()
    }));
    let out = run(&mut l, pkts(3, 1000, us(500), Dir::Down));
    let times: Vec<u64> = out.iter().map(|o| o.0.as_millis() as u64).collect();
    assert_eq!(times, [1, 2, 2]);
}

#[test]
fn real_lte_trace_rate() {
    let Some(path) = mewa_testkit::shared_data_or_skip("traces/TMobile-LTE-short.down") else {
        return;
    };
    let text = std::fs::read_to_string(&path).unwrap();
    let t = trace::DeliveryTrace::parse(&text).unwrap();
    // The packets arrive at 0 ms, just after that millisecond's opportunities
    // (mahimahi semantics), so the usable capacity starts at 1 ms.
    let cap = t.capacity_bytes(ms(1), Duration::from_secs(30));
    let rate = RateSpec::Trace(t);
    let mut l = Link::new(cfg(DirectionConfig {
        rate,
        ..Default::default()
    }));
    // A saturating sender: more packets than 30 s can carry, all at t = 0.
    let n = cap / 1500 + 10_000;
    let out = run(&mut l, pkts(n, 1500, Duration::ZERO, Dir::Down));
    let in_30s = out.iter().filter(|o| o.0 < Duration::from_secs(30)).count() as u64 * 1500;
    // The emulator delivers exactly what the trace allows.
    assert_eq!(in_30s, cap);
}

#[test]
fn queue_limits_drop() {
    let rate = RateSpec::Constant { bps: 1_000_000 };
    let queue = QueueSpec::DropTail(queue::Limit {
        packets: Some(2),
        bytes: None,
    });
    let mut l = Link::new(LinkConfig {
        log_events: true,
        ..cfg(DirectionConfig {
            rate,
            queue,
            ..Default::default()
        })
    });
    let out = run(&mut l, pkts(5, 1000, Duration::ZERO, Dir::Down));
    // One in service, two queued, two dropped.
    assert_eq!(out.iter().map(|o| o.2.id).collect::<Vec<_>>(), [0, 1, 2]);
    assert_eq!(l.stats(Dir::Down).drops_queue, 2);
    assert_eq!(l.stats(Dir::Down).drop_bytes, 2000);
    let drops = std::iter::from_fn(|| l.poll_event())
        .filter(|e| e.kind == EventKind::DropQueue)
        .count();
    assert_eq!(drops, 2);
}

#[test]
fn seeded_loss() {
    let mk = |seed| {
        let mut l = Link::new(LinkConfig {
            seed,
            ..cfg(DirectionConfig {
                loss: 0.1,
                ..Default::default()
            })
        });
        let out = run(&mut l, pkts(100_000, 100, Duration::ZERO, Dir::Down));
        (
            out.iter().map(|o| o.2.id).collect::<Vec<_>>(),
            l.stats(Dir::Down).drops_loss,
        )
    };
    let (a, lost) = mk(42);
    assert!((9_500..10_500).contains(&lost), "{lost}");
    assert_eq!(a.len() as u64 + lost, 100_000);
    assert_eq!(mk(42).0, a, "same seed, same losses");
    assert_ne!(mk(43).0, a);
}

#[test]
fn delay_trace_keeps_order() {
    let d = trace::DelayTrace::parse("0 50\n10 5\n").unwrap();
    let mut l = Link::new(cfg(DirectionConfig {
        delay: DelaySpec::Trace(d),
        ..Default::default()
    }));
    let mut arr = vec![(ms(9), Dir::Down, Pkt { id: 0, len: 10 })];
    arr.push((ms(11), Dir::Down, Pkt { id: 1, len: 10 }));
    let out = run(&mut l, arr);
    // Packet 1 would exit at 16 ms but may not overtake packet 0 (59 ms).
    assert_eq!(
        out.iter()
            .map(|o| (o.2.id, o.0.as_millis()))
            .collect::<Vec<_>>(),
        [(0, 59), (1, 59)]
    );
}

#[test]
fn radio_promotion_paid_once_after_idle() {
    let radio = radio::RadioConfig::preset("lte").unwrap();
    let fixed = DirectionConfig {
        delay: DelaySpec::Fixed(ms(20)),
        ..Default::default()
    };
    let mut l = Link::new(LinkConfig {
        radio,
        up: fixed.clone(),
        down: fixed,
        ..LinkConfig::default()
    });
    // A request at 1 s (radio idle: 400 ms promotion), its reply at 1.5 s,
    // then 15 s of quiet, a request, its reply, and one more right after.
    let arr = vec![
        (ms(1_000), Dir::Up, Pkt { id: 0, len: 100 }),
        (ms(1_500), Dir::Down, Pkt { id: 1, len: 100 }),
        (ms(16_500), Dir::Up, Pkt { id: 2, len: 100 }),
        (ms(16_950), Dir::Down, Pkt { id: 3, len: 100 }),
        (ms(16_980), Dir::Up, Pkt { id: 4, len: 100 }),
    ];
    let out = run(&mut l, arr);
    let at: Vec<u128> = out.iter().map(|o| o.0.as_millis()).collect();
    assert_eq!(at, [1_420, 1_520, 16_920, 16_970, 17_000]);
    assert_eq!(l.radio_promotions(), 2);
}

#[test]
fn umts_fach_is_slow() {
    let radio = radio::RadioConfig::preset("3g").unwrap();
    let mut l = Link::new(LinkConfig {
        radio,
        ..LinkConfig::default()
    });
    // Wake to DCH at 0 (+2 s), quiet 6 s → FACH; a 200-byte packet then goes at
    // the 32 kbit/s FACH rate: 50 ms.
    let out = run(
        &mut l,
        vec![
            (ms(0), Dir::Up, Pkt { id: 0, len: 100 }),
            (ms(8_000), Dir::Up, Pkt { id: 1, len: 200 }),
        ],
    );
    assert_eq!(out[0].0, ms(2_000));
    assert_eq!(out[1].0, ms(8_050));
}

#[test]
fn parse_specs() {
    assert_eq!(parse_duration("20ms").unwrap(), ms(20));
    assert_eq!(parse_duration("1.5s").unwrap(), ms(1500));
    assert_eq!(parse_duration("250us").unwrap(), us(250));
    assert!(parse_duration("20").is_err());
    assert!(parse_duration("-1ms").is_err());
    assert_eq!(parse_whole_secs("600s").unwrap(), 600);
    assert_eq!(parse_whole_secs("2000ms").unwrap(), 2);
    assert!(parse_whole_secs("1.5s")
        .unwrap_err()
        .to_string()
        .contains("whole seconds"));
    assert!(parse_whole_secs("60")
        .unwrap_err()
        .to_string()
        .contains("2s"));
    assert_eq!(parse_rate("20mbit").unwrap(), 20_000_000);
    assert_eq!(parse_rate("1.5Mbps").unwrap(), 1_500_000);
    assert_eq!(parse_rate("64000bit").unwrap(), 64_000);
    assert_eq!(parse_rate("4096kbit").unwrap(), 4_096_000);
    assert!(parse_rate("fast").is_err());
    assert!(parse_rate("0").is_err());
    // Every quantity carries its unit; a bare number is refused with a
    // message that shows the accepted form.
    let e = parse_rate("512").unwrap_err();
    assert!(e.to_string().contains("4096kbit"), "{e}");
    let e = parse_duration("150").unwrap_err();
    assert!(e.to_string().contains("150ms"), "{e}");
    assert!(parse_duration("0").is_err());
    assert_eq!(parse_duration("0ms").unwrap(), Duration::ZERO);
    assert_eq!(parse_size("500kB").unwrap(), 500_000);
    assert_eq!(parse_size("2MB").unwrap(), 2_000_000);
    assert_eq!(parse_size("64KiB").unwrap(), 65_536);
    assert_eq!(parse_size("1500B").unwrap(), 1500);
    let e = parse_size("500000").unwrap_err();
    assert!(e.to_string().contains("500kB"), "{e}");
    assert!(parse_size("5kb").is_err());
    let q: QueueSpec = "droptail:packets=100,bytes=150kB".parse().unwrap();
    assert_eq!(
        q,
        QueueSpec::DropTail(queue::Limit {
            packets: Some(100),
            bytes: Some(150_000)
        })
    );
    let q: QueueSpec = "codel:target=10ms".parse().unwrap();
    assert!(matches!(q, QueueSpec::CoDel { target, .. } if target == ms(10)));
    assert_eq!(
        "infinite".parse::<QueueSpec>().unwrap(),
        QueueSpec::default()
    );
    let e = "drophead:bytes=150000".parse::<QueueSpec>().unwrap_err();
    assert!(e.to_string().contains("bytes=150kB"), "{e}");
    assert!("droptail:target=5ms".parse::<QueueSpec>().is_err());
    assert!("fifo".parse::<QueueSpec>().is_err());
}

fn arb_direction() -> impl Strategy<Value = DirectionConfig> {
    let delay = prop_oneof![
        (0u64..50_000).prop_map(|u| DelaySpec::Fixed(us(u))),
        proptest::collection::vec((0u64..100, 0u64..80), 1..5).prop_map(|mut v| {
            v.sort();
            let text: String = v.iter().map(|(t, d)| format!("{t} {d}\n")).collect();
            DelaySpec::Trace(trace::DelayTrace::parse(&text).unwrap())
        }),
    ];
    let rate = prop_oneof![
        Just(RateSpec::Unlimited),
        (100_000u64..100_000_000).prop_map(|bps| RateSpec::Constant { bps }),
        proptest::collection::vec(0u64..30, 1..20).prop_map(|mut v| {
            v.sort();
            v.push(30);
            let text: String = v.iter().map(|t| format!("{t}\n")).collect();
            RateSpec::Trace(trace::DeliveryTrace::parse(&text).unwrap())
        }),
    ];
    let limit = (
        proptest::option::of(1usize..50),
        proptest::option::of(1500usize..60_000),
    )
        .prop_map(|(packets, bytes)| queue::Limit { packets, bytes });
    let queue = prop_oneof![
        limit.clone().prop_map(QueueSpec::DropTail),
        limit.clone().prop_map(QueueSpec::DropHead),
        limit.prop_map(|limit| QueueSpec::CoDel {
            target: ms(5),
            interval: ms(100),
            limit
        }),
    ];
    (delay, rate, queue).prop_map(|(delay, rate, queue)| DirectionConfig {
        delay,
        rate,
        queue,
        loss: 0.0,
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn fifo_no_duplicates_bytes_conserved(
        up in arb_direction(),
        down in arb_direction(),
        radio in prop_oneof![Just("off"), Just("lte"), Just("3g")],
        gaps in proptest::collection::vec((0u64..30_000, 40usize..1500, any::<bool>()), 1..300),
    ) {
        let radio = radio::RadioConfig::preset(radio).unwrap();
        let mut l: Link<Pkt> = Link::new(LinkConfig { up, down, radio, ..LinkConfig::default() });
        let mut t = Duration::ZERO;
        let mut arrivals = Vec::new();
        for (i, (gap, len, upward)) in gaps.iter().enumerate() {
            t += us(*gap);
            arrivals.push((t, if *upward { Dir::Up } else { Dir::Down }, Pkt { id: i as u64, len: *len }));
        }
        let sent_in: u64 = arrivals.iter().map(|a| a.2.len as u64).sum();
        let out = run(&mut l, arrivals);
        for d in Dir::BOTH {
            let ids: Vec<u64> = out.iter().filter(|o| o.1 == d).map(|o| o.2.id).collect();
            prop_assert!(ids.windows(2).all(|w| w[0] < w[1]), "{d:?} out of order or duplicated: {ids:?}");
            let s = l.stats(d);
            // Everything that came in left or was dropped (run drains the link).
            prop_assert_eq!(s.arrivals, s.delivered + s.drops_queue + s.drops_loss);
        }
        let bytes_out: u64 = out.iter().map(|o| o.2.len as u64).sum();
        prop_assert!(bytes_out <= sent_in);
        // Outputs never leave before they arrived.
        prop_assert!(out.iter().all(|o| o.0 >= us(0)));
    }
}
