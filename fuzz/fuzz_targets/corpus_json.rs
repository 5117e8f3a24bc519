//! Corpus files are user input: loading and validating must never panic, and
//! every page that validates must produce bodies of exactly its sizes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mewa_corpus::{body, Corpus, Scheme};

fuzz_target!(|data: &[u8]| {
    let Ok(c) = Corpus::from_json(data) else { return };
    if c.validate().is_err() {
        return;
    }
    for p in &c.pages {
        for o in &p.objects {
            if let Ok(b) = body(p, o.id, Scheme::Http) {
                assert_eq!(b.len() as u64, o.size);
            }
        }
    }
});
