//! HTTP/2 frame layout (RFC 9113 §4, §6): the 9-byte header, type and flag
//! numbers, error codes, and writers for the frames a server sends.
//!
//! Pure byte handling; the connection logic is in [`super::conn`].

use bytes::{BufMut, BytesMut};

/// The client connection preface (RFC 9113 §3.4).
pub const PREFACE: &[u8; 24] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// Length of a frame header.
pub const HEADER_LEN: usize = 9;

/// Default and smallest `SETTINGS_MAX_FRAME_SIZE` (RFC 9113 §6.5.2).
pub const DEFAULT_MAX_FRAME: u32 = 16_384;

/// Largest `SETTINGS_MAX_FRAME_SIZE` a peer may announce.
pub const MAX_MAX_FRAME: u32 = (1 << 24) - 1;

/// Largest flow-control window (RFC 9113 §6.9.1).
pub const MAX_WINDOW: i64 = (1 << 31) - 1;

/// Initial flow-control window of a connection and of new streams.
pub const DEFAULT_WINDOW: i64 = 65_535;

/// Frame types (RFC 9113 §6).
pub mod kind {
    /// DATA.
    pub const DATA: u8 = 0x0;
    /// HEADERS.
    pub const HEADERS: u8 = 0x1;
    /// PRIORITY (deprecated signalling, still parsed for its errors).
    pub const PRIORITY: u8 = 0x2;
    /// RST_STREAM.
    pub const RST_STREAM: u8 = 0x3;
    /// SETTINGS.
    pub const SETTINGS: u8 = 0x4;
    /// PUSH_PROMISE (never valid from a client).
    pub const PUSH_PROMISE: u8 = 0x5;
    /// PING.
    pub const PING: u8 = 0x6;
    /// GOAWAY.
    pub const GOAWAY: u8 = 0x7;
    /// WINDOW_UPDATE.
    pub const WINDOW_UPDATE: u8 = 0x8;
    /// CONTINUATION.
    pub const CONTINUATION: u8 = 0x9;
}

/// Frame flags.
pub mod flag {
    /// END_STREAM (DATA, HEADERS).
    pub const END_STREAM: u8 = 0x1;
    /// ACK (SETTINGS, PING).
    pub const ACK: u8 = 0x1;
    /// END_HEADERS (HEADERS, CONTINUATION).
    pub const END_HEADERS: u8 = 0x4;
    /// PADDED (DATA, HEADERS).
    pub const PADDED: u8 = 0x8;
    /// PRIORITY (HEADERS).
    pub const PRIORITY: u8 = 0x20;
}

/// SETTINGS identifiers (RFC 9113 §6.5.2).
pub mod setting {
    /// SETTINGS_HEADER_TABLE_SIZE.
    pub const HEADER_TABLE_SIZE: u16 = 0x1;
    /// SETTINGS_ENABLE_PUSH.
    pub const ENABLE_PUSH: u16 = 0x2;
    /// SETTINGS_MAX_CONCURRENT_STREAMS.
    pub const MAX_CONCURRENT_STREAMS: u16 = 0x3;
    /// SETTINGS_INITIAL_WINDOW_SIZE.
    pub const INITIAL_WINDOW_SIZE: u16 = 0x4;
    /// SETTINGS_MAX_FRAME_SIZE.
    pub const MAX_FRAME_SIZE: u16 = 0x5;
    /// SETTINGS_MAX_HEADER_LIST_SIZE.
    pub const MAX_HEADER_LIST_SIZE: u16 = 0x6;
}

/// Error codes (RFC 9113 §7).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    /// Graceful close.
    NoError = 0x0,
    /// Generic protocol violation.
    Protocol = 0x1,
    /// Implementation fault.
    Internal = 0x2,
    /// Flow-control limits broken.
    FlowControl = 0x3,
    /// A frame on a closed stream.
    StreamClosed = 0x5,
    /// A frame of the wrong size.
    FrameSize = 0x6,
    /// Stream refused before any processing (safe to retry).
    RefusedStream = 0x7,
    /// The stream is no longer needed (what a browser resets with).
    Cancel = 0x8,
    /// HPACK state cannot be kept in sync.
    Compression = 0x9,
    /// The peer is generating excessive load.
    EnhanceYourCalm = 0xb,
}

/// A parsed frame header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Head {
    /// Payload length.
    pub len: usize,
    /// Frame type.
    pub kind: u8,
    /// Flags.
    pub flags: u8,
    /// Stream identifier, reserved bit cleared.
    pub stream: u32,
}

impl Head {
    /// Reads a header from the first 9 bytes; `None` if fewer are given.
    pub fn parse(b: &[u8]) -> Option<Head> {
        let h: &[u8; HEADER_LEN] = b.get(..HEADER_LEN)?.try_into().ok()?;
        Some(Head {
            len: (usize::from(h[0]) << 16) | (usize::from(h[1]) << 8) | usize::from(h[2]),
            kind: h[3],
            flags: h[4],
            stream: u32::from_be_bytes([h[5], h[6], h[7], h[8]]) & 0x7fff_ffff,
        })
    }

    /// Whether `f` is set.
    pub fn has(&self, f: u8) -> bool {
        self.flags & f != 0
    }
}

/// Writes a frame header.
pub fn put_head(out: &mut BytesMut, len: usize, kind: u8, flags: u8, stream: u32) {
    debug_assert!(len <= MAX_MAX_FRAME as usize);
    // Lengths are bounded by the peer's max frame size (< 2^24).
    let len = u32::try_from(len).unwrap_or(MAX_MAX_FRAME) & 0x00ff_ffff;
    out.put_slice(&len.to_be_bytes()[1..]);
    out.put_u8(kind);
    out.put_u8(flags);
    out.put_u32(stream & 0x7fff_ffff);
}

/// A SETTINGS frame with the given pairs.
pub fn put_settings(out: &mut BytesMut, pairs: &[(u16, u32)]) {
    put_head(out, pairs.len() * 6, kind::SETTINGS, 0, 0);
    for &(id, v) in pairs {
        out.put_u16(id);
        out.put_u32(v);
    }
}

/// A SETTINGS acknowledgement.
pub fn put_settings_ack(out: &mut BytesMut) {
    put_head(out, 0, kind::SETTINGS, flag::ACK, 0);
}

/// A PING acknowledgement echoing `data`.
pub fn put_ping_ack(out: &mut BytesMut, data: &[u8; 8]) {
    put_head(out, 8, kind::PING, flag::ACK, 0);
    out.put_slice(data);
}

/// A WINDOW_UPDATE.
pub fn put_window_update(out: &mut BytesMut, stream: u32, increment: u32) {
    put_head(out, 4, kind::WINDOW_UPDATE, 0, stream);
    out.put_u32(increment & 0x7fff_ffff);
}

/// A RST_STREAM.
pub fn put_rst(out: &mut BytesMut, stream: u32, reason: Reason) {
    put_head(out, 4, kind::RST_STREAM, 0, stream);
    out.put_u32(reason as u32);
}

/// A GOAWAY with a short debug text.
pub fn put_goaway(out: &mut BytesMut, last_stream: u32, reason: Reason, debug: &str) {
    put_head(out, 8 + debug.len(), kind::GOAWAY, 0, 0);
    out.put_u32(last_stream & 0x7fff_ffff);
    out.put_u32(reason as u32);
    out.put_slice(debug.as_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn head_round_trip_clears_reserved_bit() {
        let mut b = BytesMut::new();
        put_head(&mut b, 70_000, kind::DATA, flag::END_STREAM, 7);
        let mut raw = b.to_vec();
        raw[5] |= 0x80; // reserved bit set by a peer: ignored (RFC 9113 §4.1)
        let h = Head::parse(&raw).expect("9 bytes");
        assert_eq!(
            h,
            Head {
                len: 70_000,
                kind: kind::DATA,
                flags: flag::END_STREAM,
                stream: 7
            }
        );
        assert!(Head::parse(&raw[..8]).is_none());
    }

    #[test]
    fn goaway_layout() {
        let mut b = BytesMut::new();
        put_goaway(&mut b, 5, Reason::Protocol, "x");
        assert_eq!(
            b.as_ref(),
            &[0, 0, 9, 7, 0, 0, 0, 0, 0, 0, 0, 0, 5, 0, 0, 0, 1, b'x']
        );
    }
}
