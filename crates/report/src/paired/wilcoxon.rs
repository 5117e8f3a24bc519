//! The Wilcoxon signed-rank test, two-sided: is a sample of paired
//! differences centred on zero? It assumes nothing of the differences'
//! distribution beyond symmetry under the null, which suits load times
//! (skewed, heavy-tailed) better than a t-test.
//!
//! Small samples get the exact null distribution, counted by dynamic
//! programming over the ranks rather than looked up in a table, so ties
//! are exact too: tied magnitudes share their average rank, and the ranks
//! are kept doubled (an average of two integers, doubled, is an integer) so
//! the counting stays in whole numbers. Above [`EXACT_MAX`] differences the
//! normal approximation, with tie and continuity corrections, is within a
//! few thousandths of the exact value and costs nothing.

/// The largest count of non-zero differences whose p-value is computed
/// exactly. The table then has `n(n+1) + 1` = 2551 cells, and the number of
/// sign assignments, 2^50, is still exact in a `u64` and in an `f64`.
pub const EXACT_MAX: usize = 50;

/// Two-sided p-value of the Wilcoxon signed-rank test that `diffs` are
/// centred on zero; `None` when no difference is finite and non-zero.
///
/// Zero differences are dropped before ranking (Wilcoxon's own convention:
/// a pair with no difference says nothing about its sign), and non-finite
/// ones too (a failed measurement). Tied magnitudes get their average rank.
/// The statistic is W+, the rank sum of the positive differences; the
/// p-value is twice the smaller tail probability of the observed W+
/// (each tail including it), at most 1: exact when at most [`EXACT_MAX`]
/// differences remain, by the normal approximation above.
pub fn wilcoxon_signed_rank(diffs: &[f64]) -> Option<f64> {
    let mut d: Vec<f64> = diffs
        .iter()
        .copied()
        .filter(|x| x.is_finite() && *x != 0.0)
        .collect();
    if d.is_empty() {
        return None;
    }
    d.sort_by(|x, y| x.abs().total_cmp(&y.abs()));
    let (doubled, ties) = doubled_ranks(&d);
    let t2: u64 = d
        .iter()
        .zip(&doubled)
        .filter(|(x, _)| **x > 0.0)
        .map(|(_, r)| r)
        .sum();
    Some(if d.len() <= EXACT_MAX {
        exact_p(&doubled, t2)
    } else {
        normal_p(d.len(), t2, ties)
    })
}

/// Doubled average ranks of `sorted` (sorted by magnitude), and the tie
/// term Σ(t³ − t) over the groups of `t` equal magnitudes. The group
/// holding sorted positions i..=j (from 1) has average rank (i + j)/2, so
/// doubled rank i + j.
fn doubled_ranks(sorted: &[f64]) -> (Vec<u64>, f64) {
    let mut ranks = Vec::with_capacity(sorted.len());
    let mut ties = 0.0;
    let mut i = 0;
    while i < sorted.len() {
        let mut j = i;
        while j + 1 < sorted.len() && sorted[j + 1].abs() == sorted[i].abs() {
            j += 1;
        }
        let t = (j - i + 1) as f64;
        ties += t * t * t - t;
        ranks.extend(std::iter::repeat_n((i + 1 + j + 1) as u64, j - i + 1));
        i = j + 1;
    }
    (ranks, ties)
}

/// Exact two-sided p-value of the doubled statistic `t2` under the null,
/// where each rank's sign is + or − with probability 1/2 independently:
/// `counts[s]` is the number of the 2^n sign assignments whose positive
/// doubled ranks sum to `s` (the subset-sum count, one rank at a time).
fn exact_p(doubled: &[u64], t2: u64) -> f64 {
    let max: u64 = doubled.iter().sum();
    let mut counts = vec![0u64; max as usize + 1];
    counts[0] = 1;
    let mut reach = 0usize;
    for &r in doubled {
        let r = r as usize;
        reach += r;
        for s in (r..=reach).rev() {
            counts[s] += counts[s - r];
        }
    }
    let t = (t2 as usize).min(counts.len() - 1);
    let lower: u64 = counts[..=t].iter().sum();
    let upper: u64 = counts[t..].iter().sum();
    let total = 2f64.powi(doubled.len() as i32);
    (2.0 * lower.min(upper) as f64 / total).min(1.0)
}

/// Normal approximation of the two-sided p-value for `n` non-zero
/// differences with doubled statistic `t2` and tie term `ties` = Σ(t³ − t):
/// under the null W+ has mean n(n+1)/4 and variance
/// n(n+1)(2n+1)/24 − Σ(t³ − t)/48; |W+ − mean| is reduced by 1/2 for
/// continuity (not below 0).
fn normal_p(n: usize, t2: u64, ties: f64) -> f64 {
    let n = n as f64;
    let w = t2 as f64 / 2.0;
    let mean = n * (n + 1.0) / 4.0;
    let var = n * (n + 1.0) * (2.0 * n + 1.0) / 24.0 - ties / 48.0;
    if var <= 0.0 {
        return 1.0;
    }
    let z = ((w - mean).abs() - 0.5).max(0.0) / var.sqrt();
    erfc(z / std::f64::consts::SQRT_2).min(1.0)
}

/// The complementary error function, so that 2·(1 − Φ(z)) = erfc(z/√2).
/// Numerical Recipes' Chebyshev fit `erfcc` (2nd ed., §6.2): "fractional
/// error everywhere less than 1.2 × 10⁻⁷", ample for a p-value.
fn erfc(x: f64) -> f64 {
    let z = x.abs();
    let t = 1.0 / (1.0 + 0.5 * z);
    let poly = -1.265_512_23
        + t * (1.000_023_68
            + t * (0.374_091_96
                + t * (0.096_784_18
                    + t * (-0.186_288_06
                        + t * (0.278_868_07
                            + t * (-1.135_203_98
                                + t * (1.488_515_87 + t * (-0.822_152_23 + t * 0.170_872_77))))))));
    let r = t * (-z * z + poly).exp();
    if x >= 0.0 {
        r
    } else {
        2.0 - r
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The p-value by brute force: every one of the 2^n sign assignments
    /// of the magnitudes, with ranks computed the naive way (1 + the number
    /// smaller + half the number of others equal).
    fn brute_force_p(diffs: &[f64]) -> f64 {
        let d: Vec<f64> = diffs.iter().copied().filter(|x| *x != 0.0).collect();
        let n = d.len();
        let rank = |i: usize| {
            let a = d[i].abs();
            let smaller = d.iter().filter(|x| x.abs() < a).count() as f64;
            let equal = d.iter().filter(|x| x.abs() == a).count() as f64 - 1.0;
            1.0 + smaller + equal / 2.0
        };
        let ranks: Vec<f64> = (0..n).map(rank).collect();
        let observed: f64 = (0..n).filter(|&i| d[i] > 0.0).map(|i| ranks[i]).sum();
        let (mut lower, mut upper) = (0u64, 0u64);
        for mask in 0u64..(1 << n) {
            let w: f64 = (0..n)
                .filter(|i| mask >> i & 1 == 1)
                .map(|i| ranks[i])
                .sum();
            lower += u64::from(w <= observed + 1e-9);
            upper += u64::from(w >= observed - 1e-9);
        }
        (2.0 * lower.min(upper) as f64 / (1u64 << n) as f64).min(1.0)
    }

    fn assert_close(got: Option<f64>, want: f64, tol: f64) {
        let got = got.expect("a p-value");
        assert!((got - want).abs() <= tol, "got {got}, want {want}");
    }

    #[test]
    fn exact_p_matches_brute_force_without_ties() {
        for diffs in [
            vec![1.5, -0.2, 3.0, 0.7, -2.2, 4.1],
            vec![-1.0, -2.0, 3.0, -4.0, -5.0, -6.0],
            vec![0.3, -1.1, 2.9, 0.8, -0.05, 1.7, 2.2, -3.3],
            vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, -8.0],
        ] {
            assert_close(wilcoxon_signed_rank(&diffs), brute_force_p(&diffs), 1e-12);
        }
    }

    #[test]
    fn exact_p_matches_brute_force_with_ties_and_zeros() {
        for diffs in [
            vec![1.0, -1.0, 2.0, 2.0, -3.0, 3.0],
            vec![0.5, 0.5, 0.5, -0.5, 1.0, 2.0],
            vec![1.0, -1.0, 1.0, 2.0, -2.0, 2.0, 4.0, 0.0, 0.0, 5.0],
            vec![-3.0, -3.0, -3.0, -3.0, 1.0, 1.0, 2.0, 7.0],
        ] {
            assert_close(wilcoxon_signed_rank(&diffs), brute_force_p(&diffs), 1e-12);
        }
    }

    #[test]
    fn known_exact_values() {
        // All ten of 1..=10 positive: W+ = 55 is the single largest of the
        // 2^10 equally likely sums, so p = 2/1024.
        let up: Vec<f64> = (1..=10).map(f64::from).collect();
        assert_close(wilcoxon_signed_rank(&up), 2.0 / 1024.0, 1e-15);
        // W+ = 15 of n = 6: 14 subsets of 1..=6 sum to at most 6 (W- = 6),
        // so p = 2 · 14/64.
        let d = [1.0, 2.0, 3.0, 4.0, 5.0, -6.0];
        assert_close(wilcoxon_signed_rank(&d), 28.0 / 64.0, 1e-15);
        // Balanced signs give the centre of the distribution: clamped to 1.
        assert_close(wilcoxon_signed_rank(&[1.0, -1.0]), 1.0, 0.0);
    }

    #[test]
    fn zeros_and_non_finite_are_dropped() {
        let d = [1.5, -0.2, 3.0, 0.7, -2.2, 4.1];
        let mut noisy = d.to_vec();
        noisy.extend([0.0, f64::NAN, f64::INFINITY, -0.0]);
        assert_eq!(wilcoxon_signed_rank(&noisy), wilcoxon_signed_rank(&d));
        assert_eq!(wilcoxon_signed_rank(&[0.0, f64::NAN]), None);
        assert_eq!(wilcoxon_signed_rank(&[]), None);
    }

    /// n = 50 differences, of magnitudes 1..=50 or tied in threes,
    /// whose largest magnitudes are made negative until their sum reaches
    /// a share of the total: W+ then spans the distribution from the tail
    /// (p about 0.001) to its centre (p = 1).
    fn samples_of_50() -> Vec<Vec<f64>> {
        let mut out = Vec::new();
        for share in [0.2, 0.28, 0.35, 0.4, 0.45, 0.48, 0.5] {
            for tied in [false, true] {
                let magnitude = |i: u32| f64::from(if tied { i.div_ceil(3) } else { i });
                let mut left = share * (1..=50).map(magnitude).sum::<f64>();
                let d = (1..=50).rev().map(magnitude).map(|m| {
                    if m <= left {
                        left -= m;
                        -m
                    } else {
                        m
                    }
                });
                out.push(d.collect());
            }
        }
        out
    }

    #[test]
    fn normal_approximation_is_close_to_exact_at_the_bound() {
        for diffs in samples_of_50() {
            let mut d = diffs;
            d.sort_by(|x, y| x.abs().total_cmp(&y.abs()));
            let (doubled, ties) = doubled_ranks(&d);
            let t2 = d
                .iter()
                .zip(&doubled)
                .filter(|p| *p.0 > 0.0)
                .map(|p| p.1)
                .sum();
            let (exact, normal) = (exact_p(&doubled, t2), normal_p(d.len(), t2, ties));
            assert!(
                (exact - normal).abs() < 0.01,
                "n {} exact {exact} normal {normal}",
                d.len()
            );
        }
    }

    #[test]
    fn large_samples_use_the_normal_approximation() {
        // 60 positive of ranks 1..=60, none tied: W+ = 1830, mean 915,
        // sd √(60·61·121/24) ≈ 135.83, z = (915 − 0.5)/135.83 ≈ 6.73.
        let d: Vec<f64> = (1..=60).map(f64::from).collect();
        let p = wilcoxon_signed_rank(&d).expect("p");
        assert!(p > 0.0 && p < 1e-10, "{p}");
        let mixed: Vec<f64> = (1..=60)
            .map(|i| f64::from(i) * if i % 2 == 0 { 1.0 } else { -1.0 })
            .collect();
        let p = wilcoxon_signed_rank(&mixed).expect("p");
        assert!(p > 0.5 && p <= 1.0, "{p}");
    }

    #[test]
    fn normal_approximation_corrects_for_ties_and_continuity() {
        // 60 differences of magnitude 1, 40 positive: every rank is 30.5,
        // W+ = 1220, mean 915, variance 60·61·121/24 − (60³ − 60)/48
        // = 13953.75, z = (305 − 0.5)/√13953.75 = 2.577756, p = 0.0099444.
        // Without the tie term p would be 0.0250; without the 1/2, 0.0098233.
        let d: Vec<f64> = (0..60).map(|i| if i < 40 { 1.0 } else { -1.0 }).collect();
        assert_close(wilcoxon_signed_rank(&d), 0.009_944_4, 2e-6);
    }

    #[test]
    fn erfc_gives_normal_tails() {
        assert!((erfc(0.0) - 1.0).abs() < 1e-7);
        // 2·(1 − Φ(1.959964)) = 0.05, 2·(1 − Φ(2.575829)) = 0.01.
        assert!((erfc(1.959_964 / std::f64::consts::SQRT_2) - 0.05).abs() < 1e-7);
        assert!((erfc(2.575_829 / std::f64::consts::SQRT_2) - 0.01).abs() < 1e-8);
        assert!((erfc(-1.0) - (2.0 - erfc(1.0))).abs() < 1e-15);
    }
}
