//! Chat templates and outputs that crash llama.cpp's Jinja engine or parser: toolrail runs that
//! code in a process of its own (its hidden `template-worker` subcommand), so such a template is
//! an error naming what happened, never the end of toolrail, whether it comes as a file, in a
//! GGUF's metadata or as a model output. The class of cases (every kind of recursion and bomb)
//! is in the attack table; here are the reproducers and what isolation must keep: the same
//! results as in-process, and a fresh worker after a crash.

use std::path::Path;
use std::process::Output;

use crate::attacks::toolrail;

use toolrail_llm::gguf::{self, NewValue};
use toolrail_llm::template::isolate::{IsolationError, WorkerCommand};
use toolrail_llm::template::{ChatTemplates, Placement, TemplateError, TemplateRequest};
use toolrail_tools::toolset::ToolSet;

const TOOLRAIL: &str = env!("CARGO_BIN_EXE_toolrail");
const WEATHER: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/sample_schemas/weather.json");

/// This test binary's toolrail as a template worker.
fn worker() -> Placement {
    Placement::Worker(WorkerCommand {
        program: TOOLRAIL.into(),
        args: vec!["template-worker".into()],
    })
}

/// Exit 2 (or `code`), no abort, and every one of `says` on standard error.
fn refused(out: &Output, code: i32, says: &[&str]) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(code), "{stderr}");
    for text in says {
        assert!(stderr.contains(text), "expected {text:?} in:\n{stderr}");
    }
}

fn weather() -> ToolSet {
    ToolSet::from_json_str(&std::fs::read_to_string(WEATHER).unwrap()).unwrap()
}

#[test]
fn the_reproducers_recursive_macro_is_an_error_naming_the_stack_overflow() {
    let Some(template) =
        toolrail_testkit::shared("reliability/turn3/N1-template-recursive-macro.jinja")
    else {
        return;
    };
    let template = template.to_string_lossy().into_owned();
    let out = toolrail(&["template", "--template", &template, "--tools", WEATHER]);
    refused(
        &out,
        2,
        &[
            "N1-template-recursive-macro.jinja",
            "llama.cpp's template engine crashed while opening the chat template",
            "it overflowed its stack",
            "a macro calling itself",
        ],
    );
}

#[test]
fn a_gguf_whose_template_recurses_is_refused_by_template_and_generate() {
    let Some(model) = toolrail_testkit::model() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("recursive-template.gguf");
    gguf::copy_with_value(
        &model,
        &copy,
        "tokenizer.chat_template",
        &NewValue::Str(b"{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}".to_vec()),
    )
    .unwrap();
    let copy = copy.to_string_lossy().into_owned();
    let out = toolrail(&["template", "--model", &copy, "--tools", WEATHER]);
    refused(&out, 2, &["crashed", "it overflowed its stack"]);
    let out = toolrail(&[
        "generate",
        "--model",
        &copy,
        "--tools",
        WEATHER,
        "--template",
        "--prompt",
        "Weather in Paris?",
        "--max-tokens",
        "4",
    ]);
    refused(&out, 2, &["crashed", "it overflowed its stack"]);
}

#[test]
fn an_output_nested_100000_deep_is_a_parse_failure_not_a_crash() {
    let Some(template) = toolrail_testkit::corpus(
        "llama-cpp-chat/templates/NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use.jinja",
    ) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let output = dir.path().join("deep.txt");
    let deep = 100_000;
    std::fs::write(
        &output,
        format!(
            "<tool_call>\n{{\"name\": \"get_weather\", \"arguments\": {{\"city\": {}1{}}}}}\n</tool_call>",
            "[".repeat(deep),
            "]".repeat(deep)
        ),
    )
    .unwrap();
    let out = toolrail(&[
        "template",
        "--template",
        &template.to_string_lossy(),
        "--tools",
        WEATHER,
        "--parse",
        &output.to_string_lossy(),
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(
        stdout.contains("llama.cpp's output parser crashed while parsing the model's output")
            && stdout.contains("it overflowed its stack"),
        "{stdout}"
    );
}

#[test]
fn templates_build_the_same_requests_in_a_worker_as_in_process() {
    let Some(dir) = toolrail_testkit::corpus("llama-cpp-chat/templates") else {
        return;
    };
    let tools = weather();
    let request = TemplateRequest::for_tools(&tools, "What is the weather in Paris?");
    let mut compared = 0;
    let mut paths: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "jinja"))
        .collect();
    paths.sort();
    for path in &paths {
        let source = std::fs::read_to_string(path).unwrap();
        let result = |placement| {
            ChatTemplates::from_source_placed(&source, "<s>", "</s>", placement)
                .and_then(|t| t.apply(&request))
                .map_err(|e| e.to_string())
        };
        let here = result(Placement::InProcess);
        let there = result(worker());
        assert_eq!(here, there, "{}", path.display());
        compared += 1;
    }
    assert!(compared >= 71, "only {compared} templates compared");
}

#[test]
fn after_a_crash_the_next_request_gets_a_fresh_worker() {
    // recursion only for one message: opening (which renders llama.cpp's own probes) works
    let source = "{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}\
        {% for m in messages %}{% if m.content == 'boom' %}{{ f(0) }}{% else %}{{ m.content }}{% endif %}{% endfor %}";
    let templates = ChatTemplates::from_source_placed(source, "", "", worker()).unwrap();
    assert!(templates.is_isolated());
    let tools = weather();
    let crash = templates.apply(&TemplateRequest::for_tools(&tools, "boom"));
    match crash {
        Err(TemplateError::Isolated(IsolationError::Crashed { how, .. })) => {
            assert_eq!(how, "it overflowed its stack");
        }
        other => panic!("expected a crash, got {other:?}"),
    }
    let fine = templates
        .apply(&TemplateRequest::for_tools(&tools, "hello"))
        .unwrap();
    assert!(fine.prompt.contains("hello"), "{}", fine.prompt);
}

#[test]
fn a_template_worker_that_cannot_start_is_named() {
    let missing = Path::new("/nonexistent/toolrail-worker");
    let placement = Placement::Worker(WorkerCommand {
        program: missing.into(),
        args: Vec::new(),
    });
    let err = ChatTemplates::from_source_placed("{{ 'x' }}", "", "", placement).unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("/nonexistent/toolrail-worker") && text.contains("could not be used"),
        "{text}"
    );
}
