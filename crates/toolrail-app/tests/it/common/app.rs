//! The app under test (the real `ToolrailApp` in a kittest harness, dark theme, a workspace
//! in a temporary folder) and snapshot helpers (real panes, headless wgpu renderer).

use std::path::Path;

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
    harness.run();
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
    harness.run();
    harness.snapshot(name);
}
