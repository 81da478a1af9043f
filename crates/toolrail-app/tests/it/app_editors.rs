//! What a person expects from the editors, stacks, errors and menus: expected sets in the words
//! of the schema (literals and JSON pointer), a stack tree, search and go to definition in the
//! editors, a box to paste a model output, a valid example, recent files, workspace files, the
//! Help and Run menus, copying a token, and every pane in both themes at 1024×700.

use std::path::Path;

use egui::{Key, Modifiers};
use egui_kittest::kittest::{NodeT as _, Queryable};
use toolrail_app::dialogs::FileRequest;
use toolrail_app::panes::grammar::{GRAMMAR_VIEW_ID, definition_at};
use toolrail_app::{PaneKind, ToolrailApp};
use toolrail_workbench::workspace::{self, RecentKind, Theme, Workspace};

use crate::common::app::{app, options, pane_harness, settle, wait_until};

/// The default workspace checks `"unit": "kelvin"` against the weather tools: the verdict names
/// the enum's literals and where they belong, not the characters `'c', 'f'`.
#[test]
fn a_bad_enum_value_reads_as_its_literals_at_its_json_pointer() {
    let dir = tempfile::tempdir().unwrap();
    let harness = app(dir.path());
    let report = harness.state().shared.analysis.test.clone().unwrap();
    let unit = report
        .expected
        .iter()
        .find(|e| e.ends_with(" at /arguments/unit in get_weather"))
        .unwrap_or_else(|| panic!("{:?}", report.expected));
    let mut literals: Vec<&str> = unit
        .trim_end_matches(" at /arguments/unit in get_weather")
        .split(" | ")
        .collect();
    literals.sort_unstable();
    assert_eq!(literals, [r#""celsius""#, r#""fahrenheit""#]);
    harness.get_by_label_contains(&format!("expected {unit}"));
}

#[test]
fn stacks_show_as_a_tree_without_separator_buttons_and_a_click_selects_the_span() {
    let dir = tempfile::tempdir().unwrap();
    let mut harness = app(dir.path());
    harness
        .state_mut()
        .shared
        .workspace
        .test_input
        .replace_range(
            ..,
            r#"{"name": "get_weather", "arguments": {"city": "Paris", "unit": ""#,
        );
    settle(&mut harness);
    assert!(harness.query_by_label(">").is_none(), "no '>' separators");
    let stacks = harness.state().shared.analysis.test.clone().unwrap().stacks;
    assert!(stacks.stacks.len() >= 2, "{stacks:?}");
    let bottom = &stacks.stacks[0].frames[0];
    // The bottom frame all the stacks share is drawn once.
    let shared_by_all = stacks
        .stacks
        .iter()
        .all(|s| s.frames.first().map(|f| f.pos) == Some(bottom.pos));
    assert!(shared_by_all);
    let label = format!("{}: ", bottom.rule_name);
    let nodes: Vec<_> = harness.query_all_by_label_contains(&label).collect();
    assert_eq!(nodes.len(), 1, "the shared bottom frame is shown once");
    nodes[0].click();
    settle(&mut harness);
    let select = harness.state().shared.grammar_focus.select.clone();
    assert_eq!(
        select,
        Some(bottom.span.start as usize..bottom.span.end as usize)
    );
}

#[test]
fn ctrl_f_finds_in_the_grammar_and_f12_goes_to_a_definition() {
    let dir = tempfile::tempdir().unwrap();
    let mut harness = app(dir.path());
    harness.get_by_label("Grammar text").focus();
    settle(&mut harness);
    harness.key_press_modifiers(Modifiers::COMMAND, Key::F);
    settle(&mut harness);
    harness.get_by_label("Find").type_text("call-get-weather");
    settle(&mut harness);
    harness.get_by_label_contains("matches");
    harness.key_press(Key::Enter);
    settle(&mut harness);
    let id = egui::Id::unique(GRAMMAR_VIEW_ID);
    let ctx = harness.ctx.clone();
    let state = egui::TextEdit::load_state(&ctx, id).expect("the grammar view has a state");
    let range = state.cursor.char_range().expect("a match is selected");
    let text = harness.state().shared.analysis.grammar_text.clone();
    let selected: String = text
        .chars()
        .skip(range.secondary.index.0.min(range.primary.index.0))
        .take(range.primary.index.0.abs_diff(range.secondary.index.0))
        .collect();
    assert_eq!(selected, "call-get-weather");
    // The first match is a reference (in `call ::=`, or the definition itself): F12 on it
    // selects the name in the rule's definition.
    harness.key_press(Key::F12);
    settle(&mut harness);
    let analysis = harness.state().shared.analysis.clone();
    let definition = text
        .find("\ncall-get-weather ::=")
        .map(|i| i + 1..i + 1 + "call-get-weather".len())
        .unwrap();
    assert_eq!(
        harness.state().shared.grammar_focus.select,
        Some(definition.clone())
    );
    // Any use of the name goes to the same place; a non-name goes nowhere.
    let reference = text.find(" call-get-weather ").unwrap() + 3;
    assert_eq!(definition_at(&analysis, reference), Some(definition));
    assert_eq!(definition_at(&analysis, 0).map(|r| &text[r]), Some("root"));
    let in_literal = text.find("\\\"name\\\"").unwrap() + 3;
    assert_eq!(definition_at(&analysis, in_literal), None);
}

#[test]
fn the_schema_editor_finds_too() {
    let dir = tempfile::tempdir().unwrap();
    let mut harness = app(dir.path());
    harness.get_by_label("Schema JSON").focus();
    settle(&mut harness);
    harness.key_press_modifiers(Modifiers::COMMAND, Key::F);
    settle(&mut harness);
    harness.get_by_label("Find").type_text("fahrenheit");
    settle(&mut harness);
    harness.get_by_label("1 match");
}

#[test]
fn a_pasted_output_is_validated_and_the_grammar_says_where_it_stops() {
    let dir = tempfile::tempdir().unwrap();
    let mut harness = app(dir.path());
    harness.get_by_label("Validator").click();
    settle(&mut harness);
    harness.get_by_label("Model output to check").focus();
    settle(&mut harness);
    harness
        .get_by_label("Model output to check")
        .type_text(r#"{"name": "get_weather", "arguments": {"city": "Oslo", "unit": "k"}}"#);
    settle(&mut harness);
    let found = |text: &str| harness.query_all_by_label_contains(text).count();
    assert!(found("invalid (") >= 1);
    assert!(found("/unit [enum]") >= 1, "the validator's pointer");
    assert!(found("the grammar stops it at 1:") >= 1);
    assert!(found("at /arguments/unit in get_weather") >= 1);
}

#[test]
fn a_valid_example_is_accepted_by_the_grammar_and_the_validator() {
    let dir = tempfile::tempdir().unwrap();
    let mut harness = app(dir.path());
    for _ in 0..2 {
        harness.get_by_label("Valid example").click();
        settle(&mut harness);
        let input = harness.state().shared.workspace.test_input.clone();
        assert!(input.contains("get_weather"), "{input}");
        let report = harness.state().shared.analysis.test.clone().unwrap();
        assert!(
            report.verdict.is_accepted(),
            "{input}: {:?}",
            report.verdict
        );
    }
}

#[test]
fn help_lists_the_shortcuts_and_run_has_pause() {
    let dir = tempfile::tempdir().unwrap();
    let mut harness = app(dir.path());
    harness.get_by_label("Help").click();
    settle(&mut harness);
    harness.get_by_label("Keyboard shortcuts");
    harness.get_by_label_contains("Go to the definition of the rule at the cursor");
    harness.get_by_label_contains("Find in the focused editor");
    harness.get_by_label("Help").click();
    settle(&mut harness);
    let pauses = |h: &egui_kittest::Harness<'_, ToolrailApp>| {
        h.query_all_by_label("Pause")
            .map(|n| n.accesskit_node().is_disabled())
            .collect::<Vec<bool>>()
    };
    let before = pauses(&harness).len();
    harness.query_all_by_label("Run").next().unwrap().click();
    settle(&mut harness);
    let with_menu = pauses(&harness);
    assert_eq!(with_menu.len(), before + 1, "the Run menu has Pause");
    assert!(
        with_menu.iter().all(|&disabled| disabled),
        "nothing runs: Pause is greyed"
    );
}

#[test]
fn recent_files_reopen_and_the_workspace_can_be_saved_as_and_opened() {
    let dir = tempfile::tempdir().unwrap();
    let schema = r#"[{"name": "ping", "parameters": {"type": "object", "properties": {}}}]"#;
    let tools = dir.path().join("ping.json");
    std::fs::write(&tools, schema).unwrap();
    let mut harness = app(dir.path());
    harness
        .state_mut()
        .shared
        .file_chosen(FileRequest::OpenSchema, tools.clone());
    wait_until(&mut harness, "the schema file to be read", |app| {
        app.shared.workspace.schema.text == schema
    });
    assert_eq!(
        harness.state().shared.workspace.recent[0].kind,
        RecentKind::Schema
    );
    // Edit the text away, then reopen it from File > Open recent.
    harness.state_mut().shared.workspace.schema.text = "[]".to_owned();
    settle(&mut harness);
    harness.get_by_label("File").click();
    settle(&mut harness);
    harness.get_by_label("Open recent").click();
    settle(&mut harness);
    harness.get_by_label("ping.json  (tools)").click();
    wait_until(&mut harness, "the recent schema file to be read", |app| {
        app.shared.workspace.schema.text == schema
    });
    // Save as: the file is written and autosave goes there from now on.
    let other = dir.path().join("other-workspace.json");
    harness
        .state_mut()
        .shared
        .file_chosen(FileRequest::SaveWorkspaceAs, other.clone());
    wait_until(&mut harness, "the workspace to be saved", |_| {
        other.is_file()
    });
    let saved = workspace::load(&other);
    assert!(saved.notice.is_none());
    assert_eq!(saved.workspace.schema.text, schema);
    harness.key_press_modifiers(Modifiers::COMMAND, Key::S);
    let saved_to = format!("workspace saved to {}", other.display());
    wait_until(&mut harness, "the workspace to be saved again", |app| {
        app.shared
            .messages
            .iter()
            .any(|m| m.text.contains(&saved_to))
    });
    harness.get_by_label_contains(&saved_to);
    // Open: another file's contents replace the workspace.
    let third = dir.path().join("third.json");
    let ws = Workspace {
        test_input: "from the third workspace".to_owned(),
        ..Workspace::default()
    };
    workspace::save(&third, &ws).unwrap();
    harness
        .state_mut()
        .shared
        .file_chosen(FileRequest::OpenWorkspace, third.clone());
    wait_until(&mut harness, "the workspace file to be read", |app| {
        app.shared.workspace.test_input == "from the third workspace"
    });
    assert_eq!(
        harness.state().shared.workspace.test_input,
        "from the third workspace"
    );
    assert!(
        harness
            .state()
            .shared
            .workspace
            .recent
            .iter()
            .any(|r| r.path == third && r.kind == RecentKind::Workspace)
    );
}

/// The demo transcript's fixture, replayed in the Transcript pane (token chips to right-click).
/// Relative to the package (the tests' working directory), so that the path the pane shows, and
/// so its snapshots, do not depend on where the repository is checked out.
const FIXTURE: &str = "../../assets/demo_run.json";

#[test]
fn a_token_chip_copies_its_id_and_piece() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = egui::Context::default();
    let mut app = ToolrailApp::new(&ctx, options(dir.path()));
    toolrail_app::panes::transcript::open_from(&mut app.shared, Path::new(FIXTURE));
    let first = app
        .shared
        .run
        .controller
        .replay()
        .unwrap()
        .transcript
        .tokens[0]
        .clone();
    app.shared.run.controller.replay_mut().unwrap().seek(3);
    let mut harness = pane_harness(
        app,
        PaneKind::Transcript,
        [1024.0, 700.0],
        egui::Theme::Dark,
    );
    settle(&mut harness);
    let chip = toolrail_app::token_view::chip_text(&first.piece);
    harness
        .query_all_by_label(&chip)
        .next()
        .unwrap()
        .click_secondary();
    settle(&mut harness);
    harness
        .get_by_label(&format!("Copy token id ({})", first.id))
        .click();
    harness.step();
    let copied: Vec<String> = harness
        .output()
        .platform_output
        .commands
        .iter()
        .filter_map(|c| match c {
            egui::OutputCommand::CopyText(t) => Some(t.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(copied, vec![first.id.to_string()]);
}

/// Every pane alone at 1024×700 in both themes (the run panes replaying the demo transcript),
/// compared with `tests/snapshots/<pane>_<theme>_1024.png`.
#[test]
fn snapshot_every_pane_in_both_themes_at_1024x700() {
    let mut results = egui_kittest::SnapshotResults::new();
    for theme in [egui::Theme::Dark, egui::Theme::Light] {
        for kind in [
            PaneKind::Tools,
            PaneKind::Grammar,
            PaneKind::TestInput,
            PaneKind::Generation,
            PaneKind::Validator,
            PaneKind::Transcript,
        ] {
            let dir = tempfile::tempdir().unwrap();
            let mut options = options(dir.path());
            options.autosave = false;
            let ctx = egui::Context::default();
            let mut app = ToolrailApp::new(&ctx, options);
            app.shared.workspace.theme = match theme {
                egui::Theme::Dark => Theme::Dark,
                egui::Theme::Light => Theme::Light,
            };
            toolrail_app::panes::transcript::open_from(&mut app.shared, Path::new(FIXTURE));
            if let Some(replay) = app.shared.run.controller.replay_mut() {
                replay.seek(12);
            }
            let theme_name = match theme {
                egui::Theme::Dark => "dark",
                egui::Theme::Light => "light",
            };
            let pane = match kind {
                PaneKind::Tools => "tools",
                PaneKind::Grammar => "grammar",
                PaneKind::TestInput => "test_input",
                PaneKind::Generation => "generation",
                PaneKind::Validator => "validator",
                PaneKind::Transcript => "transcript",
            };
            let name = format!("{pane}_{theme_name}_1024");
            let mut harness = pane_harness(app, kind, [1024.0, 700.0], theme);
            settle(&mut harness);
            harness.snapshot(&name);
            results.extend_harness(&mut harness);
        }
    }
    results.unwrap();
}

/// Ctrl+Enter runs from anywhere, also with the keyboard in an editor.
#[test]
fn ctrl_enter_runs_with_an_editor_focused() {
    for editor in ["Grammar text", "Schema JSON", "Text to check"] {
        let dir = tempfile::tempdir().unwrap();
        let mut harness = app(dir.path());
        harness.get_by_label(editor).focus();
        settle(&mut harness);
        harness.key_press_modifiers(Modifiers::COMMAND, Key::Enter);
        harness.step();
        let state = &harness.state().shared.run;
        assert!(
            state.pending_start.is_some()
                || state.controller.is_busy()
                || !state.controller.runs().is_empty(),
            "Ctrl+Enter in {editor} did not start a run: {:?}",
            state.messages
        );
    }
}

/// Picking a sample replaces the whole document in one undoable step: Ctrl+Z in the editor
/// brings back the document as it was before the pick, Ctrl+Shift+Z brings the sample back,
/// and the workspace (what autosave writes) follows each.
#[test]
fn undo_and_redo_treat_a_sample_pick_as_one_step() {
    let dir = tempfile::tempdir().unwrap();
    let mut harness = app(dir.path());
    harness.get_by_label("Schema JSON").focus();
    settle(&mut harness);
    harness.key_press_modifiers(Modifiers::COMMAND, Key::A);
    harness
        .get_by_label("Schema JSON")
        .type_text("{ \"broken\": ");
    settle(&mut harness);
    let typed = harness.state().shared.workspace.schema.text.clone();
    assert_eq!(typed, "{ \"broken\": ");
    harness.get_by_label("Sample").click();
    settle(&mut harness);
    harness.get_by_label("calculator.json").click();
    settle(&mut harness);
    let sample = harness.state().shared.workspace.schema.text.clone();
    assert_eq!(
        sample,
        toolrail_workbench::samples::find("calculator.json")
            .unwrap()
            .text
    );
    harness.get_by_label("Schema JSON").focus();
    settle(&mut harness);
    harness.key_press_modifiers(Modifiers::COMMAND, Key::Z);
    settle(&mut harness);
    assert_eq!(harness.state().shared.workspace.schema.text, typed, "undo");
    harness.key_press_modifiers(Modifiers::COMMAND.plus(Modifiers::SHIFT), Key::Z);
    settle(&mut harness);
    assert_eq!(harness.state().shared.workspace.schema.text, sample, "redo");
}

/// A file that cannot be opened is not offered again by Open recent: a missing schema, a
/// transcript that is not one, a GGUF that does not load.
#[test]
fn open_recent_lists_only_files_that_opened() {
    let dir = tempfile::tempdir().unwrap();
    let mut harness = app(dir.path());
    let not_a_transcript = dir.path().join("notes.json");
    std::fs::write(&not_a_transcript, "{\"hello\": 1}").unwrap();
    let not_a_model = dir.path().join("empty.gguf");
    std::fs::write(&not_a_model, b"").unwrap();
    for (request, path) in [
        (FileRequest::OpenSchema, dir.path().join("gone.json")),
        (FileRequest::OpenTranscript, not_a_transcript),
        (FileRequest::OpenGguf, not_a_model),
    ] {
        let errors = |app: &ToolrailApp| app.shared.messages.len();
        let before = errors(harness.state());
        harness
            .state_mut()
            .shared
            .file_chosen(request, path.clone());
        wait_until(&mut harness, "the failure to be said", |app| {
            app.shared.messages.len() > before
                && app.shared.messages.iter().any(|m| {
                    m.text.contains(path.file_name().unwrap().to_str().unwrap())
                        || m.text.contains("did not load")
                })
        });
        settle(&mut harness);
        assert!(
            harness
                .state()
                .shared
                .workspace
                .recent
                .iter()
                .all(|r| r.path != path),
            "{request:?}: {:?}",
            harness.state().shared.workspace.recent
        );
    }
    // A file that opened is listed.
    let tools = dir.path().join("ping.json");
    std::fs::write(
        &tools,
        r#"[{"name": "ping", "parameters": {"type": "object"}}]"#,
    )
    .unwrap();
    harness
        .state_mut()
        .shared
        .file_chosen(FileRequest::OpenSchema, tools.clone());
    wait_until(&mut harness, "the schema file to be read", |app| {
        app.shared.workspace.schema.text.contains("ping")
    });
    let listed: Vec<_> = harness
        .state()
        .shared
        .workspace
        .recent
        .iter()
        .map(|r| r.path.clone())
        .collect();
    assert_eq!(listed, [tools]);
}

/// A text too large to lay out whole (2.8 MB pasted into the Schema editor, one line of it
/// 1 MB) is taken before the editor lays it out, and shown bounded: read-only rows, the long
/// line cut with the rest counted, "Edit here" refused above its limit. Clear empties the
/// field, and the cleared text comes back whole.
#[test]
fn a_large_text_is_shown_bounded_and_nothing_of_it_is_lost() {
    let dir = tempfile::tempdir().unwrap();
    let mut harness = app(dir.path());
    let mut text = String::from("{\"tools\": [\n");
    text.push_str(&"x".repeat(1 << 20));
    text.push('\n');
    for i in 0..120_000 {
        text.push_str(&format!("  \"line {i}\",\n"));
    }
    text.push_str("]}\n");
    assert!(text.len() > toolrail_app::large_text::FORCE_EDIT_LIMIT);
    // Pasted over the whole document (Ctrl+A, then the paste), as a person does.
    harness.get_by_label("Schema JSON").focus();
    settle(&mut harness);
    harness.key_press_modifiers(Modifiers::COMMAND, Key::A);
    settle(&mut harness);
    harness.event(egui::Event::Paste(text.clone()));
    settle(&mut harness);
    assert!(
        harness.state().shared.workspace.schema.text == text,
        "the paste replaced the selection"
    );
    harness.get_by_label_contains("Large text (2.8 MB");
    harness.get_by_label_contains("120004 lines");
    harness.get_by_label("… 1047576 more characters");
    // Ctrl+F in the bounded view finds a line out of view and scrolls to it.
    assert!(harness.query_by_label_contains("\"line 119999\"").is_none());
    // As a window delivers a click: the pointer moves there, the press and the release come
    // in frames of their own.
    let at = harness.get_by_label("{\"tools\": [").rect().center();
    harness.event(egui::Event::PointerMoved(at));
    harness.step();
    for pressed in [true, false] {
        harness.event(egui::Event::PointerButton {
            pos: at,
            button: egui::PointerButton::Primary,
            pressed,
            modifiers: Modifiers::NONE,
        });
        harness.step();
    }
    settle(&mut harness);
    harness.key_press_modifiers(Modifiers::COMMAND, Key::F);
    settle(&mut harness);
    harness.get_by_label("Find").type_text("line 119999\"");
    settle(&mut harness);
    harness.get_by_label("1 match");
    harness.key_press(Key::Enter);
    settle(&mut harness);
    harness.get_by_label_contains("\"line 119999\"");
    let edit = harness.get_by_label("Edit here");
    assert!(
        edit.accesskit_node().is_disabled(),
        "too large to edit here"
    );
    harness.get_by_label("Clear").click();
    settle(&mut harness);
    assert!(harness.state().shared.workspace.schema.text.is_empty());
    harness
        .get_by_label_contains("Bring back the cleared text (2.8 MB)")
        .click();
    settle(&mut harness);
    assert!(
        harness.state().shared.workspace.schema.text == text,
        "the same text, whole"
    );
    harness.get_by_label_contains("Large text (2.8 MB");
}
