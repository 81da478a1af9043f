//! The real test model under a grammar: loading, tokens, chat prompts, llama.cpp's sampler, masks
//! agreeing with llama.cpp's, generation, bench-calls. Fails under `CI=true` if the model is missing.
//!
//! One test binary per crate: each module is one former test file.

// A test fails by panicking: unwrap and expect say what broke (helpers included).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod bench_calls;
mod budget;
mod chat_templates;
mod common;
mod generation;
mod gguf_templates;
mod gpu;
mod hostile_gguf;
mod lazy_masks;
mod llguidance_engine;
mod llm_masks;
mod llm_model;
mod llm_sampler;
mod logit_settings;
mod mask_agreement;
mod maskbench_llama;
mod maskbench_three;
mod reasoning_budget;
mod server;
mod server_templates;
mod template_runs;
mod token_triggers;
