//! The page's document first: prefetched images placed on the document's
//! connection wait for its response head (or a round trip), and a redirect
//! that sends the document to another host is told from one that stays,
//! so that the prefetch's budget does not wait for a document this
//! session will never see.
//!
//! Apart from the prefetch and the forwarding, which both ask these
//! questions, because the rules are about the document's timing alone and
//! are tested without a connection.

use std::sync::atomic::Ordering;
use std::time::Instant;

use http::StatusCode;

use super::{CountDown, Session};

/// Waits until `came` turns true or `deadline` passes, whichever is first;
/// returns whether the head came. A dropped sender (the session is gone)
/// ends the wait too.
async fn head_or_deadline(
    mut came: tokio::sync::watch::Receiver<bool>,
    deadline: tokio::time::Instant,
) -> bool {
    matches!(
        tokio::time::timeout_at(deadline, came.wait_for(|&c| c)).await,
        Ok(Ok(_))
    )
}

/// Lifts a session's [`Session::document_head`] when dropped.
pub(super) struct LiftOnDrop<'a>(pub(super) &'a tokio::sync::watch::Sender<bool>);

impl Drop for LiftOnDrop<'_> {
    fn drop(&mut self) {
        self.0
            .send_if_modified(|came| !std::mem::replace(came, true));
    }
}

/// Whether a response to the browser's document request sends it to
/// another host: a redirect whose `Location` names a host other than
/// `host` (or that cannot be read). The browser's document then comes
/// through that host's session, where this page's prefetch budget never
/// sees it arrive; the budget must lift at the redirect, or the rest of
/// the page creeps through it (bing.com → cn.bing.com with
/// `first_flight_budget`: 6.1 s against 4.0 s for Chromium alone).
pub(super) fn redirects_elsewhere(
    status: StatusCode,
    headers: &http::HeaderMap,
    host: &str,
) -> bool {
    if !status.is_redirection() {
        return false;
    }
    let Some(loc) = headers.get(http::header::LOCATION) else {
        return false;
    };
    let Ok(loc) = loc.to_str() else {
        return true;
    };
    let absolute = if loc.starts_with("//") {
        format!("http:{loc}")
    } else if loc.starts_with('/') || !loc.contains("://") {
        // A relative reference stays on this host.
        return false;
    } else {
        loc.to_string()
    };
    match http::Uri::try_from(absolute) {
        Ok(uri) => uri
            .authority()
            .is_none_or(|auth| !auth.host().eq_ignore_ascii_case(host)),
        Err(_) => true,
    }
}

impl Session {
    /// Until the document's response head has come on this session, and
    /// at most one round trip (the handshake's) after the document's
    /// request went out; at once when the session has no document to
    /// wait for. An image asked a round trip after the document reaches
    /// the origin a round trip after it: if the origin has the document
    /// ready within that, the document's bytes leave first; if the origin
    /// thinks longer over it (elsoberano.org: 1.1 s), the images use the
    /// link the document leaves idle, as before.
    pub(super) async fn wait_for_document_head(&self) {
        let mut came = self.document_head.subscribe();
        if *came.borrow_and_update() {
            return;
        }
        let sent = self
            .document_sent
            .get()
            .copied()
            .unwrap_or_else(Instant::now);
        let Some(deadline) = sent.checked_add(self.handshake) else {
            return;
        };
        self.waiting_for_document.fetch_add(1, Ordering::Relaxed);
        let _counted = CountDown(&self.waiting_for_document);
        head_or_deadline(came, deadline.into()).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_redirect_elsewhere_is_told_from_one_that_stays() {
        let moved = |status: u16, loc: Option<&[u8]>| {
            let mut h = http::HeaderMap::new();
            if let Some(l) = loc {
                h.insert(
                    http::header::LOCATION,
                    http::HeaderValue::from_bytes(l).unwrap(),
                );
            }
            redirects_elsewhere(StatusCode::from_u16(status).unwrap(), &h, "bing.com")
        };
        assert!(moved(301, Some(b"https://cn.bing.com/")));
        assert!(moved(302, Some(b"//cn.bing.com/x")));
        assert!(moved(302, Some(b"https://user@evil.example:8443/")));
        // Unreadable: the document may come anywhere.
        assert!(moved(302, Some(b"https://bad host/")));
        assert!(moved(302, Some(&[0xff, b'/'][..])));
        // Staying on the host.
        assert!(!moved(301, Some(b"https://BING.com/se")));
        assert!(!moved(302, Some(b"/se")));
        assert!(!moved(302, Some(b"se?q=1")));
        assert!(!moved(302, None));
        assert!(!moved(200, Some(b"https://cn.bing.com/")));
    }

    /// Images on the document's connection go when its head comes, or a
    /// round trip after its request if the origin is slower than that,
    /// or when the session is gone; never later.
    #[tokio::test]
    async fn images_wait_for_the_head_or_the_deadline() {
        let later = |ms| tokio::time::Instant::now() + Duration::from_millis(ms);
        let bounded = |f| tokio::time::timeout(Duration::from_secs(10), f);
        // The head comes first.
        let (tx, rx) = tokio::sync::watch::channel(false);
        let head = tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(20)).await;
            tx.send_replace(true);
            tx
        });
        assert_eq!(bounded(head_or_deadline(rx, later(5_000))).await, Ok(true));
        let tx = head.await.unwrap();
        // Already come: at once, even past the deadline.
        assert_eq!(
            bounded(head_or_deadline(tx.subscribe(), later(0))).await,
            Ok(true)
        );
        // The origin is slower than the round trip: the deadline ends it.
        let (tx, rx) = tokio::sync::watch::channel(false);
        assert_eq!(bounded(head_or_deadline(rx, later(30))).await, Ok(false));
        // The session is gone.
        let rx = tx.subscribe();
        drop(tx);
        assert_eq!(
            bounded(head_or_deadline(rx, later(60_000))).await,
            Ok(false)
        );
    }
}
