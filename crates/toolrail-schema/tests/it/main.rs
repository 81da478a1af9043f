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

/// MaskBench's schema files (`maskbench/data/*.json`) in name order; fails when the sample is
/// not all there.
fn maskbench_files(data: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut files: Vec<std::path::PathBuf> = std::fs::read_dir(data)
        .unwrap_or_else(|e| panic!("{}: {e}", data.display()))
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    assert!(
        files.len() > 1000,
        "MaskBench sample not found in {}",
        data.display()
    );
    files
}
