//! `bench-calls` on the real test model (issue 4, "Must show": valid-call rate with the grammar
//! 100%): a handful of BFCL questions through the bench's library entry, with the options
//! `toolrail bench-calls` uses by default (greedy, the budget guard on), in the Gemma envelope
//! and prompt the test model's `models.toml` entry names. Every answer under the grammar must be
//! a valid call for the question's tool set, and the free run (no grammar) must be reported for
//! every question too. multiple_10 is the question whose call outgrows 128 tokens: the guard
//! must close it in time, and without the guard it must be cut off unfinished.

use std::path::PathBuf;

use toolrail_engine::MaskEngine;
use toolrail_llm::bench_calls::{CallsOptions, CallsSummary, load_cases, run_case};
use toolrail_tools::envelope::Format;
use toolrail_tools::prompt::PromptFamily;

use crate::common::model;

fn bfcl(file: &str) -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
        .join("../shared/corpus/bfcl")
        .join(file)
}

const DEFAULTS: CallsOptions = CallsOptions {
    format: Format::Gemma,
    family: PromptFamily::Gemma,
    max_tokens: 128,
    threads: Some(1),
    repeat_penalty: 1.0,
    budget_guard: true,
};

#[test]
fn every_answer_under_the_grammar_is_a_valid_call() {
    let Some(model) = model() else { return };
    // The long answer, two held-out questions (51-52) and a question from another BFCL file.
    let mut cases = load_cases(&bfcl("BFCL_v4_multiple.json"), 10, 1).unwrap();
    cases.extend(load_cases(&bfcl("BFCL_v4_multiple.json"), 50, 2).unwrap());
    cases.extend(load_cases(&bfcl("BFCL_v4_simple_python.json"), 0, 1).unwrap());
    assert_eq!(cases.len(), 4, "the BFCL corpus is beside the checkout");
    assert_eq!(cases[0].id, "multiple_10");

    let mut masks = MaskEngine::new(model.shared_token_table());
    let mut results = Vec::new();
    for case in &cases {
        let result = run_case(model, &mut masks, case, DEFAULTS).unwrap();
        println!(
            "{}: with grammar {:?} ({} tokens, guard replaced {}) {:?} | without {:?} ({} tokens)",
            result.id,
            result.with_grammar.tool,
            result.with_grammar.tokens,
            result.with_grammar.budget_replaced,
            result.with_grammar.output,
            result.without_grammar.tool,
            result.without_grammar.tokens
        );
        assert!(
            result.with_grammar.valid,
            "{}: not a valid call under the grammar ({:?}): {:?}",
            result.id, result.with_grammar.end, result.with_grammar.output
        );
        assert!(result.with_grammar.tool.is_some(), "{}", result.id);
        assert!(
            result.with_grammar.tokens <= DEFAULTS.max_tokens,
            "{}",
            result.id
        );
        // The free run happened and was scored by extraction.
        assert!(result.without_grammar.tokens > 0, "{}", result.id);
        assert!(result.without_grammar.end.is_some(), "{}", result.id);
        assert!(
            !result.without_grammar.valid || result.without_grammar.tool.is_some(),
            "{}: a valid free call names its tool",
            result.id
        );
        results.push(result);
    }
    assert!(
        results[0].with_grammar.budget_replaced > 0,
        "multiple_10's call fits in 128 tokens without the guard's help: pick another long one"
    );
    let summary = CallsSummary::of(&results);
    assert_eq!(summary.cases, 4);
    assert_eq!(summary.valid_with_grammar, 4);
    assert!(summary.valid_without_grammar <= summary.cases);
}

#[test]
fn without_the_budget_guard_a_long_call_is_cut_off_unfinished() {
    let Some(model) = model() else { return };
    let cases = load_cases(&bfcl("BFCL_v4_multiple.json"), 10, 1).unwrap();
    let mut masks = MaskEngine::new(model.shared_token_table());
    let options = CallsOptions {
        budget_guard: false,
        ..DEFAULTS
    };
    let result = run_case(model, &mut masks, &cases[0], options).unwrap();
    assert_eq!(result.with_grammar.budget_replaced, 0);
    assert_eq!(result.with_grammar.tokens, DEFAULTS.max_tokens);
    assert!(
        !result.with_grammar.valid,
        "multiple_10 now finishes within 128 tokens unaided: {:?}",
        result.with_grammar.output
    );
}
