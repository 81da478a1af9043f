//! Transcripts and the run controller (the latter on the real test model).
//!
//! One test binary per crate: each module is one former test file.

// A test fails by panicking: unwrap and expect say what broke (helpers included).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod conversation;
mod explain;
mod prompt_preview;
mod reliability;
mod template_source;
mod transcript;
mod workbench_run;
