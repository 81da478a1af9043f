//! Findings about a grammar: parse errors, build errors and lint, each with a stable code,
//! a severity, a source position and, where one exists, a hint that says how to fix it.

use serde::Serialize;

use super::source::{LineCol, Span, line_col};

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

/// One finding about a grammar.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Diagnostic {
    /// Stable code, e.g. `GB101`; documented in `docs/lint.md`.
    pub code: &'static str,
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
    /// A finding at `span` of `source`.
    pub fn new(
        code: &'static str,
        severity: Severity,
        source: &[u8],
        span: Span,
        message: impl Into<String>,
    ) -> Self {
        Diagnostic {
            code,
            severity,
            message: message.into(),
            span,
            position: line_col(source, span.start as usize),
            hint: None,
        }
    }

    /// The same finding with a hint.
    pub fn with_hint(mut self, hint: impl Into<String>) -> Self {
        self.hint = Some(hint.into());
        self
    }

    /// A multi-line report: `line:col: severity[code]: message`, the source line, a caret, the hint.
    pub fn render(&self, source: &[u8], file_name: &str) -> String {
        let index = super::source::LineIndex::new(source);
        let line = String::from_utf8_lossy(index.line_text(source, self.position.line));
        let width = (self.span.end.saturating_sub(self.span.start) as usize).clamp(1, 80);
        let caret_pad: String = line
            .chars()
            .take(self.position.column as usize - 1)
            .map(|c| if c == '\t' { '\t' } else { ' ' })
            .collect();
        let mut out = format!(
            "{file_name}:{}: {}[{}]: {}\n  | {line}\n  | {caret_pad}{}",
            self.position,
            self.severity,
            self.code,
            self.message,
            "^".repeat(
                width.min(
                    line.chars()
                        .count()
                        .saturating_sub(self.position.column as usize - 1)
                        .max(1)
                )
            )
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
    pub fn code(&self) -> &'static str {
        self.diagnostics.first().map_or("GB000", |d| d.code)
    }
}
