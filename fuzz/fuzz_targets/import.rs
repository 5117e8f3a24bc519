//! HAR, DevTools-log and trace importers on arbitrary bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mewa_hint::import;

fuzz_target!(|data: &[u8]| {
    let _ = import::import_har(data, "fuzz");
    let _ = import::import_cdp(data, "fuzz");
    let _ = import::computation_ms_from_trace(data, "fuzz");
});
