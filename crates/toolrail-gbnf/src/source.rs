//! Byte spans in grammar source text and their conversion to line:column for people.

use serde::{Deserialize, Serialize};

/// A half-open byte range `start..end` in a source text.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Span {
    /// First byte of the range.
    pub start: u32,
    /// One past the last byte of the range.
    pub end: u32,
}

impl Span {
    /// A span from `start` to `end` (byte offsets; clamped so that `end >= start`).
    pub fn new(start: usize, end: usize) -> Self {
        let start = u32::try_from(start).unwrap_or(u32::MAX);
        let end = u32::try_from(end).unwrap_or(u32::MAX).max(start);
        Span { start, end }
    }

    /// The smallest span covering both `self` and `other`.
    pub fn join(self, other: Span) -> Span {
        Span {
            start: self.start.min(other.start),
            end: self.end.max(other.end),
        }
    }

    /// The byte range, for slicing the source.
    pub fn range(self) -> std::ops::Range<usize> {
        self.start as usize..self.end as usize
    }
}

/// A 1-based line and column (the column counts characters, not bytes).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct LineCol {
    /// 1-based line number.
    pub line: u32,
    /// 1-based column, in Unicode scalar values from the start of the line.
    pub column: u32,
}

impl std::fmt::Display for LineCol {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.line, self.column)
    }
}

/// Maps byte offsets of a text to line:column, in O(log lines + CHECKPOINT) per lookup after
/// one linear pass over the text (so many lookups on one very long line stay linear too).
#[derive(Clone, Debug)]
pub struct LineIndex {
    line_starts: Vec<usize>,
    /// Characters (UTF-8 lead bytes) before each multiple of [`CHECKPOINT`] bytes.
    chars_before: Vec<usize>,
}

/// Spacing, in bytes, of the character-count checkpoints of a [`LineIndex`].
const CHECKPOINT: usize = 4096;

/// True for the bytes that start a character (everything but UTF-8 continuation bytes).
fn starts_char(b: u8) -> bool {
    (b & 0xC0) != 0x80
}

impl LineIndex {
    /// Indexes the line starts of `text` (lines end at `\n`).
    pub fn new(text: &[u8]) -> Self {
        let mut line_starts = vec![0];
        line_starts.extend(
            text.iter()
                .enumerate()
                .filter(|(_, b)| **b == b'\n')
                .map(|(i, _)| i + 1),
        );
        let mut chars_before = Vec::with_capacity(text.len() / CHECKPOINT + 1);
        let mut count = 0;
        chars_before.push(0);
        for chunk in text.chunks(CHECKPOINT) {
            count += chunk.iter().filter(|b| starts_char(**b)).count();
            chars_before.push(count);
        }
        LineIndex {
            line_starts,
            chars_before,
        }
    }

    /// Characters in `text[..offset]`, from the nearest checkpoint.
    fn chars_up_to(&self, text: &[u8], offset: usize) -> usize {
        let chunk = offset / CHECKPOINT;
        let base = self.chars_before.get(chunk).copied().unwrap_or(0);
        base + text[chunk * CHECKPOINT..offset]
            .iter()
            .filter(|b| starts_char(**b))
            .count()
    }

    /// Line and column of byte `offset` in `text` (the text this index was built from).
    pub fn line_col(&self, text: &[u8], offset: usize) -> LineCol {
        let offset = offset.min(text.len());
        let line = self.line_starts.partition_point(|&s| s <= offset).max(1) - 1;
        let start = self.line_starts[line];
        let column = if offset - start <= CHECKPOINT {
            text[start..offset]
                .iter()
                .filter(|b| starts_char(**b))
                .count()
        } else {
            self.chars_up_to(text, offset) - self.chars_up_to(text, start)
        };
        LineCol {
            line: line as u32 + 1,
            column: column as u32 + 1,
        }
    }

    /// The bytes of 1-based line `line`, without its line terminator.
    pub fn line_text<'t>(&self, text: &'t [u8], line: u32) -> &'t [u8] {
        let i = (line as usize)
            .saturating_sub(1)
            .min(self.line_starts.len() - 1);
        let start = self.line_starts[i];
        let end = self
            .line_starts
            .get(i + 1)
            .map_or(text.len(), |next| next - 1);
        let line = &text[start..end.max(start)];
        line.strip_suffix(b"\r").unwrap_or(line)
    }
}

/// Line and column of `offset` in `text`, without keeping an index (for one-off messages):
/// one pass over `text[..offset]`, no allocation. Many lookups in one text should share a
/// [`LineIndex`] instead.
pub fn line_col(text: &[u8], offset: usize) -> LineCol {
    let offset = offset.min(text.len());
    let before = &text[..offset];
    let (line, start) = before
        .iter()
        .enumerate()
        .filter(|(_, b)| **b == b'\n')
        .fold((0usize, 0usize), |(n, _), (i, _)| (n + 1, i + 1));
    let column = before[start..].iter().filter(|b| starts_char(**b)).count();
    LineCol {
        line: line as u32 + 1,
        column: column as u32 + 1,
    }
}

/// The most characters of a source line a rendered finding shows.
pub const SHOWN_LINE_CHARS: usize = 120;

/// The part of a line of text shown to point at one of its bytes (under a finding, at a
/// rejected byte): at most [`SHOWN_LINE_CHARS`] characters, cut around the byte when the line
/// is longer. Put together as `before`, `after`, then `…` if `cut_right`; a caret goes under
/// the first character of `after`, after as many columns as `before` has characters.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LineExcerpt {
    /// The line's text before the byte, starting with `…` if the line was cut there.
    pub before: String,
    /// The line's text from the byte on (to the line's end, or to the cut).
    pub after: String,
    /// True when the line goes on past `after`.
    pub cut_right: bool,
}

impl LineExcerpt {
    /// The window of at most [`SHOWN_LINE_CHARS`] characters of the line holding byte `at` of
    /// `source` (lines end at `\n`; a `\r` before it is left out). Scans at most a few hundred
    /// bytes either side, whatever the line's length.
    pub fn around(source: &[u8], at: usize) -> LineExcerpt {
        let at = at.min(source.len());
        let is_lead = |b: u8| (b & 0xC0) != 0x80;
        // At most this many bytes are looked at on either side (four per character, even when
        // the text is not UTF-8 and has no character starts at all).
        let max_bytes = 4 * (SHOWN_LINE_CHARS + 1);
        // Character starts before `at` on the same line, nearest first (at most the limit + 1).
        let mut left: Vec<usize> = Vec::new();
        let mut i = at;
        while i > 0
            && source[i - 1] != b'\n'
            && left.len() <= SHOWN_LINE_CHARS
            && at - i < max_bytes
        {
            i -= 1;
            if is_lead(source[i]) {
                left.push(i);
            }
        }
        let left_complete = (i == 0 || source[i - 1] == b'\n') && left.len() <= SHOWN_LINE_CHARS;
        let line_start = i;
        // Character starts from `at` on, up to the line's end (at most the limit + 1).
        let mut right: Vec<usize> = Vec::new();
        let mut j = at;
        while j < source.len()
            && source[j] != b'\n'
            && right.len() <= SHOWN_LINE_CHARS
            && j - at < max_bytes
        {
            if is_lead(source[j]) {
                right.push(j);
            }
            j += 1;
        }
        let right_complete =
            (j == source.len() || source[j] == b'\n') && right.len() <= SHOWN_LINE_CHARS;
        let mut line_end = j;
        if right_complete && line_end > at && source[line_end - 1] == b'\r' {
            line_end -= 1;
            right.pop();
        }
        if left_complete && right_complete && left.len() + right.len() <= SHOWN_LINE_CHARS {
            return LineExcerpt {
                before: String::from_utf8_lossy(&source[line_start..at]).into_owned(),
                after: String::from_utf8_lossy(&source[at..line_end]).into_owned(),
                cut_right: false,
            };
        }
        // Too long: keep half the window before the finding (more if the line ends sooner).
        let room = SHOWN_LINE_CHARS - 2; // two `…` marks
        let keep_left = left
            .len()
            .min((room / 2).max(room.saturating_sub(right.len())));
        let keep_right = right.len().min(room - keep_left);
        let from = if keep_left == 0 {
            at
        } else {
            left[keep_left - 1]
        };
        let to = right.get(keep_right).copied().unwrap_or(line_end);
        let cut_left = keep_left < left.len() || !left_complete;
        LineExcerpt {
            before: format!(
                "{}{}",
                if cut_left { "…" } else { "" },
                String::from_utf8_lossy(&source[from..at])
            ),
            after: String::from_utf8_lossy(&source[at..to]).into_owned(),
            cut_right: keep_right < right.len() || !right_complete,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_col_counts_characters() {
        let text = "ab\nçd\r\nx".as_bytes();
        let idx = LineIndex::new(text);
        assert_eq!(idx.line_col(text, 0), LineCol { line: 1, column: 1 });
        assert_eq!(idx.line_col(text, 3), LineCol { line: 2, column: 1 });
        // 'ç' is two bytes: 'd' is column 2.
        assert_eq!(idx.line_col(text, 5), LineCol { line: 2, column: 2 });
        assert_eq!(
            idx.line_col(text, text.len()),
            LineCol { line: 3, column: 2 }
        );
        assert_eq!(idx.line_text(text, 2), "çd".as_bytes());
        assert_eq!(idx.line_text(text, 3), b"x");
        for offset in 0..=text.len() {
            assert_eq!(idx.line_col(text, offset), line_col(text, offset));
        }
    }

    #[test]
    fn excerpts_look_at_a_bounded_number_of_bytes() {
        // A million continuation bytes (no character starts): the excerpt still stops early.
        let mut text = vec![0x80u8; 1_000_000];
        text[500_000] = b'X';
        let excerpt = LineExcerpt::around(&text, 500_000);
        assert!(excerpt.before.starts_with('…') && excerpt.cut_right);
        assert!(excerpt.before.len() + excerpt.after.len() < 4 * 4 * (SHOWN_LINE_CHARS + 2));
        assert!(excerpt.after.starts_with('X'));
        // A short line in the middle of a text is shown whole, without its `\r`.
        let excerpt = LineExcerpt::around(b"a\r\nbc d\r\ne", 6);
        assert_eq!(
            excerpt,
            LineExcerpt {
                before: "bc ".into(),
                after: "d".into(),
                cut_right: false
            }
        );
    }

    #[test]
    fn long_lines_use_the_checkpoints_and_agree_with_a_plain_count() {
        // Several checkpoints of multi-byte characters on one line, after a first short line.
        let mut text = b"x\n".to_vec();
        for _ in 0..3 * CHECKPOINT {
            text.extend_from_slice("é".as_bytes());
        }
        text.extend_from_slice(b"abc\nz");
        let idx = LineIndex::new(&text);
        for offset in [
            2,
            3,
            4,
            1000,
            4096,
            4097,
            9000,
            text.len() - 5,
            text.len() - 1,
        ] {
            let plain = text[2..offset].iter().filter(|b| starts_char(**b)).count();
            let at = idx.line_col(&text, offset);
            assert_eq!(at, line_col(&text, offset));
            if offset < text.len() - 2 {
                assert_eq!(
                    at,
                    LineCol {
                        line: 2,
                        column: plain as u32 + 1
                    }
                );
            }
        }
    }
}
