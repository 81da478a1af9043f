//! The command-line interface, run as a process.
//!
//! One test binary per crate: each module is one former test file.

mod attack_table;
mod attacks;
mod cli_check;
mod cli_compare;
mod cli_models;
mod cli_server;
mod cli_template;
mod layers;
mod modules;
mod reproducers;
mod tool_shapes;
