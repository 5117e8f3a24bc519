//! End-to-end tests of the runtime: real kernel TCP, ping and UDP through
//! TUN devices between network namespaces, measured against the issue's
//! acceptance figures. They need root (or CAP_NET_ADMIN + CAP_SYS_ADMIN) and
//! skip otherwise (`mewa_testkit::skip_unless_root`). They run in parallel
//! (distinct host names, each topology has its own namespaces); all of them
//! together take about 40 s of wall time.

#![cfg(target_os = "linux")]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Ipv4Addr, SocketAddrV4, UdpSocket};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use mewa_link::core::radio::RadioConfig;
use mewa_link::core::trace::DeliveryTrace;
use mewa_link::core::{DelaySpec, Dir, DirectionConfig, LinkConfig, QueueSpec, RateSpec};
use mewa_link::runtime::{self, LinkOptions, Topology};

fn ms(v: u64) -> Duration {
    Duration::from_millis(v)
}

fn direction(delay: Duration, rate: RateSpec, queue: QueueSpec) -> DirectionConfig {
    DirectionConfig {
        delay: DelaySpec::Fixed(delay),
        rate,
        queue,
        loss: 0.0,
    }
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

fn netns_list() -> String {
    let out = Command::new("ip")
        .args(["netns", "list"])
        .output()
        .expect("ip netns list");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn root_links() -> String {
    let out = Command::new("ip")
        .args(["-o", "link", "show"])
        .output()
        .expect("ip link show");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The root namespace's TUN device of a root host's link, found by the
/// root host's address on it.
fn root_device(gw: Ipv4Addr) -> String {
    let out = Command::new("ip")
        .args(["-o", "-4", "addr", "show"])
        .output()
        .expect("ip -o -4 addr show");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.lines()
        .find(|l| l.contains(&format!("inet {gw}/30")))
        .and_then(|l| l.split_whitespace().nth(1))
        .expect("the root-side TUN has the gateway address")
        .to_string()
}

fn scratch_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("mewa-test-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("a scratch directory");
    d
}

/// A UDP echo server on `port` in `host`, until the returned flag is set.
fn udp_echo(topo: &Topology, host: &str, port: u16) -> Arc<AtomicBool> {
    let stop = Arc::new(AtomicBool::new(false));
    let sock = topo
        .in_namespace(host, move || {
            UdpSocket::bind(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, port))
        })
        .expect("UDP echo server setup")
        .expect("UDP echo server setup");
    sock.set_read_timeout(Some(ms(100)))
        .expect("UDP echo server setup");
    let flag = stop.clone();
    std::thread::spawn(move || {
        let mut buf = [0u8; 2048];
        while !flag.load(Ordering::Relaxed) {
            if let Ok((n, from)) = sock.recv_from(&mut buf) {
                let _ = sock.send_to(&buf[..n], from);
            }
        }
    });
    stop
}

/// Round-trip time of one UDP request through `sock` to `to`.
fn udp_rtt(sock: &UdpSocket, to: SocketAddrV4, seq: u32) -> Duration {
    let t = Instant::now();
    sock.send_to(&seq.to_be_bytes(), to)
        .expect("sending a UDP request");
    let mut buf = [0u8; 64];
    loop {
        // A blocking receive with a timeout fails with EINTR when the
        // process is stopped and resumed (signal(7)), as a CI container
        // may be: that is not a lost reply, so receive again.
        let (n, _) = match sock.recv_from(&mut buf) {
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            r => r.expect("echo reply within the timeout"),
        };
        if n == 4 && buf[..4] == seq.to_be_bytes() {
            return t.elapsed();
        }
    }
}

/// 20 ms one way in each direction: ping's median RTT is 40 ms ± 0.5 ms.
/// Also checks the pcap and event-log files of the link.
#[test]
fn ping_rtt_is_twice_the_one_way_delay() {
    if mewa_testkit::skip_unless_root() {
        return;
    }
    let d = direction(ms(20), RateSpec::Unlimited, QueueSpec::default());
    let cfg = LinkConfig {
        up: d.clone(),
        down: d,
        ..LinkConfig::default()
    };
    let out = scratch_dir("ping");
    let topo = Topology::builder()
        .host("pc")
        .host("ps")
        .link_with(
            "pc",
            "ps",
            cfg,
            LinkOptions {
                pcap_dir: Some(out.clone()),
                log_dir: Some(out.clone()),
                ..LinkOptions::default()
            },
        )
        .build()
        .unwrap();
    let server = topo.addr("ps").unwrap();
    let mut rtts: Vec<f64> = if Command::new("ping").arg("-V").output().is_ok() {
        // iputils ping: 25 echoes 200 ms apart; the kernel answers.
        let o = topo
            .command("pc", "ping")
            .unwrap()
            .args(["-n", "-c", "25", "-i", "0.2", &server.to_string()])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&o.stdout);
        text.lines()
            .filter_map(|l| l.split("time=").nth(1))
            .filter_map(|t| t.split_whitespace().next()?.parse().ok())
            .collect()
    } else {
        eprintln!("ping not installed (iputils-ping): measuring with a UDP echo instead");
        let stop = udp_echo(&topo, "ps", 7007);
        let sock = topo
            .in_namespace("pc", || UdpSocket::bind("0.0.0.0:0"))
            .unwrap()
            .unwrap();
        sock.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        let v = (0..25)
            .map(|i| {
                std::thread::sleep(ms(200));
                udp_rtt(&sock, SocketAddrV4::new(server, 7007), i).as_secs_f64() * 1e3
            })
            .collect();
        stop.store(true, Ordering::Relaxed);
        v
    };
    assert!(rtts.len() >= 20, "too few replies: {rtts:?}");
    let m = median(&mut rtts);
    eprintln!(
        "ping through 2 x 20 ms: median {m:.3} ms over {} replies",
        rtts.len()
    );
    assert!(
        (m - 40.0).abs() <= 0.5,
        "median RTT {m:.3} ms, want 40 ± 0.5 ms"
    );

    let stats = topo.link_stats("pc", "ps").unwrap();
    assert!(
        stats.up.delivered >= 25 && stats.down.delivered >= 25,
        "{stats:?}"
    );
    drop(topo);
    // The files are complete once the topology is gone.
    let pcap = std::fs::read(out.join("pc-ps.up.pcap")).unwrap();
    assert_eq!(&pcap[..4], &0xa1b2_c3d4u32.to_le_bytes());
    assert!(
        pcap.len() >= 24 + 25 * (16 + 84),
        "pcap too short: {}",
        pcap.len()
    );
    let log = std::fs::read_to_string(out.join("pc-ps.down.log")).unwrap();
    assert!(log.starts_with("# mewa link event log v1"));
    assert!(log.lines().filter(|l| l.contains(" - ")).count() >= 25);
    let _ = std::fs::remove_dir_all(&out);
}

/// client — edge — origin: the edge forwards, the far ends reach each other.
#[test]
fn three_hosts_route_through_the_middle() {
    if mewa_testkit::skip_unless_root() {
        return;
    }
    let d = direction(ms(5), RateSpec::Unlimited, QueueSpec::default());
    let cfg = LinkConfig {
        up: d.clone(),
        down: d,
        ..LinkConfig::default()
    };
    let topo = Topology::builder()
        .host("rc")
        .host("re")
        .host("ro")
        .link("rc", "re", cfg)
        .veth("re", "ro")
        .build()
        .unwrap();
    let origin = topo.addr("ro").unwrap();
    let stop = udp_echo(&topo, "ro", 7008);
    let sock = topo
        .in_namespace("rc", || UdpSocket::bind("0.0.0.0:0"))
        .unwrap()
        .unwrap();
    sock.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    let rtt = udp_rtt(&sock, SocketAddrV4::new(origin, 7008), 1);
    stop.store(true, Ordering::Relaxed);
    assert!(rtt >= ms(10) && rtt < ms(30), "rtt {rtt:?}");
    assert_eq!(
        topo.addr_towards("re", "ro").unwrap(),
        Ipv4Addr::new(100, 64, 0, 5)
    );
    assert_eq!(
        topo.addr_towards("re", "rc").unwrap(),
        Ipv4Addr::new(100, 64, 0, 2)
    );
}

/// Bulk TCP (cubic) from client to server; returns (wire Mbit/s at the
/// emulator, goodput Mbit/s at the receiver) over `window` after `warmup`.
fn bulk_tcp(
    topo: &Topology,
    sender: &str,
    receiver: &str,
    port: u16,
    warmup: Duration,
    window: Duration,
    check: impl Fn(&runtime::LinkStats, &runtime::LinkStats) -> f64,
) -> (f64, f64) {
    let dst = SocketAddrV4::new(topo.addr(receiver).expect("bulk TCP transfer"), port);
    let received = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let listener = topo
        .in_namespace(receiver, move || {
            runtime::tcp_listener_with(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, port), "cubic")
        })
        .expect("bulk TCP transfer")
        .expect("bulk TCP transfer");
    let got = received.clone();
    let rx = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().expect("bulk TCP transfer");
        let mut buf = vec![0u8; 1 << 18];
        loop {
            match s.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    got.fetch_add(n as u64, Ordering::Relaxed);
                }
            }
        }
    });
    let flag = stop.clone();
    let tx = topo
        .spawn_in(sender, move || {
            let mut s = runtime::tcp_connect_with(dst, "cubic").expect("bulk TCP transfer");
            let buf = vec![0x5au8; 1 << 16];
            while !flag.load(Ordering::Relaxed) {
                if s.write_all(&buf).is_err() {
                    break;
                }
            }
        })
        .expect("bulk TCP transfer");
    std::thread::sleep(warmup);
    let (s1, r1, t1) = (
        topo.link_stats(sender, receiver)
            .expect("bulk TCP transfer"),
        received.load(Ordering::Relaxed),
        Instant::now(),
    );
    std::thread::sleep(window);
    let (s2, r2, t2) = (
        topo.link_stats(sender, receiver)
            .expect("bulk TCP transfer"),
        received.load(Ordering::Relaxed),
        Instant::now(),
    );
    stop.store(true, Ordering::Relaxed);
    tx.join().expect("bulk TCP transfer");
    rx.join().expect("bulk TCP transfer");
    let wire = check(&s1, &s2);
    let goodput = (r2 - r1) as f64 * 8.0 / (t2 - t1).as_secs_f64() / 1e6;
    (wire, goodput)
}

/// 20 Mbit/s, 10 ms each way, 100 KB drop-tail (2 BDP): TCP gets 20 Mbit/s
/// ± 3 % at the emulator (IP bytes, as the rate is defined) and the matching
/// goodput (1448 payload bytes per 1500-byte packet) at the receiver.
#[test]
fn tcp_bulk_gets_the_configured_rate() {
    if mewa_testkit::skip_unless_root() {
        return;
    }
    let q = QueueSpec::DropTail(mewa_link::core::queue::Limit {
        packets: None,
        bytes: Some(100_000),
    });
    let cfg = LinkConfig {
        up: direction(ms(10), RateSpec::Constant { bps: 20_000_000 }, q),
        down: direction(ms(10), RateSpec::Unlimited, QueueSpec::default()),
        ..LinkConfig::default()
    };
    let topo = Topology::builder()
        .host("tc")
        .host("ts")
        .link("tc", "ts", cfg)
        .build()
        .unwrap();
    let (wire, goodput) = bulk_tcp(&topo, "tc", "ts", 5001, ms(2000), ms(10_000), |a, b| {
        let bytes = b.dir(Dir::Up).delivered_bytes - a.dir(Dir::Up).delivered_bytes;
        let packets = b.dir(Dir::Up).delivered - a.dir(Dir::Up).delivered;
        // Offload hands the emulator TCP super-packets; the link must see
        // them cut back into MTU-sized packets.
        assert!(
            bytes <= packets * 1500,
            "{bytes} bytes in {packets} packets"
        );
        bytes as f64 * 8.0 / (b.at - a.at).as_secs_f64() / 1e6
    });
    let expected_goodput = 20.0 * 1448.0 / 1500.0;
    eprintln!(
        "TCP through 20 Mbit/s: {wire:.3} Mbit/s at the link, goodput {goodput:.3} Mbit/s \
         (expected {expected_goodput:.3})"
    );
    assert!(
        (wire - 20.0).abs() <= 0.6,
        "link throughput {wire:.3} Mbit/s"
    );
    assert!(
        (goodput - expected_goodput).abs() <= 0.03 * expected_goodput,
        "goodput {goodput:.3} Mbit/s"
    );
}

/// TCP through the T-Mobile LTE downlink trace for 30 s: the bytes the link
/// delivers are within ± 5 % of what the trace allows in the same window.
#[test]
fn tcp_through_lte_trace_gets_what_the_trace_allows() {
    if mewa_testkit::skip_unless_root() {
        return;
    }
    let Some(path) = mewa_testkit::shared_data_or_skip("traces/TMobile-LTE-short.down") else {
        return;
    };
    let text = std::fs::read_to_string(&path).unwrap();
    let trace = DeliveryTrace::parse(&text).unwrap();
    let delay = ms(20);
    let cfg = LinkConfig {
        up: direction(delay, RateSpec::Unlimited, QueueSpec::default()),
        // mahimahi's default: an unbounded drop-tail queue.
        down: direction(delay, RateSpec::Trace(trace.clone()), QueueSpec::default()),
        ..LinkConfig::default()
    };
    let topo = Topology::builder()
        .host("lc")
        .host("ls")
        .link("lc", "ls", cfg)
        .build()
        .unwrap();
    let allowed = std::sync::Mutex::new(0.0);
    // The server sends down to the client.
    let (wire, goodput) = bulk_tcp(&topo, "ls", "lc", 5002, ms(3000), ms(30_000), |a, b| {
        let got = (b.down.delivered_bytes - a.down.delivered_bytes) as f64;
        // A packet is handed out `delay` after it leaves the bottleneck.
        let cap = trace.capacity_bytes(a.at.saturating_sub(delay), b.at.saturating_sub(delay));
        *allowed.lock().unwrap() = cap as f64 * 8.0 / (b.at - a.at).as_secs_f64() / 1e6;
        got / cap as f64
    });
    let allowed = *allowed.lock().unwrap();
    eprintln!(
        "TCP through TMobile-LTE-short.down for 30 s: delivered/allowed = {wire:.4} \
         (trace allows {allowed:.3} Mbit/s; goodput {goodput:.3} Mbit/s)"
    );
    assert!((wire - 1.0).abs() <= 0.05, "delivered/allowed = {wire:.4}");
}

/// LTE radio: after 15 s idle the next request pays the ≈ 400 ms promotion,
/// the one right after does not.
#[test]
fn lte_radio_promotes_after_idle() {
    if mewa_testkit::skip_unless_root() {
        return;
    }
    let d = direction(ms(20), RateSpec::Unlimited, QueueSpec::default());
    let cfg = LinkConfig {
        up: d.clone(),
        down: d,
        radio: RadioConfig::preset("lte").unwrap(),
        ..LinkConfig::default()
    };
    let topo = Topology::builder()
        .host("rrc-c")
        .host("rrc-s")
        .link("rrc-c", "rrc-s", cfg)
        .build()
        .unwrap();
    let server = SocketAddrV4::new(topo.addr("rrc-s").unwrap(), 7009);
    let stop = udp_echo(&topo, "rrc-s", 7009);
    let sock = topo
        .in_namespace("rrc-c", || UdpSocket::bind("0.0.0.0:0"))
        .unwrap()
        .unwrap();
    sock.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
    let ms_of = |d: Duration| d.as_secs_f64() * 1e3;
    // The radio starts idle: the very first request is promoted too.
    let first = ms_of(udp_rtt(&sock, server, 1));
    let warm = ms_of(udp_rtt(&sock, server, 2));
    std::thread::sleep(Duration::from_secs(15));
    let promoted = ms_of(udp_rtt(&sock, server, 3));
    let after = ms_of(udp_rtt(&sock, server, 4));
    stop.store(true, Ordering::Relaxed);
    let promotions = topo.link_stats("rrc-c", "rrc-s").unwrap().radio_promotions;
    eprintln!(
        "LTE radio RTTs: first {first:.1} ms, next {warm:.1} ms, after 15 s idle {promoted:.1} ms, \
         next {after:.1} ms; promotions {promotions}"
    );
    for (what, v) in [("first", first), ("after idle", promoted)] {
        assert!(
            (435.0..=470.0).contains(&v),
            "{what}: {v:.1} ms, want ≈ 440"
        );
    }
    for (what, v) in [("warm", warm), ("right after", after)] {
        assert!((39.0..=50.0).contains(&v), "{what}: {v:.1} ms, want ≈ 40");
    }
    assert_eq!(promotions, 2);
}

/// Dropping a topology removes its namespaces and devices and kills what
/// still ran inside.
#[test]
fn drop_tears_everything_down() {
    if mewa_testkit::skip_unless_root() {
        return;
    }
    let topo = Topology::builder()
        .root_host("dh")
        .host("dc")
        .host("dn")
        .link("dc", "dh", LinkConfig::default())
        .veth("dc", "dn")
        .build()
        .unwrap();
    let names: Vec<String> = ["dc", "dn"]
        .iter()
        .map(|h| topo.netns_name(h).unwrap().unwrap().to_string())
        .collect();
    assert_eq!(topo.netns_name("dh").unwrap(), None);
    let root_dev = root_device(topo.addr("dh").unwrap());
    assert!(root_dev.starts_with(&format!("mewa-{}-", std::process::id())));
    let mut child = topo.spawn("dc", "sleep", ["100"]).unwrap();
    let listed = netns_list();
    for n in &names {
        assert!(listed.contains(n.as_str()), "{n} missing from {listed}");
    }
    drop(topo);
    let listed = netns_list();
    for n in &names {
        assert!(!listed.contains(n.as_str()), "{n} left behind: {listed}");
    }
    assert!(
        !root_links().contains(&format!("{root_dev}:")),
        "{root_dev} left behind"
    );
    let status = child.wait().unwrap();
    assert!(!status.success(), "sleep should have been killed");
}

/// A link whose emulator stops (here: its device deleted under it) is
/// reported by `Topology::health`, naming the link, instead of leaving
/// what crosses it to time out.
#[test]
fn a_link_whose_device_vanishes_is_reported_not_silent() {
    if mewa_testkit::skip_unless_root() {
        return;
    }
    let topo = Topology::builder()
        .root_host("vh")
        .host("vc")
        .link("vc", "vh", LinkConfig::default())
        .build()
        .unwrap();
    topo.health().expect("a fresh link forwards");
    // The root side's TUN device, found by its address, deleted under the
    // running emulator: its next read fails.
    let gw = topo.addr("vh").unwrap();
    let dev = root_device(gw);
    let del = Command::new("ip")
        .args(["link", "del", &dev])
        .status()
        .unwrap();
    assert!(del.success(), "ip link del {dev}");
    // Wake the emulator (it polls the device, and an idle link also wakes
    // on its own every publish period).
    let _ = topo.in_namespace("vc", || {
        let s = UdpSocket::bind("0.0.0.0:0").unwrap();
        let _ = s.send_to(b"x", SocketAddrV4::new(gw, 9));
    });
    let deadline = Instant::now() + Duration::from_secs(5);
    let err = loop {
        match topo.health() {
            Err(e) => break e,
            Ok(()) if Instant::now() < deadline => std::thread::sleep(ms(20)),
            Ok(()) => panic!("the link's device is gone and health() still says Ok"),
        }
    };
    let text = err.to_string();
    assert!(
        text.contains("vc ⇄ vh") && text.contains("TUN"),
        "the error names the link and the device: {text}"
    );
}

/// Used by `stale_namespaces_of_a_killed_run_are_removed`: holds a topology
/// until killed. Does nothing unless started by that test.
#[test]
#[ignore = "helper process of stale_namespaces_of_a_killed_run_are_removed"]
fn hold_topology_until_killed() {
    if std::env::var_os("MEWA_TEST_HOLD").is_none() {
        return;
    }
    let topo = Topology::builder()
        .root_host("kh")
        .host("kc")
        .host("kn")
        .link("kc", "kh", LinkConfig::default())
        .veth("kc", "kn")
        .build()
        .unwrap();
    let mut sleeper = topo.spawn("kc", "sleep", ["100"]).unwrap();
    println!(
        "READY {} {}",
        topo.netns_name("kc").unwrap().unwrap(),
        topo.netns_name("kn").unwrap().unwrap()
    );
    std::io::stdout().flush().unwrap();
    std::thread::sleep(Duration::from_secs(60));
    // Not reached when the test kills this process as intended.
    drop(topo);
    let _ = sleeper.wait();
}

/// A run killed with SIGKILL leaves its namespaces (and a process inside);
/// the next run's `cleanup_stale` removes them. Its TUN devices die with it.
#[test]
fn stale_namespaces_of_a_killed_run_are_removed() {
    if mewa_testkit::skip_unless_root() {
        return;
    }
    let exe = std::env::current_exe().unwrap();
    let mut child = Command::new(exe)
        .args([
            "--exact",
            "hold_topology_until_killed",
            "--ignored",
            "--nocapture",
        ])
        .env("MEWA_TEST_HOLD", "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let pid = child.id();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let names: Vec<String> = loop {
        let line = lines.next().expect("the helper prints READY").unwrap();
        if let Some(rest) = line.strip_prefix("READY ") {
            break rest.split_whitespace().map(String::from).collect();
        }
    };
    let prefix = format!("mewa-{pid}-");
    assert!(netns_list().contains(&names[0]));
    assert!(
        root_links().contains(&prefix),
        "the helper's root TUN exists"
    );
    // SIGKILL: no destructor runs.
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    child.wait().unwrap();
    assert!(
        netns_list().contains(&names[0]),
        "namespaces outlive a SIGKILL"
    );
    let report = runtime::cleanup_stale().unwrap();
    eprintln!("cleanup_stale after SIGKILL: {report:?}");
    for n in &names {
        assert!(report.namespaces.contains(n), "{n} not in {report:?}");
    }
    assert_eq!(report.killed.len(), 1, "the sleep inside: {report:?}");
    assert!(!netns_list().contains(&prefix), "{}", netns_list());
    assert!(!root_links().contains(&prefix), "{}", root_links());
}
