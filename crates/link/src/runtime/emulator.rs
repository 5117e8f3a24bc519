//! The forwarding loop: one thread per link drives the sans-IO core with the
//! packets of the link's two TUN devices.
//!
//! Each turn of the loop
//!
//! 1. reads both devices until they are empty (non-blocking, at most
//!    [`BATCH`] reads each per turn so neither side starves the other),
//!    drops what is not IPv4 (a new TUN's first packets are IPv6 ND/MLD; IPv6
//!    is also switched off on the devices) and hands the rest to
//!    [`Link::handle_packet`] stamped with the time it was read;
//! 2. writes every packet [`Link::poll_transmit`] lets out to the other
//!    device (and to the direction's pcap);
//!
//! With segmentation offload (`IFF_VNET_HDR`, the default; see
//! [`super::LinkOptions::disable_offload`]) the kernel may hand over one TCP
//! super-packet of up to 64 KB per read; it is cut into its MTU-sized
//! segments (checksums computed) before the core sees it, so the link still
//! serves, delays, drops and logs 1500-byte packets one by one. Packets the
//! link lets out at the same instant are written as one batch, in which
//! consecutive segments of a TCP flow are merged again (GRO), as a real
//! NIC's receive path does. Under a rate limit packets leave one at a time
//! and are written one at a time. Both halve the kernel work per packet:
//! the emulator thread pays for the receiving host's whole IP/TCP input
//! path, since writing to a TUN runs it in the writer's system call.
//! 3. drains the event log into the direction's log file;
//! 4. sleeps in `ppoll` on both devices and a stop eventfd until the core's
//!    [`Link::poll_timeout`], with nanosecond resolution: the thread's timer
//!    slack is set to 1 ns (the default 50 µs would add up to 50 µs to every
//!    deadline).
//!
//! The core's clock is the time since the emulator started
//! ([`LinkStats::at`]); a trace's time zero is that instant.

use std::fs::File;
use std::io::BufWriter;
use std::os::fd::AsFd;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime};

use mewa_model::sync::lock;

use nix::poll::{PollFd, PollFlags};
use nix::sys::eventfd::EventFd;
use nix::sys::time::TimeSpec;
use serde::Serialize;
use tun_rs::{GROTable, SyncDevice, IDEAL_BATCH_SIZE, VIRTIO_NET_HDR_LEN};

use super::sys::{cpu_time, CpuClock};
use super::Error;
use crate::core::radio::RadioState;
use crate::core::{Dir, Link, LinkConfig, Payload, Stats};
use crate::eventlog::EventLogWriter;
use crate::pcap::PcapWriter;

/// Most reads from one device per turn of the loop.
const BATCH: usize = 64;

/// Largest packet a TUN can hand over (an IPv4 packet's maximum length).
const MAX_PACKET: usize = 65_535;

/// Room in front of every packet for the virtio header a batched write
/// puts there.
const HEADROOM: usize = VIRTIO_NET_HDR_LEN;

/// Largest segment of a split super-packet (MTU up to 16 KB).
const SEGMENT: usize = 16 * 1024;

/// Spare packet buffers kept for reuse (avoids an allocation per packet).
const POOL: usize = 4096;

/// How often the thread's CPU time is read into [`LinkStats::cpu`].
const CPU_EVERY: Duration = Duration::from_millis(100);

/// How long before a deadline a long sleep ends, to sleep the rest in a
/// short and therefore precise second sleep.
const EARLY_WAKE: Duration = Duration::from_micros(300);

/// Sleeps longer than this flush the pcap and log files first, so they are
/// readable while the link is idle.
const FLUSH_IDLE: Duration = Duration::from_millis(20);

/// The longest an idle emulator sleeps before it publishes its counters
/// again ([`LinkStats::radio`] changes with time alone).
const PUBLISH_IDLE: Duration = Duration::from_millis(100);

/// Counters of one link, as its emulator thread last published them.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LinkStats {
    /// Link time (since the emulator started) at which these were taken.
    pub at: Duration,
    /// Client → network counters.
    pub up: Stats,
    /// Network → client counters.
    pub down: Stats,
    /// Bytes waiting in the uplink queue.
    pub up_queued_bytes: usize,
    /// Bytes waiting in the downlink queue.
    pub down_queued_bytes: usize,
    /// Radio state at `at`.
    pub radio: RadioState,
    /// Radio promotions so far.
    pub radio_promotions: u64,
    /// Packets read from the devices that were not IPv4 and were dropped
    /// before the link saw them.
    pub filtered: u64,
    /// Batched writes (packets leaving at the same instant) that the kernel
    /// refused in part or whole.
    pub write_errors: u64,
    /// CPU time of the emulator thread (user + system, sampled every 100 ms
    /// and at the end).
    pub cpu: Duration,
    /// The thread is still forwarding.
    pub running: bool,
    /// Why the thread stopped, when it stopped on an error.
    pub error: Option<String>,
}

impl LinkStats {
    /// The counters of one direction.
    pub fn dir(&self, dir: Dir) -> &Stats {
        match dir {
            Dir::Up => &self.up,
            Dir::Down => &self.down,
        }
    }

    fn new() -> Self {
        LinkStats {
            at: Duration::ZERO,
            up: Stats::default(),
            down: Stats::default(),
            up_queued_bytes: 0,
            down_queued_bytes: 0,
            radio: RadioState::Always,
            radio_promotions: 0,
            filtered: 0,
            write_errors: 0,
            cpu: Duration::ZERO,
            running: true,
            error: None,
        }
    }
}

/// A packet as the emulator keeps it: [`HEADROOM`] spare bytes, then the IP
/// packet.
pub(crate) struct Packet(Vec<u8>);

impl Payload for Packet {
    fn wire_len(&self) -> usize {
        self.0.len().saturating_sub(HEADROOM)
    }
}

impl Packet {
    fn ip(&self) -> &[u8] {
        self.0.get(HEADROOM..).unwrap_or_default()
    }
}

type Pcap = PcapWriter<BufWriter<File>>;
type Log = EventLogWriter<BufWriter<File>>;

/// Optional capture and event-log files of a link, per direction (index 0 up,
/// 1 down).
#[derive(Default)]
pub(crate) struct Outputs {
    pub(crate) pcap: [Option<Pcap>; 2],
    pub(crate) log: [Option<Log>; 2],
}

impl Outputs {
    /// Creates `<dir>/<prefix><up|down>.pcap` and `.log` files as asked.
    pub(crate) fn create(
        pcap_dir: Option<&Path>,
        log_dir: Option<&Path>,
        prefix: &str,
        descriptions: [&str; 2],
    ) -> Result<Outputs, Error> {
        let mut o = Outputs::default();
        for (i, dir) in Dir::BOTH.into_iter().enumerate() {
            if let Some(d) = pcap_dir {
                let path = d.join(format!("{prefix}{}.pcap", dir.name()));
                let f = File::create(&path).map_err(|source| Error::Output {
                    path: path.clone(),
                    source,
                })?;
                o.pcap[i] = Some(
                    PcapWriter::new(BufWriter::with_capacity(1 << 20, f))
                        .map_err(|source| Error::Output { path, source })?,
                );
            }
            if let Some(d) = log_dir {
                let path = d.join(format!("{prefix}{}.log", dir.name()));
                let f = File::create(&path).map_err(|source| Error::Output {
                    path: path.clone(),
                    source,
                })?;
                o.log[i] = Some(
                    EventLogWriter::new(BufWriter::with_capacity(1 << 20, f), dir, descriptions[i])
                        .map_err(|source| Error::Output { path, source })?,
                );
            }
        }
        Ok(o)
    }

    fn logging(&self) -> bool {
        self.log.iter().any(Option::is_some)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        for p in self.pcap.iter_mut().flatten() {
            p.flush()?;
        }
        for l in self.log.iter_mut().flatten() {
            l.flush()?;
        }
        Ok(())
    }
}

/// [`Emulator::rewind_traces`]'s "nothing asked".
const NO_REWIND: u64 = u64::MAX;

/// Set in a rewind request: apply it at the next packet
/// ([`Link::rewind_traces_at_next_packet`]), not on the thread's turn.
const AT_NEXT_PACKET: u64 = 1 << 62;

/// A running emulator thread.
pub(crate) struct Emulator {
    name: String,
    stop: Arc<AtomicBool>,
    /// A trace moment (ms) to restart the link's traces at, taken by the
    /// thread on its next turn ([`Link::rewind_traces`]); [`NO_REWIND`]
    /// when none is asked. An atomic, not a lock: the thread reads it on
    /// every turn of its loop.
    rewind: Arc<AtomicU64>,
    /// Set to put the radio to sleep on the thread's next turn.
    idle: Arc<AtomicBool>,
    wake: Arc<EventFd>,
    shared: Arc<Mutex<LinkStats>>,
    thread: Option<JoinHandle<Result<(), Error>>>,
    started: Instant,
}

impl Emulator {
    /// Starts forwarding between `client` (its reads are the uplink's input,
    /// the downlink's output is written to it) and `network`.
    pub(crate) fn start(
        name: String,
        client: SyncDevice,
        network: SyncDevice,
        mut cfg: LinkConfig,
        outputs: Outputs,
    ) -> Result<Emulator, Error> {
        for d in [&client, &network] {
            d.set_nonblocking(true)
                .map_err(|e| Error::io(format!("{name}: making the TUN non-blocking"), e))?;
        }
        let wake = Arc::new(
            EventFd::new().map_err(|e| Error::errno(format!("{name}: creating an eventfd"), e))?,
        );
        let stop = Arc::new(AtomicBool::new(false));
        let rewind = Arc::new(AtomicU64::new(NO_REWIND));
        let idle = Arc::new(AtomicBool::new(false));
        let shared = Arc::new(Mutex::new(LinkStats::new()));
        cfg.log_events = cfg.log_events || outputs.logging();
        let started = Instant::now();
        let wall = SystemTime::now();
        let mut state = State {
            client,
            network,
            link: Link::new(cfg),
            outputs,
            started,
            wall,
            stop: stop.clone(),
            rewind: rewind.clone(),
            idle: idle.clone(),
            wake: wake.clone(),
            shared: shared.clone(),
            pool: Vec::new(),
            scratch: vec![0; HEADROOM + MAX_PACKET],
            segments: vec![vec![0; SEGMENT]; IDEAL_BATCH_SIZE],
            sizes: vec![0; IDEAL_BATCH_SIZE],
            out: Vec::new(),
            gro: GROTable::default(),
            filtered: 0,
            write_errors: 0,
            cpu: Duration::ZERO,
            cpu_at: started,
        };
        let thread = std::thread::Builder::new()
            .name(format!("mewa-link-{name}"))
            .spawn({
                let name = name.clone();
                move || {
                    let res = state.run();
                    state.finish(&res);
                    // Said at once: the loads crossing this link can only
                    // hang until their own timeouts.
                    if let Err(e) = &res {
                        tracing::error!("link emulator {name} stopped: {e}");
                    }
                    res
                }
            })
            .map_err(|e| Error::io(format!("{name}: starting the emulator thread"), e))?;
        Ok(Emulator {
            name,
            stop,
            rewind,
            idle,
            wake,
            shared,
            thread: Some(thread),
            started,
        })
    }

    /// The latest published counters.
    pub(crate) fn stats(&self) -> LinkStats {
        lock(&self.shared).clone()
    }

    /// The instant that is time zero of the link's clock.
    pub(crate) fn started(&self) -> Instant {
        self.started
    }

    /// Puts the link's radio to sleep (applied by the thread on its next
    /// turn, which this wakes; see [`Link::radio_idle`]).
    pub(crate) fn radio_idle(&self) {
        self.idle.store(true, Ordering::SeqCst);
        let _ = self.wake.write(1);
    }

    /// Restarts the link's delivery traces at the trace's moment `at_ms`
    /// (applied by the thread on its next turn, which this wakes).
    /// With `at_next_packet` the moment falls on the next packet to arrive
    /// instead.
    pub(crate) fn rewind_traces(&self, at_ms: u64, at_next_packet: bool) {
        // The top bits mean "none" and "at the next packet"; a moment that
        // far is the same modulo any trace period a few milliseconds away.
        let at = at_ms.min(AT_NEXT_PACKET - 1);
        self.rewind.store(
            if at_next_packet {
                at | AT_NEXT_PACKET
            } else {
                at
            },
            Ordering::SeqCst,
        );
        let _ = self.wake.write(1);
    }

    /// Stops the thread and waits for it; its error, if it failed.
    pub(crate) fn stop(&mut self) -> Result<(), Error> {
        self.stop.store(true, Ordering::SeqCst);
        let _ = self.wake.write(1);
        match self.thread.take() {
            Some(h) => h.join().map_err(|_| Error::Panicked(self.name.clone()))?,
            None => Ok(()),
        }
    }
}

impl Drop for Emulator {
    fn drop(&mut self) {
        let _ = self.stop();
    }
}

struct State {
    client: SyncDevice,
    network: SyncDevice,
    link: Link<Packet>,
    outputs: Outputs,
    started: Instant,
    wall: SystemTime,
    stop: Arc<AtomicBool>,
    rewind: Arc<AtomicU64>,
    idle: Arc<AtomicBool>,
    wake: Arc<EventFd>,
    shared: Arc<Mutex<LinkStats>>,
    pool: Vec<Vec<u8>>,
    /// What one read returns (a virtio header and up to 64 KB).
    scratch: Vec<u8>,
    /// The segments of a read (one unless it was a super-packet).
    segments: Vec<Vec<u8>>,
    sizes: Vec<usize>,
    /// Packets to write in one batch.
    out: Vec<Vec<u8>>,
    gro: GROTable,
    filtered: u64,
    write_errors: u64,
    cpu: Duration,
    cpu_at: Instant,
}

impl State {
    fn now(&self) -> Duration {
        self.started.elapsed()
    }

    fn run(&mut self) -> Result<(), Error> {
        // Best effort: without it deadlines are only up to 50 µs late.
        let _ = nix::sys::prctl::set_timerslack(1);
        while !self.stop.load(Ordering::Relaxed) {
            let asked = self.rewind.swap(NO_REWIND, Ordering::SeqCst);
            if asked != NO_REWIND {
                let at_ms = asked & (AT_NEXT_PACKET - 1);
                if asked & AT_NEXT_PACKET != 0 {
                    self.link.rewind_traces_at_next_packet(at_ms);
                } else {
                    self.link.rewind_traces(at_ms, self.now());
                }
            }
            if self.idle.swap(false, Ordering::SeqCst) {
                self.link.radio_idle();
            }
            let mut more = false;
            for dir in Dir::BOTH {
                more |= self.read(dir)?;
            }
            let now = self.now();
            let mut moved = false;
            for dir in Dir::BOTH {
                moved |= self.transmit(dir, now);
            }
            self.drain_events();
            self.publish(now, false);
            if more || moved {
                continue;
            }
            let now = self.now();
            let timeout = self.link.poll_timeout().map(|t| t.saturating_sub(now));
            if timeout == Some(Duration::ZERO) {
                continue;
            }
            if timeout.is_none_or(|t| t > FLUSH_IDLE) {
                self.outputs
                    .flush()
                    .map_err(|e| Error::io("writing the link's pcap or log files", e))?;
            }
            // Long sleeps overshoot: measured here, a 20 ms ppoll wakes
            // 120 µs late, a 1 ms one 20 µs late. Wake early and sleep the
            // rest in a short second step (measured: 20 ms → 40 µs late).
            // An idle link still wakes every PUBLISH_IDLE, so the published
            // counters say where the radio is now (it demotes while nothing
            // moves), not where it was at the last packet.
            let timeout = Some(timeout.map_or(PUBLISH_IDLE, |t| t.min(PUBLISH_IDLE)));
            let timeout = timeout.map(|t| {
                if t > 2 * EARLY_WAKE {
                    t - EARLY_WAKE
                } else {
                    t
                }
            });
            self.wait(timeout)?;
        }
        Ok(())
    }

    /// Reads up to [`BATCH`] times from the input of `dir`; whether more
    /// may be waiting.
    fn read(&mut self, dir: Dir) -> Result<bool, Error> {
        for _ in 0..BATCH {
            let dev = match dir {
                Dir::Up => &self.client,
                Dir::Down => &self.network,
            };
            let n = match dev.recv_multiple(
                &mut self.scratch,
                &mut self.segments,
                &mut self.sizes,
                0,
            ) {
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return Ok(false),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                // The device is gone (its namespace was deleted) or broken.
                Err(e) if e.raw_os_error().is_some() => {
                    return Err(Error::io(
                        format!("reading the {} side's TUN device", side(dir)),
                        e,
                    ))
                }
                // A super-packet tun-rs could not split: lost, like a
                // malformed frame on a wire.
                Err(_) => {
                    self.filtered += 1;
                    continue;
                }
            };
            let now = self.now();
            for k in 0..n {
                let len = self.sizes[k];
                let seg = &self.segments[k][..len];
                // IPv4 only: the version nibble. Anything else (IPv6
                // neighbour discovery on a fresh device) never reaches the
                // link, so it cannot wake the radio or take capacity.
                if len < 20 || seg[0] >> 4 != 4 {
                    self.filtered += 1;
                    continue;
                }
                let mut p = self.pool.pop().unwrap_or_default();
                p.clear();
                p.resize(HEADROOM, 0);
                p.extend_from_slice(seg);
                self.link.handle_packet(dir, Packet(p), now);
            }
        }
        Ok(true)
    }

    /// Writes every packet of `dir` due by `now` in one batch; whether any
    /// was due.
    fn transmit(&mut self, dir: Dir, now: Duration) -> bool {
        let i = dir_index(dir);
        let mut any = false;
        while let Some(p) = self.link.poll_transmit(dir, now) {
            any = true;
            if let Some(pcap) = &mut self.outputs.pcap[i] {
                if pcap.write_packet(self.wall + now, p.ip()).is_err() {
                    // A full disk must not stop the link; stop capturing.
                    self.outputs.pcap[i] = None;
                }
            }
            self.out.push(p.0);
            if self.out.len() >= IDEAL_BATCH_SIZE {
                self.flush_out(dir);
            }
        }
        self.flush_out(dir);
        any
    }

    fn flush_out(&mut self, dir: Dir) {
        if self.out.is_empty() {
            return;
        }
        let dev = match dir {
            Dir::Up => &self.network,
            Dir::Down => &self.client,
        };
        if dev
            .send_multiple(&mut self.gro, &mut self.out, HEADROOM)
            .is_err()
        {
            self.write_errors += 1;
        }
        for b in self.out.drain(..) {
            if self.pool.len() < POOL {
                self.pool.push(b);
            }
        }
    }

    fn drain_events(&mut self) {
        while let Some(e) = self.link.poll_event() {
            let i = dir_index(e.dir);
            if let Some(log) = &mut self.outputs.log[i] {
                if log.write(&e).is_err() {
                    self.outputs.log[i] = None;
                }
            }
        }
    }

    fn publish(&mut self, now: Duration, last: bool) {
        if last || self.cpu_at.elapsed() >= CPU_EVERY {
            self.cpu = cpu_time(CpuClock::Thread).unwrap_or(self.cpu);
            self.cpu_at = Instant::now();
        }
        let radio = self.link.radio_state(now);
        let mut s = lock(&self.shared);
        s.at = now;
        s.up.clone_from(self.link.stats(Dir::Up));
        s.down.clone_from(self.link.stats(Dir::Down));
        s.up_queued_bytes = self.link.queued(Dir::Up).1;
        s.down_queued_bytes = self.link.queued(Dir::Down).1;
        s.radio = radio;
        s.radio_promotions = self.link.radio_promotions();
        s.filtered = self.filtered;
        s.write_errors = self.write_errors;
        s.cpu = self.cpu;
    }

    /// Sleeps until a device is readable, the stop eventfd fires or
    /// `timeout` passes.
    fn wait(&mut self, timeout: Option<Duration>) -> Result<(), Error> {
        let mut fds = [
            PollFd::new(self.client.as_fd(), PollFlags::POLLIN),
            PollFd::new(self.network.as_fd(), PollFlags::POLLIN),
            PollFd::new(self.wake.as_fd(), PollFlags::POLLIN),
        ];
        match nix::poll::ppoll(&mut fds, timeout.map(TimeSpec::from_duration), None) {
            Ok(_) => {
                // A wake-up (stop, or a trace rewind) stays readable until
                // read: drain it, or every later wait returns at once. Only
                // this thread reads, and the fd is readable, so it cannot
                // block.
                let woken = fds[2]
                    .revents()
                    .is_some_and(|r| r.contains(PollFlags::POLLIN));
                if woken {
                    let _ = self.wake.read();
                }
                Ok(())
            }
            Err(nix::errno::Errno::EINTR) => Ok(()),
            Err(e) => Err(Error::errno("waiting for packets (ppoll)", e)),
        }
    }

    fn finish(&mut self, res: &Result<(), Error>) {
        let _ = self.outputs.flush();
        let now = self.now();
        self.publish(now, true);
        let mut s = lock(&self.shared);
        s.running = false;
        s.error = res.as_ref().err().map(ToString::to_string);
    }
}

fn dir_index(dir: Dir) -> usize {
    match dir {
        Dir::Up => 0,
        Dir::Down => 1,
    }
}

fn side(dir: Dir) -> &'static str {
    match dir {
        Dir::Up => "client",
        Dir::Down => "network",
    }
}
