//! The command-line interface, run as a process.
//!
//! One test binary per crate: each module is one former test file.

// A test fails by panicking: unwrap and expect say what broke (helpers included).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod attack_table;
mod attacks;
mod cli_budget;
mod cli_check;
mod cli_compare;
mod cli_explain;
mod cli_logit_settings;
mod cli_models;
mod cli_server;
mod cli_template;
mod honest_exits;
mod hostile_templates;
mod layers;
mod modules;
mod reproducers;
mod terminal_escapes;
mod tool_shapes;
