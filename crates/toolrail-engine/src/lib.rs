//! The recognizer over sets of llama.cpp grammar stacks: feeding text or tokens, verdicts,
//! what may come next, token masks over a vocabulary, snapshots of the stacks, random strings
//! of a grammar, and the budget guard.
//!
//! Layer: above `toolrail-gbnf` only (see ARCHITECTURE.md); no C++. Invariants: the engine
//! knows no model (a vocabulary arrives as a [`TokenTable`]); stacks, their order and the
//! accepted strings are exactly llama.cpp's; work is bounded (a grammar too ambiguous to follow
//! is a verdict, not a hang).

pub mod check;
pub mod finish;
mod lengths;
pub mod literals;
pub mod mask;
pub mod recognizer;
pub mod sample;
pub mod snapshot;
pub mod stacks;
pub mod utf8;
pub mod vocab;

pub use check::{StreamVerdict, Verdict, VerdictKind, check, check_reader, check_with};
pub use finish::{BudgetGuard, Replacement};
pub use literals::{LiteralGroup, ReadableExpected};
pub use mask::{MaskEngine, MaskError, TokenMask, TokenTrie};
pub use recognizer::{Engine, Expected, State};
pub use snapshot::{Frame, Snapshot, StackView};
/// The grammar layer this engine runs (re-exported so that users of the engine need one crate).
pub use toolrail_gbnf as gbnf;
/// Expected sets are character sets of the GBNF layer.
pub use toolrail_gbnf::CharSet;
pub use vocab::TokenTable;
