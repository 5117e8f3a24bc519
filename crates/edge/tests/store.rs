//! The store survives `kill -9` in the middle of a bulk import: after the
//! kill, the file opens, passes SQLite's integrity checks, every import the
//! child reported as committed is there whole, and no page is half-stored.
#![allow(clippy::unwrap_used)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use mewa_edge::store::Store;
use mewa_hint::page::{Discovery, ObjectMeta, PageMeta};

const OBJECTS: usize = 50;
const BATCH: usize = 200;
const CHILD_ENV: &str = "MEWA_STORE_CRASH_CHILD";

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
            })
            .collect(),
        computation_ms: None,
    }
}

/// The child side: when `MEWA_STORE_CRASH_CHILD` names a store file, imports
/// batches into it forever, one transaction each, printing `committed N`
/// after each commit. Without the variable (a normal test run) it returns at
/// once and passes trivially.
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

fn temp_dir() -> PathBuf {
    let d = std::env::temp_dir().join(format!("mewa-store-crash-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn kill_9_during_bulk_import_loses_nothing_committed() {
    let dir = temp_dir();
    let exe = std::env::current_exe().unwrap();
    for (round, delay_ms) in [0u64, 7, 23].into_iter().enumerate() {
        let file = dir.join(format!("round{round}.sqlite"));
        let mut child = Command::new(&exe)
            .args(["--exact", "crash_child", "--nocapture", "--test-threads=1"])
            .env(CHILD_ENV, &file)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let mut committed = Vec::new();
        while committed.len() < 2 {
            let line = lines
                .next()
                .expect("child ended before committing twice")
                .unwrap();
            if let Some(n) = line.strip_prefix("committed ") {
                committed.push(n.trim().parse::<usize>().unwrap());
            }
        }
        // Kill at a different moment each round: inside a later transaction.
        std::thread::sleep(Duration::from_millis(delay_ms));
        child.kill().unwrap(); // SIGKILL on Unix
        let _ = child.wait();
        // Anything the child printed before dying was committed, too.
        for line in lines.map_while(Result::ok) {
            if let Some(n) = line.strip_prefix("committed ") {
                committed.push(n.trim().parse::<usize>().unwrap());
            }
        }

        let s = Store::open(&file).unwrap();
        s.integrity_check().unwrap();
        for &b in &committed {
            for i in [0, BATCH / 2, BATCH - 1] {
                let p = s
                    .page(&page(b, i).url)
                    .unwrap()
                    .unwrap_or_else(|| panic!("round {round}: committed batch {b} lost page {i}"));
                assert_eq!(p.meta.objects.len(), OBJECTS);
            }
        }
        // No page is half-stored, and batches are whole: the page count is
        // a multiple of the batch size.
        let pages = s.pages().unwrap();
        assert!(pages.iter().all(|p| p.objects == OBJECTS as u64));
        assert_eq!(pages.len() % BATCH, 0, "round {round}: a partial batch");
        assert!(pages.len() >= committed.len() * BATCH);
        eprintln!(
            "round {round}: killed after {} committed batch(es); {} page(s) intact",
            committed.len(),
            pages.len()
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
