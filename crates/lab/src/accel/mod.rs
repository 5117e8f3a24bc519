//! `mewa lab accel`: seed 004's evaluation of the accelerator.
//!
//! Seed 004 §IV: "The Web page includes 42 image files, which are stored in
//! seven different domains, a CSS file, and an HTML file; the total size of
//! this Web page is 320 Kbytes." "the upload bandwidth is set to 1024 kbps;
//! the download bandwidth is set to 128 kbps, 256 kbps, 512 kbps, 1024
//! kbps, 2048 kbps, and 4096 kbps; and the RTT is set to 150 ms." The
//! client loads the page over HTTP, HTTPS, SPDY directly from the origins,
//! and through the accelerator.
//!
//! Testbed: `client ⇄ link (the seed's RTT and rates) ⇄ edge ⇄ wired link
//! ⇄ origin`. Every host of the page is its own server (its own address
//! and certificate), as seed 004's seven VMs were, so a browser cannot
//! coalesce them onto one HTTP/2 connection. The accelerator (`mewa accel
//! serve`) runs on the edge, beside the origins as in seed 004 Fig. 4 (the
//! emulated link is between the client and everything else); the page's
//! main host resolves to it.
//!
//! Variants:
//! - `h1`: HTTP/1.1 in clear (six connections per host);
//! - `https`: HTTP/1.1 over TLS (Chromium with `--disable-http2`);
//! - `h2`: HTTP/2 over TLS to each domain (seed 004's "SPDY");
//! - the peers a browser and a CDN already have, Chromium only, each
//!   direct to the origins: `predictor` (a returning visitor: the profile
//!   loaded the page before and keeps its loading predictor; caches and
//!   sockets are cleared), `early-hints` (the origins answer the document
//!   with `103 Early Hints`) and `h3` (HTTP/3 to each domain);
//! - `accel-cold`: HTTP/2 through the accelerator with its cache emptied
//!   before the load (it fetches everything from the origins);
//! - `accel-warm`: the same with the cache as the previous load left it;
//! - `accel-meh`: the warm accelerator with the Mobile Edge Hint client's
//!   connection count and size balancing (the loader only).
//!
//! Chromium (headless, a fresh profile per load, its NetLog's span) gives
//! the headline figures; the built-in loader (`--tool loader`) a quick
//! sweep. Chromium looks names up with a DNS server on the edge, across
//! the link, as a phone asks its operator's resolver and as seed 004's
//! testbed had its DNS servers behind the emulated link: one page domain
//! costs one lookup, seven cost seven (in parallel). The loader resolves
//! from a table (no lookups).

//!
//! - this module: the configuration, the journal's record and the
//!   [`Experiment`] (one unit per load);
//! - `sites`: what the accelerator folds and each page as seen through it;
//! - `servers`: the accelerator and the DNS servers on the edge;
//! - `loads`: one load, by the loader or by Chromium;
//! - `report`: the tables and plots, one function each.

mod loads;
mod report;
mod servers;
mod sites;

use std::path::{Path, PathBuf};
use std::time::Duration;

use mewa_corpus::{generate, Corpus, Preset};
use mewa_link::core::RateSpec;
use mewa_link::runtime::LinkOptions;
use mewa_report::{ResultFolder, SectionReport};
use serde::{Deserialize, Serialize};

use crate::bed::{link_of, Bed, OriginSettings};
use crate::experiment::kinds::named_enum;
use crate::experiment::{
    at_least_one, needs_root, Browser, CorpusChoice, Experiment, ExperimentError, OriginChoice,
    Run, Unit,
};

pub use sites::folded_page;

named_enum! {
    /// How a load reaches the page's hosts; in the order the report shows
    /// them.
    pub enum Variant ("variant", "h1, https, h2, predictor, early-hints, h3, accel-cold, accel-warm or accel-meh") {
        /// HTTP/1.1 in clear.
        H1 = "h1",
        /// HTTP/1.1 over TLS.
        Https = "https",
        /// HTTP/2 over TLS, each domain its own connection.
        H2 = "h2",
        /// `h2` by a returning visitor: Chromium's loading predictor kept
        /// from an earlier visit, its caches and sockets cleared (Chromium
        /// only).
        Predictor = "predictor",
        /// `h2` with the origins answering the document with `103 Early
        /// Hints` (preconnect the page's other hosts, preload what blocks
        /// rendering), as a CDN would (Chromium only).
        EarlyHints = "early-hints",
        /// HTTP/3 to each domain (Chromium only).
        H3 = "h3",
        /// HTTP/2 through the accelerator, its cache emptied first.
        AccelCold = "accel-cold",
        /// HTTP/2 through the accelerator, its cache warm.
        AccelWarm = "accel-warm",
        /// HTTP/2 through the warm accelerator with the Mobile Edge Hint
        /// client's connection count (seed 000 Algorithm 1 on the page's
        /// size, the link's rate and RTT, at most 6) and objects balanced
        /// by size over them: do the two combine? The loader only.
        AccelMeh = "accel-meh",
    }
}

impl Variant {
    /// Seed 004's variants, the default.
    pub const SEED: [Variant; 5] = [
        Variant::H1,
        Variant::Https,
        Variant::H2,
        Variant::AccelCold,
        Variant::AccelWarm,
    ];

    /// The peers: what a browser and a CDN already do without the
    /// accelerator, each against which it is measured.
    pub const PEERS: [Variant; 4] = [
        Variant::H2,
        Variant::Predictor,
        Variant::EarlyHints,
        Variant::H3,
    ];

    /// Whether only Chromium can load this way (the loader has no
    /// predictor, no 103 handling and no QUIC).
    pub fn chromium_only(self) -> bool {
        matches!(self, Variant::Predictor | Variant::EarlyHints | Variant::H3)
    }

    /// Whether the load goes through the accelerator.
    pub fn through_accel(self) -> bool {
        matches!(
            self,
            Variant::AccelCold | Variant::AccelWarm | Variant::AccelMeh
        )
    }
}

/// `mewa lab accel`'s settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// The pages: your own (a corpus or recordings; each page's main host
    /// is accelerated, every other host folded), or by default `accel7`.
    pub corpus: CorpusChoice,
    /// The local test CA (the origins' control is cubic).
    pub origin: OriginChoice,
    /// Round trip of the emulated link, ms.
    pub rtt_ms: u64,
    /// Uplink rate, kbit/s.
    pub up_kbps: u64,
    /// Downlink rates, kbit/s.
    pub down_kbps: Vec<u64>,
    /// Variants.
    pub variants: Vec<Variant>,
    /// Browsers: Chromium (the headline), the loader (a quick sweep).
    pub tools: Vec<Browser>,
    /// Chromium binary.
    pub chromium: PathBuf,
    /// Loads per page, variant, tool and rate.
    pub runs: usize,
    /// The origins' `Cache-Control: max-age`, s: what lets the accelerator
    /// keep the page between loads (seed 004's is a cache; its origins'
    /// headers are not given).
    pub max_age_s: u32,
    /// Wired round trip between the edge (accelerator) and the origins, ms.
    pub wired_rtt_ms: u64,
    /// Chromium resolves names with a DNS server on the edge, across the
    /// link, as a phone asks its operator's resolver (seed 004's testbed
    /// has its DNS servers behind the emulated link too); off: Chromium's
    /// `--host-resolver-rules`, no lookups. The loader never looks up.
    pub dns: bool,
    /// Keep each Chromium load's NetLog in the result folder's `chromium/`
    /// (`RATE-VARIANT-PAGE-RUN.netlog.json`, a few MB each), to see where a
    /// load's time went.
    pub keep_netlogs: bool,
    /// Parent of the result folder.
    pub out: PathBuf,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            corpus: CorpusChoice::default(),
            origin: OriginChoice::default(),
            rtt_ms: 150,
            up_kbps: 1024,
            down_kbps: vec![128, 256, 512, 1024, 2048, 4096],
            variants: Variant::SEED.to_vec(),
            tools: vec![Browser::Chromium],
            chromium: PathBuf::from(mewa_chromium::DEFAULT_CHROMIUM),
            runs: 10,
            max_age_s: 3600,
            wired_rtt_ms: 2,
            dns: true,
            keep_netlogs: false,
            out: PathBuf::from("out/lab"),
        }
    }
}

/// One load.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AccelRun {
    /// Downlink rate, kbit/s.
    pub down_kbps: u64,
    /// The variant.
    pub variant: Variant,
    /// The browser.
    pub tool: Browser,
    /// The page.
    pub page: String,
    /// Load index.
    pub run: usize,
    /// Page load time, s (Chromium: its NetLog's span for the page's
    /// objects; the loader: first connection to last byte); `None` if the
    /// load failed.
    pub plt_s: Option<f64>,
    /// Connections the loader opened (the loader only).
    pub connections: Option<usize>,
    /// What went wrong.
    pub error: Option<String>,
    /// What a Chromium load showed and when (FCP, LCP, Speed Index,
    /// coverage; none for the loader and in older folders).
    #[serde(default)]
    pub metrics: Option<crate::measured::Metrics>,
}

/// `mewa lab accel`, prepared: the configuration, its pages and the CA.
#[derive(Debug)]
pub struct Accel {
    config: Config,
    corpus: Corpus,
    ca_dir: PathBuf,
}

/// A load's key.
fn key(down: u64, run: usize, page: &str, tool: Browser, variant: Variant) -> String {
    format!("down{down}/run{run}/{page}/{tool}/{variant}")
}

impl Accel {
    /// One testbed's loads in order: per run and page, each browser, the
    /// variants rotated from run to run so a drift favours none.
    fn loads(&self) -> Vec<(usize, usize, Browser, Variant)> {
        let c = &self.config;
        let mut out = Vec::new();
        for run in 0..c.runs {
            for i in 0..self.corpus.pages.len() {
                let mut order = c.variants.clone();
                let k = run % order.len();
                order.rotate_left(k);
                for &tool in &c.tools {
                    for &variant in &order {
                        out.push((run, i, tool, variant));
                    }
                }
            }
        }
        out
    }
}

impl Experiment for Accel {
    const NAME: &'static str = "accel";
    const COMMAND: &'static str = "mewa lab accel";
    type Config = Config;
    type Record = AccelRun;
    type Report = SectionReport;

    fn prepare(config: &Config) -> Result<Accel, ExperimentError> {
        at_least_one("--runs", config.runs)?;
        at_least_one("--down", config.down_kbps.len())?;
        at_least_one("--variant", config.variants.len())?;
        at_least_one("--tool", config.tools.len())?;
        if config.variants.contains(&Variant::AccelMeh)
            && config.tools.iter().any(|t| *t != Browser::Loader)
        {
            return Err(ExperimentError::Config {
                field: "--variant",
                message: "accel-meh runs with --tool loader only (the hint-aware proxy in front \
                          of Chromium is not part of this experiment)"
                    .into(),
            });
        }
        if let Some(peer) = config.variants.iter().find(|v| v.chromium_only()) {
            if config.tools.contains(&Browser::Loader) {
                return Err(ExperimentError::Config {
                    field: "--variant",
                    message: format!(
                        "{peer} is what Chromium does on its own (a returning visitor's \
                         predictor, 103 Early Hints, HTTP/3): run it with --tool chromium only"
                    ),
                });
            }
        }
        for &r in config.down_kbps.iter().chain([&config.up_kbps]) {
            if !(8..=10_000_000).contains(&r) {
                return Err(ExperimentError::Config {
                    field: "--down/--up",
                    message: format!("{r} kbit/s: give 8 to 10000000"),
                });
            }
        }
        crate::experiment::rtt_in_range("--rtt", config.rtt_ms)?;
        let corpus = config.corpus.load_or(|| Ok(generate(Preset::Accel7, 1)))?;
        let ca_dir = config.origin.settings()?.ca_dir;
        Ok(Accel {
            config: config.clone(),
            corpus,
            ca_dir,
        })
    }

    fn config(&self) -> &Config {
        &self.config
    }

    fn out(&self) -> Option<&Path> {
        Some(&self.config.out)
    }

    fn check_machine(&self) -> Result<(), ExperimentError> {
        if self.config.tools.contains(&Browser::Chromium) {
            crate::browser::check_binary(&self.config.chromium, "")?;
            if self.config.variants.contains(&Variant::EarlyHints) {
                crate::browser::check_early_hints(&self.config.chromium, "--variant")?;
            }
        }
        needs_root()
    }

    fn units(&self) -> Vec<Unit> {
        let mut units = Vec::new();
        for &down in &self.config.down_kbps {
            for (run, i, tool, variant) in self.loads() {
                let page = &self.corpus.pages[i].name;
                units.push(Unit::one(
                    key(down, run, page, tool, variant),
                    format!("{down} kbit/s {page} {variant} {tool}"),
                ));
            }
        }
        units
    }

    /// One testbed per downlink rate, with the accelerator (and the DNS
    /// servers) on its edge.
    fn execute(&self, run: &mut Run<'_, AccelRun>) -> Result<(), ExperimentError> {
        let c = &self.config;
        let work = match run.folder() {
            Some(f) => f.join("work"),
            None => std::env::temp_dir().join(format!("mewa-accel-{}", std::process::id())),
        };
        let netlogs = run.folder().map(|f| f.join("chromium"));
        std::fs::create_dir_all(&work).map_err(ExperimentError::io("creating", &work))?;
        let groups = sites::groups_of(&self.corpus);
        for &down in &c.down_kbps {
            let prefix = format!("down{down}/");
            if !run.any_left(&prefix) {
                continue;
            }
            let radio = link_of(
                c.rtt_ms,
                RateSpec::Constant { bps: down * 1000 },
                RateSpec::Constant {
                    bps: c.up_kbps * 1000,
                },
            );
            let wired = link_of(c.wired_rtt_ms, RateSpec::Unlimited, RateSpec::Unlimited);
            let http = mewa_origin::HttpOptions {
                max_age: c.max_age_s,
                ..mewa_origin::HttpOptions::default()
            };
            let bed = Bed::start_with_edge_grouped(
                &self.corpus,
                radio,
                LinkOptions::default(),
                wired,
                &OriginSettings {
                    congestion: "cubic".into(),
                    ca_dir: self.ca_dir.clone(),
                    iw: None,
                },
                groups.clone(),
                http,
            )?;
            let (mut accel, sites) = servers::start_accel(&bed, &self.corpus, &self.ca_dir, &work)?;
            if c.dns && c.tools.contains(&Browser::Chromium) {
                accel.dns = Some(servers::start_both_dns(
                    &bed,
                    &self.corpus,
                    accel.addr,
                    &sites,
                    &work,
                )?);
            }
            let loads = self.loads();
            // A testbed continued after an interruption starts with an
            // empty cache, where the first run had filled it before any
            // warm load: fill it again first (one load through the
            // accelerator per page, not journaled).
            let resumed = loads
                .iter()
                .any(|&(r, i, t, v)| run.is_done(&key(down, r, &self.corpus.pages[i].name, t, v)));
            if resumed && c.variants.contains(&Variant::AccelWarm) {
                for page in &self.corpus.pages {
                    let _ = loads::load_one(
                        &bed,
                        &accel,
                        &sites,
                        c,
                        page,
                        (Variant::AccelCold, Browser::Loader, down),
                        &work,
                        None,
                    );
                }
            }
            for (r, i, tool, variant) in loads {
                let page = &self.corpus.pages[i];
                let key = key(down, r, &page.name, tool, variant);
                if run.is_done(&key) {
                    continue;
                }
                run.begin(&key);
                let keep = c
                    .keep_netlogs
                    .then_some(netlogs.as_ref())
                    .flatten()
                    .map(|d| d.join(format!("{down}-{variant}-{}-{r}.netlog.json", page.name)));
                let got = loads::load_one(
                    &bed,
                    &accel,
                    &sites,
                    c,
                    page,
                    (variant, tool, down),
                    &work,
                    keep.as_deref(),
                )
                .unwrap_or_else(|e| Err(e.to_string()));
                let row = AccelRun {
                    down_kbps: down,
                    variant,
                    tool,
                    page: page.name.clone(),
                    run: r,
                    plt_s: got.as_ref().ok().map(|x| x.plt_s),
                    connections: got.as_ref().ok().and_then(|x| x.connections),
                    metrics: got.as_ref().ok().and_then(|x| x.metrics.clone()),
                    error: got.err(),
                };
                if let Some(e) = &row.error {
                    tracing::warn!("{down} kbit/s {variant} {tool} {}: {e}", page.name);
                }
                run.finish(&key, vec![row])?;
                // Let connections close and queues drain.
                std::thread::sleep(Duration::from_millis(c.rtt_ms * 2));
            }
            accel.server.stop();
            if let Some((_, _, servers)) = accel.dns.take() {
                for s in servers {
                    s.stop();
                }
            }
            bed.shutdown()?;
        }
        let _ = std::fs::remove_dir_all(&work);
        Ok(())
    }

    fn report(
        &self,
        records: Vec<AccelRun>,
        folder: Option<ResultFolder>,
    ) -> Result<SectionReport, ExperimentError> {
        Ok(report::report(&self.config, records, folder))
    }
}

#[cfg(test)]
mod tests {
    use super::sites::{groups_of, merge_sites, site_of};
    use super::*;
    use mewa_accel::site::{Site, SiteConfig};
    use mewa_corpus::{Discovery, Object, Page};
    use std::sync::Arc;

    #[test]
    fn accel7_folds_its_seven_image_domains_into_the_main_host() {
        let corpus = generate(Preset::Accel7, 1);
        let page = &corpus.pages[0];
        let site = site_of(page).expect("site");
        assert_eq!(site.hosts, vec!["www.accel7.example".to_owned()]);
        assert_eq!(site.fold.len(), 7);
        let s = Arc::new(Site::new(&site).expect("valid"));
        let folded = folded_page(page, &s, "https");
        let hosts: std::collections::BTreeSet<&str> =
            folded.objects.iter().map(|o| o.host.as_str()).collect();
        assert_eq!(hosts.len(), 1, "{hosts:?}");
        let img = folded
            .objects
            .iter()
            .find(|o| o.path.ends_with("/images/01.jpg"))
            .expect("image 1");
        assert_eq!(img.path, "/img1.accel7.example/images/01.jpg");
        assert_eq!(folded.objects.len(), page.objects.len());
        // The document comes out shorter: 42 references lost their scheme
        // and host, each `https://` + host - "/" = 8 bytes + the host.
        let root = folded.root().expect("root");
        let before = page.root().expect("root").size;
        assert!(root.size < before, "{} vs {before}", root.size);
        // Every host its own server.
        assert_eq!(groups_of(&corpus).len(), 8);
    }

    fn obj(
        id: u32,
        host: &str,
        path: &str,
        ct: &str,
        parent: Option<u32>,
        how: Discovery,
    ) -> Object {
        Object {
            id,
            host: host.into(),
            path: path.into(),
            size: 2000,
            content_type: ct.into(),
            parent,
            discovery: how,
            compute_ms: 0,
            status: None,
            think_ms: 0,
            recorded_size: None,
        }
    }

    #[test]
    fn only_what_the_accelerator_rewrites_folds() {
        // a.example redirects to www.a.example, whose document has a
        // stylesheet and an image on b.example, a frame on c.example, and
        // a script on b.example that fetches an image from b.example.
        let mut root = obj(0, "a.example", "/", "text/html", None, Discovery::Html);
        root.status = Some(302);
        let page = Page {
            name: "p".into(),
            main: "https://a.example/".into(),
            objects: vec![
                root,
                obj(
                    1,
                    "www.a.example",
                    "/",
                    "text/html",
                    Some(0),
                    Discovery::Redirect,
                ),
                obj(
                    2,
                    "b.example",
                    "/s.css",
                    "text/css",
                    Some(1),
                    Discovery::Html,
                ),
                obj(
                    3,
                    "b.example",
                    "/bg.png",
                    "image/png",
                    Some(2),
                    Discovery::Css,
                ),
                obj(
                    4,
                    "b.example",
                    "/x.png",
                    "image/png",
                    Some(1),
                    Discovery::Html,
                ),
                obj(
                    5,
                    "c.example",
                    "/frame.html",
                    "text/html",
                    Some(1),
                    Discovery::Html,
                ),
                obj(
                    6,
                    "b.example",
                    "/app.js",
                    "application/javascript",
                    Some(1),
                    Discovery::Html,
                ),
                obj(
                    7,
                    "b.example",
                    "/late.png",
                    "image/png",
                    Some(6),
                    Discovery::Script,
                ),
                // `&udc=` is literal in an attribute and folds; the
                // rewriter leaves a value with a named reference it does
                // not decode (`&hellip;`) alone rather than guess at it.
                obj(
                    8,
                    "b.example",
                    "/q.gif?a=1&udc=2",
                    "image/gif",
                    Some(1),
                    Discovery::Html,
                ),
                obj(
                    9,
                    "b.example",
                    "/r.gif?t=&hellip;",
                    "image/gif",
                    Some(1),
                    Discovery::Html,
                ),
            ],
            shared_connections: Vec::new(),
        };
        let cfg = site_of(&page).expect("site");
        assert_eq!(
            cfg.hosts,
            vec!["a.example".to_owned(), "www.a.example".to_owned()]
        );
        assert_eq!(
            cfg.fold,
            vec!["b.example".to_owned(), "c.example".to_owned()]
        );
        let site = Arc::new(Site::new(&cfg).expect("valid"));
        let f = folded_page(&page, &site, "https");
        let at = |id: usize| (f.objects[id].host.as_str(), f.objects[id].path.as_str());
        assert_eq!(at(2), ("www.a.example", "/b.example/s.css"));
        assert_eq!(at(3), ("www.a.example", "/b.example/bg.png"));
        assert_eq!(at(4), ("www.a.example", "/b.example/x.png"));
        assert_eq!(at(5), ("c.example", "/frame.html"));
        assert_eq!(at(6), ("www.a.example", "/b.example/app.js"));
        assert_eq!(at(7), ("b.example", "/late.png"));
        assert_eq!(at(8), ("www.a.example", "/b.example/q.gif?a=1&udc=2"));
        assert_eq!(at(9), ("b.example", "/r.gif?t=&hellip;"));
    }

    #[test]
    fn pages_sharing_a_host_share_a_site() {
        let a = SiteConfig {
            hosts: vec!["a.example".into()],
            fold: vec!["b.example".into()],
            prefix: String::new(),
        };
        let b = SiteConfig {
            hosts: vec!["a.example".into(), "www.a.example".into()],
            fold: vec!["c.example".into(), "a.example".into()],
            prefix: String::new(),
        };
        let merged = merge_sites(vec![a, b]);
        assert_eq!(merged.len(), 1);
        assert_eq!(
            merged[0].hosts,
            vec!["a.example".to_owned(), "www.a.example".to_owned()]
        );
        assert_eq!(
            merged[0].fold,
            vec!["b.example".to_owned(), "c.example".to_owned()]
        );
        assert!(Site::new(&merged[0]).is_ok());
    }

    #[test]
    fn the_report_compares_warm_with_h2_against_a_third() {
        let mut runs = Vec::new();
        for (v, plt) in [
            (Variant::H2, 3.0),
            (Variant::AccelWarm, 1.9),
            (Variant::AccelCold, 2.2),
            (Variant::H1, 4.0),
        ] {
            for run in 0..3 {
                runs.push(AccelRun {
                    down_kbps: 512,
                    variant: v,
                    tool: Browser::Chromium,
                    page: "accel7".into(),
                    run,
                    plt_s: Some(plt + run as f64 * 0.01),
                    connections: None,
                    error: None,
                    metrics: None,
                });
            }
        }
        let r = report::report(&Config::default(), runs, None);
        let text = mewa_report::Report::text(&r);
        // Paired against h2: warm won its 3 pairs, by about 36 %.
        assert!(
            text.contains("accel-warm") && text.contains("3/3") && text.contains("-36."),
            "{text}"
        );
        assert!(
            text.contains("-36.5 %") || text.contains("-36.6 %"),
            "{text}"
        );
        assert!(text.contains("met at 1 of 1 rates"), "{text}");
    }

    #[test]
    fn the_accelerator_is_paired_against_the_best_peer() {
        let mut runs = Vec::new();
        for (v, plt) in [
            (Variant::H2, 3.0),
            (Variant::H3, 2.5),
            (Variant::Predictor, 2.9),
            (Variant::AccelWarm, 2.0),
        ] {
            for page in ["a", "b"] {
                for run in 0..3 {
                    runs.push(AccelRun {
                        down_kbps: 512,
                        variant: v,
                        tool: Browser::Chromium,
                        page: page.into(),
                        run,
                        plt_s: Some(plt + run as f64 * 0.01),
                        connections: None,
                        error: None,
                        metrics: None,
                    });
                }
            }
        }
        let r = report::report(&Config::default(), runs.clone(), None);
        let text = mewa_report::Report::text(&r);
        // h3 is the best peer; warm gains 20 % on it in all 6 pairs.
        assert!(text.contains("accel-warm vs h3 (best peer)"), "{text}");
        assert!(
            text.contains("The best peer (lowest median over pages): h3 at 512"),
            "{text}"
        );
        let row = text
            .lines()
            .find(|l| l.contains("accel-warm vs h3"))
            .expect("row");
        assert!(row.contains("6/6") && row.contains("-20."), "{row}");
        // Without peers beyond h2, no best-peer rows.
        runs.retain(|r| !matches!(r.variant, Variant::H3 | Variant::Predictor));
        let text = mewa_report::Report::text(&report::report(&Config::default(), runs, None));
        assert!(!text.contains("best peer)"), "{text}");
    }

    #[test]
    fn bad_settings_are_named() {
        let e = "spdy".parse::<Variant>().unwrap_err();
        assert!(e.to_string().contains("spdy"), "{e}");
        let e = "curl".parse::<Browser>().unwrap_err();
        assert!(e.to_string().contains("curl"), "{e}");
        assert!(serde_json::from_str::<Config>(r#"{"variants": ["spdy"]}"#).is_err());
        let c = Config {
            tools: vec![Browser::Loader],
            down_kbps: vec![0],
            ..Config::default()
        };
        assert!(Accel::prepare(&c).is_err());
        let c = Config {
            variants: vec![Variant::AccelMeh],
            ..Config::default()
        };
        let e = Accel::prepare(&c).unwrap_err();
        assert!(e.to_string().contains("--tool loader"), "{e}");
        // The peers are Chromium's own: the loader cannot be one.
        for peer in ["predictor", "early-hints", "h3"] {
            let c = Config {
                variants: vec![Variant::H2, peer.parse().unwrap()],
                tools: vec![Browser::Chromium, Browser::Loader],
                ..Config::default()
            };
            let e = Accel::prepare(&c).unwrap_err();
            assert!(
                e.to_string().contains(peer) && e.to_string().contains("--tool chromium"),
                "{e}"
            );
        }
    }

    #[test]
    fn an_older_journal_line_reads_with_its_names() {
        let old = r#"{"down_kbps":512,"variant":"accel-warm","tool":"chromium","page":"accel7","run":0,"plt_s":1.5,"connections":null,"error":null}"#;
        let r: AccelRun = serde_json::from_str(old).unwrap();
        assert_eq!((r.variant, r.tool), (Variant::AccelWarm, Browser::Chromium));
    }
}
