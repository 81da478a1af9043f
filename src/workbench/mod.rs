//! The desktop app's state and logic, free of any UI code: what the panes show and edit lives
//! here as plain structs, so it can be tested without a window and driven from the CLI.
//!
//! | module | what |
//! | --- | --- |
//! | [`run`] | the run controller: model loading, generation on the worker, branches, validation, transcripts, replay |

pub mod run;
