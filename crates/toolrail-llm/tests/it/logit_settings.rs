//! The settings that change logits, measured on the test model with llama.cpp's CPU backend:
//! what toolrail tells a user comparing an in-process run with a server's rests on these.
//! Threads leave the logits bit-identical; flash attention, the cache types and the micro-batch
//! change them; a
//! session records what it computed with (flash attention `auto` with what it became).

use toolrail_llm::settings::{CacheType, ComputeOptions, FlashAttention, Known, PromptSplit};
use toolrail_llm::{Model, SessionOptions};

use crate::common::model;

const PROMPT: &str = "<start_of_turn>user\nWhat is the weather in Paris today? Answer in one \
                      sentence.<end_of_turn>\n<start_of_turn>model\n";

/// The logits after the prompt, computed with these options.
fn logits(model: &Model, threads: u32, compute: ComputeOptions) -> Vec<f32> {
    let mut session = model
        .session(SessionOptions {
            context: Some(256),
            threads: Some(threads),
            compute,
            beside_window: false,
        })
        .unwrap();
    session.decode(&model.tokenize(PROMPT, true, true)).unwrap();
    session.logits().unwrap().to_vec()
}

fn largest_difference(a: &[f32], b: &[f32]) -> f32 {
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max)
}

#[test]
fn threads_leave_the_logits_identical_and_flash_attention_changes_them() {
    let Some(model) = model() else { return };
    let on = ComputeOptions {
        flash_attention: Some(FlashAttention::On),
        ..ComputeOptions::default()
    };
    let off = ComputeOptions {
        flash_attention: Some(FlashAttention::Off),
        ..ComputeOptions::default()
    };
    let one = logits(model, 1, on);
    let two = logits(model, 2, on);
    assert_eq!(one, two, "the thread count changed the logits");
    let without = logits(model, 1, off);
    assert_eq!(
        without,
        logits(model, 2, off),
        "the thread count changed the logits without flash attention"
    );
    let d = largest_difference(&one, &without);
    assert!(d > 0.0, "flash attention on and off gave the same logits");
    eprintln!("flash attention on vs off: largest logit difference {d}");
    let q8 = logits(
        model,
        1,
        ComputeOptions {
            cache_type_k: Some(CacheType::Q8_0),
            cache_type_v: Some(CacheType::Q8_0),
            ..on
        },
    );
    let d = largest_difference(&one, &q8);
    assert!(d > 0.0, "a q8_0 cache gave the same logits as f16");
    eprintln!("f16 vs q8_0 cache: largest logit difference {d}");
    let small = logits(
        model,
        1,
        ComputeOptions {
            ubatch: Some(4),
            batch: Some(4),
            ..on
        },
    );
    let d = largest_difference(&one, &small);
    assert!(
        d > 0.0,
        "micro-batches of 4 gave the same logits as one of 512"
    );
    eprintln!("micro-batch 512 vs 4: largest logit difference {d}");
    // The test model has a sliding window: its prompts are cut as llama-server cuts them.
    assert!(model.makes_server_checkpoints());
    let whole = logits(
        model,
        1,
        ComputeOptions {
            prompt_split: Some(PromptSplit::Batches),
            ..on
        },
    );
    let d = largest_difference(&one, &whole);
    assert!(
        d > 0.0,
        "cutting the prompt's last 4 tokens apart changed nothing"
    );
    eprintln!("prompt cut for checkpoints vs in batches: largest logit difference {d}");
}

#[test]
fn a_session_records_what_it_computes_with() {
    let Some(model) = model() else { return };
    let session = model
        .session(SessionOptions {
            context: Some(128),
            threads: Some(1),
            beside_window: false,
            compute: ComputeOptions {
                ubatch: Some(64),
                cache_type_k: Some(CacheType::Q8_0),
                ..ComputeOptions::default()
            },
        })
        .unwrap();
    let s = session.settings();
    assert_eq!(s.engine, toolrail_llm::settings::Backend::InProcess);
    assert_eq!(s.flash_attention, Known::Set(FlashAttention::Auto));
    // The CPU backend supports flash attention: `auto` turns it on, as llama.cpp logs.
    assert_eq!(s.flash_attention_enabled, Some(true));
    // The batch is capped at the context, the micro-batch at the batch.
    assert_eq!(
        (s.batch.clone(), s.ubatch.clone()),
        (Known::Set(128), Known::Set(64))
    );
    assert_eq!(s.cache_type_k, Known::Set(CacheType::Q8_0));
    assert_eq!(s.cache_type_v, Known::Set(CacheType::F16));
    assert_eq!(s.threads, Known::Set(1));
    assert!(
        s.summary()
            .starts_with("flash attention auto: on, batch 128, micro-batch 64")
    );
    // A quantized V cache without flash attention is refused by llama.cpp, with its reason.
    let refused = model.session(SessionOptions {
        context: Some(128),
        threads: Some(1),
        beside_window: false,
        compute: ComputeOptions {
            flash_attention: Some(FlashAttention::Off),
            cache_type_v: Some(CacheType::Q8_0),
            ..ComputeOptions::default()
        },
    });
    let message = refused.err().map(|e| e.to_string()).unwrap_or_default();
    assert!(
        message.contains("quantized V cache requires flash_attn")
            && message.contains("(flash attention off, K cache f16, V cache q8_0)")
            && !message.contains("memory"),
        "{message}"
    );
}
