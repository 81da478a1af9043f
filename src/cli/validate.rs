//! `toolrail validate TOOLS OUTPUT [--format F] [--parallel] [--auto] [--json]`: checks a model
//! output against a tool set. Exit 0 when the output is a valid call (or, with `--auto`, plain
//! text), 1 when it is not (every problem printed, then the one-line feedback for the model),
//! 2 on usage or input errors.

use std::process::ExitCode;

use anyhow::Context as _;
use serde_json::{Value, json};

use super::grammar::FormatArg;
use crate::tools::toolset::ToolSet;
use crate::tools::validate::{Report, ValidateOptions, Validator};

/// Arguments of `toolrail validate`.
#[derive(Debug, clap::Args)]
pub struct ValidateArgs {
    /// The tool set (OpenAI `tools` array, bare function list, or `{"tools": [...]}`).
    pub tools: String,
    /// The model output to check, or `-` for standard input.
    pub output: String,
    /// The envelope the output is written in.
    #[arg(long, value_enum, default_value_t = FormatArg::Openai)]
    pub format: FormatArg,
    /// Accept several calls (a JSON list, or envelopes separated by newlines).
    #[arg(long)]
    pub parallel: bool,
    /// Accept plain text that does not start like a call.
    #[arg(long)]
    pub auto: bool,
    /// Print the verdict as JSON.
    #[arg(long)]
    pub json: bool,
}

/// Runs `toolrail validate`.
pub fn run(args: &ValidateArgs) -> anyhow::Result<ExitCode> {
    let tools_text = super::read_input(&args.tools)?;
    let tools_text = String::from_utf8(tools_text)
        .with_context(|| format!("{}: not valid UTF-8", args.tools))?;
    let tools = ToolSet::from_json_str(&tools_text).with_context(|| args.tools.clone())?;
    let validator = Validator::new(&tools)?;
    let output = super::read_input(&args.output)?;
    let output = String::from_utf8(output)
        .with_context(|| format!("{}: the output is not valid UTF-8", args.output))?;
    let opts = ValidateOptions {
        parallel: args.parallel,
        auto: args.auto,
    };
    let report = validator.validate_output(args.format.into(), &output, opts);
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report_json(&report))?);
    } else {
        print_report(&report);
    }
    Ok(if report.is_valid() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

fn print_report(report: &Report) {
    if let Some(e) = &report.parse_error {
        println!(
            "not a {} tool call: at byte {}: {}",
            report.format, e.offset, e.message
        );
    }
    for issue in &report.output_issues {
        println!("{issue}");
    }
    if report.text && report.output_issues.is_empty() {
        println!("plain text, no tool call (allowed by --auto)");
    }
    for call in &report.calls {
        if call.is_valid() {
            println!("call {}: {} — valid", call.index, call.name);
        } else {
            println!("call {}: {} — invalid", call.index, call.name);
            for issue in &call.issues {
                let at = if issue.pointer.is_empty() {
                    "(arguments)"
                } else {
                    issue.pointer.as_str()
                };
                println!("  {at} [{}] {}", issue.keyword, issue.message);
            }
        }
    }
    if let Some(fb) = report.feedback() {
        println!("feedback: {fb}");
    }
}

/// The verdict as JSON (`--json`).
fn report_json(report: &Report) -> Value {
    let calls: Vec<Value> = report
        .calls
        .iter()
        .map(|c| {
            let issues: Vec<Value> = c
                .issues
                .iter()
                .map(|i| json!({"pointer": i.pointer, "keyword": i.keyword, "message": i.message}))
                .collect();
            json!({
                "index": c.index,
                "name": c.name,
                "arguments": c.arguments,
                "valid": c.is_valid(),
                "issues": issues,
                "feedback": c.feedback,
            })
        })
        .collect();
    json!({
        "valid": report.is_valid(),
        "format": report.format.as_str(),
        "text": report.text,
        "parse_error": report.parse_error.as_ref().map(|e| json!({"offset": e.offset, "message": e.message})),
        "output_issues": report.output_issues,
        "calls": calls,
        "feedback": report.feedback(),
    })
}
