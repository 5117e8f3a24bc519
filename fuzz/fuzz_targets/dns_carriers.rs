//! EDNS option payloads, OPT RDATA and TXT records from the network.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mewa_hint::dns;

fuzz_target!(|data: &[u8]| {
    let _ = dns::HintRequest::decode(data);
    let _ = dns::HintResponse::decode(data);
    if let Ok(opts) = dns::decode_options(data) {
        assert_eq!(dns::encode_options(&opts).expect("re-encode"), data);
    }
    let _ = dns::decode_txt(data);
    if let Ok(s) = std::str::from_utf8(data) {
        let _ = dns::parse_txt_query_name(s);
    }
});
