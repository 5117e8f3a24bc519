//! What the link delivered, read from a testbed's pcaps once it is torn
//! down: the downlink's packets and each direction's retransmissions
//! ([`mewa_probe::retrans`]), and when the client's handshakes crossed.

use std::collections::HashSet;
use std::path::Path;

use mewa_probe::retrans::{self, Retransmission};

use crate::experiment::ExperimentError;

/// What the link delivered, both directions.
#[derive(Debug, Default)]
pub struct Wire {
    /// The downlink's packets: (µs since the epoch, IP bytes).
    pub down_packets: Vec<(u64, u32)>,
    /// The server's retransmissions.
    pub down: Vec<Retransmission>,
    /// The client's.
    pub up: Vec<Retransmission>,
    /// When each connection's first SYN crossed upstream (the client's
    /// handshakes), µs since the epoch.
    pub up_syns: Vec<u64>,
}

/// One direction's delivered packets (time, IP bytes), retransmissions,
/// and the time of each flow's first SYN.
type OneWay = (Vec<(u64, u32)>, Vec<Retransmission>, Vec<u64>);

/// Reads `down.pcap` and `up.pcap` in `dir`.
pub fn read_wire(dir: &Path) -> Result<Wire, ExperimentError> {
    let (down_packets, down, _) = read_one_way(&dir.join("down.pcap"))?;
    let (_, up, up_syns) = read_one_way(&dir.join("up.pcap"))?;
    Ok(Wire {
        down_packets,
        down,
        up,
        up_syns,
    })
}

/// One direction's capture at `path`. A capture cut short (the emulator
/// stopped mid-write) keeps the records before the cut.
fn read_one_way(path: &Path) -> Result<OneWay, ExperimentError> {
    let bytes =
        std::fs::read(path).map_err(ExperimentError::io("reading the link's capture", path))?;
    let (records, _cut) =
        mewa_link::pcap::read_pcap_lossy(&bytes).map_err(|source| ExperimentError::Pcap {
            path: path.to_path_buf(),
            source,
        })?;
    let packets = records.iter().map(|r| (r.at_us, r.orig_len)).collect();
    let segments: Vec<retrans::Segment> = records
        .iter()
        .filter_map(|r| retrans::segment(r.at_us, r.data).ok().flatten())
        .collect();
    let mut flows = HashSet::new();
    let syns = segments
        .iter()
        .filter(|g| g.syn && flows.insert(g.flow))
        .map(|g| g.at_us)
        .collect();
    Ok((packets, retrans::retransmissions(segments), syns))
}
