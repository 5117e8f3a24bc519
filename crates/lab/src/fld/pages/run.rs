//! One setting's testbed of `mewa lab fld pages`: the link shared with the
//! background flows, the origin whose accepted connections switch to the
//! control of the current load, and the setting's loads not yet done. Its
//! cross-traffic log goes in the journal once it is torn down.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use mewa_corpus::Corpus;
use mewa_link::runtime::LinkOptions;
use mewa_loader::LoadOptions;

use super::config::{Cell, Config, LoadId};
use super::load::{chromium_run, loader_run};
use super::record::{CrossEntry, PageRun, Record};
use crate::bed::{Bed, OriginSettings, CLIENT, SERVER};
use crate::cross::Cross;
use crate::experiment::{Congestion, ExperimentError, Run};
use crate::fld::counters::TcpCounters;
use crate::fld::{link, queue_bytes, set_client_rmem};
use crate::replay::{measured_in_chromium, Browser};

/// The longest a Chromium page load may take under cross traffic.
const CHROMIUM_TIMEOUT: Duration = Duration::from_secs(120);

/// What every setting's testbed is built from.
#[derive(Debug)]
pub struct Inputs<'a> {
    /// The configuration.
    pub config: &'a Config,
    /// Its pages.
    pub corpus: &'a Corpus,
    /// The origin (its listener's control is replaced by cubic).
    pub origin: &'a OriginSettings,
    /// Chromium's profiles and NetLogs while a load runs.
    pub work: &'a Path,
}

/// Runs the loads of `cell` that `run` lacks on a testbed of its own (none
/// when none is left), then notes its cross-traffic log.
pub fn setting(
    inputs: &Inputs<'_>,
    cell: &Cell,
    run: &mut Run<'_, Record>,
) -> Result<(), ExperimentError> {
    let Inputs {
        config,
        corpus,
        origin,
        ..
    } = inputs;
    if !run.any_left(&cell.prefix()) {
        return Ok(());
    }
    let network = config.network(cell);
    // Every connection the origin accepts switches to the control of the
    // current load: the listener runs cubic (not bbr, whose pacing would
    // stay on after a switch).
    let first = config.ccs.first().cloned().unwrap_or(Congestion::Cubic);
    let current = Arc::new(Mutex::new(first));
    let cur = current.clone();
    let hook: mewa_origin::AcceptHook = Arc::new(move |s: &tokio::net::TcpStream| {
        let cc = mewa_model::sync::lock(&cur).clone();
        if let Err(e) = socket2::SockRef::from(s).set_tcp_congestion(cc.name().as_bytes()) {
            tracing::warn!("switching an accepted connection to {cc}: {e}");
        }
    });
    let mut listener = (*origin).clone();
    listener.congestion = Congestion::Cubic.to_string();
    let bed = Bed::start_with_cross_hosts_hooked(
        corpus,
        link(
            Duration::from_millis(network.one_way_ms),
            network.capacity_bps,
            Some(queue_bytes(network.capacity_bps, cell.queue_ms)),
        ),
        LinkOptions::default(),
        &listener,
        Some(hook),
    )?;
    let topo = bed.running()?;
    set_client_rmem(topo, CLIENT, config.client_rmem)?;
    let cross = Cross::start(topo, &network.cross, Duration::from_secs(1))
        .map_err(ExperimentError::Cross)?;
    std::thread::sleep(Duration::from_secs(config.warmup_s));
    let mut loads = 0;
    for id in config.loads(cell, &corpus.pages) {
        let key = id.key();
        if run.is_done(&key) {
            continue;
        }
        run.begin(&key);
        *mewa_model::sync::lock(&current) = id.cc.clone();
        let record = one_load(&bed, inputs, &id)?;
        run.finish(&key, vec![Record::Load(record)])?;
        loads += 1;
    }
    let log = cross.stop();
    bed.shutdown()?;
    let entry = CrossEntry {
        setting: network,
        log,
        loads: Some(loads),
    };
    run.note(&format!("cross/{}", cell.label), vec![Record::Cross(entry)])
}

/// One load of `id` on `bed`: by the loader, with the origin's TCP
/// counters around it, or in Chromium.
fn one_load(bed: &Bed, inputs: &Inputs<'_>, id: &LoadId<'_>) -> Result<PageRun, ExperimentError> {
    let Some((protocol, tls)) = id.kind.loader() else {
        let (flags, clear_text) = id.kind.chromium().unwrap_or((&[], false));
        let browser = Browser {
            binary: &inputs.config.chromium,
            flags,
            clear_text,
        };
        let m = measured_in_chromium(
            bed,
            id.page,
            &browser,
            &inputs.origin.ca_dir,
            inputs.work,
            None,
            false,
            mewa_chromium::Measure {
                cpu_slowdown: 1.0,
                screenshots: true,
                settle: crate::measured::SETTLE,
            },
            CHROMIUM_TIMEOUT,
        )?;
        return Ok(chromium_run(id, m));
    };
    let topo = bed.running()?;
    let opts = bed.options(LoadOptions::browser(protocol, tls));
    let before = TcpCounters::read(topo, SERVER);
    let record = bed.load(id.page, &opts)?;
    let server_tcp = TcpCounters::read(topo, SERVER).since(before);
    Ok(loader_run(id, &record, server_tcp))
}
