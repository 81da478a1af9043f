//! Tool sets, envelopes and their grammars, the validator, extraction, prompts, the pool filter, and
//! BFCL tool sets.
//!
//! One test binary per crate: each module is one former test file.

// A test fails by panicking: unwrap and expect say what broke (helpers included).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod bfcl;
mod bfcl_live;
mod extract;
mod golden;
mod grammar;
mod pool;
mod prompt;
mod python;
mod readings;
mod sent;
mod shapes;
mod validate;
