//! toolrail's masks against llama.cpp's, on the real test model: for a few grammars, a greedy
//! walk under llama.cpp's grammar sampler, comparing both engines' allowed sets over the whole
//! 262k vocabulary at every step. (The full agreement test, with tool grammars and ≥ 64 tokens,
//! is the generation layer's; this is the model layer's early warning.)
//!
//! The model is found at `$TOOLRAIL_MODEL` or in the cache `scripts/fetch-model.sh` fills. If it
//! is absent, these tests fail when `CI=true` and are skipped (with a message) otherwise.

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use toolrail::engine::Engine;
use toolrail::engine::mask::MaskEngine;
use toolrail::gbnf::{Grammar, TokenVocabulary};
use toolrail::llm::{LlamaGrammarSampler, Model, SessionOptions};

mod common;
use common::model;

/// Walks `steps` tokens greedily under llama.cpp's sampler for `grammar`, comparing masks at
/// every step; returns the number of differing tokens summed over the steps.
fn compare(model: &Model, name: &str, grammar: &str, prompt: &str, steps: usize) -> usize {
    let compiled =
        Grammar::parse_with(grammar, "root", Some(model as &dyn TokenVocabulary)).unwrap();
    let mut engine = Engine::new(Arc::new(compiled));
    let mut state = engine.initial();
    let mut masks = MaskEngine::new(model.shared_token_table());
    let mut llama = LlamaGrammarSampler::new(model, grammar, "root").unwrap();
    let mut session = model
        .session(SessionOptions {
            context: Some(512),
            // One thread: ggml's spinning thread pool collapses when the cores are shared.
            threads: Some(1),
        })
        .unwrap();
    session.decode(&model.tokenize(prompt, true, true)).unwrap();

    let mut differences = 0;
    let mut text = Vec::new();
    let (mut ours_ms, mut theirs_ms) = (0.0, 0.0);
    let mut taken = 0;
    for step in 0..steps {
        let started = Instant::now();
        let ours = masks.mask(&mut engine, state).unwrap();
        ours_ms += started.elapsed().as_secs_f64() * 1e3;
        let started = Instant::now();
        let theirs = llama.token_mask().unwrap();
        theirs_ms += started.elapsed().as_secs_f64() * 1e3;
        let diff = ours.difference_count(&theirs);
        if diff > 0 {
            let only_ours: Vec<u32> = ours
                .iter()
                .filter(|&id| !theirs.contains(id))
                .take(10)
                .collect();
            let only_theirs: Vec<u32> = theirs
                .iter()
                .filter(|&id| !ours.contains(id))
                .take(10)
                .collect();
            eprintln!(
                "{name} step {step}: {diff} differ; toolrail only {only_ours:?}, llama.cpp only {only_theirs:?}"
            );
        }
        differences += diff;
        let Some(next) = session.argmax(|id| theirs.contains(id)).unwrap() else {
            break;
        };
        llama.accept(next).unwrap();
        taken += 1;
        if model.is_eog(next) {
            break;
        }
        let piece = model.piece(next);
        state = engine
            .accept_token(state, next, &piece)
            .expect("toolrail accepts what llama.cpp allowed");
        text.extend(piece);
        session.feed(next).unwrap();
    }
    eprintln!(
        "{name}: {taken} tokens, {differences} differing; mask ms/token toolrail {:.2}, llama.cpp {:.1}; text {:?}",
        ours_ms / taken.max(1) as f64,
        theirs_ms / taken.max(1) as f64,
        String::from_utf8_lossy(&text)
    );
    differences
}

fn corpus(name: &str) -> Option<String> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../shared/corpus/gbnf")
        .join(name);
    std::fs::read_to_string(path).ok()
}

#[test]
fn masks_agree_on_small_grammars() {
    let Some(model) = model() else { return };
    let mut total = 0;
    total += compare(
        model,
        "yes|no",
        "root ::= \"yes\" | \"no\"",
        "Is the sky blue? Answer:",
        8,
    );
    total += compare(
        model,
        "token reference",
        "root ::= <start_of_turn> \"model\\n\" [a-z ]+ <end_of_turn>",
        "Say hi.\n",
        12,
    );
    total += compare(
        model,
        "utf-8 class",
        "root ::= [à-ÿ一-龥]+ \"!\"",
        "Écrivez un mot: ",
        12,
    );
    assert_eq!(total, 0, "toolrail and llama.cpp masks differ");
}

#[test]
fn masks_agree_on_corpus_grammars() {
    let Some(model) = model() else { return };
    let mut total = 0;
    for (file, prompt) in [
        ("json.gbnf", "A JSON object describing a cat:\n"),
        ("list.gbnf", "Shopping list:\n"),
    ] {
        let Some(grammar) = corpus(file) else {
            eprintln!("skipped {file}: ../shared/corpus not found");
            continue;
        };
        total += compare(model, file, &grammar, prompt, 24);
    }
    assert_eq!(total, 0, "toolrail and llama.cpp masks differ");
}
