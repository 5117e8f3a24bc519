//! `mewa bench origin`: requests/s and transfer rate of the origin server
//! (`crates/origin`) over h2c on loopback, side by side with nghttpd and
//! nginx serving the same bytes in the same run (target: ≥ 80 % of the
//! better one).
//!
//! How it is fair:
//! - **Same bytes.** A one-page corpus is built in code (an HTML root and two
//!   `image/jpeg` children of 10 000 and 1 000 000 bytes). Our origin serves
//!   it; the same bodies (`mewa_corpus::body`, `http` scheme) are written to a
//!   docroot in a temporary directory that nghttpd and nginx serve. Before the
//!   measured runs, a counted run against every server checks that every
//!   request got a 2xx and that exactly `requests × size` body bytes came
//!   back.
//! - **Same shape of server.** Every server is a separate process with the
//!   same number of workers (`--workers`, default: the CPU count): our origin
//!   is this binary's `mewa origin serve --plain` with `TOKIO_WORKER_THREADS`,
//!   nghttpd gets `-n`, nginx `worker_processes`. A child process rather than
//!   a runtime inside this process, so that nothing of the bench itself
//!   shares the server's address space or scheduler.
//! - **Same client.** One h2load command line for all (`-c`, `-m`, `-t`,
//!   duration and warm-up), h2c by prior knowledge, with the URL's authority
//!   set to the corpus host (our origin routes by `:authority`) and
//!   `--connect-to` for the address. The load generator competes with the
//!   server for the CPU cores (2 on the lab machine); it does so equally for
//!   every server.
//! - **Same conditions.** Runs are interleaved (for each size and run, every
//!   server in turn), so drift of the machine hits all alike; the median of
//!   the runs is reported.
//! - **nginx as one would run it for static files**: access log off, open
//!   file cache, 16 KB DATA frames, no cap on requests per connection
//!   (`start_nginx`).
//!
//! Besides req/s and MB/s it prints each server's CPU time per request
//! (user + system of all its threads and worker processes, from /proc,
//! sampled over the measured part of the run): the throughput on a shared
//! 2-core machine depends on how the scheduler splits the cores between
//! server and load generator, the CPU cost per request does much less.

use std::io::Write as _;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::util::{clk_tck, find_program, proc_ticks, TempDir};
use crate::{bail, Context};
use clap::Args;
use mewa_corpus::{Corpus, Discovery, Object, Page, Provenance, Scheme};
use mewa_link::core::parse_duration;
use mewa_report::median;
use serde::Serialize;

use mewa_report::Table;

/// The one virtual host of the bench corpus.
pub(crate) const HOST: &str = "www.bench-origin.example";

/// The target: our req/s over the better comparison server's.
const TARGET: f64 = 0.8;

/// One object size measured.
pub(crate) struct Size {
    pub(crate) label: &'static str,
    pub(crate) id: u32,
    pub(crate) path: &'static str,
    pub(crate) bytes: u64,
}

pub(crate) const SIZES: [Size; 2] = [
    Size {
        label: "10 KB",
        id: 1,
        path: "/small.jpg",
        bytes: 10_000,
    },
    Size {
        label: "1 MB",
        id: 2,
        path: "/large.jpg",
        bytes: 1_000_000,
    },
];

/// The h2load settings of `mewa bench origin` and `mewa bench accel`.
#[derive(Debug, Clone, Args)]
pub struct H2loadArgs {
    /// Measured runs per server and size; the median is reported.
    #[arg(long, default_value_t = 5)]
    runs: usize,
    /// Measured time of each run (h2load -D).
    #[arg(long, default_value = "1s", value_parser = parse_duration)]
    duration: Duration,
    /// Warm-up at the start of each run, not counted (h2load --warm-up-time).
    #[arg(long, default_value = "500ms", value_parser = parse_duration)]
    warmup: Duration,
    /// One run of 1 s per server and size (for a quick look).
    #[arg(long)]
    quick: bool,
    /// Concurrent h2c connections (h2load -c).
    #[arg(long, default_value_t = 8)]
    clients: u32,
    /// Concurrent streams per connection (h2load -m).
    #[arg(long, default_value_t = 10)]
    streams: u32,
    /// Load generator threads (h2load -t).
    #[arg(long, default_value_t = 1)]
    client_threads: u32,
}

impl H2loadArgs {
    /// The runs (1 with --quick).
    pub(crate) fn runs(&self) -> usize {
        if self.quick {
            1
        } else {
            self.runs
        }
    }

    /// The load every run puts on a server, after --quick and a check of
    /// the values.
    pub(crate) fn shape(&self) -> crate::Result<Shape> {
        let duration = if self.quick {
            Duration::from_secs(1)
        } else {
            self.duration
        };
        if self.runs() == 0 || self.clients == 0 || self.streams == 0 || self.client_threads == 0 {
            bail!("--runs, --clients, --streams and --client-threads must be at least 1");
        }
        if self.client_threads > self.clients {
            bail!("--client-threads must not exceed --clients (h2load refuses it)");
        }
        if duration < Duration::from_millis(100) {
            bail!("--duration must be at least 100ms");
        }
        Ok(Shape {
            clients: self.clients,
            streams: self.streams,
            client_threads: self.client_threads,
            duration,
            warmup: self.warmup,
        })
    }
}

#[derive(Debug, Args)]
/// `mewa bench origin`'s settings.
pub struct OriginBench {
    #[command(flatten)]
    load: H2loadArgs,
    /// Worker threads or processes of every server (tokio workers, nghttpd
    /// -n, nginx worker_processes); default: the number of CPUs.
    #[arg(long)]
    workers: Option<usize>,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
}

/// The servers compared (here and in `mewa bench accel`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Mewa,
    Nghttpd,
    Nginx,
    /// `mewa accel serve` in front of our origin.
    Accel,
    /// nginx with `proxy_cache` in front of our origin.
    NginxCache,
}

impl Kind {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Kind::Mewa => "mewa",
            Kind::Nghttpd => "nghttpd",
            Kind::Nginx => "nginx",
            Kind::Accel => "mewa-accel",
            Kind::NginxCache => "nginx-cache",
        }
    }
}

/// The median of one server at one size.
#[derive(Debug, Clone, Serialize)]
struct Cell {
    server: &'static str,
    size: &'static str,
    object_bytes: u64,
    /// Median requests per second.
    req_per_s: f64,
    /// Response-body bytes per second of the median run, in MB/s (10^6).
    mb_per_s: f64,
    /// Median server CPU time (all threads and worker processes, user +
    /// system) per request, µs.
    cpu_us_per_req: Option<f64>,
    /// Requests per second of every run.
    runs_req_per_s: Vec<f64>,
}

/// Our origin against the better comparison server at one size.
#[derive(Debug, Clone, Serialize)]
struct Ratio {
    size: &'static str,
    best_other: &'static str,
    /// mewa req/s ÷ best other's req/s (equal to the MB/s ratio: same bodies).
    ratio: f64,
    target: f64,
    met: bool,
}

/// Runs the origin benchmark and prints its table (or JSON).
pub fn run(b: OriginBench) -> crate::Result<()> {
    let shape = b.load.shape()?;
    let runs_n = b.load.runs();
    let workers = b
        .workers
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(2, |n| n.get()))
        .max(1);
    let h2load = find_program("h2load").context(
        "h2load (the load generator) is not installed; install it with \
         `apt-get install nghttp2-client` (scripts/setup does)",
    )?;
    let mut kinds = vec![Kind::Mewa];
    let mut others = Vec::new();
    for (k, pkg) in [(Kind::Nghttpd, "nghttp2-server"), (Kind::Nginx, "nginx")] {
        match find_program(k.name()) {
            Some(p) => {
                kinds.push(k);
                others.push((k, p));
            }
            None => eprintln!(
                "skipping {}: not installed (install with `apt-get install {pkg}`)",
                k.name()
            ),
        }
    }
    if others.is_empty() {
        bail!(
            "neither nghttpd nor nginx is installed, so there is nothing to compare with; \
             install them with `apt-get install nghttp2-server nginx` (scripts/setup does)"
        );
    }
    if cfg!(debug_assertions) {
        eprintln!(
            "note: this is a debug build, and so is the origin it runs; build with \
             --release for figures that count"
        );
    }

    let tmp = TempDir::new()?;
    let corpus = bench_corpus()?;
    let docroot = tmp.path.join("www");
    write_docroot(&corpus, &docroot)?;
    let corpus_file = tmp.path.join("corpus.json");
    std::fs::write(&corpus_file, corpus.to_json())
        .with_context(|| format!("writing {}", corpus_file.display()))?;

    // Every server stays up for the whole bench; idle ones cost nothing.
    let mut servers = Vec::new();
    servers.push(start_mewa(&tmp.path, &corpus_file, workers)?);
    for (k, prog) in &others {
        servers.push(match k {
            Kind::Nghttpd => start_nghttpd(prog, &tmp.path, &docroot, workers)?,
            Kind::Nginx => start_nginx(prog, &tmp.path, &docroot, workers)?,
            _ => unreachable!("only nghttpd and nginx are other servers"),
        });
    }
    for s in &mut servers {
        s.wait_ready()?;
    }

    let load = Load {
        h2load: &h2load,
        b: shape,
        clk_tck: clk_tck(),
    };
    let mut cells = Vec::new();
    for size in &SIZES {
        // A counted run first: warms every server up and checks that each
        // serves the object, whole, to every request.
        for s in &servers {
            load.check(s, size)?;
        }
        let mut runs: Vec<Vec<Sample>> = servers.iter().map(|_| Vec::new()).collect();
        for r in 0..runs_n {
            for (i, s) in servers.iter().enumerate() {
                let m = load.measure(s, size)?;
                eprintln!(
                    "{} run {}/{}: {:<8} {:>10.0} req/s {:>8} µs CPU/req",
                    size.label,
                    r + 1,
                    runs_n,
                    s.kind.name(),
                    m.req_per_s,
                    m.cpu_us_per_req.map_or("-".into(), |v| format!("{v:.1}"))
                );
                runs[i].push(m);
            }
        }
        for (s, rs) in servers.iter().zip(runs) {
            let rps: Vec<f64> = rs.iter().map(|m| m.req_per_s).collect();
            let cpu: Option<Vec<f64>> = rs.iter().map(|m| m.cpu_us_per_req).collect();
            let med = median(&rps).unwrap_or(0.0);
            cells.push(Cell {
                server: s.kind.name(),
                size: size.label,
                object_bytes: size.bytes,
                req_per_s: med,
                mb_per_s: med * size.bytes as f64 / 1e6,
                cpu_us_per_req: cpu.map(|c| median(&c).unwrap_or(0.0)),
                runs_req_per_s: rps,
            });
        }
    }
    drop(servers);

    let ratios: Vec<Ratio> = SIZES
        .iter()
        .filter_map(|size| {
            let at = |name: &str| {
                cells
                    .iter()
                    .find(|c| c.size == size.label && c.server == name)
            };
            let ours = at(Kind::Mewa.name())?;
            let best = cells
                .iter()
                .filter(|c| c.size == size.label && c.server != Kind::Mewa.name())
                .max_by(|a, z| a.req_per_s.total_cmp(&z.req_per_s))?;
            let ratio = ours.req_per_s / best.req_per_s.max(f64::MIN_POSITIVE);
            Some(Ratio {
                size: size.label,
                best_other: best.server,
                ratio,
                target: TARGET,
                met: ratio >= TARGET,
            })
        })
        .collect();

    if b.json {
        let mut config = shape.json(runs_n, workers);
        config["servers"] = serde_json::json!(kinds.iter().map(|k| k.name()).collect::<Vec<_>>());
        println!(
            "{}",
            serde_json::json!({
                "config": config,
                "results": cells,
                "ratios": ratios,
            })
        );
        return Ok(());
    }
    let mut t = Table::new(&[
        "size",
        "server",
        "req/s",
        "MB/s",
        "server CPU µs/req",
        "runs (req/s)",
    ]);
    for c in &cells {
        t.push(vec![
            c.size.to_string(),
            c.server.to_string(),
            format!("{:.0}", c.req_per_s),
            format!("{:.1}", c.mb_per_s),
            c.cpu_us_per_req.map_or("-".into(), |v| format!("{v:.1}")),
            c.runs_req_per_s
                .iter()
                .map(|v| format!("{v:.0}"))
                .collect::<Vec<_>>()
                .join(" "),
        ]);
    }
    print!("{}", t.to_text());
    for r in &ratios {
        println!(
            "{:>5}: mewa / {} = {:.2} (target >= {TARGET:.2}: {})",
            r.size,
            r.best_other,
            r.ratio,
            if r.met { "met" } else { "NOT met" }
        );
    }
    println!(
        "h2load -c {} -m {} -t {}, {:.1} s measured after {:.1} s warm-up, median of {} run(s); \
         h2c on loopback; {workers} worker(s) per server; MB = 10^6 bytes of response bodies.",
        shape.clients,
        shape.streams,
        shape.client_threads,
        shape.duration.as_secs_f64(),
        shape.warmup.as_secs_f64(),
        runs_n
    );
    Ok(())
}

/// One page on [`HOST`]: an HTML root that references the two images.
pub(crate) fn bench_corpus() -> crate::Result<Corpus> {
    let obj = |id: u32, path: &str, size: u64, content_type: &str, parent: Option<u32>| Object {
        id,
        host: HOST.to_string(),
        path: path.to_string(),
        size,
        content_type: content_type.to_string(),
        parent,
        discovery: Discovery::Html,
        compute_ms: 0,
        status: None,
        think_ms: 0,
        recorded_size: None,
    };
    let mut objects = vec![obj(0, "/", 2000, "text/html", None)];
    for s in &SIZES {
        objects.push(obj(s.id, s.path, s.bytes, "image/jpeg", Some(0)));
    }
    let page = Page {
        name: "bench-origin".to_string(),
        main: format!("http://{HOST}/"),
        objects,
        shared_connections: Vec::new(),
    };
    page.validate().context("the bench corpus is invalid")?;
    Ok(Corpus {
        name: "bench-origin".to_string(),
        provenance: Provenance::Generated {
            preset: "bench-origin".to_string(),
            seed: 0,
            pages: None,
            share: None,
        },
        pages: vec![page],
    })
}

/// Writes every object's `http` body to `docroot` (`/` as `index.html`).
fn write_docroot(corpus: &Corpus, docroot: &Path) -> crate::Result<()> {
    std::fs::create_dir_all(docroot).with_context(|| format!("creating {}", docroot.display()))?;
    for page in &corpus.pages {
        for o in &page.objects {
            let body = mewa_corpus::body(page, o.id, Scheme::Http)
                .with_context(|| format!("body of {}", o.path))?;
            if body.len() as u64 != o.size {
                bail!(
                    "body of {} has {} bytes, not {}",
                    o.path,
                    body.len(),
                    o.size
                );
            }
            let rel = match o.path.trim_start_matches('/') {
                "" => "index.html",
                p => p,
            };
            let file = docroot.join(rel);
            std::fs::write(&file, &body).with_context(|| format!("writing {}", file.display()))?;
        }
    }
    Ok(())
}

/// A running server process; stopped (and reaped) on drop.
pub(crate) struct Server {
    pub(crate) kind: Kind,
    pub(crate) addr: SocketAddr,
    child: Child,
    log: PathBuf,
    /// How to stop it gracefully first (nginx: its master must tell the
    /// workers, which a SIGKILL would orphan).
    stop: Option<Command>,
}

impl Server {
    pub(crate) fn spawn(
        kind: Kind,
        addr: SocketAddr,
        mut cmd: Command,
        tmp: &Path,
        stop: Option<Command>,
    ) -> crate::Result<Server> {
        let log = tmp.join(format!("{}.log", kind.name()));
        let f =
            std::fs::File::create(&log).with_context(|| format!("creating {}", log.display()))?;
        let child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(f)
            .spawn()
            .with_context(|| format!("starting {}: {cmd:?}", kind.name()))?;
        Ok(Server {
            kind,
            addr,
            child,
            log,
            stop,
        })
    }

    /// Waits until the server accepts connections (10 s at most).
    pub(crate) fn wait_ready(&mut self) -> crate::Result<()> {
        let start = Instant::now();
        loop {
            if let Some(st) = self.child.try_wait()? {
                bail!(
                    "{} exited ({st}) before serving: {}",
                    self.kind.name(),
                    self.log_tail()
                );
            }
            if TcpStream::connect_timeout(&self.addr, Duration::from_millis(200)).is_ok() {
                return Ok(());
            }
            if start.elapsed() > Duration::from_secs(10) {
                bail!(
                    "{} does not accept connections on {} after 10 s: {}",
                    self.kind.name(),
                    self.addr,
                    self.log_tail()
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// CPU time (user + system) of the server's process and its child
    /// processes (nginx workers), from /proc.
    fn cpu_seconds(&self, clk_tck: f64) -> Option<f64> {
        let pid = self.child.id();
        let mut ticks = proc_ticks(pid)?;
        let children =
            std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children")).unwrap_or_default();
        for c in children.split_whitespace().filter_map(|c| c.parse().ok()) {
            ticks += proc_ticks(c).unwrap_or(0);
        }
        Some(ticks as f64 / clk_tck)
    }

    pub(crate) fn log_tail(&self) -> String {
        let s = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = s.lines().collect();
        let tail = lines[lines.len().saturating_sub(5)..].join(" | ");
        if tail.is_empty() {
            "(nothing on stderr)".to_string()
        } else {
            tail
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(cmd) = &mut self.stop {
            let _ = cmd
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
            let start = Instant::now();
            while start.elapsed() < Duration::from_secs(3) {
                if let Ok(Some(_)) = self.child.try_wait() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A free loopback address (the port is released again; the server binds it
/// right after).
pub(crate) fn free_addr() -> crate::Result<SocketAddr> {
    let l = TcpListener::bind("127.0.0.1:0").context("finding a free port")?;
    Ok(l.local_addr()?)
}

fn start_mewa(tmp: &Path, corpus: &Path, workers: usize) -> crate::Result<Server> {
    start_mewa_origin(tmp, corpus, workers, 0)
}

/// Our origin (`mewa origin serve --plain`) as a child process, with
/// `Cache-Control: max-age` of `max_age` s.
pub(crate) fn start_mewa_origin(
    tmp: &Path,
    corpus: &Path,
    workers: usize,
    max_age: u32,
) -> crate::Result<Server> {
    let addr = free_addr()?;
    let exe = std::env::current_exe().context("finding this program")?;
    let mut cmd = Command::new(exe);
    cmd.arg("origin")
        .arg("serve")
        .arg("--plain")
        .arg(addr.to_string())
        .arg("--max-age")
        .arg(format!("{max_age}s"))
        .arg("--ca-dir")
        .arg(tmp.join("ca"))
        .arg(corpus)
        .env("TOKIO_WORKER_THREADS", workers.to_string());
    Server::spawn(Kind::Mewa, addr, cmd, tmp, None)
}

fn start_nghttpd(prog: &Path, tmp: &Path, docroot: &Path, workers: usize) -> crate::Result<Server> {
    let addr = free_addr()?;
    let mut cmd = Command::new(prog);
    cmd.arg("--no-tls")
        .arg("-a")
        .arg(addr.ip().to_string())
        .arg("-n")
        .arg(workers.to_string())
        .arg("-d")
        .arg(docroot)
        .arg(addr.port().to_string());
    Server::spawn(Kind::Nghttpd, addr, cmd, tmp, None)
}

fn start_nginx(prog: &Path, tmp: &Path, docroot: &Path, workers: usize) -> crate::Result<Server> {
    let addr = free_addr()?;
    let version = nginx_version(prog);
    // nginx 1.25.1 moved h2 from `listen … http2` to the `http2` directive;
    // on a cleartext listener either means h2c by prior knowledge.
    let (listen, http2) = match version {
        Some(v) if v >= (1, 25, 1) => (format!("listen {addr};"), "http2 on;"),
        _ => (format!("listen {addr} http2;"), ""),
    };
    let t = tmp.display();
    // Tuned the way one would for static files: no access log, open file
    // descriptors cached (our origin serves from memory, nghttpd caches
    // them too), DATA frames of the full 16 KB (the default is 8 KB), and
    // no limit on requests per connection (the default 1000 would end the
    // load generator's connections mid-run).
    let conf = format!(
        "worker_processes {workers};
pid {t}/nginx.pid;
error_log {t}/nginx-error.log warn;
events {{ worker_connections 4096; }}
http {{
    access_log off;
    sendfile on;
    tcp_nopush on;
    tcp_nodelay on;
    keepalive_requests 100000000;
    keepalive_timeout 120s;
    open_file_cache max=64;
    http2_chunk_size 16k;
    types {{ text/html html; image/jpeg jpg; }}
    default_type application/octet-stream;
    client_body_temp_path {t}/nginx-temp/body;
    proxy_temp_path {t}/nginx-temp/proxy;
    fastcgi_temp_path {t}/nginx-temp/fastcgi;
    uwsgi_temp_path {t}/nginx-temp/uwsgi;
    scgi_temp_path {t}/nginx-temp/scgi;
    server {{
        {listen}
        {http2}
        server_name {HOST};
        root {root};
    }}
}}
",
        root = docroot.display()
    );
    spawn_nginx(prog, tmp, "nginx", Kind::Nginx, addr, &conf)
}

/// Writes `conf` to `tmp/NAME.conf` (with `tmp/NAME-temp` for nginx's
/// temporary files, which the configuration must name) and runs nginx on
/// it in the foreground, stopped with `nginx -s stop` (its master must
/// tell the workers; a SIGKILL would orphan them).
pub(crate) fn spawn_nginx(
    prog: &Path,
    tmp: &Path,
    name: &str,
    kind: Kind,
    addr: SocketAddr,
    conf: &str,
) -> crate::Result<Server> {
    std::fs::create_dir_all(tmp.join(format!("{name}-temp")))
        .context("creating the nginx temp dir")?;
    let conf_file = tmp.join(format!("{name}.conf"));
    std::fs::File::create(&conf_file)
        .and_then(|mut f| f.write_all(conf.as_bytes()))
        .with_context(|| format!("writing {}", conf_file.display()))?;
    let base = |cmd: &mut Command| {
        cmd.arg("-p")
            .arg(tmp)
            .arg("-e")
            .arg(tmp.join(format!("{name}-error.log")))
            .arg("-c")
            .arg(&conf_file);
    };
    let mut cmd = Command::new(prog);
    base(&mut cmd);
    cmd.arg("-g").arg("daemon off;");
    let mut stop = Command::new(prog);
    base(&mut stop);
    stop.arg("-s").arg("stop");
    Server::spawn(kind, addr, cmd, tmp, Some(stop))
}

/// `nginx -v` prints `nginx version: nginx/1.22.1` on stderr.
pub(crate) fn nginx_version(prog: &Path) -> Option<(u32, u32, u32)> {
    let out = Command::new(prog).arg("-v").output().ok()?;
    let text = String::from_utf8_lossy(&out.stderr);
    let v = text.split("nginx/").nth(1)?.split_whitespace().next()?;
    let mut it = v.split('.').map(|p| p.parse::<u32>().ok());
    Some((it.next()??, it.next()??, it.next().flatten().unwrap_or(0)))
}

/// The load h2load puts on every server.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Shape {
    pub(crate) clients: u32,
    pub(crate) streams: u32,
    pub(crate) client_threads: u32,
    pub(crate) duration: Duration,
    pub(crate) warmup: Duration,
}

impl Shape {
    /// The settings as JSON, for a benchmark's `--json` output.
    pub(crate) fn json(&self, runs: usize, workers: usize) -> serde_json::Value {
        serde_json::json!({
            "protocol": "h2c (prior knowledge), loopback",
            "runs": runs,
            "duration_s": self.duration.as_secs_f64(),
            "warmup_s": self.warmup.as_secs_f64(),
            "clients": self.clients,
            "streams_per_client": self.streams,
            "client_threads": self.client_threads,
            "server_workers": workers,
        })
    }
}

/// The h2load command line shared by every server.
pub(crate) struct Load<'a> {
    pub(crate) h2load: &'a Path,
    pub(crate) b: Shape,
    /// Clock ticks per second of /proc/<pid>/stat times.
    pub(crate) clk_tck: f64,
}

/// One timed run.
pub(crate) struct Sample {
    pub(crate) req_per_s: f64,
    pub(crate) cpu_us_per_req: Option<f64>,
}

impl Load<'_> {
    pub(crate) fn command(&self, s: &Server, size: &Size) -> Command {
        let mut cmd = Command::new(self.h2load);
        cmd.arg("-t")
            .arg(self.b.client_threads.to_string())
            .arg("-c")
            .arg(self.b.clients.to_string())
            .arg("-m")
            .arg(self.b.streams.to_string())
            // The authority names the corpus host; the socket goes to the
            // server's loopback port.
            .arg("--connect-to")
            .arg(s.addr.to_string())
            .arg(format!("http://{HOST}:{}{}", s.addr.port(), size.path));
        cmd
    }

    /// Runs h2load; `during` is called while it runs (to sample the
    /// server's CPU time).
    pub(crate) fn run<T>(
        &self,
        s: &Server,
        size: &Size,
        mut cmd: Command,
        during: impl FnOnce() -> T,
    ) -> crate::Result<(Report, T)> {
        let child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .with_context(|| format!("running {cmd:?}"))?;
        let sampled = during();
        let out = child
            .wait_with_output()
            .with_context(|| format!("running {cmd:?}"))?;
        let text = String::from_utf8_lossy(&out.stdout);
        if !out.status.success() {
            bail!(
                "h2load against {} ({}) failed ({}): {}{}",
                s.kind.name(),
                size.label,
                out.status,
                String::from_utf8_lossy(&out.stderr).trim(),
                text.trim()
            );
        }
        let r = Report::parse(&text).with_context(|| {
            format!(
                "reading h2load's output against {} ({})",
                s.kind.name(),
                size.label
            )
        })?;
        r.all_ok().with_context(|| {
            format!(
                "{} ({}) did not answer every request with 2xx; server log: {}",
                s.kind.name(),
                size.label,
                s.log_tail()
            )
        })?;
        Ok((r, sampled))
    }

    /// A counted run: every request 2xx, and exactly `n × size` body bytes.
    pub(crate) fn check(&self, s: &Server, size: &Size) -> crate::Result<()> {
        let n = u64::from(self.b.clients) * u64::from(self.b.streams) * 4;
        let mut cmd = self.command(s, size);
        cmd.arg("-n").arg(n.to_string());
        let (r, ()) = self.run(s, size, cmd, || ())?;
        if r.status_2xx != n || r.data_bytes != Some(n * size.bytes) {
            bail!(
                "{} ({}): {} of {n} requests answered 2xx with {:?} body bytes, expected {}",
                s.kind.name(),
                size.label,
                r.status_2xx,
                r.data_bytes,
                n * size.bytes
            );
        }
        Ok(())
    }

    /// A timed run: requests per second, and the server's CPU time per
    /// request (sampled from after the warm-up to the end of the measured
    /// time; `None` where /proc cannot be read).
    pub(crate) fn measure(&self, s: &Server, size: &Size) -> crate::Result<Sample> {
        let mut cmd = self.command(s, size);
        cmd.arg("-D")
            .arg(format!("{}ms", self.b.duration.as_millis().max(1)))
            .arg("--warm-up-time")
            .arg(format!("{}ms", self.b.warmup.as_millis().max(1)));
        let (r, cpu) = self.run(s, size, cmd, || {
            std::thread::sleep(self.b.warmup);
            let (c1, t1) = (s.cpu_seconds(self.clk_tck), Instant::now());
            std::thread::sleep(self.b.duration);
            let (c2, t2) = (s.cpu_seconds(self.clk_tck), Instant::now());
            Some((c2? - c1?, (t2 - t1).as_secs_f64()))
        })?;
        let cpu_us_per_req = cpu.map(|(c, t)| c * 1e6 / (r.req_per_s * t).max(1.0));
        Ok(Sample {
            req_per_s: r.req_per_s,
            cpu_us_per_req,
        })
    }
}

/// What is read from h2load's summary.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Report {
    pub(crate) req_per_s: f64,
    succeeded: u64,
    failed: u64,
    errored: u64,
    timeout: u64,
    status_2xx: u64,
    status_other: u64,
    /// DATA payload bytes (`traffic: … (N) data`).
    data_bytes: Option<u64>,
    /// Mean time for a request, µs (`time for request:` line).
    pub(crate) mean_request_us: Option<f64>,
}

impl Report {
    /// Parses the lines
    /// `finished in 2.50s, 153725.00 req/s, 1.44GB/s`,
    /// `requests: 10 total, 10 started, 10 done, 10 succeeded, 0 failed, 0 errored, 0 timeout`,
    /// `status codes: 10 2xx, 0 3xx, 0 4xx, 0 5xx` and
    /// `traffic: 98KB (100620) total, 254B (260) headers (space savings 92.72%), 97KB (100000) data`.
    fn parse(text: &str) -> crate::Result<Report> {
        let mut r = Report::default();
        let (mut finished, mut requests, mut status) = (false, false, false);
        for line in text.lines().map(str::trim) {
            if let Some(rest) = line.strip_prefix("finished in ") {
                let rps = rest
                    .split(", ")
                    .find_map(|p| p.strip_suffix(" req/s"))
                    .context("no req/s on the `finished in` line")?;
                r.req_per_s = rps
                    .parse()
                    .with_context(|| format!("req/s `{rps}` is not a number"))?;
                finished = true;
            } else if let Some(rest) = line.strip_prefix("requests: ") {
                for (n, what) in counts(rest)? {
                    match what {
                        "succeeded" => r.succeeded = n,
                        "failed" => r.failed = n,
                        "errored" => r.errored = n,
                        "timeout" => r.timeout = n,
                        _ => {}
                    }
                }
                requests = true;
            } else if let Some(rest) = line.strip_prefix("status codes: ") {
                for (n, what) in counts(rest)? {
                    if what == "2xx" {
                        r.status_2xx = n;
                    } else {
                        r.status_other += n;
                    }
                }
                status = true;
            } else if let Some(rest) = line.strip_prefix("time for request:") {
                // min, max, mean, sd, +/- sd.
                r.mean_request_us = rest.split_whitespace().nth(2).and_then(duration_us);
            } else if let Some(rest) = line.strip_prefix("traffic: ") {
                r.data_bytes = rest.split(", ").find_map(|p| {
                    let p = p.strip_suffix(" data")?;
                    p.split_once('(')?.1.strip_suffix(')')?.parse().ok()
                });
            }
        }
        if !(finished && requests && status) {
            bail!("no `finished in`, `requests:` or `status codes:` line in:\n{text}");
        }
        Ok(r)
    }

    /// No failure and no status other than 2xx. (In timed runs h2load's
    /// 2xx count can trail `succeeded` by the streams cut off at the end, so
    /// the two are not compared; the counted check run compares them.)
    fn all_ok(&self) -> crate::Result<()> {
        if self.failed + self.errored + self.timeout > 0
            || self.status_other > 0
            || self.succeeded == 0
            || self.status_2xx == 0
        {
            bail!(
                "{} succeeded, {} failed, {} errored, {} timed out; {} 2xx, {} other statuses",
                self.succeeded,
                self.failed,
                self.errored,
                self.timeout,
                self.status_2xx,
                self.status_other
            );
        }
        Ok(())
    }
}

/// `611us`, `1.49ms`, `2.1s` → µs.
fn duration_us(s: &str) -> Option<f64> {
    let (n, scale) = if let Some(n) = s.strip_suffix("us") {
        (n, 1.0)
    } else if let Some(n) = s.strip_suffix("ms") {
        (n, 1e3)
    } else {
        (s.strip_suffix('s')?, 1e6)
    };
    n.parse::<f64>().ok().map(|v| v * scale)
}

/// `10 total, 0 failed` → `[(10, "total"), (0, "failed")]`.
fn counts(s: &str) -> crate::Result<Vec<(u64, &str)>> {
    s.split(", ")
        .map(|p| {
            let (n, what) = p
                .trim()
                .split_once(' ')
                .with_context(|| format!("`{p}` is not `<count> <what>`"))?;
            let n = n.parse().with_context(|| format!("`{n}` is not a count"))?;
            Ok((n, what))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const OUT: &str = "starting benchmark...
spawning thread #0: 8 total client(s). 20000 total requests
Application protocol: h2c

finished in 162.31ms, 123224.03 req/s, 1.15GB/s
requests: 20000 total, 20000 started, 20000 done, 20000 succeeded, 0 failed, 0 errored, 0 timeout
status codes: 20000 2xx, 0 3xx, 0 4xx, 0 5xx
traffic: 191.33MB (200620848) total, 254.55KB (260656) headers (space savings 92.72%), 190.73MB (200000000) data
                     min         max         mean         sd        +/- sd
time for request:      112us      1.49ms       611us       261us    68.31%
";

    #[test]
    fn parses_h2load() {
        let r = Report::parse(OUT).unwrap();
        assert_eq!(
            r,
            Report {
                req_per_s: 123224.03,
                succeeded: 20000,
                failed: 0,
                errored: 0,
                timeout: 0,
                status_2xx: 20000,
                status_other: 0,
                data_bytes: Some(200_000_000),
                mean_request_us: Some(611.0),
            }
        );
        assert_eq!(duration_us("1.49ms"), Some(1490.0));
        assert_eq!(duration_us("2s"), Some(2e6));
        assert_eq!(duration_us("fast"), None);
        assert!(r.all_ok().is_ok());
        let bad = OUT.replace("20000 2xx, 0 3xx, 0 4xx", "0 2xx, 0 3xx, 20000 4xx");
        assert!(Report::parse(&bad).unwrap().all_ok().is_err());
        assert!(Report::parse("finished in 1s, 3 req/s, 1MB/s\n").is_err());
    }

    #[test]
    fn corpus_and_bodies() {
        let c = bench_corpus().unwrap();
        c.validate().unwrap();
        for s in &SIZES {
            let b = mewa_corpus::body(&c.pages[0], s.id, Scheme::Http).unwrap();
            assert_eq!(b.len() as u64, s.bytes);
        }
    }

    #[test]
    fn reads_own_cpu_time() {
        assert!(proc_ticks(std::process::id()).is_some());
        assert!(clk_tck() > 0.0);
    }
}
