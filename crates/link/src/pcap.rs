//! pcap files of what crosses the emulator, readable by tcpdump and Wireshark,
//! and read back by the lab's analyses ([`read_pcap`]).
//!
//! The classic libpcap format (microsecond timestamps, version 2.4) with link
//! type `LINKTYPE_RAW` (101): each record is a bare IPv4 or IPv6 packet, which
//! is exactly what a TUN device hands us.

use std::io::{self, Write};
use std::time::{SystemTime, UNIX_EPOCH};

/// `LINKTYPE_RAW`: raw IP, version read from the first nibble.
pub const LINKTYPE_RAW: u32 = 101;

/// Largest number of bytes stored per packet.
pub const SNAPLEN: u32 = 65_535;

/// Writes a pcap stream.
#[derive(Debug)]
pub struct PcapWriter<W: Write> {
    w: W,
}

impl<W: Write> PcapWriter<W> {
    /// Starts a stream: writes the global header.
    pub fn new(mut w: W) -> io::Result<Self> {
        let mut h = Vec::with_capacity(24);
        h.extend_from_slice(&0xa1b2_c3d4u32.to_le_bytes()); // magic, µs timestamps
        h.extend_from_slice(&2u16.to_le_bytes()); // version major
        h.extend_from_slice(&4u16.to_le_bytes()); // version minor
        h.extend_from_slice(&0i32.to_le_bytes()); // thiszone
        h.extend_from_slice(&0u32.to_le_bytes()); // sigfigs
        h.extend_from_slice(&SNAPLEN.to_le_bytes());
        h.extend_from_slice(&LINKTYPE_RAW.to_le_bytes());
        w.write_all(&h)?;
        Ok(PcapWriter { w })
    }

    /// Appends one packet captured at `ts` (truncated to [`SNAPLEN`] bytes).
    pub fn write_packet(&mut self, ts: SystemTime, data: &[u8]) -> io::Result<()> {
        let t = ts.duration_since(UNIX_EPOCH).unwrap_or_default();
        let incl = data.len().min(SNAPLEN as usize);
        let mut r = Vec::with_capacity(16 + incl);
        // pcap's 32-bit seconds run out in 2106.
        r.extend_from_slice(&(t.as_secs() as u32).to_le_bytes());
        r.extend_from_slice(&t.subsec_micros().to_le_bytes());
        r.extend_from_slice(&(incl as u32).to_le_bytes());
        r.extend_from_slice(&u32::try_from(data.len()).unwrap_or(u32::MAX).to_le_bytes());
        r.extend_from_slice(&data[..incl]);
        self.w.write_all(&r)
    }

    /// Flushes the underlying writer.
    pub fn flush(&mut self) -> io::Result<()> {
        self.w.flush()
    }

    /// The underlying writer.
    pub fn into_inner(self) -> W {
        self.w
    }
}

/// Why a pcap stream could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PcapError {
    /// Shorter than the 24-byte global header.
    #[error("not a pcap file: {0} bytes, shorter than the 24-byte header")]
    TooShort(usize),
    /// The magic number is not libpcap's (microsecond or nanosecond, either
    /// byte order).
    #[error("not a pcap file: magic number {0:#010x} (pcapng is not supported; convert with `editcap -F pcap`)")]
    Magic(u32),
    /// A link type other than raw IP, which is what mewa writes.
    #[error("pcap link type {0}: only raw IP (101) is read, as mewa's link writes it")]
    LinkType(u32),
    /// A record runs past the end of the file (a capture cut short).
    #[error("pcap record {index} at byte {offset} is cut short: it claims {claimed} bytes, {left} remain")]
    Truncated {
        /// Which record (0-based).
        index: usize,
        /// Where its header starts.
        offset: usize,
        /// Bytes its header says it holds.
        claimed: usize,
        /// Bytes left in the file.
        left: usize,
    },
}

/// One packet read back from a pcap stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PcapRecord<'a> {
    /// Capture time, µs since the Unix epoch.
    pub at_us: u64,
    /// The bytes stored (a raw IP packet, maybe truncated to the snap length).
    pub data: &'a [u8],
    /// The packet's length on the wire.
    pub orig_len: u32,
}

/// Reads every record of a classic pcap stream of raw IP packets (what
/// [`PcapWriter`] writes). A capture cut short by a crash ends in a partial
/// record; that is an error naming where, so a caller can choose to keep the
/// records before it ([`read_pcap_lossy`]).
pub fn read_pcap(bytes: &[u8]) -> Result<Vec<PcapRecord<'_>>, PcapError> {
    let (records, err) = read_pcap_lossy(bytes)?;
    match err {
        Some(e) => Err(e),
        None => Ok(records),
    }
}

/// Like [`read_pcap`], but a record cut short at the end is returned as the
/// second value beside the complete records before it, rather than failing
/// the whole read: an emulator stopped mid-write leaves such a tail.
pub fn read_pcap_lossy(
    bytes: &[u8],
) -> Result<(Vec<PcapRecord<'_>>, Option<PcapError>), PcapError> {
    if bytes.len() < 24 {
        return Err(PcapError::TooShort(bytes.len()));
    }
    let magic_le = u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]);
    let (big, nanos) = match magic_le {
        0xa1b2_c3d4 => (false, false),
        0xa1b2_3c4d => (false, true),
        0xd4c3_b2a1 => (true, false),
        0x4d3c_b2a1 => (true, true),
        m => return Err(PcapError::Magic(m)),
    };
    let u32_at = |b: &[u8], i: usize| {
        let w = [b[i], b[i + 1], b[i + 2], b[i + 3]];
        if big {
            u32::from_be_bytes(w)
        } else {
            u32::from_le_bytes(w)
        }
    };
    let linktype = u32_at(bytes, 20) & 0x0fff_ffff;
    if linktype != LINKTYPE_RAW && linktype != 228 {
        return Err(PcapError::LinkType(linktype));
    }
    let mut out = Vec::new();
    let mut off = 24;
    while off < bytes.len() {
        let left = bytes.len() - off;
        if left < 16 {
            let e = PcapError::Truncated {
                index: out.len(),
                offset: off,
                claimed: 16,
                left,
            };
            return Ok((out, Some(e)));
        }
        let secs = u64::from(u32_at(bytes, off));
        let frac = u64::from(u32_at(bytes, off + 4));
        let incl = u32_at(bytes, off + 8) as usize;
        let orig_len = u32_at(bytes, off + 12);
        let body = off + 16;
        if incl > bytes.len() - body {
            let e = PcapError::Truncated {
                index: out.len(),
                offset: off,
                claimed: incl,
                left: bytes.len() - body,
            };
            return Ok((out, Some(e)));
        }
        let sub_us = if nanos { frac / 1000 } else { frac };
        out.push(PcapRecord {
            at_us: secs.saturating_mul(1_000_000).saturating_add(sub_us),
            data: &bytes[body..body + incl],
            orig_len,
        });
        off = body + incl;
    }
    Ok((out, None))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn header_and_record_bytes() {
        let mut p = PcapWriter::new(Vec::new()).unwrap();
        let ts = UNIX_EPOCH + Duration::new(1_700_000_000, 123_456_789);
        p.write_packet(ts, &[0x45, 0, 0, 20]).unwrap();
        let b = p.into_inner();
        assert_eq!(
            &b[..24],
            &[
                0xd4, 0xc3, 0xb2, 0xa1, 2, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0, 0, 101,
                0, 0, 0
            ]
        );
        let mut rec = Vec::new();
        rec.extend_from_slice(&1_700_000_000u32.to_le_bytes());
        rec.extend_from_slice(&123_456u32.to_le_bytes());
        rec.extend_from_slice(&4u32.to_le_bytes());
        rec.extend_from_slice(&4u32.to_le_bytes());
        rec.extend_from_slice(&[0x45, 0, 0, 20]);
        assert_eq!(&b[24..], &rec[..]);
    }

    #[test]
    fn long_packets_are_truncated_not_lost() {
        let mut p = PcapWriter::new(Vec::new()).unwrap();
        p.write_packet(UNIX_EPOCH, &vec![0u8; 70_000]).unwrap();
        let b = p.into_inner();
        assert_eq!(u32::from_le_bytes([b[32], b[33], b[34], b[35]]), SNAPLEN);
        assert_eq!(u32::from_le_bytes([b[36], b[37], b[38], b[39]]), 70_000);
        assert_eq!(b.len(), 24 + 16 + SNAPLEN as usize);
    }

    #[test]
    fn what_the_writer_writes_reads_back() {
        let mut p = PcapWriter::new(Vec::new()).unwrap();
        let t0 = UNIX_EPOCH + Duration::new(1_700_000_000, 5_000);
        p.write_packet(t0, &[0x45, 1, 2]).unwrap();
        p.write_packet(t0 + Duration::from_micros(250), &[0x45; 60])
            .unwrap();
        let b = p.into_inner();
        let r = read_pcap(&b).unwrap();
        assert_eq!(r.len(), 2);
        assert_eq!(r[0].at_us, 1_700_000_000_000_005);
        assert_eq!(r[0].data, &[0x45, 1, 2]);
        assert_eq!(r[1].at_us - r[0].at_us, 250);
        assert_eq!(r[1].data.len(), 60);
        assert_eq!(r[1].orig_len, 60);
    }

    #[test]
    fn bad_files_are_refused_with_the_reason() {
        assert_eq!(read_pcap(&[0; 10]), Err(PcapError::TooShort(10)));
        let mut b = PcapWriter::new(Vec::new()).unwrap().into_inner();
        b[0] = 0x0a;
        assert!(matches!(read_pcap(&b), Err(PcapError::Magic(_))));
        let mut b = PcapWriter::new(Vec::new()).unwrap().into_inner();
        b[20] = 1; // Ethernet
        assert_eq!(read_pcap(&b), Err(PcapError::LinkType(1)));
    }

    #[test]
    fn a_capture_cut_short_keeps_its_complete_records() {
        let mut p = PcapWriter::new(Vec::new()).unwrap();
        p.write_packet(UNIX_EPOCH, &[0x45; 40]).unwrap();
        p.write_packet(UNIX_EPOCH, &[0x45; 40]).unwrap();
        let b = p.into_inner();
        let cut = &b[..b.len() - 7];
        assert!(matches!(
            read_pcap(cut),
            Err(PcapError::Truncated { index: 1, .. })
        ));
        let (r, e) = read_pcap_lossy(cut).unwrap();
        assert_eq!(r.len(), 1);
        assert!(e.is_some());
        // Every prefix reads without panicking.
        for n in 0..b.len() {
            let _ = read_pcap_lossy(&b[..n]);
        }
    }
}
