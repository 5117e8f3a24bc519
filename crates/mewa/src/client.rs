//! `mewa client …`: the hint-aware client (docs/EDGE.md, "Client").

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::{bail, Context};
use clap::{Args, Subcommand};
use mewa_client::advice::{plan, Radio};
use mewa_client::resolve::resolve;

use crate::units;

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
    /// Radio bandwidth the plan assumes, e.g. 32mbit (seed 000 §IV).
    #[arg(long, value_name = "RATE", default_value = "32mbit", value_parser = units::rate)]
    bandwidth: u64,
    /// Radio round trip, e.g. 45ms; default: each DNS exchange with the
    /// edge.
    #[arg(long, value_name = "DURATION", value_parser = units::rtt)]
    radio_rtt: Option<Duration>,
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
    /// Radio bandwidth, e.g. 32mbit (seed 000 §IV).
    #[arg(long, value_name = "RATE", default_value = "32mbit", value_parser = units::rate)]
    bandwidth: u64,
    /// Radio round trip, e.g. 45ms; default: the DNS exchange with the
    /// edge, as measured.
    #[arg(long, value_name = "DURATION", value_parser = units::rtt)]
    radio_rtt: Option<Duration>,
    /// How long to wait for the edge.
    #[arg(long, value_name = "DURATION", default_value = "2s", value_parser = units::timeout)]
    timeout: Duration,
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
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the runtime")?;
    let r = rt.block_on(resolve(a.edge, &host, &a.url, a.timeout))?;
    let radio = Radio {
        bandwidth_bps: a.bandwidth as f64,
        rtt_s: a.radio_rtt.unwrap_or(r.rtt).as_secs_f64(),
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
    if !a.listen.ip().is_loopback() {
        bail!(
            "--listen {}: the proxy serves loopback clients only; listen on 127.0.0.1 or ::1",
            a.listen
        );
    }
    let mut cfg = mewa_client::proxy::ProxyConfig::new(a.edge, a.bandwidth as f64);
    cfg.origin_port = a.origin_port;
    cfg.use_hints = !a.no_hints;
    cfg.prefetch = !a.no_prefetch;
    cfg.dispatch = a.dispatch;
    cfg.radio_rtt = a.radio_rtt;
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
            a.bandwidth as f64 / 1e6,
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
    use clap::Parser;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(subcommand)]
        which: Which,
    }

    fn parse(args: &[&str]) -> Result<Which, String> {
        Cli::try_parse_from(std::iter::once(&"client").chain(args))
            .map(|c| c.which)
            .map_err(|e| e.to_string())
    }

    #[test]
    fn quantities_take_their_units_and_bare_numbers_show_the_form() {
        let Ok(Which::Plan(p)) = parse(&[
            "plan",
            "http://www.example.com/",
            "--bandwidth",
            "20mbit",
            "--radio-rtt",
            "45ms",
            "--timeout",
            "500ms",
        ]) else {
            panic!("not a plan")
        };
        assert_eq!(p.bandwidth, 20_000_000);
        assert_eq!(p.radio_rtt, Some(Duration::from_millis(45)));
        assert_eq!(p.timeout, Duration::from_millis(500));
        let Ok(Which::Proxy(x)) = parse(&["proxy"]) else {
            panic!("not a proxy")
        };
        assert_eq!((x.bandwidth, x.radio_rtt), (32_000_000, None));
        for (flag, bare, form) in [
            ("--radio-rtt", "45", "150ms"),
            ("--bandwidth", "32", "32mbit"),
            ("--timeout", "2000", "2s"),
        ] {
            let e = parse(&["plan", "http://www.example.com/", flag, bare]).unwrap_err();
            assert!(e.contains(flag) && e.contains(form), "{flag} {bare}: {e}");
        }
        assert!(parse(&["proxy", "--radio-rtt", "0ms"]).is_err());
    }

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
