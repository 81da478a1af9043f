//! The reasoning budget of a chat-template run, as llama-server b11434 runs it
//! (`common/reasoning-budget.cpp`, set up by `tools/server/server-common.cpp` and
//! `server-schema.cpp`, used by `common/sampling.cpp`).
//!
//! When a template has thinking tags, llama-server gives the sampler a small state machine over
//! token ids: idle until the start tag's tokens appear, then counting down the budget; when the
//! budget is spent (and the last token completed its UTF-8 character) it forces the budget
//! message and the first end tag, token by token, every other token masked; a natural end tag
//! ends thinking earlier. A new start tag re-arms it. The generation prompt's tokens are fed to it
//! first (a prompt that opens `<think>` starts the count).
//!
//! It is also what keeps a lazy tool-call grammar out of the thinking block: with a lazy grammar
//! llama-server builds this machine even with no budget (`--reasoning-budget -1`), and the grammar
//! — its trigger search included — sees no token while thinking is counted or forced; the end tag
//! that closes thinking is then replayed into it.
//!
//! Pure Rust, so both of toolrail's engines (its own recognizer and llama.cpp's grammar sampler)
//! run behind the same machine.

use serde::{Deserialize, Serialize};

use crate::record::ThinkingNote;

/// The state of the machine (llama.cpp's `common_reasoning_budget_state`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ThinkingState {
    /// Waiting for the start tag.
    Idle,
    /// Inside thinking: counting the budget down, watching for an end tag.
    Counting,
    /// The budget is spent; the last token ended inside a UTF-8 character, so the next tokens
    /// may complete it before the end is forced.
    WaitingUtf8,
    /// Forcing the budget message and the end tag, one token at a time.
    Forcing,
    /// Thinking is over (until a new start tag).
    Done,
}

/// How llama-server sets the machine up for a request: the tags as token ids, the forced
/// sequence and the budget.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReasoningSetup {
    /// The start tag's tokens (`<think>`).
    pub start: Vec<u32>,
    /// Each end tag's tokens (`</think>`, …); the first is forced when the budget runs out.
    pub ends: Vec<Vec<u32>>,
    /// What is forced when the budget runs out: the budget message's tokens, then the first end
    /// tag's.
    pub forced: Vec<u32>,
    /// The budget in tokens; `None` is no limit (the machine then only keeps a lazy grammar out
    /// of the thinking block).
    pub budget: Option<u32>,
    /// The generation prompt's tokens, fed to the machine before generation.
    pub prefill: Vec<u32>,
}

/// The reasoning budget as a request states it, in text: the worker turns it into its model's
/// tokens ([`ReasoningSpec::resolve`]), so whoever builds a run needs no model of its own.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReasoningSpec {
    /// The start tag (`<think>`).
    pub start_tag: String,
    /// The end tags (`</think>`, …); the first is forced when the budget runs out.
    pub end_tags: Vec<String>,
    /// Forced before the end tag when the budget runs out ("" for none).
    pub message: String,
    /// The budget in tokens; `None` is no limit.
    pub budget: Option<u32>,
    /// The generation prompt, fed to the machine before generation.
    pub generation_prompt: String,
}

impl ReasoningSpec {
    /// The machine's set-up in `model`'s tokens (special tags parsed as tokens), or `None` when
    /// a tag gives no tokens.
    pub fn resolve(&self, model: &crate::Model) -> Option<ReasoningSetup> {
        let start = model.tokenize(&self.start_tag, false, true);
        let ends: Vec<Vec<u32>> = (self.end_tags.iter())
            .map(|tag| model.tokenize(tag, false, true))
            .filter(|tokens| !tokens.is_empty())
            .collect();
        if start.is_empty() || ends.is_empty() {
            return None;
        }
        let mut forced = if self.message.is_empty() {
            Vec::new()
        } else {
            model.tokenize(&self.message, false, true)
        };
        forced.extend_from_slice(&ends[0]);
        // The sampler's prefill: the generation prompt's tokens, without a leading space token
        // some tokenizers add before a special token (common/sampling.cpp).
        let mut prefill = model.tokenize(&self.generation_prompt, false, true);
        let starts_with_space = |bytes: &[u8]| bytes.first().is_some_and(u8::is_ascii_whitespace);
        if let Some(&first) = prefill.first()
            && starts_with_space(&model.piece(first))
            && !starts_with_space(self.generation_prompt.as_bytes())
        {
            prefill.remove(0);
        }
        Some(ReasoningSetup {
            start,
            ends,
            forced,
            budget: self.budget,
            prefill,
        })
    }
}

/// Finds token sequences as llama.cpp's Aho–Corasick token matcher does: after each token, the
/// longest sequence that ends there (counting only tokens since the last match or reset).
#[derive(Clone, Debug)]
struct SequenceMatcher {
    sequences: Vec<Vec<u32>>,
    longest: usize,
    recent: Vec<u32>,
}

impl SequenceMatcher {
    fn new(sequences: &[Vec<u32>]) -> SequenceMatcher {
        let mut unique: Vec<Vec<u32>> = Vec::new();
        for sequence in sequences {
            if !sequence.is_empty() && !unique.contains(sequence) {
                unique.push(sequence.clone());
            }
        }
        let longest = unique.iter().map(Vec::len).max().unwrap_or(0);
        SequenceMatcher {
            sequences: unique,
            longest,
            recent: Vec::new(),
        }
    }

    /// The index of the longest sequence ending at `token`, if one does (then starts afresh).
    fn advance(&mut self, token: u32) -> Option<usize> {
        self.recent.push(token);
        if self.recent.len() > self.longest {
            let extra = self.recent.len() - self.longest;
            self.recent.drain(..extra);
        }
        let found = self
            .sequences
            .iter()
            .enumerate()
            .filter(|(_, s)| self.recent.ends_with(s))
            .max_by_key(|(_, s)| s.len())
            .map(|(i, _)| i);
        if found.is_some() {
            self.recent.clear();
        }
        found
    }

    fn reset(&mut self) {
        self.recent.clear();
    }
}

/// Whether `piece` ends on a whole UTF-8 character (llama.cpp's `common_utf8_is_complete`).
fn utf8_complete(piece: &[u8]) -> bool {
    if piece.is_empty() {
        return true;
    }
    for i in 1..=piece.len().min(4) {
        let c = piece[piece.len() - i];
        if c & 0xC0 != 0x80 {
            let expected = match c {
                0xF0.. => 4,
                0xE0.. => 3,
                0xC0.. => 2,
                _ => 1,
            };
            return i >= expected;
        }
    }
    false
}

/// The machine itself.
#[derive(Clone, Debug)]
pub struct ReasoningBudget {
    start: SequenceMatcher,
    end: SequenceMatcher,
    forced: Vec<u32>,
    budget: Option<u32>,
    remaining: u32,
    state: ThinkingState,
    force_position: usize,
    end_match: Option<usize>,
}

impl ReasoningBudget {
    /// The machine for `setup`, with the generation prompt's tokens fed to it; `piece` gives a
    /// token's bytes (for the UTF-8 rule).
    pub fn new(setup: &ReasoningSetup, piece: impl Fn(u32) -> Vec<u8>) -> ReasoningBudget {
        let mut machine = ReasoningBudget {
            start: SequenceMatcher::new(std::slice::from_ref(&setup.start)),
            end: SequenceMatcher::new(&setup.ends),
            forced: setup.forced.clone(),
            budget: setup.budget,
            remaining: setup.budget.unwrap_or(u32::MAX),
            state: ThinkingState::Idle,
            force_position: 0,
            end_match: None,
        };
        for &token in &setup.prefill {
            machine.accept(token, &piece(token));
        }
        machine
    }

    /// The state now.
    pub fn state(&self) -> ThinkingState {
        self.state
    }

    /// The only token allowed next, while the end is being forced.
    pub fn forced_token(&self) -> Option<u32> {
        match self.state {
            ThinkingState::Forcing => self.forced.get(self.force_position).copied(),
            _ => None,
        }
    }

    /// Whether a lazy grammar sees the next token (llama.cpp's `grammar_should_apply`): not while
    /// thinking is counted or forced.
    pub fn lets_lazy_grammar_see(&self) -> bool {
        matches!(self.state, ThinkingState::Idle | ThinkingState::Done)
    }

    /// The end tag that closed thinking, while done (replayed into a lazy grammar that did not
    /// see it: it may hold a trigger).
    pub fn end_match(&self) -> Option<&[u32]> {
        match self.state {
            ThinkingState::Done => self
                .end_match
                .and_then(|i| self.end.sequences.get(i))
                .map(Vec::as_slice),
            _ => None,
        }
    }

    fn start_counting(&mut self) -> Option<ThinkingNote> {
        self.remaining = self.budget.unwrap_or(u32::MAX);
        if self.remaining == 0 {
            self.state = ThinkingState::Forcing;
            self.force_position = 0;
        } else {
            self.state = ThinkingState::Counting;
        }
        Some(ThinkingNote::Started {
            budget: self.budget,
        })
    }

    /// Accepts the token taken (its bytes `piece`), as llama.cpp's `accept`.
    pub fn accept(&mut self, token: u32, piece: &[u8]) -> Option<ThinkingNote> {
        match self.state {
            ThinkingState::Idle => match self.start.advance(token) {
                Some(_) => self.start_counting(),
                None => None,
            },
            ThinkingState::Counting | ThinkingState::WaitingUtf8 => {
                if let Some(index) = self.end.advance(token) {
                    self.state = ThinkingState::Done;
                    self.end_match = Some(index);
                    return Some(ThinkingNote::Ended { by_budget: false });
                }
                let complete = utf8_complete(piece);
                if self.state == ThinkingState::WaitingUtf8 {
                    if complete {
                        self.state = ThinkingState::Forcing;
                        self.force_position = 0;
                        self.end.reset();
                        return Some(ThinkingNote::Exhausted);
                    }
                    return Some(ThinkingNote::Thinking { left: Some(0) });
                }
                self.remaining = self.remaining.saturating_sub(1);
                if self.remaining > 0 {
                    return Some(ThinkingNote::Thinking {
                        left: self.budget.map(|_| self.remaining),
                    });
                }
                self.state = if complete {
                    self.force_position = 0;
                    ThinkingState::Forcing
                } else {
                    ThinkingState::WaitingUtf8
                };
                self.end.reset();
                Some(if complete {
                    ThinkingNote::Exhausted
                } else {
                    ThinkingNote::Thinking { left: Some(0) }
                })
            }
            ThinkingState::Forcing => {
                let matched = self.end.advance(token);
                let position = self.force_position;
                self.force_position += 1;
                if self.force_position >= self.forced.len() {
                    self.state = ThinkingState::Done;
                    self.end_match = matched;
                    return Some(ThinkingNote::Ended { by_budget: true });
                }
                Some(ThinkingNote::Forced {
                    position: position as u32,
                    of: self.forced.len() as u32,
                })
            }
            ThinkingState::Done => match self.start.advance(token) {
                Some(_) => {
                    self.end.reset();
                    self.end_match = None;
                    self.start_counting()
                }
                None => None,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::ThinkingNote;

    fn setup(budget: Option<u32>) -> ReasoningSetup {
        ReasoningSetup {
            start: vec![10, 11],
            ends: vec![vec![20, 21], vec![30]],
            forced: vec![5, 20, 21],
            budget,
            prefill: Vec::new(),
        }
    }

    fn machine(setup: &ReasoningSetup) -> ReasoningBudget {
        ReasoningBudget::new(setup, |_| b"x".to_vec())
    }

    #[test]
    fn the_budget_counts_tokens_after_the_start_tag_then_forces_message_and_end_tag() {
        let mut m = machine(&setup(Some(2)));
        assert_eq!(m.accept(1, b"a"), None);
        assert_eq!(m.accept(10, b"<"), None);
        assert_eq!(
            m.accept(11, b">"),
            Some(ThinkingNote::Started { budget: Some(2) })
        );
        assert!(!m.lets_lazy_grammar_see());
        assert_eq!(
            m.accept(2, b"a"),
            Some(ThinkingNote::Thinking { left: Some(1) })
        );
        assert_eq!(m.accept(3, b"b"), Some(ThinkingNote::Exhausted));
        assert_eq!(m.forced_token(), Some(5));
        assert_eq!(
            m.accept(5, b"m"),
            Some(ThinkingNote::Forced { position: 0, of: 3 })
        );
        assert_eq!(m.forced_token(), Some(20));
        assert_eq!(
            m.accept(20, b"</"),
            Some(ThinkingNote::Forced { position: 1, of: 3 })
        );
        assert_eq!(
            m.accept(21, b">"),
            Some(ThinkingNote::Ended { by_budget: true })
        );
        assert_eq!(m.state(), ThinkingState::Done);
        assert_eq!(m.end_match(), Some(&[20, 21][..]));
        assert!(m.lets_lazy_grammar_see());
        assert_eq!(m.forced_token(), None);
    }

    #[test]
    fn a_natural_end_tag_ends_thinking_and_a_new_start_tag_rearms_the_budget() {
        let mut m = machine(&setup(Some(5)));
        m.accept(10, b"");
        m.accept(11, b"");
        assert_eq!(
            m.accept(30, b""),
            Some(ThinkingNote::Ended { by_budget: false })
        );
        assert_eq!(m.end_match(), Some(&[30][..]));
        assert_eq!(m.accept(10, b""), None);
        assert_eq!(
            m.accept(11, b""),
            Some(ThinkingNote::Started { budget: Some(5) })
        );
        assert_eq!(m.state(), ThinkingState::Counting);
        assert_eq!(m.end_match(), None);
    }

    #[test]
    fn an_unfinished_utf8_character_delays_the_forced_end() {
        let mut m = machine(&setup(Some(1)));
        m.accept(10, b"");
        m.accept(11, b"");
        assert_eq!(
            m.accept(2, &[0xE2, 0x82]),
            Some(ThinkingNote::Thinking { left: Some(0) })
        );
        assert_eq!(m.state(), ThinkingState::WaitingUtf8);
        // llama.cpp looks at each piece alone: a lone continuation byte is not complete either.
        assert_eq!(
            m.accept(3, &[0xAC]),
            Some(ThinkingNote::Thinking { left: Some(0) })
        );
        assert_eq!(m.accept(4, b"a"), Some(ThinkingNote::Exhausted));
        assert_eq!(m.forced_token(), Some(5));
        assert!(utf8_complete(b"abc") && utf8_complete(&[0xE2, 0x82, 0xAC]));
        assert!(!utf8_complete(&[0xF0, 0x9F]) && !utf8_complete(&[0x82]));
    }

    #[test]
    fn the_prompt_can_open_thinking_and_budget_zero_forces_at_once() {
        let mut with_prefill = setup(Some(0));
        with_prefill.prefill = vec![7, 10, 11];
        let m = machine(&with_prefill);
        assert_eq!(m.state(), ThinkingState::Forcing);
        assert_eq!(m.forced_token(), Some(5));
        let unlimited = machine(&setup(None));
        assert_eq!(unlimited.state(), ThinkingState::Idle);
        let mut m = unlimited;
        m.accept(10, b"");
        assert_eq!(
            m.accept(11, b""),
            Some(ThinkingNote::Started { budget: None })
        );
        assert_eq!(
            m.accept(1, b"a"),
            Some(ThinkingNote::Thinking { left: None })
        );
    }
}
