//! `mewa lab compare`: two `mewa lab meh` result folders side by side.

use std::path::PathBuf;

use clap::Args;
use mewa_lab::meh::{browser_loads, compare_folders, Arm};
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
                format!(
                    "{:.1} [{:.1}, {:.1}]",
                    -o.median_change * 100.0,
                    -o.ci.1 * 100.0,
                    -o.ci.0 * 100.0
                ),
                opt(o.p_value, 4),
                if o.pages < mewa_lab::meh::FEWEST_FOR_VERDICT {
                    format!("too few ({})", o.pages)
                } else {
                    format!("{:?}", o.verdict())
                },
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
