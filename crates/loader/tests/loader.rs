//! The page loader against a real origin on loopback, over every protocol.
#![allow(clippy::unwrap_used)]

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use mewa_corpus::{generate, generate_with, Corpus, Discovery, Kind, Options, Page, Preset};
use mewa_loader::record::{LoadRecord, Protocol};
use mewa_loader::{load, Fixed, LoadOptions, Resolver, RoundRobin, Session};
use mewa_origin::OriginConfig;
use mewa_testkit::{origin_config, LoopbackOrigin, TempDir};

/// The origin on loopback over h1, h2c, TLS and HTTP/3, with its CA
/// folder (removed when the test ends).
struct Running {
    origin: LoopbackOrigin,
    dir: TempDir,
}

async fn start(corpus: &Corpus, tag: &str) -> Running {
    let dir = TempDir::new(&format!("lab-test-{tag}"));
    let any: SocketAddr = "127.0.0.1:0".parse().unwrap();
    let cfg = OriginConfig {
        tls: Some(any),
        h3: Some(any),
        ..origin_config(dir.join("ca"))
    };
    Running {
        origin: LoopbackOrigin::start(corpus, cfg),
        dir,
    }
}

impl Running {
    fn opts(&self, protocol: Protocol, tls: bool) -> LoadOptions {
        LoadOptions {
            resolver: Resolver::all_to(IpAddr::V4(Ipv4Addr::LOCALHOST)),
            port_plain: self.origin.plain_addr().port(),
            port_tls: self.origin.tls.unwrap().port(),
            port_h3: self.origin.h3.unwrap().port(),
            ca_cert: Some(self.origin.ca_cert.clone()),
            timeout: Duration::from_secs(30),
            ..LoadOptions::browser(protocol, tls)
        }
    }

    async fn stop(self) {
        self.origin.stop().await;
    }

    /// Stops the origin, which closes every connection to it, and starts
    /// it again on the same ports with the same CA (a server restart).
    async fn restart(self, corpus: &Corpus) -> Running {
        let (plain, tls, h3) = (
            self.origin.plain_addr(),
            self.origin.tls.unwrap(),
            self.origin.h3.unwrap(),
        );
        self.origin.stop().await;
        // quinn lets the UDP port go once its closed connections drained.
        for _ in 0..100 {
            if std::net::UdpSocket::bind(h3).is_ok() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let cfg = OriginConfig {
            plain: Some(plain),
            tls: Some(tls),
            h3: Some(h3),
            ..origin_config(self.dir.join("ca"))
        };
        Running {
            origin: LoopbackOrigin::start(corpus, cfg),
            dir: self.dir,
        }
    }
}

/// Every object arrived once, complete, on a recorded connection, no
/// object was requested before its parent finished, and every connection
/// was opened, used and closed by this load.
fn check_complete(page: &Page, rec: &LoadRecord) {
    check_objects(page, rec);
    for c in &rec.connections {
        assert!(c.error.is_none(), "{c:?}");
        assert!(c.connected_us.unwrap() >= c.open_us);
        assert!(c.ready_us.unwrap() >= c.connected_us.unwrap());
        assert!(c.close_us.unwrap() >= c.ready_us.unwrap());
    }
}

/// Every object arrived once, complete, on a recorded connection, and no
/// object was requested before its parent finished.
fn check_objects(page: &Page, rec: &LoadRecord) {
    assert!(
        rec.ok(),
        "load failed: {:?} {:?}",
        rec.errors,
        rec.objects.iter().filter(|o| !o.ok()).collect::<Vec<_>>()
    );
    assert_eq!(rec.objects.len(), page.objects.len());
    assert_eq!(rec.body_bytes(), page.total_bytes());
    assert_eq!(rec.objects[0].id, page.root().unwrap().id);
    for t in &rec.objects {
        let o = page.object(t.id).unwrap();
        assert_eq!(t.body_bytes, o.size, "object {}", t.id);
        assert_eq!(t.chunks.iter().map(|c| c.bytes).sum::<u64>(), o.size);
        let c = t.connection.expect("connection recorded") as usize;
        assert!(c < rec.connections.len());
        assert!(t.request_us >= t.discovered_us);
        assert!(t.first_byte_us.unwrap() >= t.request_us);
        assert!(t.end_us.unwrap() >= t.first_byte_us.unwrap());
        if let Some(p) = o.parent {
            let parent = rec.objects.iter().find(|x| x.id == p).unwrap();
            // An HTML document's references go as its bytes arrive (a
            // preload scanner); everything else waits for its parent whole.
            let streamed =
                o.discovery == Discovery::Html && page.object(p).unwrap().kind() == Kind::Html;
            let after = if streamed {
                parent.first_byte_us.unwrap()
            } else {
                parent.end_us.unwrap()
            };
            assert!(
                t.discovered_us >= after,
                "object {} before its parent",
                t.id
            );
            if o.discovery == Discovery::Script {
                let compute = u64::from(page.object(p).unwrap().compute_ms) * 1000;
                assert!(
                    t.discovered_us >= parent.end_us.unwrap() + compute,
                    "script child {} discovered before the script ran",
                    t.id
                );
            }
        }
    }
    assert_eq!(
        rec.done_us,
        rec.objects.iter().filter_map(|o| o.end_us).max()
    );
}

/// A page with HTML, CSS and script discovery and a real computation gap.
fn complat() -> Page {
    let opts = Options {
        share: Some(0.2),
        ..Options::default()
    };
    let c = generate_with(Preset::Complat, 1, &opts).unwrap();
    c.pages.into_iter().next().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_protocol_loads_every_object_in_browser_order() {
    let page = complat();
    assert!(page
        .objects
        .iter()
        .any(|o| o.discovery == Discovery::Script));
    assert!(page
        .objects
        .iter()
        .any(|o| o.kind() == Kind::Script && o.compute_ms > 0));
    let corpus = Corpus {
        name: "t".into(),
        provenance: generate(Preset::Accel7, 1).provenance,
        pages: vec![page.clone()],
    };
    let r = start(&corpus, "protocols").await;
    for (proto, tls) in [
        (Protocol::H1, false),
        (Protocol::H1, true),
        (Protocol::H2, false),
        (Protocol::H2, true),
        (Protocol::H3, true),
    ] {
        let rec = load(&page, &r.opts(proto, tls)).await.unwrap();
        check_complete(&page, &rec);
        assert_eq!(rec.protocol, proto);
        assert_eq!(rec.tls, tls);
        assert!(rec
            .url
            .starts_with(if tls { "https://" } else { "http://" }));
        if proto == Protocol::H1 {
            assert!(rec.connections.len() <= 6 * page.hosts().len());
        } else {
            assert_eq!(
                rec.connections.len(),
                1,
                "{proto} coalesces onto one connection"
            );
        }
        // The record survives JSON.
        assert_eq!(LoadRecord::from_json(&rec.to_json()).unwrap(), rec);
    }
    r.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn h1_opens_parallel_connections_per_host_up_to_the_limit() {
    let corpus = generate(Preset::Accel7, 1);
    let page = corpus.pages[0].clone();
    let r = start(&corpus, "h1").await;
    let mut o = r.opts(Protocol::H1, false);
    o.connections = 2;
    let rec = load(&page, &o).await.unwrap();
    check_complete(&page, &rec);
    for host in page.hosts() {
        let n = rec.connections.iter().filter(|c| c.host == host).count();
        assert!((1..=2).contains(&n), "{host}: {n} connections");
    }
    // 6 images per image host: with 2 connections each host needs both.
    assert!(
        rec.connections
            .iter()
            .filter(|c| c.host.starts_with("img1."))
            .count()
            == 2
    );
    r.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn h2_spreads_objects_over_n_connections_by_the_given_policy() {
    let corpus = generate(Preset::Accel7, 1);
    let page = corpus.pages[0].clone();
    let r = start(&corpus, "h2n").await;

    let mut o = r.opts(Protocol::H2, false);
    o.connections = 3;
    o.preconnect = true;
    o.assign = Arc::new(RoundRobin::default());
    let rec = load(&page, &o).await.unwrap();
    check_complete(&page, &rec);
    assert_eq!(rec.connections.len(), 3);
    for c in 0..3u32 {
        let k = rec
            .objects
            .iter()
            .filter(|t| t.connection == Some(c))
            .count();
        assert!(k >= 14, "round robin put {k} objects on connection {c}");
    }
    // Preconnect: all three were open before the root's request went out.
    assert!(rec
        .connections
        .iter()
        .all(|c| c.ready_us.unwrap() <= rec.objects[0].request_us));

    // A fixed assignment is followed exactly.
    let mut fixed = Fixed::default();
    for ob in &page.objects {
        let c = if ob.kind() == Kind::Image { 1 } else { 0 };
        fixed.map.insert(Fixed::key(ob), c);
    }
    o.assign = Arc::new(fixed);
    let rec = load(&page, &o).await.unwrap();
    check_complete(&page, &rec);
    // Connection ids count in opening order, which preconnect races; what
    // must hold is the partition: images on one connection, the rest on
    // another.
    let conn_of = |img: bool| -> std::collections::BTreeSet<u32> {
        rec.objects
            .iter()
            .filter(|t| t.content_type.starts_with("image/") == img)
            .filter_map(|t| t.connection)
            .collect()
    };
    let (imgs, rest) = (conn_of(true), conn_of(false));
    assert_eq!(imgs.len(), 1, "{imgs:?}");
    assert_eq!(rest.len(), 1, "{rest:?}");
    assert_ne!(imgs, rest);
    r.stop().await;
}

/// Pairs of leaves (images, fonts, media) on one connection where the
/// later was requested before every byte of the earlier had arrived.
fn overlapping_leaves(page: &Page, rec: &LoadRecord) -> usize {
    let leaf = |id: u32| {
        let o = page.object(id).unwrap();
        o.parent.is_some() && !mewa_loader::WarmFirst::reveals(o)
    };
    let mut n = 0;
    for c in 0..rec.connections.len() as u32 {
        let mut on: Vec<_> = rec
            .objects
            .iter()
            .filter(|t| t.connection == Some(c) && leaf(t.id))
            .collect();
        on.sort_by_key(|t| t.request_us);
        for w in on.windows(2) {
            let last_byte = w[0].chunks.last().map_or(0, |k| k.t_us);
            if w[1].request_us < last_byte {
                n += 1;
            }
        }
    }
    n
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn h2_pull_budget_holds_leaves_until_a_connection_drains() {
    let corpus = generate(Preset::Accel7, 1);
    let page = corpus.pages[0].clone();
    let r = start(&corpus, "pull").await;

    let mut o = r.opts(Protocol::H2, false);
    o.connections = 2;
    o.preconnect = true;
    o.assign = Arc::new(mewa_loader::WarmFirst);
    o.coalesce = true;

    // Without a budget every leaf goes out when found: they overlap.
    let rec = load(&page, &o).await.unwrap();
    check_complete(&page, &rec);
    assert!(
        overlapping_leaves(&page, &rec) > 0,
        "push dispatch should request leaves while others are in flight"
    );

    // A budget of one byte: a connection takes the next leaf only when all
    // it was asked for has arrived, yet the page still loads whole and
    // both connections carry leaves.
    o.pull_budget = Some(1);
    let rec = load(&page, &o).await.unwrap();
    check_complete(&page, &rec);
    assert_eq!(overlapping_leaves(&page, &rec), 0);
    let used: std::collections::BTreeSet<u32> = rec
        .objects
        .iter()
        .filter(|t| t.content_type.starts_with("image/"))
        .filter_map(|t| t.connection)
        .collect();
    assert_eq!(used.len(), 2, "images on {used:?}");

    // Following each connection's delivery rate: still whole.
    o.pull_budget = Some(29_200);
    o.pull_follow = Some(Duration::from_millis(5));
    let rec = load(&page, &o).await.unwrap();
    check_complete(&page, &rec);
    r.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failures_are_recorded_not_fatal() {
    let corpus = generate(Preset::Accel7, 1);
    let page = corpus.pages[0].clone();
    let r = start(&corpus, "fail").await;

    // A page the origin does not know: every object 404s or 421s; the root
    // fails, so nothing else is requested.
    let mut other = page.clone();
    other.name = "other".into();
    for ob in &mut other.objects {
        ob.path = format!("/missing{}", ob.path);
    }
    other.main = other.root().unwrap().url("http");
    let rec = load(&other, &r.opts(Protocol::H2, false)).await.unwrap();
    assert!(!rec.ok());
    assert_eq!(rec.objects.len(), 1);
    assert_eq!(rec.objects[0].status, 404);
    assert!(rec.objects[0].error.as_deref().unwrap().contains("404"));

    // Nothing listens: a connection error, recorded.
    let mut o = r.opts(Protocol::H2, false);
    o.port_plain = 1;
    let rec = load(&page, &o).await.unwrap();
    assert!(!rec.ok());
    assert!(rec.connections[0]
        .error
        .as_deref()
        .unwrap()
        .contains("connect"));

    // TLS without the CA is refused up front.
    let mut o = r.opts(Protocol::H2, true);
    o.ca_cert = None;
    assert!(load(&page, &o).await.is_err());
    r.stop().await;
}

/// Checks that `rec` loaded every object of `page` once and whole, and
/// returns when the document ended, µs.
fn whole_once(rec: &LoadRecord, page: &Page) -> u64 {
    assert!(rec.ok(), "{:?}", rec.errors);
    assert_eq!(rec.objects.len(), page.objects.len(), "each object once");
    assert_eq!(rec.body_bytes(), page.total_bytes());
    let root = page.root().unwrap().id;
    rec.objects
        .iter()
        .find(|t| t.id == root)
        .and_then(|t| t.end_us)
        .unwrap()
}

/// One complat page (a fifth of its objects revealed by scripts) whose
/// document the origin answers after 200 ms of think time: on loopback it
/// would otherwise end within a millisecond, a race with the loader's own
/// requests on a busy machine.
fn slow_document_page() -> (Corpus, Page) {
    let mut corpus = generate_with(
        Preset::Complat,
        1,
        &Options {
            share: Some(0.2),
            ..Options::default()
        },
    )
    .unwrap();
    corpus.pages.truncate(1);
    corpus.pages[0].objects[0].think_ms = 200;
    let page = corpus.pages[0].clone();
    (corpus, page)
}

/// With the object URLs a hint carries, every listed object is asked for
/// before the document has arrived (nothing waits for its discovery), and
/// once: discovery later finds it already requested.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prefetch_requests_listed_objects_before_they_are_discovered() {
    let (corpus, page) = slow_document_page();
    let r = start(&corpus, "prefetch").await;
    let mut o = r.opts(Protocol::H2, false);
    let root = page.root().unwrap();
    // Every object but one leaf, and a URL the page does not have.
    let skipped = page
        .objects
        .iter()
        .rfind(|x| x.parent.is_some())
        .unwrap()
        .id;
    o.prefetch = page
        .objects
        .iter()
        .filter(|x| x.parent.is_some() && x.id != skipped)
        .map(|x| x.url("http"))
        .chain(["http://elsewhere.example/not-in-the-page.js".to_string()])
        .collect();
    let rec = load(&page, &o).await.unwrap();
    let root_end = whole_once(&rec, &page);
    for t in &rec.objects {
        if t.id == root.id {
            continue;
        }
        if t.id == skipped {
            assert!(t.discovered_us >= root_end, "unlisted object {}", t.id);
        } else {
            // When the loader asked for it: before the document arrived.
            assert!(
                t.discovered_us < root_end,
                "object {} asked for at {} µs, the document ended at {root_end} µs",
                t.id,
                t.discovered_us
            );
        }
    }
    r.stop().await;
}

/// A URL list that arrives during the load (the edge's TCP answer beside a
/// compact UDP hint) is prefetched as it comes; a list that never comes
/// leaves the page to its own discovery, whole.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_url_list_arriving_during_the_load_is_prefetched() {
    let (corpus, page) = slow_document_page();
    let r = start(&corpus, "prefetch-later").await;
    let root = page.root().unwrap();
    let listed: Vec<String> = page
        .objects
        .iter()
        .filter(|x| x.parent.is_some())
        .map(|x| x.url("http"))
        .collect();
    for arrives in [true, false] {
        let mut o = r.opts(Protocol::H2, false);
        let (tx, rx) = tokio::sync::watch::channel(None);
        o.prefetch_later = Some(rx);
        // Sent (or dropped) 50 ms into the load, while the document is
        // still on its way.
        let list = listed.clone();
        let sender = tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(50)).await;
            if arrives {
                let _ = tx.send(Some(Arc::new(list)));
            }
        });
        let rec = load(&page, &o).await.unwrap();
        sender.await.unwrap();
        let root_end = whole_once(&rec, &page);
        let early = rec
            .objects
            .iter()
            .filter(|t| t.id != root.id && t.discovered_us < root_end)
            .count();
        // What a script reveals can only be asked for before the document
        // has ended when the list named it.
        let by_script = |id: u32| {
            page.object(id)
                .is_some_and(|o| o.discovery == Discovery::Script)
        };
        let early_scripted = rec
            .objects
            .iter()
            .filter(|t| by_script(t.id) && t.discovered_us < root_end)
            .count();
        let scripted = page.objects.iter().filter(|o| by_script(o.id)).count();
        assert!(scripted > 0);
        if arrives {
            assert_eq!(
                early,
                page.objects.len() - 1,
                "all asked before the document ended"
            );
        } else {
            assert_eq!(
                early_scripted, 0,
                "script-revealed objects wait for their script"
            );
        }
    }
    r.stop().await;
}

/// Like a browser's preload scanner, the loader asks for what a big HTML
/// document references while the document still streams in; with
/// streaming off it waits for the whole document.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn html_references_are_requested_as_the_document_streams_in() {
    let mut corpus = generate(Preset::Accel7, 1);
    let page = &mut corpus.pages[0];
    let root = page.root().unwrap().id;
    // A 30 MB document: its references sit in its first few kilobytes.
    // Over loopback 3 MB took 9 ms, short enough that on a loaded CI
    // machine the load loop was scheduled only after the last byte; 30 MB
    // leaves it tens of milliseconds to see the first chunk.
    page.objects.iter_mut().find(|o| o.id == root).unwrap().size = 30_000_000;
    let page = page.clone();
    let r = start(&corpus, "streaming").await;
    let first_child = |rec: &LoadRecord| {
        let doc_end = rec
            .objects
            .iter()
            .find(|t| t.id == root)
            .unwrap()
            .end_us
            .unwrap();
        let first = rec
            .objects
            .iter()
            .filter(|t| t.id != root)
            .map(|t| t.discovered_us)
            .min()
            .unwrap();
        (first, doc_end)
    };
    let rec = load(&page, &r.opts(Protocol::H2, true)).await.unwrap();
    check_complete(&page, &rec);
    let (first, doc_end) = first_child(&rec);
    assert!(
        first < doc_end,
        "streaming: first child at {first} µs, document ended {doc_end} µs"
    );
    let mut o = r.opts(Protocol::H2, true);
    o.streaming = false;
    let rec = load(&page, &o).await.unwrap();
    check_complete(&page, &rec);
    let (first, doc_end) = first_child(&rec);
    assert!(
        first >= doc_end,
        "whole: first child at {first} µs, document ended {doc_end} µs"
    );
    r.stop().await;
}

/// The (host, peer) of each connection of a record, sorted.
fn peers(rec: &LoadRecord) -> Vec<(String, String)> {
    let mut p: Vec<_> = rec
        .connections
        .iter()
        .map(|c| (c.host.clone(), c.addr.clone()))
        .collect();
    p.sort();
    p
}

/// A session's second load of a page opens nothing: it reuses every
/// connection of the first (HTTP/1.1's idle ones per host, HTTP/2's two
/// slots over TLS, HTTP/3's connection), and still loads every object.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_reuses_its_connections_on_the_next_load() {
    let corpus = generate(Preset::Accel7, 1);
    let page = corpus.pages[0].clone();
    let r = start(&corpus, "session").await;
    for (proto, tls, n) in [
        (Protocol::H1, false, 1),
        (Protocol::H2, true, 2),
        (Protocol::H3, true, 1),
    ] {
        let mut o = r.opts(proto, tls);
        o.connections = n;
        // Every slot opens in the first load, so the second has them all.
        o.preconnect = true;
        let session = Session::new(o).unwrap();
        let first = session.load(&page).await.unwrap();
        check_objects(&page, &first);
        // One connection per host and slot; HTTP/2 and 3 coalesce hosts.
        let expected = if proto == Protocol::H1 {
            page.hosts().len()
        } else {
            n
        };
        assert_eq!(first.connections.len(), expected, "{proto}");
        for c in &first.connections {
            assert!(!c.reused, "{proto}: {c:?}");
            assert!(c.ready_us.is_some() && c.error.is_none(), "{proto}: {c:?}");
            assert_eq!(c.close_us, None, "{proto}: the session keeps it");
        }
        assert!(!first.to_json().contains("reused"));

        // Think time, as between two page views.
        tokio::time::sleep(Duration::from_millis(100)).await;
        let second = session.load(&page).await.unwrap();
        check_objects(&page, &second);
        assert_eq!(
            second.connections.len(),
            expected,
            "{proto}: the second load opened connections"
        );
        for c in &second.connections {
            assert!(c.reused, "{proto}: {c:?}");
            assert_eq!((c.open_us, c.connected_us, c.ready_us), (0, None, None));
            assert_eq!(c.close_us, None);
        }
        assert_eq!(peers(&first), peers(&second));
        // Times count from the second load's own start, not the session's
        // (which began more than the think time earlier).
        assert!(second.objects[0].discovered_us < 100_000);
        assert!(second.to_json().contains("\"reused\": true"));
        assert_eq!(LoadRecord::from_json(&second.to_json()).unwrap(), second);
        session.close();
    }
    r.stop().await;
}

/// HTTP/1.1 in a session: a host never has more than `connections`
/// connections over the session's loads, and a host whose first load
/// needed them all opens none in the second.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_keeps_at_most_n_h1_connections_per_host() {
    let mut corpus = generate(Preset::Accel7, 1);
    // The origin answers each object after 30 ms, so that a host's objects
    // overlap and need both connections even on a busy machine.
    for o in &mut corpus.pages[0].objects {
        o.think_ms = 30;
    }
    let page = corpus.pages[0].clone();
    let r = start(&corpus, "session-h1").await;
    let mut o = r.opts(Protocol::H1, false);
    o.connections = 2;
    let session = Session::new(o).unwrap();
    let first = session.load(&page).await.unwrap();
    check_objects(&page, &first);
    let second = session.load(&page).await.unwrap();
    check_objects(&page, &second);
    let opened = |rec: &LoadRecord, host: &str| {
        rec.connections
            .iter()
            .filter(|c| c.host == host && !c.reused)
            .count()
    };
    let mut full = 0;
    for host in page.hosts() {
        let (a, b) = (opened(&first, host), opened(&second, host));
        assert!(a + b <= 2, "{host}: {a} + {b} connections opened");
        if a == 2 {
            full += 1;
            assert_eq!(b, 0, "{host}");
        }
        assert!(
            second
                .connections
                .iter()
                .any(|c| c.host == host && c.reused),
            "{host}: nothing reused"
        );
    }
    // 6 images per image host: the first load needed both there.
    assert!(full >= 1, "no host used both connections");
    session.close();
    r.stop().await;
}

/// After the origin restarted between two loads (every pooled connection
/// closed under the session), the second load completes on new
/// connections, over every protocol; the closes arrived during the think
/// time, so the load does not even try the dead connections.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_replaces_connections_the_server_closed() {
    let corpus = generate(Preset::Accel7, 1);
    let page = corpus.pages[0].clone();
    let mut r = start(&corpus, "session-restart").await;
    let kinds = [
        (Protocol::H1, false),
        (Protocol::H2, true),
        (Protocol::H3, true),
    ];
    let sessions: Vec<Session> = kinds
        .iter()
        .map(|&(proto, tls)| Session::new(r.opts(proto, tls)).unwrap())
        .collect();
    for s in &sessions {
        check_objects(&page, &s.load(&page).await.unwrap());
    }
    r = r.restart(&corpus).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    for (s, (proto, _)) in sessions.into_iter().zip(kinds) {
        let rec = s.load(&page).await.unwrap();
        check_objects(&page, &rec);
        assert!(!rec.connections.is_empty());
        for c in &rec.connections {
            assert!(!c.reused, "{proto}: a closed connection was tried: {c:?}");
            assert!(c.ready_us.is_some(), "{proto}: {c:?}");
        }
        s.close();
    }
    r.stop().await;
}

/// A TCP relay to `to` that can cut the connections it carries without
/// telling the client: after [`Relay::sever`], a connection accepted
/// before stays open until the client next sends, then both sides close
/// and the bytes go nowhere — a server (or a NAT dropping an idle flow)
/// that lost a connection the client still thinks alive.
struct Relay {
    port: u16,
    epoch: Arc<std::sync::atomic::AtomicU64>,
    task: tokio::task::JoinHandle<()>,
}

impl Relay {
    async fn start(to: SocketAddr) -> Relay {
        use std::sync::atomic::Ordering::SeqCst;
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let epoch = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let e = Arc::clone(&epoch);
        let task = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let born = e.load(SeqCst);
                let e = Arc::clone(&e);
                tokio::spawn(async move {
                    let Ok(server) = tokio::net::TcpStream::connect(to).await else {
                        return;
                    };
                    let (mut cr, mut cw) = client.into_split();
                    let (mut sr, mut sw) = server.into_split();
                    let down = tokio::spawn(async move {
                        let _ = tokio::io::copy(&mut sr, &mut cw).await;
                    });
                    let mut buf = vec![0u8; 64 * 1024];
                    while let Ok(n @ 1..) = cr.read(&mut buf).await {
                        if e.load(SeqCst) != born || sw.write_all(&buf[..n]).await.is_err() {
                            break;
                        }
                    }
                    down.abort();
                });
            }
        });
        Relay { port, epoch, task }
    }

    /// Cuts every connection open now, on its client's next bytes.
    fn sever(&self) {
        self.epoch.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A request lost on a pooled connection that looked alive (the far end
/// dropped it during the think time) is sent again on a new connection:
/// the object does not fail, and the record shows the pooled connection
/// tried and let go.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_lost_on_a_pooled_connection_goes_again_on_a_new_one() {
    let corpus = generate(Preset::Accel7, 1);
    let page = corpus.pages[0].clone();
    let r = start(&corpus, "session-sever").await;
    for (proto, tls) in [(Protocol::H1, false), (Protocol::H2, true)] {
        let mut o = r.opts(proto, tls);
        let relay = Relay::start(SocketAddr::from((
            Ipv4Addr::LOCALHOST,
            if tls { o.port_tls } else { o.port_plain },
        )))
        .await;
        o.port_plain = relay.port;
        o.port_tls = relay.port;
        o.connections = 1;
        let session = Session::new(o).unwrap();
        let first = session.load(&page).await.unwrap();
        check_objects(&page, &first);
        // Whatever the client still had to say on the first load's
        // connections goes through before the cut.
        tokio::time::sleep(Duration::from_millis(50)).await;
        relay.sever();
        let second = session.load(&page).await.unwrap();
        check_objects(&page, &second);
        let tried: Vec<_> = second.connections.iter().filter(|c| c.reused).collect();
        assert!(!tried.is_empty(), "{proto}: no pooled connection tried");
        assert!(tried.iter().all(|c| c.close_us.is_some()), "{tried:?}");
        for t in &second.objects {
            let c = &second.connections[t.connection.unwrap() as usize];
            assert!(!c.reused, "{proto}: object {} on a cut connection", t.id);
        }
        // Each host's pooled connection was replaced once, no more.
        assert_eq!(
            second.connections.len() - tried.len(),
            first.connections.len(),
            "{proto}"
        );
        session.close();
    }
    r.stop().await;
}
