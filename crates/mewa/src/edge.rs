//! `mewa edge …`: the Mobile Edge Hint server (docs/EDGE.md).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use clap::{Args, Subcommand};
use mewa_edge::app::now_unix_s;
use mewa_edge::config::{EdgeConfig, EXAMPLE};
use mewa_edge::store::Store;

use crate::output::Table;

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

pub fn run(cmd: EdgeCmd) -> anyhow::Result<()> {
    match cmd.which {
        Which::Config => {
            print!("{EXAMPLE}");
            Ok(())
        }
        Which::Serve(a) => serve(a),
        Which::Import(a) => import(&a),
        Which::Pages(a) => pages(&a.store),
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
