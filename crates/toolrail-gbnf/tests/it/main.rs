//! The GBNF crate from outside: grammars as deep and long as a user can write them.
//!
//! One test binary per crate: each module is one test file.

// A test fails by panicking: unwrap and expect say what broke (helpers included).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod deep;
