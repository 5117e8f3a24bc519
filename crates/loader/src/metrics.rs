//! The seeds' page-load metrics, computed from a [`LoadRecord`] (pure).
//!
//! Everything here reads the record's integer microseconds and reports
//! durations as `f64` seconds. Nothing panics on odd records (no
//! connections, missing times, an end before its start): intervals that run
//! backwards are treated as empty, subtractions saturate, and a metric that
//! cannot be computed is `None` rather than `NaN`.
//!
//! Two instants frame most metrics (seed 000 §IV-A, "the time from first
//! handshake message sent to the arrive timestamp of the last data packet"):
//!
//! - **first SYN**: the earliest [`ConnectionTiming::open_us`];
//! - **last data byte**: the latest body [`Chunk`](crate::record::Chunk)
//!   with at least one byte over all objects (an object without such chunks
//!   contributes its `end_us`).
//!
//! An object is **receiving** during `[first_byte_us, end_us]` (when `end_us`
//! is missing, until its last chunk). A connection is **active** while at
//! least one of its objects is receiving. See `docs/METRICS.md` for the
//! definitions, their sources and how they differ from the papers' tooling.

use std::collections::BTreeMap;

use mewa_report::{mean, median};
use serde::{Deserialize, Serialize};

use crate::record::{ConnectionTiming, LoadRecord, ObjectTiming, Protocol};

/// A half-open interval `[start, end)` of µs since the load started.
pub type Interval = (u64, u64);

/// At most this many RTT bins per object in [`bytes_per_rtt_bin`]; later
/// bytes are added to the last bin, so that a tiny RTT on a long record
/// cannot allocate without bound.
pub const MAX_RTT_BINS: usize = 1 << 16;

/// The page-level metrics of one load. Durations are seconds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PageMetrics {
    /// Number of objects in the record.
    pub objects: usize,
    /// Objects that did not arrive completely with a 2xx status
    /// ([`ObjectTiming::ok`] is false).
    pub failed_objects: usize,
    /// Number of connections the load used (opened, or in a session reused).
    pub connections: usize,
    /// Sum of the body bytes received over all objects.
    pub body_bytes: u64,
    /// Page load time as seed 000 measures it: first SYN to last data byte.
    /// `None` without connections or without any data.
    pub plt_wire_s: Option<f64>,
    /// The loader's "all objects done" time, from the start of the load
    /// (which includes name resolution). `None` if the load did not complete.
    pub plt_loader_s: Option<f64>,
    /// Time within the wire window during which no object was receiving
    /// (seed 002 §4).
    pub idle_s: Option<f64>,
    /// Time within the wire window during which some object was receiving;
    /// `busy_s + idle_s == plt_wire_s`. Seed 002 calls `plt − idle` the
    /// "page net transfer time".
    pub busy_s: Option<f64>,
    /// `idle_s / plt_wire_s`, in `[0, 1]`; `None` when the window is empty.
    pub idle_share: Option<f64>,
    /// Seed 002's effective concurrency: the summed active time of the
    /// connections over the time at least one was active. `None` when no
    /// object was ever receiving on a connection.
    pub effective_concurrency: Option<f64>,
    /// Duration of every connection whose duration is known, in opening
    /// order (see [`connection_metrics`]).
    pub connection_durations_s: Vec<f64>,
    /// Mean of [`PageMetrics::connection_durations_s`].
    pub connection_duration_mean_s: Option<f64>,
    /// Median of [`PageMetrics::connection_durations_s`] (mean of the two
    /// middle values for an even count).
    pub connection_duration_median_s: Option<f64>,
}

impl PageMetrics {
    /// Computes every page-level metric of `record`.
    pub fn from_record(record: &LoadRecord) -> PageMetrics {
        page_metrics(record)
    }
}

/// What one connection did during the load.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConnectionMetrics {
    /// [`ConnectionTiming::id`].
    pub id: u32,
    /// HTTP version spoken on it (seed 002 Fig. 10 splits out HTTP/2).
    pub protocol: Protocol,
    /// Whether TLS protects it (seed 002 Fig. 9 splits encrypted and
    /// unencrypted connections).
    pub tls: bool,
    /// `close_us − open_us`; when the close is missing, last data byte of its
    /// objects − `open_us`; `None` when neither is known.
    pub duration_s: Option<f64>,
    /// Time during which at least one of its objects was receiving.
    pub active_s: f64,
    /// Number of objects it carried.
    pub objects: usize,
    /// Body bytes it carried.
    pub body_bytes: u64,
}

/// Bytes per RTT bin of the first object on one connection (seed 002
/// Fig. 11).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RttBins {
    /// The connection.
    pub connection: u32,
    /// [`ObjectTiming::id`] of the connection's first object (earliest
    /// `request_us`, the earlier in the record on a tie).
    pub object: u32,
    /// `bytes[k]`: body bytes that arrived in
    /// `[request_us + k·rtt, request_us + (k+1)·rtt)`. Empty when the
    /// object received no bytes.
    pub bytes: Vec<u64>,
}

/// Converts µs to seconds.
fn secs(us: u64) -> f64 {
    us as f64 / 1e6
}

/// Sorts `intervals`, drops empty ones (`end <= start`) and merges those
/// that overlap or touch: the result is ordered, disjoint and non-adjacent.
pub fn merge_intervals(mut intervals: Vec<Interval>) -> Vec<Interval> {
    intervals.retain(|&(s, e)| e > s);
    intervals.sort_unstable();
    let mut out: Vec<Interval> = Vec::with_capacity(intervals.len());
    for (s, e) in intervals {
        match out.last_mut() {
            Some(last) if s <= last.1 => last.1 = last.1.max(e),
            _ => out.push((s, e)),
        }
    }
    out
}

/// Total length of `intervals` as given (merge them first to measure their
/// union).
pub fn total_length(intervals: &[Interval]) -> u64 {
    intervals
        .iter()
        .fold(0u64, |acc, &(s, e)| acc.saturating_add(e.saturating_sub(s)))
}

/// Length of the union of `intervals` clipped to `window`.
pub fn covered_within(intervals: &[Interval], window: Interval) -> u64 {
    let clipped = intervals
        .iter()
        .map(|&(s, e)| (s.max(window.0), e.min(window.1)))
        .collect();
    total_length(&merge_intervals(clipped))
}

/// The instant of the object's last data byte: its latest chunk with at
/// least one byte, else its `end_us`.
pub fn last_data_us(object: &ObjectTiming) -> Option<u64> {
    object
        .chunks
        .iter()
        .filter(|c| c.bytes > 0)
        .map(|c| c.t_us)
        .max()
        .or(object.end_us)
}

/// The object's receiving interval `[first_byte_us, end_us]`; without
/// `end_us`, up to its last chunk. `None` before a first byte, or when the
/// interval would run backwards.
pub fn receiving_interval(object: &ObjectTiming) -> Option<Interval> {
    let start = object.first_byte_us?;
    let end = object
        .end_us
        .or_else(|| object.chunks.iter().map(|c| c.t_us).max())?;
    (end >= start).then_some((start, end))
}

/// The window seed 000 calls the page load time: from the first SYN (the
/// earliest connection open) to the last data byte of any object.
///
/// `None` without connections or without any object that received data. A
/// last byte before the first SYN (an inconsistent record) gives an empty
/// window at the first SYN.
//= seed 000 §IV-A
//# We use tcpdump to trace the packet at client side in order to measure
//# the page load time which is defined as the time from first handshake
//# message sent to the arrive timestamp of the last data packet.
pub fn wire_window(record: &LoadRecord) -> Option<Interval> {
    let first_syn = record.connections.iter().map(|c| c.open_us).min()?;
    let last_byte = record.objects.iter().filter_map(last_data_us).max()?;
    Some((first_syn, last_byte.max(first_syn)))
}

/// Page load time, first SYN to last data byte, in seconds
/// (see [`wire_window`]).
pub fn plt_wire_s(record: &LoadRecord) -> Option<f64> {
    wire_window(record).map(|(s, e)| secs(e - s))
}

/// Idle and busy time within the wire window, in µs: `(idle, busy)` with
/// `idle + busy` equal to the window's length.
//= seed 002 §4
//# The idle time constitutes of the duration where the page is not
//# receiving any objects since we are concerned about network-level
//# downstream activity.
pub fn idle_busy_us(record: &LoadRecord) -> Option<(u64, u64)> {
    let window = wire_window(record)?;
    let receiving: Vec<Interval> = record
        .objects
        .iter()
        .filter_map(receiving_interval)
        .collect();
    let busy = covered_within(&receiving, window);
    let len = window.1 - window.0;
    Some((len.saturating_sub(busy), busy))
}

/// The merged active intervals of every connection that carried a
/// receiving object, keyed by connection id.
pub fn active_intervals(record: &LoadRecord) -> BTreeMap<u32, Vec<Interval>> {
    let mut by_conn: BTreeMap<u32, Vec<Interval>> = BTreeMap::new();
    for o in &record.objects {
        if let (Some(c), Some(iv)) = (o.connection, receiving_interval(o)) {
            by_conn.entry(c).or_default().push(iv);
        }
    }
    by_conn
        .into_iter()
        .map(|(c, ivs)| (c, merge_intervals(ivs)))
        .collect()
}

/// Seed 002's effective concurrency: Σ over connections of the time the
/// connection was active, divided by the time at least one connection was
/// active. 1.0 for a single connection, at most the number of connections
/// that were ever active; `None` when none was.
//= seed 002 §4
//# By tracking the number of active connections (objects being received
//# through them) and their cumulative duration, we obtain a weighted value
//# for a page that denotes the effective number of connections seen
//# throughout the page load duration. A concurrency level of 1.5 would
//# imply that without any idle time, the page could be served the same
//# amount of data through 1.5 connections.
pub fn effective_concurrency(record: &LoadRecord) -> Option<f64> {
    let active = active_intervals(record);
    let sum = active
        .values()
        .fold(0u64, |acc, ivs| acc.saturating_add(total_length(ivs)));
    let all: Vec<Interval> = active.into_values().flatten().collect();
    let union = total_length(&merge_intervals(all));
    (union > 0).then(|| sum as f64 / union as f64)
}

/// Per connection, in the record's order: duration, activity and load.
//= seed 002 §4
//# We measure the effects in the duration of both connection types upon
//# using the two protocols.
pub fn connection_metrics(record: &LoadRecord) -> Vec<ConnectionMetrics> {
    let active = active_intervals(record);
    record
        .connections
        .iter()
        .map(|c| {
            let carried = record.objects.iter().filter(|o| o.connection == Some(c.id));
            let objects = carried.clone().count();
            let body_bytes = carried
                .clone()
                .fold(0u64, |acc, o| acc.saturating_add(o.body_bytes));
            let last_data = carried.filter_map(last_data_us).max();
            ConnectionMetrics {
                id: c.id,
                protocol: c.protocol,
                tls: c.tls,
                duration_s: connection_duration_us(c, last_data).map(secs),
                active_s: secs(active.get(&c.id).map_or(0, |ivs| total_length(ivs))),
                objects,
                body_bytes,
            }
        })
        .collect()
}

/// `close − open`, else `last data − open` (saturating at 0).
fn connection_duration_us(c: &ConnectionTiming, last_data: Option<u64>) -> Option<u64> {
    c.close_us
        .or(last_data)
        .map(|end| end.saturating_sub(c.open_us))
}

/// Bytes per round trip of the first object on each connection, in order
/// of connection id. Bin `k` holds the bytes of the chunks with
/// `⌊(t_us − request_us) / rtt⌋ = k` (a chunk before the request counts in
/// bin 0; beyond [`MAX_RTT_BINS`] in the last bin), so the bins add up to
/// the object's chunk bytes. Empty when `rtt_s` is not a positive finite
/// number of at least 1 µs.
//= seed 002 §4
//# For the objects-level analysis, Figure 11 shows the amount of data
//# transferred in each round trip time. [...] In this analysis, we only
//# consider the first object in the connection that allows us to see the
//# window increase function in action.
pub fn bytes_per_rtt_bin(record: &LoadRecord, rtt_s: f64) -> Vec<RttBins> {
    if !rtt_s.is_finite() || rtt_s * 1e6 < 1.0 {
        return Vec::new();
    }
    let rtt_us = rtt_s * 1e6;
    let mut first: BTreeMap<u32, &ObjectTiming> = BTreeMap::new();
    for o in &record.objects {
        if let Some(c) = o.connection {
            first
                .entry(c)
                .and_modify(|f| {
                    if o.request_us < f.request_us {
                        *f = o;
                    }
                })
                .or_insert(o);
        }
    }
    first
        .into_iter()
        .map(|(connection, o)| {
            let mut bytes: Vec<u64> = Vec::new();
            for ch in o.chunks.iter().filter(|c| c.bytes > 0) {
                let since = ch.t_us.saturating_sub(o.request_us) as f64;
                // `as usize` saturates; the bin count is capped.
                let k = ((since / rtt_us).floor() as usize).min(MAX_RTT_BINS - 1);
                if bytes.len() <= k {
                    bytes.resize(k + 1, 0);
                }
                bytes[k] = bytes[k].saturating_add(ch.bytes);
            }
            RttBins {
                connection,
                object: o.id,
                bytes,
            }
        })
        .collect()
}

/// The page-level curve of seed 002 Fig. 11: per bin index, the maximum
/// over connections of the bytes in that bin.
//= seed 002 §4
//# Thus, the figure shows the maximum size of objects transferred in each
//# RTT bin.
pub fn max_bytes_per_bin(bins: &[RttBins]) -> Vec<u64> {
    let len = bins.iter().map(|b| b.bytes.len()).max().unwrap_or(0);
    (0..len)
        .map(|k| {
            bins.iter()
                .filter_map(|b| b.bytes.get(k).copied())
                .max()
                .unwrap_or(0)
        })
        .collect()
}

/// Computes every page-level metric of `record` (see [`PageMetrics`]).
pub fn page_metrics(record: &LoadRecord) -> PageMetrics {
    let window = wire_window(record);
    let idle_busy = idle_busy_us(record);
    let connection_durations_s: Vec<f64> = connection_metrics(record)
        .into_iter()
        .filter_map(|c| c.duration_s)
        .collect();
    PageMetrics {
        objects: record.objects.len(),
        failed_objects: record.objects.iter().filter(|o| !o.ok()).count(),
        connections: record.connections.len(),
        body_bytes: record
            .objects
            .iter()
            .fold(0u64, |acc, o| acc.saturating_add(o.body_bytes)),
        plt_wire_s: window.map(|(s, e)| secs(e - s)),
        plt_loader_s: record.done_us.map(secs),
        idle_s: idle_busy.map(|(i, _)| secs(i)),
        busy_s: idle_busy.map(|(_, b)| secs(b)),
        idle_share: idle_busy.and_then(|(i, b)| {
            let len = i.saturating_add(b);
            (len > 0).then(|| i as f64 / len as f64)
        }),
        effective_concurrency: effective_concurrency(record),
        connection_duration_mean_s: mean(&connection_durations_s),
        connection_duration_median_s: median(&connection_durations_s),
        connection_durations_s,
    }
}

#[cfg(test)]
pub(crate) mod tests {

    use super::*;
    use crate::record::Chunk;
    use proptest::prelude::*;

    /// A connection opened at `open`, ready 10 µs later, closed at `close`.
    pub(crate) fn conn(id: u32, open: u64, close: Option<u64>) -> ConnectionTiming {
        ConnectionTiming {
            id,
            host: "a.example".into(),
            addr: "10.0.0.2:443".into(),
            protocol: Protocol::H2,
            tls: true,
            open_us: open,
            connected_us: Some(open + 5),
            ready_us: Some(open + 10),
            close_us: close,
            error: None,
            iw: None,
            reused: false,
        }
    }

    /// An object on `conn` requested at `req`, receiving `[fb, end]`, with
    /// the given chunks.
    pub(crate) fn obj(
        id: u32,
        conn: Option<u32>,
        req: u64,
        fb: Option<u64>,
        end: Option<u64>,
        chunks: &[(u64, u64)],
    ) -> ObjectTiming {
        let chunks: Vec<Chunk> = chunks
            .iter()
            .map(|&(t_us, bytes)| Chunk { t_us, bytes })
            .collect();
        ObjectTiming {
            id,
            url: format!("https://a.example/{id}"),
            host: "a.example".into(),
            content_type: "text/html".into(),
            connection: conn,
            discovered_us: req.saturating_sub(1),
            request_us: req,
            first_byte_us: fb,
            end_us: end,
            status: 200,
            expected_status: 200,
            body_bytes: chunks.iter().map(|c| c.bytes).sum(),
            header_bytes: 100,
            chunks,
            error: None,
        }
    }

    pub(crate) fn record(
        objects: Vec<ObjectTiming>,
        connections: Vec<ConnectionTiming>,
    ) -> LoadRecord {
        LoadRecord {
            page: "p".into(),
            url: "https://a.example/0".into(),
            protocol: Protocol::H2,
            tls: true,
            started_unix_ms: 1_700_000_000_000,
            done_us: objects.iter().filter_map(|o| o.end_us).max(),
            objects,
            connections,
            errors: Vec::new(),
        }
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    #[test]
    fn merge_sorts_merges_and_drops_empty() {
        let m = merge_intervals(vec![(5, 7), (1, 3), (2, 4), (9, 9), (7, 8), (10, 5)]);
        assert_eq!(m, vec![(1, 4), (5, 8)]);
        assert_eq!(total_length(&m), 6);
        assert_eq!(covered_within(&m, (3, 6)), 2);
        assert!(merge_intervals(Vec::new()).is_empty());
    }

    #[test]
    fn two_overlapping_objects_one_connection() {
        // SYN at 0; objects receive [100, 300] and [200, 400].
        let r = record(
            vec![
                obj(
                    0,
                    Some(0),
                    50,
                    Some(100),
                    Some(300),
                    &[(150, 1000), (300, 500)],
                ),
                obj(1, Some(0), 60, Some(200), Some(400), &[(400, 700)]),
            ],
            vec![conn(0, 0, Some(500))],
        );
        assert_eq!(wire_window(&r), Some((0, 400)));
        assert_eq!(idle_busy_us(&r), Some((100, 300)));
        let m = page_metrics(&r);
        assert!(close(m.plt_wire_s.unwrap(), 400e-6));
        assert!(close(m.idle_s.unwrap(), 100e-6));
        assert!(close(m.idle_share.unwrap(), 0.25));
        assert!(close(m.effective_concurrency.unwrap(), 1.0));
        assert_eq!(m.connection_durations_s.len(), 1);
        assert!(close(m.connection_durations_s[0], 500e-6));
        assert_eq!(
            (m.objects, m.failed_objects, m.connections, m.body_bytes),
            (2, 0, 1, 2200)
        );
    }

    #[test]
    fn gap_between_objects_is_idle() {
        // Receiving [100, 200] and [600, 700]; window [0, 700]: idle 500.
        let r = record(
            vec![
                obj(0, Some(0), 50, Some(100), Some(200), &[(200, 10)]),
                obj(1, Some(0), 550, Some(600), Some(700), &[(700, 10)]),
            ],
            vec![conn(0, 0, None)],
        );
        assert_eq!(idle_busy_us(&r), Some((500, 200)));
        // No close: duration runs to the last data byte.
        assert!(close(page_metrics(&r).connection_durations_s[0], 700e-6));
    }

    #[test]
    fn two_connections_concurrency() {
        // Conn 0 active [0, 400], conn 1 active [200, 600]: sum 800, union 600.
        let r = record(
            vec![
                obj(0, Some(0), 0, Some(0), Some(400), &[(400, 10)]),
                obj(1, Some(1), 100, Some(200), Some(600), &[(600, 10)]),
            ],
            vec![conn(0, 0, Some(700)), conn(1, 100, Some(800))],
        );
        let m = page_metrics(&r);
        assert!(close(m.effective_concurrency.unwrap(), 800.0 / 600.0));
        assert_eq!(m.idle_s, Some(0.0));
        assert!(close(m.connection_duration_mean_s.unwrap(), 700e-6));
        assert!(close(m.connection_duration_median_s.unwrap(), 700e-6));
        let cm = connection_metrics(&r);
        assert!(close(cm[1].active_s, 400e-6));
        assert_eq!(cm[1].objects, 1);
    }

    #[test]
    fn rtt_bins_of_first_object() {
        let r = record(
            vec![
                // Second object on conn 0 is ignored (requested later).
                obj(1, Some(0), 500, Some(510), Some(520), &[(520, 99)]),
                obj(
                    0,
                    Some(0),
                    100,
                    Some(120),
                    Some(400),
                    &[(120, 10), (199, 20), (200, 30), (390, 40)],
                ),
                obj(2, Some(1), 0, Some(10), Some(20), &[(20, 5)]),
            ],
            vec![conn(0, 0, None), conn(1, 0, None)],
        );
        let bins = bytes_per_rtt_bin(&r, 100e-6);
        assert_eq!(bins.len(), 2);
        assert_eq!((bins[0].connection, bins[0].object), (0, 0));
        assert_eq!(bins[0].bytes, vec![30, 30, 40]);
        assert_eq!(bins[1].bytes, vec![5]);
        assert_eq!(max_bytes_per_bin(&bins), vec![30, 30, 40]);
        assert!(bytes_per_rtt_bin(&r, 0.0).is_empty());
        assert!(bytes_per_rtt_bin(&r, f64::NAN).is_empty());
        // A tiny RTT caps the bins and keeps every byte.
        let tiny = bytes_per_rtt_bin(&r, 1e-6);
        assert!(tiny[0].bytes.len() <= MAX_RTT_BINS);
        assert_eq!(tiny[0].bytes.iter().sum::<u64>(), 100);
    }

    #[test]
    fn odd_records_do_not_panic() {
        let empty = record(Vec::new(), Vec::new());
        let m = page_metrics(&empty);
        assert_eq!(m.plt_wire_s, None);
        assert_eq!(m.idle_share, None);
        assert_eq!(m.effective_concurrency, None);
        assert!(m.connection_durations_s.is_empty());
        assert!(max_bytes_per_bin(&bytes_per_rtt_bin(&empty, 0.026)).is_empty());

        // End before start, close before open, data before the SYN,
        // missing first byte, no connection.
        let r = record(
            vec![
                obj(0, Some(0), 900, Some(800), Some(100), &[(50, 10)]),
                obj(1, None, 0, None, None, &[]),
                obj(
                    2,
                    Some(7),
                    u64::MAX,
                    Some(u64::MAX),
                    Some(u64::MAX),
                    &[(0, u64::MAX)],
                ),
            ],
            vec![conn(0, 1000, Some(10))],
        );
        let m = page_metrics(&r);
        assert!(m.idle_share.is_none_or(|s| (0.0..=1.0).contains(&s)));
        assert_eq!(m.connection_durations_s, vec![0.0]);
        let _ = bytes_per_rtt_bin(&r, 1e-3);
    }

    #[test]
    fn metrics_serialize() {
        let r = record(
            vec![obj(0, Some(0), 0, Some(10), Some(20), &[(20, 5)])],
            vec![conn(0, 0, None)],
        );
        let m = page_metrics(&r);
        let json = serde_json::to_string(&m).unwrap();
        let back: PageMetrics = serde_json::from_str(&json).unwrap();
        assert_eq!(back, m);
    }

    /// Random records with valid connection ids: up to 4 connections, up to
    /// 12 objects, times in `[0, 10_000)`, some fields missing or reversed.
    pub(crate) fn arb_record() -> impl Strategy<Value = LoadRecord> {
        (1usize..5).prop_flat_map(|n_conn| {
            let conns =
                prop::collection::vec((0u64..2_000, prop::option::of(0u64..10_000)), n_conn);
            let objects = prop::collection::vec(
                (
                    prop::option::of(0..n_conn as u32),
                    0u64..10_000,
                    prop::option::of(0u64..10_000),
                    prop::option::of(0u64..10_000),
                    prop::collection::vec((0u64..10_000, 0u64..100_000), 0..6),
                ),
                0..12,
            );
            (conns, objects).prop_map(|(conns, objects)| {
                let connections = conns
                    .into_iter()
                    .enumerate()
                    .map(|(i, (open, close))| conn(i as u32, open, close))
                    .collect();
                let objects = objects
                    .into_iter()
                    .enumerate()
                    .map(|(i, (c, req, fb, len, mut chunks))| {
                        chunks.sort_unstable();
                        let end = len.map(|l| fb.unwrap_or(req) + l);
                        obj(i as u32, c, req, fb, end, &chunks)
                    })
                    .collect();
                record(objects, connections)
            })
        })
    }

    proptest! {
        #[test]
        fn idle_plus_busy_is_window(r in arb_record()) {
            if let (Some((s, e)), Some((idle, busy))) = (wire_window(&r), idle_busy_us(&r)) {
                prop_assert_eq!(idle + busy, e - s);
            }
            let m = page_metrics(&r);
            if let (Some(plt), Some(idle), Some(busy)) = (m.plt_wire_s, m.idle_s, m.busy_s) {
                prop_assert!((idle + busy - plt).abs() < 1e-9);
            }
        }

        #[test]
        fn idle_share_in_unit_interval(r in arb_record()) {
            if let Some(s) = page_metrics(&r).idle_share {
                prop_assert!((0.0..=1.0).contains(&s), "share {s}");
            }
        }

        #[test]
        fn concurrency_between_one_and_connections(r in arb_record()) {
            let active = active_intervals(&r).values().filter(|v| !v.is_empty()).count();
            match effective_concurrency(&r) {
                Some(c) => {
                    prop_assert!(c >= 1.0 - 1e-12, "concurrency {c}");
                    prop_assert!(c <= active as f64 + 1e-12, "concurrency {c} > {active}");
                    prop_assert!(active <= r.connections.len());
                }
                None => prop_assert_eq!(active, 0),
            }
        }

        #[test]
        fn bins_sum_to_first_object_bytes(r in arb_record(), rtt_us in 1u64..5_000) {
            for b in bytes_per_rtt_bin(&r, rtt_us as f64 / 1e6) {
                let o = r
                    .objects
                    .iter()
                    .filter(|o| o.connection == Some(b.connection))
                    .min_by_key(|o| o.request_us)
                    .unwrap();
                prop_assert_eq!(o.id, b.object);
                prop_assert_eq!(b.bytes.iter().sum::<u64>(), o.chunks.iter().map(|c| c.bytes).sum::<u64>());
            }
        }

        #[test]
        fn merged_intervals_are_disjoint_and_cover(ivs in prop::collection::vec((0u64..1000, 0u64..1000), 0..20)) {
            let m = merge_intervals(ivs.clone());
            for w in m.windows(2) {
                prop_assert!(w[0].1 < w[1].0);
            }
            for t in 0..1000u64 {
                let in_any = ivs.iter().any(|&(s, e)| s <= t && t < e);
                let in_merged = m.iter().any(|&(s, e)| s <= t && t < e);
                prop_assert_eq!(in_any, in_merged);
            }
        }
    }
}
