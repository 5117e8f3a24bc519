//! Topologies: named hosts, each in its own network namespace, joined by
//! emulated links (a TUN pair and an emulator thread) or plain veth pairs.
//!
//! ```no_run
//! use mewa_link::core::LinkConfig;
//! use mewa_link::runtime::Topology;
//!
//! # fn main() -> Result<(), mewa_link::runtime::Error> {
//! let topo = Topology::builder()
//!     .host("client")
//!     .host("edge")
//!     .host("origin")
//!     .link("client", "edge", LinkConfig::default()) // the radio link
//!     .link("edge", "origin", LinkConfig::default()) // the wired part
//!     .build()?;
//! let origin = topo.addr("origin")?;
//! let status = topo.command("client", "ping")?.args(["-c", "3", &origin.to_string()]).status();
//! # let _ = status;
//! # Ok(())
//! # }
//! ```
//!
//! Addressing: link k gets a /30 of 100.64.0.0/16; its first host (the
//! "client" side, whose traffic is the link's uplink) has `.1` of the /30,
//! the second `.2`. Every host gets a route to every other link's /30
//! through its first hop on a shortest path, and hosts with more than one
//! link forward (`net.ipv4.ip_forward=1`).

use std::collections::VecDeque;
use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::process::{Child, Command};
use std::thread::JoinHandle;
use std::time::Instant;

use tun_rs::{DeviceBuilder, SyncDevice};

use super::emulator::{Emulator, LinkStats, Outputs};
use super::netns::{self, Namespace, NETNS_DIR};
use super::sys::{ip, ip_batch, which, write_dev_sysctl, write_sysctl};
use super::{probe, Error};
use crate::core::{DelaySpec, DirectionConfig, LinkConfig, QueueSpec, RateSpec};

/// First address of the pool links take their /30s from (RFC 6598).
const POOL_BASE: u32 = u32::from_be_bytes([100, 64, 0, 0]);
/// /30s in 100.64.0.0/16.
const POOL_SLOTS: u32 = 1 << 14;
/// MTU of every link device.
const MTU: u16 = 1500;
/// Transmit queue of the TUN devices: the default 500 drops packets before
/// the emulator sees them when a fast sender bursts.
const TXQUEUELEN: u32 = 5000;
/// Socket buffer limits set in every namespace: big enough for a window of
/// a few BDPs at a few hundred Mbit/s and 100+ ms, so the receiver never
/// caps a transfer (the default 6 MB / 4 MB maxima would, with big queues).
const TCP_MEM: &str = "4096 131072 33554432";

/// Files and labels of an emulated link, besides its [`LinkConfig`].
#[derive(Debug, Clone, Default)]
pub struct LinkOptions {
    /// Write `<prefix>up.pcap` and `<prefix>down.pcap` here: the packets as
    /// they leave the link (what the receiving side sees), raw IPv4.
    pub pcap_dir: Option<PathBuf>,
    /// Write the per-direction event logs `<prefix>up.log` and
    /// `<prefix>down.log` here (the format `mewa link plot` reads).
    pub log_dir: Option<PathBuf>,
    /// File name prefix; `<client>-<network>.` when `None`.
    pub file_prefix: Option<String>,
    /// One line describing the link in the logs' headers; derived from the
    /// configuration when `None`.
    pub description: Option<String>,
    /// Open the TUN devices without segmentation offload: the kernel then
    /// hands every packet over separately and takes them back one by one.
    /// Slower (see `mewa bench link`); for comparison and as a fallback.
    pub disable_offload: bool,
}

#[derive(Debug, Clone)]
enum LinkKind {
    Emulated(Box<(LinkConfig, LinkOptions)>),
    Veth,
}

#[derive(Debug, Clone)]
struct LinkSpec {
    a: usize,
    b: usize,
    kind: LinkKind,
}

/// Describes a topology; [`TopologyBuilder::build`] makes it real.
#[derive(Debug, Clone, Default)]
pub struct TopologyBuilder {
    hosts: Vec<(String, bool)>,
    links: Vec<(String, String, LinkKind)>,
    default_routes: Vec<(String, String)>,
    extra: Vec<(String, u32)>,
}

/// First address of the pool extra addresses come from (RFC 6598 too, the
/// /16 after the links').
const EXTRA_BASE: u32 = u32::from_be_bytes([100, 65, 0, 0]);
/// Prefix length of each host's block of extra addresses: a /20.
const EXTRA_PREFIX: u32 = 20;
/// Extra addresses one host can have: a /20 without its first and last.
pub const MAX_EXTRA_ADDRS: u32 = (1 << (32 - EXTRA_PREFIX)) - 2;
/// Hosts that can have extra addresses (/20 blocks in a /16).
const EXTRA_BLOCKS: usize = 1 << (EXTRA_PREFIX - 16);

impl TopologyBuilder {
    /// Adds a host in a namespace of its own. Names: 1–12 characters of
    /// `a-z A-Z 0-9 _ -` (they become parts of namespace and device names).
    pub fn host(mut self, name: &str) -> Self {
        self.hosts.push((name.to_string(), false));
        self
    }

    /// Adds a host that is the root namespace itself (what `mewa link` uses:
    /// the program runs in a namespace, the rest of the machine is the other
    /// end). Its links must not need it to forward: mewa does not change the
    /// host's own settings, so such a host has at most one link.
    pub fn root_host(mut self, name: &str) -> Self {
        self.hosts.push((name.to_string(), true));
        self
    }

    /// Adds an emulated link; `client` is the side whose outgoing traffic is
    /// the link's uplink ([`crate::core::Dir::Up`]).
    pub fn link(self, client: &str, network: &str, cfg: LinkConfig) -> Self {
        self.link_with(client, network, cfg, LinkOptions::default())
    }

    /// Adds an emulated link with capture and log files.
    pub fn link_with(
        mut self,
        client: &str,
        network: &str,
        cfg: LinkConfig,
        opts: LinkOptions,
    ) -> Self {
        self.links.push((
            client.to_string(),
            network.to_string(),
            LinkKind::Emulated(Box::new((cfg, opts))),
        ));
        self
    }

    /// Adds a plain veth pair (no emulation): a reference to compare the
    /// emulator against, or a wired hop that needs no delay.
    pub fn veth(mut self, a: &str, b: &str) -> Self {
        self.links
            .push((a.to_string(), b.to_string(), LinkKind::Veth));
        self
    }

    /// Gives `host` a default route through its link to `via`, so it reaches
    /// any address (e.g. the machine's own, beyond a root host).
    pub fn default_route(mut self, host: &str, via: &str) -> Self {
        self.default_routes
            .push((host.to_string(), via.to_string()));
        self
    }

    /// Gives `host` `count` more addresses (on its loopback, each a /32 of
    /// its own /20 in 100.65.0.0/16), which every other host routes to it:
    /// a server that must appear at many addresses, like the hosts of a
    /// replayed page, each at its own. See [`Topology::extra_addrs`].
    pub fn extra_addrs(mut self, host: &str, count: u32) -> Self {
        self.extra.push((host.to_string(), count));
        self
    }

    /// Creates the namespaces, devices, addresses, routes and emulator
    /// threads. On failure everything created so far is removed again.
    pub fn build(self) -> Result<Topology, Error> {
        let plan = self.plan()?;
        probe()?;
        Topology::create(plan)
    }

    /// Checks names and references; computes indices.
    fn plan(self) -> Result<Plan, Error> {
        let mut names: Vec<String> = Vec::new();
        let mut root = None;
        for (i, (name, is_root)) in self.hosts.iter().enumerate() {
            check_host_name(name)?;
            if names.contains(name) {
                return Err(Error::Topology(format!("host {name:?} is declared twice")));
            }
            if *is_root {
                if root.is_some() {
                    return Err(Error::Topology(
                        "only one host can be the root namespace".into(),
                    ));
                }
                root = Some(i);
            }
            names.push(name.clone());
        }
        let find = |n: &str| {
            names
                .iter()
                .position(|h| h == n)
                .ok_or_else(|| Error::UnknownHost(n.to_string()))
        };
        let mut links = Vec::new();
        for (a, b, kind) in self.links {
            let (ia, ib) = (find(&a)?, find(&b)?);
            if ia == ib {
                return Err(Error::Topology(format!("link from {a:?} to itself")));
            }
            if links
                .iter()
                .any(|l: &LinkSpec| (l.a, l.b) == (ia, ib) || (l.a, l.b) == (ib, ia))
            {
                return Err(Error::Topology(format!(
                    "two links between {a:?} and {b:?}; one pair of hosts has at most one link"
                )));
            }
            links.push(LinkSpec { a: ia, b: ib, kind });
        }
        if let Some(r) = root {
            let degree = links.iter().filter(|l| l.a == r || l.b == r).count();
            if degree > 1 {
                return Err(Error::Topology(format!(
                    "the root host {:?} has {degree} links; it can have one (mewa does not \
                     make the machine itself forward)",
                    names[r]
                )));
            }
        }
        let mut default_routes = Vec::new();
        for (h, via) in self.default_routes {
            let (ih, iv) = (find(&h)?, find(&via)?);
            let link = links
                .iter()
                .position(|l| (l.a, l.b) == (ih, iv) || (l.a, l.b) == (iv, ih))
                .ok_or_else(|| Error::UnknownLink(h.clone(), via.clone()))?;
            if Some(ih) == root {
                return Err(Error::Topology(
                    "mewa does not change the root namespace's default route".into(),
                ));
            }
            default_routes.push((ih, link));
        }
        let mut extra = Vec::new();
        for (k, (h, count)) in self.extra.into_iter().enumerate() {
            let ih = find(&h)?;
            if Some(ih) == root {
                return Err(Error::Topology(
                    "extra addresses go on namespace hosts, not the root namespace".into(),
                ));
            }
            if k >= EXTRA_BLOCKS || count > MAX_EXTRA_ADDRS {
                return Err(Error::Topology(format!(
                    "extra addresses: at most {EXTRA_BLOCKS} hosts with at most \
                     {MAX_EXTRA_ADDRS} each ({h:?} asks for {count})"
                )));
            }
            let block = EXTRA_BASE + ((k as u32) << (32 - EXTRA_PREFIX));
            extra.push((ih, Ipv4Addr::from(block), count));
        }
        Ok(Plan {
            names,
            root,
            links,
            default_routes,
            extra,
        })
    }
}

fn check_host_name(name: &str) -> Result<(), Error> {
    let ok = !name.is_empty()
        && name.len() <= 12
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if ok {
        Ok(())
    } else {
        Err(Error::Topology(format!(
            "host name {name:?}: use 1 to 12 characters of a-z, A-Z, 0-9, _ and -"
        )))
    }
}

struct Plan {
    names: Vec<String>,
    root: Option<usize>,
    links: Vec<LinkSpec>,
    default_routes: Vec<(usize, usize)>,
    /// (host, first address of its /20, how many).
    extra: Vec<(usize, Ipv4Addr, u32)>,
}

impl Plan {
    fn neighbours(&self, h: usize) -> impl Iterator<Item = (usize, usize)> + '_ {
        self.links.iter().enumerate().filter_map(move |(k, l)| {
            if l.a == h {
                Some((l.b, k))
            } else if l.b == h {
                Some((l.a, k))
            } else {
                None
            }
        })
    }

    /// Hop counts from `h` and, for every host, the link of the first hop.
    fn bfs(&self, h: usize) -> (Vec<Option<usize>>, Vec<Option<usize>>) {
        let n = self.names.len();
        let mut dist = vec![None; n];
        let mut first = vec![None; n];
        dist[h] = Some(0);
        let mut q = VecDeque::from([h]);
        while let Some(u) = q.pop_front() {
            let du = dist[u].unwrap_or(0);
            for (v, k) in self.neighbours(u) {
                if dist[v].is_none() {
                    dist[v] = Some(du + 1);
                    first[v] = if u == h { Some(k) } else { first[u] };
                    q.push_back(v);
                }
            }
        }
        (dist, first)
    }
}

/// One host of a running topology.
#[derive(Debug)]
struct Host {
    name: String,
    /// `None` for the root host.
    ns: Option<Namespace>,
}

/// One link of a running topology.
struct RunningLink {
    a: usize,
    b: usize,
    subnet: Ipv4Addr,
    /// Device names on the a and b sides.
    devs: [String; 2],
    emulator: Option<Emulator>,
}

impl RunningLink {
    fn addr(&self, side: usize) -> Ipv4Addr {
        Ipv4Addr::from(u32::from(self.subnet) + 1 + side as u32)
    }
}

/// A running topology; dropping it tears everything down.
pub struct Topology {
    hosts: Vec<Host>,
    links: Vec<RunningLink>,
    /// Extra addresses per host index.
    extra: Vec<(usize, Vec<Ipv4Addr>)>,
}

impl std::fmt::Debug for Topology {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Topology")
            .field("hosts", &self.hosts)
            .field("links", &self.links.len())
            .finish()
    }
}

impl Topology {
    /// Starts describing a topology.
    pub fn builder() -> TopologyBuilder {
        TopologyBuilder::default()
    }

    fn create(plan: Plan) -> Result<Topology, Error> {
        let seq = netns::next_topology();
        let subnets = allocate_subnets(plan.links.len(), plan.root.is_some())?;
        // Names first: the topology below is torn down by Drop if a later
        // step fails, so every step only adds to it.
        let mut topo = Topology {
            hosts: Vec::new(),
            links: Vec::new(),
            extra: plan
                .extra
                .iter()
                .map(|&(h, base, n)| {
                    let first = u32::from(base) + 1;
                    (h, (first..first + n).map(Ipv4Addr::from).collect())
                })
                .collect(),
        };
        for (i, name) in plan.names.iter().enumerate() {
            let ns = if Some(i) == plan.root {
                None
            } else {
                Some(Namespace::create(&netns::namespace_name(seq, name))?)
            };
            topo.hosts.push(Host {
                name: name.clone(),
                ns,
            });
        }
        for (k, l) in plan.links.iter().enumerate() {
            let devs = [
                topo.device_name(l.a, l.b, &plan)?,
                topo.device_name(l.b, l.a, &plan)?,
            ];
            topo.links.push(RunningLink {
                a: l.a,
                b: l.b,
                subnet: subnets[k],
                devs,
                emulator: None,
            });
        }
        // veth pairs are made from the root namespace straight into place.
        for (k, l) in plan.links.iter().enumerate() {
            if matches!(l.kind, LinkKind::Veth) {
                topo.create_veth(k)?;
            }
        }
        // Per host, on a thread inside its namespace: sysctls and TUNs.
        let mut tuns: Vec<[Option<SyncDevice>; 2]> =
            plan.links.iter().map(|_| [None, None]).collect();
        for h in 0..topo.hosts.len() {
            let forwards = plan.neighbours(h).count() > 1;
            let mine: Vec<(usize, usize, String, Option<bool>)> = topo
                .links
                .iter()
                .enumerate()
                .filter_map(|(k, l)| {
                    let side = if l.a == h {
                        0
                    } else if l.b == h {
                        1
                    } else {
                        return None;
                    };
                    // For TUNs: whether to use offload.
                    let tun = match &plan.links[k].kind {
                        LinkKind::Emulated(b) => Some(!b.1.disable_offload),
                        LinkKind::Veth => None,
                    };
                    Some((k, side, l.devs[side].clone(), tun))
                })
                .collect();
            let ns = topo.hosts[h].ns.as_ref().map(|n| n.name().to_string());
            let in_ns = ns.is_some();
            let made = in_host(ns.as_deref(), move || -> Result<Vec<_>, Error> {
                if in_ns {
                    configure_namespace(forwards)?;
                }
                let mut made = Vec::new();
                for (k, side, dev, tun) in mine {
                    if let Some(offload) = tun {
                        made.push((k, side, create_tun(&dev, offload)?));
                    } else {
                        write_dev_sysctl("net.ipv6.conf", &dev, "disable_ipv6", "1")?;
                    }
                }
                Ok(made)
            })??;
            for (k, side, dev) in made {
                tuns[k][side] = Some(dev);
            }
        }
        // Addresses, devices up, routes: one `ip -batch` per host.
        for h in 0..topo.hosts.len() {
            let cmds = topo.host_commands(h, &plan);
            let ns = topo.hosts[h].ns.as_ref().map(|n| n.name().to_string());
            ip_batch(ns.as_deref(), &cmds)?;
        }
        // Emulators last: time zero of every link is when it can carry data.
        for (k, spec) in plan.links.into_iter().enumerate() {
            let LinkKind::Emulated(boxed) = spec.kind else {
                continue;
            };
            let (cfg, opts) = *boxed;
            let [Some(client), Some(network)] = std::mem::take(&mut tuns[k]) else {
                return Err(Error::Topology(format!("link {k} lost its TUN devices")));
            };
            let (an, bn) = (&topo.hosts[spec.a].name, &topo.hosts[spec.b].name);
            let prefix = opts
                .file_prefix
                .clone()
                .unwrap_or_else(|| format!("{an}-{bn}."));
            let descr = |d: &DirectionConfig| {
                opts.description
                    .clone()
                    .unwrap_or_else(|| describe(d, &cfg))
            };
            let outputs = Outputs::create(
                opts.pcap_dir.as_deref(),
                opts.log_dir.as_deref(),
                &prefix,
                [&descr(&cfg.up), &descr(&cfg.down)],
            )?;
            let emu = Emulator::start(format!("{an}-{bn}"), client, network, cfg, outputs)?;
            topo.links[k].emulator = Some(emu);
        }
        Ok(topo)
    }

    /// The name of `host`'s device on its link to `peer`: `to-<peer>` in a
    /// namespace, `mewa-<pid>-<n>` in the root namespace (where it must be
    /// unique machine-wide and show its owner for stale cleanup).
    fn device_name(&self, host: usize, peer: usize, plan: &Plan) -> Result<String, Error> {
        if Some(host) == plan.root {
            netns::root_device_name()
        } else {
            Ok(format!("to-{}", plan.names[peer]))
        }
    }

    fn create_veth(&self, k: usize) -> Result<(), Error> {
        let l = &self.links[k];
        let ns = |h: usize| self.hosts[h].ns.as_ref().map(|n| n.name().to_string());
        // Made under temporary root-namespace names owned by this process,
        // then renamed as they move: a crash in between leaves devices that
        // cleanup_stale recognises.
        let ta = netns::root_device_name()?;
        let tb = netns::root_device_name()?;
        ip(&["link", "add", &ta, "type", "veth", "peer", "name", &tb])?;
        for (tmp, side) in [(&ta, 0), (&tb, 1)] {
            let h = if side == 0 { l.a } else { l.b };
            let target = &l.devs[side];
            match ns(h) {
                Some(n) => ip(&["link", "set", "dev", tmp, "netns", &n, "name", target])?,
                None if tmp != target => ip(&["link", "set", "dev", tmp, "name", target])?,
                None => String::new(),
            };
        }
        Ok(())
    }

    /// The `ip -batch` lines that configure host `h`.
    fn host_commands(&self, h: usize, plan: &Plan) -> Vec<String> {
        let mut cmds = Vec::new();
        if self.hosts[h].ns.is_some() {
            cmds.push("link set dev lo up".to_string());
        }
        for l in self.links.iter().filter(|l| l.a == h || l.b == h) {
            let side = usize::from(l.b == h);
            let dev = &l.devs[side];
            cmds.push(format!("addr add {}/30 dev {dev}", l.addr(side)));
            cmds.push(format!("link set dev {dev} mtu {MTU} up"));
        }
        let (dist, first) = plan.bfs(h);
        for l in self.links.iter().filter(|l| l.a != h && l.b != h) {
            // Toward the nearer end of the link; skip unreachable links.
            let target = match (dist[l.a], dist[l.b]) {
                (Some(x), Some(y)) if x <= y => l.a,
                (Some(_), Some(_)) | (None, Some(_)) => l.b,
                (Some(_), None) => l.a,
                (None, None) => continue,
            };
            if let Some(hop) = first[target] {
                let (via, dev) = self.next_hop(h, hop);
                cmds.push(format!("route add {}/30 via {via} dev {dev}", l.subnet));
            }
        }
        for &(host, k) in &plan.default_routes {
            if host == h {
                let (via, dev) = self.next_hop(h, k);
                cmds.push(format!("route add default via {via} dev {dev}"));
            }
        }
        for (&(owner, base, _), (_, addrs)) in plan.extra.iter().zip(&self.extra) {
            if owner == h {
                for a in addrs {
                    cmds.push(format!("addr add {a}/32 dev lo"));
                }
            } else if let Some(k) = first[owner] {
                let (via, dev) = self.next_hop(h, k);
                cmds.push(format!(
                    "route add {base}/{EXTRA_PREFIX} via {via} dev {dev}"
                ));
            }
        }
        cmds
    }

    /// The peer's address and `h`'s device on link `k`.
    fn next_hop(&self, h: usize, k: usize) -> (Ipv4Addr, &str) {
        let l = &self.links[k];
        let side = usize::from(l.b == h);
        (l.addr(1 - side), &l.devs[side])
    }

    fn host_index(&self, host: &str) -> Result<usize, Error> {
        self.hosts
            .iter()
            .position(|h| h.name == host)
            .ok_or_else(|| Error::UnknownHost(host.to_string()))
    }

    fn link_index(&self, a: &str, b: &str) -> Result<usize, Error> {
        let (ia, ib) = (self.host_index(a)?, self.host_index(b)?);
        self.links
            .iter()
            .position(|l| (l.a, l.b) == (ia, ib) || (l.a, l.b) == (ib, ia))
            .ok_or_else(|| Error::UnknownLink(a.to_string(), b.to_string()))
    }

    /// The hosts' names, in declaration order.
    pub fn hosts(&self) -> impl Iterator<Item = &str> {
        self.hosts.iter().map(|h| h.name.as_str())
    }

    /// The primary address of `host`: its address on its first link.
    pub fn addr(&self, host: &str) -> Result<Ipv4Addr, Error> {
        let h = self.host_index(host)?;
        self.links
            .iter()
            .find(|l| l.a == h || l.b == h)
            .map(|l| l.addr(usize::from(l.b == h)))
            .ok_or_else(|| Error::Topology(format!("host {host:?} has no link, so no address")))
    }

    /// The extra addresses of `host` ([`TopologyBuilder::extra_addrs`]), in
    /// order; empty if it has none.
    pub fn extra_addrs(&self, host: &str) -> Result<&[Ipv4Addr], Error> {
        let h = self.host_index(host)?;
        Ok(self
            .extra
            .iter()
            .find(|(i, _)| *i == h)
            .map_or(&[][..], |(_, a)| a.as_slice()))
    }

    /// The address of `host` on the link that joins it to `peer` (what
    /// `peer` sees as its neighbour).
    pub fn addr_towards(&self, host: &str, peer: &str) -> Result<Ipv4Addr, Error> {
        let h = self.host_index(host)?;
        let l = &self.links[self.link_index(host, peer)?];
        Ok(l.addr(usize::from(l.b == h)))
    }

    /// The network namespace of `host` (for `ip netns exec`, `nsenter`), or
    /// `None` for the root host.
    pub fn netns_name(&self, host: &str) -> Result<Option<&str>, Error> {
        let h = self.host_index(host)?;
        Ok(self.hosts[h].ns.as_ref().map(Namespace::name))
    }

    /// A [`Command`] that runs `program` inside `host`'s namespace; add
    /// arguments, environment and stdio as usual.
    ///
    /// It goes through `nsenter --net=…`, which, unlike `ip netns exec`,
    /// leaves `/sys` alone (so `/sys/fs/cgroup` stays visible) and does not
    /// bind-mount `/etc/netns/<name>` files.
    pub fn command(
        &self,
        host: &str,
        program: impl AsRef<std::ffi::OsStr>,
    ) -> Result<Command, Error> {
        let h = self.host_index(host)?;
        match &self.hosts[h].ns {
            None => Ok(Command::new(program)),
            Some(ns) => {
                let nsenter = which("nsenter").ok_or(Error::MissingTool {
                    tool: "nsenter",
                    package: "util-linux",
                })?;
                let mut c = Command::new(nsenter);
                c.arg(format!("--net={NETNS_DIR}/{}", ns.name()))
                    .arg("--")
                    .arg(program);
                Ok(c)
            }
        }
    }

    /// Starts `program args…` inside `host`'s namespace. Whatever still runs
    /// in a namespace when the topology is dropped is killed.
    pub fn spawn<I, S>(&self, host: &str, program: &str, args: I) -> Result<Child, Error>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<std::ffi::OsStr>,
    {
        self.command(host, program)?
            .args(args)
            .spawn()
            .map_err(|e| Error::io(format!("starting {program} in {host}"), e))
    }

    /// Runs `f` on a thread inside `host`'s namespace and returns its result:
    /// sockets it opens live in that namespace (and stay there when passed
    /// out).
    pub fn in_namespace<R: Send>(
        &self,
        host: &str,
        f: impl FnOnce() -> R + Send,
    ) -> Result<R, Error> {
        let h = self.host_index(host)?;
        in_host(self.hosts[h].ns.as_ref().map(Namespace::name), f)
    }

    /// Like [`Topology::in_namespace`] without waiting: for servers and
    /// concurrent senders.
    pub fn spawn_in<R: Send + 'static>(
        &self,
        host: &str,
        f: impl FnOnce() -> R + Send + 'static,
    ) -> Result<JoinHandle<R>, Error> {
        let h = self.host_index(host)?;
        let ns = self.hosts[h]
            .ns
            .as_ref()
            .map(|n| format!("{NETNS_DIR}/{}", n.name()))
            .unwrap_or_else(|| ROOT_NS.to_string());
        netns::spawn_in(Some(ns), format!("mewa-in-{host}"), f)
    }

    /// The counters of the emulated link between `a` and `b` (either order;
    /// up is always from the link's client side).
    pub fn link_stats(&self, a: &str, b: &str) -> Result<LinkStats, Error> {
        self.emulator(a, b).map(Emulator::stats)
    }

    /// The instant that is time zero of the link's clock (and of its traces).
    pub fn link_started(&self, a: &str, b: &str) -> Result<Instant, Error> {
        self.emulator(a, b).map(Emulator::started)
    }

    /// Restarts the delivery traces of the link between `a` and `b` at the
    /// trace's moment `at_ms` (modulo the trace's period), so that what
    /// runs next sees that stretch of the trace; a link without traces is
    /// unaffected.
    pub fn rewind_traces(&self, a: &str, b: &str, at_ms: u64) -> Result<(), Error> {
        self.emulator(a, b).map(|e| e.rewind_traces(at_ms, false))
    }

    /// As [`Topology::rewind_traces`], but the trace's moment `at_ms` falls
    /// on the next packet to cross the link, however long that takes
    /// ([`crate::core::Link::rewind_traces_at_next_packet`]): what the lab
    /// uses before a browser load, whose start-up time varies.
    pub fn rewind_traces_at_next_packet(&self, a: &str, b: &str, at_ms: u64) -> Result<(), Error> {
        self.emulator(a, b).map(|e| e.rewind_traces(at_ms, true))
    }

    /// Puts the radio of the link between `a` and `b` to sleep now, as if
    /// the phone had been idle past every tail timer: the next packet pays
    /// the full RRC promotion (a link without a radio model is unaffected).
    pub fn radio_idle(&self, a: &str, b: &str) -> Result<(), Error> {
        self.emulator(a, b).map(Emulator::radio_idle)
    }

    /// Whether every emulated link is still forwarding; the first that
    /// is not, with the error its thread stopped on. A link that dies (its
    /// pcap's disk full, a device deleted under it) otherwise shows only as
    /// loads that hang until they time out.
    pub fn health(&self) -> Result<(), Error> {
        for l in &self.links {
            let Some(stats) = l.emulator.as_ref().map(Emulator::stats) else {
                continue;
            };
            if !stats.running {
                return Err(Error::LinkStopped {
                    link: format!("{} ⇄ {}", self.hosts[l.a].name, self.hosts[l.b].name),
                    reason: stats.error.unwrap_or_else(|| "it was stopped".to_string()),
                });
            }
        }
        Ok(())
    }

    fn emulator(&self, a: &str, b: &str) -> Result<&Emulator, Error> {
        self.links[self.link_index(a, b)?]
            .emulator
            .as_ref()
            .ok_or_else(|| Error::UnknownLink(a.to_string(), b.to_string()))
    }

    /// Tears down now and reports the first emulator error, if any (dropping
    /// does the same and ignores errors).
    pub fn shutdown(mut self) -> Result<(), Error> {
        let mut first = Ok(());
        for l in &mut self.links {
            if let Some(mut e) = l.emulator.take() {
                let r = e.stop();
                if first.is_ok() {
                    first = r;
                }
            }
        }
        first
    }
}

impl Drop for Topology {
    fn drop(&mut self) {
        // Threads first (closing a TUN deletes it), then the namespaces.
        self.links.clear();
        self.hosts.clear();
    }
}

/// The "root" namespace: the main thread's, whatever namespace the calling
/// thread is in. (Normally the machine's root namespace; under `ip netns
/// exec` the namespace mewa was started in. `/proc/1/ns/net` would be the
/// machine's, but a sandbox may forbid opening it.)
const ROOT_NS: &str = "/proc/self/ns/net";

/// Runs `f` inside a named namespace, or the root namespace for `None`.
fn in_host<R: Send>(ns: Option<&str>, f: impl FnOnce() -> R + Send) -> Result<R, Error> {
    let path = match ns {
        Some(n) => format!("{NETNS_DIR}/{n}"),
        None => ROOT_NS.to_string(),
    };
    netns::run_in(Some(&path), f)
}

/// The sysctls every experiment namespace gets.
fn configure_namespace(forwards: bool) -> Result<(), Error> {
    // Runs must not inherit each other's cached RTT and cwnd.
    write_sysctl("net.ipv4.tcp_no_metrics_save", "1")?;
    write_sysctl("net.ipv4.tcp_rmem", TCP_MEM)?;
    write_sysctl("net.ipv4.tcp_wmem", TCP_MEM)?;
    // Loose routing checks: lab topologies may route asymmetrically.
    write_sysctl("net.ipv4.conf.all.rp_filter", "0")?;
    write_sysctl("net.ipv4.conf.default.rp_filter", "0")?;
    if forwards {
        write_sysctl("net.ipv4.ip_forward", "1")?;
    }
    Ok(())
}

/// Creates a TUN device in the calling thread's namespace: IFF_TUN |
/// IFF_NO_PI (| IFF_VNET_HDR with TSO/checksum offload), MTU 1500,
/// txqueuelen 5000, IPv6 off, still down (the address and `up` come from
/// `ip -batch`).
fn create_tun(name: &str, offload: bool) -> Result<SyncDevice, Error> {
    let dev = DeviceBuilder::new()
        .name(name)
        .mtu(MTU)
        .tx_queue_len(TXQUEUELEN)
        .packet_information(false)
        .offload(offload)
        .enable(false)
        .build_sync()
        .map_err(|e| Error::io(format!("creating TUN device {name}"), e))?;
    // Before the device goes up, so it never sends router solicitations or
    // MLD reports.
    write_dev_sysctl("net.ipv6.conf", name, "disable_ipv6", "1")?;
    Ok(dev)
}

/// Picks `n` /30s of 100.64.0.0/16. Inside namespaces the addresses are
/// private, so the first ones do; with a root host they must also be free in
/// the root namespace, where other runs may hold some: start from a place
/// derived from the pid and skip what is taken.
fn allocate_subnets(n: usize, root: bool) -> Result<Vec<Ipv4Addr>, Error> {
    let slot = |s: u32| Ipv4Addr::from(POOL_BASE + 4 * s);
    if !root {
        if n > POOL_SLOTS as usize {
            return Err(Error::NoFreeSubnet);
        }
        return Ok((0..n as u32).map(slot).collect());
    }
    let mut taken: Vec<(u32, u32)> = Vec::new();
    for out in [
        ip(&["-4", "-o", "addr", "show"])?,
        ip(&["-4", "route", "show", "table", "all"])?,
    ] {
        taken.extend(out.split_whitespace().filter_map(parse_prefix));
    }
    let start = std::process::id().wrapping_mul(2_654_435_761) % POOL_SLOTS;
    let free = |s: u32| {
        let lo = POOL_BASE + 4 * s;
        let hi = lo + 3;
        !taken.iter().any(|&(a, b)| a <= hi && lo <= b)
    };
    let picked: Vec<Ipv4Addr> = (0..POOL_SLOTS)
        .map(|i| (start + i) % POOL_SLOTS)
        .filter(|&s| free(s))
        .take(n)
        .map(slot)
        .collect();
    if picked.len() < n {
        return Err(Error::NoFreeSubnet);
    }
    Ok(picked)
}

/// `a.b.c.d/len` (or a bare address) → the inclusive range it covers.
fn parse_prefix(tok: &str) -> Option<(u32, u32)> {
    let (addr, len) = match tok.split_once('/') {
        Some((a, l)) => (a, l.parse::<u32>().ok()?),
        None => (tok, 32),
    };
    let a = u32::from(addr.parse::<Ipv4Addr>().ok()?);
    if len > 32 || len == 0 {
        return None;
    }
    let mask = u32::MAX << (32 - len);
    Some((a & mask, (a & mask) | !mask))
}

/// A one-line description of a direction for the event log's header.
pub(crate) fn describe(d: &DirectionConfig, link: &LinkConfig) -> String {
    let rate = match &d.rate {
        RateSpec::Unlimited => "rate unlimited".to_string(),
        RateSpec::Constant { bps } => format!("rate {}", fmt_bps(*bps as f64)),
        RateSpec::Trace(t) => format!(
            "trace of {} opportunities per {} ms (mean {})",
            t.opportunities(),
            t.period().as_millis(),
            fmt_bps(t.mean_bps())
        ),
    };
    let delay = match &d.delay {
        DelaySpec::Fixed(x) => format!("delay {x:?}"),
        DelaySpec::Trace(_) => "delay trace".to_string(),
    };
    let queue = match d.queue {
        QueueSpec::DropTail(l) => format!("droptail{}", fmt_limit(l)),
        QueueSpec::DropHead(l) => format!("drophead{}", fmt_limit(l)),
        QueueSpec::CoDel {
            target,
            interval,
            limit,
        } => format!(
            "codel target {target:?} interval {interval:?}{}",
            fmt_limit(limit)
        ),
    };
    let radio = match link.radio {
        crate::core::radio::RadioConfig::Off => "off",
        crate::core::radio::RadioConfig::Lte(_) => "lte",
        crate::core::radio::RadioConfig::Umts(_) => "3g",
    };
    format!(
        "{rate}, {delay}, queue {queue}, loss {}, radio {radio}",
        d.loss
    )
}

fn fmt_limit(l: crate::core::queue::Limit) -> String {
    match (l.packets, l.bytes) {
        (None, None) => " (unbounded)".into(),
        (Some(p), None) => format!(" {p} packets"),
        (None, Some(b)) => format!(" {b} bytes"),
        (Some(p), Some(b)) => format!(" {p} packets / {b} bytes"),
    }
}

fn fmt_bps(bps: f64) -> String {
    if bps >= 1e9 {
        format!("{:.3} Gbit/s", bps / 1e9)
    } else if bps >= 1e6 {
        format!("{:.3} Mbit/s", bps / 1e6)
    } else {
        format!("{:.1} kbit/s", bps / 1e3)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(b: TopologyBuilder) -> Result<Plan, Error> {
        b.plan()
    }

    #[test]
    fn rejects_bad_topologies() {
        let e = |b: TopologyBuilder| plan(b).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(e(Topology::builder().host("a").host("a")).contains("twice"));
        assert!(e(Topology::builder().host("this-is-too-long")).contains("1 to 12"));
        assert!(e(Topology::builder().host("a b")).contains("1 to 12"));
        assert!(e(Topology::builder()
            .host("a")
            .link("a", "b", LinkConfig::default()))
        .contains("no host named \"b\""));
        assert!(e(Topology::builder()
            .host("a")
            .link("a", "a", LinkConfig::default()))
        .contains("itself"));
        assert!(e(Topology::builder()
            .host("a")
            .host("b")
            .link("a", "b", LinkConfig::default())
            .veth("b", "a"))
        .contains("two links"));
        assert!(e(Topology::builder()
            .root_host("r")
            .host("a")
            .host("b")
            .veth("r", "a")
            .veth("r", "b"))
        .contains("root host"));
        assert!(e(Topology::builder()
            .host("a")
            .host("b")
            .host("c")
            .veth("a", "b")
            .default_route("a", "c"))
        .contains("no emulated link"));
    }

    /// Routes of a chain a — b — c — d: a reaches the far links through b.
    #[test]
    fn chain_routes() {
        let p = plan(
            Topology::builder()
                .host("a")
                .host("b")
                .host("c")
                .host("d")
                .veth("a", "b")
                .veth("b", "c")
                .veth("c", "d")
                .default_route("d", "c")
                .extra_addrs("d", 2),
        )
        .unwrap();
        let subnets = allocate_subnets(3, false).unwrap();
        let topo = Topology {
            hosts: p
                .names
                .iter()
                .map(|n| Host {
                    name: n.clone(),
                    ns: None,
                })
                .collect(),
            links: p
                .links
                .iter()
                .enumerate()
                .map(|(k, l)| RunningLink {
                    a: l.a,
                    b: l.b,
                    subnet: subnets[k],
                    devs: [
                        format!("to-{}", p.names[l.b]),
                        format!("to-{}", p.names[l.a]),
                    ],
                    emulator: None,
                })
                .collect(),
            extra: vec![(
                3,
                vec![Ipv4Addr::new(100, 65, 0, 1), Ipv4Addr::new(100, 65, 0, 2)],
            )],
        };
        let (dist, first) = p.bfs(0);
        assert_eq!(dist, vec![Some(0), Some(1), Some(2), Some(3)]);
        assert_eq!(first, vec![None, Some(0), Some(0), Some(0)]);
        assert_eq!(topo.next_hop(0, 0), (Ipv4Addr::new(100, 64, 0, 2), "to-b"));
        assert_eq!(topo.next_hop(1, 0), (Ipv4Addr::new(100, 64, 0, 1), "to-a"));
        assert_eq!(topo.next_hop(2, 1), (Ipv4Addr::new(100, 64, 0, 5), "to-b"));
        let (_, first_c) = p.bfs(2);
        assert_eq!(first_c[0], Some(1));
        assert_eq!(p.default_routes, vec![(3, 2)]);
        // (No `lo` line: these test hosts have no namespace.)
        assert_eq!(
            topo.host_commands(0, &p),
            [
                "addr add 100.64.0.1/30 dev to-b",
                "link set dev to-b mtu 1500 up",
                "route add 100.64.0.4/30 via 100.64.0.2 dev to-b",
                "route add 100.64.0.8/30 via 100.64.0.2 dev to-b",
                // d's extra addresses, through the first hop toward d.
                "route add 100.65.0.0/20 via 100.64.0.2 dev to-b",
            ]
        );
        assert_eq!(
            topo.host_commands(3, &p),
            [
                "addr add 100.64.0.10/30 dev to-c",
                "link set dev to-c mtu 1500 up",
                "route add 100.64.0.0/30 via 100.64.0.9 dev to-c",
                "route add 100.64.0.4/30 via 100.64.0.9 dev to-c",
                "route add default via 100.64.0.9 dev to-c",
                "addr add 100.65.0.1/32 dev lo",
                "addr add 100.65.0.2/32 dev lo",
            ]
        );
    }

    #[test]
    fn prefixes() {
        assert_eq!(
            parse_prefix("100.64.0.1/30"),
            Some((
                u32::from(Ipv4Addr::new(100, 64, 0, 0)),
                u32::from(Ipv4Addr::new(100, 64, 0, 3))
            ))
        );
        assert_eq!(parse_prefix("10.0.0.1"), Some((0x0a00_0001, 0x0a00_0001)));
        assert_eq!(parse_prefix("default"), None);
        assert_eq!(parse_prefix("1.2.3.4/0"), None);
        assert_eq!(
            allocate_subnets(2, false).unwrap()[1],
            Ipv4Addr::new(100, 64, 0, 4)
        );
    }

    #[test]
    fn descriptions() {
        let mut cfg = LinkConfig::default();
        cfg.down.rate = RateSpec::Constant { bps: 20_000_000 };
        cfg.down.delay = DelaySpec::Fixed(std::time::Duration::from_millis(20));
        let s = describe(&cfg.down, &cfg);
        assert_eq!(
            s,
            "rate 20.000 Mbit/s, delay 20ms, queue droptail (unbounded), loss 0, radio off"
        );
    }
}
