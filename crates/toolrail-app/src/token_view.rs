//! The token view shared by the Generation and Transcript panes: the token stream as chips, a
//! token's details (candidates before and after the mask, timings, stacks), the mask-time plot,
//! and the words for why a run stopped.

use std::ops::Range;

use egui::RichText;

use toolrail_workbench::transcript::{Candidate, Stop, TokenRecord};

/// How the recorded demo run is labelled in the Transcript and Generation panes.
pub const DEMO_LABEL: &str = "Recorded demo run (bundled with toolrail, made with the test model): \
     press Start run to make your own (it loads the selected model)";

/// Why a run stopped, in words.
pub fn stop_text(stop: &Stop) -> String {
    match stop {
        Stop::EndOfGeneration => "end of generation".to_owned(),
        Stop::MaxTokens => "token limit".to_owned(),
        Stop::Cancelled => "cancelled".to_owned(),
        Stop::DeadEnd { offset, expected } => {
            format!(
                "dead end at byte {offset}: expected {}",
                expected.join(", ")
            )
        }
        Stop::Error { message } => format!("error: {message}"),
    }
}

/// A token's piece as shown on a chip: control characters escaped, spaces visible.
pub fn chip_text(piece: &str) -> String {
    let mut out = String::with_capacity(piece.len());
    for c in piece.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            ' ' => out.push('·'),
            c if c.is_control() => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
            c => out.push(c),
        }
    }
    if out.is_empty() {
        out.push_str("(empty)");
    }
    out
}

/// The token stream as wrapped chips, virtualized by rows: only the visible rows are laid out,
/// so thousands of tokens stay cheap.
#[derive(Default)]
pub struct TokenStrip {
    rows: Vec<Range<usize>>,
    key: (usize, u32, usize),
    char_width: f32,
}

impl TokenStrip {
    fn layout(&mut self, ui: &egui::Ui, tokens: &[TokenRecord], width: f32) {
        let key = (
            tokens.len(),
            width as u32,
            tokens.first().map_or(0, |t| t.id as usize),
        );
        if key == self.key && !self.rows.is_empty() {
            return;
        }
        if self.char_width <= 0.0 {
            let font = egui::TextStyle::Monospace.resolve(ui.style());
            self.char_width = ui.fonts_mut(|f| f.glyph_width(&font, 'x'));
        }
        let pad = ui.spacing().button_padding.x * 2.0 + ui.spacing().item_spacing.x;
        self.rows.clear();
        let mut start = 0;
        let mut used = 0.0;
        for (i, t) in tokens.iter().enumerate() {
            let w = chip_text(&t.piece).chars().count() as f32 * self.char_width + pad;
            if used + w > width && i > start {
                self.rows.push(start..i);
                start = i;
                used = 0.0;
            }
            used += w;
        }
        if start < tokens.len() {
            self.rows.push(start..tokens.len());
        }
        self.key = key;
    }

    /// Draws the chips; returns the index of a clicked chip.
    pub fn ui(
        &mut self,
        ui: &mut egui::Ui,
        tokens: &[TokenRecord],
        selected: Option<usize>,
        salt: &str,
    ) -> Option<usize> {
        if tokens.is_empty() {
            return None;
        }
        let width = ui.available_width().max(60.0);
        self.layout(ui, tokens, width);
        let row_height = ui.spacing().interact_size.y + ui.spacing().item_spacing.y;
        let mut clicked = None;
        let rows = &self.rows;
        egui::ScrollArea::vertical()
            .id_salt(("token-strip", salt))
            .max_height(180.0)
            .stick_to_bottom(true)
            .auto_shrink([false, true])
            .show_rows(ui, row_height, rows.len(), |ui, visible| {
                for row in &rows[visible] {
                    ui.horizontal(|ui| {
                        for i in row.clone() {
                            let t = &tokens[i];
                            let mut text = RichText::new(chip_text(&t.piece)).monospace();
                            if t.forced || t.budget_replaced.is_some() {
                                text = text.color(ui.visuals().warn_fg_color);
                            }
                            // The hover text is built only while hovered, not for every chip each frame.
                            let response = ui
                                .selectable_label(selected == Some(i), text)
                                .on_hover_ui(|ui| {
                                    ui.label(format!("token {} (id {})", t.index, t.id));
                                });
                            if response.clicked() {
                                clicked = Some(i);
                            }
                        }
                    });
                }
            });
        clicked
    }
}

/// The selected token: timings, candidates before and after the mask, the stacks after it.
/// `grammar` (the run's) gives the stacks' source snippets; with `can_force` (live runs) each
/// other allowed candidate has a Force button, and the one clicked is returned.
pub fn token_details(
    ui: &mut egui::Ui,
    t: &TokenRecord,
    grammar: Option<&str>,
    can_force: bool,
) -> Option<u32> {
    let mut force = None;
    ui.separator();
    ui.horizontal_wrapped(|ui| {
        ui.label(
            RichText::new(format!("Token {}: {:?}", t.index, t.piece))
                .strong()
                .monospace(),
        );
        ui.label(format!("id {}", t.id));
        if t.forced {
            ui.label(RichText::new("forced").color(ui.visuals().warn_fg_color));
        }
        if let Some(sampled) = t.budget_replaced {
            ui.label(RichText::new("budget guard").color(ui.visuals().warn_fg_color))
                .on_hover_text(format!(
                    "The sampler chose token {sampled}, which would have left too few tokens \
                     to finish the grammar before max tokens"
                ));
        }
        ui.label(format!("{} allowed", t.allowed));
        ui.label(format!(
            "decode {:.2} ms · mask {:.3} ms",
            t.decode_ms, t.mask_ms
        ));
    });
    ui.columns(2, |cols| {
        cols[0].label(RichText::new("Before the mask").strong());
        candidate_bars(&mut cols[0], &t.before, t.id, None);
        cols[1].label(RichText::new("After the mask").strong());
        let chosen = candidate_bars(&mut cols[1], &t.after, t.id, can_force.then_some(()));
        if chosen.is_some() {
            force = chosen;
        }
    });
    if let Some(snapshot) = &t.stacks {
        egui::CollapsingHeader::new(format!(
            "Stacks after this token ({})",
            snapshot.stacks.len()
        ))
        .id_salt("token-stacks")
        .default_open(true)
        .show(ui, |ui| {
            if snapshot.partial_utf8 {
                ui.label(RichText::new("inside a UTF-8 sequence").weak());
            }
            for (i, stack) in snapshot.stacks.iter().enumerate().take(32) {
                let chain: Vec<&str> = stack.frames.iter().map(|f| f.rule_name.as_str()).collect();
                let top = stack.frames.last().and_then(|f| {
                    grammar.and_then(|g| g.get(f.span.start as usize..f.span.end as usize))
                });
                let text = if chain.is_empty() {
                    format!("{i}: (empty: the grammar may end here)")
                } else {
                    format!(
                        "{i}: {}{}",
                        chain.join(" > "),
                        top.map(|s| format!("  -> {s}")).unwrap_or_default()
                    )
                };
                ui.label(RichText::new(text).monospace());
            }
            if snapshot.stacks.len() > 32 {
                ui.label(format!("… {} more", snapshot.stacks.len() - 32));
            }
        });
    }
    force
}

/// Candidate rows: the piece, a probability bar, masked ones struck through; with `force`, a
/// Force button on each other allowed candidate. Returns the candidate to force.
fn candidate_bars(
    ui: &mut egui::Ui,
    candidates: &[Candidate],
    taken: u32,
    force: Option<()>,
) -> Option<u32> {
    let mut chosen = None;
    for c in candidates {
        ui.horizontal(|ui| {
            let mut text = RichText::new(chip_text(&c.piece)).monospace();
            if c.masked {
                text = text.strikethrough().weak();
            }
            if c.id == taken {
                text = text.strong();
            }
            ui.label(text).on_hover_text(format!("id {}", c.id));
            ui.add(
                egui::ProgressBar::new(c.probability.clamp(0.0, 1.0))
                    .desired_width(90.0)
                    .text(format!("{:.3}", c.probability)),
            );
            if force.is_some()
                && !c.masked
                && c.id != taken
                && ui
                    .small_button("Force")
                    .on_hover_text("Branch: replay the tokens before this step, then take this one")
                    .clicked()
            {
                chosen = Some(c.id);
            }
        });
    }
    chosen
}

/// Mask time per token.
pub fn mask_plot(ui: &mut egui::Ui, tokens: &[TokenRecord], id: &str) {
    if tokens.is_empty() {
        return;
    }
    ui.label(RichText::new("Mask time per token (ms)").strong());
    let points: Vec<[f64; 2]> = tokens
        .iter()
        .map(|t| [f64::from(t.index), t.mask_ms])
        .collect();
    egui_plot::Plot::new(id.to_owned())
        .height(110.0)
        .allow_scroll(false)
        .allow_zoom(false)
        .allow_drag(false)
        .x_axis_label("token")
        .show(ui, |plot| {
            plot.line(egui_plot::Line::new("mask ms", points));
        });
}
