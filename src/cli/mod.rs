//! Command-line interface: clap subcommands over the library. Exit codes follow one rule
//! everywhere: 0 success, 1 a negative verdict (rejected, invalid), 2 usage or input errors,
//! 3 an incomplete input for `check`.

use std::io::{Read, Write};
use std::path::Path;
use std::process::ExitCode;

use anyhow::Context as _;
use clap::{Parser, Subcommand};
use toolrail_tools::shape::{Severity, ToolSetWarning};
use toolrail_tools::toolset::ToolSet;

/// `print!` to standard output that returns an error (naming standard output) instead of
/// panicking when the pipe is closed or the disk is full.
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::cli::write_stdout(format_args!($($arg)*))
    };
}

/// `println!` to standard output; see [`out!`].
macro_rules! outln {
    () => {
        $crate::cli::write_stdout(format_args!("\n"))
    };
    ($($arg:tt)*) => {
        $crate::cli::write_stdout(format_args!("{}\n", format_args!($($arg)*)))
    };
}

/// The exit status of a command whose reader went away (a closed pipe), as a shell reports a
/// process ended by SIGPIPE: 128 + 13.
const BROKEN_PIPE_STATUS: u8 = 141;

pub mod bench;
pub mod bench_calls;
pub mod check;
pub mod extract;
pub mod generate;
pub mod grammar;
pub mod gui;
pub mod lint;
pub mod models;
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
    Generate(generate::GenerateArgs),
    /// Measure the engines on one prompt: mask times, tokens/s, llama.cpp and llguidance masks vs toolrail's.
    #[command(args_conflicts_with_subcommands = true)]
    Bench(bench::BenchArgs),
    /// How often calls come out valid on BFCL questions: valid calls and first-tool match, with and without grammar.
    BenchCalls(bench_calls::BenchCallsArgs),
    /// What llama-server builds from a chat template and tools: prompt, grammar, lazy triggers, parser.
    Template(template::TemplateArgs),
    /// List the models and llama-servers toolrail knows by name, and the file they come from.
    Models(models::ModelsArgs),
    /// Open the desktop app (also what `toolrail` with no arguments does).
    Gui(gui::GuiArgs),
}

/// Entry point of the `toolrail` binary.
pub fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() {
                ExitCode::from(2)
            } else {
                ExitCode::SUCCESS
            };
        }
    };
    let default_gui = Command::Gui(gui::GuiArgs::default());
    let result = match cli.command.as_ref().unwrap_or(&default_gui) {
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
        Command::Models(args) => models::run(args),
        Command::Gui(args) => gui::run(args),
    };
    // What is still buffered must reach its reader too (a full disk is an error here).
    let result = result.and_then(|code| {
        std::io::stdout()
            .flush()
            .map_err(|e| stdout_error(e).into())
            .map(|()| code)
    });
    match result {
        Ok(code) => code,
        Err(e) if is_broken_pipe(&e) => ExitCode::from(BROKEN_PIPE_STATUS),
        Err(e) => {
            eprintln!("toolrail: {e:#}");
            ExitCode::from(2)
        }
    }
}

/// Parses a `--threads` value: 1 to twice the machine's cores.
pub fn parse_threads(text: &str) -> Result<u32, String> {
    let n: u32 = text
        .parse()
        .map_err(|_| format!("'{text}' is not a number of threads"))?;
    toolrail_llm::check_threads(n)
}

/// Writes to standard output (see [`out!`]).
pub fn write_stdout(args: std::fmt::Arguments) -> std::io::Result<()> {
    std::io::stdout()
        .lock()
        .write_fmt(args)
        .map_err(stdout_error)
}

/// A write error on standard output, saying so.
fn stdout_error(e: std::io::Error) -> std::io::Error {
    std::io::Error::new(e.kind(), format!("cannot write to standard output: {e}"))
}

/// Whether the command failed because its reader closed the pipe (not worth a message).
fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|cause| {
        cause
            .downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

/// Reads a file, or standard input for `-`.
pub fn read_input(path: &str) -> anyhow::Result<Vec<u8>> {
    if path == "-" {
        let mut buf = Vec::new();
        std::io::stdin().read_to_end(&mut buf).map_err(|e| {
            anyhow::anyhow!(
                "cannot read standard input (after {} bytes): {e}",
                buf.len()
            )
        })?;
        Ok(buf)
    } else {
        std::fs::read(path).map_err(|e| cannot_read(path, &e))
    }
}

/// The error for a file that cannot be read, saying what the path is when it is not a file.
pub fn cannot_read(path: &str, e: &std::io::Error) -> anyhow::Error {
    match std::fs::metadata(path) {
        Ok(meta) if meta.is_dir() => {
            anyhow::anyhow!("cannot read {path}: it is a directory, not a file")
        }
        _ if e.kind() == std::io::ErrorKind::NotFound => anyhow::anyhow!(
            "cannot read {path}: {e} (relative paths start at the current directory; `-` reads \
             standard input)"
        ),
        _ if e.kind() == std::io::ErrorKind::PermissionDenied => anyhow::anyhow!(
            "cannot read {path}: {e} (the file's owner or mode does not let you read it)"
        ),
        _ => anyhow::anyhow!("cannot read {path}: {e}"),
    }
}

/// Reads a file (or standard input for `-`) as UTF-8 text; `what` names its role in the error
/// ("the tool set", "the output"), which gives the first bad byte's line:column and offset.
pub fn read_text(path: &str, what: &str) -> anyhow::Result<String> {
    let bytes = read_input(path)?;
    String::from_utf8(bytes).map_err(|e| {
        let offset = e.utf8_error().valid_up_to();
        let at = toolrail_gbnf::source::line_col(e.as_bytes(), offset);
        let name = if path == "-" { "<stdin>" } else { path };
        anyhow::anyhow!("{name}:{at}: {what} is not valid UTF-8 (byte offset {offset})")
    })
}

/// Loads a tool set from `text` (read from `path`) and tells on standard error the shape it was
/// read as and every warning and note loading gave (each naming tool, JSON pointer and key).
pub fn load_tool_set(text: &str, path: &str) -> anyhow::Result<ToolSet> {
    load_tool_set_from(text, path, toolrail_tools::toolset::ToolSource::Auto)
}

/// [`load_tool_set`] from text written in `source` (JSON, Python functions, or found).
pub fn load_tool_set_from(
    text: &str,
    path: &str,
    source: toolrail_tools::toolset::ToolSource,
) -> anyhow::Result<ToolSet> {
    let tools = ToolSet::from_source(text, source).with_context(|| path.to_owned())?;
    if let Some(shape) = tools.shape() {
        let noun = if tools.len() == 1 { "tool" } else { "tools" };
        eprintln!("note: {path}: read as {shape} ({} {noun})", tools.len());
    }
    // Notes repeat per tool (every MCP tool's `title`, …): one line per note text, with the
    // number of tools and the first place. Warnings are printed one by one.
    let mut notes: Vec<(&str, &ToolSetWarning, usize)> = Vec::new();
    for w in tools.warnings() {
        match w.severity() {
            Severity::Warning => eprintln!("warning: {path}: {w}"),
            Severity::Note => match notes.iter_mut().find(|(m, _, _)| *m == w.message) {
                Some((_, _, count)) => *count += 1,
                None => notes.push((&w.message, w, 1)),
            },
        }
    }
    for (message, first, count) in notes {
        if count == 1 {
            eprintln!("note: {path}: {first}");
        } else {
            eprintln!(
                "note: {path}: {message} ({count} times, first at {})",
                first.pointer
            );
        }
    }
    Ok(tools)
}

/// The shape and the load warnings of a tool set as JSON fields (`shape`, `warnings`) for the
/// commands' `--json` output.
pub fn tool_set_json(tools: &ToolSet) -> (serde_json::Value, serde_json::Value) {
    let shape = match tools.shape() {
        Some(s) => serde_json::json!({"id": s.id(), "name": s.name()}),
        None => serde_json::Value::Null,
    };
    let warnings = tools
        .warnings()
        .iter()
        .map(|w| {
            serde_json::json!({
                "severity": w.severity().label(),
                "kind": w.kind.id(),
                "tool": w.tool,
                "pointer": w.pointer,
                "key": w.key,
                "message": w.message,
            })
        })
        .collect();
    (shape, serde_json::Value::Array(warnings))
}

/// Reads a grammar file as UTF-8, naming the first bad byte's line:column otherwise.
pub fn read_grammar(path: &str) -> anyhow::Result<String> {
    read_text(path, "the grammar")
}

/// Refuses a grammar that lint says can never be completed (GB107 as an error, GB108, GB110):
/// prints those findings and returns the failure status, so `check` and `generate` never run
/// a grammar that can only end incomplete or abort llama.cpp.
pub fn refuse_unusable(text: &str, path: &str) -> Result<(), ExitCode> {
    let unusable: Vec<_> = toolrail_gbnf::lint::lint_default(text)
        .into_iter()
        .filter(|d| d.code.makes_grammar_unusable() && d.severity == toolrail_gbnf::Severity::Error)
        .collect();
    if unusable.is_empty() {
        return Ok(());
    }
    let name = Path::new(path).display().to_string();
    for d in &unusable {
        eprintln!("{}", d.render(text.as_bytes(), &name));
    }
    eprintln!("toolrail: {name}: the grammar can never be completed (see above); not running it");
    Err(ExitCode::from(2))
}

/// Parses and builds a grammar file, printing every finding on failure.
pub fn load_grammar(path: &str) -> Result<toolrail_gbnf::Grammar, ExitCode> {
    let text = match read_grammar(path) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("toolrail: {e:#}");
            return Err(ExitCode::from(2));
        }
    };
    toolrail_gbnf::Grammar::parse(&text).map_err(|e| {
        let name = Path::new(path).display().to_string();
        for d in &e.diagnostics {
            eprintln!("{}", d.render(text.as_bytes(), &name));
        }
        ExitCode::from(2)
    })
}
