//! The Generation, Validator and Transcript panes driven through egui_kittest on the real app:
//! a generation run on the real test model (load, run, select a token → its candidates and
//! stacks), export → the files exist and reopen → replay; and snapshots of the three panes from a
//! replayed transcript (deterministic: no live run). Model tests fail under CI=true without the
//! model.

use std::path::Path;

use egui_kittest::Harness;
use egui_kittest::kittest::Queryable;
use toolrail_app::panes::transcript::{export_to, open_from};
use toolrail_app::{AppOptions, PaneKind, ToolrailApp};
use toolrail_workbench::run::{LoadState, RunPhase};

use crate::common::app::{compare_runs, load_model, wait_until};

const FIXTURE: &str = "tests/fixtures/weather_run.json";

fn options(dir: &Path) -> AppOptions {
    AppOptions {
        workspace_path: dir.join("workspace.json"),
        autosave: false,
        screenshot: None,
        settle: true,
        demo_run: false,
    }
}

/// The whole app in a 1440×1000 window, dark, on a workspace in `dir`, after its first frame.
fn window(dir: &Path) -> Harness<'static, ToolrailApp> {
    let options = options(dir);
    let mut harness = Harness::builder()
        .with_size([1440.0, 1000.0])
        .with_theme(egui::Theme::Dark)
        .build_eframe(move |cc| ToolrailApp::new(&cc.egui_ctx, options));
    harness.step();
    harness
}

/// The real app on a workspace in a fresh folder (kept alive with it), set up for a short live
/// run on one decoding thread; `None` when the test model is absent (a failure under CI=true).
fn live_app(max_tokens: u32) -> Option<(tempfile::TempDir, Harness<'static, ToolrailApp>)> {
    crate::common::model()?;
    let dir = tempfile::tempdir().unwrap();
    let mut harness = window(dir.path());
    let settings = &mut harness.state_mut().shared.run.settings;
    settings.threads = Some(1);
    settings.sampling.max_tokens = max_tokens;
    Some((dir, harness))
}

#[test]
fn a_run_on_the_test_model_streams_tokens_that_show_candidates_and_stacks() {
    let Some((dir, mut harness)) = live_app(24) else {
        return;
    };
    load_model(&mut harness);
    // the model line says where it computes (this CPU build: the CPU), and the GPU layers for
    // the next load sit under it
    harness.get_by_label_contains("MB, on CPU");
    assert!(harness.query_by_label("GPU layers").is_some());
    harness.get_by_label("Start run").click();
    wait_until(&mut harness, "the run to end", |app| {
        app.shared
            .run
            .controller
            .latest()
            .is_some_and(|r| r.phase == RunPhase::Finished)
    });
    let run = harness
        .state()
        .shared
        .run
        .controller
        .latest()
        .unwrap()
        .clone();
    assert!(!run.tokens.is_empty(), "{:?}", run.finish);
    // The ended run says what it says about itself under its tokens, in `explain`'s words (the
    // budget guard finished the call on the last token the limit allowed).
    assert_eq!(
        run.explanation[0].to_string(),
        "stopped: the token limit (24) was reached",
        "{:?}",
        run.explanation
    );
    harness.step();
    for line in &run.explanation {
        assert!(
            harness.get_all_by_label(&line.to_string()).next().is_some(),
            "{line}"
        );
    }
    // Tokens appear as chips: click one whose piece shows as itself.
    let (index, token) = run
        .tokens
        .iter()
        .enumerate()
        .find(|(_, t)| t.piece.len() > 1 && t.piece.chars().all(|c| c.is_ascii_alphanumeric()))
        .expect("a plain word token");
    harness
        .get_all_by_label(&token.piece)
        .next()
        .unwrap()
        .click();
    harness.step();
    harness.step();
    harness.get_by_label_contains(&format!("Token {index}: "));
    harness.get_by_label("Before the mask");
    harness.get_by_label("After the mask");
    harness.get_by_label_contains("Stacks after this token");
    let stacks = token.stacks.as_ref().unwrap();
    let top = stacks.stacks[0].frames.last().unwrap();
    harness
        .get_all_by_label_contains(&top.rule_name)
        .next()
        .unwrap();
    harness.get_by_label("Mask time per token (ms)");
    harness.check_accessibility();

    // Force another allowed candidate: a branch replays the earlier tokens, then takes it.
    let alternative = token
        .after
        .iter()
        .find(|c| c.id != token.id)
        .expect("another allowed candidate")
        .id;
    let forces: Vec<_> = harness.get_all_by_label("Force").collect();
    assert!(!forces.is_empty());
    // The details may sit below the pane's scrolled view: click through accesskit.
    forces[0].click_accesskit();
    wait_until(&mut harness, "the branch to pause", |app| {
        app.shared.run.controller.runs().len() == 2
            && app
                .shared
                .run
                .controller
                .latest()
                .is_some_and(|r| !r.is_replaying() && matches!(r.phase, RunPhase::Paused { .. }))
    });
    let branch = harness
        .state()
        .shared
        .run
        .controller
        .latest()
        .unwrap()
        .clone();
    assert_eq!(harness.state().shared.run.shown, Some(branch.id));
    assert!(branch.refusals.is_empty(), "{:?}", branch.refusals);
    assert_eq!(branch.tokens.len(), index + 1);
    assert_eq!(branch.tokens[index].id, alternative);
    assert!(branch.tokens.iter().all(|t| t.forced));
    harness.get_by_label("Cancel").click();
    wait_until(&mut harness, "the branch to end", |app| {
        app.shared
            .run
            .controller
            .latest()
            .is_some_and(|r| r.phase == RunPhase::Finished)
    });
    // The run history lists the run and its branch and compares them: the same tokens up to
    // the forced one, then they differ there.
    harness.get_by_label("Transcript").click();
    harness.run_steps(2);
    harness.get_by_label_contains("Run history").click();
    harness.run_steps(2);
    harness.get_by_label_contains(&format!("Run {}: branch of Run {}", branch.id, run.id));
    compare_runs(&mut harness, [run.id, branch.id]);
    harness.get_by_label_contains(&format!(
        "the same first {index} tokens, then they differ at token {index}"
    ));
    // Export the first run: shown in the Transcript pane, it is what Export writes.
    harness
        .state_mut()
        .shared
        .run
        .controller
        .replay_run(run.id)
        .unwrap();

    // Export: both files exist and reopen for replay.
    let json = dir.path().join("run.json");
    let markdown = export_to(&mut harness.state_mut().shared, &json).expect("exported");
    assert!(json.is_file() && markdown.is_file());
    open_from(&mut harness.state_mut().shared, &json);
    harness.step();
    // The Transcript pane shares a tab group with the Validator pane.
    harness.get_by_label("Transcript").click();
    harness.run_steps(4);
    let replay = harness.state().shared.run.controller.replay().unwrap();
    assert_eq!(replay.transcript.tokens, run.tokens);
    assert_eq!(replay.position(), 0);
    harness.get_by_label("Forward").click();
    harness.step();
    harness.get_by_label("Forward").click();
    harness.step();
    let replay = harness.state().shared.run.controller.replay().unwrap();
    assert_eq!(replay.position(), 2);
    assert_eq!(
        replay.text(),
        format!("{}{}", run.tokens[0].piece, run.tokens[1].piece)
    );
    assert_eq!(
        harness
            .state()
            .shared
            .run
            .settings
            .last_transcript
            .as_deref(),
        Some(json.as_path())
    );
}

fn pane_snapshot(kind: PaneKind, name: &str) {
    let dir = tempfile::tempdir().unwrap();
    let ctx = egui::Context::default();
    let mut app = ToolrailApp::new(&ctx, options(dir.path()));
    open_from(&mut app.shared, Path::new(FIXTURE));
    let replay = app.shared.run.controller.replay_mut().unwrap();
    replay.seek(12);
    crate::common::app::snapshot_pane(app, kind, name, [720.0, 760.0], egui::Theme::Dark);
}

#[test]
fn snapshot_generation_pane_replaying() {
    pane_snapshot(PaneKind::Generation, "generation_pane");
}

#[test]
fn snapshot_validator_pane_replaying() {
    pane_snapshot(PaneKind::Validator, "validator_pane");
}

#[test]
fn snapshot_transcript_pane_replaying() {
    pane_snapshot(PaneKind::Transcript, "transcript_pane");
}

#[test]
fn the_replay_moves_with_the_transcript_pane_buttons() {
    let dir = tempfile::tempdir().unwrap();
    let mut harness = window(dir.path());
    open_from(&mut harness.state_mut().shared, Path::new(FIXTURE));
    harness.step();
    harness.get_by_label("Transcript").click();
    harness.run_steps(4);
    let len = harness
        .state()
        .shared
        .run
        .controller
        .replay()
        .unwrap()
        .len();
    assert!(len > 3);
    for _ in 0..3 {
        harness.get_by_label("Forward").click();
        harness.step();
    }
    harness.get_by_label("Back").click();
    harness.step();
    let replay = harness.state().shared.run.controller.replay().unwrap();
    assert_eq!(replay.position(), 2);
    harness.get_by_label_contains("Token 1: ");
    harness.check_accessibility();
}

#[test]
fn start_run_with_no_model_loaded_loads_the_selected_model_then_runs() {
    let Some((_dir, mut harness)) = live_app(6) else {
        return;
    };
    assert!(harness.state().shared.run.controller.model().is_none());
    harness.get_by_label("Start run").click();
    wait_until(&mut harness, "the load and the run to end", |app| {
        let c = &app.shared.run.controller;
        matches!(c.load_state(), LoadState::Failed { .. })
            || c.latest().is_some_and(|r| r.phase == RunPhase::Finished)
    });
    let state = harness.state();
    let controller = &state.shared.run.controller;
    assert!(
        matches!(controller.load_state(), LoadState::Ready { .. }),
        "{:?}",
        controller.load_state()
    );
    assert!(state.shared.run.pending_start.is_none());
    let run = controller.latest().unwrap();
    assert!(!run.tokens.is_empty(), "the run generated no token");
}

/// F10 pressed four times (the last three in one frame, while the first step is still being
/// taken) takes four steps; while paused the Validator says so instead of "running…"; once the run
/// ends the Transcript pane shows it and Export names it.
#[test]
fn f10_presses_are_not_lost_and_the_panes_say_where_the_run_is() {
    let Some((_dir, mut harness)) = live_app(40) else {
        return;
    };
    harness.key_press(egui::Key::F10);
    wait_until(&mut harness, "the first step", |app| {
        let c = &app.shared.run.controller;
        matches!(c.load_state(), LoadState::Failed { .. })
            || c.latest()
                .is_some_and(|r| matches!(r.phase, RunPhase::Paused { .. }))
    });
    let id = harness.state().shared.run.controller.latest().unwrap().id;
    harness.get_by_label_contains("not validated yet: paused before token 1");
    // three presses in one frame, as a window that redraws slowly gets them
    for pressed in [true, false, true, false, true, false] {
        harness.input_mut().events.push(egui::Event::Key {
            key: egui::Key::F10,
            physical_key: None,
            pressed,
            repeat: false,
            modifiers: egui::Modifiers::NONE,
        });
    }
    harness.step();
    wait_until(&mut harness, "three more steps", |app| {
        app.shared
            .run
            .controller
            .run(id)
            .is_some_and(|r| r.tokens.len() >= 4 && matches!(r.phase, RunPhase::Paused { .. }))
            && app.shared.run.pending_steps == 0
    });
    assert_eq!(
        harness
            .state()
            .shared
            .run
            .controller
            .run(id)
            .unwrap()
            .tokens
            .len(),
        4
    );
    harness.get_by_label_contains("not validated yet: paused before token 4");
    harness.get_by_label("Cancel").click();
    wait_until(&mut harness, "the run to end", |app| {
        app.shared
            .run
            .controller
            .run(id)
            .is_some_and(|r| r.phase == RunPhase::Finished)
    });
    harness.get_by_label("Transcript").click();
    harness.run_steps(3);
    assert_eq!(
        harness.state().shared.run.controller.replay().unwrap().run,
        Some(id)
    );
    harness.get_by_label(&format!("Shown: Run {id} of this session"));
    harness.get_by_label(&format!("Export Run {id} (JSON + Markdown)…"));
}

/// A real `generate --engine llguidance` run on the weather sample (two steps where llama.cpp's
/// lenient UTF-8 lead bytes 0xF5–0xFF make toolrail's mask differ from llguidance's): the token
/// details say which engine allows which tokens.
#[test]
fn a_token_whose_masks_differ_shows_which_engine_allows_what() {
    let dir = tempfile::tempdir().unwrap();
    let mut harness = window(dir.path());
    open_from(
        &mut harness.state_mut().shared,
        Path::new("tests/fixtures/weather_llguidance_run.json"),
    );
    harness.step();
    harness
        .state_mut()
        .shared
        .run
        .controller
        .replay_mut()
        .unwrap()
        .seek(24);
    harness.run_steps(4);
    harness.get_by_label_contains("Token 23: ");
    harness.get_by_label_contains(
        "Masks differ: 0 token(s) only llguidance allows, 11 only toolrail allows",
    );
    harness.get_by_label_contains("bytes·f5 (id 483): only toolrail allows it");
    // a step where they agree has no such section
    harness
        .state_mut()
        .shared
        .run
        .controller
        .replay_mut()
        .unwrap()
        .seek(12);
    harness.run_steps(4);
    harness.get_by_label_contains("Token 11: ");
    assert!(harness.query_by_label_contains("Masks differ").is_none());
}

/// The legend entries of the mask-time plots on screen named `name` (egui_plot draws each as a
/// check box that shows or hides its line).
fn legend_entries(harness: &Harness<'_, ToolrailApp>, name: &str) -> usize {
    harness
        .query_all_by_role_and_label(egui::accesskit::Role::CheckBox, name)
        .count()
}

/// Opens the transcript `fixture` and shows its last token.
fn replay_to_its_end(harness: &mut Harness<'_, ToolrailApp>, fixture: &str) {
    open_from(&mut harness.state_mut().shared, Path::new(fixture));
    harness.step();
    let replay = harness
        .state_mut()
        .shared
        .run
        .controller
        .replay_mut()
        .unwrap();
    let end = replay.len();
    replay.seek(end);
    harness.run_steps(4);
}

#[test]
fn the_mask_plot_draws_one_named_line_per_engine_of_a_compared_run() {
    let dir = tempfile::tempdir().unwrap();
    let mut harness = window(dir.path());
    // A real toolrail run on the weather sample with llama.cpp and llguidance compared
    // (`toolrail generate --compare llama,llguidance --transcript …`).
    replay_to_its_end(
        &mut harness,
        "tests/fixtures/weather_three_engines_run.json",
    );
    let replay = harness.state().shared.run.controller.replay().unwrap();
    assert!(
        replay
            .transcript
            .tokens
            .iter()
            .all(|t| t.other_masks.len() == 2)
    );
    harness.get_by_label("Mask time per token (ms)");
    for name in ["toolrail", "llama", "llguidance"] {
        assert!(
            legend_entries(&harness, name) >= 1,
            "no line named {name} in the mask-time plot"
        );
    }
    // the last token's details list each engine's time
    harness.get_by_label_contains("llama mask ");
    harness.get_by_label_contains("llguidance mask ");

    // a run of one engine draws one line, without a legend
    replay_to_its_end(&mut harness, "tests/fixtures/weather_run.json");
    harness.get_by_label("Mask time per token (ms)");
    for name in ["toolrail", "llama", "llguidance"] {
        assert_eq!(legend_entries(&harness, name), 0, "{name}");
    }
}

#[test]
fn compare_with_turns_both_comparisons_on_and_off() {
    let dir = tempfile::tempdir().unwrap();
    let mut harness = window(dir.path());
    let compare = |h: &Harness<'_, ToolrailApp>| h.state().shared.run.settings.compare.clone();
    assert!(compare(&harness).is_empty());
    harness.get_by_label("llama.cpp masks").click();
    harness.step();
    harness.get_by_label("llguidance masks").click();
    harness.step();
    use toolrail_llm::worker::EngineKind;
    assert_eq!(
        compare(&harness),
        [EngineKind::Llama, EngineKind::Llguidance]
    );
    // the run's request carries them
    let setup = harness
        .state()
        .shared
        .run
        .setup(&harness.state().shared.analysis);
    assert_eq!(setup.compare, [EngineKind::Llama, EngineKind::Llguidance]);
    harness.get_by_label("llama.cpp masks").click();
    harness.step();
    assert_eq!(compare(&harness), [EngineKind::Llguidance]);
}

/// After *Run with and without grammar* the Transcript pane shows the latest run of the pair,
/// and its Export button (and Ctrl+Shift+E) writes that run, not the other.
#[test]
fn export_writes_the_run_the_transcript_pane_shows_after_a_pair() {
    let Some((_dir, mut harness)) = live_app(8) else {
        return;
    };
    load_model(&mut harness);
    harness
        .get_by_label("Run with and without grammar")
        .scroll_to_me();
    harness.run_steps(2);
    harness.get_by_label("Run with and without grammar").click();
    wait_until(&mut harness, "both runs to end", |app| {
        let runs = app.shared.run.controller.runs();
        runs.len() == 2 && runs.iter().all(|r| r.phase == RunPhase::Finished)
    });
    harness.get_by_label("Transcript").click();
    wait_until(&mut harness, "the Transcript pane to show a run", |app| {
        app.shared
            .run
            .controller
            .replay()
            .is_some_and(|r| r.run.is_some())
    });
    harness.run_steps(3);
    let shown = harness
        .state()
        .shared
        .run
        .controller
        .replay()
        .unwrap()
        .run
        .unwrap();
    assert_eq!(harness.state().shared.run.export_target(), Some(shown));
    harness.get_by_label(&format!("Shown: Run {shown} of this session"));
    harness.get_by_label(&format!("Export Run {shown} (JSON + Markdown)…"));
}

/// A replay shown to its end says what the run says about itself, line by line, in the words
/// `toolrail explain` prints: why it stopped, the compared engines, the lazy grammar, the
/// budget guard, llama.cpp's parse and the verdict; before its end it says none of that.
#[test]
fn a_replay_at_its_end_explains_the_run_in_the_clis_words() {
    let dir = tempfile::tempdir().unwrap();
    let mut harness = window(dir.path());
    replay_to_its_end(
        &mut harness,
        "tests/fixtures/weather_three_engines_run.json",
    );
    for line in [
        "stopped: the model ended the generation after 46 token(s)",
        "compared engines: llama.cpp's mask and toolrail's agree at all 46 step(s) compared",
        "compared engines: llguidance's mask and toolrail's differ at 2 of 46 step(s); first at \
         token 23: only toolrail allows bytes f5 (483), bytes f6 (484), bytes f7 (485), bytes f8 \
         (486), bytes f9 (487), bytes fa (488), bytes fb (489), bytes fc (490), bytes fd (491), \
         bytes fe (492), bytes ff (493)",
        "validation: valid call",
    ] {
        // the Generation pane shows it, and the Transcript pane where it is in view
        assert!(harness.get_all_by_label(line).next().is_some(), "{line}");
    }
    replay_to_its_end(&mut harness, "tests/fixtures/template_run.json");
    let lines: Vec<String> = harness
        .state()
        .shared
        .run
        .controller
        .replay()
        .unwrap()
        .explanation()
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(lines.len(), 6, "{lines:?}");
    for line in &lines {
        assert!(harness.get_all_by_label(line).next().is_some(), "{line}");
    }
    // one token before the end: the run is not over yet, so nothing is explained
    harness
        .state_mut()
        .shared
        .run
        .controller
        .replay_mut()
        .unwrap()
        .back();
    harness.run_steps(2);
    assert!(
        harness
            .query_by_label(
                "validation: valid: llama.cpp's parse found 1 call(s), each valid for its tool"
            )
            .is_none()
    );
}
