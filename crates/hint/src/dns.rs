//! How a hint travels in DNS, as pure encode/decode (the edge and client
//! runtimes put these bytes into real DNS messages).
//!
//! Seed 000 §II: "a meta-data query message is also sent along with this DNS
//! query message … the hint packets can be delivered along with the DNS
//! response message". Two carriers:
//!
//! 1. **EDNS(0) option** [`OPTION_CODE`] (RFC 6891 §6.1.2; 65001–65534 are for
//!    local/experimental use). The client's query carries a [`HintRequest`]
//!    naming the page; the edge's answer carries a [`HintResponse`] with the
//!    hint bytes of [`crate::wire`]. An OPT record is hop-by-hop, so this works
//!    when the edge is the client's direct resolver.
//! 2. **TXT fallback** for resolvers that strip unknown options: the client asks
//!    `TXT <hash>._hint.<host>` where `<hash>` is the 8-hex-digit
//!    [`crate::wire::url_hash`] of the page URL; the answer's TXT strings hold
//!    `mewa1:` followed by the hint in base64.

use base64::Engine;

use crate::wire::url_hash;

/// EDNS(0) option code of the hint (local/experimental range, RFC 6891).
pub const OPTION_CODE: u16 = 65_301;

/// Version byte of the option payloads.
pub const OPTION_VERSION: u8 = 1;

/// Longest page URL a request may carry, bytes.
pub const MAX_URL: usize = 2048;

/// Label under a host that marks a TXT hint query.
pub const TXT_LABEL: &str = "_hint";

/// Prefix of the TXT payload, naming the hint wire version.
pub const TXT_PREFIX: &str = "mewa1:";

/// Why DNS carrier bytes were rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DnsError {
    /// The option TLV list or an option is cut short.
    #[error("EDNS option data truncated")]
    Truncated,
    /// Unknown payload version.
    #[error("unsupported hint option version {0}")]
    Version(u8),
    /// Unknown response status code.
    #[error("unknown hint response status {0}")]
    Status(u8),
    /// The page URL is empty, too long, not UTF-8 or has control characters.
    #[error("bad page URL in hint request: {0}")]
    Url(&'static str),
    /// A name is not a valid TXT hint query name.
    #[error("not a hint TXT query name: {0}")]
    Name(String),
    /// TXT data is not a mewa hint (prefix or base64 wrong).
    #[error("TXT record is not a mewa hint: {0}")]
    Txt(&'static str),
    /// The payload is larger than one option or TXT record can hold.
    #[error("payload of {0} bytes does not fit a DNS record (max 65535)")]
    TooLarge(usize),
}

/// What the client asks for in its query's option.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HintRequest {
    /// The page the user is about to load.
    pub page_url: String,
}

impl HintRequest {
    /// Option data: `[version][page URL bytes]`.
    pub fn encode(&self) -> Result<Vec<u8>, DnsError> {
        check_url(&self.page_url)?;
        let mut out = Vec::with_capacity(1 + self.page_url.len());
        out.push(OPTION_VERSION);
        out.extend_from_slice(self.page_url.as_bytes());
        Ok(out)
    }

    /// Parses option data from a query.
    pub fn decode(data: &[u8]) -> Result<HintRequest, DnsError> {
        let (&v, rest) = data.split_first().ok_or(DnsError::Truncated)?;
        if v != OPTION_VERSION {
            return Err(DnsError::Version(v));
        }
        let url = std::str::from_utf8(rest).map_err(|_| DnsError::Url("not UTF-8"))?;
        check_url(url)?;
        Ok(HintRequest {
            page_url: url.to_string(),
        })
    }
}

fn check_url(url: &str) -> Result<(), DnsError> {
    if url.is_empty() {
        return Err(DnsError::Url("empty"));
    }
    if url.len() > MAX_URL {
        return Err(DnsError::Url("longer than 2048 bytes"));
    }
    if url.chars().any(|c| c.is_control() || c == ' ') {
        return Err(DnsError::Url("contains spaces or control characters"));
    }
    Ok(())
}

/// What the edge answers in its response's option.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HintResponse {
    /// A hint follows (bytes of [`crate::wire::Hint::to_bytes`]).
    Hint(Vec<u8>),
    /// The edge understood the request but knows nothing of this page.
    Unknown,
    /// The hint does not fit this UDP answer; ask again over TCP.
    RetryTcp,
    /// A compact hint follows (by hash, or partial: enough to plan n and
    /// balance), and the edge has the full form with every object's URL,
    /// too large for this UDP answer: a client that prefetches asks again
    /// over TCP while it connects to the origin (the edge is one radio
    /// round trip away, the origin's handshake takes longer).
    Compact(Vec<u8>),
}

impl HintResponse {
    /// Option data: `[version][status][hint bytes]`, status 0 = hint, 1 =
    /// unknown page, 2 = retry over TCP, 3 = compact hint, URLs over TCP.
    pub fn encode(&self) -> Vec<u8> {
        match self {
            HintResponse::Hint(b) => {
                let mut out = Vec::with_capacity(2 + b.len());
                out.extend_from_slice(&[OPTION_VERSION, 0]);
                out.extend_from_slice(b);
                out
            }
            HintResponse::Unknown => vec![OPTION_VERSION, 1],
            HintResponse::RetryTcp => vec![OPTION_VERSION, 2],
            HintResponse::Compact(b) => {
                let mut out = Vec::with_capacity(2 + b.len());
                out.extend_from_slice(&[OPTION_VERSION, 3]);
                out.extend_from_slice(b);
                out
            }
        }
    }

    /// Parses option data from an answer (the hint bytes themselves are
    /// validated by [`crate::wire::Hint::from_bytes`]).
    pub fn decode(data: &[u8]) -> Result<HintResponse, DnsError> {
        match data {
            [] | [_] => Err(DnsError::Truncated),
            [v, ..] if *v != OPTION_VERSION => Err(DnsError::Version(*v)),
            [_, 0, rest @ ..] => Ok(HintResponse::Hint(rest.to_vec())),
            [_, 1] => Ok(HintResponse::Unknown),
            [_, 2] => Ok(HintResponse::RetryTcp),
            [_, 3, rest @ ..] => Ok(HintResponse::Compact(rest.to_vec())),
            [_, 1 | 2, ..] => Err(DnsError::Truncated),
            [_, s, ..] => Err(DnsError::Status(*s)),
        }
    }
}

/// One EDNS(0) option as it sits in OPT RDATA: code, length, data (RFC 6891
/// §6.1.2).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EdnsOption {
    /// OPTION-CODE.
    pub code: u16,
    /// OPTION-DATA.
    pub data: Vec<u8>,
}

/// Serialises options into OPT RDATA.
pub fn encode_options(options: &[EdnsOption]) -> Result<Vec<u8>, DnsError> {
    let mut out = Vec::new();
    for o in options {
        let len = u16::try_from(o.data.len()).map_err(|_| DnsError::TooLarge(o.data.len()))?;
        out.extend_from_slice(&o.code.to_be_bytes());
        out.extend_from_slice(&len.to_be_bytes());
        out.extend_from_slice(&o.data);
    }
    if out.len() > usize::from(u16::MAX) {
        return Err(DnsError::TooLarge(out.len()));
    }
    Ok(out)
}

/// Parses OPT RDATA into options; any cut-short option is an error.
pub fn decode_options(mut rdata: &[u8]) -> Result<Vec<EdnsOption>, DnsError> {
    let mut out = Vec::new();
    while !rdata.is_empty() {
        let [c0, c1, l0, l1, rest @ ..] = rdata else {
            return Err(DnsError::Truncated);
        };
        let len = usize::from(u16::from_be_bytes([*l0, *l1]));
        let data = rest.get(..len).ok_or(DnsError::Truncated)?;
        out.push(EdnsOption {
            code: u16::from_be_bytes([*c0, *c1]),
            data: data.to_vec(),
        });
        rdata = &rest[len..];
    }
    Ok(out)
}

/// The TXT query name for a page: `<8 hex digits>._hint.<host>.`
pub fn txt_query_name(page_url: &str) -> Result<String, DnsError> {
    check_url(page_url)?;
    let host = crate::page::host_of(page_url).ok_or(DnsError::Url("no host"))?;
    Ok(format!(
        "{:08x}.{TXT_LABEL}.{}.",
        url_hash(page_url),
        host.trim_end_matches('.')
    ))
}

/// Parses a TXT hint query name into (page URL hash, host).
pub fn parse_txt_query_name(name: &str) -> Result<(u32, String), DnsError> {
    let bad = || DnsError::Name(name.chars().take(300).collect());
    let name = name.trim_end_matches('.').to_ascii_lowercase();
    let mut parts = name.splitn(3, '.');
    let (Some(hash), Some(label), Some(host)) = (parts.next(), parts.next(), parts.next()) else {
        return Err(bad());
    };
    if label != TXT_LABEL || hash.len() != 8 || host.is_empty() || host.len() > 253 {
        return Err(bad());
    }
    let h = u32::from_str_radix(hash, 16).map_err(|_| bad())?;
    if !host.split('.').all(|l| !l.is_empty() && l.len() <= 63) {
        return Err(bad());
    }
    Ok((h, host.to_string()))
}

/// TXT RDATA (a sequence of ≤255-byte character-strings, RFC 1035 §3.3.14)
/// holding `mewa1:` + base64(hint).
pub fn encode_txt(hint: &[u8]) -> Result<Vec<u8>, DnsError> {
    let text = format!(
        "{TXT_PREFIX}{}",
        base64::engine::general_purpose::STANDARD_NO_PAD.encode(hint)
    );
    let mut out = Vec::with_capacity(text.len() + text.len() / 255 + 1);
    for chunk in text.as_bytes().chunks(255) {
        // chunks(255) yields at most 255 bytes.
        out.push(chunk.len() as u8);
        out.extend_from_slice(chunk);
    }
    if out.len() > usize::from(u16::MAX) {
        return Err(DnsError::TooLarge(out.len()));
    }
    Ok(out)
}

/// Joins the character-strings of TXT RDATA and returns the hint bytes.
pub fn decode_txt(rdata: &[u8]) -> Result<Vec<u8>, DnsError> {
    let mut text = Vec::with_capacity(rdata.len());
    let mut rest = rdata;
    while let Some((&len, tail)) = rest.split_first() {
        let s = tail.get(..usize::from(len)).ok_or(DnsError::Truncated)?;
        text.extend_from_slice(s);
        rest = &tail[usize::from(len)..];
    }
    let b64 = text
        .strip_prefix(TXT_PREFIX.as_bytes())
        .ok_or(DnsError::Txt("missing mewa1: prefix"))?;
    base64::engine::general_purpose::STANDARD_NO_PAD
        .decode(b64)
        .map_err(|_| DnsError::Txt("bad base64"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn request_byte_vector() {
        let r = HintRequest {
            page_url: "http://a.io/".into(),
        };
        let b = r.encode().unwrap();
        assert_eq!(b, b"\x01http://a.io/");
        assert_eq!(HintRequest::decode(&b).unwrap(), r);
        assert_eq!(HintRequest::decode(b""), Err(DnsError::Truncated));
        assert_eq!(HintRequest::decode(b"\x02x"), Err(DnsError::Version(2)));
        assert!(HintRequest::decode(b"\x01").is_err());
        assert!(HintRequest::decode(b"\x01a b").is_err());
        assert!(HintRequest::decode(b"\x01\xff").is_err());
    }

    #[test]
    fn response_byte_vectors() {
        assert_eq!(HintResponse::Hint(vec![1, 2]).encode(), vec![1, 0, 1, 2]);
        assert_eq!(HintResponse::Unknown.encode(), vec![1, 1]);
        assert_eq!(HintResponse::RetryTcp.encode(), vec![1, 2]);
        assert_eq!(HintResponse::Compact(vec![5]).encode(), vec![1, 3, 5]);
        for r in [
            HintResponse::Hint(vec![9; 10]),
            HintResponse::Unknown,
            HintResponse::RetryTcp,
            HintResponse::Compact(vec![7; 5]),
        ] {
            assert_eq!(HintResponse::decode(&r.encode()).unwrap(), r);
        }
        assert_eq!(HintResponse::decode(&[1, 7]), Err(DnsError::Status(7)));
        assert_eq!(HintResponse::decode(&[1, 1, 0]), Err(DnsError::Truncated));
        assert_eq!(HintResponse::decode(&[3, 0]), Err(DnsError::Version(3)));
    }

    #[test]
    fn option_tlv() {
        let opts = vec![
            EdnsOption {
                code: 10,
                data: vec![0xaa; 8],
            }, // a cookie
            EdnsOption {
                code: OPTION_CODE,
                data: vec![1, 1],
            },
        ];
        let b = encode_options(&opts).unwrap();
        assert_eq!(&b[12..16], &[0xff, 0x15, 0x00, 0x02]);
        assert_eq!(decode_options(&b).unwrap(), opts);
        assert_eq!(decode_options(&b[..b.len() - 1]), Err(DnsError::Truncated));
        assert_eq!(decode_options(&[0, 1, 0]), Err(DnsError::Truncated));
    }

    #[test]
    fn txt_name_and_data() {
        let n = txt_query_name("https://Www.Example.com/news?x=1").unwrap();
        assert!(n.ends_with("._hint.www.example.com."), "{n}");
        let (h, host) = parse_txt_query_name(&n).unwrap();
        assert_eq!(h, url_hash("https://Www.Example.com/news?x=1"));
        assert_eq!(host, "www.example.com");
        assert!(parse_txt_query_name("www.example.com").is_err());
        assert!(parse_txt_query_name("zzzzzzzz._hint.example.com").is_err());
        assert!(parse_txt_query_name("0000000a._hint.").is_err());

        let hint: Vec<u8> = (0..=255).collect();
        let rdata = encode_txt(&hint).unwrap();
        assert!(rdata[0] == 255);
        assert_eq!(decode_txt(&rdata).unwrap(), hint);
        assert_eq!(
            decode_txt(b"\x03abc"),
            Err(DnsError::Txt("missing mewa1: prefix"))
        );
        assert_eq!(decode_txt(b"\x09mewa1:"), Err(DnsError::Truncated));
    }

    proptest! {
        #[test]
        fn decoders_never_panic(b in proptest::collection::vec(any::<u8>(), 0..600)) {
            let _ = HintRequest::decode(&b);
            let _ = HintResponse::decode(&b);
            let _ = decode_options(&b);
            let _ = decode_txt(&b);
            let _ = parse_txt_query_name(&String::from_utf8_lossy(&b));
        }

        #[test]
        fn txt_round_trip(b in proptest::collection::vec(any::<u8>(), 0..3000)) {
            prop_assert_eq!(decode_txt(&encode_txt(&b).unwrap()).unwrap(), b);
        }
    }
}
