//! The llama.cpp template grammar source in the real app, on the real test model: picked in the
//! Tools pane with a corpus template file, what llama-server would build shown in the Grammar
//! pane (format, lazy or not, triggers, prompt and its tokens), a run under `tool_choice`
//! required with llama.cpp's parse of the call in the Validator pane, and a run under `auto`
//! whose trigger is forced: dormant tokens, the trigger marker in the Generation pane and in
//! the replayed transcript. Fails under CI=true without the model.

use std::path::PathBuf;

use egui_kittest::Harness;
use egui_kittest::kittest::Queryable;
use toolrail_app::dialogs::FileRequest;
use toolrail_app::panes::transcript::{export_to, open_from};
use toolrail_app::{AppOptions, ToolrailApp};
use toolrail_llm::record::LazyNote;
use toolrail_workbench::run::{LoadState, RunPhase, StartMode};
use toolrail_workbench::workspace::{ServerSwitch, ToolChoice};

use crate::common::app::wait_until;

const HERMES: &str = "NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use.jinja";

/// `../shared/corpus/llama-cpp-chat/templates/<name>`; missing: a failure under `CI=true`,
/// otherwise None (a skip).
fn template_path(name: &str) -> Option<PathBuf> {
    toolrail_testkit::corpus(&format!("llama-cpp-chat/templates/{name}"))
}

/// The template view of the latest analysis, once it names `tool_choice`.
fn analysed(app: &ToolrailApp, tool_choice: ToolChoice) -> bool {
    app.shared
        .analysis
        .template
        .as_ref()
        .and_then(|v| v.built())
        .is_some_and(|r| r.inputs.tool_choice == tool_choice)
}

fn pick(harness: &mut Harness<'_, ToolrailApp>, combo: &str, choice: &str) {
    harness.get_by_label(combo).click();
    harness.run_steps(2);
    harness.get_all_by_label(choice).last().unwrap().click();
    harness.run_steps(2);
}

fn finished(app: &ToolrailApp) -> bool {
    app.shared
        .run
        .controller
        .latest()
        .is_some_and(|r| r.phase == RunPhase::Finished)
}

#[test]
fn a_template_file_as_the_grammar_source_shows_its_triggers_runs_and_parses_the_call() {
    let (Some(_), Some(hermes)) = (crate::common::model(), template_path(HERMES)) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let options = AppOptions {
        workspace_path: dir.path().join("workspace.json"),
        autosave: false,
        screenshot: None,
        settle: true,
        demo_run: false,
    };
    let mut harness = Harness::builder()
        .with_size([1440.0, 1400.0])
        .with_theme(egui::Theme::Dark)
        .build_eframe(move |cc| ToolrailApp::new(&cc.egui_ctx, options));
    harness.step();
    let settings = &mut harness.state_mut().shared.run.settings;
    settings.threads = Some(1);
    settings.sampling.max_tokens = 60;

    // Before a model is loaded, the template source says what it needs.
    pick(&mut harness, "Grammar from", "llama.cpp template");
    wait_until(&mut harness, "the template analysis", |app| {
        app.shared.analysis.template.is_some()
    });
    harness.get_by_label_contains("no model loaded");

    // Start run with no model loaded and tool_choice required: the model loads, the template is
    // analysed with its vocabulary, then the run starts under the template's grammar.
    harness
        .state_mut()
        .shared
        .file_chosen(FileRequest::OpenTemplate, hermes.clone());
    wait_until(&mut harness, "the template file to be read", |app| {
        let template = &app.shared.workspace.template;
        template.file.as_ref() == Some(&hermes) && !template.text.is_empty()
    });
    pick(&mut harness, "tool_choice", "required");
    harness.get_by_label("Start run").click();
    wait_until(&mut harness, "the model to load", |app| {
        matches!(
            app.shared.run.controller.load_state(),
            LoadState::Ready { .. } | LoadState::Failed { .. }
        )
    });
    wait_until(&mut harness, "the required analysis", |app| {
        analysed(app, ToolChoice::Required)
    });
    harness.get_by_label_contains("grammar not lazy: constrains from the first token");
    wait_until(&mut harness, "the run to end", finished);
    assert_eq!(harness.state().shared.run.controller.runs().len(), 1);
    harness.get_by_label("Validator").click();
    harness.run_steps(2);
    let run = harness
        .state()
        .shared
        .run
        .controller
        .latest()
        .unwrap()
        .clone();
    let parse = run.outcome.as_ref().unwrap().template.clone().unwrap();
    eprintln!("{:?}", run.finish.as_ref().map(|f| &f.output));
    let parsed = parse.parsed.as_ref().expect("llama.cpp parses the output");
    assert_eq!(parsed.tool_calls.len(), 1, "{parsed:?}");
    harness.get_by_label("llama.cpp's parse (common_chat_parse)");
    harness.get_by_label("Tool calls llama.cpp parsed: 1");
    harness
        .get_all_by_label_contains("0: get_weather(")
        .next()
        .expect("the parsed call");

    // tool_choice auto: the grammar sleeps; forcing the trigger word wakes it at a marker.
    pick(&mut harness, "tool_choice", "auto");
    wait_until(&mut harness, "the auto analysis", |app| {
        analysed(app, ToolChoice::Auto)
    });
    // The Grammar pane: the source, lazy, its trigger word, the prompt with its tokens.
    harness.get_by_label_contains(&format!("llama.cpp template: {}", hermes.display()));
    harness.get_by_label_contains("grammar lazy: dormant until a trigger fires");
    harness
        .get_all_by_label_contains("word \"<tool_call>\\n\"")
        .next()
        .expect("the trigger row");
    harness.get_by_label_contains(" tokens)");
    harness.get_by_label("Copy into hand-edited GBNF");
    let grammar = crate::common::app::grammar_view(&harness);
    assert!(grammar.contains("tool-call"), "{grammar}");
    let model = harness
        .state()
        .shared
        .run
        .controller
        .model()
        .unwrap()
        .clone();
    let trigger = model.tokenize("Sure! <tool_call>\n", false, true);
    let analysis = std::sync::Arc::clone(&harness.state().shared.analysis);
    let id = harness
        .state_mut()
        .shared
        .run
        .start(&analysis, StartMode::Paused)
        .unwrap();
    let paused = move |app: &ToolrailApp| {
        app.shared
            .run
            .controller
            .run(id)
            .is_some_and(|r| matches!(r.phase, RunPhase::Paused { .. }))
    };
    for token in trigger {
        wait_until(&mut harness, "a pause", paused);
        harness
            .state_mut()
            .shared
            .run
            .controller
            .force(token)
            .unwrap();
    }
    wait_until(&mut harness, "a pause", paused);
    harness.state_mut().shared.run.controller.resume().unwrap();
    wait_until(&mut harness, "the run to end", finished);
    harness.run_steps(2);
    harness
        .get_all_by_label_contains("» trigger <tool_call>")
        .next()
        .expect("the trigger marker in the Generation pane");
    let run = harness
        .state()
        .shared
        .run
        .controller
        .run(id)
        .unwrap()
        .clone();
    let fired_at = run
        .tokens
        .iter()
        .position(|t| matches!(t.lazy, Some(LazyNote::Fired { .. })))
        .expect("the trigger fired");
    assert!(
        run.tokens[..fired_at]
            .iter()
            .all(|t| matches!(t.lazy, Some(LazyNote::Dormant { .. })))
    );
    harness.get_by_label_contains(&format!(
        "lazy grammar: {fired_at} token(s) free while the grammar slept; trigger fired"
    ));
    harness.get_by_label("llama.cpp's parse and toolrail's schema check agree");

    // Exported and reopened: the transcript replays the same marker and timeline.
    let json = dir.path().join("template-run.json");
    harness.state_mut().shared.run.shown = Some(id);
    export_to(&mut harness.state_mut().shared, &json).expect("exported");
    open_from(&mut harness.state_mut().shared, &json);
    harness.get_by_label("Transcript").click();
    harness.run_steps(4);
    let replay = harness.state().shared.run.controller.replay().unwrap();
    assert!(replay.transcript.template.is_some());
    harness
        .state_mut()
        .shared
        .run
        .controller
        .replay_mut()
        .unwrap()
        .seek(usize::MAX);
    harness.run_steps(2);
    assert!(
        harness
            .get_all_by_label_contains("» trigger <tool_call>")
            .count()
            >= 2,
        "the marker in the Generation and Transcript panes"
    );
}

/// A pane replaying the recorded template run (Hermes 2 Pro, the trigger forced, then greedy)
/// at step 12, past the trigger marker (deterministic: no live run).
fn template_pane_snapshot(kind: toolrail_app::PaneKind, name: &str) {
    let dir = tempfile::tempdir().unwrap();
    let ctx = egui::Context::default();
    let mut app = ToolrailApp::new(&ctx, crate::common::app::options(dir.path()));
    open_from(
        &mut app.shared,
        std::path::Path::new("tests/fixtures/template_run.json"),
    );
    let replay = app.shared.run.controller.replay_mut().unwrap();
    assert!(replay.transcript.template.is_some());
    replay.seek(12);
    crate::common::app::snapshot_pane(app, kind, name, [720.0, 760.0], egui::Theme::Dark);
}

#[test]
fn snapshot_generation_pane_replaying_a_template_run() {
    template_pane_snapshot(
        toolrail_app::PaneKind::Generation,
        "template_generation_pane",
    );
}

#[test]
fn snapshot_validator_pane_replaying_a_template_run() {
    template_pane_snapshot(toolrail_app::PaneKind::Validator, "template_validator_pane");
}

#[test]
fn the_thinking_budget_and_parallel_calls_are_set_in_the_template_row() {
    let dir = tempfile::tempdir().unwrap();
    let mut harness = crate::common::app::app(dir.path());
    pick(&mut harness, "Grammar from", "llama.cpp template");
    assert_eq!(harness.state().shared.workspace.template.budget, None);
    // With no model loaded the template cannot be built: the Test input pane says where to look.
    harness.run_steps(4);
    harness.get_by_label_contains("No grammar: the template could not be built");
    harness.get_by_label("thinking budget").click();
    harness.run_steps(2);
    let budget = harness.state().shared.workspace.template.budget.clone();
    assert_eq!(budget.map(|b| b.tokens), Some(256));
    // The message field shows once the box is ticked; what is typed there is the budget's.
    harness.get_by_label("message").click();
    harness.run_steps(1);
    harness.get_by_label("message").type_text("Time to answer.");
    harness.run_steps(2);
    let budget = harness.state().shared.workspace.template.budget.clone();
    assert_eq!(budget.unwrap().message, "Time to answer.");
    harness.get_by_label("thinking budget").click();
    harness.run_steps(2);
    assert_eq!(harness.state().shared.workspace.template.budget, None);
    assert!(harness.query_by_label("message").is_none());
    // Parallel calls are left to the server unless set: off is sent as off.
    assert_eq!(
        harness.state().shared.workspace.template.parallel,
        ServerSwitch::ServerDefault
    );
    pick(&mut harness, "parallel calls", "off");
    assert_eq!(
        harness.state().shared.workspace.template.parallel,
        ServerSwitch::Off
    );
}

/// A BFCL tool list under the template source: the prompt shows it as a client sends it, and
/// the Grammar pane lists where toolrail's reading differs (the `"optional"` key dropped, the
/// missing top-level `"type"` added), one note each.
#[test]
fn the_grammar_pane_notes_where_the_tools_as_sent_differ_from_toolrails_reading() {
    let (Some(_), Some(hermes)) = (crate::common::model(), template_path(HERMES)) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let mut harness = crate::common::app::app_sized(dir.path(), [1440.0, 1400.0]);
    harness.state_mut().shared.workspace.schema.text = r#"[{"name": "get_weather",
        "description": "Weather.", "parameters": {"properties": {"city": {"type": "string"}},
        "required": ["city"], "optional": []}}]"#
        .to_owned();
    crate::common::app::load_model(&mut harness);
    pick(&mut harness, "Grammar from", "llama.cpp template");
    harness
        .state_mut()
        .shared
        .file_chosen(FileRequest::OpenTemplate, hermes);
    wait_until(&mut harness, "the template's build with the notes", |app| {
        app.shared.analysis.template.as_ref().is_some_and(|v| {
            v.built()
                .is_some_and(|r| r.prompt.contains("\"optional\": []"))
                && v.reading_differences.len() == 2
        })
    });
    harness.get_by_label(
        "note: tool `get_weather`, parameters/optional: the client sends [], toolrail's reading drops it",
    );
    harness.get_by_label(
        "note: tool `get_weather`, parameters/type: the client sends nothing, toolrail's reading adds \"object\"",
    );
}
