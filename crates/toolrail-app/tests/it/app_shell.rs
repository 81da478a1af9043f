//! The desktop app driven through egui_kittest: the real `ToolrailApp` (real analysis thread,
//! real grammar generation, lint and recognizer), a fixed window size and the dark theme, and a
//! workspace file in a temporary folder (never the user's own).

use std::path::Path;

use egui::{Key, Modifiers};
use egui_kittest::Harness;
use egui_kittest::kittest::Queryable;
use toolrail_app::dialogs::FileRequest;
use toolrail_app::{AppOptions, PaneKind, ToolrailApp};
use toolrail_tools::envelope::Format;
use toolrail_workbench::workspace::{self, Theme, Workspace};

use crate::common::app::{SIZE, app, grammar_view, options, pane_harness, settle, wait_until};

#[test]
fn picking_a_sample_shows_its_rules_in_the_grammar_pane() {
    let dir = tempfile::tempdir().unwrap();
    let mut harness = app(dir.path());
    assert!(grammar_view(&harness).contains("call-get-weather ::="));
    assert!(!grammar_view(&harness).contains("call-get-inputs"));

    harness.get_by_label("Sample").click();
    settle(&mut harness);
    harness.get_by_label("planner_get_inputs.json").click();
    settle(&mut harness);

    let grammar = grammar_view(&harness);
    for rule in [
        "call-get-inputs ::=",
        "call-send-messages ::=",
        "call-get-now ::=",
    ] {
        assert!(grammar.contains(rule), "{rule} missing from:\n{grammar}");
    }
    // The tool list follows the sample.
    harness.get_by_label("get_inputs");
    harness.get_by_label("send_messages");
}

#[test]
fn an_invalid_test_string_gets_a_verdict_naming_its_position() {
    let dir = tempfile::tempdir().unwrap();
    let mut harness = app(dir.path());
    let input = harness.get_by_label("Text to check");
    input.focus();
    harness.key_press_modifiers(Modifiers::COMMAND, Key::A);
    settle(&mut harness);
    let text = r#"{"name": "get_weather", "arguments": {"city": 42}}"#;
    harness.get_by_label("Text to check").type_text(text);
    settle(&mut harness);

    assert_eq!(harness.state().shared.workspace.test_input, text);
    let offset = text.find("42").unwrap();
    let expected = format!("rejected at 1:{} (byte {offset})", offset + 1);
    let verdict = harness.get_by_label_contains(&expected);
    let label = verdict.value().unwrap_or_default();
    assert!(label.contains("expected"), "{label}");
    assert!(label.contains("'\"'"), "a string is expected: {label}");
}

#[test]
fn a_hand_edited_grammar_shows_findings_and_a_click_selects_the_span() {
    let dir = tempfile::tempdir().unwrap();
    let mut harness = app(dir.path());
    harness.get_by_label("Hand-edited GBNF").click();
    settle(&mut harness);
    // Switching on starts from the generated grammar.
    assert!(grammar_view(&harness).contains("call-get-weather ::="));

    let editor = harness.get_by_label("Grammar text");
    editor.focus();
    harness.key_press_modifiers(Modifiers::COMMAND, Key::A);
    settle(&mut harness);
    let grammar = "root ::= \"a\"\nspare-rule ::= \"b\"\n";
    harness.get_by_label("Grammar text").type_text(grammar);
    settle(&mut harness);
    assert_eq!(harness.state().shared.workspace.grammar.text, grammar);

    let finding = harness.get_by_label_contains("spare-rule");
    let label = finding.value().unwrap_or_default();
    assert!(label.starts_with("warning"), "{label}");
    assert!(label.contains("2:1"), "{label}");
    finding.click();
    settle(&mut harness);

    let start = grammar.find("spare-rule").unwrap();
    let id = egui::Id::unique(toolrail_app::panes::grammar::GRAMMAR_VIEW_ID);
    let state = egui::TextEdit::load_state(&harness.ctx, id).expect("grammar view state");
    let range = state.cursor.char_range().expect("a selection");
    let [a, b] = range.sorted_cursors();
    assert_eq!((a.index.0, b.index.0), (start, start + "spare-rule".len()));
}

#[test]
fn the_workspace_round_trips_through_its_file() {
    let dir = tempfile::tempdir().unwrap();
    let mut harness = app(dir.path());
    harness.get_by_label("View").click();
    settle(&mut harness);
    harness.get_by_label("Light theme").click();
    settle(&mut harness);
    harness.get_by_label("Envelope").click();
    settle(&mut harness);
    harness.get_by_label("hermes").click();
    settle(&mut harness);
    // Ctrl+S saves at once (otherwise the save waits for the edits to settle).
    harness.key_press_modifiers(Modifiers::COMMAND, Key::S);
    let path = dir.path().join("workspace.json");
    wait_until(&mut harness, "the workspace to be saved", |_| {
        let saved = workspace::load(&path).workspace;
        saved.theme == Theme::Light && saved.schema.envelope == Format::Hermes
    });

    let saved = workspace::load(&path);
    assert!(saved.notice.is_none());
    assert_eq!(saved.workspace.theme, Theme::Light);
    assert_eq!(saved.workspace.schema.envelope, Format::Hermes);
    assert!(saved.workspace.layout.is_some());
    drop(harness);

    let mut again = app(dir.path());
    assert_eq!(again.state().shared.workspace, saved.workspace);
    assert!(grammar_view(&again).contains("<tool_call>"));
    settle(&mut again);
}

#[test]
fn a_corrupt_workspace_is_kept_aside_and_the_app_says_so() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("workspace.json"), "{ not json").unwrap();
    let harness = app(dir.path());
    harness.get_by_label_contains("could not be read");
    let mut loaded = harness.state().shared.workspace.clone();
    // The layout and the window size are the running window's.
    loaded.layout = None;
    loaded.window = None;
    assert_eq!(loaded, Workspace::default());
    let kept = std::fs::read_dir(dir.path())
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with("workspace.json.bad-")
        })
        .count();
    assert_eq!(kept, 1);
}

#[test]
fn every_widget_is_labelled_with_menus_open() {
    let dir = tempfile::tempdir().unwrap();
    let mut harness = app(dir.path());
    harness.check_accessibility();
    for menu in ["File", "Run", "View"] {
        harness.get_by_label(menu).click();
        settle(&mut harness);
        harness.check_accessibility();
        harness.key_press(Key::Escape);
        settle(&mut harness);
    }
    harness.get_by_label("Sample").click();
    settle(&mut harness);
    harness.check_accessibility();
}

fn pane_snapshot(kind: PaneKind, name: &str, theme: egui::Theme) {
    let dir = tempfile::tempdir().unwrap();
    let mut options = options(dir.path());
    options.autosave = false;
    let ctx = egui::Context::default();
    let mut app = ToolrailApp::new(&ctx, options);
    app.shared.workspace.theme = match theme {
        egui::Theme::Dark => Theme::Dark,
        egui::Theme::Light => Theme::Light,
    };
    crate::common::app::snapshot_pane(app, kind, name, [720.0, 520.0], theme);
}

#[test]
fn snapshot_tools_pane() {
    pane_snapshot(PaneKind::Tools, "tools_pane", egui::Theme::Dark);
}

#[test]
fn snapshot_grammar_pane() {
    pane_snapshot(PaneKind::Grammar, "grammar_pane", egui::Theme::Dark);
}

#[test]
fn snapshot_test_input_pane() {
    pane_snapshot(PaneKind::TestInput, "test_input_pane", egui::Theme::Dark);
}

#[test]
fn snapshot_grammar_pane_light() {
    pane_snapshot(PaneKind::Grammar, "grammar_pane_light", egui::Theme::Light);
}

#[test]
fn an_exported_grammar_reopens_as_the_hand_edited_grammar() {
    // The files come in as the file dialogs' answers do (the dialogs themselves are native).
    let dir = tempfile::tempdir().unwrap();
    let mut harness = app(dir.path());
    let generated = harness.state().shared.analysis.grammar_text.clone();
    let out = dir.path().join("weather.gbnf");
    harness
        .state_mut()
        .shared
        .file_chosen(FileRequest::ExportGrammar, out.clone());
    wait_until(&mut harness, "the grammar export", |_| {
        std::fs::read_to_string(&out).is_ok_and(|text| text == generated)
    });
    harness.get_by_label_contains("exported");

    // Change the schema so the generated grammar differs, then import the file back.
    harness.get_by_label("Envelope").click();
    settle(&mut harness);
    harness.get_by_label("pythonic").click();
    settle(&mut harness);
    assert_ne!(grammar_view(&harness), generated);
    harness
        .state_mut()
        .shared
        .file_chosen(FileRequest::ImportGrammar, out.clone());
    wait_until(&mut harness, "the grammar import", |app| {
        app.shared.workspace.grammar.hand_edited
    });
    settle(&mut harness);
    assert_eq!(grammar_view(&harness), generated);
    assert_eq!(harness.state().shared.analysis.grammar_text, generated);
}

#[test]
fn the_stacks_follow_the_cursor_and_are_highlighted_in_the_grammar() {
    let dir = tempfile::tempdir().unwrap();
    let mut harness = app(dir.path());
    // The default input is rejected at "kelvin": the stacks are those before the bad byte.
    let text = harness.state().shared.workspace.test_input.clone();
    let bad = text.find("kelvin").unwrap();
    harness.get_by_label_contains(&format!("stack(s) at 1:{} (byte {bad})", bad + 1));

    // Move the cursor to the start: the stacks are the grammar's initial ones.
    harness.get_by_label("Text to check").focus();
    harness.key_press_modifiers(Modifiers::COMMAND, Key::A);
    harness.key_press(Key::ArrowLeft);
    settle(&mut harness);
    assert_eq!(harness.state().shared.test_cursor, 0);
    harness.get_by_label_contains("stack(s) at 1:1 (byte 0)");

    let shared = &harness.state().shared;
    let report = shared.analysis.test.as_ref().unwrap();
    assert_eq!(report.stacks_at, 0);
    let grammar = &shared.analysis.grammar_text;
    let spans: Vec<_> = report
        .stacks
        .stacks
        .iter()
        .flat_map(|s| &s.frames)
        .map(|f| f.span.start as usize..f.span.end as usize)
        .collect();
    assert!(!spans.is_empty());
    assert_eq!(shared.grammar_focus.highlights, spans);
    assert_eq!(&*shared.grammar_focus.grammar_text, grammar.as_str());
    // The top of the stack is the opening brace of the call's literal "{".
    let top = spans.last().unwrap();
    assert_eq!(&grammar[top.clone()], "{");
    assert_eq!(&grammar[top.start - 1..top.end + 1], "\"{\"");
}

#[test]
fn snapshot_whole_app_light() {
    let dir = tempfile::tempdir().unwrap();
    let ws = Workspace {
        theme: Theme::Light,
        ..Workspace::default()
    };
    workspace::save(&dir.path().join("workspace.json"), &ws).unwrap();
    let mut options = options(dir.path());
    options.autosave = false;
    let mut harness = Harness::builder()
        .with_size(SIZE)
        .with_theme(egui::Theme::Light)
        .wgpu()
        .build_eframe(move |cc| ToolrailApp::new(&cc.egui_ctx, options));
    settle(&mut harness);
    harness.snapshot("whole_app_light");
}

/// The app as a user first opens it: the recorded demo run is offered.
fn demo_app(dir: &Path) -> Harness<'static, ToolrailApp> {
    let options = AppOptions {
        demo_run: true,
        ..options(dir)
    };
    let mut harness = Harness::builder()
        .with_size(SIZE)
        .with_theme(egui::Theme::Dark)
        .build_eframe(move |cc| ToolrailApp::new(&cc.egui_ctx, options));
    settle(&mut harness);
    harness
}

#[test]
fn a_fresh_workspace_replays_the_recorded_demo_run_until_it_is_closed() {
    let dir = tempfile::tempdir().unwrap();
    let mut harness = demo_app(dir.path());
    let replay = harness.state().shared.run.controller.replay().unwrap();
    assert!(replay.demo);
    assert!(replay.path.is_none());
    assert_eq!(
        replay.position(),
        toolrail_workbench::samples::DEMO_POSITION
    );
    // Labelled as a recorded run in the Generation pane and in the Transcript pane, whose tab is
    // in front (its Back button is drawn), with the selected token's stacks.
    assert_eq!(
        harness
            .get_all_by_label_contains("Recorded demo run")
            .count(),
        2
    );
    harness.get_by_label("Back");
    assert!(
        harness
            .get_all_by_label_contains("Stacks after this token (4)")
            .count()
            >= 1
    );

    harness.get_by_label("Close replay").click();
    settle(&mut harness);
    assert!(harness.state().shared.run.controller.replay().is_none());
    harness.state_mut().save();
    drop(harness);

    let again = demo_app(dir.path());
    assert!(again.state().shared.run.controller.replay().is_none());
    assert!(again.query_by_label_contains("Recorded demo run").is_none());
}

#[test]
fn a_remembered_transcript_reopens_whole_instead_of_the_demo_run() {
    let dir = tempfile::tempdir().unwrap();
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/weather_run.json");
    let ws = Workspace {
        run: toolrail_workbench::run::RunSettings {
            last_transcript: Some(fixture.clone()),
            ..Default::default()
        },
        ..Workspace::default()
    };
    workspace::save(&dir.path().join("workspace.json"), &ws).unwrap();
    let harness = demo_app(dir.path());
    let replay = harness.state().shared.run.controller.replay().unwrap();
    assert!(!replay.demo);
    assert_eq!(replay.path.as_deref(), Some(fixture.as_path()));
    assert!(replay.position() > 0);
    assert_eq!(replay.position(), replay.len());
    assert!(
        harness
            .query_by_label_contains("Recorded demo run")
            .is_none()
    );
    harness.get_by_label("Back");
}

#[test]
fn a_saved_schema_reopens_in_the_editor() {
    let dir = tempfile::tempdir().unwrap();
    let mut harness = app(dir.path());
    let original = harness.state().shared.workspace.schema.text.clone();
    let out = dir.path().join("tools.json");
    harness
        .state_mut()
        .shared
        .file_chosen(FileRequest::SaveSchema, out.clone());
    wait_until(&mut harness, "the schema to be saved", |_| {
        std::fs::read_to_string(&out).is_ok_and(|text| text == original)
    });
    harness.state_mut().shared.workspace.schema.text = "[]".into();
    settle(&mut harness);
    harness
        .state_mut()
        .shared
        .file_chosen(FileRequest::OpenSchema, out);
    wait_until(&mut harness, "the schema file to be read", |app| {
        app.shared.workspace.schema.text == original
    });
    // No dialog was opened by any of this.
    assert!(!harness.state().shared.dialogs.is_open());
}

/// Makes egui rebuild its font atlas, as it does when the atlas fills up or its text options
/// change (a theme switch changes them): the text options are changed and changed back, each
/// for a frame. Nothing our views key their layouts on changes.
fn rebuild_font_atlas(harness: &mut Harness<'_, ToolrailApp>) {
    for _ in 0..2 {
        harness
            .ctx
            .all_styles_mut(|s| s.visuals.text_options.font_hinting ^= true);
        settle(harness);
    }
}

/// Renders `kind` alone in the dark theme, switches to light and back (through the workspace's
/// theme, as View → Light theme does), and returns the images: dark, light, dark again, and
/// dark after the font atlas was rebuilt.
fn theme_round_trip(kind: PaneKind) -> [Vec<u8>; 4] {
    let dir = tempfile::tempdir().unwrap();
    let mut options = options(dir.path());
    options.autosave = false;
    let ctx = egui::Context::default();
    let app = ToolrailApp::new(&ctx, options);
    let mut harness = pane_harness(app, kind, [720.0, 520.0], egui::Theme::Dark);
    let shot = |harness: &mut Harness<'_, ToolrailApp>, theme: Theme| {
        harness.state_mut().shared.workspace.theme = theme;
        settle(harness);
        harness.render().expect("rendered").into_raw()
    };
    let dark = shot(&mut harness, Theme::Dark);
    let light = shot(&mut harness, Theme::Light);
    let dark_again = shot(&mut harness, Theme::Dark);
    rebuild_font_atlas(&mut harness);
    let rebuilt = shot(&mut harness, Theme::Dark);
    [dark, light, dark_again, rebuilt]
}

/// A pane started in the light theme (as a workspace saved light opens).
fn light_start(kind: PaneKind) -> Vec<u8> {
    let dir = tempfile::tempdir().unwrap();
    let mut options = options(dir.path());
    options.autosave = false;
    let ctx = egui::Context::default();
    let mut app = ToolrailApp::new(&ctx, options);
    app.shared.workspace.theme = Theme::Light;
    let mut harness = pane_harness(app, kind, [720.0, 520.0], egui::Theme::Light);
    settle(&mut harness);
    harness.render().expect("rendered").into_raw()
}

/// The two highlighted editors (Schema JSON, Grammar) keep laid-out text between frames; after
/// a theme switch and back they must draw the same pixels, and light after a switch the same
/// as light from the start (a layout kept across egui's font atlas rebuild drew garbled or
/// missing letters).
#[test]
fn highlighted_editors_are_pixel_stable_across_theme_switches() {
    for kind in [PaneKind::Tools, PaneKind::Grammar] {
        let [dark, light, dark_again, rebuilt] = theme_round_trip(kind);
        assert!(dark != light, "{kind:?}: the theme changed nothing");
        assert!(
            dark == dark_again,
            "{kind:?}: dark differs after switching to light and back"
        );
        assert!(
            dark == rebuilt,
            "{kind:?}: dark differs after egui rebuilt its font atlas"
        );
        let light_first = light_start(kind);
        assert!(
            light == light_first,
            "{kind:?}: light after a switch differs from light at start-up"
        );
    }
}
