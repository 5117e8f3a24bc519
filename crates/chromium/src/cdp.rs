//! A small client of Chromium's DevTools protocol (CDP) over
//! chromiumoxide's WebSocket [`Connection`]: commands and their answers,
//! and events in order, everything before a deadline.
//!
//! Events are kept as raw JSON ([`RawEvent`]). chromiumoxide's typed event
//! decoder follows one protocol revision and drops any event it cannot
//! decode — a newer Chromium adding one enum value (a resource type, a
//! security state) would silently lose requests — whereas callers read only
//! the fields they need and tolerate the rest. Every field read from an
//! answer or an event is external input: nothing here panics on it.

use std::collections::VecDeque;

use chromiumoxide::cdp::browser_protocol::target::SessionId;
use chromiumoxide::conn::Connection;
use chromiumoxide::error::CdpError;
use chromiumoxide::types::{CallId, EventMessage, Message, Method, MethodId};
use futures_util::StreamExt;
use serde::Deserialize;
use serde_json::{json, Value};

use crate::DevtoolsError;

/// A CDP event as JSON: the method, the flat session it came from, and the
/// parameters untouched.
#[derive(Debug, Deserialize)]
pub struct RawEvent {
    /// The event's name, e.g. `Network.responseReceived`.
    pub method: MethodId,
    /// The flat session (tab, frame, worker) it came from; `None` from the
    /// browser itself.
    #[serde(rename = "sessionId", default)]
    pub session_id: Option<String>,
    /// Its parameters.
    #[serde(default)]
    pub params: Value,
}

impl Method for RawEvent {
    fn identifier(&self) -> MethodId {
        self.method.clone()
    }
}

impl EventMessage for RawEvent {
    fn session_id(&self) -> Option<&str> {
        self.session_id.as_deref()
    }
}

/// A minimal CDP client over one WebSocket: commands, their answers, and the
/// events in order, everything before a deadline.
pub struct Cdp {
    conn: Connection<RawEvent>,
    /// Events that arrived while waiting for an answer.
    queued: VecDeque<RawEvent>,
    deadline: tokio::time::Instant,
}

impl std::fmt::Debug for Cdp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cdp")
            .field("queued", &self.queued.len())
            .field("deadline", &self.deadline)
            .finish_non_exhaustive()
    }
}

/// What waiting for the next message gave.
enum Next {
    Msg(Message<RawEvent>),
    TimedOut,
}

/// `Target.setAutoAttach` parameters: child targets (out-of-process iframes,
/// workers) pause until their `Network` is enabled, so no request is missed.
fn auto_attach() -> Value {
    json!({"autoAttach": true, "waitForDebuggerOnStart": true, "flatten": true})
}

impl Cdp {
    /// A client over a connection just made ([`crate::Chromium::connect`]).
    pub(crate) fn new(conn: Connection<RawEvent>, deadline: tokio::time::Instant) -> Cdp {
        Cdp {
            conn,
            queued: VecDeque::new(),
            deadline,
        }
    }

    /// The time every call must finish by.
    pub fn deadline(&self) -> tokio::time::Instant {
        self.deadline
    }

    /// Moves the deadline (a session sets one per load).
    pub fn set_deadline(&mut self, deadline: tokio::time::Instant) {
        self.deadline = deadline;
    }

    /// Forgets the events that arrived while waiting for answers.
    pub fn clear_queued(&mut self) {
        self.queued.clear();
    }

    /// Queues a command; it goes out when the connection is next polled.
    pub fn send(
        &mut self,
        method: &'static str,
        session: Option<&str>,
        params: Value,
    ) -> Result<CallId, DevtoolsError> {
        self.conn
            .submit_command(method.into(), session.map(SessionId::new), params)
            .map_err(|e| DevtoolsError::Protocol(format!("{method}: {e}")))
    }

    /// The next message before `until` (and the deadline). Messages that
    /// are not JSON of the CDP shape are skipped.
    async fn next(&mut self, until: tokio::time::Instant) -> Result<Next, DevtoolsError> {
        let until = until.min(self.deadline);
        loop {
            match tokio::time::timeout_at(until, self.conn.next()).await {
                Err(_) => return Ok(Next::TimedOut),
                Ok(None) => {
                    return Err(DevtoolsError::Protocol(
                        "Chromium closed the DevTools connection (crashed?)".into(),
                    ))
                }
                Ok(Some(Ok(m))) => return Ok(Next::Msg(m)),
                Ok(Some(Err(CdpError::InvalidMessage(..)))) => {}
                Ok(Some(Err(e))) => return Err(DevtoolsError::Protocol(e.to_string())),
            }
        }
    }

    /// Sends a command and waits for its answer, queueing events meanwhile.
    /// `None` when the deadline passed first.
    pub async fn call(
        &mut self,
        method: &'static str,
        session: Option<&str>,
        params: Value,
    ) -> Result<Option<Value>, DevtoolsError> {
        let id = self.send(method, session, params)?;
        loop {
            match self.next(self.deadline).await? {
                Next::TimedOut => return Ok(None),
                Next::Msg(Message::Response(r)) if r.id == id => {
                    if let Some(e) = r.error {
                        return Err(DevtoolsError::Protocol(format!(
                            "{method}: {} (code {})",
                            e.message, e.code
                        )));
                    }
                    return Ok(Some(r.result.unwrap_or(Value::Null)));
                }
                // Answers to commands sent without waiting.
                Next::Msg(Message::Response(_)) => {}
                Next::Msg(Message::Event(ev)) => self.queued.push_back(ev),
            }
        }
    }

    /// The next event before `until` (and the deadline): queued ones first.
    pub async fn event(
        &mut self,
        until: tokio::time::Instant,
    ) -> Result<Option<RawEvent>, DevtoolsError> {
        if let Some(ev) = self.queued.pop_front() {
            return Ok(Some(ev));
        }
        loop {
            match self.next(until).await? {
                Next::TimedOut => return Ok(None),
                Next::Msg(Message::Event(ev)) => return Ok(Some(ev)),
                Next::Msg(Message::Response(_)) => {}
            }
        }
    }

    /// Opens a blank tab and attaches to it (a flat session) with `Page`
    /// and `Network` enabled, the HTTP cache off (every load fetches every
    /// object; open sockets are not affected) and auto-attach on, so that
    /// out-of-process iframes and workers report their requests too (pass
    /// their `Target.attachedToTarget` events to [`Cdp::follow_child`]).
    /// Returns the tab's session id; `None` when the deadline passed.
    pub async fn open_uncached_tab(&mut self) -> Result<Option<String>, DevtoolsError> {
        let Some(target) = self
            .call("Target.createTarget", None, json!({"url": "about:blank"}))
            .await?
        else {
            return Ok(None);
        };
        let target_id = field(&target, "targetId", "Target.createTarget")?;
        let Some(attached) = self
            .call(
                "Target.attachToTarget",
                None,
                json!({"targetId": target_id, "flatten": true}),
            )
            .await?
        else {
            return Ok(None);
        };
        let tab = field(&attached, "sessionId", "Target.attachToTarget")?;
        for (method, params) in [
            ("Page.enable", json!({})),
            ("Network.enable", json!({})),
            ("Network.setCacheDisabled", json!({"cacheDisabled": true})),
            ("Target.setAutoAttach", auto_attach()),
        ] {
            if self.call(method, Some(&tab), params).await?.is_none() {
                return Ok(None);
            }
        }
        Ok(Some(tab))
    }

    /// For a `Target.attachedToTarget` event's parameters: the child's
    /// session id, after asking it (without waiting) to report its
    /// requests with the cache off as the tab does, to auto-attach its own
    /// children, and to run. `None` if the event names no session.
    pub fn follow_child(&mut self, params: &Value) -> Result<Option<String>, DevtoolsError> {
        let Some(child) = params.get("sessionId").and_then(Value::as_str) else {
            return Ok(None);
        };
        for (m, p) in [
            ("Network.enable", json!({})),
            ("Network.setCacheDisabled", json!({"cacheDisabled": true})),
            ("Target.setAutoAttach", auto_attach()),
            ("Runtime.runIfWaitingForDebugger", json!({})),
        ] {
            self.send(m, Some(child), p)?;
        }
        Ok(Some(child.to_string()))
    }
}

/// A string field of a command's answer, or an error naming the command.
pub fn field(v: &Value, name: &str, what: &str) -> Result<String, DevtoolsError> {
    v.get(name)
        .and_then(Value::as_str)
        .map(str::to_string)
        .ok_or_else(|| DevtoolsError::Protocol(format!("{what} answered without `{name}`")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_without_a_field_are_errors_not_panics() {
        let v = json!({"targetId": 7});
        let e = field(&v, "targetId", "Target.createTarget").unwrap_err();
        assert!(e.to_string().contains("without `targetId`"), "{e}");
        assert_eq!(
            field(&json!({"sessionId": "S"}), "sessionId", "x").unwrap(),
            "S"
        );
    }
}
