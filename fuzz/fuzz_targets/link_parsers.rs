//! Link traces, delay traces, event logs and link settings typed by users.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mewa_link::core::{self, trace, QueueSpec};
use mewa_link::eventlog::EventLog;

fuzz_target!(|data: &[u8]| {
    let Ok(s) = std::str::from_utf8(data) else { return };
    if let Ok(t) = trace::DeliveryTrace::parse(s) {
        // Walking and counting must agree and never panic.
        let end = std::time::Duration::from_millis(50);
        let _ = t.capacity_bytes(std::time::Duration::ZERO, end);
    }
    let _ = trace::DelayTrace::parse(s);
    let _ = EventLog::parse(s);
    let _ = s.parse::<QueueSpec>();
    let _ = core::parse_duration(s);
    let _ = core::parse_rate(s);
});
