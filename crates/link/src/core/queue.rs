//! Queue disciplines at the bottleneck, behind one small trait (mahimahi's
//! `AbstractPacketQueue`): drop-tail, drop-head and CoDel (RFC 8289).

use std::collections::VecDeque;
use std::time::Duration;

use super::Payload;

/// A packet waiting in a queue, with the time it arrived.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Queued<P> {
    /// The packet.
    pub packet: P,
    /// When it was enqueued.
    pub enqueued: Duration,
}

/// Size limits of a queue; `None` means unbounded in that dimension.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct Limit {
    /// Most packets held.
    pub packets: Option<usize>,
    /// Most bytes held.
    pub bytes: Option<usize>,
}

impl Limit {
    /// No limit (mahimahi's default "infinite" queue).
    pub const UNBOUNDED: Limit = Limit {
        packets: None,
        bytes: None,
    };

    fn fits(&self, packets: usize, bytes: usize) -> bool {
        self.packets.is_none_or(|p| packets <= p) && self.bytes.is_none_or(|b| bytes <= b)
    }
}

/// A queue discipline.
pub trait PacketQueue<P: Payload>: Send {
    /// Offers a packet at its arrival; pushes what the discipline drops (the
    /// packet itself for drop-tail, older ones for drop-head) onto `dropped`.
    fn enqueue(&mut self, q: Queued<P>, dropped: &mut Vec<Queued<P>>);
    /// Takes the next packet to send at `now`; pushes packets the discipline
    /// drops on the way (CoDel) onto `dropped`.
    fn dequeue(&mut self, now: Duration, dropped: &mut Vec<Queued<P>>) -> Option<Queued<P>>;
    /// Packets held.
    fn len(&self) -> usize;
    /// Whether the queue is empty.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Bytes held.
    fn bytes(&self) -> usize;
}

/// FIFO storage shared by the disciplines.
#[derive(Debug)]
struct Fifo<P> {
    q: VecDeque<Queued<P>>,
    bytes: usize,
}

impl<P: Payload> Fifo<P> {
    fn new() -> Self {
        Fifo {
            q: VecDeque::new(),
            bytes: 0,
        }
    }
    fn push(&mut self, p: Queued<P>) {
        self.bytes += p.packet.wire_len();
        self.q.push_back(p);
    }
    fn pop(&mut self) -> Option<Queued<P>> {
        let p = self.q.pop_front()?;
        self.bytes -= p.packet.wire_len();
        Some(p)
    }
    /// Drop-tail admission (drop-tail itself, and CoDel's tail limit): keep
    /// `q` if it fits `limit`, else drop it.
    fn admit_tail(&mut self, limit: Limit, q: Queued<P>, dropped: &mut Vec<Queued<P>>) {
        if limit.fits(self.q.len() + 1, self.bytes + q.packet.wire_len()) {
            self.push(q);
        } else {
            dropped.push(q);
        }
    }
}

/// Drops an arriving packet that does not fit.
#[derive(Debug)]
pub struct DropTail<P> {
    limit: Limit,
    fifo: Fifo<P>,
}

impl<P: Payload> DropTail<P> {
    /// A drop-tail queue with `limit`.
    pub fn new(limit: Limit) -> Self {
        DropTail {
            limit,
            fifo: Fifo::new(),
        }
    }
}

impl<P: Payload + Send> PacketQueue<P> for DropTail<P> {
    fn enqueue(&mut self, q: Queued<P>, dropped: &mut Vec<Queued<P>>) {
        self.fifo.admit_tail(self.limit, q, dropped);
    }
    fn dequeue(&mut self, _now: Duration, _dropped: &mut Vec<Queued<P>>) -> Option<Queued<P>> {
        self.fifo.pop()
    }
    fn len(&self) -> usize {
        self.fifo.q.len()
    }
    fn bytes(&self) -> usize {
        self.fifo.bytes
    }
}

/// Admits every arrival and drops from the head until the limit holds.
#[derive(Debug)]
pub struct DropHead<P> {
    limit: Limit,
    fifo: Fifo<P>,
}

impl<P: Payload> DropHead<P> {
    /// A drop-head queue with `limit`.
    pub fn new(limit: Limit) -> Self {
        DropHead {
            limit,
            fifo: Fifo::new(),
        }
    }
}

impl<P: Payload + Send> PacketQueue<P> for DropHead<P> {
    fn enqueue(&mut self, q: Queued<P>, dropped: &mut Vec<Queued<P>>) {
        self.fifo.push(q);
        while !self.limit.fits(self.fifo.q.len(), self.fifo.bytes) {
            match self.fifo.pop() {
                Some(d) => dropped.push(d),
                None => break,
            }
        }
    }
    fn dequeue(&mut self, _now: Duration, _dropped: &mut Vec<Queued<P>>) -> Option<Queued<P>> {
        self.fifo.pop()
    }
    fn len(&self) -> usize {
        self.fifo.q.len()
    }
    fn bytes(&self) -> usize {
        self.fifo.bytes
    }
}

/// CoDel (RFC 8289): drops at dequeue when packets have sat longer than
/// `target` for at least `interval`, at a rate growing with √count. Arrivals
/// beyond `limit` are dropped at the tail.
#[derive(Debug)]
pub struct CoDel<P> {
    limit: Limit,
    target: Duration,
    interval: Duration,
    fifo: Fifo<P>,
    first_above_time: Option<Duration>,
    drop_next: Duration,
    count: u32,
    last_count: u32,
    dropping: bool,
}

/// One mahimahi-sized packet: CoDel never drops when no more than this is
/// queued (RFC 8289 §5.2, "maxpacket").
const MAX_PACKET: usize = 1500;

impl<P: Payload> CoDel<P> {
    /// CoDel with the given target and interval (RFC 8289 defaults: 5 ms and
    /// 100 ms) and a tail limit.
    pub fn new(target: Duration, interval: Duration, limit: Limit) -> Self {
        CoDel {
            limit,
            target,
            interval,
            fifo: Fifo::new(),
            first_above_time: None,
            drop_next: Duration::ZERO,
            count: 0,
            last_count: 0,
            dropping: false,
        }
    }

    /// RFC 8289 `dodequeue`: the head packet and whether its sojourn time has
    /// been above target for a whole interval.
    fn do_dequeue(&mut self, now: Duration) -> (Option<Queued<P>>, bool) {
        let Some(p) = self.fifo.pop() else {
            self.first_above_time = None;
            return (None, false);
        };
        let sojourn = now.saturating_sub(p.enqueued);
        let mut ok_to_drop = false;
        if sojourn < self.target || self.fifo.bytes <= MAX_PACKET {
            self.first_above_time = None;
        } else {
            match self.first_above_time {
                None => self.first_above_time = Some(now + self.interval),
                Some(t) if now >= t => ok_to_drop = true,
                Some(_) => {}
            }
        }
        (Some(p), ok_to_drop)
    }

    fn control_law(&self, t: Duration) -> Duration {
        t + self.interval.div_f64(f64::from(self.count.max(1)).sqrt())
    }
}

impl<P: Payload + Send> PacketQueue<P> for CoDel<P> {
    fn enqueue(&mut self, q: Queued<P>, dropped: &mut Vec<Queued<P>>) {
        self.fifo.admit_tail(self.limit, q, dropped);
    }

    fn dequeue(&mut self, now: Duration, dropped: &mut Vec<Queued<P>>) -> Option<Queued<P>> {
        let (mut p, mut ok) = self.do_dequeue(now);
        if self.dropping {
            if !ok {
                self.dropping = false;
            }
            while self.dropping && now >= self.drop_next {
                if let Some(d) = p.take() {
                    dropped.push(d);
                }
                self.count += 1;
                (p, ok) = self.do_dequeue(now);
                if ok {
                    self.drop_next = self.control_law(self.drop_next);
                } else {
                    self.dropping = false;
                }
            }
        } else if ok {
            if let Some(d) = p.take() {
                dropped.push(d);
            }
            (p, _) = self.do_dequeue(now);
            self.dropping = true;
            let delta = self.count.saturating_sub(self.last_count);
            self.count = if delta > 1 && now.saturating_sub(self.drop_next) < self.interval * 16 {
                delta
            } else {
                1
            };
            self.drop_next = self.control_law(now);
            self.last_count = self.count;
        }
        p
    }

    fn len(&self) -> usize {
        self.fifo.q.len()
    }

    fn bytes(&self) -> usize {
        self.fifo.bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(len: usize, ms: u64) -> Queued<usize> {
        Queued {
            packet: len,
            enqueued: Duration::from_millis(ms),
        }
    }

    #[test]
    fn drop_tail_by_packets_and_bytes() {
        let mut d = Vec::new();
        let mut t = DropTail::new(Limit {
            packets: Some(2),
            bytes: None,
        });
        for i in 0..3 {
            t.enqueue(q(100 + i, 0), &mut d);
        }
        assert_eq!(t.len(), 2);
        assert_eq!(d, vec![q(102, 0)]);
        let mut d = Vec::new();
        let mut t = DropTail::new(Limit {
            packets: None,
            bytes: Some(2500),
        });
        for _ in 0..3 {
            t.enqueue(q(1000, 0), &mut d);
        }
        assert_eq!((t.len(), t.bytes(), d.len()), (2, 2000, 1));
        assert_eq!(t.dequeue(Duration::ZERO, &mut d), Some(q(1000, 0)));
        assert_eq!(t.bytes(), 1000);
    }

    #[test]
    fn drop_head_keeps_newest() {
        let mut d = Vec::new();
        let mut h = DropHead::new(Limit {
            packets: Some(2),
            bytes: None,
        });
        for i in 0..4 {
            h.enqueue(q(i + 1, i as u64), &mut d);
        }
        assert_eq!(d, vec![q(1, 0), q(2, 1)]);
        assert_eq!(h.dequeue(Duration::ZERO, &mut d), Some(q(3, 2)));
    }

    #[test]
    fn codel_leaves_short_queues_alone() {
        let mut d = Vec::new();
        let mut c = CoDel::new(
            Duration::from_millis(5),
            Duration::from_millis(100),
            Limit::UNBOUNDED,
        );
        // One packet every ms, served 1 ms later: sojourn 1 ms < 5 ms target.
        for i in 0..1000u64 {
            c.enqueue(q(1500, i), &mut d);
            assert!(c.dequeue(Duration::from_millis(i + 1), &mut d).is_some());
        }
        assert!(d.is_empty());
    }

    #[test]
    fn codel_drops_a_standing_queue() {
        let mut d = Vec::new();
        let mut c = CoDel::new(
            Duration::from_millis(5),
            Duration::from_millis(100),
            Limit::UNBOUNDED,
        );
        // Two arrivals per ms, one departure per ms: the queue and its delay grow.
        let mut served = 0;
        for ms in 0..2000u64 {
            c.enqueue(q(1500, ms), &mut d);
            c.enqueue(q(1500, ms), &mut d);
            if c.dequeue(Duration::from_millis(ms), &mut d).is_some() {
                served += 1;
            }
        }
        assert!(!d.is_empty(), "CoDel never dropped");
        // Nothing is dropped before sojourn has exceeded target for an interval.
        assert!(served >= 100);
        // Drops grow faster than linearly in time once dropping: many more than
        // one per interval by the end.
        assert!(d.len() > 20, "{} drops", d.len());
    }
}
