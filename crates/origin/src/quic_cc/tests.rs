//! The quinn controllers in virtual time: a fake clock (`Instant::now()`
//! plus offsets) and the calls quinn-proto makes, in the order it makes
//! them, on the `dyn Controller` a factory built.

#![allow(clippy::unwrap_used)]

use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use mewa_cc::{Phase, FLD_THRESHOLD_BYTES};
use proptest::prelude::*;

use super::*;

/// quinn's initial datagram size, what it passes to `build()`.
const MTU: u16 = 1200;
const SEG: u64 = MTU as u64;
const RTT: Duration = Duration::from_millis(50);

/// A controller as quinn gets it: built by the factory through its trait.
fn build(config: CoreConfig, t0: Instant) -> Box<dyn Controller> {
    Arc::new(config).build(t0, MTU)
}

/// The [`Core`] behind a controller (through `clone_box` and `into_any`,
/// leaving the controller as it was).
fn core_of(c: &dyn Controller) -> Core {
    *c.clone_box().into_any().downcast::<Core>().unwrap()
}

/// One round trip: every byte of the window is sent at `sent` in full
/// datagrams and acknowledged at `sent + RTT`, one `on_ack` per datagram
/// as quinn reports them, then `on_end_acks`. Returns the bytes acked.
fn round(c: &mut dyn Controller, sent: Instant, app_limited: bool) -> u64 {
    let now = sent + RTT;
    let window = c.window();
    let mut left = window;
    while left > 0 {
        let seg = left.min(SEG);
        c.on_ack(now, sent, seg, app_limited, &rtt());
        left -= seg;
    }
    c.on_end_acks(now, 0, app_limited, None);
    window
}

/// `round`s until at least `bytes` are acknowledged; returns the time of
/// the last acknowledgement.
fn deliver(c: &mut dyn Controller, t0: Instant, bytes: u64) -> Instant {
    let (mut sum, mut t) = (0, t0);
    while sum < bytes {
        sum += round(c, t, false);
        t += RTT;
    }
    t
}

#[test]
fn the_window_starts_at_ten_segments_of_the_build_mtu() {
    let t0 = Instant::now();
    for config in [CoreConfig::FLD, CoreConfig::RENO] {
        let c = build(config, t0);
        assert_eq!(c.window(), 10 * SEG, "{config:?}");
        assert_eq!(c.initial_window(), 10 * SEG, "{config:?}");
        assert_eq!(c.metrics().congestion_window, 10 * SEG);
        assert_eq!(c.metrics().ssthresh, Some(u64::MAX));
        let big = Arc::new(config).build(t0, 1452);
        assert_eq!(big.window(), 14_520, "{config:?}");
    }
}

#[test]
fn one_cwnd_limited_round_triples_fld_and_doubles_reno() {
    let t0 = Instant::now();
    let mut fld = build(CoreConfig::FLD, t0);
    let mut reno = build(CoreConfig::RENO, t0);
    // "While traditional TCP doubles its congestion window every round
    // trip in the Slow-start phase, FLD_TCP triples its congestion window."
    for (k, t) in [t0, t0 + RTT].into_iter().enumerate() {
        let (f, r) = (fld.window(), reno.window());
        round(fld.as_mut(), t, false);
        round(reno.as_mut(), t, false);
        assert_eq!(fld.window(), 3 * f, "FLD, round {k}");
        assert_eq!(reno.window(), 2 * r, "Reno, round {k}");
    }
    assert_eq!((fld.window(), reno.window()), (108_000, 48_000));
}

#[test]
fn app_limited_acks_do_not_grow_the_window() {
    let t0 = Instant::now();
    for config in [CoreConfig::FLD, CoreConfig::RENO] {
        let mut c = build(config, t0);
        for k in 0..5 {
            round(c.as_mut(), t0 + RTT * k, true);
        }
        assert_eq!(c.window(), 10 * SEG, "{config:?}");
        // They still count as delivered (towards FLD_TCP's 2 MB).
        assert_eq!(core_of(c.as_ref()).core().delivered(), 5 * 10 * SEG);
    }
}

#[test]
fn below_2_mb_a_loss_takes_off_only_the_lost_bytes() {
    let t0 = Instant::now();
    let mut c = build(CoreConfig::FLD, t0);
    let t = deliver(c.as_mut(), t0, 40_000); // 12 kB + 36 kB
    assert_eq!(c.window(), 108_000);
    assert!(core_of(c.as_ref()).core().relentless());
    // "this TCP reduces the congestion window by the amount of lost
    // segments only"
    c.on_congestion_event(t, t - RTT, false, 2 * SEG);
    assert_eq!(c.window(), 108_000 - 2 * SEG);
    // Every loss counts, even one of the same window.
    c.on_congestion_event(t + RTT / 4, t - RTT, false, SEG);
    assert_eq!(c.window(), 108_000 - 3 * SEG);
    // And slow start is over: the next round adds one segment.
    let core = core_of(c.as_ref());
    assert_eq!(core.core().phase(), Phase::CongestionAvoidance);
    let w = c.window();
    round(c.as_mut(), t + RTT, false);
    assert_eq!(c.window(), w + SEG);

    // Reno, same events: the first loss halves, the second (sent before
    // the recovery began) does nothing.
    let mut r = build(CoreConfig::RENO, t0);
    let t = deliver(r.as_mut(), t0, 40_000); // 12 + 24 + 48 kB
    assert_eq!(r.window(), 96_000);
    r.on_congestion_event(t, t - RTT, false, 2 * SEG);
    assert_eq!(r.window(), 48_000);
    r.on_congestion_event(t + RTT / 4, t - RTT, false, SEG);
    assert_eq!(r.window(), 48_000);
}

#[test]
fn past_2_mb_delivered_a_loss_halves_the_window() {
    let t0 = Instant::now();
    let mut c = build(CoreConfig::FLD, t0);
    // 12 + 36 + 108 + 324 + 972 kB = 1.452 MB: still Relentless.
    let t = deliver(c.as_mut(), t0, 1_400_000);
    assert_eq!(core_of(c.as_ref()).core().delivered(), 1_452_000);
    let mut before = c.clone_box();
    before.on_congestion_event(t, t - RTT, false, SEG);
    assert_eq!(before.window(), 2_916_000 - SEG);
    // One more round: 4.368 MB delivered, past "The threshold value is
    // selected to be 2 MB"; now "FLD_TCP functions in traditional RENO
    // behavior". Slow start too: the 456 segments (547.2 kB) acknowledged
    // below 2 MB add two segments each, the rest of the round one.
    let t = deliver(c.as_mut(), t, 1);
    let delivered = core_of(c.as_ref()).core().delivered();
    assert!(delivered > FLD_THRESHOLD_BYTES, "{delivered}");
    assert_eq!(c.window(), 2_916_000 + 2 * 547_200 + (2_916_000 - 547_200));
    assert_eq!(c.window(), 6_379_200);
    c.on_congestion_event(t, t - RTT, false, SEG);
    assert_eq!(c.window(), 3_189_600);
    assert_eq!(c.metrics().ssthresh, Some(3_189_600));
}

#[test]
fn persistent_congestion_drops_to_the_minimum_window() {
    let t0 = Instant::now();
    for config in [CoreConfig::FLD, CoreConfig::RENO] {
        let mut c = build(config, t0);
        let t = deliver(c.as_mut(), t0, 40_000);
        let w = c.window();
        c.on_congestion_event(t + RTT * 3, t, true, 20 * SEG);
        // quinn gets two datagrams (RFC 9002's kMinimumWindow); the core
        // itself is at one segment with ssthresh at half the old window.
        assert_eq!(c.window(), 2 * SEG, "{config:?}");
        let core = core_of(c.as_ref());
        assert_eq!(core.core().window(), SEG);
        assert_eq!(core.core().ssthresh(), w / 2);
        // One datagram acknowledged: slow start again from the core's
        // window (FLD: + 2 segments, Reno: + 1).
        c.on_ack(t + RTT * 4, t + RTT * 3, SEG, false, &rtt());
        let gain = match config.kind {
            CoreKind::Fld => 2,
            CoreKind::Reno => 1,
        };
        assert_eq!(c.window(), SEG + gain * SEG, "{config:?}");
    }
}

#[test]
fn an_mtu_update_lifts_the_floor_and_keeps_the_core() {
    let t0 = Instant::now();
    let mut c = build(CoreConfig::FLD, t0);
    c.on_mtu_update(1452);
    assert_eq!(c.window(), 10 * SEG);
    assert_eq!(c.initial_window(), 10 * SEG);
    round(c.as_mut(), t0, false);
    assert_eq!(c.window(), 30 * SEG);
    c.on_congestion_event(t0 + RTT * 5, t0 + RTT, true, 30 * SEG);
    assert_eq!(c.window(), 2 * 1452);
}

#[test]
fn the_factory_builds_the_core_it_names() {
    let t0 = Instant::now();
    for (config, kind) in [
        (CoreConfig::FLD, CoreKind::Fld),
        (CoreConfig::RENO, CoreKind::Reno),
    ] {
        let c = build(config, t0);
        let core = c.into_any().downcast::<Core>().unwrap();
        assert_eq!(core.kind(), kind);
        assert_eq!(core.core().params(), kind.window(SEG).params());
    }
}

#[test]
fn names_parse_and_build_what_they_name() {
    let t0 = Instant::now();
    assert_eq!(QuicCc::ALL.map(QuicCc::name), QuicCc::NAMES);
    assert_eq!(QuicCc::default(), QuicCc::Cubic);
    for cc in QuicCc::ALL {
        assert_eq!(cc.name().parse::<QuicCc>(), Ok(cc));
        assert_eq!(cc.to_string(), cc.name());
        let c = factory(cc.name()).unwrap().build(t0, MTU).into_any();
        let ok = match cc {
            QuicCc::Cubic => c.is::<quinn::congestion::Cubic>(),
            QuicCc::NewReno => c.is::<quinn::congestion::NewReno>(),
            QuicCc::Bbr => c.is::<quinn::congestion::Bbr>(),
            QuicCc::Fld => c
                .downcast::<Core>()
                .is_ok_and(|c| c.kind() == CoreKind::Fld),
            QuicCc::Reno => c
                .downcast::<Core>()
                .is_ok_and(|c| c.kind() == CoreKind::Reno),
        };
        assert!(ok, "{cc} built something else");
    }
}

#[test]
fn an_unknown_name_is_refused_with_the_choices() {
    for name in ["FLD", "vegas", "", " fld"] {
        let e = factory(name).err().unwrap();
        assert_eq!(
            e.to_string(),
            format!(
                "unknown QUIC congestion controller `{name}` \
                 (choose one of: cubic, newreno, bbr, fld, reno)"
            )
        );
    }
}

/// What quinn reports to a controller.
#[derive(Debug, Clone, Copy)]
enum Event {
    /// `bytes` acknowledged, sent `age` ms before.
    Ack {
        bytes: u64,
        age: u64,
        app_limited: bool,
    },
    /// `lost_bytes` lost, the newest of them sent `age` ms before.
    Loss {
        lost_bytes: u64,
        age: u64,
        persistent: bool,
    },
    Mtu(u16),
}

fn event() -> impl Strategy<Value = Event> {
    prop_oneof![
        8 => (1..=3 * SEG, 0..200u64, any::<bool>()).prop_map(|(bytes, age, app_limited)| {
            Event::Ack { bytes, age, app_limited }
        }),
        2 => (0..=20 * SEG, 0..200u64, prop::bool::weighted(0.2)).prop_map(
            |(lost_bytes, age, persistent)| Event::Loss { lost_bytes, age, persistent }
        ),
        1 => (1200..=1500u16).prop_map(Event::Mtu),
    ]
}

proptest! {
    /// Whatever quinn reports, the controller's core is the bare
    /// `mewa_cc::Window` fed the same events, and quinn's window is the
    /// core's with the two-datagram floor.
    #[test]
    fn the_controller_is_the_core_fed_the_same_events(
        fld in any::<bool>(),
        events in prop::collection::vec((1..100u64, event()), 1..300),
    ) {
        let (config, mut bare) = if fld {
            (CoreConfig::FLD, Window::fld(SEG))
        } else {
            (CoreConfig::RENO, Window::reno(SEG))
        };
        let t0 = Instant::now() + Duration::from_secs(1);
        let mut c = build(config, t0);
        let (mut now, mut mtu) = (t0, SEG);
        for (step, e) in events {
            now += Duration::from_millis(step);
            let ago = |ms| now - Duration::from_millis(ms);
            match e {
                Event::Ack { bytes, age, app_limited } => {
                    c.on_ack(now, ago(age), bytes, app_limited, &rtt());
                    bare.on_ack(now, Ack { bytes, cwnd_limited: !app_limited });
                }
                Event::Loss { lost_bytes, age, persistent: true } => {
                    c.on_congestion_event(now, ago(age), true, lost_bytes);
                    bare.on_rto(now);
                }
                Event::Loss { lost_bytes, age, persistent: false } => {
                    c.on_congestion_event(now, ago(age), false, lost_bytes);
                    bare.on_loss(now, ago(age), lost_bytes);
                }
                Event::Mtu(m) => {
                    c.on_mtu_update(m);
                    mtu = u64::from(m);
                }
            }
            let core = core_of(c.as_ref());
            prop_assert_eq!(
                (core.core().window(), core.core().ssthresh(), core.core().delivered()),
                (bare.window(), bare.ssthresh(), bare.delivered())
            );
            prop_assert_eq!(c.window(), bare.window().max(2 * mtu));
        }
    }
}

/// quinn-proto's `on_ack` takes a `&RttEstimator`, which only quinn-proto
/// can make (its constructor is crate-private). So the tests borrow one
/// from a real handshake over loopback, once: a controller on the client
/// copies the estimator quinn hands it. The cores ignore its value.
fn rtt() -> RttEstimator {
    static RTT: OnceLock<RttEstimator> = OnceLock::new();
    *RTT.get_or_init(borrow_rtt_from_a_handshake)
}

/// A factory of quinn's NewReno controllers that keep a copy of the last
/// `RttEstimator` they were given.
#[derive(Default)]
struct Capture(Mutex<Option<RttEstimator>>);

struct Capturing {
    inner: Box<dyn Controller>,
    seen: Arc<Capture>,
}

impl ControllerFactory for Capture {
    fn build(self: Arc<Self>, now: Instant, current_mtu: u16) -> Box<dyn Controller> {
        Box::new(Capturing {
            inner: Arc::new(NewRenoConfig::default()).build(now, current_mtu),
            seen: self,
        })
    }
}

impl Controller for Capturing {
    fn on_ack(
        &mut self,
        now: Instant,
        sent: Instant,
        bytes: u64,
        app_limited: bool,
        rtt: &RttEstimator,
    ) {
        *self.seen.0.lock().unwrap() = Some(*rtt);
        self.inner.on_ack(now, sent, bytes, app_limited, rtt);
    }
    fn on_congestion_event(&mut self, now: Instant, sent: Instant, pc: bool, lost: u64) {
        self.inner.on_congestion_event(now, sent, pc, lost);
    }
    fn on_mtu_update(&mut self, new_mtu: u16) {
        self.inner.on_mtu_update(new_mtu);
    }
    fn window(&self) -> u64 {
        self.inner.window()
    }
    fn clone_box(&self) -> Box<dyn Controller> {
        Box::new(Capturing {
            inner: self.inner.clone_box(),
            seen: self.seen.clone(),
        })
    }
    fn initial_window(&self) -> u64 {
        self.inner.initial_window()
    }
    fn into_any(self: Box<Self>) -> Box<dyn Any> {
        self
    }
}

fn borrow_rtt_from_a_handshake() -> RttEstimator {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let dir = std::env::temp_dir().join(format!("mewa-quic-cc-test-{}", std::process::id()));
        let certs = crate::tls::Ca::load_or_create(&dir)
            .unwrap()
            .issue(&["localhost"])
            .unwrap();
        let sc = quinn::ServerConfig::with_crypto(Arc::new(certs.quic_config().unwrap()));
        let server = quinn::Endpoint::server(sc, "127.0.0.1:0".parse().unwrap()).unwrap();
        let addr = server.local_addr().unwrap();
        let accept = tokio::spawn(async move {
            let conn = server.accept().await.unwrap().await.unwrap();
            // Hold the connection until the client is done.
            let _ = conn.closed().await;
        });
        let seen = Arc::new(Capture::default());
        let mut tc = quinn::TransportConfig::default();
        tc.congestion_controller_factory(seen.clone());
        let tls = certs.client_config(&[b"h3"]).unwrap();
        let qc = quinn::crypto::rustls::QuicClientConfig::try_from(tls).unwrap();
        let mut cc = quinn::ClientConfig::new(Arc::new(qc));
        cc.transport_config(Arc::new(tc));
        let client = quinn::Endpoint::client("127.0.0.1:0".parse().unwrap()).unwrap();
        let conn = client
            .connect_with(cc, addr, "localhost")
            .unwrap()
            .await
            .unwrap();
        // The server acknowledged the client's Initial during the
        // handshake; wait (not a timing assertion) in case it is late.
        let mut got = None;
        for _ in 0..500 {
            got = *seen.0.lock().unwrap();
            if got.is_some() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        conn.close(0u32.into(), b"done");
        client.wait_idle().await;
        accept.abort();
        let _ = std::fs::remove_dir_all(&dir);
        got.expect("quinn never called on_ack during a handshake")
    })
}
