//! llama-server's reasoning budget in template runs, real test model: Qwen 3.5's template with
//! thinking on opens `<think>` in the generation prompt, so the budget counts from the first
//! generated token; after N tokens the end tag is forced token by token (every other token
//! masked), and the lazy tool-call grammar, kept out of the thinking block, sleeps until after
//! it. Both engines (toolrail's gate and recognizer, llama.cpp's lazy grammar sampler) run behind
//! the same budget and must take the same tokens with the same allowed counts and notes.

use serde_json::json;
use toolrail_llm::record::{LazyNote, ThinkingNote, TokenRecord};
use toolrail_llm::template::{ChatTemplates, TemplateResult};
use toolrail_llm::worker::EngineKind;

use crate::common::{model, model_path};
use crate::gguf_templates::{gated_run_with, timeline};
use crate::lazy_masks::{request, template_text};

fn thinking_result(name: &str) -> Option<TemplateResult> {
    let path = model_path()?;
    let source = template_text(name)?;
    let templates = ChatTemplates::from_gguf(&path, Some(&source)).unwrap();
    let mut req = request();
    req.enable_thinking = toolrail_llm::template::ServerSwitch::On;
    let result = templates.apply(&req).unwrap();
    assert!(result.grammar_lazy);
    assert!(
        result.generation_prompt.ends_with("<think>\n"),
        "{:?}",
        result.generation_prompt
    );
    Some(result)
}

fn thinking_notes(records: &[TokenRecord]) -> Vec<Option<ThinkingNote>> {
    records.iter().map(|r| r.thinking.clone()).collect()
}

#[test]
fn a_reasoning_budget_forces_the_end_of_thinking_after_n_tokens_in_both_engines() {
    // QwQ: thinking opened by the prompt, closed only by `</think>`.
    let Some(result) = thinking_result("Qwen-QwQ-32B") else {
        return;
    };
    let model = model().expect("model present");
    let n_vocab = model.n_vocab() as u32;
    let budget = 6;
    let setup = result
        .reasoning_setup(model, Some(budget), "")
        .expect("thinking tags give a budget");
    assert_eq!(setup.forced, model.tokenize("</think>", false, true));
    let mut gate = result.gate_setup().unwrap();
    gate.reasoning = result.reasoning_spec(Some(budget), "");
    let forced_len = setup.forced.len();
    let max_tokens = budget + forced_len as u32 + 3;
    // A few tokens of thought forced (fewer than the budget), then greedy.
    let start = model.tokenize("Hmm, the user", false, true);
    assert!(start.len() < budget as usize);
    let (ours, our_stop, our_output) = gated_run_with(
        model,
        &result,
        &gate,
        EngineKind::Toolrail,
        &start,
        max_tokens,
    );
    let (theirs, their_stop, their_output) =
        gated_run_with(model, &result, &gate, EngineKind::Llama, &start, max_tokens);
    for r in &ours {
        eprintln!(
            "{} {:?} allowed {} {:?} {:?}",
            r.index, r.piece, r.allowed, r.thinking, r.lazy
        );
    }
    assert_eq!(
        our_output, their_output,
        "the engines took different tokens"
    );
    assert_eq!(our_stop, their_stop);
    assert_eq!(timeline(&ours), timeline(&theirs));
    assert_eq!(thinking_notes(&ours), thinking_notes(&theirs));

    // The prompt opened thinking, and its tokens after `<think>` (the newline) count already,
    // as llama.cpp feeds the generation prompt to the budget.
    let start_tag_end = setup
        .prefill
        .windows(setup.start.len())
        .rposition(|w| w == setup.start.as_slice())
        .expect("the prompt opens thinking")
        + setup.start.len();
    let in_prompt = (setup.prefill.len() - start_tag_end) as u32;
    assert_eq!(in_prompt, 1, "the newline after <think>");
    let spent = ours
        .iter()
        .position(|r| r.thinking == Some(ThinkingNote::Exhausted))
        .expect("the budget ran out");
    assert_eq!(
        spent as u32,
        budget - in_prompt - 1,
        "the budget's last token"
    );
    for (i, r) in ours[..spent].iter().enumerate() {
        assert_eq!(
            r.thinking,
            Some(ThinkingNote::Thinking {
                left: Some(budget - in_prompt - 1 - i as u32)
            })
        );
        assert_eq!(r.allowed, n_vocab, "nothing masked while thinking");
        assert!(r.lazy.is_none(), "the lazy grammar does not see thinking");
    }
    // Then the end tag, forced token by token, one token allowed each.
    let forced = &ours[spent + 1..spent + 1 + forced_len];
    assert_eq!(
        forced.iter().map(|r| r.id).collect::<Vec<_>>(),
        setup.forced
    );
    assert!(forced.iter().all(|r| r.allowed == 1));
    assert_eq!(
        forced.last().unwrap().thinking,
        Some(ThinkingNote::Ended { by_budget: true })
    );
    // The forced end tag is replayed into the lazy grammar as it completes.
    assert!(matches!(
        forced.last().unwrap().lazy,
        Some(LazyNote::Dormant { .. })
    ));
    // After thinking the lazy grammar sees the tokens: dormant (or woken by a trigger).
    let after = &ours[spent + 1 + forced_len..];
    assert!(!after.is_empty());
    assert!(after[0].thinking.is_none());
    assert!(
        matches!(
            after[0].lazy,
            Some(LazyNote::Dormant { .. } | LazyNote::Fired { .. })
        ),
        "the grammar sees the first token after thinking: {:?}",
        after[0]
    );
    let thought: String = ours[..spent + 1].iter().map(|r| r.piece.as_str()).collect();
    assert!(our_output.starts_with(&format!("{thought}</think>")));
    eprintln!(
        "budget {budget}: thinking forced to end at token {} of {}",
        spent + 1,
        ours.len()
    );
    let parsed = result.parse(&our_output, false).unwrap();
    assert_eq!(parsed.reasoning_content.trim(), thought.trim());
}

#[test]
fn a_trigger_inside_thinking_does_not_wake_the_lazy_grammar() {
    // QwQ: thinking opened by the prompt, closed by `</think>`; the trigger `<tool_call>\n`.
    let Some(path) = model_path() else { return };
    let Some(source) = template_text("Qwen-QwQ-32B") else {
        return;
    };
    let model = model().expect("model present");
    let templates = ChatTemplates::from_gguf(&path, Some(&source)).unwrap();
    // QwQ writes calls as Hermes does (JSON between the tags).
    let call =
        "<tool_call>\n{\"name\": \"special_function\", \"arguments\": {\"arg1\": 1}}\n</tool_call>";
    let mut req = request();
    req.enable_thinking = toolrail_llm::template::ServerSwitch::On;
    let result = templates.apply(&req).unwrap();
    assert!(result.grammar_lazy && result.generation_prompt.ends_with("<think>\n"));
    // No budget: llama-server still builds the machine, for the lazy grammar.
    let setup = result
        .reasoning_setup(model, None, "")
        .expect("a lazy grammar gives the machine");
    let mut gate = result.gate_setup().unwrap();
    gate.reasoning = result.reasoning_spec(None, "");
    assert_eq!(
        gate.reasoning.as_ref().and_then(|spec| spec.resolve(model)),
        Some(setup)
    );
    let text = format!("I could write <tool_call>\n here.\n</think>\n\n{call}");
    let forced = model.tokenize(&text, false, true);
    let len = forced.len() as u32;
    let (ours, _, our_output) =
        gated_run_with(model, &result, &gate, EngineKind::Toolrail, &forced, len);
    let (theirs, _, their_output) =
        gated_run_with(model, &result, &gate, EngineKind::Llama, &forced, len);
    assert_eq!(our_output, their_output);
    assert_eq!(timeline(&ours), timeline(&theirs));
    assert_eq!(thinking_notes(&ours), thinking_notes(&theirs));
    let ended = ours
        .iter()
        .position(|r| r.thinking == Some(ThinkingNote::Ended { by_budget: false }))
        .expect("thinking ended");
    let thought: String = ours[..=ended].iter().map(|r| r.piece.as_str()).collect();
    assert!(thought.ends_with("here.\n</think>"), "{thought:?}");
    // The grammar saw nothing of thinking; the end tag is replayed into it when it completes.
    assert!(ours[..ended].iter().all(|r| r.lazy.is_none()));
    assert!(matches!(ours[ended].lazy, Some(LazyNote::Dormant { .. })));
    let fired = ours
        .iter()
        .position(|r| matches!(r.lazy, Some(LazyNote::Fired { .. })))
        .expect("the trigger after thinking fires");
    assert!(fired > ended);
    match &ours[fired].lazy {
        Some(LazyNote::Fired { grammar_start, .. }) => {
            let start = our_output.rfind("<tool_call>").unwrap() as u64;
            assert_eq!(*grammar_start, start, "output bytes, thinking included");
        }
        other => panic!("{other:?}"),
    }
    let parsed = result.parse(&our_output, false).unwrap();
    assert_eq!(parsed.tool_calls.len(), 1, "{parsed:?}");
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&parsed.tool_calls[0].arguments).unwrap(),
        json!({"arg1": 1})
    );
}

#[test]
fn an_end_tag_that_is_the_trigger_closes_thinking_and_wakes_the_grammar_when_replayed() {
    // Qwen 3.5: `<tool_call>` is both a thinking end tag and the trigger. The grammar does not
    // see the tag's tokens as they come (thinking is still counted); when the tag completes,
    // llama.cpp replays it into the grammar, which wakes on it.
    let Some(result) = thinking_result("Qwen3.5-4B") else {
        return;
    };
    let model = model().expect("model present");
    let gate = result.gate_setup_with_budget(None, "").unwrap();
    assert!(gate.reasoning.is_some(), "a lazy grammar gives the machine");
    let text = "Let me call it.\n<tool_call>\n<function=special_function>\n<parameter=arg1>\n1\n</parameter>\n</function>\n</tool_call>";
    let forced = model.tokenize(text, false, true);
    let len = forced.len() as u32;
    let (ours, _, our_output) =
        gated_run_with(model, &result, &gate, EngineKind::Toolrail, &forced, len);
    let (theirs, _, their_output) =
        gated_run_with(model, &result, &gate, EngineKind::Llama, &forced, len);
    assert_eq!(our_output, their_output);
    assert_eq!(timeline(&ours), timeline(&theirs));
    assert_eq!(thinking_notes(&ours), thinking_notes(&theirs));
    let ended = ours
        .iter()
        .position(|r| r.thinking == Some(ThinkingNote::Ended { by_budget: false }))
        .expect("thinking ended on the tag");
    match &ours[ended].lazy {
        Some(LazyNote::Fired {
            grammar_start,
            replayed,
            ..
        }) => {
            let start = our_output.find("<tool_call>").unwrap() as u64;
            assert_eq!(*grammar_start, start);
            assert!(replayed.starts_with("<tool_call>"), "{replayed:?}");
        }
        other => panic!("the replayed end tag should fire the trigger: {other:?}"),
    }
    assert!(ours[..ended].iter().all(|r| r.lazy.is_none()));
    assert!(
        ours[ended + 1..]
            .iter()
            .all(|r| r.allowed < model.n_vocab() as u32)
    );
    let parsed = result.parse(&our_output, false).unwrap();
    assert_eq!(parsed.tool_calls.len(), 1, "{parsed:?}");
}
