//! Integration tests of mewa-corpus: presets meet their seeds' constraints,
//! generation is deterministic, bodies are exact and reference exactly the
//! modelled children, conversions keep the structure.

use std::collections::{BTreeSet, HashSet};

use mewa_corpus::{
    body, from_import_report, from_page_meta, generate, generate_with, min_body_size, to_page_meta,
    Corpus, Discovery, Kind, Options, Page, Preset, Scheme, PLACEHOLDER_SIZE,
};
use mewa_hint::{Discovery as MD, ObjectMeta, PageMeta};
use proptest::prelude::*;

fn small_general(seed: u64, n: usize) -> Corpus {
    generate_with(
        Preset::General,
        seed,
        &Options {
            pages: Some(n),
            ..Options::default()
        },
    )
    .expect("general")
}

#[test]
fn meh15_matches_seed_000() {
    let c = generate(Preset::Meh15, 0);
    c.validate().expect("valid");
    assert_eq!(c.pages.len(), 15);
    let shapes: HashSet<(u64, usize)> = c
        .pages
        .iter()
        .map(|p| (p.total_bytes(), p.objects.len()))
        .collect();
    for fig8 in [(622_000, 32), (1_412_000, 72), (3_648_000, 46)] {
        assert!(shapes.contains(&fig8), "missing Fig. 8 page {fig8:?}");
    }
    let sizes: Vec<u64> = c.pages.iter().map(Page::total_bytes).collect();
    let counts: Vec<usize> = c.pages.iter().map(|p| p.objects.len()).collect();
    assert_eq!(sizes.iter().min(), Some(&346_000));
    assert_eq!(sizes.iter().max(), Some(&3_686_000));
    assert_eq!(counts.iter().min(), Some(&21));
    assert_eq!(counts.iter().max(), Some(&87));
    for p in &c.pages {
        let hosts = p.hosts().len();
        assert!((1..=10).contains(&hosts), "{}: {hosts} hosts", p.name);
        for k in [Kind::Css, Kind::Script, Kind::Image] {
            assert!(
                p.objects.iter().any(|o| o.kind() == k),
                "{} lacks {k:?}",
                p.name
            );
        }
    }
    // Across the corpus some objects are found by CSS and by scripts.
    let all: Vec<_> = c.pages.iter().flat_map(|p| &p.objects).collect();
    assert!(all.iter().any(|o| o.discovery == Discovery::Css));
    assert!(all.iter().any(|o| o.discovery == Discovery::Script));
    assert!(all.iter().any(|o| o.kind() == Kind::Font));
}

#[test]
fn accel7_matches_seed_004() {
    let c = generate(Preset::Accel7, 3);
    c.validate().expect("valid");
    let [p] = c.pages.as_slice() else {
        panic!("one page")
    };
    assert_eq!(p.total_bytes(), 320_000);
    assert_eq!(p.objects.len(), 44);
    let kinds = |k| p.objects.iter().filter(|o| o.kind() == k).count();
    assert_eq!(
        (kinds(Kind::Html), kinds(Kind::Css), kinds(Kind::Image)),
        (1, 1, 42)
    );
    let img_hosts: BTreeSet<&str> = p
        .objects
        .iter()
        .filter(|o| o.kind() == Kind::Image)
        .map(|o| o.host.as_str())
        .collect();
    assert_eq!(img_hosts.len(), 7);
}

#[test]
fn complat_matches_seed_001() {
    let c = generate(Preset::Complat, 5);
    c.validate().expect("valid");
    assert_eq!(c.pages.len(), 3 * 19);
    for p in &c.pages {
        assert!([400_000, 1_000_000, 2_400_000].contains(&p.total_bytes()));
        let main = p.objects.iter().find(|o| o.compute_ms > 0).expect("gap");
        assert_eq!(p.children(main.id, Discovery::Script).count(), 8);
    }
    // More share, more computation, for a given size.
    let ms: Vec<u32> = c
        .pages
        .iter()
        .filter(|p| p.total_bytes() == 400_000)
        .map(|p| p.objects[2].compute_ms)
        .collect();
    assert!(ms.windows(2).all(|w| w[0] < w[1]), "{ms:?}");
}

#[test]
fn general_follows_its_medians() {
    let c = small_general(11, 1001);
    c.validate().expect("valid");
    let mut reqs: Vec<usize> = c.pages.iter().map(|p| p.objects.len()).collect();
    let mut bytes: Vec<u64> = c.pages.iter().map(Page::total_bytes).collect();
    reqs.sort_unstable();
    bytes.sort_unstable();
    assert!(
        (62..=78).contains(&reqs[500]),
        "median requests {}",
        reqs[500]
    );
    assert!(
        (1_700_000..=2_300_000).contains(&bytes[500]),
        "median bytes {}",
        bytes[500]
    );
    assert!(c.pages.iter().all(|p| (1..=10).contains(&p.hosts().len())));
}

#[test]
fn options_are_checked() {
    let bad = |p, o: Options| generate_with(p, 0, &o).expect_err("rejected");
    bad(
        Preset::Meh15,
        Options {
            pages: Some(3),
            share: None,
        },
    );
    bad(
        Preset::General,
        Options {
            pages: Some(0),
            share: None,
        },
    );
    bad(
        Preset::Complat,
        Options {
            pages: None,
            share: Some(0.99),
        },
    );
    assert!("nope".parse::<Preset>().is_err());
    assert_eq!("accel7".parse::<Preset>(), Ok(Preset::Accel7));
}

#[test]
fn generation_is_deterministic_per_seed() {
    for p in Preset::ALL {
        let a = generate(p, 42).to_json();
        assert_eq!(a, generate(p, 42).to_json(), "{p}");
        assert_ne!(a, generate(p, 43).to_json(), "{p}");
    }
}

#[test]
fn json_round_trip() {
    for p in Preset::ALL {
        let c = generate(p, 1);
        let back = Corpus::from_json(&c.to_json()).expect("parses");
        assert_eq!(back, c);
    }
    let e = Corpus::from_json(b"{\"name\":1}").expect_err("bad");
    assert!(e.to_string().contains("not a corpus file"));
}

/// Every `scheme://…"` URL in a body.
fn urls_in(body: &[u8], scheme: Scheme) -> Vec<String> {
    let text = String::from_utf8_lossy(body);
    let pat = format!("{}://", scheme.as_str());
    let mut out = Vec::new();
    let mut rest = text.as_ref();
    while let Some(i) = rest.find(&pat) {
        let tail = &rest[i..];
        let end = tail.find('"').unwrap_or(tail.len());
        out.push(tail[..end].to_string());
        rest = &tail[end..];
    }
    out
}

fn check_bodies(p: &Page) {
    for scheme in [Scheme::Http, Scheme::Https] {
        for o in &p.objects {
            let b = body(p, o.id, scheme).expect("body");
            assert_eq!(b.len() as u64, o.size, "{} object {}", p.name, o.id);
            assert_eq!(b, body(p, o.id, scheme).expect("body"), "deterministic");
            let how = match o.kind() {
                _ if !mewa_corpus::page::carries_references(o.status()) => {
                    assert!(urls_in(&b, scheme).is_empty(), "{} object {}", p.name, o.id);
                    continue;
                }
                Kind::Html => Discovery::Html,
                Kind::Css => Discovery::Css,
                Kind::Script => Discovery::Script,
                _ => continue,
            };
            let mut found = urls_in(&b, scheme);
            found.sort();
            let mut want: Vec<String> = p
                .children(o.id, how)
                .map(|c| c.url(scheme.as_str()))
                .collect();
            want.sort();
            assert_eq!(found, want, "{} object {}", p.name, o.id);
            // No child of another discovery hides in the body either
            // (unless a recorded query quotes a URL itself).
            if p.objects.iter().any(|c| c.path.contains("://")) {
                continue;
            }
            assert_eq!(
                urls_in(
                    &b,
                    if scheme == Scheme::Http {
                        Scheme::Https
                    } else {
                        Scheme::Http
                    }
                )
                .len(),
                0
            );
        }
    }
}

#[test]
fn bodies_are_exact_and_reference_exactly_the_children() {
    for p in Preset::ALL {
        let c = if p == Preset::General {
            small_general(9, 30)
        } else {
            generate(p, 9)
        };
        for page in &c.pages {
            check_bodies(page);
        }
    }
}

#[test]
fn bodies_have_magic_numbers_and_script_gaps() {
    let c = generate(Preset::Complat, 2);
    let p = &c.pages[5];
    let js = body(p, 2, Scheme::Http).expect("js");
    let text = String::from_utf8(js).expect("utf8");
    let gap = format!("performance.now()-t<{}", p.objects[2].compute_ms);
    assert!(text.contains(&gap), "{text}");
    let img = body(p, 3, Scheme::Http).expect("jpeg");
    assert_eq!(&img[..3], &[0xFF, 0xD8, 0xFF]);
    let m = generate(Preset::Meh15, 2);
    for o in m
        .pages
        .iter()
        .flat_map(|p| p.objects.iter().map(move |o| (p, o)))
    {
        if o.1.content_type == "image/png" {
            let b = body(o.0, o.1.id, Scheme::Http).expect("png");
            assert_eq!(&b[..8], b"\x89PNG\r\n\x1a\n");
        }
    }
}

#[test]
fn too_small_body_is_an_error() {
    let mut p = generate(Preset::Accel7, 0).pages.remove(0);
    let need = min_body_size(&p, 0, Scheme::Https).expect("min");
    p.objects[0].size = need - 1;
    assert!(body(&p, 0, Scheme::Https).is_err());
    assert!(body(&p, 99, Scheme::Https).is_err());
    p.objects[2].size = 3;
    assert_eq!(body(&p, 2, Scheme::Http).expect("short jpeg").len(), 3);
}

#[test]
fn page_meta_keeps_structure() {
    let c = generate(Preset::Complat, 1);
    let p = &c.pages[0];
    let m = to_page_meta(p);
    assert_eq!(m.objects.len(), p.objects.len());
    assert_eq!(m.total_bytes(), p.total_bytes());
    assert_eq!(m.objects[0].discovery, MD::Document);
    assert_eq!(m.computation_ms, Some(p.objects[2].compute_ms));
    assert_eq!(m.url, p.main);
    // And back: same structure, computation on the main script.
    let (back, ph, _) = from_page_meta(&m, &p.name).expect("imports");
    assert!(ph.is_empty());
    assert_eq!(back.objects.len(), p.objects.len());
    for (a, b) in back.objects.iter().zip(&p.objects) {
        assert_eq!(
            (
                &a.host,
                &a.path,
                a.size,
                &a.content_type,
                a.parent,
                a.discovery,
                a.compute_ms
            ),
            (
                &b.host,
                &b.path,
                b.size,
                &b.content_type,
                b.parent,
                b.discovery,
                b.compute_ms
            )
        );
    }
}

fn om(url: &str, size: Option<u64>, d: MD, parent: Option<usize>, ct: Option<&str>) -> ObjectMeta {
    ObjectMeta {
        url: url.into(),
        host: mewa_hint::page::host_of(url).expect("host"),
        size,
        content_type: ct.map(String::from),
        last_modified: None,
        etag: None,
        discovery: d,
        parent,
        recorded: Default::default(),
    }
}

#[test]
fn import_rules() {
    let meta = PageMeta {
        url: "https://www.a.example/".into(),
        objects: vec![
            om(
                "https://www.a.example/",
                Some(5000),
                MD::Document,
                None,
                None,
            ),
            om(
                "https://www.a.example/m.js",
                Some(900),
                MD::Parser,
                Some(0),
                Some("application/javascript"),
            ),
            om(
                "https://www.a.example/n.js",
                Some(900),
                MD::Parser,
                Some(0),
                Some("text/javascript"),
            ),
            om(
                "https://cdn.a.example/x.png",
                None,
                MD::Script,
                Some(1),
                Some("image/png"),
            ),
            om(
                "https://www.a.example/m.js",
                Some(900),
                MD::Parser,
                Some(0),
                Some("text/javascript"),
            ),
            // An image "discovered" by another image: re-parented to the root.
            om(
                "https://cdn.a.example/y.png",
                Some(10),
                MD::Parser,
                Some(3),
                None,
            ),
            om("https://[::1]/z", Some(10), MD::Parser, Some(0), None),
            om(
                "https://cdn.a.example/s p\"q.css#f",
                Some(10),
                MD::Parser,
                Some(0),
                Some("text/css"),
            ),
        ],
        computation_ms: Some(101),
    };
    let (p, ph, notes) = from_page_meta(&meta, "t").expect("imports");
    p.validate().expect("valid");
    assert_eq!(p.objects.len(), 6, "{p:#?}");
    assert_eq!(ph.len(), 1);
    assert_eq!(p.objects[3].size, PLACEHOLDER_SIZE);
    assert_eq!(p.objects[3].discovery, Discovery::Script);
    assert_eq!(p.objects[4].parent, Some(0));
    assert_eq!(p.objects[4].content_type, "image/png");
    assert_eq!(p.objects[5].path, "/s%20p%22q.css");
    assert_eq!((p.objects[1].compute_ms, p.objects[2].compute_ms), (51, 50));
    assert_eq!(p.main, "https://www.a.example/");
    assert!(notes.iter().any(|n| n.contains("repeated")), "{notes:?}");
    assert!(
        notes.iter().any(|n| n.contains("not a DNS name")),
        "{notes:?}"
    );
    assert!(notes.iter().any(|n| n.contains("re-parented")), "{notes:?}");
}

/// A synthetic ad-heavy recording (mewa-testkit's `synthetic_har`) becomes
/// a valid corpus page with nothing adjusted: no object re-parented, merged,
/// dropped or given a guessed type, redirects and 204s kept.
#[test]
fn synthetic_har_imports_without_adjustments() {
    let spec = mewa_testkit::HarSpec {
        hosts: 100,
        objects: 600,
        seed: 7,
        random_tracking: 60,
    };
    let har = mewa_testkit::synthetic_har(&spec);
    let rep = mewa_hint::import::import_har(har.as_bytes(), "synthetic.har").expect("imports");
    let imp = from_import_report(&rep, "synthetic", vec!["synthetic.har".into()]);
    imp.corpus.validate().expect("valid");
    assert!(imp.placeholder_sizes.is_empty());
    for word in [
        "re-parented",
        "merged",
        "dropped",
        "guessed",
        "served as 200",
        "skipped",
    ] {
        assert!(
            !imp.notes.iter().any(|n| n.contains(word)),
            "{word}: {:?}",
            imp.notes
        );
    }
    let p = &imp.corpus.pages[0];
    assert_eq!(p.objects.len(), 600);
    assert_eq!(p.hosts().len(), 100);
    let status = |s: u16| p.objects.iter().filter(|o| o.status() == s).count();
    assert!(status(204) > 0 && status(301) + status(302) > 0);
    assert!(p.objects.iter().any(|o| o.discovery == Discovery::Css));
    assert!(p.objects.iter().any(|o| o.discovery == Discovery::Redirect));
    check_bodies(p);
}

#[test]
fn real_recordings_import_when_present() {
    let Some(dir) = mewa_testkit::shared_data_or_skip("pages") else {
        return;
    };
    let mut n = 0;
    for (path, rep) in mewa_hint::import::import_dir(&dir) {
        let rep = rep.unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let imp = from_import_report(&rep, "real", vec![path.display().to_string()]);
        imp.corpus.validate().expect("imported corpus valid");
        // Every recorded page replays: none is skipped.
        assert_eq!(imp.corpus.pages.len(), rep.pages.len(), "{:?}", imp.notes);
        for p in &imp.corpus.pages {
            // Served bytes stay within 2 % of the recorded ones.
            let (rec, served) = (p.recorded_bytes(), p.total_bytes());
            assert!(
                served.abs_diff(rec) as f64 <= 0.02 * rec as f64,
                "{}: {served} served against {rec} recorded",
                p.name
            );
            check_bodies(p);
            n += 1;
        }
    }
    assert!(n > 0, "no page imported from {}", dir.display());
}

fn recorded(
    status: u16,
    location: Option<&str>,
    conn: &str,
    wait: u32,
    connect: Option<u32>,
) -> mewa_hint::Recorded {
    mewa_hint::Recorded {
        status: Some(status),
        location: location.map(String::from),
        connection: Some(conn.into()),
        wait_ms: Some(wait),
        connect_ms: connect,
    }
}

#[test]
fn import_keeps_what_a_replay_needs() {
    let mut objs = vec![
        // http://a.example/ → https://www.a.example/ (the document).
        om(
            "http://a.example/",
            Some(0),
            MD::Document,
            None,
            Some("text/html"),
        ),
        om(
            "https://www.a.example/",
            Some(30),
            MD::Other,
            Some(0),
            Some("text/html"),
        ),
        // A 204 beacon with a body size, a 404 script, a 304 image.
        om(
            "https://t.example/b",
            Some(7),
            MD::Script,
            Some(1),
            Some("text/plain"),
        ),
        om(
            "https://www.a.example/gone.js",
            Some(200),
            MD::Parser,
            Some(1),
            Some("text/javascript"),
        ),
        om(
            "https://cdn.a.example/i.png",
            Some(500),
            MD::Parser,
            Some(1),
            Some("image/png"),
        ),
        // Revealed by the 404 script: a browser never runs it.
        om(
            "https://cdn.a.example/j.png",
            Some(500),
            MD::Script,
            Some(3),
            Some("image/png"),
        ),
    ];
    objs[0].recorded = recorded(301, Some("https://www.a.example/"), "1", 50, Some(40));
    objs[1].recorded = recorded(200, None, "2", 150, Some(40));
    objs[2].recorded = recorded(204, None, "3", 20, None);
    objs[3].recorded = recorded(404, None, "2", 45, None);
    objs[4].recorded = recorded(304, None, "2", 41, None);
    objs[5].recorded = recorded(200, None, "2", 90, None);
    let meta = PageMeta {
        url: "http://a.example/".into(),
        objects: objs,
        computation_ms: None,
    };
    let (p, _, notes) = from_page_meta(&meta, "r").expect("imports");
    let by = |path: &str, host: &str| {
        p.objects
            .iter()
            .find(|o| o.path == path && o.host == host)
            .expect("object")
    };
    let (root, doc) = (by("/", "a.example"), by("/", "www.a.example"));
    assert_eq!(root.status, Some(301));
    assert_eq!(
        (doc.parent, doc.discovery),
        (Some(root.id), Discovery::Redirect)
    );
    assert_eq!(p.document().map(|d| d.id), Some(doc.id));
    // The document's wait is one 40 ms round trip plus 110 ms of thinking.
    assert_eq!(doc.think_ms, 110);
    let beacon = by("/b", "t.example");
    assert_eq!(
        (beacon.status, beacon.size, beacon.recorded_size),
        (Some(204), 0, Some(7))
    );
    assert_eq!(by("/gone.js", "www.a.example").status, Some(404));
    assert_eq!(
        by("/i.png", "cdn.a.example").status,
        None,
        "304 is served whole"
    );
    // The 404 script's child moves to the shown document, which reads it.
    let j = by("/j.png", "cdn.a.example");
    assert_eq!((j.parent, j.discovery), (Some(doc.id), Discovery::Html));
    // Connection 2 carried www and cdn: one address, one certificate.
    assert_eq!(
        p.shared_connections,
        vec![vec![
            "cdn.a.example".to_string(),
            "www.a.example".to_string()
        ]]
    );
    // The 30-byte document cannot carry its references: it grew.
    assert_eq!(doc.recorded_size, Some(30));
    assert!(doc.size > 30);
    assert!(notes.iter().any(|n| n.contains("grown")), "{notes:?}");
    assert!(notes.iter().any(|n| n.contains("304")), "{notes:?}");
    check_bodies(&p);
    assert!(body(&p, root.id, Scheme::Https).expect("body").is_empty());
}

#[test]
fn a_redirect_loop_ends_on_the_page() {
    let mut objs = vec![
        om(
            "https://s.example/c",
            Some(0),
            MD::Document,
            None,
            Some("text/html"),
        ),
        om(
            "https://login.example/x",
            Some(0),
            MD::Other,
            Some(0),
            Some("text/plain"),
        ),
        om(
            "https://s.example/c",
            Some(900),
            MD::Other,
            Some(1),
            Some("text/html"),
        ),
        om(
            "https://s.example/a.css",
            Some(900),
            MD::Parser,
            Some(2),
            Some("text/css"),
        ),
    ];
    objs[0].recorded = recorded(302, Some("https://login.example/x"), "1", 5, None);
    objs[1].recorded = recorded(302, Some("https://s.example/c"), "2", 5, None);
    objs[2].recorded = recorded(200, None, "1", 5, None);
    let meta = PageMeta {
        url: "https://s.example/c".into(),
        objects: objs,
        computation_ms: None,
    };
    let (p, _, notes) = from_page_meta(&meta, "loop").expect("imports");
    let root = p.root().expect("root");
    assert_eq!((root.status, root.size), (None, 900), "served as last seen");
    assert_eq!(p.objects.len(), 3);
    assert!(
        notes.iter().any(|n| n.contains("not in the recording")),
        "{notes:?}"
    );
    check_bodies(&p);
}

#[test]
fn redirect_rules_are_validated() {
    let mut c = generate(Preset::Accel7, 1);
    let p = &mut c.pages[0];
    // A 3xx document whose children are not its redirect target.
    p.objects[0].status = Some(302);
    let e = p.validate().expect_err("children of a redirect");
    assert!(e.to_string().contains("redirect"), "{e}");
    p.objects[0].status = Some(304);
    assert!(p.validate().is_err(), "304 cannot be replayed");
    p.objects[0].status = Some(204);
    assert!(p.validate().is_err(), "204 with a body");
    p.objects[0].status = None;
    p.objects[1].discovery = Discovery::Redirect;
    let e = p.validate().expect_err("redirect child of a 200");
    assert!(e.to_string().contains("not a 3xx"), "{e}");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    #[test]
    fn generator_pages_are_always_valid(seed in any::<u64>()) {
        for p in [Preset::Meh15, Preset::Accel7] {
            let c = generate(p, seed);
            prop_assert!(c.validate().is_ok());
        }
        let g = small_general(seed, 5);
        prop_assert!(g.validate().is_ok());
        for page in &g.pages {
            for o in &page.objects {
                let b = body(page, o.id, Scheme::Https);
                prop_assert_eq!(b.map(|b| b.len() as u64).ok(), Some(o.size));
            }
        }
    }

    #[test]
    fn from_json_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
        let _ = Corpus::from_json(&bytes);
    }

    #[test]
    fn mutated_corpus_validation_never_panics(seed in any::<u64>(), cut in 0usize..4000) {
        let json = generate(Preset::Accel7, seed).to_json();
        let mut s = String::from_utf8_lossy(&json).into_owned();
        // Flip one digit or quote somewhere: still no panic.
        let pos = cut % s.len();
        if s.is_char_boundary(pos) && s.is_char_boundary(pos + 1) {
            s.replace_range(pos..pos + 1, "7");
        }
        let _ = Corpus::from_json(s.as_bytes());
    }
}

#[test]
fn reference_ends_point_past_each_quoted_url() {
    let c = generate(Preset::Meh15, 1);
    for p in &c.pages {
        let root = p.root().expect("root");
        for scheme in [Scheme::Http, Scheme::Https] {
            let b = body(p, root.id, scheme).expect("body");
            let ends = mewa_corpus::reference_ends(p, root.id, scheme).expect("ends");
            assert_eq!(ends.len(), p.children(root.id, Discovery::Html).count());
            for w in ends.windows(2) {
                assert!(w[0].1 <= w[1].1, "in body order");
            }
            for (id, end) in ends {
                let url = p.object(id).expect("child").url(scheme.as_str());
                let upto = &b[..end as usize];
                assert!(
                    upto.ends_with(format!("\"{url}\"").as_bytes()),
                    "{}",
                    p.name
                );
            }
        }
        // Not HTML: nothing streams.
        let css = p
            .objects
            .iter()
            .find(|o| o.kind() == Kind::Css)
            .expect("css");
        assert!(mewa_corpus::reference_ends(p, css.id, Scheme::Http)
            .expect("ends")
            .is_empty());
    }
}
