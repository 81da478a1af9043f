//! GBNF, llama.cpp's grammar dialect: parsed exactly as llama.cpp parses it ([`parser`]),
//! compiled into its element encoding ([`Grammar`]), linted ([`lint`]) and printed ([`printer`]);
//! findings carry a stable [`Code`] with its severity; [`charset`] holds the character sets
//! classes denote; [`terminal`] makes untrusted text safe to print ([`terminal_safe`]).
//!
//! Layer: the bottom of toolrail (see ARCHITECTURE.md). Depends on no other toolrail crate and
//! on no C++, GUI or command-line crate. Invariants: the same symbol ids, rule order and
//! repetition rewrite as llama.cpp's `llama_grammar_parser`; every failure is a
//! [`GrammarError`] naming code, line:column and a hint, never a panic.

pub mod charset;
pub mod diagnostic;
pub mod element;
pub mod grammar;
pub mod lint;
pub mod parser;
pub mod printer;
pub mod source;
pub mod terminal;

pub use charset::CharSet;
pub use diagnostic::{Code, Diagnostic, GrammarError, Severity};
pub use element::{Element, ElementKind};
pub use grammar::{DEFAULT_ROOT, Grammar, Position};
pub use parser::{ParsedGrammar, SymbolKind, TokenVocabulary, parse, parse_with_vocab};
pub use source::{LineCol, LineExcerpt, LineIndex, Span};
pub use terminal::{terminal_safe, terminal_safe_gbnf};
