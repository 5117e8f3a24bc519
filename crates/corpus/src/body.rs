//! Deterministic response bodies that really reference the modelled objects,
//! so that a real browser loading a corpus page fetches exactly the page's
//! objects.
//!
//! Every body is exactly `size` bytes: the references first, then padding of
//! the right syntax for the type (an HTML comment, a CSS/JS block comment,
//! deterministic bytes behind the right magic number for images and fonts).
//! URLs are absolute (`scheme://host/path`) so that any origin works; the
//! caller picks the scheme ([`Scheme`]) because the same corpus is served over
//! cleartext HTTP/1.1 and h2c and over TLS.
//!
//! What each kind of parent writes for its children:
//!
//! | parent | child (discovery) | written as |
//! |---|---|---|
//! | HTML | CSS (`html`) | `<link rel="stylesheet" href="…">` in `<head>` |
//! | HTML | script (`html`) | `<script src="…"></script>` at the end of `<body>` |
//! | HTML | image (`html`) | `<img src="…" alt="">` |
//! | HTML | HTML (`html`) | `<iframe src="…"></iframe>` |
//! | HTML | font / other (`html`) | `<link rel="preload" as="font"/"fetch" href="…" crossorigin>` |
//! | CSS | CSS (`css`) | `@import url("…");` |
//! | CSS | image (`css`) | `.mewa-oX{…background-image:url("…"),…}` |
//! | CSS | font (`css`) | `@font-face{font-family:"mewa-fN";src:url("…")}` + a rule using it |
//! | script | image (`script`) | `new Image().src="…";` |
//! | script | CSS / script / HTML (`script`) | an inserted `<link>` / `<script>` / `<iframe>` element |
//! | script | font / other (`script`) | `fetch("…",{mode:"no-cors"});` |
//!
//! Browsers fetch a CSS background image or a web font only when an element
//! uses it, so the root document carries one hook element per CSS object that
//! has CSS-discovered images or fonts (`<div class="mewa-oX">` with a
//! `<span class="mewa-fN">` per font); hooks hold no URLs. A script first
//! busy-waits its `compute_ms` (`performance.now()` loop) and only then
//! issues its fetches, which is the computation gap of seed 001.
//!
//! If the references alone need more than `size` bytes, [`body`] returns
//! [`BodyError::TooSmall`]; the generator prevents that by flooring every size
//! at [`min_body_size`] for `https` (the longer scheme). Images and fonts have
//! no references: a size below the magic number's length gives the magic
//! number's first `size` bytes.

use crate::page::{carries_references, Discovery, Kind, Object, Page};
use crate::rng::Rng;

/// URL scheme written into bodies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Scheme {
    /// `http://` (HTTP/1.1 and h2c origins).
    Http,
    /// `https://` (TLS and QUIC origins).
    Https,
}

impl Scheme {
    /// `"http"` or `"https"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Scheme::Http => "http",
            Scheme::Https => "https",
        }
    }
}

/// Why a body could not be produced.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BodyError {
    /// The page has no object with this id.
    #[error("page `{page}` has no object {id}")]
    UnknownObject {
        /// Page name.
        page: String,
        /// The id asked for.
        id: u32,
    },
    /// The object's size is above [`crate::MAX_OBJECT_SIZE`] (an unvalidated
    /// page); validate the page first.
    #[error("page `{page}`, object {id}: size {size} is above the 100 MB limit")]
    TooLarge {
        /// Page name.
        page: String,
        /// Object id.
        id: u32,
        /// The object's size.
        size: u64,
    },
    /// The object's references do not fit in its size; raise the size to at
    /// least `needed` (the generator does this itself).
    #[error("page `{page}`, object {id}: size {size} is smaller than the {needed} bytes its references need")]
    TooSmall {
        /// Page name.
        page: String,
        /// Object id.
        id: u32,
        /// The object's size.
        size: u64,
        /// Bytes the references need.
        needed: u64,
    },
}

/// The body of object `id` of `page`: exactly `size` bytes, identical on every
/// call.
pub fn body(page: &Page, id: u32, scheme: Scheme) -> Result<Vec<u8>, BodyError> {
    let o = find(page, id)?;
    if o.size > crate::MAX_OBJECT_SIZE {
        return Err(BodyError::TooLarge {
            page: page.name.clone(),
            id,
            size: o.size,
        });
    }
    let (head, tail, pad) = skeleton(page, o, scheme);
    let fixed = (head.len() + tail.len()) as u64;
    let size = o.size;
    if matches!(pad, Pad::Binary) {
        if o.content_type.starts_with("image/webp") && size >= WEBP_MIN {
            return Ok(binary(o, &webp_head(size)));
        }
        return Ok(binary(o, &head));
    }
    if fixed > size {
        return Err(BodyError::TooSmall {
            page: page.name.clone(),
            id,
            size,
            needed: fixed,
        });
    }
    let room = (size - fixed) as usize;
    let mut out = Vec::with_capacity(o.size as usize);
    out.extend_from_slice(&head);
    match pad {
        Pad::Comment(open, close) if room >= open.len() + close.len() => {
            out.extend_from_slice(open.as_bytes());
            filler(&mut out, room - open.len() - close.len());
            out.extend_from_slice(close.as_bytes());
        }
        Pad::Comment(..) => out.resize(out.len() + room, b'\n'),
        Pad::Text => filler(&mut out, room),
        Pad::Binary => {}
    }
    out.extend_from_slice(&tail);
    Ok(out)
}

/// Bytes the object's references (and the type's fixed markup) need: the
/// smallest `size` for which [`body`] succeeds. 0 for images and fonts.
pub fn min_body_size(page: &Page, id: u32, scheme: Scheme) -> Result<u64, BodyError> {
    let o = find(page, id)?;
    let (head, tail, pad) = skeleton(page, o, scheme);
    Ok(match pad {
        Pad::Binary => 0,
        _ => (head.len() + tail.len()) as u64,
    })
}

/// Where each reference of an HTML body ends: `(child id, byte offset just
/// past its quoted URL)`, in body order. A browser's preload scanner finds a
/// reference as soon as these bytes have arrived (the loader
/// discovers HTML references chunk by chunk, as Chromium does). Empty for
/// other types and for responses a browser does not read.
pub fn reference_ends(page: &Page, id: u32, scheme: Scheme) -> Result<Vec<(u32, u64)>, BodyError> {
    let o = find(page, id)?;
    if o.kind() != Kind::Html || !carries_references(o.status()) {
        return Ok(Vec::new());
    }
    let (head, _, _) = skeleton(page, o, scheme);
    let mut out: Vec<(u32, u64)> = page
        .children(id, Discovery::Html)
        .filter_map(|c| {
            let quoted = format!("\"{}\"", c.url(scheme.as_str()));
            let at = find_bytes(&head, quoted.as_bytes())?;
            Some((c.id, (at + quoted.len()) as u64))
        })
        .collect();
    out.sort_by_key(|&(id, end)| (end, id));
    Ok(out)
}

/// First position of `needle` in `hay`.
fn find_bytes(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

fn find(page: &Page, id: u32) -> Result<&Object, BodyError> {
    page.object(id).ok_or_else(|| BodyError::UnknownObject {
        page: page.name.clone(),
        id,
    })
}

/// How the room between head and tail is filled.
enum Pad {
    /// A comment with these delimiters (whitespace when it does not fit).
    Comment(&'static str, &'static str),
    /// Plain filler text.
    Text,
    /// Deterministic pseudo-random bytes after the head (the magic number).
    Binary,
}

/// Head, tail and padding style of a body.
fn skeleton(page: &Page, o: &Object, scheme: Scheme) -> (Vec<u8>, Vec<u8>, Pad) {
    let s = scheme.as_str();
    let ct = o.content_type.to_ascii_lowercase();
    if !carries_references(o.status()) {
        // A redirect's, a 204's or an error's body: nothing a browser reads.
        return (Vec::new(), Vec::new(), Pad::Text);
    }
    match o.kind() {
        Kind::Html => {
            let (h, t) = html(page, o, s);
            (h.into_bytes(), t.into_bytes(), Pad::Comment("<!--", "-->"))
        }
        Kind::Css => (
            css(page, o, s).into_bytes(),
            Vec::new(),
            Pad::Comment("/*", "*/"),
        ),
        Kind::Script => (
            js(page, o, s).into_bytes(),
            Vec::new(),
            Pad::Comment("/*", "*/"),
        ),
        Kind::Image if ct.starts_with("image/svg") => (
            b"<svg xmlns=\"http://www.w3.org/2000/svg\">".to_vec(),
            b"</svg>".to_vec(),
            Pad::Comment("<!--", "-->"),
        ),
        Kind::Image | Kind::Font => (magic(&ct, o.size), Vec::new(), Pad::Binary),
        Kind::Other => (Vec::new(), Vec::new(), Pad::Text),
    }
}

fn title(name: &str) -> String {
    name.chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | ' '))
        .collect()
}

fn html(page: &Page, o: &Object, s: &str) -> (String, String) {
    let mut h = format!(
        "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>{}</title>\n",
        title(&page.name)
    );
    let kids: Vec<&Object> = page.children(o.id, Discovery::Html).collect();
    for c in kids.iter().filter(|c| c.kind() == Kind::Css) {
        h += &format!("<link rel=\"stylesheet\" href=\"{}\">\n", c.url(s));
    }
    h += "</head><body>\n";
    if page.document().map(|d| d.id) == Some(o.id) {
        // Hooks that make CSS-discovered images and fonts load (module doc).
        for css in page.objects.iter().filter(|c| c.kind() == Kind::Css) {
            let css_kids: Vec<&Object> = page.children(css.id, Discovery::Css).collect();
            if !css_kids
                .iter()
                .any(|k| matches!(k.kind(), Kind::Image | Kind::Font))
            {
                continue;
            }
            h += &format!("<div class=\"mewa-o{}\">", css.id);
            for f in css_kids.iter().filter(|k| k.kind() == Kind::Font) {
                h += &format!("<span class=\"mewa-f{}\">a</span>", f.id);
            }
            h += "</div>\n";
        }
    }
    for c in &kids {
        let u = c.url(s);
        match c.kind() {
            Kind::Css | Kind::Script => {}
            Kind::Image => h += &format!("<img src=\"{u}\" alt=\"\">\n"),
            Kind::Html => h += &format!("<iframe src=\"{u}\"></iframe>\n"),
            Kind::Font => {
                h += &format!("<link rel=\"preload\" as=\"font\" href=\"{u}\" crossorigin>\n")
            }
            Kind::Other => {
                h += &format!("<link rel=\"preload\" as=\"fetch\" href=\"{u}\" crossorigin>\n")
            }
        }
    }
    for c in kids.iter().filter(|c| c.kind() == Kind::Script) {
        h += &format!("<script src=\"{}\"></script>\n", c.url(s));
    }
    (h, "\n</body></html>\n".to_string())
}

fn css(page: &Page, o: &Object, s: &str) -> String {
    let kids: Vec<&Object> = page.children(o.id, Discovery::Css).collect();
    let mut out = String::new();
    // @import must precede every other rule.
    for c in kids.iter().filter(|c| c.kind() == Kind::Css) {
        out += &format!("@import url(\"{}\");\n", c.url(s));
    }
    for c in kids.iter().filter(|c| c.kind() == Kind::Font) {
        out += &format!(
            "@font-face{{font-family:\"mewa-f{id}\";src:url(\"{u}\")}}\n.mewa-f{id}{{font-family:\"mewa-f{id}\"}}\n",
            id = c.id,
            u = c.url(s)
        );
    }
    let imgs: Vec<String> = kids
        .iter()
        .filter(|c| c.kind() == Kind::Image)
        .map(|c| format!("url(\"{}\")", c.url(s)))
        .collect();
    if !imgs.is_empty() {
        out += &format!(
            ".mewa-o{}{{height:1px;background-image:{}}}\n",
            o.id,
            imgs.join(",")
        );
    }
    out
}

fn js(page: &Page, o: &Object, s: &str) -> String {
    let mut out = String::from("(function(){\n");
    if o.compute_ms > 0 {
        out += &format!(
            "var t=performance.now();while(performance.now()-t<{}){{}}\n",
            o.compute_ms
        );
    }
    for c in page.children(o.id, Discovery::Script) {
        let u = c.url(s);
        out += &match c.kind() {
            Kind::Image => format!("new Image().src=\"{u}\";\n"),
            Kind::Css => format!("var l=document.createElement(\"link\");l.rel=\"stylesheet\";l.href=\"{u}\";document.head.appendChild(l);\n"),
            Kind::Script => format!("var s=document.createElement(\"script\");s.src=\"{u}\";document.head.appendChild(s);\n"),
            Kind::Html => format!("var f=document.createElement(\"iframe\");f.src=\"{u}\";document.body.appendChild(f);\n"),
            Kind::Font | Kind::Other => format!("fetch(\"{u}\",{{mode:\"no-cors\"}});\n"),
        };
    }
    out += "})();\n";
    out
}

/// The file signature a decoder checks first, so that browsers and tools see
/// the declared type.
fn magic(ct: &str, size: u64) -> Vec<u8> {
    match ct {
        "image/png" => b"\x89PNG\r\n\x1a\n".to_vec(),
        "image/jpeg" | "image/jpg" => vec![0xFF, 0xD8, 0xFF, 0xE0],
        "image/gif" => b"GIF89a".to_vec(),
        "image/webp" => {
            let mut v = b"RIFF".to_vec();
            let len = u32::try_from(size.saturating_sub(8)).unwrap_or(u32::MAX);
            v.extend_from_slice(&len.to_le_bytes());
            v.extend_from_slice(b"WEBP");
            v
        }
        "image/x-icon" | "image/vnd.microsoft.icon" => vec![0, 0, 1, 0],
        "font/woff2" => b"wOF2".to_vec(),
        "font/woff" | "application/font-woff" => b"wOFF".to_vec(),
        "font/otf" => b"OTTO".to_vec(),
        "font/ttf" | "application/x-font-ttf" => vec![0, 1, 0, 0],
        _ => Vec::new(),
    }
}

/// The smallest WebP body [`webp_head`] can build: RIFF header, VP8X,
/// the 1×1 VP8L image and the padding chunk's header.
const WEBP_MIN: u64 = 54;

/// A 1×1 lossless WebP's first 54 bytes (extended format) announcing an
/// unknown `PADD` chunk that fills the body to `size`; the body's random
/// filler becomes that chunk's payload. Decoders skip unknown chunks.
/// Why: Chromium cancels an image download whose bytes fail to decode,
/// for WebP after a few KB, and would load less than the corpus models
/// (other formats are only decoded once whole). An odd `size` leaves one
/// byte after the RIFF data, which decoders ignore.
fn webp_head(size: u64) -> Vec<u8> {
    let pad = (size.saturating_sub(WEBP_MIN) & !1).min(u64::from(u32::MAX) - 64);
    let pad32 = u32::try_from(pad).unwrap_or(0);
    let mut v = Vec::with_capacity(WEBP_MIN as usize);
    v.extend_from_slice(b"RIFF");
    v.extend_from_slice(&(46 + pad32).to_le_bytes());
    v.extend_from_slice(b"WEBP");
    // VP8X: no flags, canvas 1×1 (width − 1 and height − 1, 24 bits each).
    v.extend_from_slice(b"VP8X");
    v.extend_from_slice(&10u32.to_le_bytes());
    v.extend_from_slice(&[0; 10]);
    // VP8L: signature, 14-bit width − 1 and height − 1, no alpha, version
    // 0; then no transform, no colour cache, no meta prefix codes, and five
    // simple prefix codes of one symbol (0) each, so the one pixel takes
    // no bits.
    v.extend_from_slice(b"VP8L");
    v.extend_from_slice(&8u32.to_le_bytes());
    v.extend_from_slice(&[0x2f, 0, 0, 0, 0, 0x88, 0x88, 0x08]);
    v.extend_from_slice(b"PADD");
    v.extend_from_slice(&pad32.to_le_bytes());
    v
}

fn binary(o: &Object, magic: &[u8]) -> Vec<u8> {
    let size = o.size as usize;
    let mut out = Vec::with_capacity(size);
    out.extend_from_slice(&magic[..magic.len().min(size)]);
    let mut rng = Rng::new(u64::from(o.id) ^ o.size.rotate_left(32) ^ 0x6D65_7761);
    while out.len() < size {
        let w = rng.next_u64().to_le_bytes();
        let n = (size - out.len()).min(8);
        out.extend_from_slice(&w[..n]);
    }
    out
}

/// Readable filler that holds no URL and no comment delimiter.
fn filler(out: &mut Vec<u8>, n: usize) {
    const TEXT: &[u8] = b"mewa corpus filler, deterministic padding to the modelled size. ";
    let start = out.len();
    while out.len() - start < n {
        let k = (n - (out.len() - start)).min(TEXT.len());
        out.extend_from_slice(&TEXT[..k]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Walks a WebP's RIFF chunks; returns the FourCCs in order.
    fn riff_chunks(b: &[u8]) -> Result<Vec<String>, String> {
        if b.len() < 12 || &b[0..4] != b"RIFF" || &b[8..12] != b"WEBP" {
            return Err("no RIFF/WEBP header".into());
        }
        let riff = u32::from_le_bytes([b[4], b[5], b[6], b[7]]) as usize;
        if riff % 2 != 0 || riff + 8 > b.len() || riff + 8 + 1 < b.len() {
            return Err(format!("RIFF size {riff} for {} bytes", b.len()));
        }
        let end = riff + 8;
        let mut at = 12;
        let mut out = Vec::new();
        while at < end {
            if at + 8 > end {
                return Err("truncated chunk header".into());
            }
            let tag = String::from_utf8_lossy(&b[at..at + 4]).to_string();
            let n = u32::from_le_bytes([b[at + 4], b[at + 5], b[at + 6], b[at + 7]]) as usize;
            at += 8 + n + (n & 1);
            if at > end {
                return Err(format!("chunk {tag} runs past the RIFF data"));
            }
            out.push(tag);
        }
        Ok(out)
    }

    fn image(size: u64) -> Object {
        Object {
            id: 3,
            host: "img.example".into(),
            path: "/a.webp".into(),
            size,
            content_type: "image/webp".into(),
            parent: Some(0),
            discovery: crate::Discovery::Html,
            compute_ms: 0,
            status: None,
            think_ms: 0,
            recorded_size: None,
        }
    }

    #[test]
    fn webp_bodies_are_well_formed_at_their_exact_size() {
        for size in (54..400).chain([1000, 3659, 89_916, 89_917, 1 << 20]) {
            let o = image(size);
            let b = binary(&o, &webp_head(size));
            assert_eq!(b.len() as u64, size);
            let chunks = riff_chunks(&b).unwrap_or_else(|e| panic!("{size}: {e}"));
            assert_eq!(chunks, ["VP8X", "VP8L", "PADD"], "{size}");
            assert_eq!(&b[38..41], &[0x2f, 0, 0], "VP8L signature, {size}");
        }
    }
}
