//! `toolrail template` on llama.cpp's own chat templates (no model needed): the JSON report,
//! llama.cpp's parse of an output, the named-tool warning, and a refused template.

use std::process::Command;

use serde_json::Value;

const TOOLRAIL: &str = env!("CARGO_BIN_EXE_toolrail");
const WEATHER: &str = "sample_schemas/weather.json";

/// `../shared/corpus/llama-cpp-chat/templates/<name>.jinja` as an argument; missing: a failure
/// under `CI=true`, otherwise None (a skip).
fn template(name: &str) -> Option<String> {
    toolrail_testkit::corpus(&format!("llama-cpp-chat/templates/{name}.jinja"))
        .map(|p| p.display().to_string())
}

fn run(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(TOOLRAIL)
        .args(args)
        .output()
        .expect("toolrail runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn qwen3_coder_json_report_and_parse() {
    let Some(path) = template("Qwen3-Coder") else {
        return;
    };
    let output = std::env::temp_dir().join(format!("toolrail-template-{}.txt", std::process::id()));
    std::fs::write(
        &output,
        "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>\n</tool_call>",
    )
    .unwrap();
    let output_arg = output.to_string_lossy().into_owned();
    let (code, stdout, stderr) = run(&[
        "template",
        "--template",
        &path,
        "--tools",
        WEATHER,
        "--json",
        "--parse",
        &output_arg,
    ]);
    let _ = std::fs::remove_file(&output);
    assert_eq!(code, 0, "{stderr}");
    let report: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(report["format"], "peg-native");
    assert_eq!(report["grammar_lazy"], true);
    assert_eq!(report["grammar_triggers"][0]["type"], "word");
    assert_eq!(report["grammar_triggers"][0]["value"], "<tool_call>");
    assert!(
        report["prompt"]
            .as_str()
            .unwrap()
            .contains("<name>get_weather</name>")
    );
    assert_eq!(report["inputs"]["defaults"], "server");
    assert_eq!(report["inputs"]["reasoning_format"], "deepseek");
    assert!(report["sampler"].is_null(), "no vocabulary without --model");
    assert!(report["lint"].is_array());
    let call = &report["parsed"]["tool_calls"][0];
    assert_eq!(call["name"], "get_weather");
    let arguments: Value = serde_json::from_str(call["arguments"].as_str().unwrap()).unwrap();
    assert_eq!(arguments, serde_json::json!({"city": "Paris"}));
}

#[test]
fn named_tool_choice_warns_and_an_unknown_tool_is_refused() {
    let Some(path) = template("Qwen3-Coder") else {
        return;
    };
    let (code, stdout, stderr) = run(&[
        "template",
        "--template",
        &path,
        "--tools",
        WEATHER,
        "--tool-choice",
        "get_weather",
        "--parse",
        "-",
    ]);
    // standard input is empty: no call, plain content, which the format accepts
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stdout.contains("warning: llama-server b11434 ignores a tool_choice that names a function"),
        "{stdout}"
    );
    let (code, _, stderr) = run(&[
        "template",
        "--template",
        &path,
        "--tools",
        WEATHER,
        "--tool-choice",
        "nope",
    ]);
    assert_eq!(code, 2);
    assert!(stderr.contains("--tool-choice nope"), "{stderr}");
}

/// A template llama.cpp's Jinja parser refuses: exit 2 with the parser's own message (llama.cpp
/// rethrows it sliced, as a bare "std::exception"; toolrail parses first to keep the words).
#[test]
fn a_template_llama_cpp_refuses_exits_2_with_its_message() {
    let dir = tempfile::tempdir().unwrap();
    for (source, says) in [
        ("{% if %}", "llama.cpp: "),
        ("{% include '/etc/passwd' %}", "Unknown statement: include"),
        ("x {# never closed", "missing end of comment tag"),
    ] {
        let bad = dir.path().join("bad.jinja");
        std::fs::write(&bad, source).unwrap();
        let bad_arg = bad.to_string_lossy().into_owned();
        let (code, stdout, stderr) = run(&["template", "--template", &bad_arg, "--tools", WEATHER]);
        assert_eq!(code, 2, "{source}: {stdout}");
        assert!(
            stderr.contains(says) && !stderr.contains("std::exception"),
            "{source}: {stderr}"
        );
    }
}

/// `generate --template` on the test model: Hermes 2 Pro's template with `tool_choice`
/// `required` gives a grammar that constrains from the first token; greedy under it (and the
/// budget guard) writes a call, which llama.cpp's parser reads back and the validator accepts;
/// the transcript records the template, its parse, and tokens without lazy notes.
#[test]
fn generate_with_a_template_grammar_parses_and_validates_the_call() {
    let Some(path) = template("NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use") else {
        return;
    };
    let Some(model) = toolrail_testkit::model() else {
        return;
    };
    let model = model.to_string_lossy().into_owned();
    let transcript =
        std::env::temp_dir().join(format!("toolrail-gen-template-{}.json", std::process::id()));
    let transcript_arg = transcript.to_string_lossy().into_owned();
    let (code, stdout, stderr) = run(&[
        "generate",
        "--model",
        &model,
        "--tools",
        WEATHER,
        "--template",
        &path,
        "--tool-choice",
        "required",
        "--prompt",
        "What is the weather in Paris?",
        "--max-tokens",
        "40",
        "--transcript",
        &transcript_arg,
    ]);
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    assert!(stderr.contains("grammar not lazy"), "{stderr}");
    assert!(stderr.contains("1 call(s); get_weather("), "{stderr}");
    let text = std::fs::read_to_string(&transcript).unwrap();
    let _ = std::fs::remove_file(&transcript);
    let t: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(t["template"]["source"], path.as_str());
    assert_eq!(t["template"]["result"]["grammar_lazy"], false);
    assert_eq!(
        t["template"]["parsed"]["tool_calls"][0]["name"],
        "get_weather"
    );
    assert_eq!(t["validation"]["valid"], true);
    assert_eq!(t["prompt"], t["template"]["result"]["prompt"]);
    let tokens = t["tokens"].as_array().unwrap();
    assert!(!tokens.is_empty());
    assert!(tokens.iter().all(|r| r.get("lazy").is_none()));
    assert!(tokens.iter().all(|r| r["allowed"].as_u64() < Some(262_144)));
}

/// `--template` is refused with a custom grammar (llama-server refuses `grammar` with `tools`).
#[test]
fn generate_template_refuses_what_llama_server_refuses() {
    let (code, _, stderr) = run(&[
        "generate",
        "--model",
        "m.gguf",
        "--tools",
        WEATHER,
        "--template",
        "--grammar",
        "g.gbnf",
        "--prompt",
        "x",
    ]);
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains("--grammar") && stderr.contains("--template"),
        "{stderr}"
    );
}

/// The template lint (TP001–TP004) in `--json` and in the report: a bound over llama.cpp's
/// limits names its tool, a trigger word that can fire inside a word, a required call with
/// thinking on, and a custom grammar sent with tools (refused, exit 2).
#[test]
fn template_lint_finds_limits_word_triggers_required_thinking_and_grammar_with_tools() {
    let (Some(hermes), Some(firefunction), Some(qwen35)) = (
        template("NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use"),
        template("fireworks-ai-llama-3-firefunction-v2"),
        template("Qwen3.5-4B"),
    ) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let tools = dir.path().join("tools.json");
    std::fs::write(
        &tools,
        r#"[{"type": "function", "function": {"name": "note", "description": "Save a note",
              "parameters": {"type": "object", "properties": {"text": {"type": "string", "maxLength": 5000}},
                             "required": ["text"]}}},
            {"type": "function", "function": {"name": "ok", "description": "Fine",
              "parameters": {"type": "object", "properties": {"a": {"type": "integer"}}}}}]"#,
    )
    .unwrap();
    let tools_arg = tools.to_string_lossy().into_owned();
    let lint_of = |args: &[&str]| -> Vec<Value> {
        let (code, stdout, stderr) = run(args);
        assert_eq!(code, 0, "{stderr}");
        let report: Value = serde_json::from_str(&stdout).unwrap();
        report["template_lint"].as_array().unwrap().clone()
    };

    let findings = lint_of(&[
        "template",
        "--template",
        &hermes,
        "--tools",
        &tools_arg,
        "--json",
    ]);
    assert_eq!(findings.len(), 1, "{findings:?}");
    assert_eq!(findings[0]["code"], "TP001");
    assert_eq!(findings[0]["severity"], "warning");
    assert_eq!(findings[0]["tools"], serde_json::json!(["note"]));
    assert!(findings[0]["message"].as_str().unwrap().contains("GB105"));

    let findings = lint_of(&[
        "template",
        "--template",
        &firefunction,
        "--tools",
        WEATHER,
        "--json",
    ]);
    assert_eq!(findings.len(), 1, "{findings:?}");
    assert_eq!(findings[0]["code"], "TP002");
    assert!(
        findings[0]["message"]
            .as_str()
            .unwrap()
            .contains("\"functools\"")
    );

    let findings = lint_of(&[
        "template",
        "--template",
        &qwen35,
        "--tools",
        WEATHER,
        "--tool-choice",
        "required",
        "--thinking",
        "true",
        "--json",
    ]);
    assert!(
        findings.iter().any(|f| f["code"] == "TP003"),
        "{findings:?}"
    );
    let findings = lint_of(&[
        "template",
        "--template",
        &qwen35,
        "--tools",
        WEATHER,
        "--tool-choice",
        "auto",
        "--thinking",
        "true",
        "--json",
    ]);
    assert!(findings.is_empty(), "{findings:?}");

    let grammar = dir.path().join("own.gbnf");
    std::fs::write(&grammar, "root ::= \"x\"\n").unwrap();
    let grammar_arg = grammar.to_string_lossy().into_owned();
    let (code, stdout, stderr) = run(&[
        "template",
        "--template",
        &qwen35,
        "--tools",
        WEATHER,
        "--grammar",
        &grammar_arg,
    ]);
    assert_eq!(code, 2, "{stdout}\n{stderr}");
    assert!(stdout.starts_with("TP004 error: "), "{stdout}");
    assert!(stdout.contains("Cannot use custom grammar constraints with tools"));
}

/// `generate --template … --reasoning-budget N` on the test model: QwQ's prompt opens thinking
/// (its newline after `<think>` already counts), the budget runs out after N tokens, the end tag
/// is forced with one token allowed at a time, and the transcript records where.
#[test]
fn generate_with_a_reasoning_budget_forces_the_end_of_thinking_and_records_it() {
    let Some(path) = template("Qwen-QwQ-32B") else {
        return;
    };
    let Some(model) = toolrail_testkit::model() else {
        return;
    };
    let model = model.to_string_lossy().into_owned();
    let dir = tempfile::tempdir().unwrap();
    let transcript = dir.path().join("run.json");
    let transcript_arg = transcript.to_string_lossy().into_owned();
    let (code, stdout, stderr) = run(&[
        "generate",
        "--model",
        &model,
        "--tools",
        WEATHER,
        "--template",
        &path,
        "--thinking",
        "true",
        "--reasoning-budget",
        "4",
        "--prompt",
        "What is the weather in Paris?",
        "--max-tokens",
        "8",
        "--transcript",
        &transcript_arg,
    ]);
    assert!(code == 0 || code == 1, "{stdout}\n{stderr}");
    assert!(
        stderr.contains("reasoning: the budget ran out at token 2"),
        "{stderr}"
    );
    let t: Value = serde_json::from_str(&std::fs::read_to_string(&transcript).unwrap()).unwrap();
    let tokens = t["tokens"].as_array().unwrap();
    let states: Vec<&str> = tokens
        .iter()
        .map(|r| r["thinking"]["state"].as_str().unwrap_or("-"))
        .collect();
    assert_eq!(
        &states[..6],
        [
            "thinking",
            "thinking",
            "exhausted",
            "forced",
            "forced",
            "ended"
        ],
        "{states:?}"
    );
    assert_eq!(tokens[5]["thinking"]["by_budget"], true);
    let forced: String = tokens[3..6]
        .iter()
        .map(|r| r["piece"].as_str().unwrap())
        .collect();
    assert_eq!(forced, "</think>");
    assert!(tokens[3..6].iter().all(|r| r["allowed"] == 1));
    // A negative budget other than -1 is refused (before the model loads).
    let (code, _, stderr) = run(&[
        "generate",
        "--model",
        &model,
        "--tools",
        WEATHER,
        "--template",
        &path,
        "--reasoning-budget",
        "-2",
        "--prompt",
        "x",
    ]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("--reasoning-budget -2"), "{stderr}");
}

#[test]
fn parallel_calls_can_be_left_to_the_server_allowed_or_forbidden() {
    let Some(path) = template("Qwen-QwQ-32B") else {
        return;
    };
    let report = |parallel: &[&str]| {
        let mut args = vec!["template", "--template", &path];
        args.extend_from_slice(parallel);
        args.extend_from_slice(&["--tools", WEATHER, "--json"]);
        let (code, stdout, stderr) = run(&args);
        assert_eq!(code, 0, "{parallel:?}: {stderr}");
        let report: Value = serde_json::from_str(&stdout).unwrap();
        (
            report["inputs"]["parallel_tool_calls"].as_bool(),
            report["grammar"].as_str().unwrap().to_owned(),
        )
    };
    // One `<tool_call>` block holds several calls only where parallel calls are on (the
    // server's default for this template, `--parallel`, `--parallel true`).
    let several = "(space \",\" space (tool-get-weather))*";
    for parallel in [&[][..], &["--parallel"], &["--parallel", "true"]] {
        let (on, grammar) = report(parallel);
        assert_eq!(on, Some(true), "{parallel:?}");
        assert!(grammar.contains(several), "{parallel:?}: {grammar}");
    }
    let (on, grammar) = report(&["--parallel", "false"]);
    assert_eq!(on, Some(false));
    assert!(!grammar.contains(several), "{grammar}");
    let (code, _, stderr) = run(&["template", "--template", &path, "--parallel", "maybe"]);
    assert_eq!(code, 2, "{stderr}");
}

/// A BFCL tool list goes to the template as written: the prompt shows `"optional": []` and no
/// added `"type"`, each place where toolrail's reading differs is a note; with `dict` and
/// `float` types the request is refused as llama-server b11434 refuses it (its message and HTTP
/// status: 500 on Qwen3-Coder, 400 on Llama 3.1), exit 2, and the notes say what toolrail
/// reads instead.
#[test]
fn bfcl_tools_are_sent_as_written_and_refused_as_the_server_refuses_them() {
    let (Some(qwen), Some(llama)) = (
        template("Qwen3-Coder"),
        template("meta-llama-Llama-3.1-8B-Instruct"),
    ) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let accepted = dir.path().join("accepted.json");
    std::fs::write(
        &accepted,
        r#"[{"name": "get_weather", "description": "Weather.", "parameters": {
            "properties": {"city": {"type": "string"}}, "required": ["city"], "optional": []}}]"#,
    )
    .unwrap();
    let (code, stdout, stderr) = run(&[
        "template",
        "--template",
        &qwen,
        "--tools",
        &accepted.to_string_lossy(),
        "--json",
    ]);
    assert_eq!(code, 0, "{stderr}");
    let report: Value = serde_json::from_str(&stdout).unwrap();
    let prompt = report["prompt"].as_str().unwrap();
    // the template renders the extra key it was sent (Qwen3-Coder lists unknown keys)
    assert!(prompt.contains("<optional>[]</optional>"), "{prompt}");
    let notes = report["reading_differences"].as_array().unwrap();
    let pointers: Vec<&str> = notes
        .iter()
        .map(|n| n["pointer"].as_str().unwrap())
        .collect();
    assert_eq!(pointers, ["/optional", "/type"], "{notes:?}");
    assert_eq!(notes[1]["read"], "object");
    assert!(notes[1]["sent"].is_null());

    let refused = dir.path().join("dict.json");
    std::fs::write(
        &refused,
        r#"[{"name": "area", "parameters": {"type": "dict",
            "properties": {"radius": {"type": "float"}}, "required": ["radius"]}}]"#,
    )
    .unwrap();
    let refused_arg = refused.to_string_lossy().into_owned();
    for (path, status) in [(&qwen, 500), (&llama, 400)] {
        let (code, stdout, stderr) = run(&[
            "template",
            "--template",
            path,
            "--tools",
            &refused_arg,
            "--json",
        ]);
        assert_eq!(code, 2, "{path}: {stdout}{stderr}");
        let report: Value = serde_json::from_str(&stdout).unwrap();
        assert_eq!(report["http_status"], status, "{path}: {report}");
        let error = report["error"].as_str().unwrap();
        assert!(
            error.contains("JSON schema error at #: unrecognized type dict"),
            "{error}"
        );
        let reads: Vec<&str> = report["reading_differences"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|n| n["read"].as_str())
            .collect();
        assert_eq!(reads, ["object", "number"], "{report}");
    }
    let (code, _, stderr) = run(&["template", "--template", &llama, "--tools", &refused_arg]);
    assert_eq!(code, 2);
    assert!(
        stderr.contains("(llama-server answers HTTP 400)")
            && stderr.contains("note: tool `area`, parameters/type: the client sends \"dict\", toolrail reads it as \"object\""),
        "{stderr}"
    );
}

/// With the model's vocabulary the sampler is set up as llama-server sets it up: Spark 2.5's
/// `required` grammar is not lazy and refuses the generation prompt's tokens fed to it first,
/// which the server answers with HTTP 400 "Failed to initialize samplers: std::exception";
/// `template` refuses it the same way (exit 2) and says why, while `auto` (lazy) builds.
#[test]
fn a_grammar_refusing_its_generation_prompt_is_refused_as_the_server_refuses_it() {
    let (Some(path), Some(model)) = (template("Spark2.5"), toolrail_testkit::model()) else {
        return;
    };
    let model = model.to_string_lossy().into_owned();
    let args = |choice: &'static str| {
        [
            "template",
            "--model",
            model.as_str(),
            "--template",
            path.as_str(),
            "--tools",
            WEATHER,
            "--tool-choice",
            choice,
            "--json",
        ]
        .map(str::to_owned)
    };
    let (code, stdout, stderr) = run(&args("required").each_ref().map(String::as_str));
    assert_eq!(code, 2, "{stdout}{stderr}");
    let report: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(report["http_status"], 400, "{report}");
    let error = report["error"].as_str().unwrap();
    assert!(
        error.contains("\"Failed to initialize samplers: std::exception\"")
            && error.contains("refuses the generation prompt"),
        "{error}"
    );
    let (code, _, stderr) = run(&args("auto").each_ref().map(String::as_str));
    assert_eq!(code, 0, "{stderr}");
}

/// A chat template whose calls are written `<call>name key=value …</call>`: llama.cpp's
/// automatic parser builds a tool-call grammar for it that llama.cpp's own loader refuses (an
/// empty rule name after `ac-12 ::= |`), whatever the tools. llama-server b11434 answers HTTP 400
/// "Failed to initialize samplers: failed to parse grammar" (checked on the real server, see
/// `server_templates`); `template` refuses it the same way, exit 2, and the lint blames the
/// template's parser, not the tools.
#[test]
fn a_template_whose_parser_emits_an_unloadable_grammar_is_refused_and_blamed_on_the_template() {
    let (code, stdout, stderr) = run(&[
        "template",
        "--template",
        "tests/fixtures/key-value-calls.jinja",
        "--tools",
        WEATHER,
        "--json",
    ]);
    assert_eq!(code, 2, "{stdout}{stderr}");
    let report: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(report["http_status"], 400, "{report}");
    let error = report["error"].as_str().unwrap();
    assert!(
        error.contains("\"Failed to initialize samplers: failed to parse grammar\""),
        "{error}"
    );
    let lint = report["template_lint"].as_array().unwrap();
    assert_eq!(lint.len(), 1, "{lint:?}");
    assert_eq!(lint[0]["code"], "TP001");
    assert!(
        lint[0]["message"]
            .as_str()
            .unwrap()
            .contains("the template's parser emits a tool-call grammar llama.cpp cannot load"),
        "{lint:?}"
    );
    assert!(
        lint[0].get("tools").is_none(),
        "no tool is blamed: {lint:?}"
    );
    // nothing of llama.cpp's own grammar dump reaches the terminal
    assert!(!stderr.contains("error parsing grammar"), "{stderr}");
}
