//! Reproducers of the reliability issue that concern the workspace (`../shared/reliability/`):
//! each loads the way the app loads it and ends with a clear message within a time bound.
//! (F4: `transcript.rs`; F5 and F7: the unit tests of `workspace.rs`, which build the same
//! files in Rust.)

use std::path::Path;
use std::time::{Duration, Instant};

use toolrail_workbench::analysis::{AnalysisInput, Computer};
use toolrail_workbench::workspace;

fn reproducer(name: &str) -> std::path::PathBuf {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/reliability")
        .join(name);
    assert!(path.is_file(), "reproducer {} is missing", path.display());
    path
}

#[test]
fn f1_a_workspace_with_a_billion_character_minimum_analyses_to_a_clear_issue() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("workspace.json");
    std::fs::copy(reproducer("F1-crash-workspace.json"), &path).unwrap();
    let loaded = workspace::load(&path);
    assert!(loaded.notice.is_none(), "{:?}", loaded.notice);
    let started = Instant::now();
    let analysis =
        Computer::default().compute(&AnalysisInput::from_workspace(&loaded.workspace, 0));
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    let issue = analysis.schema_issue.expect("the schema is refused");
    assert!(
        issue.message.contains("minLength") && issue.message.contains("above the limit"),
        "{}",
        issue.message
    );
}
