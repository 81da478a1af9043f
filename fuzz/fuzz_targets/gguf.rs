//! Fuzz target over toolrail's own GGUF reader (no llama.cpp): the bytes are written to a file
//! and read as a header (metadata checks included) and as a vocabulary. Nothing may panic,
//! abort, allocate without bound or hang.
#![no_main]

use libfuzzer_sys::fuzz_target;
use toolrail_llm::gguf::{GgufHeader, string_array};

fuzz_target!(|data: &[u8]| {
    let dir = std::env::temp_dir().join(format!("toolrail-fuzz-gguf-{}", std::process::id()));
    let _ = std::fs::create_dir_all(&dir);
    let path = dir.join("model.gguf");
    if std::fs::write(&path, data).is_err() {
        return;
    }
    if let Ok(header) = GgufHeader::read(&path) {
        let _ = header.architecture();
        let _ = header.string("tokenizer.chat_template");
    }
    let _ = string_array(&path, "tokenizer.ggml.tokens");
});
