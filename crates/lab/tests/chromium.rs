//! A real browser against the corpus bodies: headless Chromium loads
//! generated pages from the origin and must fetch exactly the modelled
//! objects, and a script's children only after the script's computation.
//! Skips (`mewa_testkit::chromium_or_skip`) when Chromium is not installed
//! (`apt-get install chromium`; `scripts/setup` installs it as root).
#![allow(clippy::unwrap_used)]

use std::collections::{BTreeSet, HashMap};
use std::net::SocketAddr;
use std::path::Path;
use std::process::Command;

use mewa_corpus::{generate, generate_with, Corpus, Discovery, Options, Page, Preset};
use mewa_testkit::{chromium_or_skip, origin_config, LoopbackOrigin, TempDir};

/// Request start times (ms, netlog clock) by URL, from a Chromium NetLog.
fn requests(netlog: &Path) -> HashMap<String, f64> {
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(netlog).unwrap()).unwrap();
    let start_job = v["constants"]["logEventTypes"]["URL_REQUEST_START_JOB"]
        .as_u64()
        .unwrap();
    let mut out = HashMap::new();
    for e in v["events"].as_array().unwrap() {
        if e["type"].as_u64() != Some(start_job) {
            continue;
        }
        let (Some(url), Some(t)) = (e["params"]["url"].as_str(), e["time"].as_str()) else {
            continue;
        };
        out.entry(url.to_string())
            .or_insert_with(|| t.parse::<f64>().unwrap());
    }
    out
}

fn load_in_chromium(bin: &Path, addr: SocketAddr, page: &Page, dir: &Path) -> HashMap<String, f64> {
    let profile = dir.join(format!("profile-{}", page.name));
    let netlog = dir.join(format!("{}.netlog.json", page.name));
    let out = Command::new(bin)
        .args(mewa_chromium::lab_headless_flags())
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg(format!("--host-resolver-rules=MAP * {addr}"))
        .arg(format!("--log-net-log={}", netlog.display()))
        .arg("--virtual-time-budget=20000")
        .arg("--dump-dom")
        .arg(&page.main)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    requests(&netlog)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chromium_fetches_exactly_the_modelled_objects() {
    let Some(bin) = chromium_or_skip() else {
        return;
    };
    let mut pages = vec![generate(Preset::Accel7, 1).pages.remove(0)];
    let meh = generate(Preset::Meh15, 1);
    pages.push(meh.pages[1].clone());
    let share = Options {
        share: Some(0.2),
        ..Options::default()
    };
    pages.push(
        generate_with(Preset::Complat, 1, &share)
            .unwrap()
            .pages
            .remove(0),
    );
    let corpus = Corpus {
        name: "chromium".into(),
        provenance: meh.provenance.clone(),
        pages: pages.clone(),
    };
    let tmp = TempDir::new("chromium");
    let dir = tmp.path().to_path_buf();
    let origin = LoopbackOrigin::start(&corpus, origin_config(dir.join("ca")));
    let addr = origin.plain_addr();

    for page in &pages {
        let (bin, page2, dir2) = (bin.clone(), page.clone(), dir.clone());
        let got = tokio::task::spawn_blocking(move || load_in_chromium(&bin, addr, &page2, &dir2))
            .await
            .unwrap();
        let hosts: BTreeSet<&str> = page.hosts().into_iter().collect();
        // The page's own requests (Chromium adds /favicon.ico and, despite
        // the flags, a few update checks to Google hosts).
        let fetched: BTreeSet<&str> = got
            .keys()
            .map(String::as_str)
            .filter(|u| {
                u.strip_prefix("http://")
                    .and_then(|r| r.split('/').next())
                    .is_some_and(|h| hosts.contains(h))
            })
            .filter(|u| !u.ends_with("/favicon.ico"))
            .collect();
        let wanted: Vec<String> = page.objects.iter().map(|o| o.url("http")).collect();
        let wanted: BTreeSet<&str> = wanted.iter().map(String::as_str).collect();
        assert_eq!(fetched, wanted, "page {}", page.name);

        // A script's children wait for its computation.
        for o in page
            .objects
            .iter()
            .filter(|o| o.discovery == Discovery::Script)
        {
            let parent = page.object(o.parent.unwrap()).unwrap();
            let t_parent = got[&parent.url("http")];
            let t_child = got[&o.url("http")];
            assert!(
                t_child - t_parent >= f64::from(parent.compute_ms),
                "{}: {} requested {:.0} ms after its script, which computes {} ms",
                page.name,
                o.path,
                t_child - t_parent,
                parent.compute_ms
            );
        }
    }
    origin.stop().await;
}
