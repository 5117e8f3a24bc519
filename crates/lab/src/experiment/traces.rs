//! Cellular traces an experiment replays: mahimahi delivery traces, any
//! file of the user's own or a bare name looked up in the shared data
//! folder, each with its uplink beside it or named.

use std::path::{Path, PathBuf};

use mewa_link::core::trace::DeliveryTrace;

use super::ExperimentError;

/// Where a bare trace name is looked up (the shared data folder beside the
/// checkout).
pub const SHARED_TRACES: &str = "../shared/data/traces";

/// The downlink and uplink files of a mahimahi trace: `p` itself (any
/// file; its uplink is `uplink` when given, else `X.up` beside a `X.down`),
/// or a bare name found in [`SHARED_TRACES`] (with or without `.down`).
pub fn find_trace(p: &Path, uplink: Option<&Path>) -> Result<(PathBuf, PathBuf), ExperimentError> {
    let bad = |message: String| ExperimentError::Config {
        field: "--trace",
        message,
    };
    let down = if p.exists() {
        p.to_path_buf()
    } else {
        let shared = Path::new(SHARED_TRACES).join(p);
        let with_ext = shared.with_extension("down");
        if shared.exists() {
            shared
        } else if with_ext.exists() {
            with_ext
        } else {
            return Err(bad(format!(
                "{}: no such file, nor in {SHARED_TRACES} (e.g. Verizon-LTE-short.down)",
                p.display()
            )));
        }
    };
    let name = down.to_string_lossy().to_string();
    if let Some(up) = uplink {
        if !up.is_file() {
            return Err(ExperimentError::Config {
                field: "--uplink",
                message: format!("{}: no such file", up.display()),
            });
        }
        return Ok((down, up.to_path_buf()));
    }
    let Some(stem) = name.strip_suffix(".down") else {
        return Err(bad(format!(
            "{name}: name the uplink trace with --uplink FILE (or name the two X.down and X.up)"
        )));
    };
    let up = PathBuf::from(format!("{stem}.up"));
    if !up.exists() {
        return Err(bad(format!(
            "{name}: the uplink trace {} is missing",
            up.display()
        )));
    }
    Ok((down, up))
}

/// Reads and parses a mahimahi delivery trace.
pub fn read_trace(p: &Path) -> Result<DeliveryTrace, ExperimentError> {
    let text = std::fs::read_to_string(p).map_err(ExperimentError::io("reading the trace", p))?;
    DeliveryTrace::parse(&text).map_err(|source| ExperimentError::Trace {
        path: p.to_path_buf(),
        source,
    })
}

/// A trace's two files found ([`find_trace`]) and read ([`read_trace`]):
/// the downlink file's path, the downlink and the uplink.
pub fn read_traces(
    trace: &Path,
    uplink: Option<&Path>,
) -> Result<(PathBuf, DeliveryTrace, DeliveryTrace), ExperimentError> {
    let (down, up) = find_trace(trace, uplink)?;
    let (d, u) = (read_trace(&down)?, read_trace(&up)?);
    Ok((down, d, u))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_trace_needs_its_uplink_beside_it() {
        let dir = std::env::temp_dir().join(format!("mewa-tr-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let down = dir.join("x.down");
        std::fs::write(&down, "1\n2\n").expect("write");
        let e = find_trace(&down, None).expect_err("no uplink");
        assert!(e.to_string().contains("x.up"), "{e}");
        std::fs::write(dir.join("x.up"), "1\n").expect("write");
        assert_eq!(find_trace(&down, None).expect("found").1, dir.join("x.up"));
        let e = find_trace(&dir.join("y.down"), None).expect_err("missing");
        assert!(e.to_string().contains("no such file"), "{e}");
        // Any file name, with the uplink named.
        let (mine, up) = (dir.join("phone-1.trace"), dir.join("phone-1-up.trace"));
        std::fs::write(&mine, "3\n").expect("write");
        let e = find_trace(&mine, None).expect_err("uplink unknown");
        assert!(e.to_string().contains("--uplink"), "{e}");
        let e = find_trace(&mine, Some(&up)).expect_err("uplink missing");
        assert!(e.to_string().contains("phone-1-up.trace"), "{e}");
        std::fs::write(&up, "3\n").expect("write");
        assert_eq!(find_trace(&mine, Some(&up)).expect("found"), (mine, up));
        assert!(read_trace(&down).is_ok());
        std::fs::write(dir.join("bad.down"), "fast\n").expect("write");
        assert!(read_trace(&dir.join("bad.down")).is_err());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
