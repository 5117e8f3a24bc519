//! `mewa bench proxy`: what the local proxy costs. On loopback, with the
//! edge's DNS server and the origin in this process, the same object is
//! fetched directly over one h2c connection and through the proxy (an
//! HTTP/1.1 client, as a browser talks to a proxy, and the proxy's h2c
//! connection to the origin), in the same run:
//!
//! - **added latency**: one request at a time, median and p99 of each path
//!   and the difference of the medians;
//! - **throughput**: `--concurrency` requests in flight for a fixed time,
//!   requests/s of each path and the ratio.
//!
//! The proxy runs with hints off (one connection), so the figures are the
//! proxy's own cost, not a gain from parallel connections.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::{bail, BenchError, Context};
use bytes::Bytes;
use clap::Args;
use http_body_util::{BodyExt, Empty};
use hyper_util::rt::{TokioExecutor, TokioIo};
use mewa_corpus::{Corpus, Discovery, Object, Page};
use mewa_edge::dns::{Responder, Zone};
use mewa_edge::server::{bind_dns, serve, EdgeDns};
use mewa_origin::{HttpOptions, Origin, OriginConfig, TcpOptions};
use tokio::net::{TcpListener, TcpStream};

use mewa_report::Table;

#[derive(Debug, Args)]
/// `mewa bench proxy`'s settings.
pub struct ProxyBench {
    /// Sequential requests per path for the latency figures.
    #[arg(long, default_value_t = 2000)]
    requests: usize,
    /// Requests in flight for the throughput figures.
    #[arg(long, default_value_t = 8)]
    concurrency: usize,
    /// Length of each throughput measurement, e.g. 2s.
    #[arg(long, value_name = "DURATION", default_value = "2s", value_parser = mewa_link::core::parse_duration)]
    duration: Duration,
}

const HOST: &str = "www.bench.example";

fn object(id: u32, path: &str, size: u64, parent: Option<u32>) -> Object {
    Object {
        id,
        host: HOST.into(),
        path: path.into(),
        size,
        content_type: if parent.is_none() {
            "text/html"
        } else {
            "image/jpeg"
        }
        .into(),
        parent,
        discovery: Discovery::Html,
        compute_ms: 0,
        status: None,
        think_ms: 0,
        recorded_size: None,
    }
}

fn corpus() -> Corpus {
    Corpus {
        name: "bench-proxy".into(),
        provenance: mewa_corpus::generate(mewa_corpus::Preset::Meh15, 1).provenance,
        pages: vec![Page {
            name: "bench".into(),
            main: format!("http://{HOST}/"),
            objects: vec![
                object(0, "/", 1_000, None),
                object(1, "/10k.jpg", 10_000, Some(0)),
                object(2, "/1m.jpg", 1_000_000, Some(0)),
            ],
            shared_connections: Vec::new(),
        }],
    }
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

/// A request path: direct h2c, or HTTP/1.1 to the proxy.
#[derive(Clone, Copy, PartialEq)]
enum Path {
    Direct,
    Proxy,
}

/// One client connection of either kind.
enum Client {
    H2(hyper::client::conn::http2::SendRequest<Empty<Bytes>>),
    H1(hyper::client::conn::http1::SendRequest<Empty<Bytes>>),
}

async fn client(path: Path, origin: SocketAddr, proxy: SocketAddr) -> crate::Result<Client> {
    match path {
        Path::Direct => {
            let tcp = TcpStream::connect(origin).await?;
            tcp.set_nodelay(true)?;
            let (s, c) = hyper::client::conn::http2::Builder::new(TokioExecutor::new())
                .initial_stream_window_size(8 << 20)
                .initial_connection_window_size(16 << 20)
                .handshake(TokioIo::new(tcp))
                .await?;
            tokio::spawn(c);
            Ok(Client::H2(s))
        }
        Path::Proxy => {
            let tcp = TcpStream::connect(proxy).await?;
            tcp.set_nodelay(true)?;
            let (s, c) = hyper::client::conn::http1::handshake(TokioIo::new(tcp)).await?;
            tokio::spawn(c);
            Ok(Client::H1(s))
        }
    }
}

async fn fetch(c: &mut Client, port: u16, path: &str) -> crate::Result<usize> {
    let uri = format!("http://{HOST}:{port}{path}");
    let req = http::Request::builder()
        .uri(uri)
        .header("accept", "*/*")
        .body(Empty::<Bytes>::new())?;
    let resp = match c {
        Client::H2(s) => {
            s.ready().await?;
            s.send_request(req).await?
        }
        Client::H1(s) => {
            s.ready().await?;
            s.send_request(req).await?
        }
    };
    if !resp.status().is_success() {
        bail!("{path}: status {}", resp.status());
    }
    Ok(resp.into_body().collect().await?.to_bytes().len())
}

/// Per-request latencies (ms), one request at a time.
async fn latency(
    path: Path,
    origin: SocketAddr,
    proxy: SocketAddr,
    n: usize,
    object: &str,
) -> crate::Result<Vec<f64>> {
    let mut c = client(path, origin, proxy).await?;
    let mut v = Vec::with_capacity(n);
    for _ in 0..n {
        let t = Instant::now();
        fetch(&mut c, origin.port(), object).await?;
        v.push(t.elapsed().as_secs_f64() * 1e3);
    }
    v.sort_by(f64::total_cmp);
    Ok(v)
}

/// Requests/s with `k` in flight for `secs`.
async fn throughput(
    path: Path,
    origin: SocketAddr,
    proxy: SocketAddr,
    k: usize,
    secs: f64,
    object: &'static str,
) -> crate::Result<f64> {
    let done = Arc::new(AtomicU64::new(0));
    let end = Instant::now() + Duration::from_secs_f64(secs);
    let mut tasks = tokio::task::JoinSet::new();
    // Direct: one h2c connection with k streams (a browser's one
    // connection); proxy: k HTTP/1.1 connections (how a browser talks to
    // a proxy) sharing the proxy's one h2c connection.
    let shared = match path {
        Path::Direct => Some(client(path, origin, proxy).await?),
        Path::Proxy => None,
    };
    for _ in 0..k {
        let done = done.clone();
        let mut c = match &shared {
            Some(Client::H2(s)) => Client::H2(s.clone()),
            _ => client(path, origin, proxy).await?,
        };
        tasks.spawn(async move {
            while Instant::now() < end {
                fetch(&mut c, origin.port(), object).await?;
                done.fetch_add(1, Ordering::Relaxed);
            }
            Ok::<(), BenchError>(())
        });
    }
    let t = Instant::now();
    while let Some(r) = tasks.join_next().await {
        r.context("worker")??;
    }
    Ok(done.load(Ordering::Relaxed) as f64 / t.elapsed().as_secs_f64())
}

/// Runs the proxy benchmark and prints its table (or JSON).
pub fn run(b: ProxyBench) -> crate::Result<()> {
    if b.requests == 0 || b.concurrency == 0 || b.duration.is_zero() {
        bail!("--requests, --concurrency and --duration must be above 0");
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("tokio runtime")?;
    rt.block_on(async move {
        let dir = std::env::temp_dir().join(format!("mewa-bench-proxy-{}", std::process::id()));
        let corpus = corpus();
        let origin = Origin::bind(
            &corpus,
            OriginConfig {
                plain: Some(SocketAddr::from(([127, 0, 0, 1], 0))),
                tls: None,
                h3: None,
                ca_dir: dir.join("ca"),
                http: HttpOptions::default(),
                tcp: TcpOptions::default(),
                quic_congestion: None,
                cert_groups: Vec::new(),
                iw: None,
                early_hints: None,
            },
        )
        .context("origin")?;
        let origin_addr = origin.plain_addr().context("origin address")?;
        tokio::spawn(origin.serve(std::future::pending::<()>()));
        let zone = Zone::new([(HOST.to_string(), vec![origin_addr.ip()])], 30);
        let dns = Arc::new(EdgeDns::new(
            Responder {
                zone,
                max_udp_payload: 1232,
                compact_payload: mewa_edge::dns::COMPACT_UDP_PAYLOAD,
                upstream: false,
            },
            Vec::new(),
            None,
        ));
        let (udp, tcp) = bind_dns(SocketAddr::from(([127, 0, 0, 1], 0)), 1)
            .await
            .context("edge DNS")?;
        let edge = udp
            .first()
            .and_then(|s| s.local_addr().ok())
            .context("edge DNS address")?;
        tokio::spawn(serve(dns, udp, tcp));
        let mut pc = mewa_client::proxy::ProxyConfig::new(edge, 32e6);
        pc.origin_port = origin_addr.port();
        pc.use_hints = false;
        pc.session_idle = Duration::from_secs(3600);
        let proxy = mewa_client::proxy::Proxy::new(pc);
        let l = TcpListener::bind("127.0.0.1:0").await.context("proxy")?;
        let paddr = l.local_addr()?;
        tokio::spawn(proxy.clone().serve(l));

        // Warm up both paths (the proxy's first request opens its session).
        latency(Path::Direct, origin_addr, paddr, 50, "/10k.jpg").await?;
        latency(Path::Proxy, origin_addr, paddr, 50, "/10k.jpg").await?;

        let mut t = Table::new(&["measure", "direct h2c", "through proxy", "proxy vs direct"]);
        for object in ["/10k.jpg", "/1m.jpg"] {
            let n = if object == "/1m.jpg" {
                b.requests / 10
            } else {
                b.requests
            }
            .max(10);
            let d = latency(Path::Direct, origin_addr, paddr, n, object).await?;
            let p = latency(Path::Proxy, origin_addr, paddr, n, object).await?;
            let (d50, p50) = (percentile(&d, 0.5), percentile(&p, 0.5));
            t.push(vec![
                format!("{object} latency p50, ms"),
                format!("{d50:.3}"),
                format!("{p50:.3}"),
                format!("{:+.3} ms", p50 - d50),
            ]);
            let (d99, p99) = (percentile(&d, 0.99), percentile(&p, 0.99));
            t.push(vec![
                format!("{object} latency p99, ms"),
                format!("{d99:.3}"),
                format!("{p99:.3}"),
                format!("{:+.3} ms", p99 - d99),
            ]);
            let secs = b.duration.as_secs_f64();
            let rd = throughput(
                Path::Direct,
                origin_addr,
                paddr,
                b.concurrency,
                secs,
                object,
            )
            .await?;
            let rp =
                throughput(Path::Proxy, origin_addr, paddr, b.concurrency, secs, object).await?;
            t.push(vec![
                format!("{object} requests/s, {} in flight", b.concurrency),
                format!("{rd:.0}"),
                format!("{rp:.0}"),
                format!("{:.2}x", rp / rd),
            ]);
        }
        print!("{}", t.to_text());
        let _ = std::fs::remove_dir_all(&dir);
        Ok::<(), BenchError>(())
    })
}
