//! What one generation run records per token and in total: the sampling parameters, each
//! token with its candidates before and after the mask and the grammar stacks after it, why the
//! run stopped, and the totals. The worker produces these; the workbench's transcript file
//! stores them.

use serde::{Deserialize, Serialize};

use toolrail_engine::Snapshot;

use crate::engine_kind::EngineKind;

/// Sampling parameters (temperature 0 is greedy).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Sampling {
    /// Softmax temperature; 0 picks the most likely allowed token.
    pub temperature: f32,
    /// Keep only the k most likely tokens (0: all).
    pub top_k: u32,
    /// Keep the smallest set whose probability reaches p (1: all).
    pub top_p: f32,
    /// Drop tokens less likely than min_p times the most likely one (0: none).
    pub min_p: f32,
    /// Random seed.
    pub seed: u64,
    /// Stop after this many tokens.
    pub max_tokens: u32,
    /// Near the token limit, replace a sampled token that would leave the grammar unable to
    /// finish in the tokens left by the most likely one that can (see
    /// [`toolrail_engine::BudgetGuard`]); constrained runs only. Absent in older transcripts
    /// (their runs had no guard).
    #[serde(default)]
    pub finish_in_budget: bool,
    /// llama.cpp's repetition penalty over the last [`PENALTY_WINDOW`] generated tokens,
    /// applied to the logits before the mask and the choice (1: off; absent in older
    /// transcripts).
    #[serde(default = "no_penalty")]
    pub repeat_penalty: f32,
}

/// How many of the last generated tokens a repetition penalty looks at (llama.cpp's
/// `penalty_last_n` default).
pub const PENALTY_WINDOW: usize = 64;

fn no_penalty() -> f32 {
    1.0
}

impl Default for Sampling {
    fn default() -> Self {
        Sampling {
            temperature: 0.0,
            top_k: 40,
            top_p: 0.95,
            min_p: 0.05,
            seed: 0,
            max_tokens: 256,
            finish_in_budget: true,
            repeat_penalty: 1.0,
        }
    }
}

/// A candidate token at one step.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Candidate {
    /// Token id.
    pub id: u32,
    /// Its piece, as text (lossy for partial UTF-8).
    pub piece: String,
    /// Probability (before the mask: over the whole vocabulary; after: over the allowed tokens).
    pub probability: f32,
    /// True if the grammar masked it.
    pub masked: bool,
}

/// Why the budget guard replaced a sampled token: how many tokens were left and how many the
/// sampled one would have needed to finish the grammar.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BudgetNote {
    /// The sampled token's piece (lossy text).
    pub replaced_piece: String,
    /// Tokens left at this step, counting it.
    pub tokens_left: u32,
    /// Tokens the sampled one would have needed to finish, itself included (absent: after it
    /// the grammar could not be finished at all).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub needed: Option<u64>,
}

impl BudgetNote {
    /// The reason in words: `"x" would need 12 tokens to finish; 9 are left`.
    pub fn describe(&self) -> String {
        match self.needed {
            Some(needed) => format!(
                "{:?} would need {needed} tokens to finish; {} are left",
                self.replaced_piece, self.tokens_left
            ),
            None => format!(
                "after {:?} the grammar could not be finished; {} tokens are left",
                self.replaced_piece, self.tokens_left
            ),
        }
    }
}

/// One generated token.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TokenRecord {
    /// 0-based position in the output.
    pub index: u32,
    /// Token id.
    pub id: u32,
    /// Its piece, as text (lossy for partial UTF-8).
    pub piece: String,
    /// Its piece's bytes, hex, when the text is lossy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub piece_hex: Option<String>,
    /// True if the user forced this token instead of the sampled one.
    #[serde(default)]
    pub forced: bool,
    /// The token the sampler chose, when the budget guard took this one instead (the sampled
    /// one would have left too few tokens to finish the grammar).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget_replaced: Option<u32>,
    /// Why the budget guard replaced the sampled token (with `budget_replaced`; absent in older
    /// transcripts).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget: Option<BudgetNote>,
    /// The most likely candidates before the mask.
    pub before: Vec<Candidate>,
    /// The most likely candidates after the mask.
    pub after: Vec<Candidate>,
    /// How many tokens the grammar allowed at this step.
    pub allowed: u32,
    /// The grammar stacks after the token (absent for unconstrained runs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stacks: Option<Snapshot>,
    /// Milliseconds to decode (compute logits for) this step.
    pub decode_ms: f64,
    /// Milliseconds to compute the mask at this step.
    pub mask_ms: f64,
    /// A finding of toolrail's live check on this token, e.g. a server produced a token the
    /// grammar forbids (absent when there is none, and in older transcripts).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flag: Option<String>,
    /// On a llama-server: the candidates after the server's own sampling chain
    /// (`post_sampling_probs`), probabilities over what the chain kept; `masked` says whether
    /// toolrail's mask forbids the token (the server applies its grammar to the chosen token
    /// only, so forbidden tokens can appear here). Empty for in-process runs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sampled: Vec<Candidate>,
    /// On a llama-server: the candidates the server returned at this step on which the grammar
    /// the server enforced and toolrail's grammar disagree (allowed by one, forbidden by the
    /// other). Empty when they agree, and for in-process runs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub disagreements: Vec<Disagreement>,
    /// In-process runs under another engine than toolrail's (`llama`, `llguidance`): where that
    /// engine's mask at this step, over the whole vocabulary, differs from toolrail's mask for
    /// the same grammar and the same tokens so far. Absent when they agree (and in older
    /// transcripts, and once toolrail's recognizer has stopped following the run).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mask_difference: Option<MaskDifference>,
    /// The other engines' masks computed at this step beside the run's own (toolrail's for a
    /// `llama` or `llguidance` run, and the engines the run was asked to compare with): each
    /// one's time and where it differs from toolrail's. Empty when there are none (and in
    /// older transcripts).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub other_masks: Vec<OtherMask>,
    /// Under a lazy grammar (a chat template's tool-call grammar): whether the grammar was still
    /// dormant at this token, or woke on it. Absent once the grammar constrains, for plain
    /// grammars, and in older transcripts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lazy: Option<LazyNote>,
    /// Under a chat template with thinking tags: what llama-server's reasoning budget did at this
    /// token (thinking started, a token counted, the budget spent, a forced token of the end,
    /// thinking ended). Absent outside thinking, for plain grammars, and in older transcripts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thinking: Option<ThinkingNote>,
}

impl TokenRecord {
    /// Every difference between another engine's mask and toolrail's at this step: the run's
    /// engine's, then the compared engines'.
    pub fn mask_differences(&self) -> impl Iterator<Item = &MaskDifference> {
        self.mask_difference.iter().chain(
            self.other_masks
                .iter()
                .filter_map(|m| m.difference.as_ref()),
        )
    }

    /// Each engine's mask time at this step: the run's `engine` first, then the others.
    pub fn mask_times(&self, engine: EngineKind) -> impl Iterator<Item = (EngineKind, f64)> {
        std::iter::once((engine, self.mask_ms))
            .chain(self.other_masks.iter().map(|m| (m.engine, m.mask_ms)))
    }
}

/// Another engine's mask at one step, computed beside the run's own engine's: how long it took
/// and where it differs from toolrail's.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct OtherMask {
    /// The engine.
    pub engine: EngineKind,
    /// Milliseconds it took to compute its mask over the whole vocabulary.
    pub mask_ms: f64,
    /// Where its mask differs from toolrail's (absent when they agree, and for toolrail's own).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub difference: Option<MaskDifference>,
    /// Why it stopped following the run after this step (it refused the token taken), if it
    /// did: it computes no mask after it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stopped: Option<String>,
}

/// Where another engine's mask and toolrail's disagree at one step, over the whole vocabulary:
/// how many tokens each allows that the other forbids, and the first of them by id.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MaskDifference {
    /// The engine compared with toolrail's (`llama`, `llguidance`).
    pub engine: EngineKind,
    /// Tokens the engine allows and toolrail forbids.
    pub only_engine: u32,
    /// Tokens toolrail allows and the engine forbids.
    pub only_toolrail: u32,
    /// The first [`MaskDifference::LISTED`] tokens of each side, by id.
    pub tokens: Vec<DifferingToken>,
}

impl MaskDifference {
    /// How many tokens of each side are listed in [`MaskDifference::tokens`].
    pub const LISTED: usize = 12;

    /// The difference in words, token by token: `llguidance allows "x" (12), "y" (40); toolrail
    /// allows "z" (7) and 3 more`.
    pub fn describe(&self) -> String {
        let side = |engine_allows: bool, total: u32, who: &str| -> Option<String> {
            if total == 0 {
                return None;
            }
            let listed: Vec<String> = self
                .tokens
                .iter()
                .filter(|t| t.engine_allows == engine_allows)
                .map(|t| format!("{} ({})", t.shown(), t.id))
                .collect();
            let more = (total as usize).saturating_sub(listed.len());
            Some(if more > 0 {
                format!("only {who} allows {} and {more} more", listed.join(", "))
            } else {
                format!("only {who} allows {}", listed.join(", "))
            })
        };
        [
            side(true, self.only_engine, self.engine.name()),
            side(false, self.only_toolrail, "toolrail"),
        ]
        .into_iter()
        .flatten()
        .collect::<Vec<_>>()
        .join("; ")
    }
}

/// One token on which two engines' masks disagree.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DifferingToken {
    /// Token id.
    pub id: u32,
    /// Its piece, as text (lossy for partial UTF-8).
    pub piece: String,
    /// Its piece's bytes, hex, when the text is lossy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub piece_hex: Option<String>,
    /// True when the other engine allows it and toolrail forbids it; false for the reverse.
    pub engine_allows: bool,
}

impl DifferingToken {
    /// The piece as a person reads it: quoted and escaped, or `bytes f5` when it is no UTF-8.
    pub fn shown(&self) -> String {
        match &self.piece_hex {
            Some(hex) => format!("bytes {hex}"),
            None => format!("{:?}", self.piece),
        }
    }
}

/// Where a lazy grammar stood at one token: the trigger timeline of a run, token by token.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "kebab-case")]
pub enum LazyNote {
    /// The grammar was asleep: nothing was masked, and no trigger matched after this token.
    Dormant {
        /// Milliseconds spent searching the triggers after this token (llama.cpp searches the
        /// whole text generated so far, so this grows with it).
        scan_ms: f64,
    },
    /// A trigger fired on this token: the grammar constrains from here on.
    Fired {
        /// What fired: the sampler's pattern, or `token N (piece)`.
        trigger: String,
        /// The whole match, bytes of the output (absent for a trigger token).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        matched: Option<(u64, u64)>,
        /// Where the grammar starts, a byte of the output.
        grammar_start: u64,
        /// The text replayed into the grammar (lossy UTF-8): from `grammar_start` to the end of
        /// this token.
        replayed: String,
        /// Milliseconds spent searching the triggers after this token.
        scan_ms: f64,
    },
}

impl LazyNote {
    /// The time spent searching the triggers at this token.
    pub fn scan_ms(&self) -> f64 {
        match self {
            LazyNote::Dormant { scan_ms } | LazyNote::Fired { scan_ms, .. } => *scan_ms,
        }
    }

    /// The trigger search time over a run's tokens.
    pub fn total_scan_ms<'a>(notes: impl IntoIterator<Item = Option<&'a LazyNote>>) -> f64 {
        notes.into_iter().flatten().map(LazyNote::scan_ms).sum()
    }
}

/// What the reasoning budget did at one token (see [`crate::reasoning_budget`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "kebab-case")]
pub enum ThinkingNote {
    /// The start tag completed on this token: thinking begins with this budget (absent: no
    /// limit).
    Started {
        /// Tokens allowed in the thinking block.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        budget: Option<u32>,
    },
    /// A token inside thinking.
    Thinking {
        /// Tokens of the budget left after it (absent: no limit).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        left: Option<u32>,
    },
    /// The budget ran out on this token: from the next token on, the budget message and the end
    /// tag are forced.
    Exhausted,
    /// This token was forced by the spent budget.
    Forced {
        /// Its position in the forced sequence.
        position: u32,
        /// The forced sequence's length.
        of: u32,
    },
    /// An end tag completed on this token: thinking is over.
    Ended {
        /// The budget forced the end (else the model closed thinking itself).
        by_budget: bool,
    },
}

/// A candidate token on which a server's grammar and toolrail's disagree at one step.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Disagreement {
    /// Token id.
    pub id: u32,
    /// Its piece, as text (lossy for partial UTF-8).
    pub piece: String,
    /// True when the server's grammar allows it and toolrail's forbids it; false for the
    /// reverse.
    pub server_allows: bool,
}

/// Why generation stopped.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "reason", rename_all = "kebab-case")]
pub enum Stop {
    /// The model chose end-of-generation (allowed: the grammar was complete).
    EndOfGeneration,
    /// The token limit was reached.
    MaxTokens,
    /// The user cancelled.
    Cancelled,
    /// No token could continue the grammar (the vocabulary lacks what it needs).
    DeadEnd {
        /// Byte offset in the output where it got stuck.
        offset: u64,
        /// What the grammar expected there.
        expected: Vec<String>,
    },
    /// The output reached one of the stop strings (a chat template's additional stops); the
    /// output ends before it, as llama-server returns it.
    StopString {
        /// The stop string.
        stop: String,
    },
    /// Something failed.
    Error {
        /// The message.
        message: String,
    },
}

impl Stop {
    /// Why the run failed, for a stop that ends a run before its end (an error, a dead end): such
    /// a run is invalid whatever its output holds. `None` for the other stops.
    pub fn failure(&self) -> Option<String> {
        match self {
            Stop::Error { message } => Some(format!("the run stopped on an error: {message}")),
            Stop::DeadEnd { offset, expected } => Some(format!(
                "the run reached a dead end at output byte {offset}: no token could continue the grammar{}",
                if expected.is_empty() {
                    String::new()
                } else {
                    format!(" (it expected {})", expected.join(", "))
                }
            )),
            Stop::EndOfGeneration | Stop::MaxTokens | Stop::Cancelled | Stop::StopString { .. } => {
                None
            }
        }
    }
}

/// Totals over a run.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Totals {
    /// Tokens generated.
    pub tokens: u32,
    /// Total decode time.
    pub decode_ms: f64,
    /// Total mask time.
    pub mask_ms: f64,
    /// Tokens per second over the whole run.
    pub tokens_per_s: f64,
    /// Steps at which the engine's mask was compared with toolrail's over the whole vocabulary
    /// (in-process `llama` and `llguidance` runs; 0 otherwise and in older transcripts).
    #[serde(default)]
    pub compared_steps: u32,
    /// Of those, the steps where the two masks differ (each has a
    /// [`TokenRecord::mask_difference`]).
    #[serde(default)]
    pub differing_steps: u32,
    /// The other engines whose masks were computed beside the run's own (see
    /// [`TokenRecord::other_masks`]), in the order first met. Empty when none were (and in
    /// older transcripts).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub other_engines: Vec<OtherEngineTotals>,
    /// On a llama-server: the tokens it says it generated (`tokens_predicted`, or the chat
    /// reply's `completion_tokens`), end of generation included; [`Totals::tokens`] is what
    /// it streamed. `None` in-process (and in older transcripts).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_tokens: Option<u64>,
}

/// One other engine's totals over a run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct OtherEngineTotals {
    /// The engine.
    pub engine: EngineKind,
    /// Steps at which it computed a mask.
    pub steps: u32,
    /// Total time of its masks.
    pub mask_ms: f64,
    /// Steps at which its mask was compared with toolrail's (0 for toolrail itself).
    pub compared_steps: u32,
    /// Of those, the steps where they differ.
    pub differing_steps: u32,
}

impl Totals {
    /// Adds one step's other masks to [`Totals::other_engines`].
    pub fn add_other_masks(&mut self, masks: &[OtherMask]) {
        for m in masks {
            let slot = match self.other_engines.iter().position(|t| t.engine == m.engine) {
                Some(slot) => slot,
                None => {
                    self.other_engines.push(OtherEngineTotals {
                        engine: m.engine,
                        steps: 0,
                        mask_ms: 0.0,
                        compared_steps: 0,
                        differing_steps: 0,
                    });
                    self.other_engines.len() - 1
                }
            };
            let t = &mut self.other_engines[slot];
            t.steps += 1;
            t.mask_ms += m.mask_ms;
            if m.engine != EngineKind::Toolrail {
                t.compared_steps += 1;
                t.differing_steps += u32::from(m.difference.is_some());
            }
        }
    }
}
