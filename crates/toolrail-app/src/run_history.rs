//! The run history in the Transcript pane: every run of the session (Force branches included,
//! each saying where it branched), one to show, and two to compare token by token.

use egui::RichText;

use crate::shared::Shared;
use crate::token_view::{chip_text, phase_text};
use toolrail_llm::settings::ComputeOptions;
use toolrail_workbench::run::{Run, RunId, RunKind};
use toolrail_workbench::transcript::compare::{RunComparison, RunSide};

/// The history's own state: the two runs compared.
#[derive(Default)]
pub struct RunHistory {
    compare: [Option<RunId>; 2],
}

/// The index of the first token where two token-id sequences differ (their common length
/// when one is a prefix of the other).
pub fn divergence(a: &[u32], b: &[u32]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

/// How a run came about, in words (`branch of Run 2 at token 5`).
pub fn run_origin(run: &Run) -> String {
    if run.server.is_some() {
        return "on the server".to_owned();
    }
    match run.kind {
        RunKind::Single => "run".to_owned(),
        RunKind::Constrained => "with the grammar (pair)".to_owned(),
        RunKind::Unconstrained => "without the grammar (pair)".to_owned(),
        RunKind::Branch { from, step, token } => {
            format!("branch of Run {from} at token {step} (forced id {token})")
        }
    }
}

impl RunHistory {
    /// Draws the list (click a run to show it in the Generation and Validator panes) and the
    /// comparison of the two runs chosen.
    pub fn ui(&mut self, ui: &mut egui::Ui, shared: &mut Shared) {
        let runs = shared.run.controller.runs();
        if runs.is_empty() {
            ui.label(RichText::new("No run yet in this session.").weak());
            return;
        }
        let mut show = None;
        for run in runs {
            let depth = branch_depth(runs, run);
            ui.horizontal(|ui| {
                // A long line is cut, never widens the pane (its other text would be clipped).
                ui.style_mut().wrap_mode = Some(egui::TextWrapMode::Truncate);
                ui.add_space(depth as f32 * 14.0);
                let selected = shared.run.shown == Some(run.id);
                let text = format!(
                    "Run {}: {} · {} tokens · {}",
                    run.id,
                    run_origin(run),
                    run.tokens.len(),
                    phase_text(run)
                );
                if ui
                    .selectable_label(selected, text)
                    .on_hover_text("Show this run in the Generation and Validator panes")
                    .clicked()
                {
                    show = Some(run.id);
                }
            });
        }
        if let Some(id) = show {
            shared.run.shown = Some(id);
        }
        ui.separator();
        ui.horizontal_wrapped(|ui| {
            let mut label = ui.label("Compare");
            for (slot, salt) in [(0, "history-compare-a"), (1, "history-compare-b")] {
                let current =
                    self.compare[slot].map_or("choose a run".to_owned(), |id| format!("Run {id}"));
                egui::ComboBox::from_id_salt(salt)
                    .selected_text(current)
                    .show_ui(ui, |ui| {
                        for run in runs {
                            ui.selectable_value(
                                &mut self.compare[slot],
                                Some(run.id),
                                format!("Run {}", run.id),
                            );
                        }
                    })
                    .response
                    .labelled_by(label.id);
                if slot == 0 {
                    label = ui.label("with");
                }
            }
        });
        let [Some(a), Some(b)] = self.compare else {
            return;
        };
        let (Some(a), Some(b)) = (
            runs.iter().find(|r| r.id == a),
            runs.iter().find(|r| r.id == b),
        ) else {
            return;
        };
        let like = compare(ui, a, b);
        if let Some((id, compute)) = like {
            shared.run.settings.compute = compute;
            shared.message(format!(
                "In-process runs now compute as Run {id} on the server did (Reset in the run \
                 history to go back to the defaults)."
            ));
        }
        if shared.run.settings.compute != ComputeOptions::default() {
            ui.horizontal_wrapped(|ui| {
                ui.label(
                    RichText::new("In-process runs compute with settings taken from a server run.")
                        .weak(),
                );
                if ui
                    .button("Reset")
                    .on_hover_text("In-process runs use the model entry's settings again")
                    .clicked()
                {
                    shared.run.settings.compute = ComputeOptions::default();
                }
            });
        }
    }
}

/// How many branches deep a run is (a branch of a branch is indented twice).
fn branch_depth(runs: &[Run], run: &Run) -> usize {
    let mut depth = 0;
    let mut kind = run.kind;
    while let RunKind::Branch { from, .. } = kind {
        depth += 1;
        match runs.iter().find(|r| r.id == from) {
            Some(parent) if depth < 64 => kind = parent.kind,
            _ => break,
        }
    }
    depth
}

/// Why two runs differ, in sentences (where they part, a near tie, the probability drift, the
/// settings and sampling that explain it); a server run's settings can be taken for in-process
/// runs: the run and the options, when that button was clicked.
fn explain(ui: &mut egui::Ui, a: &Run, b: &Run) -> Option<(RunId, ComputeOptions)> {
    let comparison = RunComparison::between(run_side(a), run_side(b));
    for line in comparison
        .explanation()
        .iter()
        .filter(|l| !l.starts_with("The same"))
    {
        ui.label(line);
    }
    let mut taken = None;
    for run in [a, b] {
        let Some(settings) = run.settings.as_ref().filter(|_| run.server.is_some()) else {
            continue;
        };
        let (compute, unmatched) = ComputeOptions::matching(settings);
        let button = ui
            .button(format!("Compute in-process as Run {}", run.id))
            .on_hover_text(format!(
                "Flash attention, batch sizes, cache types and the prompt's cut as on the \
                 server: {}{}",
                settings.summary(),
                if unmatched.is_empty() {
                    String::new()
                } else {
                    format!(". Not matched: {}", unmatched.join("; "))
                }
            ));
        if button.clicked() {
            taken = Some((run.id, compute));
        }
    }
    taken
}

/// What a comparison reads of a run.
fn run_side(r: &Run) -> RunSide<'_> {
    RunSide {
        tokens: &r.tokens,
        prompt: &r.request.prompt,
        sampling: &r.request.sampling,
        settings: r.settings.as_ref(),
        server: r.server.as_deref(),
    }
}

/// Two runs side by side from the first token where they differ, with why they differ; the
/// run whose settings in-process runs are to take, when its button was clicked.
fn compare(ui: &mut egui::Ui, a: &Run, b: &Run) -> Option<(RunId, ComputeOptions)> {
    let ids_a: Vec<u32> = a.tokens.iter().map(|t| t.id).collect();
    let ids_b: Vec<u32> = b.tokens.iter().map(|t| t.id).collect();
    let same = divergence(&ids_a, &ids_b);
    let words = if same == ids_a.len() && same == ids_b.len() {
        format!("the same {same} tokens")
    } else {
        format!("the same first {same} tokens, then they differ at token {same}:")
    };
    ui.label(RichText::new(words).strong());
    let like = explain(ui, a, b);
    ui.columns(2, |cols| {
        for (col, run) in cols.iter_mut().zip([a, b]) {
            let plain = egui::Layout::top_down(egui::Align::Min);
            col.with_layout(plain, |ui| {
                ui.label(RichText::new(format!("Run {}", run.id)).strong());
                for t in run.tokens.iter().skip(same).take(200) {
                    ui.label(
                        RichText::new(format!(
                            "{:>4}  {}  (id {})",
                            t.index,
                            chip_text(&t.piece),
                            t.id
                        ))
                        .monospace(),
                    );
                }
                if run.tokens.len() > same + 200 {
                    ui.label(
                        RichText::new(format!("… {} more", run.tokens.len() - same - 200)).weak(),
                    );
                }
            });
        }
    });
    like
}

#[cfg(test)]
mod tests {
    use super::divergence;

    #[test]
    fn divergence_is_the_common_prefix() {
        assert_eq!(divergence(&[1, 2, 3], &[1, 2, 4]), 2);
        assert_eq!(divergence(&[1, 2], &[1, 2, 4]), 2);
        assert_eq!(divergence(&[], &[1]), 0);
        assert_eq!(divergence(&[5], &[6]), 0);
    }
}
