//! `toolrail lint GRAMMAR [--json]` and `toolrail compile GRAMMAR`.

use std::process::ExitCode;

use toolrail_gbnf::{Severity, lint::lint, printer::print_compiled};

/// Arguments of `toolrail lint`.
#[derive(Debug, clap::Args)]
pub struct LintArgs {
    /// The GBNF grammar file, or `-` for standard input.
    pub grammar: String,
    /// The start rule.
    #[arg(long, default_value = toolrail_gbnf::DEFAULT_ROOT)]
    pub root: String,
    /// Print a JSON array of findings instead of a report.
    #[arg(long)]
    pub json: bool,
}

/// Runs `toolrail lint`: exit 0 when there is no error finding, 1 otherwise.
pub fn run(args: &LintArgs) -> anyhow::Result<ExitCode> {
    let text = super::common::read_grammar(&args.grammar)?;
    let findings = lint(&text, &args.root);
    if args.json {
        super::output::write_json(&serde_json::to_string_pretty(&findings)?)?;
    } else if findings.is_empty() {
        outln!("{}: no findings", args.grammar)?;
    } else {
        for d in &findings {
            outln!("{}\n", d.render(text.as_bytes(), &args.grammar))?;
        }
        let errors = findings
            .iter()
            .filter(|d| d.severity == Severity::Error)
            .count();
        outln!("{} finding(s), {errors} error(s)", findings.len())?;
    }
    let has_error = findings.iter().any(|d| d.severity == Severity::Error);
    Ok(if has_error {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

/// Arguments of `toolrail compile`.
#[derive(Debug, clap::Args)]
pub struct CompileArgs {
    /// The GBNF grammar file, or `-` for standard input.
    pub grammar: String,
}

/// Runs `toolrail compile`.
pub fn run_compile(args: &CompileArgs) -> anyhow::Result<ExitCode> {
    match super::common::load_grammar(&args.grammar) {
        Ok(grammar) => {
            out!("{}", print_compiled(&grammar))?;
            Ok(ExitCode::SUCCESS)
        }
        Err(code) => Ok(code),
    }
}
