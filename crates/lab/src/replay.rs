//! Does a corpus replay? Each page loaded through the testbed by the
//! built-in loader and by headless Chromium, and what arrived compared with
//! what the page (a recording, or a generated page) holds.
//!
//! The testbed serves an imported corpus as the recordings were served
//! ([`crate::bed::Bed::start`]): each host (or group of hosts the recording
//! coalesced) at its own address with its own certificate, the recorded
//! statuses, redirects and server think times; a request for anything else
//! gets a 404 at once (the origin counts them) and an unrecorded host does
//! not resolve.

use std::net::SocketAddr;
use std::path::Path;

use mewa_corpus::Page;

use crate::bed::{Bed, BedError, CLIENT};
use mewa_chromium::{load_once, Arrival, LoadFiles};
use mewa_loader::record::Protocol;
use mewa_loader::LoadOptions;

/// `program` in the client namespace, in a private mount namespace where
/// `ours` is bind-mounted over `over` (the machine's file or folder is
/// not touched).
pub(crate) fn with_bind_mount(
    topo: &mewa_link::runtime::Topology,
    ours: &std::path::Path,
    over: &str,
    program: &std::path::Path,
) -> Result<std::process::Command, BedError> {
    let mut c = topo.command(CLIENT, "unshare")?;
    c.args(["--mount", "--", "sh", "-c"])
        .arg(format!(
            "mount --bind '{}' {over} && exec \"$0\" \"$@\"",
            ours.display()
        ))
        .arg(program);
    Ok(c)
}

/// Loads `page` with the built-in loader (HTTP/2 over TLS, a browser's
/// settings) and lists what did not arrive as the page expects.
pub fn with_loader(bed: &Bed, page: &Page) -> Result<Arrival, BedError> {
    let opts = bed.options(LoadOptions::browser(Protocol::H2, true));
    let record = bed.load(page, &opts)?;
    let mut missing: Vec<String> = page
        .objects
        .iter()
        .filter(|o| !record.objects.iter().any(|t| t.id == o.id && t.ok()))
        .map(|o| {
            let why = record
                .objects
                .iter()
                .find(|t| t.id == o.id)
                .and_then(|t| t.error.clone())
                .unwrap_or_else(|| "never requested".into());
            format!("{} ({why})", o.url("https"))
        })
        .collect();
    missing.extend(record.errors.iter().cloned());
    Ok(Arrival {
        page: page.name.clone(),
        objects: page.objects.len(),
        missing,
        unrecorded: Vec::new(),
        plt_s: record.done_us.map(|us| us as f64 / 1e6),
        // When the loader decided to ask (a connection may still be
        // opening), as Chromium's NetLog starts a request's job.
        requested_s: record
            .objects
            .iter()
            .map(|t| t.discovered_us)
            .max()
            .map(|us| us as f64 / 1e6),
    })
}

/// A Chromium binary and the flags a load starts it with beyond the lab's
/// own ([`crate::browser::protocol_flags`] to choose the protocol).
#[derive(Debug, Clone, Copy)]
pub struct Browser<'a> {
    /// The binary.
    pub binary: &'a Path,
    /// Extra command-line flags.
    pub flags: &'a [&'a str],
    /// Load a generated page over `http://` from the origin's plain port:
    /// HTTP/1.1 in the clear, with the connections Chromium opens itself
    /// (seed 002's unencrypted pages). Recordings keep their own schemes.
    pub clear_text: bool,
}

impl<'a> Browser<'a> {
    /// `binary` with Chromium's defaults (HTTP/2 over TLS).
    pub fn plain(binary: &'a Path) -> Browser<'a> {
        Browser {
            binary,
            flags: &[],
            clear_text: false,
        }
    }
}

/// Loads `page` in headless Chromium (fresh profile, the origin's leaf
/// trusted by its SPKI) and lists what did not arrive, from its NetLog.
/// Names resolve as the testbed serves them: with `dns`, by Chromium's own
/// resolver asking that DNS server (the edge, over the radio link, as a
/// phone does); without, by `--host-resolver-rules` (no DNS traffic).
/// `work` holds the profile and the NetLog while it runs; `keep_netlog`
/// moves the NetLog there afterwards instead of deleting it (to see where
/// a load's time went).
pub fn with_chromium(
    bed: &Bed,
    page: &Page,
    chromium: &Browser,
    ca_dir: &Path,
    work: &Path,
    dns: Option<SocketAddr>,
    keep_netlog: Option<&Path>,
) -> Result<Arrival, BedError> {
    let spki = crate::browser::trusted_spki(ca_dir)?;
    let profile = work.join(format!("profile-{}", page.name));
    let netlog = work.join(format!("{}.netlog.json", page.name));
    let (mut cmd, url) = chromium_for(bed, page, chromium, work, dns)?;
    let files = LoadFiles {
        profile: &profile,
        netlog: &netlog,
        keep: keep_netlog,
    };
    load_once(&mut cmd, chromium.binary, page, &url, files, &spki).map_err(BedError::Runtime)
}

/// Chromium in the client namespace for a load of `page` and the URL it
/// loads: names resolved by Chromium's own resolver asking `dns` (the
/// edge, over the radio link), or without, by `--host-resolver-rules` as
/// the testbed serves them; `chromium`'s own flags added.
fn chromium_for(
    bed: &Bed,
    page: &Page,
    chromium: &Browser,
    work: &Path,
    dns: Option<SocketAddr>,
) -> Result<(std::process::Command, String), BedError> {
    let url = if chromium.clear_text {
        clear_text_url(bed, page)?
    } else {
        browser_url(bed, page)
    };
    let mut cmd = match dns {
        Some(server) => chromium_with_dns(bed, chromium.binary, work, &page.name, server)?,
        None => {
            let mut c = bed.running()?.command(CLIENT, chromium.binary)?;
            c.arg(format!(
                "--host-resolver-rules={}",
                bed.chromium_resolver_rules()
            ));
            c
        }
    };
    cmd.args(chromium.flags);
    Ok((cmd, url))
}

/// [`with_chromium`]'s load made as a measured one ([`crate::measured`]):
/// the same command and names, driven over DevTools, with paint marks,
/// Speed Index and coverage; complete when the page's load event fires.
/// The NetLog stays in `work` as `PAGE.netlog.json` with `keep_netlog`.
#[allow(clippy::too_many_arguments)]
pub fn measured_in_chromium(
    bed: &Bed,
    page: &Page,
    chromium: &Browser,
    ca_dir: &Path,
    work: &Path,
    dns: Option<SocketAddr>,
    keep_netlog: bool,
    measure: mewa_chromium::Measure,
    timeout: std::time::Duration,
) -> Result<crate::measured::Measured, BedError> {
    let spki = crate::browser::trusted_spki(ca_dir)?;
    let (cmd, url) = chromium_for(bed, page, chromium, work, dns)?;
    let load = crate::measured::Load {
        bed,
        chromium: chromium.binary,
        cmd,
        spki: &spki,
        work_dir: work,
        tag: &page.name,
        page,
        url,
        measure,
        revisit: false,
        keep_netlog,
        timeout,
    };
    let got = crate::measured::measure(load, || Ok(()));
    let _ = std::fs::remove_file(work.join(format!("resolv-{}.conf", page.name)));
    got
}

/// `binary` in the client namespace with its own resolver asking the DNS
/// server `dns` (the edge, over the radio link, as a phone does): a private
/// mount namespace puts a `resolv.conf` naming it (written in `work`,
/// named after `tag`) over the machine's.
pub(crate) fn chromium_with_dns(
    bed: &Bed,
    binary: &Path,
    work: &Path,
    tag: &str,
    dns: SocketAddr,
) -> Result<std::process::Command, BedError> {
    let conf = work.join(format!("resolv-{tag}.conf"));
    std::fs::write(
        &conf,
        format!("nameserver {}\noptions timeout:2 attempts:2\n", dns.ip()),
    )
    .map_err(|e| BedError::Runtime(format!("writing {}: {e}", conf.display())))?;
    with_bind_mount(bed.running()?, &conf, "/etc/resolv.conf", binary)
}

/// The `http://` URL of a generated page, served by the origin's plain
/// port with `http://` references: every object then loads over HTTP/1.1
/// in the clear. A recording (or a testbed with an address per host)
/// refers to its objects by the schemes it was recorded with, so it cannot
/// be loaded in the clear.
pub fn clear_text_url(bed: &Bed, page: &Page) -> Result<String, BedError> {
    match page.root() {
        Some(root) if !bed.per_host() => Ok(root.url("http")),
        _ => Err(BedError::Runtime(format!(
            "{}: a recorded page keeps its recorded schemes and cannot be loaded \
             in the clear; use generated pages (meh15, general) for it",
            page.name
        ))),
    }
}

/// The URL Chromium loads `page` from: a recording's as recorded; a
/// generated page's over `https://`, which the origin serves too: Chromium
/// speaks HTTP/2 only over TLS (no h2c), and over `http://` it would use
/// HTTP/1.1 with six connections per host, not the loader's protocol.
pub fn browser_url(bed: &Bed, page: &Page) -> String {
    match page.root() {
        Some(root) if !bed.per_host() => root.url("https"),
        _ => page.main.clone(),
    }
}
