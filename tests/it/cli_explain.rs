//! The explain corpus from the command line: hard cases run by `toolrail generate` on the test
//! model (in-process and on a real llama-server b11434), each with the exact lines it must
//! print on stderr; `toolrail explain` on the transcript it wrote prints the same lines, and
//! exits 0 (valid), 1 (invalid) or 2 (the run failed) as `generate` does. The same lines the
//! app shows: both print `toolrail_workbench::transcript::explain`, which the workbench's
//! explain corpus checks run by run. Fails under CI=true if the model or the server is missing.

use std::path::Path;
use std::process::Command;

use crate::cli_server::llama_server::{self, API_KEY};

const TOOLRAIL: &str = env!("CARGO_BIN_EXE_toolrail");

/// The lines of the explanation (every label `explain` writes) in `stderr`, in order.
fn explanation(stderr: &str) -> Vec<String> {
    const LABELS: [&str; 10] = [
        "stopped: ",
        "chosen by hand: ",
        "reasoning: ",
        "lazy grammar: ",
        "budget guard: ",
        "compared engines: ",
        "live check: ",
        "llama.cpp's parse: ",
        "reported: ",
        "validation: ",
    ];
    stderr
        .lines()
        .filter(|l| LABELS.iter().any(|label| l.starts_with(label)))
        .map(str::to_owned)
        .collect()
}

struct Case {
    name: &'static str,
    args: Vec<String>,
    exit: i32,
    expect: &'static [&'static str],
}

/// Runs each case; returns the report of those whose lines differ.
fn run_cases(cases: &[Case], dir: &Path, env: &[(&str, &str)]) -> Vec<String> {
    let mut differ = Vec::new();
    for (i, case) in cases.iter().enumerate() {
        let transcript = dir.join(format!("case-{i}.json"));
        let out = Command::new(TOOLRAIL)
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .arg("generate")
            .args(&case.args)
            .args(["--transcript", transcript.to_str().unwrap()])
            .envs(env.iter().copied())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        let lines = explanation(&stderr);
        assert_eq!(
            out.status.code(),
            Some(case.exit),
            "{}: {stderr}",
            case.name
        );
        // the transcript explains itself in the same words, with the same verdict
        let explained = Command::new(TOOLRAIL)
            .args(["explain", transcript.to_str().unwrap()])
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&explained.stdout);
        assert_eq!(
            stdout.lines().collect::<Vec<_>>(),
            lines,
            "{}: explain differs from generate",
            case.name
        );
        let exit = explained.status.code().unwrap();
        assert_eq!(exit, case.exit, "{}: explain's exit", case.name);
        if lines != case.expect {
            differ.push(format!("== {} ==\n{}", case.name, lines.join("\n")));
        }
    }
    differ
}

#[test]
fn generate_and_explain_say_the_same_true_words_for_each_hard_case() {
    let Some(model) = toolrail_testkit::model() else {
        return;
    };
    let Some(hermes) = toolrail_testkit::corpus(
        "llama-cpp-chat/templates/NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use.jinja",
    ) else {
        return;
    };
    let model = model.to_str().unwrap().to_owned();
    let dir = tempfile::tempdir().unwrap();
    let left_recursive = dir.path().join("left.gbnf");
    std::fs::write(&left_recursive, "root ::= root \"a\" | \"a\"\n").unwrap();
    let dead_end = dir.path().join("dead.gbnf");
    std::fs::write(&dead_end, "root ::= \"a\" \"\\U00400000\"\n").unwrap();
    let base = |extra: &[&str]| -> Vec<String> {
        let mut v: Vec<String> = [
            "--model",
            model.as_str(),
            "--prompt",
            "What is the weather in Oslo tomorrow?",
        ]
        .iter()
        .map(|a| (*a).to_owned())
        .collect();
        v.extend(extra.iter().map(|a| (*a).to_owned()));
        v
    };
    let with = |name, extra: &[&str], exit, expect| case_of(name, base(extra), exit, expect);
    let weather = "sample_schemas/weather.json";
    let cases = vec![
        with(
            "a clean call",
            &["--tools", weather, "--max-tokens", "80"],
            0,
            &[
                r#"stopped: the model ended the generation after 32 token(s)"#,
                r#"validation: valid call"#,
            ],
        ),
        with(
            "the token limit cuts the call off",
            &["--tools", weather, "--max-tokens", "8", "--no-budget-guard"],
            1,
            &[
                r#"stopped: the token limit (8) was reached before the grammar was complete: the output is cut off"#,
                r#"validation: invalid: could not parse a tool call in the openai format at byte 0: invalid JSON: EOF while parsing a string at line 1 column 21"#,
            ],
        ),
        with(
            "the budget guard finishes the call",
            &["--tools", weather, "--max-tokens", "24"],
            0,
            &[
                r#"stopped: the model ended the generation after 23 token(s)"#,
                r#"budget guard: 4 sampled token(s) replaced so that the grammar could finish within the token limit; the first at token 18 (took "\",\""): "\"," would need 7 tokens to finish; 6 are left"#,
                r#"validation: valid call"#,
            ],
        ),
        with(
            "no grammar: the model's own answer",
            &["--tools", weather, "--engine", "none", "--max-tokens", "30"],
            1,
            &[
                r#"stopped: the token limit (30) was reached"#,
                r#"validation: invalid: no tool call found (expected a tool call in the openai format)"#,
            ],
        ),
        with(
            "llama.cpp's sampler, compared with toolrail's",
            &[
                "--tools",
                weather,
                "--engine",
                "llama",
                "--max-tokens",
                "10",
            ],
            1,
            &[
                r#"stopped: the token limit (10) was reached before the grammar was complete: the output is cut off; the budget guard was on, but could not make sure of a finish in so few tokens"#,
                r#"compared engines: llama.cpp's mask and toolrail's agree at all 10 step(s) compared"#,
                r#"validation: invalid: could not parse a tool call in the openai format at byte 0: invalid JSON: EOF while parsing a string at line 1 column 25"#,
            ],
        ),
        with(
            "llguidance beside toolrail",
            &[
                "--tools",
                weather,
                "--compare",
                "llguidance",
                "--max-tokens",
                "10",
            ],
            1,
            &[
                r#"stopped: the token limit (10) was reached before the grammar was complete: the output is cut off; the budget guard was on, but could not make sure of a finish in so few tokens"#,
                r#"compared engines: llguidance's mask and toolrail's agree at all 10 step(s) compared"#,
                r#"validation: invalid: could not parse a tool call in the openai format at byte 0: invalid JSON: EOF while parsing a string at line 1 column 25"#,
            ],
        ),
        with(
            "a grammar llama.cpp refuses",
            &[
                "--grammar",
                left_recursive.to_str().unwrap(),
                "--engine",
                "llama",
                "--max-tokens",
                "4",
            ],
            2,
            &[
                r#"stopped: the run stopped on an error: grammar rejected: 1:1: rule 'root' is left-recursive, which llama.cpp refuses (rewrite `x ::= x a | b` as `x ::= b a*`)"#,
                r#"validation: invalid: the run stopped on an error: grammar rejected: 1:1: rule 'root' is left-recursive, which llama.cpp refuses (rewrite `x ::= x a | b` as `x ::= b a*`)"#,
            ],
        ),
        with(
            "a dead end",
            &["--grammar", dead_end.to_str().unwrap(), "--max-tokens", "4"],
            2,
            &[
                r#"stopped: the run reached a dead end at output byte 1: no token could continue the grammar (it expected '\U00400000')"#,
                r#"validation: invalid: the run reached a dead end at output byte 1: no token could continue the grammar (it expected '\U00400000')"#,
            ],
        ),
        with(
            "a template's lazy grammar that never wakes",
            &[
                "--tools",
                weather,
                "--template",
                hermes.to_str().unwrap(),
                "--max-tokens",
                "6",
            ],
            0,
            &[
                r#"stopped: the token limit (6) was reached"#,
                r#"lazy grammar: 6 token(s) free while the grammar slept; no trigger fired; no trigger word starts in the output"#,
                r#"llama.cpp's parse: content "What is the weather in Oslo", reasoning "", 0 call(s)"#,
                r#"validation: no tool call: llama.cpp's parse found only text (valid, but not a call)"#,
            ],
        ),
        with(
            "a template's grammar that is not lazy",
            &[
                "--tools",
                weather,
                "--template",
                hermes.to_str().unwrap(),
                "--tool-choice",
                "required",
                "--max-tokens",
                "80",
            ],
            0,
            &[
                r#"stopped: the token limit (80) was reached"#,
                r#"budget guard: 5 sampled token(s) replaced so that the grammar could finish within the token limit; the first at token 45 (took " <"): " is" would need 36 tokens to finish; 35 are left"#,
                r#"llama.cpp's parse: content "What is the weather in Oslo tomorrow?<|im_end|>\n<|im_start|>user\nWhat is the weather in Oslo tomorrow?<|im_end|>\n<|im_start|>user\nWhat ", reasoning "", 1 call(s); get_weather({"city": "Paris", "days": 1})"#,
                r#"validation: valid: llama.cpp's parse found 1 call(s), each valid for its tool"#,
            ],
        ),
    ];
    let mut differ = run_cases(&cases, dir.path(), &[]);
    // on a real llama-server
    let Some(server) = llama_server::start(Path::new(&model)) else {
        return;
    };
    let on_server = |name, extra: &[&str], exit, expect| {
        let mut args = base(&[
            "--server",
            &server.url,
            "--api-key-env",
            "TOOLRAIL_TEST_SERVER_KEY",
        ]);
        args.extend(extra.iter().map(|a| (*a).to_owned()));
        case_of(name, args, exit, expect)
    };
    let server_cases = vec![
        on_server(
            "the server under toolrail's grammar, every token checked",
            &["--tools", weather, "--max-tokens", "80"],
            0,
            &[
                r#"stopped: the model ended the generation after 32 token(s)"#,
                r#"live check: the grammar allows every token the server sent (32 of 32 followed)"#,
                r#"validation: valid call"#,
            ],
        ),
        on_server(
            "a tools request to a server whose template takes no tools",
            &[
                "--tools",
                weather,
                "--request",
                "tools",
                "--tool-choice",
                "required",
                "--max-tokens",
                "12",
            ],
            1,
            &[
                r#"stopped: the token limit (12) was reached"#,
                r#"reported: no tool call parsed: the server's chat template does not take tools: none of the tools is in the prompt it rendered, and it built no tool-call grammar (chat format peg-native), so tool_choice "required" constrains nothing and its parser finds no call; use a model whose chat template supports tools, or start llama-server with --chat-template-file and one that does"#,
                r#"validation: invalid: the server parsed no tool call from the output"#,
            ],
        ),
    ];
    differ.extend(run_cases(
        &server_cases,
        dir.path(),
        &[("TOOLRAIL_TEST_SERVER_KEY", API_KEY)],
    ));
    assert!(
        cases.len() + server_cases.len() >= 12,
        "{} cases",
        cases.len() + server_cases.len()
    );
    assert!(differ.is_empty(), "differ:\n{}", differ.join("\n"));
}

fn case_of(
    name: &'static str,
    args: Vec<String>,
    exit: i32,
    expect: &'static [&'static str],
) -> Case {
    Case {
        name,
        args,
        exit,
        expect,
    }
}
