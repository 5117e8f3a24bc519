//! Which of a group's connections carries an object, when HTTP/2 or
//! HTTP/3 has more than one: the policies a load can be given.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};

use mewa_corpus::Object;

/// Which of a group's connections carries an object (HTTP/2 and HTTP/3 with
/// more than one connection). Seed 000's client balances by size; a plain
/// browser has one connection and never asks.
pub trait Assign: Send + Sync + std::fmt::Debug {
    /// Index in `0..outstanding.len()` of the connection for `object`;
    /// `outstanding[i]` is the number of body bytes (the corpus sizes)
    /// requested on connection `i` and not yet received (with
    /// [`LoadOptions::pull_budget`], counted down as the bytes arrive;
    /// otherwise when each object completes). An index out of
    /// range is taken modulo the number of connections.
    fn pick(&self, object: &Object, outstanding: &[u64]) -> usize;
}

/// Objects go to the connections in turn.
#[derive(Debug, Default)]
pub struct RoundRobin(AtomicUsize);

impl Assign for RoundRobin {
    fn pick(&self, _object: &Object, outstanding: &[u64]) -> usize {
        self.0.fetch_add(1, Ordering::Relaxed) % outstanding.len().max(1)
    }
}

/// Each object goes to the connection with the fewest outstanding bytes
/// (ties to the lowest index): greedy balancing by size as objects are
/// discovered.
#[derive(Debug, Default, Clone, Copy)]
pub struct LeastOutstanding;

impl Assign for LeastOutstanding {
    fn pick(&self, _object: &Object, outstanding: &[u64]) -> usize {
        outstanding
            .iter()
            .enumerate()
            .min_by_key(|&(i, &b)| (b, i))
            .map_or(0, |(i, _)| i)
    }
}

/// Objects that reveal others (HTML, CSS, scripts) go to connection 0 —
/// the one that carried the document, whose window has grown — and the
/// rest (images, fonts: leaves) to the connection with the fewest
/// outstanding bytes. Why: preconnected extra connections sit idle while
/// the document loads and are still at their initial window when its
/// children are requested; a CSS file placed on one finishes late and
/// delays everything it reveals (docs/LAB-RESULTS.md).
#[derive(Debug, Default, Clone, Copy)]
pub struct WarmFirst;

impl WarmFirst {
    /// Whether an object can reveal others (by content type).
    pub fn reveals(object: &Object) -> bool {
        let t = object.content_type.as_str();
        t.starts_with("text/html") || t.starts_with("text/css") || t.contains("javascript")
    }
}

impl Assign for WarmFirst {
    fn pick(&self, object: &Object, outstanding: &[u64]) -> usize {
        if WarmFirst::reveals(object) {
            0
        } else {
            LeastOutstanding.pick(object, outstanding)
        }
    }
}

/// A precomputed object → connection map (e.g. seed 000's size-balanced
/// assignment from a hint), keyed by URL; objects it does not name go to
/// the least-loaded connection.
#[derive(Debug, Default, Clone)]
pub struct Fixed {
    /// `scheme-less URL` (`host` + `path`) → connection index.
    pub map: HashMap<String, usize>,
}

impl Fixed {
    /// The key [`Fixed::map`] uses for an object.
    pub fn key(object: &Object) -> String {
        format!("{}{}", object.host, object.path)
    }
}

impl Assign for Fixed {
    fn pick(&self, object: &Object, outstanding: &[u64]) -> usize {
        match self.map.get(&Fixed::key(object)) {
            Some(&i) => i,
            None => LeastOutstanding.pick(object, outstanding),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mewa_corpus::Discovery;

    fn obj(content_type: &str) -> Object {
        Object {
            id: 1,
            host: "a.example".into(),
            path: "/x".into(),
            size: 1000,
            content_type: content_type.into(),
            parent: Some(0),
            discovery: Discovery::Html,
            compute_ms: 0,
            status: None,
            think_ms: 0,
            recorded_size: None,
        }
    }

    #[test]
    fn warm_first_keeps_revealing_objects_on_the_document_connection() {
        let loads = [50_000, 0, 10];
        for t in [
            "text/html",
            "text/css",
            "application/javascript",
            "text/javascript",
        ] {
            assert_eq!(WarmFirst.pick(&obj(t), &loads), 0, "{t}");
        }
        for t in ["image/jpeg", "font/woff2"] {
            assert_eq!(WarmFirst.pick(&obj(t), &loads), 1, "{t}");
        }
    }
}
