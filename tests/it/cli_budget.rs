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

    let (code, out, err) = run(&["budget", good.to_str().unwrap(), "--template", template]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("verdict: fits: llama.cpp loads the grammar"),
        "{out}"
    );
    assert!(out.contains("get_weather"), "{out}");

    let (code, out, err) = run(&["budget", bad.to_str().unwrap(), "--template", template]);
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

    let (code, out, _) = run(&[
        "budget",
        bad.to_str().unwrap(),
        "--template",
        template,
        "--json",
    ]);
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
