//! Stack snapshots for display: each stack of a state as frames a person can read, mapped back
//! to the grammar source.

use serde::{Deserialize, Serialize};

use super::recognizer::{Engine, State};
use toolrail_gbnf::Span;

/// One frame of a stack: an element position inside a rule alternative.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Frame {
    /// Flattened element position.
    pub pos: u32,
    /// Rule id.
    pub rule: u32,
    /// Rule name, as llama.cpp names it.
    pub rule_name: String,
    /// 0-based alternative within the rule.
    pub alternative: u32,
    /// 0-based element index within the alternative.
    pub index: u32,
    /// Source span of the element.
    pub span: Span,
}

/// One stack, bottom frame first; an empty stack means the grammar may end here.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StackView {
    /// Frames, bottom first; the last one is the terminal expected next.
    pub frames: Vec<Frame>,
}

/// Every stack of a state.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Snapshot {
    /// The stacks, in llama.cpp's order.
    pub stacks: Vec<StackView>,
    /// True while a UTF-8 sequence is cut between tokens.
    pub partial_utf8: bool,
}

impl Engine {
    /// The stacks of `state`, ready to display.
    pub fn snapshot(&self, state: State) -> Snapshot {
        let grammar = self.grammar();
        let stacks = self
            .stacks(state)
            .iter()
            .map(|&stack| StackView {
                frames: self
                    .stack_positions(stack)
                    .into_iter()
                    .map(|pos| {
                        let p = grammar.position(pos);
                        Frame {
                            pos,
                            rule: p.rule,
                            rule_name: grammar.rule_name(p.rule).to_string(),
                            alternative: p.alternative,
                            index: p.index,
                            span: grammar.span(pos),
                        }
                    })
                    .collect(),
            })
            .collect();
        Snapshot {
            stacks,
            partial_utf8: !state.partial.is_complete(),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use crate::Engine;
    use toolrail_gbnf::Grammar;

    #[test]
    fn frames_name_rules_and_point_into_the_source() {
        let src = "root ::= \"{\" pair \"}\"\npair ::= [a-z]+ \":\" [0-9]";
        let g = Arc::new(Grammar::parse(src).unwrap());
        let mut engine = Engine::new(Arc::clone(&g));
        let state = engine.feed(engine.initial(), b"{ab").unwrap();
        let snap = engine.snapshot(state);
        // After "{ab": ':' in pair, or more letters (pair_2 is the rule llama.cpp makes for `+`).
        let tops: Vec<String> = snap
            .stacks
            .iter()
            .map(|s| {
                let top = s.frames.last().unwrap();
                format!("{}:{}", top.rule_name, &src[top.span.range()])
            })
            .collect();
        assert_eq!(tops, vec!["pair::", "pair_2:[a-z]"]);
        let bottom = &snap.stacks[0].frames[0];
        assert_eq!(
            (bottom.rule_name.as_str(), &src[bottom.span.range()]),
            ("root", "}")
        );
        assert_eq!((bottom.alternative, bottom.index), (0, 2));
        assert!(!snap.partial_utf8);
    }
}
