//! The output switches of every table-printing verb (the tables
//! themselves are `mewa_report::Table`).

use clap::Args;
pub use mewa_report::Table;

/// Output switches every table-printing verb takes.
#[derive(Debug, Clone, Args)]
pub struct OutputArgs {
    /// Print JSON instead of an aligned table.
    #[arg(long, conflicts_with = "csv")]
    pub json: bool,
    /// Print CSV instead of an aligned table.
    #[arg(long)]
    pub csv: bool,
    /// Also draw the figure as SVG to this file.
    #[arg(long, value_name = "FILE.svg")]
    pub plot: Option<std::path::PathBuf>,
}

/// Prints `table` as text or CSV, or `json` when asked.
pub fn emit<T: serde::Serialize>(args: &OutputArgs, table: &Table, json: &T) -> anyhow::Result<()> {
    if args.json {
        println!("{}", serde_json::to_string_pretty(json)?);
    } else if args.csv {
        print!("{}", table.to_csv());
    } else {
        print!("{}", table.to_text());
    }
    Ok(())
}
