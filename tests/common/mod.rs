//! Shared by the tests that need the real test model.

use std::sync::OnceLock;

/// Mask comparison helpers (not every test binary uses them).
#[allow(dead_code)]
pub mod masks;

/// App snapshot helpers (not every test binary uses them).
#[allow(dead_code)]
pub mod app;

use toolrail::llm::{Model, test_model_path};

/// The test model, loaded once per test binary. Absent: a failure when `CI=true`, otherwise
/// `None` after saying how to fetch it. (The app shell tests share this module but not the model.)
#[allow(dead_code)]
pub fn model() -> Option<&'static Model> {
    static MODEL: OnceLock<Option<Model>> = OnceLock::new();
    MODEL
        .get_or_init(|| {
            let path = test_model_path();
            if !path.is_file() {
                if std::env::var("CI").is_ok_and(|v| v == "true") {
                    panic!(
                        "test model missing at {} (CI=true): run scripts/fetch-model.sh",
                        path.display()
                    );
                }
                eprintln!(
                    "skipped: test model not found at {}; run scripts/fetch-model.sh",
                    path.display()
                );
                return None;
            }
            Some(Model::open(&path).expect("the test model loads"))
        })
        .as_ref()
}
