//! The sans-IO link: a pair of direction pipelines sharing one radio.
//!
//! A packet offered to a direction at time `now` goes through
//!
//! ```text
//! arrival → radio wake-up → random loss → queue → bottleneck server → propagation delay → out
//! ```
//!
//! The bottleneck server is either unlimited, a constant rate (serialisation
//! time len·8/rate per packet), or a mahimahi trace: each opportunity delivers
//! up to 1500 bytes from the queue head, a packet may straddle opportunities,
//! and an opportunity finding nothing to send is lost (mahimahi's `LinkQueue`).
//! The radio gates the server: nothing leaves before the radio is awake, and a
//! 3G radio in CELL_FACH replaces the rate by the FACH channel's.
//!
//! One way to drive it (quinn-proto style): [`Link::handle_packet`] for input,
//! [`Link::poll_transmit`] for packets due out, [`Link::poll_timeout`] for when
//! to call again, [`Link::poll_event`] for the event log. Time is a
//! [`Duration`] since the emulator started; nothing here reads a clock.

pub mod queue;
pub mod radio;
pub mod rng;
pub mod trace;

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;

use queue::{CoDel, DropHead, DropTail, Limit, PacketQueue, Queued};
use radio::{Radio, RadioConfig, RadioState};
use rng::SplitMix64;
use trace::{DelayTrace, DeliveryTrace, TraceCursor, OPPORTUNITY_BYTES};

/// Anything with a length on the wire.
pub trait Payload {
    /// Bytes this packet occupies on the link (the IP packet length).
    fn wire_len(&self) -> usize;
}

impl Payload for Vec<u8> {
    fn wire_len(&self) -> usize {
        self.len()
    }
}

/// A packet that is only its length (tests, simulations).
impl Payload for usize {
    fn wire_len(&self) -> usize {
        *self
    }
}

/// Direction of travel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Dir {
    /// From the mobile client towards the network.
    Up,
    /// From the network towards the mobile client.
    Down,
}

impl Dir {
    /// Both directions, uplink first.
    pub const BOTH: [Dir; 2] = [Dir::Up, Dir::Down];

    fn index(self) -> usize {
        match self {
            Dir::Up => 0,
            Dir::Down => 1,
        }
    }

    /// `up` or `down`.
    pub fn name(self) -> &'static str {
        match self {
            Dir::Up => "up",
            Dir::Down => "down",
        }
    }
}

/// Propagation delay of a direction.
#[derive(Debug, Clone, PartialEq)]
pub enum DelaySpec {
    /// The same one-way delay for every packet.
    Fixed(Duration),
    /// A delay that changes over time (packets never overtake each other).
    Trace(DelayTrace),
}

/// The bottleneck rate of a direction.
#[derive(Debug, Clone, PartialEq)]
pub enum RateSpec {
    /// No rate limit.
    Unlimited,
    /// A constant rate, bit/s.
    Constant {
        /// Bits per second.
        bps: u64,
    },
    /// A mahimahi delivery-opportunity trace.
    Trace(DeliveryTrace),
}

/// The queue discipline in front of the bottleneck.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueueSpec {
    /// Drop arrivals that do not fit.
    DropTail(Limit),
    /// Admit arrivals, drop the oldest until the limit holds.
    DropHead(Limit),
    /// CoDel (RFC 8289) with a tail limit.
    CoDel {
        /// Acceptable standing queue delay (RFC 8289 default 5 ms).
        target: Duration,
        /// Window over which the delay must stay above target (100 ms).
        interval: Duration,
        /// Tail-drop limit.
        limit: Limit,
    },
}

impl Default for QueueSpec {
    /// mahimahi's default: an unbounded drop-tail queue.
    fn default() -> Self {
        QueueSpec::DropTail(Limit::UNBOUNDED)
    }
}

/// Why a queue or link setting was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SpecError {
    /// A queue description could not be read.
    #[error("bad queue {given:?}: {why} (e.g. droptail:packets=100, drophead:bytes=150kB, codel:target=5ms,interval=100ms, infinite)")]
    Queue {
        /// What was given.
        given: String,
        /// What is wrong.
        why: String,
    },
    /// A duration could not be read (a bare number has no unit).
    #[error("bad duration {0:?}: use a number with a unit, e.g. 150ms, 2s, 250us")]
    Duration(String),
    /// A rate could not be read (a bare number has no unit).
    #[error("bad rate {0:?}: use a number with a unit in bit/s, e.g. 4096kbit, 32mbit, 1gbit")]
    Rate(String),
    /// A duration that must be whole seconds has a fraction.
    #[error("bad duration {0:?}: give whole seconds, e.g. 60s")]
    WholeSecs(String),
    /// A size could not be read (a bare number has no unit).
    #[error("bad size {0:?}: use a number with a unit, e.g. 500kB, 2MB, 1500B, 64KiB")]
    Size(String),
    /// A loss probability outside [0, 1].
    #[error("loss must be a probability between 0 and 1, got {0}")]
    Loss(String),
}

impl std::str::FromStr for QueueSpec {
    type Err = SpecError;

    fn from_str(s: &str) -> Result<Self, SpecError> {
        let bad = |why: &str| SpecError::Queue {
            given: s.to_string(),
            why: why.to_string(),
        };
        let (kind, args) = s.split_once(':').unwrap_or((s, ""));
        let mut limit = Limit::UNBOUNDED;
        let mut target = Duration::from_millis(5);
        let mut interval = Duration::from_millis(100);
        for kv in args.split(',').filter(|a| !a.is_empty()) {
            let (k, v) = kv
                .split_once('=')
                .ok_or_else(|| bad("arguments are key=value"))?;
            match k {
                "packets" => {
                    limit.packets = Some(
                        v.parse()
                            .map_err(|_| bad("packets must be a whole number"))?,
                    )
                }
                "bytes" => {
                    let b = parse_size(v)
                        .map_err(|_| bad("bytes takes a size with its unit, e.g. bytes=150kB"))?;
                    limit.bytes = Some(usize::try_from(b).map_err(|_| bad("bytes is too large"))?)
                }
                "target" if kind == "codel" => target = parse_duration(v)?,
                "interval" if kind == "codel" => interval = parse_duration(v)?,
                _ => return Err(bad(&format!("unknown argument {k:?} for {kind}"))),
            }
        }
        match kind {
            "infinite" if args.is_empty() => Ok(QueueSpec::DropTail(Limit::UNBOUNDED)),
            "droptail" => Ok(QueueSpec::DropTail(limit)),
            "drophead" => Ok(QueueSpec::DropHead(limit)),
            "codel" => {
                if interval.is_zero() {
                    return Err(bad("interval must be > 0"));
                }
                Ok(QueueSpec::CoDel {
                    target,
                    interval,
                    limit,
                })
            }
            _ => Err(bad("unknown discipline")),
        }
    }
}

impl QueueSpec {
    fn build<P: Payload + Send + 'static>(self) -> Box<dyn PacketQueue<P>> {
        match self {
            QueueSpec::DropTail(l) => Box::new(DropTail::new(l)),
            QueueSpec::DropHead(l) => Box::new(DropHead::new(l)),
            QueueSpec::CoDel {
                target,
                interval,
                limit,
            } => Box::new(CoDel::new(target, interval, limit)),
        }
    }
}

/// Splits `20ms` into its number and its unit; `None` for a bare number
/// or no number at all: every quantity on mewa's command lines carries its
/// unit, so that `--rtt 150` cannot be read as seconds by one command and
/// milliseconds by another.
fn number_and_unit(t: &str) -> Option<(f64, &str)> {
    let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.'))?;
    let (num, unit) = t.split_at(split);
    Some((num.parse().ok()?, unit.trim()))
}

/// Parses `20ms`, `1.5s`, `250us`, `0ms` into a duration; a bare number is
/// refused.
pub fn parse_duration(s: &str) -> Result<Duration, SpecError> {
    let bad = || SpecError::Duration(s.to_string());
    let (v, unit) = number_and_unit(s.trim()).ok_or_else(bad)?;
    let secs = match unit {
        "s" => v,
        "ms" => v / 1e3,
        "us" | "µs" => v / 1e6,
        "ns" => v / 1e9,
        _ => return Err(bad()),
    };
    if !(secs.is_finite() && (0.0..=86_400.0).contains(&secs)) {
        return Err(bad());
    }
    Ok(Duration::from_secs_f64(secs))
}

/// Parses `60s`, `600s` into whole seconds, for what counts in seconds (a
/// tool's run length, a TTL); a fraction of a second is refused rather than
/// cut off, and a bare number like every duration.
pub fn parse_whole_secs(s: &str) -> Result<u64, SpecError> {
    let d = parse_duration(s)?;
    if d.subsec_nanos() != 0 {
        return Err(SpecError::WholeSecs(s.to_string()));
    }
    Ok(d.as_secs())
}

/// Parses `20mbit`, `500kbit`, `1gbit`, `64000bit` (bit/s; `mbps`, `Mbit/s`
/// too) into bit/s; a bare number is refused.
pub fn parse_rate(s: &str) -> Result<u64, SpecError> {
    let bad = || SpecError::Rate(s.to_string());
    let t = s.trim().to_ascii_lowercase();
    let (v, unit) = number_and_unit(&t).ok_or_else(bad)?;
    let mult = match unit.trim_end_matches("/s").trim_end_matches("ps") {
        "bit" | "b" => 1.0,
        "kbit" | "k" | "kb" => 1e3,
        "mbit" | "m" | "mb" => 1e6,
        "gbit" | "g" | "gb" => 1e9,
        _ => return Err(bad()),
    };
    let bps = v * mult;
    if !(bps.is_finite() && (1.0..=1e12).contains(&bps)) {
        return Err(bad());
    }
    Ok(bps.round() as u64)
}

/// Parses `500kB`, `2MB`, `1500B`, `64KiB` into bytes (kB = 1000 B, KiB =
/// 1024 B); a bare number is refused.
pub fn parse_size(s: &str) -> Result<u64, SpecError> {
    let bad = || SpecError::Size(s.to_string());
    let (v, unit) = number_and_unit(s.trim()).ok_or_else(bad)?;
    let mult = match unit {
        "B" => 1.0,
        "kB" | "KB" => 1e3,
        "MB" => 1e6,
        "GB" => 1e9,
        "KiB" => 1024.0,
        "MiB" => 1024.0 * 1024.0,
        "GiB" => 1024.0 * 1024.0 * 1024.0,
        _ => return Err(bad()),
    };
    let bytes = v * mult;
    if !(bytes.is_finite() && (0.0..=1e15).contains(&bytes)) {
        return Err(bad());
    }
    Ok(bytes.round() as u64)
}

/// One direction's settings.
#[derive(Debug, Clone, PartialEq)]
pub struct DirectionConfig {
    /// Propagation delay.
    pub delay: DelaySpec,
    /// Bottleneck rate.
    pub rate: RateSpec,
    /// Queue discipline.
    pub queue: QueueSpec,
    /// Probability that an arriving packet is lost, in [0, 1].
    pub loss: f64,
}

impl Default for DirectionConfig {
    fn default() -> Self {
        DirectionConfig {
            delay: DelaySpec::Fixed(Duration::ZERO),
            rate: RateSpec::Unlimited,
            queue: QueueSpec::default(),
            loss: 0.0,
        }
    }
}

/// A whole link.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct LinkConfig {
    /// Client → network.
    pub up: DirectionConfig,
    /// Network → client.
    pub down: DirectionConfig,
    /// Radio model shared by both directions.
    pub radio: RadioConfig,
    /// Seed of the loss generator.
    pub seed: u64,
    /// Keep an event log for [`Link::poll_event`].
    pub log_events: bool,
}

/// What happened to a packet or an opportunity.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum EventKind {
    /// A packet arrived at the link.
    Arrival,
    /// A packet left the bottleneck; `delay` is its one-way delay through the
    /// link (queueing + serialisation + propagation).
    Departure,
    /// Random loss dropped a packet.
    DropLoss,
    /// The queue discipline dropped a packet.
    DropQueue,
    /// A delivery opportunity went unused (`bytes` wasted).
    Unused,
}

/// One entry of a direction's event log.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Event {
    /// Direction.
    pub dir: Dir,
    /// When, since the start.
    pub at: Duration,
    /// What.
    pub kind: EventKind,
    /// Bytes involved.
    pub bytes: usize,
    /// For departures: one-way delay through the link.
    pub delay: Option<Duration>,
}

impl Event {
    /// An event that carries no delay (everything but a departure).
    fn new(dir: Dir, at: Duration, kind: EventKind, bytes: usize) -> Event {
        Event {
            dir,
            at,
            kind,
            bytes,
            delay: None,
        }
    }
}

/// Counters of one direction.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Stats {
    /// Packets offered.
    pub arrivals: u64,
    /// Bytes offered.
    pub arrival_bytes: u64,
    /// Packets handed out by [`Link::poll_transmit`].
    pub delivered: u64,
    /// Bytes handed out.
    pub delivered_bytes: u64,
    /// Packets lost at random.
    pub drops_loss: u64,
    /// Packets dropped by the queue discipline.
    pub drops_queue: u64,
    /// Bytes dropped (both causes).
    pub drop_bytes: u64,
    /// Delivery opportunities that found nothing to send.
    pub unused_opportunities: u64,
    /// Sum of queueing delays (arrival to start of service), for the mean.
    pub queue_delay_total: Duration,
    /// Largest queueing delay.
    pub queue_delay_max: Duration,
}

impl Stats {
    /// Mean queueing delay over packets that left the queue.
    pub fn mean_queue_delay(&self) -> Duration {
        let left = self.delivered.max(1);
        self.queue_delay_total / u32::try_from(left).unwrap_or(u32::MAX)
    }
}

/// A packet being serialised by a constant-rate (or FACH) server.
struct InService<P> {
    q: Queued<P>,
    start: Duration,
    finish: Duration,
}

/// The head packet a trace server has partly delivered.
struct Partial<P> {
    q: Queued<P>,
    left: usize,
    start: Duration,
}

struct Direction<P> {
    dir: Dir,
    delay: DelaySpec,
    rate: RateSpec,
    /// The rate's trace, shared so the server can walk it while mutating
    /// the rest of the direction.
    trace: Option<Arc<DeliveryTrace>>,
    loss: f64,
    queue: Box<dyn PacketQueue<P>>,
    cursor: TraceCursor,
    in_service: Option<InService<P>>,
    partial: Option<Partial<P>>,
    /// The constant-rate server is free from this time.
    free_at: Duration,
    /// Packets past the bottleneck, with the time they come out.
    wire: VecDeque<(Duration, P)>,
    last_exit: Duration,
    stats: Stats,
    dropped: Vec<Queued<P>>,
}

/// An emulated link.
pub struct Link<P> {
    dirs: [Direction<P>; 2],
    radio: Radio,
    rng: SplitMix64,
    log: Option<VecDeque<Event>>,
    now: Duration,
    /// A rewind to apply when the next packet arrives (see
    /// [`Link::rewind_traces_at_next_packet`]).
    armed_rewind: Option<u64>,
}

impl<P: Payload + Send + 'static> Link<P> {
    /// A link in its initial state (queues empty, radio idle).
    pub fn new(cfg: LinkConfig) -> Link<P> {
        let mk = |dir: Dir, c: DirectionConfig| Direction {
            dir,
            delay: c.delay,
            trace: match &c.rate {
                RateSpec::Trace(t) => Some(Arc::new(t.clone())),
                _ => None,
            },
            rate: c.rate,
            loss: c.loss.clamp(0.0, 1.0),
            queue: c.queue.build(),
            cursor: TraceCursor::new(),
            in_service: None,
            partial: None,
            free_at: Duration::ZERO,
            wire: VecDeque::new(),
            last_exit: Duration::ZERO,
            stats: Stats::default(),
            dropped: Vec::new(),
        };
        Link {
            dirs: [mk(Dir::Up, cfg.up), mk(Dir::Down, cfg.down)],
            radio: Radio::new(cfg.radio),
            rng: SplitMix64::new(cfg.seed),
            log: cfg.log_events.then(VecDeque::new),
            now: Duration::ZERO,
            armed_rewind: None,
        }
    }

    /// Restarts both directions' delivery traces (when the rate is a trace)
    /// at the trace's moment `at_ms`, which now falls at `now`; queues and
    /// packets on the wire are kept. The lab calls it before each of two
    /// loads it compares, so both see the same stretch of the trace.
    /// Puts the link's radio to sleep now ([`radio::Radio::go_idle`]): the
    /// idle gap a phone has between two page loads, without waiting for
    /// the tail timers (11.5 s on LTE, 17 s on 3G).
    pub fn radio_idle(&mut self) {
        self.radio.go_idle();
    }

    /// Restarts both directions' delivery traces (see `rewind_traces`'s
    /// callers) at the trace's moment `at_ms`.
    pub fn rewind_traces(&mut self, at_ms: u64, now: Duration) {
        let now_ms = u64::try_from(now.as_millis()).unwrap_or(u64::MAX);
        for d in &mut self.dirs {
            if let Some(t) = d.trace.clone() {
                d.cursor.rewind(&t, at_ms, now_ms);
            }
        }
    }

    /// Restarts both directions' delivery traces at the trace's moment
    /// `at_ms` when the next packet arrives, in either direction, rather
    /// than now. Two loads that start with a different delay after the
    /// call (a browser takes 100–500 ms to start, and not the same each
    /// time) then still meet the same stretch of the trace from their
    /// first packet on; with [`Link::rewind_traces`] each would meet the
    /// stretch shifted by its own start-up time.
    pub fn rewind_traces_at_next_packet(&mut self, at_ms: u64) {
        self.armed_rewind = Some(at_ms);
    }

    /// Offers a packet to direction `dir` at `now`.
    pub fn handle_packet(&mut self, dir: Dir, packet: P, now: Duration) {
        let now = self.clock(now);
        self.advance(now);
        if let Some(at_ms) = self.armed_rewind.take() {
            self.rewind_traces(at_ms, now);
        }
        let len = packet.wire_len();
        let log = &mut self.log;
        let d = &mut self.dirs[dir.index()];
        d.stats.arrivals += 1;
        d.stats.arrival_bytes += len as u64;
        push(log, Event::new(dir, now, EventKind::Arrival, len));
        self.radio.on_arrival(now, d.queue.bytes() + len);
        if d.loss > 0.0 && self.rng.next_f64() < d.loss {
            d.stats.drops_loss += 1;
            d.stats.drop_bytes += len as u64;
            push(log, Event::new(dir, now, EventKind::DropLoss, len));
            return;
        }
        let idle = d.queue.is_empty() && d.in_service.is_none() && d.partial.is_none();
        d.queue.enqueue(
            Queued {
                packet,
                enqueued: now,
            },
            &mut d.dropped,
        );
        if idle {
            d.free_at = d.free_at.max(now);
        }
        d.record_drops(now, log);
        self.advance(now);
    }

    /// The next packet of direction `dir` due out by `now`, if any.
    pub fn poll_transmit(&mut self, dir: Dir, now: Duration) -> Option<P> {
        let now = self.clock(now);
        self.advance(now);
        let d = &mut self.dirs[dir.index()];
        if d.wire.front().is_some_and(|(t, _)| *t <= now) {
            let (_, p) = d.wire.pop_front()?;
            d.stats.delivered += 1;
            d.stats.delivered_bytes += p.wire_len() as u64;
            return Some(p);
        }
        None
    }

    /// When the link next has something to do (a packet due out or a server
    /// event); `None` when it is empty and idle.
    pub fn poll_timeout(&self) -> Option<Duration> {
        let ready = self.radio.ready_at();
        self.dirs.iter().filter_map(|d| d.next_event(ready)).min()
    }

    /// The next event of the log (when `log_events` is on).
    pub fn poll_event(&mut self) -> Option<Event> {
        self.log.as_mut()?.pop_front()
    }

    /// Counters of a direction.
    pub fn stats(&self, dir: Dir) -> &Stats {
        &self.dirs[dir.index()].stats
    }

    /// Radio state at `now`.
    pub fn radio_state(&mut self, now: Duration) -> RadioState {
        self.radio.state(now)
    }

    /// Radio promotions so far.
    pub fn radio_promotions(&self) -> u64 {
        self.radio.promotions()
    }

    /// Packets and bytes queued in a direction (not yet served).
    pub fn queued(&self, dir: Dir) -> (usize, usize) {
        let d = &self.dirs[dir.index()];
        (d.queue.len(), d.queue.bytes())
    }

    /// Time never runs backwards inside the link.
    fn clock(&mut self, now: Duration) -> Duration {
        self.now = self.now.max(now);
        self.now
    }

    fn advance(&mut self, now: Duration) {
        for d in &mut self.dirs {
            d.advance(now, &mut self.radio, &mut self.log);
        }
    }
}

fn push(log: &mut Option<VecDeque<Event>>, e: Event) {
    if let Some(l) = log {
        l.push_back(e);
    }
}

fn tx_time(bytes: usize, bps: u64) -> Duration {
    Duration::from_nanos(((bytes as u128 * 8 * 1_000_000_000) / u128::from(bps.max(1))) as u64)
}

impl<P: Payload> Direction<P> {
    fn record_drops(&mut self, at: Duration, log: &mut Option<VecDeque<Event>>) {
        for q in self.dropped.drain(..) {
            let bytes = q.packet.wire_len();
            self.stats.drops_queue += 1;
            self.stats.drop_bytes += bytes as u64;
            push(log, Event::new(self.dir, at, EventKind::DropQueue, bytes));
        }
    }

    /// A packet finished at the bottleneck at `at`, having started service at
    /// `start`: queue it for the propagation delay.
    fn depart(
        &mut self,
        q: Queued<P>,
        start: Duration,
        at: Duration,
        radio: &mut Radio,
        log: &mut Option<VecDeque<Event>>,
    ) {
        let queued = start.saturating_sub(q.enqueued);
        self.stats.queue_delay_total += queued;
        self.stats.queue_delay_max = self.stats.queue_delay_max.max(queued);
        let prop = match &self.delay {
            DelaySpec::Fixed(d) => *d,
            DelaySpec::Trace(t) => t.at(at),
        };
        let exit = (at + prop).max(self.last_exit);
        self.last_exit = exit;
        let bytes = q.packet.wire_len();
        push(
            log,
            Event {
                dir: self.dir,
                at,
                kind: EventKind::Departure,
                bytes,
                delay: Some(exit - q.enqueued),
            },
        );
        radio.touch(at);
        self.wire.push_back((exit, q.packet));
    }

    /// Runs the bottleneck server up to `now`.
    fn advance(&mut self, now: Duration, radio: &mut Radio, log: &mut Option<VecDeque<Event>>) {
        let fach = radio.rate_cap(now);
        match (&self.rate, fach) {
            (RateSpec::Trace(_), None) if self.in_service.is_none() => {
                self.advance_trace(now, radio, log)
            }
            (RateSpec::Trace(_), None) => {
                // Finish a packet started on FACH before returning to the trace.
                self.advance_constant(now, None, radio, log);
                if self.in_service.is_none() {
                    self.advance_trace(now, radio, log);
                }
            }
            (RateSpec::Trace(_), Some(bps)) => {
                // On FACH the trace's opportunities pass unused (not logged:
                // the radio, not the queue, is the bottleneck).
                if let Some(trace) = self.trace.clone() {
                    while self.cursor.peek(&trace) <= now {
                        self.cursor.advance(&trace);
                    }
                }
                self.advance_constant(now, Some(bps), radio, log);
            }
            (RateSpec::Constant { bps }, cap) => {
                let bps = cap.unwrap_or(*bps);
                self.advance_constant(now, Some(bps), radio, log);
            }
            (RateSpec::Unlimited, cap) => self.advance_constant(now, cap, radio, log),
        }
    }

    /// Constant-rate (or unlimited when `bps` is `None`) service up to `now`.
    fn advance_constant(
        &mut self,
        now: Duration,
        bps: Option<u64>,
        radio: &mut Radio,
        log: &mut Option<VecDeque<Event>>,
    ) {
        loop {
            if let Some(s) = self.in_service.take() {
                if s.finish <= now {
                    self.depart(s.q, s.start, s.finish, radio, log);
                } else {
                    self.in_service = Some(s);
                    return;
                }
            }
            if self.queue.is_empty() {
                return;
            }
            let start = self.free_at.max(radio.ready_at());
            if start > now {
                return;
            }
            let Some(q) = self.queue.dequeue(start, &mut self.dropped) else {
                self.record_drops(start, log);
                return;
            };
            self.record_drops(start, log);
            let finish = start + bps.map_or(Duration::ZERO, |b| tx_time(q.packet.wire_len(), b));
            self.free_at = finish;
            self.in_service = Some(InService { q, start, finish });
        }
    }

    /// Trace-driven service: every opportunity up to `now`.
    fn advance_trace(
        &mut self,
        now: Duration,
        radio: &mut Radio,
        log: &mut Option<VecDeque<Event>>,
    ) {
        let Some(trace) = self.trace.clone() else {
            return;
        };
        loop {
            let t = self.cursor.peek(&trace);
            if t > now {
                return;
            }
            self.cursor.advance(&trace);
            let mut credit = OPPORTUNITY_BYTES;
            if t >= radio.ready_at() {
                while credit > 0 {
                    if self.partial.is_none() {
                        let Some(q) = self.queue.dequeue(t, &mut self.dropped) else {
                            self.record_drops(t, log);
                            break;
                        };
                        self.record_drops(t, log);
                        let left = q.packet.wire_len();
                        self.partial = Some(Partial { q, left, start: t });
                    }
                    let Some(mut p) = self.partial.take() else {
                        break;
                    };
                    if p.left <= credit {
                        credit -= p.left;
                        self.depart(p.q, p.start, t, radio, log);
                    } else {
                        p.left -= credit;
                        credit = 0;
                        self.partial = Some(p);
                    }
                }
            }
            if credit == OPPORTUNITY_BYTES {
                self.stats.unused_opportunities += 1;
                push(log, Event::new(self.dir, t, EventKind::Unused, credit));
            }
        }
    }

    /// The next time this direction has work, given the radio's ready time.
    fn next_event(&self, ready: Duration) -> Option<Duration> {
        let out = self.wire.front().map(|(t, _)| *t);
        let busy = !self.queue.is_empty() || self.partial.is_some();
        let server = if let Some(s) = &self.in_service {
            Some(s.finish)
        } else if busy {
            match &self.trace {
                Some(tr) => Some(self.cursor.peek(tr).max(ready)),
                None => Some(self.free_at.max(ready)),
            }
        } else {
            None
        };
        match (out, server) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
}

#[cfg(test)]
mod tests;
