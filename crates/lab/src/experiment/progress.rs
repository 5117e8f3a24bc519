//! Where an experiment reports its progress: a progress bar in the CLI,
//! nothing in tests.

use std::sync::Mutex;

/// One step of a running experiment.
#[derive(Debug, Clone, Copy)]
pub struct Step<'a> {
    /// Loads done so far.
    pub done: usize,
    /// Loads in all.
    pub total: usize,
    /// What is running now (page, variant).
    pub what: &'a str,
}

/// Where an experiment reports its progress: a progress bar in the CLI,
/// nothing in tests. Shared by reference with the runner, which may call it
/// from the thread that drives the loads.
pub struct Progress {
    sink: Option<Mutex<Sink>>,
}

/// The callback behind a [`Progress`].
type Sink = Box<dyn FnMut(Step<'_>) + Send>;

impl Progress {
    /// Progress that goes nowhere.
    pub fn none() -> Progress {
        Progress { sink: None }
    }

    /// Progress that calls `f` on every step.
    pub fn new(f: impl FnMut(Step<'_>) + Send + 'static) -> Progress {
        Progress {
            sink: Some(Mutex::new(Box::new(f))),
        }
    }

    /// Reports a step.
    pub fn step(&self, done: usize, total: usize, what: &str) {
        if let Some(sink) = &self.sink {
            let mut f = mewa_model::sync::lock(sink);
            f(Step { done, total, what });
        }
    }
}

impl std::fmt::Debug for Progress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.sink.is_some() {
            "Progress(sink)"
        } else {
            "Progress(none)"
        })
    }
}
