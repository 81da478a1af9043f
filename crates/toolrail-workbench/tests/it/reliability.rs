//! Reproducers of the reliability issue that concern the workspace (`../shared/reliability/`):
//! each loads the way the app loads it and ends with a clear message within a time bound.
//! (F4: `transcript.rs`; F5 and F7: the unit tests of `workspace.rs`, which build the same
//! files in Rust.)

use std::time::{Duration, Instant};

use toolrail_workbench::analysis::{AnalysisInput, Computer};
use toolrail_workbench::workspace;

/// `../shared/reliability/<name>`; missing: a failure under `CI=true`, otherwise None (a skip).
fn reproducer(name: &str) -> Option<std::path::PathBuf> {
    toolrail_testkit::shared(&format!("reliability/{name}"))
}

#[test]
fn f1_a_workspace_with_a_billion_character_minimum_analyses_to_a_clear_issue() {
    let Some(reproducer) = reproducer("F1-crash-workspace.json") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("workspace.json");
    std::fs::copy(reproducer, &path).unwrap();
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

#[test]
fn a_test_input_of_distinct_stack_states_keeps_the_analysis_memory_bounded() {
    // 200,000 levels of nesting: every byte a new stack state. Unbounded, the memo grew with
    // all of them (a million nested objects took 2.3 GB); the analysis compacts as it goes.
    let mut ws = workspace::Workspace::default();
    ws.grammar.hand_edited = true;
    ws.grammar.text = "root ::= obj\nobj ::= \"{\" (obj | \"1\") \"}\" | \"[\" obj \"]\"".into();
    let depth = 200_000;
    ws.test_input = format!("{}{{1}}{}", "{[".repeat(depth), "]}".repeat(depth));
    let mut computer = Computer::default();
    let started = Instant::now();
    let analysis = computer.compute(&AnalysisInput::from_workspace(&ws, ws.test_input.len() / 2));
    assert!(
        started.elapsed() < Duration::from_secs(60),
        "{:?}",
        started.elapsed()
    );
    let test = analysis.test.expect("a test report");
    assert!(test.verdict.is_accepted(), "{:?}", test.verdict.kind);
    assert!(computer.memo_evictions() > 0);
    // The live state at the cursor holds a few entries per level; the memo is dropped past
    // its limit.
    let limit = toolrail_engine::check::STREAM_MEMORY_ENTRIES + 8 * depth;
    assert!(
        computer.memory_entries() <= limit,
        "{}",
        computer.memory_entries()
    );
}
