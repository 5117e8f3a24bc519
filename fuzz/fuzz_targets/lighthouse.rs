//! The Lighthouse importer (a DevTools log with its trace) on arbitrary
//! bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let cut = data.first().map_or(0, |&n| usize::from(n)).min(data.len());
    let (log, trace) = data.split_at(cut);
    let _ = mewa_hint::import::import_lighthouse(log, trace, "fuzz");
});
