//! Word triggers that are one token, real test model: llama-server turns a trigger word that is
//! a single preserved token of the vocabulary into a token trigger (Qwen's vocabularies have
//! `<tool_call>` as one added token). Gemma 3's vocabulary has no such token, so a copy of the
//! test model gets one the way model makers add them: two of its unused control tokens
//! (`<unused0>`, `<unused1>`) are renamed `<tool_call>` and `</tool_call>` in the GGUF metadata.
//! Under Qwen3-Coder's template the word trigger `<tool_call>` then becomes the token trigger,
//! and toolrail's gate must fire on exactly the token llama.cpp's lazy sampler fires on — and
//! not on the same text spelled in ordinary pieces, where llama.cpp no longer looks for that word
//! (there both wake later, on the template's other word trigger, `<function=special_function>`).

use serde_json::{Value, json};
use toolrail_llm::Model;
use toolrail_llm::gguf::{self, NewValue};
use toolrail_llm::record::{LazyNote, Stop};
use toolrail_llm::template::{ChatTemplates, TriggerKind};
use toolrail_llm::worker::EngineKind;

use crate::common::model_path;
use crate::gguf_templates::{gated_run, timeline};
use crate::lazy_masks::{rendered_call, request, template_text};

/// A copy of the test model whose control tokens 6 and 7 read `<tool_call>` and `</tool_call>`.
fn model_with_tool_call_tokens(dir: &std::path::Path) -> Option<std::path::PathBuf> {
    let path = model_path()?;
    let mut tokens = gguf::string_array(&path, "tokenizer.ggml.tokens")
        .expect("the test model reads")
        .expect("the test model has a vocabulary");
    assert_eq!(
        tokens[6], b"<unused0>",
        "token 6 is an unused control token"
    );
    assert_eq!(
        tokens[7], b"<unused1>",
        "token 7 is an unused control token"
    );
    assert!(!tokens.iter().any(|t| t == b"<tool_call>"));
    tokens[6] = b"<tool_call>".to_vec();
    tokens[7] = b"</tool_call>".to_vec();
    let copy = dir.join("tool-call-tokens.gguf");
    gguf::copy_with_value(
        &path,
        &copy,
        "tokenizer.ggml.tokens",
        &NewValue::StrArray(tokens),
    )
    .expect("the copy is written");
    Some(copy)
}

#[test]
fn a_trigger_word_that_is_one_token_fires_on_that_token_as_in_llama_cpp() {
    let Some(source) = template_text("Qwen3-Coder") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let Some(copy) = model_with_tool_call_tokens(dir.path()) else {
        return;
    };
    let model = Model::open(&copy).expect("the copy loads");
    assert_eq!(model.tokenize("<tool_call>", false, true), vec![6]);
    let templates = ChatTemplates::from_gguf(&copy, Some(&source)).unwrap();
    let result = templates.apply(&request()).unwrap();
    assert!(result.grammar_lazy);
    // The template gives a word; the server makes it the token.
    assert!(
        result
            .grammar_triggers
            .iter()
            .any(|t| t.kind == TriggerKind::Word && t.value == "<tool_call>"),
        "{:?}",
        result.grammar_triggers
    );
    let sampler = result
        .sampler
        .as_ref()
        .expect("a vocabulary gives a sampler");
    assert!(sampler.preserved_token_ids.contains(&6));
    assert!(
        sampler
            .triggers
            .iter()
            .any(|t| t.kind == TriggerKind::Token && t.token == Some(6)),
        "{:?}",
        sampler.triggers
    );
    assert_eq!(sampler.tokens, vec![6]);
    assert!(
        !sampler.patterns.iter().any(|p| p.contains("tool_call")),
        "no word pattern is left for <tool_call>: {:?}",
        sampler.patterns
    );
    let n_vocab = model.n_vocab() as u32;

    // The call with `<tool_call>` as its one token: both engines wake on it, with its piece.
    let call = rendered_call(&templates, &result).expect("Qwen3-Coder renders a call");
    let text = format!("One moment.\n{call}");
    let forced = model.tokenize(&text, false, true);
    let trigger_at = forced.iter().position(|&t| t == 6).expect("the token");
    let max_tokens = forced.len() as u32 + 8;
    let (ours, our_stop, our_output) =
        gated_run(&model, &result, EngineKind::Toolrail, &forced, max_tokens);
    let (theirs, their_stop, their_output) =
        gated_run(&model, &result, EngineKind::Llama, &forced, max_tokens);
    assert_eq!(our_output, their_output);
    assert_eq!(our_stop, their_stop);
    assert_eq!(timeline(&ours), timeline(&theirs), "timelines differ");
    assert!(
        theirs.iter().all(|r| r.mask_difference.is_none()),
        "llama.cpp's mask and toolrail's differ"
    );
    for record in &ours[..trigger_at] {
        assert!(
            matches!(record.lazy, Some(LazyNote::Dormant { .. })) && record.allowed == n_vocab,
            "{record:?}"
        );
    }
    match &ours[trigger_at].lazy {
        Some(LazyNote::Fired {
            trigger,
            matched,
            replayed,
            ..
        }) => {
            assert_eq!(trigger, "token 6", "fired by the token");
            assert_eq!(*matched, None, "a token trigger has no text match");
            assert_eq!(replayed, "<tool_call>");
        }
        other => panic!("token {trigger_at} should fire: {other:?}"),
    }
    eprintln!(
        "token trigger: fired at token {trigger_at} of {} in both engines",
        ours.len()
    );
    assert!(ours[trigger_at + 1..].iter().all(|r| r.allowed < n_vocab));
    assert_eq!(our_stop, Stop::EndOfGeneration, "{our_output:?}");
    let parsed = result.parse(&our_output, false).unwrap();
    assert_eq!(parsed.tool_calls.len(), 1, "{parsed:?}");
    let arguments: Value = serde_json::from_str(&parsed.tool_calls[0].arguments).unwrap();
    assert_eq!(arguments, json!({"arg1": 1}));

    // The same text in ordinary pieces (`<`, `tool`, …): llama.cpp no longer looks for the
    // word `<tool_call>`, so neither engine wakes there; both wake later, on the template's other
    // word trigger, the function's opening tag.
    let spelled = model.tokenize(&text, false, false);
    assert!(!spelled.contains(&6));
    assert!(String::from_utf8_lossy(&model.detokenize(&spelled)).contains("<tool_call>"));
    let len = spelled.len() as u32;
    let (ours, _, our_output) = gated_run(&model, &result, EngineKind::Toolrail, &spelled, len);
    let (theirs, _, their_output) = gated_run(&model, &result, EngineKind::Llama, &spelled, len);
    assert_eq!(our_output, their_output);
    assert_eq!(timeline(&ours), timeline(&theirs), "timelines differ");
    let fired_at = ours
        .iter()
        .position(|r| matches!(r.lazy, Some(LazyNote::Fired { .. })))
        .expect("the function tag fires");
    let before: String = ours[..fired_at].iter().map(|r| r.piece.as_str()).collect();
    assert!(
        before.contains("<tool_call>") && before.ends_with("special_function"),
        "{before:?}"
    );
    assert!(ours[..fired_at].iter().all(|r| r.allowed == n_vocab));
    match &ours[fired_at].lazy {
        Some(LazyNote::Fired { trigger, .. }) => {
            assert_eq!(trigger, "<function=special_function>")
        }
        other => panic!("{other:?}"),
    }
    eprintln!("spelled out: fired at token {fired_at} by the function tag in both engines");
}
