//! `mewa client …`: the hint-aware client (docs/EDGE.md, "Client").

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::{bail, Context};
use clap::{Args, Subcommand};
use mewa_client::advice::{plan, Radio};
use mewa_client::resolve::resolve;

#[derive(Debug, Args)]
pub struct ClientCmd {
    #[command(subcommand)]
    which: Which,
}

#[derive(Debug, Subcommand)]
enum Which {
    /// Ask the edge for a page's hint (DNS with the hint request) and print
    /// what the client would do: the number of connections with the inputs
    /// of Algorithm 1 and the size-balanced assignment, or why it falls back
    /// to plain behaviour.
    Plan(PlanArgs),
    /// Run the local forward proxy a browser uses for http:// pages
    /// (`chromium --proxy-server=http://127.0.0.1:8118`, or with `--tls`
    /// HTTP/2 over TLS: `--proxy-server=https://…`): on a page's document it
    /// asks the edge for the hint, opens the planned number of h2c
    /// connections to the origin and sends each object on the connection
    /// the dispatch chose. Serves loopback clients only.
    Proxy(ProxyArgs),
}

#[derive(Debug, Args)]
struct ProxyArgs {
    /// Where the browser connects (keep it on loopback).
    #[arg(long, default_value = "127.0.0.1:8118")]
    listen: SocketAddr,
    /// The edge's DNS address.
    #[arg(long, default_value = "127.0.0.1:53")]
    edge: SocketAddr,
    /// Radio bandwidth in Mbit/s the plan assumes (seed 000 §IV: 32).
    #[arg(long, default_value_t = 32.0)]
    mbit: f64,
    /// Radio RTT in ms; default: each DNS exchange with the edge.
    #[arg(long)]
    radio_rtt_ms: Option<f64>,
    /// Origin port (h2c).
    #[arg(long, default_value_t = 80)]
    origin_port: u16,
    /// Ignore hints: one connection per origin (the baseline).
    #[arg(long)]
    no_hints: bool,
    /// Do not request the objects a hint names before the browser asks for
    /// them (by default the proxy fetches them as soon as the document's
    /// request is out and answers the browser from those responses).
    #[arg(long)]
    no_prefetch: bool,
    /// When images, fonts and media go upstream: `pull-rate` (each waits
    /// in the proxy for the connection that would finish it first at its
    /// delivery rate over the last RTT), `push` (as the browser asks, on
    /// the connection the hint's size-balanced assignment chose: seed 000
    /// as written) or `auto` (default: push when the page's objects are
    /// prefetched from the hint's URLs, pull-rate otherwise).
    #[arg(long, default_value = "auto", value_parser = parse_dispatch)]
    dispatch: mewa_client::proxy::Dispatch,
    /// Serve TLS, HTTP/2 by ALPN, with a certificate from the test CA (the
    /// browser then sends every request of a page at once; over HTTP/1.1 it
    /// keeps six per host in flight). Prints the Chromium flags to use.
    #[arg(long)]
    tls: bool,
    /// The test CA's folder for `--tls` (default: $XDG_DATA_HOME/mewa/ca or
    /// ~/.local/share/mewa/ca, as `mewa origin serve`).
    #[arg(long, value_name = "DIR")]
    ca_dir: Option<std::path::PathBuf>,
}

/// The proxy's dispatch: any but `pull`, which only the lab's loader has.
fn parse_dispatch(s: &str) -> Result<mewa_client::proxy::Dispatch, String> {
    match s.parse() {
        Ok(mewa_client::proxy::Dispatch::Pull) => Err(format!(
            "`{s}`: the proxy has no fixed-budget pull; give auto, push or pull-rate"
        )),
        Ok(d) => Ok(d),
        Err(_) => Err(format!("`{s}`: give auto, push or pull-rate")),
    }
}

#[derive(Debug, Args)]
struct PlanArgs {
    /// The page, e.g. http://www.example.com/.
    url: String,
    /// The edge's DNS address.
    #[arg(long, default_value = "127.0.0.1:53")]
    edge: SocketAddr,
    /// Radio bandwidth in Mbit/s (seed 000 §IV: 32).
    #[arg(long, default_value_t = 32.0)]
    mbit: f64,
    /// Radio RTT in ms; default: the DNS exchange with the edge, as measured.
    #[arg(long)]
    radio_rtt_ms: Option<f64>,
    /// How long to wait for the edge, ms.
    #[arg(long, default_value_t = 2000)]
    timeout_ms: u64,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

pub fn run(cmd: ClientCmd) -> anyhow::Result<()> {
    match cmd.which {
        Which::Plan(a) => plan_cmd(&a),
        Which::Proxy(a) => proxy_cmd(&a),
    }
}

fn plan_cmd(a: &PlanArgs) -> anyhow::Result<()> {
    let host = mewa_hint::page::host_of(&a.url)
        .with_context(|| format!("`{}` is not an absolute http(s) URL", a.url))?;
    if !(a.mbit.is_finite() && a.mbit > 0.0) {
        bail!("--mbit must be a positive number of Mbit/s");
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the runtime")?;
    let r = rt.block_on(resolve(
        a.edge,
        &host,
        &a.url,
        Duration::from_millis(a.timeout_ms),
    ))?;
    let radio = Radio {
        bandwidth_bps: a.mbit * 1e6,
        rtt_s: a.radio_rtt_ms.map_or(r.rtt.as_secs_f64(), |m| m / 1000.0),
    };
    let now = mewa_edge::app::now_unix_s();
    let outcome = r
        .hint
        .as_ref()
        .map_err(Clone::clone)
        .and_then(|h| plan(h, &a.url, radio, now));
    if a.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({
                "addresses": r.addrs,
                "dns_rtt_ms": r.rtt.as_secs_f64() * 1000.0,
                "hint_bytes": r.hint_bytes,
                "over_tcp": r.over_tcp,
                "plan": outcome.as_ref().ok(),
                "fallback": outcome.as_ref().err().map(ToString::to_string),
            }))?
        );
        return Ok(());
    }
    println!(
        "{host} -> {:?}; DNS exchange {:.1} ms; hint {} bytes{}",
        r.addrs,
        r.rtt.as_secs_f64() * 1000.0,
        r.hint_bytes,
        if r.over_tcp { " (over TCP)" } else { "" }
    );
    match outcome {
        Ok(p) => {
            println!(
                "plan: n = {} connection(s) for {} bytes; RTT {:.1} ms radio + {:.1} ms wired at {:.1} Mbit/s; \
                 modelled {:.3} s with 1, {:.3} s with n; gains {:?} against cost {:.3}",
                p.n,
                p.page_bytes,
                p.radio_rtt_s * 1000.0,
                p.wired_rtt_s * 1000.0,
                p.bandwidth_bps / 1e6,
                p.choice.t1_s,
                p.choice.tn_s,
                p.choice.gains.iter().map(|g| (g * 1000.0).round() / 1000.0).collect::<Vec<_>>(),
                p.choice.cost
            );
            let mut per = vec![0usize; p.n as usize];
            for (_, c) in &p.assignment {
                if let Some(x) = per.get_mut(*c) {
                    *x += 1;
                }
            }
            println!("objects per connection (size-balanced): {per:?}");
        }
        Err(f) => println!("fallback to plain behaviour: {f}"),
    }
    Ok(())
}

fn proxy_cmd(a: &ProxyArgs) -> anyhow::Result<()> {
    if !(a.mbit.is_finite() && a.mbit > 0.0) {
        bail!("--mbit must be a positive number of Mbit/s");
    }
    if !a.listen.ip().is_loopback() {
        bail!(
            "--listen {}: the proxy serves loopback clients only; listen on 127.0.0.1 or ::1",
            a.listen
        );
    }
    let mut cfg = mewa_client::proxy::ProxyConfig::new(a.edge, a.mbit * 1e6);
    cfg.origin_port = a.origin_port;
    cfg.use_hints = !a.no_hints;
    cfg.prefetch = !a.no_prefetch;
    cfg.dispatch = a.dispatch;
    if let Some(ms) = a.radio_rtt_ms {
        if !(ms.is_finite() && (0.0..10_000.0).contains(&ms)) {
            bail!("--radio-rtt-ms must be between 0 and 10000");
        }
        cfg.radio_rtt = Some(Duration::from_secs_f64(ms / 1e3));
    }
    let tls = if a.tls {
        let dir = match &a.ca_dir {
            Some(d) => d.clone(),
            None => crate::origin::default_ca_dir()?,
        };
        let certs = mewa_origin::Ca::load_or_create(&dir)
            .and_then(|ca| ca.issue(&[]))
            .with_context(|| format!("the proxy's certificate from the CA in {}", dir.display()))?;
        eprintln!(
            "chromium --proxy-server=https://{} --ignore-certificate-errors-spki-list={}",
            a.listen, certs.leaf_spki_sha256
        );
        Some(std::sync::Arc::new(
            certs
                .tcp_config()
                .context("the proxy's TLS configuration")?,
        ))
    } else {
        None
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("tokio runtime")?;
    rt.block_on(async {
        let l = tokio::net::TcpListener::bind(a.listen)
            .await
            .with_context(|| format!("listening on {}", a.listen))?;
        eprintln!(
            "mewa proxy on {}://{} (edge {}, {} Mbit/s, {} dispatch{}); Ctrl-C stops",
            if tls.is_some() { "https" } else { "http" },
            a.listen,
            a.edge,
            a.mbit,
            a.dispatch,
            if a.no_hints {
                ", hints off"
            } else if a.no_prefetch {
                ", no prefetch"
            } else {
                ""
            }
        );
        let proxy = mewa_client::proxy::Proxy::new(cfg);
        let serving = async move {
            match tls {
                Some(t) => proxy.serve_tls(l, t).await,
                None => proxy.serve(l).await,
            }
        };
        tokio::select! {
            () = serving => {}
            _ = tokio::signal::ctrl_c() => {}
        }
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_proxy_refuses_the_loader_only_pull() {
        assert_eq!(
            parse_dispatch("pull-rate"),
            Ok(mewa_client::proxy::Dispatch::PullRate)
        );
        let e = parse_dispatch("pull").expect_err("loader only");
        assert!(e.contains("fixed-budget"), "{e}");
        assert!(parse_dispatch("fast").is_err());
    }
}
