//! Transcripts and the run controller (the latter on the real test model).
//!
//! One test binary per crate: each module is one former test file.

mod common;
mod conversation;
mod prompt_preview;
mod reliability;
mod template_source;
mod transcript;
mod workbench_run;
