//! `mewa origin serve`: the corpus origin server (docs/ORIGIN.md).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use clap::{Args, Subcommand};
use mewa_corpus::Corpus;
use mewa_origin::{HttpOptions, OriginConfig, TcpOptions};

#[derive(Debug, Args)]
pub struct OriginCmd {
    #[command(subcommand)]
    which: Which,
}

#[derive(Debug, Subcommand)]
enum Which {
    /// Serve every object of a corpus for all of its hostnames until Ctrl-C.
    /// Without --plain/--tls/--h3 it listens on 0.0.0.0:8080 (HTTP/1.1 +
    /// h2c), 0.0.0.0:8443 (TLS: h2, http/1.1) and UDP 0.0.0.0:8443 (HTTP/3).
    Serve(Box<ServeArgs>),
}

#[derive(Debug, Args)]
struct ServeArgs {
    /// The corpus file (`mewa corpus gen …`).
    corpus: PathBuf,
    /// Cleartext listener: HTTP/1.1 and h2c by prior knowledge.
    #[arg(long, value_name = "ADDR")]
    plain: Option<SocketAddr>,
    /// TLS listener: HTTP/2 or HTTP/1.1 by ALPN.
    #[arg(long, value_name = "ADDR")]
    tls: Option<SocketAddr>,
    /// QUIC listener (UDP): HTTP/3.
    #[arg(long, value_name = "ADDR")]
    h3: Option<SocketAddr>,
    /// TCP congestion control of every connection (reno, cubic, bbr or any
    /// registered one); default: the system's.
    #[arg(long, value_name = "NAME")]
    cc: Option<String>,
    /// Server think time before each response, e.g. 20ms, 0.5s.
    #[arg(long, default_value = "0ms", value_parser = parse_duration)]
    think: Duration,
    /// Cache-Control max-age in seconds.
    #[arg(long, default_value_t = 0)]
    max_age: u32,
    /// Directory of the local test CA (created on first use, then reused).
    /// Default: $XDG_DATA_HOME/mewa/ca or ~/.local/share/mewa/ca.
    #[arg(long, value_name = "DIR")]
    ca_dir: Option<PathBuf>,
    /// SO_SNDBUF of every connection in bytes (default: kernel autotuning).
    #[arg(long, value_name = "BYTES")]
    sndbuf: Option<usize>,
    /// SO_RCVBUF of every connection in bytes (default: kernel autotuning).
    #[arg(long, value_name = "BYTES")]
    rcvbuf: Option<usize>,
    /// Close connections that have not sent a request head in this time.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    header_timeout: Duration,
}

pub fn run(cmd: OriginCmd) -> anyhow::Result<()> {
    match cmd.which {
        Which::Serve(a) => serve(*a),
    }
}

fn serve(a: ServeArgs) -> anyhow::Result<()> {
    let bytes =
        std::fs::read(&a.corpus).with_context(|| format!("reading {}", a.corpus.display()))?;
    let corpus =
        Corpus::from_json(&bytes).with_context(|| format!("parsing {}", a.corpus.display()))?;
    let (mut plain, mut tls, mut h3) = (a.plain, a.tls, a.h3);
    if plain.is_none() && tls.is_none() && h3.is_none() {
        plain = Some(SocketAddr::from(([0, 0, 0, 0], 8080)));
        tls = Some(SocketAddr::from(([0, 0, 0, 0], 8443)));
        h3 = tls;
    }
    let ca_dir = match a.ca_dir {
        Some(d) => d,
        None => default_ca_dir()?,
    };
    let config = OriginConfig {
        plain,
        tls,
        h3,
        ca_dir,
        http: HttpOptions {
            max_age: a.max_age,
            think: a.think,
            header_read_timeout: a.header_timeout,
            ..HttpOptions::default()
        },
        tcp: TcpOptions {
            congestion: a.cc.clone(),
            send_buffer: a.sndbuf,
            recv_buffer: a.rcvbuf,
            on_accept: None,
        },
        quic_congestion: None,
        cert_groups: Vec::new(),
    };
    mewa_origin::run_until_ctrl_c(&corpus, config, |o| {
        let s = o.store();
        println!(
            "serving {} objects ({} KB in memory) on {} hosts from {}",
            s.len(),
            s.bytes / 1000,
            s.hosts().len(),
            a.corpus.display()
        );
        if let Some(x) = o.plain_addr() {
            println!("  http://  {x}  (HTTP/1.1, h2c prior knowledge)");
        }
        if let Some(x) = o.tls_addr() {
            println!("  https:// {x}  (TLS: h2, http/1.1)");
        }
        if let Some(x) = o.h3_addr() {
            println!("  h3       {x}/udp  (QUIC: h3)");
        }
        println!(
            "  congestion control: {}",
            a.cc.as_deref().unwrap_or("system default")
        );
        if let Some(c) = o.certs() {
            println!("  CA certificate: {}", c.ca_cert_path.display());
            println!("  CA SPKI sha256:   {}", c.ca_spki_sha256);
            println!("  leaf SPKI sha256: {}", c.leaf_spki_sha256);
            println!(
                "  chromium: --ignore-certificate-errors-spki-list={},{}",
                c.leaf_spki_sha256, c.ca_spki_sha256
            );
        }
        println!("Ctrl-C stops.");
    })
    .context("origin server")
}

/// The test CA's default folder (`mewa_lab::experiment::default_ca_dir`),
/// or an error saying to pass `--ca-dir`.
pub(crate) fn default_ca_dir() -> anyhow::Result<PathBuf> {
    mewa_lab::experiment::default_ca_dir()
        .context("neither XDG_DATA_HOME nor HOME is set; pass --ca-dir")
}

/// `250ms`, `1.5s`, `2m` or a bare number of milliseconds.
pub(crate) fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let (num, unit) = match s.find(|c: char| !(c.is_ascii_digit() || c == '.')) {
        Some(i) => s.split_at(i),
        None => (s, "ms"),
    };
    let v: f64 = num
        .parse()
        .map_err(|_| format!("`{s}` is not a duration like 20ms or 1.5s"))?;
    let secs = match unit {
        "us" => v / 1e6,
        "ms" => v / 1e3,
        "s" => v,
        "m" => v * 60.0,
        _ => {
            return Err(format!(
                "unknown unit `{unit}` in `{s}` (use us, ms, s or m)"
            ))
        }
    };
    Duration::try_from_secs_f64(secs).map_err(|e| format!("`{s}`: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("20ms"), Ok(Duration::from_millis(20)));
        assert_eq!(parse_duration("0ms"), Ok(Duration::ZERO));
        assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("7"), Ok(Duration::from_millis(7)));
        assert!(parse_duration("fast").is_err());
        assert!(parse_duration("3h").is_err());
    }
}
