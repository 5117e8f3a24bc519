//! `mewa bench accel`: the accelerator's cache hits against nginx's
//! `proxy_cache` serving the same objects in the same run (the
//! target: ≥ 80 % of nginx's requests/s on hits), and the latency each adds
//! in front of the origin.
//!
//! Setting, on loopback:
//! - **One origin** for both: our origin (`mewa origin serve --plain`,
//!   `Cache-Control: max-age=3600`) serving the bench corpus of `mewa bench
//!   origin` (10 KB and 1 MB objects).
//! - **mewa accel** (`mewa accel serve`, a child process with the same
//!   worker count) with the corpus host as its site, the origin pinned in
//!   `[upstream.resolve]`, h2c on its clear-text listener.
//! - **nginx** with `proxy_cache` (keys zone in memory, bodies in a cache
//!   directory, `proxy_cache_valid` left to the origin's headers), an
//!   upstream keep-alive pool, h2c, access log off.
//! - **h2load**, one command line for all (`-c -m -t`, duration, warm-up),
//!   after a counted run that fills both caches and checks every byte.
//!   That the measured runs were hits is checked, not assumed: the
//!   accelerator's `cache_misses_total` must not move during them, and
//!   nginx's `X-Cache-Status` must say `HIT` after them.
//! - **Added latency**: h2load with one connection and one stream, mean time
//!   per request through each proxy (hits) minus the same against the
//!   origin directly.

use std::io::{Read, Write as _};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use clap::Args;
use mewa_report::median;
use mewa_report::Table;
use serde::Serialize;

use crate::origin::{
    bench_corpus, free_addr, nginx_version, spawn_nginx, start_mewa_origin, H2loadArgs, Kind, Load,
    Server, Shape, Size, HOST, SIZES,
};
use crate::util::{clk_tck, find_program, TempDir};
use crate::{bail, Context};

/// The target: the accelerator's hit req/s over nginx's.
const TARGET: f64 = 0.8;

#[derive(Debug, Args)]
/// `mewa bench accel`'s settings.
pub struct AccelBench {
    #[command(flatten)]
    load: H2loadArgs,
    /// Worker threads or processes of each proxy and of the origin;
    /// default: the number of CPUs.
    #[arg(long)]
    workers: Option<usize>,
    /// Requests of the one-at-a-time latency runs.
    #[arg(long, default_value_t = 2000)]
    latency_requests: u32,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Clone, Serialize)]
struct Cell {
    server: &'static str,
    size: &'static str,
    req_per_s: f64,
    mb_per_s: f64,
    cpu_us_per_req: Option<f64>,
    runs_req_per_s: Vec<f64>,
    /// Mean time per request, one at a time, µs.
    latency_us: Option<f64>,
    /// `latency_us` minus the origin's, µs.
    added_latency_us: Option<f64>,
}

/// Runs the benchmark and prints its table (or JSON).
pub fn run(b: AccelBench) -> crate::Result<()> {
    let shape = b.load.shape()?;
    let runs_n = b.load.runs();
    if b.latency_requests == 0 {
        bail!("--latency-requests must be at least 1");
    }
    let workers = b
        .workers
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(2, |n| n.get()))
        .max(1);
    let h2load = find_program("h2load").context(
        "h2load (the load generator) is not installed; install it with \
         `apt-get install nghttp2-client` (scripts/setup does)",
    )?;
    let nginx = find_program("nginx").context(
        "nginx is not installed, so there is nothing to compare with; \
         `apt-get install nginx` (scripts/setup does)",
    )?;
    if cfg!(debug_assertions) {
        eprintln!(
            "note: this is a debug build, and so are the accelerator and origin it runs; \
             build with --release for figures that count"
        );
    }
    let tmp = TempDir::new()?;
    let corpus = bench_corpus()?;
    let corpus_file = tmp.path.join("corpus.json");
    std::fs::write(&corpus_file, corpus.to_json())
        .with_context(|| format!("writing {}", corpus_file.display()))?;

    let mut origin = start_mewa_origin(&tmp.path, &corpus_file, workers, 3600)?;
    origin.wait_ready()?;
    let (mut accel, admin) = start_accel(&tmp.path, origin.addr, workers)?;
    let (mut cache, cache_check) = start_nginx_cache(&nginx, &tmp.path, origin.addr, workers)?;
    accel.wait_ready()?;
    cache.wait_ready()?;
    let servers = [origin, accel, cache];

    let load = Load {
        h2load: &h2load,
        b: shape,
        clk_tck: clk_tck(),
    };
    let one = Load {
        h2load: &h2load,
        b: Shape {
            clients: 1,
            streams: 1,
            ..shape
        },
        clk_tck: clk_tck(),
    };
    let mut cells = Vec::new();
    for size in &SIZES {
        // Fills both caches and checks every byte of every answer.
        for s in &servers {
            load.check(s, size)?;
        }
        let misses_before = accel_misses(admin)?;
        let mut runs: Vec<Vec<crate::origin::Sample>> =
            servers.iter().map(|_| Vec::new()).collect();
        for r in 0..runs_n {
            for (i, s) in servers.iter().enumerate() {
                let m = load.measure(s, size)?;
                eprintln!(
                    "{} run {}/{}: {:<12} {:>10.0} req/s",
                    size.label,
                    r + 1,
                    runs_n,
                    s.kind.name(),
                    m.req_per_s
                );
                runs[i].push(m);
            }
        }
        let latency: Vec<Option<f64>> = servers
            .iter()
            .map(|s| latency_us(&one, s, size, b.latency_requests))
            .collect::<crate::Result<_>>()?;
        let misses_after = accel_misses(admin)?;
        if misses_after != misses_before {
            bail!(
                "the accelerator missed its cache {} times during the measured runs of {}: \
                 the figures would not be hits",
                misses_after - misses_before,
                size.label
            );
        }
        let status = nginx_cache_status(cache_check, size)?;
        if status != "HIT" {
            bail!(
                "nginx's X-Cache-Status for {} is {status:?}, not HIT",
                size.path
            );
        }
        for (i, (s, rs)) in servers.iter().zip(runs).enumerate() {
            let rps: Vec<f64> = rs.iter().map(|m| m.req_per_s).collect();
            let cpu: Option<Vec<f64>> = rs.iter().map(|m| m.cpu_us_per_req).collect();
            let med = median(&rps).unwrap_or(0.0);
            cells.push(Cell {
                server: s.kind.name(),
                size: size.label,
                req_per_s: med,
                mb_per_s: med * size.bytes as f64 / 1e6,
                cpu_us_per_req: cpu.map(|c| median(&c).unwrap_or(0.0)),
                runs_req_per_s: rps,
                latency_us: latency[i],
                added_latency_us: match (i, latency[i], latency[0]) {
                    (0, _, _) => None,
                    (_, Some(l), Some(o)) => Some(l - o),
                    _ => None,
                },
            });
        }
    }
    drop(servers);

    let ratios: Vec<(&str, f64)> = SIZES
        .iter()
        .filter_map(|size| {
            let at = |k: Kind| {
                cells
                    .iter()
                    .find(|c| c.size == size.label && c.server == k.name())
            };
            let a = at(Kind::Accel)?;
            let n = at(Kind::NginxCache)?;
            Some((size.label, a.req_per_s / n.req_per_s.max(f64::MIN_POSITIVE)))
        })
        .collect();
    if b.json {
        println!(
            "{}",
            serde_json::json!({
                "config": shape.json(runs_n, workers),
                "results": cells,
                "ratios": ratios.iter().map(|(s, r)| serde_json::json!({
                    "size": s, "accel_over_nginx": r, "target": TARGET, "met": *r >= TARGET
                })).collect::<Vec<_>>(),
            })
        );
        return Ok(());
    }
    let mut t = Table::new(&[
        "size",
        "server",
        "req/s (hits)",
        "MB/s",
        "server CPU µs/req",
        "latency µs (1 at a time)",
        "added µs",
        "runs (req/s)",
    ]);
    for c in &cells {
        t.push(vec![
            c.size.to_string(),
            match c.server {
                "mewa" => "origin (direct)".to_string(),
                s => s.to_string(),
            },
            format!("{:.0}", c.req_per_s),
            format!("{:.1}", c.mb_per_s),
            c.cpu_us_per_req.map_or("-".into(), |v| format!("{v:.1}")),
            c.latency_us.map_or("-".into(), |v| format!("{v:.0}")),
            c.added_latency_us
                .map_or("-".into(), |v| format!("{v:+.0}")),
            c.runs_req_per_s
                .iter()
                .map(|v| format!("{v:.0}"))
                .collect::<Vec<_>>()
                .join(" "),
        ]);
    }
    print!("{}", t.to_text());
    for (size, r) in &ratios {
        println!(
            "{size:>5}: mewa-accel / nginx-cache = {r:.2} on hits (target >= {TARGET:.2}: {})",
            if *r >= TARGET { "met" } else { "NOT met" }
        );
    }
    println!(
        "h2load -c {} -m {}, {:.1} s measured after {:.1} s warm-up, median of {} run(s); h2c on \
         loopback; {workers} worker(s) per server; every measured request a cache hit (checked). \
         Latency: -c 1 -m 1, {} requests, mean.",
        shape.clients,
        shape.streams,
        shape.duration.as_secs_f64(),
        shape.warmup.as_secs_f64(),
        runs_n,
        b.latency_requests
    );
    Ok(())
}

/// Mean time per request with one connection and one stream, µs.
fn latency_us(one: &Load<'_>, s: &Server, size: &Size, n: u32) -> crate::Result<Option<f64>> {
    let mut cmd = one.command(s, size);
    cmd.arg("-n").arg(n.to_string());
    let (r, ()) = one.run(s, size, cmd, || ())?;
    Ok(r.mean_request_us)
}

/// `mewa accel serve` in front of `origin`, h2c on a loopback port, and its
/// admin listener.
fn start_accel(
    tmp: &Path,
    origin: SocketAddr,
    workers: usize,
) -> crate::Result<(Server, SocketAddr)> {
    let addr = free_addr()?;
    let admin = free_addr()?;
    let conf = format!(
        "[listen]\nhttp = \"{addr}\"\nadmin = \"{admin}\"\n\
         [cache]\nmemory_mib = 256\n\
         [upstream.resolve]\n\"{HOST}\" = \"{origin}\"\n\
         [[site]]\nhosts = [\"{HOST}\"]\n"
    );
    let file = tmp.join("accel.toml");
    std::fs::write(&file, conf).with_context(|| format!("writing {}", file.display()))?;
    let exe = std::env::current_exe().context("finding this program")?;
    let mut cmd = Command::new(exe);
    cmd.arg("accel")
        .arg("serve")
        .arg("-c")
        .arg(&file)
        .env("TOKIO_WORKER_THREADS", workers.to_string())
        .env("RUST_LOG", "warn");
    Ok((Server::spawn(Kind::Accel, addr, cmd, tmp, None)?, admin))
}

/// nginx with `proxy_cache` in front of `origin`, h2c, tuned as one would
/// for a cache: keep-alive upstream pool, no access log, 16 KB DATA
/// frames, the keys in shared memory and the bodies in a cache directory
/// (in the page cache after the first read). `sendfile off`: with it on,
/// every hit over HTTP/2 waited 44 ms one request at a time (a delayed-ACK
/// stall) and 1 MB hits ran at about half the rate (1 896 against 3 508
/// req/s in one run here), so off is the stronger nginx.
fn start_nginx_cache(
    prog: &Path,
    tmp: &Path,
    origin: SocketAddr,
    workers: usize,
) -> crate::Result<(Server, SocketAddr)> {
    let addr = free_addr()?;
    // A second, HTTP/1.1 listener on the same cache, for the check that
    // the measured runs were hits (nginx before 1.25.1 serves only h2 on a
    // clear-text `http2` listener).
    let check = free_addr()?;
    let (listen, http2) = match nginx_version(prog) {
        Some(v) if v >= (1, 25, 1) => (format!("listen {addr};"), "http2 on;"),
        _ => (format!("listen {addr} http2;"), ""),
    };
    let t = tmp.display();
    let conf = format!(
        "worker_processes {workers};
pid {t}/nginx-cache.pid;
error_log {t}/nginx-cache-error.log warn;
events {{ worker_connections 4096; }}
http {{
    access_log off;
    sendfile off;
    tcp_nopush off;
    tcp_nodelay on;
    keepalive_requests 100000000;
    keepalive_timeout 120s;
    http2_chunk_size 16k;
    client_body_temp_path {t}/nginx-cache-temp/body;
    proxy_temp_path {t}/nginx-cache-temp/proxy;
    fastcgi_temp_path {t}/nginx-cache-temp/fastcgi;
    uwsgi_temp_path {t}/nginx-cache-temp/uwsgi;
    scgi_temp_path {t}/nginx-cache-temp/scgi;
    proxy_cache_path {t}/nginx-cache levels=1:2 keys_zone=mewa:10m max_size=1g inactive=1h use_temp_path=off;
    upstream origin {{
        server {origin};
        keepalive 32;
    }}
    server {{
        {listen}
        listen {check};
        {http2}
        server_name {HOST};
        location / {{
            proxy_pass http://origin;
            proxy_http_version 1.1;
            proxy_set_header Connection \"\";
            proxy_set_header Host $host;
            proxy_cache mewa;
            add_header X-Cache-Status $upstream_cache_status;
        }}
    }}
}}
"
    );
    let server = spawn_nginx(prog, tmp, "nginx-cache", Kind::NginxCache, addr, &conf)?;
    Ok((server, check))
}

/// One HTTP/1.1 request on a fresh connection; the response head.
fn http1_head(addr: SocketAddr, host: &str, path: &str) -> crate::Result<String> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(5))
        .with_context(|| format!("connecting to {addr}"))?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
    )?;
    let mut buf = Vec::new();
    let mut chunk = [0u8; 16 * 1024];
    // The head is what is needed; stop reading once it has come.
    loop {
        let n = s.read(&mut chunk)?;
        if n == 0 {
            break;
        }
        buf.extend_from_slice(&chunk[..n]);
        if buf.windows(4).any(|w| w == b"\r\n\r\n") {
            break;
        }
    }
    let text = String::from_utf8_lossy(&buf);
    Ok(text.split("\r\n\r\n").next().unwrap_or("").to_string())
}

/// The accelerator's `mewa_accel_cache_misses_total`.
fn accel_misses(admin: SocketAddr) -> crate::Result<u64> {
    let mut s = TcpStream::connect_timeout(&admin, Duration::from_secs(5))
        .with_context(|| format!("connecting to the accelerator's admin listener {admin}"))?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    write!(
        s,
        "GET /metrics HTTP/1.1\r\nHost: admin\r\nConnection: close\r\n\r\n"
    )?;
    let mut text = String::new();
    s.read_to_string(&mut text)?;
    text.lines()
        .find_map(|l| l.strip_prefix("mewa_accel_cache_misses_total "))
        .and_then(|v| v.trim().parse().ok())
        .context("no mewa_accel_cache_misses_total in the accelerator's /metrics")
}

/// nginx's `X-Cache-Status` for the size's object, now.
fn nginx_cache_status(addr: SocketAddr, size: &Size) -> crate::Result<String> {
    let head = http1_head(addr, HOST, size.path)?;
    Ok(head
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.trim()
                .eq_ignore_ascii_case("x-cache-status")
                .then(|| v.trim().to_string())
        })
        .unwrap_or_default())
}
