//! What one load of a page brought, against the page's objects: the
//! objects that did not arrive (with the status the page expects), the
//! requests beyond the page, and the load's times — read from a Chromium
//! NetLog, or filled in by another browser (the lab's loader) the same way,
//! so the two browsers are compared on one form.

use std::path::Path;
use std::process::Command;

use mewa_corpus::Page;
use serde::{Deserialize, Serialize};

use crate::command::{exit_failure, headless_load};
use crate::netlog::{netlog_requests, netlog_times, NetlogError};

/// What one load of a page brought, against the page's objects.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Arrival {
    /// Page name.
    pub page: String,
    /// Objects in the page.
    pub objects: usize,
    /// URLs of the page's objects that did not arrive (with the status the
    /// page expects), with why.
    pub missing: Vec<String>,
    /// Requests for URLs the page does not have (answered 404, or a host
    /// that does not resolve).
    pub unrecorded: Vec<String>,
    /// Seconds from the first request to the last byte (the loader's
    /// `done_us`, Chromium's NetLog span).
    pub plt_s: Option<f64>,
    /// Seconds from the same start to the last request for one of the
    /// page's objects: how long discovery took (the moment the request
    /// was decided: Chromium's `URL_REQUEST_START_JOB`, the loader's
    /// `discovered_us`; both before any connection it waits for).
    pub requested_s: Option<f64>,
}

/// What a Chromium NetLog says a load of `page` brought: the objects that
/// did not arrive with their expected status, the requests beyond the
/// page, and the load's times ([`netlog_times`]).
pub fn arrival_from_netlog(bytes: &[u8], page: &Page) -> Result<Arrival, NetlogError> {
    let reqs = netlog_requests(bytes, page)?;
    let times = netlog_times(bytes, page).ok();
    let scheme = page.main.split("://").next().unwrap_or("http");
    let mut missing: Vec<String> = page
        .objects
        .iter()
        .filter_map(|o| {
            let u = o.url(scheme);
            match reqs.arrived.get(&o.url("")) {
                Some(Some(st)) if *st != o.status() => Some(format!(
                    "{u} (HTTP status {st}, the page expects {})",
                    o.status()
                )),
                Some(_) => None,
                None => Some(
                    match reqs.failed.iter().find(|(f, _)| f.ends_with(&o.url(""))) {
                        Some((_, code)) => format!("{u} (net_error {code})"),
                        None => format!("{u} (never requested)"),
                    },
                ),
            }
        })
        .collect();
    missing.sort();
    Ok(Arrival {
        page: page.name.clone(),
        objects: page.objects.len(),
        missing,
        unrecorded: reqs.unrecorded,
        plt_s: times.map(|t| t.plt_s),
        requested_s: times.map(|t| t.requested_s),
    })
}

/// Where a one-shot load keeps its files: a fresh profile (removed after
/// the load), its NetLog while it runs, and where the NetLog is kept
/// afterwards (`None`: removed).
#[derive(Debug, Clone, Copy)]
pub struct LoadFiles<'a> {
    /// The profile directory (must not hold another load's profile).
    pub profile: &'a Path,
    /// The NetLog Chromium writes.
    pub netlog: &'a Path,
    /// Where the NetLog goes afterwards (its folder made if needed), to see
    /// where a load's time went; `None` removes it.
    pub keep: Option<&'a Path>,
}

/// One headless load of `page` from `url`: `cmd` (the Chromium binary
/// `binary`, wrapped as the caller needs — in a namespace, with its own
/// flags) is
/// made headless with `files`' profile and NetLog and the key `spki`
/// trusted ([`headless_load`]), runs to its end, and what the NetLog says
/// arrived is returned. `Err` says why there is no load at all: Chromium
/// did not start or failed, or its NetLog cannot be read.
pub fn load_once(
    cmd: &mut Command,
    binary: &Path,
    page: &Page,
    url: &str,
    files: LoadFiles<'_>,
    spki: &str,
) -> Result<Arrival, String> {
    let out = headless_load(cmd, files.profile, files.netlog, spki)
        .arg(url)
        .output()
        .map_err(|e| format!("starting {}: {e}", binary.display()));
    let _ = std::fs::remove_dir_all(files.profile);
    let out = out?;
    let read = if out.status.success() {
        std::fs::read(files.netlog).map_err(|e| format!("reading {}: {e}", files.netlog.display()))
    } else {
        Err(exit_failure(&out))
    };
    match files.keep {
        Some(to) if to != files.netlog => {
            if let Some(dir) = to.parent() {
                let _ = std::fs::create_dir_all(dir);
            }
            if let Err(e) = std::fs::rename(files.netlog, to) {
                tracing::warn!(
                    "keeping {} as {}: {e}",
                    files.netlog.display(),
                    to.display()
                );
            }
        }
        Some(_) => {}
        None => {
            let _ = std::fs::remove_file(files.netlog);
        }
    }
    arrival_from_netlog(&read?, page).map_err(|e| e.to_string())
}
