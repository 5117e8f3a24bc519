//! Aligned text tables, Markdown and CSV: what every experiment and
//! benchmark prints, in one place so their columns line up the same way.

use std::fmt::Write as _;

/// A table of strings with a header row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Table {
    /// Column titles.
    pub headers: Vec<String>,
    /// Cells, row by row.
    pub rows: Vec<Vec<String>>,
}

impl Table {
    /// An empty table with these column titles.
    pub fn new(headers: &[&str]) -> Table {
        Table {
            headers: headers.iter().map(|h| h.to_string()).collect(),
            rows: Vec::new(),
        }
    }

    /// Appends a row.
    pub fn push(&mut self, row: Vec<String>) {
        self.rows.push(row);
    }

    /// Columns padded to their widest cell; numbers (and `-`) right-aligned.
    pub fn to_text(&self) -> String {
        let cols = self.headers.len();
        let mut w = vec![0usize; cols];
        for r in std::iter::once(&self.headers).chain(&self.rows) {
            for (i, c) in r.iter().enumerate().take(cols) {
                w[i] = w[i].max(c.chars().count());
            }
        }
        let mut out = String::new();
        let line = |out: &mut String, r: &[String]| {
            let cells: Vec<String> = (0..cols)
                .map(|i| {
                    let c = r.get(i).map(String::as_str).unwrap_or("");
                    let numeric = c
                        .chars()
                        .next()
                        .is_some_and(|ch| ch.is_ascii_digit() || ch == '-' || ch == '+');
                    if numeric {
                        format!("{c:>width$}", width = w[i])
                    } else {
                        format!("{c:<width$}", width = w[i])
                    }
                })
                .collect();
            let _ = writeln!(out, "{}", cells.join("  ").trim_end());
        };
        line(&mut out, &self.headers);
        let rule: Vec<String> = w.iter().map(|&n| "-".repeat(n)).collect();
        let _ = writeln!(out, "{}", rule.join("  "));
        for r in &self.rows {
            line(&mut out, r);
        }
        out
    }

    /// A GitHub-flavoured Markdown table (`|` in cells escaped).
    pub fn to_markdown(&self) -> String {
        let row = |r: &[String]| {
            let cells: Vec<String> = (0..self.headers.len())
                .map(|i| r.get(i).map_or(String::new(), |c| c.replace('|', "\\|")))
                .collect();
            format!("| {} |\n", cells.join(" | "))
        };
        let mut out = row(&self.headers);
        out.push_str(&row(&vec!["---".to_string(); self.headers.len()]));
        for r in &self.rows {
            out.push_str(&row(r));
        }
        out
    }

    /// RFC 4180 CSV.
    pub fn to_csv(&self) -> String {
        let esc = |c: &str| {
            if c.contains([',', '"', '\n']) {
                format!("\"{}\"", c.replace('"', "\"\""))
            } else {
                c.to_string()
            }
        };
        let mut out = String::new();
        for r in std::iter::once(&self.headers).chain(&self.rows) {
            let _ = writeln!(
                out,
                "{}",
                r.iter().map(|c| esc(c)).collect::<Vec<_>>().join(",")
            );
        }
        out
    }
}

/// `12.3` style percentage.
pub fn pct(v: f64) -> String {
    format!("{v:.1}")
}

/// `v` with `digits` decimals, or `-` when there is no value (a load that
/// failed, a figure with no sample).
pub fn opt(v: Option<f64>, digits: usize) -> String {
    v.map_or_else(|| "-".into(), |x| format!("{x:.digits$}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_and_csv() {
        let mut t = Table::new(&["name", "n"]);
        t.push(vec!["a,b".into(), "12".into()]);
        t.push(vec!["c".into(), "3".into()]);
        assert_eq!(t.to_text(), "name  n\n----  --\na,b   12\nc      3\n");
        assert_eq!(t.to_csv(), "name,n\n\"a,b\",12\nc,3\n");
    }
}
