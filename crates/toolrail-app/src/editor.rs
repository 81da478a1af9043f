//! What both code editors (Schema JSON, Grammar) share: line numbers in a gutter, a search bar
//! (Ctrl+F; Enter or F3 for the next match) and moving the selection to a byte range.

use std::ops::Range;

use crate::highlight;

/// Width of the line-number gutter for a text of `lines` lines.
pub fn gutter_width(ui: &egui::Ui, lines: usize) -> f32 {
    let digits = lines.max(1).to_string().len().max(2) as f32;
    let font = egui::TextStyle::Monospace.resolve(ui.style());
    let glyph = ui.fonts_mut(|f| f.glyph_width(&font, '0'));
    digits * glyph + 8.0
}

/// Paints the line numbers of `galley` (drawn at `galley_pos`) right-aligned in the `width`
/// pixels left of it: one number per line of the text, on the line's first row (a wrapped line
/// keeps one number).
pub fn paint_line_numbers(
    ui: &egui::Ui,
    galley: &egui::Galley,
    galley_pos: egui::Pos2,
    width: f32,
) {
    let font = egui::TextStyle::Monospace.resolve(ui.style());
    let color = ui.visuals().weak_text_color();
    let painter = ui.painter();
    let right = galley_pos.x - 6.0;
    let _ = width;
    let mut line = 1;
    let mut starts_line = true;
    for row in &galley.rows {
        if starts_line {
            let y = galley_pos.y + row.pos.y;
            painter.text(
                egui::pos2(right, y),
                egui::Align2::RIGHT_TOP,
                line.to_string(),
                font.clone(),
                color,
            );
            line += 1;
        }
        starts_line = row.ends_with_newline;
    }
}

/// The line count shown in the gutter (a text ending with a newline has an empty last line).
pub fn line_count(text: &str) -> usize {
    text.split('\n').count()
}

/// A search bar over one editor's text (Ctrl+F while the editor or the bar has focus).
#[derive(Default)]
pub struct Search {
    /// Shown.
    pub open: bool,
    /// The text searched for.
    pub query: String,
    /// The byte offset the next search starts from.
    next_from: usize,
    /// Ask for the query field's focus on the next frame.
    focus_query: bool,
}

impl Search {
    /// Opens the bar if Ctrl+F was pressed while `editor` (or the bar) has focus, or while
    /// the editor's text is shown bounded and was clicked last.
    pub fn open_on_shortcut(&mut self, ui: &egui::Ui, editor: egui::Id) {
        let focused = ui.memory(|m| m.has_focus(editor) || m.has_focus(self.query_id(editor)))
            || crate::large_text::is_active(ui.ctx(), editor);
        if !focused {
            return;
        }
        let pressed = ui.input_mut(|i| {
            i.consume_shortcut(&egui::KeyboardShortcut::new(
                egui::Modifiers::COMMAND,
                egui::Key::F,
            ))
        });
        if pressed {
            self.open = true;
            self.focus_query = true;
        }
    }

    fn query_id(&self, editor: egui::Id) -> egui::Id {
        editor.with("search")
    }

    /// Draws the bar (when open); returns the byte range of the match to select, if the user
    /// asked for the next one.
    pub fn ui(&mut self, ui: &mut egui::Ui, editor: egui::Id, text: &str) -> Option<Range<usize>> {
        if !self.open {
            return None;
        }
        let mut found = None;
        ui.horizontal(|ui| {
            let label = ui.label("Find");
            let id = self.query_id(editor);
            let field = ui
                .add(
                    egui::TextEdit::singleline(&mut self.query)
                        .id(id)
                        .desired_width(160.0),
                )
                .labelled_by(label.id);
            if std::mem::take(&mut self.focus_query) {
                field.request_focus();
            }
            if field.changed() {
                self.next_from = 0;
            }
            let enter = field.lost_focus() && ui.input(|i| i.key_pressed(egui::Key::Enter));
            let f3 = ui.input(|i| i.key_pressed(egui::Key::F3));
            let matches = count_matches(text, &self.query);
            let next = ui
                .add_enabled(matches > 0, egui::Button::new("Next"))
                .on_hover_text("Next match (Enter, F3)")
                .clicked();
            if (next || enter || f3) && matches > 0 {
                found = next_match(text, &self.query, self.next_from);
                if let Some(r) = &found {
                    self.next_from = r.end;
                }
                if enter {
                    field.request_focus();
                }
            }
            let words = match (self.query.is_empty(), matches) {
                (true, _) => String::new(),
                (false, 0) => "no match".to_owned(),
                (false, 1) => "1 match".to_owned(),
                (false, n) => format!("{n} matches"),
            };
            ui.label(egui::RichText::new(words).weak());
            if ui.button("Close").clicked() || ui.input(|i| i.key_pressed(egui::Key::Escape)) {
                self.open = false;
            }
        });
        found
    }
}

/// How many times `query` occurs in `text`, without overlaps (case-insensitive for ASCII
/// letters; 0 for "").
pub fn count_matches(text: &str, query: &str) -> usize {
    let mut count = 0;
    let mut from = 0;
    while let Some(at) = find_ignoring_ascii_case(text, query, from) {
        count += 1;
        from = at + query.len();
    }
    count
}

/// The first occurrence of `query` at or after byte `from`, wrapping round to the start
/// (case-insensitive for ASCII letters).
pub fn next_match(text: &str, query: &str, from: usize) -> Option<Range<usize>> {
    find_ignoring_ascii_case(text, query, from)
        .or_else(|| find_ignoring_ascii_case(text, query, 0))
        .map(|start| start..start + query.len())
}

/// The byte offset of the first occurrence of `query` at or after `from` (ASCII letters in
/// either case), without copying the text: a large document is searched every frame while the
/// search bar is open. A match starts on a character boundary (its first byte is a UTF-8
/// lead byte, which no continuation byte equals).
fn find_ignoring_ascii_case(text: &str, query: &str, from: usize) -> Option<usize> {
    let (text, query) = (text.as_bytes(), query.as_bytes());
    let &first = query.first()?;
    let mut at = from;
    while at + query.len() <= text.len() {
        let rest = &text[at..];
        let next = memchr::memchr2(first.to_ascii_lowercase(), first.to_ascii_uppercase(), rest)?;
        let start = at + next;
        if text
            .get(start..start + query.len())
            .is_some_and(|w| w.eq_ignore_ascii_case(query))
        {
            return Some(start);
        }
        at = start + 1;
    }
    None
}

/// Selects the byte range `range` of `text` in the editor `id` drawn as `output`, focuses it
/// and scrolls it into view.
pub fn select(
    ui: &egui::Ui,
    output: &mut egui::text_edit::TextEditOutput,
    id: egui::Id,
    text: &str,
    range: Range<usize>,
) {
    let a = egui::text::CCursor::new(highlight::char_index(text, range.start));
    let b = egui::text::CCursor::new(highlight::char_index(text, range.end));
    output
        .state
        .cursor
        .set_char_range(Some(egui::text::CCursorRange::two(a, b)));
    output.state.clone().store(ui.ctx(), id);
    ui.memory_mut(|m| m.request_focus(id));
    let rect = output
        .galley
        .pos_from_cursor(a)
        .union(output.galley.pos_from_cursor(b))
        .translate(output.galley_pos.to_vec2());
    ui.scroll_to_rect(rect, Some(egui::Align::Center));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn search_wraps_round_and_ignores_ascii_case() {
        let text = "root ::= Value\nvalue ::= \"x\"";
        assert_eq!(count_matches(text, "value"), 2);
        assert_eq!(next_match(text, "value", 0), Some(9..14));
        assert_eq!(next_match(text, "value", 14), Some(15..20));
        assert_eq!(next_match(text, "value", 20), Some(9..14));
        assert_eq!(next_match(text, "", 0), None);
        assert_eq!(count_matches(text, "nothing"), 0);
    }

    #[test]
    fn line_count_counts_the_empty_last_line() {
        assert_eq!(line_count("a\nb"), 2);
        assert_eq!(line_count("a\nb\n"), 3);
        assert_eq!(line_count(""), 1);
    }
}

/// Makes a document replaced from outside its editor (a sample picked, a file opened or
/// imported, a workspace opened) one step of the editor's undo history: Ctrl+Z brings back the
/// document as it was just before, Ctrl+Shift+Z the replacement. Without it, egui only knows
/// the edits made in the widget, so an undo could skip edits not yet settled into its history.
#[derive(Default)]
pub struct ExternalEdits {
    /// The text the editor showed at the end of the last frame it was drawn.
    shown: Option<String>,
}

impl ExternalEdits {
    /// Before the editor `id` is drawn with `text`: if the text changed since the editor last
    /// showed it, the text it showed becomes an undo point (and egui's pending edit is settled).
    pub fn before(&mut self, ctx: &egui::Context, id: egui::Id, text: &str) {
        let Some(shown) = self.shown.as_ref().filter(|shown| shown.as_str() != text) else {
            return;
        };
        let mut state = egui::text_edit::TextEditState::load(ctx, id).unwrap_or_default();
        let mut undoer = state.undoer();
        let cursor = state.cursor.char_range().unwrap_or_default();
        undoer.add_undo(&(cursor, shown.clone()));
        state.set_undoer(undoer);
        state.store(ctx, id);
    }

    /// After the editor is drawn: remembers the text it shows now.
    pub fn after(&mut self, text: &str) {
        if self.shown.as_deref() != Some(text) {
            self.shown = Some(text.to_owned());
        }
    }
}

#[cfg(test)]
mod external_edit_tests {
    use super::*;

    /// A replacement made outside the widget is an undo point even when egui's own history
    /// never settled the text it replaced (typed and replaced within egui's stable time).
    #[test]
    fn a_replacement_from_outside_is_one_undo_step() {
        let ctx = egui::Context::default();
        let id = egui::Id::unique("doc");
        let mut external = ExternalEdits::default();
        let mut text = "typed, not settled".to_owned();
        let frame = |text: &mut String, external: &mut ExternalEdits| {
            let mut output = ctx.run_ui(egui::RawInput::default(), |ui| {
                external.before(ui.ctx(), id, text);
                ui.add(egui::TextEdit::multiline(text).id(id));
                external.after(text);
            });
            output.textures_delta.clear();
        };
        frame(&mut text, &mut external);
        text = "the sample".to_owned();
        frame(&mut text, &mut external);
        let state = egui::text_edit::TextEditState::load(&ctx, id).unwrap();
        let mut undoer = state.undoer();
        let current = (state.cursor.char_range().unwrap_or_default(), text.clone());
        let undone = undoer.undo(&current).map(|(_, t)| t.clone());
        assert_eq!(undone.as_deref(), Some("typed, not settled"));
        let back = (
            state.cursor.char_range().unwrap_or_default(),
            "typed, not settled".to_owned(),
        );
        assert_eq!(
            undoer.redo(&back).map(|(_, t)| t.clone()).as_deref(),
            Some("the sample")
        );
    }
}
