//! Shared by the tests that need the real test model.

use std::path::PathBuf;
use std::sync::OnceLock;
use std::time::Instant;

/// A real llama-server for the server-engine tests.
pub mod llama_server;
/// Mask comparison helpers (not every test module uses them).
pub mod masks;

use toolrail_llm::{Model, test_model_for_suite};

/// The test model's path. Absent: a failure when `CI=true`, otherwise `None` after saying how
/// to fetch it.
pub fn model_path() -> Option<PathBuf> {
    test_model_for_suite().unwrap_or_else(|e| panic!("{e}"))
}

/// The test model, loaded once per test binary. Absent: a failure when `CI=true`, otherwise
/// `None` after saying how to fetch it.
pub fn model() -> Option<&'static Model> {
    static MODEL: OnceLock<Option<Model>> = OnceLock::new();
    MODEL
        .get_or_init(|| {
            let path = model_path()?;
            let started = Instant::now();
            let model = Model::open(&path).expect("the test model loads");
            eprintln!(
                "model load: {:.0} ms",
                started.elapsed().as_secs_f64() * 1e3
            );
            Some(model)
        })
        .as_ref()
}
