//! llama.cpp's compiled grammar form: each rule is a flat list of elements, alternatives
//! separated by `Alt` and closed by `End` (`llama_grammar_element` in llama-grammar.h).

use serde::Serialize;

/// The element types of llama.cpp, with the same numeric values (`llama_gretype`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[repr(u8)]
pub enum ElementKind {
    /// End of a rule definition.
    End = 0,
    /// Start of another alternative of the rule.
    Alt = 1,
    /// Reference to another rule (value: rule id).
    RuleRef = 2,
    /// A character (value: code point); starts a character class.
    Char = 3,
    /// A negated character class start (`[^...]`).
    CharNot = 4,
    /// Upper bound of a range whose lower bound is the preceding element.
    CharRngUpper = 5,
    /// A further character of the class started before it.
    CharAlt = 6,
    /// Any character (`.`).
    CharAny = 7,
    /// Exactly one token (value: token id), `<[id]>`.
    Token = 8,
    /// Any token but one, `!<[id]>`.
    TokenNot = 9,
}

impl ElementKind {
    /// llama.cpp's enum name, as in its tests (`LLAMA_GRETYPE_CHAR`, ...).
    pub fn llama_name(self) -> &'static str {
        match self {
            ElementKind::End => "LLAMA_GRETYPE_END",
            ElementKind::Alt => "LLAMA_GRETYPE_ALT",
            ElementKind::RuleRef => "LLAMA_GRETYPE_RULE_REF",
            ElementKind::Char => "LLAMA_GRETYPE_CHAR",
            ElementKind::CharNot => "LLAMA_GRETYPE_CHAR_NOT",
            ElementKind::CharRngUpper => "LLAMA_GRETYPE_CHAR_RNG_UPPER",
            ElementKind::CharAlt => "LLAMA_GRETYPE_CHAR_ALT",
            ElementKind::CharAny => "LLAMA_GRETYPE_CHAR_ANY",
            ElementKind::Token => "LLAMA_GRETYPE_TOKEN",
            ElementKind::TokenNot => "LLAMA_GRETYPE_TOKEN_NOT",
        }
    }

    /// The kind with llama.cpp's enum name `name`.
    pub fn from_llama_name(name: &str) -> Option<Self> {
        ALL_KINDS.into_iter().find(|k| k.llama_name() == name)
    }

    /// True for `End` and `Alt`: the end of one alternative.
    pub fn is_end_of_sequence(self) -> bool {
        matches!(self, ElementKind::End | ElementKind::Alt)
    }

    /// True for the elements that can start a character class (a terminal on a stack top).
    pub fn starts_char_class(self) -> bool {
        matches!(
            self,
            ElementKind::Char | ElementKind::CharNot | ElementKind::CharAny
        )
    }

    /// True for `Token` and `TokenNot`.
    pub fn is_token(self) -> bool {
        matches!(self, ElementKind::Token | ElementKind::TokenNot)
    }
}

const ALL_KINDS: [ElementKind; 10] = [
    ElementKind::End,
    ElementKind::Alt,
    ElementKind::RuleRef,
    ElementKind::Char,
    ElementKind::CharNot,
    ElementKind::CharRngUpper,
    ElementKind::CharAlt,
    ElementKind::CharAny,
    ElementKind::Token,
    ElementKind::TokenNot,
];

/// One element of a compiled rule: a kind and a value (code point, rule id or token id).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct Element {
    /// What the element is.
    pub kind: ElementKind,
    /// Code point, rule id or token id, depending on `kind`; 0 otherwise.
    pub value: u32,
}

impl Element {
    /// An element of `kind` with `value`.
    pub const fn new(kind: ElementKind, value: u32) -> Self {
        Element { kind, value }
    }
}
