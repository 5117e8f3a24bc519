//! mewa's controllers for Linux TCP, as BPF `struct_ops` congestion controls:
//! FLD_TCP named [`FLD`] (`mewa_fld`, the rules of `crates/cc`), and [`IW`]
//! (`mewa_iw`: the kernel's cubic started from a window the client asked
//! for, seed 001); the calls that register them with the kernel, remove them
//! and report on them (`mewa cc load`, `unload`, `status`); and
//! [`IwStore`], through which the origin hands one socket its granted
//! initial window.
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
/// The name of cubic-with-a-granted-initial-window.
pub const IW: &str = "mewa_iw";
/// Every control `mewa cc load` registers (one BPF object).
pub const CONTROLS: [&str; 2] = [FLD, IW];
/// The socket storage map both controls read the granted window from.
pub const IW_MAP: &str = "mewa_iw_req";

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
    /// The controls are not registered (or not by mewa).
    #[error("mewa's congestion controls are not registered; run `mewa cc load` (as root) first")]
    NotLoaded,
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
    /// Registered now; the id of [`FLD`]'s `struct_ops` map.
    Now(u32),
    /// Already registered by an earlier `load`; [`FLD`]'s map's id.
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

/// The state of each of [`CONTROLS`].
pub fn status() -> Vec<Status> {
    let available = available();
    CONTROLS
        .iter()
        .map(|&name| Status {
            name,
            available: available.iter().any(|a| a == name),
            map_id: registered_map(name).ok().flatten(),
            built: built().is_ok(),
            btf: Path::new(BTF).exists(),
        })
        .collect()
}

/// Registers every one of [`CONTROLS`] with the kernel; does nothing if mewa
/// registered them all before. A partial registration (an older build that
/// had fewer controls) is removed and made again, so that every control
/// shares the one [`IW_MAP`].
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
    if let Some(id) = all_registered()? {
        return Ok(Loaded::Already(id));
    }
    unload()?;
    let available = available();
    if let Some(taken) = CONTROLS.iter().find(|c| available.iter().any(|a| a == *c)) {
        return Err(CcError::NameTaken(taken));
    }
    match imp::load_all() {
        // Another loader (a parallel test, a second `mewa cc load`) won the
        // race: what it registered is ours too.
        Err(CcError::NameTaken(n)) => match all_registered()? {
            Some(id) => Ok(Loaded::Already(id)),
            None => Err(CcError::NameTaken(n)),
        },
        other => other.map(Loaded::Now),
    }
}

/// The id of [`FLD`]'s map when every one of [`CONTROLS`] is registered by
/// mewa.
fn all_registered() -> Result<Option<u32>, CcError> {
    let mut fld = None;
    for c in CONTROLS {
        match registered_map(c)? {
            Some(id) if c == FLD => fld = Some(id),
            Some(_) => {}
            None => return Ok(None),
        }
    }
    Ok(fld)
}

/// Removes every one of [`CONTROLS`] mewa registered; `Ok(false)` if none
/// was. Sockets that use one keep it until they close; new ones can no
/// longer pick it.
pub fn unload() -> Result<bool, CcError> {
    if !privileged() {
        return Err(CcError::NotPermitted);
    }
    let mut any = false;
    for c in CONTROLS {
        let Some(id) = registered_map(c)? else {
            continue;
        };
        let map = libbpf_rs::MapHandle::from_map_id(id)
            .map_err(|e| refused_or("open the struct_ops map", e))?;
        libbpf_rs::MapCore::delete(&map, &0u32.to_ne_bytes())
            .map_err(|e| refused_or("delete the struct_ops map's element", e))?;
        any = true;
    }
    Ok(any)
}

/// The window one socket asks its control to start from: the value of
/// [`IW_MAP`] (two native-endian u32, as `struct iw_req` in the BPF source).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct IwRequest {
    /// The window asked for, segments; 0 once applied.
    pub segments: u32,
    /// What the control set (bounded by the peer's receive window and the
    /// socket's clamp); 0 until applied.
    pub granted: u32,
}

impl IwRequest {
    fn to_bytes(self) -> [u8; 8] {
        let mut b = [0u8; 8];
        b[..4].copy_from_slice(&self.segments.to_ne_bytes());
        b[4..].copy_from_slice(&self.granted.to_ne_bytes());
        b
    }

    fn from_bytes(b: &[u8]) -> Option<IwRequest> {
        let segments = u32::from_ne_bytes(b.get(..4)?.try_into().ok()?);
        let granted = u32::from_ne_bytes(b.get(4..8)?.try_into().ok()?);
        Some(IwRequest { segments, granted })
    }
}

/// The registered controls' socket storage: how user space gives one TCP
/// socket a window to start from. Write the request ([`IwStore::ask`]),
/// switch the socket to [`IW`] or [`FLD`] (its `init()` applies it), read
/// what was set ([`IwStore::granted`]).
#[derive(Debug)]
pub struct IwStore {
    map: libbpf_rs::MapHandle,
}

impl IwStore {
    /// Opens the storage of the registered controls (needs the privileges
    /// of [`privileged`]; `mewa cc load` first).
    pub fn open() -> Result<IwStore, CcError> {
        built()?;
        if !privileged() {
            return Err(CcError::NotPermitted);
        }
        if all_registered()?.is_none() {
            return Err(CcError::NotLoaded);
        }
        // Old storage maps live on while sockets of an earlier
        // registration hold them; the newest is the registered one's.
        let id = libbpf_rs::query::MapInfoIter::default()
            .filter(|i| i.ty == libbpf_rs::MapType::SkStorage && i.name.to_str() == Some(IW_MAP))
            .map(|i| i.id)
            .max()
            .ok_or(CcError::NotLoaded)?;
        let map = libbpf_rs::MapHandle::from_map_id(id)
            .map_err(|e| refused_or("open the initial-window storage", e))?;
        Ok(IwStore { map })
    }

    /// Asks the control of `socket` (a TCP socket's fd) to start from
    /// `segments` when it is next initialised.
    pub fn ask(&self, socket: std::os::fd::BorrowedFd<'_>, segments: u32) -> Result<(), CcError> {
        use std::os::fd::AsRawFd;
        let req = IwRequest {
            segments,
            granted: 0,
        };
        libbpf_rs::MapCore::update(
            &self.map,
            &socket.as_raw_fd().to_ne_bytes(),
            &req.to_bytes(),
            libbpf_rs::MapFlags::ANY,
        )
        .map_err(|e| refused_or("store the socket's initial window", e))
    }

    /// What the control set for `socket`: `None` if nothing was asked or it
    /// has not been applied yet.
    pub fn granted(&self, socket: std::os::fd::BorrowedFd<'_>) -> Result<Option<u32>, CcError> {
        use std::os::fd::AsRawFd;
        let v = libbpf_rs::MapCore::lookup(
            &self.map,
            &socket.as_raw_fd().to_ne_bytes(),
            libbpf_rs::MapFlags::ANY,
        )
        .map_err(|e| refused_or("read the socket's initial window", e))?;
        Ok(v.as_deref()
            .and_then(IwRequest::from_bytes)
            .map(|r| r.granted)
            .filter(|&g| g > 0))
    }
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

    use super::{CcError, FLD, IW};

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
        include!(concat!(env!("OUT_DIR"), "/mewa.skel.rs"));
    }

    fn refused(name: &'static str) -> impl Fn(libbpf_rs::Error) -> CcError {
        move |e| match e.kind() {
            libbpf_rs::ErrorKind::PermissionDenied => CcError::NotPermitted,
            libbpf_rs::ErrorKind::AlreadyExists => CcError::NameTaken(name),
            _ => CcError::Refused {
                name,
                reason: format!("{e:#}"),
            },
        }
    }

    /// Opens, verifies and registers the programs; returns [`FLD`]'s map's
    /// id.
    pub(super) fn load_all() -> Result<u32, CcError> {
        let mut storage = MaybeUninit::uninit();
        let open = skel::MewaSkelBuilder::default()
            .open(&mut storage)
            .map_err(refused(FLD))?;
        let mut skel = open.load().map_err(refused(FLD))?;
        // The registration is the map's element; dropping the link would
        // delete it. Disconnected, it stays when this process exits.
        let mut link = skel
            .maps
            .mewa_fld
            .attach_struct_ops()
            .map_err(refused(FLD))?;
        link.disconnect();
        let mut link = skel.maps.mewa_iw.attach_struct_ops().map_err(refused(IW))?;
        link.disconnect();
        let info = libbpf_rs::MapCore::info(&skel.maps.mewa_fld).map_err(refused(FLD))?;
        Ok(info.info.id)
    }
}

#[cfg(mewa_no_bpf)]
mod imp {
    use super::CcError;

    pub(super) fn load_all() -> Result<u32, CcError> {
        Err(CcError::NotBuilt(env!("MEWA_NO_BPF_REASON")))
    }
}
