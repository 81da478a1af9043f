//! The engine against llama.cpp: its grammar test vectors, a reference mask implementation (property
//! tests), and random strings of the corpus grammars.
//!
//! One test binary per crate: each module is one former test file.

mod llama_conformance;
mod mask_limits;
mod mask_reference;
mod sample_props;
