//! Tool sets, envelopes and their grammars, the validator, extraction, prompts, the pool filter, and
//! BFCL tool sets.
//!
//! One test binary per crate: each module is one former test file.

mod bfcl;
mod extract;
mod golden;
mod grammar;
mod pool;
mod prompt;
mod python;
mod shapes;
mod validate;
