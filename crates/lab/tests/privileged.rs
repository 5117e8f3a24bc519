//! The testbed and the baseline experiment over real namespaces, TUN links
//! and kernel TCP. Needs root; skips otherwise
//! (`mewa_testkit::skip_unless_root`).
#![cfg(target_os = "linux")]
#![allow(clippy::unwrap_used)]

use std::time::Duration;

use mewa_corpus::{generate, Corpus, Preset};
use mewa_lab::bed::{Bed, OriginSettings};
use mewa_lab::experiment::Experiment;
use mewa_lab::experiment::Progress;
use mewa_lab::{accel, baseline, cellular};
use mewa_link::runtime::LinkOptions;
use mewa_loader::metrics::PageMetrics;
use mewa_loader::record::Protocol;
use mewa_loader::LoadOptions;
use mewa_testkit::TempDir;

fn ca_dir(tag: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("mewa-lab-priv-{}-{tag}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

/// The smallest meh15 page, alone in a corpus.
fn small_corpus() -> Corpus {
    let mut c = generate(Preset::Meh15, 1);
    c.pages.sort_by_key(|p| p.total_bytes());
    c.pages.truncate(1);
    c
}

#[test]
fn loads_cross_the_emulated_link_with_its_delay_and_rate() {
    if mewa_testkit::skip_unless_root() {
        return;
    }
    let corpus = small_corpus();
    let page = &corpus.pages[0];
    let rtt = 0.1;
    let bed = Bed::start(
        &corpus,
        baseline::link(20_000_000, 100),
        LinkOptions::default(),
        &OriginSettings {
            congestion: "cubic".into(),
            ca_dir: ca_dir("bed"),
            iw: None,
        },
    )
    .unwrap();
    for (proto, tls) in [
        (Protocol::H2, false),
        (Protocol::H2, true),
        (Protocol::H1, false),
        (Protocol::H3, true),
    ] {
        let opts = bed.options(LoadOptions {
            timeout: Duration::from_secs(30),
            ..LoadOptions::browser(proto, tls)
        });
        let rec = bed.load(page, &opts).unwrap();
        assert!(rec.ok(), "{proto} tls={tls}: {:?}", rec.errors);
        let m = PageMetrics::from_record(&rec);
        let plt = m.plt_wire_s.unwrap();
        // At least: connection handshake + request + the HTML, then its
        // children: two more round trips, and every byte through 20 Mbit/s.
        let floor = 2.0 * rtt + page.total_bytes() as f64 * 8.0 / 20e6;
        assert!(
            plt > floor,
            "{proto}: {plt} s under the physical floor {floor} s"
        );
        assert!(plt < 10.0, "{proto}: {plt} s");
        // TCP's handshake took one RTT across the link.
        let c = &rec.connections[0];
        let hs = (c.connected_us.unwrap() - c.open_us) as f64 / 1e6;
        assert!(
            (rtt * 0.95..rtt * 1.5).contains(&hs),
            "{proto}: handshake {hs} s"
        );
    }
    let stats = bed
        .topology()
        .unwrap()
        .link_stats("client", "origin")
        .unwrap();
    assert!(stats.down.delivered_bytes >= 4 * page.total_bytes());
    bed.shutdown().unwrap();
}

#[test]
fn baseline_runs_a_small_grid_and_compares_with_the_model() {
    if mewa_testkit::skip_unless_root() {
        return;
    }
    let dir = TempDir::new("baseline-run");
    let corpus_file = dir.join("corpus.json");
    std::fs::write(&corpus_file, small_corpus().to_json()).unwrap();
    let cfg = baseline::Config {
        corpus: mewa_lab::experiment::CorpusChoice {
            path: Some(corpus_file),
            pages: Vec::new(),
        },
        origin: mewa_lab::experiment::OriginChoice {
            ca_dir: Some(ca_dir("baseline")),
            ..Default::default()
        },
        rtts_ms: vec![50, 150],
        runs: 2,
        out: dir.join("out"),
        ..baseline::Config::default()
    };
    let seen = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = seen.clone();
    let progress = Progress::new(move |p| {
        assert!(p.done <= p.total);
        counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    });
    let res = baseline::Baseline::run(&cfg, &progress).unwrap().result;
    // One step as it starts, one per load, one as it ends.
    assert_eq!(seen.load(std::sync::atomic::Ordering::Relaxed), 6);
    assert_eq!(res.runs.len(), 4);
    assert!(res.runs.iter().all(|r| r.ok), "{:?}", res.runs);
    assert_eq!(res.cells.len(), 2);
    let (a, b) = (&res.cells[0], &res.cells[1]);
    // Three times the RTT costs more time, in the measurement and the model.
    assert!(b.measured_s.unwrap() > a.measured_s.unwrap() + 0.2);
    assert!(b.model_printed_s > a.model_printed_s);
    assert_eq!(res.per_rtt.len(), 2);
    assert_eq!(res.samples.len(), 2);
}

/// Seed 000's three-namespace experiment in miniature: the edge measures
/// the wired RTT, the client gets a hint over the radio link, plans n
/// connections and loads; without the hint it uses one. With Chromium
/// installed, the browser goes through the local proxy too.
#[test]
fn meh_experiment_runs_client_edge_origin() {
    if mewa_testkit::skip_unless_root() {
        return;
    }
    use mewa_lab::experiment::{CorpusChoice, OriginChoice};
    use mewa_lab::meh;
    use mewa_report::read_config;
    use mewa_report::Report;
    let dir = ca_dir("meh");
    std::fs::create_dir_all(&dir).unwrap();
    let chromium = std::path::PathBuf::from(mewa_chromium::DEFAULT_CHROMIUM);
    let cfg = meh::Config {
        corpus: CorpusChoice {
            path: None,
            pages: vec!["622k".into(), "1412k".into()],
        },
        origin: OriginChoice {
            ca_dir: Some(dir.join("ca")),
            ..OriginChoice::default()
        },
        runs: 1,
        browser_runs: usize::from(chromium.exists()),
        chromium: chromium.clone(),
        out: dir.join("out"),
        ..meh::Config::default()
    };
    let report = meh::Meh::run(&cfg, &Progress::none()).unwrap();
    // The result folder holds the configuration that re-runs it, from the
    // start, and everything the report renders once written.
    let folder = report.write().unwrap().expect("a result folder");
    let back: meh::Config = read_config(&folder.join("config.json")).unwrap();
    assert_eq!(back, cfg);
    for f in [
        "runs.jsonl",
        "meta.json",
        "result.json",
        "runs.csv",
        "pages.csv",
        "cdf.svg",
        "pages-box.svg",
        "report.md",
    ] {
        assert!(
            folder.join(f).is_file(),
            "{f} missing in {}",
            folder.display()
        );
    }
    let res = &report.result;
    assert_eq!(res.runs.len(), 4);
    for r in &res.runs {
        assert!(r.ok, "{r:?}");
        assert!(
            r.hint_bytes > 0,
            "every query asked for and got a hint: {r:?}"
        );
        assert_eq!(r.fallback, None, "{r:?}");
        // The DNS exchange crosses the 45 ms radio link.
        assert!(r.dns_ms >= 44.0 && r.dns_ms < 200.0, "{r:?}");
        if r.with_hint {
            assert!(
                r.n >= 2,
                "Algorithm 1 picks several connections here: {r:?}"
            );
            assert_eq!(r.connections, r.n as usize, "{r:?}");
        } else {
            assert_eq!((r.n, r.connections), (1, 1), "{r:?}");
        }
    }
    let wired = res.measured_wired_rtt_ms.unwrap();
    assert!((19.0..60.0).contains(&wired), "edge measured {wired} ms");
    assert!(res.hints_within_1k >= 0.99);
    if chromium.exists() {
        assert_eq!(res.browser.len(), 4, "2 Fig. 8 pages x with/without");
        for b in &res.browser {
            assert_eq!(b.error, None, "{b:?}");
            assert!(b.plt_s.is_some_and(|p| p > 0.1), "{b:?}");
            if b.with_hint {
                assert!(b.n >= 2, "{b:?}");
            } else {
                // Without the hint Chromium loads on its own: no proxy.
                assert_eq!(b.n, 0, "{b:?}");
            }
        }
    } else {
        mewa_testkit::skip_part(
            "the browser runs",
            format!("no Chromium at {}", chromium.display()),
        );
    }
    // The journal: the testbed's start, then one line per pair of loads
    // (two pages; and two Chromium pairs with Chromium).
    let journal = std::fs::read_to_string(folder.join("runs.jsonl")).unwrap();
    let pairs = if chromium.exists() { 4 } else { 2 };
    assert_eq!(journal.lines().count(), 1 + pairs, "{journal}");
    // The report again from the journal alone: the same loads and figures.
    let again = meh::Meh::report_again(&folder).unwrap();
    assert_eq!(again.result.runs.len(), res.runs.len());
    assert_eq!(again.result.browser.len(), res.browser.len());
    assert_eq!(
        again.result.measured_wired_rtt_ms,
        res.measured_wired_rtt_ms
    );
    assert_eq!(again.text(), report.text());
    let _ = std::fs::remove_dir_all(&dir);
}

/// `mewa lab accel` end to end with the loader: every variant loads the
/// whole accel7 page, and through the accelerator it takes one connection
/// where HTTP/2 per domain takes eight (the main host and seven image
/// hosts): the folding is real.
#[test]
fn accel_experiment_folds_the_page_onto_one_connection() {
    if mewa_testkit::skip_unless_root() {
        return;
    }
    let out = std::env::temp_dir().join(format!("mewa-lab-accel-{}", std::process::id()));
    let config = accel::Config {
        origin: mewa_lab::experiment::OriginChoice {
            ca_dir: Some(ca_dir("accel")),
            ..Default::default()
        },
        rtt_ms: 150,
        down_kbps: vec![8000],
        tools: vec![mewa_lab::experiment::Browser::Loader],
        // The peers are Chromium's own (the next test).
        variants: accel::Variant::ALL
            .iter()
            .copied()
            .filter(|v| !v.chromium_only())
            .collect(),
        runs: 1,
        out: out.clone(),
        ..accel::Config::default()
    };
    let report = accel::Accel::run(&config, &Progress::none()).unwrap();
    let runs: Vec<accel::AccelRun> = serde_json::from_value(report.json["runs"].clone()).unwrap();
    assert_eq!(runs.len(), 6, "{runs:?}");
    for r in &runs {
        assert!(r.plt_s.is_some(), "{} failed: {:?}", r.variant, r.error);
        let n = r.connections.unwrap();
        match r.variant {
            accel::Variant::AccelCold | accel::Variant::AccelWarm => assert_eq!(n, 1, "{r:?}"),
            // Seed 000's count at 8 Mbit/s and 150 ms (a BDP of ten
            // initial windows): several, all to the accelerator.
            accel::Variant::AccelMeh => assert!((2..=6).contains(&n), "{r:?}"),
            accel::Variant::H2 => assert_eq!(n, 8, "{r:?}"),
            _ => assert!(n >= 8, "{r:?}"),
        }
    }
    let _ = std::fs::remove_dir_all(&out);
}

/// The same through headless Chromium with DNS across the link: HTTP/2
/// per domain, the peers (a returning visitor, 103 Early Hints, HTTP/3)
/// and the warm accelerator all load the page, and the report pairs the
/// accelerator against the best peer.
#[test]
fn accel_experiment_runs_in_chromium() {
    if mewa_testkit::skip_unless_root() {
        return;
    }
    let Some(chromium) = mewa_testkit::chromium_or_skip() else {
        return;
    };
    let out = std::env::temp_dir().join(format!("mewa-lab-accel-chr-{}", std::process::id()));
    let config = accel::Config {
        origin: mewa_lab::experiment::OriginChoice {
            ca_dir: Some(ca_dir("accel-chr")),
            ..Default::default()
        },
        rtt_ms: 40,
        down_kbps: vec![8000],
        variants: vec![
            accel::Variant::H2,
            accel::Variant::Predictor,
            accel::Variant::EarlyHints,
            accel::Variant::H3,
            accel::Variant::AccelWarm,
        ],
        chromium,
        runs: 1,
        out: out.clone(),
        ..accel::Config::default()
    };
    let report = accel::Accel::run(&config, &Progress::none()).unwrap();
    let runs: Vec<accel::AccelRun> = serde_json::from_value(report.json["runs"].clone()).unwrap();
    assert_eq!(runs.len(), 5, "{runs:?}");
    for r in &runs {
        assert!(r.plt_s.is_some(), "{} failed: {:?}", r.variant, r.error);
    }
    let text = mewa_report::Report::text(&report);
    assert!(
        text.contains("h3 vs h2") && text.contains("early-hints vs h2"),
        "{text}"
    );
    let _ = std::fs::remove_dir_all(&out);
}

/// Every Chromium arm on a recorded page with many hosts, over a trace with
/// the LTE radio: each load completes, and the NetLog shows each arm doing
/// what it claims — the predictor preconnects before the document to hosts
/// it learned on the earlier visit, 103 Early Hints make Chromium
/// preconnect and preload before the document, h3 loads the document over
/// HTTP/3, the hint's proxy opens its planned connections; a cold profile
/// preconnects to no other host before the document.
#[test]
fn meh_arms_do_what_they_claim_in_chromium() {
    if mewa_testkit::skip_unless_root() {
        return;
    }
    let Some(chromium) = mewa_testkit::chromium_or_skip() else {
        return;
    };
    let Some(har) = mewa_testkit::shared_data_or_skip("pages/har/ferguson.har") else {
        return;
    };
    let Some(trace) = mewa_testkit::shared_data_or_skip("traces/TMobile-LTE-short.down") else {
        return;
    };
    use mewa_lab::meh::{self, Arm};
    let out = ca_dir("meh-arms");
    let cfg = meh::Config {
        corpus: mewa_lab::experiment::CorpusChoice {
            path: Some(har),
            pages: Vec::new(),
        },
        origin: mewa_lab::experiment::OriginChoice {
            ca_dir: Some(out.join("ca")),
            ..Default::default()
        },
        runs: 1,
        trace: Some(trace),
        radio: meh::Rrc::Lte,
        browser_runs: 1,
        arms: Arm::ALL.to_vec(),
        cpu_slowdown: 2.0,
        chromium,
        out: out.join("out"),
        ..meh::Config::default()
    };
    let report = meh::Meh::run(&cfg, &Progress::none()).unwrap();
    let loads = &report.result.browser;
    assert_eq!(loads.len(), Arm::ALL.len(), "{loads:?}");
    for l in loads {
        assert_eq!(l.error, None, "{} failed", l.arm());
        let m = l.metrics.as_ref().expect("metrics");
        assert!(l.plt_s.is_some_and(|p| p > 0.3), "{l:?}");
        assert!(
            m.fcp_s.is_some() && m.lcp_s.is_some() && m.onload_s.is_some(),
            "{m:?}"
        );
        assert!(m.speed_index_s.is_some() && m.frames >= 2, "{m:?}");
        assert!(m.objects_arrived * 10 >= m.objects * 9, "{m:?}");
        assert!(l.floor_s.is_some_and(|f| f > 0.0 && f < l.plt_s.unwrap()));
        assert_eq!(l.cpu_slowdown, Some(2.0));
        let early = l.early.clone().unwrap_or_default();
        match l.arm() {
            Arm::Cold => assert!(early.preconnected.is_empty(), "{early:?}"),
            Arm::Predictor => {
                assert!(!l.predicted.is_empty(), "the predictor learned nothing");
                assert!(!early.preconnected.is_empty(), "{early:?}");
            }
            Arm::EarlyHints => {
                assert!(early.informational >= 1, "{early:?}");
                assert!(!early.preconnected.is_empty(), "{early:?}");
                assert!(!early.requested.is_empty(), "{early:?}");
            }
            Arm::H3 => assert_eq!(l.protocol.as_deref(), Some("h3")),
            Arm::Meh => assert!(l.n >= 1, "{l:?}"),
        }
    }
    let s = &report.result.arms;
    assert!(s.best_peer.is_some());
    assert!(s.comparisons.len() >= 4 * 5, "{}", s.comparisons.len());
    let _ = std::fs::remove_dir_all(&out);
}

/// A cellular study of one session per setting: meh15-01 loaded twice
/// over HTTP/2 on fixed-rate 3G, results under `out`.
fn cellular_config(tag: &str, out: &std::path::Path) -> cellular::Config {
    cellular::Config {
        corpus: mewa_lab::experiment::CorpusChoice {
            path: None,
            pages: vec!["meh15-01".into()],
        },
        origin: mewa_lab::experiment::OriginChoice {
            ca_dir: Some(ca_dir(tag)),
            ..Default::default()
        },
        radios: vec![cellular::Radio::ThreeG],
        networks: vec![cellular::Network::Fixed],
        protocols: vec![Protocol::H2],
        loads: 2,
        out: out.to_path_buf(),
        ..cellular::Config::default()
    }
}

/// `mewa lab cellular` end to end on 3G with think time: the second load of
/// a session reuses the first one's HTTP/2 connection, starts with the
/// radio in CELL_FACH and pays a promotion; the server's window is sampled;
/// and with the fix every server RTO sampled after the promotion covers it
/// (the route's floor reached the kernel), where without it the RTO is
/// below the promotion delay. The journal holds one unit per testbed, its
/// loads and traces, and the report rebuilt from it is the same.
#[test]
fn cellular_study_reuses_connections_across_a_promotion() {
    if mewa_testkit::skip_unless_root() {
        return;
    }
    let out = std::env::temp_dir().join(format!("mewa-lab-cell-{}", std::process::id()));
    let config = cellular::Config {
        settings: vec!["base".parse().unwrap(), "rto-floor".parse().unwrap()],
        think_s: 7.0,
        ..cellular_config("cellular", &out)
    };
    let report = cellular::Cellular::run(&config, &Progress::none()).unwrap();
    let runs: Vec<cellular::CellRun> = serde_json::from_value(report.json["runs"].clone()).unwrap();
    assert_eq!(runs.len(), 4, "{runs:?}");
    for r in &runs {
        assert!(r.plt_s.is_some() && r.failed == 0, "{r:?}");
        assert!(r.cwnd_max.is_some_and(|c| c >= 10), "{r:?}");
        assert!(r.down_bytes > 300_000, "{r:?}");
        if r.seq == 0 {
            assert_eq!((r.new_connections, r.reused_connections), (1, 0), "{r:?}");
            assert_eq!(r.radio_state, "umts_idle", "{r:?}");
        } else {
            assert_eq!((r.new_connections, r.reused_connections), (0, 1), "{r:?}");
            assert_eq!(r.radio_state, "umts_fach", "{r:?}");
            assert!(r.promotions >= 1, "{r:?}");
        }
    }
    let traces: Vec<cellular::LoadTrace> =
        serde_json::from_value(report.json["traces"].clone()).unwrap();
    let rtos = |setting: &str| -> Vec<u32> {
        traces
            .iter()
            .filter(|t| t.setting.to_string() == setting)
            .flat_map(|t| t.rto.iter().flatten().map(|&(_, ms)| ms))
            .collect()
    };
    let (base, fix) = (rtos("base"), rtos("rto-floor"));
    assert!(!base.is_empty() && !fix.is_empty(), "{traces:?}");
    // 3G's promotion is 2 s; the floor is 2.2 s on top of the RTT.
    assert!(fix.iter().all(|&ms| ms >= 2200), "{fix:?}");
    assert!(base.iter().any(|&ms| ms < 2000), "{base:?}");
    let dir = report.folder.as_ref().unwrap().path();
    let journal = std::fs::read_to_string(dir.join(mewa_report::journal::JOURNAL)).unwrap();
    assert_eq!(journal.lines().count(), 2, "{journal}");
    // Rebuilt from the journal: the same loads and traces, the same tables
    // (a float read back from JSON may differ in its last digit).
    let again = cellular::Cellular::report_again(dir).unwrap();
    let count = |r: &mewa_report::SectionReport, what: &str| r.json[what].as_array().map(Vec::len);
    assert_eq!(count(&again, "runs"), count(&report, "runs"));
    assert_eq!(count(&again, "traces"), count(&report, "traces"));
    assert_eq!(
        mewa_report::Report::text(&again),
        mewa_report::Report::text(&report)
    );
    let _ = std::fs::remove_dir_all(&out);
}

/// `mewa lab cellular --browser chromium` end to end: one headless
/// Chromium (one profile) loads a page twice on 3G with 12 s of think time
/// between. Both loads have Chromium's onload time; the second starts with
/// the radio demoted to CELL_FACH and pays a promotion, and goes over the
/// first load's HTTP/2 connection: Chromium reports the connection reused
/// and the link sees no new handshake.
#[test]
fn cellular_study_in_chromium_keeps_its_connection_across_think_time() {
    if mewa_testkit::skip_unless_root() {
        return;
    }
    let Some(chromium) = mewa_testkit::chromium_or_skip() else {
        return;
    };
    let out = std::env::temp_dir().join(format!("mewa-lab-cell-chromium-{}", std::process::id()));
    let config = cellular::Config {
        settings: vec![cellular::Setting::base()],
        browser: mewa_lab::experiment::Browser::Chromium,
        chromium,
        think_s: 12.0,
        ..cellular_config("cellular-chromium", &out)
    };
    let report = cellular::Cellular::run(&config, &Progress::none()).unwrap();
    let runs: Vec<cellular::CellRun> = serde_json::from_value(report.json["runs"].clone()).unwrap();
    assert_eq!(runs.len(), 2, "{runs:?}");
    for r in &runs {
        assert_eq!(r.browser, mewa_lab::experiment::Browser::Chromium);
        assert!(r.plt_s.is_some_and(|s| s > 0.3), "{r:?}");
        assert_eq!(r.failed, 0, "{r:?}");
        assert!(r.cwnd_max.is_some(), "{r:?}");
    }
    let (first, second) = (&runs[0], &runs[1]);
    assert_eq!(first.radio_state, "umts_idle", "{first:?}");
    assert!(
        first.new_connections >= 1 && first.handshakes >= 1,
        "{first:?}"
    );
    // 12 s after the first load the radio has left CELL_DCH (5 s) but not
    // yet reached IDLE (17 s).
    assert_eq!(second.radio_state, "umts_fach", "{second:?}");
    assert!(second.promotions >= 1, "{second:?}");
    assert_eq!(
        (second.new_connections, second.handshakes),
        (0, 0),
        "{second:?}"
    );
    assert!(second.reused_connections >= 1, "{second:?}");
    // The profile was removed with the session.
    let folder = std::fs::read_dir(&out).unwrap().next().unwrap().unwrap();
    assert!(!folder.path().join("work").exists());
    let _ = std::fs::remove_dir_all(&out);
}
