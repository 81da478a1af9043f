//! The app under test (the real `ToolrailApp` in a kittest harness, dark theme, a workspace
//! in a temporary folder), snapshot helpers (real panes, headless wgpu renderer), and the two
//! ways a test waits: [`wait_until`] a condition holds, or [`settle`] until the app is idle.
//!
//! A test never counts frames for something a background thread does (a model load, a run, a
//! server connection, a file read or write): on a loaded machine that takes any number of
//! frames. It waits for the condition, with a deadline that only guards against a hang.

use std::path::Path;
use std::time::{Duration, Instant};

use egui_kittest::Harness;
use egui_kittest::kittest::Queryable;
use toolrail_app::{AppOptions, PaneKind, ToolrailApp};

/// The window size the app tests use unless they say otherwise.
pub const SIZE: [f32; 2] = [1440.0, 900.0];

/// Options for an app whose workspace lives in `dir` (autosaved, settled, no demo run).
pub fn options(dir: &Path) -> AppOptions {
    AppOptions {
        workspace_path: dir.join("workspace.json"),
        autosave: true,
        screenshot: None,
        settle: true,
        demo_run: false,
    }
}

/// The whole app at `size`, dark theme, workspace in `dir`, after its first frames.
pub fn app_sized(dir: &Path, size: [f32; 2]) -> Harness<'static, ToolrailApp> {
    let options = options(dir);
    let mut harness = Harness::builder()
        .with_size(size)
        .with_theme(egui::Theme::Dark)
        .wgpu()
        .build_eframe(move |cc| ToolrailApp::new(&cc.egui_ctx, options));
    settle(&mut harness);
    harness
}

/// The whole app at [`SIZE`].
pub fn app(dir: &Path) -> Harness<'static, ToolrailApp> {
    app_sized(dir, SIZE)
}

/// The text the grammar pane shows (its text view's accessible value).
pub fn grammar_view(harness: &Harness<'_, ToolrailApp>) -> String {
    harness
        .get_by_label("Grammar text")
        .value()
        .unwrap_or_default()
}

/// Pane `kind` of `app` alone at `size` in `theme`, on the headless wgpu renderer (not yet run).
pub fn pane_harness(
    app: ToolrailApp,
    kind: PaneKind,
    size: [f32; 2],
    theme: egui::Theme,
) -> Harness<'static, ToolrailApp> {
    Harness::builder()
        .with_size(size)
        .with_theme(theme)
        .wgpu()
        .build_ui_state(
            move |ui, app: &mut ToolrailApp| {
                app.tick(ui.ctx());
                // The panel background behind the pane, as in the app (not the clear colour).
                ui.painter()
                    .rect_filled(ui.max_rect(), 0.0, ui.visuals().panel_fill);
                app.pane_ui(kind, ui);
            },
            app,
        )
}

/// Renders pane `kind` of `app` alone at `size` in `theme` and compares it with the snapshot
/// `name` (regenerate with `UPDATE_SNAPSHOTS=1`).
pub fn snapshot_pane(
    app: ToolrailApp,
    kind: PaneKind,
    name: &str,
    size: [f32; 2],
    theme: egui::Theme,
) {
    let mut harness = pane_harness(app, kind, size, theme);
    settle(&mut harness);
    harness.snapshot(name);
}

/// How long a test waits for background work: generous, because a 2-core machine under a load
/// of ten runs the model, the worker and the renderer many times slower than an idle one. Only
/// a hang reaches it.
pub const DEADLINE: Duration = Duration::from_secs(300);

/// Steps the app until `done` holds (then one more frame, so that the screen shows it), or
/// fails after [`DEADLINE`] naming `what` it waited for and where the app stood.
#[track_caller]
pub fn wait_until(
    harness: &mut Harness<'_, ToolrailApp>,
    what: &str,
    done: impl Fn(&ToolrailApp) -> bool,
) {
    let deadline = Instant::now() + DEADLINE;
    while !done(harness.state()) {
        assert!(
            Instant::now() < deadline,
            "gave up waiting for {what}: {}",
            where_it_stood(harness.state())
        );
        harness.step();
        std::thread::sleep(Duration::from_millis(20));
    }
    harness.step();
}

/// What a failed wait reports: the model and server slots, the latest run and the messages.
fn where_it_stood(app: &ToolrailApp) -> String {
    let controller = &app.shared.run.controller;
    format!(
        "load {:?}, server {:?}, {} run(s), latest {:?}, messages {:?} {:?}",
        controller.load_state(),
        controller.server_state(),
        controller.runs().len(),
        controller
            .latest()
            .map(|r| (r.phase, r.tokens.len(), &r.errors, &r.finish)),
        app.shared.messages,
        app.shared.run.messages,
    )
}

/// Runs frames until the app asks for no immediate repaint, as `Harness::run` does, but however
/// many frames that takes while background work keeps it repainting (a spinner while a model
/// loads or a server answers); fails after [`DEADLINE`]. `Harness::run` gives up after a fixed
/// number of frames, which a busy machine exceeds.
#[track_caller]
pub fn settle<State>(harness: &mut Harness<'_, State>) {
    let deadline = Instant::now() + DEADLINE;
    while harness.run_ok().is_none() {
        assert!(
            Instant::now() < deadline,
            "the app kept repainting for {} s",
            DEADLINE.as_secs()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Presses *Load model* and waits for the selected model to be loaded (a failed load fails the
/// test, naming why).
pub fn load_model(harness: &mut Harness<'_, ToolrailApp>) {
    use toolrail_workbench::run::LoadState;
    harness.get_by_label("Load model").click();
    wait_until(harness, "the model to load", |app| {
        matches!(
            app.shared.run.controller.load_state(),
            LoadState::Ready { .. } | LoadState::Failed { .. }
        )
    });
    let state = harness.state().shared.run.controller.load_state();
    assert!(matches!(state, LoadState::Ready { .. }), "{state:?}");
}

/// Picks the two runs the run history compares (its pickers show "choose a run" until set).
pub fn compare_runs(harness: &mut Harness<'_, ToolrailApp>, runs: [u64; 2]) {
    for pick in runs {
        harness
            .get_all_by_value("choose a run")
            .next()
            .unwrap()
            .click();
        harness.run_steps(2);
        harness
            .get_all_by_label(&format!("Run {pick}"))
            .last()
            .unwrap()
            .click();
        harness.run_steps(2);
    }
}
