//! `toolrail generate --server` and `bench-calls --server` against a real llama-server b11434
//! with the test model: the streamed call, the validation, the live-check summary and the
//! transcript, for each request kind.

use std::process::{Command, Output};

#[allow(dead_code)] // the harness is shared with toolrail-llm's tests, which use all of it
#[path = "../../crates/toolrail-llm/tests/it/common/llama_server.rs"]
pub mod llama_server;

use llama_server::{API_KEY, LlamaServer};

const TOOLRAIL: &str = env!("CARGO_BIN_EXE_toolrail");

fn server_and_model() -> Option<(LlamaServer, String)> {
    let model = toolrail_testkit::model()?;
    let server = llama_server::start(&model)?;
    Some((server, model.display().to_string()))
}

fn generate(server: &LlamaServer, model: &str, extra: &[&str]) -> (Output, String) {
    let out = Command::new(TOOLRAIL)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args(["generate", "--model", model, "--server", &server.url])
        .args([
            "--api-key-env",
            "TOOLRAIL_TEST_SERVER_KEY",
            "--max-tokens",
            "64",
        ])
        .args(extra)
        .env("TOOLRAIL_TEST_SERVER_KEY", API_KEY)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    (out, stderr)
}

#[test]
fn generate_on_the_server_prints_the_call_its_validation_and_the_live_check() {
    let Some((server, model)) = server_and_model() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let transcript = dir.path().join("run.json");
    let (out, stderr) = generate(
        &server,
        &model,
        &[
            "--tools",
            "sample_schemas/weather.json",
            "--prompt",
            "What is the weather in Paris?",
            "--transcript",
            transcript.to_str().unwrap(),
        ],
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    assert!(stdout.contains("get_weather"), "{stdout}");
    assert!(
        stderr.contains("server: llama-server b11434 at"),
        "{stderr}"
    );
    assert!(stderr.contains("validation: valid call"), "{stderr}");
    assert!(
        stderr.contains("live check: the grammar allows every token the server sent"),
        "{stderr}"
    );
    let t: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&transcript).unwrap()).unwrap();
    assert_eq!(t["server_run"]["request"]["kind"], "grammar");
    assert_eq!(t["server_run"]["build"], "b11434-unknown");
    assert_eq!(t["server_run"]["url"], server.url.as_str());
    let tokens = t["tokens"].as_array().unwrap();
    assert!(!tokens.is_empty());
    for token in tokens {
        assert!(token["stacks"].is_object(), "{token}");
        assert!(!token["before"].as_array().unwrap().is_empty(), "{token}");
        assert!(!token["sampled"].as_array().unwrap().is_empty(), "{token}");
    }
}

#[test]
fn generate_sends_a_json_schema_or_tools_to_the_server() {
    let Some((server, model)) = server_and_model() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let schema = dir.path().join("schema.json");
    std::fs::write(
        &schema,
        r#"{"type":"object","properties":{"city":{"type":"string","maxLength":12}},"required":["city"],"additionalProperties":false}"#,
    )
    .unwrap();
    let transcript = dir.path().join("run.json");
    let (out, stderr) = generate(
        &server,
        &model,
        &[
            "--request",
            "json-schema",
            "--schema",
            schema.to_str().unwrap(),
            "--raw",
            "--prompt",
            "The city of the Eiffel tower as JSON:",
            "--transcript",
            transcript.to_str().unwrap(),
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let value: serde_json::Value = serde_json::from_str(stdout.trim()).unwrap();
    assert!(value["city"].is_string(), "{stdout}");
    assert!(stderr.contains("live check:"), "{stderr}");
    let t: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&transcript).unwrap()).unwrap();
    assert_eq!(t["server_run"]["request"]["kind"], "json_schema");
    assert_eq!(t["server_run"]["request"]["schema"]["required"][0], "city");

    // tools on the chat endpoint: the server's template and grammar, its parsed calls validated
    let (out, stderr) = generate(
        &server,
        &model,
        &[
            "--request",
            "tools",
            "--tools",
            "sample_schemas/weather.json",
            "--prompt",
            "What is the weather in Paris?",
            "--transcript",
            transcript.to_str().unwrap(),
        ],
    );
    // the base test model rarely writes a call the server parses: valid (0) or not (1), never
    // an error
    assert!(matches!(out.status.code(), Some(0 | 1)), "{stderr}");
    assert!(stderr.contains("validation: "), "{stderr}");
    let t: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&transcript).unwrap()).unwrap();
    assert_eq!(t["server_run"]["request"]["kind"], "tools");
    assert!(t["server_run"]["request"]["calls"].is_array());
    assert!(t["validation"]["server_calls"].is_array());

    // a schema request without a schema is refused before anything runs
    let (out, stderr) = generate(
        &server,
        &model,
        &["--request", "json-schema", "--prompt", "x"],
    );
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("--schema"), "{stderr}");
}

#[test]
fn bench_calls_answers_on_the_server() {
    let Some((server, model)) = server_and_model() else {
        return;
    };
    let Some(cases) = toolrail_testkit::corpus("bfcl/BFCL_v4_multiple.json") else {
        return;
    };
    let out = Command::new(TOOLRAIL)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args(["bench-calls", "--model", &model, "--server", &server.url])
        .args(["--api-key-env", "TOOLRAIL_TEST_SERVER_KEY"])
        .args(["--cases", &cases.to_string_lossy(), "-n", "2", "--json"])
        .env("TOOLRAIL_TEST_SERVER_KEY", API_KEY)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(matches!(out.status.code(), Some(0 | 1)), "{stderr}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["server"], server.url.as_str());
    assert_eq!(v["budget_guard"], false);
    let results = v["results"].as_array().unwrap();
    assert_eq!(results.len(), 2);
    assert_eq!(v["mode"], "both");
    for r in results {
        let grammar = &r["grammar"]["attempts"][0];
        assert!(grammar["tokens"].as_u64().unwrap() > 0, "{r}");
        assert!(!grammar["output"].as_str().unwrap().is_empty(), "{r}");
        // Prompt + retries ran on the server too: every blocked attempt carries the feedback
        // sent back, and the attempts stop at the default limit of 3.
        let attempts = r["retry"]["attempts"].as_array().unwrap();
        assert!((1..=3).contains(&attempts.len()), "{r}");
        for a in attempts {
            assert!(a["tokens"].as_u64().unwrap() > 0, "{r}");
            assert_eq!(a["feedback"].is_string(), a["valid"] == false, "{r}");
        }
    }
}

#[test]
fn template_with_server_compares_the_servers_build_with_the_local_one() {
    let Some((server, model)) = server_and_model() else {
        return;
    };
    let out = Command::new(TOOLRAIL)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args([
            "template",
            "--model",
            &model,
            "--tools",
            "sample_schemas/weather.json",
        ])
        .args([
            "--tool-choice",
            "required",
            "--user",
            "What is the weather in Paris?",
        ])
        .args([
            "--server",
            &server.url,
            "--api-key-env",
            "TOOLRAIL_TEST_SERVER_KEY",
        ])
        .env("TOOLRAIL_TEST_SERVER_KEY", API_KEY)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    // b11434 with the test model's template: the same (tool-less) prompt, no grammar either side
    assert!(
        stderr.contains("format: peg-native (local peg-native)"),
        "{stderr}"
    );
    assert!(
        stderr.contains("prompt: identical after the \"<bos>\""),
        "{stderr}"
    );
    assert!(stderr.contains("grammar: identical (0 bytes"), "{stderr}");
    assert!(stderr.contains("triggers: identical"), "{stderr}");
}
