//! Opening a session ([`Session::open`]): ask the edge for the host with
//! the hint request, plan n, open the n connections to the origin while
//! the URL list the compact UDP answer left out comes over TCP, and set up
//! what the plan decides for the session's life: the object → connection
//! map, the page's prefetch budget, the rate-following books, and seed
//! 001's initial window per connection.
//!
//! Apart from the rest of the session because everything the hint decides
//! is decided here, once; the other parts only follow what opening left.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU32, AtomicU64};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::connect::connect;
use super::prefetch::{PendingPrefetch, Urls};
use super::prefetch_budget::{bdp_bytes, PagePrefetch};
use super::{Session, Timeline};
use crate::advice::{plan, Fallback, Radio};
use crate::dispatch::Dispatcher;
use crate::proxy::{pulls, ProxyConfig};
use crate::resolve::{fetch_url_list, resolve, resolve_address, Resolved};

/// Why a session could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    /// The edge could not be asked, or had no address for the host.
    #[error("resolving {host}: {why}")]
    Resolve {
        /// The host.
        host: String,
        /// Why.
        why: String,
    },
    /// No connection to the origin could be opened.
    #[error("connecting to {addr}: {why}")]
    Connect {
        /// The origin.
        addr: SocketAddr,
        /// Why.
        why: String,
    },
}

impl Session {
    /// Asks the edge for `host` and the hint of `page_url`, plans, and opens
    /// the planned number of h2c connections (at least one).
    pub async fn open(
        cfg: &ProxyConfig,
        host: &str,
        page_url: &str,
    ) -> Result<Session, SessionError> {
        let r = lookup(cfg, host, page_url, true).await?;
        Session::open_resolved(cfg, host, page_url, &r).await
    }

    /// [`Session::open`] with the edge's answer already in hand.
    pub async fn open_resolved(
        cfg: &ProxyConfig,
        host: &str,
        page_url: &str,
        r: &Resolved,
    ) -> Result<Session, SessionError> {
        let t0 = Instant::now();
        let ip = r
            .addrs
            .first()
            .copied()
            .ok_or_else(|| SessionError::Resolve {
                host: host.to_string(),
                why: "the edge gave no address".into(),
            })?;
        let https = page_url.starts_with("https://");
        let (scheme, port) = if https {
            ("https", cfg.origin_tls_port)
        } else {
            ("http", cfg.origin_port)
        };
        let addr = SocketAddr::new(ip, port);
        let tls = match (https, &cfg.upstream_tls) {
            (false, _) => None,
            (true, Some(t)) => Some((t.clone(), host.to_string())),
            (true, None) => {
                return Err(SessionError::Connect {
                    addr,
                    why: "an https:// page needs TLS towards the origin (upstream_tls)".into(),
                })
            }
        };
        let plan = match &r.hint {
            _ if !cfg.use_hints => Err(Fallback::Disabled),
            Ok(h) => plan(
                h,
                page_url,
                Radio {
                    bandwidth_bps: cfg.radio_bandwidth_bps,
                    rtt_s: cfg.radio_rtt.map_or_else(
                        || {
                            crate::rate::plan_rtt_s(
                                cfg.recent_rtt.map(|d| d.as_secs_f64()),
                                r.rtt.as_secs_f64(),
                            )
                        },
                        |d| d.as_secs_f64(),
                    ),
                },
                mewa_hint::now_unix_s(),
            ),
            Err(f) => Err(f.clone()),
        };
        let n = plan
            .as_ref()
            .map_or(1, |p| p.n.min(cfg.max_connections).max(1) as usize);
        // The URL list the compact UDP answer left out, asked of the edge
        // over TCP while the connections to the origin open.
        let late = match &plan {
            Ok(_) if cfg.prefetch && r.urls_over_tcp => {
                let (edge, host, page, t) = (
                    cfg.edge,
                    host.to_string(),
                    page_url.to_string(),
                    cfg.timeout,
                );
                Some(tokio::spawn(async move {
                    let r = fetch_url_list(edge, &host, &page, t).await;
                    (r, t0.elapsed())
                }))
            }
            _ => None,
        };
        let mut opening = tokio::task::JoinSet::new();
        for _ in 0..n {
            opening.spawn(connect(addr, cfg.timeout, tls.clone()));
        }
        let mut conns = Vec::with_capacity(n);
        let mut rtts = Vec::with_capacity(n);
        let mut last_err = None;
        let mut handshake = Duration::MAX;
        while let Some(c) = opening.join_next().await {
            match c {
                Ok(Ok((c, rtt))) => {
                    conns.push(c);
                    rtts.push(rtt);
                    handshake = handshake.min(rtt);
                }
                Ok(Err(e)) => last_err = Some(e),
                Err(e) => last_err = Some(format!("connecting task: {e}")),
            }
        }
        let connected = t0.elapsed();
        if conns.is_empty() {
            if let Some(l) = &late {
                l.abort();
            }
            return Err(SessionError::Connect {
                addr,
                why: last_err.unwrap_or_else(|| "no connection".into()),
            });
        }
        let (map, mask) = match &plan {
            Ok(p) => {
                // Largest first: on a hash collision the larger object wins.
                let mut m = HashMap::with_capacity(p.assignment.len());
                for (&(h, c), &size) in p.assignment.iter().zip(&p.sizes) {
                    m.entry(h).or_insert((c, size));
                }
                (m, p.hash_mask)
            }
            Err(_) => (HashMap::new(), 0),
        };
        let prefetching =
            matches!(&plan, Ok(p) if cfg.prefetch && (!p.urls.is_empty() || late.is_some()));
        // The round trip for the prefetch's budgets: the TCP handshake's,
        // not the DNS exchange's, which pays the radio's promotion when
        // the phone was idle (400 ms on LTE, 2 s on 3G).
        let rtt_s = handshake.as_secs_f64();
        let bdp = match &plan {
            Ok(p) => Some(bdp_bytes(p.bandwidth_bps, rtt_s)),
            Err(_) => None,
        };
        let has_document = prefetching && cfg.first_flight_budget;
        let hold = bdp.filter(|_| cfg.image_hold);
        let hold_elsewhere = bdp.filter(|_| cfg.hold_other_hosts_images);
        let sizes: HashMap<u32, u64> = match &r.hint {
            Ok(h) if plan.is_ok() => h
                .origins
                .iter()
                .flat_map(|o| o.objects.iter())
                .filter_map(|x| x.size().map(|s| (x.url_hash, s)))
                .collect(),
            _ => HashMap::new(),
        };
        let page = PagePrefetch::new(
            bdp,
            hold,
            hold_elsewhere,
            conns.len(),
            has_document,
            (sizes, mask),
            cfg.max_prefetches,
        );
        tracing::debug!(
            "proxy: {page_url}: {} connections after {:?}, handshake RTT {:?}, BDP {:?} B",
            conns.len(),
            t0.elapsed(),
            handshake,
            bdp
        );
        let pull = match &plan {
            Ok(p) if pulls(cfg.dispatch, prefetching) && conns.len() > 1 => {
                let rtt = Duration::try_from_secs_f64(p.radio_rtt_s + p.wired_rtt_s)
                    .unwrap_or(Duration::from_millis(100))
                    .max(Duration::from_millis(1));
                Some(Arc::new(Dispatcher::new(conns.len(), Some(rtt))))
            }
            _ => None,
        };
        // Seed 001: each connection's window from the hint's page size,
        // computation latency and α and the connection's own handshake.
        let iw_ask = rtts
            .iter()
            .map(|&rtt| {
                let segments = match &r.hint {
                    Ok(h) if cfg.use_hints && cfg.ask_initial_window => {
                        let c = crate::iw::choose(crate::iw::PageFacts::of_hint(h), rtt);
                        tracing::info!(
                            page = page_url,
                            bytes = c.facts.page_bytes,
                            computation_ms = ?c.facts.computation_ms,
                            alpha = c.facts.alpha,
                            rtt_ms = c.rtt_ms,
                            iw = c.segments,
                            fallback = ?c.fallback,
                            "proxy: initial window"
                        );
                        if c.worth_asking() {
                            c.segments
                        } else {
                            0
                        }
                    }
                    _ => 0,
                };
                AtomicU32::new(segments)
            })
            .collect();
        Ok(Session {
            host: host.to_string(),
            page_url: page_url.to_string(),
            scheme,
            addr,
            iw_ask,
            in_flight: conns.iter().map(|_| AtomicU64::new(0)).collect(),
            sent: conns.iter().map(|_| AtomicU64::new(0)).collect(),
            conns,
            map,
            mask,
            last_used: Mutex::new(Instant::now()),
            pull,
            held: AtomicU64::new(0),
            warm_first: cfg.warm_first,
            timeline: Mutex::new(Timeline {
                connected: Some(connected),
                urls: match &plan {
                    Ok(p) if !p.urls.is_empty() => Some(Duration::ZERO),
                    _ => None,
                },
                answer_bytes: r.answer_bytes,
                urls_over_tcp: late.is_some(),
                urls_error: None,
            }),
            opener: Mutex::new(None),
            pending: Mutex::new(match (&plan, late) {
                (Ok(_), Some(l)) if prefetching => Some(PendingPrefetch {
                    urls: Urls::Later(l),
                    edge: cfg.edge,
                    timeout: cfg.timeout,
                    lookups: cfg.lookups.clone(),
                }),
                (Ok(p), _) if prefetching => Some(PendingPrefetch {
                    urls: Urls::Ready(p.urls.clone()),
                    edge: cfg.edge,
                    timeout: cfg.timeout,
                    lookups: cfg.lookups.clone(),
                }),
                (_, Some(l)) => {
                    l.abort();
                    None
                }
                _ => None,
            }),
            prefetched: Mutex::new(HashMap::new()),
            document_head: tokio::sync::watch::channel(!(prefetching && cfg.images_after_document))
                .0,
            waiting_for_document: AtomicU64::new(0),
            document_sent: std::sync::OnceLock::new(),
            held_bytes: Arc::new(AtomicU64::new(0)),
            prefetch_started: AtomicU64::new(0),
            prefetch_taken: AtomicU64::new(0),
            page,
            opened: t0,
            handshake,
            plan,
        })
    }
}

/// The edge's answer for `host`: with the hint request for `page_url`
/// when the browser asked for a `document`, else the address alone.
pub(in crate::proxy) async fn lookup(
    cfg: &ProxyConfig,
    host: &str,
    page_url: &str,
    document: bool,
) -> Result<Resolved, SessionError> {
    let r = if document {
        resolve(cfg.edge, host, page_url, cfg.timeout).await
    } else {
        // Not a page: no hint request ([`resolve_address`]).
        resolve_address(cfg.edge, host, cfg.timeout).await
    };
    r.map_err(|e| SessionError::Resolve {
        host: host.to_string(),
        why: e.to_string(),
    })
}
