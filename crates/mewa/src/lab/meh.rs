//! `mewa lab meh`.

use std::path::PathBuf;

use clap::Args;
use mewa_lab::meh::{Arm, BrowserPages, Config, Dispatch, Meh, Policy, Rrc};

use super::args::{absolute, CorpusArgs, OriginArgs, RunArgs, TraceArgs};
use crate::units;

/// `mewa lab meh`'s flags.
#[derive(Debug, Args)]
pub struct MehArgs {
    #[command(flatten)]
    run: RunArgs,
    #[command(flatten)]
    corpus: CorpusArgs,
    #[command(flatten)]
    origin: OriginArgs,
    /// Loads per page and variant (seed 000: 30) [default: 30].
    #[arg(long)]
    runs: Option<usize>,
    /// Radio link rate both ways (seed 000 §IV: 32 Mbit/s average)
    /// [default: 32mbit].
    #[arg(long, conflicts_with = "trace", value_parser = units::rate)]
    rate: Option<u64>,
    #[command(flatten)]
    trace: TraceArgs,
    /// Round trip over the radio link, client ⇄ edge [default: 45ms].
    #[arg(long, value_parser = units::rtt_ms)]
    radio_rtt: Option<u64>,
    /// Round trip edge ⇄ origin (seed 000: 65 ms end to end on average)
    /// [default: 20ms].
    #[arg(long, value_parser = units::rtt_ms)]
    wired_rtt: Option<u64>,
    /// Radio bandwidth the client is told to plan with (seed 000's known
    /// bandwidth); default: what the client's own recent loads delivered
    /// (peak delivery rate over one round trip, best of the last 3 loads),
    /// as a phone can know it.
    #[arg(long, value_parser = units::rate)]
    bandwidth: Option<u64>,
    /// The client's bandwidth estimate before its first load (a rate the
    /// modem would report) [default: 10mbit].
    #[arg(long, value_parser = units::rate)]
    prior: Option<u64>,
    /// The phone's radio state machine on the radio link: `lte` (400 ms
    /// promotion from idle), `3g` (2 s) or `off`. With one, the radio is
    /// put to sleep before every load (a user between two pages), so every
    /// load pays the promotion [default: off].
    #[arg(long)]
    radio: Option<Rrc>,
    /// Pages Chromium loads: `auto` (every page of a recorded corpus, the
    /// three Fig. 8 pages of a generated one), `fig8` or `all`
    /// [default: auto].
    #[arg(long)]
    browser_pages: Option<BrowserPages>,
    /// How objects are spread over the connections: `warm-first` (HTML,
    /// CSS and scripts on the document's connection, the rest by the
    /// hint's size-balanced assignment) or `hint` (the hint's assignment
    /// for everything, seed 000 as written) [default: warm-first].
    #[arg(long)]
    policy: Option<Policy>,
    /// When the hint-aware client requests images, fonts and media:
    /// `auto` (default: push when it prefetches the hint's URLs, pull-rate
    /// otherwise), `pull-rate` (each leaf waits for the connection that
    /// would finish it first at its delivery rate over the last RTT,
    /// holding at most twice that; a fresh connection gets large leaves
    /// only once it has shown it can move two initial windows per RTT),
    /// `pull` (at most a bandwidth-delay product outstanding per
    /// connection) or `push` (as soon as found or prefetched, on the
    /// connection the policy chose: seed 000's static split by size). The
    /// browser runs' proxy follows: auto, pull-rate, or push for push and
    /// pull.
    #[arg(long)]
    dispatch: Option<Dispatch>,
    /// With the hint, do not request the objects whose URLs the hint
    /// carries before the page reveals them: the hint then only sets the
    /// number of connections and the assignment (by default the client
    /// requests them right after the document, as seed 000's client "sends
    /// requests to all embedded URLs on parallel connections").
    #[arg(long)]
    no_prefetch: bool,
    /// With the hint, keep one connection whatever n the plan chose: the
    /// URLs' part of the gain alone (with --no-prefetch as well the hint
    /// does nothing). For the split into n only / URLs only / both.
    #[arg(long)]
    one_connection: bool,
    /// Browser runs: the proxy keeps its prefetch to one initial window per
    /// connection until the page's document has arrived (off by default:
    /// measured not to pay on the shared recordings and meh15; for links
    /// whose queue is deep enough that the document waits behind the
    /// prefetch).
    #[arg(long)]
    first_flight_budget: bool,
    /// Browser runs: the proxy holds prefetched images until the more
    /// urgent prefetched objects still on their way are within one
    /// bandwidth-delay product (off by default: measured to cost meh15's
    /// 3648k page 0.8 s, its images then starting on cold connections;
    /// without it every prefetch starts at once and the origin's HTTP/2
    /// priorities order them)
    #[arg(long)]
    image_hold: bool,
    /// Browser runs: the proxy sends prefetched images on the document's
    /// connection at once, not after the document's response head (by
    /// default they wait for it, so that the connection's first flights
    /// carry the document when the origin has images ready sooner)
    #[arg(long)]
    images_with_document: bool,
    /// Browser runs: the proxy holds prefetched images on the page's other
    /// hosts until the more urgent prefetched objects on their way are
    /// within one bandwidth-delay product (their connections are not the
    /// page's, so no origin orders them behind its scripts)
    #[arg(long)]
    hold_other_hosts_images: bool,
    /// Also load pages (see --browser-pages) in headless Chromium this many
    /// times in each arm (see --arms: by default with the hint through the
    /// local proxy, and cold on its own); 0 skips it. Skipped with a
    /// message when Chromium is not
    /// installed [default: 5].
    #[arg(long)]
    browser_runs: Option<usize>,
    /// Chromium binary for the browser runs [default: /usr/bin/chromium].
    #[arg(long)]
    chromium: Option<PathBuf>,
    /// Chromium's arms, comma-separated: `cold` (a first visit: fresh
    /// profile), `predictor` (a returning visitor: the same profile loaded
    /// the page before, its HTTP cache, sockets and host cache cleared, its
    /// loading predictor kept), `early-hints` (the origin answers the
    /// document with 103 Early Hints: preconnect to the page's other hosts,
    /// preload of its style sheets, scripts and fonts), `h3` (HTTP/3 to
    /// every host) and `meh` (the hint through the local proxy). `cold` is
    /// always loaded: every other arm is paired with it, on the same
    /// stretch of the trace [default: cold,meh].
    #[arg(long, value_delimiter = ',')]
    arms: Option<Vec<Arm>>,
    /// How many times slower Chromium's renderer runs than this machine
    /// (DevTools CPU throttling), in every arm: 4 is a mid-range phone
    /// (Lighthouse's mobile setting), 1 none [default: 1].
    #[arg(long)]
    cpu_slowdown: Option<f64>,
    /// Keep every browser load's Chromium NetLog (a few MB each) in the
    /// result folder's chromium/, named PAGE-RUN-ARM.netlog.json, to see
    /// where a load's time goes (chrome://net-export viewer).
    #[arg(long)]
    keep_netlogs: bool,
}

impl MehArgs {
    fn config(&self) -> anyhow::Result<Config> {
        let mut c: Config = self.run.base()?;
        self.corpus.apply(&mut c.corpus)?;
        self.origin.apply(&mut c.origin)?;
        c.runs = self.runs.unwrap_or(c.runs);
        if let Some(r) = self.rate {
            c.rate_bps = r;
            c.trace = None;
        }
        self.trace.apply(&mut c.trace, &mut c.uplink)?;
        c.radio_rtt_ms = self.radio_rtt.unwrap_or(c.radio_rtt_ms);
        c.wired_rtt_ms = self.wired_rtt.unwrap_or(c.wired_rtt_ms);
        c.bandwidth_bps = self.bandwidth.or(c.bandwidth_bps);
        c.prior_bps = self.prior.unwrap_or(c.prior_bps);
        c.radio = self.radio.unwrap_or(c.radio);
        c.browser_pages = self.browser_pages.unwrap_or(c.browser_pages);
        c.policy = self.policy.unwrap_or(c.policy);
        c.dispatch = self.dispatch.unwrap_or(c.dispatch);
        if self.no_prefetch {
            c.prefetch = false;
        }
        c.one_connection |= self.one_connection;
        c.first_flight_budget |= self.first_flight_budget;
        c.image_hold |= self.image_hold;
        c.images_with_document |= self.images_with_document;
        c.hold_other_hosts_images |= self.hold_other_hosts_images;
        c.browser_runs = self.browser_runs.unwrap_or(c.browser_runs);
        if let Some(b) = &self.chromium {
            c.chromium = absolute(b)?;
        }
        c.keep_netlogs |= self.keep_netlogs;
        if let Some(a) = &self.arms {
            c.arms = a.clone();
        }
        c.cpu_slowdown = self.cpu_slowdown.unwrap_or(c.cpu_slowdown);
        c.out = self.run.out.clone().unwrap_or(c.out);
        Ok(c)
    }

    pub(super) fn run(&self) -> anyhow::Result<()> {
        super::run_experiment::<Meh>(&self.run, || self.config())
    }
}

#[cfg(test)]
mod tests {
    use super::super::{parse, LabSub};
    use super::*;

    fn args(a: &[&str]) -> MehArgs {
        let mut v = vec!["meh"];
        v.extend_from_slice(a);
        match parse(&v) {
            LabSub::Meh(m) => *m,
            other => panic!("not meh: {other:?}"),
        }
    }

    #[test]
    fn no_flags_give_the_library_defaults() {
        assert_eq!(args(&[]).config().unwrap(), Config::default());
    }

    #[test]
    fn choices_are_typed_and_keep_their_names() {
        let c = args(&[
            "--radio",
            "3g",
            "--policy",
            "hint",
            "--browser-pages",
            "fig8",
            "--dispatch",
            "pull-rate",
            "--radio-rtt",
            "60ms",
            "--bandwidth",
            "20mbit",
        ])
        .config()
        .unwrap();
        assert_eq!(
            (c.radio, c.policy, c.browser_pages, c.dispatch),
            (
                Rrc::Umts,
                Policy::Hint,
                BrowserPages::Fig8,
                Dispatch::PullRate
            )
        );
        assert_eq!((c.radio_rtt_ms, c.bandwidth_bps), (60, Some(20_000_000)));
        let e = super::super::parse_error(&["meh", "--radio", "5g"]);
        assert!(e.contains("lte, 3g or off"), "{e}");
    }

    #[test]
    fn flags_override_a_config_file() {
        let dir = std::env::temp_dir().join(format!("mewa-cli-cfg-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("config.json");
        let saved = Config {
            runs: 7,
            radio_rtt_ms: 60,
            dispatch: Dispatch::Push,
            ..Config::default()
        };
        std::fs::write(&file, serde_json::to_string(&saved).unwrap()).unwrap();
        let f = file.to_str().unwrap();
        assert_eq!(args(&["--config", f]).config().unwrap(), saved);
        let c = args(&["--config", f, "--runs", "2"]).config().unwrap();
        assert_eq!(
            (c.runs, c.radio_rtt_ms, c.dispatch),
            (2, 60, Dispatch::Push)
        );
        // A baseline config is not a MEH config.
        let LabSub::Baseline(b) = parse(&["baseline", "--config", f]) else {
            panic!("not baseline")
        };
        assert!(b.run().is_err());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
