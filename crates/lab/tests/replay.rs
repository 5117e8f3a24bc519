//! Every recording in `../shared/data/pages` replays through the emulated
//! link: with the built-in loader and with headless Chromium, every
//! recorded object arrives with its recorded status. Needs root (network
//! namespaces) and the shared data, and skips without them; the Chromium
//! half needs Chromium and is left out (`mewa_testkit::skip_part`) without
//! it.
#![cfg(target_os = "linux")]
#![allow(clippy::unwrap_used)]

use mewa_corpus::{from_import_report, Corpus};
use mewa_hint::import::{import_dir, ImportReport};
use mewa_lab::bed::{link_of, Bed, OriginSettings};
use mewa_lab::replay;
use mewa_link::core::RateSpec;
use mewa_link::runtime::LinkOptions;
use mewa_testkit::{chromium_or_skip, find_chromium, TempDir};

/// Every shared recording as one corpus, as `mewa corpus import` makes it,
/// or `None` after skipping the test when `../shared/data` is absent.
fn shared_recordings() -> Option<Corpus> {
    let dir = mewa_testkit::shared_data_or_skip("pages")?;
    let mut merged = ImportReport::default();
    let mut sources = Vec::new();
    for (file, rep) in import_dir(&dir) {
        let rep = rep.unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        sources.push(file.display().to_string());
        merged.pages.extend(rep.pages);
    }
    let imported = from_import_report(&merged, "shared", sources);
    assert_eq!(
        imported.corpus.pages.len(),
        merged.pages.len(),
        "a recording did not import: {:?}",
        imported.notes
    );
    Some(imported.corpus)
}

fn bed(corpus: &Corpus, tmp: &TempDir) -> Bed {
    let mbit = |m: u64| RateSpec::Constant { bps: m * 1_000_000 };
    Bed::start(
        corpus,
        link_of(40, mbit(50), mbit(20)),
        LinkOptions::default(),
        &OriginSettings {
            congestion: "cubic".into(),
            ca_dir: tmp.path().join("ca"),
            iw: None,
        },
    )
    .unwrap()
}

#[test]
fn every_recording_replays_with_the_loader_and_chromium() {
    if mewa_testkit::skip_unless_root() {
        return;
    }
    let Some(corpus) = shared_recordings() else {
        return;
    };
    let tmp = TempDir::new("replay");
    let bed = bed(&corpus, &tmp);
    assert!(
        bed.per_host(),
        "an imported corpus gets an address per host"
    );
    // Hosts the recording saw on one connection share an address; others not.
    for g in corpus.connection_groups() {
        let a = bed.addr_of(&g[0]);
        assert!(g.iter().all(|h| bed.addr_of(h) == a), "{g:?}");
    }
    let browser = find_chromium();
    if browser.is_none() {
        mewa_testkit::skip_part("the Chromium half", "Chromium is not installed");
    }
    let mut failures = Vec::new();
    for page in &corpus.pages {
        let got = replay::with_loader(&bed, page).unwrap();
        if !got.missing.is_empty() {
            failures.push(format!("loader, {}: {:?}", page.name, got.missing));
        }
        if let Some(bin) = &browser {
            let got = replay::with_chromium(
                &bed,
                page,
                &replay::Browser::plain(bin),
                &tmp.path().join("ca"),
                tmp.path(),
                None,
                None,
            )
            .unwrap();
            eprintln!(
                "{}: Chromium {:?} s, {} unrecorded requests {:?}",
                page.name,
                got.plt_s,
                got.unrecorded.len(),
                got.unrecorded
            );
            if !got.missing.is_empty() {
                failures.push(format!("Chromium, {}: {:?}", page.name, got.missing));
            }
        }
    }
    // A recording keeps its schemes: loading it in the clear is refused
    // with the reason, before Chromium starts.
    if let Some(bin) = &browser {
        let clear = replay::Browser {
            clear_text: true,
            ..replay::Browser::plain(bin)
        };
        let ca = tmp.path().join("ca");
        let e = replay::with_chromium(&bed, &corpus.pages[0], &clear, &ca, tmp.path(), None, None)
            .unwrap_err();
        assert!(
            e.to_string().contains("cannot be loaded in the clear"),
            "{e}"
        );
    }
    bed.shutdown().unwrap();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn a_generated_page_loads_in_the_clear_in_chromium() {
    if mewa_testkit::skip_unless_root() {
        return;
    }
    let Some(bin) = chromium_or_skip() else {
        return;
    };
    let mut corpus = mewa_corpus::generate(mewa_corpus::Preset::Meh15, 1);
    corpus.pages.truncate(1);
    let page = &corpus.pages[0];
    let tmp = TempDir::new("replay-clear");
    let bed = bed(&corpus, &tmp);
    let netlog = tmp.path().join("clear.netlog.json");
    let clear = replay::Browser {
        clear_text: true,
        ..replay::Browser::plain(&bin)
    };
    let got = replay::with_chromium(
        &bed,
        page,
        &clear,
        &tmp.path().join("ca"),
        tmp.path(),
        None,
        Some(&netlog),
    )
    .unwrap();
    bed.shutdown().unwrap();
    assert!(got.missing.is_empty(), "{:?}", got.missing);
    assert!(got.plt_s.is_some());
    // Every object of the page was asked for over http://, none over TLS.
    let log = std::fs::read_to_string(&netlog).unwrap();
    for o in &page.objects {
        let (clear, tls) = (o.url("http"), o.url("https"));
        assert!(
            log.contains(&format!("\"{clear}\"")),
            "{clear} never requested"
        );
        assert!(!log.contains(&format!("\"{tls}\"")), "{tls} requested");
    }
}
