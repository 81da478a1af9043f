//! Texts too large for egui's editor. egui lays out a text field's whole text every time it
//! changes and keeps every glyph of it (about 240 bytes of memory per byte of text), so a 10 MB
//! paste would cost gigabytes and every frame hundreds of milliseconds. Above [`EDIT_LIMIT`] a
//! text is shown bounded instead: read-only, only the rows in view laid out, each line cut at
//! [`SHOWN_LINE_CHARS`] characters. Nothing is dropped: the grammar, lint, runs and saving use
//! the whole text, "Copy all" copies it whole, and a text up to [`FORCE_EDIT_LIMIT`] can still
//! be edited in place at the user's word.

use std::sync::Arc;

use crate::highlight::{Mark, MarkKind};

/// The largest text (in bytes) drawn in an editor: a 500-tool MCP list is larger.
pub const EDIT_LIMIT: usize = 256 * 1024;
/// The largest text that can be edited in place anyway ("Edit here"): about 500 MB of layout.
pub const FORCE_EDIT_LIMIT: usize = 2 * 1024 * 1024;
/// The characters of one line shown in the bounded view; the rest is counted.
pub const SHOWN_LINE_CHARS: usize = 1_000;

/// The text a field shows: the user's own (which the bounded view can clear) or a view of
/// something else (a generated grammar, a prompt preview).
pub enum Text<'a> {
    /// The user's text, editable.
    Editable(&'a mut String),
    /// A text shown, not editable.
    Shown(&'a str),
}

impl Text<'_> {
    fn as_str(&self) -> &str {
        match self {
            Text::Editable(text) => text,
            Text::Shown(text) => text,
        }
    }
}

/// How the bounded view is drawn.
#[derive(Default)]
pub struct View<'a> {
    /// Ranges to mark: the lines holding them get the strongest mark's background.
    pub marks: &'a [Mark],
    /// A byte offset to scroll to (a search match, an error).
    pub scroll_to: Option<usize>,
    /// The view's height in text rows (`None`: as high as the space left).
    pub rows: Option<usize>,
}

impl View<'_> {
    /// A view `rows` text rows high, nothing marked.
    pub fn with_rows(rows: usize) -> Self {
        View {
            rows: Some(rows),
            ..Default::default()
        }
    }
}

/// What one field remembers across frames (in egui's memory, by the field's id).
#[derive(Clone, Default)]
struct FieldState {
    /// The user asked to edit this large text in place.
    edit_anyway: bool,
    /// A large text the user cleared, offered back while the field stays empty.
    cleared: Option<Arc<String>>,
    /// The bounded view was clicked last (see [`is_active`]).
    active: bool,
}

/// Where a field's [`FieldState`] is kept in egui's memory, beside the field's id.
const STATE_KEY: &str = "large-text";

/// Before a text field `id` is drawn: returns true when the caller should draw its own editor
/// (the text fits, or the user asked to edit it anyway); otherwise draws the bounded view of
/// the text, with what the user can do with it, and returns false.
pub fn fits(ui: &mut egui::Ui, id: egui::Id, mut text: Text<'_>, view: &View<'_>) -> bool {
    let key = id.with(STATE_KEY);
    let mut state: FieldState = ui.data(|d| d.get_temp(key)).unwrap_or_default();
    offer_cleared_text(ui, &mut state, &mut text);
    if let Text::Editable(editable) = &mut text {
        let limit = if state.edit_anyway {
            FORCE_EDIT_LIMIT
        } else {
            EDIT_LIMIT
        };
        take_large_paste(ui, id, editable, limit);
    }
    let len = text.as_str().len();
    let fits = if len <= EDIT_LIMIT {
        true
    } else if state.edit_anyway && len <= FORCE_EDIT_LIMIT {
        ui.horizontal_wrapped(|ui| {
            ui.label(
                egui::RichText::new(format!(
                    "A large text ({}) edited in place: each change lays all of it out again.",
                    size_in_words(len)
                ))
                .color(ui.visuals().warn_fg_color),
            );
            if ui.button("Show it bounded").clicked() {
                state.edit_anyway = false;
            }
        });
        true
    } else {
        state.edit_anyway = false;
        // The line index is the one pass over the whole text a frame takes here.
        let starts = line_starts(text.as_str());
        actions(ui, &mut state, &mut text, starts.len());
        // Unless Clear just emptied the field, which the next frame shows.
        if text.as_str().len() == len {
            bounded_view(ui, id, &mut state, text.as_str(), &starts, view);
        }
        false
    };
    ui.data_mut(|d| d.insert_temp(key, state));
    fits
}

/// A paste into the focused editor `id` that would make its text larger than `limit` is
/// taken before the editor sees it (the editor would lay the whole text out once, a gigabyte
/// for 10 MB) and put in the text here, in place of the selection; the next frame shows the
/// text bounded.
fn take_large_paste(ui: &egui::Ui, id: egui::Id, text: &mut String, limit: usize) {
    if !ui.memory(|m| m.has_focus(id)) {
        return;
    }
    let pasted = ui.input_mut(|input| {
        let at = input.events.iter().position(
            |e| matches!(e, egui::Event::Paste(p) if text.len().saturating_add(p.len()) > limit),
        )?;
        match input.events.remove(at) {
            egui::Event::Paste(pasted) => Some(pasted),
            _ => None,
        }
    });
    let Some(pasted) = pasted else {
        return;
    };
    let selection = egui::text_edit::TextEditState::load(ui.ctx(), id)
        .and_then(|state| state.cursor.char_range())
        .map(|range| {
            let [a, b] = [range.primary.index, range.secondary.index]
                .map(|c| crate::highlight::byte_index(text, c.0));
            a.min(b)..a.max(b)
        })
        .unwrap_or(text.len()..text.len());
    text.replace_range(selection, &pasted);
    ui.memory_mut(|m| m.surrender_focus(id));
}

/// A read-only code view of `text` (a prompt preview, a server's chat template): egui's
/// editor, `desired_rows` high, or the bounded view when the text is large. Returns the
/// editor's response when it was drawn.
pub fn read_only_code(
    ui: &mut egui::Ui,
    id: egui::Id,
    text: &str,
    desired_rows: usize,
) -> Option<egui::Response> {
    let view = View::with_rows(desired_rows.max(12));
    if !fits(ui, id, Text::Shown(text), &view) {
        return None;
    }
    let mut shown = text;
    let editor = egui::TextEdit::multiline(&mut shown)
        .id(id)
        .code_editor()
        .desired_rows(desired_rows)
        .desired_width(f32::INFINITY);
    Some(ui.add(editor))
}

/// While an editable field a large text was cleared from stays empty, offers it back.
fn offer_cleared_text(ui: &mut egui::Ui, state: &mut FieldState, text: &mut Text<'_>) {
    let Text::Editable(text) = text else {
        return;
    };
    let Some(cleared) = state.cleared.clone() else {
        return;
    };
    if !text.is_empty() {
        state.cleared = None;
        return;
    }
    let label = format!(
        "Bring back the cleared text ({})",
        size_in_words(cleared.len())
    );
    if ui.button(label).clicked() {
        **text = cleared.as_str().to_owned();
        state.cleared = None;
    }
}

/// The line above the bounded view: what it is, and Copy all, Clear and Edit here.
fn actions(ui: &mut egui::Ui, state: &mut FieldState, text: &mut Text<'_>, lines: usize) {
    let len = text.as_str().len();
    ui.label(
        egui::RichText::new(format!(
            "Large text ({}, {} lines): shown read-only, only the rows in view, each line cut at \
             {SHOWN_LINE_CHARS} characters, so that the window stays fast. Everything else \
             (grammar, lint, runs, saving) uses all of it.",
            size_in_words(len),
            lines
        ))
        .weak(),
    );
    ui.horizontal_wrapped(|ui| {
        if ui
            .button("Copy all")
            .on_hover_text("Copy the whole text to the clipboard")
            .clicked()
        {
            ui.ctx().copy_text(text.as_str().to_owned());
        }
        let Text::Editable(editable) = text else {
            return;
        };
        if ui
            .button("Clear")
            .on_hover_text("Empty the field (it can be brought back while the field stays empty)")
            .clicked()
        {
            state.cleared = Some(Arc::new(std::mem::take(*editable)));
            return;
        }
        let can_edit = len <= FORCE_EDIT_LIMIT;
        let hover = if can_edit {
            "Lay the whole text out in the editor: it needs hundreds of megabytes and each \
             change is slow"
                .to_owned()
        } else {
            format!(
                "Texts over {} are not edited in the window: edit the file in an editor of \
                 your own and open it again",
                size_in_words(FORCE_EDIT_LIMIT)
            )
        };
        if ui
            .add_enabled(can_edit, egui::Button::new("Edit here"))
            .on_hover_text(&hover)
            .on_disabled_hover_text(&hover)
            .clicked()
        {
            state.edit_anyway = true;
        }
    });
}

/// The text's rows in view, each with its line number, cut at [`SHOWN_LINE_CHARS`].
fn bounded_view(
    ui: &mut egui::Ui,
    id: egui::Id,
    state: &mut FieldState,
    text: &str,
    starts: &[usize],
    view: &View<'_>,
) {
    let font = egui::TextStyle::Monospace.resolve(ui.style());
    // `show_rows` takes the height of a row without the spacing, and adds the spacing itself.
    let text_height = ui.fonts_mut(|f| f.row_height(&font));
    let row_height = text_height + ui.spacing().item_spacing.y;
    let digits = starts.len().to_string().len();
    let dark = ui.visuals().dark_mode;
    let mut area = egui::ScrollArea::both()
        .id_salt(id.with("bounded-view"))
        .auto_shrink([false, view.rows.is_some()]);
    if let Some(rows) = view.rows {
        area = area.max_height(rows as f32 * row_height);
    }
    if let Some(byte) = view.scroll_to {
        let line = starts.partition_point(|&s| s <= byte).saturating_sub(1);
        // The row above the match stays in view, for context: a view squeezed by its pane
        // may show only a few rows.
        area = area.vertical_scroll_offset(line.saturating_sub(1) as f32 * row_height);
    }
    let mut clicked = false;
    let output = area.show_rows(ui, text_height, starts.len(), |ui, rows| {
        for line in rows {
            let start = starts[line];
            let end = starts.get(line + 1).map_or(text.len(), |next| next - 1);
            let (shown, more) = elide(&text[start..end], SHOWN_LINE_CHARS);
            ui.horizontal(|ui| {
                ui.label(
                    egui::RichText::new(format!("{:>digits$}", line + 1))
                        .font(font.clone())
                        .weak(),
                );
                let mut rich = egui::RichText::new(shown).font(font.clone());
                if let Some(kind) = strongest_mark(view.marks, start..end) {
                    rich = rich.background_color(kind.background(dark));
                }
                clicked |= ui.add(egui::Label::new(rich).extend()).clicked();
                if more > 0 {
                    let more = format!("… {more} more characters");
                    clicked |= ui.label(egui::RichText::new(more).weak()).clicked();
                }
            });
        }
    });
    // A click in the view makes it the active field (the click itself stays with the rows,
    // for selecting text), a click elsewhere ends that: the editor's shortcuts (Ctrl+F) work
    // on the active view.
    let pressed = ui.input(|i| {
        i.pointer
            .any_pressed()
            .then(|| i.pointer.interact_pos())
            .flatten()
    });
    if let Some(at) = pressed {
        state.active = clicked || output.inner_rect.contains(at);
    }
}

/// True while the bounded view of field `id` is the one the user last clicked in (its
/// editor's shortcuts apply to it).
pub fn is_active(ctx: &egui::Context, id: egui::Id) -> bool {
    ctx.data(|d| d.get_temp::<FieldState>(id.with(STATE_KEY)))
        .is_some_and(|state| state.active)
}

/// The byte offset where each line of `text` starts (a text ending in a newline has an empty
/// last line).
pub fn line_starts(text: &str) -> Vec<usize> {
    std::iter::once(0)
        .chain(memchr::memchr_iter(b'\n', text.as_bytes()).map(|i| i + 1))
        .collect()
}

/// The first `chars` characters of `line` (without a trailing `\r`), and how many are left.
pub fn elide(line: &str, chars: usize) -> (&str, usize) {
    let line = line.strip_suffix('\r').unwrap_or(line);
    match line.char_indices().nth(chars) {
        None => (line, 0),
        Some((cut, _)) => (&line[..cut], line[cut..].chars().count()),
    }
}

/// The strongest mark touching the bytes `line` (error over warning over focus).
fn strongest_mark(marks: &[Mark], line: std::ops::Range<usize>) -> Option<MarkKind> {
    marks
        .iter()
        .filter(|m| m.range.start <= line.end && line.start <= m.range.end)
        .map(|m| m.kind)
        .min_by_key(|k| k.strength())
}

/// A byte count in words (`679 KB`, `10.0 MB`).
pub fn size_in_words(bytes: usize) -> String {
    match bytes {
        b if b < 1024 => format!("{b} bytes"),
        b if b < 1024 * 1024 => format!("{} KB", b / 1024),
        b => format!("{:.1} MB", b as f64 / (1024.0 * 1024.0)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_starts_count_the_empty_last_line() {
        assert_eq!(line_starts(""), vec![0]);
        assert_eq!(line_starts("a\nbc\n"), vec![0, 2, 5]);
    }

    #[test]
    fn a_long_line_is_cut_at_a_character_and_the_rest_counted() {
        assert_eq!(elide("short\r", 10), ("short", 0));
        let line = "é".repeat(12);
        let (shown, more) = elide(&line, 10);
        assert_eq!(shown.chars().count(), 10);
        assert_eq!(more, 2);
    }

    #[test]
    fn sizes_read_as_words() {
        assert_eq!(size_in_words(10), "10 bytes");
        assert_eq!(size_in_words(679 * 1024 + 5), "679 KB");
        assert_eq!(size_in_words(10 << 20), "10.0 MB");
    }
}
