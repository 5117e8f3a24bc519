//! Connections and one object's fetch over them.
//!
//! Two lifetimes meet here. A [`Pool`] holds what a browser keeps between
//! page views: the TLS client, the QUIC endpoint, every origin group's
//! connections and the tasks driving them. A [`Load`] holds what belongs to
//! one page load: its clock, the HTML progress channel, the priorities, the
//! books of held leaves, and the record of every connection it used. A
//! [`crate::Session`] keeps one pool for many loads, so that connections
//! outlive the load that opened them while nothing of one load (a clock, a
//! ticket of a held leaf, a failed open) leaks into the next.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::{Buf, Bytes};
use http::{HeaderMap, Request, Response};
use http_body_util::{BodyExt, Empty};
use hyper::body::Incoming;
use hyper::client::conn::{http1, http2};
use mewa_client::dispatch::Dispatcher;
use mewa_corpus::{Kind, Object};
use mewa_model::pull::Ledger;
use mewa_model::sync::lock;
use tokio::sync::Semaphore;
use tokio::task::JoinHandle;

use crate::conn::{self, OpenError, Sender, Target};
use crate::record::{Chunk, ConnectionTiming, IwRecord, ObjectTiming, Protocol};
use crate::{IwAsk, LoadError, LoadOptions};

/// A connection as the pool knows it, whichever load uses it. The sender
/// lives beside it (in a slot or the idle list), since an HTTP/1.1 sender
/// is owned by the one request it carries.
struct Conn {
    /// Pool-wide number; a load maps it to its own record id.
    serial: u64,
    /// The load that opened it; any other load reuses it.
    opened_by: u64,
    /// The host it was opened for.
    host: String,
    addr: SocketAddr,
    /// Seed 001: the initial window (segments) the connection's first
    /// request asks for, until that request goes. It lives with the
    /// connection rather than the load because a connection a load opened
    /// and never used (preconnected) carries its first request in a later
    /// load.
    iw_ask: Mutex<Option<u32>>,
    /// The window choice made when the connection opened, copied into the
    /// record of a later load that sends the first request (so that the
    /// grant lands beside the ask).
    iw: Option<IwRecord>,
}

/// One multiplexed connection of a group.
enum SlotState {
    /// Never opened, or its connection was dropped.
    Empty,
    /// An open connection (possibly closed since; checked before use).
    Open(Sender, Arc<Conn>),
    /// Opening failed during load `load`: every later object of that load
    /// on the slot fails alike, as requests queued on a browser's failed
    /// connection attempt do; a later load tries again.
    Failed { load: u64, error: String },
}

/// A multiplexed slot. The async lock is held while the slot's connection
/// opens, so concurrent objects wait for that one connection instead of
/// each opening their own.
type MuxSlot = Arc<tokio::sync::Mutex<SlotState>>;

/// An idle HTTP/1.1 connection.
type Idle = (http1::SendRequest<Empty<Bytes>>, Arc<Conn>);

/// The connections objects of one origin group share.
enum Group {
    /// HTTP/2 or HTTP/3: a fixed number of slots, each opened on first use.
    Mux { slots: Vec<MuxSlot> },
    /// HTTP/1.1: at most `permits` connections, idle ones kept for reuse.
    H1 {
        permits: Arc<Semaphore>,
        idle: Mutex<Vec<Idle>>,
    },
}

/// One load's books of a multiplexed group: bytes requested and not yet
/// received per slot, their recent deliveries (for [`crate::Assign`] and
/// the pull budget), and the turns of held leaves. Per load, so that a
/// load that gave up with leaves still waiting cannot stall the next.
struct Books {
    dispatcher: Arc<Dispatcher>,
    tickets: Tickets,
}

/// Under a fixed budget held leaves go first come, first served: each
/// takes a ticket when its fetch starts (discovery order up to the
/// scheduler) and goes when its number is served.
#[derive(Debug, Default)]
struct Tickets {
    next: AtomicU64,
    serving: AtomicU64,
}

/// Slot for a held `object`, or none while it must wait. Fixed budget
/// (`now_us` none): the policy's choice when it holds less than `budget`,
/// else the emptiest slot that does. Following the rates (`now_us` given):
/// earliest completion first at each slot's recent rate, with `budget` as
/// the floor of every slot's rate and the proof rule (see
/// `mewa_model::pull`).
fn slot_with_room(
    books: &mut Ledger,
    assign: &dyn crate::Assign,
    object: &Object,
    budget: u64,
    now_us: Option<u64>,
) -> Option<usize> {
    if let Some(now_us) = now_us {
        return books.earliest(object.size, budget, now_us);
    }
    let out = books.outstanding();
    let pref = assign.pick(object, out) % out.len().max(1);
    if out.get(pref).is_some_and(|&b| b < budget) {
        return Some(pref);
    }
    out.iter()
        .enumerate()
        .filter(|&(_, &b)| b < budget)
        .min_by_key(|&(i, &b)| (b, i))
        .map(|(i, _)| i)
}

/// What outlives one load: the clients, the connections, their drivers.
pub(crate) struct Pool {
    opts: LoadOptions,
    scheme: &'static str,
    tls: Option<Arc<rustls::ClientConfig>>,
    quic: Option<quinn::Endpoint>,
    groups: Mutex<HashMap<String, Arc<Group>>>,
    drivers: Mutex<Vec<JoinHandle<()>>>,
    /// Numbers connections and loads over the pool's life.
    serials: AtomicU64,
}

impl Pool {
    /// Sets up the TLS client and QUIC endpoint `opts` need; refuses TLS
    /// and HTTP/3 without a CA before any I/O.
    pub(crate) fn new(opts: LoadOptions, scheme: &'static str) -> Result<Pool, LoadError> {
        let ca = opts.ca_cert.as_deref();
        let tls = match (opts.protocol, opts.tls, ca) {
            (Protocol::H1, true, Some(ca)) => Some(Arc::new(conn::tls_config(ca, &[b"http/1.1"])?)),
            (Protocol::H2, true, Some(ca)) => Some(Arc::new(conn::tls_config(ca, &[b"h2"])?)),
            (Protocol::H3, _, None) | (_, true, None) => return Err(LoadError::NoCa),
            _ => None,
        };
        let quic = match (opts.protocol, ca) {
            (Protocol::H3, Some(ca)) => Some(conn::quic_endpoint(ca)?),
            _ => None,
        };
        Ok(Pool {
            opts,
            scheme,
            tls,
            quic,
            groups: Mutex::new(HashMap::new()),
            drivers: Mutex::new(Vec::new()),
            serials: AtomicU64::new(0),
        })
    }

    /// The options every load of the pool follows.
    pub(crate) fn opts(&self) -> &LoadOptions {
        &self.opts
    }

    /// `http` or `https`.
    pub(crate) fn scheme(&self) -> &'static str {
        self.scheme
    }

    fn next_serial(&self) -> u64 {
        self.serials.fetch_add(1, Ordering::Relaxed)
    }

    fn port(&self) -> u16 {
        match (self.opts.protocol, self.opts.tls) {
            (Protocol::H3, _) => self.opts.port_h3,
            (_, true) => self.opts.port_tls,
            (_, false) => self.opts.port_plain,
        }
    }

    fn addr_of(&self, host: &str) -> Option<SocketAddr> {
        self.opts
            .resolver
            .resolve(host)
            .map(|ip| SocketAddr::new(ip, self.port()))
    }

    /// The group a host's objects share: per address when multiplexed
    /// connections coalesce, else per host and address.
    fn key(&self, host: &str, addr: SocketAddr) -> String {
        if self.opts.protocol != Protocol::H1 && self.opts.coalesce {
            addr.to_string()
        } else {
            format!("{host} {addr}")
        }
    }

    fn group(&self, key: &str) -> Arc<Group> {
        let n = self.opts.connections.max(1);
        let mut groups = lock(&self.groups);
        if let Some(g) = groups.get(key) {
            return Arc::clone(g);
        }
        let g = Arc::new(if self.opts.protocol == Protocol::H1 {
            Group::H1 {
                permits: Arc::new(Semaphore::new(n)),
                idle: Mutex::new(Vec::new()),
            }
        } else {
            Group::Mux {
                slots: (0..n)
                    .map(|_| Arc::new(tokio::sync::Mutex::new(SlotState::Empty)))
                    .collect(),
            }
        });
        groups.insert(key.to_string(), Arc::clone(&g));
        g
    }

    /// Whether the connections are encrypted (TLS, or QUIC's TLS).
    fn secure(&self) -> bool {
        self.tls.is_some() || self.quic.is_some()
    }

    /// Keeps a connection's driver for [`Pool::close`], forgetting those of
    /// connections that have ended (a long session replaces many).
    fn add_driver(&self, driver: JoinHandle<()>) {
        let mut drivers = lock(&self.drivers);
        drivers.retain(|d| !d.is_finished());
        drivers.push(driver);
    }

    /// Closes every connection. Idempotent.
    pub(crate) fn close(&self) {
        lock(&self.groups).clear();
        for d in lock(&self.drivers).drain(..) {
            d.abort();
        }
        if let Some(ep) = &self.quic {
            ep.close(0u32.into(), b"loader closed");
        }
    }
}

/// The connection records of one load, and which pool connection each is.
#[derive(Default)]
struct Records {
    list: Vec<ConnectionTiming>,
    by_serial: HashMap<u64, u32>,
}

/// State one load's fetch tasks share.
pub(crate) struct Load {
    pool: Arc<Pool>,
    /// This load's number in the pool (see [`Conn::opened_by`]).
    serial: u64,
    start: Instant,
    /// Hears `(object id, body bytes so far)` of HTML bodies as they
    /// arrive, for discovery while the document streams in.
    progress: Option<tokio::sync::mpsc::UnboundedSender<(u32, u64)>>,
    /// The `priority` header value (RFC 9218) of each object, by id.
    priority: HashMap<u32, &'static str>,
    /// The books of each multiplexed group this load used, by group key.
    books: Mutex<HashMap<String, Arc<Books>>>,
    conns: Mutex<Records>,
}

/// An object's timing before anything happened to it.
pub(crate) fn unstarted(object: &Object, scheme: &str, discovered_us: u64) -> ObjectTiming {
    ObjectTiming {
        id: object.id,
        url: object.url(scheme),
        host: object.host.clone(),
        content_type: object.content_type.clone(),
        connection: None,
        discovered_us,
        request_us: discovered_us,
        first_byte_us: None,
        end_us: None,
        status: 0,
        expected_status: object.status(),
        body_bytes: 0,
        header_bytes: 0,
        chunks: Vec::new(),
        error: None,
    }
}

/// Size of a response head as HTTP/1.1 would write it: status line, each
/// field as `name: value\r\n`, blank line. HTTP/2 and HTTP/3 send it
/// compressed, so for them this is an upper estimate.
fn head_size(headers: &HeaderMap) -> u64 {
    let fields: usize = headers
        .iter()
        .map(|(k, v)| k.as_str().len() + 2 + v.len() + 2)
        .sum();
    ("HTTP/1.1 200 OK\r\n".len() + fields + 2) as u64
}

impl Load {
    /// A load over `pool` starting now: where HTML progress goes, and the
    /// priority header of each object.
    pub(crate) fn new(
        pool: Arc<Pool>,
        progress: Option<tokio::sync::mpsc::UnboundedSender<(u32, u64)>>,
        priority: HashMap<u32, &'static str>,
    ) -> Load {
        Load {
            serial: pool.next_serial(),
            pool,
            start: Instant::now(),
            progress,
            priority,
            books: Mutex::new(HashMap::new()),
            conns: Mutex::new(Records::default()),
        }
    }

    /// µs since the load started.
    pub(crate) fn now_us(&self) -> u64 {
        self.start.elapsed().as_micros() as u64
    }

    fn books(&self, key: &str) -> Arc<Books> {
        let mut books = lock(&self.books);
        Arc::clone(books.entry(key.to_string()).or_insert_with(|| {
            let opts = &self.pool.opts;
            Arc::new(Books {
                dispatcher: Arc::new(Dispatcher::new(opts.connections.max(1), opts.pull_follow)),
                tickets: Tickets::default(),
            })
        }))
    }

    /// Opens one connection and records it; returns its sender and the
    /// pool's handle on it.
    async fn open(&self, host: &str, addr: SocketAddr) -> Result<(Sender, Arc<Conn>), OpenError> {
        let pool = &*self.pool;
        let serial = pool.next_serial();
        let id = {
            let mut conns = lock(&self.conns);
            let id = conns.list.len() as u32;
            conns.list.push(ConnectionTiming {
                id,
                host: host.to_string(),
                addr: addr.to_string(),
                protocol: pool.opts.protocol,
                tls: pool.secure(),
                open_us: self.now_us(),
                connected_us: None,
                ready_us: None,
                close_us: None,
                error: None,
                iw: None,
                reused: false,
            });
            conns.by_serial.insert(serial, id);
            id
        };
        let target = Target {
            addr,
            host,
            protocol: pool.opts.protocol,
            tls: pool.tls.as_ref(),
            quic: pool.quic.as_ref(),
        };
        let opened = conn::open(target, || self.now_us()).await;
        let mut conns = lock(&self.conns);
        let rec = &mut conns.list[id as usize];
        match opened {
            Ok(o) => {
                rec.connected_us = Some(o.connected_us);
                rec.ready_us = Some(o.ready_us);
                let mut ask = None;
                if let Some(iw) = pool.opts.iw {
                    // The handshake's round trip: SYN to SYN-ACK for TCP,
                    // QUIC's own estimate after its handshake.
                    let rtt = o.rtt.unwrap_or_else(|| {
                        Duration::from_micros(o.connected_us.saturating_sub(rec.open_us))
                    });
                    let (asked, fallback) = match iw {
                        IwAsk::Fixed(n) => (Some(n), None),
                        IwAsk::Aware(facts) => {
                            let c = mewa_client::iw::choose(facts, rtt);
                            tracing::debug!(?c, "initial window for connection {id}");
                            (c.worth_asking().then_some(c.segments), c.fallback)
                        }
                    };
                    ask = asked;
                    rec.iw = Some(IwRecord {
                        asked,
                        rtt_us: rtt.as_micros() as u64,
                        fallback,
                        granted: None,
                    });
                }
                pool.add_driver(o.driver);
                let conn = Arc::new(Conn {
                    serial,
                    opened_by: self.serial,
                    host: host.to_string(),
                    addr,
                    iw_ask: Mutex::new(ask),
                    iw: rec.iw.clone(),
                });
                Ok((o.sender, conn))
            }
            Err(e) => {
                rec.error = Some(e.to_string());
                rec.close_us = Some(self.now_us());
                Err(e)
            }
        }
    }

    /// `conn`'s id in this load's record, adding a record of it as reused
    /// when an earlier load opened it and this load has not used it yet.
    fn register(&self, conn: &Conn) -> u32 {
        let mut conns = lock(&self.conns);
        if let Some(&id) = conns.by_serial.get(&conn.serial) {
            return id;
        }
        let id = conns.list.len() as u32;
        let iw = if lock(&conn.iw_ask).is_some() {
            conn.iw.clone()
        } else {
            None
        };
        conns.list.push(ConnectionTiming {
            id,
            host: conn.host.clone(),
            addr: conn.addr.to_string(),
            protocol: self.pool.opts.protocol,
            tls: self.pool.secure(),
            open_us: 0,
            connected_us: None,
            ready_us: None,
            close_us: None,
            error: None,
            iw,
            reused: true,
        });
        conns.by_serial.insert(conn.serial, id);
        id
    }

    /// Notes that this load found `conn` closed or stopped using it after a
    /// failed request (if the load had used it at all).
    fn saw_closed(&self, conn: &Conn) {
        let now = self.now_us();
        let mut conns = lock(&self.conns);
        let Some(id) = conns.by_serial.get(&conn.serial).copied() else {
            return;
        };
        if let Some(rec) = conns.list.get_mut(id as usize) {
            rec.close_us.get_or_insert(now);
        }
    }

    /// Whether to send `t`'s request again on a fresh connection: it failed
    /// before any response arrived on a connection an earlier load opened.
    /// Why: a connection idle between page views may have been closed by
    /// the server (or the network) without the loader having seen it yet;
    /// browsers retry a request lost on a reused connection. A failure on
    /// a connection this load opened is the load's own and is recorded.
    fn retry(&self, conn: &Conn, t: &ObjectTiming) -> bool {
        let lost = conn.opened_by != self.serial && t.error.is_some() && t.first_byte_us.is_none();
        if lost {
            tracing::debug!(error = ?t.error, "request lost on a reused connection; retrying");
        }
        lost
    }

    /// The connection of a multiplexed slot, opened (again) as needed, and
    /// its id in this load's record. A connection found closed, or equal to
    /// `stale` (one a request just failed on), is replaced by a new one.
    async fn slot_conn(
        &self,
        slot: &MuxSlot,
        host: &str,
        addr: SocketAddr,
        stale: Option<&Arc<Conn>>,
    ) -> Result<(Sender, Arc<Conn>, u32), String> {
        let mut state = slot.lock().await;
        match &*state {
            SlotState::Open(sender, conn) => {
                let failed = stale.is_some_and(|s| Arc::ptr_eq(s, conn));
                if let Some(s) = sender.share().filter(|_| !failed && !sender.is_closed()) {
                    return Ok((s, Arc::clone(conn), self.register(conn)));
                }
                self.saw_closed(conn);
            }
            SlotState::Failed { load, error } if *load == self.serial => return Err(error.clone()),
            SlotState::Failed { .. } | SlotState::Empty => {}
        }
        *state = SlotState::Empty;
        match self.open(host, addr).await {
            Ok((sender, conn)) => {
                let id = self.register(&conn);
                let Some(shared) = sender.share() else {
                    return Err("HTTP/1.1 in a multiplexed group".into());
                };
                *state = SlotState::Open(sender, Arc::clone(&conn));
                Ok((shared, conn, id))
            }
            Err(e) => {
                let error = e.to_string();
                *state = SlotState::Failed {
                    load: self.serial,
                    error: error.clone(),
                };
                Err(error)
            }
        }
    }

    /// Opens every connection of the root's group now (HTTP/2, HTTP/3);
    /// in a session, takes the group's open ones into this load's record.
    pub(crate) async fn preconnect(self: &Arc<Self>, root: &Object) {
        let Some(addr) = self.pool.addr_of(&root.host) else {
            return;
        };
        let group = self.pool.group(&self.pool.key(&root.host, addr));
        let Group::Mux { slots } = &*group else {
            return;
        };
        let mut set = tokio::task::JoinSet::new();
        for slot in slots {
            let slot = Arc::clone(slot);
            let me = Arc::clone(self);
            let host = root.host.clone();
            set.spawn(async move {
                let _ = me.slot_conn(&slot, &host, addr, None).await;
            });
        }
        while set.join_next().await.is_some() {}
    }

    /// Chooses `object`'s slot in a multiplexed group and counts its bytes
    /// as outstanding there. Leaves wait while every slot is at
    /// [`crate::LoadOptions::pull_budget`].
    async fn reserve(&self, object: &Object, slots: usize, books: &Books) -> usize {
        let assign = &*self.pool.opts.assign;
        let held = object.parent.is_some() && !crate::WarmFirst::reveals(object);
        let budget = match self.pool.opts.pull_budget {
            Some(b) if held && slots > 1 => b,
            _ => {
                return books.dispatcher.place_now(object.size, |out| {
                    assign.pick(object, out) % out.len().max(1)
                })
            }
        };
        let tickets = &books.tickets;
        let ticket = tickets.next.fetch_add(1, Ordering::Relaxed);
        let follow = self.pool.opts.pull_follow.is_some();
        books
            .dispatcher
            .place_when(
                object.size,
                |l, now| {
                    // A fixed budget serves held leaves in turn (the books'
                    // lock orders these). Following the rates, each leaf
                    // waits for its own best slot, so a large one waiting
                    // for the fast slot does not hold back small ones that
                    // fit elsewhere.
                    if !follow && tickets.serving.load(Ordering::Relaxed) != ticket {
                        return None;
                    }
                    let i = slot_with_room(l, assign, object, budget, follow.then_some(now))?;
                    tickets.serving.fetch_add(1, Ordering::Relaxed);
                    Some(i)
                },
                || {},
            )
            .await
    }

    /// Fetches one object and returns what happened.
    pub(crate) async fn fetch(self: Arc<Self>, object: Object, discovered_us: u64) -> ObjectTiming {
        let mut t = unstarted(&object, self.pool.scheme, discovered_us);
        let Some(addr) = self.pool.addr_of(&object.host) else {
            t.error = Some(format!("no address for host `{}`", object.host));
            return t;
        };
        let key = self.pool.key(&object.host, addr);
        let group = self.pool.group(&key);
        match &*group {
            Group::Mux { slots } => {
                let books = self.books(&key);
                let i = self.reserve(&object, slots.len(), &books).await;
                // Counts the bytes off as they arrive, the rest when the
                // object ends (whole, short or failed).
                let mut credit = books.dispatcher.credit(i, object.size);
                let mut stale = None;
                loop {
                    let (sender, conn, id) = match self
                        .slot_conn(&slots[i], &object.host, addr, stale.as_ref())
                        .await
                    {
                        Ok(c) => c,
                        Err(e) => {
                            t.error = Some(e);
                            break;
                        }
                    };
                    t.connection = Some(id);
                    match sender {
                        Sender::H2(s) => {
                            self.fetch_h2(s, &object, &conn, id, &mut t, &mut |b| credit.take(b))
                                .await
                        }
                        Sender::H3(s, _) => {
                            self.fetch_h3(s, &object, &conn, &mut t, &mut |b| credit.take(b))
                                .await
                        }
                        Sender::H1(_) => t.error = Some("HTTP/1.1 in a multiplexed group".into()),
                    }
                    if stale.is_none() && self.retry(&conn, &t) {
                        t.error = None;
                        stale = Some(conn);
                        continue;
                    }
                    break;
                }
                drop(credit);
            }
            Group::H1 { permits, idle } => {
                let Ok(_permit) = Arc::clone(permits).acquire_owned().await else {
                    t.error = Some("connection pool closed".into());
                    return t;
                };
                let mut retried = false;
                loop {
                    // A retry goes on a fresh connection: the other idle
                    // ones date from the same earlier load and may be as
                    // dead.
                    let reuse = if retried {
                        None
                    } else {
                        let mut idle = lock(idle);
                        idle.retain(|(s, c)| {
                            let open = !s.is_closed();
                            if !open {
                                self.saw_closed(c);
                            }
                            open
                        });
                        idle.pop()
                    };
                    let (mut send, conn) = match reuse {
                        Some(c) => c,
                        None => match self.open(&object.host, addr).await {
                            Ok((Sender::H1(s), c)) => (s, c),
                            Ok(_) => {
                                t.error = Some("expected an HTTP/1.1 connection".into());
                                return t;
                            }
                            Err(e) => {
                                t.error = Some(e.to_string());
                                return t;
                            }
                        },
                    };
                    let id = self.register(&conn);
                    t.connection = Some(id);
                    if let Err(e) = send.ready().await {
                        t.error = Some(format!("HTTP/1.1 connection {id} closed: {e}"));
                    } else {
                        t.request_us = self.now_us();
                        match send.send_request(self.request(&object, false, &conn)).await {
                            Ok(resp) => self.read_hyper(resp, &mut t, &mut |_| {}).await,
                            Err(e) => t.error = Some(format!("HTTP/1.1 request: {e}")),
                        }
                    }
                    if !retried && self.retry(&conn, &t) {
                        self.saw_closed(&conn);
                        t.error = None;
                        retried = true;
                        continue;
                    }
                    if t.end_us.is_some() && !send.is_closed() {
                        lock(idle).push((send, conn));
                    }
                    break;
                }
            }
        }
        if t.error.is_none() && t.end_us.is_some() && t.body_bytes != object.size {
            t.error = Some(format!(
                "body of {} bytes, the corpus says {}",
                t.body_bytes, object.size
            ));
        }
        t
    }

    /// The initial window `conn`'s first request asks for, once.
    fn iw_ask(&self, conn: &Conn) -> Option<u32> {
        lock(&conn.iw_ask).take()
    }

    fn request(&self, object: &Object, absolute: bool, conn: &Conn) -> Request<Empty<Bytes>> {
        let uri = if absolute {
            object.url(self.pool.scheme)
        } else {
            object.path.clone()
        };
        let mut b = Request::get(uri).header("user-agent", "mewa-loader");
        if let Some(n) = self.iw_ask(conn) {
            b = b.header(mewa_client::iw::HEADER, n);
        }
        if !absolute {
            b = b.header("host", object.host.as_str());
        }
        if let Some(p) = self.priority.get(&object.id) {
            b = b.header("priority", *p);
        }
        // The corpus checked host and path, so the request always builds;
        // fall back to an empty request rather than panic.
        b.body(Empty::new()).unwrap_or_default()
    }

    fn on_head(&self, status: http::StatusCode, headers: &HeaderMap, t: &mut ObjectTiming) {
        t.first_byte_us = Some(self.now_us());
        t.status = status.as_u16();
        t.header_bytes = head_size(headers);
        if let (Some(g), Some(id)) = (headers.get(mewa_client::iw::GRANTED_HEADER), t.connection) {
            if let Some(rec) = lock(&self.conns).list.get_mut(id as usize) {
                if let Some(iw) = rec.iw.as_mut() {
                    iw.granted = Some(String::from_utf8_lossy(g.as_bytes()).into_owned());
                }
            }
        }
    }

    fn on_data(&self, bytes: usize, t: &mut ObjectTiming) {
        if bytes > 0 {
            t.body_bytes += bytes as u64;
            t.chunks.push(Chunk {
                t_us: self.now_us(),
                bytes: bytes as u64,
            });
            if let Some(tx) = &self.progress {
                if Kind::of(&t.content_type) == Kind::Html {
                    let _ = tx.send((t.id, t.body_bytes));
                }
            }
        }
    }

    fn on_end(&self, t: &mut ObjectTiming) {
        t.end_us = Some(self.now_us());
        if t.status != t.expected_status {
            t.error = Some(format!(
                "HTTP status {} (the page expects {})",
                t.status, t.expected_status
            ));
        }
    }

    /// Sends `object`'s request on an HTTP/2 connection and reads the
    /// response; `credit` hears of every body chunk's size.
    async fn fetch_h2(
        &self,
        mut send: http2::SendRequest<Empty<Bytes>>,
        object: &Object,
        conn: &Conn,
        id: u32,
        t: &mut ObjectTiming,
        credit: &mut (dyn FnMut(u64) + Send),
    ) {
        if let Err(e) = send.ready().await {
            t.error = Some(format!("HTTP/2 connection {id} closed: {e}"));
            return;
        }
        t.request_us = self.now_us();
        match send.send_request(self.request(object, true, conn)).await {
            Ok(resp) => self.read_hyper(resp, t, credit).await,
            Err(e) => t.error = Some(format!("HTTP/2 request: {e}")),
        }
    }

    /// Reads a response; `credit` hears of every body chunk's size.
    async fn read_hyper(
        &self,
        resp: Response<Incoming>,
        t: &mut ObjectTiming,
        credit: &mut (dyn FnMut(u64) + Send),
    ) {
        self.on_head(resp.status(), resp.headers(), t);
        let mut body = resp.into_body();
        while let Some(frame) = body.frame().await {
            match frame {
                Ok(f) => {
                    if let Some(d) = f.data_ref() {
                        self.on_data(d.len(), t);
                        credit(d.len() as u64);
                    }
                }
                Err(e) => {
                    t.error = Some(format!("body: {e}"));
                    return;
                }
            }
        }
        self.on_end(t);
    }

    async fn fetch_h3(
        &self,
        mut send: h3::client::SendRequest<h3_quinn::OpenStreams, Bytes>,
        object: &Object,
        conn: &Conn,
        t: &mut ObjectTiming,
        credit: &mut (dyn FnMut(u64) + Send),
    ) {
        let mut b = Request::get(object.url(self.pool.scheme)).header("user-agent", "mewa-loader");
        if let Some(n) = self.iw_ask(conn) {
            b = b.header(mewa_client::iw::HEADER, n);
        }
        if let Some(p) = self.priority.get(&object.id) {
            b = b.header("priority", *p);
        }
        let req = match b.body(()) {
            Ok(r) => r,
            Err(e) => {
                t.error = Some(format!("request: {e}"));
                return;
            }
        };
        t.request_us = self.now_us();
        let mut stream = match send.send_request(req).await {
            Ok(s) => s,
            Err(e) => {
                t.error = Some(format!("HTTP/3 request: {e}"));
                return;
            }
        };
        if let Err(e) = stream.finish().await {
            t.error = Some(format!("HTTP/3 request end: {e}"));
            return;
        }
        let resp = match stream.recv_response().await {
            Ok(r) => r,
            Err(e) => {
                t.error = Some(format!("HTTP/3 response: {e}"));
                return;
            }
        };
        self.on_head(resp.status(), resp.headers(), t);
        loop {
            match stream.recv_data().await {
                Ok(Some(chunk)) => {
                    self.on_data(chunk.remaining(), t);
                    credit(chunk.remaining() as u64);
                }
                Ok(None) => break,
                Err(e) => {
                    t.error = Some(format!("HTTP/3 body: {e}"));
                    return;
                }
            }
        }
        self.on_end(t);
    }

    /// The load's connection records; `closed_at` stamps the close of
    /// every connection still open (when the pool closes with the load).
    pub(crate) fn finish(&self, closed_at: Option<u64>) -> Vec<ConnectionTiming> {
        let mut conns = std::mem::take(&mut lock(&self.conns).list);
        if let Some(end) = closed_at {
            for c in &mut conns {
                if c.close_us.is_none() {
                    c.close_us = Some(end);
                }
            }
        }
        conns
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mewa_corpus::Discovery;

    /// Always prefers one slot.
    #[derive(Debug)]
    struct Prefer(usize);

    impl crate::Assign for Prefer {
        fn pick(&self, _object: &Object, _outstanding: &[u64]) -> usize {
            self.0
        }
    }

    fn image(size: u64) -> Object {
        Object {
            id: 7,
            host: "a.example".into(),
            path: "/i.jpg".into(),
            size,
            content_type: "image/jpeg".into(),
            parent: Some(0),
            discovery: Discovery::Html,
            compute_ms: 0,
            status: None,
            think_ms: 0,
            recorded_size: None,
        }
    }

    /// Books with `outstanding` asked of each slot; rates over 65 ms.
    fn books(outstanding: &[u64]) -> Ledger {
        let mut l = Ledger::new(outstanding.len(), Some(65_000));
        for (i, &b) in outstanding.iter().enumerate() {
            l.ask(i, b);
        }
        l
    }

    #[test]
    fn fixed_budget_takes_the_preferred_slot_then_the_emptiest_then_waits() {
        let o = image(50_000);
        let mut l = books(&[10_000, 90_000, 40_000]);
        assert_eq!(
            slot_with_room(&mut l, &Prefer(0), &o, 60_000, None),
            Some(0)
        );
        assert_eq!(
            slot_with_room(&mut l, &Prefer(1), &o, 60_000, None),
            Some(0)
        );
        let mut l = books(&[70_000, 90_000, 60_000]);
        assert_eq!(slot_with_room(&mut l, &Prefer(2), &o, 60_000, None), None);
    }

    #[test]
    fn rate_following_budget_sends_large_objects_to_the_fast_slot() {
        let o = image(500_000);
        // Slot 0 delivered 300 KB in the last 65 ms, slot 1 nothing.
        let mut l = books(&[100_000, 0]);
        l.log_delivery(0, 990_000, 300_000);
        let now = Some(1_000_000);
        assert_eq!(slot_with_room(&mut l, &Prefer(1), &o, 29_200, now), Some(0));
        // Slot 0 full (twice its recent delivery outstanding): the object
        // waits for it rather than crawl on the empty slow slot.
        l.ask(0, 500_000);
        assert_eq!(slot_with_room(&mut l, &Prefer(1), &o, 29_200, now), None);
        // Old deliveries no longer count (the log's pruning is tested in
        // `mewa_model::pull`): no slot has shown it can carry a large leaf,
        // which waits while anything is in flight ...
        let later = Some(2_000_000);
        l.count_off(0, 590_000);
        assert_eq!(l.outstanding(), &[10_000, 0]);
        assert_eq!(slot_with_room(&mut l, &Prefer(0), &o, 29_200, later), None);
        // ... while a small one goes where it finishes first (the empty slot) ...
        assert_eq!(
            slot_with_room(&mut l, &Prefer(0), &image(20_000), 29_200, later),
            Some(1)
        );
        // ... and with nothing in flight any slot takes it.
        l.count_off(0, 10_000);
        assert_eq!(
            slot_with_room(&mut l, &Prefer(1), &o, 29_200, later),
            Some(0)
        );
    }
}
