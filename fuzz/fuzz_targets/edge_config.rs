//! The edge's TOML configuration: any text parses or is refused with a
//! message naming the file, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mewa_edge::config::EdgeConfig;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Err(e) = EdgeConfig::parse(text, std::path::Path::new("fuzz.toml")) {
        assert!(e.to_string().contains("fuzz.toml"), "{e}");
    }
});
