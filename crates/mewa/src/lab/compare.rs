//! `mewa lab compare`: two `mewa lab meh` result folders side by side.

use std::path::PathBuf;

use clap::Args;
use mewa_lab::meh::{browser_loads, compare_folders, reduction_ci, verdict_text, Arm};
use mewa_report::{opt, Table};

/// `mewa lab compare`'s arguments.
#[derive(Debug, Args)]
pub struct CompareArgs {
    /// The baseline result folder (`mewa lab meh … --out`'s timestamped
    /// folder).
    a: PathBuf,
    /// The folder compared with it.
    b: PathBuf,
    /// Only these arms, comma-separated (default: every arm both have).
    #[arg(long, value_delimiter = ',')]
    arms: Vec<Arm>,
    /// Also print the per-page table of each comparison.
    #[arg(long)]
    per_page: bool,
}

impl CompareArgs {
    pub(super) fn run(&self) -> anyhow::Result<()> {
        let a = browser_loads(&self.a)?;
        let b = browser_loads(&self.b)?;
        let f = compare_folders(&a, &b, &self.arms);
        if f.comparisons.is_empty() {
            anyhow::bail!(
                "{} and {} have no Chromium arm in common with loads in both{}",
                self.a.display(),
                self.b.display(),
                if self.arms.is_empty() {
                    String::new()
                } else {
                    " among --arms".into()
                }
            );
        }
        println!("B = {}\nA = {}\n", self.b.display(), self.a.display());
        let mut t = Table::new(&[
            "metric",
            "arm",
            "pages",
            "pairs won by B",
            "median reduction of B vs A % [95% CI]",
            "p (Wilcoxon)",
            "verdict",
        ]);
        for c in &f.comparisons {
            let Some(o) = &c.result.overall else {
                continue;
            };
            t.push(vec![
                c.metric.name().into(),
                c.a.to_string(),
                o.pages.to_string(),
                format!("{}/{}", o.won, o.pairs),
                reduction_ci(o.median_change, o.ci),
                opt(o.p_value, 4),
                verdict_text(o.pages, o.verdict()),
            ]);
        }
        print!("{}", t.to_text());
        if self.per_page {
            for c in &f.comparisons {
                println!("\n{} {}:", c.metric.name(), c.a);
                print!("{}", mewa_lab::meh::page_table(c).to_text());
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::{parse, LabSub};
    use mewa_lab::meh::{BrowserRun, Record};

    fn load(page: &str, run: usize, arm: &str, plt: f64) -> Record {
        let v = serde_json::json!({
            "kind": "chromium", "page": page, "run": run, "with_hint": arm == "meh",
            "plt_s": plt, "requested_s": null, "n": 0, "urls_lead_ms": null,
            "error": null, "handshake_ns": null, "arm": arm,
        });
        serde_json::from_value(v).expect("a Chromium record")
    }

    fn folder(tag: &str, scale: f64) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("mewa-compare-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("dir");
        let mut j = mewa_report::Journal::<Record>::open(&dir).expect("journal");
        for run in 0..4 {
            for page in ["a", "b", "c"] {
                let recs = vec![
                    load(page, run, "cold", 2.0 + run as f64 * 0.1),
                    load(page, run, "meh", (1.5 + run as f64 * 0.1) * scale),
                ];
                j.append(&format!("chromium/run{run}/{page}"), recs)
                    .expect("append");
            }
        }
        dir
    }

    #[test]
    fn two_folders_compare_and_a_folder_without_results_is_named() {
        let (a, b) = (folder("a", 1.0), folder("b", 0.8));
        let args = |x: &std::path::Path, y: &std::path::Path| match parse(&[
            "compare",
            &x.display().to_string(),
            &y.display().to_string(),
            "--arms",
            "meh",
        ]) {
            LabSub::Compare(c) => c,
            other => panic!("not compare: {other:?}"),
        };
        args(&a, &b).run().expect("compares");
        let loads: Vec<BrowserRun> = mewa_lab::meh::browser_loads(&b).expect("loads");
        assert_eq!(loads.len(), 24);
        let f = mewa_lab::meh::compare_folders(
            &mewa_lab::meh::browser_loads(&a).expect("loads"),
            &loads,
            &[],
        );
        let meh_plt = f
            .comparisons
            .iter()
            .find(|c| c.a.name() == "meh" && c.metric == mewa_lab::meh::Metric::Plt)
            .and_then(|c| c.result.overall.clone())
            .expect("meh");
        assert!((meh_plt.median_change + 0.2).abs() < 1e-9, "{meh_plt:?}");
        assert_eq!((meh_plt.won, meh_plt.pairs), (12, 12));
        let empty = std::env::temp_dir().join(format!("mewa-compare-none-{}", std::process::id()));
        std::fs::create_dir_all(&empty).expect("dir");
        let e = args(&a, &empty).run().expect_err("no results");
        assert!(
            format!("{e:#}").contains(&empty.display().to_string()),
            "{e:#}"
        );
        for d in [a, b, empty] {
            let _ = std::fs::remove_dir_all(d);
        }
    }
}
