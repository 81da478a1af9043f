//! The converter: its API, llama.cpp's own converter vectors, property tests against the validator,
//! and the JSON Schema Test Suite.
//!
//! One test binary per crate: each module is one former test file.

// A test fails by panicking: unwrap and expect say what broke (helpers included).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod api;
mod deep;
mod format_bounds;
mod limits;
mod llama_vectors;
mod maskbench;
mod props;
mod python_syntax;
mod readings;
mod relax;
mod suite;
