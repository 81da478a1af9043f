//! Syntax highlighting (syntect through egui_extras) for GBNF and JSON, with extra background
//! ranges (findings, stack frames) laid over it.

use std::sync::OnceLock;

use egui_extras::syntax_highlighting::SyntectSettings;

/// The syntect settings: the default syntaxes and themes plus our `assets/gbnf.sublime-syntax`.
/// Kept in a static because egui_extras memoizes highlighting by the settings' address.
pub fn settings() -> &'static SyntectSettings {
    static SETTINGS: OnceLock<SyntectSettings> = OnceLock::new();
    SETTINGS.get_or_init(|| {
        let mut builder = syntect::parsing::SyntaxSet::load_defaults_newlines().into_builder();
        if let Ok(gbnf) = syntect::parsing::SyntaxDefinition::load_from_str(
            include_str!("../../../assets/gbnf.sublime-syntax"),
            true,
            None,
        ) {
            builder.add(gbnf);
        }
        SyntectSettings {
            ps: builder.build(),
            ts: syntect::highlighting::ThemeSet::load_defaults(),
        }
    })
}

use std::ops::Range;

use egui::Color32;
use egui::text::{ByteIndex, LayoutJob, LayoutSection};

/// How a marked range is shown on top of the syntax colours.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MarkKind {
    /// An error: red background and underline.
    Error,
    /// A warning or lint finding: amber background.
    Warning,
    /// Something the user is looking at (stack elements): blue background.
    Focus,
}

/// A byte range of the text with how to mark it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Mark {
    /// Bytes of the text.
    pub range: Range<usize>,
    /// How.
    pub kind: MarkKind,
}

impl MarkKind {
    /// Where two marks cover the same text, the lower wins (error over warning over focus).
    pub fn strength(self) -> u8 {
        match self {
            MarkKind::Error => 0,
            MarkKind::Warning => 1,
            MarkKind::Focus => 2,
        }
    }

    /// The background a marked range gets in the dark or light theme.
    pub fn background(self, dark: bool) -> Color32 {
        match (self, dark) {
            (MarkKind::Error, true) => Color32::from_rgb(110, 30, 30),
            (MarkKind::Error, false) => Color32::from_rgb(255, 200, 200),
            (MarkKind::Warning, true) => Color32::from_rgb(100, 80, 20),
            (MarkKind::Warning, false) => Color32::from_rgb(255, 235, 170),
            (MarkKind::Focus, true) => Color32::from_rgb(30, 60, 110),
            (MarkKind::Focus, false) => Color32::from_rgb(190, 215, 255),
        }
    }
}

/// Highlights `text` as `language` ("GBNF" or "JSON") and lays `marks` over it.
pub fn layout_job(ui: &egui::Ui, text: &str, language: &str, marks: &[Mark]) -> LayoutJob {
    let theme = egui_extras::syntax_highlighting::CodeTheme::from_style(ui.style());
    let job = egui_extras::syntax_highlighting::highlight_with(
        ui.ctx(),
        ui.style(),
        &theme,
        text,
        language,
        settings(),
    );
    apply_marks(job, marks, ui.visuals().dark_mode)
}

/// The last highlighted layout job of one text view, reused while the text, marks, width and
/// style are unchanged (highlighting a large grammar every frame costs frame time).
///
/// Only the job is kept across frames, never the laid-out galley: a galley points into egui's
/// font atlas, which egui rebuilds when it fills up or its options change (a theme switch at
/// start-up, a new `pixels_per_point`), and a galley kept from before draws garbled or missing
/// letters. egui's own galley cache, which it clears with the atlas, lays the job out each frame
/// (a hash lookup while nothing changed).
#[derive(Default)]
pub struct GalleyCache {
    key: u64,
    job: Option<LayoutJob>,
}

impl GalleyCache {
    /// The galley of `text` highlighted as `language` with `marks`, wrapped at `wrap`.
    pub fn layout(
        &mut self,
        ui: &egui::Ui,
        text: &str,
        language: &str,
        marks: &[Mark],
        wrap: f32,
    ) -> std::sync::Arc<egui::Galley> {
        use std::hash::{Hash as _, Hasher as _};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        (
            text,
            language,
            marks,
            wrap.to_bits(),
            ui.visuals().dark_mode,
        )
            .hash(&mut h);
        egui::TextStyle::Monospace
            .resolve(ui.style())
            .size
            .to_bits()
            .hash(&mut h);
        ui.visuals().text_color().hash(&mut h);
        let key = h.finish();
        let job = match &self.job {
            Some(job) if self.key == key => job.clone(),
            _ => {
                let mut job = layout_job(ui, text, language, marks);
                job.wrap.max_width = wrap;
                self.key = key;
                self.job = Some(job.clone());
                job
            }
        };
        ui.fonts_mut(|f| f.layout_job(job))
    }
}

/// Splits the job's sections at the marks' edges and sets their backgrounds.
pub fn apply_marks(mut job: LayoutJob, marks: &[Mark], dark: bool) -> LayoutJob {
    let len = job.text.len();
    let marks: Vec<&Mark> = marks
        .iter()
        .filter(|m| m.range.start < len && m.range.start <= m.range.end)
        .collect();
    if marks.is_empty() {
        return job;
    }
    let mut cuts: Vec<usize> = marks
        .iter()
        .flat_map(|m| [m.range.start, m.range.end.min(len)])
        .collect();
    cuts.sort_unstable();
    cuts.dedup();
    let mut out = Vec::with_capacity(job.sections.len() + cuts.len());
    for section in std::mem::take(&mut job.sections) {
        let (start, end) = (section.byte_range.start.0, section.byte_range.end.0);
        let mut pieces = vec![start];
        pieces.extend(cuts.iter().copied().filter(|&c| c > start && c < end));
        pieces.push(end);
        for w in pieces.windows(2) {
            let (a, b) = (w[0], w[1]);
            let mut format = section.format.clone();
            // The strongest mark covering the piece wins (error over warning over focus).
            let covering = marks
                .iter()
                .filter(|m| {
                    m.range.start <= a
                        && (b <= m.range.end || m.range.is_empty() && a == m.range.start)
                })
                .map(|m| m.kind)
                .min_by_key(|k| k.strength());
            if let Some(kind) = covering {
                format.background = kind.background(dark);
                if kind == MarkKind::Error {
                    format.underline = egui::Stroke::new(1.5, Color32::from_rgb(230, 60, 60));
                }
            }
            out.push(LayoutSection {
                leading_space: if a == start {
                    section.leading_space
                } else {
                    0.0
                },
                byte_range: ByteIndex(a)..ByteIndex(b),
                format,
            });
        }
    }
    job.sections = out;
    job
}

/// The char index of a byte offset (egui's text cursors count chars).
pub fn char_index(text: &str, byte: usize) -> usize {
    let byte = byte.min(text.len());
    text.char_indices().take_while(|(i, _)| *i < byte).count()
}

/// The byte offset of a char index.
pub fn byte_index(text: &str, chars: usize) -> usize {
    text.char_indices()
        .nth(chars)
        .map(|(i, _)| i)
        .unwrap_or(text.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marks_split_sections_and_colour_them() {
        let job = LayoutJob::simple(
            "abcdef".into(),
            egui::FontId::monospace(12.0),
            Color32::WHITE,
            100.0,
        );
        let job = apply_marks(
            job,
            &[Mark {
                range: 2..4,
                kind: MarkKind::Focus,
            }],
            true,
        );
        let ranges: Vec<_> = job
            .sections
            .iter()
            .map(|s| s.byte_range.start.0..s.byte_range.end.0)
            .collect();
        assert_eq!(ranges, vec![0..2, 2..4, 4..6]);
        assert_eq!(
            job.sections[1].format.background,
            MarkKind::Focus.background(true)
        );
        assert_eq!(job.sections[0].format.background, Color32::TRANSPARENT);
    }

    #[test]
    fn the_gbnf_syntax_loads() {
        let ps = &settings().ps;
        assert!(ps.find_syntax_by_name("GBNF").is_some());
        assert!(ps.find_syntax_by_extension("gbnf").is_some());
        assert!(ps.find_syntax_by_name("JSON").is_some());
    }
}
