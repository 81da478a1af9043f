//! The `toolrail` binary: the command-line interface ([`cli`]) and, with no arguments or
//! `toolrail gui`, the desktop app.

mod cli;

fn main() -> std::process::ExitCode {
    cli::main()
}
