//! Snapshot helpers for the app tests (real panes, headless wgpu renderer).

use egui_kittest::Harness;
use toolrail_app::{PaneKind, ToolrailApp};

/// Renders pane `kind` of `app` alone at `size` in `theme` and compares it with the snapshot
/// `name` (regenerate with `UPDATE_SNAPSHOTS=1`).
pub fn snapshot_pane(
    app: ToolrailApp,
    kind: PaneKind,
    name: &str,
    size: [f32; 2],
    theme: egui::Theme,
) {
    let mut harness = Harness::builder()
        .with_size(size)
        .with_theme(theme)
        .wgpu()
        .build_ui_state(
            |ui, app: &mut ToolrailApp| {
                app.tick(ui.ctx());
                app.pane_ui(kind, ui);
            },
            app,
        );
    harness.run();
    harness.snapshot(name);
}
