//! The engine against llama.cpp: its grammar test vectors, a reference mask implementation (property
//! tests), and random strings of the corpus grammars.
//!
//! One test binary per crate: each module is one former test file.

// A test fails by panicking: unwrap and expect say what broke (helpers included).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod deep;
mod llama_conformance;
mod mask_limits;
mod mask_reference;
mod sample_props;
