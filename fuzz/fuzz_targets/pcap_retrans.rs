//! A pcap file as the lab reads the link's captures (`mewa_link::pcap`)
//! and the retransmission analysis over its packets
//! (`mewa_probe::retrans`): any bytes are read or refused without panicking,
//! and every verdict counts once.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mewa_probe::retrans::{retransmissions, segment, Counts};
use mewa_link::pcap::read_pcap_lossy;

fuzz_target!(|data: &[u8]| {
    // The input as a whole capture, and as one raw IPv4 packet.
    let _ = segment(0, data);
    let Ok((records, _)) = read_pcap_lossy(data) else { return };
    let segments: Vec<_> = records
        .iter()
        .filter_map(|r| segment(r.at_us, r.data).ok().flatten())
        .collect();
    let n = segments.len();
    let r = retransmissions(segments);
    assert!(r.len() <= n);
    assert_eq!(Counts::of(&r).total() as usize, r.len());
});
