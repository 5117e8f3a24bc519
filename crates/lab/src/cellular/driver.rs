//! The browser of one session, whichever it is: the built-in loader, which
//! keeps its connections across loads ([`mewa_loader::Session`]) as a
//! browser does, or headless Chromium, one process and one profile for the
//! session, driven over DevTools ([`mewa_chromium::ChromiumSession`]).

use std::path::PathBuf;
use std::time::Duration;

use mewa_chromium::ChromiumSession;
use mewa_corpus::Page;
use mewa_loader::record::Protocol;
use mewa_loader::{LoadOptions, Session};

use crate::bed::BedError;
use crate::experiment::ExperimentError;

/// The browser of one session, before it starts.
#[derive(Debug)]
pub enum SessionBrowser {
    /// The built-in loader with these options.
    Loader(LoadOptions),
    /// Headless Chromium started with `cmd`
    /// ([`crate::browser::session_command`]; `path` names it in errors),
    /// over `protocol`, each load within `timeout`.
    Chromium {
        /// The command, in the client's namespace.
        cmd: std::process::Command,
        /// The binary.
        path: PathBuf,
        /// The protocol it was told to speak.
        protocol: Protocol,
        /// The longest a load may take.
        timeout: Duration,
    },
}

/// A session's browser, running.
pub enum Driver {
    /// The built-in loader.
    Loader(Session),
    /// Headless Chromium, told to speak the protocol.
    Chromium(Box<ChromiumSession>, Protocol),
}

/// What one load of a session gave, whichever browser loaded it.
#[derive(Debug, Clone, PartialEq)]
pub struct Loaded {
    /// Page load time, s (see [`super::record::CellRun::plt_s`]).
    pub plt_s: Option<f64>,
    /// Objects (Chromium: requests) that failed.
    pub failed: usize,
    /// Connections the load opened.
    pub new_connections: usize,
    /// Connections it reused from earlier loads of the session.
    pub reused_connections: usize,
    /// Chromium's First Contentful Paint, s.
    pub fcp_s: Option<f64>,
    /// Chromium's Largest Contentful Paint, s.
    pub lcp_s: Option<f64>,
}

impl Driver {
    /// Starts the session's browser (on the calling runtime).
    pub async fn start(browser: SessionBrowser) -> Result<Driver, ExperimentError> {
        Ok(match browser {
            SessionBrowser::Loader(opts) => {
                Driver::Loader(Session::new(opts).map_err(BedError::from)?)
            }
            SessionBrowser::Chromium {
                cmd,
                path,
                protocol,
                timeout,
            } => Driver::Chromium(
                Box::new(
                    ChromiumSession::start(cmd, &path, timeout)
                        .await
                        .map_err(ExperimentError::Chromium)?,
                ),
                protocol,
            ),
        })
    }

    /// Loads `page` (Chromium navigates to `url`) on the session's
    /// connections.
    pub async fn load(&mut self, page: &Page, url: &str) -> Result<Loaded, ExperimentError> {
        match self {
            Driver::Loader(session) => {
                let record = session.load(page).await.map_err(BedError::from)?;
                Ok(Loaded {
                    plt_s: record.done_us.map(|us| us as f64 / 1e6),
                    failed: record.objects.iter().filter(|o| !o.ok()).count(),
                    new_connections: record.connections.iter().filter(|c| !c.reused).count(),
                    reused_connections: record.connections.iter().filter(|c| c.reused).count(),
                    fcp_s: None,
                    lcp_s: None,
                })
            }
            Driver::Chromium(session, protocol) => {
                let load = session.load(url).await.map_err(ExperimentError::Chromium)?;
                if let Some(e) = &load.error {
                    tracing::warn!("Chromium, {}: {e}", page.name);
                }
                if let Some(f) = &load.first_failure {
                    tracing::warn!(
                        "Chromium, {}: {} requests failed, first {f}",
                        page.name,
                        load.failed
                    );
                }
                let want = protocol.alpn();
                if let Some(got) = load.document_protocol.as_deref().filter(|p| *p != want) {
                    tracing::warn!("Chromium loaded {} over {got}, not {want}", page.name);
                }
                Ok(Loaded {
                    plt_s: load.plt_s,
                    failed: load.failed,
                    new_connections: load.new_connections,
                    reused_connections: load.reused_connections,
                    fcp_s: load.paints.fcp_s,
                    lcp_s: load.paints.lcp_s,
                })
            }
        }
    }

    /// Ends the session: the loader's connections close, Chromium exits.
    pub async fn close(self) {
        match self {
            Driver::Loader(session) => session.close(),
            Driver::Chromium(session, _) => session.close().await,
        }
    }
}
