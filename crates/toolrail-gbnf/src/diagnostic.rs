//! Findings about a grammar: parse errors, build errors and lint, each with a stable code,
//! a severity, a source position and, where one exists, a hint that says how to fix it.

use serde::Serialize;

use super::source::{LineCol, LineExcerpt, LineIndex, Span, line_col};

/// How serious a finding is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// Worth knowing; the grammar works.
    Info,
    /// The grammar works but probably not as intended, or slowly.
    Warning,
    /// llama.cpp rejects the grammar, or it cannot work.
    Error,
}

impl std::fmt::Display for Severity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Severity::Info => "info",
            Severity::Warning => "warning",
            Severity::Error => "error",
        })
    }
}

/// The stable code of a finding, documented in `docs/lint.md`, with its usual severity.
///
/// Codes are ordered by number; they print and serialise as `GB001`…
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Code {
    /// GB000: no finding (an empty error; never built).
    Unknown,
    /// GB001: syntax: a rule name, `::=` or the end of a line was expected.
    Syntax,
    /// GB002: an unterminated literal, class, group or escape.
    Unterminated,
    /// GB003: an unknown escape, or the wrong number of hex digits.
    BadEscape,
    /// GB004: a repetition operator with nothing before it.
    NothingToRepeat,
    /// GB005: over llama.cpp's repetition limits, or `{m,n}` with n < m.
    RepetitionLimit,
    /// GB006: a malformed `{...}` (e.g. `{,n}`).
    MalformedRepetition,
    /// GB007: a malformed token reference `<[id]>` / `!<...>`.
    MalformedTokenRef,
    /// GB008: a `<text>` token without a vocabulary, or that is not exactly one token.
    UnknownToken,
    /// GB009: the grammar has no rules.
    NoRules,
    /// GB010: groups nested more than 128 deep.
    TooDeep,
    /// GB012: a NUL byte: llama.cpp ignores everything after it.
    NulByte,
    /// GB013: an empty class `[]` is dropped and matches the empty string.
    EmptyClass,
    /// GB101: a rule is used but never defined.
    UndefinedRule,
    /// GB102: no `root` rule.
    MissingRoot,
    /// GB103: left recursion, as llama.cpp detects it.
    LeftRecursion,
    /// GB104: left recursion hidden behind rules that only derive the empty string.
    HiddenLeftRecursion,
    /// GB105: a repetition maximum over 2000 silently becomes unbounded.
    UnboundedMaximum,
    /// GB106: a named rule never used from `root`.
    UnusedRule,
    /// GB107: a rule that can never finish (a warning when generation cannot reach it).
    NeverFinishes,
    /// GB108: the grammar matches no string at all.
    EmptyLanguage,
    /// GB109: an `x? x? x?` chain: write `x{0,3}`.
    OptionalChain,
    /// GB110: a dead end: generation can get there but never complete.
    DeadEnd,
    /// GB111: a rule defined twice: the last definition wins.
    DuplicateRule,
    /// GB112: a range written backwards (`[z-a]`) matches nothing.
    BackwardsRange,
    /// GB113: two variable repetitions of the same item side by side (`x{0,2000} x{0,2000}`):
    /// a run splits between them in many ways, each a stack llama.cpp carries.
    AmbiguousRepetition,
}

impl Code {
    /// Every code, in order.
    pub const ALL: &'static [Code] = &[
        Code::Unknown,
        Code::Syntax,
        Code::Unterminated,
        Code::BadEscape,
        Code::NothingToRepeat,
        Code::RepetitionLimit,
        Code::MalformedRepetition,
        Code::MalformedTokenRef,
        Code::UnknownToken,
        Code::NoRules,
        Code::TooDeep,
        Code::NulByte,
        Code::EmptyClass,
        Code::UndefinedRule,
        Code::MissingRoot,
        Code::LeftRecursion,
        Code::HiddenLeftRecursion,
        Code::UnboundedMaximum,
        Code::UnusedRule,
        Code::NeverFinishes,
        Code::EmptyLanguage,
        Code::OptionalChain,
        Code::DeadEnd,
        Code::DuplicateRule,
        Code::BackwardsRange,
        Code::AmbiguousRepetition,
    ];

    /// The code as written in reports and documentation, e.g. `GB101`.
    pub fn as_str(self) -> &'static str {
        match self {
            Code::Unknown => "GB000",
            Code::Syntax => "GB001",
            Code::Unterminated => "GB002",
            Code::BadEscape => "GB003",
            Code::NothingToRepeat => "GB004",
            Code::RepetitionLimit => "GB005",
            Code::MalformedRepetition => "GB006",
            Code::MalformedTokenRef => "GB007",
            Code::UnknownToken => "GB008",
            Code::NoRules => "GB009",
            Code::TooDeep => "GB010",
            Code::NulByte => "GB012",
            Code::EmptyClass => "GB013",
            Code::UndefinedRule => "GB101",
            Code::MissingRoot => "GB102",
            Code::LeftRecursion => "GB103",
            Code::HiddenLeftRecursion => "GB104",
            Code::UnboundedMaximum => "GB105",
            Code::UnusedRule => "GB106",
            Code::NeverFinishes => "GB107",
            Code::EmptyLanguage => "GB108",
            Code::OptionalChain => "GB109",
            Code::DeadEnd => "GB110",
            Code::DuplicateRule => "GB111",
            Code::BackwardsRange => "GB112",
            Code::AmbiguousRepetition => "GB113",
        }
    }

    /// Whether an error-severity finding with this code makes the grammar unusable: it matches
    /// nothing (GB108), or generation can reach a point from which it can never be completed
    /// (GB107 as an error, GB110). Running such a grammar can only end in an incomplete output
    /// or an abort in llama.cpp, so `check` and `generate` stop with the finding instead.
    pub fn makes_grammar_unusable(self) -> bool {
        matches!(
            self,
            Code::EmptyLanguage | Code::DeadEnd | Code::NeverFinishes
        )
    }

    /// How serious a finding with this code usually is (GB107 is a warning where generation
    /// cannot reach the rule).
    pub fn severity(self) -> Severity {
        match self {
            Code::NulByte
            | Code::EmptyClass
            | Code::UnboundedMaximum
            | Code::UnusedRule
            | Code::OptionalChain
            | Code::DuplicateRule
            | Code::BackwardsRange
            | Code::AmbiguousRepetition => Severity::Warning,
            _ => Severity::Error,
        }
    }
}

impl std::fmt::Display for Code {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl PartialEq<&str> for Code {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl Serialize for Code {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

/// One finding about a grammar.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Diagnostic {
    /// Stable code, e.g. `GB101`; documented in `docs/lint.md`.
    pub code: Code,
    /// How serious it is.
    pub severity: Severity,
    /// A sentence a person understands.
    pub message: String,
    /// Where in the grammar source it is.
    pub span: Span,
    /// Line and column of `span.start`.
    pub position: LineCol,
    /// How to fix it, when there is a known fix.
    pub hint: Option<String>,
}

impl Diagnostic {
    /// A finding at `span` of `source`, with its code's usual severity.
    pub fn new(code: Code, source: &[u8], span: Span, message: impl Into<String>) -> Self {
        Diagnostic {
            code,
            severity: code.severity(),
            message: message.into(),
            span,
            position: line_col(source, span.start as usize),
            hint: None,
        }
    }

    /// Like [`Diagnostic::new`], finding the position with `index` (built from `source`): for
    /// many findings on one source, where one-off line counting would be quadratic.
    pub fn new_indexed(
        code: Code,
        source: &[u8],
        index: &LineIndex,
        span: Span,
        message: impl Into<String>,
    ) -> Self {
        Diagnostic {
            code,
            severity: code.severity(),
            message: message.into(),
            span,
            position: index.line_col(source, span.start as usize),
            hint: None,
        }
    }

    /// The same finding with another severity than its code's usual one.
    pub fn with_severity(mut self, severity: Severity) -> Self {
        self.severity = severity;
        self
    }

    /// The same finding with a hint.
    pub fn with_hint(mut self, hint: impl Into<String>) -> Self {
        self.hint = Some(hint.into());
        self
    }

    /// A multi-line report: `line:col: severity[code]: message`, the source line, a caret, the hint.
    ///
    /// A line longer than [`SHOWN_LINE_CHARS`](crate::source::SHOWN_LINE_CHARS) characters is shown as a window around the
    /// finding, with `…` where it was cut ([`LineExcerpt`]); the work and the output do not
    /// grow with the line.
    pub fn render(&self, source: &[u8], file_name: &str) -> String {
        let shown = LineExcerpt::around(source, self.span.start as usize);
        let width = (self.span.end.saturating_sub(self.span.start) as usize).clamp(1, 80);
        let caret_pad: String = shown
            .before
            .chars()
            .map(|c| if c == '\t' { '\t' } else { ' ' })
            .collect();
        let carets = width.min(shown.after.chars().count().max(1));
        let mut out = format!(
            "{file_name}:{}: {}[{}]: {}\n  | {}{}{}\n  | {caret_pad}{}",
            self.position,
            self.severity,
            self.code,
            self.message,
            shown.before,
            shown.after,
            if shown.cut_right { "…" } else { "" },
            "^".repeat(carets)
        );
        if let Some(hint) = &self.hint {
            out.push_str(&format!("\n  = hint: {hint}"));
        }
        out
    }
}

impl std::fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.position, self.message)?;
        if let Some(hint) = &self.hint {
            write!(f, " ({hint})")?;
        }
        Ok(())
    }
}

/// Why a grammar cannot be used: one or more error findings (the first is the one llama.cpp
/// would report; the others are further problems of the same kind, e.g. every undefined rule).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{}", .diagnostics.first().map(|d| d.to_string()).unwrap_or_default())]
pub struct GrammarError {
    /// The findings, most important first; never empty.
    pub diagnostics: Vec<Diagnostic>,
}

impl GrammarError {
    /// An error made of a single finding.
    pub fn single(diagnostic: Diagnostic) -> Self {
        GrammarError {
            diagnostics: vec![diagnostic],
        }
    }

    /// The stable code of the first finding.
    pub fn code(&self) -> Code {
        self.diagnostics.first().map_or(Code::Unknown, |d| d.code)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::SHOWN_LINE_CHARS;

    fn at(source: &[u8], start: usize, len: usize) -> Diagnostic {
        Diagnostic::new(Code::Syntax, source, Span::new(start, start + len), "bad")
    }

    /// The column (in characters) of the first caret, and the shown line above it.
    fn caret_under(rendered: &str) -> (String, usize) {
        let lines: Vec<&str> = rendered.lines().collect();
        let shown = lines[1].strip_prefix("  | ").unwrap().to_string();
        let caret = lines[2].strip_prefix("  | ").unwrap();
        (shown, caret.chars().position(|c| c == '^').unwrap())
    }

    #[test]
    fn short_lines_are_shown_whole() {
        let src = b"root ::= \"a\"\nx ::= \ty \"b\"\r\n";
        let d = at(src, 22, 1); // the opening quote of "b"
        assert_eq!(
            d.render(src, "g.gbnf"),
            "g.gbnf:2:10: error[GB001]: bad\n  | x ::= \ty \"b\"\n  |       \t  ^"
        );
        let end = at(src, src.len(), 0);
        assert!(end.render(src, "g").ends_with("  | \n  | ^"));
    }

    #[test]
    fn a_huge_line_renders_a_window_with_the_caret_in_place() {
        // 10 MB on one line, with multi-byte characters: a few hundred bytes of report.
        let mut src = "é".repeat(5_000_000).into_bytes();
        let offset = 2 * 2_500_000; // the 2,500,001st character
        src[offset] = b'X';
        src[offset + 1] = b'Y';
        let d = at(&src, offset, 2);
        let out = d.render(&src, "big.gbnf");
        assert!(out.len() < 600, "{} bytes", out.len());
        assert!(out.starts_with("big.gbnf:1:2500001: error[GB001]"));
        let (shown, caret) = caret_under(&out);
        assert!(shown.starts_with('…') && shown.ends_with('…'), "{shown}");
        assert!(shown.chars().count() <= SHOWN_LINE_CHARS);
        assert_eq!(shown.chars().nth(caret), Some('X'));
        // Near either end of the line the window runs to that end.
        let first = at(&src, 0, 1).render(&src, "g");
        let (shown, caret) = caret_under(&first);
        assert_eq!((caret, shown.chars().count()), (0, SHOWN_LINE_CHARS - 1));
        assert!(shown.ends_with('…') && !shown.starts_with('…'));
        let last = at(&src, src.len() - 2, 1).render(&src, "g");
        let (shown, caret) = caret_under(&last);
        assert!(shown.starts_with('…') && !shown.ends_with('…'), "{shown}");
        assert_eq!(caret, shown.chars().count() - 1);
    }

    #[test]
    fn every_code_is_documented_with_its_severity() {
        let doc =
            std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/lint.md"))
                .unwrap();
        for code in Code::ALL.iter().filter(|c| **c != Code::Unknown) {
            let row = doc
                .lines()
                .find(|l| l.starts_with(&format!("| {code} |")))
                .unwrap_or_else(|| panic!("{code} is not in docs/lint.md"));
            let severity = row.split('|').nth(2).unwrap_or("").trim();
            assert!(
                severity.starts_with(&code.severity().to_string()),
                "{code}: docs/lint.md says {severity}, the code says {}",
                code.severity()
            );
        }
        assert_eq!(Code::ALL.len(), 26);
        assert!(
            Code::ALL
                .windows(2)
                .all(|w| w[0] < w[1] && w[0].as_str() < w[1].as_str())
        );
    }
}
