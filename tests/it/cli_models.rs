//! `toolrail models` and `toolrail grammar`'s promise that what it prints loads in llama.cpp.

use std::process::Command;

const TOOLRAIL: &str = env!("CARGO_BIN_EXE_toolrail");

#[test]
fn models_lists_the_file_its_models_and_its_servers() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("models.toml");
    std::fs::write(
        &file,
        "[[model]]\nname = \"absent\"\npath = \"no-such.gguf\"\n\n\
         [[server]]\nname = \"gpu-box\"\nurl = \"http://127.0.0.1:9\"\napi_key_env = \"GPU_KEY\"\n",
    )
    .unwrap();
    let out = Command::new(TOOLRAIL)
        .args(["models", "--check", "--models"])
        .arg(&file)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains(&format!("models file: {}", file.display())),
        "{text}"
    );
    assert!(
        text.contains("model  absent") && text.contains("(missing)"),
        "{text}"
    );
    assert!(
        text.contains("server gpu-box  http://127.0.0.1:9  key from $GPU_KEY"),
        "{text}"
    );
    assert!(text.contains("cannot reach http://127.0.0.1:9"), "{text}");
    assert_eq!(out.status.code(), Some(1));
}

#[test]
fn grammar_prints_only_grammars_llama_cpp_loads() {
    let dir = tempfile::tempdir().unwrap();
    let schema = dir.path().join("s.json");
    // inline, this array of long strings was over llama.cpp's repetition limit
    std::fs::write(
        &schema,
        r#"{"type": "array", "items": {"type": "string", "maxLength": 1024}}"#,
    )
    .unwrap();
    let out = Command::new(TOOLRAIL)
        .args(["grammar", "--schema"])
        .arg(&schema)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    toolrail_gbnf::Grammar::parse(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
}
