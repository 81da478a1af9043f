//! `bench-calls` on the real test model (issue 4, "Must show": valid-call rate with the grammar
//! 100%): a handful of BFCL questions through the bench's library entry, in the Gemma envelope
//! and prompt the test model's `models.toml` entry names, with the repetition penalty the README
//! reports. Every answer under the grammar must be a valid call for the question's tool set,
//! and the free run (no grammar) must be reported for every question too.

use std::path::PathBuf;

use toolrail::engine::MaskEngine;
use toolrail::llm::bench_calls::{CallsOptions, CallsSummary, load_cases, run_case};
use toolrail::tools::envelope::Format;
use toolrail::tools::prompt::PromptFamily;

mod common;
use common::model;

fn bfcl(file: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../shared/corpus/bfcl")
        .join(file)
}

#[test]
fn every_answer_under_the_grammar_is_a_valid_call() {
    let Some(model) = model() else { return };
    // Questions outside the 50 the repetition penalty was chosen on, from two BFCL files.
    let mut cases = load_cases(&bfcl("BFCL_v4_multiple.json"), 50, 3).unwrap();
    cases.extend(load_cases(&bfcl("BFCL_v4_simple_python.json"), 0, 1).unwrap());
    assert_eq!(cases.len(), 4, "the BFCL corpus is beside the checkout");

    let mut masks = MaskEngine::new(model.shared_token_table());
    let options = CallsOptions {
        format: Format::Gemma,
        family: PromptFamily::Gemma,
        max_tokens: 128,
        threads: Some(1),
        repeat_penalty: 1.3,
    };
    let mut results = Vec::new();
    for case in &cases {
        let result = run_case(model, &mut masks, case, options).unwrap();
        println!(
            "{}: with grammar {:?} {:?} | without {:?} ({} tokens)",
            result.id,
            result.with_grammar.tool,
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
    let summary = CallsSummary::of(&results);
    assert_eq!(summary.cases, 4);
    assert_eq!(summary.valid_with_grammar, 4);
    assert!(summary.valid_without_grammar <= summary.cases);
}
