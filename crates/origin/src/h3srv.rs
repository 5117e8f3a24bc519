//! HTTP/3 over QUIC: the same [`respond`] behind h3 + quinn.

use std::sync::Arc;

use bytes::Bytes;
use http::Response;
use mewa_corpus::Scheme;
use tokio::task::JoinSet;

use crate::iw::{with_grant, ConnWindow, IwFactory, IwPolicy, QuicSlot};
use crate::quic_cc::QuicCongestion;
use crate::respond::{respond, HttpOptions};
use crate::store::Store;

/// What a QUIC connection needs to grant initial windows: its own
/// controller (the origin's, wrapped in [`crate::iw::IwController`] on a
/// slot of its own), hence its own server configuration.
#[derive(Clone)]
pub(crate) struct QuicIw {
    /// The endpoint's configuration.
    pub base: quinn::ServerConfig,
    /// The controller every connection gets.
    pub inner: QuicCongestion,
    /// What is granted.
    pub policy: Arc<IwPolicy>,
}

/// Accepts QUIC connections until the endpoint closes.
pub(crate) async fn accept_quic(
    endpoint: quinn::Endpoint,
    store: Arc<Store>,
    http: HttpOptions,
    iw: Option<QuicIw>,
) {
    let http = Arc::new(http);
    let mut conns = JoinSet::new();
    loop {
        tokio::select! {
            inc = endpoint.accept() => {
                let Some(inc) = inc else { break };
                let (store, http) = (store.clone(), http.clone());
                let (connecting, window) = match &iw {
                    None => (inc.accept(), None),
                    Some(q) => {
                        let slot = Arc::new(QuicSlot::default());
                        let mut tc = quinn::TransportConfig::default();
                        tc.congestion_controller_factory(Arc::new(IwFactory {
                            inner: q.inner.clone(),
                            slot: slot.clone(),
                        }));
                        let mut sc = q.base.clone();
                        sc.transport_config(Arc::new(tc));
                        let w = Arc::new(ConnWindow::quic(slot, q.policy.clone()));
                        (inc.accept_with(Arc::new(sc)), Some(w))
                    }
                };
                let Ok(connecting) = connecting else { continue };
                conns.spawn(async move {
                    if let Ok(conn) = connecting.await {
                        serve_conn(conn, store, http, window).await;
                    }
                });
            }
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
        }
    }
}

async fn serve_conn(
    conn: quinn::Connection,
    store: Arc<Store>,
    http: Arc<HttpOptions>,
    window: Option<Arc<ConnWindow>>,
) {
    let Ok(mut h3c) =
        h3::server::Connection::<_, Bytes>::new(h3_quinn::Connection::new(conn)).await
    else {
        return;
    };
    let mut reqs = JoinSet::new();
    loop {
        tokio::select! {
            r = h3c.accept() => match r {
                Ok(Some(resolver)) => {
                    let (store, http, window) = (store.clone(), http.clone(), window.clone());
                    reqs.spawn(async move {
                        let Ok((req, mut stream)) = resolver.resolve_request().await else {
                            return;
                        };
                        let wait = crate::respond::think_time(&store, &req, &http);
                        if !wait.is_zero() {
                            tokio::time::sleep(wait).await;
                        }
                        let resp = respond(&store, Scheme::Https, &req, &http);
                        let (parts, body) = with_grant(&window, &req, resp).into_parts();
                        if stream.send_response(Response::from_parts(parts, ())).await.is_err() {
                            return;
                        }
                        if !body.is_empty() && stream.send_data(body).await.is_err() {
                            return;
                        }
                        let _ = stream.finish().await;
                    });
                }
                Ok(None) | Err(_) => break,
            },
            Some(_) = reqs.join_next(), if !reqs.is_empty() => {}
        }
    }
    // Let responses in flight finish before the connection is dropped.
    while reqs.join_next().await.is_some() {}
}
