//! `mewa edge …`: the Mobile Edge Hint server (docs/EDGE.md).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context};
use clap::{Args, Subcommand};
use mewa_edge::app::now_unix_s;
use mewa_edge::config::{EdgeConfig, EXAMPLE};
use mewa_edge::store::Store;
use mewa_edge::tracer::{trace_page, TraceOptions};

use crate::output::Table;
use crate::units;

#[derive(Debug, Args)]
pub struct EdgeCmd {
    #[command(subcommand)]
    which: Which,
}

#[derive(Debug, Subcommand)]
enum Which {
    /// Run the edge until Ctrl-C: DNS with hints (UDP and TCP), the latency
    /// monitor, hint rebuilds and the admin API (status page, JSON, metrics).
    Serve(ServeArgs),
    /// Print a configuration file with every key, its default and what it
    /// does.
    Config,
    /// Import page recordings (HAR 1.2, Chrome DevTools logs, Lighthouse
    /// folders; files or directories, searched recursively) into the store.
    /// Each file is one transaction: it lands whole or not at all.
    Import(ImportArgs),
    /// List the pages in the store.
    Pages(StoreArgs),
    /// Load one page in headless Chromium, as the edge's tracer does for
    /// popular pages, and store its objects, sizes and computation latency
    /// (source `tracer`). Needs Chromium (`apt-get install chromium`).
    Trace(TraceArgs),
}

#[derive(Debug, Args)]
struct ServeArgs {
    /// Configuration file (`mewa edge config` prints one); without it every
    /// default applies.
    #[arg(long, short, value_name = "FILE")]
    config: Option<PathBuf>,
    /// DNS address (UDP and TCP), overriding the file.
    #[arg(long, value_name = "ADDR")]
    listen: Option<SocketAddr>,
    /// Admin API address, overriding the file.
    #[arg(long, value_name = "ADDR")]
    admin: Option<SocketAddr>,
    /// Store file, overriding the file.
    #[arg(long, value_name = "FILE")]
    store: Option<PathBuf>,
}

#[derive(Debug, Args)]
struct StoreArgs {
    /// Store file (SQLite).
    #[arg(long, value_name = "FILE", default_value = "mewa-edge.sqlite")]
    store: PathBuf,
}

#[derive(Debug, Args)]
struct ImportArgs {
    /// Recordings: files or directories.
    #[arg(required = true)]
    inputs: Vec<PathBuf>,
    #[command(flatten)]
    store: StoreArgs,
}

#[derive(Debug, Args)]
struct TraceArgs {
    /// The page URL (http or https).
    url: String,
    #[command(flatten)]
    store: StoreArgs,
    /// Chromium binary.
    #[arg(long, value_name = "PATH", default_value = mewa_chromium::DEFAULT_CHROMIUM)]
    chromium: PathBuf,
    /// Print what was traced; store nothing.
    #[arg(long)]
    dry_run: bool,
    /// List every object too.
    #[arg(long)]
    objects: bool,
    /// Give up when the page has not loaded after this long, e.g. 30s.
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = units::timeout)]
    timeout: Duration,
    /// Chromium's host resolver rules, e.g. "MAP * 127.0.0.1:8080" to load a
    /// corpus page from a local `mewa origin serve`.
    #[arg(long, value_name = "RULES")]
    host_resolver_rules: Option<String>,
    /// Also write the recorded DevTools log here (JSON; `mewa edge import`
    /// reads it back).
    #[arg(long, value_name = "FILE")]
    log: Option<PathBuf>,
    /// Run as root, Chromium runs as this unprivileged user.
    #[arg(long, value_name = "NAME", default_value = mewa_edge::tracer::DEFAULT_USER)]
    user: String,
    /// Chromium without its sandbox: only where it cannot start (traced
    /// pages then run unconfined).
    #[arg(long)]
    no_sandbox: bool,
}

pub fn run(cmd: EdgeCmd) -> anyhow::Result<()> {
    match cmd.which {
        Which::Config => {
            print!("{EXAMPLE}");
            Ok(())
        }
        Which::Serve(a) => serve(a),
        Which::Import(a) => import(&a),
        Which::Pages(a) => pages(&a.store),
        Which::Trace(a) => trace(&a),
    }
}

fn serve(a: ServeArgs) -> anyhow::Result<()> {
    let mut config = match &a.config {
        Some(p) => EdgeConfig::load(p)?,
        None => EdgeConfig::default(),
    };
    if let Some(l) = a.listen {
        config.dns.listen = l;
    }
    if let Some(l) = a.admin {
        config.admin.listen = l;
    }
    if let Some(s) = a.store {
        config.store.path = s;
    }
    mewa_edge::app::run_until_ctrl_c(config, |edge, bound| {
        println!(
            "edge: DNS on {} (UDP, TCP), admin on http://{}/ ; store {} ; {} zone host(s){}",
            bound.dns_addr,
            bound.admin_addr,
            edge.config.store.path.display(),
            edge.zone.len(),
            edge.config
                .dns
                .upstream
                .map_or(String::new(), |u| format!(", forwarding to {u}")),
        );
        println!("Ctrl-C stops.");
    })?;
    Ok(())
}

fn import(a: &ImportArgs) -> anyhow::Result<()> {
    let mut store = Store::open(&a.store.store)?;
    let (mut files, mut pages, mut objects, mut failed) = (0, 0, 0, 0);
    for input in &a.inputs {
        if !input.exists() {
            bail!("{}: no such file or directory", input.display());
        }
        for (path, r) in mewa_hint::import::import_dir(input) {
            let report = match r {
                Ok(r) => r,
                Err(e) => {
                    eprintln!("skipped {}: {e}", path.display());
                    failed += 1;
                    continue;
                }
            };
            let source = format!("import:{}", path.display());
            let n = store
                .put_pages(&report.pages, &source, now_unix_s())
                .with_context(|| format!("storing the pages of {}", path.display()))?;
            files += 1;
            pages += n;
            objects += report.pages.iter().map(|p| p.objects.len()).sum::<usize>();
            if !report.missing_sizes.is_empty() {
                eprintln!(
                    "{}: {} object(s) without a size (kept as unknown)",
                    path.display(),
                    report.missing_sizes.len()
                );
            }
        }
    }
    let stored = store.stats()?;
    println!(
        "imported {pages} page(s), {objects} object(s) from {files} recording(s) into {} \
         (now {} distinct page URL(s); a URL imported twice keeps its last recording){}",
        a.store.store.display(),
        stored.pages,
        if failed > 0 {
            format!("; {failed} recording(s) skipped")
        } else {
            String::new()
        }
    );
    if files == 0 {
        bail!("nothing was imported");
    }
    Ok(())
}

fn pages(store: &Path) -> anyhow::Result<()> {
    if !store.exists() {
        bail!(
            "{}: no store here yet; `mewa edge import` creates it",
            store.display()
        );
    }
    let s = Store::open(store)?;
    let mut t = Table::new(&[
        "page",
        "objects",
        "KB",
        "unknown sizes",
        "queries",
        "source",
    ]);
    for p in s.pages()? {
        t.push(vec![
            p.url.clone(),
            p.objects.to_string(),
            format!("{:.0}", p.known_bytes as f64 / 1000.0),
            p.unknown_sizes.to_string(),
            p.queries.to_string(),
            p.source.clone(),
        ]);
    }
    print!("{}", t.to_text());
    Ok(())
}

fn trace(a: &TraceArgs) -> anyhow::Result<()> {
    let opts = TraceOptions {
        timeout: a.timeout,
        extra_args: a
            .host_resolver_rules
            .iter()
            .map(|r| format!("host-resolver-rules={r}"))
            .collect(),
        user: a.user.clone(),
        no_sandbox: a.no_sandbox,
        ..TraceOptions::default()
    };
    if a.no_sandbox {
        eprintln!("warning: --no-sandbox: the traced page runs without Chromium's sandbox");
    }
    // Open the store first: a bad store path should not cost a page load.
    let mut store = match a.dry_run {
        true => None,
        false => Some(Store::open(&a.store.store)?),
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("starting the runtime")?;
    let traced = rt.block_on(trace_page(&a.chromium, &a.url, &opts))?;
    let t = &traced.timing;
    println!(
        "{}: {} objects, {} bytes ({:.0} KB), computation latency {} ms \
         (onload {:.0} ms, network busy {:.0} ms); traced in {:.2} s",
        traced.url,
        traced.page.objects.len(),
        traced.page.total_bytes(),
        traced.page.total_bytes() as f64 / 1000.0,
        t.computation_ms,
        t.onload_ms,
        t.network_busy_ms,
        traced.elapsed.as_secs_f64()
    );
    for n in &traced.notes {
        eprintln!("note: {n}");
    }
    if a.objects {
        let mut table = Table::new(&["object", "bytes", "type"]);
        for o in &traced.page.objects {
            table.push(vec![
                o.url.clone(),
                o.size.map_or("?".into(), |s| s.to_string()),
                o.content_type.clone().unwrap_or_default(),
            ]);
        }
        print!("{}", table.to_text());
    }
    if let Some(path) = &a.log {
        let json = serde_json::to_vec_pretty(&traced.log)?;
        std::fs::write(path, json).with_context(|| format!("writing {}", path.display()))?;
        println!("DevTools log written to {}", path.display());
    }
    match &mut store {
        Some(s) => {
            s.put_page(&traced.page, "tracer", now_unix_s())
                .with_context(|| format!("storing the trace of {}", traced.url))?;
            println!("stored in {} (source tracer)", a.store.store.display());
        }
        None => println!("dry run: nothing stored"),
    }
    Ok(())
}
