//! Whole-input verdicts: accepted, incomplete (a viable prefix) or rejected at a byte offset.

use std::sync::Arc;

use serde::Serialize;

use super::recognizer::{Engine, Expected, State};
use toolrail_gbnf::{Grammar, LineCol, source::line_col};

/// The three outcomes of matching a text against a grammar.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum VerdictKind {
    /// The whole text matches the grammar.
    Accepted,
    /// The text is a proper prefix of something the grammar matches.
    Incomplete,
    /// No string of the grammar starts with the text.
    Rejected,
    /// The grammar is so ambiguous that more than 65,536 stacks were live at `offset`:
    /// toolrail stops there (llama.cpp would crawl and run out of memory).
    TooAmbiguous,
}

/// The outcome of matching a text, with where and what.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verdict {
    /// Accepted, incomplete or rejected.
    pub kind: VerdictKind,
    /// Byte offset of the first rejected byte (only when rejected).
    pub offset: Option<usize>,
    /// Line and column of the rejected byte, or of the end of the text otherwise.
    pub position: LineCol,
    /// What the grammar allowed at the rejected byte, or at the end of the text.
    pub expected: Expected,
    /// The state after the accepted part of the text (for stacks and snapshots).
    pub state: State,
}

impl Verdict {
    /// True if the whole text matches.
    pub fn is_accepted(&self) -> bool {
        self.kind == VerdictKind::Accepted
    }
}

/// Matches `text` against `grammar` from the start (a fresh engine; see [`Engine`] to reuse caches).
pub fn check(grammar: &Arc<Grammar>, text: &[u8]) -> Verdict {
    let mut engine = Engine::new(Arc::clone(grammar));
    check_with(&mut engine, text)
}

/// Matches `text` with an existing engine (its caches make repeated checks fast).
pub fn check_with(engine: &mut Engine, text: &[u8]) -> Verdict {
    let start = engine.initial();
    match engine.feed(start, text) {
        Ok(state) => {
            let kind = if engine.can_end(state) {
                VerdictKind::Accepted
            } else {
                VerdictKind::Incomplete
            };
            Verdict {
                kind,
                offset: None,
                position: line_col(text, text.len()),
                expected: engine.expected(state),
                state,
            }
        }
        Err((offset, before)) if before.is_exploded() => Verdict {
            kind: VerdictKind::TooAmbiguous,
            offset: Some(offset),
            position: line_col(text, offset),
            expected: Expected::default(),
            state: before,
        },
        Err((offset, before)) => Verdict {
            kind: VerdictKind::Rejected,
            offset: Some(offset),
            position: line_col(text, offset),
            expected: engine.expected(before),
            state: before,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exponential_ambiguity_is_reported_not_followed() {
        // Every 'x' doubles the stacks (a 'y' or a 'z' must close each level).
        let g = Arc::new(
            Grammar::parse("root ::= a\na ::= \"x\" a \"y\" | \"x\" a \"z\" | \"\"").unwrap(),
        );
        let v = check(&g, "x".repeat(40).as_bytes());
        assert_eq!(v.kind, VerdictKind::TooAmbiguous);
        assert!(v.offset.unwrap() >= 10);
        assert!(check(&g, b"xxyz").is_accepted());
    }

    #[test]
    fn long_rule_chains_do_not_overflow() {
        let mut text = String::from("root ::= r0\n");
        for i in 0..200_000 {
            text.push_str(&format!("r{i} ::= r{}\n", i + 1));
        }
        text.push_str("r200000 ::= \"x\"\n");
        let g = toolrail_gbnf::Grammar::parse(&text).unwrap();
        assert!(check(&std::sync::Arc::new(g), b"x").is_accepted());
    }
}
