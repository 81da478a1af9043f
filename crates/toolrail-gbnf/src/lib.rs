//! GBNF, llama.cpp's grammar dialect: parsed exactly as llama.cpp parses it ([`parser`]),
//! compiled into its element encoding ([`Grammar`]), linted ([`lint`]) and printed ([`printer`]).

pub mod charset;
pub mod diagnostic;
pub mod element;
pub mod grammar;
pub mod lint;
pub mod parser;
pub mod printer;
pub mod source;

pub use charset::CharSet;
pub use diagnostic::{Code, Diagnostic, GrammarError, Severity};
pub use element::{Element, ElementKind};
pub use grammar::{DEFAULT_ROOT, Grammar, Position};
pub use parser::{ParsedGrammar, SymbolKind, TokenVocabulary, parse, parse_with_vocab};
pub use source::{LineCol, LineIndex, Span};
