//! Starting Chromium and finding its DevTools endpoint: the caller builds
//! the command (inside a network namespace, or as another user — which
//! chromiumoxide's own launcher can do neither of) and [`Chromium::launch`]
//! reads the WebSocket address Chromium prints on stderr, as chromiumoxide
//! does.

use std::path::Path;
use std::time::Duration;

use serde_json::json;

use crate::cdp::{Cdp, RawEvent};
use crate::DevtoolsError;
use chromiumoxide::conn::Connection;

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
            Ok(Ok(conn)) => Ok(Cdp::new(conn, deadline)),
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
            cdp.set_deadline(tokio::time::Instant::now() + CLOSE_WAIT);
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
