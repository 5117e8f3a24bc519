//! The client's reading of an edge's DNS answer (`resolve::read_answer`,
//! the step its UDP exchange takes on every datagram) must take any bytes
//! without panicking, take only a response with our query's ID, and never
//! report a hint larger than the datagram; a client cookie sent only ever
//! narrows what is taken (an answer with another one is refused).
#![no_main]

use libfuzzer_sys::fuzz_target;
use mewa_client::resolve::read_answer;

/// Names the client may have asked for: the fuzzer finds their wire form
/// in the question to get past the question check.
const HOSTS: [&str; 3] = ["a.example", "www.a.example", "x"];

fuzz_target!(|data: &[u8]| {
    let Some((&pick, bytes)) = data.split_first() else {
        return;
    };
    let host = HOSTS[usize::from(pick) % HOSTS.len()];
    // The ID the datagram carries, so that the check past it is reached;
    // and one it does not, which must never be taken.
    let id = bytes
        .get(..2)
        .map_or(0, |b| u16::from_be_bytes([b[0], b[1]]));
    let edge = std::net::SocketAddr::from(([127, 0, 0, 1], 53));
    let taken = read_answer(bytes, id, None, host, edge);
    if let Ok(Some(r)) = &taken {
        assert!(
            bytes.len() >= 12 && bytes[2] & 0x80 != 0,
            "took a non-response"
        );
        assert!(r.hint_bytes <= bytes.len());
        assert!(
            r.addrs.len() <= bytes.len() / 16,
            "more addresses than records"
        );
    }
    assert!(
        !matches!(
            read_answer(bytes, id.wrapping_add(1), None, host, edge),
            Ok(Some(_))
        ),
        "took an answer with another ID"
    );
    // With a client cookie sent, an answer's COOKIE option can only get it
    // refused, never taken where it would not be without one.
    if matches!(
        read_answer(bytes, id, Some(*b"mewacook"), host, edge),
        Ok(Some(_))
    ) {
        assert!(
            matches!(taken, Ok(Some(_))),
            "a client cookie made an answer acceptable"
        );
    }
});
