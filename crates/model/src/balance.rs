//! Size-balanced assignment of a page's objects to n connections (seed 000 §II:
//! "since the client understands the size of each object, it can allocate
//! objects with same aggregated size on each connection").
//!
//! Equal aggregated sizes is the multiprocessor-scheduling problem (NP-hard in
//! general). We use Graham's longest-processing-time-first greedy: sort objects
//! by size, largest first, and give each to the connection with the least bytes
//! so far. Its largest connection load is at most (4/3 − 1/(3n)) times the
//! optimum (Graham 1969, "Bounds on multiprocessing timing anomalies"), and it
//! is never worse than the largest object plus the average load.

use serde::Serialize;

/// Which connection each object goes to, and the resulting loads.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Assignment {
    /// `connection[i]` is the connection (0-based) of object `i` of the input.
    pub connection: Vec<usize>,
    /// Bytes assigned to each connection.
    pub loads: Vec<u64>,
}

impl Assignment {
    /// The largest connection load in bytes (the makespan in bytes).
    pub fn max_load(&self) -> u64 {
        self.loads.iter().copied().max().unwrap_or(0)
    }

    /// Objects assigned to connection `c`, in input order.
    pub fn objects_on(&self, c: usize) -> Vec<usize> {
        (0..self.connection.len())
            .filter(|&i| self.connection[i] == c)
            .collect()
    }
}

/// Assigns objects of the given sizes (bytes) to `n` connections by
/// longest-processing-time-first. Ties go to the lower object index and the
/// lower connection index, so the result is deterministic. `n` of 0 is treated
/// as 1.
pub fn assign_lpt(sizes: &[u64], n: usize) -> Assignment {
    let n = n.max(1);
    let mut order: Vec<usize> = (0..sizes.len()).collect();
    // Stable sort: equal sizes keep input order.
    order.sort_by(|&a, &b| sizes[b].cmp(&sizes[a]));
    let mut loads = vec![0u64; n];
    let mut connection = vec![0usize; sizes.len()];
    for i in order {
        let mut best = 0;
        for c in 1..n {
            if loads[c] < loads[best] {
                best = c;
            }
        }
        connection[i] = best;
        loads[best] = loads[best].saturating_add(sizes[i]);
    }
    Assignment { connection, loads }
}

/// The connection with the fewest bytes so far: where seed 000's client sends an
/// object the hint did not list. Ties go to the lowest index; an empty slice
/// gives 0.
pub fn least_loaded(loads: &[u64]) -> usize {
    let mut best = 0;
    for (c, &l) in loads.iter().enumerate() {
        if l < loads[best] {
            best = c;
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn classic_example() {
        // 7→c0 (7), 6→c1 (6), 5→c1 (11), 4→c0 (11), 3→c0 on the tie (14), 2→c1 (13).
        // The optimum is 14 (7+5+2 / 6+4+3 = 14/13), so LPT is optimal here.
        let a = assign_lpt(&[7, 6, 5, 4, 3, 2], 2);
        assert_eq!(a.loads, vec![14, 13]);
        assert_eq!(a.connection, vec![0, 1, 1, 0, 0, 1]);
    }

    #[test]
    fn one_connection_gets_everything() {
        let a = assign_lpt(&[5, 1, 9], 1);
        assert_eq!(a.loads, vec![15]);
        assert_eq!(a.connection, vec![0, 0, 0]);
    }

    #[test]
    fn least_loaded_ties_low() {
        assert_eq!(least_loaded(&[3, 1, 1]), 1);
        assert_eq!(least_loaded(&[]), 0);
    }

    /// Brute-force optimum for tiny instances.
    fn optimum(sizes: &[u64], n: usize) -> u64 {
        let mut best = u64::MAX;
        let total = n.pow(sizes.len() as u32);
        for mut code in 0..total {
            let mut loads = vec![0u64; n];
            for &s in sizes {
                loads[code % n] += s;
                code /= n;
            }
            best = best.min(*loads.iter().max().unwrap());
        }
        best
    }

    proptest! {
        #[test]
        fn every_object_exactly_once(sizes in proptest::collection::vec(0u64..5_000_000, 0..200), n in 1usize..8) {
            let a = assign_lpt(&sizes, n);
            prop_assert_eq!(a.connection.len(), sizes.len());
            prop_assert!(a.connection.iter().all(|&c| c < n));
            let mut seen = 0usize;
            for c in 0..n {
                let objs = a.objects_on(c);
                seen += objs.len();
                let sum: u64 = objs.iter().map(|&i| sizes[i]).sum();
                prop_assert_eq!(sum, a.loads[c]);
            }
            prop_assert_eq!(seen, sizes.len());
            prop_assert_eq!(a.loads.iter().sum::<u64>(), sizes.iter().sum::<u64>());
        }

        #[test]
        fn within_graham_bound(sizes in proptest::collection::vec(1u64..1000, 1..8), n in 1usize..4) {
            let a = assign_lpt(&sizes, n);
            let opt = optimum(&sizes, n) as f64;
            let bound = (4.0 / 3.0 - 1.0 / (3.0 * n as f64)) * opt;
            prop_assert!(a.max_load() as f64 <= bound + 1e-9, "lpt {} opt {}", a.max_load(), opt);
        }
    }
}
