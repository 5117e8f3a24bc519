//! `mewa accel …`: seed 004's accelerator (docs/ACCEL.md).

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::{bail, Context};
use bytes::Bytes;
use clap::{Args, Subcommand};
use http_body_util::{BodyExt, Empty};
use hyper_util::rt::TokioIo;
use mewa_accel::server::config::EXAMPLE;
use mewa_accel::server::{ServeConfig, Server};

#[derive(Debug, Args)]
pub struct AccelCmd {
    #[command(subcommand)]
    which: Which,
}

#[derive(Debug, Subcommand)]
enum Which {
    /// Run the accelerator until Ctrl-C: HTTP/2 and HTTP/1.1 over TLS (and
    /// in clear if configured) for the configured sites, folding their
    /// allowlisted domains into one connection, with a cache and an admin
    /// listener (metrics, status page, purge).
    Serve(ConfigArg),
    /// Check a configuration file and print its sites.
    Check(ConfigArg),
    /// Print a configuration file with every key, its default and what it
    /// does.
    Config,
    /// Remove stored responses through a running accelerator's admin
    /// listener.
    Purge(PurgeArgs),
}

#[derive(Debug, Args)]
struct ConfigArg {
    /// Configuration file (`mewa accel config` prints one).
    #[arg(long, short, value_name = "FILE")]
    config: PathBuf,
}

#[derive(Debug, Args)]
#[group(required = true, multiple = false)]
struct PurgeWhat {
    /// One URL as the origin serves it (`https://img.b.example/x.png`),
    /// every variant.
    #[arg(long)]
    url: Option<String>,
    /// Every URL of one host.
    #[arg(long)]
    host: Option<String>,
    /// Everything.
    #[arg(long)]
    all: bool,
}

#[derive(Debug, Args)]
struct PurgeArgs {
    /// The admin listener (`[listen] admin`).
    #[arg(long, default_value = "127.0.0.1:9180", value_name = "ADDR")]
    admin: SocketAddr,
    #[command(flatten)]
    what: PurgeWhat,
}

pub fn run(cmd: AccelCmd) -> anyhow::Result<()> {
    match cmd.which {
        Which::Serve(a) => serve(a),
        Which::Check(a) => check(a),
        Which::Config => {
            print!("{EXAMPLE}");
            Ok(())
        }
        Which::Purge(p) => purge(p),
    }
}

fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the runtime")
}

fn serve(a: ConfigArg) -> anyhow::Result<()> {
    let config = ServeConfig::load(&a.config)?;
    runtime()?.block_on(async {
        let server = Server::bind(&config).await?;
        for (what, addr) in [
            ("https (h2, http/1.1)", server.https_addr()),
            ("http (http/1.1, h2c)", server.http_addr()),
            ("admin", server.admin_addr()),
        ] {
            if let Some(addr) = addr {
                tracing::info!("accel: {what} on {addr}");
            }
        }
        for site in server.accel().sites().iter() {
            let hosts: Vec<&str> = site.hosts().collect();
            let fold: Vec<&str> = site.folded_hosts().collect();
            tracing::info!("accel: site {} folds {}", hosts.join(", "), fold.join(", "));
        }
        server
            .serve(async {
                let _ = tokio::signal::ctrl_c().await;
                tracing::info!("accel: stopping");
            })
            .await;
        anyhow::Ok(())
    })
}

fn check(a: ConfigArg) -> anyhow::Result<()> {
    let config = ServeConfig::load(&a.config)?;
    let sites = config.sites()?;
    println!("{}: valid", a.config.display());
    for site in sites.iter() {
        let hosts: Vec<&str> = site.hosts().collect();
        let fold: Vec<&str> = site.folded_hosts().collect();
        let prefix = if site.prefix().is_empty() {
            "/<host>/…".to_owned()
        } else {
            format!("{}/<host>/…", site.prefix())
        };
        println!(
            "site {}: folds {} as {prefix}",
            hosts.join(", "),
            fold.join(", ")
        );
    }
    Ok(())
}

/// Percent-encodes everything but RFC 3986's unreserved characters.
fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

fn purge(p: PurgeArgs) -> anyhow::Result<()> {
    let query = match (&p.what.url, &p.what.host, p.what.all) {
        (Some(u), _, _) => format!("url={}", encode(u)),
        (_, Some(h), _) => format!("host={}", encode(h)),
        _ => "all".to_owned(),
    };
    let (status, body) = runtime()?.block_on(async {
        let tcp = tokio::net::TcpStream::connect(p.admin)
            .await
            .with_context(|| format!("connecting to the admin listener {}", p.admin))?;
        let (mut send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tcp)).await?;
        tokio::spawn(conn);
        let req = http::Request::post(format!("/purge?{query}"))
            .header("host", p.admin.to_string())
            .body(Empty::<Bytes>::new())?;
        let res = send.send_request(req).await?;
        let status = res.status();
        let body = res.into_body().collect().await?.to_bytes();
        anyhow::Ok((status, body))
    })?;
    let text = String::from_utf8_lossy(&body);
    if !status.is_success() {
        bail!("purge refused ({status}): {}", text.trim());
    }
    print!("{text}");
    Ok(())
}
