//! HTTP/3 over QUIC: the same [`respond`] behind h3 + quinn.

use std::sync::Arc;

use bytes::Bytes;
use http::Response;
use mewa_corpus::Scheme;
use tokio::task::JoinSet;

use crate::respond::{respond, HttpOptions};
use crate::store::Store;

/// Accepts QUIC connections until the endpoint closes.
pub(crate) async fn accept_quic(endpoint: quinn::Endpoint, store: Arc<Store>, http: HttpOptions) {
    let http = Arc::new(http);
    let mut conns = JoinSet::new();
    loop {
        tokio::select! {
            inc = endpoint.accept() => {
                let Some(inc) = inc else { break };
                let (store, http) = (store.clone(), http.clone());
                conns.spawn(async move {
                    if let Ok(conn) = inc.await {
                        serve_conn(conn, store, http).await;
                    }
                });
            }
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
        }
    }
}

async fn serve_conn(conn: quinn::Connection, store: Arc<Store>, http: Arc<HttpOptions>) {
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
                    let (store, http) = (store.clone(), http.clone());
                    reqs.spawn(async move {
                        let Ok((req, mut stream)) = resolver.resolve_request().await else {
                            return;
                        };
                        let wait = crate::respond::think_time(&store, &req, &http);
                        if !wait.is_zero() {
                            tokio::time::sleep(wait).await;
                        }
                        let (parts, body) = respond(&store, Scheme::Https, &req, &http).into_parts();
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
