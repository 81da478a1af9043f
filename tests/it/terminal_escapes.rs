//! Terminal control sequences in tool files, grammars and model outputs never reach the
//! terminal raw: every report and message shows them as visible escapes (`\x1b`, `\u{9b}`),
//! JSON outputs stay JSON with the exact strings, and a tool grammar stays a grammar.

use std::io::Write as _;
use std::path::Path;
use std::process::{Command, Stdio};

const TOOLRAIL: &str = env!("CARGO_BIN_EXE_toolrail");

/// Sets the window title, rings the bell, clears the screen.
const HOSTILE: &str = "\u{1b}]0;PWNED\u{7}\u{1b}[2J";
/// [`HOSTILE`] as toolrail shows it.
const SHOWN: &str = "\\x1b]0;PWNED\\x07\\x1b[2J";

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

/// Runs toolrail with `args` and `stdin` as its input.
fn toolrail(args: &[&str], stdin: &str) -> Run {
    let mut child = Command::new(TOOLRAIL)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8(out.stdout).unwrap(),
        stderr: String::from_utf8(out.stderr).unwrap(),
    }
}

/// No control character but line feed and tab in standard output and standard error.
fn assert_terminal_safe(run: &Run, what: &str) {
    for (stream, text) in [("stdout", &run.stdout), ("stderr", &run.stderr)] {
        let raw: Vec<char> = text
            .chars()
            .filter(|&c| c.is_control() && c != '\n' && c != '\t')
            .collect();
        assert!(
            raw.is_empty(),
            "{what}: raw control characters {raw:?} in {stream}:\n{text}"
        );
    }
}

fn write(dir: &Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

/// A tool set whose one tool `ok` has `description`, and an enum argument `a`.
fn tools_with_description(description: &str) -> String {
    serde_json::json!([{"type": "function", "function": {
        "name": "ok",
        "description": description,
        "parameters": {"type": "object", "properties": {
            "a": {"type": "string", "enum": [format!("x{HOSTILE}\u{9b}2J\u{7f}")]}
        }}
    }}])
    .to_string()
}

#[test]
fn a_tool_name_with_escapes_is_shown_escaped_in_the_error() {
    let dir = tempfile::tempdir().unwrap();
    let tools = serde_json::json!([{"type": "function", "function": {
        "name": format!("x{HOSTILE}"), "parameters": {"type": "object"}}}]);
    let file = write(dir.path(), "tools.json", &tools.to_string());
    let run = toolrail(&["grammar", &file], "");
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert_terminal_safe(&run, "grammar's error");
    assert!(
        run.stderr.contains(&format!("tool 'x{SHOWN}'")),
        "{}",
        run.stderr
    );
}

#[test]
fn a_description_with_escapes_is_an_escaped_grammar_comment_and_the_grammar_still_loads() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(
        dir.path(),
        "tools.json",
        &tools_with_description(&format!("weather {HOSTILE}\u{9b}")),
    );
    let run = toolrail(&["grammar", &file], "");
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_terminal_safe(&run, "grammar");
    assert!(
        run.stdout
            .contains(&format!("# tool 'ok': weather {SHOWN}\\u{{9b}}\n")),
        "{}",
        run.stdout
    );
    // The enum value is a GBNF literal: control characters as GBNF escapes, so the grammar
    // matches the exact value.
    let grammar = toolrail_gbnf::Grammar::parse(&run.stdout).unwrap();
    let mut engine = toolrail_engine::Engine::new(std::sync::Arc::new(grammar));
    let call = serde_json::json!({"name": "ok", "arguments": {
        "a": format!("x{HOSTILE}\u{9b}2J\u{7f}")}});
    let verdict = toolrail_engine::check_with(&mut engine, call.to_string().as_bytes());
    assert_eq!(verdict.kind, toolrail_engine::VerdictKind::Accepted);
}

#[test]
fn a_tool_grammar_written_with_raw_escapes_is_printed_as_the_same_grammar_escaped() {
    let dir = tempfile::tempdir().unwrap();
    let python = format!(
        "def f(code: str) -> str:\n    r\"\"\"\n    Send a code.\n\n    Grammar:\n        \
         root ::= \"code=\\\"\" \"{HOSTILE}\" \"\\\"\" # {HOSTILE}\n    \"\"\"\n    return code\n"
    );
    let file = write(dir.path(), "tools.py", &python);
    let run = toolrail(&["grammar", "--format", "pythonic", &file], "");
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_terminal_safe(&run, "grammar of a Python tool");
    assert!(run.stdout.contains("\\x1B]0;PWNED\\x07"), "{}", run.stdout);
    // The literal still means the control sequence itself.
    let grammar = toolrail_gbnf::Grammar::parse(&run.stdout).unwrap();
    let mut engine = toolrail_engine::Engine::new(std::sync::Arc::new(grammar));
    let call = format!("f(code=\"{HOSTILE}\")");
    let verdict = toolrail_engine::check_with(&mut engine, call.as_bytes());
    assert_eq!(
        verdict.kind,
        toolrail_engine::VerdictKind::Accepted,
        "{}",
        run.stdout
    );
}

#[test]
fn extract_shows_a_model_output_escaped_and_its_json_keeps_the_exact_name() {
    let output = serde_json::json!({"name": format!("x{HOSTILE}\u{9b}"), "arguments": {}});
    let run = toolrail(&["extract", "-"], &output.to_string());
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_terminal_safe(&run, "extract");
    assert!(
        run.stdout.contains(&format!("1. x{SHOWN}\\u{{9b}} {{}}")),
        "{}",
        run.stdout
    );
    let run = toolrail(&["extract", "--json", "-"], &output.to_string());
    assert_terminal_safe(&run, "extract --json");
    let report: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(report["calls"][0]["name"], format!("x{HOSTILE}\u{9b}"));
}

#[test]
fn validate_reports_are_escaped_and_its_json_is_exact() {
    let dir = tempfile::tempdir().unwrap();
    let tools = write(dir.path(), "tools.json", &tools_with_description("d"));
    let value = format!("y{HOSTILE}\u{9b}");
    let output = serde_json::json!({"name": "ok", "arguments": {"a": value}}).to_string();
    let output = write(dir.path(), "output.txt", &output);
    let run = toolrail(&["validate", &tools, &output], "");
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert_terminal_safe(&run, "validate");
    assert!(run.stdout.contains("\\u{9b}"), "{}", run.stdout);
    // A call of a tool that is not in the set, named with the sequence.
    let unknown = serde_json::json!({"name": format!("x{HOSTILE}"), "arguments": {}}).to_string();
    let unknown = write(dir.path(), "unknown.txt", &unknown);
    let run = toolrail(&["validate", &tools, &unknown], "");
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert_terminal_safe(&run, "validate of an unknown tool");
    assert!(run.stdout.contains("PWNED"), "{}", run.stdout);
    let run = toolrail(&["validate", "--json", &tools, &output], "");
    assert_terminal_safe(&run, "validate --json");
    let report: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(report["calls"][0]["arguments"]["a"], value);
}

#[test]
fn check_and_lint_show_the_grammar_and_input_lines_escaped() {
    let dir = tempfile::tempdir().unwrap();
    let grammar = write(
        dir.path(),
        "g.gbnf",
        "root ::= \"ab\" # \u{1b}]0;PWNED\u{7}\n",
    );
    let input = write(dir.path(), "in.txt", &format!("a{HOSTILE}"));
    let run = toolrail(&["check", &grammar, &input], "");
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert_terminal_safe(&run, "check");
    // The caret stands under the rejected byte as the line is shown.
    assert!(
        run.stdout.contains(&format!("  | a{SHOWN}\n  |  ^")),
        "{}",
        run.stdout
    );
    let run = toolrail(&["check", "--json", &grammar, &input], "");
    assert_terminal_safe(&run, "check --json");
    serde_json::from_str::<serde_json::Value>(&run.stdout).unwrap();

    let grammar = write(
        dir.path(),
        "bad.gbnf",
        &format!("root ::= \"{HOSTILE}\" undefined # {HOSTILE}\n"),
    );
    let run = toolrail(&["lint", &grammar], "");
    assert_eq!(run.code, 1, "{}", run.stdout);
    assert_terminal_safe(&run, "lint");
    assert!(run.stdout.contains(SHOWN), "{}", run.stdout);
    let run = toolrail(&["lint", "--json", &grammar], "");
    assert_terminal_safe(&run, "lint --json");
    serde_json::from_str::<serde_json::Value>(&run.stdout).unwrap();
}

#[test]
fn template_shows_a_description_with_escapes_escaped() {
    let dir = tempfile::tempdir().unwrap();
    let tools = write(
        dir.path(),
        "tools.json",
        &tools_with_description(&format!("weather {HOSTILE}")),
    );
    // A template that writes each description as it is into the prompt.
    let Some(template) = toolrail_testkit::corpus("llama-cpp-chat/templates/Qwen3-Coder.jinja")
    else {
        return;
    };
    let template = template.display().to_string();
    for json in [false, true] {
        let mut args = vec!["template", "--template", &template, "--tools", &tools];
        if json {
            args.push("--json");
        }
        let run = toolrail(&args, "");
        assert_eq!(run.code, 0, "{}", run.stderr);
        assert_terminal_safe(&run, &format!("template (json: {json})"));
        if json {
            let report: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
            assert!(report.to_string().contains("PWNED\\u0007"), "{report}");
        } else {
            assert!(
                run.stdout
                    .contains(&format!("<description>weather {SHOWN}</description>")),
                "{}",
                run.stdout
            );
        }
    }
}

#[test]
fn generate_streams_a_model_output_with_escapes_escaped_and_the_transcript_keeps_it() {
    let Some(model) = toolrail_testkit::model() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    // The grammar makes the model write the control sequence itself.
    let grammar = write(
        dir.path(),
        "g.gbnf",
        "root ::= \"x\\x1b]0;PWNED\\x07\\x1b[2J\"\n",
    );
    let transcript = dir.path().join("run.json");
    let run = toolrail(
        &[
            "generate",
            "--model",
            &model.display().to_string(),
            "--grammar",
            &grammar,
            "--prompt",
            "Say something.",
            "--max-tokens",
            "32",
            "--transcript",
            &transcript.display().to_string(),
        ],
        "",
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_terminal_safe(&run, "generate");
    assert!(run.stdout.contains(&format!("x{SHOWN}")), "{}", run.stdout);
    // The transcript is data: the exact text (JSON escapes it as JSON does).
    let saved: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&transcript).unwrap()).unwrap();
    assert!(saved.to_string().contains("PWNED\\u0007"), "{saved}");
}

#[test]
fn bench_calls_shows_a_question_id_with_escapes_escaped() {
    let Some(model) = toolrail_testkit::model() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let case = serde_json::json!({
        "id": format!("q{HOSTILE}"),
        "question": [[{"role": "user", "content": format!("Weather in Paris? {HOSTILE}")}]],
        "function": [{"name": "get_weather", "description": format!("weather {HOSTILE}"),
            "parameters": {"type": "dict", "properties": {"city": {"type": "string"}},
            "required": ["city"]}}]
    });
    let cases = write(dir.path(), "cases.json", &format!("{case}\n"));
    let run = toolrail(
        &[
            "bench-calls",
            "--model",
            &model.display().to_string(),
            "--cases",
            &cases,
            "-n",
            "1",
            "--max-tokens",
            "24",
            "--mode",
            "grammar",
        ],
        "",
    );
    assert_terminal_safe(&run, "bench-calls");
    assert!(
        run.stdout.contains(&format!("q{SHOWN}")),
        "{}\n{}",
        run.stdout,
        run.stderr
    );
}
