//! `mewa corpus …`: generate, inspect and import page corpora (docs/CORPUS.md).

use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::{Args, Subcommand};
use mewa_corpus::{generate_with, Corpus, Options, Preset};

use crate::output::Table;

#[derive(Debug, Args)]
pub struct CorpusCmd {
    #[command(subcommand)]
    which: Which,
}

#[derive(Debug, Subcommand)]
enum Which {
    /// Generate a corpus from a preset: meh15 (seed 000), accel7 (seed 004),
    /// complat (seed 001), general (HTTP Archive 2022 mobile).
    Gen {
        /// meh15, accel7, complat or general.
        preset: String,
        /// PRNG seed; the same seed always gives the same corpus.
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// general only: number of pages (default 100).
        #[arg(long)]
        pages: Option<usize>,
        /// complat only: one computation share in percent (5-95) instead of
        /// the sweep 5, 10, ..., 95.
        #[arg(long, value_name = "PERCENT")]
        share: Option<f64>,
        /// Write the corpus here instead of to standard output.
        #[arg(short, long, value_name = "FILE.json")]
        output: Option<PathBuf>,
    },
    /// Show a corpus file as a table: page, objects, hosts, KB served and
    /// recorded (imported bodies may grow to carry their references), scripts,
    /// compute ms, server think ms, responses other than 200.
    Show {
        /// The corpus file.
        file: PathBuf,
        /// Print CSV instead of an aligned table.
        #[arg(long)]
        csv: bool,
    },
    /// Import real recordings (HAR, DevTools log, Lighthouse folder, or a
    /// folder of them) into a corpus.
    Import {
        /// A recording or a folder searched recursively.
        path: PathBuf,
        /// Write the corpus here instead of to standard output.
        #[arg(short, long, value_name = "FILE.json")]
        output: Option<PathBuf>,
    },
}

pub fn run(cmd: CorpusCmd) -> anyhow::Result<()> {
    match cmd.which {
        Which::Gen {
            preset,
            seed,
            pages,
            share,
            output,
        } => {
            let preset: Preset = preset.parse()?;
            if let Some(pct) = share {
                anyhow::ensure!(
                    (5.0..=95.0).contains(&pct),
                    "--share is a percentage between 5 and 95, got {pct}"
                );
            }
            let opts = Options {
                pages,
                share: share.map(|p| p / 100.0),
            };
            let corpus = generate_with(preset, seed, &opts)?;
            corpus
                .validate()
                .context("the generator produced an invalid page (a bug)")?;
            write(&corpus, output.as_deref())
        }
        Which::Show { file, csv } => {
            let bytes =
                std::fs::read(&file).with_context(|| format!("reading {}", file.display()))?;
            let corpus = Corpus::from_json(&bytes).with_context(|| file.display().to_string())?;
            let t = table(&corpus);
            if csv {
                print!("{}", t.to_csv());
            } else {
                print!("{}", t.to_text());
            }
            Ok(())
        }
        Which::Import { path, output } => import(&path, output.as_deref()),
    }
}

fn table(c: &Corpus) -> Table {
    let mut t = Table::new(&[
        "page",
        "objects",
        "hosts",
        "KB",
        "recorded_KB",
        "diff_%",
        "scripts",
        "compute_ms",
        "think_ms",
        "non_200",
    ]);
    for p in &c.pages {
        let (served, rec) = (p.total_bytes(), p.recorded_bytes());
        t.push(vec![
            p.name.clone(),
            p.objects.len().to_string(),
            p.hosts().len().to_string(),
            format!("{:.1}", served as f64 / 1000.0),
            format!("{:.1}", rec as f64 / 1000.0),
            format!(
                "{:+.2}",
                100.0 * (served as f64 - rec as f64) / rec.max(1) as f64
            ),
            p.scripts().to_string(),
            p.total_compute_ms().to_string(),
            p.objects
                .iter()
                .map(|o| u64::from(o.think_ms))
                .sum::<u64>()
                .to_string(),
            p.objects
                .iter()
                .filter(|o| o.status() != 200)
                .count()
                .to_string(),
        ]);
    }
    t
}

fn write(corpus: &Corpus, output: Option<&Path>) -> anyhow::Result<()> {
    let json = corpus.to_json();
    match output {
        Some(path) => {
            std::fs::write(path, &json).with_context(|| format!("writing {}", path.display()))?;
            eprintln!("wrote {} pages to {}", corpus.pages.len(), path.display());
        }
        None => {
            use std::io::Write as _;
            std::io::stdout()
                .write_all(&json)
                .context("writing to standard output")?;
        }
    }
    Ok(())
}

fn import(path: &Path, output: Option<&Path>) -> anyhow::Result<()> {
    let (imported, skipped) = mewa_lab::experiment::import_recordings(path)?;
    for s in &skipped {
        eprintln!("{s}");
    }
    for p in &imported.placeholder_sizes {
        eprintln!(
            "placeholder size {} B: page {} object {} ({})",
            mewa_corpus::PLACEHOLDER_SIZE,
            p.page,
            p.object,
            p.url
        );
    }
    for n in &imported.notes {
        eprintln!("note: {n}");
    }
    write(&imported.corpus, output)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_has_a_row_per_page() {
        let c = mewa_corpus::generate(Preset::Meh15, 1);
        let t = table(&c);
        assert_eq!(t.rows.len(), 15);
        assert!(t.rows.iter().any(|r| r[1] == "32" && r[3] == "622.0"));
    }
}
