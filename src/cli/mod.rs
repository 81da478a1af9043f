//! Command-line interface: clap subcommands over the library.

use std::process::ExitCode;

/// Entry point of the `toolrail` binary.
pub fn main() -> ExitCode {
    eprintln!("toolrail: no commands yet");
    ExitCode::from(2)
}
