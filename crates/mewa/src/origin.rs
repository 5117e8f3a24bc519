//! `mewa origin serve`: the corpus origin server (docs/ORIGIN.md).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use clap::builder::{PossibleValuesParser, TypedValueParser};
use clap::{Args, Subcommand};
use mewa_corpus::Corpus;
use mewa_origin::{HttpOptions, OriginConfig, QuicCc, TcpOptions};

use crate::units;

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
    /// Issue a certificate of the local test CA for some hosts and write
    /// it (chain, then key) as PEM: for the accelerator or nginx in front
    /// of the origin (`[tls]` in `mewa accel config`).
    Cert(CertArgs),
}

#[derive(Debug, Args)]
struct CertArgs {
    /// Host names the certificate covers.
    #[arg(required = true)]
    hosts: Vec<String>,
    /// Where to write `cert.pem` and `key.pem`.
    #[arg(long, short, value_name = "DIR")]
    out: PathBuf,
    /// Directory of the local test CA (as for `serve`).
    #[arg(long, value_name = "DIR")]
    ca_dir: Option<PathBuf>,
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
    /// registered one, such as mewa_fld after `mewa cc load`); default: the
    /// system's. `fld` is short for FLD_TCP on both transports: mewa_fld
    /// for TCP, and fld for QUIC unless --quic-cc says otherwise.
    #[arg(long, value_name = "NAME")]
    cc: Option<String>,
    /// Congestion controller of every HTTP/3 (QUIC) connection: quinn's
    /// cubic, newreno or bbr, or seed 002's FLD_TCP (fld) or its Reno
    /// baseline (reno) from mewa-cc [default: cubic, or fld with --cc fld].
    #[arg(
        long,
        value_name = "NAME",
        value_parser = PossibleValuesParser::new(QuicCc::NAMES).try_map(|s| s.parse::<QuicCc>()),
    )]
    quic_cc: Option<QuicCc>,
    /// Grant the initial congestion window a client asks for in its first
    /// request on a connection (`mewa-iw: N`, seed 001), over TCP and QUIC.
    /// TCP needs `mewa cc load` first: the window is set by mewa_iw (cubic)
    /// or, with --cc fld, by mewa_fld.
    #[arg(long)]
    iw: bool,
    /// The largest initial window granted, segments (with --iw).
    #[arg(long, value_name = "SEGMENTS", default_value_t = mewa_origin::iw::DEFAULT_MAX_SEGMENTS, value_parser = clap::value_parser!(u32).range(1..=65535))]
    iw_max: u32,
    /// Server think time before each response, e.g. 20ms, 0.5s.
    #[arg(long, value_name = "DURATION", default_value = "0ms", value_parser = units::duration)]
    think: Duration,
    /// Cache-Control max-age, e.g. 3600s.
    #[arg(long, value_name = "DURATION", default_value = "0s", value_parser = units::secs_u32)]
    max_age: u32,
    /// Directory of the local test CA (created on first use, then reused).
    /// Default: $XDG_DATA_HOME/mewa/ca or ~/.local/share/mewa/ca.
    #[arg(long, value_name = "DIR")]
    ca_dir: Option<PathBuf>,
    /// SO_SNDBUF of every connection, e.g. 256KiB (default: kernel
    /// autotuning).
    #[arg(long, value_name = "SIZE", value_parser = units::size_usize)]
    sndbuf: Option<usize>,
    /// SO_RCVBUF of every connection, e.g. 256KiB (default: kernel
    /// autotuning).
    #[arg(long, value_name = "SIZE", value_parser = units::size_usize)]
    rcvbuf: Option<usize>,
    /// Close a connection whose request (HTTP/1.1 head and body) has not
    /// arrived whole this long after its first byte; also the TLS
    /// handshake limit.
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = units::duration)]
    header_timeout: Duration,
    /// Close a connection that has waited this long, idle, for its next
    /// request (or a new one for its first byte, an HTTP/2 one for its
    /// preface). Longer than --header-timeout so that browsers keep their
    /// connections across a user's pauses (nginx: 75s).
    #[arg(long, value_name = "DURATION", default_value = "75s", value_parser = positive_duration)]
    keep_alive_timeout: Duration,
    #[command(flatten)]
    limits: LimitArgs,
}

/// The connection limits (docs/ORIGIN.md, "Limits"). The defaults shown
/// are `HttpOptions::default()`'s, which a test holds them to.
#[derive(Debug, Args)]
#[command(next_help_heading = "Connection limits")]
struct LimitArgs {
    /// Most TCP connections at once (HTTP/1.1, h2c and TLS together);
    /// more are closed on accept.
    #[arg(long, value_name = "N", default_value = "16384", value_parser = at_least_one)]
    max_connections: usize,
    /// Most TCP connections at once from one source address.
    #[arg(long, value_name = "N", default_value = "1024", value_parser = at_least_one)]
    max_connections_per_source: usize,
    /// HTTP/2: close a connection with nothing to send and no answer
    /// pending after this long without input.
    #[arg(long, value_name = "DURATION", default_value = "75s", value_parser = positive_duration)]
    h2_idle_timeout: Duration,
    /// HTTP/2: close a connection whose output has not moved for this long
    /// (the client stopped reading: a zero window).
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = positive_duration)]
    h2_write_timeout: Duration,
    /// HTTP/2: close a connection that leaves a header block open (HEADERS
    /// without END_HEADERS, then CONTINUATIONs) this long.
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = positive_duration)]
    h2_header_block_timeout: Duration,
    /// HTTP/2: streams the client may reset beyond those answered before
    /// GOAWAY ENHANCE_YOUR_CALM (rapid reset, CVE-2023-44487).
    #[arg(long, value_name = "N", default_value_t = 100)]
    h2_max_resets: u32,
    /// HTTP/2: PING and SETTINGS frames beyond two per opened stream before
    /// GOAWAY ENHANCE_YOUR_CALM.
    #[arg(long, value_name = "N", default_value_t = 100)]
    h2_max_control_frames: u32,
}

impl LimitArgs {
    /// `base` with these limits.
    fn apply(&self, base: HttpOptions) -> HttpOptions {
        HttpOptions {
            max_connections: self.max_connections,
            max_connections_per_source: self.max_connections_per_source,
            h2_idle_timeout: self.h2_idle_timeout,
            h2_write_timeout: self.h2_write_timeout,
            h2_header_block_timeout: self.h2_header_block_timeout,
            h2_max_peer_resets: self.h2_max_resets,
            h2_max_control_frames: self.h2_max_control_frames,
            ..base
        }
    }
}

/// A count of at least 1: a cap of 0 would refuse every connection.
fn at_least_one(s: &str) -> Result<usize, String> {
    match s.trim().parse::<usize>() {
        Ok(0) => Err("must be at least 1 (0 would refuse every connection)".into()),
        Ok(n) => Ok(n),
        Err(_) => Err(format!("`{s}` is not a whole number")),
    }
}

/// A duration above zero: a zero timeout would close every connection at
/// once.
fn positive_duration(s: &str) -> Result<Duration, String> {
    match units::duration(s)? {
        d if d.is_zero() => Err(format!(
            "`{s}`: must be above 0 (a zero timeout would close every connection at once)"
        )),
        d => Ok(d),
    }
}

impl ServeArgs {
    /// The HTTP behaviour and limits these flags ask for.
    fn http_options(&self) -> HttpOptions {
        self.limits.apply(HttpOptions {
            max_age: self.max_age,
            think: self.think,
            header_read_timeout: self.header_timeout,
            keep_alive_timeout: self.keep_alive_timeout,
            ..HttpOptions::default()
        })
    }
}

impl ServeArgs {
    /// The TCP congestion control: `--cc`, with `fld` meaning mewa_fld.
    fn tcp_cc(&self) -> Option<String> {
        self.cc.as_deref().map(|c| match c {
            "fld" => mewa_cc_bpf::FLD.to_string(),
            other => other.to_string(),
        })
    }

    /// The QUIC controller: `--quic-cc`, else fld when `--cc` names
    /// FLD_TCP, else quinn's cubic.
    fn quic(&self) -> QuicCc {
        match (self.quic_cc, self.cc.as_deref()) {
            (Some(q), _) => q,
            (None, Some("fld" | "mewa_fld")) => QuicCc::Fld,
            (None, _) => QuicCc::Cubic,
        }
    }
}

pub fn run(cmd: OriginCmd) -> anyhow::Result<()> {
    match cmd.which {
        Which::Serve(a) => serve(*a),
        Which::Cert(a) => cert(a),
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
    let http = a.http_options();
    let ca_dir = match &a.ca_dir {
        Some(d) => d.clone(),
        None => default_ca_dir()?,
    };
    let config = OriginConfig {
        plain,
        tls,
        h3,
        ca_dir,
        http,
        tcp: TcpOptions {
            congestion: a.tcp_cc(),
            send_buffer: a.sndbuf,
            recv_buffer: a.rcvbuf,
            on_accept: None,
        },
        quic_congestion: Some(a.quic().factory()),
        cert_groups: Vec::new(),
        iw: a.iw.then(|| mewa_origin::IwPolicy {
            max_segments: a.iw_max,
            tcp_control: match a.tcp_cc().as_deref() {
                Some(mewa_cc_bpf::FLD) => mewa_cc_bpf::FLD.into(),
                _ => mewa_cc_bpf::IW.into(),
            },
        }),
        early_hints: None,
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
            "  TCP congestion control:  {}",
            a.tcp_cc().as_deref().unwrap_or("system default")
        );
        if a.iw {
            println!(
                "  initial windows: granted on request (mewa-iw), at most {} segments",
                a.iw_max
            );
        }
        if o.h3_addr().is_some() {
            println!(
                "  QUIC congestion control: {} ({})",
                a.quic(),
                a.quic().about()
            );
        }
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

fn cert(a: CertArgs) -> anyhow::Result<()> {
    let ca_dir = match a.ca_dir {
        Some(d) => d,
        None => default_ca_dir()?,
    };
    let ca = mewa_origin::tls::Ca::load_or_create(&ca_dir)?;
    let hosts: Vec<&str> = a.hosts.iter().map(String::as_str).collect();
    let certs = ca.issue(&hosts)?;
    std::fs::create_dir_all(&a.out).with_context(|| format!("creating {}", a.out.display()))?;
    let (cert, key) = (a.out.join("cert.pem"), a.out.join("key.pem"));
    certs.write_pem(&cert, &key)?;
    println!(
        "{} and {} for {} (CA {}; Chromium: --ignore-certificate-errors-spki-list={})",
        cert.display(),
        key.display(),
        a.hosts.join(", "),
        ca.cert_path().display(),
        certs.leaf_spki_sha256
    );
    Ok(())
}

/// The test CA's default folder (`mewa_lab::experiment::default_ca_dir`),
/// or an error saying to pass `--ca-dir`.
pub(crate) fn default_ca_dir() -> anyhow::Result<PathBuf> {
    mewa_lab::experiment::default_ca_dir()
        .context("neither XDG_DATA_HOME nor HOME is set; pass --ca-dir")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, clap::Parser)]
    struct Cli {
        #[command(flatten)]
        serve: ServeArgs,
    }

    fn parse(args: &[&str]) -> Result<HttpOptions, String> {
        use clap::Parser;
        let argv = ["serve", "corpus.json"].iter().chain(args);
        Cli::try_parse_from(argv)
            .map(|c| c.serve.http_options())
            .map_err(|e| e.to_string())
    }

    #[test]
    fn limit_flags_reach_the_config_with_the_library_defaults() {
        // No flag: exactly the library's defaults (the help shows them).
        let d = HttpOptions::default();
        let got = parse(&[]).unwrap();
        assert_eq!(
            (
                got.max_connections,
                got.max_connections_per_source,
                got.h2_idle_timeout,
                got.h2_write_timeout,
                got.h2_header_block_timeout,
                got.h2_max_peer_resets,
                got.h2_max_control_frames,
                got.keep_alive_timeout,
            ),
            (
                d.max_connections,
                d.max_connections_per_source,
                d.h2_idle_timeout,
                d.h2_write_timeout,
                d.h2_header_block_timeout,
                d.h2_max_peer_resets,
                d.h2_max_control_frames,
                d.keep_alive_timeout,
            )
        );
        let got = parse(&[
            "--max-connections",
            "50",
            "--max-connections-per-source",
            "5",
            "--h2-idle-timeout",
            "2s",
            "--h2-write-timeout",
            "1.5s",
            "--h2-header-block-timeout",
            "300ms",
            "--h2-max-resets",
            "0",
            "--h2-max-control-frames",
            "7",
            "--header-timeout",
            "4s",
            "--keep-alive-timeout",
            "30s",
        ])
        .unwrap();
        assert_eq!(got.max_connections, 50);
        assert_eq!(got.max_connections_per_source, 5);
        assert_eq!(got.h2_idle_timeout, Duration::from_secs(2));
        assert_eq!(got.h2_write_timeout, Duration::from_millis(1500));
        assert_eq!(got.h2_header_block_timeout, Duration::from_millis(300));
        assert_eq!(got.h2_max_peer_resets, 0);
        assert_eq!(got.h2_max_control_frames, 7);
        assert_eq!(got.header_read_timeout, Duration::from_secs(4));
        assert_eq!(got.keep_alive_timeout, Duration::from_secs(30));
    }

    #[test]
    fn bad_limits_are_refused_with_the_flag_and_the_reason() {
        for (args, says) in [
            (["--max-connections", "0"], "at least 1"),
            (
                ["--max-connections-per-source", "1e3"],
                "not a whole number",
            ),
            (["--h2-idle-timeout", "0s"], "must be above 0"),
            (["--h2-write-timeout", "soon"], "bad duration"),
            (["--h2-header-block-timeout", "3h"], "bad duration"),
            (["--h2-max-resets", "lots"], "invalid digit"),
        ] {
            let e = parse(&args).unwrap_err();
            assert!(e.contains(args[0]) && e.contains(says), "{args:?}: {e}");
        }
    }

    fn quic_cc(args: &[&str]) -> Result<QuicCc, String> {
        use clap::Parser;
        let argv = ["serve", "corpus.json"].iter().chain(args);
        Cli::try_parse_from(argv)
            .map(|c| c.serve.quic())
            .map_err(|e| e.to_string())
    }

    #[test]
    fn cc_fld_means_fld_on_both_transports() {
        use clap::Parser;
        let tcp = |args: &[&str]| {
            let argv = ["serve", "corpus.json"].iter().chain(args);
            Cli::try_parse_from(argv)
                .map(|c| c.serve.tcp_cc())
                .ok()
                .flatten()
        };
        assert_eq!(tcp(&["--cc", "fld"]).as_deref(), Some("mewa_fld"));
        assert_eq!(tcp(&["--cc", "cubic"]).as_deref(), Some("cubic"));
        assert_eq!(tcp(&[]), None);
        assert_eq!(quic_cc(&["--cc", "fld"]), Ok(QuicCc::Fld));
        assert_eq!(quic_cc(&["--cc", "mewa_fld"]), Ok(QuicCc::Fld));
        assert_eq!(
            quic_cc(&["--cc", "fld", "--quic-cc", "bbr"]),
            Ok(QuicCc::Bbr)
        );
        assert_eq!(quic_cc(&["--cc", "reno"]), Ok(QuicCc::Cubic));
    }

    #[test]
    fn quic_cc_names_every_controller_and_defaults_to_cubic() {
        assert_eq!(quic_cc(&[]), Ok(QuicCc::Cubic));
        for cc in QuicCc::ALL {
            assert_eq!(quic_cc(&["--quic-cc", cc.name()]), Ok(cc));
        }
        let e = quic_cc(&["--quic-cc", "vegas"]).unwrap_err();
        assert!(
            e.contains("--quic-cc")
                && e.contains("vegas")
                && QuicCc::NAMES.iter().all(|n| e.contains(n)),
            "{e}"
        );
    }

    #[test]
    fn quantities_take_their_units_and_bare_numbers_show_the_form() {
        use clap::Parser;
        let c = Cli::try_parse_from([
            "serve",
            "corpus.json",
            "--think",
            "20ms",
            "--max-age",
            "3600s",
            "--sndbuf",
            "256KiB",
            "--rcvbuf",
            "1MB",
        ])
        .unwrap()
        .serve;
        assert_eq!(c.think, Duration::from_millis(20));
        assert_eq!(c.max_age, 3600);
        assert_eq!((c.sndbuf, c.rcvbuf), (Some(262_144), Some(1_000_000)));
        for (flag, bare, form) in [
            ("--think", "20", "150ms"),
            ("--header-timeout", "10", "150ms"),
            ("--keep-alive-timeout", "75", "150ms"),
            ("--max-age", "3600", "2s"),
            ("--sndbuf", "262144", "500kB"),
            ("--rcvbuf", "262144", "500kB"),
        ] {
            let e = parse(&[flag, bare]).unwrap_err();
            assert!(e.contains(flag) && e.contains(form), "{flag} {bare}: {e}");
        }
    }
}
