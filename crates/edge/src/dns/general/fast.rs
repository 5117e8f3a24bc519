//! The common query, answered without building a `Message`.
//!
//! Nearly every query the edge sees has one shape: one question for `A` or
//! `AAAA`, class `IN`, a plain name, and at most an OPT record carrying at
//! most the hint request option. Parsing it into hickory-proto's `Message`
//! and serialising the answer from one took about 70 % of the edge's
//! user-space CPU per query, a fifth of all of it (perf under `mewa bench
//! edge`: allocations, name decoding, the OPT read byte by byte). This
//! module reads that shape straight off the wire, with bounds checks, and
//! writes the answer bytes directly. Anything else — another type or class, a
//! compressed or escaped name, a second question or record, other EDNS
//! options, trailing bytes, an answer that does not fit its limit, a hint
//! that needs the partial form — returns `None` and takes the general path
//! ([`crate::dns::Responder::answer_general`]), which decides every rule.
//!
//! The bytes written are the ones hickory-proto writes for the same answer
//! (header flags, the question copied, each answer's name as a pointer to
//! the question, the OPT record last), so the two paths are interchangeable;
//! a differential property test and the `edge_dns` fuzz target hold them to
//! it.

use std::net::IpAddr;

use mewa_hint::dns::{HintRequest, OPTION_CODE, OPTION_VERSION};
use mewa_hint::wire::Form;

use crate::dns::{Answered, HintServed, Outcome, Responder, Transport, PLAIN_UDP};
use crate::hints::HintBook;

/// DNS header length (RFC 1035 §4.1.1).
const HEADER: usize = 12;
/// QTYPE / TYPE values (RFC 1035 §3.2.2, RFC 3596, RFC 6891).
const TYPE_A: u16 = 1;
const TYPE_AAAA: u16 = 28;
const TYPE_OPT: u16 = 41;
/// CLASS IN.
const CLASS_IN: u16 = 1;
/// Longest name on the wire (RFC 1035 §3.1).
const MAX_NAME: usize = 255;
/// Header flag bits (RFC 1035 §4.1.1, RFC 4035 §3.2 for CD).
const QR: u16 = 0x8000;
const OPCODE: u16 = 0x7800;
const AA: u16 = 0x0400;
const RD: u16 = 0x0100;
const RA: u16 = 0x0080;
const CD: u16 = 0x0010;
/// Pointer to offset 12, where the question's name starts (RFC 1035
/// §4.1.4): every answer owner name is the question's name.
const NAME_POINTER: [u8; 2] = [0xC0, 0x0C];

fn be16(b: &[u8], at: usize) -> Option<u16> {
    let s = b.get(at..at.checked_add(2)?)?;
    Some(u16::from_be_bytes([s[0], s[1]]))
}

/// A query of the common shape, borrowed from the received bytes.
struct Simple<'q> {
    /// The 16-bit header flags (QR and opcode already checked zero).
    flags: u16,
    /// Name, type and class as received (copied into the answer).
    question: &'q [u8],
    /// The name, lower case, labels joined by dots, no trailing dot.
    host: HostBuf,
    qtype: u16,
    /// The OPT record: advertised UDP payload and the hint option's data.
    edns: Option<(u16, Option<&'q [u8]>)>,
}

/// A name as the zone keys it, on the stack.
struct HostBuf {
    buf: [u8; MAX_NAME],
    len: usize,
}

impl HostBuf {
    fn as_str(&self) -> Option<&str> {
        std::str::from_utf8(self.buf.get(..self.len)?).ok()
    }
}

/// Reads `q` if it has the common shape; `None` for anything else.
fn parse(q: &[u8]) -> Option<Simple<'_>> {
    let flags = be16(q, 2)?;
    if flags & (QR | OPCODE) != 0
        || be16(q, 4)? != 1
        || be16(q, 6)? != 0
        || be16(q, 8)? != 0
        || be16(q, 10)? > 1
    {
        return None;
    }
    let has_opt = be16(q, 10)? == 1;
    // The name: plain labels of letters, digits and hyphens (anything else
    // is written differently by hickory's `to_ascii`, so the general path
    // decides), at least one label, no compression.
    let mut host = HostBuf {
        buf: [0; MAX_NAME],
        len: 0,
    };
    let mut at = HEADER;
    loop {
        let len = usize::from(*q.get(at)?);
        if len == 0 {
            at += 1;
            break;
        }
        if len > 63 {
            return None; // a pointer or a reserved label type
        }
        let label = q.get(at + 1..at + 1 + len)?;
        if host.len > 0 {
            *host.buf.get_mut(host.len)? = b'.';
            host.len += 1;
        }
        for &c in label {
            if !(c.is_ascii_alphanumeric() || c == b'-') {
                return None;
            }
            *host.buf.get_mut(host.len)? = c.to_ascii_lowercase();
            host.len += 1;
        }
        at += 1 + len;
    }
    if host.len == 0 || at - HEADER > MAX_NAME {
        return None;
    }
    let qtype = be16(q, at)?;
    if !(qtype == TYPE_A || qtype == TYPE_AAAA) || be16(q, at + 2)? != CLASS_IN {
        return None;
    }
    let question = q.get(HEADER..at + 4)?;
    at += 4;
    let mut edns = None;
    if has_opt {
        // Root owner name, type OPT, CLASS = payload, TTL (extended rcode,
        // version, flags: none changes the answer), RDLENGTH, options.
        if *q.get(at)? != 0 || be16(q, at + 1)? != TYPE_OPT {
            return None;
        }
        // EDNS version 0 only; the general path answers BADVERS.
        if *q.get(at + 6)? != 0 {
            return None;
        }
        let payload = be16(q, at + 3)?;
        let rdlen = usize::from(be16(q, at + 9)?);
        let rdata = q.get(at + 11..at + 11 + rdlen)?;
        at += 11 + rdlen;
        let hint = match rdata.len() {
            0 => None,
            _ => {
                // Exactly one option, the hint request, filling the RDATA.
                let code = be16(rdata, 0)?;
                let len = usize::from(be16(rdata, 2)?);
                if code != OPTION_CODE || len + 4 != rdata.len() {
                    return None;
                }
                rdata.get(4..)
            }
        };
        edns = Some((payload, hint));
    }
    if at != q.len() {
        return None;
    }
    Some(Simple {
        flags,
        question,
        host,
        qtype,
        edns,
    })
}

/// One address as A or AAAA RDATA.
#[derive(Clone, Copy)]
enum Rdata {
    V4([u8; 4]),
    V6([u8; 16]),
}

impl Rdata {
    fn bytes(&self) -> &[u8] {
        match self {
            Rdata::V4(b) => b,
            Rdata::V6(b) => b,
        }
    }
}

/// What goes into the answer's OPT record after the addresses.
enum HintPart<'b> {
    /// No hint option asked for.
    None,
    /// The page is unknown.
    Unknown,
    /// The full hint.
    Full(&'b [u8]),
}

/// The fast path: `Some(answer)` when `query` has the common shape and the
/// answer needs no size decisions beyond "it fits"; `None` otherwise.
pub(crate) fn answer(
    r: &Responder,
    book: &HintBook,
    query: &[u8],
    transport: Transport,
) -> Option<Answered> {
    let s = parse(query)?;
    let host = s.host.as_str()?;
    let addrs = r.zone.get_normalized(host)?;
    let limit = match transport {
        Transport::Tcp => usize::from(u16::MAX),
        Transport::Udp => match s.edns {
            Some((p, _)) => usize::from(p.min(r.max_udp_payload)).max(PLAIN_UDP),
            None => PLAIN_UDP,
        },
    };
    let mut page = None;
    let (hint, served) = match s.edns.and_then(|(_, h)| h) {
        None => (HintPart::None, None),
        Some(data) => {
            // A malformed request is a FORMERR: the general path writes it.
            let request = HintRequest::decode(data).ok()?;
            let part = match book.by_url(&request.page_url) {
                None => (HintPart::Unknown, Some(HintServed::Unknown)),
                Some(h) => (
                    HintPart::Full(&h.full),
                    Some(HintServed::Hint {
                        bytes: h.full.len(),
                        form: Form::WithUrls,
                        compact: false,
                    }),
                ),
            };
            page = crate::dns::counted(request.page_url, host);
            part
        }
    };
    // The addresses of the asked family, as RDATA.
    let rdatas = addrs.iter().filter_map(|ip| match ip {
        IpAddr::V4(v4) if s.qtype == TYPE_A => Some(Rdata::V4(v4.octets())),
        IpAddr::V6(v6) if s.qtype == TYPE_AAAA => Some(Rdata::V6(v6.octets())),
        _ => None,
    });
    let (matching, rdata_bytes) = rdatas
        .clone()
        .fold((0usize, 0usize), |(n, b), r| (n + 1, b + r.bytes().len()));
    let option_len = match hint {
        HintPart::None => 0,
        HintPart::Unknown => 4 + 2,
        HintPart::Full(b) => 4 + 2 + b.len(),
    };
    let size = HEADER
        + s.question.len()
        + matching * 12
        + rdata_bytes
        + if s.edns.is_some() { 11 + option_len } else { 0 };
    // Too large: the general path truncates, or picks the partial form.
    if size > limit {
        return None;
    }
    let option_rdlen = u16::try_from(option_len).ok()?;
    let ancount = u16::try_from(matching).ok()?;

    let mut out = Vec::with_capacity(size);
    let mut flags = QR | AA | (s.flags & (RD | CD));
    if r.upstream {
        flags |= RA;
    }
    out.extend_from_slice(query.get(..2)?); // id
    out.extend_from_slice(&flags.to_be_bytes());
    out.extend_from_slice(&1u16.to_be_bytes());
    out.extend_from_slice(&ancount.to_be_bytes());
    out.extend_from_slice(&0u16.to_be_bytes());
    out.extend_from_slice(&u16::from(s.edns.is_some()).to_be_bytes());
    out.extend_from_slice(s.question);
    for rdata in rdatas {
        let rdata = rdata.bytes();
        out.extend_from_slice(&NAME_POINTER);
        out.extend_from_slice(&s.qtype.to_be_bytes());
        out.extend_from_slice(&CLASS_IN.to_be_bytes());
        out.extend_from_slice(&r.zone.ttl_s.to_be_bytes());
        out.extend_from_slice(&u16::try_from(rdata.len()).ok()?.to_be_bytes());
        out.extend_from_slice(rdata);
    }
    if s.edns.is_some() {
        out.push(0); // root
        out.extend_from_slice(&TYPE_OPT.to_be_bytes());
        let ours = r.max_udp_payload.max(PLAIN_UDP as u16);
        out.extend_from_slice(&ours.to_be_bytes());
        out.extend_from_slice(&[0, 0, 0, 0]); // rcode high, version, flags
        out.extend_from_slice(&option_rdlen.to_be_bytes());
        match hint {
            HintPart::None => {}
            HintPart::Unknown => {
                out.extend_from_slice(&OPTION_CODE.to_be_bytes());
                out.extend_from_slice(&2u16.to_be_bytes());
                out.extend_from_slice(&[OPTION_VERSION, 1]);
            }
            HintPart::Full(b) => {
                out.extend_from_slice(&OPTION_CODE.to_be_bytes());
                out.extend_from_slice(&u16::try_from(2 + b.len()).ok()?.to_be_bytes());
                out.extend_from_slice(&[OPTION_VERSION, 0]);
                out.extend_from_slice(b);
            }
        }
    }
    debug_assert_eq!(out.len(), size);
    Some(Answered {
        outcome: Outcome::Reply(out),
        page,
        hint: served,
        error: None,
        cookie: crate::cookie::Status::Absent,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dns::Zone;
    use crate::hints::tests::page;
    use crate::hints::HintPolicy;
    use proptest::prelude::*;
    use std::collections::HashMap;

    const HOSTS: [&str; 5] = [
        "www.a.example",
        "big.example",
        "v6.example",
        "dual.example",
        "many.example",
    ];

    fn book() -> HintBook {
        HintBook::build(
            vec![
                page("http://www.a.example/", 12, 30_000, 1),
                page("http://big.example/", 400, 20_000, 40),
                page("http://v6.example/", 60, 20_000, 6),
            ],
            &HashMap::new(),
            HintPolicy {
                alpha: 0.5,
                ttl_s: 300,
            },
            1_000,
        )
        .0
    }

    fn responder(max_udp_payload: u16, upstream: bool) -> Responder {
        let ip = |s: &str| s.parse::<IpAddr>().expect("test address");
        let many = (0..40).map(|i| ip(&format!("10.1.0.{i}"))).collect();
        Responder {
            zone: Zone::new(
                [
                    ("www.a.example".to_string(), vec![ip("10.0.0.2")]),
                    ("big.example.".to_string(), vec![ip("10.0.0.3")]),
                    ("v6.example".to_string(), vec![ip("2001:db8::1")]),
                    (
                        "dual.example".to_string(),
                        vec![ip("2001:db8::2"), ip("10.0.0.4"), ip("2001:db8::3")],
                    ),
                    ("many.example".to_string(), many),
                ],
                30,
            ),
            max_udp_payload,
            compact_payload: crate::dns::COMPACT_UDP_PAYLOAD.min(max_udp_payload),
            upstream,
        }
    }

    /// An OPT record: payload, TTL, options (code, data).
    type Opt = (u16, u32, Vec<(u16, Vec<u8>)>);

    /// A query written by hand, so that every field can be off.
    #[derive(Debug, Clone)]
    struct Q {
        id: u16,
        flags: u16,
        counts: Option<[u16; 4]>,
        labels: Vec<Vec<u8>>,
        qtype: u16,
        qclass: u16,
        edns: Option<Opt>,
        trailing: Vec<u8>,
    }

    impl Q {
        fn bytes(&self) -> Vec<u8> {
            let mut b = Vec::new();
            b.extend_from_slice(&self.id.to_be_bytes());
            b.extend_from_slice(&self.flags.to_be_bytes());
            let counts = self
                .counts
                .unwrap_or([1, 0, 0, u16::from(self.edns.is_some())]);
            for c in counts {
                b.extend_from_slice(&c.to_be_bytes());
            }
            for l in &self.labels {
                b.push(l.len() as u8);
                b.extend_from_slice(l);
            }
            b.push(0);
            b.extend_from_slice(&self.qtype.to_be_bytes());
            b.extend_from_slice(&self.qclass.to_be_bytes());
            if let Some((payload, ttl, options)) = &self.edns {
                let rdata: Vec<u8> = options
                    .iter()
                    .flat_map(|(c, d)| {
                        let mut o = c.to_be_bytes().to_vec();
                        o.extend_from_slice(&(d.len() as u16).to_be_bytes());
                        o.extend_from_slice(d);
                        o
                    })
                    .collect();
                b.push(0);
                b.extend_from_slice(&TYPE_OPT.to_be_bytes());
                b.extend_from_slice(&payload.to_be_bytes());
                b.extend_from_slice(&ttl.to_be_bytes());
                b.extend_from_slice(&(rdata.len() as u16).to_be_bytes());
                b.extend_from_slice(&rdata);
            }
            b.extend_from_slice(&self.trailing);
            b
        }
    }

    fn hint_option(url: &str) -> (u16, Vec<u8>) {
        let mut d = vec![OPTION_VERSION];
        d.extend_from_slice(url.as_bytes());
        (OPTION_CODE, d)
    }

    fn labels_of(name: &str) -> Vec<Vec<u8>> {
        name.split('.')
            .filter(|l| !l.is_empty())
            .map(|l| l.as_bytes().to_vec())
            .collect()
    }

    fn name_strategy() -> impl Strategy<Value = Vec<Vec<u8>>> {
        prop_oneof![
            // A zone host, in random case.
            4 => (prop::sample::select(HOSTS.to_vec()), any::<u64>()).prop_map(|(h, bits)| {
                let cased: String = h
                    .chars()
                    .enumerate()
                    .map(|(i, c)| if bits >> (i % 64) & 1 == 1 { c.to_ascii_uppercase() } else { c })
                    .collect();
                labels_of(&cased)
            }),
            // The TXT fallback name, names outside the zone, the root.
            1 => prop::sample::select(vec![
                "x1234abcd._hint.www.a.example",
                "_hint.www.a.example",
                "www.A.example.org",
                "example",
                "",
            ])
            .prop_map(labels_of),
            // Labels with odd bytes: escapes, dots, wildcards, non-ASCII, long.
            1 => prop::collection::vec(
                prop::collection::vec(
                    prop::sample::select(vec![b'a', b'Z', b'0', b'-', b'_', b'*', b'.', b'\\', b' ', 0xC3, 0x00]),
                    0..70,
                ),
                0..5,
            ),
        ]
    }

    fn option_strategy() -> impl Strategy<Value = (u16, Vec<u8>)> {
        prop_oneof![
            4 => Just(hint_option("http://www.a.example/")),
            2 => Just(hint_option("http://big.example/")),
            1 => Just(hint_option("http://v6.example/#frag")),
            1 => Just(hint_option("http://www.a.example/nope")),
            1 => Just(hint_option("http://www.a.example/ with space")),
            1 => Just((OPTION_CODE, vec![])),
            1 => prop::collection::vec(any::<u8>(), 0..8).prop_map(|d| (OPTION_CODE, d)),
            1 => (prop::sample::select(vec![8u16, 10, 12, 15, 65000]), prop::collection::vec(any::<u8>(), 0..12)),
        ]
    }

    fn query_strategy() -> impl Strategy<Value = Q> {
        let flags = prop_oneof![
            3 => any::<u16>().prop_map(|f| f & !(QR | OPCODE)),
            1 => any::<u16>(),
        ];
        let counts = prop_oneof![
            6 => Just(None),
            1 => prop::array::uniform4(0u16..3).prop_map(Some),
        ];
        let qtype = prop_oneof![
            4 => Just(TYPE_A),
            2 => Just(TYPE_AAAA),
            1 => prop::sample::select(vec![16u16, 15, 255, 41, 0]),
        ];
        let qclass =
            prop_oneof![5 => Just(CLASS_IN), 1 => prop::sample::select(vec![3u16, 254, 255, 0])];
        let payload = prop_oneof![
            Just(1232u16),
            Just(512),
            Just(4096),
            Just(0),
            any::<u16>(),
            300u16..700,
        ];
        let ttl = prop_oneof![3 => Just(0u32), 1 => any::<u32>()];
        let edns = prop::option::weighted(
            0.8,
            (payload, ttl, prop::collection::vec(option_strategy(), 0..3)),
        );
        let trailing =
            prop_oneof![6 => Just(vec![]), 1 => prop::collection::vec(any::<u8>(), 1..4)];
        (
            any::<u16>(),
            flags,
            counts,
            name_strategy(),
            qtype,
            qclass,
            edns,
            trailing,
        )
            .prop_map(
                |(id, flags, counts, labels, qtype, qclass, edns, trailing)| Q {
                    id,
                    flags,
                    counts,
                    labels,
                    qtype,
                    qclass,
                    edns,
                    trailing,
                },
            )
    }

    /// The fast path, where it answers, answers exactly as the general one.
    fn same_as_general(
        r: &Responder,
        book: &HintBook,
        q: &[u8],
        t: Transport,
        may_forward: bool,
    ) -> Result<bool, TestCaseError> {
        let Some(fast) = answer(r, book, q, t) else {
            return Ok(false);
        };
        let general = r.answer_general(book, q, t, may_forward, None);
        prop_assert_eq!(&fast.outcome, &general.outcome, "query {:02x?}", q);
        prop_assert_eq!(&fast.page, &general.page);
        prop_assert_eq!(&fast.hint, &general.hint);
        prop_assert_eq!(fast.error, general.error);
        Ok(true)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(4096))]

        #[test]
        fn fast_path_answers_like_the_general_path(
            q in query_strategy(),
            max in prop::sample::select(vec![512u16, 600, 1232, 4096]),
            upstream in any::<bool>(),
            may_forward in any::<bool>(),
            tcp in any::<bool>(),
        ) {
            let r = responder(max, upstream);
            let t = if tcp { Transport::Tcp } else { Transport::Udp };
            same_as_general(&r, &book(), &q.bytes(), t, may_forward)?;
        }

        #[test]
        fn fast_path_agrees_on_mutated_queries(
            name in prop::sample::select(HOSTS.to_vec()),
            url in prop::sample::select(vec!["http://www.a.example/", "http://big.example/", "http://nope.example/"]),
            edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..4),
            cut in prop::option::weighted(0.2, any::<prop::sample::Index>()),
        ) {
            let mut b = Q {
                id: 7,
                flags: RD,
                counts: None,
                labels: labels_of(name),
                qtype: TYPE_A,
                qclass: CLASS_IN,
                edns: Some((1232, 0, vec![hint_option(url)])),
                trailing: vec![],
            }
            .bytes();
            for (i, v) in edits {
                let i = i.index(b.len());
                b[i] = v;
            }
            if let Some(c) = cut {
                b.truncate(c.index(b.len()));
            }
            let r = responder(1232, true);
            same_as_general(&r, &book(), &b, Transport::Udp, true)?;
        }
    }

    #[test]
    fn common_shapes_take_the_fast_path() {
        let book = book();
        let r = responder(1232, false);
        let plain = |name: &str, qtype, edns| Q {
            id: 0xBEEF,
            flags: RD,
            counts: None,
            labels: labels_of(name),
            qtype,
            qclass: CLASS_IN,
            edns,
            trailing: vec![],
        };
        let cases = [
            plain("www.a.example", TYPE_A, None),
            plain("WWW.A.Example", TYPE_A, Some((1232, 0, vec![]))),
            plain("v6.example", TYPE_AAAA, Some((4096, 0, vec![]))),
            plain("dual.example", TYPE_AAAA, Some((1232, 0, vec![]))),
            plain("v6.example", TYPE_A, None),
            // dnsperf -E with the hint request, known and unknown pages.
            plain(
                "www.a.example",
                TYPE_A,
                Some((1232, 0, vec![hint_option("http://www.a.example/")])),
            ),
            plain(
                "dual.example",
                TYPE_A,
                Some((1232, 0, vec![hint_option("http://dual.example/")])),
            ),
        ];
        for q in &cases {
            for t in [Transport::Udp, Transport::Tcp] {
                let taken = same_as_general(&r, &book, &q.bytes(), t, false)
                    .unwrap_or_else(|e| panic!("{q:?}: {e}"));
                assert!(taken, "{q:?} over {t:?} took the general path");
            }
        }
        // Shapes left to the general path.
        let general = [
            plain("www.a.example", 16, None),
            plain("x1234abcd._hint.www.a.example", TYPE_A, None),
            plain("example.org", TYPE_A, None),
            // 40 addresses do not fit 512 bytes: truncation.
            plain("many.example", TYPE_A, None),
            // The 400-object page's full hint does not fit 512 bytes.
            plain(
                "big.example",
                TYPE_A,
                Some((512, 0, vec![hint_option("http://big.example/")])),
            ),
        ];
        for q in &general {
            assert!(
                answer(&r, &book, &q.bytes(), Transport::Udp).is_none(),
                "{q:?}"
            );
        }
    }
}
