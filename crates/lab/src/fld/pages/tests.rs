//! The pages report built from records alone: no root, nothing loaded.

use super::report::groups::against_cubic;
use super::*;
use crate::cross::{CrossLog, Flow};
use crate::fld::FLD;

/// A loader's load of `page` over HTTP/2 on LTE whose net transfer took
/// `net` seconds.
fn page_run(page: &str, cc: &str, net: f64) -> PageRun {
    PageRun {
        setting: "lte".into(),
        queue_ms: Some(20),
        protocol: PageType::H2,
        cc: cc.parse().expect("a control"),
        page: page.into(),
        run: 0,
        plt_s: Some(net + 0.1),
        net_transfer_s: Some(net),
        idle_share: Some(0.5),
        effective_concurrency: Some(1.0),
        connection_s: vec![net],
        connection_bytes: vec![40_000, 600_000],
        first_object_bins: vec![14_000, 42_000],
        failed: 0,
        handshake_ms: Some(26.0),
        server_tcp: None,
        metrics: None,
    }
}

/// The report of `records` under `config`, through the experiment.
fn report_of(config: &Config, records: Vec<Record>) -> SectionReport {
    Pages::prepare(config)
        .expect("prepared")
        .report(records, None)
        .expect("a report")
}

fn loads(runs: Vec<PageRun>) -> Vec<Record> {
    runs.into_iter().map(Record::Load).collect()
}

#[test]
fn the_pages_report_compares_each_control_with_cubic_page_by_page() {
    let run = page_run;
    let config = Config {
        settings: vec![Setting::Lte],
        protocols: vec![PageType::H2],
        ..Config::default()
    };
    let runs = vec![
        run("a", "cubic", 1.0),
        run("a", FLD, 0.5),
        run("b", "cubic", 2.0),
        run("b", FLD, 2.5),
    ];
    let r = report_of(&config, loads(runs));
    let fig6 = &r.sections[0].table;
    let fld = fig6
        .rows
        .iter()
        .find(|row| row[2] == FLD)
        .expect("a row for FLD");
    // Page a: 1.0 -> 0.5 (+50 %), page b: 2.0 -> 2.5 (-25 %); the
    // median of the changes +12.5 %, the sums 3.0 -> 3.0 (0 %); FLD
    // won on one page of two. The median over pages is 1.5 for both.
    assert_eq!(fld[3], "1.500");
    assert_eq!(fld[5], "12.5");
    assert_eq!(fld[6], "0.0");
    assert_eq!(fld[7], "1/2");
    let sizes = r
        .sections
        .iter()
        .find(|s| s.csv == "connection-sizes.csv")
        .expect("the connection-size table");
    assert_eq!(sizes.table.rows[0][2..], ["4", "50.0", "50.0"]);
}

#[test]
fn chromium_types_compare_load_times() {
    // Chromium gives a load time and no net transfer time.
    let run = |protocol: PageType, cc: &str, plt: f64| PageRun {
        protocol,
        plt_s: Some(plt),
        net_transfer_s: None,
        ..page_run("a", cc, 9.0)
    };
    let runs = vec![
        run(PageType::Chromium, "cubic", 1.0),
        run(PageType::Chromium, FLD, 0.8),
        run(PageType::ChromiumH1, "cubic", 2.0),
        run(PageType::ChromiumH1, FLD, 2.5),
    ];
    let h2 = against_cubic(&runs, "lte", PageType::Chromium, &Congestion::Fld);
    let h1 = against_cubic(&runs, "lte", PageType::ChromiumH1, &Congestion::Fld);
    assert_eq!(h2.median_change_pct.map(f64::round), Some(20.0));
    assert_eq!((h2.pages, h2.faster), (1, 1));
    assert_eq!(h1.median_change_pct.map(f64::round), Some(-25.0));
    assert_eq!((h1.pages, h1.faster), (1, 0));
    // The same from the paired loads (page a, run 0): FLD 20 % faster.
    let paired = h2.paired.expect("one pair");
    assert_eq!((paired.pairs, paired.won), (1, 1));
    assert!((paired.median_change + 0.2).abs() < 1e-9, "{paired:?}");
}

#[test]
fn a_queue_sweep_compares_with_cubic_at_each_queue() {
    // Old config files give one queue as a number.
    let old: Config = serde_json::from_str(r#"{"queue_ms": 20}"#).unwrap();
    assert_eq!(old.queue_ms, vec![20]);
    assert_eq!(
        old.cells()[0].label,
        "lte",
        "one queue keeps the setting's name"
    );
    let config = Config {
        settings: vec![Setting::Lte],
        protocols: vec![PageType::H1],
        queue_ms: vec![10, 100],
        ..Config::default()
    };
    let labels: Vec<String> = config.cells().into_iter().map(|c| c.label).collect();
    assert_eq!(labels, ["lte-q10", "lte-q100"]);
    let run = |setting: &str, page: &str, cc: &str, net: f64| PageRun {
        setting: setting.into(),
        queue_ms: None,
        protocol: PageType::H1,
        ..page_run(page, cc, net)
    };
    // At 10 ms FLD is 20 % slower on both pages, at 100 ms 10 % and
    // 30 % faster.
    let runs = vec![
        run("lte-q10", "a", "cubic", 1.0),
        run("lte-q10", "a", FLD, 1.2),
        run("lte-q10", "b", "cubic", 2.0),
        run("lte-q10", "b", FLD, 2.4),
        run("lte-q100", "a", "cubic", 1.0),
        run("lte-q100", "a", FLD, 0.9),
        run("lte-q100", "b", "cubic", 2.0),
        run("lte-q100", "b", FLD, 1.4),
    ];
    let r = report_of(&config, loads(runs));
    let sweep = &r
        .sections
        .iter()
        .find(|s| s.csv == "queue-sweep.csv")
        .expect("a sweep table")
        .table;
    let cells: Vec<(&str, &str, &str)> = sweep
        .rows
        .iter()
        .map(|r| (r[1].as_str(), r[4].as_str(), r[6].as_str()))
        .collect();
    assert_eq!(cells, [("10", "-20.0", "0/2"), ("100", "20.0", "2/2")]);
    let plot = r
        .plots
        .iter()
        .find(|p| p.file == "queue-sweep-lte.svg")
        .expect("a sweep plot");
    let points = &plot.series[0].points;
    assert_eq!(points.len(), 2);
    for (&(q, change), (want_q, want)) in points.iter().zip([(10.0, -20.0), (100.0, 20.0)]) {
        assert_eq!(q, want_q);
        assert!((change - want).abs() < 1e-9, "{change} at {q} ms");
    }
    // Fig. 6 has a row per queue.
    let fig6 = &r.sections[0].table;
    assert!(fig6.rows.iter().any(|r| r[0] == "lte-q100"));
}

/// A cross log of `seconds` seconds, each flow carrying `bps`.
fn cross(name: &str, bps: u64, seconds: usize, loads: Option<usize>) -> Record {
    let mut setting = Setting::Lte.network();
    setting.name = name.into();
    Record::Cross(CrossEntry {
        log: CrossLog {
            flows: setting.cross.clone(),
            interval_s: 1.0,
            bytes: vec![vec![bps / 8; seconds]; setting.cross.len()],
        },
        setting,
        loads,
    })
}

#[test]
fn a_resumed_setting_has_a_log_per_testbed_and_the_report_says_so() {
    let config = Config {
        settings: vec![Setting::Lte],
        protocols: vec![PageType::H2],
        ..Config::default()
    };
    let runs = || {
        loads(vec![
            page_run("a", "cubic", 1.0),
            page_run("a", FLD, 0.5),
            page_run("b", "cubic", 2.0),
            page_run("b", FLD, 2.5),
        ])
    };
    // One testbed for every load: the table as it always was.
    let mut records = runs();
    records.push(cross("lte", 25_000_000, 11, Some(4)));
    let r = report_of(&config, records);
    let t = r.sections.last().expect("the cross table");
    assert_eq!(t.title, "Cross traffic");
    assert_eq!(
        t.table.rows,
        [[
            "lte",
            "100",
            "tcp/cubic tcp/cubic tcp/cubic",
            "75.0",
            "25.0",
            "26.0"
        ]]
    );
    assert!(!t.note.contains("resumed"), "{}", t.note);
    assert_eq!(
        r.extra.iter().map(|e| e.0.as_str()).collect::<Vec<_>>(),
        ["cross-lte.csv"]
    );
    // Interrupted after one load (its testbed's log lost), resumed for
    // the other three, then a second testbed for none: the logs cover
    // three loads, the mean weighs them by length.
    let mut records = runs();
    records.push(cross("lte", 20_000_000, 11, Some(3)));
    records.push(cross("lte", 30_000_000, 11, Some(0)));
    let r = report_of(&config, records);
    let t = r.sections.last().expect("the cross table");
    assert_eq!(t.table.rows[0][3], "75.0");
    assert!(
        t.note.contains("lte: 2 logs over 3 of its 4 loads"),
        "{}",
        t.note
    );
    assert_eq!(
        r.extra.iter().map(|e| e.0.as_str()).collect::<Vec<_>>(),
        ["cross-lte.csv", "cross-lte-2.csv"]
    );
}

#[test]
fn a_folder_from_before_the_journal_is_rebuilt_from_its_result() {
    let dir = std::env::temp_dir().join(format!("mewa-fld-older-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let config = Config {
        settings: vec![Setting::Lte],
        protocols: vec![PageType::H2],
        ..Config::default()
    };
    std::fs::write(
        dir.join("config.json"),
        serde_json::to_string(&config).unwrap(),
    )
    .unwrap();
    let meta = mewa_report::Provenance::now("fld-pages", "mewa lab fld pages", &dir);
    std::fs::write(dir.join("meta.json"), serde_json::to_string(&meta).unwrap()).unwrap();
    // As the runner wrote it: the loads, and cross entries without a count.
    let mut a = serde_json::to_value(page_run("a", "cubic", 1.0)).unwrap();
    a.as_object_mut().unwrap().remove("queue_ms");
    a.as_object_mut().unwrap().remove("server_tcp");
    let b = serde_json::to_value(page_run("a", FLD, 0.5)).unwrap();
    let Record::Cross(c) = cross("lte", 25_000_000, 11, None) else {
        unreachable!()
    };
    let result = serde_json::json!({
        "runs": [a, b],
        "cross": [{"setting": c.setting, "log": c.log}],
    });
    std::fs::write(dir.join("result.json"), result.to_string()).unwrap();
    let r = Pages::report_again(&dir).expect("rebuilt");
    let fig6 = &r.sections[0].table;
    let fld = fig6.rows.iter().find(|row| row[2] == FLD).expect("FLD");
    assert_eq!(fld[5], "50.0");
    let t = r.sections.last().expect("the cross table");
    assert_eq!(t.table.rows[0][3], "75.0");
    assert!(!t.note.contains("resumed"), "{}", t.note);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn every_load_is_a_unit_and_mistakes_are_found_before_anything_starts() {
    let config = Config {
        corpus: crate::experiment::CorpusChoice {
            path: None,
            pages: vec!["meh15-01".into()],
        },
        settings: vec![Setting::Lte, Setting::ThreeG],
        loads: 3,
        queue_ms: vec![10, 50],
        ..Config::default()
    };
    let p = Pages::prepare(&config).expect("prepared");
    let units = p.units();
    // 2 settings × 2 queues × 3 loads × 1 page × 2 types × 2 controls.
    assert_eq!(units.len(), 2 * 2 * 3 * 2 * 2);
    assert!(units.iter().all(|u| u.loads == 1));
    let keys: std::collections::HashSet<&str> = units.iter().map(|u| u.key.as_str()).collect();
    assert_eq!(keys.len(), units.len());
    let first = format!("lte-q10/run0/{}/h2/", p.corpus.pages[0].name);
    assert!(p.corpus.pages[0].name.starts_with("meh15-01"));
    assert!(units[0].key.starts_with(&first), "{}", units[0].key);
    for bad in [
        Config {
            loads: 0,
            ..config.clone()
        },
        Config {
            queue_ms: vec![0],
            ..config.clone()
        },
        Config {
            ccs: Vec::new(),
            ..config.clone()
        },
    ] {
        assert!(Pages::prepare(&bad).is_err());
    }
    // Old names in config.json read as the enums.
    let old: Config = serde_json::from_str(
        r#"{"settings": ["3g"], "ccs": ["cubic", "mewa_fld_paced"], "protocols": ["chromium-h1"]}"#,
    )
    .unwrap();
    assert_eq!(old.settings, [Setting::ThreeG]);
    assert_eq!(old.ccs, [Congestion::Cubic, Congestion::FldPaced]);
    assert_eq!(old.protocols, [PageType::ChromiumH1]);
    assert!(serde_json::from_str::<Config>(r#"{"settings": ["5g"]}"#).is_err());
}

#[test]
fn records_read_back_as_loads_or_cross_logs() {
    let load = Record::Load(page_run("a", "cubic", 1.0));
    let log = cross("lte", 1_000_000, 3, Some(2));
    for r in [load, log] {
        let json = serde_json::to_string(&r).unwrap();
        let back: Record = serde_json::from_str(&json).unwrap();
        assert_eq!(
            std::mem::discriminant(&back),
            std::mem::discriminant(&r),
            "{json}"
        );
    }
    // The flows of a setting are as they were written.
    assert_eq!(
        Setting::ThreeG.network().cross,
        vec![Flow::Tcp { cc: "cubic".into() }; 2]
    );
}
