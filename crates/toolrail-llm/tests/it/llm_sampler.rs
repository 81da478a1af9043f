//! The `llama` engine on the real test model: llama.cpp's grammar sampler over the whole
//! vocabulary, checked accepts that refuse masked tokens and early end of generation instead of
//! aborting, grammars toolrail rejects never reaching llama.cpp, and a short greedy decode.
//!
//! The model is found at `$TOOLRAIL_MODEL` or in the cache `scripts/fetch-model.sh` fills. If it
//! is absent, these tests fail when `CI=true` and are skipped (with a message) otherwise.

use std::time::Instant;

use toolrail_gbnf::TokenVocabulary;
use toolrail_llm::{LlamaGrammarSampler, LlmError, Model, SessionOptions};

use crate::common::model;

const YES_NO: &str = "root ::= \"yes\" | \"no\"";

/// The single token for `text` (panics if it is several).
fn token(model: &Model, text: &str) -> u32 {
    let ids = model.tokenize(text, false, false);
    assert_eq!(ids.len(), 1, "{text:?} is {ids:?}");
    ids[0]
}

#[test]
fn full_vocabulary_mask_for_yes_or_no() {
    let Some(model) = model() else { return };
    let table = model.shared_token_table();
    let mut sampler = LlamaGrammarSampler::new(model, YES_NO, "root").unwrap();

    let mut times = Vec::new();
    let mut mask = Vec::new();
    for _ in 0..5 {
        let started = Instant::now();
        mask = sampler.mask().unwrap();
        times.push(started.elapsed().as_secs_f64() * 1e3);
    }
    times.sort_by(f64::total_cmp);
    eprintln!(
        "llama full-vocab mask (yes|no, start): median {:.1} ms, min {:.1} ms",
        times[2], times[0]
    );
    assert_eq!(mask.len(), 262_144);

    // Exactly the tokens whose piece is a non-empty prefix of "yes" or "no".
    let expected = |id: u32| {
        let piece = table.piece(id);
        !piece.is_empty()
            && !table.is_eog(id)
            && (b"yes".starts_with(piece) || b"no".starts_with(piece))
    };
    let allowed = sampler.allowed().unwrap();
    let want: Vec<u32> = (0..table.len() as u32).filter(|&id| expected(id)).collect();
    assert_eq!(allowed, want);
    let pieces: Vec<String> = allowed
        .iter()
        .map(|&id| String::from_utf8_lossy(table.piece(id)).into_owned())
        .collect();
    eprintln!("allowed at start: {pieces:?}");

    // By hand.
    for text in ["yes", "no", "y", "n"] {
        let id = token(model, text);
        assert!(mask[id as usize], "{text:?} ({id}) should be allowed");
    }
    for text in [" yes", "Yes", "maybe", " no", "\n", "yes!", "nope"] {
        let ids = model.tokenize(text, false, false);
        if ids.len() == 1 {
            assert!(
                !mask[ids[0] as usize],
                "{text:?} ({}) should be masked",
                ids[0]
            );
        } else {
            // The whole text as one piece is not a token; its first token may be a prefix.
            let first = model.piece(ids[0]);
            assert_eq!(
                mask[ids[0] as usize],
                b"yes".starts_with(&first) || b"no".starts_with(&first)
            );
        }
    }
    for &id in model.eog_tokens() {
        assert!(
            !mask[id as usize],
            "end of generation {id} before the grammar is complete"
        );
    }
    assert!(!sampler.can_end().unwrap());

    // After "y", only prefixes of "es".
    sampler.accept(token(model, "y")).unwrap();
    let allowed = sampler.allowed().unwrap();
    let want: Vec<u32> = (0..table.len() as u32)
        .filter(|&id| {
            let piece = table.piece(id);
            !piece.is_empty() && !table.is_eog(id) && b"es".starts_with(piece)
        })
        .collect();
    assert_eq!(allowed, want);
    assert!(allowed.contains(&token(model, "es")));
}

#[test]
fn accept_refuses_masked_tokens_and_early_end() {
    let Some(model) = model() else { return };
    let mut sampler = LlamaGrammarSampler::new(model, YES_NO, "root").unwrap();
    let before = sampler.allowed().unwrap();

    // A token the grammar forbids.
    let maybe = model.tokenize("maybe", false, false)[0];
    let err = sampler.accept(maybe).unwrap_err();
    match &err {
        LlmError::TokenRejected { token, reason, .. } => {
            assert_eq!(*token, maybe);
            assert_eq!(reason, "the grammar does not allow it here");
        }
        other => panic!("expected TokenRejected, got {other}"),
    }
    // End of generation before the grammar is complete: refused, never handed to llama.cpp
    // (which would abort the process).
    for &eog in model.eog_tokens() {
        let err = sampler.accept(eog).unwrap_err();
        assert!(
            err.to_string()
                .contains("end of generation, but the grammar is not complete"),
            "{err}"
        );
    }
    // Out of range.
    assert!(matches!(
        sampler.accept(9_999_999),
        Err(LlmError::TokenOutOfRange { .. })
    ));
    // Nothing changed.
    assert_eq!(sampler.allowed().unwrap(), before);
    assert!(sampler.accepted().is_empty());

    // Complete "no" (as "n" + "o" or "no"); then end of generation is allowed and accepted.
    sampler.accept(token(model, "no")).unwrap();
    assert!(sampler.can_end().unwrap());
    let allowed = sampler.allowed().unwrap();
    assert_eq!(
        allowed,
        model.eog_tokens(),
        "only end of generation after \"no\""
    );
    let o = token(model, "o");
    assert!(sampler.accept(o).is_err(), "nothing may follow \"no\"");
    let eos = model.tokenize_special(b"<eos>")[0];
    sampler.accept(eos).unwrap();
    assert_eq!(sampler.accepted(), &[token(model, "no"), eos]);
}

#[test]
fn empty_and_nul_pieces_are_refused_with_their_reason() {
    let Some(model) = model() else { return };
    let table = model.shared_token_table();
    let Some(nul) = (0..table.len() as u32).find(|&id| table.piece(id).first() == Some(&0)) else {
        panic!("no NUL-led piece in the test model");
    };
    let mut sampler = LlamaGrammarSampler::new(model, "root ::= [\\x00-\\x7f]*", "root").unwrap();
    let err = sampler.accept(nul).unwrap_err();
    assert!(err.to_string().contains("starts with a NUL byte"), "{err}");
    // The same grammar takes an ordinary ASCII token.
    sampler.accept(token(model, "yes")).unwrap();
}

#[test]
fn grammars_toolrail_rejects_never_reach_llama_cpp() {
    let Some(model) = model() else { return };
    for (text, root) in [
        ("root ::= foo_bar\nfoo_bar ::= \"x\"", "root"), // `_` in a rule name
        ("root ::= missing", "root"),                    // undefined rule
        ("start ::= \"x\"", "root"),                     // no root
        ("root ::= root \"x\" | \"y\"", "root"),         // left recursion
        ("root ::= \"x\"{2001}", "root"),                // repetition over the limit
        ("root ::= [a-", "root"),                        // unterminated class
    ] {
        let err = LlamaGrammarSampler::new(model, text, root).unwrap_err();
        assert!(matches!(err, LlmError::Grammar(_)), "{text:?}: {err}");
    }
}

#[test]
fn token_references_are_masked_by_id() {
    let Some(model) = model() else { return };
    let start = model.tokenize_special(b"<start_of_turn>")[0];
    let mut sampler =
        LlamaGrammarSampler::new(model, "root ::= <start_of_turn> \"ok\"", "root").unwrap();
    assert_eq!(sampler.allowed().unwrap(), vec![start]);
    sampler.accept(start).unwrap();
    assert!(sampler.allowed().unwrap().contains(&token(model, "ok")));
}

#[test]
fn greedy_decode_under_the_llama_sampler_says_yes_or_no() {
    let Some(model) = model() else { return };
    let mut session = model
        .session(SessionOptions {
            context: Some(256),
            // One thread: ggml's spinning thread pool collapses when the cores are shared.
            threads: Some(1),
            ..Default::default()
        })
        .unwrap();
    let prompt = "Question: Is the sky blue on a clear day? Answer yes or no.\nAnswer:";
    let started = Instant::now();
    session
        .decode(&model.tokenize(prompt, true, false))
        .unwrap();
    eprintln!(
        "prompt decode: {} tokens in {:.1} ms",
        session.tokens().len(),
        started.elapsed().as_secs_f64() * 1e3
    );

    let mut sampler = LlamaGrammarSampler::new(model, YES_NO, "root").unwrap();
    let mut text = Vec::new();
    let mut mask_ms = Vec::new();
    let mut decode_ms = Vec::new();
    for _ in 0..8 {
        let started = Instant::now();
        let mask = sampler.mask().unwrap();
        mask_ms.push(started.elapsed().as_secs_f64() * 1e3);
        let next = session
            .argmax(|id| mask[id as usize])
            .unwrap()
            .expect("some token is allowed");
        sampler.accept(next).unwrap();
        if model.is_eog(next) {
            break;
        }
        text.extend(model.piece(next));
        let started = Instant::now();
        session.feed(next).unwrap();
        decode_ms.push(started.elapsed().as_secs_f64() * 1e3);
    }
    let text = String::from_utf8(text).unwrap();
    eprintln!(
        "greedy under llama.cpp's sampler: {text:?}; mask ms {mask_ms:.1?}; decode ms {decode_ms:.1?}"
    );
    assert!(text == "yes" || text == "no", "{text:?}");
    assert!(
        model.is_eog(*sampler.accepted().last().unwrap()),
        "ended with end of generation"
    );

    // Unconstrained, the same session can go on: logits are there and the context grows.
    let n = session.tokens().len();
    let free = session.argmax(|_| true).unwrap().unwrap();
    session.feed(free).unwrap();
    assert_eq!(session.tokens().len(), n + 1);
    session.clear();
    assert!(session.tokens().is_empty());
    assert!(matches!(session.logits(), Err(LlmError::NoLogits)));
}

#[test]
fn sessions_refuse_overflow_and_bad_tokens() {
    let Some(model) = model() else { return };
    let mut session = model
        .session(SessionOptions {
            context: Some(8),
            threads: Some(1),
            ..Default::default()
        })
        .unwrap();
    // llama.cpp rounds the context size up (to a multiple of 256).
    let n_ctx = session.n_ctx();
    assert!(n_ctx >= 8, "{n_ctx}");
    let too_many = vec![2; n_ctx as usize + 1];
    let err = session.decode(&too_many).unwrap_err();
    assert!(
        matches!(err, LlmError::ContextFull { needed, n_ctx: n } if needed == too_many.len() && n == n_ctx),
        "{err}"
    );
    let err = session.decode(&[2, 262_144]).unwrap_err();
    assert!(matches!(err, LlmError::TokenOutOfRange { .. }), "{err}");
    assert!(session.tokens().is_empty());
    session.decode(&[2, 100]).unwrap();
    assert_eq!(session.logits().unwrap().len(), 262_144);
}
