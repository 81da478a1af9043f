//! Shared by the app tests: snapshot helpers, and whether the real test model is there.

pub mod app;

use std::path::PathBuf;

use toolrail_llm::test_model_for_suite;

/// The test model's path. Absent: a failure when `CI=true`, otherwise `None` after saying how
/// to fetch it.
pub fn model() -> Option<PathBuf> {
    test_model_for_suite().unwrap_or_else(|e| panic!("{e}"))
}
