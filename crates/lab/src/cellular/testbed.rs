//! One testbed of the study, a radio over a network under one setting:
//! the bed with the link's pcaps on, the setting's knobs applied to both
//! ends (sysctls, the server's control, the RTO floor on the routes over
//! the radio, the handshake timeout on the lab's cgroup), and both ends
//! brought back to a fresh state before each session.

use std::net::IpAddr;
use std::path::Path;
use std::time::Duration;

use mewa_corpus::Corpus;
use mewa_link::core::LinkConfig;
use mewa_link::runtime::{LinkOptions, Topology};
use mewa_probe::tcpinfo;

use super::radio::RadioProfile;
use super::rto::{self, LabCgroup};
use super::setting::Setting;
use crate::bed::{set_sysctl, Bed, OriginSettings, CLIENT, SERVER};
use crate::experiment::ExperimentError;

/// A running testbed.
pub struct Testbed {
    /// The bed.
    pub bed: Bed,
    /// The handshake half of the fix, while it is attached.
    syn_rto: Option<mewa_cc_bpf::rto::SynRto>,
}

impl Testbed {
    /// Starts a bed on `link` serving `corpus`, its pcaps in `pcap_dir`,
    /// with `setting` applied for `profile`'s radio; the handshake timeout
    /// goes on `cgroup` when the setting has the fix.
    pub fn start(
        corpus: &Corpus,
        link: LinkConfig,
        pcap_dir: &Path,
        origin: &OriginSettings,
        setting: &Setting,
        profile: &RadioProfile,
        cgroup: Option<&LabCgroup>,
    ) -> Result<Testbed, ExperimentError> {
        let settings = OriginSettings {
            congestion: setting.cc().to_string(),
            ..origin.clone()
        };
        let bed = Bed::start(
            corpus,
            link,
            LinkOptions {
                pcap_dir: Some(pcap_dir.to_path_buf()),
                file_prefix: Some(String::new()),
                ..LinkOptions::default()
            },
            &settings,
        )?;
        let topo = bed.running()?;
        apply(&bed, topo, setting, profile)?;
        let syn_rto = match (cgroup, setting.rto_floor()) {
            (Some(cg), true) => {
                let mut peers = bed.server_addrs();
                peers.push(IpAddr::V4(client_addr(topo)?));
                Some(rto::attach_syn_rto(
                    cg.path(),
                    &peers,
                    rto::syn_rto_for(profile.promotion()),
                )?)
            }
            _ => None,
        };
        Ok(Testbed { bed, syn_rto })
    }

    /// The running namespaces.
    pub fn topo(&self) -> Result<&Topology, ExperimentError> {
        Ok(self.bed.running()?)
    }

    /// Before a session: the previous session's connections finish
    /// closing (their last retransmissions and timeouts would count
    /// against this session's first load), both ends' metrics caches are
    /// emptied, and the radio is put to sleep.
    pub fn fresh_session(&self) -> Result<(), ExperimentError> {
        let topo = self.topo()?;
        drain(topo);
        flush_metrics(topo);
        let _ = topo.radio_idle(CLIENT, SERVER);
        // The emulator takes the order at its next wake-up.
        std::thread::sleep(Duration::from_millis(300));
        Ok(())
    }

    /// Tears the testbed down (the pcaps are complete after it); `tag`
    /// names it in the log.
    pub fn shutdown(self, tag: &str) -> Result<(), ExperimentError> {
        if let Some(s) = &self.syn_rto {
            tracing::info!(
                "{tag}: mewa_rto lengthened {} handshake timeouts",
                s.applied()
            );
        }
        self.bed.shutdown()?;
        Ok(())
    }
}

/// The client's address in the testbed.
fn client_addr(topo: &Topology) -> Result<std::net::Ipv4Addr, ExperimentError> {
    topo.addr(CLIENT)
        .map_err(|e| ExperimentError::Bed(e.into()))
}

/// Applies `setting` to both ends of a running bed.
fn apply(
    bed: &Bed,
    topo: &Topology,
    setting: &Setting,
    profile: &RadioProfile,
) -> Result<(), ExperimentError> {
    let flag = |on: bool| if on { "1" } else { "0" };
    let sysctls = [
        (
            "net.ipv4.tcp_slow_start_after_idle",
            flag(setting.slow_start_after_idle()),
        ),
        (
            "net.ipv4.tcp_no_metrics_save",
            flag(!setting.metrics_save()),
        ),
        // 2 is Linux's default: F-RTO with SACK enhancements.
        ("net.ipv4.tcp_frto", if setting.frto() { "2" } else { "0" }),
        ("net.ipv4.tcp_timestamps", flag(setting.timestamps())),
    ];
    for host in [CLIENT, SERVER] {
        for (key, value) in sysctls {
            set_sysctl(topo, host, key, value)?;
        }
    }
    if setting.rto_floor() {
        let floor = rto::floor_for(profile.promotion());
        rto::apply_floor(topo, SERVER, &[IpAddr::V4(client_addr(topo)?)], floor)?;
        rto::apply_floor(topo, CLIENT, &bed.server_addrs(), floor)?;
    }
    Ok(())
}

/// Waits (up to 15 s) until neither end has a TCP connection still open
/// or closing; TIME_WAIT and listeners do not count.
fn drain(topo: &Topology) {
    // ESTABLISHED, SYN_SENT, SYN_RECV, FIN_WAIT1, FIN_WAIT2, CLOSE_WAIT,
    // LAST_ACK, CLOSING (include/net/tcp_states.h).
    const OPEN: [u8; 8] = [1, 2, 3, 4, 5, 8, 9, 11];
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    while std::time::Instant::now() < deadline {
        let open: usize = [CLIENT, SERVER]
            .iter()
            .map(|h| {
                topo.in_namespace(h, tcpinfo::dump)
                    .ok()
                    .and_then(Result::ok)
                    .map_or(0, |v| v.iter().filter(|s| OPEN.contains(&s.state)).count())
            })
            .sum();
        if open == 0 {
            return;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    tracing::warn!("connections of the previous session still open after 15 s");
}

/// Empties both ends' TCP metrics caches, so a session does not start from
/// what the previous one left (the knob under study is whether a session
/// *within* itself reuses them).
fn flush_metrics(topo: &Topology) {
    for host in [CLIENT, SERVER] {
        if let Ok(Some(ns)) = topo.netns_name(host) {
            let _ = std::process::Command::new("ip")
                .args(["-n", ns, "tcp_metrics", "flush", "all"])
                .output();
        }
    }
}
