//! Paired A/B statistics: arm A (the baseline) and arm B measured in
//! pairs, say the load time of one page without and with an accelerator,
//! run back to back so that the pair shares the network's mood.
//!
//! A pair's **change** is (b − a)/a: negative when B is faster, −0.25 for a
//! load a quarter shorter. Where a report speaks of a **reduction** it
//! means −change, so a positive reduction is always a gain for B. Every
//! figure here is a change; flip the sign when printing reductions.
//!
//! Intervals come from a percentile bootstrap with our own seeded RNG
//! (splitmix64), so one seed gives one report, byte for byte, on every
//! machine. The test of "no difference" is Wilcoxon's signed-rank test
//! ([`wilcoxon_signed_rank`]), which asks no more of load times than
//! symmetry under the null.

mod wilcoxon;

use serde::{Deserialize, Serialize};

use crate::stats::{median, quantile};
pub use wilcoxon::{wilcoxon_signed_rank, EXACT_MAX};

/// How the bootstrap resamples: written into a report's JSON beside the
/// figures it produced, so they can be reproduced.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Resampling {
    /// Number of bootstrap resamples (0 gives no interval).
    pub reps: usize,
    /// Coverage of the interval, strictly between 0 and 1 (0.95).
    pub level: f64,
    /// Seed of the RNG.
    pub seed: u64,
}

impl Default for Resampling {
    /// 2000 resamples at 95 %: the percentiles then move by well under a
    /// tenth of the interval's width from one seed to another.
    fn default() -> Self {
        Self {
            reps: 2000,
            level: 0.95,
            seed: 0x6d65_7761, // "mewa"
        }
    }
}

/// splitmix64 (Steele, Lea, Flood 2014; Vigna's public-domain C): a 64-bit
/// state stepped by the golden-ratio increment and mixed. Small, fast,
/// and enough for resampling indices; not for anything secret.
struct SplitMix64(u64);

impl SplitMix64 {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// An index below `n` (> 0), by Lemire's multiply-shift: the bias is
    /// at most n/2^64, nothing beside the bootstrap's own noise.
    fn below(&mut self, n: usize) -> usize {
        ((u128::from(self.next_u64()) * n as u128) >> 64) as usize
    }

    /// `values` drawn with replacement into `out` (same length).
    fn resample(&mut self, values: &[f64], out: &mut Vec<f64>) {
        out.clear();
        out.extend((0..values.len()).map(|_| values[self.below(values.len())]));
    }
}

/// Percentile bootstrap interval of `stat` over `values` at `level`
/// (0.95 for 95 %): `stat` of `reps` resamples with replacement, and the
/// (1 − level)/2 and (1 + level)/2 quantiles of the results.
///
/// Non-finite values (failed loads) are left out first, and resamples
/// whose `stat` is `None` or non-finite are not counted. A single value
/// gives the interval (value, value): every resample is that value, and
/// saying "unknown" instead would hide a measurement that exists. `None`
/// when no value is finite, `reps` is 0, `level` is not strictly between
/// 0 and 1, or no resample gave a statistic.
pub fn bootstrap_ci(
    values: &[f64],
    stat: impl Fn(&[f64]) -> Option<f64>,
    reps: usize,
    level: f64,
    seed: u64,
) -> Option<(f64, f64)> {
    let finite: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
    if finite.is_empty() {
        return None;
    }
    let mut rng = SplitMix64(seed);
    let mut draw = Vec::with_capacity(finite.len());
    let stats: Vec<f64> = (0..reps)
        .filter_map(|_| {
            rng.resample(&finite, &mut draw);
            stat(&draw)
        })
        .collect();
    percentile_interval(&stats, level)
}

/// The central `level` interval of the finite `stats`; `None` when there
/// are none or `level` is outside (0, 1).
fn percentile_interval(stats: &[f64], level: f64) -> Option<(f64, f64)> {
    if !(level > 0.0 && level < 1.0) {
        return None;
    }
    let tail = (1.0 - level) / 2.0;
    Some((quantile(stats, tail)?, quantile(stats, 1.0 - tail)?))
}

/// Whether B differs from A, read off a change interval: a difference only
/// when the whole interval is on one side of zero.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// The whole interval is below 0: B faster.
    Faster,
    /// The whole interval is above 0: B slower.
    Slower,
    /// The interval holds 0 (or touches it).
    NoDifference,
}

impl Verdict {
    /// The verdict of a change interval `(low, high)`.
    pub fn of_interval((low, high): (f64, f64)) -> Self {
        if high < 0.0 {
            Self::Faster
        } else if low > 0.0 {
            Self::Slower
        } else {
            Self::NoDifference
        }
    }
}

/// Arm B against the baseline A over one set of pairs (one page).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PairedStats {
    /// Pairs used.
    pub pairs: usize,
    /// Pairs left out: a not finite or not positive (no baseline to divide
    /// by), or b not finite or negative (a failed load).
    pub skipped: usize,
    /// Pairs where B was faster (b < a).
    pub won: usize,
    /// Pairs where B was slower (b > a); the rest of `pairs` were ties.
    pub lost: usize,
    /// Median of the pairs' changes (b − a)/a; negative when B is faster.
    pub median_change: f64,
    /// Bootstrap interval of `median_change`.
    pub ci: (f64, f64),
    /// Two-sided Wilcoxon signed-rank p-value over the differences b − a;
    /// `None` when every pair tied.
    pub p_value: Option<f64>,
}

impl PairedStats {
    /// Faster or slower when the whole interval says so.
    pub fn verdict(&self) -> Verdict {
        Verdict::of_interval(self.ci)
    }
}

/// The usable pairs of one page: their changes (b − a)/a, their
/// differences b − a, and how many pairs were skipped.
struct Usable {
    changes: Vec<f64>,
    diffs: Vec<f64>,
    skipped: usize,
}

impl Usable {
    fn of(pairs: &[(f64, f64)]) -> Self {
        let ok = |&&(a, b): &&(f64, f64)| a.is_finite() && a > 0.0 && b.is_finite() && b >= 0.0;
        let used: Vec<(f64, f64)> = pairs.iter().filter(ok).copied().collect();
        Self {
            changes: used.iter().map(|(a, b)| (b - a) / a).collect(),
            diffs: used.iter().map(|(a, b)| b - a).collect(),
            skipped: pairs.len() - used.len(),
        }
    }

    fn won(&self) -> usize {
        self.diffs.iter().filter(|d| **d < 0.0).count()
    }

    fn lost(&self) -> usize {
        self.diffs.iter().filter(|d| **d > 0.0).count()
    }

    fn stats(&self, cfg: &Resampling) -> Option<PairedStats> {
        let changes = &self.changes;
        Some(PairedStats {
            pairs: changes.len(),
            skipped: self.skipped,
            won: self.won(),
            lost: self.lost(),
            median_change: median(changes)?,
            ci: bootstrap_ci(changes, median, cfg.reps, cfg.level, cfg.seed)?,
            p_value: wilcoxon_signed_rank(&self.diffs),
        })
    }
}

/// Compares B with the baseline A over `pairs` of (a, b); `None` when no
/// pair is usable or `cfg` cannot give an interval (see [`bootstrap_ci`]).
///
/// The median and its interval are of the relative changes, which compare
/// across pages of any size. The Wilcoxon test runs on the differences
/// b − a in the measured unit: their signs are the changes' signs (a > 0),
/// only the ranking of magnitudes differs, and on differences the test has
/// its textbook meaning (the paired differences are symmetric about 0)
/// rather than one about ratios, which would rank a pair with a lucky
/// small baseline above a larger saving in seconds.
pub fn compare_pairs(pairs: &[(f64, f64)], cfg: &Resampling) -> Option<PairedStats> {
    Usable::of(pairs).stats(cfg)
}

/// Mixed into the seed of [`compare_pages`]'s per-page seeds, so that
/// their stream is not the overall interval's.
pub const PAGE_SEEDS: u64 = 0x7061_6765; // "page"

/// One page's comparison.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PageComparison {
    /// The page.
    pub page: String,
    /// Its statistics; `None` when none of its pairs was usable.
    pub stats: Option<PairedStats>,
}

/// The figure over all pages, each page weighing the same however many
/// pairs it has.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OverallStats {
    /// Pages with at least one usable pair.
    pub pages: usize,
    /// Usable pairs over those pages.
    pub pairs: usize,
    /// Pairs skipped over all pages.
    pub skipped: usize,
    /// Pairs where B was faster, over all pages.
    pub won: usize,
    /// Pairs where B was slower, over all pages.
    pub lost: usize,
    /// Median over pages of each page's median change.
    pub median_change: f64,
    /// Two-level bootstrap interval of `median_change`.
    pub ci: (f64, f64),
    /// Two-sided Wilcoxon p-value over the pages' median changes (relative,
    /// since pages of different sizes must share one ranking); `None` when
    /// every page's median change is 0.
    pub p_value: Option<f64>,
}

impl OverallStats {
    /// Faster or slower when the whole interval says so.
    pub fn verdict(&self) -> Verdict {
        Verdict::of_interval(self.ci)
    }
}

/// Per page and over all pages.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PagesComparison {
    /// Each page, in the order given.
    pub pages: Vec<PageComparison>,
    /// Over all pages; `None` when no page had a usable pair.
    pub overall: Option<OverallStats>,
}

/// Compares B with A on each page of `pages` (a name and its pairs of
/// (a, b)), and over all pages.
///
/// Page `i` is resampled with the `i`-th output of a splitmix64 seeded
/// with `cfg.seed` ^ [`PAGE_SEEDS`], so pages of one size do not share
/// resampling patterns; the overall interval uses `cfg.seed` itself. That interval is a two-level
/// bootstrap, because both the choice of pages and each page's pairs vary
/// from run to run: each resample draws as many pages as there are, with
/// replacement, then within each drawn page its pairs with replacement,
/// and takes the median of the drawn pages' medians.
pub fn compare_pages(pages: &[(String, Vec<(f64, f64)>)], cfg: &Resampling) -> PagesComparison {
    let used: Vec<Usable> = pages.iter().map(|(_, pairs)| Usable::of(pairs)).collect();
    let mut seeds = SplitMix64(cfg.seed ^ PAGE_SEEDS);
    let per_page = pages
        .iter()
        .zip(&used)
        .map(|((page, _), u)| {
            let seed = seeds.next_u64();
            PageComparison {
                page: page.clone(),
                stats: u.stats(&Resampling { seed, ..*cfg }),
            }
        })
        .collect();
    PagesComparison {
        pages: per_page,
        overall: overall(&used, cfg),
    }
}

/// The overall figure of [`compare_pages`].
fn overall(used: &[Usable], cfg: &Resampling) -> Option<OverallStats> {
    let changes: Vec<&[f64]> = used
        .iter()
        .map(|u| u.changes.as_slice())
        .filter(|c| !c.is_empty())
        .collect();
    let medians: Vec<f64> = changes.iter().filter_map(|c| median(c)).collect();
    let mut rng = SplitMix64(cfg.seed);
    let (mut pick, mut draw) = (Vec::new(), Vec::new());
    let stats: Vec<f64> = (0..cfg.reps)
        .filter_map(|_| {
            pick.clear();
            for _ in 0..changes.len() {
                let page = changes[rng.below(changes.len())];
                rng.resample(page, &mut draw);
                pick.extend(median(&draw));
            }
            median(&pick)
        })
        .collect();
    Some(OverallStats {
        pages: changes.len(),
        pairs: changes.iter().map(|c| c.len()).sum(),
        skipped: used.iter().map(|u| u.skipped).sum(),
        won: used.iter().map(Usable::won).sum(),
        lost: used.iter().map(Usable::lost).sum(),
        median_change: median(&medians)?,
        ci: percentile_interval(&stats, cfg.level)?,
        p_value: wilcoxon_signed_rank(&medians),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `n` values spread around `centre` (uniform noise of ± `spread`).
    fn noisy(seed: u64, n: usize, centre: f64, spread: f64) -> Vec<f64> {
        let mut rng = SplitMix64(seed);
        (0..n)
            .map(|_| {
                centre + spread * (2.0 * (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64 - 1.0)
            })
            .collect()
    }

    /// `n` pairs of a page of about `base` seconds that B changes by
    /// `change` (± 5 % noise per pair).
    fn pairs(seed: u64, n: usize, base: f64, change: f64) -> Vec<(f64, f64)> {
        let a = noisy(seed, n, base, base / 4.0);
        let f = noisy(seed ^ 0xff, n, 1.0 + change, 0.05);
        a.iter().zip(f).map(|(a, f)| (*a, a * f)).collect()
    }

    fn width((low, high): (f64, f64)) -> f64 {
        high - low
    }

    #[test]
    fn bootstrap_interval_holds_the_median_and_repeats_for_a_seed() {
        let v = noisy(1, 40, 3.0, 1.0);
        let m = median(&v).expect("median");
        let ci = bootstrap_ci(&v, median, 2000, 0.95, 7).expect("ci");
        assert!(ci.0 < m && m < ci.1, "{ci:?} around {m}");
        assert_eq!(bootstrap_ci(&v, median, 2000, 0.95, 7), Some(ci));
        assert_ne!(bootstrap_ci(&v, median, 2000, 0.95, 8), Some(ci));
        let narrower = bootstrap_ci(&v, median, 2000, 0.5, 7).expect("50 %");
        assert!(width(narrower) < width(ci));
    }

    #[test]
    fn bootstrap_interval_narrows_with_more_data() {
        let few = bootstrap_ci(&noisy(2, 20, 3.0, 1.0), median, 2000, 0.95, 1).expect("20");
        let many = bootstrap_ci(&noisy(2, 500, 3.0, 1.0), median, 2000, 0.95, 1).expect("500");
        // The width falls as 1/√n: √(20/500) = 0.2.
        assert!(width(many) < 0.5 * width(few), "{few:?} then {many:?}");
    }

    #[test]
    fn bootstrap_edge_cases() {
        assert_eq!(bootstrap_ci(&[2.5], median, 100, 0.95, 0), Some((2.5, 2.5)));
        assert_eq!(
            bootstrap_ci(&[f64::NAN, 2.5, f64::INFINITY], median, 100, 0.95, 0),
            Some((2.5, 2.5))
        );
        assert_eq!(bootstrap_ci(&[], median, 100, 0.95, 0), None);
        assert_eq!(bootstrap_ci(&[f64::NAN], median, 100, 0.95, 0), None);
        assert_eq!(bootstrap_ci(&[1.0, 2.0], median, 0, 0.95, 0), None);
        for level in [0.0, 1.0, -0.5, f64::NAN] {
            assert_eq!(bootstrap_ci(&[1.0, 2.0], median, 100, level, 0), None);
        }
        assert_eq!(bootstrap_ci(&[1.0, 2.0], |_| None, 100, 0.95, 0), None);
        // Non-finite values are left out before resampling, not resampled.
        let v = noisy(3, 30, 1.0, 0.5);
        let mut dirty = v.clone();
        dirty.extend([f64::NAN, f64::NEG_INFINITY]);
        assert_eq!(
            bootstrap_ci(&dirty, median, 500, 0.9, 4),
            bootstrap_ci(&v, median, 500, 0.9, 4)
        );
    }

    #[test]
    fn paired_counts_changes_and_skips() {
        let p = [
            (2.0, 1.0),           // −50 %, won
            (4.0, 3.0),           // −25 %, won
            (1.0, 1.5),           // +50 %, lost
            (3.0, 3.0),           // tie
            (0.0, 1.0),           // no baseline: skipped
            (-1.0, 1.0),          // skipped
            (f64::NAN, 1.0),      // skipped
            (1.0, f64::INFINITY), // failed B: skipped
            (1.0, -2.0),          // skipped
        ];
        let s = compare_pairs(&p, &Resampling::default()).expect("stats");
        assert_eq!((s.pairs, s.skipped, s.won, s.lost), (4, 5, 2, 1));
        assert_eq!(s.median_change, -0.125);
        assert!(s.ci.0 <= -0.125 && -0.125 <= s.ci.1);
        // Wilcoxon on b − a = −1, −1, +0.5 (the tie dropped): W+ = 1 of
        // ranks 1, 2.5, 2.5; sums ≤ 1 of 8: {}, {1}, so p = 2 · 2/8.
        assert_eq!(s.p_value, Some(0.5));
        assert_eq!(s.verdict(), Verdict::NoDifference);
        assert_eq!(compare_pairs(&p[4..], &Resampling::default()), None);
        assert_eq!(compare_pairs(&[], &Resampling::default()), None);
        let tie = compare_pairs(&[(1.0, 1.0)], &Resampling::default()).expect("one tie");
        assert_eq!((tie.ci, tie.p_value), ((0.0, 0.0), None));
    }

    #[test]
    fn verdicts_need_the_whole_interval_on_one_side() {
        assert_eq!(Verdict::of_interval((-0.3, -0.1)), Verdict::Faster);
        assert_eq!(Verdict::of_interval((0.1, 0.3)), Verdict::Slower);
        assert_eq!(Verdict::of_interval((-0.1, 0.2)), Verdict::NoDifference);
        assert_eq!(Verdict::of_interval((0.0, 0.2)), Verdict::NoDifference);
        assert_eq!(Verdict::of_interval((-0.2, 0.0)), Verdict::NoDifference);
        let cfg = Resampling::default();
        let faster = compare_pairs(&pairs(5, 30, 2.0, -0.2), &cfg).expect("faster");
        assert_eq!(faster.verdict(), Verdict::Faster);
        assert!(faster.p_value.expect("p") < 1e-6);
        let slower = compare_pairs(&pairs(6, 30, 2.0, 0.2), &cfg).expect("slower");
        assert_eq!(slower.verdict(), Verdict::Slower);
        let same = compare_pairs(&pairs(7, 30, 2.0, 0.0), &cfg).expect("same");
        assert_eq!(same.verdict(), Verdict::NoDifference);
    }

    /// Eight pages B speeds up by 10 to 31 %, one it slows by 40 %, one
    /// whose every pair failed.
    fn pages() -> Vec<(String, Vec<(f64, f64)>)> {
        let mut out: Vec<_> = (0u32..8)
            .map(|i| {
                let change = -0.1 - 0.03 * f64::from(i);
                (
                    format!("fast{i}"),
                    pairs(
                        10 + u64::from(i),
                        15 + i as usize,
                        1.0 + f64::from(i),
                        change,
                    ),
                )
            })
            .collect();
        out.push(("slow".into(), pairs(99, 20, 2.0, 0.4)));
        out.push(("broken".into(), vec![(f64::NAN, 1.0), (1.0, f64::NAN)]));
        out
    }

    #[test]
    fn pages_get_their_own_verdicts_and_one_overall_figure() {
        let cfg = Resampling::default();
        let r = compare_pages(&pages(), &cfg);
        assert_eq!(r.pages.len(), 10);
        for p in &r.pages[..8] {
            assert_eq!(
                p.stats.as_ref().map(PairedStats::verdict),
                Some(Verdict::Faster),
                "{}",
                p.page
            );
        }
        let slow = r.pages[8].stats.as_ref().expect("slow page");
        assert_eq!(slow.verdict(), Verdict::Slower);
        assert_eq!(r.pages[9].stats, None);

        let o = r.overall.expect("overall");
        let medians: Vec<f64> = r
            .pages
            .iter()
            .filter_map(|p| Some(p.stats.as_ref()?.median_change))
            .collect();
        assert_eq!(o.median_change, median(&medians).expect("median"));
        assert!(
            (-0.25..-0.15).contains(&o.median_change),
            "{}",
            o.median_change
        );
        assert_eq!(o.verdict(), Verdict::Faster, "{:?}", o.ci);
        assert!(o.ci.0 < o.median_change && o.median_change < o.ci.1);
        assert_eq!(o.p_value, wilcoxon_signed_rank(&medians));
        let all: Vec<&PairedStats> = r.pages.iter().filter_map(|p| p.stats.as_ref()).collect();
        assert_eq!((o.pages, o.skipped), (9, 2));
        assert_eq!(o.pairs, all.iter().map(|s| s.pairs).sum::<usize>());
        assert_eq!(o.won, all.iter().map(|s| s.won).sum::<usize>());
        assert_eq!(o.lost, all.iter().map(|s| s.lost).sum::<usize>());
        assert!(o.won > 8 * 15 && o.lost >= 20);
        assert_eq!(
            compare_pages(&pages(), &cfg),
            compare_pages(&pages(), &Resampling::default())
        );
    }

    #[test]
    fn overall_interval_resamples_both_pages_and_pairs() {
        let cfg = Resampling::default();
        // One page: only its pairs vary, so the overall interval is about
        // as wide as the page's own.
        let one = compare_pages(&[("p".into(), pairs(20, 30, 2.0, -0.2))], &cfg);
        let page = width(one.pages[0].stats.as_ref().expect("page").ci);
        let all = width(one.overall.expect("overall").ci);
        assert!(all > 0.5 * page && all < 1.5 * page, "{all} against {page}");
        // Pages whose pairs all agree: only the choice of pages varies.
        let flat: Vec<_> = (1..=9)
            .map(|i| (format!("p{i}"), vec![(1.0, 1.0 - 0.05 * f64::from(i)); 5]))
            .collect();
        let o = compare_pages(&flat, &cfg).overall.expect("overall");
        assert!((o.median_change + 0.25).abs() < 1e-12);
        assert!(o.ci.0 < -0.3 && o.ci.1 > -0.2, "{:?}", o.ci);
    }

    #[test]
    fn pages_with_nothing_usable_give_no_overall_figure() {
        let cfg = Resampling::default();
        let r = compare_pages(&[("x".into(), vec![(0.0, 1.0)])], &cfg);
        assert_eq!((r.pages.len(), r.overall), (1, None));
        assert_eq!(compare_pages(&[], &cfg).overall, None);
    }

    #[test]
    fn results_round_trip_through_json() {
        // serde_json reads floats back to within an ulp, not always exactly.
        let close = |x: f64, y: f64| (x - y).abs() <= 1e-12 * x.abs().max(1.0);
        let r = compare_pages(&pages(), &Resampling::default());
        let json = serde_json::to_string(&r).expect("json");
        let back: PagesComparison = serde_json::from_str(&json).expect("back");
        assert_eq!(back.pages.len(), r.pages.len());
        for (x, y) in back.pages.iter().zip(&r.pages) {
            assert_eq!(x.page, y.page);
            let (Some(x), Some(y)) = (&x.stats, &y.stats) else {
                assert_eq!(x.stats, y.stats);
                continue;
            };
            assert_eq!(
                (x.pairs, x.skipped, x.won, x.lost),
                (y.pairs, y.skipped, y.won, y.lost)
            );
            assert!(
                close(x.median_change, y.median_change)
                    && close(x.ci.0, y.ci.0)
                    && close(x.ci.1, y.ci.1)
            );
            assert!(close(x.p_value.expect("p"), y.p_value.expect("p")));
        }
        let (x, y) = (back.overall.expect("overall"), r.overall.expect("overall"));
        assert_eq!((x.pages, x.pairs, x.won), (y.pages, y.pairs, y.won));
        assert!(close(x.median_change, y.median_change) && close(x.ci.1, y.ci.1));
        let v: Verdict = serde_json::from_str("\"no_difference\"").expect("verdict");
        assert_eq!(v, Verdict::NoDifference);
    }
}
