//! `bench-calls` on the real test model (issue 4, "Must show": valid-call rate with the grammar
//! 100%): a handful of BFCL questions through the bench's library entry, with the options
//! `toolrail bench-calls` uses by default (greedy, the budget guard on), in the Gemma envelope
//! and prompt the test model's `models.toml` entry names. Every answer under the grammar must be
//! a valid call for the question's tool set, and the free run (no grammar) must be reported for
//! every question too. multiple_10 is the question whose call outgrows 128 tokens: the guard
//! must close it in time, and without the guard it must be cut off unfinished.

use std::path::PathBuf;

use toolrail_engine::MaskEngine;
use toolrail_llm::bench_calls::{BenchMode, CallsOptions, CallsSummary, load_cases, run_case};
use toolrail_tools::envelope::Format;
use toolrail_tools::prompt::PromptFamily;

use crate::common::model;

/// `../shared/corpus/bfcl/<file>`; missing: a failure under `CI=true`, otherwise None (a skip).
fn bfcl(file: &str) -> Option<PathBuf> {
    toolrail_testkit::corpus(&format!("bfcl/{file}"))
}

const DEFAULTS: CallsOptions = CallsOptions {
    format: Format::Gemma,
    family: PromptFamily::Gemma,
    max_tokens: 128,
    threads: Some(1),
    repeat_penalty: 1.0,
    budget_guard: true,
    mode: BenchMode::Both,
    max_blocked: 3,
    few_shot: false,
};

#[test]
fn every_answer_under_the_grammar_is_a_valid_call() {
    let Some(model) = model() else { return };
    // The long answer, two held-out questions (51-52) and a question from another BFCL file.
    let (Some(multiple), Some(simple_python)) = (
        bfcl("BFCL_v4_multiple.json"),
        bfcl("BFCL_v4_simple_python.json"),
    ) else {
        return;
    };
    let mut cases = load_cases(&multiple, 10, 1).unwrap();
    cases.extend(load_cases(&multiple, 50, 2).unwrap());
    cases.extend(load_cases(&simple_python, 0, 1).unwrap());
    assert_eq!(cases.len(), 4, "the BFCL corpus is beside the checkout");
    assert_eq!(cases[0].id, "multiple_10");

    let mut masks = MaskEngine::new(model.shared_token_table());
    let mut results = Vec::new();
    for case in &cases {
        let result = run_case(model, &mut masks, case, DEFAULTS).unwrap();
        let grammar = result.grammar.as_ref().expect("both modes ran");
        let retry = result.retry.as_ref().expect("both modes ran");
        let first = &grammar.attempts[0];
        println!(
            "{}: with grammar {:?} ({} tokens, guard replaced {}) {:?} | retries {:?} ({} attempts, {} tokens)",
            result.id,
            grammar.tool,
            grammar.tokens,
            first.budget_replaced,
            first.output,
            retry.tool,
            retry.attempts.len(),
            retry.tokens
        );
        assert!(
            grammar.valid,
            "{}: not a valid call under the grammar ({:?}): {:?}",
            result.id, first.end, first.output
        );
        assert_eq!(grammar.attempts.len(), 1, "{}", result.id);
        assert!(grammar.tool.is_some(), "{}", result.id);
        assert!(grammar.tokens <= DEFAULTS.max_tokens, "{}", result.id);
        assert!(grammar.wall_ms > 0.0, "{}", result.id);
        // The free runs happened and were scored by extraction; a blocked call was answered
        // with the validator's feedback, up to the limit.
        assert!(retry.tokens > 0, "{}", result.id);
        assert!(
            (1..=DEFAULTS.max_blocked as usize).contains(&retry.attempts.len()),
            "{}",
            result.id
        );
        for (i, attempt) in retry.attempts.iter().enumerate() {
            assert!(attempt.end.is_some(), "{}", result.id);
            let last = i + 1 == retry.attempts.len();
            assert_eq!(attempt.feedback.is_some(), !attempt.valid, "{}", result.id);
            assert!(
                !attempt.valid || last,
                "{}: retried after a valid call",
                result.id
            );
        }
        if !retry.valid {
            assert_eq!(
                retry.attempts.len(),
                DEFAULTS.max_blocked as usize,
                "{}: stopped before the blocked-call limit",
                result.id
            );
        }
        assert!(
            !retry.valid || retry.tool.is_some(),
            "{}: a valid free call names its tool",
            result.id
        );
        results.push(result);
    }
    let first = &results[0].grammar.as_ref().unwrap().attempts[0];
    assert!(
        first.budget_replaced > 0,
        "multiple_10's call fits in 128 tokens without the guard's help: pick another long one"
    );
    let summary = CallsSummary::of(&results);
    assert_eq!(summary.cases, 4);
    let grammar = summary.grammar.unwrap();
    assert_eq!(grammar.valid, 4);
    assert_eq!(grammar.attempts, 4);
    let retry = summary.retry.unwrap();
    assert!(retry.valid <= retry.cases && retry.attempts >= retry.cases);
}

#[test]
fn retry_mode_sends_the_feedback_back_and_stops_at_the_limit() {
    let Some(model) = model() else { return };
    let Some(multiple) = bfcl("BFCL_v4_multiple.json") else {
        return;
    };
    let cases = load_cases(&multiple, 0, 2).unwrap();
    let mut masks = MaskEngine::new(model.shared_token_table());
    let options = CallsOptions {
        mode: BenchMode::Retry,
        max_blocked: 2,
        few_shot: true,
        max_tokens: 48,
        ..DEFAULTS
    };
    for case in &cases {
        let result = run_case(model, &mut masks, case, options).unwrap();
        assert!(result.grammar.is_none(), "retry mode runs no grammar");
        let retry = result.retry.unwrap();
        println!("{}: {:?}", result.id, retry.attempts);
        assert!((1..=2).contains(&retry.attempts.len()));
        if !retry.valid {
            assert_eq!(retry.attempts.len(), 2, "{}: the limit is 2", result.id);
            let feedback = retry.attempts[0].feedback.as_deref().unwrap();
            assert!(feedback.starts_with("error: "), "{feedback}");
        }
    }
}

#[test]
fn without_the_budget_guard_a_long_call_is_cut_off_unfinished() {
    let Some(model) = model() else { return };
    let Some(multiple) = bfcl("BFCL_v4_multiple.json") else {
        return;
    };
    let cases = load_cases(&multiple, 10, 1).unwrap();
    let mut masks = MaskEngine::new(model.shared_token_table());
    let options = CallsOptions {
        budget_guard: false,
        mode: BenchMode::Grammar,
        ..DEFAULTS
    };
    let result = run_case(model, &mut masks, &cases[0], options).unwrap();
    let grammar = result.grammar.unwrap();
    assert_eq!(grammar.attempts[0].budget_replaced, 0);
    assert_eq!(grammar.tokens, DEFAULTS.max_tokens);
    assert!(
        !grammar.valid,
        "multiple_10 now finishes within 128 tokens unaided: {:?}",
        grammar.attempts[0].output
    );
}

#[cfg(unix)]
#[test]
fn a_fifo_given_as_the_cases_file_is_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("cases.json");
    if !std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .is_ok_and(|s| s.success())
    {
        return;
    }
    // Opening a FIFO with no writer would block for ever: the type is checked first.
    let err = load_cases(&fifo, 0, 10).unwrap_err().to_string();
    assert!(
        err.contains(&format!(
            "cannot read {}: it is a FIFO (named pipe), not a regular file",
            fifo.display()
        )),
        "{err}"
    );
}
