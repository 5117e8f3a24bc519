//! A small client of Chromium's DevTools protocol (CDP): start headless
//! Chromium with `--remote-debugging-port=0`, read the WebSocket address it
//! prints on stderr, open a tab and speak CDP over chromiumoxide's
//! WebSocket [`Connection`].
//!
//! Two users: the page tracer ([`crate::tracer`]), one cold load per
//! browser, and the lab's browsing sessions (`mewa lab cellular --browser
//! chromium`), one browser kept across many loads. The lab starts Chromium
//! inside a network namespace (`nsenter … chromium`) and the tracer as
//! another user, which chromiumoxide's own launcher can do neither of, so
//! the caller builds the [`std::process::Command`] and [`Chromium::launch`]
//! only reads the address from it, as chromiumoxide does.
//!
//! Events are kept as raw JSON ([`RawEvent`]). chromiumoxide's typed event
//! decoder follows one protocol revision and drops any event it cannot
//! decode — a newer Chromium adding one enum value (a resource type, a
//! security state) would silently lose requests — whereas callers read only
//! the fields they need and tolerate the rest. Every field read from an
//! answer or an event is external input: nothing here panics on it.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::time::Duration;

use chromiumoxide::cdp::browser_protocol::target::SessionId;
use chromiumoxide::conn::Connection;
use chromiumoxide::error::CdpError;
use chromiumoxide::types::{CallId, EventMessage, Message, Method, MethodId};
use futures_util::StreamExt;
use serde::Deserialize;
use serde_json::{json, Value};

/// Why Chromium could not be started or driven.
#[derive(Debug, thiserror::Error)]
pub enum DevtoolsError {
    /// Chromium did not start or did not offer its DevTools endpoint.
    #[error("starting {}: {message}", path.display())]
    Launch {
        /// The binary.
        path: PathBuf,
        /// What happened, with Chromium's stderr when it wrote any.
        message: String,
    },
    /// Chromium said its sandbox cannot start here.
    #[error("Chromium's sandbox cannot start on this machine: {line}")]
    Sandbox {
        /// Chromium's line that said so.
        line: String,
    },
    /// The DevTools connection failed, Chromium refused a command, or an
    /// answer lacked a field it must have.
    #[error("DevTools protocol: {0}")]
    Protocol(String),
}

/// The line of Chromium's stderr that says its sandbox cannot start, if
/// one does: no usable namespace sandbox (user namespaces off, or refused
/// by AppArmor or a container), a SUID helper set up wrong, or root.
pub fn sandbox_failure(stderr: &str) -> Option<&str> {
    const SIGNS: [&str; 4] = [
        "No usable sandbox",
        "without --no-sandbox is not supported",
        "SUID sandbox helper binary",
        "Failed to move to new namespace",
    ];
    stderr
        .lines()
        .find(|l| SIGNS.iter().any(|s| l.contains(s)))
        .map(str::trim)
}

/// The most of Chromium's stderr kept for an error message (it logs many
/// harmless lines, D-Bus ones on a server).
const STDERR_KEPT: usize = 64 * 1024;

/// How long a closing browser may take before it is killed.
const CLOSE_WAIT: Duration = Duration::from_secs(3);

/// A running Chromium: the process and its DevTools WebSocket address. The
/// process is killed when this is dropped.
#[derive(Debug)]
pub struct Chromium {
    child: tokio::process::Child,
    ws_url: String,
}

impl Chromium {
    /// Starts `cmd` (Chromium, or a wrapper that execs it, with
    /// `--remote-debugging-port=0` among its arguments; `path` names the
    /// browser in errors) and waits, until `deadline`, for the DevTools
    /// address it prints on stderr; the rest of stderr is then read and
    /// dropped on the current runtime, so that Chromium never blocks on a
    /// full pipe. Standard input and output are closed.
    pub async fn launch(
        mut cmd: std::process::Command,
        path: &Path,
        deadline: tokio::time::Instant,
    ) -> Result<Chromium, DevtoolsError> {
        use tokio::io::AsyncBufReadExt;
        let launch_err = |message: String| DevtoolsError::Launch {
            path: path.to_path_buf(),
            message,
        };
        cmd.stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped());
        let mut cmd = tokio::process::Command::from(cmd);
        cmd.kill_on_drop(true);
        let mut child = cmd.spawn().map_err(|e| launch_err(e.to_string()))?;
        let Some(stderr) = child.stderr.take() else {
            return Err(launch_err(
                "no stderr to read the DevTools address from".into(),
            ));
        };
        let mut lines = tokio::io::BufReader::new(stderr);
        let mut said = String::new();
        let mut line = String::new();
        let failed = loop {
            line.clear();
            match tokio::time::timeout_at(deadline, lines.read_line(&mut line)).await {
                Err(_) => break "no DevTools address before the timeout".to_string(),
                Ok(Err(e)) => break format!("reading its output: {e}"),
                Ok(Ok(0)) => break "it exited".to_string(),
                Ok(Ok(_)) => {}
            }
            if let Some((_, ws)) = line.rsplit_once("listening on ") {
                let ws = ws.trim();
                if ws.starts_with("ws") && ws.contains("devtools/browser") {
                    let ws_url = ws.to_string();
                    tokio::spawn(async move {
                        let _ = tokio::io::copy(&mut lines, &mut tokio::io::sink()).await;
                    });
                    return Ok(Chromium { child, ws_url });
                }
            }
            if said.len() < STDERR_KEPT {
                said.push_str(&line);
            }
        };
        let _ = child.start_kill();
        let status = child.wait().await;
        if let Some(l) = sandbox_failure(&said) {
            return Err(DevtoolsError::Sandbox {
                line: l.to_string(),
            });
        }
        let status = status.map_or_else(|e| e.to_string(), |s| s.to_string());
        Err(launch_err(format!(
            "{failed} ({status}); its output:\n{}",
            said.trim_end()
        )))
    }

    /// The browser's DevTools WebSocket address.
    pub fn ws_url(&self) -> &str {
        &self.ws_url
    }

    /// Connects to the browser's DevTools endpoint; every later call must
    /// finish before `deadline` ([`Cdp::set_deadline`] moves it). Connect
    /// from the network namespace Chromium runs in: it listens on
    /// 127.0.0.1 there.
    pub async fn connect(&self, deadline: tokio::time::Instant) -> Result<Cdp, DevtoolsError> {
        match tokio::time::timeout_at(deadline, Connection::<RawEvent>::connect(&self.ws_url)).await
        {
            Ok(Ok(conn)) => Ok(Cdp {
                conn,
                queued: VecDeque::new(),
                deadline,
            }),
            Ok(Err(e)) => Err(DevtoolsError::Protocol(format!(
                "connecting to {}: {e}",
                self.ws_url
            ))),
            Err(_) => Err(DevtoolsError::Protocol(format!(
                "connecting to {}: timed out",
                self.ws_url
            ))),
        }
    }

    /// Closes the browser: `Browser.close` when there is a connection,
    /// then waits for the process; kills it when it does not exit in time.
    pub async fn close(&mut self, cdp: Option<&mut Cdp>) {
        if let Some(cdp) = cdp {
            cdp.deadline = tokio::time::Instant::now() + CLOSE_WAIT;
            let _ = cdp.call("Browser.close", None, json!({})).await;
        }
        if !matches!(
            tokio::time::timeout(CLOSE_WAIT, self.child.wait()).await,
            Ok(Ok(_))
        ) {
            let _ = self.child.kill().await;
        }
    }
}

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
