//! The `crates/cc` controllers for Linux TCP: FLD_TCP as a BPF `struct_ops`
//! congestion control named [`FLD`] (`mewa_fld`), and the calls that register
//! it with the kernel, remove it and report on it (`mewa cc load`, `unload`,
//! `status`).
//!
//! Registration outlives the process that made it: the program is registered
//! through its `struct_ops` map (not a BPF link), and the kernel keeps a
//! registered map alive, as `bpftool struct_ops register` does. Any socket may
//! then pick it by name (`TCP_CONGESTION`), in every network namespace; the
//! origin does with `--cc mewa_fld`. Removing it deletes the map's one
//! element, found again by the map's name and type.
//!
//! The kernel side is `src/bpf/mewa_fld.bpf.c`; its rules are those of
//! [`mewa_cc::Window::fld`](../mewa_cc/struct.Window.html), and a test in
//! `crates/lab/tests` compares a real transfer's bytes per round trip with
//! that core's schedule.

use std::path::Path;

/// The name the kernel lists the FLD_TCP control under.
pub const FLD: &str = "mewa_fld";

/// Where the kernel lists the congestion controls sockets may use.
const AVAILABLE: &str = "/proc/sys/net/ipv4/tcp_available_congestion_control";
/// The kernel's own type information, which BPF `struct_ops` needs.
const BTF: &str = "/sys/kernel/btf/vmlinux";

/// Why a control could not be registered or removed.
#[derive(Debug, thiserror::Error)]
pub enum CcError {
    /// This build has no BPF programs (clang, bpftool or BTF was missing when
    /// it was compiled).
    #[error("this mewa was built without its BPF programs ({0}); run scripts/setup and rebuild")]
    NotBuilt(&'static str),
    /// The kernel has no BTF, so no BPF congestion control can load.
    #[error("{BTF} is missing: this kernel was built without BTF (CONFIG_DEBUG_INFO_BTF=y), which BPF congestion control needs")]
    NoBtf,
    /// Loading BPF programs needs privileges.
    #[error("loading a BPF congestion control needs root (CAP_BPF and CAP_NET_ADMIN)")]
    NotPermitted,
    /// The kernel refused the programs or the registration.
    #[error("the kernel refused {name}: {reason} (needs Linux >= 5.13 with BPF struct_ops, CONFIG_BPF_JIT and CONFIG_BPF_SYSCALL)")]
    Refused {
        /// Which control.
        name: &'static str,
        /// libbpf's message, with the kernel's error.
        reason: String,
    },
    /// Another control already has the name (a different build, or
    /// `bpftool struct_ops register` by hand).
    #[error("a congestion control named {0} is already registered by something else; `mewa cc unload` first")]
    NameTaken(&'static str),
    /// Reading or deleting the registration failed.
    #[error("{what}: {reason}")]
    Bpf {
        /// Which step.
        what: &'static str,
        /// libbpf's message.
        reason: String,
    },
}

/// What [`load`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Loaded {
    /// Registered now; the id of its `struct_ops` map.
    Now(u32),
    /// Already registered by an earlier `load`; the map's id.
    Already(u32),
}

/// The state of one control, for `mewa cc status`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Status {
    /// The control's name.
    pub name: &'static str,
    /// Whether sockets can select it (the kernel lists it).
    pub available: bool,
    /// The id of the `struct_ops` map that registered it, if mewa's.
    pub map_id: Option<u32>,
    /// Whether this build carries the BPF program.
    pub built: bool,
    /// Whether the kernel has BTF.
    pub btf: bool,
}

/// The kernel's registered congestion controls (empty if unreadable).
pub fn available() -> Vec<String> {
    std::fs::read_to_string(AVAILABLE)
        .map(|s| s.split_whitespace().map(str::to_owned).collect())
        .unwrap_or_default()
}

/// Whether this build carries the BPF programs; `Err` says why not.
pub fn built() -> Result<(), CcError> {
    #[cfg(mewa_no_bpf)]
    return Err(CcError::NotBuilt(env!("MEWA_NO_BPF_REASON")));
    #[cfg(not(mewa_no_bpf))]
    Ok(())
}

/// The state of [`FLD`].
pub fn status() -> Status {
    Status {
        name: FLD,
        available: available().iter().any(|a| a == FLD),
        map_id: registered_map(FLD).ok().flatten(),
        built: built().is_ok(),
        btf: Path::new(BTF).exists(),
    }
}

/// Registers [`FLD`] with the kernel; does nothing if mewa registered it
/// before.
pub fn load() -> Result<Loaded, CcError> {
    built()?;
    if !Path::new(BTF).exists() {
        return Err(CcError::NoBtf);
    }
    // Without privileges the kernel hides the maps, and a registered
    // mewa_fld would look like someone else's: say what is missing first.
    if !privileged() {
        return Err(CcError::NotPermitted);
    }
    if let Some(id) = registered_map(FLD)? {
        return Ok(Loaded::Already(id));
    }
    if available().iter().any(|a| a == FLD) {
        return Err(CcError::NameTaken(FLD));
    }
    match imp::load_fld() {
        // Another loader (a parallel test, a second `mewa cc load`) won the
        // race: what it registered is ours too.
        Err(CcError::NameTaken(n)) => match registered_map(FLD)? {
            Some(id) => Ok(Loaded::Already(id)),
            None => Err(CcError::NameTaken(n)),
        },
        other => other.map(Loaded::Now),
    }
}

/// Removes [`FLD`]; `Ok(false)` if it was not registered by mewa. Sockets
/// that use it keep it until they close; new ones can no longer pick it.
pub fn unload() -> Result<bool, CcError> {
    if !privileged() {
        return Err(CcError::NotPermitted);
    }
    let Some(id) = registered_map(FLD)? else {
        return Ok(false);
    };
    let map = libbpf_rs::MapHandle::from_map_id(id)
        .map_err(|e| refused_or("open the struct_ops map", e))?;
    libbpf_rs::MapCore::delete(&map, &0u32.to_ne_bytes())
        .map_err(|e| refused_or("delete the struct_ops map's element", e))?;
    Ok(true)
}

/// Whether this process holds CAP_SYS_ADMIN, or CAP_BPF with CAP_NET_ADMIN:
/// what registering a TCP congestion control and listing BPF maps need
/// (read from `/proc/self/status`; `false` if it cannot be read).
pub fn privileged() -> bool {
    const CAP_NET_ADMIN: u32 = 12;
    const CAP_SYS_ADMIN: u32 = 21;
    const CAP_BPF: u32 = 39;
    let Ok(status) = std::fs::read_to_string("/proc/self/status") else {
        return false;
    };
    let Some(eff) = status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
    else {
        return false;
    };
    let has = |cap: u32| eff & (1u64 << cap) != 0;
    has(CAP_SYS_ADMIN) || (has(CAP_BPF) && has(CAP_NET_ADMIN))
}

/// The id of the registered `struct_ops` map named `name`, if any. Maps of
/// that name that are not registered (a loader that died half-way) do not
/// count.
fn registered_map(name: &str) -> Result<Option<u32>, CcError> {
    if !Path::new(BTF).exists() {
        return Ok(None);
    }
    let available = available();
    if !available.iter().any(|a| a == name) {
        return Ok(None);
    }
    // Listing maps needs CAP_SYS_ADMIN; without it, say so rather than
    // report "not registered".
    let mut found = None;
    for info in libbpf_rs::query::MapInfoIter::default() {
        if info.ty == libbpf_rs::MapType::StructOps && info.name.to_str() == Some(name) {
            found = Some(info.id);
        }
    }
    Ok(found)
}

/// A libbpf error as [`CcError`]: permission problems get their own message.
fn refused_or(what: &'static str, e: libbpf_rs::Error) -> CcError {
    if e.kind() == libbpf_rs::ErrorKind::PermissionDenied {
        CcError::NotPermitted
    } else {
        CcError::Bpf {
            what,
            reason: e.to_string(),
        }
    }
}

#[cfg(not(mewa_no_bpf))]
mod imp {
    use std::mem::MaybeUninit;

    use libbpf_rs::skel::{OpenSkel, SkelBuilder};

    use super::{CcError, FLD};

    // Generated by libbpf-cargo (build.rs): raw pointers into libbpf and
    // the embedded object, hence the one place this crate allows unsafe.
    #[allow(
        unsafe_code,
        clippy::all,
        clippy::pedantic,
        clippy::restriction,
        missing_docs,
        unused_qualifications
    )]
    mod skel {
        include!(concat!(env!("OUT_DIR"), "/mewa_fld.skel.rs"));
    }

    fn refused(e: libbpf_rs::Error) -> CcError {
        match e.kind() {
            libbpf_rs::ErrorKind::PermissionDenied => CcError::NotPermitted,
            libbpf_rs::ErrorKind::AlreadyExists => CcError::NameTaken(FLD),
            _ => CcError::Refused {
                name: FLD,
                reason: format!("{e:#}"),
            },
        }
    }

    /// Opens, verifies and registers the program; returns its map's id.
    pub(super) fn load_fld() -> Result<u32, CcError> {
        let mut storage = MaybeUninit::uninit();
        let open = skel::MewaFldSkelBuilder::default()
            .open(&mut storage)
            .map_err(refused)?;
        let mut skel = open.load().map_err(refused)?;
        let mut link = skel.maps.mewa_fld.attach_struct_ops().map_err(refused)?;
        // The registration is the map's element; dropping the link would
        // delete it. Disconnected, it stays when this process exits.
        link.disconnect();
        let info = libbpf_rs::MapCore::info(&skel.maps.mewa_fld).map_err(refused)?;
        Ok(info.info.id)
    }
}

#[cfg(mewa_no_bpf)]
mod imp {
    use super::CcError;

    pub(super) fn load_fld() -> Result<u32, CcError> {
        Err(CcError::NotBuilt(env!("MEWA_NO_BPF_REASON")))
    }
}
