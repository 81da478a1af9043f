//! Conversations on the real test model (Gemma 3 270M, Gemma envelope): two tool calls with a
//! typed tool result in between, exported and replayed; an invalid call forced at step 1 gets
//! the validator's feedback and a retry; the blocked-call counter stops at its limit.

use serde_json::{Value, json};
use toolrail_engine::MaskEngine;
use toolrail_llm::bench_calls::{Answer, CallsOptions, local_answer};
use toolrail_tools::toolset::ToolSet;
use toolrail_workbench::conversation::{
    CallMode, Conversation, ConversationSettings, Next, Turn, to_markdown,
};

use crate::common::model;

fn weather_document() -> Value {
    json!([{"type": "function", "function": {"name": "get_weather",
        "description": "Current weather for a city.",
        "parameters": {"type": "object", "properties": {
            "city": {"type": "string", "description": "City name, e.g. Paris."},
            "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
            "required": ["city"]},
        "x-toolrail-result": {"temperature": 18, "sky": "cloudy"}}}])
}

fn conversation(settings: ConversationSettings) -> Conversation {
    let document = weather_document();
    let tools = ToolSet::from_value(&document).unwrap();
    // The canned result is a known key: a note naming it, not an unknown-key warning.
    assert!(
        tools
            .warnings()
            .iter()
            .all(|w| w.key.as_deref() == Some("x-toolrail-result") && w.kind.id() == "ignored-key"),
        "{:?}",
        tools.warnings()
    );
    Conversation::new(tools, Some(&document), settings)
}

fn options(max_tokens: u32, budget_guard: bool) -> CallsOptions {
    CallsOptions {
        max_tokens,
        threads: Some(2),
        budget_guard,
        ..CallsOptions::default()
    }
}

fn assistant_turns(c: &Conversation) -> Vec<&toolrail_workbench::conversation::AssistantTurn> {
    c.turns()
        .iter()
        .filter_map(|t| match t {
            Turn::Assistant(a) => Some(a),
            _ => None,
        })
        .collect()
}

#[test]
fn two_calls_with_a_typed_result_between_run_export_and_replay() {
    let Some(model) = model() else { return };
    let mut masks = MaskEngine::new(model.shared_token_table());
    let opts = options(64, true);
    let mut answer = |prompt: &str, grammar: Option<&str>| {
        local_answer(model, &mut masks, prompt, grammar, &opts)
    };
    let mut c = conversation(ConversationSettings::default());
    c.user("What is the weather in Paris?").unwrap();
    c.run_model(&mut answer).unwrap();
    let Next::ToolResult { tool } = c.next() else {
        panic!("no valid first call: {:#?}", c.turns())
    };
    assert_eq!(tool, "get_weather");
    assert_eq!(
        c.canned_results("get_weather"),
        [r#"{"temperature":18,"sky":"cloudy"}"#]
    );
    c.tool_result("18 degrees and cloudy in Paris.").unwrap();
    c.run_model(&mut answer).unwrap();
    assert!(
        matches!(c.next(), Next::ToolResult { .. }),
        "no valid second call: {:#?}",
        c.turns()
    );
    let calls = assistant_turns(&c);
    assert!(calls.len() >= 2, "{calls:#?}");
    assert!(calls.iter().all(|a| a.tokens > 0 && !a.forced));
    assert!(calls.last().unwrap().valid);
    // The second answer was asked with the whole conversation: the first call and the typed
    // result in a tool turn.
    let steps = c.replay().unwrap();
    assert_eq!(steps.len(), calls.len());
    let last = steps.last().unwrap();
    assert!(
        last.prompt
            .contains("18 degrees and cloudy in Paris.<end_of_turn>\n<start_of_turn>model\n"),
        "{}",
        last.prompt
    );
    assert!(last.prompt.contains(&calls[0].output));
    for step in &steps {
        assert!(step.grammar_matches, "turn {}", step.turn);
        assert_eq!(step.output_in_grammar, Some(true), "turn {}", step.turn);
        assert!(step.same_verdict, "turn {}", step.turn);
    }

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("conversation.json");
    c.save(&path).unwrap();
    let back = Conversation::load(&path).unwrap();
    assert_eq!(back.turns(), c.turns());
    assert_eq!(
        back.replay().unwrap(),
        steps,
        "the reopened file replays the same"
    );
    let markdown = to_markdown(&back);
    println!("{markdown}");
    let user = markdown.find("## User").unwrap();
    let first = markdown.find("## Assistant (attempt 1)").unwrap();
    let result = markdown.find("## Tool `get_weather` (result)").unwrap();
    assert!(user < first && first < result, "{markdown}");
    assert!(
        markdown.contains("valid call of `get_weather`"),
        "{markdown}"
    );
    assert!(markdown.contains("this turn's grammar"), "{markdown}");
}

#[test]
fn an_invalid_call_forced_at_step_one_gets_feedback_and_a_retry() {
    let Some(model) = model() else { return };
    let mut masks = MaskEngine::new(model.shared_token_table());
    let opts = options(64, true);
    let mut c = conversation(ConversationSettings::default());
    c.user("What is the weather in Paris?").unwrap();
    c.accept(
        Answer {
            output: r#"call:get_weather{"city": "Paris", "unit": "kelvin"}"#.into(),
            tokens: 0,
            end: None,
            budget_replaced: 0,
        },
        true,
    )
    .unwrap();
    let Some(Turn::Tool {
        content,
        tool: None,
    }) = c.turns().last()
    else {
        panic!("{:#?}", c.turns())
    };
    assert!(content.contains("(at /unit)"), "{content}");
    c.run_model(&mut |prompt, grammar| local_answer(model, &mut masks, prompt, grammar, &opts))
        .unwrap();
    let calls = assistant_turns(&c);
    assert!(calls[0].forced && !calls[0].valid);
    assert_eq!(calls[0].blocked, 1);
    assert!(!calls[1].forced && calls[1].tokens > 0);
    let steps = c.replay().unwrap();
    assert!(
        steps[1].prompt.contains("(at /unit)"),
        "the retry was asked with the feedback: {}",
        steps[1].prompt
    );
    assert_eq!(
        steps[0].output_in_grammar,
        Some(false),
        "kelvin is outside the grammar"
    );
}

#[test]
fn the_blocked_counter_stops_at_the_limit() {
    let Some(model) = model() else { return };
    let mut masks = MaskEngine::new(model.shared_token_table());
    // Three tokens cannot hold a call, and without the budget guard the call is cut off: every
    // answer is blocked.
    let opts = options(3, false);
    let settings = ConversationSettings {
        max_blocked: 2,
        ..ConversationSettings::default()
    };
    let mut c = conversation(settings);
    c.user("What is the weather in Paris?").unwrap();
    c.run_model(&mut |prompt, grammar| local_answer(model, &mut masks, prompt, grammar, &opts))
        .unwrap();
    let calls = assistant_turns(&c);
    assert_eq!(calls.len(), 2, "{:#?}", c.turns());
    assert_eq!(calls[1].blocked, 2);
    assert!(c.stopped_at_limit());
    assert_eq!(c.next(), Next::User);
    // One feedback turn went back (after the first); the second blocked call stopped the loop.
    let feedback = c
        .turns()
        .iter()
        .filter(|t| matches!(t, Turn::Tool { tool: None, .. }))
        .count();
    assert_eq!(feedback, 1);
    assert!(to_markdown(&c).contains("stopped: 2 blocked calls in a row"));
}

#[test]
fn prompt_only_runs_the_same_loop_on_free_text() {
    let Some(model) = model() else { return };
    let mut masks = MaskEngine::new(model.shared_token_table());
    let opts = options(48, false);
    let settings = ConversationSettings {
        mode: CallMode::PromptOnly,
        few_shot: true,
        ..ConversationSettings::default()
    };
    let mut c = conversation(settings);
    c.user("What is the weather in Paris?").unwrap();
    c.run_model(&mut |prompt, grammar| {
        assert!(grammar.is_none(), "prompt only sends no grammar");
        local_answer(model, &mut masks, prompt, grammar, &opts)
    })
    .unwrap();
    let calls = assistant_turns(&c);
    assert!((1..=3).contains(&calls.len()));
    assert!(calls.iter().all(|a| a.grammar.is_none() && a.tokens > 0));
    match c.next() {
        Next::ToolResult { tool } => assert_eq!(tool, "get_weather"),
        Next::User => assert!(c.stopped_at_limit() && calls.len() == 3),
        Next::Model => panic!("the loop ended waiting for the model"),
    }
}
