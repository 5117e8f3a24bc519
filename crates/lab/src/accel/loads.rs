//! One load of `mewa lab accel`: the page (folded when it goes through
//! the accelerator) by the built-in loader or by headless Chromium, which
//! looks names up with the edge's DNS across the link or is given them.

use std::net::IpAddr;
use std::path::Path;
use std::sync::Arc;

use mewa_accel::cache::Purge;
use mewa_accel::site::Site;
use mewa_corpus::Page;
use mewa_loader::record::Protocol;
use mewa_loader::LoadOptions;

use super::servers::Running;
use super::sites::folded_page;
use super::{Config, Variant};
use crate::bed::Bed;
use crate::experiment::{Browser, ExperimentError};

/// The longest a Chromium load may take: seed 004's page at its lowest
/// rate (128 kbit/s) takes about half a minute.
const CHROMIUM_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(120);

/// What one load gave.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Loaded {
    /// Page load time, s.
    pub(super) plt_s: f64,
    /// Connections the loader opened (the loader only).
    pub(super) connections: Option<usize>,
    /// What a Chromium load showed and when (Chromium only).
    pub(super) metrics: Option<crate::measured::Metrics>,
}

/// One load, or why it failed.
#[allow(clippy::too_many_arguments)]
pub(super) fn load_one(
    bed: &Bed,
    accel: &Running,
    sites: &[Arc<Site>],
    config: &Config,
    page: &Page,
    (variant, tool, down_kbps): (Variant, Browser, u64),
    work: &Path,
    keep_netlog: Option<&Path>,
) -> Result<Result<Loaded, String>, ExperimentError> {
    let through_accel = variant.through_accel();
    if variant == Variant::AccelCold {
        accel.accel.cache().purge(&Purge::All);
    }
    let scheme = if variant == Variant::H1 {
        "http"
    } else {
        "https"
    };
    let main = page.root().map(|r| r.host.clone()).unwrap_or_default();
    let site = sites.iter().find(|s| s.serves(&main));
    let site_hosts: Vec<String> = site
        .map(|s| s.hosts().map(str::to_owned).collect())
        .unwrap_or_default();
    let page = match (through_accel, site) {
        (true, Some(site)) => folded_page(page, site, scheme),
        (true, None) => return Ok(Err(format!("{}: no site for {main}", page.name))),
        (false, _) => page.clone(),
    };
    let mut resolver = bed.resolver();
    if through_accel {
        for h in &site_hosts {
            resolver.hosts.insert(h.clone(), accel.addr);
        }
    }
    match tool {
        Browser::Loader => {
            let (protocol, tls) = match variant {
                Variant::H1 => (Protocol::H1, false),
                Variant::Https => (Protocol::H1, true),
                _ => (Protocol::H2, true),
            };
            let mut opts = bed.options(LoadOptions::browser(protocol, tls));
            opts.resolver = resolver;
            if variant == Variant::AccelMeh {
                opts.connections = meh_connections(&page, config, down_kbps);
                opts.assign = Arc::new(mewa_loader::LeastOutstanding);
            }
            let record = bed.load(&page, &opts)?;
            let failed: Vec<_> = record.objects.iter().filter(|o| !o.ok()).collect();
            Ok(match record.done_us {
                Some(us) if failed.is_empty() && record.errors.is_empty() => Ok(Loaded {
                    plt_s: us as f64 / 1e6,
                    connections: Some(record.connections.len()),
                    metrics: None,
                }),
                _ => Err(match failed.first() {
                    Some(o) => format!(
                        "{} objects failed, first {} ({})",
                        failed.len(),
                        o.url,
                        o.error.clone().unwrap_or_else(|| format!(
                            "status {}, {} body bytes",
                            o.status, o.body_bytes
                        ))
                    ),
                    None => record.errors.first().cloned().unwrap_or_default(),
                }),
            })
        }
        Browser::Chromium => {
            let dns = accel
                .dns
                .as_ref()
                .map(|(direct, through, _)| if through_accel { *through } else { *direct });
            Ok(chromium_load(
                bed,
                config,
                &page,
                (variant, scheme),
                &resolver,
                (dns, &accel.certs),
                work,
                keep_netlog,
            ))
        }
    }
}

/// The Mobile Edge Hint client's connection count for `page` on this
/// link: seed 000 Algorithm 1 (the client's printed model, at most its 6).
fn meh_connections(page: &Page, config: &Config, down_kbps: u64) -> usize {
    let path =
        mewa_model::http::TcpPath::new(down_kbps as f64 * 1000.0, config.rtt_ms as f64 / 1000.0);
    match path {
        Ok(path) => {
            mewa_model::http::choose_connections(
                page.total_bytes(),
                &path,
                mewa_client::advice::MAX_CONNECTIONS,
                mewa_model::http::SlowStartModel::Printed,
            )
            .n as usize
        }
        Err(_) => 1,
    }
}

/// One measured headless Chromium load ([`crate::measured`]): its
/// NetLog's span for the page's objects and what the page showed. With
/// `dns`, Chromium asks that server (port 53, across the link) for every
/// name; without, `resolver`'s mapping is given as
/// `--host-resolver-rules`. A load is complete when the page's load event
/// fires; objects it never asked for are coverage.
#[allow(clippy::too_many_arguments)]
fn chromium_load(
    bed: &Bed,
    config: &Config,
    page: &Page,
    (variant, scheme): (Variant, &str),
    resolver: &mewa_loader::Resolver,
    (dns, certs): (Option<IpAddr>, &mewa_origin::Certs),
    work: &Path,
    keep_netlog: Option<&Path>,
) -> Result<Loaded, String> {
    let topo = bed.running().map_err(|e| e.to_string())?;
    let mut rules: Vec<String> = resolver
        .hosts
        .iter()
        .map(|(h, a)| format!("MAP {h} {a}"))
        .collect();
    rules.sort();
    rules.push(match resolver.default {
        Some(a) => format!("MAP * {a}"),
        None => "MAP * ~NOTFOUND".into(),
    });
    let mut cmd = match dns {
        Some(server) => {
            // A private mount namespace puts a resolv.conf naming the
            // server over the machine's.
            let conf = work.join("resolv.conf");
            std::fs::write(
                &conf,
                format!("nameserver {server}\noptions timeout:2 attempts:2\n"),
            )
            .map_err(|e| format!("writing {}: {e}", conf.display()))?;
            crate::replay::with_bind_mount(topo, &conf, "/etc/resolv.conf", &config.chromium)
                .map_err(|e| e.to_string())?
        }
        None => {
            let mut c = topo
                .command(crate::bed::CLIENT, &config.chromium)
                .map_err(|e| e.to_string())?;
            c.arg(format!("--host-resolver-rules={}", rules.join(",")));
            c
        }
    };
    match variant {
        Variant::Https => {
            cmd.args(crate::browser::protocol_flags(Protocol::H1));
        }
        Variant::H3 => {
            cmd.args(crate::browser::protocol_flags(Protocol::H3));
        }
        _ => {}
    }
    let url = page
        .root()
        .map(|r| r.url(scheme))
        .ok_or_else(|| format!("{}: no root document", page.name))?;
    let load = crate::measured::Load {
        bed,
        chromium: &config.chromium,
        cmd,
        spki: &certs.leaf_spki_sha256,
        work_dir: work,
        tag: "load",
        page,
        url,
        measure: mewa_chromium::Measure {
            cpu_slowdown: 1.0,
            screenshots: true,
            settle: crate::measured::SETTLE,
        },
        revisit: variant == Variant::Predictor,
        keep_netlog: keep_netlog.is_some(),
        timeout: CHROMIUM_TIMEOUT,
    };
    // The origins send 103s for this load only (a CDN that does, or not).
    let early_hints = variant == Variant::EarlyHints;
    if early_hints {
        bed.set_early_hints(true);
    }
    let got = crate::measured::measure(load, || Ok(()));
    if early_hints {
        bed.set_early_hints(false);
    }
    let got = got.map_err(|e| e.to_string())?;
    if let Some(to) = keep_netlog {
        if let Some(dir) = to.parent() {
            let _ = std::fs::create_dir_all(dir);
        }
        let _ = std::fs::rename(work.join("load.netlog.json"), to);
    }
    match (got.error, got.plt_s) {
        (None, Some(plt_s)) => Ok(Loaded {
            plt_s,
            connections: None,
            metrics: got.metrics,
        }),
        (Some(e), _) => Err(e),
        (None, None) => Err("no page load time in the NetLog".into()),
    }
}
