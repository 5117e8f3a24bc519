//! The loads of the pages report grouped as its tables read them (a
//! setting's label, a page type, a control), each page's median, and the
//! paired comparison of a control with cubic page by page.

use std::collections::BTreeMap;

use mewa_report::median;

use crate::experiment::Congestion;
use crate::fld::pages::config::PageType;
use crate::fld::pages::record::PageRun;

/// The loads of one setting label (with its queue in a sweep), page type
/// and control.
pub fn group<'a>(
    runs: &'a [PageRun],
    setting: &str,
    kind: PageType,
    cc: &Congestion,
) -> Vec<&'a PageRun> {
    runs.iter()
        .filter(|r| r.setting == setting && r.protocol == kind && r.cc == *cc)
        .collect()
}

/// Each page's median of `f` over its loads in `runs`.
pub fn page_medians(
    runs: &[&PageRun],
    f: impl Fn(&PageRun) -> Option<f64>,
) -> BTreeMap<String, f64> {
    let mut by_page: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    for r in runs {
        if let Some(v) = f(r) {
            by_page.entry(r.page.clone()).or_default().push(v);
        }
    }
    by_page
        .into_iter()
        .filter_map(|(p, v)| median(&v).map(|m| (p, m)))
        .collect()
}

/// Median over pages of each page's median of `f`, for one group.
pub fn median_of_pages(runs: &[&PageRun], f: impl Fn(&PageRun) -> Option<f64>) -> Option<f64> {
    let meds: Vec<f64> = page_medians(runs, f).into_values().collect();
    median(&meds)
}

/// A control against cubic over the pages both loaded: the median of the
/// per-page changes, the change of the sums, and on how many pages it was
/// faster. Positive changes are reductions.
#[derive(Debug, Clone, PartialEq)]
pub struct Compared {
    /// Pages both have.
    pub pages: usize,
    /// Pages where the control's median is below cubic's.
    pub faster: usize,
    /// Median over pages of `100 × (cubic − other) / cubic`.
    pub median_change_pct: Option<f64>,
    /// `100 × (Σ cubic − Σ other) / Σ cubic` over the pages.
    pub pooled_change_pct: Option<f64>,
    /// The same comparison from paired loads (the same page and run):
    /// the median of the pages' median changes with a two-level bootstrap
    /// 95 % interval, the Wilcoxon p-value and the pairs won.
    pub paired: Option<mewa_report::paired::OverallStats>,
}

impl Compared {
    /// Compares per-page medians `other` with `cubic`.
    pub fn new(cubic: &BTreeMap<String, f64>, other: &BTreeMap<String, f64>) -> Compared {
        let pairs: Vec<(f64, f64)> = cubic
            .iter()
            .filter_map(|(p, &c)| other.get(p).map(|&o| (c, o)))
            .collect();
        let changes: Vec<f64> = pairs
            .iter()
            .filter(|(c, _)| *c > 0.0)
            .map(|(c, o)| 100.0 * (c - o) / c)
            .collect();
        let (sc, so) = pairs
            .iter()
            .fold((0.0, 0.0), |(a, b), (c, o)| (a + c, b + o));
        Compared {
            pages: pairs.len(),
            faster: pairs.iter().filter(|(c, o)| o < c).count(),
            median_change_pct: median(&changes),
            pooled_change_pct: (sc > 0.0).then(|| 100.0 * (sc - so) / sc),
            paired: None,
        }
    }
}

/// Fig. 6's comparison of `cc` with cubic for one setting label and page
/// type, page by page: the net transfer time, or for Chromium (which gives
/// the load time only) the load time.
pub fn against_cubic(runs: &[PageRun], setting: &str, kind: PageType, cc: &Congestion) -> Compared {
    let key: fn(&PageRun) -> Option<f64> = if kind.chromium().is_some() {
        |r| r.plt_s
    } else {
        |r| r.net_transfer_s
    };
    let (base, other) = (
        group(runs, setting, kind, &Congestion::Cubic),
        group(runs, setting, kind, cc),
    );
    let mut pages: BTreeMap<String, Vec<(f64, f64)>> = BTreeMap::new();
    for a in &base {
        let b = other.iter().find(|b| b.page == a.page && b.run == a.run);
        if let (Some(x), Some(y)) = (key(a), b.and_then(|b| key(b))) {
            pages.entry(a.page.clone()).or_default().push((x, y));
        }
    }
    let pages: Vec<(String, Vec<(f64, f64)>)> = pages.into_iter().collect();
    Compared {
        paired: mewa_report::compare_pages(&pages, &Default::default()).overall,
        ..Compared::new(&page_medians(&base, key), &page_medians(&other, key))
    }
}
