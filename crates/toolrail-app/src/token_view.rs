//! The token view shared by the Generation and Transcript panes: the token stream as chips, a
//! token's details (candidates before and after the mask, timings, stacks), the mask-time plot,
//! and the words for why a run stopped.

use std::ops::Range;

use egui::RichText;

use toolrail_llm::worker::EngineKind;
use toolrail_workbench::run::{Run, RunPhase};
use toolrail_workbench::transcript::explain::{Line, Tone, stop_words};
use toolrail_workbench::transcript::{Candidate, TokenRecord};

/// How the recorded demo run is labelled in the Transcript and Generation panes.
pub const DEMO_LABEL: &str = "Recorded demo run (bundled with toolrail, made with the test model): \
     press Start run to make your own (it loads the selected model)";

/// How many characters of a token piece a chip shows (a piece can be any length in a
/// transcript file; laying out a megabyte on one chip would exceed the renderer's limits).
pub const CHIP_CHARS: usize = 40;

/// How many characters of a long text (output, prompt, a piece) a label shows before it is cut
/// (the whole text stays one click away: [`long_text`]'s Copy button).
pub const SHOWN_CHARS: usize = 8_000;

/// `text` cut to `max_chars` characters (on a character boundary), and whether it was cut.
pub fn cut_text(text: &str, max_chars: usize) -> (&str, bool) {
    match text.char_indices().nth(max_chars) {
        Some((end, _)) => (&text[..end], true),
        None => (text, false),
    }
}

/// Shows `text` (monospace when asked) cut to [`SHOWN_CHARS`]; a cut text says how much is
/// hidden and has a button that copies the whole text.
pub fn long_text(ui: &mut egui::Ui, text: &str, monospace: bool) {
    let (shown, cut) = cut_text(text, SHOWN_CHARS);
    let mut rich = RichText::new(shown);
    if monospace {
        rich = rich.monospace();
    }
    ui.label(rich);
    if cut {
        ui.horizontal_wrapped(|ui| {
            ui.label(
                RichText::new(format!(
                    "… cut for display: {} more bytes ({} in all)",
                    text.len() - shown.len(),
                    text.len()
                ))
                .weak(),
            );
            if ui
                .small_button("Copy all")
                .on_hover_text("Copy the whole text to the clipboard")
                .clicked()
            {
                ui.ctx().copy_text(text.to_owned());
            }
        });
    }
}

/// Where a run is, in words ("paused before token 3", "running", why it stopped).
pub fn phase_text(run: &Run) -> String {
    match run.phase {
        RunPhase::Queued => "queued".to_owned(),
        RunPhase::Running if run.is_replaying() => "replaying forced tokens".to_owned(),
        RunPhase::Running => "running".to_owned(),
        RunPhase::Paused { next_index } => format!("paused before token {next_index}"),
        RunPhase::Finished => match &run.finish {
            Some(f) => stop_words(&f.stop),
            None => "ended".to_owned(),
        },
    }
}

/// A token's piece as shown on a chip: control characters escaped, spaces visible, at most
/// [`CHIP_CHARS`] characters of the piece (then "…").
pub fn chip_text(piece: &str) -> String {
    let (piece, cut) = cut_text(piece, CHIP_CHARS);
    let mut out = String::with_capacity(piece.len() + 3);
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
    if cut {
        out.push('…');
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
            let mut chars = chip_text(&t.piece).chars().count();
            if let Some(marker) = fired_marker_text(t) {
                chars += marker.chars().count() + 2;
            }
            let w = chars as f32 * self.char_width + pad;
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
                            if let Some(marker) = fired_marker_text(t) {
                                trigger_marker(ui, tokens, i, &marker);
                            }
                            let mut text = RichText::new(chip_text(&t.piece)).monospace();
                            let dormant = toolrail_workbench::template_info::is_dormant(t);
                            if dormant {
                                // generated while the lazy grammar slept: nothing was masked
                                text = text.italics();
                            }
                            if t.forced || t.budget_replaced.is_some() {
                                text = text.color(ui.visuals().warn_fg_color);
                            } else if dormant {
                                text = text.color(ui.visuals().weak_text_color());
                            }
                            // The hover text is built only while hovered, not for every chip each frame.
                            let response =
                                token_chip(ui, selected == Some(i), text).on_hover_ui(|ui| {
                                    ui.label(format!(
                                        "token {} (id {}, {} bytes)",
                                        t.index,
                                        t.id,
                                        t.piece.len()
                                    ));
                                    if dormant {
                                        ui.label(
                                            "written while the lazy grammar slept: nothing masked",
                                        );
                                    }
                                });
                            response.context_menu(|ui| {
                                if ui.button(format!("Copy token id ({})", t.id)).clicked() {
                                    ui.ctx().copy_text(t.id.to_string());
                                }
                                if ui.button("Copy piece").clicked() {
                                    ui.ctx().copy_text(t.piece.clone());
                                }
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

/// The longest trigger marker shown in the strip (the whole is in its tooltip).
const MARKER_CHARS: usize = 48;

/// The marker text before a token where a lazy grammar's trigger fired.
fn fired_marker_text(t: &TokenRecord) -> Option<String> {
    match &t.lazy {
        Some(toolrail_llm::record::LazyNote::Fired { trigger, .. }) => {
            let (cut, more) = cut_text(trigger, MARKER_CHARS);
            let shown = chip_text(cut);
            Some(format!("» trigger {shown}{}", if more { "…" } else { "" }))
        }
        _ => None,
    }
}

/// The trigger marker: what fired, with the matched span, the replayed text and the grammar
/// start on hover (worked out from the tokens only when hovered).
fn trigger_marker(ui: &mut egui::Ui, tokens: &[TokenRecord], index: usize, text: &str) {
    ui.label(
        RichText::new(text)
            .monospace()
            .small()
            .color(ui.visuals().warn_fg_color),
    )
    .on_hover_ui(|ui| {
        let output: String = tokens[..=index].iter().map(|t| t.piece.as_str()).collect();
        if let Some(marker) =
            toolrail_workbench::template_info::fired_marker(&tokens[..=index], &output)
        {
            ui.label(marker.details());
        }
    });
}

/// The colour of a good verdict (a valid call), readable in both themes.
pub fn ok_color(ui: &egui::Ui) -> egui::Color32 {
    if ui.visuals().dark_mode {
        egui::Color32::from_rgb(110, 200, 120)
    } else {
        egui::Color32::from_rgb(20, 120, 40)
    }
}

/// What a finished run says about itself ([`toolrail_workbench::transcript::explain`]), a
/// line each, coloured by tone: the same words `toolrail generate` and `toolrail explain`
/// print.
pub fn explanation(ui: &mut egui::Ui, lines: &[Line]) {
    for line in lines {
        let text = RichText::new(line.to_string());
        let text = match line.tone {
            Tone::Plain => text.weak(),
            Tone::Good => text.color(ok_color(ui)),
            Tone::Warning => text.color(ui.visuals().warn_fg_color),
            Tone::Bad => text.color(ui.visuals().error_fg_color),
        };
        ui.add(egui::Label::new(text).wrap());
    }
}

/// The trigger timeline of a template run, one line under the run's status: where the lazy
/// grammar woke, or why it never did.
pub fn timeline_line(
    ui: &mut egui::Ui,
    template: Option<&toolrail_workbench::transcript::TemplateRun>,
    tokens: &[TokenRecord],
    output: &str,
) {
    let Some(template) = template else {
        return;
    };
    if let Some(line) = toolrail_workbench::template_info::timeline(template, tokens, output) {
        let ms = toolrail_workbench::template_info::trigger_search_ms(tokens);
        ui.add(
            egui::Label::new(
                RichText::new(format!(
                    "lazy grammar: {line}; trigger search {ms:.3} ms in all"
                ))
                .weak(),
            )
            .wrap(),
        );
    }
}

/// One token chip: its text, framed when selected or hovered, clickable. Drawn by hand rather
/// than as an egui button: egui draws a button that has just appeared a second time (to style
/// it by its state), so a run adding chips would cost two full frames per refresh.
fn token_chip(ui: &mut egui::Ui, selected: bool, text: RichText) -> egui::Response {
    let padding = ui.spacing().button_padding;
    let galley = egui::WidgetText::from(text).into_galley(
        ui,
        Some(egui::TextWrapMode::Extend),
        f32::INFINITY,
        egui::TextStyle::Button,
    );
    let size = (galley.size() + 2.0 * padding).max(egui::vec2(0.0, ui.spacing().interact_size.y));
    let (rect, response) = ui.allocate_exact_size(size, egui::Sense::click());
    response.widget_info(|| {
        egui::WidgetInfo::selected(egui::Role::Button, ui.is_enabled(), selected, galley.text())
    });
    if ui.is_rect_visible(rect) {
        let visuals = ui.style().interact_selectable(&response, selected);
        if selected || response.hovered() || response.has_focus() {
            ui.painter().rect(
                rect.expand(visuals.expansion),
                visuals.corner_radius,
                visuals.weak_bg_fill,
                visuals.bg_stroke,
                egui::StrokeKind::Inside,
            );
        }
        let text_pos = ui
            .layout()
            .align_size_within_rect(galley.size(), rect.shrink2(padding))
            .min;
        ui.painter().galley(text_pos, galley, visuals.text_color());
    }
    response
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
        let (piece, cut) = cut_text(&t.piece, 60);
        let more = if cut { "…" } else { "" };
        ui.label(
            RichText::new(format!("Token {}: {piece:?}{more}", t.index))
                .strong()
                .monospace(),
        );
        if cut
            && ui
                .small_button("Copy piece")
                .on_hover_text(format!(
                    "The piece is {} bytes; copy it whole to the clipboard",
                    t.piece.len()
                ))
                .clicked()
        {
            ui.ctx().copy_text(t.piece.clone());
        }
        ui.label(format!("id {}", t.id));
        if t.forced {
            ui.label(RichText::new("forced").color(ui.visuals().warn_fg_color));
        }
        if let Some(line) = t
            .lazy
            .as_ref()
            .map(toolrail_workbench::template_info::note_text)
        {
            ui.label(RichText::new(line).weak());
        }
        if let Some(sampled) = t.budget_replaced {
            // Which token it replaced and why, in the pane itself (not only on hover).
            let why = match &t.budget {
                Some(note) => format!(
                    "budget guard: replaced token {sampled}: {}",
                    note.describe()
                ),
                None => format!("budget guard: replaced token {sampled}"),
            };
            ui.label(RichText::new(why).color(ui.visuals().warn_fg_color))
                .on_hover_text(
                    "The sampled token would have left too few tokens to finish the grammar \
                     before max tokens; the most likely allowed token that can still finish \
                     was taken instead",
                );
        }
        ui.label(format!("{} allowed", t.allowed));
        ui.label(format!(
            "decode {:.2} ms · mask {:.3} ms",
            t.decode_ms, t.mask_ms
        ));
        for other in &t.other_masks {
            ui.label(format!("· {} mask {:.3} ms", other.engine, other.mask_ms));
        }
    });
    for other in &t.other_masks {
        if let Some(why) = &other.stopped {
            ui.label(RichText::new(why).color(ui.visuals().warn_fg_color));
        }
    }
    ui.columns(2, |cols| {
        // Not justified: pieces show exactly as they are.
        let plain = egui::Layout::top_down(egui::Align::Min);
        cols[0].with_layout(plain, |ui| {
            ui.label(RichText::new("Before the mask").strong());
            candidate_bars(ui, &t.before, t.id, None);
        });
        let chosen = cols[1]
            .with_layout(plain, |ui| {
                ui.label(RichText::new("After the mask").strong());
                candidate_bars(ui, &t.after, t.id, can_force.then_some(()))
            })
            .inner;
        if chosen.is_some() {
            force = chosen;
        }
    });
    for difference in t.mask_differences() {
        mask_difference_section(ui, difference);
    }
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
                let top = top.map(|s| cut_text(s, 120).0);
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

/// Where the run's engine and toolrail's masks differ at this step, token by token: which
/// engine allows each listed token, and how many more there are.
fn mask_difference_section(
    ui: &mut egui::Ui,
    difference: &toolrail_workbench::transcript::MaskDifference,
) {
    let engine = difference.engine.name();
    egui::CollapsingHeader::new(
        RichText::new(format!(
            "Masks differ: {} token(s) only {engine} allows, {} only toolrail allows",
            difference.only_engine, difference.only_toolrail
        ))
        .color(ui.visuals().warn_fg_color),
    )
    .id_salt("token-mask-difference")
    .default_open(true)
    .show(ui, |ui| {
        for (engine_allows, total) in [
            (true, difference.only_engine),
            (false, difference.only_toolrail),
        ] {
            let who = if engine_allows { engine } else { "toolrail" };
            let mut listed = 0;
            for token in difference
                .tokens
                .iter()
                .filter(|t| t.engine_allows == engine_allows)
            {
                listed += 1;
                ui.label(
                    RichText::new(format!(
                        "{} (id {}): only {who} allows it",
                        chip_text(&token.shown()),
                        token.id
                    ))
                    .monospace(),
                );
            }
            if total as usize > listed {
                ui.label(format!(
                    "… {} more only {who} allows",
                    total as usize - listed
                ));
            }
        }
    });
}

/// The candidates' chip texts; where two look the same (the same piece, a lossy byte, a look-alike
/// space), each of them also shows its id and its characters' code points, so they are told
/// apart without hovering.
pub fn candidate_labels(candidates: &[Candidate]) -> Vec<String> {
    let texts: Vec<String> = candidates.iter().map(|c| chip_text(&c.piece)).collect();
    texts
        .iter()
        .zip(candidates)
        .map(|(text, c)| {
            if texts.iter().filter(|t| *t == text).count() > 1 {
                let points: Vec<String> = c
                    .piece
                    .chars()
                    .map(|ch| format!("U+{:04X}", ch as u32))
                    .collect();
                format!("{text} (id {}, {})", c.id, points.join(" "))
            } else {
                text.clone()
            }
        })
        .collect()
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
    let labels = candidate_labels(candidates);
    for (c, label) in candidates.iter().zip(labels) {
        ui.horizontal(|ui| {
            let mut text = RichText::new(label).monospace();
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

/// Each engine's mask time per token, one point per token it computed a mask for: the run's
/// `engine` first, then the engines computed beside it, in the order first met.
pub fn mask_lines(tokens: &[TokenRecord], engine: EngineKind) -> Vec<(EngineKind, Vec<[f64; 2]>)> {
    let mut lines: Vec<(EngineKind, Vec<[f64; 2]>)> = vec![(engine, Vec::new())];
    for t in tokens {
        for (kind, ms) in t.mask_times(engine) {
            let point = [f64::from(t.index), ms];
            match lines.iter_mut().find(|(k, _)| *k == kind) {
                Some((_, points)) => points.push(point),
                None => lines.push((kind, vec![point])),
            }
        }
    }
    lines
}

/// Mask time per token: one line per engine (the run's and the ones compared with it), with a
/// legend naming them.
pub fn mask_plot(ui: &mut egui::Ui, tokens: &[TokenRecord], engine: EngineKind, id: &str) {
    if tokens.is_empty() {
        return;
    }
    ui.label(RichText::new("Mask time per token (ms)").strong());
    let lines = mask_lines(tokens, engine);
    let mut plot = egui_plot::Plot::new(id.to_owned())
        .height(110.0)
        .allow_scroll(false)
        .allow_zoom(false)
        .allow_drag(false)
        .x_axis_label("token");
    if lines.len() > 1 {
        plot = plot.legend(egui_plot::Legend::default().follow_insertion_order(true));
    }
    plot.show(ui, |plot| {
        for (kind, points) in lines {
            plot.line(egui_plot::Line::new(kind.name(), points));
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn candidates_that_look_the_same_show_their_ids_and_code_points() {
        let candidate = |id: u32, piece: &str| Candidate {
            id,
            piece: piece.to_owned(),
            probability: 0.1,
            masked: false,
        };
        // Two partial UTF-8 bytes both read as U+FFFD.
        let labels = candidate_labels(&[
            candidate(1, "\u{fffd}"),
            candidate(2, "\u{fffd}"),
            candidate(3, "a"),
            candidate(4, " x"),
        ]);
        assert_eq!(
            labels,
            [
                "\u{fffd} (id 1, U+FFFD)",
                "\u{fffd} (id 2, U+FFFD)",
                "a",
                "·x"
            ]
        );
    }

    #[test]
    fn long_pieces_are_cut_on_character_boundaries() {
        let piece = "é".repeat(1_000_000);
        let chip = chip_text(&piece);
        assert_eq!(chip.chars().count(), CHIP_CHARS + 1);
        assert!(chip.ends_with('…'));
        let (shown, cut) = cut_text(&piece, SHOWN_CHARS);
        assert!(cut);
        assert_eq!(shown.chars().count(), SHOWN_CHARS);
        assert_eq!(cut_text("abc", 3), ("abc", false));
        assert_eq!(chip_text("a b\n"), "a·b\\n");
    }

    #[test]
    fn mask_lines_give_each_engine_its_own_points() {
        use toolrail_llm::record::OtherMask;
        let token = |index: u32, others: &[(EngineKind, f64)]| TokenRecord {
            index,
            id: index,
            piece: "x".into(),
            piece_hex: None,
            forced: false,
            budget_replaced: None,
            budget: None,
            before: Vec::new(),
            after: Vec::new(),
            allowed: 1,
            stacks: None,
            decode_ms: 1.0,
            mask_ms: 0.5,
            flag: None,
            sampled: Vec::new(),
            disagreements: Vec::new(),
            mask_difference: None,
            other_masks: others
                .iter()
                .map(|&(engine, mask_ms)| OtherMask {
                    engine,
                    mask_ms,
                    difference: None,
                    stopped: None,
                })
                .collect(),
            lazy: None,
            thinking: None,
        };
        let tokens = [
            token(
                0,
                &[(EngineKind::Llama, 50.0), (EngineKind::Llguidance, 0.2)],
            ),
            // llguidance stopped following after token 0
            token(1, &[(EngineKind::Llama, 60.0)]),
        ];
        let lines = mask_lines(&tokens, EngineKind::Toolrail);
        let names: Vec<EngineKind> = lines.iter().map(|(e, _)| *e).collect();
        assert_eq!(
            names,
            [
                EngineKind::Toolrail,
                EngineKind::Llama,
                EngineKind::Llguidance
            ]
        );
        assert_eq!(lines[0].1, [[0.0, 0.5], [1.0, 0.5]]);
        assert_eq!(lines[1].1, [[0.0, 50.0], [1.0, 60.0]]);
        assert_eq!(lines[2].1, [[0.0, 0.2]]);
        // a run of one engine: one line
        assert_eq!(mask_lines(&tokens[..0], EngineKind::Llama).len(), 1);
    }
}
