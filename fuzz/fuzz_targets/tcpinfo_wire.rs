//! The readers of kernel bytes (`mewa_probe::tcpinfo::wire`):
//! `struct tcp_info` of any length and NETLINK_SOCK_DIAG replies must take
//! any bytes without panicking, and the recorder whatever they yield.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mewa_probe::tcpinfo::wire::{self, TcpInfo};
use mewa_probe::tcpinfo::{Filter, Limits, Recorder};

fuzz_target!(|data: &[u8]| {
    if let Ok(i) = TcpInfo::parse(data) {
        // A field is present only if its bytes were.
        assert!(data.len() >= TcpInfo::MIN_LEN);
        assert_eq!(i.total_rto_time.is_some(), data.len() >= TcpInfo::KNOWN_LEN);
        assert_eq!(i.pacing_rate.is_some(), data.len() >= 112);
    }
    // Take the sequence number from where a first header has it, so that
    // inputs get past the check and into the messages.
    let seq = data
        .get(8..12)
        .and_then(|b| b.try_into().ok())
        .map_or(0, u32::from_ne_bytes);
    if let Ok(chunk) = wire::parse_dump(data, seq) {
        let limits = Limits {
            sockets: 4,
            per_socket: 2,
            total: 6,
        };
        let mut rec = Recorder::new(Filter::Port(443), limits);
        rec.observe(0, &chunk.sockets);
        rec.observe(20_000, &chunk.sockets);
        let samples = rec.finish();
        assert!(samples.sockets.len() <= 4);
        assert!(samples.sockets.iter().map(|s| s.samples.len()).sum::<usize>() <= 6);
    }
});
