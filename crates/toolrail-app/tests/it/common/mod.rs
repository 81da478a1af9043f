//! Shared by the app tests: snapshot helpers, and whether the real test model is there.

pub mod app;

use std::path::PathBuf;

/// The test model's path. Absent: a failure when `CI=true`, otherwise `None` after saying how
/// to fetch it.
pub fn model() -> Option<PathBuf> {
    toolrail_testkit::model()
}
