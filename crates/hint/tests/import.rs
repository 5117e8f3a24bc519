//! End-to-end import: the project's own fixtures (always), and the shared real
//! recordings under `../shared/data/pages` (when that folder exists).

use std::path::{Path, PathBuf};

use mewa_hint::import::{import_dir, import_har, import_path, ImportError, ImportReport};
use mewa_hint::{Discovery, PageMeta};
use mewa_testkit::{synthetic_har, HarSpec};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

fn report_for<'a>(
    all: &'a [(PathBuf, Result<ImportReport, ImportError>)],
    name: &str,
) -> &'a ImportReport {
    let (path, result) = all
        .iter()
        .find(|(p, _)| p.ends_with(name))
        .unwrap_or_else(|| panic!("{name} not imported"));
    match result {
        Ok(r) => r,
        Err(e) => panic!("{}: {e}", path.display()),
    }
}

fn sizes(page: &PageMeta) -> Vec<Option<u64>> {
    page.objects.iter().map(|o| o.size).collect()
}

#[test]
fn fixtures_import_dir() {
    let all = import_dir(&fixtures());
    let names: Vec<String> = all
        .iter()
        .map(|(p, _)| p.strip_prefix(fixtures()).unwrap().display().to_string())
        .collect();
    assert_eq!(
        names,
        [
            "broken/truncated.har",
            "chrome-two-pages.har",
            "devtools-two-tabs.json",
            "lighthouse-mini",
            "wpt-first-view.har"
        ]
    );

    // A truncated file is an error naming the file and the position.
    let (_, broken) = &all[0];
    match broken {
        Err(ImportError::Json { input, line, .. }) => {
            assert!(input.ends_with("truncated.har"));
            assert_eq!(*line, 1);
        }
        other => panic!("expected a JSON error, got {other:?}"),
    }

    // Chrome HAR, two pages.
    let r = report_for(&all, "chrome-two-pages.har");
    assert_eq!(r.pages.len(), 2);
    let p = &r.pages[0];
    assert_eq!(p.url, "https://news.example/");
    assert_eq!(
        sizes(p),
        [
            Some(180),
            Some(24_588),
            Some(11_700),
            Some(48_000),
            Some(90_000),
            None
        ]
    );
    let how: Vec<(Discovery, Option<usize>)> =
        p.objects.iter().map(|o| (o.discovery, o.parent)).collect();
    assert_eq!(
        how,
        [
            (Discovery::Document, None),
            (Discovery::Other, Some(0)),
            (Discovery::Parser, Some(1)),
            (Discovery::Parser, Some(1)),
            (Discovery::Script, Some(3)),
            (Discovery::Script, Some(3)),
        ]
    );
    assert_eq!(p.objects[1].etag.as_deref(), Some("W/\"today-1\""));
    assert_eq!(
        p.objects[2].last_modified.as_deref(),
        Some("Tue, 30 Apr 2024 08:00:00 GMT")
    );
    assert_eq!(p.total_bytes(), 174_468);
    assert_eq!(r.skipped, 1);
    assert_eq!(r.missing_sizes.len(), 1);
    assert_eq!(r.missing_sizes[0].object_url, "https://api.example/feed");
    assert_eq!(r.missing_sizes[0].entry_index, 6);
    let second = &r.pages[1];
    assert_eq!(second.url, "https://news.example/today");
    assert_eq!(sizes(second), [Some(0), Some(0)]);

    // WebPageTest HAR: _bytesIn minus headers.
    let r = report_for(&all, "wpt-first-view.har");
    assert_eq!(r.pages.len(), 1);
    assert_eq!(r.pages[0].url, "https://wiki.example/Main");
    assert_eq!(sizes(&r.pages[0]), [Some(20_000), Some(5_000), Some(3_000)]);
    assert_eq!(r.pages[0].objects[2].parent, Some(1));
    assert!(r.notes.is_empty(), "{:?}", r.notes);

    // DevTools log with two tabs.
    let r = report_for(&all, "devtools-two-tabs.json");
    assert_eq!(r.pages.len(), 2);
    let shop = &r.pages[0];
    assert_eq!(shop.url, "http://shop.example/");
    assert_eq!(
        sizes(shop),
        [
            Some(0),
            Some(7_000),
            Some(25_000 - 86),
            Some(4_000),
            None,
            None
        ]
    );
    let how: Vec<(Discovery, Option<usize>)> = shop
        .objects
        .iter()
        .map(|o| (o.discovery, o.parent))
        .collect();
    assert_eq!(
        how,
        [
            (Discovery::Document, None),
            (Discovery::Other, Some(0)),
            (Discovery::Parser, Some(1)),
            (Discovery::Script, Some(2)),
            (Discovery::Script, Some(2)),
            (Discovery::Script, Some(2)),
        ]
    );
    assert_eq!(
        shop.objects[3].last_modified.as_deref(),
        Some("Mon, 29 Apr 2024 12:00:00 GMT")
    );
    let blog = &r.pages[1];
    assert_eq!(blog.url, "https://blog.example/");
    assert_eq!(sizes(blog), [Some(3_000), Some(0)]);
    assert_eq!(blog.objects[0].etag.as_deref(), Some("\"b1\""));
    assert_eq!(r.skipped, 1);
    let missing: Vec<&str> = r.missing_sizes.iter().map(|m| m.reason.as_str()).collect();
    assert_eq!(
        missing,
        [
            "loadingFailed: net::ERR_BLOCKED_BY_CLIENT",
            "no Network.loadingFinished (unfinished when the log ended)"
        ]
    );

    // Lighthouse layout: log + trace.
    let r = report_for(&all, "lighthouse-mini");
    assert_eq!(r.pages.len(), 1);
    assert_eq!(sizes(&r.pages[0]), [Some(30_000), Some(60_000)]);
    assert_eq!(r.pages[0].computation_ms, Some(200));
}

#[test]
fn import_path_rejects_a_lone_trace() {
    let dir = fixtures().join("lighthouse-mini");
    let err = import_path(&dir.join("trace.json.gz")).unwrap_err();
    assert!(matches!(err, ImportError::UnknownFormat { .. }), "{err:?}");
    assert!(import_path(&dir.join("devtoolslog.json.gz")).is_ok());
    let err = import_path(&fixtures().join("broken")).unwrap_err();
    assert!(matches!(err, ImportError::UnknownFormat { .. }), "{err:?}");
}

/// A synthetic ad-heavy page (mewa-testkit's `synthetic_har`, 600 objects
/// on 100 hosts) imports whole and as a tree: one object per entry, every
/// host kept, the document the root, every other object's parent an earlier
/// object of the page, found the way the recording says (parser, script, or
/// the redirect hop before it).
#[test]
fn synthetic_ad_heavy_page_imports_as_a_tree() {
    let spec = HarSpec {
        hosts: 100,
        objects: 600,
        seed: 7,
        random_tracking: 60,
    };
    let dir = mewa_testkit::TempDir::new("synthetic-har");
    let file = dir.join("synthetic.har");
    std::fs::write(&file, synthetic_har(&spec)).unwrap();
    // Through the format sniffing of import_path, and the same as import_har.
    let r = import_path(&file).unwrap();
    let direct = import_har(synthetic_har(&spec).as_bytes(), &file.display().to_string());
    assert_eq!(direct.as_ref(), Ok(&r));
    assert!(r.missing_sizes.is_empty() && r.notes.is_empty(), "{r:?}");
    assert_eq!(r.pages.len(), 1);
    let p = &r.pages[0];
    check_page("synthetic.har", p);
    assert_eq!(p.objects.len(), 600);
    let hosts: std::collections::HashSet<&str> =
        p.objects.iter().map(|o| o.host.as_str()).collect();
    assert_eq!(hosts.len(), 100);
    let root = &p.objects[0];
    assert_eq!((root.discovery, root.parent), (Discovery::Document, None));
    assert_eq!(root.url, p.url);
    assert!(
        root.url.starts_with("https://www.") && root.content_type.as_deref() == Some("text/html")
    );
    let mut by = [0usize; 4];
    for (i, o) in p.objects.iter().enumerate().skip(1) {
        let q = o
            .parent
            .unwrap_or_else(|| panic!("object {i} ({}) has no parent", o.url));
        assert!(q < i, "object {i}: parent {q} is not earlier");
        assert_ne!(o.discovery, Discovery::Document, "object {i}");
        let parent = &p.objects[q];
        match o.discovery {
            Discovery::Script => assert!(
                parent.content_type.as_deref() == Some("application/javascript"),
                "object {i}: script parent {}",
                parent.url
            ),
            // Only redirect targets lack an initiator type.
            Discovery::Other => {
                assert_eq!(parent.recorded.location.as_deref(), Some(o.url.as_str()))
            }
            _ => {}
        }
        by[usize::from(o.discovery.code())] += 1;
    }
    let tracking: Vec<_> = p
        .objects
        .iter()
        .filter(|o| o.url.contains("?cb="))
        .collect();
    assert_eq!(tracking.len(), 60);
    assert!(tracking
        .iter()
        .all(|o| matches!(o.discovery, Discovery::Script | Discovery::Other)));
    let status = |s: u16| {
        p.objects
            .iter()
            .filter(|o| o.recorded.status == Some(s))
            .count()
    };
    assert!(status(204) > 0 && status(301) + status(302) > 0);
    eprintln!(
        "synthetic page: {} objects, {} hosts, {} bytes; discovery parser {} script {} other {}; \
         {} tracking; statuses 204 {} 301 {} 302 {}",
        p.objects.len(),
        hosts.len(),
        p.total_bytes(),
        by[1],
        by[2],
        by[3],
        tracking.len(),
        status(204),
        status(301),
        status(302)
    );
    assert!(by[1] > 100 && by[2] > 100 && by[3] > 0, "{by:?}");
}

/// Small and absurd specs give pages too, with the clamped counts.
#[test]
fn synthetic_small_and_absurd_specs_import() {
    for (hosts, objects, random_tracking) in [
        (1, 1, 0),
        (0, 0, 0),
        (1, 1, 5),
        (2, 3, 9),
        (50, 10, 2),
        (30, 30, 30),
        (1, 40, 10),
    ] {
        let spec = HarSpec {
            hosts,
            objects,
            seed: 11,
            random_tracking,
        };
        let want = spec.clamped();
        let r = import_har(synthetic_har(&spec).as_bytes(), "small.har")
            .unwrap_or_else(|e| panic!("{spec:?}: {e}"));
        let p = &r.pages[0];
        assert_eq!(p.objects.len(), want.objects, "{spec:?}");
        let hosts: std::collections::HashSet<&str> =
            p.objects.iter().map(|o| o.host.as_str()).collect();
        assert_eq!(hosts.len(), want.hosts, "{spec:?}");
        assert_eq!(p.objects[0].discovery, Discovery::Document);
        assert!(p
            .objects
            .iter()
            .enumerate()
            .skip(1)
            .all(|(i, o)| o.parent.is_some_and(|q| q < i)));
    }
}

/// What the shared recordings must give. Every number was checked by reading
/// the files with an independent script: pages, objects per page (HAR entries
/// per `pageref`, or `requestWillBeSent` per navigation with redirect hops
/// counted separately, `data:`/`blob:` excluded), total body bytes per page
/// under the documented size rules, and objects without a size.
struct Expect {
    file: &'static str,
    /// URL of the first page.
    url: &'static str,
    objects: &'static [usize],
    bytes: &'static [u64],
    unknown: &'static [usize],
}

const EXPECT: &[Expect] = &[
    Expect {
        file: "devtools/bing.com.json",
        url: "https://bing.com/",
        objects: &[194],
        bytes: &[2_511_554],
        // https://www2.bing.com/ipv6test/test: ERR_SSL_VERSION_OR_CIPHER_MISMATCH
        unknown: &[1],
    },
    Expect {
        // The document was answered with 103 Early Hints first; the hints are
        // not objects of their own. 117 requests, one of them a data: URL.
        file: "devtools/early-hints.json",
        url: "https://www.masterofmalt.com/rum/ableforths/rumbullion-rum/",
        objects: &[116],
        bytes: &[1_293_521],
        unknown: &[0],
    },
    Expect {
        file: "devtools/ryan.json",
        url: "https://www.ryanair.com/us/en/",
        objects: &[177],
        bytes: &[2_879_227],
        // Two iframes and two launchdarkly requests still open when the log ends.
        unknown: &[4],
    },
    Expect {
        file: "devtools/www.izettle.com.json",
        url: "https://www.izettle.com/",
        objects: &[48],
        bytes: &[802_783],
        unknown: &[0],
    },
    Expect {
        // Two loads of the same page in two tabs (top frames 19182.1, 19194.1).
        file: "devtools/www.wikipedia.org.json",
        url: "http://www.wikipedia.org/",
        objects: &[15, 15],
        bytes: &[88_638, 88_638],
        // Per load, a cancelled XHR and its redirect to 404.php.
        unknown: &[2, 2],
    },
    Expect {
        file: "har/aftonbladet.se.har",
        url: "http://aftonbladet.se/",
        objects: &[175],
        bytes: &[1_327_790],
        unknown: &[0],
    },
    Expect {
        file: "har/assa.har",
        url: "https://www.assa.se/",
        objects: &[42, 42, 43],
        bytes: &[2_182_403, 2_183_788, 2_187_613],
        unknown: &[0, 0, 0],
    },
    Expect {
        // Three runs, each a first and a repeat view.
        file: "har/en.wikipedia.org.spdy-wpt.har",
        url: "https://en.wikipedia.org/wiki/Main_Page",
        objects: &[32, 2, 32, 2, 32, 2],
        bytes: &[292_576, 16_453, 292_547, 16_452, 292_537, 16_453],
        unknown: &[0, 0, 0, 0, 0, 0],
    },
    Expect {
        file: "har/ferguson.har",
        url: "https://www.ferguson.com/",
        objects: &[174],
        bytes: &[2_510_395],
        unknown: &[0],
    },
    Expect {
        file: "har/http2-chrome.har",
        url: "https://run.sitespeed.io/",
        objects: &[11],
        bytes: &[102_069],
        unknown: &[0],
    },
    Expect {
        file: "har/linkedin.har",
        url: "https://www.linkedin.com/",
        objects: &[23],
        bytes: &[324_107],
        // Two scorecardresearch beacons with bodySize and content.size -1.
        unknown: &[2],
    },
    Expect {
        // The navigation starts with three redirects; the page URL is the
        // first, which the last one returns to.
        file: "har/mytoys.de.har",
        url: "https://checkout.mytoys.de/checkout/registration",
        objects: &[50],
        bytes: &[595_457],
        unknown: &[0],
    },
    Expect {
        file: "lighthouse/amp",
        url: "https://elsoberano.org/",
        objects: &[41],
        bytes: &[1_417_753],
        unknown: &[0],
    },
    Expect {
        file: "lighthouse/lr",
        url: "https://www.llentab.cz/",
        objects: &[32],
        bytes: &[3_547_274],
        // An aborted analytics fetch and a ping blocked by the inspector.
        unknown: &[2],
    },
];

#[test]
fn real_recordings() {
    let Some(data) = mewa_testkit::shared_data_or_skip("pages") else {
        return;
    };
    let all = import_dir(&data);
    eprintln!(
        "{:<38} {:>4} {:>6} {:>10} {:>7} {:>6}",
        "file", "page", "objs", "bytes", "unknown", "cpu_ms"
    );
    for (path, result) in &all {
        let rel = path
            .strip_prefix(&data)
            .unwrap_or(path)
            .display()
            .to_string();
        match result {
            Ok(r) => {
                for (i, p) in r.pages.iter().enumerate() {
                    eprintln!(
                        "{:<38} {:>4} {:>6} {:>10} {:>7} {:>6}",
                        rel,
                        i,
                        p.objects.len(),
                        p.total_bytes(),
                        p.unknown_sizes(),
                        p.computation_ms.map_or("-".to_string(), |c| c.to_string())
                    );
                }
                for n in &r.notes {
                    eprintln!("    note: {n}");
                }
                for m in &r.missing_sizes {
                    eprintln!("    missing: {} ({})", m.object_url, m.reason);
                }
            }
            Err(e) => eprintln!("{rel}: ERROR {e}"),
        }
    }
    let imported: Vec<String> = all
        .iter()
        .map(|(p, _)| p.strip_prefix(&data).unwrap_or(p).display().to_string())
        .collect();
    // Every recording pinned below is there; a recording added later need not
    // be pinned, but it must import and pass the same plausibility checks.
    for e in EXPECT {
        assert!(
            imported.iter().any(|f| f == e.file),
            "{}: recording missing from {}",
            e.file,
            data.display()
        );
    }
    assert!(imported.len() >= EXPECT.len());
    for file in &imported {
        let r = report_for(&all, file);
        assert!(!r.pages.is_empty(), "{file}: no page");
        for p in &r.pages {
            check_page(file, p);
        }
    }
    for e in EXPECT {
        let r = report_for(&all, e.file);
        assert_eq!(
            r.pages.first().map(|p| p.url.as_str()),
            Some(e.url),
            "{}: page URL",
            e.file
        );
        let objects: Vec<usize> = r.pages.iter().map(|p| p.objects.len()).collect();
        assert_eq!(objects, e.objects, "{}: objects per page", e.file);
        let bytes: Vec<u64> = r.pages.iter().map(PageMeta::total_bytes).collect();
        assert_eq!(bytes, e.bytes, "{}: bytes per page", e.file);
        let unknown: Vec<usize> = r.pages.iter().map(PageMeta::unknown_sizes).collect();
        assert_eq!(unknown, e.unknown, "{}: objects without size", e.file);
        assert_eq!(
            r.missing_sizes.len(),
            unknown.iter().sum::<usize>(),
            "{}: report lists them",
            e.file
        );
    }
    // Main-thread task time between navigationStart and loadEventEnd, as
    // computed from the traces by an independent script.
    let cpu = |f: &str| report_for(&all, f).pages[0].computation_ms;
    assert_eq!(cpu("lighthouse/amp"), Some(188));
    assert_eq!(cpu("lighthouse/lr"), Some(1246));
    // The HTTP/2 and WebPageTest recordings exercise different size rules;
    // discovery comes from recorded initiators where the recording has types.
    let ferguson = &report_for(&all, "har/ferguson.har").pages[0];
    let parser = ferguson
        .objects
        .iter()
        .filter(|o| o.discovery == Discovery::Parser)
        .count();
    let script = ferguson
        .objects
        .iter()
        .filter(|o| o.discovery == Discovery::Script)
        .count();
    assert!(
        parser > 50 && script > 50,
        "ferguson: {parser} parser, {script} script"
    );
}

/// Plausibility checks that hold for any recording of a real page load.
fn check_page(file: &str, p: &PageMeta) {
    // Plausible page weights: 10 kB to 10 MB.
    assert!(
        (10_000..10_000_000).contains(&p.total_bytes()),
        "{}: {} bytes",
        file,
        p.total_bytes()
    );
    assert!(
        p.objects
            .first()
            .is_some_and(|o| o.discovery == Discovery::Document),
        "{}: first object of {} is the document",
        file,
        p.url
    );
    assert!(
        p.objects
            .iter()
            .enumerate()
            .all(|(i, o)| o.parent.is_none_or(|q| q < i)),
        "{}: parents point backwards",
        file
    );
    assert!(
        p.objects.iter().all(|o| !o.host.is_empty()),
        "{}: hosts",
        file
    );
    let is_lighthouse = file.starts_with("lighthouse/");
    match p.computation_ms {
        Some(ms) => {
            assert!(is_lighthouse, "{}: computation only from traces", file);
            assert!(
                ms > 0 && ms < 60_000,
                "{}: implausible computation {ms} ms",
                file
            );
        }
        None => assert!(!is_lighthouse, "{}: trace not attached", file),
    }
}
