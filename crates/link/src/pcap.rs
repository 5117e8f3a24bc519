//! pcap files of what crosses the emulator, readable by tcpdump and Wireshark.
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
}
