//! The figures of one page load that seed 002 reads: each connection's busy
//! span and bytes, the bytes of each connection's first object per round
//! trip (Fig. 11), the handshake time the page saw; pure, from the load's
//! record.

use mewa_loader::metrics::{last_data_us, page_metrics};
use mewa_loader::record::{LoadRecord, ObjectTiming};
use mewa_report::median;

use super::config::LoadId;
use super::record::PageRun;
use crate::fld::counters::TcpCounters;

/// A loader's load of `id` as the journal keeps it, with what the origin's
/// TCP did to repair losses meanwhile.
pub fn loader_run(id: &LoadId<'_>, record: &LoadRecord, server_tcp: TcpCounters) -> PageRun {
    let m = page_metrics(record);
    let spans = connection_spans(record);
    PageRun {
        plt_s: m.plt_wire_s,
        net_transfer_s: m.busy_s,
        idle_share: m.idle_share,
        effective_concurrency: m.effective_concurrency,
        connection_s: spans.iter().map(|s| s.0).collect(),
        connection_bytes: spans.iter().map(|s| s.1).collect(),
        first_object_bins: first_object_rounds(record),
        handshake_ms: handshake_ms(record),
        failed: m.failed_objects,
        server_tcp: Some(server_tcp),
        ..bare(id)
    }
}

/// A Chromium load of `id`: its load time and missing objects only.
pub fn chromium_run(id: &LoadId<'_>, m: crate::measured::Measured) -> PageRun {
    let failed = m
        .metrics
        .as_ref()
        .map_or(0, |x| x.objects.saturating_sub(x.objects_arrived));
    PageRun {
        plt_s: if m.error.is_none() { m.plt_s } else { None },
        failed,
        metrics: m.metrics.map(Box::new),
        ..bare(id)
    }
}

/// `id`'s load with no figures yet.
fn bare(id: &LoadId<'_>) -> PageRun {
    PageRun {
        setting: id.cell.label.clone(),
        queue_ms: Some(id.cell.queue_ms),
        protocol: id.kind,
        cc: id.cc.clone(),
        page: id.page.name.clone(),
        run: id.run,
        plt_s: None,
        net_transfer_s: None,
        idle_share: None,
        effective_concurrency: None,
        connection_s: Vec::new(),
        connection_bytes: Vec::new(),
        first_object_bins: Vec::new(),
        failed: 0,
        handshake_ms: None,
        server_tcp: None,
        metrics: None,
    }
}

/// The median TCP handshake time of the load's connections, ms.
fn handshake_ms(record: &LoadRecord) -> Option<f64> {
    median(
        &record
            .connections
            .iter()
            .filter_map(|c| {
                c.connected_us
                    .map(|t| t.saturating_sub(c.open_us) as f64 / 1e3)
            })
            .collect::<Vec<_>>(),
    )
}

/// Each connection's busy span, from its opening to the last body byte it
/// delivered (a browser keeps connections open long after the page; the
/// span is how long the page used it), and its body bytes. Connections that
/// carried nothing are left out.
pub fn connection_spans(record: &LoadRecord) -> Vec<(f64, u64)> {
    record
        .connections
        .iter()
        .filter_map(|c| {
            let carried: Vec<&ObjectTiming> = record
                .objects
                .iter()
                .filter(|o| o.connection == Some(c.id))
                .collect();
            let last = carried.iter().filter_map(|o| last_data_us(o)).max()?;
            let bytes = carried.iter().map(|o| o.body_bytes).sum();
            Some((last.saturating_sub(c.open_us) as f64 / 1e6, bytes))
        })
        .collect()
}

/// Seed 002 Fig. 11 for one load: for each round trip since the first byte
/// of a connection's first object, the most body bytes any connection's
/// first object received in it. A round trip is the connection's own
/// handshake time (SYN to SYN-ACK as the client saw it), so queueing from
/// cross traffic stretches the bins as it stretches the window's rounds.
pub fn first_object_rounds(record: &LoadRecord) -> Vec<u64> {
    let mut most: Vec<u64> = Vec::new();
    for c in &record.connections {
        let Some(rtt) = c
            .connected_us
            .map(|t| t.saturating_sub(c.open_us))
            .filter(|&r| r > 0)
        else {
            continue;
        };
        let Some(first) = record
            .objects
            .iter()
            .filter(|o| o.connection == Some(c.id))
            .min_by_key(|o| (o.request_us, o.id))
        else {
            continue;
        };
        let Some(t0) = first
            .chunks
            .iter()
            .find(|ch| ch.bytes > 0)
            .map(|ch| ch.t_us)
        else {
            continue;
        };
        let mut bins: Vec<u64> = Vec::new();
        for ch in first.chunks.iter().filter(|ch| ch.bytes > 0) {
            let k = ((ch.t_us.saturating_sub(t0)) / rtt).min(63) as usize;
            if bins.len() <= k {
                bins.resize(k + 1, 0);
            }
            bins[k] += ch.bytes;
        }
        if most.len() < bins.len() {
            most.resize(bins.len(), 0);
        }
        for (k, b) in bins.into_iter().enumerate() {
            most[k] = most[k].max(b);
        }
    }
    most
}

#[cfg(test)]
mod tests {
    use super::*;
    use mewa_loader::record::{Chunk, ConnectionTiming, Protocol};

    fn conn(id: u32, open: u64, connected: u64) -> ConnectionTiming {
        ConnectionTiming {
            id,
            host: "a.test".into(),
            addr: "10.0.0.1:443".into(),
            protocol: Protocol::H2,
            tls: true,
            open_us: open,
            connected_us: Some(connected),
            ready_us: Some(connected),
            close_us: Some(10_000_000),
            error: None,
            iw: None,
            reused: false,
        }
    }

    fn obj(id: u32, conn: u32, request: u64, chunks: &[(u64, u64)]) -> ObjectTiming {
        ObjectTiming {
            id,
            url: format!("https://a.test/{id}"),
            host: "a.test".into(),
            content_type: "image/png".into(),
            connection: Some(conn),
            discovered_us: request,
            request_us: request,
            first_byte_us: chunks.first().map(|c| c.0),
            end_us: chunks.last().map(|c| c.0),
            status: 200,
            expected_status: 200,
            body_bytes: chunks.iter().map(|c| c.1).sum(),
            header_bytes: 100,
            chunks: chunks
                .iter()
                .map(|&(t_us, bytes)| Chunk { t_us, bytes })
                .collect(),
            error: None,
        }
    }

    fn record(objects: Vec<ObjectTiming>, connections: Vec<ConnectionTiming>) -> LoadRecord {
        LoadRecord {
            page: "p".into(),
            url: "https://a.test/".into(),
            protocol: Protocol::H2,
            tls: true,
            started_unix_ms: 0,
            done_us: Some(1_000_000),
            objects,
            connections,
            errors: Vec::new(),
        }
    }

    #[test]
    fn a_connection_lasts_from_its_opening_to_its_last_byte() {
        // The close (10 s, a browser's keep-alive) does not count; a
        // connection that carried nothing is left out.
        let r = record(
            vec![
                obj(0, 0, 1_000, &[(50_000, 1_000), (90_000, 500)]),
                obj(1, 0, 60_000, &[(120_000, 2_000)]),
            ],
            vec![conn(0, 0, 20_000), conn(1, 5_000, 25_000)],
        );
        assert_eq!(connection_spans(&r), vec![(0.12, 3_500)]);
        // The handshakes: 20 ms and 20 ms.
        assert_eq!(handshake_ms(&r), Some(20.0));
    }

    #[test]
    fn first_objects_are_binned_by_their_connections_handshake_from_the_first_byte() {
        // Connection 0: handshake 20 ms; its first object's bytes at +0,
        // +10, +25, +41 ms from the first byte fall in bins 0, 0, 1, 2.
        // Connection 1: handshake 40 ms; bins 0 and 1. A later object on
        // connection 0 does not count.
        let r = record(
            vec![
                obj(
                    0,
                    0,
                    1_000,
                    &[
                        (30_000, 14_000),
                        (40_000, 1_000),
                        (55_000, 28_000),
                        (71_000, 5),
                    ],
                ),
                obj(1, 0, 2_000, &[(80_000, 99_999)]),
                obj(2, 1, 0, &[(100_000, 3_000), (150_000, 40_000)]),
            ],
            vec![conn(0, 0, 20_000), conn(1, 0, 40_000)],
        );
        assert_eq!(first_object_rounds(&r), vec![15_000, 40_000, 5]);
    }
}
