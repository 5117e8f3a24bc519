//! One testbed's share of the study, the experiment's unit: one session
//! per protocol on the same bed, the server's `TCP_INFO` sampled through
//! each, then — once the bed is torn down and its pcaps are complete —
//! every load's figures, and the traces of those that woke the radio.
//! The sessions' loads share their connections and their wire figures
//! come from the testbed's pcaps, so a testbed is run (and redone) whole.

use std::path::Path;
use std::time::Duration;

use mewa_corpus::Corpus;
use mewa_link::core::LinkConfig;
use mewa_loader::record::Protocol;
use mewa_loader::LoadOptions;
use mewa_probe::retrans::Counts;
use mewa_probe::tcpinfo::{Filter, Sampler};

use super::config::{runs_with, Config};
use super::driver::SessionBrowser;
use super::figures::{fill_in, Pending, SessionSamples};
use super::radio::{Network, Radio};
use super::record::{CellRun, Record};
use super::rto::LabCgroup;
use super::session::{session, unix_us, Pace, SessionLoad};
use super::setting::Setting;
use super::testbed::Testbed;
use super::wire::read_wire;
use crate::bed::{OriginSettings, SERVER};
use crate::experiment::{Browser, ExperimentError};

/// Which testbed, and what it is built on.
pub struct Plan<'a> {
    /// The radio.
    pub radio: Radio,
    /// The network under it.
    pub network: Network,
    /// The setting.
    pub setting: &'a Setting,
    /// Its name in the log, the pcaps' folder and Chromium's profiles
    /// (`3g-fixed-rto-floor`).
    pub tag: &'a str,
    /// The link.
    pub link: &'a LinkConfig,
}

/// What every testbed of a run shares.
pub struct Shared<'a> {
    /// The configuration.
    pub config: &'a Config,
    /// The pages.
    pub corpus: &'a Corpus,
    /// The origin's settings (its control is the setting's).
    pub origin: &'a OriginSettings,
    /// The lab's cgroup, when a setting has the fix.
    pub cgroup: Option<&'a LabCgroup>,
    /// Where the testbed's pcaps go (a folder per testbed).
    pub pcaps: &'a Path,
    /// Where Chromium's profiles go.
    pub work: &'a Path,
}

/// Runs the testbed of `plan`: its records are its loads, in order, then
/// the traces of the loads that woke the radio. `step(k, what)` is told
/// before the testbed's load `k` starts.
pub fn testbed(
    shared: &Shared<'_>,
    plan: Plan<'_>,
    step: impl Fn(usize, &str) + Sync,
) -> Result<Vec<Record>, ExperimentError> {
    let config = shared.config;
    let profile = plan.radio.profile();
    let dir = shared.pcaps.join(plan.tag);
    std::fs::create_dir_all(&dir).map_err(ExperimentError::io("creating", &dir))?;
    let bed = Testbed::start(
        shared.corpus,
        plan.link.clone(),
        &dir,
        shared.origin,
        plan.setting,
        &profile,
        shared.cgroup,
    )?;
    let mut pending: Vec<Pending> = Vec::new();
    let mut samples: Vec<SessionSamples> = Vec::new();
    for &protocol in config
        .protocols
        .iter()
        .filter(|&&p| runs_with(p, plan.setting))
    {
        bed.fresh_session()?;
        let t0_unix_us = unix_us();
        let sampler = Sampler::start(
            bed.topo()?,
            SERVER,
            Duration::from_millis(config.sample_ms.max(1)),
            Filter::All,
        )
        .map_err(ExperimentError::Sampler)?;
        let profile_dir = match config.browser {
            Browser::Chromium => Some(
                mewa_chromium::Profile::in_dir(shared.work, &format!("{}-{protocol}", plan.tag))
                    .map_err(|e| ExperimentError::Io {
                        what: "creating Chromium's profile",
                        path: e.path,
                        source: e.error,
                    })?,
            ),
            Browser::Loader => None,
        };
        let browser = session_browser(shared, &bed, protocol, profile_dir.as_ref())?;
        let before = pending.len();
        let loads = session(
            &bed.bed,
            bed.topo()?,
            browser,
            &shared.corpus.pages,
            Pace {
                loads: config.loads,
                think: Duration::from_secs_f64(config.think_s),
            },
            |seq, page| {
                step(
                    before + seq,
                    &format!("{} {protocol} {} #{seq}", plan.tag, page.name),
                )
            },
        );
        // The profile goes with the session, whatever became of it.
        drop(profile_dir);
        let loads = loads?;
        // A sampler that failed leaves the cwnd columns empty; the loads
        // still count.
        let sockets = match sampler.stop() {
            Ok(s) => s.sockets,
            Err(e) => {
                tracing::warn!("TCP_INFO sampling in {SERVER} failed: {e}");
                Vec::new()
            }
        };
        for (seq, load) in loads.into_iter().enumerate() {
            pending.push(pending_load(config, &plan, protocol, seq, load));
        }
        samples.push(SessionSamples {
            protocol,
            // HTTP/3 has no TCP socket of its own to follow.
            sockets: if protocol == Protocol::H3 {
                Vec::new()
            } else {
                sockets
            },
            t0_unix_us,
        });
    }
    bed.shutdown(plan.tag)?;
    let wire = read_wire(&dir)?;
    let traces = fill_in(&mut pending, &wire, &samples);
    if !config.keep_pcaps {
        let _ = std::fs::remove_dir_all(&dir);
    }
    Ok(pending
        .into_iter()
        .map(|p| Record::Load(p.run))
        .chain(traces.into_iter().map(Record::Trace))
        .collect())
}

/// The browser of a session over `protocol`, Chromium's profile in
/// `profile`.
fn session_browser(
    shared: &Shared<'_>,
    bed: &Testbed,
    protocol: Protocol,
    profile: Option<&mewa_chromium::Profile>,
) -> Result<SessionBrowser, ExperimentError> {
    let config = shared.config;
    let timeout = Duration::from_secs(config.timeout_s.max(1));
    Ok(match profile {
        Some(p) => SessionBrowser::Chromium {
            cmd: crate::browser::session_command(
                &bed.bed,
                &shared.corpus.pages,
                &config.chromium,
                p.path(),
                &shared.origin.ca_dir,
                protocol,
            )?,
            path: config.chromium.clone(),
            protocol,
            timeout,
        },
        None => {
            let mut opts = bed.bed.options(LoadOptions::browser(protocol, true));
            opts.timeout = timeout;
            SessionBrowser::Loader(opts)
        }
    })
}

/// A session's load `seq` as a load of the study, its wire and window
/// figures still to fill in.
fn pending_load(
    config: &Config,
    plan: &Plan<'_>,
    protocol: Protocol,
    seq: usize,
    load: SessionLoad,
) -> Pending {
    let SessionLoad {
        page,
        loaded,
        at_start,
    } = load;
    Pending {
        end_unix_us: at_start.start_unix_us
            + loaded
                .plt_s
                .map_or(config.timeout_s * 1_000_000, |s| (s * 1e6) as u64),
        run: CellRun {
            browser: config.browser,
            radio: plan.radio,
            network: plan.network,
            setting: plan.setting.clone(),
            protocol,
            page,
            seq,
            radio_state: at_start.radio_state,
            promotions: at_start.promotions,
            plt_s: loaded.plt_s,
            failed: loaded.failed,
            new_connections: loaded.new_connections,
            reused_connections: loaded.reused_connections,
            fcp_s: loaded.fcp_s,
            lcp_s: loaded.lcp_s,
            handshakes: 0,
            start_unix_us: at_start.start_unix_us,
            down_bytes: 0,
            avg_kbps: None,
            max_kbps: None,
            cwnd_avg: None,
            cwnd_max: None,
            server: at_start.server,
            client: at_start.client,
            wire_down: Counts::default(),
            wire_up: Counts::default(),
        },
    }
}
