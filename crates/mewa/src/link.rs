//! `mewa link`: run a program behind an emulated cellular link, like
//! mahimahi's `mm-delay`/`mm-link`/`mm-loss` shells in one; and
//! `mewa link plot LOG` for the link's event log.

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{bail, Context};
use clap::{Args, Subcommand};
use mewa_link::core::radio::RadioConfig;
use mewa_link::core::trace::DelayTrace;
use mewa_link::core::{
    parse_duration, parse_rate, DelaySpec, Dir, DirectionConfig, LinkConfig, QueueSpec, RateSpec,
};
use mewa_link::runtime::{self, LinkOptions, Topology};

const EXAMPLES: &str = "\
Examples:
  mewa link --delay 20ms -- sh -c 'ping -c 3 $MEWA_LINK_GATEWAY'
      40 ms RTT: --delay is one way, in each direction (mahimahi's mm-delay).
      Quote the command so that the variable is expanded inside, not by
      your shell before mewa runs.
  mewa link --delay 20ms --down-trace TMobile-LTE-short.down \\
            --up-trace TMobile-LTE-short.up --radio lte --log logs -- curl …
  mewa link --rate 20mbit --queue droptail:bytes=100kB --loss 0.01 -- bash
  mewa link plot logs/down.log -o down.svg

Inside, the program sees one interface whose only route leads through the
emulated link to this machine, reachable at $MEWA_LINK_GATEWAY (its own
address is $MEWA_LINK_ADDRESS). Uplink = from the program towards the
machine. Needs root (network namespaces, TUN devices).";

#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true, after_help = EXAMPLES)]
pub struct LinkCmd {
    #[command(subcommand)]
    sub: Option<LinkSub>,
    #[command(flatten)]
    link: LinkArgs,
}

#[derive(Debug, Subcommand)]
enum LinkSub {
    /// Draw throughput, capacity and one-way delay over time from a link
    /// event log (written by `mewa link --log DIR`) as SVG.
    Plot {
        /// The log: DIR/up.log or DIR/down.log.
        log: PathBuf,
        /// Where to write the SVG; LOG with the extension .svg if not given.
        #[arg(short, long, value_name = "OUT.svg")]
        out: Option<PathBuf>,
    },
}

#[derive(Debug, Args)]
struct LinkArgs {
    /// One-way propagation delay of each direction (RTT = 2 × this), e.g.
    /// 20ms.
    #[arg(long, value_parser = parse_duration, conflicts_with = "delay_trace")]
    delay: Option<Duration>,
    /// One-way delay of the uplink only (overrides --delay).
    #[arg(long, value_parser = parse_duration)]
    up_delay: Option<Duration>,
    /// One-way delay of the downlink only (overrides --delay).
    #[arg(long, value_parser = parse_duration)]
    down_delay: Option<Duration>,
    /// Delay trace for both directions: lines `<ms> <one-way delay ms>`, each
    /// value holding from its time on.
    #[arg(long, value_name = "FILE")]
    delay_trace: Option<PathBuf>,
    /// Bottleneck rate of each direction, e.g. 20mbit, 500kbit (IP bytes).
    /// Unlimited when neither a rate nor a trace is given.
    #[arg(long, value_parser = parse_rate)]
    rate: Option<u64>,
    /// Rate of the uplink only (overrides --rate).
    #[arg(long, value_parser = parse_rate)]
    up_rate: Option<u64>,
    /// Rate of the downlink only (overrides --rate).
    #[arg(long, value_parser = parse_rate)]
    down_rate: Option<u64>,
    /// mahimahi trace for the uplink: one line per 1500-byte delivery
    /// opportunity (ms), repeated when it ends. Overrides the rate.
    #[arg(long, value_name = "FILE")]
    up_trace: Option<PathBuf>,
    /// mahimahi trace for the downlink.
    #[arg(long, value_name = "FILE")]
    down_trace: Option<PathBuf>,
    /// Probability that a packet is lost, each direction (0 to 1).
    #[arg(long)]
    loss: Option<f64>,
    /// Loss probability of the uplink only.
    #[arg(long)]
    up_loss: Option<f64>,
    /// Loss probability of the downlink only.
    #[arg(long)]
    down_loss: Option<f64>,
    /// Queue in front of each bottleneck: droptail:packets=N,
    /// droptail:bytes=SIZE (e.g. 100kB), drophead:…,
    /// codel:target=5ms,interval=100ms[,packets=N], infinite (the default,
    /// as in mahimahi).
    #[arg(long)]
    queue: Option<QueueSpec>,
    /// Queue of the uplink only.
    #[arg(long)]
    up_queue: Option<QueueSpec>,
    /// Queue of the downlink only.
    #[arg(long)]
    down_queue: Option<QueueSpec>,
    /// Radio state machine: lte (≈ 400 ms promotion after 11.5 s idle, DRX),
    /// 3g (≈ 2 s promotion, FACH), or off.
    #[arg(long, default_value = "off", value_parser = parse_radio)]
    radio: RadioConfig,
    /// Write DIR/up.pcap and DIR/down.pcap (packets as they leave the link;
    /// tcpdump -r, Wireshark).
    #[arg(long, value_name = "DIR")]
    pcap: Option<PathBuf>,
    /// Write the per-direction event logs DIR/up.log and DIR/down.log
    /// (arrivals, departures with delay, drops, unused opportunities; see
    /// `mewa link plot`).
    #[arg(long, value_name = "DIR")]
    log: Option<PathBuf>,
    /// Seed of the loss generator.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Print the setup and the link's counters on stderr.
    #[arg(short, long)]
    verbose: bool,
    /// Run the program as root even when mewa was started with sudo (by
    /// default it runs as the user who ran sudo: SUDO_UID and SUDO_GID).
    #[arg(long)]
    keep_root: bool,
    /// The program to run inside and its arguments, after `--`; $SHELL when
    /// none is given.
    #[arg(last = true, value_name = "PROGRAM")]
    command: Vec<OsString>,
}

fn parse_radio(s: &str) -> Result<RadioConfig, String> {
    RadioConfig::preset(s).ok_or_else(|| format!("unknown radio {s:?}: use lte, 3g or off"))
}

pub fn run(cmd: LinkCmd) -> anyhow::Result<ExitCode> {
    match cmd.sub {
        Some(LinkSub::Plot { log, out }) => {
            let out = out.unwrap_or_else(|| log.with_extension("svg"));
            print!("{}", mewa_report::linklog::plot_log(&log, &out)?);
            eprintln!("wrote {}", out.display());
            Ok(ExitCode::SUCCESS)
        }
        None => shell(cmd.link),
    }
}

fn check_loss(p: f64) -> anyhow::Result<f64> {
    if !(0.0..=1.0).contains(&p) {
        bail!(mewa_link::core::SpecError::Loss(p.to_string()));
    }
    Ok(p)
}

impl LinkArgs {
    fn config(&self) -> anyhow::Result<LinkConfig> {
        let delay_trace = match &self.delay_trace {
            Some(p) => {
                let text = std::fs::read_to_string(p)
                    .with_context(|| format!("reading delay trace {}", p.display()))?;
                Some(
                    DelayTrace::parse(&text)
                        .with_context(|| format!("delay trace {}", p.display()))?,
                )
            }
            None => None,
        };
        let dir = |d: Dir| -> anyhow::Result<DirectionConfig> {
            let (own_delay, own_rate, trace, own_loss, own_queue) = match d {
                Dir::Up => (
                    self.up_delay,
                    self.up_rate,
                    &self.up_trace,
                    self.up_loss,
                    self.up_queue,
                ),
                Dir::Down => (
                    self.down_delay,
                    self.down_rate,
                    &self.down_trace,
                    self.down_loss,
                    self.down_queue,
                ),
            };
            let delay = match (own_delay, &delay_trace) {
                (Some(x), _) => DelaySpec::Fixed(x),
                (None, Some(t)) => DelaySpec::Trace(t.clone()),
                (None, None) => DelaySpec::Fixed(self.delay.unwrap_or_default()),
            };
            let rate = match (trace, own_rate.or(self.rate)) {
                (Some(p), _) => RateSpec::Trace(mewa_lab::experiment::read_trace(p)?),
                (None, Some(bps)) => RateSpec::Constant { bps },
                (None, None) => RateSpec::Unlimited,
            };
            Ok(DirectionConfig {
                delay,
                rate,
                queue: own_queue.or(self.queue).unwrap_or_default(),
                loss: check_loss(own_loss.or(self.loss).unwrap_or(0.0))?,
            })
        };
        Ok(LinkConfig {
            up: dir(Dir::Up)?,
            down: dir(Dir::Down)?,
            radio: self.radio,
            seed: self.seed,
            log_events: self.log.is_some(),
        })
    }
}

/// The user and group that ran `sudo` (SUDO_UID, SUDO_GID), if mewa runs
/// as root under sudo for another user.
fn sudo_user() -> Option<(u32, u32)> {
    let id = |k: &str| std::env::var(k).ok()?.parse::<u32>().ok();
    let (uid, gid) = (id("SUDO_UID")?, id("SUDO_GID")?);
    (uid != 0).then_some((uid, gid))
}

/// Host names: the program's namespace and this machine.
const INSIDE: &str = "link";
const OUTSIDE: &str = "host";

fn shell(args: LinkArgs) -> anyhow::Result<ExitCode> {
    let cfg = args.config()?;
    runtime::probe()?;
    match runtime::cleanup_stale() {
        Ok(r) if !r.is_empty() => eprintln!(
            "mewa link: removed what dead runs left: namespaces {:?}, devices {:?}, processes {:?}",
            r.namespaces, r.devices, r.killed
        ),
        Ok(_) => {}
        Err(e) => eprintln!("mewa link: warning: stale cleanup failed: {e}"),
    }
    for d in [&args.pcap, &args.log].into_iter().flatten() {
        std::fs::create_dir_all(d).with_context(|| format!("creating {}", d.display()))?;
    }
    let opts = LinkOptions {
        pcap_dir: args.pcap.clone(),
        log_dir: args.log.clone(),
        file_prefix: Some(String::new()),
        ..LinkOptions::default()
    };
    let topo = Topology::builder()
        .host(INSIDE)
        .root_host(OUTSIDE)
        .link_with(INSIDE, OUTSIDE, cfg, opts)
        .default_route(INSIDE, OUTSIDE)
        .build()?;
    let gateway = topo.addr(OUTSIDE)?;
    let address = topo.addr(INSIDE)?;
    let (program, rest) = match args.command.split_first() {
        Some((p, rest)) => (p.clone(), rest.to_vec()),
        None => (
            std::env::var_os("SHELL").unwrap_or_else(|| OsString::from("/bin/sh")),
            Vec::new(),
        ),
    };
    if args.verbose {
        eprintln!(
            "mewa link: namespace {}, address {address}, gateway {gateway}",
            topo.netns_name(INSIDE)?.unwrap_or("?")
        );
    }
    // setpriv --pdeathsig: if mewa is killed (even SIGKILL), so is the
    // program, instead of living on in a namespace nobody tears down. Under
    // sudo it also drops to the user who ran sudo: the namespaces need
    // root, the program does not.
    let drop_to = (!args.keep_root).then(sudo_user).flatten();
    let mut cmd = match runtime::system_tool("setpriv") {
        Some(setpriv) => {
            let mut c = topo.command(INSIDE, setpriv)?;
            c.args(["--pdeathsig", "KILL"]);
            if let Some((uid, gid)) = drop_to {
                c.arg(format!("--reuid={uid}"))
                    .arg(format!("--regid={gid}"))
                    .arg("--clear-groups");
            }
            c.arg("--").arg(&program);
            c
        }
        None if drop_to.is_some() => bail!(
            "mewa link: cannot run the program as the user who ran sudo without setpriv \
             (apt-get install util-linux), or pass --keep-root"
        ),
        None => topo.command(INSIDE, &program)?,
    };
    cmd.args(&rest)
        .env("MEWA_LINK_GATEWAY", gateway.to_string())
        .env("MEWA_LINK_ADDRESS", address.to_string());
    let mut child = cmd
        .spawn()
        .with_context(|| format!("starting {}", program.to_string_lossy()))?;
    let forward = runtime::forward_signals(child.id())?;
    let status = child.wait().context("waiting for the program")?;
    drop(forward);
    if args.verbose {
        let s = topo.link_stats(INSIDE, OUTSIDE)?;
        for d in Dir::BOTH {
            let st = s.dir(d);
            eprintln!(
                "mewa link: {:>4}: {} packets / {} bytes in, {} / {} out, {} lost, {} dropped by \
                 the queue, mean queueing delay {:?}",
                d.name(),
                st.arrivals,
                st.arrival_bytes,
                st.delivered,
                st.delivered_bytes,
                st.drops_loss,
                st.drops_queue,
                st.mean_queue_delay()
            );
        }
    }
    topo.shutdown()?;
    Ok(exit_code(status))
}

/// The program's exit status as ours; 128 + n for a death by signal n, as a
/// shell reports it.
fn exit_code(status: std::process::ExitStatus) -> ExitCode {
    use std::os::unix::process::ExitStatusExt;
    let code = status
        .code()
        .or_else(|| status.signal().map(|s| 128 + s))
        .unwrap_or(1);
    ExitCode::from(u8::try_from(code & 0xff).unwrap_or(1))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Debug, Parser)]
    struct T {
        #[command(flatten)]
        cmd: LinkCmd,
    }

    fn parse(args: &[&str]) -> LinkCmd {
        T::try_parse_from(std::iter::once("link").chain(args.iter().copied()))
            .unwrap()
            .cmd
    }

    #[test]
    fn per_direction_overrides() {
        let c = parse(&[
            "--delay",
            "20ms",
            "--down-delay",
            "5ms",
            "--rate",
            "10mbit",
            "--up-rate",
            "1mbit",
            "--loss",
            "0.01",
            "--queue",
            "droptail:packets=100",
            "--radio",
            "lte",
            "--",
            "ping",
            "-c",
            "3",
        ]);
        assert_eq!(c.link.command, ["ping", "-c", "3"]);
        let cfg = c.link.config().unwrap();
        assert_eq!(cfg.up.delay, DelaySpec::Fixed(Duration::from_millis(20)));
        assert_eq!(cfg.down.delay, DelaySpec::Fixed(Duration::from_millis(5)));
        assert_eq!(cfg.up.rate, RateSpec::Constant { bps: 1_000_000 });
        assert_eq!(cfg.down.rate, RateSpec::Constant { bps: 10_000_000 });
        assert_eq!(cfg.down.loss, 0.01);
        assert_eq!(cfg.up.queue, "droptail:packets=100".parse().unwrap());
        assert_eq!(cfg.radio, RadioConfig::preset("lte").unwrap());
    }

    #[test]
    fn defaults_and_errors() {
        let cfg = parse(&[]).link.config().unwrap();
        assert_eq!(cfg.up.rate, RateSpec::Unlimited);
        assert_eq!(cfg.down.delay, DelaySpec::Fixed(Duration::ZERO));
        assert!(parse(&["--loss", "1.5"]).link.config().is_err());
        assert!(T::try_parse_from(["link", "--radio", "5g"]).is_err());
        assert!(T::try_parse_from(["link", "--queue", "fifo"]).is_err());
        for (flag, bare, form) in [
            ("--delay", "20", "150ms"),
            ("--rate", "20", "32mbit"),
            ("--queue", "droptail:bytes=100000", "bytes=150kB"),
        ] {
            let e = T::try_parse_from(["link", flag, bare])
                .unwrap_err()
                .to_string();
            assert!(e.contains(flag) && e.contains(form), "{flag} {bare}: {e}");
        }
        let e = parse(&["--down-trace", "/nonexistent/trace"]).link.config();
        assert!(format!("{:#}", e.unwrap_err()).contains("/nonexistent/trace"));
    }

    #[test]
    fn plot_is_a_subcommand() {
        let c = parse(&["plot", "logs/down.log"]);
        assert!(matches!(c.sub, Some(LinkSub::Plot { .. })));
        // A program named like the subcommand goes after `--`.
        let c = parse(&["--", "plot"]);
        assert!(c.sub.is_none());
        assert_eq!(c.link.command, ["plot"]);
    }

    #[test]
    fn exit_codes() {
        use std::os::unix::process::ExitStatusExt;
        let st = std::process::ExitStatus::from_raw(3 << 8);
        assert_eq!(exit_code(st), ExitCode::from(3));
        let st = std::process::ExitStatus::from_raw(9);
        assert_eq!(exit_code(st), ExitCode::from(137));
    }
}
