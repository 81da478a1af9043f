//! `toolrail budget` from the command line: exit 0 when llama.cpp loads the catalog's grammar,
//! 1 when it does not (with the verdict, llama.cpp's words and the blamed tool and pointer), 2
//! on bad input; `--json` carries the same verdict, table and blame.

use std::process::Command;

use serde_json::{Value, json};

const TOOLRAIL: &str = env!("CARGO_BIN_EXE_toolrail");

fn run(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(TOOLRAIL).args(args).output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `toolrail budget SET --template TEMPLATE EXTRA…`.
fn budget(set: &std::path::Path, template: &str, extra: &[&str]) -> (i32, String, String) {
    let mut args = vec!["budget", set.to_str().unwrap(), "--template", template];
    args.extend_from_slice(extra);
    run(&args)
}

fn tool(name: &str, properties: Value) -> Value {
    json!({"type": "function", "function": {"name": name, "description": "d",
        "parameters": {"type": "object", "properties": properties}}})
}

#[test]
fn budget_says_whether_it_fits_and_blames_the_tool_and_pointer() {
    let templates =
        toolrail_testkit::require!(toolrail_testkit::corpus("llama-cpp-chat/templates"));
    let gpt_oss = templates.join("openai-gpt-oss-120b.jinja");
    let dir = tempfile::tempdir().unwrap();
    let good = dir.path().join("good.json");
    let bad = dir.path().join("bad.json");
    let fine = [
        tool("get_weather", json!({"city": {"type": "string"}})),
        tool(
            "send_mail",
            json!({"to": {"type": "string"}, "body": {"type": "string"}}),
        ),
    ];
    std::fs::write(&good, serde_json::to_string(&fine).unwrap()).unwrap();
    let mut broken = fine.to_vec();
    broken.push(tool(
        "write_note",
        json!({"title": {"type": "string"}, "text": {"type": "string", "minLength": 3000}}),
    ));
    std::fs::write(&bad, serde_json::to_string(&broken).unwrap()).unwrap();
    let template = gpt_oss.to_str().unwrap();

    let (code, out, err) = budget(&good, template, &[]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("verdict: fits: llama.cpp loads the grammar"),
        "{out}"
    );
    assert!(out.contains("get_weather"), "{out}");

    let (code, out, err) = budget(&bad, template, &[]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(
        out.contains("a minimum of 3000 repetitions exceeds llama.cpp's limit of 2000"),
        "{out}"
    );
    assert!(
        out.contains(
            "llama.cpp says: number of repetitions exceeds sane defaults, please reduce the \
             number of repetitions"
        ),
        "{out}"
    );
    assert!(
        out.contains(
            "blame: tool 'write_note' (number 3) at /properties/text: its grammar alone is refused"
        ),
        "{out}"
    );

    let (code, out, _) = budget(&bad, template, &["--json"]);
    assert_eq!(code, 1);
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["fits"], json!(false));
    assert_eq!(v["budget"]["blame"]["tool"], json!("write_note"));
    assert_eq!(v["budget"]["blame"]["pointer"], json!("/properties/text"));
    assert_eq!(v["budget"]["tools"].as_array().unwrap().len(), 3);

    // toolrail's own envelope writes the same bound within llama.cpp's limits (a chunk of
    // 2000 and the rest), so its grammar fits, right at the limit
    let (code, out, _) = run(&["budget", bad.to_str().unwrap(), "--format", "hermes"]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("largest repetition 2000 of 2000"), "{out}");
    assert!(out.contains("verdict: fits"), "{out}");

    // a template's option without a template is an error, not ignored
    let (code, _, err) = run(&[
        "budget",
        good.to_str().unwrap(),
        "--tool-choice",
        "required",
    ]);
    assert_eq!(code, 2);
    assert!(
        err.contains("--tool-choice required: applies to a chat template's grammar"),
        "{err}"
    );

    // bad input: exit 2 naming the file
    let missing = dir.path().join("missing.json");
    let (code, _, err) = run(&["budget", missing.to_str().unwrap()]);
    assert_eq!(code, 2);
    assert!(err.contains("missing.json"), "{err}");
}

/// `--project OUT`: the written catalog fits (exit 0), the relaxation is listed with tool,
/// pointer and before → after, `budget` on the written file says it fits, and `validate` with
/// `--keep-validation`'s file still refuses what only the original schema forbids.
#[test]
fn project_writes_a_catalog_that_fits_and_validation_keeps_the_original() {
    let templates =
        toolrail_testkit::require!(toolrail_testkit::corpus("llama-cpp-chat/templates"));
    let gpt_oss = templates.join("openai-gpt-oss-120b.jinja");
    let template = gpt_oss.to_str().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.json");
    let tools = [
        tool("get_weather", json!({"city": {"type": "string"}})),
        tool(
            "write_note",
            json!({"text": {"type": "string", "minLength": 3000}}),
        ),
    ];
    std::fs::write(&bad, serde_json::to_string(&tools).unwrap()).unwrap();
    let fitted = dir.path().join("fitted.json");
    let kept = dir.path().join("kept.json");

    let (code, out, err) = budget(&bad, template, &["--project", fitted.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("before: does not fit: GB005"), "{out}");
    assert!(
        out.contains(
            "tool 'write_note' (number 2) at /properties/text: minLength: 3000 → minLength: 2000"
        ),
        "{out}"
    );
    assert!(out.contains("after: fits: llama.cpp loads it"), "{out}");
    let (code, out, err) = budget(&fitted, template, &[]);
    assert_eq!(code, 0, "{out}{err}");

    let (code, out, err) = budget(
        &bad,
        template,
        &[
            "--project",
            kept.to_str().unwrap(),
            "--keep-validation",
            "--json",
        ],
    );
    assert_eq!(code, 0, "{out}{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["fits"], json!(true));
    assert_eq!(v["relaxations"][0]["pointer"], json!("/properties/text"));
    assert_eq!(v["relaxations"][0]["after"], json!("minLength: 2000"));

    // a note of 2500 characters: the fitted schema allows it, the original does not
    let call = json!({"name": "write_note", "arguments": {"text": "n".repeat(2500)}}).to_string();
    let output = dir.path().join("call.json");
    std::fs::write(&output, &call).unwrap();
    let validate =
        |set: &std::path::Path| run(&["validate", set.to_str().unwrap(), output.to_str().unwrap()]);
    let (code, out, err) = validate(&fitted);
    assert_eq!(code, 0, "{out}{err}");
    let (code, out, err) = validate(&kept);
    assert_eq!(code, 1, "{out}{err}");
    assert!(format!("{out}{err}").contains("text"), "{out}{err}");
    let (code, _, _) = validate(&bad);
    assert_eq!(code, 1);

    // --keep-validation needs --project
    let (code, _, err) = run(&["budget", bad.to_str().unwrap(), "--keep-validation"]);
    assert_eq!(code, 2, "{err}");
}

/// `toolrail bench budget`: budget's time on a joined catalog, one build against each tool
/// built, and the trigger prediction beside llama.cpp's lazy sampler on the test model's
/// vocabulary.
#[test]
fn bench_budget_prints_the_times_and_the_trigger_comparison() {
    let templates =
        toolrail_testkit::require!(toolrail_testkit::corpus("llama-cpp-chat/templates"));
    let sets = toolrail_testkit::require!(toolrail_testkit::corpus("tool-sets"));
    let model = toolrail_testkit::require!(toolrail_testkit::model());
    let qwen = templates.join("Qwen3-Coder.jinja");
    let (code, out, err) = run(&[
        "bench",
        "budget",
        sets.to_str().unwrap(),
        "--count",
        "40",
        "--template",
        qwen.to_str().unwrap(),
        "--model",
        model.to_str().unwrap(),
        "--rounds",
        "1",
        "--output-tokens",
        "2000",
        "--json",
    ]);
    assert_eq!(code, 0, "{out}{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["tools"], json!(40));
    assert_eq!(v["per_tool"], json!("sliced"));
    assert!(v["budget_s"]["one_build"].as_f64().unwrap() > 0.0, "{v}");
    assert!(v["trigger_patterns"].as_u64().unwrap() > 0, "{v}");
    assert!(v["ns_per_char_here"].as_f64().unwrap() > 0.0, "{v}");
    let points = v["points"].as_array().unwrap();
    assert!(!points.is_empty(), "{v}");
    assert!(
        points
            .iter()
            .all(|p| p["measured_ms"].as_f64().is_some_and(|ms| ms > 0.0)),
        "{v}"
    );
}
