//! Writes a synthetic HAR 1.2 recording (`mewa_testkit::synthetic_har`) to
//! standard output, for `mewa corpus import` and the lab:
//!
//! ```text
//! cargo run -p mewa-testkit --example synthetic_har -- HOSTS OBJECTS [SEED] [RANDOM_TRACKING] > page.har
//! ```
//!
//! SEED defaults to 1, RANDOM_TRACKING to a tenth of OBJECTS. Out-of-range
//! counts are clamped as `HarSpec::clamped` documents.

use mewa_testkit::{synthetic_har, HarSpec};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let num = |i: usize, what: &str| -> Option<Result<u64, String>> {
        args.get(i).map(|a| {
            a.parse::<u64>()
                .map_err(|e| format!("{what} `{a}` is not a whole number: {e}"))
        })
    };
    let spec = (|| -> Result<HarSpec, String> {
        let usage = "usage: synthetic_har HOSTS OBJECTS [SEED] [RANDOM_TRACKING]";
        let hosts = num(0, "HOSTS").ok_or(usage)??;
        let objects = num(1, "OBJECTS").ok_or(usage)??;
        let seed = num(2, "SEED").unwrap_or(Ok(1))?;
        let tracking = num(3, "RANDOM_TRACKING").unwrap_or(Ok(objects / 10))?;
        let size = |v: u64| usize::try_from(v).unwrap_or(usize::MAX);
        Ok(HarSpec {
            hosts: size(hosts),
            objects: size(objects),
            seed,
            random_tracking: size(tracking),
        })
    })();
    match spec {
        Ok(spec) => {
            let used = spec.clamped();
            if used != spec {
                eprintln!("clamped to {used:?}");
            }
            println!("{}", synthetic_har(&spec));
        }
        Err(why) => {
            eprintln!("{why}");
            std::process::exit(2);
        }
    }
}
