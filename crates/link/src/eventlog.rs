//! The per-direction event log of a link: one text file per direction, one
//! line per event, in the spirit of mahimahi's `mm-link --uplink-log`.
//!
//! ```text
//! # mewa link event log v1
//! # dir: down
//! # link: rate 20mbit, delay 20ms, queue droptail:packets=100
//! # columns: time_ms kind bytes [delay_ms]; kinds: + arrival, - departure (one-way delay), l loss drop, d queue drop, # unused opportunity
//! 0.120 + 1500
//! 20.720 - 1500 20.600
//! ```
//!
//! Times are milliseconds since the link started, with microsecond precision.

use std::io::{self, Write};
use std::time::Duration;

use crate::core::{Dir, Event, EventKind};

/// First line of every log.
pub const MAGIC: &str = "# mewa link event log v1";

/// Writes a direction's events.
#[derive(Debug)]
pub struct EventLogWriter<W: Write> {
    w: W,
}

impl<W: Write> EventLogWriter<W> {
    /// Starts a log for `dir`, describing the link in `description` (one line).
    pub fn new(mut w: W, dir: Dir, description: &str) -> io::Result<Self> {
        let description = description.replace(['\n', '\r'], " ");
        writeln!(w, "{MAGIC}")?;
        writeln!(w, "# dir: {}", dir.name())?;
        writeln!(w, "# link: {description}")?;
        writeln!(
            w,
            "# columns: time_ms kind bytes [delay_ms]; kinds: + arrival, - departure (one-way delay), \
             l loss drop, d queue drop, # unused opportunity"
        )?;
        Ok(EventLogWriter { w })
    }

    /// Appends an event.
    pub fn write(&mut self, e: &Event) -> io::Result<()> {
        let t = ms3(e.at);
        match e.kind {
            EventKind::Arrival => writeln!(self.w, "{t} + {}", e.bytes),
            EventKind::Departure => {
                writeln!(
                    self.w,
                    "{t} - {} {}",
                    e.bytes,
                    ms3(e.delay.unwrap_or_default())
                )
            }
            EventKind::DropLoss => writeln!(self.w, "{t} l {}", e.bytes),
            EventKind::DropQueue => writeln!(self.w, "{t} d {}", e.bytes),
            EventKind::Unused => writeln!(self.w, "{t} # {}", e.bytes),
        }
    }

    /// Flushes the underlying writer.
    pub fn flush(&mut self) -> io::Result<()> {
        self.w.flush()
    }

    /// The underlying writer.
    pub fn into_inner(self) -> W {
        self.w
    }
}

/// Milliseconds with three decimals, exact (no float rounding).
fn ms3(d: Duration) -> String {
    let us = d.as_micros();
    format!("{}.{:03}", us / 1000, us % 1000)
}

/// A log read back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventLog {
    /// Direction, from the header.
    pub dir: Option<Dir>,
    /// The link description, from the header.
    pub description: String,
    /// Events in file order.
    pub events: Vec<LogEntry>,
}

/// One event read back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogEntry {
    /// Time since the link started.
    pub at: Duration,
    /// What happened.
    pub kind: EventKind,
    /// Bytes.
    pub bytes: usize,
    /// One-way delay (departures).
    pub delay: Option<Duration>,
}

/// Why a log could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LogError {
    /// The first line is not the mewa log header.
    #[error("not a mewa link event log (first line should be {MAGIC:?}); write one with `mewa link --log DIR`")]
    NotALog,
    /// A line could not be read.
    #[error("line {line}: {message}")]
    Line {
        /// 1-based line number.
        line: usize,
        /// What is wrong.
        message: String,
    },
}

fn parse_ms(s: &str) -> Option<Duration> {
    let (whole, frac) = s.split_once('.').unwrap_or((s, "0"));
    if frac.len() > 9 || whole.is_empty() || !frac.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let w: u64 = whole.parse().ok()?;
    let f: u64 = format!("{frac:0<9}").parse().ok()?; // nanoseconds of a millisecond × 1000
    Some(Duration::from_millis(w) + Duration::from_nanos(f / 1000))
}

impl EventLog {
    /// Parses a log written by [`EventLogWriter`].
    pub fn parse(text: &str) -> Result<EventLog, LogError> {
        let mut lines = text.lines().enumerate();
        match lines.next() {
            Some((_, l)) if l.trim_end() == MAGIC => {}
            _ => return Err(LogError::NotALog),
        }
        let mut log = EventLog {
            dir: None,
            description: String::new(),
            events: Vec::new(),
        };
        for (i, line) in lines {
            let line = line.trim();
            if line.is_empty() {
                continue;
            }
            if let Some(h) = line.strip_prefix('#') {
                let h = h.trim();
                if let Some(d) = h.strip_prefix("dir:") {
                    log.dir = match d.trim() {
                        "up" => Some(Dir::Up),
                        "down" => Some(Dir::Down),
                        _ => None,
                    };
                } else if let Some(d) = h.strip_prefix("link:") {
                    log.description = d.trim().to_string();
                }
                continue;
            }
            let bad = |m: &str| LogError::Line {
                line: i + 1,
                message: format!("{m}: {:?}", line.chars().take(60).collect::<String>()),
            };
            let f: Vec<&str> = line.split_whitespace().collect();
            if f.len() < 3 {
                return Err(bad("expected time_ms kind bytes"));
            }
            let at = parse_ms(f[0]).ok_or_else(|| bad("bad time"))?;
            let bytes: usize = f[2].parse().map_err(|_| bad("bad byte count"))?;
            let (kind, delay) = match (f[1], f.get(3)) {
                ("+", None) => (EventKind::Arrival, None),
                ("-", Some(d)) => (
                    EventKind::Departure,
                    Some(parse_ms(d).ok_or_else(|| bad("bad delay"))?),
                ),
                ("l", None) => (EventKind::DropLoss, None),
                ("d", None) => (EventKind::DropQueue, None),
                ("#", None) => (EventKind::Unused, None),
                _ => return Err(bad("unknown event kind or wrong number of fields")),
            };
            log.events.push(LogEntry {
                at,
                kind,
                bytes,
                delay,
            });
        }
        Ok(log)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(at_us: u64, kind: EventKind, bytes: usize, delay_us: Option<u64>) -> Event {
        Event {
            dir: Dir::Down,
            at: Duration::from_micros(at_us),
            kind,
            bytes,
            delay: delay_us.map(Duration::from_micros),
        }
    }

    #[test]
    fn writes_and_reads_back() {
        let mut w = EventLogWriter::new(Vec::new(), Dir::Down, "rate 20mbit\nx").unwrap();
        let events = [
            ev(120, EventKind::Arrival, 1500, None),
            ev(20_720, EventKind::Departure, 1500, Some(20_600)),
            ev(30_000, EventKind::DropLoss, 40, None),
            ev(30_001, EventKind::DropQueue, 1500, None),
            ev(1_000_000_007, EventKind::Unused, 1500, None),
        ];
        for e in &events {
            w.write(e).unwrap();
        }
        let text = String::from_utf8(w.into_inner()).unwrap();
        assert!(text.contains("\n0.120 + 1500\n20.720 - 1500 20.600\n30.000 l 40\n30.001 d 1500\n1000000.007 # 1500\n"), "{text}");
        let log = EventLog::parse(&text).unwrap();
        assert_eq!(log.dir, Some(Dir::Down));
        assert_eq!(log.description, "rate 20mbit x");
        let back: Vec<Event> = log
            .events
            .iter()
            .map(|e| Event {
                dir: Dir::Down,
                at: e.at,
                kind: e.kind,
                bytes: e.bytes,
                delay: e.delay,
            })
            .collect();
        assert_eq!(back, events);
    }

    #[test]
    fn rejects_bad_logs() {
        assert_eq!(EventLog::parse("hello\n"), Err(LogError::NotALog));
        assert!(matches!(
            EventLog::parse(&format!("{MAGIC}\n1.0 + \n")),
            Err(LogError::Line { line: 2, .. })
        ));
        assert!(matches!(
            EventLog::parse(&format!("{MAGIC}\n1.0 - 10\n")),
            Err(LogError::Line { .. })
        ));
        assert!(matches!(
            EventLog::parse(&format!("{MAGIC}\nx + 10\n")),
            Err(LogError::Line { .. })
        ));
        assert!(matches!(
            EventLog::parse(&format!("{MAGIC}\n1.0 ? 10\n")),
            Err(LogError::Line { .. })
        ));
    }

    proptest::proptest! {
        #[test]
        fn parser_never_panics(s in "\\PC{0,300}") {
            let _ = EventLog::parse(&format!("{MAGIC}\n{s}"));
            let _ = EventLog::parse(&s);
        }
    }
}
