//! `toolrail template` on llama.cpp's own chat templates (no model needed): the JSON report,
//! llama.cpp's parse of an output, the named-tool warning, and a refused template.

use std::process::Command;

use serde_json::Value;

const TOOLRAIL: &str = env!("CARGO_BIN_EXE_toolrail");
const TEMPLATES: &str = "../../../shared/corpus/llama-cpp-chat/templates";
const WEATHER: &str = "../../sample_schemas/weather.json";

fn template(name: &str) -> Option<String> {
    let path = format!("{TEMPLATES}/{name}.jinja");
    if std::path::Path::new(&path).is_file() {
        Some(path)
    } else {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "{path} missing"
        );
        eprintln!("skipped: {path} not found");
        None
    }
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

#[test]
fn a_template_llama_cpp_refuses_exits_2_with_its_message() {
    let bad = std::env::temp_dir().join(format!("toolrail-bad-{}.jinja", std::process::id()));
    std::fs::write(&bad, "{% if %}").unwrap();
    let bad_arg = bad.to_string_lossy().into_owned();
    let (code, stdout, stderr) = run(&["template", "--template", &bad_arg, "--tools", WEATHER]);
    let _ = std::fs::remove_file(&bad);
    assert_eq!(code, 2, "{stdout}");
    assert!(stderr.contains("llama.cpp: "), "{stderr}");
}
