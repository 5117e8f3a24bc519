//! Import of real page recordings into the metadata model of [`crate::page`].
//!
//! The edge needs, per page, the objects a browser fetches, how big each one
//! is on the wire, how the browser found it, and how long the main thread is
//! busy computing (seed 000 §II, seed 001 §2). Real browsers record exactly
//! that in three formats, and this module reads all three:
//!
//! - **HAR 1.2** ([`import_har`]): Chrome/chrome-har exports (`_transferSize`,
//!   `_initiator`, `_resourceType`), WebPageTest exports (`_bytesIn`,
//!   `_socket`), Firefox and Browsertime exports. One [`PageMeta`] per HAR page.
//! - **Chrome DevTools Protocol event logs** ([`import_cdp`]): a JSON array of
//!   `{method, params}` events (`Network.*`, `Page.*`), as written by
//!   chrome-har's perf logs and Lighthouse's `devtoolslog.json`. One page per
//!   top-level navigation.
//! - **Chrome traces** ([`computation_ms_from_trace`], [`trace_summary`]):
//!   the main-thread task time that blocks loading; [`import_lighthouse`]
//!   attaches it to the page imported from the matching DevTools log.
//!
//! Everything here is pure except [`import_path`] and [`import_dir`], thin
//! conveniences that read files and dispatch by content. Every importer takes
//! the bytes plus a name for the input (used only in messages), accepts
//! gzip-compressed bytes transparently, and never panics: malformed input gives
//! an [`ImportError`] naming the input, the entry and the field, and merely
//! incomplete input (a request without a recorded size, a `data:` URL) is
//! listed in the [`ImportReport`] instead of being silently dropped or zeroed.
//!
//! # Sizes
//!
//! [`crate::page::ObjectMeta::size`] is the number of bytes of the response
//! body on the wire (after content encoding). Recordings rarely store exactly
//! that, so each importer documents its rule (see [`import_har`] and
//! [`import_cdp`]); objects sized by a less exact rule are counted in
//! [`ImportReport::notes`], and objects with no size at all keep `size: None`
//! and are listed in [`ImportReport::missing_sizes`].
//!
//! # Discovery and parents
//!
//! The first request of a top-level navigation is [`Discovery::Document`];
//! the hops of a redirect chain after it (and of any other redirect) are
//! [`Discovery::Other`] with the redirecting object as parent; other requests
//! take their discovery from the recorded initiator (`parser` →
//! [`Discovery::Parser`], `script` → [`Discovery::Script`], anything else or
//! nothing → [`Discovery::Other`]) and their parent from the initiator's URL
//! (for scripts, the innermost stack frame that has a URL), resolved to the
//! latest earlier object of the same page with that URL.
//!
//! [`Discovery::Document`]: crate::page::Discovery::Document
//! [`Discovery::Other`]: crate::page::Discovery::Other
//! [`Discovery::Parser`]: crate::page::Discovery::Parser
//! [`Discovery::Script`]: crate::page::Discovery::Script

mod cdp;
mod har;
#[cfg(test)]
mod proptests;
mod trace;
mod util;

use std::borrow::Cow;
use std::io::Read;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::page::PageMeta;

pub use cdp::import_cdp;
pub use har::import_har;
pub use trace::{computation_ms_from_trace, trace_summary, union_time, TraceSummary};

/// What an import produced: the pages, plus everything a user should know
/// about what could not be imported faithfully.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImportReport {
    /// The imported pages, in recording order.
    pub pages: Vec<PageMeta>,
    /// Objects kept with `size: None` because the recording gave no size
    /// (failed, cancelled or unfinished requests, entries without sizes).
    pub missing_sizes: Vec<MissingSize>,
    /// Requests left out because their URL never reaches the network
    /// (`data:`, `blob:`, `about:` and any other non-`http(s)` scheme).
    pub skipped: usize,
    /// Human-readable remarks: fallback size rules used, ignored events,
    /// cache hits; one line each, aggregated per page.
    pub notes: Vec<String>,
}

impl ImportReport {
    /// Number of objects over all pages.
    pub fn object_count(&self) -> usize {
        self.pages.iter().map(|p| p.objects.len()).sum()
    }

    /// Sum of the known object sizes over all pages, in bytes.
    pub fn total_bytes(&self) -> u64 {
        self.pages.iter().map(PageMeta::total_bytes).sum()
    }
}

/// One object whose size the recording did not give.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MissingSize {
    /// URL of the page the object belongs to.
    pub page_url: String,
    /// URL of the object.
    pub object_url: String,
    /// Where the object came from in the input: the index into `log.entries`
    /// (HAR) or into the event array (DevTools log, the `requestWillBeSent`).
    pub entry_index: usize,
    /// Why there is no size (e.g. `loadingFailed: net::ERR_ABORTED`).
    pub reason: String,
}

/// Why a recording could not be imported. Every variant names the input (the
/// `source` name given by the caller, or the path) so that a user importing a
/// folder of recordings knows which file to look at.
///
/// (The input name field is called `input`, not `source`: `thiserror` treats a
/// field named `source` as the underlying error.)
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ImportError {
    /// The bytes are not well-formed JSON, e.g. a truncated download.
    #[error(
        "{input}: not valid JSON (line {line}, column {column}): {message}; is the file complete?"
    )]
    Json {
        /// Name of the input.
        input: String,
        /// 1-based line of the error.
        line: usize,
        /// 1-based column of the error.
        column: usize,
        /// What the JSON parser found wrong.
        message: String,
    },
    /// Well-formed JSON, but not a HAR file (no `log.entries` array).
    #[error("{input}: not a HAR file: {reason}")]
    NotHar {
        /// Name of the input.
        input: String,
        /// What is missing or of the wrong shape.
        reason: String,
    },
    /// Well-formed JSON, but not a DevTools event log (not an array of
    /// `{method, params}` objects).
    #[error("{input}: not a Chrome DevTools event log: {reason}")]
    NotCdp {
        /// Name of the input.
        input: String,
        /// What is missing or of the wrong shape.
        reason: String,
    },
    /// Well-formed JSON, but not a Chrome trace (neither `{"traceEvents":
    /// [...]}` nor an array of events).
    #[error("{input}: not a Chrome trace: {reason}")]
    NotTrace {
        /// Name of the input.
        input: String,
        /// What is missing or of the wrong shape.
        reason: String,
    },
    /// [`import_path`] could not tell which kind of recording a file is.
    #[error("{input}: not a recording this importer knows: {reason}")]
    UnknownFormat {
        /// Name of the input.
        input: String,
        /// What was found instead, and what would have been accepted.
        reason: String,
    },
    /// A field the importer cannot do without is absent (e.g. an entry
    /// without `request.url`).
    #[error("{input}: entry {entry}: required field `{field}` is missing")]
    MissingField {
        /// Name of the input.
        input: String,
        /// Index of the entry (HAR `log.entries`) or event (DevTools log,
        /// trace) that lacks the field.
        entry: usize,
        /// JSON path of the missing field, e.g. `log.entries[3].request.url`.
        field: String,
    },
    /// A field is present but unusable (wrong JSON type, negative count…).
    #[error("{input}: entry {entry}: field `{field}` {message}")]
    BadField {
        /// Name of the input.
        input: String,
        /// Index of the entry (HAR `log.entries`) or event (DevTools log,
        /// trace) holding the field.
        entry: usize,
        /// JSON path of the field, e.g. `[12].params.request.url`.
        field: String,
        /// What is wrong with it.
        message: String,
    },
    /// The recording holds nothing to import (no entries, no requests, no
    /// events).
    #[error("{input}: nothing to import: {reason}")]
    Empty {
        /// Name of the input.
        input: String,
        /// What was expected and not found.
        reason: String,
    },
    /// A page ended up with no usable object (all its requests were skipped,
    /// e.g. only `data:` URLs, or the HAR lists a page with no entries).
    #[error("{input}: page {page} has no usable objects (only data:/blob:/non-http requests, or none at all)")]
    EmptyPage {
        /// Name of the input.
        input: String,
        /// The page's URL or HAR page id.
        page: String,
    },
    /// A trace without a renderer main thread to measure (no
    /// `CrRendererMain` thread and no main-frame `navigationStart`).
    #[error("{input}: no renderer main thread found (no CrRendererMain thread name and no main-frame navigationStart); was the trace recorded with the devtools.timeline category?")]
    NoMainThread {
        /// Name of the input.
        input: String,
    },
    /// The file or directory could not be read.
    #[error("{}: cannot read: {message}", path.display())]
    Io {
        /// The path that failed.
        path: PathBuf,
        /// The operating system's explanation.
        message: String,
    },
    /// The input starts like gzip data but does not decompress.
    #[error("{input}: cannot decompress gzip data: {message}")]
    Gzip {
        /// Name of the input.
        input: String,
        /// What the decompressor reported.
        message: String,
    },
}

/// Upper bound on the decompressed size of gzip input: recordings are at most
/// a few hundred MB, and the bound stops a gzip bomb from exhausting memory.
const MAX_DECOMPRESSED: u64 = 1 << 30;

/// Returns the bytes, gunzipped when they start with the gzip magic number,
/// so that callers may hand over `.json.gz` contents as they are.
pub(crate) fn maybe_gunzip<'a>(bytes: &'a [u8], input: &str) -> Result<Cow<'a, [u8]>, ImportError> {
    if bytes.len() < 2 || bytes[0] != 0x1f || bytes[1] != 0x8b {
        return Ok(Cow::Borrowed(bytes));
    }
    let mut out = Vec::new();
    let decoder = flate2::read::MultiGzDecoder::new(bytes);
    decoder
        .take(MAX_DECOMPRESSED + 1)
        .read_to_end(&mut out)
        .map_err(|e| ImportError::Gzip {
            input: input.to_string(),
            message: e.to_string(),
        })?;
    if out.len() as u64 > MAX_DECOMPRESSED {
        return Err(ImportError::Gzip {
            input: input.to_string(),
            message: format!("decompressed data exceeds {MAX_DECOMPRESSED} bytes"),
        });
    }
    Ok(Cow::Owned(out))
}

/// Parses JSON (after optional gunzip and a UTF-8 byte-order mark, which some
/// HAR writers emit), mapping parser errors to [`ImportError::Json`].
pub(crate) fn parse_json(bytes: &[u8], input: &str) -> Result<Value, ImportError> {
    let bytes = maybe_gunzip(bytes, input)?;
    let body: &[u8] = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(&bytes);
    serde_json::from_slice(body).map_err(|e| {
        let full = e.to_string();
        // serde_json appends " at line L column C"; the variant carries those.
        let message = match full.rsplit_once(" at line ") {
            Some((m, _)) => m.to_string(),
            None => full,
        };
        ImportError::Json {
            input: input.to_string(),
            line: e.line(),
            column: e.column(),
            message,
        }
    })
}

/// What kind of recording a JSON document is, judged by its shape only.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Har,
    Cdp,
    Trace,
}

/// Sniffs the shape: HAR is an object with `log.entries`; a DevTools log is an
/// array of `{method, params}` (or an object wrapping one in `log`/`events`);
/// a trace is `{"traceEvents": [...]}` or an array of `{ph, …}` events.
fn sniff(value: &Value) -> Option<Kind> {
    match value {
        Value::Object(map) => {
            if map
                .get("log")
                .and_then(|l| l.get("entries"))
                .is_some_and(Value::is_array)
            {
                Some(Kind::Har)
            } else if map.get("traceEvents").is_some_and(Value::is_array) {
                Some(Kind::Trace)
            } else if ["log", "events"].iter().any(|k| {
                map.get(*k)
                    .and_then(Value::as_array)
                    .is_some_and(|a| looks_cdp(a))
            }) {
                Some(Kind::Cdp)
            } else {
                None
            }
        }
        Value::Array(items) => {
            if looks_cdp(items) {
                Some(Kind::Cdp)
            } else if items
                .iter()
                .take(64)
                .any(|e| e.get("ph").is_some_and(Value::is_string))
            {
                Some(Kind::Trace)
            } else {
                None
            }
        }
        _ => None,
    }
}

/// An array looks like a DevTools log when one of its first events has a
/// string `method`.
fn looks_cdp(items: &[Value]) -> bool {
    items
        .iter()
        .take(64)
        .any(|e| e.get("method").is_some_and(Value::is_string))
}

/// Imports a DevTools log and its matching trace (the Lighthouse artifact
/// layout) and sets [`PageMeta::computation_ms`] from the trace.
///
/// The computation latency goes to the page whose URL (or any object URL) is
/// the trace's navigation URL; when no page matches and the log holds exactly
/// one page, to that page; otherwise to none, with a note. Both inputs may be
/// gzip-compressed.
pub fn import_lighthouse(
    devtoolslog: &[u8],
    trace: &[u8],
    source: &str,
) -> Result<ImportReport, ImportError> {
    let mut report = import_cdp(devtoolslog, &format!("{source} (devtools log)"))?;
    let summary = trace_summary(trace, &format!("{source} (trace)"))?;
    let target = summary
        .navigation_url
        .as_deref()
        .and_then(|nav| {
            let nav = crate::page::strip_fragment(nav);
            report
                .pages
                .iter()
                .position(|p| p.url == nav || p.objects.iter().any(|o| o.url == nav))
        })
        .or(if report.pages.len() == 1 {
            Some(0)
        } else {
            None
        });
    match target {
        Some(i) => {
            if let Some(page) = report.pages.get_mut(i) {
                page.computation_ms = Some(summary.computation_ms);
            }
        }
        None => report.notes.push(format!(
            "{source}: trace navigation {} matches none of the {} pages; computation latency not attached",
            summary.navigation_url.as_deref().unwrap_or("(unknown)"),
            report.pages.len()
        )),
    }
    report.notes.extend(summary.notes);
    Ok(report)
}

/// Reads a recording from disk and imports it by content.
///
/// - A file (gunzipped when its name ends in `.gz` or its bytes are gzip) is
///   sniffed: an object with `log.entries` is a HAR, an array of
///   `{method, params}` a DevTools log. A trace alone has no objects and is
///   rejected with [`ImportError::UnknownFormat`].
/// - A directory holding `devtoolslog.json[.gz]` and `trace.json[.gz]` (the
///   Lighthouse artifact layout) is imported with [`import_lighthouse`].
pub fn import_path(path: &Path) -> Result<ImportReport, ImportError> {
    let name = path.display().to_string();
    if path.is_dir() {
        return match lighthouse_files(path) {
            Some((log, trace)) => {
                let log_bytes = read(&log)?;
                let trace_bytes = read(&trace)?;
                import_lighthouse(&log_bytes, &trace_bytes, &name)
            }
            None => Err(ImportError::UnknownFormat {
                input: name,
                reason: "a directory is importable only in the Lighthouse layout (devtoolslog.json[.gz] next to trace.json[.gz])".to_string(),
            }),
        };
    }
    let bytes = read(path)?;
    let value = parse_json(&bytes, &name)?;
    match sniff(&value) {
        Some(Kind::Har) => har::import_value(&value, &name),
        Some(Kind::Cdp) => cdp::import_value(&value, &name),
        Some(Kind::Trace) => Err(ImportError::UnknownFormat {
            input: name,
            reason: "this is a Chrome trace, which has no objects; import it together with its DevTools log (import_lighthouse, or a folder with devtoolslog.json.gz + trace.json.gz)".to_string(),
        }),
        None => Err(ImportError::UnknownFormat {
            input: name,
            reason: "expected a HAR (object with log.entries) or a DevTools log (array of {method, params})".to_string(),
        }),
    }
}

/// Imports every recording under `dir`, recursively, in sorted (hence
/// deterministic) order: files ending in `.har`, `.har.gz`, `.json` or
/// `.json.gz`, and Lighthouse-layout folders (imported as one unit, their
/// files not again one by one). Symbolic links to directories are not
/// followed, so a link cycle cannot make the walk endless.
///
/// Each result is paired with its path, so a caller can print statistics over
/// a whole data folder and still see which file failed and why.
pub fn import_dir(dir: &Path) -> Vec<(PathBuf, Result<ImportReport, ImportError>)> {
    if !dir.is_dir() {
        return vec![(dir.to_path_buf(), import_path(dir))];
    }
    let mut out = Vec::new();
    walk(dir, &mut out);
    out
}

fn walk(dir: &Path, out: &mut Vec<(PathBuf, Result<ImportReport, ImportError>)>) {
    if lighthouse_files(dir).is_some() {
        out.push((dir.to_path_buf(), import_path(dir)));
        return;
    }
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) => {
            out.push((
                dir.to_path_buf(),
                Err(ImportError::Io {
                    path: dir.to_path_buf(),
                    message: e.to_string(),
                }),
            ));
            return;
        }
    };
    let mut children: Vec<(PathBuf, bool)> = Vec::new();
    for entry in entries {
        match entry {
            Ok(entry) => {
                let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
                children.push((entry.path(), is_dir));
            }
            Err(e) => out.push((
                dir.to_path_buf(),
                Err(ImportError::Io {
                    path: dir.to_path_buf(),
                    message: e.to_string(),
                }),
            )),
        }
    }
    children.sort();
    for (path, is_dir) in children {
        if is_dir {
            walk(&path, out);
        } else if is_recording_name(&path) {
            let result = import_path(&path);
            out.push((path, result));
        }
    }
}

/// File names [`import_dir`] looks at.
fn is_recording_name(path: &Path) -> bool {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().to_ascii_lowercase())
        .unwrap_or_default();
    [".har", ".har.gz", ".json", ".json.gz"]
        .iter()
        .any(|ext| name.ends_with(ext))
}

/// The DevTools log and trace of a Lighthouse-layout folder, when both exist.
fn lighthouse_files(dir: &Path) -> Option<(PathBuf, PathBuf)> {
    let find = |stem: &str| {
        [format!("{stem}.json.gz"), format!("{stem}.json")]
            .into_iter()
            .map(|n| dir.join(n))
            .find(|p| p.is_file())
    };
    Some((find("devtoolslog")?, find("trace")?))
}

fn read(path: &Path) -> Result<Vec<u8>, ImportError> {
    std::fs::read(path).map_err(|e| ImportError::Io {
        path: path.to_path_buf(),
        message: e.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn gz(data: &[u8]) -> Vec<u8> {
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        enc.write_all(data).unwrap();
        enc.finish().unwrap()
    }

    #[test]
    fn gunzip_is_transparent() {
        let plain = br#"{"a":1}"#;
        assert_eq!(
            parse_json(&gz(plain), "x").unwrap(),
            serde_json::json!({"a":1})
        );
        assert_eq!(parse_json(plain, "x").unwrap(), serde_json::json!({"a":1}));
    }

    #[test]
    fn broken_gzip_is_an_error() {
        let mut data = gz(br#"{"a":1}"#);
        data.truncate(12);
        assert!(matches!(
            parse_json(&data, "x"),
            Err(ImportError::Gzip { .. })
        ));
    }

    #[test]
    fn byte_order_mark_is_ignored() {
        assert!(parse_json(b"\xEF\xBB\xBF[]", "x").is_ok());
    }

    #[test]
    fn truncated_json_names_position() {
        let err = parse_json(b"{\n  \"log\": {", "rec.har").unwrap_err();
        match &err {
            ImportError::Json { input, line, .. } => {
                assert_eq!(input, "rec.har");
                assert_eq!(*line, 2);
            }
            other => panic!("unexpected {other:?}"),
        }
        assert!(err
            .to_string()
            .starts_with("rec.har: not valid JSON (line 2"));
    }

    #[test]
    fn sniffing() {
        use serde_json::json;
        assert_eq!(sniff(&json!({"log": {"entries": []}})), Some(Kind::Har));
        assert_eq!(
            sniff(&json!([{"method": "Network.x", "params": {}}])),
            Some(Kind::Cdp)
        );
        assert_eq!(
            sniff(&json!({"events": [{"method": "Page.x", "params": {}}]})),
            Some(Kind::Cdp)
        );
        assert_eq!(sniff(&json!({"traceEvents": []})), Some(Kind::Trace));
        assert_eq!(
            sniff(&json!([{"ph": "X", "name": "RunTask"}])),
            Some(Kind::Trace)
        );
        assert_eq!(sniff(&json!([1, 2])), None);
        assert_eq!(sniff(&json!("x")), None);
    }

    #[test]
    fn missing_file_is_io_error() {
        let err = import_path(Path::new("/nonexistent/definitely/not.har")).unwrap_err();
        assert!(matches!(err, ImportError::Io { .. }));
        assert!(err.to_string().contains("/nonexistent/definitely/not.har"));
    }

    #[test]
    fn recording_names() {
        assert!(is_recording_name(Path::new("a/b.har")));
        assert!(is_recording_name(Path::new("a/b.JSON.gz")));
        assert!(!is_recording_name(Path::new("a/b.txt")));
        assert!(!is_recording_name(Path::new("a/b.gz")));
    }
}
