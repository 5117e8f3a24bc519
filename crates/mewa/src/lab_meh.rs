//! `mewa lab meh`: seed 000's Mobile Edge Hint experiment (docs/LAB.md):
//! every page with and without the hint, back to back, and the report beside
//! the paper's figures.

use std::fmt::Write as _;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use clap::Args;
use mewa_lab::meh::{self, BrowserRun, Dispatch, MehConfig, MehResult, Policy, RadioLink};
use mewa_link::core::trace::DeliveryTrace;

use crate::lab::{
    bar, ca_dir_of, corpus_of, needs_root, rate_of, rtt_ms, stamp, write, CorpusArgs,
};
use crate::output::Table;
use mewa_lab::report::{self as plot, Chart, Mark, Series};

/// Seed 000's printed figures, for the report.
const PAPER_MEDIAN_WITHOUT_S: f64 = 2.38;
const PAPER_MEDIAN_WITH_S: f64 = 1.89;
const PAPER_MEDIAN_REDUCTION_PCT: f64 = 20.5;
const PAPER_BEST_REDUCTION_PCT: f64 = 34.5;
/// Fig. 8's three pages: (KB, objects, median reduction %).
const PAPER_FIG8: [(u64, usize, f64); 3] = [(622, 32, 34.5), (1412, 72, 24.3), (3648, 46, 6.03)];

/// The Fig. 8 page a page of `bytes` stands for: the one within a quarter
/// of its size.
fn fig8_of(bytes: u64) -> Option<(u64, usize, f64)> {
    PAPER_FIG8
        .into_iter()
        .find(|&(kb, _, _)| bytes.abs_diff(kb * 1000) <= kb * 250)
}

#[derive(Debug, Args)]
pub struct MehArgs {
    #[command(flatten)]
    corpus: CorpusArgs,
    /// Loads per page and variant (seed 000: 30).
    #[arg(long, default_value_t = 30)]
    runs: usize,
    /// Radio link rate both ways (seed 000 §IV: 32 Mbit/s average).
    #[arg(long, default_value = "32mbit", conflicts_with = "trace")]
    rate: String,
    /// Instead of a fixed rate: a mahimahi downlink trace (`X.down`; the
    /// uplink is `X.up` beside it). A bare name is looked up in
    /// ../shared/data/traces.
    #[arg(long)]
    trace: Option<PathBuf>,
    /// Round trip over the radio link, client ⇄ edge.
    #[arg(long, default_value = "45ms")]
    radio_rtt: String,
    /// Round trip edge ⇄ origin (seed 000: 65 ms end to end on average).
    #[arg(long, default_value = "20ms")]
    wired_rtt: String,
    /// Radio bandwidth the client plans with; default: the link's rate, or
    /// the trace's mean downlink rate.
    #[arg(long)]
    bandwidth: Option<String>,
    /// How objects are spread over the connections: `warm-first` (HTML,
    /// CSS and scripts on the document's connection, the rest by the
    /// hint's size-balanced assignment) or `hint` (the hint's assignment
    /// for everything, seed 000 as written).
    #[arg(long, default_value = "warm-first")]
    policy: Policy,
    /// When the hint-aware client requests images, fonts and media:
    /// `auto` (default: push when it prefetches the hint's URLs, pull-rate
    /// otherwise), `pull-rate` (each leaf waits for the connection that
    /// would finish it first at its delivery rate over the last RTT,
    /// holding at most twice that; a fresh connection gets large leaves
    /// only once it has shown it can move two initial windows per RTT),
    /// `pull` (at most a bandwidth-delay product outstanding per
    /// connection) or `push` (as soon as found or prefetched, on the
    /// connection the policy chose: seed 000's static split by size). The
    /// browser runs' proxy follows: auto, pull-rate, or push for push and
    /// pull.
    #[arg(long, default_value = "auto")]
    dispatch: Dispatch,
    /// With the hint, do not request the objects whose URLs the hint
    /// carries before the page reveals them: the hint then only sets the
    /// number of connections and the assignment (by default the client
    /// requests them right after the document, as seed 000's client "sends
    /// requests to all embedded URLs on parallel connections").
    #[arg(long)]
    no_prefetch: bool,
    /// Also load seed 000's Fig. 8 pages (the corpus pages nearest 622 KB,
    /// 1412 KB and 3648 KB) in headless Chromium through the local proxy,
    /// this many times with and without the hint; 0 skips it. Skipped with
    /// a message when Chromium is not installed.
    #[arg(long, default_value_t = 5)]
    browser_runs: usize,
    /// Chromium binary for the browser runs.
    #[arg(long, default_value = "/usr/bin/chromium")]
    chromium: PathBuf,
    /// Keep every browser load's Chromium NetLog (a few MB each) in the
    /// result folder's chromium/, named PAGE-RUN-WITHHINT.netlog.json, to
    /// see where a load's time goes (chrome://net-export viewer).
    #[arg(long)]
    keep_netlogs: bool,
    /// Parent of the timestamped result folder.
    #[arg(long, short, default_value = "out/lab")]
    out: PathBuf,
}

fn find_trace(p: &Path) -> anyhow::Result<(PathBuf, PathBuf)> {
    let down = if p.exists() {
        p.to_path_buf()
    } else {
        let shared = Path::new("../shared/data/traces").join(p);
        let with_ext = shared.with_extension("down");
        if shared.exists() {
            shared
        } else if with_ext.exists() {
            with_ext
        } else {
            bail!(
                "--trace {}: no such file, nor in ../shared/data/traces (e.g. Verizon-LTE-short.down)",
                p.display()
            );
        }
    };
    let name = down.to_string_lossy().to_string();
    let Some(stem) = name.strip_suffix(".down") else {
        bail!("--trace {name}: give the downlink trace, named X.down (X.up must sit beside it)");
    };
    let up = PathBuf::from(format!("{stem}.up"));
    if !up.exists() {
        bail!(
            "--trace {name}: the uplink trace {} is missing",
            up.display()
        );
    }
    Ok((down, up))
}

fn read_trace(p: &Path) -> anyhow::Result<DeliveryTrace> {
    let text =
        std::fs::read_to_string(p).with_context(|| format!("reading trace {}", p.display()))?;
    DeliveryTrace::parse(&text).with_context(|| format!("trace {}", p.display()))
}

pub fn run(a: MehArgs) -> anyhow::Result<()> {
    let corpus = corpus_of(&a.corpus)?;
    if a.runs == 0 {
        bail!("--runs must be at least 1");
    }
    let (radio, link_bps) = match &a.trace {
        Some(t) => {
            let (down, up) = find_trace(t)?;
            let (d, u) = (read_trace(&down)?, read_trace(&up)?);
            let mean = d.mean_bps();
            let name = down.file_name().map_or_else(
                || down.display().to_string(),
                |n| n.to_string_lossy().into(),
            );
            (
                RadioLink::Trace {
                    name,
                    down: d,
                    up: u,
                },
                mean,
            )
        }
        None => {
            let bps = rate_of(&a.rate)?;
            (RadioLink::Fixed { rate_bps: bps }, bps as f64)
        }
    };
    let planned = match &a.bandwidth {
        Some(b) => rate_of(b)? as f64,
        None => link_bps,
    };
    let dir = a.out.join(format!("meh-{}", stamp()));
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let cfg = MehConfig {
        radio,
        radio_rtt_ms: rtt_ms(&a.radio_rtt)?,
        wired_rtt_ms: rtt_ms(&a.wired_rtt)?,
        runs: a.runs,
        planned_bandwidth_bps: planned,
        policy: a.policy,
        dispatch: a.dispatch,
        prefetch: !a.no_prefetch,
        congestion: a.corpus.cc.clone(),
        ..MehConfig::seed000(ca_dir_of(&a.corpus)?, dir.join("edge.sqlite"))
    };
    let browser = match (a.browser_runs, a.chromium.exists()) {
        (0, _) => None,
        (n, true) => Some((a.chromium.clone(), n)),
        (_, false) => {
            eprintln!(
                "skipping the browser runs: no Chromium at {} (apt-get install chromium, or --chromium PATH)",
                a.chromium.display()
            );
            None
        }
    };
    let cfg = MehConfig {
        browser,
        keep_netlogs: a.keep_netlogs,
        ..cfg
    };
    needs_root()?;
    let total = cfg.runs * corpus.pages.len() * 2;
    let pb = bar(total);
    let tty = std::io::stderr().is_terminal();
    let step = (total / 20).max(1);
    let res = meh::run(&corpus, &cfg, &mut |p| {
        pb.set_position(p.done as u64);
        pb.set_message(p.what.to_string());
        if !tty && (p.done % step == 0 || p.done == p.total) {
            eprintln!("[{}/{}] {}", p.done, p.total, p.what);
        }
    });
    pb.finish_and_clear();
    let res = res.context("MEH experiment")?;
    let link = match &cfg.radio {
        RadioLink::Fixed { rate_bps } => format!("{:.0} Mbit/s", *rate_bps as f64 / 1e6),
        RadioLink::Trace { name, .. } => {
            format!("trace {name} (mean {:.1} Mbit/s)", link_bps / 1e6)
        }
    };
    let setting = format!(
        "radio {link}, RTT {} ms radio + {} ms wired, {} runs, policy {:?}, dispatch {:?}, prefetch {}, planned bandwidth {:.1} Mbit/s",
        cfg.radio_rtt_ms,
        cfg.wired_rtt_ms,
        cfg.runs,
        cfg.policy,
        cfg.dispatch,
        if cfg.prefetch { "on" } else { "off" },
        cfg.planned_bandwidth_bps / 1e6
    );
    write_results(&dir, &res, &setting)?;
    print!("{}", pages_table(&res).to_text());
    println!();
    if !res.browser.is_empty() {
        print!("{}", browser_table(&res).to_text());
        println!();
    }
    print!("{}", summary(&res, &setting));
    println!("results: {}", dir.display());
    Ok(())
}

fn opt(v: Option<f64>, digits: usize) -> String {
    v.map_or_else(|| "-".into(), |x| format!("{x:.digits$}"))
}

fn pages_table(res: &MehResult) -> Table {
    let mut t = Table::new(&[
        "page",
        "KB",
        "objects",
        "n",
        "hint B",
        "full hint B",
        "without s",
        "with s",
        "reduction %",
        "failed",
    ]);
    for p in &res.pages {
        t.push(vec![
            p.page.clone(),
            format!("{:.0}", p.page_bytes as f64 / 1000.0),
            p.objects.to_string(),
            p.n.to_string(),
            p.hint_bytes.to_string(),
            p.full_hint_bytes
                .map_or_else(|| "-".into(), |b| b.to_string()),
            opt(p.median_without_s, 3),
            opt(p.median_with_s, 3),
            opt(p.reduction_pct, 1),
            p.failed.to_string(),
        ]);
    }
    t
}

/// Chromium through the proxy: per page, median with and without, and
/// when Chromium had asked for the whole page (the rest is what more
/// connections can shorten).
fn browser_table(res: &MehResult) -> Table {
    let mut t = Table::new(&[
        "Chromium page",
        "n",
        "without s",
        "with s",
        "reduction %",
        "all asked s (without/with)",
        "failed",
        "seed 000 %",
    ]);
    // Pages in first-seen order (the runs interleave them).
    let mut names: Vec<&str> = Vec::new();
    for b in &res.browser {
        if !names.contains(&b.page.as_str()) {
            names.push(&b.page);
        }
    }
    for name in names {
        let of = |with: bool, pick: fn(&BrowserRun) -> Option<f64>| {
            let v: Vec<f64> = res
                .browser
                .iter()
                .filter(|b| b.page == name && b.with_hint == with)
                .filter_map(pick)
                .collect();
            mewa_lab::metrics::median(&v)
        };
        let (without, with) = (of(false, |b| b.plt_s), of(true, |b| b.plt_s));
        let asked = |with| of(with, |b| b.requested_s);
        let n = res
            .browser
            .iter()
            .filter(|b| b.page == name && b.with_hint)
            .map(|b| b.n)
            .max()
            .unwrap_or(0);
        t.push(vec![
            name.to_string(),
            n.to_string(),
            opt(without, 3),
            opt(with, 3),
            opt(without.zip(with).map(|(a, b)| (1.0 - b / a) * 100.0), 1),
            format!("{} / {}", opt(asked(false), 3), opt(asked(true), 3)),
            res.browser
                .iter()
                .filter(|b| b.page == name && b.error.is_some())
                .count()
                .to_string(),
            res.pages
                .iter()
                .find(|p| p.page == name)
                .and_then(|p| fig8_of(p.page_bytes))
                .map_or_else(|| "-".into(), |f| format!("{:.1}", f.2)),
        ]);
    }
    t
}

fn runs_table(res: &MehResult) -> Table {
    let mut t = Table::new(&[
        "page",
        "bytes",
        "objects",
        "run",
        "with_hint",
        "ok",
        "plt_s",
        "n",
        "connections",
        "dns_ms",
        "hint_bytes",
        "hint_over_tcp",
        "idle_share",
        "fallback",
        "error",
    ]);
    for r in &res.runs {
        t.push(vec![
            r.page.clone(),
            r.page_bytes.to_string(),
            r.objects.to_string(),
            r.run.to_string(),
            r.with_hint.to_string(),
            r.ok.to_string(),
            opt(r.plt_s, 6),
            r.n.to_string(),
            r.connections.to_string(),
            format!("{:.2}", r.dns_ms),
            r.hint_bytes.to_string(),
            r.hint_over_tcp.to_string(),
            opt(r.idle_share, 4),
            r.fallback.clone().unwrap_or_default(),
            r.error.clone().unwrap_or_default(),
        ]);
    }
    t
}

/// The headline figures beside the paper's, with the issue's targets.
fn summary(res: &MehResult, setting: &str) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "setting: {setting}");
    if let Some(w) = res.measured_wired_rtt_ms {
        let _ = writeln!(s, "wired RTT measured by the edge: {w:.1} ms");
    }
    let mut t = Table::new(&["figure", "measured", "seed 000", "target"]);
    let red = res.median_reduction_pct;
    t.push(vec![
        "median PLT without hint, s".into(),
        opt(res.median_without_s, 3),
        format!("{PAPER_MEDIAN_WITHOUT_S:.2}"),
        "".into(),
    ]);
    t.push(vec![
        "median PLT with hint, s".into(),
        opt(res.median_with_s, 3),
        format!("{PAPER_MEDIAN_WITH_S:.2}"),
        "".into(),
    ]);
    t.push(vec![
        "median reduction %".into(),
        opt(red, 1),
        format!("{PAPER_MEDIAN_REDUCTION_PCT:.1}"),
        format!(
            ">= 20 ({})",
            if red.is_some_and(|r| r >= 20.0) {
                "met"
            } else {
                "NOT met"
            }
        ),
    ]);
    t.push(vec![
        "best page reduction %".into(),
        opt(res.best_reduction_pct, 1),
        format!("{PAPER_BEST_REDUCTION_PCT:.1}"),
        "".into(),
    ]);
    let worst = res.worst_reduction_pct;
    t.push(vec![
        "worst page reduction %".into(),
        opt(worst, 1),
        "-".into(),
        format!(
            ">= -3 ({})",
            if worst.is_some_and(|w| w >= -3.0) {
                "met"
            } else {
                "NOT met"
            }
        ),
    ]);
    t.push(vec![
        "hints <= 1 KB, %".into(),
        format!("{:.0}", res.hints_within_1k * 100.0),
        "-".into(),
        format!(
            ">= 90 ({})",
            if res.hints_within_1k >= 0.9 {
                "met"
            } else {
                "NOT met"
            }
        ),
    ]);
    for (kb, objects, paper) in PAPER_FIG8 {
        // The corpus page closest in size to Fig. 8's, if it is that page
        // (a `--page` selection may have left none).
        let near = res
            .pages
            .iter()
            .min_by_key(|p| p.page_bytes.abs_diff(kb * 1000))
            .filter(|p| fig8_of(p.page_bytes).is_some_and(|f| f.0 == kb));
        if let Some(p) = near {
            t.push(vec![
                format!("Fig. 8 page {kb} KB / {objects} obj: {}", p.page),
                opt(p.reduction_pct, 1),
                format!("{paper:.1}"),
                "".into(),
            ]);
        }
    }
    s.push_str(&t.to_text());
    s
}

fn write_results(dir: &Path, res: &MehResult, setting: &str) -> anyhow::Result<()> {
    write(&dir.join("runs.csv"), &runs_table(res).to_csv())?;
    write(&dir.join("pages.csv"), &pages_table(res).to_csv())?;
    write(
        &dir.join("result.json"),
        &serde_json::to_string_pretty(res).context("serialising the result")?,
    )?;
    let cdf = |with: bool| -> Vec<(f64, f64)> {
        let mut v: Vec<f64> = res
            .runs
            .iter()
            .filter(|r| r.ok && r.with_hint == with)
            .filter_map(|r| r.plt_s)
            .collect();
        v.sort_by(f64::total_cmp);
        let n = v.len() as f64;
        v.iter()
            .enumerate()
            .flat_map(|(i, &x)| [(x, i as f64 / n), (x, (i + 1) as f64 / n)])
            .collect()
    };
    plot::draw(
        &dir.join("cdf.svg"),
        &Chart {
            title: "Page load time, every page and run (seed 000 Fig. 7)",
            x_label: "page load time (first SYN to last data byte), s",
            y_label: "CDF",
            log_y: false,
        },
        &[
            Series {
                name: "HTTP/2, one connection (without hint)".into(),
                points: cdf(false),
                mark: Mark::Line,
                colour: 0,
            },
            Series {
                name: "with Mobile Edge Hint".into(),
                points: cdf(true),
                mark: Mark::Line,
                colour: 1,
            },
        ],
    )?;
    let groups: Vec<plot::BoxGroup> = res
        .pages
        .iter()
        .map(|p| {
            let of = |with: bool| -> Vec<f64> {
                res.runs
                    .iter()
                    .filter(|r| r.page == p.page && r.ok && r.with_hint == with)
                    .filter_map(|r| r.plt_s)
                    .collect()
            };
            plot::BoxGroup {
                label: format!("{:.0}k n={}", p.page_bytes as f64 / 1000.0, p.n),
                boxes: vec![of(false), of(true)],
            }
        })
        .collect();
    plot::draw_boxes(
        &dir.join("pages-box.svg"),
        "Page load time per page, without (left) and with (right) the hint (seed 000 Fig. 8)",
        "page load time, s",
        &["without hint", "with hint"],
        &groups,
    )?;
    let mut md = String::new();
    let _ = writeln!(md, "# mewa lab meh\n\n{setting}\n");
    let _ = writeln!(md, "## Pages\n\n```\n{}```\n", pages_table(res).to_text());
    let _ = writeln!(
        md,
        "## Beside seed 000\n\n```\n{}```\n",
        summary(res, setting)
    );
    if !res.browser.is_empty() {
        let _ = writeln!(
            md,
            "## Headless Chromium through the local proxy\n\nPLT = from the start of the request for the page's URL to the last event of a request for one of its objects, in Chromium's NetLog (Chromium's own start-up requests and the favicon do not count). All asked = to the start of the page's last request.\n\n```\n{}```\n",
            browser_table(res).to_text()
        );
        let errors: Vec<String> = res
            .browser
            .iter()
            .filter_map(|b| {
                b.error
                    .as_ref()
                    .map(|e| format!("- {} run {}: {e}", b.page, b.run))
            })
            .collect();
        if !errors.is_empty() {
            let _ = writeln!(md, "Errors:\n{}\n", errors.join("\n"));
        }
    }
    let _ = writeln!(
        md,
        "Plots: cdf.svg (all loads), pages-box.svg (per page). Raw loads: runs.csv."
    );
    write(&dir.join("report.md"), &md)
}
