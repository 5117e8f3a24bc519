//! `mewa accel serve`: the runtime around the pure core. Listeners (HTTP/2
//! and HTTP/1.1 over TLS, HTTP/1.1 and h2c in clear), the request path
//! ([`handle`]), the upstream client ([`upstream`]), the cache
//! ([`crate::cache`]) and the admin listener ([`admin`]).
//!
//! hyper does the HTTP (both versions, both directions) and rustls the TLS;
//! what is ours is the policy: which requests are served, what is fetched
//! from where, what is stored, what is rewritten (docs/ACCEL.md §2).

use std::collections::BTreeSet;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio::net::TcpListener;

use crate::cache::{Cache, DiskError};
use crate::mapping::Scheme;
use crate::site::{Site, SiteConfig, Sites};

pub mod admin;
pub mod body;
pub mod config;
mod fill;
mod handle;
pub mod upstream;

pub use config::{ServeConfig, ServeConfigError};

/// The `Via` pseudonym this proxy adds (RFC 9110 §7.6.3).
pub const VIA: &str = "1.1 mewa-accel";

/// Shared state of a running accelerator.
pub struct Accel {
    sites: Sites,
    /// Per site (by its first host), the site as used for *rewriting*: the
    /// configured one minus hosts disqualified at run time. Serving folded
    /// paths keeps using `sites`, so pages already rewritten keep working.
    fold_sites: RwLock<Vec<(String, Arc<Site>)>>,
    disqualified: RwLock<BTreeSet<String>>,
    cache: Cache,
    /// Fetches in flight, so that concurrent misses make one ([`fill`]).
    fills: fill::Fills,
    /// How long a miss waits for one ([`config::CacheSection::lock_timeout`]).
    lock_timeout: Option<Duration>,
    upstream: Arc<upstream::Upstreams>,
    /// The counters.
    pub metrics: admin::Metrics,
    started: Instant,
}

impl std::fmt::Debug for Accel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Accel").field("sites", &self.sites).finish()
    }
}

/// Why the accelerator cannot start.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The configuration does not validate.
    #[error(transparent)]
    Config(#[from] ServeConfigError),
    /// The certificate or key could not be read.
    #[error("[tls] {path}: {why}")]
    Tls {
        /// The file.
        path: String,
        /// Why.
        why: String,
    },
    /// The cache directory could not be opened.
    #[error(transparent)]
    Disk(#[from] DiskError),
    /// A listener could not be bound.
    #[error("listening on {addr}: {error}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// The error.
        error: std::io::Error,
    },
    /// Anything else.
    #[error("{0}")]
    Other(String),
}

impl Accel {
    /// The state for `config` (sites validated, cache opened, upstream
    /// client built).
    pub fn new(config: &ServeConfig) -> Result<Arc<Accel>, ServeError> {
        config.check()?;
        let sites = config.sites()?;
        let (cache, errors) = Cache::new(config.cache.limits())?;
        for e in errors {
            tracing::warn!("accel cache: {e}; removed");
        }
        let upstream =
            Arc::new(upstream::Upstreams::new(config.upstream.clone()).map_err(ServeError::Other)?);
        let fold_sites = sites.iter().map(|s| (first_host(s), s.clone())).collect();
        Ok(Arc::new(Accel {
            sites,
            fold_sites: RwLock::new(fold_sites),
            disqualified: RwLock::new(BTreeSet::new()),
            cache,
            fills: fill::Fills::default(),
            lock_timeout: config.cache.lock_timeout(),
            upstream,
            metrics: admin::Metrics::default(),
            started: Instant::now(),
        }))
    }

    /// The configured sites.
    pub fn sites(&self) -> &Sites {
        &self.sites
    }

    /// The cache.
    pub fn cache(&self) -> &Cache {
        &self.cache
    }

    /// Hosts no longer folded because their responses set cookies.
    pub fn disqualified(&self) -> BTreeSet<String> {
        self.disqualified
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// The site to rewrite `site`'s documents with.
    fn fold_site(&self, site: &Arc<Site>) -> Arc<Site> {
        let key = first_host(site);
        self.fold_sites
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .find(|(k, _)| *k == key)
            .map_or_else(|| site.clone(), |(_, s)| s.clone())
    }

    /// Stops folding `host` into any site: its responses set cookies, and a
    /// folded response's cookies would land in the page's own jar
    /// (docs/ACCEL.md, "Cookies").
    fn disqualify(&self, host: &str) {
        {
            let mut d = self.disqualified.write().unwrap_or_else(|p| p.into_inner());
            if !d.insert(host.to_owned()) {
                return;
            }
        }
        tracing::warn!(
            "accel: {host} sets cookies; its Set-Cookie fields are removed and it is no longer folded into new documents"
        );
        let d = self.disqualified();
        let mut fs = self.fold_sites.write().unwrap_or_else(|p| p.into_inner());
        for site in self.sites.iter() {
            let cfg = SiteConfig {
                hosts: site.hosts().map(str::to_owned).collect(),
                fold: site
                    .folded_hosts()
                    .filter(|h| !d.contains(*h))
                    .map(str::to_owned)
                    .collect(),
                prefix: site.prefix().to_owned(),
            };
            match Site::new(&cfg) {
                Ok(s) => {
                    let key = first_host(site);
                    if let Some(e) = fs.iter_mut().find(|(k, _)| *k == key) {
                        e.1 = Arc::new(s);
                    }
                }
                Err(e) => tracing::error!("accel: rebuilding a site without {host}: {e}"),
            }
        }
    }
}

fn first_host(site: &Site) -> String {
    site.hosts().next().unwrap_or_default().to_owned()
}

/// Reads the `[tls]` files into a rustls server configuration (ALPN h2,
/// http/1.1).
pub fn tls_config(files: &config::TlsFiles) -> Result<rustls::ServerConfig, ServeError> {
    let err = |path: &std::path::Path, why: String| ServeError::Tls {
        path: path.display().to_string(),
        why,
    };
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(&files.cert)
        .map_err(|e| err(&files.cert, e.to_string()))?
        .collect::<Result<_, _>>()
        .map_err(|e| err(&files.cert, e.to_string()))?;
    if chain.is_empty() {
        return Err(err(&files.cert, "no certificate in the file".into()));
    }
    let key =
        PrivateKeyDer::from_pem_file(&files.key).map_err(|e| err(&files.key, e.to_string()))?;
    let mut c = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(|e| ServeError::Other(e.to_string()))?
    .with_no_client_auth()
    .with_single_cert(chain, key)
    .map_err(|e| {
        err(
            &files.cert,
            format!("certificate and key do not make a pair: {e}"),
        )
    })?;
    c.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(c)
}

/// A bound accelerator, ready to serve.
pub struct Server {
    accel: Arc<Accel>,
    https: Option<(TcpListener, Arc<rustls::ServerConfig>)>,
    http: Option<TcpListener>,
    admin: Option<TcpListener>,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server")
            .field("https", &self.https_addr())
            .field("http", &self.http_addr())
            .field("admin", &self.admin_addr())
            .finish()
    }
}

async fn bind(addr: SocketAddr) -> Result<TcpListener, ServeError> {
    TcpListener::bind(addr)
        .await
        .map_err(|error| ServeError::Bind { addr, error })
}

impl Server {
    /// Builds the state and binds every listener (port 0 picks a free one;
    /// see the `*_addr` methods).
    pub async fn bind(config: &ServeConfig) -> Result<Server, ServeError> {
        let accel = Accel::new(config)?;
        let https = match (config.listen.https, &config.tls) {
            (Some(a), Some(files)) => Some((bind(a).await?, Arc::new(tls_config(files)?))),
            _ => None,
        };
        let http = match config.listen.http {
            Some(a) => Some(bind(a).await?),
            None => None,
        };
        let admin = match config.listen.admin {
            Some(a) => Some(bind(a).await?),
            None => None,
        };
        Ok(Server {
            accel,
            https,
            http,
            admin,
        })
    }

    /// The shared state (metrics, cache).
    pub fn accel(&self) -> &Arc<Accel> {
        &self.accel
    }

    /// Where the HTTPS listener is.
    pub fn https_addr(&self) -> Option<SocketAddr> {
        self.https.as_ref().and_then(|(l, _)| l.local_addr().ok())
    }

    /// Where the clear-text listener is.
    pub fn http_addr(&self) -> Option<SocketAddr> {
        self.http.as_ref().and_then(|l| l.local_addr().ok())
    }

    /// Where the admin listener is.
    pub fn admin_addr(&self) -> Option<SocketAddr> {
        self.admin.as_ref().and_then(|l| l.local_addr().ok())
    }

    /// Serves until `stop` completes.
    pub async fn serve(self, stop: impl Future<Output = ()>) {
        let mut tasks = tokio::task::JoinSet::new();
        if let Some((l, tls)) = self.https {
            tasks.spawn(accept_loop(l, Some(tls), self.accel.clone()));
        }
        if let Some(l) = self.http {
            tasks.spawn(accept_loop(l, None, self.accel.clone()));
        }
        if let Some(l) = self.admin {
            tasks.spawn(admin_loop(l, self.accel.clone()));
        }
        stop.await;
        tasks.shutdown().await;
    }
}

/// The HTTP settings of the public listeners: h2 with browsers' usual
/// concurrency, bounded header lists, and a deadline on HTTP/1.1 heads so
/// an idle half-open client cannot hold a task forever.
fn builder() -> auto::Builder<TokioExecutor> {
    let mut b = auto::Builder::new(TokioExecutor::new());
    b.http1()
        .timer(TokioTimer::new())
        .header_read_timeout(Duration::from_secs(20))
        .max_buf_size(64 * 1024);
    b.http2()
        .timer(TokioTimer::new())
        .max_concurrent_streams(256)
        .max_header_list_size(64 * 1024)
        .keep_alive_interval(Some(Duration::from_secs(30)));
    b
}

async fn accept_loop(
    listener: TcpListener,
    tls: Option<Arc<rustls::ServerConfig>>,
    accel: Arc<Accel>,
) {
    let acceptor = tls.map(tokio_rustls::TlsAcceptor::from);
    let scheme = if acceptor.is_some() {
        Scheme::Https
    } else {
        Scheme::Http
    };
    let mut conns = tokio::task::JoinSet::new();
    loop {
        let (tcp, peer) = match listener.accept().await {
            Ok(x) => x,
            Err(e) => {
                // EMFILE and friends: wait a little rather than spin.
                tracing::warn!("accel: accept: {e}");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let _ = tcp.set_nodelay(true);
        let accel = accel.clone();
        let acceptor = acceptor.clone();
        // Reap finished connection tasks as we go.
        while conns.try_join_next().is_some() {}
        conns.spawn(async move {
            let svc = {
                let accel = accel.clone();
                service_fn(move |req| {
                    let accel = accel.clone();
                    async move {
                        Ok::<_, std::convert::Infallible>(handle::handle(accel, req, scheme).await)
                    }
                })
            };
            let result = match acceptor {
                Some(a) => {
                    let tls =
                        match tokio::time::timeout(Duration::from_secs(10), a.accept(tcp)).await {
                            Ok(Ok(s)) => s,
                            Ok(Err(e)) => {
                                tracing::debug!("accel: TLS from {peer}: {e}");
                                return;
                            }
                            Err(_) => {
                                tracing::debug!("accel: TLS from {peer}: handshake timed out");
                                return;
                            }
                        };
                    // ALPN decided the version: a client that chose h2
                    // must send the h2 preface (RFC 9113 §3.4), and one
                    // that chose http/1.1 (or nothing) speaks HTTP/1.1.
                    let b = if tls.get_ref().1.alpn_protocol() == Some(b"h2") {
                        builder().http2_only()
                    } else {
                        builder().http1_only()
                    };
                    b.serve_connection(TokioIo::new(tls), svc).await
                }
                None => builder().serve_connection(TokioIo::new(tcp), svc).await,
            };
            if let Err(e) = result {
                tracing::debug!("accel: connection from {peer}: {e}");
            }
        });
    }
}

async fn admin_loop(listener: TcpListener, accel: Arc<Accel>) {
    loop {
        let Ok((tcp, _)) = listener.accept().await else {
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        };
        let accel = accel.clone();
        tokio::spawn(async move {
            let svc = service_fn(move |req| {
                let accel = accel.clone();
                async move { Ok::<_, std::convert::Infallible>(admin::handle(accel, req).await) }
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(tcp), svc)
                .await;
        });
    }
}
