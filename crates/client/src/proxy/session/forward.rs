//! Sending a request on the session's connections and handing its
//! response back ([`Session::forward`], [`Session::send`]): the request is
//! placed, carries the connection's initial-window ask on its first
//! request, starts the prefetch once the document's request is out, and
//! its response body is counted off the connection as it passes.
//!
//! Apart from placement (which connection) and the prefetch (what else to
//! ask for) because it is the one path every request takes to the origin,
//! the browser's and the prefetch's alike.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use http::{Request, Response};
use http_body_util::BodyExt;
use hyper::body::Incoming;

use super::counted::Counted;
use super::document::{redirects_elsewhere, LiftOnDrop};
use super::placement::Placement;
use super::Session;
use crate::proxy::{asks_for_document, ProxyBody};

impl Session {
    /// Places `req` ([`Session::place`]), sends it, and returns the
    /// response with its body counted off the connection as it passes.
    pub async fn forward(
        self: &Arc<Self>,
        url: &str,
        on_first: bool,
        held: bool,
        req: Request<ProxyBody>,
    ) -> Result<Response<ProxyBody>, String> {
        self.forward_as(url, on_first, held, false, req).await
    }

    /// [`Session::forward`]; `after_document`: placed on the first
    /// connection, the request waits for the document's response head.
    pub(super) async fn forward_as(
        self: &Arc<Self>,
        url: &str,
        on_first: bool,
        held: bool,
        after_document: bool,
        req: Request<ProxyBody>,
    ) -> Result<Response<ProxyBody>, String> {
        let Placement { slot, mut credit } = self.place(url, on_first, held).await;
        if after_document && slot == 0 {
            self.wait_for_document_head().await;
        }
        // The session's first request is its document: the prefetch
        // starts once that is on its way, so the document goes first.
        // A document (what a browser asks for with `Accept: text/html`)
        // that is not a redirect: its end opens the prefetch's budget. The
        // first request of a page is often a redirect; the document then
        // comes a round trip later, and the prefetch must not fill the link
        // before it.
        let asks_document = asks_for_document(req.headers());
        // Lifted when the head comes, and as well when the request fails
        // or the browser gives it up (dropped): images never wait for a
        // document that will not come.
        let _head = asks_document.then(|| LiftOnDrop(&self.document_head));
        let resp = self
            .send_then(slot, req, || {
                if asks_document {
                    let _ = self.document_sent.set(Instant::now());
                }
                self.kick_prefetch()
            })
            .await?;
        let document = asks_document && !resp.status().is_redirection();
        if asks_document && redirects_elsewhere(resp.status(), resp.headers(), &self.host) {
            tracing::debug!(
                "proxy: {}: the document moves to another host; the prefetch's budget lifts",
                self.page_url
            );
            self.page.document_done();
        }
        if document {
            tracing::debug!(
                "proxy: {}: document's response head after {:?} (since the session opened)",
                self.page_url,
                self.opened.elapsed()
            );
        }
        let len = resp
            .headers()
            .get(http::header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok());
        if let (Some(len), Some(c)) = (len, &mut credit) {
            c.resize(len);
        }
        let (parts, body) = resp.into_parts();
        Ok(Response::from_parts(
            parts,
            Counted::new(body, credit, document.then(|| self.page.clone())).boxed(),
        ))
    }

    /// Sends `req` (absolute URI: HTTP/2 takes the authority from it) on
    /// connection `i`. The connection counts the request as outstanding
    /// until its response head arrives: what "least loaded" compares for
    /// objects the hint does not list.
    pub async fn send(
        &self,
        i: usize,
        req: Request<ProxyBody>,
    ) -> Result<Response<Incoming>, String> {
        self.send_then(i, req, || {}).await
    }

    /// [`Session::send`], calling `sent` once the request has been handed
    /// to the connection (before its response comes).
    async fn send_then(
        &self,
        i: usize,
        mut req: Request<ProxyBody>,
        sent: impl FnOnce(),
    ) -> Result<Response<Incoming>, String> {
        // The connection's first request carries its initial window.
        let ask = self
            .iw_ask
            .get(i)
            .map_or(0, |a| a.swap(0, Ordering::Relaxed));
        if ask > 0 {
            req.headers_mut()
                .insert(crate::iw::HEADER, http::HeaderValue::from(ask));
        }
        if let Ok(mut t) = self.last_used.lock() {
            *t = Instant::now();
        }
        let Some(conn) = self.conns.get(i) else {
            return Err(format!("no connection {i}"));
        };
        let mut conn = conn.clone();
        if let Some(o) = self.in_flight.get(i) {
            o.fetch_add(1, Ordering::Relaxed);
        }
        if let Some(o) = self.sent.get(i) {
            o.fetch_add(1, Ordering::Relaxed);
        }
        let r = async {
            conn.ready().await.map_err(|e| e.to_string())?;
            let response = conn.send_request(req);
            sent();
            response.await.map_err(|e| e.to_string())
        }
        .await;
        if let Some(o) = self.in_flight.get(i) {
            o.fetch_sub(1, Ordering::Relaxed);
        }
        r
    }
}
