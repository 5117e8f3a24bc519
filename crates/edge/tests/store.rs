//! The store survives `kill -9` in the middle of a bulk import: after the
//! kill, the file opens, passes SQLite's integrity checks, every import the
//! child reported as committed is there whole, and no page is half-stored.
//! Also: any page round-trips through `put_page`/`page` (proptest).
#![allow(clippy::unwrap_used)]

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use mewa_edge::store::Store;
use mewa_hint::page::{Discovery, ObjectMeta, PageMeta};
use mewa_testkit::TempDir;
use proptest::prelude::*;

const OBJECTS: usize = 50;
const BATCH: usize = 200;
const CHILD_ENV: &str = "MEWA_STORE_CRASH_CHILD";

/// Kills the child on drop, so a failing parent never leaves an importer
/// running forever.
struct KillOnDrop(Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn page(batch: usize, i: usize) -> PageMeta {
    let url = format!("http://p{batch}-{i}.example/");
    PageMeta {
        url: url.clone(),
        objects: (0..OBJECTS)
            .map(|k| ObjectMeta {
                url: format!("{url}{k}.jpg"),
                host: format!("p{batch}-{i}.example"),
                size: Some(1000 + k as u64),
                content_type: Some("image/jpeg".into()),
                last_modified: None,
                etag: Some(format!("\"{batch}-{i}-{k}\"")),
                discovery: if k == 0 {
                    Discovery::Document
                } else {
                    Discovery::Parser
                },
                parent: (k > 0).then_some(0),
                recorded: Default::default(),
            })
            .collect(),
        computation_ms: None,
    }
}

/// The batch number in a child's output line. libtest prints
/// `test crash_child ... ` without a newline before the test body runs, so
/// the first report shares its line with that; hence a search, not a prefix.
fn committed_in(line: &str) -> Option<usize> {
    line.rsplit_once("committed ")?.1.trim().parse().ok()
}

/// The child side: when `MEWA_STORE_CRASH_CHILD` names a store file, imports
/// batches of [`BATCH`] pages × [`OBJECTS`] objects into it forever, one
/// transaction each, printing `committed N` after each commit. Without the
/// variable (a normal test run) it returns at once and passes trivially.
/// If the parent goes away, the next print fails and the child ends.
#[test]
fn crash_child() {
    let Some(path) = std::env::var_os(CHILD_ENV) else {
        return;
    };
    let mut s = Store::open(Path::new(&path)).unwrap();
    for batch in 0.. {
        let pages: Vec<PageMeta> = (0..BATCH).map(|i| page(batch, i)).collect();
        s.put_pages(&pages, "crash-test", 1).unwrap();
        println!("committed {batch}");
    }
}

#[test]
fn kill_9_during_bulk_import_loses_nothing_committed() {
    let dir = TempDir::new("store-it-crash");
    let exe = std::env::current_exe().unwrap();
    // A batch takes some tens of milliseconds here: these delays land the
    // kill early, midway and late in the transaction after the 2nd commit
    // (or, on a slower machine, in a later one; the checks hold either way).
    for (round, delay_ms) in [0u64, 13, 31].into_iter().enumerate() {
        let file = dir.join(format!("round{round}.sqlite"));
        let mut child = KillOnDrop(
            Command::new(&exe)
                .args(["--exact", "crash_child", "--nocapture", "--test-threads=1"])
                .env(CHILD_ENV, &file)
                .stdout(Stdio::piped())
                .stderr(Stdio::null())
                .spawn()
                .unwrap(),
        );
        let mut lines = BufReader::new(child.0.stdout.take().unwrap()).lines();
        let mut committed = Vec::new();
        while committed.len() < 2 {
            let line = lines
                .next()
                .expect("child ended before committing twice")
                .unwrap();
            committed.extend(committed_in(&line));
        }
        assert_eq!(committed, [0, 1], "round {round}: reports in order");
        std::thread::sleep(Duration::from_millis(delay_ms));
        child.0.kill().unwrap(); // SIGKILL on Unix: no destructor, no checkpoint
        let _ = child.0.wait();
        // Anything the child printed before dying was committed, too.
        committed.extend(lines.map_while(Result::ok).filter_map(|l| committed_in(&l)));
        let last = *committed.last().unwrap();

        // The kill left a WAL behind, so reopening goes through recovery.
        let wal = dir.join(format!("round{round}.sqlite-wal"));
        assert!(
            std::fs::metadata(&wal).is_ok_and(|m| m.len() > 0),
            "round {round}: no WAL left by the killed child"
        );
        let s = Store::open(&file).unwrap();
        s.integrity_check().unwrap();
        let stored: HashMap<String, u64> = s
            .pages()
            .unwrap()
            .into_iter()
            .map(|p| (p.url, p.objects))
            .collect();
        // Every page of every reported batch is there, whole.
        for b in 0..=last {
            for i in 0..BATCH {
                let url = page(b, i).url;
                assert_eq!(
                    stored.get(&url),
                    Some(&(OBJECTS as u64)),
                    "round {round}: committed batch {b} page {i}"
                );
            }
        }
        // Nothing half-stored: each page has all its objects, and the pages
        // form whole batches 0..m, where m is the reported batches plus at
        // most one that committed but was killed before it could say so.
        assert!(
            stored.values().all(|&n| n == OBJECTS as u64),
            "round {round}"
        );
        assert_eq!(stored.len() % BATCH, 0, "round {round}: a partial batch");
        let batches = stored.len() / BATCH;
        assert!(
            batches == last + 1 || batches == last + 2,
            "round {round}: {batches} batches stored, {} reported",
            last + 1
        );
        let full = s.page(&page(batches - 1, BATCH - 1).url).unwrap().unwrap();
        assert_eq!(full.meta, page(batches - 1, BATCH - 1));
        assert_eq!(s.stats().unwrap().objects, (stored.len() * OBJECTS) as u64);
        eprintln!(
            "round {round}: killed {delay_ms} ms after the 2nd commit; {} batch(es) reported, {batches} stored whole",
            last + 1
        );
    }
}

fn arb_object(n: usize) -> impl Strategy<Value = ObjectMeta> {
    let text = "[ -~]{0,24}";
    (
        "[a-z]{1,8}",
        proptest::option::of(0u64..=i64::MAX as u64),
        proptest::option::of(text),
        proptest::option::of(text),
        proptest::option::of("\\PC{0,12}"),
        0u8..4,
        proptest::option::of(0..n),
    )
        .prop_map(
            |(host, size, content_type, last_modified, etag, d, parent)| ObjectMeta {
                url: format!("https://{host}.example/{}", size.unwrap_or(0)),
                host: format!("{host}.example"),
                size,
                content_type,
                last_modified,
                etag,
                discovery: Discovery::from_code(d),
                parent,
                recorded: Default::default(),
            },
        )
}

fn arb_page() -> impl Strategy<Value = PageMeta> {
    (1usize..12)
        .prop_flat_map(|n| {
            (
                "[a-z]{1,10}",
                "[a-z0-9/._-]{0,20}",
                proptest::collection::vec(arb_object(n), n),
                proptest::option::of(any::<u32>()),
            )
        })
        .prop_map(|(host, path, objects, computation_ms)| PageMeta {
            url: format!("https://www.{host}.example/{path}"),
            objects,
            computation_ms,
        })
}

proptest! {
    // No failure file: an integration test has no lib.rs next to it for
    // proptest to place one by; a failure prints its minimal case instead.
    #![proptest_config(ProptestConfig {
        cases: 64,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    /// Any page (sizes up to `i64::MAX`, every optional field either way,
    /// any parent inside the page, any discovery) reads back equal, also by
    /// its URL hash.
    #[test]
    fn any_page_round_trips(p in arb_page(), updated in 0u64..=i64::MAX as u64) {
        let d = TempDir::new("store-it-prop");
        let mut s = Store::open(&d.join("s.db")).unwrap();
        s.put_page(&p, "proptest", updated).unwrap();
        let got = s.page(&p.url).unwrap().unwrap();
        prop_assert_eq!(&got.meta, &p);
        prop_assert_eq!(got.updated_unix_s, updated);
        let host = mewa_hint::page::host_of(&p.url).unwrap();
        let by_hash = s
            .page_by_hash(&host, mewa_hint::wire::url_hash(&p.url))
            .unwrap()
            .unwrap();
        prop_assert_eq!(by_hash.meta, p);
    }
}
