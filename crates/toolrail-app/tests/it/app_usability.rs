//! The app as a person meets it, driven through egui_kittest on the real app: the in-app path
//! field where no file dialog can open, status messages that say what happened and then clear,
//! the grammar pane when the schema breaks, lint hints in view, a tool set in plain-schema
//! mode, a long GGUF path in a small window, the window size kept in the workspace, and a
//! transcript with a huge token piece.

use std::path::Path;
use std::time::{Duration, Instant};

use egui::{Key, Modifiers};
use egui_kittest::kittest::Queryable;
use toolrail_app::dialogs::FileDialogs;
use toolrail_workbench::workspace::{self, SchemaMode, WindowSize, Workspace};

use crate::common::app::{app, app_sized, grammar_view, settle, wait_until};

#[test]
fn without_a_file_dialog_a_path_field_opens_the_file_and_completes_names() {
    let dir = tempfile::tempdir().unwrap();
    let schema = r#"[{"name": "ping", "parameters": {"type": "object", "properties": {}}}]"#;
    std::fs::write(dir.path().join("ping_tools.json"), schema).unwrap();
    let mut harness = app(dir.path());
    harness.state_mut().shared.dialogs = FileDialogs::in_app("no dialog here (test)");
    harness.get_by_label("Open…").click();
    settle(&mut harness);
    // It says why, and lists the folder's entries that complete the typed path.
    harness.get_by_label_contains("no dialog here (test)");
    // The field has the keyboard focus as it opens, and the window stays where it opened.
    assert!(harness.get_by_label("File path").is_focused());
    let opened_at = harness.get_by_label("File path").rect();
    settle(&mut harness);
    assert_eq!(harness.get_by_label("File path").rect(), opened_at);
    harness.key_press_modifiers(Modifiers::COMMAND, Key::A);
    settle(&mut harness);
    let typed = format!("{}/ping", dir.path().display());
    harness.get_by_label("File path").type_text(&typed);
    settle(&mut harness);
    harness.get_by_label("ping_tools.json").click();
    settle(&mut harness);
    let completed = dir.path().join("ping_tools.json").display().to_string();
    assert_eq!(
        harness
            .state()
            .shared
            .dialogs
            .prompt
            .as_ref()
            .unwrap()
            .typed,
        completed
    );
    // A missing file is refused in place, naming it.
    harness
        .state_mut()
        .shared
        .dialogs
        .prompt
        .as_mut()
        .unwrap()
        .typed = format!("{completed}.missing");
    settle(&mut harness);
    harness.get_by_label("Open").click();
    settle(&mut harness);
    harness.get_by_label_contains("does not exist");
    harness
        .state_mut()
        .shared
        .dialogs
        .prompt
        .as_mut()
        .unwrap()
        .typed = completed.clone();
    settle(&mut harness);
    harness.get_by_label("Open").click();
    wait_until(&mut harness, "the schema file to be read", |app| {
        app.shared.workspace.schema.text == schema
    });
    settle(&mut harness);
    assert!(harness.state().shared.dialogs.prompt.is_none());
    assert!(grammar_view(&harness).contains("call-ping ::="));
}

#[test]
fn ctrl_s_says_where_it_saved_and_messages_clear_themselves() {
    let dir = tempfile::tempdir().unwrap();
    let mut harness = app(dir.path());
    harness.key_press_modifiers(Modifiers::COMMAND, Key::S);
    let saved = format!(
        "workspace saved to {}",
        dir.path().join("workspace.json").display()
    );
    wait_until(&mut harness, "the workspace to be saved", |app| {
        app.shared.messages.iter().any(|m| m.text == saved)
    });
    harness.get_by_label(&saved);
    // Once its time is up the message leaves the status bar (it stays in the history).
    let message = harness.state_mut().shared.messages.last_mut().unwrap();
    message.at = Instant::now() - toolrail_app::INFO_SHOWN - Duration::from_millis(1);
    settle(&mut harness);
    assert!(harness.query_by_label(&saved).is_none());
    harness.get_by_label("messages");
}

#[test]
fn a_schema_error_keeps_the_last_grammar_greyed_under_the_error() {
    let dir = tempfile::tempdir().unwrap();
    let mut harness = app(dir.path());
    let good = grammar_view(&harness);
    assert!(good.contains("call-get-weather ::="));
    harness.state_mut().shared.workspace.schema.text = "{ \"tools\": [ ".into();
    settle(&mut harness);
    harness.get_by_label_contains("No grammar: the schema has an error");
    harness.get_by_label_contains("The last grammar generated");
    assert_eq!(grammar_view(&harness), good);
    assert!(harness.state().shared.analysis.grammar.is_none());
}

#[test]
fn lint_hints_show_under_their_findings() {
    let dir = tempfile::tempdir().unwrap();
    let mut harness = app(dir.path());
    harness.state_mut().shared.workspace.grammar.hand_edited = true;
    harness.state_mut().shared.workspace.grammar.text =
        "root ::= \"a\"\nspare-rule ::= \"b\"\n".into();
    settle(&mut harness);
    let hinted = harness
        .state()
        .shared
        .analysis
        .findings
        .iter()
        .find_map(|f| f.hint.clone())
        .expect("a finding with a hint");
    harness.get_by_label(&format!("hint: {hinted}"));
}

#[test]
fn a_tool_set_in_plain_schema_mode_is_flagged_with_a_way_back() {
    let dir = tempfile::tempdir().unwrap();
    let mut harness = app(dir.path());
    harness.get_by_label("Plain schema").click();
    settle(&mut harness);
    harness.get_by_label_contains("this document is a tool set (1 tool), not a JSON Schema");
    harness.get_by_label("Switch to tool-set mode").click();
    settle(&mut harness);
    assert_eq!(
        harness.state().shared.workspace.schema.mode,
        SchemaMode::ToolSet
    );
    assert!(
        harness
            .query_by_label_contains("this document is a tool set")
            .is_none()
    );
}

#[test]
fn a_long_gguf_path_leaves_the_model_buttons_in_view_at_1024_by_700() {
    let dir = tempfile::tempdir().unwrap();
    let long = format!(
        "/models/{}/a-very-long-model-file-name-that-goes-on-Q4_K_M.gguf",
        "deeply-nested-folder/".repeat(8)
    );
    let ws = Workspace {
        run: toolrail_workbench::run::RunSettings {
            gguf: Some(long.clone().into()),
            ..Default::default()
        },
        ..Workspace::default()
    };
    workspace::save(&dir.path().join("workspace.json"), &ws).unwrap();
    let harness = app_sized(dir.path(), [1024.0, 700.0]);
    let window = egui::Rect::from_min_size(egui::Pos2::ZERO, egui::vec2(1024.0, 700.0));
    let generation = harness.get_by_label("Generation").rect();
    for button in ["Load model", "Open GGUF…"] {
        let rect = harness.get_by_label(button).rect();
        assert!(window.contains_rect(rect), "{button} at {rect:?}");
        // Inside the Generation pane's column, not pushed past its right edge.
        assert!(
            rect.left() >= generation.left() - 1.0,
            "{button} at {rect:?}, pane tab at {generation:?}"
        );
    }
    // The schema editor starts in view: several of its lines above the Grammar pane's tab.
    let editor = harness.get_by_label("Schema JSON").rect();
    let grammar_tab = harness.get_by_label("Grammar").rect();
    assert!(
        editor.top() + 80.0 < grammar_tab.top(),
        "Schema JSON at {editor:?}, Grammar tab at {grammar_tab:?}"
    );
}

#[test]
fn the_window_size_is_kept_in_the_workspace() {
    let dir = tempfile::tempdir().unwrap();
    let mut harness = app_sized(dir.path(), [1100.0, 760.0]);
    harness.key_press_modifiers(Modifiers::COMMAND, Key::S);
    let path = dir.path().join("workspace.json");
    wait_until(&mut harness, "the workspace to be saved", |_| {
        workspace::load(&path).workspace.window.is_some()
    });
    let saved = workspace::load(&path).workspace;
    assert_eq!(
        saved.window,
        Some(WindowSize {
            width: 1100.0,
            height: 760.0
        })
    );
    assert_eq!(
        workspace::saved_window_size(&dir.path().join("workspace.json")),
        Some([1100.0, 760.0])
    );
}

/// The transcript reader refuses pieces over 4,096 bytes (a 1 MB piece is an error naming it,
/// tested in the workbench); a long piece within the limit is drawn cut, never whole.
#[test]
fn a_transcript_with_a_long_piece_renders_cut_with_its_size() {
    let dir = tempfile::tempdir().unwrap();
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/weather_run.json");
    let mut transcript: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(fixture).unwrap()).unwrap();
    let tokens = transcript["tokens"].as_array_mut().unwrap();
    let last = tokens.last_mut().unwrap();
    last["piece"] = serde_json::Value::String("z".repeat(4_000));
    let big = dir.path().join("big.json");
    std::fs::write(&big, serde_json::to_string(&transcript).unwrap()).unwrap();
    let ws = Workspace {
        run: toolrail_workbench::run::RunSettings {
            last_transcript: Some(big),
            ..Default::default()
        },
        ..Workspace::default()
    };
    workspace::save(&dir.path().join("workspace.json"), &ws).unwrap();
    let mut harness = app(dir.path());
    let replay = harness.state().shared.run.controller.replay();
    assert!(
        replay.is_some_and(|r| r.position() == r.len()),
        "{:?}",
        harness.state().shared.messages
    );
    harness.get_by_label("Transcript").click();
    settle(&mut harness);
    // Drawn (with the real renderer) without a panic; the piece is cut, its size said.
    harness.render().expect("rendered");
    // The chip and the selected token's header show the piece cut; the whole piece is a click
    // away.
    assert!(harness.get_all_by_label("Copy piece").count() >= 1);
    assert!(
        harness
            .get_all_by_label_contains(&format!("{}…", "z".repeat(40)))
            .count()
            >= 1
    );
}
