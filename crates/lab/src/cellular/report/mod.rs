//! `mewa lab cellular`'s report: seed 003's Table 2 beside ours, each knob
//! against the base, the fix's effect, every load, and the congestion
//! window and timeout around a promotion; one function per table
//! (`table2`, `knobs`, `fix`, `loads`) and for the plots (`plots`), over
//! the selections they share (`select`).

mod fix;
mod knobs;
mod loads;
mod plots;
mod select;
mod table2;

use mewa_report::{ResultFolder, SectionReport};

use super::config::Config;
use super::record::{CellRun, LoadTrace};

pub use table2::TABLE2;

/// The report of `runs` and `traces` (each in the order they finished).
pub fn report(
    config: &Config,
    runs: Vec<CellRun>,
    traces: Vec<LoadTrace>,
    folder: Option<ResultFolder>,
) -> SectionReport {
    let browsers = select::browsers(config, &runs);
    let names = browsers
        .iter()
        .map(|&b| select::label(b))
        .collect::<Vec<_>>()
        .join(", ");
    let grid = select::grid(&browsers, config);
    let pairs = select::fix_pairs(config);
    let sections = vec![
        table2::table2(config, &runs, &browsers, &names),
        knobs::knobs(config, &runs, &grid, &names),
        fix::fix(&runs, &grid, &pairs, &names),
        loads::every_load(&runs),
    ];
    let plots = plots::plots(config, &traces, &pairs);
    SectionReport {
        name: "cellular",
        sections,
        plots,
        json: serde_json::json!({ "runs": runs, "traces": traces }),
        extra: Vec::new(),
        folder,
    }
}

#[cfg(test)]
mod tests {
    use super::super::radio::Radio;
    use super::super::record::tests::old_line;
    use super::*;
    use crate::experiment::Browser;
    use mewa_report::Table;

    /// A configuration of 3G, HTTP/2 and `settings`.
    fn config(settings: &[&str]) -> Config {
        Config {
            radios: vec![Radio::ThreeG],
            settings: settings.iter().map(|s| s.parse().expect(s)).collect(),
            protocols: vec![mewa_loader::record::Protocol::H2],
            ..Config::default()
        }
    }

    #[test]
    fn old_runs_read_as_the_loaders_and_each_browser_has_its_own_rows() {
        let old: CellRun = serde_json::from_value(old_line("base", "h2", 2.0)).unwrap();
        assert_eq!((old.browser, old.handshakes), (Browser::Loader, 0));
        let mut chromium: CellRun = serde_json::from_value(old_line("base", "h2", 3.0)).unwrap();
        chromium.browser = Browser::Chromium;
        let r = report(&config(&["base"]), vec![chromium, old], Vec::new(), None);
        let table = |csv: &str| &r.sections.iter().find(|s| s.csv == csv).unwrap().table;
        // Table 2: the loader's block first, then Chromium's, each with
        // its own mean PLT (Cubic HTTP/2 is the ninth column).
        let t2 = table("table2.csv");
        assert_eq!(t2.rows.len(), 2 * TABLE2.len());
        assert_eq!(
            (t2.rows[0][0].as_str(), t2.rows[0][8].as_str()),
            ("loader", "2000")
        );
        let c = &t2.rows[TABLE2.len()];
        assert_eq!((c[0].as_str(), c[8].as_str()), ("Chromium", "3000"));
        let knobs = table("knobs.csv");
        let labels: Vec<&str> = knobs.rows.iter().map(|r| r[0].as_str()).collect();
        assert_eq!(labels, ["loader", "Chromium"]);
        // Every row of runs.csv has a cell per header.
        let runs = table("runs.csv");
        assert!(runs.rows.iter().all(|r| r.len() == runs.headers.len()));
    }

    /// The report's fix table.
    fn fix_table(r: &SectionReport) -> &Table {
        &r.sections
            .iter()
            .find(|s| s.csv == "fix.csv")
            .expect("a fix table")
            .table
    }

    #[test]
    fn the_fix_pairs_each_pages_same_load_across_settings() {
        // (setting, page, seq, promotions, PLT): page a woke the radio only
        // in the base, so the medians compare unlike pages (+65 %), while
        // the pairs b and c are each 10 % slower with the fix.
        let loads = [
            ("base", "a", 1, 1, 2.0),
            ("base", "b", 2, 1, 4.0),
            ("base", "c", 3, 1, 2.0),
            ("rto-floor", "a", 1, 0, 1.0),
            ("rto-floor", "b", 2, 1, 4.4),
            ("rto-floor", "c", 3, 1, 2.2),
        ];
        let runs: Vec<CellRun> = loads
            .iter()
            .map(|&(setting, page, seq, promotions, plt)| {
                let mut v = old_line(setting, "h2", plt);
                v["page"] = page.into();
                v["seq"] = seq.into();
                v["promotions"] = promotions.into();
                serde_json::from_value(v).unwrap()
            })
            .collect();
        let r = report(&config(&["base", "rto-floor"]), runs, Vec::new(), None);
        let fix = fix_table(&r);
        assert_eq!(fix.rows.len(), 1);
        let col = |name: &str| {
            let i = fix.headers.iter().position(|h| h == name).unwrap();
            fix.rows[0][i].as_str()
        };
        assert_eq!(col("settings"), "base → rto-floor");
        assert_eq!(col("loads after a promotion"), "3 / 2");
        assert_eq!(col("PLT change %"), "65.0");
        assert_eq!((col("paired loads"), col("paired change %")), ("2", "10.0"));
    }

    #[test]
    fn the_fix_is_compared_within_each_setting_that_has_it_both_ways() {
        // (setting, page, PLT): without F-RTO the fix saves 1 s; the base
        // pair is there too, and reno has no pair (no reno+rto-floor).
        let loads = [
            ("base", "a", 2.0),
            ("rto-floor", "a", 2.0),
            ("frto-off", "a", 3.0),
            ("rto-floor+frto-off", "a", 2.0),
            ("reno", "a", 2.5),
        ];
        let runs: Vec<CellRun> = loads
            .iter()
            .map(|&(setting, page, plt)| {
                let mut v = old_line(setting, "h2", plt);
                v["page"] = page.into();
                v["seq"] = 1.into();
                serde_json::from_value(v).unwrap()
            })
            .collect();
        let settings: Vec<&str> = loads.iter().map(|l| l.0).collect();
        let r = report(&config(&settings), runs, Vec::new(), None);
        let fix = fix_table(&r);
        let col = |row: usize, name: &str| {
            let i = fix.headers.iter().position(|h| h == name).unwrap();
            fix.rows[row][i].clone()
        };
        assert_eq!(fix.rows.len(), 2);
        assert_eq!(col(0, "settings"), "base → rto-floor");
        assert_eq!(col(0, "paired change %"), "0.0");
        assert_eq!(col(1, "settings"), "frto-off → rto-floor+frto-off");
        assert_eq!(col(1, "paired change %"), "-33.3");
    }
}
