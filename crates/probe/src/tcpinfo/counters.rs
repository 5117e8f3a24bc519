//! A namespace's TCP counters from `/proc/net/netstat` (`TcpExt:`) and
//! `/proc/net/snmp` (`Tcp:`), and the difference of two snapshots (pure).
//!
//! Both files hold pairs of lines with the same prefix, names then values:
//!
//! ```text
//! TcpExt: SyncookiesSent SyncookiesRecv … TCPTimeouts …
//! TcpExt: 0 0 … 12 …
//! ```
//!
//! Per-socket `tcp_info` cannot see what happened to sockets that are gone
//! or the kernel's loss-repair decisions (spurious RTO detection, undo);
//! these counters can, for the whole namespace, which in the lab holds
//! one server's or one client's sockets.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Why a counters file could not be read as one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CountersError {
    /// A names line without its values line.
    #[error("{file}: `{section}` names line without a values line")]
    Unpaired {
        /// `netstat` or `snmp`.
        file: &'static str,
        /// The section (`TcpExt`, `Tcp`).
        section: String,
    },
    /// The two lines of a section have different numbers of fields.
    #[error("{file}: `{section}` has {names} names but {values} values")]
    Mismatch {
        /// `netstat` or `snmp`.
        file: &'static str,
        /// The section.
        section: String,
        /// Names.
        names: usize,
        /// Values.
        values: usize,
    },
    /// A value that is no integer.
    #[error("{file}: `{section}` `{name}` is `{value}`, not an integer")]
    Value {
        /// `netstat` or `snmp`.
        file: &'static str,
        /// The section.
        section: String,
        /// The counter.
        name: String,
        /// What stood there.
        value: String,
    },
    /// The file has no section of that name.
    #[error("{file} has no `{section}:` lines")]
    Missing {
        /// `netstat` or `snmp`.
        file: &'static str,
        /// The section looked for.
        section: &'static str,
    },
}

/// Parses every `Name: a b c` / `Name: 1 2 3` line pair of a
/// `/proc/net/{netstat,snmp}` text into section → counter → value.
///
/// Negative values are left out: the only one is `Tcp: MaxConn`, which
/// RFC 2012 sets to −1 for "dynamic", a setting and no counter.
pub fn parse_sections(
    file: &'static str,
    text: &str,
) -> Result<BTreeMap<String, BTreeMap<String, u64>>, CountersError> {
    let mut out = BTreeMap::new();
    let mut lines = text.lines().filter(|l| !l.trim().is_empty());
    while let Some(names) = lines.next() {
        let (section, names) = names.split_once(':').unwrap_or((names, ""));
        let section = section.trim().to_string();
        let values = match lines.next() {
            Some(v) => match v.split_once(':') {
                Some((s, v)) if s.trim() == section => v,
                _ => return Err(CountersError::Unpaired { file, section }),
            },
            None => return Err(CountersError::Unpaired { file, section }),
        };
        let names: Vec<&str> = names.split_whitespace().collect();
        let values: Vec<&str> = values.split_whitespace().collect();
        if names.len() != values.len() {
            return Err(CountersError::Mismatch {
                file,
                section,
                names: names.len(),
                values: values.len(),
            });
        }
        let mut map = BTreeMap::new();
        for (name, value) in names.into_iter().zip(values) {
            match value.parse::<u64>() {
                Ok(v) => {
                    map.insert(name.to_string(), v);
                }
                Err(_) if value.parse::<i64>().is_ok() => {}
                Err(_) => {
                    return Err(CountersError::Value {
                        file,
                        section,
                        name: name.to_string(),
                        value: value.to_string(),
                    })
                }
            }
        }
        out.insert(section, map);
    }
    Ok(out)
}

/// A namespace's TCP counters at one moment, or the difference of two
/// ([`Counters::since`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counters {
    /// `Tcp:` of `/proc/net/snmp` (RFC 2012's MIB: `RetransSegs`,
    /// `OutSegs`, `ActiveOpens`…).
    pub tcp: BTreeMap<String, u64>,
    /// `TcpExt:` of `/proc/net/netstat` (Linux's own: `TCPTimeouts`,
    /// `TCPLossProbes`, `TCPSpuriousRTOs`…).
    pub tcp_ext: BTreeMap<String, u64>,
}

impl Counters {
    /// Parses the text of `/proc/net/netstat` and `/proc/net/snmp`; both
    /// must have their TCP section.
    pub fn parse(netstat: &str, snmp: &str) -> Result<Counters, CountersError> {
        let mut ext = parse_sections("netstat", netstat)?;
        let mut mib = parse_sections("snmp", snmp)?;
        Ok(Counters {
            tcp_ext: ext.remove("TcpExt").ok_or(CountersError::Missing {
                file: "netstat",
                section: "TcpExt",
            })?,
            tcp: mib.remove("Tcp").ok_or(CountersError::Missing {
                file: "snmp",
                section: "Tcp",
            })?,
        })
    }

    /// `self − before`, counter by counter: what happened between the two
    /// snapshots. A counter missing from `before` counts from 0; one that
    /// went down (the namespace was recreated) gives 0 rather than wrap.
    /// Gauges (`Tcp: CurrEstab`, `RtoMin`…) are differenced too and mean
    /// little.
    pub fn since(&self, before: &Counters) -> Counters {
        let diff = |now: &BTreeMap<String, u64>, then: &BTreeMap<String, u64>| {
            now.iter()
                .map(|(k, v)| {
                    let d = v.saturating_sub(then.get(k).copied().unwrap_or(0));
                    (k.clone(), d)
                })
                .collect()
        };
        Counters {
            tcp: diff(&self.tcp, &before.tcp),
            tcp_ext: diff(&self.tcp_ext, &before.tcp_ext),
        }
    }

    /// The counters seed 003's study reads, by name.
    pub fn repair(&self) -> RepairCounters {
        let ext = |n: &str| self.tcp_ext.get(n).copied().unwrap_or(0);
        let tcp = |n: &str| self.tcp.get(n).copied().unwrap_or(0);
        RepairCounters {
            timeouts: ext("TCPTimeouts"),
            spurious_rtos: ext("TCPSpuriousRTOs"),
            loss_probes: ext("TCPLossProbes"),
            loss_probe_recovery: ext("TCPLossProbeRecovery"),
            dsack_recv: ext("TCPDSACKRecv"),
            dsack_undo: ext("TCPDSACKUndo"),
            loss_undo: ext("TCPLossUndo"),
            full_undo: ext("TCPFullUndo"),
            spurious_rtx_host_queues: ext("TCPSpuriousRtxHostQueues"),
            retrans_segs: tcp("RetransSegs"),
            out_segs: tcp("OutSegs"),
        }
    }
}

/// How a namespace's TCP lost and repaired segments (seed 003: spurious
/// RTOs on cellular links, tail loss probes, undo of needless window
/// cuts). Each is 0 where the kernel lacks the counter; all exist since
/// Linux 4.x.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct RepairCounters {
    /// `TcpExt: TCPTimeouts`: retransmission timeouts (not counting
    /// repeated ones while in Loss).
    pub timeouts: u64,
    /// `TcpExt: TCPSpuriousRTOs`: RTOs that F-RTO found spurious.
    pub spurious_rtos: u64,
    /// `TcpExt: TCPLossProbes`: tail loss probes sent.
    pub loss_probes: u64,
    /// `TcpExt: TCPLossProbeRecovery`: losses a probe repaired.
    pub loss_probe_recovery: u64,
    /// `TcpExt: TCPDSACKRecv`: D-SACKs received (a needless retransmission).
    pub dsack_recv: u64,
    /// `TcpExt: TCPDSACKUndo`: window cuts undone on D-SACKs.
    pub dsack_undo: u64,
    /// `TcpExt: TCPLossUndo`: Loss-state (RTO) cuts undone.
    pub loss_undo: u64,
    /// `TcpExt: TCPFullUndo`: Recovery cuts undone in full.
    pub full_undo: u64,
    /// `TcpExt: TCPSpuriousRtxHostQueues`: retransmissions skipped because
    /// the original still sat in a local queue.
    pub spurious_rtx_host_queues: u64,
    /// `Tcp: RetransSegs`: segments retransmitted.
    pub retrans_segs: u64,
    /// `Tcp: OutSegs`: segments sent, retransmissions excluded.
    pub out_segs: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    const NETSTAT: &str = "\
TcpExt: SyncookiesSent TCPTimeouts TCPSpuriousRTOs TCPLossProbes TCPLossProbeRecovery TCPDSACKRecv TCPDSACKUndo TCPLossUndo TCPFullUndo TCPSpuriousRtxHostQueues
TcpExt: 0 12 3 40 5 6 2 1 4 9
IpExt: InNoRoutes InTruncatedPkts
IpExt: 0 0
MPTcpExt: MPCapableSYNRX
MPTcpExt: 0
";
    const SNMP: &str = "\
Ip: Forwarding DefaultTTL
Ip: 1 64
Tcp: RtoAlgorithm RtoMin RtoMax MaxConn ActiveOpens OutSegs RetransSegs CurrEstab
Tcp: 1 200 120000 -1 7 15000 321 2
Udp: InDatagrams
Udp: 5
";

    #[test]
    fn the_tcp_sections_become_maps() {
        let c = Counters::parse(NETSTAT, SNMP).expect("parse");
        assert_eq!(c.tcp_ext.len(), 10);
        assert_eq!(c.tcp_ext.get("TCPTimeouts"), Some(&12));
        assert_eq!(c.tcp.get("OutSegs"), Some(&15000));
        assert_eq!(c.tcp.get("RtoMax"), Some(&120000));
        // MaxConn is −1, a setting: left out.
        assert_eq!(c.tcp.get("MaxConn"), None);
        assert!(!c.tcp.contains_key("InDatagrams"));
        let r = c.repair();
        assert_eq!(
            r,
            RepairCounters {
                timeouts: 12,
                spurious_rtos: 3,
                loss_probes: 40,
                loss_probe_recovery: 5,
                dsack_recv: 6,
                dsack_undo: 2,
                loss_undo: 1,
                full_undo: 4,
                spurious_rtx_host_queues: 9,
                retrans_segs: 321,
                out_segs: 15000,
            }
        );
    }

    #[test]
    fn since_is_per_counter_and_saturates() {
        let before = Counters::parse(NETSTAT, SNMP).expect("parse");
        let later = Counters::parse(
            &NETSTAT.replace("0 12 3 40", "0 15 3 41"),
            &SNMP.replace("15000 321 2", "16000 300 0"),
        )
        .expect("parse");
        let d = later.since(&before);
        assert_eq!(d.tcp_ext.get("TCPTimeouts"), Some(&3));
        assert_eq!(d.tcp_ext.get("TCPLossProbes"), Some(&1));
        assert_eq!(d.tcp_ext.get("TCPSpuriousRTOs"), Some(&0));
        assert_eq!(d.tcp.get("OutSegs"), Some(&1000));
        // Went down: 0, not a wrapped huge number.
        assert_eq!(d.tcp.get("RetransSegs"), Some(&0));
        // Missing before: counts from 0.
        let mut fewer = before.clone();
        fewer.tcp_ext.remove("TCPFullUndo");
        assert_eq!(later.since(&fewer).tcp_ext.get("TCPFullUndo"), Some(&4));
        assert_eq!(later.since(&later).repair(), RepairCounters::default());
    }

    #[test]
    fn malformed_files_are_errors() {
        assert_eq!(
            Counters::parse("TcpExt: A B\n", SNMP),
            Err(CountersError::Unpaired {
                file: "netstat",
                section: "TcpExt".into()
            })
        );
        assert_eq!(
            Counters::parse("TcpExt: A B\nIpExt: 1 2\n", SNMP),
            Err(CountersError::Unpaired {
                file: "netstat",
                section: "TcpExt".into()
            })
        );
        assert_eq!(
            Counters::parse("TcpExt: A B\nTcpExt: 1\n", SNMP),
            Err(CountersError::Mismatch {
                file: "netstat",
                section: "TcpExt".into(),
                names: 2,
                values: 1
            })
        );
        assert!(matches!(
            Counters::parse("TcpExt: A\nTcpExt: x1\n", SNMP),
            Err(CountersError::Value { name, value, .. }) if name == "A" && value == "x1"
        ));
        assert_eq!(
            Counters::parse("IpExt: A\nIpExt: 1\n", SNMP),
            Err(CountersError::Missing {
                file: "netstat",
                section: "TcpExt"
            })
        );
        assert_eq!(
            Counters::parse(NETSTAT, ""),
            Err(CountersError::Missing {
                file: "snmp",
                section: "Tcp"
            })
        );
        // No colon at all: a names line whose values line cannot match.
        assert!(Counters::parse("garbage\n", SNMP).is_err());
    }
}
