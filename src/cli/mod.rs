//! Command-line interface: clap subcommands over the library. Exit codes follow one rule
//! everywhere: 0 success, 1 a negative verdict (rejected, invalid), 2 usage or input errors,
//! 3 an incomplete input for `check`.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// `print!` to standard output for a person: terminal-safe, and an error (naming standard
/// output) instead of a panic or a silent loss when it cannot be written (see [`output`]).
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::cli::output::write_text(format_args!($($arg)*))
    };
}

/// `println!` to standard output; see [`out!`].
macro_rules! outln {
    () => {
        $crate::cli::output::write_text(format_args!("\n"))
    };
    ($($arg:tt)*) => {
        $crate::cli::output::write_text(format_args!("{}\n", format_args!($($arg)*)))
    };
}

/// `eprintln!` for a person: terminal-safe, and never a panic (see [`output`]).
macro_rules! errln {
    () => {
        $crate::cli::output::write_err_line(format_args!(""))
    };
    ($($arg:tt)*) => {
        $crate::cli::output::write_err_line(format_args!($($arg)*))
    };
}

/// The exit status of a command whose reader went away (a closed pipe), as a shell reports a
/// process ended by SIGPIPE: 128 + 13.
const BROKEN_PIPE_STATUS: u8 = 141;

pub mod bench;
pub mod bench_budget;
pub mod bench_calls;
pub mod budget;
pub mod check;
pub mod common;
pub mod compare;
pub mod explain;
pub mod extract;
pub mod generate;
pub mod grammar;
pub mod gui;
pub mod lint;
pub mod models;
pub mod output;
pub mod sample;
pub mod template;
pub mod validate;

/// toolrail: a playground and debugger for grammar-constrained tool calling with llama.cpp.
#[derive(Debug, Parser)]
#[command(name = "toolrail", version, about, long_about = None)]
pub struct Cli {
    /// What to do (the desktop app when omitted).
    #[command(subcommand)]
    pub command: Option<Command>,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Match a text against a GBNF grammar: exit 0 accepted, 1 rejected, 3 incomplete, 2 errors.
    Check(check::CheckArgs),
    /// List every finding about a GBNF grammar (exit 1 if any is an error).
    Lint(lint::LintArgs),
    /// Print random strings the grammar accepts.
    Sample(sample::SampleArgs),
    /// Print the rules exactly as llama.cpp compiles them (synthesised rules included).
    Compile(lint::CompileArgs),
    /// Find tool calls in free text (model output without a grammar): exit 0 if any, 1 if none.
    Extract(extract::ExtractArgs),
    /// Print the tool-call grammar of a tool set (or, with --schema, of a JSON Schema).
    Grammar(grammar::GrammarArgs),
    /// Check a model output against a tool set: exit 0 valid call, 1 not, 2 errors.
    Validate(validate::ValidateArgs),
    /// Run a GGUF model under a grammar or tool set, token by token; print the text and its validation.
    Generate(Box<generate::GenerateArgs>),
    /// Measure the engines on one prompt: mask times, tokens/s, llama.cpp and llguidance masks vs toolrail's.
    #[command(args_conflicts_with_subcommands = true)]
    Bench(bench::BenchArgs),
    /// How often calls come out valid on BFCL questions: valid calls and first-tool match, with and without grammar.
    BenchCalls(bench_calls::BenchCallsArgs),
    /// Compare two runs' transcripts: where their tokens part, how far their probabilities
    /// drift, and the recorded settings that explain it (exit 0 same tokens, 1 they part).
    Compare(compare::CompareArgs),
    /// Why a recorded run ended as it did and whether its output is a valid call, from its transcript (exit 0 valid, 1 invalid, 2 the run failed).
    Explain(explain::ExplainArgs),
    /// What llama-server builds from a chat template and tools: prompt, grammar, lazy triggers, parser.
    Template(template::TemplateArgs),
    /// Whether llama.cpp loads a tool catalog's grammar, what each tool costs, and which tool and property break it (exit 0 fits, 1 does not, 2 errors).
    Budget(budget::BudgetArgs),
    /// List the models and llama-servers toolrail knows by name, and the file they come from.
    Models(models::ModelsArgs),
    /// Open the desktop app (also what `toolrail` with no arguments does).
    Gui(gui::GuiArgs),
    /// Serve llama.cpp's template code for another toolrail process (one JSON request per line
    /// on standard input), so that a template that crashes it cannot take that process down.
    #[command(hide = true)]
    TemplateWorker,
}

/// The hidden subcommand a toolrail process starts its template workers with.
const TEMPLATE_WORKER: &str = "template-worker";

/// Runs llama.cpp's template code of this process in template workers: this binary with its
/// hidden subcommand (in this process when the binary cannot name itself).
fn isolate_templates() {
    if let Ok(program) = std::env::current_exe() {
        toolrail_llm::template::isolate::run_templates_in(
            toolrail_llm::template::isolate::WorkerCommand {
                program,
                args: vec![TEMPLATE_WORKER.into()],
            },
        );
    }
}

/// Entry point of the `toolrail` binary.
pub fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) if e.use_stderr() => {
            let _ = e.print();
            return ExitCode::from(2);
        }
        // --help and --version: the result, so it must reach standard output like any other.
        Err(e) => {
            return match output::print_help(&e) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {
                    ExitCode::from(BROKEN_PIPE_STATUS)
                }
                Err(e) => {
                    errln!("toolrail: {e}");
                    ExitCode::from(2)
                }
            };
        }
    };
    let default_gui = Command::Gui(gui::GuiArgs::default());
    let command = cli.command.as_ref().unwrap_or(&default_gui);
    if let Command::TemplateWorker = command {
        let status = toolrail_llm::template::isolate::serve_worker();
        return ExitCode::from(u8::try_from(status).unwrap_or(2));
    }
    isolate_templates();
    let result = match command {
        Command::Check(args) => check::run(args),
        Command::Lint(args) => lint::run(args),
        Command::Sample(args) => sample::run(args),
        Command::Compile(args) => lint::run_compile(args),
        Command::Extract(args) => extract::run(args),
        Command::Grammar(args) => grammar::run(args),
        Command::Validate(args) => validate::run(args),
        Command::Generate(args) => generate::run(args),
        Command::Bench(args) => bench::run(args),
        Command::BenchCalls(args) => bench_calls::run(args),
        Command::Template(args) => template::run(args),
        Command::Budget(args) => budget::run(args),
        Command::Compare(args) => compare::run(args),
        Command::Explain(args) => explain::run(args),
        Command::Models(args) => models::run(args),
        Command::Gui(args) => gui::run(args),
        Command::TemplateWorker => Ok(ExitCode::SUCCESS),
    };
    match result {
        Ok(code) => code,
        Err(e) if is_broken_pipe(&e) => ExitCode::from(BROKEN_PIPE_STATUS),
        Err(e) => {
            errln!("toolrail: {}", output::error_text(&e));
            ExitCode::from(2)
        }
    }
}

/// Whether the command failed because its reader closed the pipe (not worth a message).
fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|cause| {
        cause
            .downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}
