//! toolrail's masks against llama.cpp's, on the real test model: for a few grammars, a greedy
//! walk under llama.cpp's grammar sampler, comparing both engines' allowed sets over the whole
//! 262k vocabulary at every step. (The full agreement test, with tool grammars and ≥ 64 tokens,
//! is the generation layer's; this is the model layer's early warning.)
//!
//! The model is found at `$TOOLRAIL_MODEL` or in the cache `scripts/fetch-model.sh` fills. If it
//! is absent, these tests fail when `CI=true` and are skipped (with a message) otherwise.

use toolrail_llm::Model;

use crate::common::masks::{MaskPair, differing_tokens};
use crate::common::model;

/// Walks `steps` tokens greedily under llama.cpp's sampler for `grammar`, comparing masks at
/// every step; returns the number of differing tokens summed over the steps.
fn compare(model: &Model, name: &str, grammar: &str, prompt: &str, steps: usize) -> usize {
    let mut pair = MaskPair::new(model, grammar, prompt, 512);
    let mut differences = 0;
    let mut text = Vec::new();
    let mut taken = 0;
    for step in 0..steps {
        let (ours, theirs) = pair.masks();
        let diff = differing_tokens(&ours, &theirs, &format!("{name} step {step}"));
        differences += diff;
        let Some(next) = pair.session.argmax(|id| theirs.contains(id)).unwrap() else {
            break;
        };
        pair.llama.accept(next).unwrap();
        taken += 1;
        if model.is_eog(next) {
            break;
        }
        let piece = model.piece(next);
        pair.state = pair
            .engine
            .accept_token(pair.state, next, &piece)
            .expect("toolrail accepts what llama.cpp allowed");
        text.extend(piece);
        pair.session.feed(next).unwrap();
    }
    eprintln!(
        "{name}: {taken} tokens, {differences} differing; mask ms/token toolrail {:.2}, llama.cpp {:.1}; text {:?}",
        pair.toolrail_ms / taken.max(1) as f64,
        pair.llama_ms / taken.max(1) as f64,
        String::from_utf8_lossy(&text)
    );
    differences
}

/// `../shared/corpus/gbnf/<name>`; missing: a failure under `CI=true`, otherwise None (a skip).
fn corpus(name: &str) -> Option<String> {
    let path = toolrail_testkit::corpus(&format!("gbnf/{name}"))?;
    Some(std::fs::read_to_string(path).unwrap())
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
            return;
        };
        total += compare(model, file, &grammar, prompt, 24);
    }
    assert_eq!(total, 0, "toolrail and llama.cpp masks differ");
}
