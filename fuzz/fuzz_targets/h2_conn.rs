//! The origin's HTTP/2 connection core must take any bytes after the client
//! preface without panicking, answer whatever requests it accepts, and keep
//! its output bounded. The input is split in two so that frames also arrive
//! across read boundaries.
#![no_main]

use bytes::{Bytes, BytesMut};
use libfuzzer_sys::fuzz_target;
use mewa_origin::h2::{Config, Connection, Output};

fuzz_target!(|data: &[u8]| {
    let mut c = Connection::new(Config::default());
    let mut b = BytesMut::from(&b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\0\0\0\x04\0\0\0\0\0"[..]);
    c.recv(&mut b);
    let cut = data.first().map_or(0, |&n| usize::from(n)).min(data.len());
    for part in [&data[..cut], &data[cut..]] {
        b.extend_from_slice(part);
        c.recv(&mut b);
        while let Some(r) = c.next_request() {
            c.respond(r.stream, http::Response::new(Bytes::from_static(b"hello")));
        }
        let mut out = Output::default();
        c.poll_output(&mut out, 1 << 16);
        assert!(out.len() < 1 << 20);
    }
});
