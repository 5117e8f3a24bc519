//! `mewa bench edge`: DNS queries per second and latency of the edge on
//! loopback, with hints and without, next to NSD (a plain authoritative
//! server from Debian) answering the same zone, all in the same run.
//!
//! - **Same zone.** `--hosts` names `wwwN.bench.example`, each with an `A`
//!   record and (for the edge) a page of 20–80 objects in the store.
//! - **Same load.** dnsperf (Debian package `dnsperf`) sends the same query
//!   file to every server: `-c 4 -T 2`, 200 outstanding. "With hints" adds
//!   the hint-request EDNS option naming one page (`-E`; dnsperf sends one
//!   option for all queries, so every answer carries that page's hint). NSD
//!   gets the same option, which it ignores.
//! - **Same workers.** The edge gets `--workers` UDP sockets (threads), NSD
//!   `server-count`; NSD's response-rate limiting is off.
//! - **Latency** at a fixed moderate rate (`--latency-qps`), from dnsperf's
//!   per-query output: p50 and p99.
//! - **CPU per query**: utime + stime of the server's processes (from
//!   /proc, NSD's forked servers included) over each throughput run, divided
//!   by the queries dnsperf saw answered; and dnsperf's own, from this
//!   process's reaped-children times. On 2 shared cores the load generator
//!   takes CPU from the server, so q/s alone mixes the two; CPU per query is
//!   the server's cost by itself. dnsperf's figure includes its wait for
//!   unanswered queries after the run, which it spends polling: a server
//!   that drops a handful of queries makes it look expensive.
//! - Each answer of the edge is checked first: the address, and a hint that
//!   decodes.
//! - **Soak** (`--soak 600s` for ten minutes): instead of the
//!   comparison, the edge alone at its measured peak rate with hints
//!   (dnsperf `-Q` at the rate of one closed-loop run) for that long; every
//!   `--soak-every` (60s) a line with the rate and queries lost, a probe's
//!   failures and p50/p99 (one query at a time beside the load, each waiting
//!   up to 500 ms) and the edge's resident memory (`VmRSS`). The memory must
//!   stay flat: the summary gives the growth from the first interval to the
//!   last. Figures, not a pass/fail: the machine is shared.

use std::io::Write as _;
use std::net::{SocketAddr, UdpSocket};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::{bail, Context};
use clap::Args;
use mewa_edge::store::Store;
use mewa_hint::dns::{HintRequest, OPTION_CODE};
use mewa_hint::page::{synthetic_page, PageMeta};
use serde::Serialize;

use crate::util::{clk_tck, find_program, proc_ticks, whole_secs, TempDir};
use mewa_report::Table;

/// `mewa bench edge` options.
#[derive(Debug, Args)]
/// `mewa bench edge`'s settings.
pub struct EdgeBench {
    /// Measured runs per server and mode; the median is reported.
    #[arg(long, default_value_t = 5)]
    runs: usize,
    /// Length of each throughput run, whole seconds (dnsperf -l).
    #[arg(long = "duration", value_name = "DURATION", default_value = "2s", value_parser = whole_secs)]
    seconds: u64,
    /// Host names (and pages) in the zone.
    #[arg(long, default_value_t = 100)]
    hosts: usize,
    /// UDP worker threads of the edge and NSD's server-count; default: CPUs.
    #[arg(long)]
    workers: Option<usize>,
    /// Query rate of the latency runs (dnsperf -Q).
    #[arg(long, default_value_t = 20_000)]
    latency_qps: u32,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
    /// Soak instead of the comparison: this long (whole seconds, e.g.
    /// 600s for ten minutes) at the edge's measured peak rate with hints,
    /// printing failures, p99 latency and the edge's resident memory every
    /// --soak-every.
    #[arg(long, value_name = "DURATION", value_parser = whole_secs)]
    soak: Option<u64>,
    /// Time per soak report line, whole seconds.
    #[arg(long, default_value = "60s", value_name = "DURATION", value_parser = whole_secs)]
    soak_every: u64,
}

#[derive(Debug, Clone, Serialize)]
struct Row {
    server: &'static str,
    mode: &'static str,
    qps_median: f64,
    qps_runs: Vec<f64>,
    lost_share: f64,
    p50_us: Option<f64>,
    p99_us: Option<f64>,
    /// Median over the runs of the server's CPU time per answered query.
    cpu_us_per_query: Option<f64>,
    /// The same for dnsperf (the load generator).
    load_cpu_us_per_query: Option<f64>,
}

/// One throughput run.
struct Sample {
    qps: f64,
    /// Queries dnsperf sent.
    sent: f64,
    /// Share of them lost.
    lost: f64,
    /// Server CPU µs per answered query, `None` where /proc cannot be read.
    cpu_us: Option<f64>,
    /// dnsperf's CPU µs per answered query.
    load_cpu_us: Option<f64>,
}

/// CPU time (utime + stime, clock ticks) of `pid` and all its descendants:
/// NSD answers from forked server processes.
fn tree_ticks(pid: u32) -> Option<u64> {
    let mut total = proc_ticks(pid)?;
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).ok()?;
    for t in tasks.flatten() {
        let children = std::fs::read_to_string(t.path().join("children")).unwrap_or_default();
        for c in children.split_whitespace().filter_map(|c| c.parse().ok()) {
            // A child that exited in between is not counted.
            total += tree_ticks(c).unwrap_or(0);
        }
    }
    Some(total)
}

/// CPU time (clock ticks) of this process's reaped children (cutime +
/// cstime): dnsperf's, once `output()` has waited for it.
fn reaped_children_ticks() -> Option<u64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    let rest = &stat[stat.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    Some(f.get(13)?.parse::<u64>().ok()? + f.get(14)?.parse::<u64>().ok()?)
}

const ZONE: &str = "bench.example";

/// The page of host `wwwI`: 20–80 objects on 3 origins, 2–92 KB each.
fn page(i: usize) -> PageMeta {
    let n = 20 + (i * 37) % 61;
    PageMeta {
        computation_ms: Some(100),
        ..synthetic_page(&format!("http://www{i}.{ZONE}/"), n, 3, |k| {
            2_000 + ((k * 7919 + i * 104_729) % 90_000) as u64
        })
    }
}

/// A child process, killed and reaped on drop.
struct Proc(Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_port() -> crate::Result<u16> {
    Ok(UdpSocket::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// Waits until `addr` answers a DNS query (any answer).
fn wait_dns(addr: SocketAddr, what: &str, log: &Path) -> crate::Result<()> {
    let q = query_bytes(&format!("www0.{ZONE}."), None)?;
    let s = UdpSocket::bind("127.0.0.1:0")?;
    s.set_read_timeout(Some(Duration::from_millis(200)))?;
    let mut buf = [0u8; 4096];
    for _ in 0..50 {
        let _ = s.send_to(&q, addr);
        if s.recv(&mut buf).is_ok() {
            return Ok(());
        }
    }
    bail!(
        "{what} did not answer on {addr} within 10 s; its log: {}",
        log.display()
    )
}

fn query_bytes(name: &str, page: Option<&str>) -> crate::Result<Vec<u8>> {
    use hickory_proto::op::{Edns, Message, Query};
    use hickory_proto::rr::rdata::opt::EdnsOption;
    use hickory_proto::rr::{Name, RecordType};
    let mut m = Message::query();
    m.add_query(Query::query(Name::from_ascii(name)?, RecordType::A));
    let mut e = Edns::new();
    e.set_max_payload(1232);
    if let Some(p) = page {
        let data = HintRequest {
            page_url: p.to_string(),
        }
        .encode()?;
        e.options_mut()
            .insert(EdnsOption::Unknown(OPTION_CODE, data));
    }
    m.set_edns(e);
    Ok(m.to_vec()?)
}

/// One query to the edge: the address and a decodable hint must come back.
fn check_edge(addr: SocketAddr, page_url: &str) -> crate::Result<usize> {
    use hickory_proto::op::Message;
    use hickory_proto::rr::rdata::opt::{EdnsCode, EdnsOption};
    let s = UdpSocket::bind("127.0.0.1:0")?;
    s.set_read_timeout(Some(Duration::from_secs(2)))?;
    s.send_to(
        &query_bytes(&format!("www0.{ZONE}."), Some(page_url))?,
        addr,
    )?;
    let mut buf = [0u8; 4096];
    let n = s
        .recv(&mut buf)
        .context("the edge did not answer the check query")?;
    let m = Message::from_vec(&buf[..n])?;
    if m.answers.len() != 1 {
        bail!(
            "the edge answered {} address records, expected 1",
            m.answers.len()
        );
    }
    let data = match m
        .edns
        .as_ref()
        .and_then(|e| e.option(EdnsCode::Unknown(OPTION_CODE)))
    {
        Some(EdnsOption::Unknown(_, d)) => d.clone(),
        _ => bail!("the edge's answer carries no hint option"),
    };
    match mewa_hint::dns::HintResponse::decode(&data)? {
        mewa_hint::dns::HintResponse::Hint(h) => {
            mewa_hint::wire::Hint::from_bytes(&h)?;
            Ok(h.len())
        }
        other => bail!("the edge answered {other:?} instead of a hint"),
    }
}

struct Perf<'a> {
    dnsperf: &'a Path,
    queries: &'a Path,
    /// Clock ticks per second of /proc times.
    clk_tck: f64,
}

impl Perf<'_> {
    fn command(&self, port: u16, option: Option<&str>) -> Command {
        let mut c = Command::new(self.dnsperf);
        c.args(["-s", "127.0.0.1", "-p", &port.to_string()])
            .arg("-d")
            .arg(self.queries);
        if let Some(o) = option {
            c.args(["-E", o]);
        }
        c.stderr(Stdio::null());
        c
    }

    /// Queries per second, the lost share and CPU per query of one run
    /// against the server whose process is `pid`.
    fn throughput(
        &self,
        port: u16,
        option: Option<&str>,
        secs: u64,
        pid: u32,
    ) -> crate::Result<Sample> {
        self.run(port, option, secs, pid, None)
    }

    /// Like [`Perf::throughput`], at most `qps` queries per second when
    /// given (dnsperf -Q).
    fn run(
        &self,
        port: u16,
        option: Option<&str>,
        secs: u64,
        pid: u32,
        qps: Option<f64>,
    ) -> crate::Result<Sample> {
        let (server0, load0) = (tree_ticks(pid), reaped_children_ticks());
        let mut c = self.command(port, option);
        c.args(["-l", &secs.to_string(), "-c", "4", "-T", "2", "-q", "200"]);
        if let Some(q) = qps {
            c.args(["-Q", &format!("{:.0}", q.max(1.0))]);
        }
        let out = c.output().context("running dnsperf")?;
        let text = String::from_utf8_lossy(&out.stdout);
        let field = |name: &str| -> Option<f64> {
            text.lines()
                .find(|l| l.trim_start().starts_with(name))
                .and_then(|l| l.split(':').nth(1))
                .and_then(|v| v.split_whitespace().next())
                .and_then(|v| v.parse().ok())
        };
        let qps = field("Queries per second")
            .with_context(|| format!("no rate in dnsperf's output:\n{text}"))?;
        let sent = field("Queries sent").unwrap_or(0.0);
        let lost = field("Queries lost").unwrap_or(0.0);
        let done = field("Queries completed").unwrap_or(0.0).max(1.0);
        let per_query = |a: Option<u64>, b: Option<u64>| {
            Some(b?.saturating_sub(a?) as f64 / self.clk_tck * 1e6 / done)
        };
        Ok(Sample {
            qps,
            sent,
            lost: if sent > 0.0 { lost / sent } else { 0.0 },
            cpu_us: per_query(server0, tree_ticks(pid)),
            load_cpu_us: per_query(load0, reaped_children_ticks()),
        })
    }

    /// p50 and p99 latency (µs) at a fixed rate.
    fn latency(&self, port: u16, option: Option<&str>, qps: u32) -> crate::Result<(f64, f64)> {
        let out = self
            .command(port, option)
            .args(["-l", "2", "-Q", &qps.to_string(), "-v"])
            .output()
            .context("running dnsperf")?;
        let mut lat: Vec<f64> = String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter(|l| l.starts_with("> NOERROR"))
            .filter_map(|l| l.split_whitespace().last()?.parse::<f64>().ok())
            .map(|s| s * 1e6)
            .collect();
        if lat.is_empty() {
            bail!("dnsperf reported no answered queries in the latency run");
        }
        lat.sort_by(f64::total_cmp);
        let q = |p: f64| lat[((lat.len() as f64 - 1.0) * p).round() as usize];
        Ok((q(0.5), q(0.99)))
    }
}

/// Runs the edge benchmark and prints its table (or JSON).
pub fn run(b: EdgeBench) -> crate::Result<()> {
    if b.runs == 0 || b.hosts == 0 || b.seconds == 0 {
        bail!("--runs and --hosts must be at least 1, --duration at least 1s");
    }
    let workers = b
        .workers
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(2, |n| n.get()))
        .max(1);
    let dnsperf = find_program("dnsperf").context(
        "dnsperf (the query generator) is not installed; `apt-get install dnsperf` (scripts/setup does)",
    )?;
    let nsd = find_program("nsd");
    if nsd.is_none() {
        eprintln!("skipping NSD: not installed (`apt-get install nsd`)");
    }
    if cfg!(debug_assertions) {
        eprintln!("note: this is a debug build; build with --release for figures that count");
    }
    let tmp = TempDir::new()?;
    let dir = &tmp.path;

    // The edge: store, config, child process.
    let pages: Vec<PageMeta> = (0..b.hosts).map(page).collect();
    let store_path = dir.join("edge.sqlite");
    Store::open(&store_path)?.put_pages(&pages, "bench", 0)?;
    let edge_port = free_port()?;
    let mut cfg = format!(
        // One source at the peak rate: response-rate limiting would measure
        // itself, so it is off (NSD runs without it too).
        "[dns]\nlisten = \"127.0.0.1:{edge_port}\"\nudp_sockets = {workers}\nrrl_responses_per_s = 0\n\
         [admin]\nlisten = \"127.0.0.1:0\"\n[store]\npath = \"{}\"\n\
         [monitor]\nevery_s = 86400\n[zone]\n",
        store_path.display()
    );
    for i in 0..b.hosts {
        cfg.push_str(&format!("\"www{i}.{ZONE}\" = [\"10.0.0.2\"]\n"));
    }
    std::fs::write(dir.join("edge.toml"), cfg)?;
    let edge_log = dir.join("edge.log");
    let exe = std::env::current_exe().context("finding this program")?;
    let edge = Proc(
        Command::new(exe)
            .args(["edge", "serve", "--config"])
            .arg(dir.join("edge.toml"))
            .env("TOKIO_WORKER_THREADS", "1")
            .stdout(std::fs::File::create(&edge_log)?)
            .stderr(std::fs::File::create(dir.join("edge.err"))?)
            .spawn()
            .context("starting the edge")?,
    );
    let edge_addr: SocketAddr = ([127, 0, 0, 1], edge_port).into();
    wait_dns(edge_addr, "the edge", &dir.join("edge.err"))?;

    // Queries and the hint option (page www0).
    let queries = dir.join("queries.txt");
    let mut f = std::fs::File::create(&queries)?;
    for i in 0..b.hosts {
        writeln!(f, "www{i}.{ZONE} A")?;
    }
    drop(f);
    let page_url = format!("http://www0.{ZONE}/");
    let hint_bytes = check_edge(edge_addr, &page_url)?;
    let hex: String = HintRequest {
        page_url: page_url.clone(),
    }
    .encode()?
    .iter()
    .map(|b| format!("{b:02x}"))
    .collect();
    let option = format!("{OPTION_CODE}:{hex}");
    let perf = Perf {
        dnsperf: &dnsperf,
        queries: &queries,
        clk_tck: clk_tck(),
    };

    if let Some(secs) = b.soak {
        return soak(&b, secs, &perf, edge_port, &option, edge.0.id());
    }

    // NSD with the same zone.
    let mut nsd_proc = None;
    let nsd_port = free_port()?;
    if let Some(nsd) = &nsd {
        let mut zone = format!(
            "$ORIGIN {ZONE}.\n$TTL 30\n@ IN SOA ns.{ZONE}. admin.{ZONE}. 1 3600 600 86400 30\n@ IN NS ns.{ZONE}.\nns IN A 127.0.0.1\n"
        );
        for i in 0..b.hosts {
            zone.push_str(&format!("www{i} IN A 10.0.0.2\n"));
        }
        std::fs::write(dir.join("bench.zone"), zone)?;
        let d = dir.display();
        std::fs::write(
            dir.join("nsd.conf"),
            format!(
                "server:\n  ip-address: 127.0.0.1@{nsd_port}\n  server-count: {workers}\n  database: \"\"\n  zonesdir: \"{d}\"\n  pidfile: \"{d}/nsd.pid\"\n  xfrdfile: \"{d}/xfrd.state\"\n  zonelistfile: \"{d}/zone.list\"\n  username: \"\"\n  chroot: \"\"\n  logfile: \"{d}/nsd.log\"\n  verbosity: 0\n  rrl-ratelimit: 0\n  rrl-whitelist-ratelimit: 0\nremote-control:\n  control-enable: no\nzone:\n  name: {ZONE}\n  zonefile: bench.zone\n"
            ),
        )?;
        nsd_proc = Some(Proc(
            Command::new(nsd)
                .arg("-d")
                .arg("-c")
                .arg(dir.join("nsd.conf"))
                .stdout(Stdio::null())
                .stderr(std::fs::File::create(dir.join("nsd.err"))?)
                .spawn()
                .context("starting nsd")?,
        ));
        wait_dns(
            ([127, 0, 0, 1], nsd_port).into(),
            "nsd",
            &dir.join("nsd.log"),
        )?;
    }

    let edge_pid = edge.0.id();
    let mut cases: Vec<(&'static str, &'static str, u16, Option<&str>, u32)> = vec![
        (
            "mewa edge",
            "with hints",
            edge_port,
            Some(&option),
            edge_pid,
        ),
        ("mewa edge", "no hints", edge_port, None, edge_pid),
    ];
    if let Some(p) = &nsd_proc {
        cases.push(("nsd", "same queries", nsd_port, Some(&option), p.0.id()));
    }
    let mut rows = Vec::new();
    let mut all: Vec<Vec<Sample>> = cases.iter().map(|_| Vec::new()).collect();
    for r in 0..b.runs {
        for (i, (server, mode, port, opt, pid)) in cases.iter().enumerate() {
            let s = perf.throughput(*port, *opt, b.seconds, *pid)?;
            eprintln!(
                "run {}/{}: {server:<10} {mode:<12} {:>10.0} q/s {:>6} µs CPU/query",
                r + 1,
                b.runs,
                s.qps,
                s.cpu_us.map_or("-".into(), |c| format!("{c:.2}")),
            );
            all[i].push(s);
        }
    }
    let median_of = |v: Option<Vec<f64>>| v.and_then(|v| mewa_report::median(&v));
    for ((server, mode, port, opt, _), runs) in cases.iter().zip(all) {
        let q: Vec<f64> = runs.iter().map(|r| r.qps).collect();
        let lost = runs.iter().map(|r| r.lost).fold(0.0, f64::max);
        let (p50, p99) = perf.latency(*port, *opt, b.latency_qps)?;
        let qps_runs = q.clone();
        rows.push(Row {
            server,
            mode,
            qps_median: mewa_report::median(&q).unwrap_or(0.0),
            qps_runs,
            lost_share: lost,
            p50_us: Some(p50),
            p99_us: Some(p99),
            cpu_us_per_query: median_of(runs.iter().map(|r| r.cpu_us).collect()),
            load_cpu_us_per_query: median_of(runs.iter().map(|r| r.load_cpu_us).collect()),
        });
    }
    let ratio = rows
        .iter()
        .find(|r| r.server == "nsd")
        .map(|n| rows[0].qps_median / n.qps_median);
    let plain_ratio = rows[0].qps_median / rows[1].qps_median;
    // CPU per query of the edge with hints against NSD's: the servers'
    // costs without the load generator's share of the cores.
    let cpu_ratio = rows
        .iter()
        .find(|r| r.server == "nsd")
        .and_then(|n| Some(rows[0].cpu_us_per_query? / n.cpu_us_per_query?));
    if b.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({
                "rows": rows, "hint_bytes": hint_bytes, "workers": workers,
                "hints_vs_nsd": ratio, "hints_vs_no_hints": plain_ratio, "target": 0.8,
                "cpu_per_query_hints_vs_nsd": cpu_ratio,
            }))?
        );
        return Ok(());
    }
    let mut t = Table::new(&[
        "server",
        "queries",
        "q/s (median)",
        "p50 µs",
        "p99 µs",
        "CPU µs/q",
        "dnsperf CPU µs/q",
        "max lost",
        "runs (q/s)",
    ]);
    for r in &rows {
        t.push(vec![
            r.server.to_string(),
            r.mode.to_string(),
            format!("{:.0}", r.qps_median),
            r.p50_us.map_or("-".into(), |v| format!("{v:.0}")),
            r.p99_us.map_or("-".into(), |v| format!("{v:.0}")),
            r.cpu_us_per_query.map_or("-".into(), |v| format!("{v:.2}")),
            r.load_cpu_us_per_query
                .map_or("-".into(), |v| format!("{v:.2}")),
            format!("{:.2} %", r.lost_share * 100.0),
            r.qps_runs
                .iter()
                .map(|v| format!("{v:.0}"))
                .collect::<Vec<_>>()
                .join(" "),
        ]);
    }
    print!("{}", t.to_text());
    println!(
        "hint: {hint_bytes} bytes in every answer \"with hints\"; with hints / without = {plain_ratio:.2}"
    );
    match ratio {
        Some(r) => println!(
            "with hints / nsd = {r:.2} (target >= 0.80: {})",
            if r >= 0.8 { "met" } else { "NOT met" }
        ),
        None => println!("no NSD to compare with"),
    }
    if let Some(c) = cpu_ratio {
        println!("server CPU per query, edge with hints / nsd = {c:.2}");
    }
    println!(
        "dnsperf -c 4 -T 2 -q 200, {} s per run, median of {}; latency at {} q/s; {} host(s); {workers} worker(s) per server; loopback.",
        b.seconds, b.runs, b.latency_qps, b.hosts
    );
    Ok(())
}

/// What the probe beside the soak's load saw in one interval.
#[derive(Debug, Default, Clone, Serialize)]
struct Probe {
    answers: u64,
    /// No answer within 500 ms, or an answer that is not NOERROR.
    failed: u64,
    p50_us: Option<f64>,
    p99_us: Option<f64>,
}

/// Sends `query` to `addr` one at a time (a fresh ID each, 1 ms apart) for
/// `span`, timing each answer.
fn probe(addr: SocketAddr, mut query: Vec<u8>, span: Duration) -> crate::Result<Probe> {
    let s = UdpSocket::bind("127.0.0.1:0")?;
    s.connect(addr)?;
    s.set_read_timeout(Some(Duration::from_millis(500)))?;
    let mut buf = [0u8; 4096];
    let mut lat = Vec::new();
    let mut p = Probe::default();
    let end = std::time::Instant::now() + span;
    let mut id: u16 = 0;
    while std::time::Instant::now() < end {
        id = id.wrapping_add(1);
        query[..2].copy_from_slice(&id.to_be_bytes());
        let t = std::time::Instant::now();
        s.send(&query)?;
        loop {
            match s.recv(&mut buf) {
                // An answer to an earlier, timed-out query: not this one.
                Ok(n) if n < 4 || buf[..2] != id.to_be_bytes() => continue,
                Ok(_) => {
                    if buf[3] & 0x0f == 0 {
                        p.answers += 1;
                        lat.push(t.elapsed().as_secs_f64() * 1e6);
                    } else {
                        p.failed += 1;
                    }
                    break;
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(_) => {
                    p.failed += 1;
                    break;
                }
            }
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    lat.sort_by(f64::total_cmp);
    let q =
        |f: f64| (!lat.is_empty()).then(|| lat[((lat.len() as f64 - 1.0) * f).round() as usize]);
    p.p50_us = q(0.5);
    p.p99_us = q(0.99);
    Ok(p)
}

/// Resident memory of `pid` in KiB (`VmRSS`).
fn rss_kib(pid: u32) -> Option<u64> {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// One soak interval's line.
#[derive(Debug, Serialize)]
struct SoakLine {
    /// End of the interval, seconds since the soak began.
    at_s: u64,
    qps: f64,
    sent: f64,
    lost_share: f64,
    probe: Probe,
    rss_kib: Option<u64>,
}

/// The soak: the edge's peak rate with hints from one closed-loop run, then
/// `secs` seconds at that rate, a line per `b.soak_every` seconds.
fn soak(
    b: &EdgeBench,
    secs: u64,
    perf: &Perf<'_>,
    port: u16,
    option: &str,
    pid: u32,
) -> crate::Result<()> {
    if secs == 0 || b.soak_every == 0 {
        bail!("--soak and --soak-every must be at least 1s");
    }
    let addr: SocketAddr = ([127, 0, 0, 1], port).into();
    let peak = perf.throughput(port, Some(option), b.seconds, pid)?.qps;
    eprintln!(
        "peak with hints: {peak:.0} q/s ({} s closed loop); soaking {secs} s at that rate",
        b.seconds
    );
    let page_url = format!("http://www0.{ZONE}/");
    let query = query_bytes(&format!("www0.{ZONE}."), Some(&page_url))?;
    let rss_start = rss_kib(pid);
    let mut lines: Vec<SoakLine> = Vec::new();
    let mut done = 0;
    while done < secs {
        let span = b.soak_every.min(secs - done);
        let q = query.clone();
        let prober = std::thread::spawn(move || probe(addr, q, Duration::from_secs(span)));
        let load = perf.run(port, Some(option), span, pid, Some(peak));
        let probed = prober
            .join()
            .map_err(|_| crate::BenchError::Failed("the probe thread panicked".into()))??;
        let load = load?;
        done += span;
        let line = SoakLine {
            at_s: done,
            qps: load.qps,
            sent: load.sent,
            lost_share: load.lost,
            probe: probed,
            rss_kib: rss_kib(pid),
        };
        eprintln!(
            "{:>5} s: {:>8.0} q/s, lost {:.3} %; probe {} answers, {} failed, p50 {} µs, p99 {} µs; edge RSS {}",
            line.at_s,
            line.qps,
            line.lost_share * 100.0,
            line.probe.answers,
            line.probe.failed,
            line.probe.p50_us.map_or("-".into(), |v| format!("{v:.0}")),
            line.probe.p99_us.map_or("-".into(), |v| format!("{v:.0}")),
            line.rss_kib.map_or("-".into(), |k| format!("{:.1} MiB", k as f64 / 1024.0)),
        );
        lines.push(line);
    }
    let first = lines.first().and_then(|l| l.rss_kib);
    let last = lines.last().and_then(|l| l.rss_kib);
    let max = lines.iter().filter_map(|l| l.rss_kib).max();
    let growth = match (first, last) {
        (Some(f), Some(l)) if f > 0 => Some((l as f64 - f as f64) / f as f64 * 100.0),
        _ => None,
    };
    let lost: f64 = lines.iter().map(|l| l.sent * l.lost_share).sum();
    let sent: f64 = lines.iter().map(|l| l.sent).sum();
    let failed: u64 = lines.iter().map(|l| l.probe.failed).sum();
    let worst_p99 = lines
        .iter()
        .filter_map(|l| l.probe.p99_us)
        .fold(None, |m: Option<f64>, v| Some(m.map_or(v, |m| m.max(v))));
    if b.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({
                "peak_qps": peak, "seconds": secs, "lines": lines,
                "rss_kib_before": rss_start, "rss_kib_first": first, "rss_kib_last": last,
                "rss_kib_max": max, "rss_growth_pct": growth,
                "queries_sent": sent, "queries_lost": lost, "probe_failed": failed,
                "worst_p99_us": worst_p99,
            }))?
        );
        return Ok(());
    }
    let mib = |k: Option<u64>| k.map_or("-".into(), |k| format!("{:.1} MiB", k as f64 / 1024.0));
    println!(
        "soak: {secs} s at {peak:.0} q/s with hints: {sent:.0} queries, {lost:.0} lost ({:.3} %); probe failures {failed}; worst p99 {} µs",
        if sent > 0.0 { lost / sent * 100.0 } else { 0.0 },
        worst_p99.map_or("-".into(), |v| format!("{v:.0}")),
    );
    println!(
        "edge resident memory: {} before, {} after the first interval, {} at the end (max {}){}",
        mib(rss_start),
        mib(first),
        mib(last),
        mib(max),
        growth.map_or(String::new(), |g| format!(
            ": {g:+.1} % from the first interval to the last"
        )),
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_resident_memory_of_a_process() {
        let kib = rss_kib(std::process::id()).expect("own /proc/self/status");
        assert!(kib > 0);
        assert_eq!(rss_kib(u32::MAX), None);
    }

    /// The soak's probe counts an answer with NOERROR, and a query left
    /// unanswered (500 ms) or answered with an error code as a failure.
    #[test]
    fn the_probe_counts_answers_and_failures() {
        let server = UdpSocket::bind("127.0.0.1:0").unwrap();
        let addr = server.local_addr().unwrap();
        std::thread::spawn(move || {
            let mut buf = [0u8; 512];
            while let Ok((n, from)) = server.recv_from(&mut buf) {
                let id = u16::from_be_bytes([buf[0], buf[1]]);
                buf[2] |= 0x80;
                match id {
                    // Answered, NOERROR.
                    1 => {}
                    // Answered with SERVFAIL.
                    2 => buf[3] = (buf[3] & 0xf0) | 2,
                    // Not answered.
                    _ => continue,
                }
                let _ = server.send_to(&buf[..n], from);
            }
        });
        let q = query_bytes("www0.bench.example.", None).unwrap();
        // Query 1 answers, 2 fails at once, 3 waits its 500 ms and the
        // span is over.
        let p = probe(addr, q, Duration::from_millis(100)).unwrap();
        assert_eq!((p.answers, p.failed), (1, 2), "{p:?}");
        assert!(p.p99_us.is_some());
    }

    #[test]
    fn reads_cpu_of_a_process_tree_and_of_reaped_children() {
        let before = reaped_children_ticks().expect("own /proc/self/stat");
        assert!(tree_ticks(std::process::id()).is_some());
        // A child that burns a little CPU is counted once reaped.
        let status = Command::new("sh")
            .args(["-c", "i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done"])
            .status()
            .expect("sh runs");
        assert!(status.success());
        assert!(reaped_children_ticks().expect("readable") >= before);
    }
}
