//! The client's side of a hint: any bytes that decode as a hint, with any
//! radio figures, must plan or fall back without panicking, and a plan
//! stays within its bounds (1..=MAX_CONNECTIONS connections, every listed
//! object assigned once).
#![no_main]

use libfuzzer_sys::fuzz_target;
use mewa_client::advice::{plan, Radio, MAX_CONNECTIONS};
use mewa_hint::wire::Hint;

fuzz_target!(|data: &[u8]| {
    if data.len() < 17 {
        return;
    }
    let (head, body) = data.split_at(17);
    let f = |i: usize| f64::from_le_bytes(head[i..i + 8].try_into().unwrap_or([0; 8]));
    let radio = Radio {
        bandwidth_bps: f(0),
        rtt_s: f(8),
    };
    let now = u64::from(head[16]) * 1_000_000;
    let Ok(hint) = Hint::from_bytes(body) else {
        return;
    };
    let url = hint
        .origins
        .first()
        .map_or_else(|| "http://a.example/".to_string(), |o| format!("http://{}/", o.host));
    if let Ok(p) = plan(&hint, &url, radio, now) {
        assert!((1..=MAX_CONNECTIONS).contains(&p.n), "n = {}", p.n);
        // (URL hash, connection index): every index names a connection.
        assert!(
            p.assignment.iter().all(|&(_, c)| c < p.n as usize),
            "{:?}",
            p.assignment
        );
    }
});
