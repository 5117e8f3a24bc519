//! Seed 001 on the wire: the loader asks for an initial window in its first
//! request, the origin grants it (BPF `mewa_iw` over TCP, the wrapped quinn
//! controller over QUIC), and the link's event log shows the first flight
//! after the request carrying the granted window. Needs root, network
//! namespaces and BPF congestion control; skips elsewhere
//! (`mewa_testkit::skip_unless_bpf_cc`).
#![allow(clippy::unwrap_used)]

use std::time::Duration;

use mewa_corpus::{generate, Corpus, Preset};
use mewa_lab::bed::{set_tcp_rmem, Bed, OriginSettings, CLIENT};
use mewa_lab::bulk;
use mewa_link::core::EventKind;
use mewa_link::eventlog::EventLog;
use mewa_link::runtime::LinkOptions;
use mewa_loader::record::{LoadRecord, Protocol};
use mewa_loader::{IwAsk, LoadOptions};
use mewa_origin::IwPolicy;

/// Round trip of the test link.
const RTT: Duration = Duration::from_millis(100);
/// Packets of at most this size carry no data (ACKs, tiny frames).
const HEADER_ONLY: usize = 100;

/// One page of one 2 MB document: every data packet the origin sends after
/// the request is the response.
fn one_object_corpus() -> Corpus {
    let mut corpus = generate(Preset::Meh15, 1);
    corpus.pages.truncate(1);
    let page = &mut corpus.pages[0];
    let root = page.root().expect("a root").id;
    page.objects.retain(|o| o.id == root);
    page.objects[0].size = 2_000_000;
    corpus
}

/// Loads the page once over `protocol` asking for `ask`, on a fresh 100 ms
/// link whose server→client packets are logged; returns the record and
/// the data packets entering the link from the server, as times.
fn load_once(
    tag: &str,
    protocol: Protocol,
    tls: bool,
    ask: Option<IwAsk>,
    max: u32,
) -> (LoadRecord, Vec<Duration>) {
    let corpus = one_object_corpus();
    let dir = std::env::temp_dir().join(format!("mewa-iw-{}-{tag}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let link = bulk::fixed_link(RTT / 2, 100_000_000, 100_000_000, None);
    let options = LinkOptions {
        log_dir: Some(dir.clone()),
        file_prefix: Some("iw.".into()),
        ..LinkOptions::default()
    };
    let bed = Bed::start(
        &corpus,
        link,
        options,
        &OriginSettings {
            congestion: "cubic".into(),
            ca_dir: dir.join("ca"),
            iw: Some(IwPolicy {
                max_segments: max,
                ..IwPolicy::default()
            }),
        },
    )
    .unwrap();
    // A receive window that does not bound the first flight (see
    // set_tcp_rmem); the window the server may use is tested elsewhere.
    set_tcp_rmem(bed.running().unwrap(), CLIENT, 1 << 20).unwrap();
    let mut opts = bed.options(LoadOptions::browser(protocol, tls));
    opts.iw = ask;
    let record = bed.load(&corpus.pages[0], &opts).unwrap();
    bed.shutdown().unwrap();
    let text = std::fs::read_to_string(dir.join("iw.down.log")).unwrap();
    let log = EventLog::parse(&text).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    let sent = log
        .events
        .iter()
        .filter(|e| e.kind == EventKind::Arrival && e.bytes > HEADER_ONLY)
        .map(|e| e.at)
        .collect();
    assert!(record.ok(), "{:?}", record.errors);
    (record, sent)
}

/// Data packets in the first round trip of the `k`-th flight: flights are
/// separated by more than half a round trip of silence (the handshake's
/// flight, then the response's).
fn flight(sent: &[Duration], k: usize) -> usize {
    let mut starts = Vec::new();
    let mut last: Option<Duration> = None;
    for &t in sent {
        if last.is_none_or(|l| t - l > RTT / 2) {
            starts.push(t);
        }
        last = Some(t);
    }
    let Some(&t0) = starts.get(k) else {
        panic!("no flight {k} in {} packets", sent.len());
    };
    sent.iter()
        .filter(|&&t| t >= t0 && t < t0 + RTT * 9 / 10)
        .count()
}

fn granted(record: &LoadRecord) -> Option<u32> {
    record.connections[0].iw.as_ref()?.granted_segments()
}

#[test]
fn the_first_flight_carries_the_granted_window_over_tcp() {
    if mewa_testkit::skip_unless_bpf_cc() {
        return;
    }
    // Cleartext HTTP/1.1: the response is the server's first data.
    let (rec, sent) = load_once("h1", Protocol::H1, false, Some(IwAsk::Fixed(40)), 200);
    eprintln!("asked 40: {:?}", rec.connections[0].iw);
    assert_eq!(granted(&rec), Some(40));
    assert_eq!(flight(&sent, 0), 40, "first flight after asking for 40");

    // Nothing asked: the kernel's 10.
    let (rec, sent) = load_once("h1-none", Protocol::H1, false, None, 200);
    assert!(rec.connections[0].iw.is_none());
    assert_eq!(flight(&sent, 0), 10, "first flight without asking");

    // HTTP/2 over TLS, asking above the maximum: the handshake has sent its
    // flight before the request, and the response's first flight (with the
    // session tickets sent beside it) is the maximum.
    let (rec, sent) = load_once("h2", Protocol::H2, true, Some(IwAsk::Fixed(500)), 60);
    eprintln!("asked 500 of at most 60: {:?}", rec.connections[0].iw);
    assert_eq!(granted(&rec), Some(60));
    let f = flight(&sent, 1);
    eprintln!("TLS first response flight: {f} segments");
    assert!(
        (57..=60).contains(&f),
        "first response flight {f}, granted 60"
    );
}

#[test]
fn the_first_flight_carries_the_granted_window_over_quic() {
    // The testbed's origin serves TCP too, whose grants need the BPF
    // controls.
    if mewa_testkit::skip_unless_bpf_cc() {
        return;
    }
    let (rec, sent) = load_once("h3", Protocol::H3, true, Some(IwAsk::Fixed(50)), 200);
    eprintln!("asked 50 over QUIC: {:?}", rec.connections[0].iw);
    assert_eq!(granted(&rec), Some(50));
    let f = flight(&sent, 1);
    eprintln!("QUIC first response flight: {f} datagrams");
    // quinn paces a window over the round trip and its datagrams change
    // size once path MTU discovery finishes, so the count is close to the
    // window rather than exact; the default would be 10.
    assert!(
        (44..=56).contains(&f),
        "first response flight {f} datagrams, granted 50"
    );
    let (_, sent) = load_once("h3-none", Protocol::H3, true, None, 200);
    let f = flight(&sent, 1);
    eprintln!("QUIC first response flight without asking: {f} datagrams");
    assert!(
        f <= 14,
        "first response flight {f} datagrams without asking"
    );
}
