//! Connection groups and one object's fetch over them.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use mewa_model::sync::lock;

use crate::loader::conn::OpenError;
use std::time::{Duration, Instant};

use bytes::{Buf, Bytes};
use http::{HeaderMap, Request, Response};
use http_body_util::{BodyExt, Empty};
use hyper::body::Incoming;
use hyper::client::conn::http1;
use mewa_client::dispatch::Dispatcher;
use mewa_corpus::{Kind, Object};
use mewa_model::pull::Ledger;
use tokio::sync::{OnceCell, Semaphore};
use tokio::task::JoinHandle;

use super::conn::{self, Sender, Target};
use super::{IwAsk, LoadError, LoadOptions};
use crate::record::{Chunk, ConnectionTiming, IwRecord, ObjectTiming, Protocol};

/// A multiplexed connection's sender and its record id.
type MuxSlot = Arc<OnceCell<Result<(Sender, u32), OpenError>>>;

/// The connections objects of one origin group share.
enum Group {
    /// HTTP/2 or HTTP/3: a fixed number of slots, each opened on first use.
    Mux {
        slots: Vec<MuxSlot>,
        /// Bytes requested and not yet received per slot, and their recent
        /// deliveries (for [`super::Assign`] and the pull budget).
        books: Arc<Dispatcher>,
        /// Turns of held leaves under a fixed budget.
        tickets: Tickets,
    },
    /// HTTP/1.1: at most `permits` connections, idle ones kept for reuse.
    H1 {
        permits: Arc<Semaphore>,
        idle: Mutex<Vec<(http1::SendRequest<Empty<Bytes>>, u32)>>,
    },
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
    assign: &dyn super::Assign,
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

/// State one load's fetch tasks share.
pub(crate) struct Shared {
    start: Instant,
    opts: LoadOptions,
    scheme: &'static str,
    tls: Option<Arc<rustls::ClientConfig>>,
    quic: Option<quinn::Endpoint>,
    conns: Mutex<Vec<ConnectionTiming>>,
    drivers: Mutex<Vec<JoinHandle<()>>>,
    groups: Mutex<HashMap<String, Arc<Group>>>,
    /// Hears `(object id, body bytes so far)` of HTML bodies as they
    /// arrive, for discovery while the document streams in.
    progress: Option<tokio::sync::mpsc::UnboundedSender<(u32, u64)>>,
    /// The `priority` header value (RFC 9218) of each object, by id.
    priority: HashMap<u32, &'static str>,
    /// Connections whose first request has yet to ask for this initial
    /// window (segments), by connection id.
    iw_pending: Mutex<HashMap<u32, u32>>,
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

impl Shared {
    pub(crate) fn new(opts: LoadOptions, scheme: &'static str) -> Result<Shared, LoadError> {
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
        Ok(Shared {
            start: Instant::now(),
            opts,
            scheme,
            tls,
            quic,
            conns: Mutex::new(Vec::new()),
            drivers: Mutex::new(Vec::new()),
            groups: Mutex::new(HashMap::new()),
            progress: None,
            priority: HashMap::new(),
            iw_pending: Mutex::new(HashMap::new()),
        })
    }

    /// This load's page facts: where HTML progress goes, and the priority
    /// header of each object.
    pub(crate) fn for_page(
        mut self,
        progress: Option<tokio::sync::mpsc::UnboundedSender<(u32, u64)>>,
        priority: HashMap<u32, &'static str>,
    ) -> Shared {
        self.progress = progress;
        self.priority = priority;
        self
    }

    /// µs since the load started.
    pub(crate) fn now_us(&self) -> u64 {
        self.start.elapsed().as_micros() as u64
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

    fn group(&self, host: &str, addr: SocketAddr) -> Arc<Group> {
        let mux = self.opts.protocol != Protocol::H1;
        let key = if mux && self.opts.coalesce {
            addr.to_string()
        } else {
            format!("{host} {addr}")
        };
        let n = self.opts.connections.max(1);
        let mut groups = lock(&self.groups);
        Arc::clone(groups.entry(key).or_insert_with(|| {
            Arc::new(if mux {
                Group::Mux {
                    slots: (0..n).map(|_| Arc::new(OnceCell::new())).collect(),
                    books: Arc::new(Dispatcher::new(n, self.opts.pull_follow)),
                    tickets: Tickets::default(),
                }
            } else {
                Group::H1 {
                    permits: Arc::new(Semaphore::new(n)),
                    idle: Mutex::new(Vec::new()),
                }
            })
        }))
    }

    /// Opens one connection and records it; returns its sender and id.
    async fn open(&self, host: &str, addr: SocketAddr) -> Result<(Sender, u32), OpenError> {
        let id = {
            let mut conns = lock(&self.conns);
            let id = conns.len() as u32;
            conns.push(ConnectionTiming {
                id,
                host: host.to_string(),
                addr: addr.to_string(),
                protocol: self.opts.protocol,
                tls: self.tls.is_some() || self.quic.is_some(),
                open_us: self.now_us(),
                connected_us: None,
                ready_us: None,
                close_us: None,
                error: None,
                iw: None,
            });
            id
        };
        let target = Target {
            addr,
            host,
            protocol: self.opts.protocol,
            tls: self.tls.as_ref(),
            quic: self.quic.as_ref(),
        };
        let opened = conn::open(target, || self.now_us()).await;
        let mut conns = lock(&self.conns);
        let rec = &mut conns[id as usize];
        match opened {
            Ok(o) => {
                rec.connected_us = Some(o.connected_us);
                rec.ready_us = Some(o.ready_us);
                if let Some(ask) = self.opts.iw {
                    // The handshake's round trip: SYN to SYN-ACK for TCP,
                    // QUIC's own estimate after its handshake.
                    let rtt = o.rtt.unwrap_or_else(|| {
                        Duration::from_micros(o.connected_us.saturating_sub(rec.open_us))
                    });
                    let (asked, fallback) = match ask {
                        IwAsk::Fixed(n) => (Some(n), None),
                        IwAsk::Aware(facts) => {
                            let c = mewa_client::iw::choose(facts, rtt);
                            tracing::debug!(?c, "initial window for connection {id}");
                            (c.worth_asking().then_some(c.segments), c.fallback)
                        }
                    };
                    if let Some(n) = asked {
                        lock(&self.iw_pending).insert(id, n);
                    }
                    rec.iw = Some(IwRecord {
                        asked,
                        rtt_us: rtt.as_micros() as u64,
                        fallback,
                        granted: None,
                    });
                }
                lock(&self.drivers).push(o.driver);
                Ok((o.sender, id))
            }
            Err(e) => {
                rec.error = Some(e.to_string());
                rec.close_us = Some(self.now_us());
                Err(e)
            }
        }
    }

    /// Opens every connection of the root's group now (HTTP/2, HTTP/3).
    pub(crate) async fn preconnect(self: &Arc<Self>, root: &Object) {
        let Some(addr) = self.addr_of(&root.host) else {
            return;
        };
        let group = self.group(&root.host, addr);
        let Group::Mux { slots, .. } = &*group else {
            return;
        };
        let mut set = tokio::task::JoinSet::new();
        for slot in slots {
            let slot = Arc::clone(slot);
            let me = Arc::clone(self);
            let host = root.host.clone();
            set.spawn(async move {
                let _ = slot.get_or_init(|| me.open(&host, addr)).await;
            });
        }
        while set.join_next().await.is_some() {}
    }

    /// Chooses `object`'s slot in a multiplexed group and counts its bytes
    /// as outstanding there. Leaves wait while every slot is at
    /// [`super::LoadOptions::pull_budget`].
    async fn reserve(
        &self,
        object: &Object,
        slots: usize,
        books: &Dispatcher,
        tickets: &Tickets,
    ) -> usize {
        let assign = &*self.opts.assign;
        let held = object.parent.is_some() && !super::WarmFirst::reveals(object);
        let budget = match self.opts.pull_budget {
            Some(b) if held && slots > 1 => b,
            _ => {
                return books.place_now(object.size, |out| {
                    assign.pick(object, out) % out.len().max(1)
                })
            }
        };
        let ticket = tickets.next.fetch_add(1, Ordering::Relaxed);
        let follow = self.opts.pull_follow.is_some();
        books
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
        let mut t = unstarted(&object, self.scheme, discovered_us);
        let Some(addr) = self.addr_of(&object.host) else {
            t.error = Some(format!("no address for host `{}`", object.host));
            return t;
        };
        let group = self.group(&object.host, addr);
        match &*group {
            Group::Mux {
                slots,
                books,
                tickets,
            } => {
                let i = self.reserve(&object, slots.len(), books, tickets).await;
                // Counts the bytes off as they arrive, the rest when the
                // object ends (whole, short or failed).
                let mut credit = books.credit(i, object.size);
                let slot = &slots[i];
                match slot.get_or_init(|| self.open(&object.host, addr)).await {
                    Err(e) => t.error = Some(e.to_string()),
                    Ok((sender, id)) => {
                        t.connection = Some(*id);
                        match sender {
                            Sender::H2(s) => {
                                let mut s = s.clone();
                                if let Err(e) = s.ready().await {
                                    t.error = Some(format!("HTTP/2 connection {id} closed: {e}"));
                                } else {
                                    t.request_us = self.now_us();
                                    match s.send_request(self.request(&object, true, *id)).await {
                                        Ok(resp) => {
                                            self.read_hyper(resp, &mut t, &mut |b| credit.take(b))
                                                .await
                                        }
                                        Err(e) => t.error = Some(format!("HTTP/2 request: {e}")),
                                    }
                                }
                            }
                            Sender::H3(s) => {
                                self.fetch_h3(s.clone(), &object, &mut t, &mut |b| credit.take(b))
                                    .await
                            }
                            Sender::H1(_) => {
                                t.error = Some("HTTP/1.1 in a multiplexed group".into())
                            }
                        }
                    }
                }
                drop(credit);
            }
            Group::H1 { permits, idle } => {
                let Ok(_permit) = Arc::clone(permits).acquire_owned().await else {
                    t.error = Some("connection pool closed".into());
                    return t;
                };
                let reuse = {
                    let mut idle = lock(idle);
                    idle.retain(|(s, _)| !s.is_closed());
                    idle.pop()
                };
                let (mut send, id) = match reuse {
                    Some(c) => c,
                    None => match self.open(&object.host, addr).await {
                        Ok((Sender::H1(s), id)) => (s, id),
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
                t.connection = Some(id);
                if let Err(e) = send.ready().await {
                    t.error = Some(format!("HTTP/1.1 connection {id} closed: {e}"));
                    return t;
                }
                t.request_us = self.now_us();
                match send.send_request(self.request(&object, false, id)).await {
                    Ok(resp) => self.read_hyper(resp, &mut t, &mut |_| {}).await,
                    Err(e) => t.error = Some(format!("HTTP/1.1 request: {e}")),
                }
                if t.end_us.is_some() && !send.is_closed() {
                    lock(idle).push((send, id));
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

    /// The initial window connection `id`'s first request asks for, once.
    fn iw_ask(&self, id: u32) -> Option<u32> {
        lock(&self.iw_pending).remove(&id)
    }

    fn request(&self, object: &Object, absolute: bool, conn: u32) -> Request<Empty<Bytes>> {
        let uri = if absolute {
            object.url(self.scheme)
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
            if let Some(rec) = lock(&self.conns).get_mut(id as usize) {
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
        t: &mut ObjectTiming,
        credit: &mut (dyn FnMut(u64) + Send),
    ) {
        let mut b = Request::get(object.url(self.scheme)).header("user-agent", "mewa-loader");
        if let Some(n) = t.connection.and_then(|id| self.iw_ask(id)) {
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

    /// Closes every connection (stamping `close_us` on those still open)
    /// and returns the connection records.
    pub(crate) fn close_all(&self, end_us: u64) -> Vec<ConnectionTiming> {
        lock(&self.groups).clear();
        for d in lock(&self.drivers).drain(..) {
            d.abort();
        }
        if let Some(ep) = &self.quic {
            ep.close(0u32.into(), b"page loaded");
        }
        let mut conns = std::mem::take(&mut *lock(&self.conns));
        for c in &mut conns {
            if c.close_us.is_none() {
                c.close_us = Some(end_us);
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

    impl super::super::Assign for Prefer {
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
