//! `toolrail extract TEXT|- [--json] [--allow TOOL]...`: find the tool calls in a model's
//! unconstrained output.
//!
//! TEXT is the model output itself; `-` reads it from standard input (so a file is
//! `toolrail extract - < out.txt`). Prints the calls in human form, or with `--json` one JSON
//! object `{"calls", "patterns", "spans", "diagnostics", "prose"}` where `calls[i]` was found
//! by `patterns[i]` at byte span `spans[i]`. Exit status: 0 when at least one call was found,
//! 1 when none, 2 on usage errors (unreadable or non-UTF-8 input; clap's own errors also exit 2).

use std::io::{Read, Write};
use std::process::ExitCode;

use anyhow::Context as _;
use serde_json::json;

use toolrail_gbnf::source::{LineCol, LineIndex};
use toolrail_tools::extract::{ExtractOptions, Extraction, extract_calls_with};

/// Arguments of `toolrail extract`.
#[derive(Debug, Clone, clap::Args)]
pub struct ExtractArgs {
    /// The model output to search, or `-` to read it from standard input.
    #[arg(value_name = "TEXT|-")]
    pub text: String,
    /// Print one JSON object instead of the human-readable listing.
    #[arg(long)]
    pub json: bool,
    /// Only accept calls of this tool (repeatable); other calls become diagnostics.
    #[arg(long = "allow", value_name = "TOOL")]
    pub allow: Vec<String>,
}

/// Runs `toolrail extract` on standard input and output.
pub fn run(args: &ExtractArgs) -> anyhow::Result<ExitCode> {
    let stdin = std::io::stdin();
    let mut report = Vec::new();
    let code = run_with(args, &mut stdin.lock(), &mut report)?;
    super::output::write_stdout(&report)?;
    Ok(ExitCode::from(code))
}

/// The command with its input and output streams given (the report terminal-safe); returns the
/// exit status (0, 1 or 2).
pub fn run_with(
    args: &ExtractArgs,
    input: &mut dyn Read,
    out: &mut dyn Write,
) -> anyhow::Result<u8> {
    let text = if args.text == "-" {
        let mut bytes = Vec::new();
        if let Err(err) = input.read_to_end(&mut bytes) {
            errln!("toolrail extract: cannot read standard input: {err}");
            return Ok(2);
        }
        match String::from_utf8(bytes) {
            Ok(text) => text,
            Err(err) => {
                errln!(
                    "toolrail extract: standard input is not UTF-8 (invalid byte at offset {})",
                    err.utf8_error().valid_up_to()
                );
                return Ok(2);
            }
        }
    } else {
        args.text.clone()
    };
    let options = ExtractOptions {
        allowed_tools: (!args.allow.is_empty()).then(|| args.allow.clone()),
    };
    let extraction = extract_calls_with(&text, &options);
    if args.json {
        let rendered = serde_json::to_string_pretty(&json_report(&extraction))
            .context("serialising the extraction")?;
        let rendered = super::output::json_terminal_safe(&rendered);
        writeln!(out, "{rendered}").context("writing the report")?;
    } else {
        // The model's text (names, arguments, prose) made terminal-safe.
        let mut human = Vec::new();
        write_human(&mut human, &text, &extraction).context("writing the report")?;
        let human = String::from_utf8_lossy(&human);
        out.write_all(toolrail_gbnf::terminal_safe(&human).as_bytes())
            .context("writing the report")?;
    }
    Ok(if extraction.calls.is_empty() { 1 } else { 0 })
}

/// The `--json` report.
pub fn json_report(extraction: &Extraction) -> serde_json::Value {
    json!({
        "calls": extraction.calls.iter().map(|c| &c.call).collect::<Vec<_>>(),
        "patterns": extraction.calls.iter().map(|c| c.pattern).collect::<Vec<_>>(),
        "spans": extraction.calls.iter().map(|c| [c.span.start, c.span.end]).collect::<Vec<_>>(),
        "diagnostics": extraction.diagnostics,
        "prose": extraction.prose,
    })
}

fn write_human(out: &mut dyn Write, text: &str, extraction: &Extraction) -> std::io::Result<()> {
    let count = extraction.calls.len();
    writeln!(out, "{count} call{}", if count == 1 { "" } else { "s" })?;
    for (i, found) in extraction.calls.iter().enumerate() {
        let args = serde_json::Value::Object(found.call.arguments.clone());
        writeln!(
            out,
            "{}. {} {}\n   {} at bytes {}..{}",
            i + 1,
            found.call.name,
            args,
            found.pattern,
            found.span.start,
            found.span.end
        )?;
    }
    if !extraction.diagnostics.is_empty() {
        writeln!(out, "diagnostics:")?;
        // One index for all diagnostics: a text with many of them stays linear.
        let lines = LineIndex::new(text.as_bytes());
        for d in &extraction.diagnostics {
            let LineCol { line, column } = lines.line_col(text.as_bytes(), d.at);
            writeln!(
                out,
                "  {} at byte {} (line {line}, column {column}): {}",
                d.pattern, d.at, d.message
            )?;
        }
    }
    if !extraction.prose.is_empty() {
        writeln!(out, "prose:")?;
        for line in extraction.prose.lines() {
            writeln!(out, "  {line}")?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run_text(text: &str, json: bool, stdin: &str) -> (u8, String) {
        let args = ExtractArgs {
            text: text.to_owned(),
            json,
            allow: Vec::new(),
        };
        let mut out = Vec::new();
        let code = run_with(&args, &mut stdin.as_bytes(), &mut out).unwrap_or(99);
        (code, String::from_utf8(out).unwrap_or_default())
    }

    #[test]
    fn human_output_and_exit_zero() {
        let (code, out) = run_text(r#"Sure. call:get_weather{city: "Paris"}"#, false, "");
        assert_eq!(code, 0);
        assert_eq!(
            out,
            "1 call\n1. get_weather {\"city\":\"Paris\"}\n   call:verb{...} at bytes 6..37\nprose:\n  Sure.\n"
        );
    }

    #[test]
    fn json_output_from_stdin() {
        let (code, out) = run_text("-", true, r#"{"name": "a", "arguments": {"x": 1}}"#);
        assert_eq!(code, 0);
        let value: serde_json::Value = serde_json::from_str(&out).unwrap_or_default();
        assert_eq!(
            value,
            json!({
                "calls": [{"name": "a", "arguments": {"x": 1}}],
                "patterns": ["bare_json"],
                "spans": [[0, 36]],
                "diagnostics": [],
                "prose": ""
            })
        );
    }

    #[test]
    fn no_call_exits_one_with_diagnostics() {
        let (code, out) = run_text("<tool_call>{\"name\": }</tool_call>", false, "");
        assert_eq!(code, 1);
        assert!(
            out.starts_with(
                "0 calls\ndiagnostics:\n  <tool_call> at byte 20 (line 1, column 21): "
            ),
            "{out}"
        );
    }

    #[test]
    fn invalid_utf8_on_stdin_is_a_usage_error() {
        let args = ExtractArgs {
            text: "-".to_owned(),
            json: false,
            allow: Vec::new(),
        };
        let mut out = Vec::new();
        let code = run_with(&args, &mut &[0xffu8, 0xfe][..], &mut out).unwrap_or(99);
        assert_eq!(code, 2);
    }

    #[test]
    fn allow_list_filters() {
        let args = ExtractArgs {
            text: "call:a{x: 1} call:b{y: 2}".to_owned(),
            json: true,
            allow: vec!["b".to_owned()],
        };
        let mut out = Vec::new();
        let code = run_with(&args, &mut &b""[..], &mut out).unwrap_or(99);
        assert_eq!(code, 0);
        let value: serde_json::Value = serde_json::from_slice(&out).unwrap_or_default();
        assert_eq!(
            value["calls"],
            json!([{"name": "b", "arguments": {"y": 2}}])
        );
        assert_eq!(value["diagnostics"].as_array().map(Vec::len), Some(1));
    }
}
