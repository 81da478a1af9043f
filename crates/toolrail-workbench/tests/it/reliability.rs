//! Reproducers of the reliability issue that concern the workspace (`../shared/reliability/`):
//! each loads the way the app loads it and ends with a clear message (a hang fails).
//! (F4: `transcript.rs`; F5 and F7: the unit tests of `workspace.rs`, which build the same
//! files in Rust.)

use std::time::Duration;

use toolrail_workbench::analysis::{Analysis, AnalysisInput, Computer};
use toolrail_workbench::workspace;

/// Runs one analysis on its own thread and returns it with the computer that made it; a hang
/// is a failure after a generous ceiling (a guard against hanging forever, not a timing check:
/// how fast analyses run is measured by the benches).
fn analyse_or_fail_on_hang(input: AnalysisInput) -> (Analysis, Computer) {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut computer = Computer::default();
        let analysis = computer.compute(&input);
        let _ = tx.send((analysis, computer));
    });
    rx.recv_timeout(Duration::from_secs(600))
        .expect("the analysis ends (it hung for ten minutes)")
}

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
    let (analysis, _) =
        analyse_or_fail_on_hang(AnalysisInput::from_workspace(&loaded.workspace, 0));
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
    let (analysis, computer) =
        analyse_or_fail_on_hang(AnalysisInput::from_workspace(&ws, ws.test_input.len() / 2));
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

#[cfg(unix)]
#[test]
fn a_fifo_as_the_workspace_starts_from_defaults_with_a_notice_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("workspace.json");
    if !std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .is_ok_and(|s| s.success())
    {
        return;
    }
    // Opening a FIFO with no writer would block for ever: the type is checked first.
    assert_eq!(workspace::saved_window_size(&fifo), None);
    let loaded = workspace::load(&fifo);
    let notice = loaded.notice.unwrap();
    assert!(
        notice.contains("FIFO (named pipe), not a regular file"),
        "{notice}"
    );
    assert!(notice.contains(&fifo.display().to_string()), "{notice}");
}
