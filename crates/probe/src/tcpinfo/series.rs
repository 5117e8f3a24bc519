//! Per-socket time series from repeated dumps (pure: the caller gives the
//! time of each dump, so tests run in virtual time).
//!
//! Memory stays bounded however long a sampler runs: a socket's sample is
//! kept only when a recorded field changed since its previous one, a
//! socket keeps at most [`Limits::per_socket`] samples and all together at
//! most [`Limits::total`], and at most [`Limits::sockets`] sockets are
//! followed. What the limits drop is counted, never silently lost, and a
//! socket's latest state is always kept in [`SocketSeries::last`].

use std::collections::HashMap;
use std::fmt;
use std::net::SocketAddr;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::wire::{SocketInfo, TCP_LISTEN};

/// Which sockets to follow.
#[derive(Clone, Default)]
pub enum Filter {
    /// Every TCP socket of the namespace.
    #[default]
    All,
    /// Sockets with this local or remote port: a server's port catches the
    /// server's accepted sockets and, in the client's namespace, the
    /// client's sockets to it.
    Port(u16),
    /// Any test on the dumped socket.
    Custom(Arc<dyn Fn(&SocketInfo) -> bool + Send + Sync>),
}

impl Filter {
    /// A [`Filter::Custom`] from a closure.
    pub fn custom(f: impl Fn(&SocketInfo) -> bool + Send + Sync + 'static) -> Filter {
        Filter::Custom(Arc::new(f))
    }

    /// Whether `s` passes.
    pub fn matches(&self, s: &SocketInfo) -> bool {
        match self {
            Filter::All => true,
            Filter::Port(p) => s.src.port() == *p || s.dst.port() == *p,
            Filter::Custom(f) => f(s),
        }
    }
}

impl fmt::Debug for Filter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Filter::All => f.write_str("All"),
            Filter::Port(p) => write!(f, "Port({p})"),
            Filter::Custom(_) => f.write_str("Custom(..)"),
        }
    }
}

/// Bounds on what a [`Recorder`] keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Limits {
    /// Sockets followed; later ones are counted in
    /// [`Samples::dropped_sockets`].
    pub sockets: usize,
    /// Samples kept per socket; later changes are counted in
    /// [`SocketSeries::dropped`].
    pub per_socket: usize,
    /// Samples kept over all sockets.
    pub total: usize,
}

impl Default for Limits {
    /// 1024 sockets; 20 000 samples per socket (400 s of a sample every
    /// 20 ms, each different); 500 000 in all (about 40 MB).
    fn default() -> Limits {
        Limits {
            sockets: 1024,
            per_socket: 20_000,
            total: 500_000,
        }
    }
}

/// One socket's state at one dump: what the cellular TCP study plots.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sample {
    /// µs since the sampler started.
    pub t_us: u64,
    /// TCP state (1 ESTABLISHED, 4 FIN_WAIT1 …).
    pub state: u8,
    /// Congestion-avoidance state: 0 Open, 1 Disorder, 2 CWR, 3 Recovery,
    /// 4 Loss.
    pub ca_state: u8,
    /// Congestion window, segments.
    pub cwnd: u32,
    /// Slow-start threshold, segments (`0x7fffffff` before any loss).
    pub ssthresh: u32,
    /// Smoothed RTT, µs.
    pub rtt_us: u32,
    /// RTT variation, µs.
    pub rttvar_us: u32,
    /// Retransmission timeout, µs.
    pub rto_us: u32,
    /// Segments retransmitted so far.
    pub total_retrans: u32,
    /// RTO expirations so far (kernel 6.7+).
    pub total_rto: Option<u16>,
    /// Bytes acknowledged by the peer (4.1+; a client's count its SYN).
    pub bytes_acked: Option<u64>,
    /// Bytes sent, retransmissions included (4.19+).
    pub bytes_sent: Option<u64>,
    /// Bytes retransmitted (4.19+).
    pub bytes_retrans: Option<u64>,
    /// The kernel's latest delivery-rate estimate, bytes/s (4.9+).
    pub delivery_rate: Option<u64>,
}

impl Sample {
    /// The sample of `s` at `t_us`; `None` without `tcp_info`.
    pub fn of(s: &SocketInfo, t_us: u64) -> Option<Sample> {
        let i = s.info.as_ref()?;
        Some(Sample {
            t_us,
            state: i.state,
            ca_state: i.ca_state,
            cwnd: i.snd_cwnd,
            ssthresh: i.snd_ssthresh,
            rtt_us: i.rtt,
            rttvar_us: i.rttvar,
            rto_us: i.rto,
            total_retrans: i.total_retrans,
            total_rto: i.total_rto,
            bytes_acked: i.bytes_acked,
            bytes_sent: i.bytes_sent,
            bytes_retrans: i.bytes_retrans,
            delivery_rate: i.delivery_rate,
        })
    }

    /// Equal but for the time.
    fn same_state(&self, other: &Sample) -> bool {
        Sample { t_us: 0, ..*self } == Sample { t_us: 0, ..*other }
    }
}

/// What identifies a socket across dumps: its addresses and the kernel's
/// socket cookie. Not the inode: it turns 0 when the application closes
/// the socket while the kernel still sends (and retransmits) its last
/// data, which would cut one connection's series in two.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct SocketKey {
    /// Local address.
    pub src: SocketAddr,
    /// Remote address.
    pub dst: SocketAddr,
    /// `idiag_cookie`.
    pub cookie: u64,
}

/// One socket's samples.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SocketSeries {
    /// Which socket.
    pub key: SocketKey,
    /// Its inode while an application held it (0 if never seen so).
    pub inode: u32,
    /// Congestion control, as last dumped.
    pub cong: Option<String>,
    /// When it was first dumped, µs since the start.
    pub first_us: u64,
    /// When it was last dumped.
    pub last_us: u64,
    /// Its samples, each different from the one before, in time order.
    pub samples: Vec<Sample>,
    /// Changes not kept because a limit was reached.
    pub dropped: u64,
    /// Its state at the last dump that saw it, kept even past the limits
    /// (the totals at the end of a connection).
    pub last: Sample,
}

/// What a sampler recorded.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Samples {
    /// Dumps taken.
    pub dumps: u64,
    /// Dumps that failed.
    pub failed_dumps: u64,
    /// The last failure's message.
    pub last_error: Option<String>,
    /// Every followed socket, in order of first appearance.
    pub sockets: Vec<SocketSeries>,
    /// Sockets not followed because [`Limits::sockets`] was reached.
    pub dropped_sockets: u64,
}

impl Samples {
    /// The series of the socket from `src` to `dst` (the first, if the
    /// pair was reused).
    pub fn find(&self, src: SocketAddr, dst: SocketAddr) -> Option<&SocketSeries> {
        self.sockets
            .iter()
            .find(|s| s.key.src == src && s.key.dst == dst)
    }
}

/// Builds [`Samples`] from dumps handed to it one by one.
#[derive(Debug)]
pub struct Recorder {
    filter: Filter,
    limits: Limits,
    out: Samples,
    index: HashMap<SocketKey, usize>,
    kept: usize,
}

impl Recorder {
    /// An empty recorder.
    pub fn new(filter: Filter, limits: Limits) -> Recorder {
        Recorder {
            filter,
            limits,
            out: Samples::default(),
            index: HashMap::new(),
            kept: 0,
        }
    }

    /// Takes one dump made at `t_us`. Listeners and sockets without
    /// `tcp_info` (TIME_WAIT, request sockets) are passed over: they have
    /// no window to follow.
    pub fn observe(&mut self, t_us: u64, sockets: &[SocketInfo]) {
        self.out.dumps += 1;
        for s in sockets {
            let Some(sample) = Sample::of(s, t_us) else {
                continue;
            };
            if sample.state == TCP_LISTEN || !self.filter.matches(s) {
                continue;
            }
            let key = SocketKey {
                src: s.src,
                dst: s.dst,
                cookie: s.cookie,
            };
            let k = match self.index.get(&key) {
                Some(&k) => k,
                None => {
                    if self.out.sockets.len() >= self.limits.sockets {
                        self.out.dropped_sockets += 1;
                        // Counted once: remember it, pointing nowhere.
                        self.index.insert(key, usize::MAX);
                        continue;
                    }
                    self.out.sockets.push(SocketSeries {
                        key,
                        inode: 0,
                        cong: None,
                        first_us: t_us,
                        last_us: t_us,
                        samples: Vec::new(),
                        dropped: 0,
                        last: sample,
                    });
                    let k = self.out.sockets.len() - 1;
                    self.index.insert(key, k);
                    k
                }
            };
            let Some(series) = self.out.sockets.get_mut(k) else {
                continue;
            };
            if s.inode != 0 {
                series.inode = s.inode;
            }
            if s.cong.is_some() {
                series.cong.clone_from(&s.cong);
            }
            series.last_us = t_us;
            series.last = sample;
            let changed = series
                .samples
                .last()
                .is_none_or(|prev| !prev.same_state(&sample));
            if !changed {
                continue;
            }
            if series.samples.len() >= self.limits.per_socket || self.kept >= self.limits.total {
                series.dropped += 1;
            } else {
                series.samples.push(sample);
                self.kept += 1;
            }
        }
    }

    /// Notes a dump that failed.
    pub fn failed(&mut self, error: String) {
        self.out.dumps += 1;
        self.out.failed_dumps += 1;
        self.out.last_error = Some(error);
    }

    /// What was recorded so far.
    pub fn samples(&self) -> &Samples {
        &self.out
    }

    /// Everything recorded.
    pub fn finish(self) -> Samples {
        self.out
    }
}

#[cfg(test)]
mod tests {
    use super::super::wire::TcpInfo;
    use super::*;

    fn sock(port: u16, cookie: u64, inode: u32, cwnd: u32) -> SocketInfo {
        SocketInfo {
            state: 1,
            timer: 0,
            retrans: 0,
            src: SocketAddr::from(([10, 0, 0, 1], 443)),
            dst: SocketAddr::from(([10, 0, 0, 2], port)),
            interface: 0,
            cookie,
            expires: 0,
            rqueue: 0,
            wqueue: 0,
            uid: 0,
            inode,
            info: Some(TcpInfo {
                state: 1,
                snd_cwnd: cwnd,
                bytes_acked: Some(u64::from(cwnd) * 1000),
                ..TcpInfo::default()
            }),
            cong: Some("cubic".into()),
        }
    }

    #[test]
    fn only_changes_are_kept_and_the_last_state_always() {
        let mut r = Recorder::new(Filter::All, Limits::default());
        for (t, cwnd) in [(0, 10), (20, 10), (40, 20), (60, 20), (80, 10)] {
            r.observe(t, &[sock(5000, 1, 9, cwnd)]);
        }
        let s = r.finish();
        assert_eq!(s.dumps, 5);
        assert_eq!(s.sockets.len(), 1);
        let series = &s.sockets[0];
        let got: Vec<(u64, u32)> = series.samples.iter().map(|x| (x.t_us, x.cwnd)).collect();
        assert_eq!(got, [(0, 10), (40, 20), (80, 10)]);
        assert_eq!((series.first_us, series.last_us), (0, 80));
        assert_eq!(series.last.cwnd, 10);
        assert_eq!(series.cong.as_deref(), Some("cubic"));
        assert_eq!(series.inode, 9);
    }

    #[test]
    fn a_closed_but_sending_socket_keeps_its_series() {
        let mut r = Recorder::new(Filter::All, Limits::default());
        r.observe(0, &[sock(5000, 1, 9, 10)]);
        // The application closed it: inode 0, same cookie, still sending.
        r.observe(20, &[sock(5000, 1, 0, 12)]);
        let s = r.finish();
        assert_eq!(s.sockets.len(), 1);
        assert_eq!(s.sockets[0].samples.len(), 2);
        assert_eq!(s.sockets[0].inode, 9);
    }

    #[test]
    fn listeners_unmatched_and_infoless_sockets_are_passed_over() {
        let mut r = Recorder::new(Filter::Port(5000), Limits::default());
        let mut listener = sock(0, 2, 3, 10);
        if let Some(i) = listener.info.as_mut() {
            i.state = TCP_LISTEN;
        }
        let mut time_wait = sock(5000, 3, 0, 10);
        time_wait.info = None;
        r.observe(
            0,
            &[
                listener,
                time_wait,
                sock(6000, 4, 5, 10),
                sock(5000, 5, 6, 10),
            ],
        );
        let s = r.finish();
        assert_eq!(s.sockets.len(), 1);
        assert_eq!(s.sockets[0].key.cookie, 5);
        let custom = Filter::custom(|s| s.cookie == 4);
        assert!(custom.matches(&sock(1, 4, 0, 1)));
        assert!(!custom.matches(&sock(1, 5, 0, 1)));
        assert_eq!(format!("{custom:?}"), "Custom(..)");
    }

    #[test]
    fn limits_bound_memory_and_count_what_they_drop() {
        let limits = Limits {
            sockets: 2,
            per_socket: 3,
            total: 5,
        };
        let mut r = Recorder::new(Filter::All, limits);
        for t in 0..10u32 {
            let dump: Vec<SocketInfo> =
                (0..4).map(|c| sock(5000 + c as u16, c, 1, t + 1)).collect();
            r.observe(u64::from(t), &dump);
        }
        let s = r.finish();
        assert_eq!(s.sockets.len(), 2);
        // Sockets 2 and 3 are counted once each, not once per dump.
        assert_eq!(s.dropped_sockets, 2);
        let kept: usize = s.sockets.iter().map(|x| x.samples.len()).sum();
        assert_eq!(kept, 5);
        assert_eq!(s.sockets[0].samples.len(), 3);
        assert_eq!(s.sockets[0].dropped, 7);
        assert_eq!(s.sockets[1].samples.len(), 2);
        assert_eq!(s.sockets[1].dropped, 8);
        // The end state survives the limits.
        assert_eq!(s.sockets[1].last.cwnd, 10);
    }

    #[test]
    fn failed_dumps_are_counted() {
        let mut r = Recorder::new(Filter::All, Limits::default());
        r.failed("EBUSY".into());
        r.observe(1, &[]);
        let s = r.samples();
        assert_eq!((s.dumps, s.failed_dumps), (2, 1));
        assert_eq!(s.last_error.as_deref(), Some("EBUSY"));
    }
}
