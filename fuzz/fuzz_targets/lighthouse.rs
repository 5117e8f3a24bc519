//! The Lighthouse importer (a DevTools log with its trace), and the tracer's
//! URL filter, on arbitrary bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let cut = data.first().map_or(0, |&n| usize::from(n)).min(data.len());
    let (log, trace) = data.split_at(cut);
    let _ = mewa_hint::import::import_lighthouse(log, trace, "fuzz");
    if let Ok(url) = std::str::from_utf8(data) {
        // What the filter lets through has a name for a host, per the same
        // parser a browser uses.
        if mewa_edge::tracer::popular_url_refusal(url).is_none() {
            let u = url::Url::parse(url).expect("accepted URLs parse");
            assert!(matches!(u.host(), Some(url::Host::Domain(_))), "{url}");
        }
    }
});
