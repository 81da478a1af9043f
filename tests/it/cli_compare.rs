//! `toolrail generate --compare` on the test model: a toolrail run with llama.cpp's and
//! llguidance's masks computed beside it prints each engine's mask time, and its transcript keeps
//! every engine's time per token; a comparison that makes no sense is refused.

use std::process::Command;

use serde_json::Value;

const TOOLRAIL: &str = env!("CARGO_BIN_EXE_toolrail");
const WEATHER: &str = "sample_schemas/weather.json";

fn run(args: &[&str]) -> (i32, String) {
    let out = Command::new(TOOLRAIL)
        .args(args)
        .output()
        .expect("toolrail runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn generate_compare_prints_and_records_three_engines() {
    let Some(model) = toolrail_testkit::model() else {
        return;
    };
    let model = model.to_string_lossy().into_owned();
    let transcript =
        std::env::temp_dir().join(format!("toolrail-compare-{}.json", std::process::id()));
    let transcript_arg = transcript.to_string_lossy().into_owned();
    let (code, stderr) = run(&[
        "generate",
        "--model",
        &model,
        "--tools",
        WEATHER,
        "--prompt",
        "What is the weather in Paris?",
        "--max-tokens",
        "12",
        "--compare",
        "llama,llguidance",
        "--transcript",
        &transcript_arg,
    ]);
    let text = std::fs::read_to_string(&transcript).unwrap_or_default();
    let _ = std::fs::remove_file(&transcript);
    // 12 tokens do not finish the call: the token limit is exit 1
    assert!(code == 0 || code == 1, "{stderr}");
    assert!(
        stderr.contains("mask time per engine: toolrail ")
            && stderr.contains("(12 steps, the run's engine)"),
        "{stderr}"
    );
    assert!(
        stderr.contains(
            "mask time per engine: llama " // …
        ) && stderr.contains("its mask and toolrail's differ at 0 of 12 step(s)"),
        "{stderr}"
    );
    assert!(
        stderr.contains("mask time per engine: llguidance "),
        "{stderr}"
    );
    let t: Value = serde_json::from_str(&text).unwrap();
    let tokens = t["tokens"].as_array().unwrap();
    assert_eq!(tokens.len(), 12);
    for r in tokens {
        let engines: Vec<&str> = r["other_masks"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["engine"].as_str().unwrap())
            .collect();
        assert_eq!(engines, ["llama", "llguidance"], "{r}");
    }
    assert_eq!(t["totals"]["other_engines"].as_array().unwrap().len(), 2);
}

#[test]
fn generate_compare_refuses_engines_that_cannot_be_compared() {
    for (compare, engine, says) in [
        ("toolrail", "toolrail", "only llama and llguidance"),
        ("none", "toolrail", "only llama and llguidance"),
        ("llama", "none", "--compare needs a grammar"),
    ] {
        let (code, stderr) = run(&[
            "generate",
            "--model",
            "no-such-model.gguf",
            "--tools",
            WEATHER,
            "--prompt",
            "x",
            "--engine",
            engine,
            "--compare",
            compare,
        ]);
        assert_ne!(code, 0, "{stderr}");
        assert!(stderr.contains(says), "--compare {compare}: {stderr}");
    }
}
