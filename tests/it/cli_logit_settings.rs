//! The settings that change logits, between a real llama-server b11434 and the in-process
//! engine: a server run records what the server computes with (what `/props` reports, the flags
//! the user states, llama-server's defaults for the rest), `generate --like-server` computes
//! in-process as the server does, and `toolrail compare` explains two runs from their
//! transcripts: the same tokens with the same settings, and the setting that differs when one
//! is changed.

use std::process::{Command, Output};

use serde_json::Value;

use crate::cli_server::llama_server::{self, API_KEY};

const TOOLRAIL: &str = env!("CARGO_BIN_EXE_toolrail");
/// How the test's server is started, beyond the harness's own flags (`-t 1`, `-c 2048`).
const SERVER_FLAGS: &str = "-fa off -ub 128 -b 256 -t 1";

fn toolrail(args: &[&str]) -> (Output, String, String) {
    let out = Command::new(TOOLRAIL)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args(args)
        .env("TOOLRAIL_TEST_SERVER_KEY", API_KEY)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    (out, stdout, stderr)
}

const RUN: [&str; 6] = [
    "--tools",
    "sample_schemas/weather.json",
    "--prompt",
    "What is the weather in Paris?",
    "--max-tokens",
    "48",
];

/// `generate` on the server (`--server`) or in-process like it (`--like-server`), its flags
/// stated, the transcript written to `transcript`: the exit and stderr.
fn generate(
    model: &str,
    engine: &str,
    url: &str,
    transcript: &std::path::Path,
    extra: &[&str],
) -> (Output, String) {
    let mut args = vec![
        "generate",
        "--model",
        model,
        engine,
        url,
        "--api-key-env",
        "TOOLRAIL_TEST_SERVER_KEY",
        "--server-flags",
        SERVER_FLAGS,
        "--transcript",
        transcript.to_str().unwrap(),
    ];
    args.extend(extra);
    args.extend(RUN);
    let (out, _, stderr) = toolrail(&args);
    (out, stderr)
}

fn read(path: &std::path::Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[test]
fn a_server_run_and_an_in_process_run_like_it_compare_as_the_same_computation() {
    let Some(model) = toolrail_testkit::model() else {
        return;
    };
    let flags: Vec<&std::ffi::OsStr> = SERVER_FLAGS
        .split_whitespace()
        .map(std::ffi::OsStr::new)
        .collect();
    let server = match llama_server::try_start(&model, &flags) {
        Ok(Some(server)) => server,
        Ok(None) => return,
        Err(log) => panic!("{log}"),
    };
    let model = model.display().to_string();
    let dir = tempfile::tempdir().unwrap();
    let on_server = dir.path().join("server.json");
    let like = dir.path().join("like.json");
    let changed = dir.path().join("changed.json");

    // On the server, its flags stated.
    let (out, stderr) = generate(&model, "--server", &server.url, &on_server, &[]);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("computed with: llama-server at")
            && stderr.contains("flash attention off (stated by its flags)")
            && stderr.contains("context 2048 (reported by the server)"),
        "{stderr}"
    );
    let t = read(&on_server);
    let s = &t["settings"];
    assert_eq!(
        s["flash_attention"],
        serde_json::json!({"from": "stated", "value": "off"})
    );
    assert_eq!(
        s["ubatch"],
        serde_json::json!({"from": "stated", "value": 128})
    );
    assert_eq!(
        s["cache_type_k"],
        serde_json::json!({"from": "assumed", "value": "f16"})
    );
    assert_eq!(s["gpu_layers"], serde_json::json!({"from": "unknown"}));
    assert_eq!(s["build"], "b11434-unknown");
    assert_eq!(s["prompt_cached"], 0);

    // In-process, computing as the server does.
    let (out, stderr) = generate(&model, "--like-server", &server.url, &like, &[]);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("like the server: llama-server at"),
        "{stderr}"
    );
    assert!(
        stderr.contains(
            "computed with: in-process: flash attention off, batch 256, micro-batch 128, K cache f16"
        ),
        "{stderr}"
    );
    let (out, stdout, stderr) = toolrail(&[
        "compare",
        on_server.to_str().unwrap(),
        like.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    assert!(stdout.contains("The same "), "{stdout}");
    eprintln!("the server and in-process like it:\n{stdout}");
    assert!(
        stdout.contains("The settings that change logits agree")
            || stdout.contains("Not known on both sides, so they may differ: GPU layers"),
        "{stdout}"
    );
    assert!(
        !stdout.contains("Settings that change the logits differ"),
        "{stdout}"
    );

    // The same in-process run with flash attention on: the comparison names it.
    let (out, stderr) = generate(
        &model,
        "--like-server",
        &server.url,
        &changed,
        &["--flash-attn", "on"],
    );
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let (out, stdout, stderr) = toolrail(&[
        "compare",
        on_server.to_str().unwrap(),
        changed.to_str().unwrap(),
        "--json",
    ]);
    assert!(
        matches!(out.status.code(), Some(0 | 1)),
        "{stdout}\n{stderr}"
    );
    let c: Value = serde_json::from_str(&stdout).unwrap();
    let explanation = c["explanation"].to_string();
    assert!(
        explanation.contains(
            "Settings that change the logits differ: flash attention: off (stated by its flags) in the first run, on in the second"
        ),
        "{explanation}"
    );
    let drift = c["drift"]["first"].as_f64().unwrap() - c["drift"]["second"].as_f64().unwrap();
    eprintln!("flash attention on vs the server's off: probability drift {drift}; {explanation}");
}

#[test]
fn server_flags_that_cannot_be_read_are_refused_naming_the_flag() {
    let (out, _, stderr) = toolrail(&[
        "generate",
        "--model",
        "none.gguf",
        "--server",
        "http://127.0.0.1:9",
        "--server-flags",
        "-fa sometimes",
        "--grammar",
        "x.gbnf",
        "--prompt",
        "p",
    ]);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("--server-flags: -fa: unknown flash attention value 'sometimes'"),
        "{stderr}"
    );
    let (out, _, stderr) = toolrail(&[
        "generate",
        "--model",
        "none.gguf",
        "--server-flags",
        "-fa on",
        "--grammar",
        "x.gbnf",
        "--prompt",
        "p",
    ]);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("--server-flags describes a server"),
        "{stderr}"
    );
}
