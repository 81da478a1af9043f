//! `toolrail validate TOOLS OUTPUT [--format F] [--parallel] [--auto] [--json]`: checks a model
//! output against a tool set. Exit 0 when the output is a valid call (or, with `--auto`, plain
//! text), 1 when it is not (every problem printed, then the one-line feedback for the model),
//! 2 on usage or input errors.

use std::process::ExitCode;

use serde_json::{Value, json};

use super::grammar::FormatArg;
use toolrail_engine::VerdictKind;
use toolrail_tools::grammar::{GrammarOptions, tool_call_grammar};
use toolrail_tools::toolset::ToolSet;
use toolrail_tools::validate::{Report, ValidateOptions, Validator};

/// Arguments of `toolrail validate`.
#[derive(Debug, clap::Args)]
pub struct ValidateArgs {
    /// The tool set, in any shape `toolrail grammar` reads.
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
    /// Check each tool as a lenient grammar reads it: where a schema admits no value as
    /// written but has one plain reading (`type: integer` with `enum: ["1", "2"]`), the call is
    /// checked against the reading the grammar enforces (each named on stderr); constraints
    /// lenient grammars drop are still checked
    #[arg(long)]
    pub lenient: bool,
}

/// Runs `toolrail validate`.
pub fn run(args: &ValidateArgs) -> anyhow::Result<ExitCode> {
    let tools_text = super::common::read_text(&args.tools, "the tool set")?;
    let tools = super::common::load_tool_set(&tools_text, &args.tools)?;
    let validator = Validator::with_readings(&tools, args.lenient)?;
    if args.lenient {
        let opts = GrammarOptions {
            lenient: true,
            ..GrammarOptions::default()
        };
        let readings = tool_call_grammar(&tools, &opts).map(|g| g.warnings);
        for w in readings
            .iter()
            .flatten()
            .filter(|w| w.starts_with("read: "))
        {
            eprintln!("warning: {w}");
        }
    }
    let output = super::common::read_text(&args.output, "the model output")?;
    let opts = ValidateOptions {
        parallel: args.parallel,
        auto: args.auto,
        lenient: args.lenient,
    };
    let report = validator.validate_output(args.format.into(), &output, opts);
    // An invalid output is also matched against the tool-call grammar: where the grammar would
    // have stopped the model, and what it expected there (literals and JSON pointer).
    let grammar_stop = if report.is_valid() {
        None
    } else {
        grammar_stop(&tools, args, &output)
    };
    if args.json {
        let mut json = report_json(&report, &tools);
        json["grammar"] = json!(grammar_stop);
        super::output::write_json(&serde_json::to_string_pretty(&json)?)?;
    } else {
        print_report(&report)?;
        if let Some(stop) = &grammar_stop {
            outln!("grammar: {stop}")?;
        }
    }
    Ok(if report.is_valid() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// Where the tool-call grammar (the same envelope, parallel and auto options) rejects `output`
/// and what it expected there, or that the output is an unfinished call; `None` when the
/// grammar accepts it or cannot be built.
fn grammar_stop(tools: &ToolSet, args: &ValidateArgs, output: &str) -> Option<String> {
    let opts = GrammarOptions {
        format: args.format.into(),
        parallel: args.parallel,
        auto: args.auto,
        compact: false,
        lenient: true,
    };
    let built = tool_call_grammar(tools, &opts).ok()?;
    let grammar = std::sync::Arc::new(toolrail_gbnf::Grammar::parse(&built.text).ok()?);
    let mut engine = toolrail_engine::Engine::new(grammar);
    // the text as the validator reads it: a trailing line break (a file, `echo`) is no part of
    // the call
    let output = output.trim_end();
    let verdict = toolrail_engine::check_with(&mut engine, output.as_bytes());
    let consumed = &output.as_bytes()[..verdict.offset.unwrap_or(output.len())];
    let expected =
        toolrail_workbench::analysis::readable_expected(&engine, &verdict, consumed, &built.places)
            .join(", ");
    match verdict.kind {
        VerdictKind::Accepted => None,
        VerdictKind::Incomplete => Some(format!(
            "incomplete at {}: next may be {expected}",
            verdict.position
        )),
        VerdictKind::Rejected => Some(format!(
            "rejected at {} (byte {}): expected {expected}",
            verdict.position,
            verdict.offset.unwrap_or(0)
        )),
        VerdictKind::TooAmbiguous => {
            Some(format!("too ambiguous to follow at {}", verdict.position))
        }
    }
}

fn print_report(report: &Report) -> std::io::Result<()> {
    if let Some(e) = &report.parse_error {
        outln!(
            "not a {} tool call: at byte {}: {}",
            report.format,
            e.offset,
            e.message
        )?;
    }
    for issue in &report.output_issues {
        outln!("{issue}")?;
    }
    if report.text && report.output_issues.is_empty() {
        outln!("plain text, no tool call (allowed by --auto)")?;
    }
    for call in &report.calls {
        if call.is_valid() {
            outln!("call {}: {} — valid", call.index, call.name)?;
        } else {
            outln!("call {}: {} — invalid", call.index, call.name)?;
            for issue in &call.issues {
                let at = if issue.pointer.is_empty() {
                    "(arguments)"
                } else {
                    issue.pointer.as_str()
                };
                outln!("  {at} [{}] {}", issue.keyword, issue.message)?;
            }
        }
    }
    if let Some(fb) = report.feedback() {
        outln!("feedback: {fb}")?;
    }
    Ok(())
}

/// The verdict as JSON (`--json`), with the tool set's `shape` and load `warnings`.
fn report_json(report: &Report, tools: &ToolSet) -> Value {
    let (shape, warnings) = super::common::tool_set_json(tools);
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
        "category": report.category(),
        "shape": shape,
        "warnings": warnings,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(dir: &std::path::Path, output: &str, format: FormatArg) -> ValidateArgs {
        let tools = dir.join("tools.json");
        std::fs::write(
            &tools,
            r#"[{"name": "get_weather", "parameters": {"type": "object",
                "properties": {"city": {"type": "string"}}, "required": ["city"]}}]"#,
        )
        .unwrap();
        let out = dir.join("output.txt");
        std::fs::write(&out, output).unwrap();
        ValidateArgs {
            tools: tools.display().to_string(),
            output: out.display().to_string(),
            format,
            parallel: false,
            auto: false,
            json: true,
            lenient: false,
        }
    }

    #[test]
    fn an_invalid_output_says_where_the_grammar_stops_it_in_the_schema_words() {
        let dir = tempfile::tempdir().unwrap();
        let tools = dir.path().join("tools.json");
        std::fs::write(
            &tools,
            r#"[{"name": "ls", "parameters": {"type": "object",
                "properties": {"sortBy": {"enum": ["name", "size", "mtime"]}}}}]"#,
        )
        .unwrap();
        let tools =
            super::super::common::load_tool_set(&std::fs::read_to_string(&tools).unwrap(), "t")
                .unwrap();
        let a = args(dir.path(), "", FormatArg::Openai);
        let stop = grammar_stop(
            &tools,
            &a,
            r#"{"name": "ls", "arguments": {"sortBy": "x"}}"#,
        )
        .unwrap();
        assert!(
            stop.ends_with(r#"expected "name" | "size" | "mtime" at /arguments/sortBy in ls"#),
            "{stop}"
        );
        assert_eq!(
            grammar_stop(
                &tools,
                &a,
                r#"{"name": "ls", "arguments": {"sortBy": "size"}}"#
            ),
            None
        );
    }

    #[test]
    fn exit_codes() {
        let dir = tempfile::tempdir().unwrap();
        let ok = args(
            dir.path(),
            r#"get_weather(city="Oslo")"#,
            FormatArg::Pythonic,
        );
        assert_eq!(run(&ok).unwrap(), ExitCode::SUCCESS);
        let bad = args(
            dir.path(),
            r#"get_weather(town="Oslo")"#,
            FormatArg::Pythonic,
        );
        assert_eq!(run(&bad).unwrap(), ExitCode::from(1));
        let missing = ValidateArgs {
            tools: dir.path().join("nope.json").display().to_string(),
            ..args(dir.path(), "", FormatArg::Openai)
        };
        assert!(
            run(&missing).is_err(),
            "input errors are exit 2 in cli::main"
        );
    }

    /// `--lenient` checks the reading a lenient grammar enforces; without it the schema as
    /// written admits no value; a trailing line break is no part of the call.
    #[test]
    fn lenient_validation_checks_the_grammars_reading() {
        let dir = tempfile::tempdir().unwrap();
        let base = args(
            dir.path(),
            "{\"name\": \"buy\", \"arguments\": {\"n\": 2}}\n",
            FormatArg::Openai,
        );
        std::fs::write(
            &base.tools,
            r#"[{"name": "buy", "parameters": {"type": "object",
                "properties": {"n": {"type": "integer", "enum": ["1", "2"]}}, "required": ["n"]}}]"#,
        )
        .unwrap();
        assert_eq!(run(&base).unwrap(), ExitCode::from(1));
        let lenient = ValidateArgs {
            lenient: true,
            ..base
        };
        assert_eq!(run(&lenient).unwrap(), ExitCode::SUCCESS);
    }

    #[test]
    fn json_report_carries_feedback() {
        let tools =
            ToolSet::from_value(&serde_json::json!({"tools": [{"name": "f", "inputSchema": {
            "type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]},
            "annotations": {}}]}))
            .unwrap();
        let v = Validator::new(&tools).unwrap();
        let r = v.validate_output(
            toolrail_tools::envelope::Format::OpenAi,
            r#"{"name": "f", "arguments": {}}"#,
            ValidateOptions::default(),
        );
        let j = report_json(&r, &tools);
        assert_eq!(j["valid"], false);
        assert_eq!(j["shape"]["id"], "mcp-tools-list");
        assert_eq!(j["warnings"][0]["pointer"], "/tools/0/annotations");
        assert_eq!(j["warnings"][0]["severity"], "note");
        assert_eq!(j["feedback"], "missing required args ['a'] for tool 'f'");
        assert_eq!(j["calls"][0]["issues"][0]["keyword"], "required");
    }
}
