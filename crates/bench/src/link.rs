//! `mewa bench link`: how fast the link emulator forwards, against a plain
//! veth pair measured in the same run.
//!
//! The load is one bulk TCP transfer (cubic, 64 KB writes) between two
//! namespaces for a fixed time: first through an emulated link with zero
//! delay, no rate limit and an unbounded queue (with and without TUN
//! segmentation offload), then over a veth pair (with the kernel's
//! segmentation offload, and with one packet per skb). TCP
//! rather than a UDP blast because it is the traffic the emulator exists for
//! and it measures what a sender actually gets (a UDP blast measures what
//! the kernel drops). Sender and receiver are threads of this process, so
//! the process CPU time covers the whole path (sender, receiver, emulator
//! and the kernel work done on their behalf).

use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddrV4};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::{bail, Context};
use clap::{Args, Subcommand};
use mewa_link::core::{parse_duration, LinkConfig};
use mewa_link::runtime::{self, CpuClock, LinkOptions, Topology};
use serde::Serialize;

use mewa_report::Table;

/// TCP payload of a 1500-byte IPv4 packet with timestamps (1500 − 20 − 32).
const MSS: f64 = 1448.0;

#[derive(Debug, Args)]
/// `mewa bench …`: which benchmark.
pub struct BenchCmd {
    #[command(subcommand)]
    which: Which,
}

#[derive(Debug, Subcommand)]
enum Which {
    /// Throughput and CPU per packet of the link emulator (zero delay, no
    /// rate limit, 1500-byte MTU) next to a plain veth pair, with the ratio.
    /// Needs root. Build with --release: a debug build is several times
    /// slower.
    Link(LinkBench),
    /// Requests/s and MB/s of the origin server over h2c on loopback for
    /// 10 KB and 1 MB objects, next to nghttpd and nginx serving the same
    /// files in the same run, with the ratio (target: 80 % of the better
    /// one). Needs h2load (nghttp2-client). Build with --release.
    Origin(crate::origin::OriginBench),
    /// DNS queries/s and p50/p99 latency of the edge on loopback with and
    /// without hints, next to NSD answering the same zone (target: with
    /// hints at least 80 % of NSD). Needs dnsperf (and nsd). Build with
    /// --release.
    Edge(crate::edge::EdgeBench),
    /// The local proxy's added latency per request and its throughput,
    /// against direct h2c requests to the same origin in the same run
    /// (loopback, in-process edge and origin). Build with --release.
    Proxy(crate::proxy::ProxyBench),
    /// Cache hits per second of `mewa accel` beside nginx's proxy_cache in
    /// front of the same origin, over h2c on loopback (target: at least
    /// 80 % of nginx), and the latency each adds one request at a time.
    /// Needs h2load and nginx. Build with --release for figures that count.
    Accel(crate::accel::AccelBench),
}

#[derive(Debug, Args)]
struct LinkBench {
    /// Measured time of each transfer.
    #[arg(long, default_value = "5s", value_parser = parse_duration)]
    duration: Duration,
    /// Time each transfer runs before measuring starts.
    #[arg(long, default_value = "1s", value_parser = parse_duration)]
    warmup: Duration,
    /// TCP congestion control of the transfer.
    #[arg(long, default_value = "cubic")]
    congestion: String,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
}

/// Runs the benchmark `cmd` names.
pub fn run(cmd: BenchCmd) -> crate::Result<()> {
    match cmd.which {
        Which::Link(b) => link(b),
        Which::Origin(b) => crate::origin::run(b),
        Which::Edge(b) => crate::edge::run(b),
        Which::Proxy(b) => crate::proxy::run(b),
        Which::Accel(b) => crate::accel::run(b),
    }
}

/// One measured transfer.
#[derive(Debug, Clone, Serialize)]
struct Measurement {
    path: &'static str,
    /// Seconds measured.
    seconds: f64,
    /// TCP payload received, bytes.
    bytes: u64,
    /// Goodput, Gbit/s.
    goodput_gbps: f64,
    /// IP throughput of the data direction (1500-byte packets), Gbit/s.
    wire_gbps: f64,
    /// Full-size data packets per second (payload / 1448).
    data_packets_per_s: f64,
    /// Process CPU time (all threads) per full-size data packet, µs.
    cpu_us_per_packet: f64,
    /// CPU cores busy on average (process CPU time / wall time).
    cpu_cores: f64,
    /// Packets the emulator forwarded (both directions, ACKs included).
    emulator_packets: Option<u64>,
    /// Emulator thread CPU per forwarded packet, µs.
    emulator_cpu_us_per_packet: Option<f64>,
}

fn link(b: LinkBench) -> crate::Result<()> {
    runtime::probe()?;
    let _ = runtime::cleanup_stale();
    runtime::teardown_on_signals()?;
    if cfg!(debug_assertions) {
        eprintln!("note: this is a debug build; build with --release for figures that count");
    }
    let emulated = |path: &'static str, disable_offload: bool| -> crate::Result<Measurement> {
        let topo = Topology::builder()
            .host("bench-snd")
            .host("bench-rcv")
            .link_with(
                "bench-snd",
                "bench-rcv",
                LinkConfig::default(),
                LinkOptions {
                    disable_offload,
                    ..LinkOptions::default()
                },
            )
            .build()?;
        transfer(&topo, path, &b, true)
    };
    let emu = emulated("emulator", false)?;
    let plain = emulated("emulator, no offload", true)?;
    let veth = |path: &'static str, gso: bool| -> crate::Result<Measurement> {
        let topo = Topology::builder()
            .host("bench-snd")
            .host("bench-rcv")
            .veth("bench-snd", "bench-rcv")
            .build()?;
        if !gso {
            // One MSS per skb: the kernel moves 1500-byte packets one by
            // one, as through the emulator.
            for (h, peer) in [("bench-snd", "bench-rcv"), ("bench-rcv", "bench-snd")] {
                let dev = format!("to-{peer}");
                let st = topo
                    .command(h, "ip")?
                    .args(["link", "set", "dev", &dev, "gso_max_segs", "1"])
                    .status()
                    .context("running ip")?;
                if !st.success() {
                    bail!("ip link set dev {dev} gso_max_segs 1 failed in {h}");
                }
            }
        }
        transfer(&topo, path, &b, false)
    };
    let veth_gso = veth("veth", true)?;
    let veth_plain = veth("veth, no GSO", false)?;
    let ratio = |a: &Measurement, z: &Measurement| {
        (
            a.goodput_gbps / z.goodput_gbps.max(f64::MIN_POSITIVE),
            a.cpu_us_per_packet / z.cpu_us_per_packet.max(f64::MIN_POSITIVE),
        )
    };
    let (ratio_tput, ratio_cpu) = ratio(&emu, &veth_gso);
    let (ratio_tput_plain, ratio_cpu_plain) = ratio(&emu, &veth_plain);
    if b.json {
        println!(
            "{}",
            serde_json::json!({
                "emulator": emu,
                "emulator_no_offload": plain,
                "veth": veth_gso,
                "veth_no_gso": veth_plain,
                "ratio_throughput": ratio_tput,
                "ratio_cpu_per_packet": ratio_cpu,
                "ratio_throughput_no_gso": ratio_tput_plain,
                "ratio_cpu_per_packet_no_gso": ratio_cpu_plain,
            })
        );
        return Ok(());
    }
    let mut t = Table::new(&[
        "path",
        "goodput Gbit/s",
        "IP Gbit/s",
        "data pkt/s",
        "CPU µs/pkt",
        "cores busy",
        "emulator µs/pkt",
    ]);
    for m in [&emu, &plain, &veth_gso, &veth_plain] {
        t.push(vec![
            m.path.to_string(),
            format!("{:.3}", m.goodput_gbps),
            format!("{:.3}", m.wire_gbps),
            format!("{:.0}", m.data_packets_per_s),
            format!("{:.2}", m.cpu_us_per_packet),
            format!("{:.2}", m.cpu_cores),
            m.emulator_cpu_us_per_packet
                .map_or("-".to_string(), |v| format!("{v:.2}")),
        ]);
    }
    print!("{}", t.to_text());
    println!(
        "emulator / veth:        throughput {ratio_tput:.3}, CPU per packet {ratio_cpu:.2}\n\
         emulator / veth no GSO: throughput {ratio_tput_plain:.3}, CPU per packet \
         {ratio_cpu_plain:.2}\n\
         target: emulator >= 2 Gbit/s with 1500-byte packets: {}",
        if emu.wire_gbps >= 2.0 {
            "met"
        } else {
            "NOT met"
        }
    );
    println!(
        "TCP {} bulk transfer, {:.1} s each after {:.1} s warm-up; CPU per packet = process \
         CPU time / (payload / {MSS} bytes). veth keeps the kernel's 64 KB segmentation \
         offload; \"no GSO\" sets gso_max_segs 1 so the kernel moves every 1500-byte packet \
         separately, as the emulator's link does.",
        b.congestion,
        b.duration.as_secs_f64(),
        b.warmup.as_secs_f64()
    );
    Ok(())
}

/// Runs one bulk transfer from `bench-snd` to `bench-rcv` and measures it.
fn transfer(
    topo: &Topology,
    path: &'static str,
    b: &LinkBench,
    emulated: bool,
) -> crate::Result<Measurement> {
    const PORT: u16 = 5201;
    let dst = SocketAddrV4::new(topo.addr("bench-rcv")?, PORT);
    let cc = b.congestion.clone();
    let listener = topo
        .in_namespace("bench-rcv", move || {
            runtime::tcp_listener_with(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, PORT), &cc)
        })?
        .with_context(|| format!("listening with congestion control {:?}", b.congestion))?;
    let received = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let got = received.clone();
    let rx = std::thread::spawn(move || -> std::io::Result<()> {
        let (mut s, _) = listener.accept()?;
        let mut buf = vec![0u8; 1 << 18];
        loop {
            match s.read(&mut buf) {
                Ok(0) => return Ok(()),
                Ok(n) => {
                    got.fetch_add(n as u64, Ordering::Relaxed);
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    });
    let flag = stop.clone();
    let cc = b.congestion.clone();
    let tx = topo.spawn_in("bench-snd", move || -> std::io::Result<()> {
        let mut s = runtime::tcp_connect_with(dst, &cc)?;
        let buf = vec![0x5au8; 1 << 16];
        while !flag.load(Ordering::Relaxed) {
            s.write_all(&buf)?;
        }
        Ok(())
    })?;
    std::thread::sleep(b.warmup);
    let snap = || -> crate::Result<(u64, Duration, Instant, Option<runtime::LinkStats>)> {
        Ok((
            received.load(Ordering::Relaxed),
            runtime::cpu_time(CpuClock::Process)?,
            Instant::now(),
            if emulated {
                Some(topo.link_stats("bench-snd", "bench-rcv")?)
            } else {
                None
            },
        ))
    };
    let (r1, c1, t1, s1) = snap()?;
    std::thread::sleep(b.duration);
    let (r2, c2, t2, s2) = snap()?;
    stop.store(true, Ordering::Relaxed);
    let sent = tx.join();
    let recv = rx.join();
    match (sent, recv) {
        (Ok(Ok(())), Ok(Ok(()))) => {}
        (Ok(Err(e)), _) | (_, Ok(Err(e))) => bail!("{path}: the transfer failed: {e}"),
        _ => bail!("{path}: a transfer thread panicked"),
    }
    let secs = (t2 - t1).as_secs_f64();
    let bytes = r2 - r1;
    let packets = bytes as f64 / MSS;
    let cpu = (c2 - c1).as_secs_f64();
    let (emulator_packets, emulator_cpu_us_per_packet) = match (s1, s2) {
        (Some(a), Some(z)) => {
            let n = (z.up.delivered + z.down.delivered) - (a.up.delivered + a.down.delivered);
            let c = z.cpu.saturating_sub(a.cpu).as_secs_f64();
            (Some(n), Some(c * 1e6 / (n.max(1) as f64)))
        }
        _ => (None, None),
    };
    Ok(Measurement {
        path,
        seconds: secs,
        bytes,
        goodput_gbps: bytes as f64 * 8.0 / secs / 1e9,
        wire_gbps: packets * 1500.0 * 8.0 / secs / 1e9,
        data_packets_per_s: packets / secs,
        cpu_us_per_packet: cpu * 1e6 / packets.max(1.0),
        cpu_cores: cpu / secs,
        emulator_packets,
        emulator_cpu_us_per_packet,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        bench: BenchCmd,
    }

    fn parse(args: &[&str]) -> Result<BenchCmd, String> {
        Cli::try_parse_from(std::iter::once(&"bench").chain(args))
            .map(|c| c.bench)
            .map_err(|e| e.to_string())
    }

    #[test]
    fn every_benchmark_takes_durations_with_their_unit() {
        for args in [
            &["link", "--duration", "5s", "--warmup", "500ms"][..],
            &["origin", "--duration", "1s", "--warmup", "500ms"],
            &["accel", "--duration", "2s"],
            &[
                "edge",
                "--duration",
                "2s",
                "--soak",
                "600s",
                "--soak-every",
                "60s",
            ],
            &["proxy", "--duration", "1.5s"],
        ] {
            assert!(parse(args).is_ok(), "{args:?}: {:?}", parse(args).err());
        }
        for (bench, flag, bare) in [
            ("link", "--duration", "5"),
            ("link", "--warmup", "1"),
            ("origin", "--warmup", "500"),
            ("edge", "--duration", "2"),
            ("edge", "--soak", "600"),
            ("edge", "--soak-every", "60"),
            ("proxy", "--duration", "2"),
        ] {
            let e = parse(&[bench, flag, bare]).unwrap_err();
            assert!(
                e.contains(flag) && e.contains("2s"),
                "{bench} {flag} {bare}: {e}"
            );
        }
        assert!(parse(&["edge", "--soak", "1.5s"]).is_err());
    }
}
