//! Signals: teardown on Ctrl-C / SIGTERM, and passing signals on to a
//! program running inside a namespace.

use std::sync::OnceLock;
use std::thread::JoinHandle;

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use signal_hook::consts::{SIGHUP, SIGINT, SIGQUIT, SIGTERM};
use signal_hook::iterator::exfiltrator::origin::WithOrigin;
use signal_hook::iterator::{Handle, SignalsInfo};
use signal_hook::low_level::siginfo::Cause;

use super::netns;
use super::Error;

static INSTALLED: OnceLock<()> = OnceLock::new();

/// Makes SIGINT, SIGTERM and SIGHUP tear down every namespace this process
/// owns and then exit with status 128 + signal number (as a shell reports a
/// death by that signal). Installs once; later calls do nothing.
///
/// Without it a Ctrl-C kills the process before any `Drop` runs: TUN devices
/// vanish with the process, but the named namespaces stay until the next
/// run's [`super::cleanup_stale`].
pub fn teardown_on_signals() -> Result<(), Error> {
    if INSTALLED.get().is_some() {
        return Ok(());
    }
    let mut signals = SignalsInfo::<WithOrigin>::new([SIGINT, SIGTERM, SIGHUP])
        .map_err(|e| Error::io("installing signal handlers", e))?;
    std::thread::Builder::new()
        .name("mewa-signals".into())
        .spawn(move || {
            if let Some(o) = signals.forever().next() {
                netns::delete_all_live();
                std::process::exit(128 + o.signal);
            }
        })
        .map_err(|e| Error::io("starting the signal thread", e))?;
    let _ = INSTALLED.set(());
    Ok(())
}

/// Passes termination signals on to a child process while it lives; drop it
/// to stop.
#[derive(Debug)]
pub struct SignalForwarder {
    handle: Handle,
    thread: Option<JoinHandle<()>>,
}

/// Forwards SIGTERM, SIGHUP and SIGQUIT sent to this process to `pid`, and
/// SIGINT when another process sent it: a Ctrl-C typed in the terminal
/// already reaches the child (same process group) and is not doubled. This
/// process does not die of them, so it can tear down after the child exits.
pub fn forward_signals(pid: u32) -> Result<SignalForwarder, Error> {
    let target = Pid::from_raw(
        i32::try_from(pid).map_err(|_| Error::Topology(format!("pid {pid} out of range")))?,
    );
    let mut signals = SignalsInfo::<WithOrigin>::new([SIGINT, SIGTERM, SIGHUP, SIGQUIT])
        .map_err(|e| Error::io("installing signal handlers", e))?;
    let handle = signals.handle();
    let thread = std::thread::Builder::new()
        .name("mewa-signal-forward".into())
        .spawn(move || {
            for o in signals.forever() {
                let from_terminal = o.signal == SIGINT && matches!(o.cause, Cause::Kernel);
                if from_terminal {
                    continue;
                }
                if let Ok(sig) = Signal::try_from(o.signal) {
                    let _ = kill(target, sig);
                }
            }
        })
        .map_err(|e| Error::io("starting the signal thread", e))?;
    Ok(SignalForwarder {
        handle,
        thread: Some(thread),
    })
}

impl Drop for SignalForwarder {
    fn drop(&mut self) {
        self.handle.close();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
