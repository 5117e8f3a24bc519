//! `mewa_rto`: the first SYN and SYN-ACK retransmission timeout for peers
//! behind a cellular radio, chosen per connection by a BPF sock_ops program
//! attached to a cgroup (seed 003's fix, its handshake half).
//!
//! Linux resends a SYN or SYN-ACK after 1 s (`TCP_TIMEOUT_INIT`); a 3G
//! radio waking from IDLE holds the packet about 2 s, so the copy is
//! spurious. The program (`src/bpf/mewa_rto.bpf.c`) answers
//! `BPF_SOCK_OPS_TIMEOUT_INIT` for every socket of the cgroup whose peer
//! falls in one of the [`Rule`]s' prefixes. It stays attached while the
//! returned [`SynRto`] lives.

use std::net::Ipv4Addr;
use std::path::Path;
use std::time::Duration;

use crate::CcError;

/// Peers in one IPv4 prefix and the first handshake timeout they get.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rule {
    /// The prefix's address.
    pub addr: Ipv4Addr,
    /// Its length, 0 to 32.
    pub len: u8,
    /// The first SYN / SYN-ACK retransmission timeout (whole ms).
    pub syn_rto: Duration,
}

impl Rule {
    /// The LPM trie key (`struct rto_key`: prefix length, then the address
    /// in network byte order) and value (`struct rto_rule`) in the BPF
    /// source's layout.
    pub fn to_bytes(&self) -> Result<([u8; 8], [u8; 4]), CcError> {
        if self.len > 32 {
            return Err(CcError::Bpf {
                what: "a mewa_rto rule",
                reason: format!("prefix length {} of {} is over 32", self.len, self.addr),
            });
        }
        let ms = u32::try_from(self.syn_rto.as_millis()).unwrap_or(u32::MAX);
        // TCP_RTO_MAX is 120 s: the kernel caps what the program says.
        if ms == 0 || ms > 120_000 {
            return Err(CcError::Bpf {
                what: "a mewa_rto rule",
                reason: format!("a first timeout of {ms} ms: give 1 ms to 120 s"),
            });
        }
        let mut key = [0u8; 8];
        key[..4].copy_from_slice(&u32::from(self.len).to_ne_bytes());
        key[4..].copy_from_slice(&self.addr.octets());
        Ok((key, ms.to_ne_bytes()))
    }
}

/// The program, attached to a cgroup until dropped.
#[derive(Debug)]
pub struct SynRto {
    #[cfg(not(mewa_no_bpf))]
    _link: libbpf_rs::Link,
    #[cfg(not(mewa_no_bpf))]
    applied: libbpf_rs::MapHandle,
}

impl SynRto {
    /// Handshakes the program has given a longer first timeout so far.
    pub fn applied(&self) -> u64 {
        #[cfg(not(mewa_no_bpf))]
        {
            libbpf_rs::MapCore::lookup(&self.applied, &0u32.to_ne_bytes(), libbpf_rs::MapFlags::ANY)
                .ok()
                .flatten()
                .and_then(|v| v.get(..8).and_then(|b| b.try_into().ok()))
                .map_or(0, u64::from_ne_bytes)
        }
        #[cfg(mewa_no_bpf)]
        0
    }
}

/// Attaches the program to the cgroup (v2) directory `cgroup` with `rules`.
pub fn attach(cgroup: &Path, rules: &[Rule]) -> Result<SynRto, CcError> {
    crate::built()?;
    if !crate::privileged() {
        return Err(CcError::NotPermitted);
    }
    let entries = rules
        .iter()
        .map(Rule::to_bytes)
        .collect::<Result<Vec<_>, _>>()?;
    imp::attach(cgroup, &entries)
}

#[cfg(not(mewa_no_bpf))]
mod imp {
    use std::mem::MaybeUninit;
    use std::os::fd::AsRawFd;
    use std::path::Path;

    use libbpf_rs::skel::{OpenSkel, SkelBuilder};
    use libbpf_rs::MapCore;

    use super::SynRto;
    use crate::CcError;

    crate::skeleton!("/mewa_rto.skel.rs");

    fn bpf(what: &'static str) -> impl Fn(libbpf_rs::Error) -> CcError {
        move |e| match e.kind() {
            libbpf_rs::ErrorKind::PermissionDenied => CcError::NotPermitted,
            _ => CcError::Bpf {
                what,
                reason: format!("{e:#}"),
            },
        }
    }

    pub(super) fn attach(cgroup: &Path, entries: &[([u8; 8], [u8; 4])]) -> Result<SynRto, CcError> {
        let dir = std::fs::File::open(cgroup).map_err(|e| CcError::Bpf {
            what: "open the cgroup",
            reason: format!("{}: {e}", cgroup.display()),
        })?;
        let mut storage = MaybeUninit::uninit();
        let open = skel::MewaRtoSkelBuilder::default()
            .open(&mut storage)
            .map_err(bpf("open mewa_rto"))?;
        let skel = open.load().map_err(bpf("load mewa_rto"))?;
        for (key, value) in entries {
            skel.maps
                .mewa_rto_rules
                .update(key, value, libbpf_rs::MapFlags::ANY)
                .map_err(bpf("store a mewa_rto rule"))?;
        }
        let applied = libbpf_rs::MapHandle::try_from(&skel.maps.mewa_rto_applied)
            .map_err(bpf("open mewa_rto's counter"))?;
        // The link holds the program (and its maps) once the object is gone.
        let link = skel
            .progs
            .mewa_rto
            .attach_cgroup(dir.as_raw_fd())
            .map_err(bpf("attach mewa_rto to the cgroup"))?;
        Ok(SynRto {
            _link: link,
            applied,
        })
    }
}

#[cfg(mewa_no_bpf)]
mod imp {
    use std::path::Path;

    use super::SynRto;
    use crate::CcError;

    pub(super) fn attach(
        _cgroup: &Path,
        _entries: &[([u8; 8], [u8; 4])],
    ) -> Result<SynRto, CcError> {
        Err(CcError::NotBuilt(env!("MEWA_NO_BPF_REASON")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_are_laid_out_as_the_program_reads_them() {
        let r = Rule {
            addr: Ipv4Addr::new(100, 64, 0, 1),
            len: 32,
            syn_rto: Duration::from_millis(2200),
        };
        let (k, v) = r.to_bytes().unwrap();
        assert_eq!(&k[..4], &32u32.to_ne_bytes());
        assert_eq!(&k[4..], &[100, 64, 0, 1]);
        assert_eq!(v, 2200u32.to_ne_bytes());
        assert!(Rule { len: 33, ..r }.to_bytes().is_err());
        assert!(Rule {
            syn_rto: Duration::ZERO,
            ..r
        }
        .to_bytes()
        .is_err());
        assert!(Rule {
            syn_rto: Duration::from_secs(121),
            ..r
        }
        .to_bytes()
        .is_err());
    }
}
