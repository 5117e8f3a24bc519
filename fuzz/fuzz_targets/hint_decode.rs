//! The hint decoder must reject or accept any bytes without panicking, and
//! whatever it accepts must re-encode to a hint that decodes to the same value.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mewa_hint::wire::Hint;

fuzz_target!(|data: &[u8]| {
    if let Ok(h) = Hint::from_bytes(data) {
        let again = Hint::from_bytes(&h.to_bytes()).expect("re-encoded hint must decode");
        assert_eq!(again, h);
    }
});
