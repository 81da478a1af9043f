//! The real test model, for the run controller tests.

use std::sync::OnceLock;

use toolrail_llm::Model;

/// The test model, loaded once per test binary. Absent: a failure when `CI=true`, otherwise
/// `None` after saying how to fetch it.
pub fn model() -> Option<&'static Model> {
    static MODEL: OnceLock<Option<Model>> = OnceLock::new();
    MODEL
        .get_or_init(|| {
            let path = toolrail_testkit::model()?;
            Some(Model::open(&path).expect("the test model loads"))
        })
        .as_ref()
}
