//! The origin's HPACK request decoder alone: any block must decode or fail
//! without panicking, keep at most its limit of fields, and cost time
//! linear in its length (run with `-timeout=1`: a block that copies a
//! table entry per two-byte reference past the limit would exceed it; see
//! `Decoder::decode`). The input is split in two blocks so that the second
//! sees the dynamic table the first left.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mewa_origin::h2::hpack::Decoder;

fuzz_target!(|data: &[u8]| {
    let Some((&sizes, rest)) = data.split_first() else {
        return;
    };
    // Table size 0..=8 KB, list limit 256 B..=16 KB, from the first byte.
    let allowed = usize::from(sizes & 0x0f) * 512;
    let limit = 256 + usize::from(sizes >> 4) * 1024;
    let cut = rest.len() / 2;
    let mut d = Decoder::new(allowed);
    for block in [&rest[..cut], &rest[cut..]] {
        if let Ok(f) = d.decode(block, limit) {
            let kept: usize = f.list.iter().map(|(n, v)| n.len() + v.len() + 32).sum();
            assert!(kept <= limit, "kept {kept} bytes over the limit {limit}");
            assert_eq!(f.too_large, f.size > limit);
        }
    }
});
