//! Retransmissions seen on the wire, and which of them were spurious (seed
//! 003): read from what the link delivered (its pcap of each direction, the
//! packets as they left the link), so the verdict does not depend on what
//! either end's TCP believed.
//!
//! A data segment whose bytes had all been delivered before is a spurious
//! retransmission: its original got through, the sender resent it anyway
//! (a retransmission timeout that fired while the original waited, for
//! example behind a radio promotion). One whose bytes had never been
//! delivered and lie below the highest byte already seen fills a hole: a
//! genuine retransmission of a segment the link dropped. A SYN delivered
//! twice is a spurious SYN retransmission (the first one arrived).
//!
//! Pure: segments in, verdicts out. IPv4 only, as the link carries.

use std::collections::HashMap;
use std::net::Ipv4Addr;

use serde::{Deserialize, Serialize};

/// One direction of a TCP connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct Flow {
    /// Sender address.
    pub src: Ipv4Addr,
    /// Sender port.
    pub sport: u16,
    /// Receiver address.
    pub dst: Ipv4Addr,
    /// Receiver port.
    pub dport: u16,
}

impl std::fmt::Display for Flow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}>{}:{}", self.src, self.sport, self.dst, self.dport)
    }
}

/// The TCP facts of one packet that the analysis needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Segment {
    /// When the link delivered it, µs (any epoch, the same for all).
    pub at_us: u64,
    /// Its direction.
    pub flow: Flow,
    /// Sequence number of its first byte (of the SYN, for a SYN).
    pub seq: u32,
    /// Payload bytes (not counting SYN or FIN).
    pub len: u32,
    /// SYN flag.
    pub syn: bool,
    /// FIN flag.
    pub fin: bool,
    /// RST flag.
    pub rst: bool,
}

/// Why a packet is not a TCP segment the analysis can read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SegmentError {
    /// Not IPv4 (the link only carries IPv4).
    #[error("not an IPv4 packet (version {0})")]
    NotIpv4(u8),
    /// Shorter than its headers claim.
    #[error("packet of {len} bytes cut short: its headers need {need}")]
    Short {
        /// Bytes present.
        len: usize,
        /// Bytes the headers need.
        need: usize,
    },
    /// A header length below the minimum.
    #[error("bad {what} header length {value}")]
    HeaderLength {
        /// IP or TCP.
        what: &'static str,
        /// The length found, bytes.
        value: usize,
    },
}

/// Reads the TCP segment in a raw IPv4 packet delivered at `at_us`;
/// `Ok(None)` for other protocols and for fragments after the first.
pub fn segment(at_us: u64, ip: &[u8]) -> Result<Option<Segment>, SegmentError> {
    let Some(&b0) = ip.first() else {
        return Err(SegmentError::Short { len: 0, need: 20 });
    };
    if b0 >> 4 != 4 {
        return Err(SegmentError::NotIpv4(b0 >> 4));
    }
    if ip.len() < 20 {
        return Err(SegmentError::Short {
            len: ip.len(),
            need: 20,
        });
    }
    let ihl = usize::from(b0 & 0x0f) * 4;
    if ihl < 20 {
        return Err(SegmentError::HeaderLength {
            what: "IPv4",
            value: ihl,
        });
    }
    if ip[9] != 6 {
        return Ok(None);
    }
    let frag_offset = u16::from_be_bytes([ip[6], ip[7]]) & 0x1fff;
    if frag_offset != 0 {
        return Ok(None);
    }
    let total = usize::from(u16::from_be_bytes([ip[2], ip[3]]));
    // The stored bytes may be fewer (a snap length) or more (padding) than
    // the IP length; the IP length says how much payload there was.
    let need = ihl + 20;
    if ip.len() < need || total < need {
        return Err(SegmentError::Short {
            len: ip.len().min(total),
            need,
        });
    }
    let t = &ip[ihl..];
    let doff = usize::from(t[12] >> 4) * 4;
    if doff < 20 || ihl + doff > total {
        return Err(SegmentError::HeaderLength {
            what: "TCP",
            value: doff,
        });
    }
    let flags = t[13];
    let addr = |i: usize| Ipv4Addr::new(ip[i], ip[i + 1], ip[i + 2], ip[i + 3]);
    Ok(Some(Segment {
        at_us,
        flow: Flow {
            src: addr(12),
            sport: u16::from_be_bytes([t[0], t[1]]),
            dst: addr(16),
            dport: u16::from_be_bytes([t[2], t[3]]),
        },
        seq: u32::from_be_bytes([t[4], t[5], t[6], t[7]]),
        len: u32::try_from(total - ihl - doff).unwrap_or(u32::MAX),
        syn: flags & 0x02 != 0,
        fin: flags & 0x01 != 0,
        rst: flags & 0x04 != 0,
    }))
}

/// What a retransmitted segment was.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Every byte had been delivered before: the original got through.
    Spurious,
    /// No byte had been delivered: it filled a hole the link left.
    Genuine,
    /// Some bytes had been delivered, some not.
    Partial,
}

/// One retransmission the link delivered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Retransmission {
    /// When it was delivered, µs.
    pub at_us: u64,
    /// Its direction.
    pub flow: Flow,
    /// Bytes from the flow's first data byte (the one after its SYN, if the
    /// capture has the SYN; else the first byte seen).
    pub offset: u64,
    /// Payload bytes (0 for a SYN).
    pub len: u32,
    /// A repeated SYN (or SYN-ACK).
    pub syn: bool,
    /// Spurious, genuine or partial.
    pub verdict: Verdict,
    /// For a spurious one: how long after the same bytes' first delivery
    /// it arrived, µs. Both copies waiting in one queue (a radio promotion)
    /// arrive close together; a late duplicate, a round trip or more apart.
    pub after_original_us: Option<u64>,
}

/// Per-direction state: the bytes delivered so far, in unwrapped sequence
/// space relative to the first sequence number seen.
#[derive(Debug, Default)]
struct FlowState {
    /// Sequence number of the first data byte (one past the SYN's, when the
    /// capture has it; else the first seen).
    base: u32,
    /// Whether a SYN was delivered, and its sequence number.
    syn: Option<u32>,
    /// The highest unwrapped end delivered, to unwrap the next one near it.
    high: u64,
    /// Delivered ranges `[start, end)`, sorted, disjoint, with the time
    /// each was first delivered (the time of the segment that began it).
    delivered: Vec<(u64, u64, u64)>,
}

impl FlowState {
    /// `seq` as an offset from `base`, taken as the one nearest `high`
    /// (sequence numbers wrap every 4 GiB).
    fn unwrap(&self, seq: u32) -> u64 {
        let rel = seq.wrapping_sub(self.base);
        let high_lo = self.high as u32;
        let delta = rel.wrapping_sub(high_lo) as i32;
        let v = self.high as i64 + i64::from(delta);
        v.max(0) as u64
    }

    /// Bytes of `[s, e)` already delivered, and when the earliest of them
    /// first was.
    fn covered(&self, s: u64, e: u64) -> (u64, Option<u64>) {
        let mut n = 0;
        let mut first: Option<u64> = None;
        for &(a, b, t) in &self.delivered {
            if b <= s {
                continue;
            }
            if a >= e {
                break;
            }
            n += b.min(e) - a.max(s);
            first = Some(first.map_or(t, |f| f.min(t)));
        }
        (n, first)
    }

    /// Records `[s, e)` as delivered at `t`.
    fn add(&mut self, s: u64, e: u64, t: u64) {
        let mut merged = (s, e, t);
        let mut out = Vec::with_capacity(self.delivered.len() + 1);
        let mut placed = false;
        for &(a, b, ta) in &self.delivered {
            if b < merged.0 {
                out.push((a, b, ta));
            } else if a > merged.1 {
                if !placed {
                    out.push(merged);
                    placed = true;
                }
                out.push((a, b, ta));
            } else {
                merged = (a.min(merged.0), b.max(merged.1), ta.min(merged.2));
            }
        }
        if !placed {
            out.push(merged);
        }
        self.delivered = out;
        self.high = self.high.max(e);
    }
}

/// Finds the retransmissions among `segments` (in delivery order, both
/// directions mixed or not) and says which were spurious.
pub fn retransmissions<I: IntoIterator<Item = Segment>>(segments: I) -> Vec<Retransmission> {
    let mut flows: HashMap<Flow, FlowState> = HashMap::new();
    let mut out = Vec::new();
    for seg in segments {
        if seg.rst {
            continue;
        }
        let st = flows.entry(seg.flow).or_insert_with(|| FlowState {
            base: seg.seq,
            ..FlowState::default()
        });
        if seg.syn {
            match st.syn {
                Some(s) if s == seg.seq => out.push(Retransmission {
                    at_us: seg.at_us,
                    flow: seg.flow,
                    offset: 0,
                    len: 0,
                    syn: true,
                    verdict: Verdict::Spurious,
                    after_original_us: None,
                }),
                Some(_) => {
                    // A new connection on the same ports (a reused
                    // four-tuple): start over.
                    *st = FlowState {
                        base: seg.seq.wrapping_add(1),
                        syn: Some(seg.seq),
                        ..FlowState::default()
                    };
                }
                None if st.delivered.is_empty() => {
                    st.base = seg.seq.wrapping_add(1);
                    st.syn = Some(seg.seq);
                }
                None => {}
            }
        }
        // Data starts one past the SYN's sequence number.
        let data_seq = if seg.syn {
            seg.seq.wrapping_add(1)
        } else {
            seg.seq
        };
        if seg.len == 0 {
            continue;
        }
        let s = st.unwrap(data_seq);
        let e = s + u64::from(seg.len);
        let (covered, first) = st.covered(s, e);
        let verdict = if covered == u64::from(seg.len) {
            Some(Verdict::Spurious)
        } else if covered > 0 {
            Some(Verdict::Partial)
        } else if e <= st.high {
            Some(Verdict::Genuine)
        } else {
            None
        };
        if let Some(verdict) = verdict {
            out.push(Retransmission {
                at_us: seg.at_us,
                flow: seg.flow,
                offset: s,
                len: seg.len,
                syn: false,
                verdict,
                after_original_us: match verdict {
                    Verdict::Spurious => first.map(|t| seg.at_us.saturating_sub(t)),
                    _ => None,
                },
            });
        }
        st.add(s, e, seg.at_us);
    }
    out
}

/// Counts of one set of retransmissions.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counts {
    /// Data segments resent although delivered before.
    pub spurious: u32,
    /// Data segments that filled a hole.
    pub genuine: u32,
    /// Partly delivered before.
    pub partial: u32,
    /// SYNs (or SYN-ACKs) delivered twice.
    pub spurious_syn: u32,
}

impl Counts {
    /// Tallies `rs`.
    pub fn of<'a, I: IntoIterator<Item = &'a Retransmission>>(rs: I) -> Counts {
        let mut c = Counts::default();
        for r in rs {
            match (r.syn, r.verdict) {
                (true, _) => c.spurious_syn += 1,
                (false, Verdict::Spurious) => c.spurious += 1,
                (false, Verdict::Genuine) => c.genuine += 1,
                (false, Verdict::Partial) => c.partial += 1,
            }
        }
        c
    }

    /// Every retransmission.
    pub fn total(&self) -> u32 {
        self.spurious + self.genuine + self.partial + self.spurious_syn
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flow() -> Flow {
        Flow {
            src: Ipv4Addr::new(10, 0, 0, 2),
            sport: 443,
            dst: Ipv4Addr::new(10, 0, 0, 1),
            dport: 40000,
        }
    }

    fn seg(at_us: u64, seq: u32, len: u32) -> Segment {
        Segment {
            at_us,
            flow: flow(),
            seq,
            len,
            syn: false,
            fin: false,
            rst: false,
        }
    }

    fn syn(at_us: u64, seq: u32) -> Segment {
        Segment {
            syn: true,
            ..seg(at_us, seq, 0)
        }
    }

    /// An IPv4/TCP packet with `payload` bytes of data.
    fn packet(seq: u32, flags: u8, payload: usize) -> Vec<u8> {
        let total = 20 + 20 + payload;
        let mut p = vec![0u8; total];
        p[0] = 0x45;
        p[2..4].copy_from_slice(&(total as u16).to_be_bytes());
        p[9] = 6;
        p[12..16].copy_from_slice(&[10, 0, 0, 2]);
        p[16..20].copy_from_slice(&[10, 0, 0, 1]);
        p[20..22].copy_from_slice(&443u16.to_be_bytes());
        p[22..24].copy_from_slice(&40000u16.to_be_bytes());
        p[24..28].copy_from_slice(&seq.to_be_bytes());
        p[32] = 5 << 4;
        p[33] = flags;
        p
    }

    #[test]
    fn reads_a_tcp_segment_from_an_ipv4_packet() {
        let s = segment(7, &packet(1000, 0x18, 1448)).unwrap().unwrap();
        assert_eq!(s.flow, flow());
        assert_eq!((s.seq, s.len, s.syn, s.fin), (1000, 1448, false, false));
        let s = segment(7, &packet(5, 0x02, 0)).unwrap().unwrap();
        assert!(s.syn);
        // A capture truncated to the headers still says how long the
        // payload was (from the IP length).
        let p = packet(1000, 0x10, 1448);
        assert_eq!(segment(0, &p[..60]).unwrap().unwrap().len, 1448);
        // UDP is not TCP.
        let mut u = packet(0, 0, 10);
        u[9] = 17;
        assert_eq!(segment(0, &u).unwrap(), None);
    }

    #[test]
    fn malformed_packets_are_errors_not_panics() {
        assert!(matches!(segment(0, &[]), Err(SegmentError::Short { .. })));
        assert_eq!(segment(0, &[0x60; 40]), Err(SegmentError::NotIpv4(6)));
        let mut p = packet(0, 0, 0);
        p[0] = 0x44;
        assert!(matches!(
            segment(0, &p),
            Err(SegmentError::HeaderLength { .. })
        ));
        let mut p = packet(0, 0, 0);
        p[32] = 15 << 4; // data offset past the packet
        assert!(matches!(
            segment(0, &p),
            Err(SegmentError::HeaderLength { .. })
        ));
        let p = packet(0, 0x10, 100);
        for n in 0..p.len() {
            let _ = segment(0, &p[..n]);
        }
    }

    #[test]
    fn a_duplicate_of_delivered_bytes_is_spurious_and_a_hole_filled_is_genuine() {
        let r = retransmissions([
            syn(0, 99),
            seg(10, 100, 1000),
            // 1100..2100 lost on the link; 2100..3100 arrives.
            seg(20, 2100, 1000),
            // The sender resends the lost segment: genuine.
            seg(300, 1100, 1000),
            // ... and, its timer firing while the first copy waited, the
            // first segment again: spurious.
            seg(310, 100, 1000),
            // Half old, half new.
            seg(320, 2600, 1000),
        ]);
        let v: Vec<_> = r.iter().map(|r| (r.offset, r.verdict)).collect();
        assert_eq!(
            v,
            vec![
                (1000, Verdict::Genuine),
                (0, Verdict::Spurious),
                (2500, Verdict::Partial)
            ]
        );
        assert_eq!(r[1].after_original_us, Some(300));
        let c = Counts::of(&r);
        assert_eq!((c.spurious, c.genuine, c.partial, c.total()), (1, 1, 1, 3));
    }

    #[test]
    fn in_order_data_and_a_new_connection_on_the_same_ports_are_not_retransmissions() {
        let mut segs = vec![syn(0, 1)];
        for i in 0..50u32 {
            segs.push(seg(u64::from(i), 2 + i * 1448, 1448));
        }
        // The four-tuple is reused with a new initial sequence number.
        segs.push(syn(1000, 7_000_000));
        segs.push(seg(1001, 7_000_001, 1448));
        assert!(retransmissions(segs).is_empty());
    }

    #[test]
    fn a_syn_delivered_twice_is_a_spurious_syn_retransmission() {
        let r = retransmissions([syn(0, 5), syn(2, 5), seg(3, 6, 10)]);
        assert_eq!(r.len(), 1);
        assert!(r[0].syn);
        assert_eq!(Counts::of(&r).spurious_syn, 1);
    }

    #[test]
    fn sequence_numbers_wrap() {
        let start = u32::MAX - 1500;
        let r = retransmissions([
            syn(0, start),
            seg(1, start.wrapping_add(1), 1000),
            seg(2, start.wrapping_add(1001), 1000), // crosses 2^32
            seg(3, start.wrapping_add(2001), 1000),
            seg(9, start.wrapping_add(1001), 1000), // again: spurious
        ]);
        assert_eq!(r.len(), 1);
        assert_eq!((r[0].offset, r[0].verdict), (1000, Verdict::Spurious));
    }
}
