//! What `mewa lab fld pages` is asked to do: its [`Config`], the network
//! settings of seed 002 §3, the page types, and the loads a setting makes
//! in the order they run (one function for the plan and the run, so a
//! resumed run finds the same keys).

use std::path::PathBuf;

use mewa_corpus::Page;
use mewa_loader::record::Protocol;
use serde::{Deserialize, Serialize};

use crate::cross::Flow;
use crate::experiment::kinds::named_enum;
use crate::experiment::{Congestion, CorpusChoice, OriginChoice};
use crate::fld::CLIENT_RMEM;

named_enum! {
    /// A network setting of seed 002 §3.
    pub enum Setting ("setting", "lte or 3g") {
        /// "The maximum bandwidth is set at 100 Mbps for LTE [...] for LTE,
        /// the effective average bandwidth is 25 Mbps and delay is 13 ms".
        Lte = "lte",
        /// "[...] and 21 Mbps for 3G. [...] For 3G, it was 7 Mbps and 25 ms".
        ThreeG = "3g",
    }
}

impl Setting {
    /// The link and background the setting builds. LTE: three long cubic
    /// flows, so that a new flow's fair share is 25 Mbit/s; 3G: two (a fair
    /// share of 7 Mbit/s).
    pub fn network(self) -> Network {
        let (capacity_bps, one_way_ms, flows) = match self {
            Setting::Lte => (100_000_000, 13, 3),
            Setting::ThreeG => (21_000_000, 25, 2),
        };
        Network {
            name: self.name().into(),
            capacity_bps,
            one_way_ms,
            cross: vec![Flow::Tcp { cc: "cubic".into() }; flows],
        }
    }
}

/// A setting as a testbed builds it (and as `result.json` keeps it beside
/// its cross-traffic log).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Network {
    /// The setting's label in the tables (`lte`, `lte-q50` in a sweep).
    pub name: String,
    /// The link's capacity both ways, bit/s.
    pub capacity_bps: u64,
    /// One-way delay, ms.
    pub one_way_ms: u64,
    /// The background flows that bring the capacity down to the effective
    /// rate.
    pub cross: Vec<Flow>,
}

named_enum! {
    /// How a page is loaded: by the built-in loader (with per-object
    /// timing) or in headless Chromium (its load time only).
    pub enum PageType (
        "page type",
        "h2 (HTTP/2 over TLS), h1 (HTTP/1.1 in the clear), chromium, chromium-h1 or chromium-http"
    ) {
        /// Encrypted: HTTP/2 over TLS, one connection per origin.
        H2 = "h2",
        /// Unencrypted: HTTP/1.1 in the clear, up to six per host.
        H1 = "h1",
        /// Headless Chromium, HTTP/2 over TLS.
        Chromium = "chromium",
        /// Headless Chromium with HTTP/2 turned off: HTTP/1.1 over TLS, six
        /// connections per host, as Chromium opens them.
        ChromiumH1 = "chromium-h1",
        /// Headless Chromium over `http://`: HTTP/1.1 in the clear, as seed
        /// 002's unencrypted pages were (generated pages only; recordings
        /// keep their schemes).
        ChromiumHttp = "chromium-http",
    }
}

impl PageType {
    /// The loader's protocol and TLS (`None`: a Chromium type, the browser
    /// chooses).
    pub fn loader(self) -> Option<(Protocol, bool)> {
        match self {
            PageType::H2 => Some((Protocol::H2, true)),
            PageType::H1 => Some((Protocol::H1, false)),
            _ => None,
        }
    }

    /// How a Chromium type starts the browser: its flags, and whether it
    /// loads the page in the clear. `None` for the loader's types.
    pub fn chromium(self) -> Option<(&'static [&'static str], bool)> {
        match self {
            PageType::Chromium => Some((crate::browser::protocol_flags(Protocol::H2), false)),
            PageType::ChromiumH1 => Some((crate::browser::protocol_flags(Protocol::H1), false)),
            PageType::ChromiumHttp => Some((&[], true)),
            PageType::H2 | PageType::H1 => None,
        }
    }

    /// Its name in the tables.
    pub fn title(self) -> &'static str {
        match self {
            PageType::H2 => "encrypted (h2)",
            PageType::H1 => "unencrypted (h1)",
            PageType::Chromium => "Chromium, h2 (load time)",
            PageType::ChromiumH1 => "Chromium, h1 over TLS (load time)",
            PageType::ChromiumHttp => "Chromium, h1 in the clear (load time)",
        }
    }
}

/// `mewa lab fld pages`'s settings; `Default` is what the CLI shows.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// The pages.
    pub corpus: CorpusChoice,
    /// The CA (the congestion control is [`Config::ccs`]).
    pub origin: OriginChoice,
    /// Network settings.
    pub settings: Vec<Setting>,
    /// The server's congestion controls, alternated load by load (cubic
    /// first: every other is compared with it).
    pub ccs: Vec<Congestion>,
    /// Page types.
    pub protocols: Vec<PageType>,
    /// Loads per page, type and control ("each web page is downloaded 11
    /// times").
    pub loads: usize,
    /// Seconds of cross traffic before the first load.
    pub warmup_s: u64,
    /// The bottleneck queue, in ms at the setting's capacity; several make
    /// a sweep, each setting run once per queue (seed 002 does not give its
    /// emulator's queue, and FLD_TCP's gain depends on it). A single number
    /// in older config files reads as one queue.
    #[serde(deserialize_with = "one_or_many")]
    pub queue_ms: Vec<u64>,
    /// Background flows instead of the settings' (empty: no cross traffic).
    pub cross: Option<Vec<Flow>>,
    /// The client's initial receive buffer (`net.ipv4.tcp_rmem`).
    pub client_rmem: usize,
    /// The Chromium binary (the Chromium page types).
    pub chromium: PathBuf,
    /// Parent of the result folder.
    pub out: PathBuf,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            corpus: CorpusChoice::default(),
            origin: OriginChoice::default(),
            settings: vec![Setting::Lte, Setting::ThreeG],
            ccs: vec![Congestion::Cubic, Congestion::Fld],
            protocols: vec![PageType::H2, PageType::H1],
            loads: 11,
            warmup_s: 5,
            queue_ms: vec![20],
            cross: None,
            client_rmem: CLIENT_RMEM,
            chromium: PathBuf::from(mewa_chromium::DEFAULT_CHROMIUM),
            out: PathBuf::from("out/lab"),
        }
    }
}

/// Reads a number or a list of numbers as a list.
fn one_or_many<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<u64>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum OneOrMany {
        One(u64),
        Many(Vec<u64>),
    }
    Ok(match OneOrMany::deserialize(d)? {
        OneOrMany::One(n) => vec![n],
        OneOrMany::Many(v) => v,
    })
}

/// One setting at one queue: a testbed of its own.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cell {
    /// The setting.
    pub setting: Setting,
    /// The bottleneck queue, ms at the setting's capacity.
    pub queue_ms: u64,
    /// Its label in the tables: the setting's name, with `-q<ms>` when the
    /// run sweeps the queue.
    pub label: String,
}

impl Cell {
    /// What every unit key of the cell starts with.
    pub fn prefix(&self) -> String {
        format!("{}/", self.label)
    }
}

/// One planned load: a unit of the run.
#[derive(Debug, Clone, Copy)]
pub struct LoadId<'a> {
    /// Its setting and queue.
    pub cell: &'a Cell,
    /// The load index.
    pub run: usize,
    /// The page.
    pub page: &'a Page,
    /// The page type.
    pub kind: PageType,
    /// The server's control.
    pub cc: &'a Congestion,
}

impl LoadId<'_> {
    /// The unit's key: what the load varies.
    pub fn key(&self) -> String {
        format!(
            "{}run{}/{}/{}/{}",
            self.cell.prefix(),
            self.run,
            self.page.name,
            self.kind,
            self.cc
        )
    }

    /// What the progress line says.
    pub fn what(&self) -> String {
        format!(
            "{} {} {} {}",
            self.cell.label, self.page.name, self.kind, self.cc
        )
    }
}

impl Config {
    /// Each setting and queue the run has, in order.
    pub fn cells(&self) -> Vec<Cell> {
        let sweep = self.queue_ms.len() > 1;
        self.settings
            .iter()
            .flat_map(|&setting| {
                self.queue_ms.iter().map(move |&queue_ms| Cell {
                    setting,
                    queue_ms,
                    label: if sweep {
                        format!("{setting}-q{queue_ms}")
                    } else {
                        setting.to_string()
                    },
                })
            })
            .collect()
    }

    /// The testbed of `cell`: its setting's link, with the background of
    /// `--cross` if given, labelled as the cell.
    pub fn network(&self, cell: &Cell) -> Network {
        let mut n = cell.setting.network();
        if let Some(c) = &self.cross {
            n.cross = c.clone();
        }
        n.name = cell.label.clone();
        n
    }

    /// Every load of `cell` over `pages`, in the order they run: run by
    /// run, page by page, type by type, the controls in turn, which goes
    /// first alternating run by run so a drift in the cross traffic does
    /// not favour one.
    pub fn loads<'a>(&'a self, cell: &'a Cell, pages: &'a [Page]) -> Vec<LoadId<'a>> {
        let mut out = Vec::new();
        for run in 0..self.loads {
            for page in pages {
                for &kind in &self.protocols {
                    let mut order: Vec<&Congestion> = self.ccs.iter().collect();
                    if run % 2 == 1 {
                        order.reverse();
                    }
                    for cc in order {
                        out.push(LoadId {
                            cell,
                            run,
                            page,
                            kind,
                            cc,
                        });
                    }
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chromium_types_choose_protocol_and_scheme() {
        assert_eq!(PageType::Chromium.chromium(), Some((&[][..], false)));
        assert_eq!(
            PageType::ChromiumH1.chromium(),
            Some((&["--disable-http2"][..], false))
        );
        assert_eq!(PageType::ChromiumHttp.chromium(), Some((&[][..], true)));
        assert_eq!(PageType::H1.chromium(), None);
        assert_eq!(PageType::H1.loader(), Some((Protocol::H1, false)));
        for t in PageType::ALL {
            assert!(t.loader().is_some() != t.chromium().is_some(), "{t}");
        }
        let e = "h3".parse::<PageType>().unwrap_err().to_string();
        assert!(e.contains("chromium-http"), "{e}");
    }

    #[test]
    fn the_loads_of_a_setting_alternate_the_first_control_and_have_keys_of_their_own() {
        let config = Config {
            settings: vec![Setting::Lte],
            protocols: vec![PageType::H2],
            loads: 2,
            ..Config::default()
        };
        let pages = mewa_corpus::generate(mewa_corpus::Preset::Meh15, 1).pages;
        let pages = &pages[..2];
        let cells = config.cells();
        let loads = config.loads(&cells[0], pages);
        assert_eq!(loads.len(), 2 * 2 * 2);
        let ccs: Vec<&str> = loads.iter().map(|l| l.cc.name()).collect();
        assert_eq!(
            ccs,
            ["cubic", "mewa_fld", "cubic", "mewa_fld", "mewa_fld", "cubic", "mewa_fld", "cubic"]
        );
        let keys: std::collections::HashSet<String> = loads.iter().map(LoadId::key).collect();
        assert_eq!(keys.len(), loads.len());
        assert!(
            loads[0].key().starts_with("lte/run0/"),
            "{}",
            loads[0].key()
        );
        assert!(loads[0].key().ends_with("/h2/cubic"), "{}", loads[0].key());
    }
}
