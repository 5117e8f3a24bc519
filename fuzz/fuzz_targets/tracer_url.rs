//! The tracer's URL filter and the popularity count, differential against
//! the `url` crate (the WHATWG URL Standard, as the tracer's browser parses
//! URLs): a URL the filter lets through has a name for a host, and a page
//! counted under a queried name (`mewa_edge::dns::counted` and
//! `loaded_where_counted`, which decide what the tracer loads) is one a
//! browser would load from that name.
//! Were the two to differ, a client asking for a.example could have the
//! edge's browser load b.example.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let norm = |h: &str| h.trim_end_matches('.').to_ascii_lowercase();
    if mewa_edge::tracer::popular_url_refusal(text).is_none() {
        let u = url::Url::parse(text).expect("accepted URLs parse");
        assert!(matches!(u.host(), Some(url::Host::Domain(_))), "{text:?}");
    }
    // The name a client would have queried, read textually.
    let Some(queried) = mewa_hint::page::host_of(text) else {
        return;
    };
    let counted = mewa_edge::dns::counted(text.to_string(), &queried);
    if counted.is_some_and(|p| mewa_edge::dns::loaded_where_counted(&p)) {
        let u = url::Url::parse(text).expect("counted URLs parse");
        let Some(url::Host::Domain(loaded)) = u.host() else {
            panic!("counted without a name for a host: {text:?}");
        };
        assert_eq!(norm(loaded), norm(&queried), "{text:?}");
    }
});
