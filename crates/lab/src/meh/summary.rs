//! The per-page and overall figures over the records: computation only,
//! so a report rebuilt from a journal says what the run's own said.

use std::collections::HashMap;

use mewa_corpus::{Corpus, Page};
use mewa_edge::app::now_unix_s;
use serde::Serialize;

use super::record::{BrowserRun, MehRun, Record};
use mewa_report::median;

/// Per page, over its runs.
#[derive(Debug, Clone, Serialize)]
pub struct MehPage {
    /// Page name.
    pub page: String,
    /// Page bytes.
    pub page_bytes: u64,
    /// Objects.
    pub objects: usize,
    /// Connections the plan chose (the most frequent choice).
    pub n: u32,
    /// Hint size as received over DNS, bytes (the partial form when the
    /// full one did not fit the answer; 0 when no hint came).
    pub hint_bytes: usize,
    /// Size of the full hint (every object listed with its URL), bytes:
    /// what "hints of at most 1 KB" is measured on.
    pub full_hint_bytes: Option<usize>,
    /// The edge's UDP answer (whole DNS message), bytes: the largest seen.
    pub answer_bytes: usize,
    /// How the object URLs reached the client: `udp` (in the answer),
    /// `tcp` (the compact answer, then the list over TCP), `none`.
    pub urls_via: &'static str,
    /// Median over the loads with the hint of how long before the first
    /// origin connection was ready the client had the URL list, ms
    /// (negative: after).
    pub urls_lead_ms: Option<f64>,
    /// Median PLT without the hint, seconds.
    pub median_without_s: Option<f64>,
    /// Median PLT with the hint, seconds.
    pub median_with_s: Option<f64>,
    /// 1 − with/without, percent (positive = faster with the hint).
    pub reduction_pct: Option<f64>,
    /// Loads that did not complete (both variants).
    pub failed: usize,
}

/// The whole experiment.
#[derive(Debug, Clone, Serialize)]
pub struct MehResult {
    /// Every load.
    pub runs: Vec<MehRun>,
    /// Per page.
    pub pages: Vec<MehPage>,
    /// Median of all loads without the hint (seed 000 Fig. 7's CDF), s.
    pub median_without_s: Option<f64>,
    /// Median of all loads with the hint, s.
    pub median_with_s: Option<f64>,
    /// 1 − median with / median without, percent (seed 000: 20.5).
    pub median_reduction_pct: Option<f64>,
    /// The largest per-page median reduction, percent (seed 000: 34.5).
    pub best_reduction_pct: Option<f64>,
    /// The smallest per-page median reduction, percent (negative = a page
    /// got slower; the target is no worse than −3).
    pub worst_reduction_pct: Option<f64>,
    /// Share of the pages' hints of at most 1 KB.
    pub hints_within_1k: f64,
    /// Wired RTT the edge measured for the origin, ms: the first testbed
    /// start's (a resumed run started more than one).
    pub measured_wired_rtt_ms: Option<f64>,
    /// What the edge measured at every testbed start, in order, ms (one
    /// value unless the run was resumed).
    pub wired_rtts_ms: Vec<f64>,
    /// Chromium loads through the proxy (empty unless asked for).
    pub browser: Vec<BrowserRun>,
    /// Chromium's arms compared ([`super::peers`]).
    pub arms: super::peers::ArmsSummary,
}

/// The corpus pages closest in size to seed 000 Fig. 8's three (622 KB,
/// 1412 KB, 3648 KB), without repeats.
pub fn fig8_pages(corpus: &Corpus) -> Vec<&Page> {
    let mut out: Vec<&Page> = Vec::new();
    for kb in [622u64, 1412, 3648] {
        let near = corpus
            .pages
            .iter()
            .filter(|p| !out.iter().any(|o| o.name == p.name))
            .min_by_key(|p| p.total_bytes().abs_diff(kb * 1000));
        if let Some(p) = near {
            out.push(p);
        }
    }
    out
}

/// The full hint of `page` as the edge encodes it at `now_unix_s` (every
/// host with the wired RTT, every object with its URL), bytes. The hint
/// is compressed, so its time stamp can move its size by a byte: the
/// report encodes it at the moment the edge measured the RTT.
pub fn full_hint_bytes(page: &Page, wired_ms: Option<f64>, now_unix_s: u64) -> Option<usize> {
    let meta = mewa_corpus::convert::to_page_meta(page);
    let now = now_unix_s;
    let origins = meta
        .hosts()
        .into_iter()
        .map(|h| mewa_hint::page::OriginRtt {
            host: h.to_string(),
            rtt_us: wired_ms.map_or(0, |ms| (ms * 1000.0) as u32),
            measured_at_unix_s: now,
        })
        .collect();
    let ctx = mewa_hint::page::PageContext {
        page: meta,
        origins,
        alpha: 0.5,
        ttl_s: 3600,
        generated_at_unix_s: now,
    };
    mewa_hint::wire::Hint::with_urls(&ctx)
        .ok()
        .map(|h| h.to_bytes().len())
}

/// Per-page and overall figures from the records (every unit's, in the
/// order they finished).
pub fn summarise(corpus: &Corpus, records: Vec<Record>) -> MehResult {
    let mut runs = Vec::new();
    let mut browser = Vec::new();
    let mut starts = Vec::new();
    for r in records {
        match r {
            Record::Load(l) => runs.push(*l),
            Record::Chromium(b) => browser.push(*b),
            Record::Edge(e) => starts.push(e),
        }
    }
    let wired_rtts_ms: Vec<f64> = starts.iter().filter_map(|e| e.wired_rtt_ms).collect();
    // The first start that measured the RTT (any start if none did).
    let first = starts
        .iter()
        .find(|e| e.wired_rtt_ms.is_some())
        .or(starts.first());
    let wired_ms = first.and_then(|e| e.wired_rtt_ms);
    // Folders from before the journal did not note when.
    let hinted_at = first.and_then(|e| e.at_unix_s).unwrap_or_else(now_unix_s);
    let plts = |pick: &dyn Fn(&MehRun) -> bool| -> Vec<f64> {
        runs.iter()
            .filter(|r| r.ok && pick(r))
            .filter_map(|r| r.plt_s)
            .collect()
    };
    let reduction = |without: Option<f64>, with: Option<f64>| match (without, with) {
        (Some(a), Some(b)) if a > 0.0 => Some((1.0 - b / a) * 100.0),
        _ => None,
    };
    let mut pages = Vec::new();
    for p in &corpus.pages {
        let mine = |r: &MehRun| r.page == p.name;
        let without = median(&plts(&|r| mine(r) && !r.with_hint));
        let with = median(&plts(&|r| mine(r) && r.with_hint));
        let mut ns: HashMap<u32, usize> = HashMap::new();
        for r in runs.iter().filter(|r| mine(r) && r.with_hint) {
            *ns.entry(r.n).or_default() += 1;
        }
        let n = ns
            .iter()
            .max_by_key(|&(n, c)| (*c, *n))
            .map_or(1, |(&n, _)| n);
        let hint_bytes = runs
            .iter()
            .filter(|r| mine(r))
            .map(|r| r.hint_bytes)
            .max()
            .unwrap_or(0);
        let hinted: Vec<&MehRun> = runs.iter().filter(|r| mine(r) && r.with_hint).collect();
        let leads: Vec<f64> = hinted
            .iter()
            .filter_map(|r| Some(r.ready_ms? - r.urls_ms?))
            .collect();
        pages.push(MehPage {
            answer_bytes: hinted.iter().map(|r| r.answer_bytes).max().unwrap_or(0),
            urls_via: if hinted.iter().any(|r| r.urls_ms.is_none()) || hinted.is_empty() {
                "none"
            } else if hinted.iter().any(|r| r.urls_over_tcp) {
                "tcp"
            } else {
                "udp"
            },
            urls_lead_ms: median(&leads),
            page: p.name.clone(),
            page_bytes: p.total_bytes(),
            objects: p.objects.len(),
            n,
            hint_bytes,
            full_hint_bytes: full_hint_bytes(p, wired_ms, hinted_at),
            median_without_s: without,
            median_with_s: with,
            reduction_pct: reduction(without, with),
            failed: runs.iter().filter(|r| mine(r) && !r.ok).count(),
        });
    }
    let without = median(&plts(&|r| !r.with_hint));
    let with = median(&plts(&|r| r.with_hint));
    let reds: Vec<f64> = pages.iter().filter_map(|p| p.reduction_pct).collect();
    let sized: Vec<usize> = pages.iter().filter_map(|p| p.full_hint_bytes).collect();
    MehResult {
        median_reduction_pct: reduction(without, with),
        median_without_s: without,
        median_with_s: with,
        best_reduction_pct: reds.iter().copied().reduce(f64::max),
        worst_reduction_pct: reds.iter().copied().reduce(f64::min),
        hints_within_1k: if sized.is_empty() {
            0.0
        } else {
            sized.iter().filter(|&&b| b <= 1024).count() as f64 / sized.len() as f64
        },
        measured_wired_rtt_ms: wired_ms,
        wired_rtts_ms,
        arms: super::peers::summarise_arms(&browser),
        browser,
        pages,
        runs,
    }
}
