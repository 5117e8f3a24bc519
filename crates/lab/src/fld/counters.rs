//! How the origin repaired its losses during a load: the origin
//! namespace's TCP counters, read before and after it. Shared by
//! `mewa lab fld pages` and `mewa lab iw`.

use mewa_link::runtime::Topology;
use serde::{Deserialize, Serialize};

/// The origin namespace's TCP counters that say how a load's losses were
/// repaired (`/proc/net/snmp` and `/proc/net/netstat` read from inside the
/// namespace; only the origin's sockets live there, the background flows
/// have hosts of their own).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TcpCounters {
    /// Segments retransmitted (`Tcp: RetransSegs`).
    pub retrans_segs: u64,
    /// Retransmission timeouts (`TcpExt: TCPTimeouts`).
    pub timeouts: u64,
    /// Tail loss probes sent (`TcpExt: TCPLossProbes`).
    pub loss_probes: u64,
}

impl From<mewa_probe::tcpinfo::RepairCounters> for TcpCounters {
    fn from(r: mewa_probe::tcpinfo::RepairCounters) -> TcpCounters {
        TcpCounters {
            retrans_segs: r.retrans_segs,
            timeouts: r.timeouts,
            loss_probes: r.loss_probes,
        }
    }
}

impl TcpCounters {
    /// Parses the two files' text ([`mewa_probe::tcpinfo::Counters`]); zeros
    /// where a file lacks its TCP section.
    pub fn parse(snmp: &str, netstat: &str) -> TcpCounters {
        TcpCounters::from(
            mewa_probe::tcpinfo::Counters::parse(netstat, snmp)
                .map(|c| c.repair())
                .unwrap_or_default(),
        )
    }

    /// Reads them in `host`'s namespace (zeros if unreadable). Through
    /// `/proc/thread-self`: `/proc/net` follows the process's main thread,
    /// which stays in the machine's namespace.
    pub(crate) fn read(topo: &Topology, host: &str) -> TcpCounters {
        TcpCounters::from(mewa_probe::tcpinfo::counters_in(topo, host).repair())
    }

    /// `self − before`, per counter.
    pub(crate) fn since(self, before: TcpCounters) -> TcpCounters {
        TcpCounters {
            retrans_segs: self.retrans_segs.saturating_sub(before.retrans_segs),
            timeouts: self.timeouts.saturating_sub(before.timeouts),
            loss_probes: self.loss_probes.saturating_sub(before.loss_probes),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tcp_counters_are_read_by_name() {
        let snmp = "Ip: Forwarding\nIp: 1\nTcp: RtoAlgorithm RetransSegs InErrs\nTcp: 1 42 0\n";
        let netstat = "TcpExt: TW TCPLossProbes TCPTimeouts\nTcpExt: 9 3 5\nIpExt: A\nIpExt: 1\n";
        let c = TcpCounters::parse(snmp, netstat);
        assert_eq!(
            c,
            TcpCounters {
                retrans_segs: 42,
                timeouts: 5,
                loss_probes: 3
            }
        );
        assert_eq!(TcpCounters::parse("", "garbage"), TcpCounters::default());
        let later = TcpCounters {
            retrans_segs: 50,
            timeouts: 5,
            loss_probes: 4,
        };
        assert_eq!(
            later.since(c),
            TcpCounters {
                retrans_segs: 8,
                timeouts: 0,
                loss_probes: 1
            }
        );
    }

    proptest::proptest! {
        #[test]
        fn counters_parse_any_text_without_panicking(a in "\\PC{0,200}", b in "\\PC{0,200}") {
            let _ = TcpCounters::parse(&a, &b);
        }
    }
}
