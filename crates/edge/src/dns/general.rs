//! The general path: parse the query into a hickory-proto `Message` and
//! apply every rule of the [`crate::dns`] module docs. The fast path, its
//! child module, answers the common query shape straight from its bytes and
//! gives the same answer; [`Responder::answer`] tries it first.

mod fast;

use std::net::IpAddr;

use hickory_proto::op::{Edns, Message, MessageType, Metadata, OpCode, ResponseCode};
use hickory_proto::rr::rdata::opt::{EdnsCode, EdnsOption};
use hickory_proto::rr::rdata::{A, AAAA, TXT};
use hickory_proto::rr::{Name, RData, Record, RecordType};
use mewa_hint::dns::{
    encode_txt, parse_txt_query_name, HintRequest, HintResponse, OPTION_CODE, TXT_LABEL,
};
use mewa_hint::wire::Form;

use super::{normalize, Answered, HintServed, Outcome, Responder, Transport, PLAIN_UDP};
use crate::cookie::{Context, Received, Status, OPTION_CODE as COOKIE_CODE};
use crate::hints::HintBook;

impl Responder {
    /// Answers `query` (raw bytes). `may_forward` says whether this client
    /// is allowed to use the upstream resolver; `cookies`, when the edge
    /// does DNS cookies, checks and makes them for this client (RFC 7873,
    /// [`crate::cookie`]).
    ///
    /// The common query (one `A`/`AAAA` question for a zone host, at most an
    /// OPT record with at most the hint request, an answer that fits) is
    /// answered straight from its wire bytes (the fast path, `general::fast`); everything
    /// else by [`Responder::answer_general`]. Both give the same bytes. A
    /// query with a COOKIE option is not of the common shape, so cookies
    /// are the general path's alone.
    pub fn answer(
        &self,
        book: &HintBook,
        query: &[u8],
        transport: Transport,
        may_forward: bool,
        cookies: Option<&Context<'_>>,
    ) -> Answered {
        match fast::answer(self, book, query, transport) {
            Some(a) => a,
            None => self.answer_general(book, query, transport, may_forward, cookies),
        }
    }

    /// The general path behind [`Responder::answer`]: parses the query into
    /// a hickory-proto `Message` and applies every rule of the module docs.
    /// Public so that the fuzz target can hold the fast path to it.
    pub fn answer_general(
        &self,
        book: &HintBook,
        query: &[u8],
        transport: Transport,
        may_forward: bool,
        cookies: Option<&Context<'_>>,
    ) -> Answered {
        let mut cookie = Status::Absent;
        let mut a = self.general(book, query, transport, may_forward, cookies, &mut cookie);
        a.cookie = cookie;
        a
    }

    /// [`Responder::answer_general`]'s rules; `cookie` learns what the
    /// query's cookie proved, whichever way the answer returns.
    fn general(
        &self,
        book: &HintBook,
        query: &[u8],
        transport: Transport,
        may_forward: bool,
        cookies: Option<&Context<'_>>,
        cookie: &mut Status,
    ) -> Answered {
        let q = match Message::from_vec(query) {
            Ok(q) => q,
            Err(_) => return formerr(query, "unparsable query"),
        };
        if q.metadata.message_type != MessageType::Query {
            return Answered {
                outcome: Outcome::Drop,
                page: None,
                hint: None,
                error: Some("a response sent as a query"),
                cookie: crate::cookie::Status::Absent,
            };
        }
        let mut resp = Message::response(q.metadata.id, q.metadata.op_code);
        resp.metadata = Metadata::response_from_request(&q.metadata);
        resp.metadata.recursion_available = self.upstream;
        let limit = match transport {
            Transport::Tcp => usize::from(u16::MAX),
            Transport::Udp => match &q.edns {
                Some(e) => usize::from(e.max_payload().min(self.max_udp_payload)).max(PLAIN_UDP),
                None => PLAIN_UDP,
            },
        };
        if q.edns.is_some() {
            let mut e = Edns::new();
            e.set_max_payload(self.max_udp_payload.max(PLAIN_UDP as u16));
            resp.set_edns(e);
        }
        // RFC 6891 §6.1.3: a version we do not implement gets BADVERS with
        // the version we do (0), and nothing else.
        if q.edns.as_ref().is_some_and(|e| e.version() > 0) {
            return finish(
                resp,
                ResponseCode::BADVERS,
                limit,
                Some("EDNS version above 0"),
            );
        }
        // DNS cookies (RFC 7873 §5.2): the first COOKIE option counts. Its
        // answer, whatever it is, carries the client cookie and a fresh
        // server cookie, so the client can prove its address next time.
        let received = q
            .edns
            .as_ref()
            .and_then(|e| e.option(EdnsCode::Cookie))
            .and_then(|o| match o {
                EdnsOption::Unknown(_, data) => Some(data.as_slice()),
                _ => None,
            });
        if let (Some(ctx), Some(data)) = (cookies, received) {
            let Some(r) = Received::parse(data) else {
                return finish(
                    resp,
                    ResponseCode::FormErr,
                    limit,
                    Some("malformed COOKIE option"),
                );
            };
            *cookie = ctx.verify(&r);
            if let Some(e) = resp.edns.as_mut() {
                e.options_mut()
                    .insert(EdnsOption::Unknown(COOKIE_CODE, ctx.reply(&r)));
            }
        }
        if q.metadata.op_code != OpCode::Query {
            return finish(
                resp,
                ResponseCode::NotImp,
                limit,
                Some("opcode not supported"),
            );
        }
        let [question] = q.queries.as_slice() else {
            return finish(
                resp,
                ResponseCode::FormErr,
                limit,
                Some("not exactly one question"),
            );
        };
        resp.add_query(question.clone());
        let name = question.name().to_ascii();
        let host = normalize(&name);
        let qtype = question.query_type();

        // TXT fallback: <hash>._hint.<host>
        if host.split('.').nth(1) == Some(TXT_LABEL) {
            return self.txt_hint(book, resp, &host, question.name(), qtype, limit);
        }
        let Some(addrs) = self.zone.get(&host) else {
            if may_forward && self.upstream {
                return Answered {
                    outcome: Outcome::Forward,
                    page: None,
                    hint: None,
                    error: None,
                    cookie: crate::cookie::Status::Absent,
                };
            }
            return finish(
                resp,
                ResponseCode::Refused,
                limit,
                Some("name outside the zone and forwarding not allowed"),
            );
        };
        resp.metadata.authoritative = true;
        for ip in addrs {
            let rdata = match (ip, qtype) {
                (IpAddr::V4(v4), RecordType::A) => RData::A(A(*v4)),
                (IpAddr::V6(v6), RecordType::AAAA) => RData::AAAA(AAAA(*v6)),
                _ => continue,
            };
            resp.add_answer(Record::from_rdata(
                question.name().clone(),
                self.zone.ttl_s,
                rdata,
            ));
        }
        // The hint request, if any.
        let request = q
            .edns
            .as_ref()
            .and_then(|e| e.option(EdnsCode::Unknown(OPTION_CODE)))
            .and_then(|o| match o {
                EdnsOption::Unknown(_, data) => Some(HintRequest::decode(data)),
                _ => None,
            });
        let Some(request) = request else {
            return finish(resp, ResponseCode::NoError, limit, None);
        };
        let request = match request {
            Ok(r) => r,
            Err(_) => {
                return finish(
                    resp,
                    ResponseCode::FormErr,
                    limit,
                    Some("malformed hint request option"),
                )
            }
        };
        let Some(h) = book.by_url(&request.page_url) else {
            set_hint_option(&mut resp, HintResponse::Unknown.encode());
            let mut a = finish(resp, ResponseCode::NoError, limit, None);
            a.page = super::counted(request.page_url, &host);
            a.hint = Some(HintServed::Unknown);
            return a;
        };
        // Usually the full hint fits: one serialisation. Otherwise the room
        // left is the limit minus the answer without the option, its header
        // (4 bytes) and the status prefix (2 bytes).
        resp.metadata.response_code = ResponseCode::NoError;
        set_hint_option(&mut resp, HintResponse::Hint(h.full.clone()).encode());
        if let Ok(bytes) = resp.to_vec() {
            if bytes.len() <= limit {
                let mut a = Answered::reply(bytes);
                a.page = super::counted(request.page_url, &host);
                a.hint = Some(HintServed::Hint {
                    bytes: h.full.len(),
                    form: Form::WithUrls,
                    compact: false,
                });
                return a;
            }
        }
        if let Some(e) = resp.edns.as_mut() {
            e.options_mut().remove(EdnsCode::Unknown(OPTION_CODE));
        }
        // Over UDP the URL form did not fit: the compact form within the
        // smaller compact limit, and the client fetches the URL form over
        // TCP while it connects to the origin.
        let udp = transport == Transport::Udp;
        let cap = if udp {
            limit.min(usize::from(self.compact_payload).max(PLAIN_UDP))
        } else {
            limit
        };
        let base = resp.to_vec().map_or(cap, |b| b.len());
        let budget = cap.saturating_sub(base + 4 + 2);
        let (payload, served) = match h.within(budget) {
            Ok((bytes, form)) => {
                let n = bytes.len();
                let compact = udp && form != Form::WithUrls;
                let bytes = bytes.into_owned();
                (
                    if compact {
                        HintResponse::Compact(bytes)
                    } else {
                        HintResponse::Hint(bytes)
                    },
                    HintServed::Hint {
                        bytes: n,
                        form,
                        compact,
                    },
                )
            }
            Err(_) => (HintResponse::RetryTcp, HintServed::RetryTcp),
        };
        set_hint_option(&mut resp, payload.encode());
        let mut a = finish(resp, ResponseCode::NoError, limit, None);
        a.page = super::counted(request.page_url, &host);
        a.hint = Some(served);
        a
    }

    fn txt_hint(
        &self,
        book: &HintBook,
        mut resp: Message,
        host: &str,
        name: &Name,
        qtype: RecordType,
        limit: usize,
    ) -> Answered {
        resp.metadata.authoritative = true;
        let Ok((hash, doc_host)) = parse_txt_query_name(host) else {
            return finish(
                resp,
                ResponseCode::NXDomain,
                limit,
                Some("malformed hint TXT name"),
            );
        };
        let Some(h) = book.by_hash(&doc_host, hash) else {
            let mut a = finish(resp, ResponseCode::NXDomain, limit, None);
            a.hint = Some(HintServed::Unknown);
            return a;
        };
        if qtype != RecordType::TXT {
            let mut a = finish(resp, ResponseCode::NoError, limit, None);
            a.page = Some(h.url.clone());
            return a;
        }
        // TXT base64 costs 4/3 plus the prefix and the length bytes; over
        // UDP the partial form is used when the full one would not fit.
        let base = resp.to_vec().map_or(limit, |b| b.len());
        let room = limit.saturating_sub(base + name.len() + 12);
        let budget = room.saturating_mul(3) / 4;
        let served = match h.within(budget.saturating_sub(16)) {
            Ok((bytes, form)) => match encode_txt(&bytes) {
                Ok(rdata) => {
                    let strings: Vec<&[u8]> = chunks(&rdata);
                    resp.add_answer(Record::from_rdata(
                        name.clone(),
                        self.zone.ttl_s,
                        RData::TXT(TXT::from_bytes(strings)),
                    ));
                    HintServed::Hint {
                        bytes: bytes.len(),
                        form,
                        compact: false,
                    }
                }
                Err(_) => HintServed::RetryTcp,
            },
            Err(_) => HintServed::RetryTcp,
        };
        let mut a = finish(resp, ResponseCode::NoError, limit, None);
        a.page = Some(h.url.clone());
        a.hint = Some(served);
        a
    }
}

/// Puts the hint option into the answer's OPT record.
fn set_hint_option(resp: &mut Message, data: Vec<u8>) {
    if let Some(e) = resp.edns.as_mut() {
        e.options_mut()
            .insert(EdnsOption::Unknown(OPTION_CODE, data));
    }
}

/// The character-strings of TXT RDATA (length-prefixed, as `encode_txt`
/// writes them).
fn chunks(rdata: &[u8]) -> Vec<&[u8]> {
    let mut out = Vec::new();
    let mut rest = rdata;
    while let Some((&len, tail)) = rest.split_first() {
        let n = usize::from(len).min(tail.len());
        out.push(&tail[..n]);
        rest = &tail[n..];
    }
    out
}

/// Serialises the response with `rcode`; a UDP answer over `limit` is
/// truncated (TC set, answers dropped) so that the client retries over TCP.
fn finish(
    mut resp: Message,
    rcode: ResponseCode,
    limit: usize,
    error: Option<&'static str>,
) -> Answered {
    resp.metadata.response_code = rcode;
    let bytes = match resp.to_vec() {
        Ok(b) if b.len() <= limit => b,
        Ok(_) => match resp.truncate().to_vec() {
            Ok(b) => b,
            Err(_) => return servfail_drop(),
        },
        Err(_) => return servfail_drop(),
    };
    let mut a = Answered::reply(bytes);
    a.error = error;
    a
}

fn servfail_drop() -> Answered {
    Answered {
        outcome: Outcome::Drop,
        page: None,
        hint: None,
        error: Some("answer could not be serialised"),
        cookie: crate::cookie::Status::Absent,
    }
}

/// FORMERR echoing the id when at least a header arrived.
fn formerr(query: &[u8], why: &'static str) -> Answered {
    let Some(id) = query.get(..2).map(|b| u16::from_be_bytes([b[0], b[1]])) else {
        return Answered {
            outcome: Outcome::Drop,
            page: None,
            hint: None,
            error: Some(why),
            cookie: crate::cookie::Status::Absent,
        };
    };
    if query.len() < 12 || query[2] & 0x80 != 0 {
        // Too short for a header, or a response: never answer those (no
        // reflection loops).
        return Answered {
            outcome: Outcome::Drop,
            page: None,
            hint: None,
            error: Some(why),
            cookie: crate::cookie::Status::Absent,
        };
    }
    let m = Message::error_msg(id, OpCode::Query, ResponseCode::FormErr);
    match m.to_vec() {
        Ok(b) => {
            let mut a = Answered::reply(b);
            a.error = Some(why);
            a
        }
        Err(_) => servfail_drop(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dns::Zone;
    use crate::hints::tests::page;
    use crate::hints::HintPolicy;
    use hickory_proto::op::Query;
    use mewa_hint::dns::{decode_txt, txt_query_name};
    use mewa_hint::wire::Hint;
    use proptest::prelude::*;
    use std::collections::HashMap;

    fn book() -> HintBook {
        HintBook::build(
            vec![
                page("http://www.a.example/", 12, 30_000, 1),
                page("http://big.example/", 400, 20_000, 40),
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

    fn responder() -> Responder {
        Responder {
            zone: Zone::new(
                [
                    (
                        "www.a.example".to_string(),
                        vec!["10.0.0.2".parse().unwrap()],
                    ),
                    (
                        "big.example.".to_string(),
                        vec!["10.0.0.2".parse().unwrap()],
                    ),
                ],
                30,
            ),
            max_udp_payload: 1232,
            compact_payload: super::super::COMPACT_UDP_PAYLOAD,
            upstream: true,
        }
    }

    fn query(name: &str, t: RecordType, payload: Option<u16>, page_url: Option<&str>) -> Vec<u8> {
        query_with(name, t, payload, page_url, None)
    }

    /// [`query`], its OPT record also carrying a COOKIE option with
    /// `cookie` when given.
    fn query_with(
        name: &str,
        t: RecordType,
        payload: Option<u16>,
        page_url: Option<&str>,
        cookie: Option<&[u8]>,
    ) -> Vec<u8> {
        let mut m = Message::query();
        m.metadata.id = 4242;
        m.metadata.recursion_desired = true;
        m.add_query(Query::query(Name::from_ascii(name).unwrap(), t));
        if let Some(p) = payload {
            let mut e = Edns::new();
            e.set_max_payload(p);
            if let Some(u) = page_url {
                let req = HintRequest {
                    page_url: u.to_string(),
                }
                .encode()
                .unwrap();
                e.options_mut()
                    .insert(EdnsOption::Unknown(OPTION_CODE, req));
            }
            if let Some(c) = cookie {
                e.options_mut()
                    .insert(EdnsOption::Unknown(COOKIE_CODE, c.to_vec()));
            }
            m.set_edns(e);
        }
        m.to_vec().unwrap()
    }

    fn reply(a: &Answered) -> Message {
        match &a.outcome {
            Outcome::Reply(b) => Message::from_vec(b).unwrap(),
            other => panic!("expected a reply, got {other:?}"),
        }
    }

    fn hint_option(m: &Message) -> Option<HintResponse> {
        let o = m.edns.as_ref()?.option(EdnsCode::Unknown(OPTION_CODE))?;
        match o {
            EdnsOption::Unknown(_, d) => Some(HintResponse::decode(d).unwrap()),
            _ => None,
        }
    }

    #[test]
    fn zone_hosts_get_authoritative_addresses() {
        let r = responder();
        let a = r.answer(
            &book(),
            &query("WWW.a.example.", RecordType::A, None, None),
            Transport::Udp,
            false,
            None,
        );
        let m = reply(&a);
        assert_eq!(m.metadata.id, 4242);
        assert!(m.metadata.authoritative);
        assert_eq!(m.metadata.response_code, ResponseCode::NoError);
        assert_eq!(m.answers.len(), 1);
        assert!(m.edns.is_none());
        assert!(a.hint.is_none());
        // AAAA for a v4-only host: NODATA.
        let m = reply(&r.answer(
            &book(),
            &query("www.a.example.", RecordType::AAAA, None, None),
            Transport::Udp,
            false,
            None,
        ));
        assert_eq!(m.metadata.response_code, ResponseCode::NoError);
        assert!(m.answers.is_empty());
    }

    #[test]
    fn an_edns_version_above_0_gets_badvers_and_nothing_else() {
        let r = responder();
        let mut m = Message::from_vec(&query(
            "www.a.example.",
            RecordType::A,
            Some(1232),
            Some("http://www.a.example/"),
        ))
        .unwrap();
        if let Some(e) = m.edns.as_mut() {
            e.set_version(1);
        }
        let a = r.answer(&book(), &m.to_vec().unwrap(), Transport::Udp, false, None);
        let m = reply(&a);
        // 16 is BADVERS in an OPT's context (hickory reads it as BADSIG).
        assert_eq!(
            u16::from(m.metadata.response_code),
            u16::from(ResponseCode::BADVERS)
        );
        assert_eq!(m.edns.as_ref().map(|e| e.version()), Some(0));
        assert!(m.answers.is_empty() && hint_option(&m).is_none());
        assert!(a.page.is_none() && a.hint.is_none());
    }

    #[test]
    fn a_hint_request_counts_only_for_a_page_of_the_queried_host() {
        let r = responder();
        let ask = |name: &str, page: &str| {
            r.answer(
                &book(),
                &query(name, RecordType::A, Some(1232), Some(page)),
                Transport::Udp,
                false,
                None,
            )
            .page
        };
        assert_eq!(
            ask("WWW.a.example.", "http://www.a.example/").as_deref(),
            Some("http://www.a.example/")
        );
        assert_eq!(ask("www.a.example.", "http://big.example/"), None);
    }

    #[test]
    fn hint_request_gets_the_hint_within_the_advertised_size() {
        let r = responder();
        let b = book();
        let q = query(
            "www.a.example.",
            RecordType::A,
            Some(1232),
            Some("http://www.a.example/"),
        );
        let a = r.answer(&b, &q, Transport::Udp, false, None);
        let m = reply(&a);
        assert_eq!(m.answers.len(), 1);
        let Some(HintResponse::Hint(bytes)) = hint_option(&m) else {
            panic!("no hint in {m:?}");
        };
        let hint = Hint::from_bytes(&bytes).unwrap();
        assert_eq!(hint.object_count, 12);
        assert!(!hint.partial);
        assert_eq!(a.page.as_deref(), Some("http://www.a.example/"));
        assert!(matches!(
            a.hint,
            Some(HintServed::Hint {
                form: Form::WithUrls,
                ..
            })
        ));

        // The 400-object page: its URL form does not fit UDP, so the
        // compact (here partial) form within the compact limit (or the
        // client's smaller one), marked "URLs over TCP"; over TCP the form
        // with every URL.
        for (advertised, cap) in [(512, 512), (1232, 1000), (4096, 1000)] {
            let q = query(
                "big.example.",
                RecordType::A,
                Some(advertised),
                Some("http://big.example/"),
            );
            let a = r.answer(&b, &q, Transport::Udp, false, None);
            assert!(matches!(
                a.hint,
                Some(HintServed::Hint { compact: true, .. })
            ));
            let Outcome::Reply(raw) = a.outcome else {
                panic!()
            };
            assert!(raw.len() <= cap, "{} bytes over {cap}", raw.len());
            let m = Message::from_vec(&raw).unwrap();
            let Some(HintResponse::Compact(h)) = hint_option(&m) else {
                panic!("{m:?}")
            };
            let h = Hint::from_bytes(&h).unwrap();
            assert!(h.partial && !h.has_paths());
            let Outcome::Reply(raw) = r.answer(&b, &q, Transport::Tcp, false, None).outcome else {
                panic!()
            };
            let m = Message::from_vec(&raw).unwrap();
            let Some(HintResponse::Hint(h)) = hint_option(&m) else {
                panic!()
            };
            let h = Hint::from_bytes(&h).unwrap();
            assert!(!h.partial && h.has_paths());
        }

        // Unknown page, malformed request.
        let q = query(
            "www.a.example.",
            RecordType::A,
            Some(1232),
            Some("http://www.a.example/nope"),
        );
        assert_eq!(
            hint_option(&reply(&r.answer(&b, &q, Transport::Udp, false, None))),
            Some(HintResponse::Unknown)
        );
        let mut m = Message::query();
        m.add_query(Query::query(
            Name::from_ascii("www.a.example.").unwrap(),
            RecordType::A,
        ));
        let mut e = Edns::new();
        e.options_mut()
            .insert(EdnsOption::Unknown(OPTION_CODE, vec![9, 9]));
        m.set_edns(e);
        let a = r.answer(&b, &m.to_vec().unwrap(), Transport::Udp, false, None);
        assert_eq!(reply(&a).metadata.response_code, ResponseCode::FormErr);
    }

    #[test]
    fn txt_fallback_carries_the_hint() {
        let r = responder();
        let b = book();
        let name = txt_query_name("http://www.a.example/").unwrap();
        let a = r.answer(
            &b,
            &query(&name, RecordType::TXT, None, None),
            Transport::Udp,
            false,
            None,
        );
        let m = reply(&a);
        assert_eq!(m.answers.len(), 1);
        let RData::TXT(txt) = &m.answers[0].data else {
            panic!()
        };
        let mut rdata = Vec::new();
        for s in txt.txt_data.iter() {
            rdata.push(s.len() as u8);
            rdata.extend_from_slice(s);
        }
        let hint = Hint::from_bytes(&decode_txt(&rdata).unwrap()).unwrap();
        assert_eq!(hint.object_count, 12);
        let unknown = txt_query_name("http://www.a.example/nope").unwrap();
        let m = reply(&r.answer(
            &b,
            &query(&unknown, RecordType::TXT, None, None),
            Transport::Udp,
            false,
            None,
        ));
        assert_eq!(m.metadata.response_code, ResponseCode::NXDomain);
    }

    #[test]
    fn other_names_are_forwarded_only_for_allowed_clients() {
        let r = responder();
        let q = query("example.org.", RecordType::A, None, None);
        assert_eq!(
            r.answer(&book(), &q, Transport::Udp, true, None).outcome,
            Outcome::Forward
        );
        let m = reply(&r.answer(&book(), &q, Transport::Udp, false, None));
        assert_eq!(m.metadata.response_code, ResponseCode::Refused);
    }

    #[test]
    fn garbage_is_dropped_or_formerr() {
        let r = responder();
        assert_eq!(
            r.answer(&book(), b"\x01", Transport::Udp, true, None)
                .outcome,
            Outcome::Drop
        );
        let mut bad = vec![0x12, 0x34, 0x01, 0, 0, 5, 0, 0, 0, 0, 0, 0];
        bad.extend_from_slice(b"junk");
        let m = reply(&r.answer(&book(), &bad, Transport::Udp, true, None));
        assert_eq!(m.metadata.id, 0x1234);
        assert_eq!(m.metadata.response_code, ResponseCode::FormErr);
        // A response is never answered (no reflection loops).
        bad[2] |= 0x80;
        assert_eq!(
            r.answer(&book(), &bad, Transport::Udp, true, None).outcome,
            Outcome::Drop
        );
    }

    /// A query for `www.a.example` with the hint request and a COOKIE
    /// option carrying `cookie`.
    fn with_cookie(cookie: &[u8]) -> Vec<u8> {
        query_with(
            "www.a.example.",
            RecordType::A,
            Some(1232),
            Some("http://www.a.example/"),
            Some(cookie),
        )
    }

    fn cookie_of(m: &Message) -> Option<Vec<u8>> {
        match m.edns.as_ref()?.option(EdnsCode::Cookie)? {
            EdnsOption::Unknown(_, d) => Some(d.clone()),
            _ => None,
        }
    }

    #[test]
    fn dns_cookies_are_answered_checked_and_malformed_ones_refused() {
        let r = responder();
        let b = book();
        let secret = crate::cookie::Secret::new([7; 16]);
        let ctx = Context {
            secret: &secret,
            client: "192.0.2.1".parse().unwrap(),
            now_unix_s: 1_700_000_000,
        };
        let ask = |q: &[u8], ctx: Option<&Context<'_>>| r.answer(&b, q, Transport::Udp, false, ctx);

        // No cookie: none in the answer, which takes the fast path.
        let plain = query(
            "www.a.example.",
            RecordType::A,
            Some(1232),
            Some("http://www.a.example/"),
        );
        let a = ask(&plain, Some(&ctx));
        assert_eq!(a.cookie, Status::Absent);
        assert_eq!(cookie_of(&reply(&a)), None);

        // A client cookie alone: the answer (with its hint) carries it and
        // a 16-byte server cookie of version 1 stamped now.
        let client = [1, 2, 3, 4, 5, 6, 7, 8];
        let a = ask(&with_cookie(&client), Some(&ctx));
        assert_eq!(a.cookie, Status::ClientOnly);
        let m = reply(&a);
        assert!(hint_option(&m).is_some() && m.answers.len() == 1);
        let got = cookie_of(&m).unwrap();
        assert_eq!(got.len(), 24);
        assert_eq!(got[..8], client);
        assert_eq!(got[8..12], [1, 0, 0, 0]);
        assert_eq!(got[12..16], 1_700_000_000u32.to_be_bytes());

        // Echoed back: valid, from that address, within the hour.
        assert_eq!(ask(&with_cookie(&got), Some(&ctx)).cookie, Status::Valid);
        let later = Context {
            now_unix_s: 1_700_003_601,
            ..ctx
        };
        assert_eq!(ask(&with_cookie(&got), Some(&later)).cookie, Status::Bad);
        let elsewhere = Context {
            client: "192.0.2.2".parse().unwrap(),
            ..ctx
        };
        let a = ask(&with_cookie(&got), Some(&elsewhere));
        assert_eq!(a.cookie, Status::Bad);
        // A bad server cookie still gets its answer, with a new cookie.
        let m = reply(&a);
        assert_eq!(m.metadata.response_code, ResponseCode::NoError);
        assert!(hint_option(&m).is_some());
        let renewed = cookie_of(&m).unwrap();
        assert_eq!(renewed[..8], client);
        assert_ne!(renewed, got);
        assert_eq!(
            ask(&with_cookie(&renewed), Some(&elsewhere)).cookie,
            Status::Valid
        );

        // Malformed lengths: FORMERR, no answer (RFC 7873 §5.2.2).
        for n in [0, 1, 7, 9, 15, 41, 60] {
            let a = ask(&with_cookie(&vec![3; n]), Some(&ctx));
            let m = reply(&a);
            assert_eq!(m.metadata.response_code, ResponseCode::FormErr, "{n}");
            assert!(m.answers.is_empty() && a.page.is_none(), "{n}");
            assert_eq!(a.error, Some("malformed COOKIE option"));
        }

        // Cookies off: the option is ignored, as by a server without them.
        let a = ask(&with_cookie(&got), None);
        assert_eq!(a.cookie, Status::Absent);
        assert_eq!(cookie_of(&reply(&a)), None);
        let a = ask(&with_cookie(&[3; 9]), None);
        assert_eq!(reply(&a).metadata.response_code, ResponseCode::NoError);
    }

    proptest! {
        #[test]
        fn arbitrary_bytes_never_panic_and_udp_replies_fit(b in proptest::collection::vec(any::<u8>(), 0..600)) {
            let r = responder();
            let book = book();
            if let Outcome::Reply(out) = r.answer(&book, &b, Transport::Udp, true, None).outcome {
                prop_assert!(out.len() <= 1232);
            }
        }
    }
}
