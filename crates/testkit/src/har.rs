//! Synthetic HAR 1.2 recordings of ad-heavy pages, deterministic from a seed.
//!
//! Why they exist: the recordings under `shared/data/pages` reach 42 hosts,
//! and they are pages whose behaviour we have looked at and tuned to. Real
//! ad-heavy pages load 280–950 objects from about 100 hosts, and their ad and
//! tracking scripts request URLs with random parameters (cache busters,
//! timestamps, ids) that a replayed page, whose scripts are synthetic, never
//! requests again. [`synthetic_har`] writes such pages — nobody here tuned to
//! them, with as many hosts and objects as the heavy real ones — in the shape
//! Chrome (chrome-har) exports, so that they go through the same importer
//! (`mewa_hint::import::import_har`, `mewa corpus import`) as real ones.
//!
//! What a page holds: one document `https://www.<name>.example/`, then style
//! sheets, scripts, fonts, images, XHR/JSON, beacons (204), ad frames and a
//! few redirects (301/302), spread over the hosts so that the document's host
//! holds about a quarter of them, first-party hosts (`cdn1.<name>.example`,
//! `img3.<name>.example`) and font and library hosts some, and ad and tracking
//! hosts (`ads7.tracker.example`, `sync2.adx.example`) the rest, per host
//! heavy-tailed (a few hosts serve many objects, most serve one or two).
//! Sizes are drawn from per-type histograms with heavy tails (many images
//! under 3 kB, a few scripts over 300 kB).
//!
//! The discovery tree is recorded the way `import_har` reads it: every entry
//! but the document carries an `_initiator` — `parser` with the URL of the
//! document, a style sheet (fonts, background images, `@import`) or an ad
//! frame; `script` with a stack whose frame is the requesting script; a
//! redirect target carries its hop's initiator and is found through the hop's
//! `redirectURL`. Entries are in `startedDateTime` order, and a child starts
//! after its parent's first byte (parser) or last byte (script), so every
//! parent is an earlier entry. Each host has one connection (its first entry
//! pays DNS, TCP and TLS; later ones wait for it), and `Referer` headers name
//! the document, or the style sheet or frame that referenced the object.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashSet};

use serde_json::{json, Value};

/// What to generate. [`synthetic_har`] first applies [`HarSpec::clamped`],
/// so any spec gives a page; the clamped spec is what the page holds exactly.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HarSpec {
    /// Distinct hosts the page's objects are served from, the document's
    /// host included.
    pub hosts: usize,
    /// Entries of the HAR, i.e. objects after import: the document, redirect
    /// hops and their targets included.
    pub objects: usize,
    /// The same seed (and spec) always gives the same text.
    pub seed: u64,
    /// How many of the entries are tracking or ad requests whose URLs carry
    /// random parameters (`?cb=…&t=…`), requested by scripts: a replay of
    /// the page will not request exactly these URLs again.
    pub random_tracking: usize,
}

impl HarSpec {
    /// Most entries a page can have. The heaviest real pages have a few
    /// thousand; this bounds the work an absurd spec can ask for.
    pub const MAX_OBJECTS: usize = 20_000;

    /// The spec as generated. Rule: `objects` is clamped to
    /// 1..=[`HarSpec::MAX_OBJECTS`]; `hosts` to 1..=`objects` (every host
    /// serves at least one object); `random_tracking` to at most `objects − 2`
    /// (the document and one script to request them; none below 3 objects).
    pub fn clamped(&self) -> HarSpec {
        let objects = self.objects.clamp(1, Self::MAX_OBJECTS);
        HarSpec {
            hosts: self.hosts.clamp(1, objects),
            objects,
            seed: self.seed,
            random_tracking: self.random_tracking.min(objects.saturating_sub(2)),
        }
    }
}

impl Default for HarSpec {
    /// An ad-heavy page: 600 objects on 100 hosts, 60 of them random
    /// tracking requests.
    fn default() -> Self {
        HarSpec {
            hosts: 100,
            objects: 600,
            seed: 1,
            random_tracking: 60,
        }
    }
}

/// A HAR 1.2 document (JSON text) with one page as [`HarSpec`] asks for,
/// after [`HarSpec::clamped`]: exactly `objects` entries on exactly `hosts`
/// hosts, `random_tracking` of them with random query parameters. Never
/// panics; the same spec gives the same text. The module documentation says
/// what the page looks like.
pub fn synthetic_har(spec: &HarSpec) -> String {
    let spec = spec.clamped();
    let mut rng = SplitMix64::new(spec.seed);
    let name = site_name(&mut rng);
    let hosts = make_hosts(spec.hosts, &name, &mut rng);
    let mut objs = plan(&spec, &mut rng);
    assign_hosts(&mut objs, &hosts, &mut rng);
    assign_parents(&mut objs, &hosts, &mut rng);
    name_objects(&mut objs, &hosts, &mut rng);
    let (order, times) = schedule(&objs, &hosts, &mut rng);
    render(&objs, &hosts, &order, &times)
}

/// splitmix64 (Steele, Lea, Flood 2014; the seeder of xoshiro): small,
/// fast, and every seed gives a full-period stream.
#[derive(Debug, Clone)]
struct SplitMix64(u64);

impl SplitMix64 {
    fn new(seed: u64) -> Self {
        SplitMix64(seed)
    }

    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (0 when `n` is 0), by multiply-shift.
    fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }

    /// Uniform in `lo..=hi`.
    fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi.saturating_sub(lo).saturating_add(1))
    }

    /// True with probability `pct`/100.
    fn percent(&mut self, pct: u64) -> bool {
        self.below(100) < pct
    }

    /// Uniform element index of a non-empty length; 0 for an empty one.
    fn index(&mut self, len: usize) -> usize {
        self.below(len as u64) as usize
    }

    /// An index drawn with the given weights (the last one when all are 0).
    fn weighted(&mut self, weights: &[u64]) -> usize {
        let total: u64 = weights.iter().sum();
        let mut x = self.below(total);
        for (i, w) in weights.iter().enumerate() {
            if x < *w {
                return i;
            }
            x -= w;
        }
        weights.len().saturating_sub(1)
    }

    /// `n` lower-case hex digits.
    fn hex(&mut self, n: usize) -> String {
        (0..n)
            .map(|_| char::from(b"0123456789abcdef"[self.index(16)]))
            .collect()
    }

    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items.get(self.index(items.len())).copied().unwrap_or("x")
    }
}

/// Who runs a host, which decides what it serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    /// `www.<name>.example`, the document's host.
    Main,
    /// The site's other hosts (`cdn1.`, `img2.`, `static1.` …).
    FirstParty,
    /// A web-font service.
    Fonts,
    /// Script libraries, widgets, players.
    Libs,
    /// Ads, trackers, exchanges, analytics.
    Ads,
}

/// Roles in the order of the weight rows in [`Kind::role_weights`].
const ROLES: [Role; 5] = [
    Role::Main,
    Role::FirstParty,
    Role::Fonts,
    Role::Libs,
    Role::Ads,
];

#[derive(Debug, Clone)]
struct Host {
    name: String,
    role: Role,
    /// Rank within its role: lower ranks serve more (Zipf weights).
    rank: usize,
    rtt_us: u64,
    /// Bytes per millisecond this host's responses arrive at.
    bytes_per_ms: u64,
    /// Server think time, µs, before the first byte (upper bound of a draw).
    think_max_us: u64,
}

/// A site name such as `metroherald` from the seed.
fn site_name(rng: &mut SplitMix64) -> String {
    const A: [&str; 12] = [
        "daily", "metro", "city", "morning", "global", "local", "north", "evening", "sun", "star",
        "valley", "coast",
    ];
    const B: [&str; 12] = [
        "herald", "news", "post", "times", "sport", "gazette", "tribune", "wire", "report",
        "journal", "courier", "live",
    ];
    format!("{}{}", rng.pick(&A), rng.pick(&B))
}

/// `n` ≥ 1 hosts: the document's host first, then first-party, font,
/// library and ad hosts (most of them ad hosts, as on ad-heavy pages).
fn make_hosts(n: usize, site: &str, rng: &mut SplitMix64) -> Vec<Host> {
    let rest = n - 1;
    let first = if rest == 0 {
        0
    } else {
        (rest * 8 / 100).max(1)
    };
    let fonts = if rest >= 6 { 1 + rest / 40 } else { 0 };
    let libs = if rest >= 4 {
        (rest * 12 / 100).max(1)
    } else {
        0
    };
    let ads = rest - first - fonts - libs;
    let mut hosts = vec![Host {
        name: format!("www.{site}.example"),
        role: Role::Main,
        rank: 0,
        rtt_us: rng.range(15_000, 45_000),
        bytes_per_ms: rng.range(600, 1_500),
        think_max_us: 40_000,
    }];
    let mut counters: Vec<(String, usize)> = Vec::new();
    let mut numbered = |prefix: &str, domain: &str| {
        let key = format!("{prefix}.{domain}");
        let k = match counters.iter_mut().find(|(p, _)| *p == key) {
            Some((_, k)) => {
                *k += 1;
                *k
            }
            None => {
                counters.push((key, 1));
                1
            }
        };
        format!("{prefix}{k}.{domain}")
    };
    let site_domain = format!("{site}.example");
    for (role, count) in [
        (Role::FirstParty, first),
        (Role::Fonts, fonts),
        (Role::Libs, libs),
        (Role::Ads, ads),
    ] {
        for rank in 0..count {
            let (prefix, domain) = match role {
                Role::FirstParty => (
                    rng.pick(&["cdn", "img", "static", "media", "api"]),
                    site_domain.as_str(),
                ),
                Role::Fonts => ("fonts", "typeface.example"),
                Role::Libs => *[
                    ("cdn", "libs.example"),
                    ("static", "widgets.example"),
                    ("video", "player.example"),
                    ("embed", "social.example"),
                ]
                .get(rng.index(4))
                .unwrap_or(&("cdn", "libs.example")),
                _ => *[
                    ("ads", "tracker.example"),
                    ("sync", "adx.example"),
                    ("bid", "exchange.example"),
                    ("px", "metrics.example"),
                    ("tag", "analytics.example"),
                    ("ad", "serving.example"),
                    ("cm", "match.example"),
                    ("s", "beacon.example"),
                ]
                .get(rng.index(8))
                .unwrap_or(&("ads", "tracker.example")),
            };
            let (rtt, bw, think) = match role {
                Role::FirstParty | Role::Fonts | Role::Libs => {
                    (rng.range(8_000, 35_000), rng.range(800, 2_500), 15_000)
                }
                _ => (rng.range(15_000, 120_000), rng.range(300, 1_500), 180_000),
            };
            hosts.push(Host {
                name: numbered(prefix, domain),
                role,
                rank,
                rtt_us: rtt,
                bytes_per_ms: bw,
                think_max_us: think,
            });
        }
    }
    hosts
}

/// What an entry is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Document,
    Css,
    Script,
    Font,
    Image,
    Json,
    /// `navigator.sendBeacon`: a POST answered 204.
    Beacon,
    /// An (ad) iframe's document.
    Frame,
    /// A 1×1 GIF.
    Pixel,
    /// A 301/302 whose target is the next entry of the plan.
    Hop,
}

impl Kind {
    /// Weights over [`ROLES`] for the host serving an object of this kind
    /// (the document's host is the single `Main` host, so its row entry is
    /// its share). Tracking requests always go to ad hosts.
    fn role_weights(self, tracking: bool) -> [u64; 5] {
        if tracking {
            return [0, 0, 0, 0, 100];
        }
        match self {
            Kind::Document => [100, 0, 0, 0, 0],
            Kind::Css => [55, 25, 8, 10, 2],
            Kind::Script => [20, 15, 0, 15, 50],
            Kind::Font => [30, 20, 45, 5, 0],
            Kind::Image => [35, 30, 0, 5, 30],
            Kind::Json => [30, 15, 0, 5, 50],
            Kind::Beacon => [10, 5, 0, 0, 85],
            Kind::Frame => [5, 0, 0, 5, 90],
            Kind::Pixel => [5, 0, 0, 0, 95],
            Kind::Hop => [15, 5, 0, 10, 70],
        }
    }

    /// Body size histogram: weights over the intervals of [`SIZE_EDGES`].
    fn size_weights(self) -> [u64; 9] {
        match self {
            Kind::Document => [0, 0, 0, 0, 15, 60, 25, 0, 0],
            Kind::Css => [0, 8, 20, 30, 28, 11, 3, 0, 0],
            Kind::Script => [0, 16, 40, 52, 50, 26, 7, 2, 0],
            Kind::Font => [0, 0, 0, 5, 45, 48, 2, 0, 0],
            Kind::Image => [44, 72, 84, 88, 56, 26, 7, 1, 0],
            Kind::Json => [5, 25, 30, 20, 12, 6, 2, 0, 0],
            Kind::Frame => [0, 15, 35, 30, 15, 5, 0, 0, 0],
            Kind::Beacon | Kind::Pixel | Kind::Hop => [1, 0, 0, 0, 0, 0, 0, 0, 0],
        }
    }
}

/// Interval edges, bytes, of the size histograms: heavy-tailed, roughly
/// ×3 per step. Within an interval sizes lean to its low end (see
/// [`size_in`]), so means stay near real pages': about 12 kB per image,
/// 25 kB per script, 75 kB for the document.
const SIZE_EDGES: [u64; 10] = [
    40, 200, 1_000, 3_000, 10_000, 30_000, 100_000, 300_000, 1_000_000, 3_000_000,
];

/// How an entry's parent made the browser request it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum How {
    Root,
    Parser,
    Script,
    Redirect,
}

/// One entry while the page is being built.
#[derive(Debug, Clone)]
struct Obj {
    kind: Kind,
    /// For a hop: what its target is; otherwise `kind`.
    target_kind: Kind,
    tracking: bool,
    host: usize,
    parent: usize,
    how: How,
    url: String,
    status: u16,
    location: Option<String>,
    size: u64,
}

impl Obj {
    fn new(kind: Kind, target_kind: Kind, tracking: bool) -> Obj {
        Obj {
            kind,
            target_kind,
            tracking,
            host: 0,
            parent: 0,
            how: How::Root,
            url: String::new(),
            status: 200,
            location: None,
            size: 0,
        }
    }
}

/// The entries' kinds, in an order where every possible parent comes before
/// the kinds it can reference: document, style sheets, scripts, frames, then
/// the rest; a hop is directly followed by its target.
fn plan(spec: &HarSpec, rng: &mut SplitMix64) -> Vec<Obj> {
    let ordinary = spec.objects - 1 - spec.random_tracking;
    // Image, script, css, font, json, beacon, frame, pixel, redirect pair.
    const WEIGHTS: [u64; 9] = [40, 27, 5, 3, 9, 4, 3, 6, 3];
    const KINDS: [Kind; 8] = [
        Kind::Image,
        Kind::Script,
        Kind::Css,
        Kind::Font,
        Kind::Json,
        Kind::Beacon,
        Kind::Frame,
        Kind::Pixel,
    ];
    let mut singles: Vec<Kind> = Vec::new();
    let mut pairs: Vec<Kind> = Vec::new();
    let mut left = ordinary;
    if spec.random_tracking > 0 && left > 0 {
        singles.push(Kind::Script);
        left -= 1;
    }
    while left > 0 {
        let i = rng.weighted(&WEIGHTS);
        match KINDS.get(i) {
            Some(&k) => {
                singles.push(k);
                left -= 1;
            }
            None if left >= 2 => {
                pairs.push(if rng.percent(50) {
                    Kind::Script
                } else {
                    Kind::Image
                });
                left -= 2;
            }
            None => {}
        }
    }
    let tier = |k: Kind| match k {
        Kind::Css => 0,
        Kind::Script => 1,
        Kind::Frame => 2,
        _ => 3,
    };
    singles.sort_by_key(|&k| tier(k));
    let mut objs = vec![Obj::new(Kind::Document, Kind::Document, false)];
    objs.extend(singles.into_iter().map(|k| Obj::new(k, k, false)));
    for target in pairs {
        objs.push(Obj::new(Kind::Hop, target, false));
        objs.push(Obj::new(target, target, false));
    }
    let mut left = spec.random_tracking;
    while left > 0 {
        match rng.weighted(&[45, 25, 15, 15]) {
            0 => objs.push(Obj::new(Kind::Pixel, Kind::Pixel, true)),
            1 => objs.push(Obj::new(Kind::Beacon, Kind::Beacon, true)),
            2 => objs.push(Obj::new(Kind::Json, Kind::Json, true)),
            _ if left >= 2 => {
                // A cookie sync: tracker → 302 → another tracker's pixel.
                objs.push(Obj::new(Kind::Hop, Kind::Pixel, true));
                objs.push(Obj::new(Kind::Pixel, Kind::Pixel, true));
                left -= 1;
            }
            _ => continue,
        }
        left -= 1;
    }
    objs
}

/// Gives every entry a host by its kind's role weights (Zipf within a
/// role), then moves entries to hosts left empty so that every host serves
/// at least one.
fn assign_hosts(objs: &mut [Obj], hosts: &[Host], rng: &mut SplitMix64) {
    let present: Vec<bool> = ROLES
        .iter()
        .map(|r| hosts.iter().any(|h| h.role == *r))
        .collect();
    let by_role: Vec<Vec<usize>> = ROLES
        .iter()
        .map(|r| (0..hosts.len()).filter(|&h| hosts[h].role == *r).collect())
        .collect();
    for (i, o) in objs.iter_mut().enumerate() {
        if i == 0 {
            o.host = 0;
            continue;
        }
        let mut w = o.kind.role_weights(o.tracking);
        if o.kind == Kind::Hop && !o.tracking {
            w = o.target_kind.role_weights(false);
        }
        for (x, p) in w.iter_mut().zip(&present) {
            if !p {
                *x = 0;
            }
        }
        if w.iter().all(|x| *x == 0) {
            // No host of a fitting role: any host, the document's most.
            w = [40, 15, 5, 15, 25];
            for (x, p) in w.iter_mut().zip(&present) {
                if !p {
                    *x = 0;
                }
            }
        }
        let role = rng.weighted(&w);
        let candidates = &by_role[role];
        let zipf: Vec<u64> = candidates
            .iter()
            .map(|&h| 12_000 / (hosts[h].rank as u64 + 1))
            .collect();
        o.host = candidates
            .get(rng.weighted(&zipf))
            .copied()
            .unwrap_or_default();
    }

    let mut count = vec![0usize; hosts.len()];
    for o in objs.iter() {
        count[o.host] += 1;
    }
    // Donors in a shuffled order. An object whose host has one object
    // left, or that was moved, never becomes a donor again, so one cursor
    // walks the list once.
    let mut order: Vec<usize> = (1..objs.len()).collect();
    for i in (1..order.len()).rev() {
        order.swap(i, rng.index(i + 1));
    }
    let mut moved = vec![false; objs.len()];
    let mut cursor = 0;
    for h in 0..hosts.len() {
        if count[h] > 0 {
            continue;
        }
        let donor = |i: usize, objs: &[Obj], count: &[usize]| !moved[i] && count[objs[i].host] >= 2;
        while cursor < order.len() && !donor(order[cursor], objs, &count) {
            cursor += 1;
        }
        // Prefer an object this host's role would serve, among the next few.
        let role_ix = ROLES.iter().position(|r| *r == hosts[h].role).unwrap_or(0);
        let fits = |i: usize| objs[i].kind.role_weights(objs[i].tracking)[role_ix] > 0;
        let pick = order
            .iter()
            .skip(cursor)
            .take(64)
            .copied()
            .find(|&i| donor(i, objs, &count) && fits(i))
            .or_else(|| order.get(cursor).copied());
        // With hosts ≤ objects an empty host means another host has two
        // objects, so a donor exists; stop quietly if not.
        let Some(i) = pick else { break };
        count[objs[i].host] -= 1;
        count[h] += 1;
        objs[i].host = h;
        moved[i] = true;
    }
}

/// Chooses each entry's parent among earlier ones, as the kind is found in
/// real pages: style sheets and many images by the document's parser,
/// fonts and background images by style sheets, ad scripts, XHR, beacons
/// and tracking by scripts (ad scripts first), creatives by ad frames.
fn assign_parents(objs: &mut [Obj], hosts: &[Host], rng: &mut SplitMix64) {
    let (mut css, mut scripts, mut ad_scripts, mut frames) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let mut i = 1;
    while i < objs.len() {
        let kind = objs[i].kind;
        let pick = |v: &Vec<usize>, rng: &mut SplitMix64| v.get(rng.index(v.len())).copied();
        let script_parent = |rng: &mut SplitMix64, ads_first: bool| {
            if ads_first && !ad_scripts.is_empty() && rng.percent(80) {
                pick(&ad_scripts, rng)
            } else {
                pick(&scripts, rng)
            }
        };
        let by_script = |p: Option<usize>| p.map(|p| (p, How::Script));
        let by_parser = |p: Option<usize>| p.map(|p| (p, How::Parser));
        let doc = (0, How::Parser);
        let kind_for_parent = if kind == Kind::Hop {
            objs[i].target_kind
        } else {
            kind
        };
        let choice = if objs[i].tracking {
            by_script(script_parent(rng, true))
        } else {
            match kind_for_parent {
                Kind::Css if rng.percent(15) => by_parser(pick(&css, rng)),
                Kind::Script if !scripts.is_empty() && rng.percent(45) => {
                    by_script(script_parent(rng, true))
                }
                Kind::Frame if rng.percent(50) => by_script(script_parent(rng, true)),
                Kind::Font => by_parser(pick(&css, rng)),
                // A redirect's hop is not an image or font a style sheet
                // can reference (its body is a 3xx's), so hops to images
                // are requested by the document or a script.
                Kind::Image if kind == Kind::Hop => {
                    if rng.percent(40) {
                        Some(doc)
                    } else {
                        by_script(script_parent(rng, true))
                    }
                }
                Kind::Image => match rng.below(100) {
                    0..=44 => Some(doc),
                    45..=64 => by_parser(pick(&css, rng)),
                    65..=91 => by_script(script_parent(rng, true)),
                    _ => by_parser(pick(&frames, rng)),
                },
                Kind::Json | Kind::Beacon | Kind::Pixel => by_script(script_parent(rng, true)),
                _ => None,
            }
        };
        let (parent, how) = choice.unwrap_or(doc);
        objs[i].parent = parent;
        objs[i].how = how;
        match kind {
            Kind::Css => css.push(i),
            Kind::Script => {
                scripts.push(i);
                if hosts[objs[i].host].role == Role::Ads {
                    ad_scripts.push(i);
                }
            }
            Kind::Frame => frames.push(i),
            _ => {}
        }
        if kind == Kind::Hop {
            // The target follows its hop.
            if let Some(t) = objs.get_mut(i + 1) {
                t.parent = i;
                t.how = How::Redirect;
            }
            i += 2;
        } else {
            i += 1;
        }
    }
}

/// URLs (unique), statuses, redirect targets and sizes.
fn name_objects(objs: &mut [Obj], hosts: &[Host], rng: &mut SplitMix64) {
    let mut taken: HashSet<String> = HashSet::new();
    for i in 0..objs.len() {
        let mut url = String::new();
        for attempt in 0..4 {
            let path = if i == 0 {
                "/".to_string()
            } else {
                path_for(&objs[i], hosts[objs[i].host].role, rng)
            };
            url = format!("https://{}{path}", hosts[objs[i].host].name);
            if attempt == 3 {
                let sep = if url.contains('?') { '&' } else { '?' };
                url = format!("{url}{sep}n={i}");
            }
            if !taken.contains(&url) {
                break;
            }
        }
        taken.insert(url.clone());
        let o = &mut objs[i];
        o.url = url;
        o.size = size_in(o.kind, rng);
        match o.kind {
            Kind::Pixel => o.size = *[35, 42, 43].get(rng.index(3)).unwrap_or(&43),
            Kind::Beacon => {
                o.size = 0;
                o.status = 204;
            }
            Kind::Hop => {
                o.size = 0;
                o.status = if o.tracking || rng.percent(60) {
                    302
                } else {
                    301
                };
            }
            _ => {}
        }
    }
    for i in 0..objs.len() {
        if objs[i].kind == Kind::Hop {
            objs[i].location = objs.get(i + 1).map(|t| t.url.clone());
        }
    }
}

/// A body size for `kind`: an interval of its histogram, then `lo + (hi −
/// lo)·u²` for uniform `u` (mean a third of the way up, like a log-uniform).
fn size_in(kind: Kind, rng: &mut SplitMix64) -> u64 {
    let b = rng.weighted(&kind.size_weights());
    let (lo, hi) = (SIZE_EDGES[b], SIZE_EDGES[b + 1]);
    let u = rng.below(1 << 16);
    lo + (((hi - lo) * u * u) >> 32)
}

/// A path (with query) for an entry on a host of `role`.
fn path_for(o: &Obj, role: Role, rng: &mut SplitMix64) -> String {
    const WORDS: [&str; 12] = [
        "main", "app", "vendor", "theme", "header", "article", "grid", "widgets", "comments",
        "player", "consent", "search",
    ];
    let ads = role == Role::Ads;
    if o.tracking {
        let base = rng.pick(&[
            "/px",
            "/collect",
            "/b/ss",
            "/sync",
            "/imp",
            "/pixel.gif",
            "/v1/event",
            "/usermatch",
        ]);
        let mut q = format!(
            "{base}?cb={}&t={}",
            rng.next_u64() % 10_000_000_000_000,
            1_715_679_000_000 + rng.below(600_000)
        );
        if rng.percent(60) {
            q += &format!("&uid={}", rng.hex(16));
        }
        if rng.percent(40) {
            q += &format!("&r=0.{}", rng.range(10_000_000, 99_999_999));
        }
        return q;
    }
    let word = rng.pick(&WORDS);
    match o.kind {
        Kind::Document => "/".to_string(),
        Kind::Css if role == Role::Fonts => format!("/css2?family={}&display=swap", font(rng)),
        Kind::Css => format!("/assets/css/{word}.{}.css", rng.hex(8)),
        Kind::Script if ads => format!("/tag/js/{word}.js?id={}", rng.range(100, 99_999)),
        Kind::Script if role == Role::Libs => {
            format!(
                "/npm/{word}@{}.{}.{}/dist/{word}.min.js",
                rng.range(1, 9),
                rng.range(0, 20),
                rng.range(0, 30)
            )
        }
        Kind::Script => format!("/assets/js/{word}.{}.js", rng.hex(8)),
        Kind::Font if role == Role::Fonts => {
            format!(
                "/s/{}/v{}/{}.woff2",
                font(rng),
                rng.range(10, 40),
                rng.hex(12)
            )
        }
        Kind::Font => format!("/fonts/{}-{}.{}.woff2", font(rng), weight(rng), rng.hex(6)),
        Kind::Image => {
            let ext = rng.pick(&["jpg", "jpg", "png", "png", "webp", "gif", "svg"]);
            if ads {
                format!("/creatives/{}.{ext}", rng.hex(12))
            } else {
                format!(
                    "/images/2024/{:02}/{}-{}x{}.{ext}",
                    rng.range(1, 12),
                    rng.hex(10),
                    rng.range(2, 24) * 40,
                    rng.range(2, 18) * 40
                )
            }
        }
        Kind::Json if ads => format!("/bid?slot={}&fmt=json", rng.range(1, 400)),
        Kind::Json => format!("/api/v{}/{word}?page={}", rng.range(1, 3), rng.range(1, 50)),
        Kind::Beacon => format!(
            "/collect/v{}?tid=S-{}",
            rng.range(1, 3),
            rng.range(1000, 9999)
        ),
        Kind::Frame if ads => format!(
            "/safeframe/{}-{}-{}/html/container.html",
            rng.range(1, 9),
            rng.range(0, 60),
            rng.range(0, 9)
        ),
        Kind::Frame => format!("/embed/{word}.html"),
        Kind::Pixel => format!("/p.gif?site={}", rng.range(1000, 99_999)),
        Kind::Hop => format!("/r/{}", rng.hex(10)),
    }
}

fn font(rng: &mut SplitMix64) -> &'static str {
    rng.pick(&[
        "opensans",
        "roboto",
        "lato",
        "merriweather",
        "inter",
        "sourceserif",
    ])
}

fn weight(rng: &mut SplitMix64) -> &'static str {
    rng.pick(&["regular", "bold", "italic", "light"])
}

/// Phases of one exchange, µs (`None`: did not happen, written −1).
#[derive(Debug, Clone, Default)]
struct Times {
    start: u64,
    blocked: u64,
    dns: Option<u64>,
    connect: Option<u64>,
    ssl: Option<u64>,
    send: u64,
    wait: u64,
    receive: u64,
    connection: u64,
}

impl Times {
    fn first_byte(&self) -> u64 {
        self.start
            + self.blocked
            + self.dns.unwrap_or(0)
            + self.connect.unwrap_or(0)
            + self.send
            + self.wait
    }

    fn end(&self) -> u64 {
        self.first_byte() + self.receive
    }
}

/// Times every entry, earliest start first (a child's start is computed
/// from its parent's finished exchange, so parents always come first), and
/// returns the entries in start order with their times.
fn schedule(objs: &[Obj], hosts: &[Host], rng: &mut SplitMix64) -> (Vec<usize>, Vec<Times>) {
    let mut children: Vec<Vec<usize>> = vec![Vec::new(); objs.len()];
    for (i, o) in objs.iter().enumerate().skip(1) {
        children[o.parent].push(i);
    }
    // Per host: when its connection is ready and its id, once opened.
    let mut conn: Vec<Option<(u64, u64)>> = vec![None; hosts.len()];
    let mut next_conn = 1_000 + rng.below(50_000);
    let mut times: Vec<Times> = vec![Times::default(); objs.len()];
    let mut order = Vec::with_capacity(objs.len());
    let mut heap = BinaryHeap::new();
    heap.push(Reverse((0u64, 0usize)));
    while let Some(Reverse((start, i))) = heap.pop() {
        let o = &objs[i];
        let h = &hosts[o.host];
        let mut t = Times {
            start,
            send: rng.range(40, 400) + if o.kind == Kind::Beacon { 300 } else { 0 },
            ..Times::default()
        };
        match conn[o.host] {
            None => {
                t.blocked = rng.range(0, 2_000);
                t.dns = Some(rng.range(2_000, 40_000));
                let tls = h.rtt_us + rng.range(2_000, 12_000);
                t.ssl = Some(tls);
                // HAR 1.2: `connect` includes `ssl`.
                t.connect = Some(h.rtt_us + tls);
                t.connection = next_conn;
                next_conn += rng.range(1, 40);
                let ready = t.start + t.blocked + t.dns.unwrap_or(0) + t.connect.unwrap_or(0);
                conn[o.host] = Some((ready, t.connection));
            }
            Some((ready, id)) => {
                t.blocked = ready.saturating_sub(start) + rng.range(0, 3_000);
                t.connection = id;
            }
        }
        let think = match o.kind {
            Kind::Document => rng.range(30_000, 250_000),
            _ if rng.percent(10) => rng.range(h.think_max_us / 2, h.think_max_us * 3),
            _ => rng.range(1_000, h.think_max_us),
        };
        t.wait = h.rtt_us + think;
        t.receive = (o.size * 1_000 / h.bytes_per_ms.max(1)).max(100);
        for &c in &children[i] {
            let child = &objs[c];
            let at = match child.how {
                How::Redirect => t.end() + rng.range(200, 2_000),
                How::Script => {
                    // Run the script, then maybe wait (timers, lazy ads).
                    let delay = match rng.below(100) {
                        0..=69 => rng.range(0, 200_000),
                        70..=94 => rng.range(200_000, 1_500_000),
                        _ => rng.range(1_500_000, 6_000_000),
                    };
                    t.end() + rng.range(5_000, 120_000) + delay
                }
                _ if o.kind == Kind::Css => t.end() + rng.range(10_000, 250_000),
                _ => t.first_byte() + t.receive * rng.below(1_001) / 1_000 + rng.range(500, 15_000),
            };
            heap.push(Reverse((at, c)));
        }
        times[i] = t;
        order.push(i);
    }
    (order, times)
}

/// The HAR text: entries in `order`.
fn render(objs: &[Obj], hosts: &[Host], order: &[usize], times: &[Times]) -> String {
    let page_url = objs[0].url.clone();
    // 2024-05-14T09:30:00Z.
    let epoch_ms: u64 = 1_715_679_000_000;
    let mut entries = Vec::with_capacity(order.len());
    let (mut content_loaded, mut loaded) = (0u64, 0u64);
    for &i in order {
        let o = &objs[i];
        let t = &times[i];
        let p = &objs[o.parent];
        if o.how == How::Parser || i == 0 {
            loaded = loaded.max(t.end());
            let blocking = p.kind == Kind::Document && matches!(o.kind, Kind::Css | Kind::Script);
            if blocking || i == 0 {
                content_loaded = content_loaded.max(t.end());
            }
        }
        entries.push(entry(o, p, hosts, t, epoch_ms, &page_url, objs));
    }
    let ms = |us: u64| us as f64 / 1_000.0;
    let har = json!({"log": {
        "version": "1.2",
        "creator": {"name": "mewa-testkit synthetic_har", "version": env!("CARGO_PKG_VERSION")},
        "browser": {"name": "Chrome", "version": "124.0.6367.118"},
        "pages": [{
            "startedDateTime": iso8601(epoch_ms),
            "id": "page_1",
            "title": page_url,
            "pageTimings": {
                "onContentLoad": ms(content_loaded + 20_000),
                "onLoad": ms(loaded + 30_000),
            },
        }],
        "entries": entries,
    }});
    serde_json::to_string_pretty(&har).unwrap_or_default()
}

/// One HAR entry.
fn entry(
    o: &Obj,
    parent: &Obj,
    hosts: &[Host],
    t: &Times,
    epoch_ms: u64,
    page_url: &str,
    objs: &[Obj],
) -> Value {
    let ms = |us: u64| us as f64 / 1_000.0;
    let opt = |v: Option<u64>| v.map_or(-1.0, ms);
    let kind = if o.kind == Kind::Hop {
        o.target_kind
    } else {
        o.kind
    };
    let (resource_type, priority, mime) = match kind {
        Kind::Document => ("document", "VeryHigh", "text/html"),
        Kind::Frame => ("document", "VeryHigh", "text/html"),
        Kind::Css => ("stylesheet", "VeryHigh", "text/css"),
        Kind::Script => ("script", "High", "application/javascript"),
        Kind::Font => ("font", "VeryHigh", "font/woff2"),
        Kind::Image => ("image", "Low", image_mime(&o.url)),
        Kind::Json => ("xhr", "High", "application/json"),
        Kind::Beacon => ("ping", "VeryLow", "text/plain"),
        Kind::Pixel => ("image", "Low", "image/gif"),
        Kind::Hop => ("other", "Low", "text/html"),
    };
    let mime = if o.kind == Kind::Hop {
        "text/html"
    } else {
        mime
    };
    let textual = matches!(
        o.kind,
        Kind::Document | Kind::Frame | Kind::Css | Kind::Script | Kind::Json
    );
    let decoded = if textual { o.size * 4 } else { o.size };
    // The object that referenced this one, for the initiator and Referer
    // (a redirect target is requested the way its hop was).
    let (how, by) = if o.how == How::Redirect {
        (parent.how, &objs[parent.parent])
    } else {
        (o.how, parent)
    };
    let initiator = match how {
        How::Root => json!({"type": "other"}),
        How::Parser => json!({"type": "parser", "url": by.url, "lineNumber": (o.size % 900) + 12}),
        How::Script | How::Redirect => json!({"type": "script", "stack": {"callFrames": [{
            "functionName": "",
            "scriptId": (by.size % 1_000 + 10).to_string(),
            "url": by.url,
            "lineNumber": 0,
            "columnNumber": o.size % 40_000,
        }]}}),
    };
    let referer = match (how, by.kind) {
        (How::Parser, Kind::Css | Kind::Frame) => Some(by.url.as_str()),
        (How::Root, _) => None,
        _ => Some(page_url),
    };
    let method = if o.kind == Kind::Beacon {
        "POST"
    } else {
        "GET"
    };
    let mut req_headers = vec![
        json!({"name": ":authority", "value": hosts[o.host].name}),
        json!({"name": ":method", "value": method}),
        json!({"name": "user-agent", "value": "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) HeadlessChrome/124.0.6367.118 Safari/537.36"}),
    ];
    if let Some(r) = referer {
        req_headers.push(json!({"name": "referer", "value": r}));
    }
    let query: Vec<Value> = o
        .url
        .split_once('?')
        .map(|(_, q)| q)
        .unwrap_or("")
        .split('&')
        .filter(|kv| !kv.is_empty())
        .map(|kv| {
            let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
            json!({"name": k, "value": v})
        })
        .collect();
    let mut request = json!({
        "method": method,
        "url": o.url,
        "httpVersion": "h2",
        "headers": req_headers,
        "queryString": query,
        "cookies": [],
        "headersSize": -1,
        "bodySize": if method == "POST" { 96 } else { 0 },
    });
    if method == "POST" {
        request["postData"] =
            json!({"mimeType": "text/plain;charset=UTF-8", "text": "{\"e\":\"pageview\"}"});
    }
    let mut headers = vec![json!({"name": "content-type", "value": mime})];
    if textual {
        headers.push(json!({"name": "content-encoding", "value": "br"}));
    }
    let static_asset = matches!(o.kind, Kind::Css | Kind::Script | Kind::Font | Kind::Image)
        && !o.tracking
        && hosts[o.host].role != Role::Ads;
    if static_asset {
        headers.push(json!({"name": "cache-control", "value": "public, max-age=31536000"}));
        headers.push(json!({"name": "etag", "value": format!("\"{:x}\"", o.size * 2_654_435_761 % 0xffff_ffff)}));
        headers.push(json!({"name": "last-modified", "value": http_date(epoch_ms / 1_000 - (o.size % 400) * 86_400)}));
    } else {
        headers.push(json!({"name": "cache-control", "value": "no-cache, no-store"}));
    }
    if let Some(loc) = &o.location {
        headers.push(json!({"name": "location", "value": loc}));
    }
    let headers_size =
        120 + 40 * headers.len() as u64 + o.location.as_ref().map_or(0, String::len) as u64;
    let status_text = match o.status {
        204 => "No Content",
        301 => "Moved Permanently",
        302 => "Found",
        _ => "OK",
    };
    let mut content = json!({"size": decoded, "mimeType": mime});
    if textual {
        content["compression"] = json!(decoded - o.size);
    }
    let total =
        t.blocked + t.dns.unwrap_or(0) + t.connect.unwrap_or(0) + t.send + t.wait + t.receive;
    json!({
        "pageref": "page_1",
        "startedDateTime": iso8601_us(epoch_ms, t.start),
        "time": ms(total),
        "_resourceType": resource_type,
        "_priority": priority,
        "_initiator": initiator,
        "request": request,
        "response": {
            "status": o.status,
            "statusText": status_text,
            "httpVersion": "h2",
            "headers": headers,
            "cookies": [],
            "content": content,
            "redirectURL": o.location.clone().unwrap_or_default(),
            "headersSize": headers_size,
            "bodySize": o.size,
            "_transferSize": headers_size + o.size,
        },
        "cache": {},
        "timings": {
            "blocked": ms(t.blocked),
            "dns": opt(t.dns),
            "ssl": opt(t.ssl),
            "connect": opt(t.connect),
            "send": ms(t.send),
            "wait": ms(t.wait),
            "receive": ms(t.receive),
        },
        "serverIPAddress": format!("2001:db8::{:x}", o.host + 1),
        "connection": t.connection.to_string(),
    })
}

fn image_mime(url: &str) -> &'static str {
    match url.rsplit('.').next().unwrap_or("") {
        "png" => "image/png",
        "webp" => "image/webp",
        "gif" => "image/gif",
        "svg" => "image/svg+xml",
        _ => "image/jpeg",
    }
}

/// Days since 1970-01-01 → (year, month, day), proleptic Gregorian
/// (Hinnant's `civil_from_days`).
fn civil(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = (if mp < 10 { mp + 3 } else { mp - 9 }) as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

/// `2024-05-14T09:30:00.000000Z` for epoch milliseconds.
fn iso8601(epoch_ms: u64) -> String {
    iso8601_us(epoch_ms, 0)
}

/// [`iso8601`] of `epoch_ms` plus `offset_us`, to the microsecond.
fn iso8601_us(epoch_ms: u64, offset_us: u64) -> String {
    let us = epoch_ms * 1_000 + offset_us;
    let secs = us / 1_000_000;
    let (y, m, d) = civil((secs / 86_400) as i64);
    let s = secs % 86_400;
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{:06}Z",
        s / 3_600,
        s / 60 % 60,
        s % 60,
        us % 1_000_000
    )
}

/// An HTTP date (`Tue, 14 May 2024 09:30:00 GMT`) for epoch seconds.
fn http_date(secs: u64) -> String {
    const DAYS: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let days = secs / 86_400;
    let (y, m, d) = civil(days as i64);
    let s = secs % 86_400;
    format!(
        "{}, {d:02} {} {y} {:02}:{:02}:{:02} GMT",
        DAYS[(days % 7) as usize],
        MONTHS[(m - 1) as usize],
        s / 3_600,
        s / 60 % 60,
        s % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(spec: &HarSpec) -> Value {
        serde_json::from_str(&synthetic_har(spec)).expect("valid JSON")
    }

    fn entries(v: &Value) -> &Vec<Value> {
        v["log"]["entries"].as_array().expect("entries")
    }

    fn host(url: &str) -> &str {
        url.split("://")
            .nth(1)
            .unwrap()
            .split(['/', '?'])
            .next()
            .unwrap()
    }

    #[test]
    fn splitmix64_matches_the_reference_stream() {
        // First outputs for seed 1234567 of the reference C code.
        let mut r = SplitMix64::new(1_234_567);
        assert_eq!(r.next_u64(), 6_457_827_717_110_365_317);
        assert_eq!(r.next_u64(), 3_203_168_211_198_807_973);
    }

    #[test]
    fn page_has_exactly_the_objects_hosts_and_tracking_asked_for() {
        let spec = HarSpec::default();
        let v = parse(&spec);
        let e = entries(&v);
        assert_eq!(e.len(), 600);
        let hosts: HashSet<&str> = e
            .iter()
            .map(|x| host(x["request"]["url"].as_str().unwrap()))
            .collect();
        assert_eq!(hosts.len(), 100);
        let tracking = e
            .iter()
            .filter(|x| x["request"]["url"].as_str().unwrap().contains("?cb="))
            .count();
        assert_eq!(tracking, 60);
        let urls: HashSet<&str> = e
            .iter()
            .map(|x| x["request"]["url"].as_str().unwrap())
            .collect();
        assert_eq!(urls.len(), 600, "URLs are unique");
        // In start order, document first.
        let starts: Vec<&str> = e
            .iter()
            .map(|x| x["startedDateTime"].as_str().unwrap())
            .collect();
        assert!(starts.windows(2).all(|w| w[0] <= w[1]));
        assert_eq!(e[0]["_resourceType"], "document");
        assert_eq!(
            v["log"]["pages"][0]["title"],
            e[0]["request"]["url"].clone()
        );
    }

    #[test]
    fn same_seed_same_text_other_seed_other_text() {
        let a = HarSpec::default();
        assert_eq!(synthetic_har(&a), synthetic_har(&a));
        let b = HarSpec { seed: 2, ..a };
        assert_ne!(synthetic_har(&a), synthetic_har(&b));
    }

    #[test]
    fn absurd_specs_are_clamped() {
        let c = |hosts, objects, random_tracking| {
            HarSpec {
                hosts,
                objects,
                seed: 9,
                random_tracking,
            }
            .clamped()
        };
        assert_eq!(c(0, 0, 5), c(1, 1, 0));
        assert_eq!(c(50, 10, 0).hosts, 10);
        assert_eq!(c(3, 10, 100).random_tracking, 8);
        assert_eq!(c(3, 2, 100).random_tracking, 0);
        assert_eq!(c(1, usize::MAX, 0).objects, HarSpec::MAX_OBJECTS);
        for (hosts, objects, tracking) in [
            (0, 0, 0),
            (0, 5, 9),
            (50, 10, 3),
            (10, 10, 10),
            (1, 1, 1),
            (2, 2, 0),
            (3, 3, 1),
            (7, 40, 0),
        ] {
            let spec = HarSpec {
                hosts,
                objects,
                seed: 3,
                random_tracking: tracking,
            };
            let want = spec.clamped();
            let v = parse(&spec);
            let e = entries(&v);
            assert_eq!(e.len(), want.objects, "{spec:?}");
            let hosts: HashSet<&str> = e
                .iter()
                .map(|x| host(x["request"]["url"].as_str().unwrap()))
                .collect();
            assert_eq!(hosts.len(), want.hosts, "{spec:?}");
        }
    }

    #[test]
    fn dates_are_civil() {
        assert_eq!(iso8601(0), "1970-01-01T00:00:00.000000Z");
        assert_eq!(iso8601(1_715_679_000_000), "2024-05-14T09:30:00.000000Z");
        assert_eq!(
            iso8601_us(1_709_251_199_000, 1_500),
            "2024-02-29T23:59:59.001500Z"
        );
        assert_eq!(http_date(1_715_679_000), "Tue, 14 May 2024 09:30:00 GMT");
    }
}
