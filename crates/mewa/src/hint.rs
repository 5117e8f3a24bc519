//! `mewa hint …`: build hints from real recordings and measure their size.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;
use clap::{Args, Subcommand};
use mewa_hint::import::{import_dir, import_path, ImportReport};
use mewa_hint::wire::{encode_within, Form, Hint};
use mewa_hint::{OriginRtt, PageContext, PageMeta};
use serde::Serialize;

use crate::output::{emit, OutputArgs, Table};
use crate::units;

#[derive(Debug, Args)]
pub struct HintCmd {
    #[command(subcommand)]
    which: Which,
}

#[derive(Debug, Subcommand)]
enum Which {
    /// Import a recording (HAR, DevTools log, or Lighthouse folder) and show the
    /// hint the edge would send for each page in it.
    Encode {
        /// The recording: FILE.har, FILE.json[.gz], or a folder holding
        /// devtoolslog.json.gz + trace.json.gz.
        path: PathBuf,
        #[command(flatten)]
        ctx: ContextArgs,
        /// Print the encoded bytes as hex too.
        #[arg(long)]
        hex: bool,
        /// Print JSON (the decoded hint and its sizes) instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Hint sizes over every recording in a folder: the share under 1 KB and
    /// under one UDP DNS answer (1232 B).
    Stats {
        /// Folder of recordings (searched recursively).
        dir: PathBuf,
        #[command(flatten)]
        ctx: ContextArgs,
        #[command(flatten)]
        out: OutputArgs,
    },
}

/// The network context and policy added to imported pages. The defaults
/// are written with their units (the parsers refuse bare numbers), so a
/// test holds them to the library constants they stand for.
#[derive(Debug, Clone, Args)]
struct ContextArgs {
    /// Largest hint, e.g. 1232B (what one UDP DNS answer carries); bigger
    /// pages get the partial form.
    #[arg(long, value_name = "SIZE", default_value = "1232B", value_parser = units::size_usize)]
    budget: usize,
    /// Largest UDP answer carrying the compact hint when the URL form does
    /// not fit (the edge's `dns.compact_payload`); the URL list then goes
    /// over TCP.
    #[arg(long, value_name = "SIZE", default_value = "1000B", value_parser = udp_payload)]
    compact_payload: u16,
    /// Policy α sent to the client (seed 001).
    #[arg(long, default_value_t = 1.0 / 3.0)]
    alpha: f64,
    /// Hint validity, e.g. 300s.
    #[arg(long, value_name = "DURATION", default_value = "300s", value_parser = units::secs_u32)]
    ttl: u32,
    /// Edge→origin RTT to put in for every origin, so that sizes are those
    /// of a hint with measured RTTs (recordings carry none). 0ms leaves
    /// RTTs out.
    #[arg(long, value_name = "DURATION", default_value = "40ms", value_parser = units::duration)]
    origin_rtt: Duration,
}

/// A DNS message size: a size with its unit that fits the 16-bit field.
fn udp_payload(s: &str) -> Result<u16, String> {
    u16::try_from(units::size(s)?).map_err(|_| format!("{s}: at most 65535B"))
}

impl ContextArgs {
    fn context(&self, page: &PageMeta, now: u64) -> anyhow::Result<PageContext> {
        anyhow::ensure!(
            self.alpha.is_finite() && self.alpha >= 0.0,
            "--alpha must be a number >= 0, got {}",
            self.alpha
        );
        anyhow::ensure!(
            self.origin_rtt <= Duration::from_secs(60),
            "--origin-rtt must be at most 60s, got {:?}",
            self.origin_rtt
        );
        let origins = if !self.origin_rtt.is_zero() {
            // At most 60 s: 6e7 µs fits.
            let rtt_us = u32::try_from(self.origin_rtt.as_micros()).unwrap_or(u32::MAX);
            page.hosts()
                .into_iter()
                .map(|h| OriginRtt {
                    host: h.to_string(),
                    rtt_us,
                    measured_at_unix_s: now.saturating_sub(30),
                })
                .collect()
        } else {
            Vec::new()
        };
        Ok(PageContext {
            page: page.clone(),
            origins,
            alpha: self.alpha,
            ttl_s: self.ttl,
            generated_at_unix_s: now,
        })
    }
}

fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

pub fn run(cmd: HintCmd) -> anyhow::Result<()> {
    match cmd.which {
        Which::Encode {
            path,
            ctx,
            hex,
            json,
        } => encode(&path, &ctx, hex, json),
        Which::Stats { dir, ctx, out } => stats(&dir, &ctx, &out),
    }
}

/// Sizes of one page's hint.
#[derive(Debug, Serialize)]
struct Sized {
    source: String,
    page_url: String,
    objects: usize,
    hosts: usize,
    page_bytes: u64,
    unknown_sizes: usize,
    computation_ms: Option<u32>,
    /// Full form, uncompressed.
    full_plain_bytes: usize,
    /// Full form, as sent (compressed when smaller).
    full_bytes: usize,
    /// Full form with every object's URL path, as sent.
    urls_bytes: usize,
    /// What is sent within the budget; `None` when even the partial form
    /// is over it.
    sent_bytes: Option<usize>,
    /// The form sent; `None` when over budget.
    form: Option<Form>,
    /// Why nothing fits the budget, when it does not.
    #[serde(skip_serializing_if = "Option::is_none")]
    over_budget: Option<String>,
    /// The edge's UDP answer to the client's query, bytes (the whole DNS
    /// message, as `mewa edge` answers it).
    udp_answer_bytes: Option<usize>,
    /// What it carries: `urls`, `compact` (the hint by hash or partial;
    /// the URL list over TCP), `retry_tcp`.
    udp_carries: &'static str,
    /// The answer over TCP with the URL list, when the UDP one is compact,
    /// bytes.
    tcp_answer_bytes: Option<usize>,
}

/// The edge's answers for `ctx`'s page, measured by its own answering
/// code: (UDP answer bytes, what it carries, TCP answer bytes when the
/// URL list goes there).
fn dns_answers(
    ctx: &PageContext,
    args: &ContextArgs,
) -> anyhow::Result<(Option<usize>, &'static str, Option<usize>)> {
    use mewa_edge::dns::{HintServed, Outcome, Responder, Transport, Zone};
    let host = mewa_hint::page::host_of(&ctx.page.url)
        .with_context(|| format!("{} has no host", ctx.page.url))?;
    let rtts = ctx
        .origins
        .iter()
        .map(|o| (o.host.clone(), o.clone()))
        .collect();
    let (book, failed) = mewa_edge::hints::HintBook::build(
        vec![ctx.page.clone()],
        &rtts,
        mewa_edge::hints::HintPolicy {
            alpha: ctx.alpha,
            ttl_s: ctx.ttl_s,
        },
        ctx.generated_at_unix_s,
    );
    if let Some((_, e)) = failed.first() {
        anyhow::bail!("no hint for {}: {e}", ctx.page.url);
    }
    let max = u16::try_from(args.budget).unwrap_or(u16::MAX).max(512);
    let responder = Responder {
        zone: Zone::new([(host.clone(), vec![[192, 0, 2, 1].into()])], 30),
        max_udp_payload: max,
        compact_payload: args.compact_payload.min(max),
        upstream: false,
    };
    let (_, q) = mewa_client::resolve::hint_query(&host, &ctx.page.url)?;
    let size = |t| {
        let a = responder.answer(&book, &q, t, false, None);
        let len = match a.outcome {
            Outcome::Reply(b) => Some(b.len()),
            _ => None,
        };
        (len, a.hint)
    };
    let (udp, served) = size(Transport::Udp);
    Ok(match served {
        Some(HintServed::Hint { compact: true, .. }) => (udp, "compact", size(Transport::Tcp).0),
        Some(HintServed::Hint { .. }) => (udp, "urls", None),
        _ => (udp, "retry_tcp", size(Transport::Tcp).0),
    })
}

fn measure(
    source: &str,
    page: &PageMeta,
    args: &ContextArgs,
    now: u64,
) -> anyhow::Result<(Sized, Option<Vec<u8>>)> {
    let ctx = args.context(page, now)?;
    let full = Hint::full(&ctx)?;
    let urls = Hint::with_urls(&ctx)?;
    let (udp_answer_bytes, udp_carries, tcp_answer_bytes) = dns_answers(&ctx, args)?;
    // A page over budget is a finding, not a failure: reported, never fatal.
    let (bytes, form, over_budget) = match encode_within(&ctx, args.budget) {
        Ok((b, f)) => (Some(b), Some(f), None),
        Err(e) => (None, None, Some(e.to_string())),
    };
    Ok((
        Sized {
            source: source.to_string(),
            page_url: page.url.clone(),
            objects: page.objects.len(),
            hosts: page.hosts().len(),
            page_bytes: page.total_bytes(),
            unknown_sizes: page.unknown_sizes(),
            computation_ms: page.computation_ms,
            full_plain_bytes: full.to_bytes_uncompressed().len(),
            full_bytes: full.to_bytes().len(),
            urls_bytes: urls.to_bytes().len(),
            sent_bytes: bytes.as_ref().map(Vec::len),
            form,
            over_budget,
            udp_answer_bytes,
            udp_carries,
            tcp_answer_bytes,
        },
        bytes,
    ))
}

fn print_notes(path: &Path, r: &ImportReport) {
    for m in &r.missing_sizes {
        eprintln!(
            "note: {}: no size for {} (entry {}): {}",
            path.display(),
            m.object_url,
            m.entry_index,
            m.reason
        );
    }
    for n in &r.notes {
        eprintln!("note: {n}");
    }
}

fn encode(path: &Path, args: &ContextArgs, hex: bool, json: bool) -> anyhow::Result<()> {
    let report = import_path(path)?;
    print_notes(path, &report);
    let now = now();
    let mut all = Vec::new();
    for page in &report.pages {
        let (s, bytes) = measure(&path.display().to_string(), page, args, now)?;
        let bytes = bytes.ok_or_else(|| {
            anyhow::anyhow!(
                "{}: {}",
                page.url,
                s.over_budget.as_deref().unwrap_or("over budget")
            )
        })?;
        let hint = Hint::from_bytes(&bytes).context("decoding the hint just encoded")?;
        if json {
            all.push(serde_json::json!({ "sizes": s, "hint": hint }));
            continue;
        }
        println!("page      {}", s.page_url);
        println!(
            "objects   {} on {} hosts, {} bytes{}{}",
            s.objects,
            s.hosts,
            s.page_bytes,
            if s.unknown_sizes > 0 {
                format!(" ({} sizes unknown)", s.unknown_sizes)
            } else {
                String::new()
            },
            s.computation_ms
                .map_or(String::new(), |c| format!(", computation {c} ms"))
        );
        println!(
            "hint      {} bytes sent ({}); with URLs {} bytes, full form {} bytes compressed, {} uncompressed",
            bytes.len(),
            match s.form {
                Some(Form::WithUrls) => "every object with its URL".to_string(),
                Some(Form::Full) => "full form, URLs left out".to_string(),
                Some(Form::Partial { listed }) =>
                    format!("partial form: {listed} largest objects listed"),
                None => "over budget".to_string(),
            },
            s.urls_bytes,
            s.full_bytes,
            s.full_plain_bytes
        );
        let mut t = Table::new(&[
            "origin",
            "rtt_ms",
            "listed",
            "listed_bytes~",
            "unlisted",
            "unlisted_bytes",
        ]);
        for o in &hint.origins {
            let (uc, ub) = o.unlisted.unwrap_or((0, 0));
            let listed_bytes: u64 = o.objects.iter().filter_map(|x| x.size()).sum();
            t.push(vec![
                o.host.clone(),
                o.rtt_s()
                    .map_or("-".into(), |r| format!("{:.1}", r * 1000.0)),
                o.objects.len().to_string(),
                listed_bytes.to_string(),
                uc.to_string(),
                ub.to_string(),
            ]);
        }
        println!(
            "url hash  {} bits per object",
            8 * u32::from(hint.hash_width)
        );
        print!("{}", t.to_text());
        if hex {
            println!(
                "bytes     {}",
                bytes.iter().map(|b| format!("{b:02x}")).collect::<String>()
            );
        }
        println!();
    }
    if json {
        println!("{}", serde_json::to_string_pretty(&all)?);
    }
    Ok(())
}

#[derive(Debug, Serialize)]
struct Summary {
    pages: usize,
    failed_files: usize,
    under_1kb: usize,
    urls_under_1kb: usize,
    within_budget_urls: usize,
    within_budget_full: usize,
    budget: usize,
    median_bytes: usize,
    p90_bytes: usize,
    max_full_bytes: usize,
    /// Pages whose UDP answer is at most 1000 bytes / 1232 bytes.
    udp_answers_within_1k: usize,
    udp_answers_within_1232: usize,
    /// Pages whose UDP answer carries the URLs / the compact hint.
    udp_with_urls: usize,
    udp_compact: usize,
    rows: Vec<Sized>,
}

fn stats(dir: &Path, args: &ContextArgs, out: &OutputArgs) -> anyhow::Result<()> {
    anyhow::ensure!(
        dir.is_dir(),
        "{} is not a folder of recordings",
        dir.display()
    );
    let now = now();
    let mut rows = Vec::new();
    let mut failed = 0;
    for (path, res) in import_dir(dir) {
        match res {
            Ok(r) => {
                for page in &r.pages {
                    let rel = path
                        .strip_prefix(dir)
                        .unwrap_or(&path)
                        .display()
                        .to_string();
                    let row = measure(&rel, page, args, now)?.0;
                    if let Some(why) = &row.over_budget {
                        eprintln!("over budget: {rel} ({}): {why}", page.url);
                    }
                    rows.push(row);
                }
            }
            Err(e) => {
                failed += 1;
                eprintln!("skipped {}: {e}", path.display());
            }
        }
    }
    anyhow::ensure!(
        !rows.is_empty(),
        "no importable page recordings under {}",
        dir.display()
    );
    // Over-budget pages count at the size of their smallest form, so the
    // quantiles never flatter the budget.
    let mut sent: Vec<usize> = rows
        .iter()
        .map(|r| r.sent_bytes.unwrap_or(r.full_bytes))
        .collect();
    sent.sort_unstable();
    let q = |p: f64| sent[((sent.len() - 1) as f64 * p).round() as usize];
    let summary = Summary {
        pages: rows.len(),
        failed_files: failed,
        under_1kb: rows.iter().filter(|r| r.full_bytes < 1000).count(),
        urls_under_1kb: rows.iter().filter(|r| r.urls_bytes < 1000).count(),
        within_budget_urls: rows
            .iter()
            .filter(|r| r.form == Some(Form::WithUrls))
            .count(),
        within_budget_full: rows
            .iter()
            .filter(|r| matches!(r.form, Some(Form::WithUrls | Form::Full)))
            .count(),
        budget: args.budget,
        median_bytes: q(0.5),
        p90_bytes: q(0.9),
        max_full_bytes: rows.iter().map(|r| r.full_bytes).max().unwrap_or(0),
        udp_answers_within_1k: rows
            .iter()
            .filter(|r| r.udp_answer_bytes.is_some_and(|b| b <= 1000))
            .count(),
        udp_answers_within_1232: rows
            .iter()
            .filter(|r| r.udp_answer_bytes.is_some_and(|b| b <= 1232))
            .count(),
        udp_with_urls: rows.iter().filter(|r| r.udp_carries == "urls").count(),
        udp_compact: rows.iter().filter(|r| r.udp_carries == "compact").count(),
        rows,
    };
    let mut t = Table::new(&[
        "recording",
        "objects",
        "hosts",
        "page_KB",
        "full_B",
        "urls_B",
        "sent_B",
        "form",
        "udp_answer_B",
        "udp_carries",
        "tcp_answer_B",
    ]);
    for r in &summary.rows {
        t.push(vec![
            r.source.clone(),
            r.objects.to_string(),
            r.hosts.to_string(),
            format!("{:.0}", r.page_bytes as f64 / 1000.0),
            r.full_bytes.to_string(),
            r.urls_bytes.to_string(),
            r.sent_bytes.map_or("-".into(), |b| b.to_string()),
            match r.form {
                Some(Form::WithUrls) => "urls".into(),
                Some(Form::Full) => "full".into(),
                Some(Form::Partial { listed }) => format!("partial ({listed} listed)"),
                None => "OVER BUDGET".into(),
            },
            r.udp_answer_bytes.map_or("-".into(), |b| b.to_string()),
            r.udp_carries.to_string(),
            r.tcp_answer_bytes.map_or("-".into(), |b| b.to_string()),
        ]);
    }
    emit(out, &t, &summary)?;
    if !out.json && !out.csv {
        let n = summary.pages as f64;
        println!(
            "\n{} pages: {:.1}% full hints under 1 KB (1000 B; paper: 89.8%), {:.1}% with URLs; \
             within {} B: {:.1}% with URLs, {:.1}% every object; \
             median sent {} B, p90 {} B, largest full {} B",
            summary.pages,
            100.0 * summary.under_1kb as f64 / n,
            100.0 * summary.urls_under_1kb as f64 / n,
            summary.budget,
            100.0 * summary.within_budget_urls as f64 / n,
            100.0 * summary.within_budget_full as f64 / n,
            summary.median_bytes,
            summary.p90_bytes,
            summary.max_full_bytes
        );
        println!(
            "UDP answers (whole DNS message, as the edge answers): {:.1}% within 1000 B, \
             {:.1}% within 1232 B; {} carry the URLs, {} the compact hint with the URL \
             list over TCP",
            100.0 * summary.udp_answers_within_1k as f64 / n,
            100.0 * summary.udp_answers_within_1232 as f64 / n,
            summary.udp_with_urls,
            summary.udp_compact
        );
    }
    if let Some(p) = &out.plot {
        let mut full: Vec<f64> = summary.rows.iter().map(|r| r.full_bytes as f64).collect();
        full.sort_by(f64::total_cmp);
        let cdf = |v: &[f64]| -> Vec<(f64, f64)> {
            v.iter()
                .enumerate()
                .map(|(i, &x)| (x, 100.0 * (i + 1) as f64 / v.len() as f64))
                .collect()
        };
        let series = vec![mewa_report::Series {
            name: "full-form hint size".into(),
            points: cdf(&full),
            mark: mewa_report::Mark::Line,
            colour: 0,
        }];
        let chart = mewa_report::Chart {
            title: "Hint size over real page recordings (CDF)",
            x_label: "hint bytes",
            y_label: "pages (%)",
            log_y: false,
        };
        mewa_report::draw(p, &chart, &series)?;
        eprintln!("wrote {}", p.display());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        ctx: ContextArgs,
    }

    fn parse(args: &[&str]) -> Result<ContextArgs, String> {
        Cli::try_parse_from(std::iter::once(&"hint").chain(args))
            .map(|c| c.ctx)
            .map_err(|e| e.to_string())
    }

    #[test]
    fn defaults_are_the_library_constants() {
        let c = parse(&[]).unwrap();
        assert_eq!(c.budget, mewa_hint::wire::DNS_UDP_BUDGET);
        assert_eq!(c.compact_payload, mewa_edge::dns::COMPACT_UDP_PAYLOAD);
        assert_eq!(c.ttl, 300);
        assert_eq!(c.origin_rtt, Duration::from_millis(40));
    }

    #[test]
    fn quantities_take_their_units_and_bare_numbers_show_the_form() {
        let c = parse(&[
            "--budget",
            "1kB",
            "--compact-payload",
            "512B",
            "--ttl",
            "60s",
            "--origin-rtt",
            "0ms",
        ])
        .unwrap();
        assert_eq!(
            (c.budget, c.compact_payload, c.ttl, c.origin_rtt),
            (1000, 512, 60, Duration::ZERO)
        );
        for (flag, bare, form) in [
            ("--budget", "1232", "500kB"),
            ("--compact-payload", "1000", "500kB"),
            ("--ttl", "300", "2s"),
            ("--origin-rtt", "40", "150ms"),
        ] {
            let e = parse(&[flag, bare]).unwrap_err();
            assert!(e.contains(flag) && e.contains(form), "{flag} {bare}: {e}");
        }
        assert!(parse(&["--compact-payload", "70kB"]).is_err());
    }
}
