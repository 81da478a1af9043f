//! The real app in egui_kittest: panes, workspace, runs on the real test model, snapshots.
//!
//! One test binary per crate: each module is one former test file.

// A test fails by panicking: unwrap and expect say what broke (helpers included).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod app_conversation;
mod app_editors;
mod app_run;
mod app_server;
mod app_shell;
mod app_template;
mod app_usability;
mod common;
