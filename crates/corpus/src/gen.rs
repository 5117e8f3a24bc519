//! The seeded synthetic generator and its presets, one per workload of the
//! seeds: `meh15` (seed 000 §IV), `accel7` (seed 004 §IV),
//! `complat` (seed 001 §4) and `general` (HTTP Archive / Web Almanac 2022
//! mobile figures). docs/CORPUS.md gives every number and its source.
//!
//! A corpus is a pure function of (preset, seed, options): the PRNG is our own
//! SplitMix64 and every draw happens in a fixed order.

use std::fmt;
use std::str::FromStr;

use mewa_model::iw::{computation_for_share, t_transfer};
use mewa_model::{DEFAULT_IW, DEFAULT_MSS, DELAYED_ACK_GROWTH, KB};

use crate::body::{min_body_size, Scheme};
use crate::page::{Corpus, Discovery, Object, Page, Provenance};
use crate::rng::Rng;

/// A generator preset.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Preset {
    /// Seed 000 §IV: 15 mobile pages, 346–3686 KB, 21–87 objects, including
    /// the three pages of Fig. 8 (622 KB/32, 1412 KB/72, 3648 KB/46).
    Meh15,
    /// Seed 004 §IV: one HTML page, one CSS file and 42 images on 7 domains,
    /// 320 KB in total.
    Accel7,
    /// Seed 001 §4: 400/1000/2400 KB pages whose main script carries a
    /// computation gap set as a share (5–95 %) of the load.
    Complat,
    /// A general corpus drawn from HTTP Archive / Web Almanac 2022 mobile
    /// figures (median 70 requests, median page ≈ 2 MB).
    General,
}

impl Preset {
    /// Every preset.
    pub const ALL: [Preset; 4] = [
        Preset::Meh15,
        Preset::Accel7,
        Preset::Complat,
        Preset::General,
    ];

    /// The preset's name on the command line and in provenance.
    pub fn name(self) -> &'static str {
        match self {
            Preset::Meh15 => "meh15",
            Preset::Accel7 => "accel7",
            Preset::Complat => "complat",
            Preset::General => "general",
        }
    }
}

impl fmt::Display for Preset {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Preset {
    type Err = GenError;
    fn from_str(s: &str) -> Result<Preset, GenError> {
        Preset::ALL
            .into_iter()
            .find(|p| p.name() == s)
            .ok_or_else(|| GenError::UnknownPreset(s.to_string()))
    }
}

/// Options that change a preset's defaults.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Options {
    /// `general` only: number of pages (default [`GENERAL_DEFAULT_PAGES`]).
    pub pages: Option<usize>,
    /// `complat` only: one computation share in [0.05, 0.95] instead of the
    /// default sweep 5 %, 10 %, …, 95 %.
    pub share: Option<f64>,
}

/// Pages in a `general` corpus unless [`Options::pages`] says otherwise.
pub const GENERAL_DEFAULT_PAGES: usize = 100;

/// Most pages a `general` corpus may have.
pub const GENERAL_MAX_PAGES: usize = 10_000;

/// RTT used to turn a complat share into milliseconds: 100 ms, the fixed RTT
/// of seed 001 Fig. 4.
pub const COMPLAT_RTT_S: f64 = 0.1;

/// Why a corpus could not be generated.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum GenError {
    /// The name is not a preset.
    #[error("unknown preset `{0}`; choose one of meh15, accel7, complat, general")]
    UnknownPreset(String),
    /// An option was given to a preset that does not take it.
    #[error("preset {preset} does not take {option}")]
    OptionNotApplicable {
        /// The preset.
        preset: &'static str,
        /// The option (`--pages`, `--share`).
        option: &'static str,
    },
    /// `pages` is 0 or above [`GENERAL_MAX_PAGES`].
    #[error("pages must be between 1 and {GENERAL_MAX_PAGES}, got {0}")]
    Pages(usize),
    /// `share` is outside [0.05, 0.95] (seed 001's range) or not a number.
    #[error("share must be between 0.05 and 0.95 (5%-95% of the load), got {0}")]
    Share(f64),
}

/// [`generate_with`] with the preset's defaults (which cannot fail).
pub fn generate(preset: Preset, seed: u64) -> Corpus {
    build(preset, seed, &Options::default())
}

/// Generates a corpus of `preset` from `seed`; the same arguments always give
/// the same corpus.
pub fn generate_with(preset: Preset, seed: u64, opts: &Options) -> Result<Corpus, GenError> {
    if opts.pages.is_some() && preset != Preset::General {
        return Err(GenError::OptionNotApplicable {
            preset: preset.name(),
            option: "--pages",
        });
    }
    if opts.share.is_some() && preset != Preset::Complat {
        return Err(GenError::OptionNotApplicable {
            preset: preset.name(),
            option: "--share",
        });
    }
    if let Some(n) = opts.pages {
        if n == 0 || n > GENERAL_MAX_PAGES {
            return Err(GenError::Pages(n));
        }
    }
    if let Some(s) = opts.share {
        if !(s.is_finite() && (0.05 - 1e-9..=0.95 + 1e-9).contains(&s)) {
            return Err(GenError::Share(s));
        }
    }
    Ok(build(preset, seed, opts))
}

/// The generator proper, for options already checked.
fn build(preset: Preset, seed: u64, opts: &Options) -> Corpus {
    let mut rng = Rng::new(seed);
    let pages = match preset {
        Preset::Meh15 => meh15(&mut rng),
        Preset::Accel7 => vec![accel7(&mut rng)],
        Preset::Complat => complat(&mut rng, &complat_shares(opts.share)),
        Preset::General => general(&mut rng, opts.pages.unwrap_or(GENERAL_DEFAULT_PAGES)),
    };
    Corpus {
        name: preset.name().to_string(),
        provenance: Provenance::Generated {
            preset: preset.name().to_string(),
            seed,
            pages: opts.pages,
            share: opts.share,
        },
        pages,
    }
}

// ---------------------------------------------------------------- presets

/// Seed 000 §IV: "The size of these pages ranges from 346KB to 3686KB and the
/// number of objects ranges from 21 to 87"; Fig. 8 shows pages of
/// 622 KB/32 objects, 1412 KB/72 and 3648 KB/46.
fn meh15(rng: &mut Rng) -> Vec<Page> {
    let mut shapes: Vec<(u64, usize)> = vec![(622, 32), (1412, 72), (3648, 46)];
    // The range's ends, each once: smallest and largest size, fewest and most
    // objects.
    let n_lo = rng.range(21, 87) as usize;
    let n_hi = rng.range(21, 87) as usize;
    shapes.push((346, n_lo));
    shapes.push((3686, n_hi));
    shapes.push((log_uniform(rng, 346.0, 3686.0), 21));
    shapes.push((log_uniform(rng, 346.0, 3686.0), 87));
    while shapes.len() < 15 {
        let kb = log_uniform(rng, 346.0, 3686.0);
        let n = rng.range(21, 87) as usize;
        shapes.push((kb, n));
    }
    shapes.sort();
    shapes
        .iter()
        .enumerate()
        .map(|(i, &(kb, n))| {
            let name = format!("meh15-{:02}-{kb}k-{n}", i + 1);
            let hosts = rng.range(2, 8) as usize;
            mixed_page(rng, &name, kb * KB, n, hosts, &|_| 0)
        })
        .collect()
}

fn log_uniform(rng: &mut Rng, lo: f64, hi: f64) -> u64 {
    (lo * (hi / lo).powf(rng.unit())).round() as u64
}

/// Seed 004 §IV: "The Web page includes 42 image files, which are stored in
/// seven different domains, a CSS file, and an HTML file; the total size of
/// this Web page is 320 Kbytes."
fn accel7(rng: &mut Rng) -> Page {
    let name = "accel7";
    let www = format!("www.{name}.example");
    let mut objects = vec![
        obj(0, &www, "/", "text/html", None, Discovery::Html),
        obj(
            1,
            &www,
            "/css/style.css",
            "text/css",
            Some(0),
            Discovery::Html,
        ),
    ];
    for i in 0..42u32 {
        let host = format!("img{}.{name}.example", i % 7 + 1);
        let path = format!("/images/{:02}.jpg", i + 1);
        objects.push(obj(
            i + 2,
            &host,
            &path,
            "image/jpeg",
            Some(0),
            Discovery::Html,
        ));
    }
    let weights = objects.iter().map(|o| weight(rng, o)).collect();
    finish(name, objects, weights, 320 * KB)
}

/// The shares of a complat corpus: the given one, or 5 %, 10 %, …, 95 %.
fn complat_shares(share: Option<f64>) -> Vec<f64> {
    match share {
        Some(s) => vec![s],
        None => (1..=19).map(|k| f64::from(k) * 0.05).collect(),
    }
}

/// Seed 001 §4: "content size to 400KB, 1000KB, 2400KB"; "controllable
/// computation latency (from 5% to 95% of the total expected content completion
/// time) embedded in the sequences of content objects requests". The share is
/// t_c / (t_c + t_principle) (seed 001 §4.1, [`computation_for_share`]) with
/// t_principle from eq. 1 ([`t_transfer`]) at IW 10, MSS 1500 B, γ 1.5 and
/// [`COMPLAT_RTT_S`].
///
/// Page: HTML, one CSS, one main script carrying all the computation, 8 images
/// in the HTML (before the gap) and 8 fetched by the script (after it), on one
/// host (seed 001 loads from one content server).
fn complat(rng: &mut Rng, shares: &[f64]) -> Vec<Page> {
    let mut pages = Vec::new();
    for kb in [400u64, 1000, 2400] {
        for &share in shares {
            let bytes = kb * KB;
            let pct = (share * 100.0).round() as u32;
            let name = format!("complat-{kb}k-s{pct:02}");
            let t_p = t_transfer(
                bytes,
                COMPLAT_RTT_S,
                f64::from(DEFAULT_IW),
                DEFAULT_MSS,
                DELAYED_ACK_GROWTH,
            );
            let ms = computation_for_share(share.min(0.95), t_p).map_or(0.0, |s| s * 1000.0);
            let host = format!("www.{name}.example");
            let mut objects = vec![
                obj(0, &host, "/", "text/html", None, Discovery::Html),
                obj(
                    1,
                    &host,
                    "/css/style.css",
                    "text/css",
                    Some(0),
                    Discovery::Html,
                ),
                obj(
                    2,
                    &host,
                    "/js/main.js",
                    "text/javascript",
                    Some(0),
                    Discovery::Html,
                ),
            ];
            objects[2].compute_ms = ms.round() as u32;
            for i in 0..16u32 {
                let (parent, how) = if i < 8 {
                    (0, Discovery::Html)
                } else {
                    (2, Discovery::Script)
                };
                let path = format!("/images/{:02}.jpg", i + 1);
                objects.push(obj(i + 3, &host, &path, "image/jpeg", Some(parent), how));
            }
            let weights = objects.iter().map(|o| weight(rng, o)).collect();
            pages.push(finish(&name, objects, weights, bytes));
        }
    }
    pages
}

/// Median requests per mobile page, Web Almanac 2022 (Page Weight chapter).
pub const GENERAL_MEDIAN_REQUESTS: f64 = 70.0;
/// σ of ln(requests): our assumption (see docs/CORPUS.md).
pub const GENERAL_SIGMA_REQUESTS: f64 = 0.6;
/// Median mobile page weight, bytes: ≈ 2 MB (Web Almanac 2022, Page Weight).
pub const GENERAL_MEDIAN_BYTES: f64 = 2_000_000.0;
/// σ of ln(bytes): fitted to the 2020 chapter's mobile p75 3.7 MB and p90
/// 6.7 MB around the 2 MB median (ln(3.7/2)/0.674 ≈ 0.91,
/// ln(6.7/2)/1.282 ≈ 0.94).
pub const GENERAL_SIGMA_BYTES: f64 = 0.93;

/// N pages with lognormal request counts and weights (docs/CORPUS.md).
fn general(rng: &mut Rng, n: usize) -> Vec<Page> {
    (0..n)
        .map(|i| {
            let reqs = rng
                .lognormal(GENERAL_MEDIAN_REQUESTS, GENERAL_SIGMA_REQUESTS)
                .round()
                .clamp(5.0, 400.0) as usize;
            let bytes = rng
                .lognormal(GENERAL_MEDIAN_BYTES, GENERAL_SIGMA_BYTES)
                .round()
                .clamp(100_000.0, 20_000_000.0) as u64;
            let hosts = rng.lognormal(6.0, 0.5).round().clamp(1.0, 10.0) as usize;
            let name = format!("general-{:04}", i + 1);
            mixed_page(rng, &name, bytes, reqs, hosts, &|r: &mut Rng| {
                r.lognormal(15.0, 1.0).round().clamp(0.0, 2000.0) as u32
            })
        })
        .collect()
}

// ---------------------------------------------------------- page building

fn obj(
    id: u32,
    host: &str,
    path: &str,
    ct: &str,
    parent: Option<u32>,
    discovery: Discovery,
) -> Object {
    Object {
        id,
        host: host.to_string(),
        path: path.to_string(),
        size: 0,
        content_type: ct.to_string(),
        parent,
        discovery,
        compute_ms: 0,
        status: None,
        think_ms: 0,
        recorded_size: None,
    }
}

const HOST_LABELS: [&str; 9] = [
    "cdn", "static", "img", "fonts", "api", "media", "assets", "ads", "stats",
];

/// A page of `n` objects (root included) on `hosts` hosts weighing `total`
/// bytes, in the mix of docs/CORPUS.md: ~8 % CSS, ~25 % scripts, ~5 % fonts,
/// the rest images; some CSS by `@import`, some scripts and 15 % of images
/// fetched by scripts, 15 % of images and all fonts referenced by CSS.
fn mixed_page(
    rng: &mut Rng,
    name: &str,
    total: u64,
    n: usize,
    hosts: usize,
    compute: &dyn Fn(&mut Rng) -> u32,
) -> Page {
    let n = n.max(1);
    let rest = n - 1;
    let n_css = if rest >= 3 {
        (rest * 8 / 100).max(1)
    } else {
        0
    };
    let n_js = if rest >= 2 {
        (rest * 25 / 100).max(1)
    } else {
        0
    };
    let n_font = rest * 5 / 100;
    let n_img = rest - n_css - n_js - n_font;
    let hosts = hosts.clamp(1, n.clamp(1, 10));
    let host_names: Vec<String> = (0..hosts)
        .map(|k| match k {
            0 => format!("www.{name}.example"),
            k => format!(
                "{}.{name}.example",
                HOST_LABELS[(k - 1) % HOST_LABELS.len()]
            ),
        })
        .collect();
    let www = &host_names[0];
    let mut objects = vec![obj(0, www, "/", "text/html", None, Discovery::Html)];
    let mut css_ids = Vec::new();
    let mut js_ids = Vec::new();
    let next_host = |rng: &mut Rng, id: u32| -> String {
        // Objects 1..hosts-1 use each extra host once; the rest draw one.
        let k = if (id as usize) < hosts {
            id as usize
        } else {
            rng.pick(hosts)
        };
        host_names[k].clone()
    };
    for k in 0..n_css {
        let id = objects.len() as u32;
        let host = next_host(rng, id);
        let (p, how) = if k > 0 && rng.chance(0.25) {
            (css_ids[rng.pick(css_ids.len())], Discovery::Css)
        } else {
            (0, Discovery::Html)
        };
        css_ids.push(id);
        let path = format!("/css/s{id}.css");
        objects.push(obj(id, &host, &path, "text/css", Some(p), how));
    }
    for k in 0..n_js {
        let id = objects.len() as u32;
        let host = next_host(rng, id);
        let (p, how) = if k > 0 && rng.chance(0.25) {
            (js_ids[rng.pick(js_ids.len())], Discovery::Script)
        } else {
            (0, Discovery::Html)
        };
        js_ids.push(id);
        let path = format!("/js/a{id}.js");
        let mut o = obj(id, &host, &path, "text/javascript", Some(p), how);
        o.compute_ms = compute(rng);
        objects.push(o);
    }
    for _ in 0..n_font {
        let id = objects.len() as u32;
        let host = next_host(rng, id);
        let (p, how) = if css_ids.is_empty() {
            (0, Discovery::Html)
        } else {
            (css_ids[rng.pick(css_ids.len())], Discovery::Css)
        };
        let path = format!("/fonts/f{id}.woff2");
        objects.push(obj(id, &host, &path, "font/woff2", Some(p), how));
    }
    for _ in 0..n_img {
        let id = objects.len() as u32;
        let host = next_host(rng, id);
        let r = rng.unit();
        let (p, how) = if r < 0.15 && !css_ids.is_empty() {
            (css_ids[rng.pick(css_ids.len())], Discovery::Css)
        } else if r < 0.30 && !js_ids.is_empty() {
            (js_ids[rng.pick(js_ids.len())], Discovery::Script)
        } else {
            (0, Discovery::Html)
        };
        let t = rng.unit();
        let (ext, ct) = match t {
            t if t < 0.45 => ("jpg", "image/jpeg"),
            t if t < 0.75 => ("png", "image/png"),
            t if t < 0.90 => ("webp", "image/webp"),
            t if t < 0.95 => ("gif", "image/gif"),
            _ => ("svg", "image/svg+xml"),
        };
        let path = format!("/img/i{id}.{ext}");
        objects.push(obj(id, &host, &path, ct, Some(p), how));
    }
    let weights = objects.iter().map(|o| weight(rng, o)).collect();
    finish(name, objects, weights, total)
}

/// Relative size draw per type (docs/CORPUS.md): lognormal with median and σ
/// of our choosing — scripts and images heavier and more spread than HTML,
/// CSS and fonts.
fn weight(rng: &mut Rng, o: &Object) -> f64 {
    use crate::page::Kind;
    let (median, sigma) = match o.kind() {
        Kind::Html => (1.0, 0.5),
        Kind::Css => (0.8, 0.8),
        Kind::Script => (1.6, 1.0),
        Kind::Font => (1.0, 0.4),
        Kind::Image if o.content_type == "image/svg+xml" => (0.2, 0.5),
        Kind::Image => (1.2, 1.2),
        Kind::Other => (0.5, 0.5),
    };
    rng.lognormal(median, sigma)
}

/// Smallest body the generator writes for any object, bytes.
const SIZE_FLOOR: u64 = 100;

/// Gives the objects sizes summing to exactly `total`, in proportion to
/// `weights` above each object's floor (what its body's references need, at
/// least [`SIZE_FLOOR`]). If the floors alone exceed `total`, the floors win
/// and the page is heavier than asked (only for tiny totals).
fn finish(name: &str, objects: Vec<Object>, weights: Vec<f64>, total: u64) -> Page {
    let mut page = Page {
        name: name.to_string(),
        main: format!("http://{}/", objects[0].host),
        objects,
        shared_connections: Vec::new(),
    };
    let floors: Vec<u64> = page
        .objects
        .iter()
        .map(|o| {
            min_body_size(&page, o.id, Scheme::Https)
                .unwrap_or(0)
                .max(SIZE_FLOOR)
        })
        .collect();
    let floor_sum: u64 = floors.iter().sum();
    let spare = total.saturating_sub(floor_sum);
    let wsum: f64 = weights.iter().sum::<f64>().max(f64::MIN_POSITIVE);
    let mut given = 0u64;
    for (i, o) in page.objects.iter_mut().enumerate() {
        let extra = (spare as f64 * weights[i] / wsum).floor() as u64;
        o.size = floors[i] + extra;
        given += extra;
    }
    // Rounding remainder to the heaviest object.
    if let Some(big) = page.objects.iter_mut().max_by_key(|o| o.size) {
        big.size += spare - given.min(spare);
    }
    page
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn complat_compute_matches_share() {
        let c = generate_with(
            Preset::Complat,
            1,
            &Options {
                share: Some(0.35),
                ..Options::default()
            },
        )
        .expect("complat");
        assert_eq!(c.pages.len(), 3);
        for p in &c.pages {
            let bytes = p.total_bytes();
            let t_p = t_transfer(bytes, COMPLAT_RTT_S, 10.0, 1500, 1.5);
            let tc = f64::from(p.objects[2].compute_ms) / 1000.0;
            let share = tc / (tc + t_p);
            assert!((share - 0.35).abs() < 0.001, "{} {share}", p.name);
        }
    }
}
