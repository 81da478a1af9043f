//! The model layer over llama-cpp-2: loading GGUF models (by path or by a `models.toml` entry),
//! their metadata and vocabulary as llama.cpp's grammar sees it, tokenization, chat prompts, a
//! small decoding session, and llama.cpp's own grammar sampler made safe (the `llama` engine).
//!
//! Layer: above gbnf, engine and tools (see ARCHITECTURE.md); the only crate that builds C++
//! (llama.cpp through llama-cpp-2) and touches its pointers. Invariants: every failure is an
//! [`LlmError`], never an abort; the generation [`worker`] owns the model on one thread and
//! tags every event with its run.
//!
//! | piece | what |
//! | --- | --- |
//! | [`backend`] | the one llama.cpp backend of the process, its log routed away from stderr |
//! | [`ModelSpec`] | a `models.toml` entry: name, path, context, threads, chat format, sampling |
//! | [`Model`] | a loaded model: [`ModelInfo`], [`TokenTable`](toolrail_engine::TokenTable), tokenizer |
//! | [`Session`] | a context on the calling thread: decode a prompt, logits, feed one token |
//! | [`LlamaGrammarSampler`] | llama.cpp's grammar sampler: full-vocabulary masks, checked accepts |
//! | [`sampling`] | choosing the next token from logits and a mask, candidates before and after |
//!
//! Every failure is an [`LlmError`]; a bad file is diagnosed by toolrail's own GGUF reader
//! ([`gguf`]) before llama.cpp is asked to load it.
//!
//! # Performance notes (Gemma 3 270M Q4_K_M, 262,144 tokens, 2 shared cores)
//!
//! | what | release | dev profile |
//! | --- | --- | --- |
//! | [`Model::token_table`] (262k pieces + EOG set) | 15 ms | 108 ms |
//! | llama.cpp's full-vocabulary mask ([`LlamaGrammarSampler::mask`]) | 43 ms (37–40 ms idle) | same: C++ |
//! | load ([`Model::open`], warm page cache) | 0.8–1.4 s | same |
//! | one-token decode, 1 thread, cores shared with a compiler | ~50 ms | same |
//!
//! llama.cpp is built Release (-O3) in both profiles (`Cargo.toml` profile overrides). ggml's
//! thread pool spins while waiting: with 2 threads on 2 cores that something else is using, a
//! one-token decode went from ~50 ms to 0.1–2 s. Prefer 1 thread on a busy machine.

pub mod bench;
pub mod bench_calls;
pub mod bench_masks;
pub mod budget;
mod chat;
pub mod device;
pub mod engine_kind;
mod error;
pub mod files;
pub mod gguf;
mod grammar_sampler;
pub mod lazy_gate;
pub mod llguidance;
mod log;
mod model;
pub mod reasoning_budget;
pub mod record;
pub mod sampling;
pub mod server;
mod session;
pub mod settings;
mod spec;
pub mod step;
pub mod template;
pub mod template_lint;
pub mod threads;
pub mod worker;

use std::sync::OnceLock;

/// The llama.cpp build toolrail links (llama-cpp-sys-2 0.1.161 vendors b11434): the in-process
/// engine's side of a comparison with a llama-server's `build_info`.
pub const LLAMA_CPP_BUILD: u32 = 11434;

use llama_cpp_2::llama_backend::LlamaBackend;

pub use chat::{ChatMessage, ChatPrompt, PromptSource};
pub use error::LlmError;
pub use grammar_sampler::LlamaGrammarSampler;
pub use model::{Model, ModelInfo};
pub use session::{DEFAULT_CONTEXT, Session, SessionOptions};
pub use spec::{
    ChatFormat, MODELS_FILE, ModelSpec, Models, ModelsSource, SamplingDefaults, ServerSpec,
    TEST_MODEL_FILE, builtin_models, check_threads, cores, expand_tilde, max_threads, model_dir,
    models_file_candidates, test_model_path, threads_beside_a_window,
};

/// The process's llama.cpp backend, initialised on first use with llama.cpp's log silenced
/// (set `TOOLRAIL_LLAMA_LOG=1` to see it on stderr). It lives until the process exits.
pub fn backend() -> Result<&'static LlamaBackend, LlmError> {
    static BACKEND: OnceLock<Result<LlamaBackend, String>> = OnceLock::new();
    BACKEND
        .get_or_init(|| {
            log::install();
            LlamaBackend::init().map_err(|e| e.to_string())
        })
        .as_ref()
        .map_err(|e| LlmError::Backend(e.clone()))
}
