//! `/proc/net/netstat` and `/proc/net/snmp` as the lab reads them
//! (`mewa_probe::tcpinfo::counters`): any text is parsed or refused without
//! panicking, and a snapshot minus itself is all zeros.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mewa_probe::tcpinfo::counters::{parse_sections, Counters, RepairCounters};

fuzz_target!(|data: &[u8]| {
    let Ok(s) = std::str::from_utf8(data) else { return };
    let _ = parse_sections("netstat", s);
    // Two files in one input: netstat, a NUL, snmp.
    let (netstat, snmp) = s.split_once('\0').unwrap_or((s, s));
    if let Ok(c) = Counters::parse(netstat, snmp) {
        let zero = c.since(&c);
        assert!(zero.tcp.values().chain(zero.tcp_ext.values()).all(|&v| v == 0));
        assert_eq!(zero.repair(), RepairCounters::default());
        assert_eq!(c.since(&Counters::default()), c);
    }
});
