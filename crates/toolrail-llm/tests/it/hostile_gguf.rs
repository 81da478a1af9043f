//! Hostile GGUF files made from the real test model: metadata values that parse but would make
//! llama.cpp abort (or llama-cpp-2 panic) are refused by toolrail's header check naming the key;
//! paths that are no regular file and tensor-less files say exactly what they are.

use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Duration;

use toolrail_llm::gguf::{self, GgufHeader, NewValue};
use toolrail_llm::{LlmError, Model};

use crate::common::model_path;

/// A copy of the model at `dir/name` with `key` set to `value`.
fn mutated(model: &Path, dir: &Path, name: &str, key: &str, value: NewValue) -> PathBuf {
    let copy = dir.join(name);
    gguf::copy_with_value(model, &copy, key, &value).unwrap();
    copy
}

/// Loading `path` fails with a bad-metadata error on `key` whose message contains `says`.
fn refused(path: &Path, key: &str, says: &str) {
    let err = Model::open(path).unwrap_err();
    match &err {
        LlmError::BadMetadata { key: k, .. } => assert_eq!(k, key, "{err}"),
        other => panic!("expected BadMetadata on {key}, got {other}"),
    }
    let message = err.to_string();
    assert!(message.contains(&format!("'{key}'")), "{message}");
    assert!(message.contains(says), "{message}");
}

#[test]
fn a_rewritten_value_that_is_fine_still_loads() {
    let Some(model) = model_path() else { return };
    let dir = tempfile::tempdir().unwrap();
    // The same layer count, rewritten in place: the writer keeps the file loadable.
    let copy = mutated(
        &model,
        dir.path(),
        "same.gguf",
        "gemma3.block_count",
        NewValue::U32(18),
    );
    let loaded = Model::open(&copy).unwrap();
    assert_eq!(loaded.info().layers, 18);
    // An alignment of 64 moves the data and stays loadable too.
    drop(loaded);
    let copy = mutated(
        &model,
        dir.path(),
        "align64.gguf",
        "general.alignment",
        NewValue::U32(64),
    );
    assert_eq!(GgufHeader::read(&copy).unwrap().alignment, 64);
    Model::open(&copy).unwrap();
}

#[test]
fn metadata_llama_cpp_would_abort_on_is_refused_naming_the_key() {
    let Some(model) = model_path() else { return };
    let dir = tempfile::tempdir().unwrap();

    // Two tokens with the same text (llama.cpp: GGML_ASSERT on the vocabulary maps).
    let mut tokens = gguf::string_array(&model, "tokenizer.ggml.tokens")
        .unwrap()
        .expect("the model has a token list");
    tokens[1001] = tokens[1000].clone();
    let copy = mutated(
        &model,
        dir.path(),
        "dup-token.gguf",
        "tokenizer.ggml.tokens",
        NewValue::StrArray(tokens),
    );
    refused(&copy, "tokenizer.ggml.tokens", "has tokens 1000 and 1001");
    std::fs::remove_file(&copy).unwrap();

    // An empty token is renamed [EMPTY_<id>] by llama.cpp: two empty ones do not collide.
    let mut tokens = gguf::string_array(&model, "tokenizer.ggml.tokens")
        .unwrap()
        .unwrap();
    tokens[2000].clear();
    tokens[2001].clear();
    let copy = mutated(
        &model,
        dir.path(),
        "empty-tokens.gguf",
        "tokenizer.ggml.tokens",
        NewValue::StrArray(tokens),
    );
    GgufHeader::read(&copy).unwrap();
    std::fs::remove_file(&copy).unwrap();

    for (name, key, value, says) in [
        (
            "blocks-0",
            "gemma3.block_count",
            NewValue::U32(0),
            "is 0; it must be 1 to 512",
        ),
        (
            "blocks-1000",
            "gemma3.block_count",
            NewValue::U32(1000),
            "is 1000; it must be 1 to 512",
        ),
        (
            "align-1",
            "general.alignment",
            NewValue::U32(1),
            "is 1; it must be a power of two and a multiple of 32",
        ),
        (
            "align-3",
            "general.alignment",
            NewValue::U32(3),
            "is 3; it must be a power of two",
        ),
        (
            "eps-nan",
            "gemma3.attention.layer_norm_rms_epsilon",
            NewValue::F32(f32::NAN),
            "is NaN; it must be a finite number",
        ),
        (
            "eps-negative",
            "gemma3.attention.layer_norm_rms_epsilon",
            NewValue::F32(-1.0),
            "an epsilon must be 0 or more",
        ),
        (
            "rope-inf",
            "gemma3.rope.freq_base",
            NewValue::F32(f32::INFINITY),
            "is inf; it must be a finite number",
        ),
        (
            "ctx-max",
            "gemma3.context_length",
            NewValue::U32(u32::MAX),
            "is 4294967295; it must be 1 to 2147483647",
        ),
        (
            "ctx-0",
            "gemma3.context_length",
            NewValue::U32(0),
            "is 0; it must be 1 to 2147483647",
        ),
        (
            "experts",
            "gemma3.expert_count",
            NewValue::U32(5000),
            "is 5000; it must be 0 to 1024",
        ),
        (
            "experts-used",
            "gemma3.expert_used_count",
            NewValue::U32(2),
            "is 2; it must be 0 to 0",
        ),
    ] {
        let copy = mutated(&model, dir.path(), name, key, value);
        refused(&copy, key, says);
        std::fs::remove_file(&copy).unwrap();
    }
}

/// `Model::open(path)` on another thread, failing the test if it takes more than 10 s (a FIFO
/// opened for reading would wait for a writer forever).
fn open_within_10s(path: &Path) -> LlmError {
    let (send, receive) = mpsc::channel();
    let owned = path.to_path_buf();
    std::thread::spawn(move || {
        let _ = send.send(Model::open(&owned).err());
    });
    receive
        .recv_timeout(Duration::from_secs(10))
        .expect("the load answered within 10 s")
        .expect("the load failed")
}

#[test]
fn a_directory_fifo_or_device_is_named_as_such() {
    let dir = tempfile::tempdir().unwrap();
    let err = open_within_10s(dir.path());
    assert!(
        matches!(
            err,
            LlmError::NotAFile {
                kind: "a directory",
                ..
            }
        ),
        "{err}"
    );
    assert!(
        err.to_string()
            .ends_with("is a directory, not a model file"),
        "{err}"
    );
    #[cfg(unix)]
    {
        let fifo = dir.path().join("pipe.gguf");
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .is_ok_and(|s| s.success());
        if made {
            let err = open_within_10s(&fifo);
            assert!(
                err.to_string()
                    .ends_with("is a FIFO (named pipe), not a model file"),
                "{err}"
            );
        }
        let err = open_within_10s(Path::new("/dev/null"));
        assert!(
            err.to_string().ends_with("is a device, not a model file"),
            "{err}"
        );
    }
}

#[test]
fn a_gguf_without_tensors_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("vocab-only.gguf");
    let mut bytes = Vec::new();
    bytes.extend_from_slice(b"GGUF");
    bytes.extend_from_slice(&3u32.to_le_bytes());
    bytes.extend_from_slice(&0u64.to_le_bytes()); // tensors
    bytes.extend_from_slice(&1u64.to_le_bytes()); // metadata entries
    let key = b"general.architecture";
    bytes.extend_from_slice(&(key.len() as u64).to_le_bytes());
    bytes.extend_from_slice(key);
    bytes.extend_from_slice(&8u32.to_le_bytes());
    bytes.extend_from_slice(&6u64.to_le_bytes());
    bytes.extend_from_slice(b"gemma3");
    std::fs::write(&path, &bytes).unwrap();
    let err = Model::open(&path).unwrap_err();
    assert!(matches!(err, LlmError::NoTensors { .. }), "{err}");
    assert!(
        err.to_string().contains("has no tensors (no weights)"),
        "{err}"
    );
}
