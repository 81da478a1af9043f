//! The recognizer over sets of llama.cpp grammar stacks: feeding text or tokens, verdicts,
//! what may come next, snapshots of the stacks, and random strings of a grammar.

pub mod charset;
pub mod check;
pub mod finish;
mod lengths;
pub mod mask;
pub mod recognizer;
pub mod sample;
pub mod snapshot;
pub mod stacks;
pub mod utf8;
pub mod vocab;

pub use charset::CharSet;
pub use check::{Verdict, VerdictKind, check, check_with};
pub use finish::BudgetGuard;
pub use mask::{MaskEngine, MaskError, TokenMask, TokenTrie};
pub use recognizer::{Engine, Expected, State};
pub use snapshot::{Frame, Snapshot, StackView};
pub use vocab::TokenTable;
