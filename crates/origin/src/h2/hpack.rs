//! HPACK (RFC 7541): a small response encoder that needs no dynamic table,
//! and the request decoder: dynamic table, size updates, and Huffman strings
//! decoded four bits at a time by an automaton built once from the code
//! table. Every malformed block is an error, never a panic.

/// Static-table index of a response header name (RFC 7541 Appendix A).
fn static_name(name: &str) -> Option<usize> {
    Some(match name {
        "accept-ranges" => 18,
        "access-control-allow-origin" => 20,
        "age" => 21,
        "allow" => 22,
        "cache-control" => 24,
        "content-disposition" => 25,
        "content-encoding" => 26,
        "content-language" => 27,
        "content-length" => 28,
        "content-location" => 29,
        "content-range" => 30,
        "content-type" => 31,
        "date" => 33,
        "etag" => 34,
        "expires" => 36,
        "last-modified" => 44,
        "link" => 45,
        "location" => 46,
        "retry-after" => 53,
        "server" => 54,
        "set-cookie" => 55,
        "strict-transport-security" => 56,
        "vary" => 59,
        "via" => 60,
        "www-authenticate" => 61,
        _ => return None,
    })
}

/// An integer with an `prefix`-bit prefix; `first` holds the pattern bits
/// above the prefix (RFC 7541 §5.1).
pub(crate) fn put_int(out: &mut Vec<u8>, first: u8, prefix: u32, v: usize) {
    let max = (1usize << prefix) - 1;
    if v < max {
        // v < 2^prefix <= 128 fits in the low bits.
        out.push(first | v as u8);
        return;
    }
    out.push(first | max as u8);
    let mut rest = v - max;
    while rest >= 128 {
        out.push((rest % 128) as u8 | 0x80);
        rest /= 128;
    }
    out.push(rest as u8);
}

/// A string literal without Huffman coding (RFC 7541 §5.2).
pub(crate) fn put_str(out: &mut Vec<u8>, s: &[u8]) {
    put_int(out, 0, 7, s.len());
    out.extend_from_slice(s);
}

/// Encodes a response head. Fields are "literal without indexing" so that no
/// dynamic table is kept, whatever `SETTINGS_HEADER_TABLE_SIZE` the client
/// announces; the common statuses are fully indexed. This costs a few dozen
/// bytes per response against an indexing encoder (docs/ORIGIN.md).
pub fn encode_response(status: http::StatusCode, headers: &http::HeaderMap, out: &mut Vec<u8>) {
    match status.as_u16() {
        200 => put_int(out, 0x80, 7, 8),
        204 => put_int(out, 0x80, 7, 9),
        206 => put_int(out, 0x80, 7, 10),
        304 => put_int(out, 0x80, 7, 11),
        400 => put_int(out, 0x80, 7, 12),
        404 => put_int(out, 0x80, 7, 13),
        500 => put_int(out, 0x80, 7, 14),
        other => {
            put_int(out, 0, 4, 8);
            put_str(out, other.to_string().as_bytes());
        }
    }
    for (name, value) in headers {
        match static_name(name.as_str()) {
            Some(i) => put_int(out, 0, 4, i),
            None => {
                out.push(0);
                put_str(out, name.as_str().as_bytes());
            }
        }
        put_str(out, value.as_bytes());
    }
}

/// Static table (RFC 7541 Appendix A); index 1 is the first entry.
const STATIC: [(&str, &str); 61] = [
    (":authority", ""),
    (":method", "GET"),
    (":method", "POST"),
    (":path", "/"),
    (":path", "/index.html"),
    (":scheme", "http"),
    (":scheme", "https"),
    (":status", "200"),
    (":status", "204"),
    (":status", "206"),
    (":status", "304"),
    (":status", "400"),
    (":status", "404"),
    (":status", "500"),
    ("accept-charset", ""),
    ("accept-encoding", "gzip, deflate"),
    ("accept-language", ""),
    ("accept-ranges", ""),
    ("accept", ""),
    ("access-control-allow-origin", ""),
    ("age", ""),
    ("allow", ""),
    ("authorization", ""),
    ("cache-control", ""),
    ("content-disposition", ""),
    ("content-encoding", ""),
    ("content-language", ""),
    ("content-length", ""),
    ("content-location", ""),
    ("content-range", ""),
    ("content-type", ""),
    ("cookie", ""),
    ("date", ""),
    ("etag", ""),
    ("expect", ""),
    ("expires", ""),
    ("from", ""),
    ("host", ""),
    ("if-match", ""),
    ("if-modified-since", ""),
    ("if-none-match", ""),
    ("if-range", ""),
    ("if-unmodified-since", ""),
    ("last-modified", ""),
    ("link", ""),
    ("location", ""),
    ("max-forwards", ""),
    ("proxy-authenticate", ""),
    ("proxy-authorization", ""),
    ("range", ""),
    ("referer", ""),
    ("refresh", ""),
    ("retry-after", ""),
    ("server", ""),
    ("set-cookie", ""),
    ("strict-transport-security", ""),
    ("transfer-encoding", ""),
    ("user-agent", ""),
    ("vary", ""),
    ("via", ""),
    ("www-authenticate", ""),
];

/// Why a header block cannot be decoded; the connection must end with
/// COMPRESSION_ERROR (RFC 9113 §4.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// The block ends inside a representation.
    #[error("header block truncated")]
    Truncated,
    /// An integer larger than any sane length or index.
    #[error("integer overflow")]
    Overflow,
    /// Index 0 or beyond the static + dynamic tables.
    #[error("index out of range")]
    BadIndex,
    /// A table size update above the allowed size, or not at the start of
    /// the block (RFC 7541 §4.2).
    #[error("invalid dynamic table size update")]
    BadSizeUpdate,
    /// Invalid Huffman code: EOS inside, or padding that is longer than 7
    /// bits or not the EOS prefix (RFC 7541 §5.2).
    #[error("invalid Huffman string")]
    Huffman,
    /// An earlier block was not decoded to its end (it passed the size
    /// limit), so the dynamic table is no longer the peer's.
    #[error("dynamic table lost after an oversized header block")]
    TableLost,
}

/// A decoded header block.
#[derive(Debug, Default)]
pub struct Fields {
    /// Name/value pairs in order, up to the size limit.
    pub list: Vec<(Vec<u8>, Vec<u8>)>,
    /// RFC 9113 §6.5.2 size (name + value + 32 per field) of the whole block.
    pub size: usize,
    /// The block exceeded the limit; `list` is incomplete and decoding
    /// stopped there ([`Decoder::decode`]).
    pub too_large: bool,
}

/// The request-side HPACK state of one connection: the dynamic table.
#[derive(Debug)]
pub struct Decoder {
    /// Newest first.
    table: std::collections::VecDeque<(Vec<u8>, Vec<u8>)>,
    size: usize,
    max_size: usize,
    /// Our SETTINGS_HEADER_TABLE_SIZE: the peer may not go above it.
    allowed: usize,
    /// A block was left undecoded past the limit: the table is unknown.
    lost: bool,
}

impl Decoder {
    /// A decoder whose table may grow to `allowed` bytes (what we announce
    /// as SETTINGS_HEADER_TABLE_SIZE; 4096 by default).
    pub fn new(allowed: usize) -> Decoder {
        Decoder {
            table: std::collections::VecDeque::new(),
            size: 0,
            max_size: allowed,
            allowed,
            lost: false,
        }
    }

    /// Decodes a complete header block. Once its fields pass `limit` bytes
    /// (RFC 9113 §6.5.2 sizes) it is `too_large` and nothing more is
    /// copied: fields are only read (linear in the block) to keep the
    /// dynamic table in step, so the connection can answer 431 and go on.
    /// A literal that would be added to the table past the limit stops the
    /// decoding instead (copying its name each time would let a small
    /// block cost without bound: naming a 4 KB entry takes two bytes, so a
    /// 256 KB block could copy ~0.5 GB), and the decoder is spent: every
    /// later block is [`DecodeError::TableLost`] (the connection must end,
    /// RFC 7541 §2.2's shared state being gone).
    pub fn decode(&mut self, block: &[u8], limit: usize) -> Result<Fields, DecodeError> {
        if self.lost {
            return Err(DecodeError::TableLost);
        }
        let mut f = Fields::default();
        let mut r = Reader { b: block, pos: 0 };
        let mut fields_seen = false;
        while let Some(&first) = r.b.get(r.pos) {
            if first & 0x80 != 0 {
                let i = r.int(7)?;
                let (n, v) = self.entry(i)?;
                keep(&mut f, limit, n, v);
            } else if first & 0xe0 == 0x20 {
                if fields_seen {
                    return Err(DecodeError::BadSizeUpdate);
                }
                let size = r.int(5)?;
                if size > self.allowed {
                    return Err(DecodeError::BadSizeUpdate);
                }
                self.max_size = size;
                self.evict(0);
                continue;
            } else {
                let (prefix, index) = if first & 0x40 != 0 {
                    (6, true)
                } else {
                    // 0000xxxx without indexing, 0001xxxx never indexed.
                    (4, false)
                };
                let i = r.int(prefix)?;
                if index && f.too_large {
                    self.lost = true;
                    break;
                }
                if index {
                    let name = if i == 0 {
                        r.string()?
                    } else {
                        self.entry(i)?.0.to_vec()
                    };
                    let value = r.string()?;
                    keep(&mut f, limit, &name, &value);
                    self.insert(name, value);
                } else if i == 0 {
                    let name = r.string()?;
                    let value = r.string()?;
                    keep(&mut f, limit, &name, &value);
                } else {
                    let value = r.string()?;
                    keep(&mut f, limit, self.entry(i)?.0, &value);
                }
            }
            fields_seen = true;
        }
        Ok(f)
    }

    fn entry(&self, i: usize) -> Result<(&[u8], &[u8]), DecodeError> {
        match i {
            0 => Err(DecodeError::BadIndex),
            1..=61 => {
                let (n, v) = STATIC[i - 1];
                Ok((n.as_bytes(), v.as_bytes()))
            }
            _ => self
                .table
                .get(i - 62)
                .map(|(n, v)| (n.as_slice(), v.as_slice()))
                .ok_or(DecodeError::BadIndex),
        }
    }

    /// Adds an entry, evicting the oldest to make room; an entry larger than
    /// the table empties it and is not added (RFC 7541 §4.4).
    fn insert(&mut self, name: Vec<u8>, value: Vec<u8>) {
        let size = name.len() + value.len() + 32;
        self.evict(size);
        if size <= self.max_size {
            self.size += size;
            self.table.push_front((name, value));
        }
    }

    /// Evicts until `room` more bytes fit (or the table is empty).
    fn evict(&mut self, room: usize) {
        while self.size + room > self.max_size {
            let Some((n, v)) = self.table.pop_back() else {
                self.size = 0;
                return;
            };
            self.size -= n.len() + v.len() + 32;
        }
    }
}

fn keep(f: &mut Fields, limit: usize, n: &[u8], v: &[u8]) {
    f.size = f.size.saturating_add(n.len() + v.len() + 32);
    if f.size > limit {
        f.too_large = true;
    } else {
        f.list.push((n.to_vec(), v.to_vec()));
    }
}

struct Reader<'a> {
    b: &'a [u8],
    pos: usize,
}

impl Reader<'_> {
    fn byte(&mut self) -> Result<u8, DecodeError> {
        let b = *self.b.get(self.pos).ok_or(DecodeError::Truncated)?;
        self.pos += 1;
        Ok(b)
    }

    /// An integer with a `prefix`-bit prefix (RFC 7541 §5.1), at most 2^28
    /// (far above any index or string this server accepts).
    fn int(&mut self, prefix: u32) -> Result<usize, DecodeError> {
        let max = (1usize << prefix) - 1;
        let mut v = usize::from(self.byte()?) & max;
        if v < max {
            return Ok(v);
        }
        let mut shift = 0;
        loop {
            let b = self.byte()?;
            // Zero-valued continuation bytes do not grow `v`, so the shift
            // itself must be bounded (found by the fuzzer).
            if shift > 28 {
                return Err(DecodeError::Overflow);
            }
            v += usize::from(b & 0x7f) << shift;
            if v > 1 << 28 {
                return Err(DecodeError::Overflow);
            }
            if b & 0x80 == 0 {
                return Ok(v);
            }
            shift += 7;
        }
    }

    fn string(&mut self) -> Result<Vec<u8>, DecodeError> {
        let huffman = self.b.get(self.pos).ok_or(DecodeError::Truncated)? & 0x80 != 0;
        let len = self.int(7)?;
        let end = self.pos.checked_add(len).ok_or(DecodeError::Overflow)?;
        let raw = self.b.get(self.pos..end).ok_or(DecodeError::Truncated)?;
        self.pos = end;
        if huffman {
            huffman_decode(raw)
        } else {
            Ok(raw.to_vec())
        }
    }
}

/// One step of the Huffman decoder: from a state (an inner node of the code
/// tree), read four bits.
#[derive(Debug, Clone, Copy, Default)]
struct Step {
    next: u8,
    /// A symbol completed within these bits (at most one: codes are >= 5
    /// bits long).
    emit: Option<u8>,
    /// The bits lead into EOS or off the tree: invalid.
    fail: bool,
}

/// The nibble automaton, plus which states may end a string (the root, or a
/// run of at most seven 1-bits from it: a prefix of EOS, RFC 7541 §5.2).
struct Huffman {
    steps: Vec<[Step; 16]>,
    accept: Vec<bool>,
}

/// Builds the automaton from the code table (RFC 7541 Appendix B, as
/// `(length, code)` pairs published by `httlib-huffman`).
fn build_huffman() -> Huffman {
    // The code tree: inner nodes with two children; a child is a node
    // index (`Ok`) or a symbol (`Err`). The HPACK code is complete, so
    // there are 256 inner nodes for 257 symbols.
    let mut tree: Vec<[Option<Result<usize, u16>>; 2]> = vec![[None, None]];
    for (sym, &(len, code)) in httlib_huffman::encoder::table::ENCODE_TABLE
        .iter()
        .enumerate()
    {
        let mut node = 0;
        for bit in (0..len).rev() {
            let b = ((code >> bit) & 1) as usize;
            if bit == 0 {
                tree[node][b] = Some(Err(sym as u16));
            } else {
                node = match tree[node][b] {
                    Some(Ok(n)) => n,
                    _ => {
                        tree.push([None, None]);
                        let n = tree.len() - 1;
                        tree[node][b] = Some(Ok(n));
                        n
                    }
                };
            }
        }
    }
    let mut accept = vec![false; tree.len()];
    let mut node = 0;
    accept[0] = true;
    for _ in 0..7 {
        match tree[node][1] {
            Some(Ok(n)) => {
                accept[n] = true;
                node = n;
            }
            _ => break,
        }
    }
    let steps = (0..tree.len())
        .map(|start| {
            let mut row = [Step::default(); 16];
            for (nib, step) in row.iter_mut().enumerate() {
                let mut node = start;
                for bit in (0..4).rev() {
                    match tree[node][(nib >> bit) & 1] {
                        Some(Ok(n)) => node = n,
                        Some(Err(sym)) => match u8::try_from(sym) {
                            Ok(s) => {
                                step.emit = Some(s);
                                node = 0;
                            }
                            Err(_) => step.fail = true,
                        },
                        None => step.fail = true,
                    }
                }
                // Inner-node count is 256, so indexes fit in u8.
                step.next = u8::try_from(node).unwrap_or(0);
            }
            row
        })
        .collect();
    Huffman { steps, accept }
}

fn huffman() -> &'static Huffman {
    static H: std::sync::OnceLock<Huffman> = std::sync::OnceLock::new();
    H.get_or_init(build_huffman)
}

/// Decodes a Huffman-coded string (RFC 7541 §5.2).
pub fn huffman_decode(raw: &[u8]) -> Result<Vec<u8>, DecodeError> {
    let h = huffman();
    let mut out = Vec::with_capacity(raw.len() * 8 / 5);
    let mut state = 0usize;
    for &b in raw {
        for nib in [b >> 4, b & 0x0f] {
            let s = h.steps[state][usize::from(nib)];
            if s.fail {
                return Err(DecodeError::Huffman);
            }
            if let Some(c) = s.emit {
                out.push(c);
            }
            state = usize::from(s.next);
        }
    }
    if !h.accept[state] {
        return Err(DecodeError::Huffman);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::{HeaderMap, HeaderValue, StatusCode};
    use proptest::prelude::*;

    fn hex(s: &str) -> Vec<u8> {
        let s: String = s.split_whitespace().collect();
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    fn strs(f: &Fields) -> Vec<(String, String)> {
        f.list
            .iter()
            .map(|(n, v)| {
                (
                    String::from_utf8(n.clone()).unwrap(),
                    String::from_utf8(v.clone()).unwrap(),
                )
            })
            .collect()
    }

    fn pairs(p: &[(&str, &str)]) -> Vec<(String, String)> {
        p.iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect()
    }

    /// RFC 7541 C.3 (plain literals) and C.4 (Huffman): two requests in a
    /// row, the second indexing the first's `:authority` from the table.
    #[test]
    fn rfc7541_request_examples() {
        for (first, second) in [
            (
                "8286 8441 0f77 7777 2e65 7861 6d70 6c65 2e63 6f6d",
                "8286 84be 5808 6e6f 2d63 6163 6865",
            ),
            (
                "8286 8441 8cf1 e3c2 e5f2 3a6b a0ab 90f4 ff",
                "8286 84be 5886 a8eb 1064 9cbf",
            ),
        ] {
            let mut d = Decoder::new(4096);
            let f = d.decode(&hex(first), 16384).unwrap();
            let base = [
                (":method", "GET"),
                (":scheme", "http"),
                (":path", "/"),
                (":authority", "www.example.com"),
            ];
            assert_eq!(strs(&f), pairs(&base));
            assert_eq!(d.size, 57);
            let f = d.decode(&hex(second), 16384).unwrap();
            let mut want = base.to_vec();
            want.push(("cache-control", "no-cache"));
            assert_eq!(strs(&f), pairs(&want));
            assert_eq!(d.size, 110);
        }
    }

    #[test]
    fn malformed_blocks_are_errors() {
        let mut d = Decoder::new(4096);
        assert_eq!(
            d.decode(&[0x80], 1 << 14).unwrap_err(),
            DecodeError::BadIndex
        );
        assert_eq!(
            d.decode(&[0xbe], 1 << 14).unwrap_err(),
            DecodeError::BadIndex
        );
        // Size update after a field, and above what we allow.
        assert_eq!(
            d.decode(&[0x82, 0x20], 1 << 14).unwrap_err(),
            DecodeError::BadSizeUpdate
        );
        assert_eq!(
            d.decode(&[0x3f, 0xe2, 0x1f], 1 << 14).unwrap_err(),
            DecodeError::BadSizeUpdate
        );
        assert!(d.decode(&[0x20, 0x82], 1 << 14).is_ok());
        // Truncated: a literal whose string runs past the block.
        assert_eq!(
            d.decode(&[0x00, 0x05, b'a'], 1 << 14).unwrap_err(),
            DecodeError::Truncated
        );
        assert_eq!(
            d.decode(&[0xff, 0xff, 0xff, 0xff, 0xff, 0x7f], 1 << 14)
                .unwrap_err(),
            DecodeError::Overflow
        );
        // Endless zero continuation bytes.
        let mut zeros = vec![0xff];
        zeros.extend([0x80; 20]);
        zeros.push(0);
        assert_eq!(
            d.decode(&zeros, 1 << 14).unwrap_err(),
            DecodeError::Overflow
        );
    }

    #[test]
    fn huffman_padding_and_eos_rules() {
        // 'a' is 00011; padded with ones it decodes, with zeros it does not.
        assert_eq!(huffman_decode(&[0x1f]).unwrap(), b"a");
        assert_eq!(huffman_decode(&[0x18]).unwrap_err(), DecodeError::Huffman);
        // Padding longer than 7 bits.
        assert_eq!(
            huffman_decode(&[0x1f, 0xff]).unwrap_err(),
            DecodeError::Huffman
        );
        // EOS (30 ones) inside the string.
        assert_eq!(
            huffman_decode(&[0xff, 0xff, 0xff, 0xff]).unwrap_err(),
            DecodeError::Huffman
        );
        assert_eq!(huffman_decode(&[]).unwrap(), b"");
    }

    #[test]
    fn table_evicts_oldest_and_respects_size_updates() {
        let mut d = Decoder::new(100);
        // Two entries of 4 + 15 + 32 = 51 bytes do not both fit in 100.
        let lit = |n: &str, v: &str| {
            let mut b = vec![0x40, n.len() as u8];
            b.extend_from_slice(n.as_bytes());
            b.push(v.len() as u8);
            b.extend_from_slice(v.as_bytes());
            b
        };
        d.decode(&lit("aaaa", "bbbbbbbbbbbbbbb"), 1 << 14).unwrap();
        d.decode(&lit("cccc", "ddddddddddddddd"), 1 << 14).unwrap();
        assert_eq!(d.table.len(), 1);
        let f = d.decode(&[0xbe], 1 << 14).unwrap();
        assert_eq!(strs(&f), pairs(&[("cccc", "ddddddddddddddd")]));
        // Size 0 empties the table.
        d.decode(&[0x20], 1 << 14).unwrap();
        assert_eq!(
            d.decode(&[0xbe], 1 << 14).unwrap_err(),
            DecodeError::BadIndex
        );
    }

    #[test]
    fn encoded_response_decodes_back() {
        let mut h = HeaderMap::new();
        h.insert("content-type", HeaderValue::from_static("text/css"));
        h.insert("content-length", HeaderValue::from_static("123456"));
        h.insert("x-long", HeaderValue::from_str(&"v".repeat(300)).unwrap());
        for status in [200u16, 304, 421, 431] {
            let mut out = Vec::new();
            encode_response(StatusCode::from_u16(status).unwrap(), &h, &mut out);
            let f = Decoder::new(4096)
                .decode(&out, 1 << 14)
                .expect("valid HPACK");
            let got = strs(&f);
            assert_eq!(got[0], (":status".into(), status.to_string()));
            assert_eq!(got[1], ("content-type".into(), "text/css".into()));
            assert_eq!(got[2], ("content-length".into(), "123456".into()));
            assert_eq!(got[3].1.len(), 300);
            assert_eq!(got.len(), 4);
        }
    }

    /// A 103's `:status` is not in the static table: a literal with the
    /// indexed name `:status` (8), never added to a table, so the final
    /// response after it decodes the same; `link` fields keep their order.
    #[test]
    fn early_hints_head_encodes_without_touching_the_table() {
        let mut h = HeaderMap::new();
        h.append(
            "link",
            HeaderValue::from_static("<https://b.example>; rel=preconnect"),
        );
        h.append(
            "link",
            HeaderValue::from_static("<https://a.example/a.css>; rel=preload; as=style"),
        );
        let mut out = Vec::new();
        encode_response(StatusCode::EARLY_HINTS, &h, &mut out);
        // 0000 1000 (literal without indexing, name index 8), then "103".
        assert_eq!(&out[..5], &[0x08, 3, b'1', b'0', b'3']);
        // `link` is static entry 45: 0000 1111, then 45 - 15.
        assert_eq!(&out[5..7], &[0x0f, 30]);
        let mut d = Decoder::new(4096);
        let got = strs(&d.decode(&out, 1 << 14).expect("valid HPACK"));
        assert_eq!(
            got,
            vec![
                (":status".into(), "103".into()),
                ("link".into(), "<https://b.example>; rel=preconnect".into()),
                (
                    "link".into(),
                    "<https://a.example/a.css>; rel=preload; as=style".into()
                ),
            ]
        );
        assert!(d.table.is_empty());
        let mut fin = Vec::new();
        encode_response(StatusCode::OK, &HeaderMap::new(), &mut fin);
        let got = strs(&d.decode(&fin, 1 << 14).expect("valid HPACK"));
        assert_eq!(got, vec![(":status".into(), "200".into())]);
    }

    #[test]
    fn decode_stops_keeping_fields_past_the_limit() {
        let mut h = HeaderMap::new();
        for i in 0..10 {
            h.append("x-a", HeaderValue::from_str(&format!("{i:0100}")).unwrap());
        }
        let mut block = Vec::new();
        encode_response(StatusCode::OK, &h, &mut block);
        let f = Decoder::new(4096).decode(&block, 500).expect("valid");
        assert!(f.too_large);
        assert!(f.list.len() < 5);
        assert!(f.size > 1000);
    }

    #[test]
    fn indexed_names_past_the_limit_are_not_copied_on() {
        // A 4 KB name in the table, then a block of 100 000 two-byte
        // literals naming it: decoding stops at the limit, after a handful.
        let mut d = Decoder::new(8192);
        let name = vec![b'n'; 4000];
        // Literal with incremental indexing, new name: 0x40, then the name's
        // length 4000 (7-bit prefix: 127 + varint 3873), the name, an empty
        // value.
        let mut first = vec![0x40, 0x7f];
        let mut rest = 4000usize - 127;
        while rest >= 128 {
            first.push((rest % 128) as u8 | 0x80);
            rest /= 128;
        }
        first.push(rest as u8);
        first.extend_from_slice(&name);
        first.push(0);
        let f = d.decode(&first, 1 << 14).expect("valid");
        assert_eq!(f.list.len(), 1);
        // Index 62 is that entry. Literals without indexing naming it
        // (0000xxxx: 15 + varint 47, empty value) are read, not copied,
        // past the limit, and the table stays in step.
        let plain: Vec<u8> = std::iter::repeat_n([0x0f, 47, 0], 100_000)
            .flatten()
            .collect();
        let f = d.decode(&plain, 1 << 14).expect("valid");
        assert!(f.too_large);
        assert!(f.list.len() <= 4, "{}", f.list.len());
        assert_eq!(f.size, 100_000 * 4032);
        assert_eq!(d.decode(&first, 1 << 14).expect("in step").list.len(), 1);
        // With incremental indexing (01xxxxxx, index 62 in the 6-bit
        // prefix), each would copy the 4 KB name into the table: decoding
        // stops at the limit and the decoder is spent.
        let bomb: Vec<u8> = std::iter::repeat_n([0x40 | 62, 0], 100_000)
            .flatten()
            .collect();
        let f = d.decode(&bomb, 1 << 14).expect("valid");
        assert!(f.too_large);
        assert!(f.size < 6 * 4032, "{}", f.size);
        assert!(matches!(
            d.decode(&first, 1 << 14),
            Err(DecodeError::TableLost)
        ));
    }

    proptest! {
        /// Whatever an independent encoder (httlib-huffman) codes, we
        /// decode back.
        #[test]
        fn huffman_round_trip(s in proptest::collection::vec(any::<u8>(), 0..200)) {
            let mut coded = Vec::new();
            httlib_huffman::encode(&s, &mut coded).unwrap();
            prop_assert_eq!(huffman_decode(&coded).unwrap(), s);
        }

        /// Arbitrary bytes never panic the decoder.
        #[test]
        fn arbitrary_blocks_do_not_panic(b in proptest::collection::vec(any::<u8>(), 0..300)) {
            let mut d = Decoder::new(4096);
            let _ = d.decode(&b, 4096);
            let _ = d.decode(&b, 4096);
        }
    }
}
