//! A tool's own argument grammar: GBNF written by the user (a Python docstring's `Grammar:`
//! section) that replaces the arguments rule the tool's schema would generate.
//!
//! The text is parsed with `toolrail-gbnf` (llama.cpp's dialect) and linted; its rule names are
//! kept as typed data (each place a name is written, from the parser's definitions and
//! references), so the grammar builder can give every rule a per-tool name
//! ([`CustomGrammar::renamed`]) and two tools' `value ::= ...` cannot clash.
//!
//! What the start rule describes depends on the envelope: the arguments object in the JSON
//! envelopes (`openai`, `llama3`, `hermes`) and in `gemma`, the text between the parentheses in
//! `pythonic` calls. The start rule is `root` when the text defines one, else the first rule
//! defined. Four base rules may be used without defining them (see [`BaseType`]): `string`,
//! `int`, `float` and `bool`. The validator still checks the arguments against the schema made
//! from the type hints, so a custom grammar that lets through arguments the hints forbid shows up
//! as invalid calls, never as silently accepted ones.

use std::ops::Range;

use toolrail_gbnf::lint::lint;
use toolrail_gbnf::{Severity, SymbolKind, parse};

/// A rule a custom grammar may use without defining it, built by the grammar builder in the
/// envelope's own syntax.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum BaseType {
    /// `string`: a double-quoted string with JSON escapes (valid in Python too).
    String,
    /// `int`: an integer.
    Int,
    /// `float`: a number (JSON number syntax).
    Float,
    /// `bool`: `True`/`False` in pythonic calls, `true`/`false` in the JSON envelopes.
    Bool,
}

impl BaseType {
    /// Every base type.
    pub const ALL: [BaseType; 4] = [
        BaseType::String,
        BaseType::Int,
        BaseType::Float,
        BaseType::Bool,
    ];

    /// The rule name a custom grammar uses for it.
    pub fn name(self) -> &'static str {
        match self {
            BaseType::String => "string",
            BaseType::Int => "int",
            BaseType::Float => "float",
            BaseType::Bool => "bool",
        }
    }

    /// The base type called `name`, if any.
    pub fn from_name(name: &str) -> Option<BaseType> {
        Self::ALL.into_iter().find(|b| b.name() == name)
    }

    /// The JSON Schema the builder converts for it (the JSON envelopes; `bool` in pythonic
    /// calls is written as a literal instead).
    pub fn schema(self) -> serde_json::Value {
        let ty = match self {
            BaseType::String => "string",
            BaseType::Int => "integer",
            BaseType::Float => "number",
            BaseType::Bool => "boolean",
        };
        serde_json::json!({ "type": ty })
    }

    /// A stand-in definition used only to parse and lint the custom text on its own.
    fn lint_stub(self) -> &'static str {
        match self {
            BaseType::String => r#""\"" [^"\\]* "\"""#,
            BaseType::Int => r#""-"? [0-9]+"#,
            BaseType::Float => r#""-"? [0-9]+ ("." [0-9]+)?"#,
            BaseType::Bool => r#""True" | "False""#,
        }
    }
}

/// A custom grammar could not be used: what and where (1-based line and column in its text).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{line}:{column}: {message}")]
pub struct CustomGrammarError {
    /// 1-based line in the grammar text.
    pub line: u32,
    /// 1-based column in the grammar text.
    pub column: u32,
    /// What is wrong (with the lint code when it comes from lint).
    pub message: String,
}

/// A lint warning about a custom grammar (it works, probably not as meant).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CustomGrammarWarning {
    /// 1-based line in the grammar text.
    pub line: u32,
    /// 1-based column in the grammar text.
    pub column: u32,
    /// The finding, with its code.
    pub message: String,
}

/// A parsed, linted custom argument grammar (see the module docs).
#[derive(Debug, Clone, PartialEq)]
pub struct CustomGrammar {
    source: String,
    root: String,
    /// Every place a rule name is written, in text order.
    names: Vec<(Range<usize>, String)>,
    defined: Vec<String>,
    base_types: Vec<BaseType>,
    warnings: Vec<CustomGrammarWarning>,
}

impl CustomGrammar {
    /// Parses and lints `text`; errors are parse errors, rules used and not defined (other than
    /// the [`BaseType`]s) and lint errors, each with its line:column in `text`.
    pub fn parse(text: &str) -> Result<CustomGrammar, CustomGrammarError> {
        // The base rules are put before the text (so a rule of the user's with the same name,
        // defined later, wins as in llama.cpp) for the names the text does not define itself.
        let everything = Stubs::new(text, &BaseType::ALL);
        let user_defined: Vec<String> = match parse(&everything.full) {
            Ok(parsed) => parsed
                .definitions
                .iter()
                .filter(|d| d.name_span.start as usize >= everything.offset)
                .filter_map(|d| parsed.symbols.get(d.symbol as usize))
                .map(|s| s.name.clone())
                .collect(),
            Err(e) => return Err(everything.error(&e.diagnostics)),
        };
        let bases: Vec<BaseType> = BaseType::ALL
            .into_iter()
            .filter(|b| !user_defined.iter().any(|n| n == b.name()))
            .collect();
        let stubs = Stubs::new(text, &bases);
        let parsed = parse(&stubs.full).map_err(|e| stubs.error(&e.diagnostics))?;
        let mut defined: Vec<String> = Vec::new();
        let mut names = Vec::new();
        for d in &parsed.definitions {
            let start = d.name_span.start as usize;
            let Some(symbol) = parsed.symbols.get(d.symbol as usize) else {
                continue;
            };
            if start < stubs.offset {
                continue;
            }
            if !defined.contains(&symbol.name) {
                defined.push(symbol.name.clone());
            }
            names.push((stubs.local(d.name_span.range()), symbol.name.clone()));
        }
        let Some(first) = defined.first().cloned() else {
            return Err(CustomGrammarError {
                line: 1,
                column: 1,
                message: "the grammar defines no rule".into(),
            });
        };
        let root = if defined.iter().any(|n| n == "root") {
            "root".to_owned()
        } else {
            first
        };
        let mut base_types = Vec::new();
        for r in &parsed.references {
            let Some(symbol) = parsed.symbols.get(r.symbol as usize) else {
                continue;
            };
            if symbol.kind != SymbolKind::Named || (r.span.start as usize) < stubs.offset {
                continue;
            }
            if !defined.contains(&symbol.name)
                && let Some(base) = BaseType::from_name(&symbol.name)
                && !base_types.contains(&base)
            {
                base_types.push(base);
            }
            names.push((stubs.local(r.span.range()), symbol.name.clone()));
        }
        names.sort_by_key(|(range, _)| range.start);
        base_types.sort();
        let mut warnings = Vec::new();
        for finding in lint(&stubs.full, &root) {
            // findings inside the stand-ins are not the user's
            if (finding.span.start as usize) < stubs.offset {
                continue;
            }
            let (line, column) = stubs.place(finding.position.line, finding.position.column);
            let message = format!("{}: {}", finding.code.as_str(), finding.message);
            match finding.severity {
                Severity::Error => {
                    return Err(CustomGrammarError {
                        line,
                        column,
                        message,
                    });
                }
                Severity::Warning => warnings.push(CustomGrammarWarning {
                    line,
                    column,
                    message,
                }),
                Severity::Info => {}
            }
        }
        Ok(CustomGrammar {
            source: text.to_owned(),
            root,
            names,
            defined,
            base_types,
            warnings,
        })
    }

    /// The grammar text as written.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// The start rule's name as written (`root`, or the first rule defined).
    pub fn root(&self) -> &str {
        &self.root
    }

    /// The rules the text defines, in order of first definition.
    pub fn defined_names(&self) -> &[String] {
        &self.defined
    }

    /// The base rules the text uses without defining them.
    pub fn base_types(&self) -> &[BaseType] {
        &self.base_types
    }

    /// Lint warnings about the text.
    pub fn warnings(&self) -> &[CustomGrammarWarning] {
        &self.warnings
    }

    /// The text with every rule name (definitions and references, never text inside literals or
    /// classes) replaced by `rename(name)`.
    pub fn renamed(&self, rename: &dyn Fn(&str) -> String) -> String {
        let mut out = String::with_capacity(self.source.len() + 16 * self.names.len());
        let mut at = 0;
        for (range, name) in &self.names {
            if range.start < at || range.end > self.source.len() {
                continue;
            }
            out.push_str(&self.source[at..range.start]);
            out.push_str(&rename(name));
            at = range.end;
        }
        out.push_str(&self.source[at..]);
        out
    }
}

/// The text with stand-in definitions of some base rules put before it (one line each), and
/// the way back from positions in the whole to positions in the text.
struct Stubs {
    full: String,
    /// Byte length of the stand-ins.
    offset: usize,
    /// Lines they take.
    lines: u32,
}

impl Stubs {
    fn new(text: &str, bases: &[BaseType]) -> Stubs {
        let mut full = String::new();
        for base in bases {
            full.push_str(&format!("{} ::= {}\n", base.name(), base.lint_stub()));
        }
        let offset = full.len();
        full.push_str(text);
        Stubs {
            full,
            offset,
            lines: bases.len() as u32,
        }
    }

    fn local(&self, range: Range<usize>) -> Range<usize> {
        range.start.saturating_sub(self.offset)..range.end.saturating_sub(self.offset)
    }

    fn place(&self, line: u32, column: u32) -> (u32, u32) {
        (line.saturating_sub(self.lines).max(1), column)
    }

    /// The first finding of a failed parse, placed in the user's text.
    fn error(&self, diagnostics: &[toolrail_gbnf::Diagnostic]) -> CustomGrammarError {
        match diagnostics.first() {
            Some(d) => {
                let (line, column) = self.place(d.position.line, d.position.column);
                CustomGrammarError {
                    line,
                    column,
                    message: format!("{}: {}", d.code.as_str(), d.message),
                }
            }
            None => CustomGrammarError {
                line: 1,
                column: 1,
                message: "not a GBNF grammar".into(),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_renamed_but_literals_are_not() {
        let g =
            CustomGrammar::parse("root ::= \"value\" value string\nvalue ::= \"root\"").unwrap();
        assert_eq!(g.root(), "root");
        assert_eq!(g.base_types(), &[BaseType::String]);
        let text = g.renamed(&|n| format!("t-{n}"));
        assert_eq!(
            text,
            "t-root ::= \"value\" t-value t-string\nt-value ::= \"root\""
        );
    }

    #[test]
    fn an_undefined_rule_is_an_error_with_its_position() {
        let err = CustomGrammar::parse("args ::= \"x\" nope").unwrap_err();
        assert_eq!((err.line, err.column), (1, 14), "{err}");
        assert!(
            err.message.contains("GB101") && err.message.contains("nope"),
            "{err}"
        );
    }

    #[test]
    fn the_first_rule_is_the_start_without_root() {
        let g = CustomGrammar::parse("call ::= item\nitem ::= [a-z]+").unwrap();
        assert_eq!(g.root(), "call");
        assert_eq!(g.defined_names(), &["call".to_owned(), "item".to_owned()]);
    }
}
