//! The `mewa` binary end to end: verbs, output formats, figures and errors.

use std::path::PathBuf;
use std::process::{Command, Output};

use mewa_testkit::TempDir;

fn mewa(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_mewa"))
        .args(args)
        .output()
        .expect("run mewa")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// A scratch folder per test, removed when the test ends.
type Scratch = TempDir;

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

    let dir = Scratch::new("plot");
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
    let dir = Scratch::new("all");
    let o = mewa(&["model", "--out", dir.path().to_str().unwrap()]);
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
fn hint_stats_reports_every_page_even_over_budget() {
    // A budget no hint fits: every page is still reported, marked.
    let dir = hint_fixtures();
    let o = mewa(&[
        "hint",
        "stats",
        dir.to_str().unwrap(),
        "--budget",
        "40B",
        "--json",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    let rows = v["rows"].as_array().unwrap();
    assert!(rows.len() >= 4);
    for r in rows {
        assert!(r["sent_bytes"].is_null() && r["form"].is_null(), "{r}");
        assert!(r["over_budget"].as_str().unwrap().contains("partial form"));
    }
    assert!(String::from_utf8_lossy(&o.stderr).contains("over budget"));
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

#[test]
fn edge_trace_without_chromium_says_how_to_get_it() {
    let d = Scratch::new("trace");
    let store = d.join("edge.sqlite");
    let o = mewa(&[
        "edge",
        "trace",
        "http://www.a.example/",
        "--chromium",
        "/nonexistent/chromium",
        "--store",
        store.to_str().unwrap(),
    ]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("apt-get install chromium") && err.contains("/nonexistent/chromium"),
        "{err}"
    );
}

/// Whether a `sleep 100` process exists (read from /proc, no tools needed).
fn sleep_100_running() -> bool {
    std::fs::read_dir("/proc")
        .expect("read /proc")
        .filter_map(Result::ok)
        .filter_map(|e| std::fs::read(e.path().join("cmdline")).ok())
        .any(|c| c == b"sleep\x00100\x00")
}

/// Names of mewa's namespaces and devices that belong to process `pid`.
fn leftovers(pid: u32) -> Vec<String> {
    let prefix = format!("mewa-{pid}-");
    let mut found = Vec::new();
    for args in [&["netns", "list"][..], &["-o", "link", "show"][..]] {
        let o = Command::new("ip").args(args).output().expect("run ip");
        for line in String::from_utf8_lossy(&o.stdout).lines() {
            if line.contains(&prefix) {
                found.push(line.to_string());
            }
        }
    }
    found
}

#[test]
fn link_runs_a_program_and_passes_its_exit_code() {
    if mewa_testkit::skip_unless_root() {
        return;
    }
    let o = mewa(&[
        "link",
        "--delay",
        "5ms",
        "--",
        "sh",
        "-c",
        "test -n \"$MEWA_LINK_GATEWAY\" && exit 7",
    ]);
    assert_eq!(
        o.status.code(),
        Some(7),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

#[test]
fn link_runs_the_program_as_the_user_who_ran_sudo() {
    if mewa_testkit::skip_unless_root() {
        return;
    }
    let ids = |extra: &[&str]| {
        let o = Command::new(env!("CARGO_BIN_EXE_mewa"))
            .arg("link")
            .args(extra)
            .args(["--", "sh", "-c", "echo $(id -u) $(id -g)"])
            .env("SUDO_UID", "65534")
            .env("SUDO_GID", "65534")
            .output()
            .expect("run mewa link");
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8_lossy(&o.stdout).trim().to_string()
    };
    assert_eq!(ids(&[]), "65534 65534");
    assert_eq!(ids(&["--keep-root"]), "0 0");
}

#[test]
fn killed_link_run_is_cleaned_up_by_the_next() {
    if mewa_testkit::skip_unless_root() {
        return;
    }
    let mut child = Command::new(env!("CARGO_BIN_EXE_mewa"))
        .args(["link", "--delay", "5ms", "--", "sleep", "100"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("start mewa link");
    assert!(
        !sleep_100_running(),
        "another `sleep 100` is running; this test needs it not to"
    );
    let pid = child.id();
    // Wait (at most 10 s) for its namespace to exist.
    let t0 = std::time::Instant::now();
    while leftovers(pid).is_empty() || !sleep_100_running() {
        assert!(
            t0.elapsed() < std::time::Duration::from_secs(10),
            "mewa link never set up its namespace"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    child.kill().expect("SIGKILL mewa link");
    let _ = child.wait();
    // A SIGKILLed run cannot clean up: its namespace is still there …
    assert!(!leftovers(pid).is_empty());
    // … and the wrapped program died with it (setpriv --pdeathsig).
    std::thread::sleep(std::time::Duration::from_millis(200));
    let sleeping = Command::new("pgrep")
        .args(["-f", "^sleep 100$"])
        .output()
        .map(|o| o.stdout)
        .unwrap_or_default();
    assert!(sleeping.is_empty(), "the wrapped program outlived mewa");
    // The next run removes what the dead one left.
    let o = mewa(&["link", "--", "true"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(leftovers(pid), Vec::<String>::new());
}

#[test]
fn terminated_lab_run_leaves_no_namespaces() {
    if mewa_testkit::skip_unless_root() {
        return;
    }
    let s = Scratch::new("lab-term");
    let mut child = Command::new(env!("CARGO_BIN_EXE_mewa"))
        .args(["lab", "meh", "--runs", "30", "--browser-runs", "0", "--out"])
        .arg(s.join("out"))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("start mewa lab meh");
    let pid = child.id();
    // Wait (at most 30 s) for its testbed to exist.
    let t0 = std::time::Instant::now();
    while leftovers(pid).is_empty() {
        assert!(
            t0.elapsed() < std::time::Duration::from_secs(30),
            "mewa lab meh never built its testbed"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    // Let the testbed fill up (edge, origin, links) before the signal.
    std::thread::sleep(std::time::Duration::from_secs(2));
    let term = Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .expect("run kill");
    assert!(term.success());
    let status = child.wait().expect("wait for mewa lab");
    assert_eq!(status.code(), Some(128 + 15), "exit status after SIGTERM");
    assert_eq!(leftovers(pid), Vec::<String>::new());
    // The interrupted run's folder holds its configuration from the start,
    // and its report is rebuilt from whatever its journal holds (without
    // root, nothing loaded).
    let folder = std::fs::read_dir(s.join("out"))
        .expect("the result folder's parent")
        .filter_map(Result::ok)
        .map(|e| e.path())
        .find(|p| p.join("config.json").is_file())
        .expect("a result folder with config.json");
    let o = mewa(&["lab", "meh", "--report", folder.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(stdout(&o).contains("median reduction %"), "{}", stdout(&o));
}

#[test]
fn lab_rejects_bad_options_before_touching_the_network() {
    let o = mewa(&["lab", "load", "--page", "no-such-page"]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("no-such-page"));
    let o = mewa(&["lab", "load", "--rtt", "fast"]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("--rtt"));
    let o = mewa(&["lab", "baseline", "--runs", "0"]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("--runs"));
    let o = mewa(&["lab", "load", "--protocol", "h9"]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("h9"));
}

#[test]
fn lab_load_writes_har_and_records() {
    if mewa_testkit::skip_unless_root() {
        return;
    }
    let s = Scratch::new("lab-load");
    let har = s.join("load.har");
    let json = s.join("load.json");
    let ca = s.join("ca");
    let o = mewa(&[
        "lab",
        "load",
        "--page",
        "622k",
        "--protocol",
        "h2",
        "--tls",
        "--rtt",
        "40ms",
        "--ca-dir",
        ca.to_str().unwrap(),
        "--har",
        har.to_str().unwrap(),
        "--json",
        json.to_str().unwrap(),
        "--out",
        s.join("out").to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(stdout(&o).contains("meh15-02-622k-32"), "{}", stdout(&o));
    // The result folder holds the configuration and its provenance, and
    // the configuration re-runs the same load.
    let folder = std::fs::read_dir(s.join("out"))
        .unwrap()
        .filter_map(Result::ok)
        .map(|e| e.path())
        .find(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("load-")
        })
        .expect("a load-<stamp> folder");
    let meta: serde_json::Value =
        serde_json::from_slice(&std::fs::read(folder.join("meta.json")).unwrap()).unwrap();
    assert_eq!(meta["experiment"], "load");
    assert!(meta["kernel"].as_str().is_some_and(|k| !k.is_empty()));
    let cfg = folder.join("config.json");
    let c: serde_json::Value = serde_json::from_slice(&std::fs::read(&cfg).unwrap()).unwrap();
    assert_eq!(c["rtt_ms"], 40);
    assert_eq!(c["corpus"]["pages"][0], "622k");
    assert!(folder.join("loads.har").is_file() && folder.join("loads.csv").is_file());
    let again = mewa(&["lab", "load", "--config", cfg.to_str().unwrap()]);
    assert!(
        again.status.success(),
        "{}",
        String::from_utf8_lossy(&again.stderr)
    );
    assert!(
        stdout(&again).contains("meh15-02-622k-32"),
        "{}",
        stdout(&again)
    );
    let h: serde_json::Value = serde_json::from_slice(&std::fs::read(&har).unwrap()).unwrap();
    assert_eq!(h["log"]["version"], "1.2");
    let entries = h["log"]["entries"].as_array().unwrap();
    assert_eq!(entries.len(), 32);
    assert!(entries.iter().all(|e| e["response"]["status"] == 200));
    assert!(entries.iter().all(|e| e["request"]["url"]
        .as_str()
        .unwrap()
        .starts_with("https://")));
    let total: u64 = entries
        .iter()
        .map(|e| e["response"]["content"]["size"].as_u64().unwrap())
        .sum();
    assert_eq!(total, 622_000);
    let recs: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert_eq!(recs[0]["connections"].as_array().unwrap().len(), 1);
}

/// Whether this process runs as root (`id -u` is 0).
fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
        .unwrap_or(false)
}

#[test]
fn cc_load_without_privileges_says_it_needs_root() {
    // As root, drop to nobody for the one command (CI runs as root).
    let o = if is_root() {
        let Ok(setpriv) = which_setpriv() else {
            mewa_testkit::skip("needs setpriv (util-linux) to drop root");
            return;
        };
        // A copy nobody can reach: the checkout may sit under a folder
        // only root can enter (/root).
        let dir = Scratch::new("cc-nobody");
        let bin = dir.path().join("mewa");
        std::fs::copy(env!("CARGO_BIN_EXE_mewa"), &bin).expect("copy mewa");
        use std::os::unix::fs::PermissionsExt;
        for p in [dir.path(), bin.as_path()] {
            std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        }
        Command::new(setpriv)
            .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
            .arg(&bin)
            .args(["cc", "load"])
            .output()
            .expect("run mewa under setpriv")
    } else {
        mewa(&["cc", "load"])
    };
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "{err}");
    assert!(
        err.contains("needs root") || err.contains("built without its BPF programs"),
        "{err}"
    );
    // Status needs no privileges and names the control.
    let s = mewa(&["cc", "status"]);
    assert!(s.status.success());
    assert!(stdout(&s).starts_with("mewa_fld: "), "{}", stdout(&s));
}

fn which_setpriv() -> Result<PathBuf, ()> {
    ["/usr/bin/setpriv", "/bin/setpriv"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.exists())
        .ok_or(())
}

/// The window the client asks for (`mewa_client::iw::choose`, what the
/// proxy and the lab's loader send in `mewa-iw`) is the one `mewa model iw`
/// computes for the same page size, RTT, computation latency and α.
#[test]
fn model_iw_one_choice_is_what_the_client_asks() {
    for (bytes, rtt_ms, comp_ms, alpha) in [
        (400_000u64, 100u64, 485u32, 1.0 / 3.0),
        (1_000_000, 50, 300, 1.0 / 3.0),
        (2_400_000, 150, 900, 0.5),
        (400_000, 100, 0, 1.0 / 3.0),
    ] {
        let o = mewa(&[
            "model",
            "iw",
            "--page-size",
            &format!("{bytes}B"),
            "--rtt",
            &format!("{rtt_ms}ms"),
            "--computation",
            &format!("{comp_ms}ms"),
            "--alpha",
            &alpha.to_string(),
        ]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let out = stdout(&o);
        let cli: u32 = out
            .lines()
            .find_map(|l| l.strip_prefix("IW_opt "))
            .and_then(|l| l.split_whitespace().next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("no IW_opt in {out}"));
        let facts = mewa_client::iw::PageFacts {
            page_bytes: bytes,
            computation_ms: Some(comp_ms),
            alpha,
        };
        let asked = mewa_client::iw::choose(facts, std::time::Duration::from_millis(rtt_ms));
        assert_eq!(cli, asked.segments, "{bytes} B, {rtt_ms} ms, {comp_ms} ms");
    }
    let o = mewa(&["model", "iw", "--page-size", "400kB"]);
    assert!(
        !o.status.success(),
        "the one choice needs its RTT and computation"
    );
}

/// Every quantity on the command line takes its unit: a bare number is
/// refused before anything runs, and the message names the flag and shows
/// the accepted form.
#[test]
fn bare_numbers_are_refused_with_the_accepted_form() {
    let f = hint_fixtures().join("chrome-two-pages.har");
    let har = f.to_str().unwrap();
    for (args, flag, form) in [
        (
            &[
                "model",
                "iw",
                "--page-size",
                "400000",
                "--rtt",
                "100ms",
                "--computation",
                "485ms",
            ][..],
            "--page-size",
            "500kB",
        ),
        (
            &[
                "model",
                "iw",
                "--page-size",
                "400kB",
                "--rtt",
                "100",
                "--computation",
                "485ms",
            ],
            "--rtt",
            "150ms",
        ),
        (&["hint", "encode", har, "--ttl", "300"], "--ttl", "2s"),
        (
            &["hint", "encode", har, "--origin-rtt", "40"],
            "--origin-rtt",
            "150ms",
        ),
        (
            &["edge", "trace", "http://www.a.example/", "--timeout", "30"],
            "--timeout",
            "2s",
        ),
        (
            &[
                "client",
                "plan",
                "http://www.a.example/",
                "--radio-rtt",
                "45",
            ],
            "--radio-rtt",
            "150ms",
        ),
        (
            &["client", "proxy", "--bandwidth", "32"],
            "--bandwidth",
            "32mbit",
        ),
        (
            &[
                "cc",
                "rto",
                "--cgroup",
                "/nonexistent",
                "--peer",
                "10.0.0.0/8",
                "--syn-rto",
                "3000",
            ],
            "--syn-rto",
            "2s",
        ),
        (
            &["origin", "serve", "corpus.json", "--sndbuf", "262144"],
            "--sndbuf",
            "500kB",
        ),
        (
            &["link", "--queue", "droptail:bytes=100000", "--", "true"],
            "--queue",
            "bytes=150kB",
        ),
        (&["bench", "edge", "--soak", "600"], "--soak", "2s"),
    ] {
        let o = mewa(args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "{args:?} ran");
        assert!(err.contains(flag) && err.contains(form), "{args:?}: {err}");
    }
}
