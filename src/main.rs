//! The `toolrail` binary: parses arguments and hands over to [`toolrail::cli`].

fn main() -> std::process::ExitCode {
    toolrail::cli::main()
}
