//! The `mewa` binary end to end: verbs, output formats, figures and errors.

use std::path::PathBuf;
use std::process::{Command, Output};

fn mewa(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_mewa"))
        .args(args)
        .output()
        .expect("run mewa")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("mewa-cli-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("create a scratch folder");
    d
}

fn hint_fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../hint/tests/fixtures")
}

#[test]
fn table1_json_matches_the_paper_layout() {
    let o = mewa(&["model", "table1", "--json"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    let cells = v.as_array().unwrap();
    assert_eq!(cells.len(), 30);
    let same = cells.iter().filter(|c| c["n"] == c["paper_n"]).count();
    assert_eq!(same, 21);
}

#[test]
fn text_csv_and_plot() {
    let o = mewa(&["model", "fld", "--csv"]);
    assert!(o.status.success());
    let csv = stdout(&o);
    assert!(csv.starts_with("rtt,reno_window,fld_window,reno_cum_kB,fld_cum_kB\n"));
    assert!(csv.contains("\n2,20,30,45,60\n"), "{csv}");

    let dir = scratch("plot");
    let svg = dir.join("idle.svg");
    let o = mewa(&["model", "idle", "--plot", svg.to_str().unwrap()]);
    assert!(o.status.success());
    assert!(stdout(&o).contains("(paper 52.3%)"));
    let body = std::fs::read_to_string(&svg).unwrap();
    assert!(
        body.contains("<svg") && body.contains("polyline"),
        "not an SVG chart"
    );
}

#[test]
fn model_all_writes_every_figure() {
    let dir = scratch("all");
    let o = mewa(&["model", "--out", dir.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    for f in ["table1", "idle", "idle-iw4", "iw", "iw-marginal", "fld"] {
        assert!(dir.join(format!("{f}.svg")).is_file(), "{f}.svg missing");
        assert!(dir.join(format!("{f}.csv")).is_file(), "{f}.csv missing");
    }
}

#[test]
fn hint_stats_over_fixtures() {
    let o = mewa(&["hint", "stats", hint_fixtures().to_str().unwrap(), "--json"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    // The truncated fixture is skipped with a message, the others are measured.
    assert_eq!(v["failed_files"], 1);
    assert!(String::from_utf8_lossy(&o.stderr).contains("truncated.har"));
    assert!(v["pages"].as_u64().unwrap() >= 4);
    for r in v["rows"].as_array().unwrap() {
        assert!(r["sent_bytes"].as_u64().unwrap() <= 1232);
    }
}

#[test]
fn hint_encode_round_trips() {
    let f = hint_fixtures().join("chrome-two-pages.har");
    let o = mewa(&["hint", "encode", f.to_str().unwrap(), "--json"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v.as_array().unwrap().len(), 2);
    assert_eq!(v[0]["hint"]["page_url"], "https://news.example/");
}

#[test]
fn errors_name_the_bad_input() {
    let o = mewa(&["hint", "encode", "/nonexistent/page.har"]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("/nonexistent/page.har"));

    let f = hint_fixtures().join("broken/truncated.har");
    let o = mewa(&["hint", "encode", f.to_str().unwrap()]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("truncated.har"));

    let o = mewa(&["model", "fld", "--rtts", "0"]);
    assert!(!o.status.success());

    let f = hint_fixtures().join("chrome-two-pages.har");
    let o = mewa(&["hint", "encode", f.to_str().unwrap(), "--alpha=-1"]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("--alpha"));
}
