//! `mewa-corpus`: the page corpus the lab serves and loads.
//!
//! - [`page`]: the model on disk — a [`Corpus`] of [`Page`]s, each a tree of
//!   [`Object`]s with host, path, size, content type, parent, [`Discovery`] and
//!   a script's `compute_ms` — and its validation.
//! - [`gen`]: the seeded generator with the seeds' workloads as presets
//!   (`meh15`, `accel7`, `complat`, `general`).
//! - [`body`]: deterministic bodies of exactly the modelled size whose HTML,
//!   CSS and scripts reference exactly the modelled children.
//! - [`convert`]: to the edge's [`mewa_hint::PageMeta`] (for hints) and from
//!   imported recordings (real page structures).
//!
//! Pure: no file or network I/O; JSON comes in and goes out as bytes. The
//! format is documented in docs/CORPUS.md.

pub mod body;
pub mod convert;
pub mod gen;
pub mod page;
mod rng;

pub use body::{body, min_body_size, reference_ends, BodyError, Scheme};
pub use convert::{from_import_report, from_page_meta, to_page_meta, Imported, PLACEHOLDER_SIZE};
pub use gen::{generate, generate_with, GenError, Options, Preset};
pub use page::{
    Corpus, CorpusError, Discovery, Kind, Object, Page, PageError, Provenance, MAX_COMPUTE_MS,
    MAX_OBJECT_SIZE,
};
