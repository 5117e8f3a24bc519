//! `mewa-chromium`: headless Chromium as mewa drives it — one DevTools
//! (CDP) client for the edge's page tracer and the lab, starting the
//! browser (sandboxed, as an unprivileged user where the tracer needs it;
//! inside a lab namespace where the lab does), reading its NetLog, and one
//! browser load with its timings.
//!
//! Two kinds of use:
//! - *one cold load per browser*: the tracer ([`command::chromium_command`],
//!   [`Chromium::launch`], [`Cdp`]), and the lab's one-shot loads that
//!   write a NetLog ([`command::headless_load`], [`netlog`], [`arrival`]);
//! - *a browsing session*: one browser, one profile and one tab kept
//!   across many loads ([`ChromiumSession`]), the cellular study's
//!   headline browser.
//!
//! The caller builds the [`std::process::Command`] (in a network namespace
//! with `nsenter`, or as another user), which chromiumoxide's own launcher
//! can do neither of; [`Chromium::launch`] only reads the DevTools address
//! from it, as chromiumoxide does, and its WebSocket connection carries
//! the CDP messages.
//!
//! - [`command`]: flags, the account Chromium runs as, the one-shot load's
//!   command, the binary check.
//! - [`launch`]: the process and its DevTools endpoint.
//! - [`cdp`]: commands, answers and raw events over the WebSocket.
//! - [`profile`]: fresh profile directories.
//! - [`session`]: a browsing session and its loads' onload times.
//! - [`netlog`] and [`arrival`]: what a NetLog says a load brought.
//! - [`visual`]: visual progress and Speed Index from screencast frames.

pub mod arrival;
pub mod cdp;
pub mod command;
pub mod launch;
pub mod measure;
pub mod netlog;
pub mod profile;
pub mod session;
pub mod visual;

use std::path::PathBuf;

pub use arrival::{arrival_from_netlog, load_once, Arrival, LoadFiles};
pub use cdp::{field, Cdp, RawEvent};
pub use command::{
    check_binary, chromium_command, exit_failure, headless, headless_load, lab_headless_flags,
    lookup_user, major_version, run_as, Account, ChromiumCommand, NoChromium, UserRefused,
    CHROMIUM_FLAGS, DEFAULT_CHROMIUM,
};
pub use launch::{sandbox_failure, Chromium};
pub use measure::{Measure, Paints};
pub use netlog::{
    early_actions, netlog_after, netlog_requests, netlog_times, EarlyActions, NetlogError,
    NetlogRequests, NetlogTimes,
};
pub use profile::{Profile, ProfileError};
pub use session::{onload_from_evaluate, BrowserLoad, ChromiumSession};
pub use visual::{speed_index, ScreencastFrame, VisualMetrics};

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
