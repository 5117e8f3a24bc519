//! `mewa lab`: experiments over the link emulator with real kernel TCP and
//! the built-in page loader (docs/LAB.md).

use std::fmt::Write as _;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{bail, Context};
use clap::{Args, Subcommand};
use indicatif::{ProgressBar, ProgressStyle};
use mewa_corpus::{generate, Corpus, Preset};
use mewa_lab::baseline::{self, BaselineConfig, BaselineResult};
use mewa_lab::bed::{Bed, OriginSettings};
use mewa_lab::har::{rfc3339_ms, to_har};
use mewa_lab::loader::LoadOptions;
use mewa_lab::metrics::{bytes_per_rtt_bin, max_bytes_per_bin, PageMetrics};
use mewa_lab::record::Protocol;
use mewa_link::core::parse_rate;
use mewa_link::runtime::LinkOptions;

use crate::output::Table;
use mewa_lab::report::{self as plot, Chart, Mark, Series};

/// `mewa lab …`
#[derive(Debug, Args)]
pub struct LabCmd {
    #[command(subcommand)]
    cmd: LabSub,
}

#[derive(Debug, Subcommand)]
enum LabSub {
    /// Seed 000's grid over one HTTP/2 connection, measured beside the
    /// T_HTTP model: 20 Mbit/s, RTT 50–150 ms, 10 runs per page and RTT.
    /// Needs root (network namespaces, TUN). Results go to a timestamped
    /// folder: runs.csv, cells.csv, summary.csv, report.md, plots, HAR.
    Baseline(BaselineArgs),
    /// Load one page through an emulated link and print its metrics;
    /// optionally write the load as HAR 1.2 and as a JSON record.
    Load(LoadArgs),
    /// Seed 000's Mobile Edge Hint experiment: client ⇄ radio link ⇄ edge
    /// (mewa edge: DNS with hints, SQLite store, latency monitor) ⇄ wired
    /// link ⇄ origin, every page back to back with the hint (n planned
    /// connections, objects balanced by size) and without (one HTTP/2
    /// connection), 30 runs each. Needs root. Results: runs.csv, pages.csv,
    /// report.md, cdf.svg, pages-box.svg.
    Meh(crate::lab_meh::MehArgs),
}

#[derive(Debug, Args)]
pub struct CorpusArgs {
    /// Corpus JSON (`mewa corpus gen/import`); default: `meh15` with seed 1.
    #[arg(long)]
    corpus: Option<PathBuf>,
    /// Only pages whose name contains this text (repeatable).
    #[arg(long = "page")]
    pages: Vec<String>,
    /// Directory of the local test CA (default: $XDG_DATA_HOME/mewa/ca or
    /// ~/.local/share/mewa/ca).
    #[arg(long)]
    ca_dir: Option<PathBuf>,
    /// TCP congestion control of the origin's sockets.
    #[arg(long, default_value = "cubic")]
    pub(crate) cc: String,
}

#[derive(Debug, Args)]
struct BaselineArgs {
    #[command(flatten)]
    corpus: CorpusArgs,
    /// Round-trip times, comma-separated (`50ms,75ms` or bare ms).
    #[arg(long, value_delimiter = ',', default_value = "50,75,100,125,150")]
    rtt: Vec<String>,
    /// Bottleneck rate both ways.
    #[arg(long, default_value = "20mbit")]
    rate: String,
    /// Loads per page and RTT.
    #[arg(long, default_value_t = 10)]
    runs: usize,
    /// h2 over TLS instead of h2c (adds the TLS handshake's round trip,
    /// which the model does not count).
    #[arg(long)]
    tls: bool,
    /// Parent of the timestamped result folder.
    #[arg(long, short, default_value = "out/lab")]
    out: PathBuf,
}

#[derive(Debug, Args)]
struct LoadArgs {
    #[command(flatten)]
    corpus: CorpusArgs,
    /// h1, h2 or h3.
    #[arg(long, default_value = "h2")]
    protocol: String,
    /// TLS for h1/h2 (h3 always uses it).
    #[arg(long)]
    tls: bool,
    /// Connections: per host for h1 (default 6), per origin for h2/h3
    /// (default 1).
    #[arg(long)]
    connections: Option<usize>,
    /// How objects are spread over n h2/h3 connections: `least` (fewest
    /// outstanding bytes), `round-robin`, or `warm-first` (HTML/CSS/JS on the
    /// connection that carried the document, leaves by least outstanding).
    #[arg(long, default_value = "least")]
    assign: String,
    /// Pull dispatch for n > 1 h2/h3 connections: at most this many KB
    /// requested and not yet received per connection for images, fonts
    /// and media; the rest wait for the first connection that drains
    /// (HTML, CSS and scripts are never held). Default: request every
    /// object as soon as it is found, as a browser does.
    #[arg(long, value_name = "KB")]
    pull_kb: Option<u64>,
    /// With --pull-kb: a connection's budget grows to twice the bytes it
    /// delivered over the last this-many ms (about one RTT), so a
    /// connection with a small window holds little; --pull-kb is then the
    /// floor.
    #[arg(long, value_name = "MS", requires = "pull_kb")]
    pull_follow_ms: Option<u64>,
    /// Round-trip time of the link.
    #[arg(long, default_value = "100ms")]
    rtt: String,
    /// Bottleneck rate both ways.
    #[arg(long, default_value = "20mbit")]
    rate: String,
    /// Write the load(s) as HAR 1.2 here.
    #[arg(long)]
    har: Option<PathBuf>,
    /// Write the raw load record(s) as JSON here.
    #[arg(long)]
    json: Option<PathBuf>,
}

/// Runs `mewa lab …`.
pub fn run(cmd: LabCmd) -> anyhow::Result<()> {
    match cmd.cmd {
        LabSub::Baseline(a) => run_baseline(a),
        LabSub::Load(a) => run_load(a),
        LabSub::Meh(a) => crate::lab_meh::run(a),
    }
}

pub(crate) fn corpus_of(a: &CorpusArgs) -> anyhow::Result<Corpus> {
    let mut corpus = match &a.corpus {
        Some(p) => {
            let bytes = std::fs::read(p).with_context(|| format!("reading {}", p.display()))?;
            Corpus::from_json(&bytes).with_context(|| format!("corpus {}", p.display()))?
        }
        None => generate(Preset::Meh15, 1),
    };
    if !a.pages.is_empty() {
        corpus
            .pages
            .retain(|p| a.pages.iter().any(|want| p.name.contains(want.as_str())));
        if corpus.pages.is_empty() {
            bail!(
                "no page name contains any of {:?}; list them with `mewa corpus show`",
                a.pages
            );
        }
    }
    Ok(corpus)
}

pub(crate) fn ca_dir_of(a: &CorpusArgs) -> anyhow::Result<PathBuf> {
    match &a.ca_dir {
        Some(d) => Ok(d.clone()),
        None => crate::origin::default_ca_dir(),
    }
}

pub(crate) fn rtt_ms(s: &str) -> anyhow::Result<u64> {
    let d = crate::origin::parse_duration(s).map_err(|e| anyhow::anyhow!("--rtt: {e}"))?;
    let ms = d.as_millis() as u64;
    if ms == 0 || ms > 10_000 {
        bail!("--rtt {s}: give a round trip between 1 ms and 10 s");
    }
    Ok(ms)
}

pub(crate) fn rate_of(s: &str) -> anyhow::Result<u64> {
    parse_rate(s).map_err(|e| anyhow::anyhow!("--rate: {e}"))
}

pub(crate) fn needs_root() -> anyhow::Result<()> {
    mewa_link::runtime::probe().context(
        "the lab builds network namespaces and TUN links: run as root on Linux \
         (`sudo mewa lab …`)",
    )
}

pub(crate) fn bar(total: usize) -> ProgressBar {
    let pb = ProgressBar::new(total as u64);
    if let Ok(style) = ProgressStyle::with_template(
        "{elapsed_precise} [{bar:32}] {pos}/{len} loads, eta {eta}  {msg}",
    ) {
        pb.set_style(style.progress_chars("=> "));
    }
    pb
}

/// `YYYYMMDD-HHMMSS` (UTC) for folder names.
pub(crate) fn stamp() -> String {
    let ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    // 2026-11-22T10:11:12.345Z → 20261122-101112
    rfc3339_ms(ms)
        .chars()
        .filter(|c| c.is_ascii_digit() || *c == 'T')
        .take(15)
        .collect::<String>()
        .replace('T', "-")
}

fn run_baseline(a: BaselineArgs) -> anyhow::Result<()> {
    let corpus = corpus_of(&a.corpus)?;
    let rtts = a
        .rtt
        .iter()
        .map(|s| rtt_ms(s))
        .collect::<anyhow::Result<Vec<_>>>()?;
    if a.runs == 0 {
        bail!("--runs must be at least 1");
    }
    let cfg = BaselineConfig {
        rate_bps: rate_of(&a.rate)?,
        rtts_ms: rtts,
        runs: a.runs,
        tls: a.tls,
        congestion: a.corpus.cc.clone(),
        ..BaselineConfig::seed000(ca_dir_of(&a.corpus)?)
    };
    needs_root()?;
    let dir = a.out.join(format!("baseline-{}", stamp()));
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;

    let total = cfg.rtts_ms.len() * cfg.runs * corpus.pages.len();
    let pb = bar(total);
    // Without a terminal the bar is hidden: log a line every 5 % instead.
    let tty = std::io::stderr().is_terminal();
    let step = (total / 20).max(1);
    let res = baseline::run(&corpus, &cfg, &mut |p| {
        pb.set_position(p.done as u64);
        pb.set_message(p.what.to_string());
        if !tty && (p.done % step == 0 || p.done == p.total) {
            eprintln!("[{}/{}] {}", p.done, p.total, p.what);
        }
    });
    pb.finish_and_clear();
    let res = res.context("baseline experiment")?;
    write_baseline(&dir, &corpus, &res)?;
    print!("{}", summary_table(&res).to_text());
    println!("results: {}", dir.display());
    Ok(())
}

fn opt(v: Option<f64>, digits: usize) -> String {
    v.map_or_else(|| "-".into(), |x| format!("{x:.digits$}"))
}

fn summary_table(res: &BaselineResult) -> Table {
    let mut t = Table::new(&[
        "RTT ms",
        "pages",
        "MdAPE printed %",
        "MdAPE rounds %",
        "MAPE printed %",
        "MAPE rounds %",
        "measured/model",
    ]);
    for s in &res.per_rtt {
        t.push(vec![
            s.rtt_ms.to_string(),
            s.pages.to_string(),
            opt(s.mdape_printed_pct, 1),
            opt(s.mdape_rounds_pct, 1),
            opt(s.mape_printed_pct, 1),
            opt(s.mape_rounds_pct, 1),
            opt(s.median_ratio_printed, 3),
        ]);
    }
    t
}

fn cells_table(res: &BaselineResult) -> Table {
    let mut t = Table::new(&[
        "page",
        "KB",
        "objects",
        "RTT ms",
        "runs ok",
        "measured s",
        "model printed s",
        "model rounds s",
        "APE printed %",
        "APE rounds %",
        "idle measured %",
        "idle model %",
    ]);
    for c in &res.cells {
        t.push(vec![
            c.page.clone(),
            format!("{:.0}", c.page_bytes as f64 / 1000.0),
            c.objects.to_string(),
            c.rtt_ms.to_string(),
            c.runs_ok.to_string(),
            opt(c.measured_s, 3),
            format!("{:.3}", c.model_printed_s),
            format!("{:.3}", c.model_rounds_s),
            opt(c.ape_printed.map(|x| x * 100.0), 1),
            opt(c.ape_rounds.map(|x| x * 100.0), 1),
            opt(c.measured_idle_share.map(|x| x * 100.0), 1),
            format!("{:.1}", c.model_idle_share * 100.0),
        ]);
    }
    t
}

fn runs_table(res: &BaselineResult) -> Table {
    let mut t = Table::new(&[
        "page",
        "bytes",
        "objects",
        "rtt_ms",
        "run",
        "ok",
        "plt_wire_s",
        "plt_loader_s",
        "idle_share",
        "error",
    ]);
    for r in &res.runs {
        t.push(vec![
            r.page.clone(),
            r.page_bytes.to_string(),
            r.objects.to_string(),
            r.rtt_ms.to_string(),
            r.run.to_string(),
            r.ok.to_string(),
            opt(r.plt_wire_s, 6),
            opt(r.plt_loader_s, 6),
            opt(r.idle_share, 4),
            r.error.clone().unwrap_or_default(),
        ]);
    }
    t
}

pub(crate) fn write(path: &Path, text: &str) -> anyhow::Result<()> {
    std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))
}

fn write_baseline(dir: &Path, corpus: &Corpus, res: &BaselineResult) -> anyhow::Result<()> {
    write(&dir.join("runs.csv"), &runs_table(res).to_csv())?;
    write(&dir.join("cells.csv"), &cells_table(res).to_csv())?;
    write(&dir.join("summary.csv"), &summary_table(res).to_csv())?;
    write(
        &dir.join("result.json"),
        &serde_json::to_string_pretty(res).context("serialising the result")?,
    )?;
    for &rtt in &res.config.rtts_ms {
        let recs: Vec<_> = res
            .samples
            .iter()
            .filter(|(r, _)| *r == rtt)
            .map(|(_, rec)| rec.clone())
            .collect();
        let har = serde_json::to_string_pretty(&to_har(&recs)).context("HAR")?;
        write(&dir.join(format!("run0-rtt{rtt}ms.har")), &har)?;
    }

    // Measured against the model, one colour per RTT, and the diagonal.
    let mut series = Vec::new();
    let mut hi: f64 = 0.0;
    for (i, &rtt) in res.config.rtts_ms.iter().enumerate() {
        let points: Vec<(f64, f64)> = res
            .cells
            .iter()
            .filter(|c| c.rtt_ms == rtt)
            .filter_map(|c| c.measured_s.map(|m| (c.model_printed_s, m)))
            .collect();
        hi = points.iter().fold(hi, |h, &(x, y)| h.max(x).max(y));
        series.push(Series {
            name: format!("RTT {rtt} ms"),
            points,
            mark: Mark::Points,
            colour: i,
        });
    }
    series.push(Series {
        name: "measured = model".into(),
        points: vec![(0.0, 0.0), (hi, hi)],
        mark: Mark::Line,
        colour: 9,
    });
    plot::draw(
        &dir.join("measured-vs-model.svg"),
        &Chart {
            title: "Page load time over one HTTP/2 connection: measured vs seed 000 T_HTTP",
            x_label: "model T_HTTP (eq. 1 as printed), s",
            y_label: "measured, first SYN to last byte (median), s",
            log_y: false,
        },
        &series,
    )?;
    let per = |f: fn(&baseline::RttSummary) -> Option<f64>| -> Vec<(f64, f64)> {
        res.per_rtt
            .iter()
            .filter_map(|s| f(s).map(|v| (s.rtt_ms as f64, v)))
            .collect()
    };
    let (lo, hi) = (
        *res.config.rtts_ms.iter().min().unwrap_or(&0) as f64,
        *res.config.rtts_ms.iter().max().unwrap_or(&0) as f64,
    );
    plot::draw(
        &dir.join("error-per-rtt.svg"),
        &Chart {
            title: "Model error per RTT (median absolute % error over pages)",
            x_label: "RTT, ms",
            y_label: "MdAPE, %",
            log_y: false,
        },
        &[
            Series {
                name: "eq. 1 as printed".into(),
                points: per(|s| s.mdape_printed_pct),
                mark: Mark::Line,
                colour: 0,
            },
            Series {
                name: "round by round".into(),
                points: per(|s| s.mdape_rounds_pct),
                mark: Mark::Line,
                colour: 1,
            },
            Series {
                name: "target 15 %".into(),
                points: vec![(lo, 15.0), (hi, 15.0)],
                mark: Mark::Line,
                colour: 9,
            },
        ],
    )?;
    write(&dir.join("report.md"), &report(corpus, res))
}

fn report(corpus: &Corpus, res: &BaselineResult) -> String {
    let c = &res.config;
    let ok = res.runs.iter().filter(|r| r.ok).count();
    let mut s = String::new();
    let _ = writeln!(s, "# Baseline: measured page loads vs seed 000's T_HTTP\n");
    let _ = writeln!(
        s,
        "- corpus `{}`: {} pages; {} loads ({} complete)\n\
         - link: {:.1} Mbit/s both ways, RTT {:?} ms (half each way), unbounded drop-tail queue, no loss\n\
         - one HTTP/2 connection ({}), origin TCP congestion control `{}`, {} runs per page and RTT\n\
         - measured: first SYN to last body byte, median over runs; model: eq. 1 (as printed) and the round-by-round variant, n = 1, S_page = body bytes\n",
        corpus.name,
        corpus.pages.len(),
        res.runs.len(),
        ok,
        c.rate_bps as f64 / 1e6,
        c.rtts_ms,
        if c.tls { "h2 over TLS" } else { "h2c" },
        c.congestion,
        c.runs
    );
    let _ = writeln!(s, "## Model error per RTT (target: MdAPE ≤ 15 %)\n");
    s.push_str(&summary_table(res).to_markdown());
    let _ = writeln!(s, "\n![measured vs model](measured-vs-model.svg)\n");
    let _ = writeln!(s, "![error per RTT](error-per-rtt.svg)\n");
    let _ = writeln!(s, "## Per page and RTT\n");
    s.push_str(&cells_table(res).to_markdown());
    let failed: Vec<_> = res.runs.iter().filter(|r| !r.ok).collect();
    if !failed.is_empty() {
        let _ = writeln!(s, "\n## Failed loads\n");
        for r in failed {
            let _ = writeln!(
                s,
                "- {} at {} ms, run {}: {}",
                r.page,
                r.rtt_ms,
                r.run,
                r.error.as_deref().unwrap_or("?")
            );
        }
    }
    let _ = writeln!(
        s,
        "\nFiles: runs.csv (every load), cells.csv, summary.csv, result.json, \
         run0-rtt*.har (first run of every page, HAR 1.2)."
    );
    s
}

fn run_load(a: LoadArgs) -> anyhow::Result<()> {
    let corpus = corpus_of(&a.corpus)?;
    let protocol: Protocol = a.protocol.parse().map_err(|e: String| anyhow::anyhow!(e))?;
    let rtt = rtt_ms(&a.rtt)?;
    let rate = rate_of(&a.rate)?;
    let ca_dir = ca_dir_of(&a.corpus)?;
    needs_root()?;
    let bed = Bed::start(
        &corpus,
        baseline::link(rate, rtt),
        LinkOptions::default(),
        &OriginSettings {
            congestion: a.corpus.cc.clone(),
            ca_dir,
        },
    )
    .context("starting the testbed")?;
    let mut opts = LoadOptions::browser(protocol, a.tls);
    if let Some(n) = a.connections {
        if n == 0 || n > 64 {
            bail!("--connections {n}: give 1 to 64");
        }
        opts.connections = n;
        opts.preconnect = n > 1 && protocol != Protocol::H1;
    }
    opts.assign = match a.assign.as_str() {
        "least" => std::sync::Arc::new(mewa_lab::loader::LeastOutstanding),
        "round-robin" => std::sync::Arc::new(mewa_lab::loader::RoundRobin::default()),
        "warm-first" => std::sync::Arc::new(mewa_lab::loader::WarmFirst),
        other => bail!("--assign {other}: give least, round-robin or warm-first"),
    };
    if let Some(kb) = a.pull_kb {
        if kb == 0 {
            bail!("--pull-kb 0: give at least 1 (KB per connection)");
        }
        opts.pull_budget = Some(kb.saturating_mul(1000));
    }
    if a.pull_follow_ms == Some(0) {
        bail!("--pull-follow-ms 0: give the window in ms, about one RTT (e.g. 65)");
    }
    opts.pull_follow = a.pull_follow_ms.map(std::time::Duration::from_millis);
    let opts = bed.options(opts);
    let mut t = Table::new(&[
        "page",
        "KB",
        "objects",
        "conns",
        "PLT wire s",
        "PLT loader s",
        "idle %",
        "eff. concurrency",
        "first RTT bins KB",
    ]);
    let mut records = Vec::new();
    for page in &corpus.pages {
        let rec = bed.load(page, &opts)?;
        let m = PageMetrics::from_record(&rec);
        let bins = max_bytes_per_bin(&bytes_per_rtt_bin(&rec, rtt as f64 / 1000.0));
        let bins: Vec<String> = bins
            .iter()
            .take(6)
            .map(|b| format!("{:.0}", *b as f64 / 1000.0))
            .collect();
        if !rec.ok() {
            eprintln!(
                "warning: {} did not load completely: {}",
                page.name,
                rec.first_error().unwrap_or_default()
            );
        }
        t.push(vec![
            page.name.clone(),
            format!("{:.0}", m.body_bytes as f64 / 1000.0),
            m.objects.to_string(),
            m.connections.to_string(),
            opt(m.plt_wire_s, 3),
            opt(m.plt_loader_s, 3),
            opt(m.idle_share.map(|x| x * 100.0), 1),
            opt(m.effective_concurrency, 2),
            bins.join(" "),
        ]);
        records.push(rec);
    }
    bed.shutdown().context("tearing down the testbed")?;
    print!("{}", t.to_text());
    if let Some(p) = &a.har {
        write(p, &serde_json::to_string_pretty(&to_har(&records))?)?;
        println!("HAR: {}", p.display());
    }
    if let Some(p) = &a.json {
        write(p, &serde_json::to_string_pretty(&records)?)?;
        println!("records: {}", p.display());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rtt_accepts_ms_and_durations() {
        assert_eq!(rtt_ms("100").unwrap(), 100);
        assert_eq!(rtt_ms("75ms").unwrap(), 75);
        assert_eq!(rtt_ms("0.15s").unwrap(), 150);
        assert!(rtt_ms("0").is_err());
        assert!(rtt_ms("fast").is_err());
    }

    #[test]
    fn stamp_is_a_folder_name() {
        let s = stamp();
        assert_eq!(s.len(), 15, "{s}");
        assert_eq!(&s[8..9], "-");
        assert!(s.chars().all(|c| c.is_ascii_digit() || c == '-'));
    }
}
