//! The generation worker on the real test model (Gemma 3 270M): cancel, force, end of
//! generation only where the grammar is complete, the dead-end diagnostic, and the `toolrail`
//! and `llama` engines agreeing token for token. Fails under CI=true if the model is missing.

use std::sync::Arc;
use std::time::Duration;

use toolrail_engine::check;
use toolrail_gbnf::Grammar;
use toolrail_llm::Model;
use toolrail_llm::record::{Stop, TokenRecord};
use toolrail_llm::worker::{Command, EngineKind, Event, RunRequest, Worker};

/// The shared test model (a cheap handle: workers take their own).
fn model() -> Option<Model> {
    crate::common::model().cloned()
}

use crate::common::run_request as request;

/// The next event; every event is tagged with the run that asked for it.
fn next(worker: &Worker) -> Event {
    let tagged = worker
        .events()
        .recv_timeout(Duration::from_secs(120))
        .expect("an event within 2 minutes");
    assert_eq!(tagged.run, 1, "an event of another run: {:?}", tagged.event);
    tagged.event
}

/// Runs to the end; returns the tokens, the stop and the output.
fn run_to_end(worker: &Worker, req: RunRequest) -> (Vec<TokenRecord>, Stop, String) {
    worker.send(Command::Start(Box::new(req)));
    let mut tokens = Vec::new();
    loop {
        match next(worker) {
            Event::Token(t) => tokens.push(*t),
            Event::Done { stop, output, .. } => return (tokens, stop, output),
            _ => {}
        }
    }
}

#[test]
fn end_of_generation_only_where_the_grammar_is_complete() {
    let Some(model) = model() else { return };
    let grammar = "root ::= \"yes\" | \"no\" | \"maybe, \" [a-z]{1,12} \".\"";
    let worker = Worker::spawn(model, Arc::new(|| {}));
    let (tokens, stop, output) = run_to_end(
        &worker,
        request(
            "Question: is the sky blue? Answer:",
            Some(grammar),
            EngineKind::Toolrail,
            40,
        ),
    );
    assert_eq!(stop, Stop::EndOfGeneration, "output {output:?}");
    let g = Arc::new(Grammar::parse(grammar).unwrap());
    assert!(
        check(&g, output.as_bytes()).is_accepted(),
        "{output:?} is complete when EOG comes"
    );
    // Before the last token, EOG was never allowed: no prefix was complete.
    for (i, _) in tokens
        .iter()
        .enumerate()
        .take(tokens.len().saturating_sub(1))
    {
        let prefix: String = tokens[..=i].iter().map(|t| t.piece.as_str()).collect();
        if !check(&g, prefix.as_bytes()).is_accepted() {
            assert!(
                tokens[i].after.iter().all(|c| !model_is_eog(c.id)),
                "EOG offered after {prefix:?}"
            );
        }
    }
}

fn model_is_eog(id: u32) -> bool {
    model().is_some_and(|m| m.is_eog(id))
}

#[test]
fn cancel_stops_within_one_token() {
    let Some(model) = model() else { return };
    let worker = Worker::spawn(model, Arc::new(|| {}));
    worker.send(Command::Start(Box::new(request(
        "Write a long story:",
        Some("root ::= [a-zA-Z ,.]{1,2000}"),
        EngineKind::Toolrail,
        400,
    ))));
    let mut seen = 0;
    let mut after_cancel = 0;
    let mut cancelled = false;
    let stop = loop {
        match next(&worker) {
            Event::Token(_) => {
                seen += 1;
                if cancelled {
                    after_cancel += 1;
                }
                if seen == 3 && !cancelled {
                    worker.send(Command::Cancel);
                    cancelled = true;
                }
            }
            Event::Done { stop, .. } => break stop,
            _ => {}
        }
    };
    assert_eq!(stop, Stop::Cancelled);
    assert!(after_cancel <= 1, "{after_cancel} tokens after cancel");
}

#[test]
fn forcing_a_masked_token_is_refused_with_a_reason() {
    let Some(model) = model() else { return };
    let eog = model.eog_tokens()[0];
    let yes = model.tokenize("yes", false, false)[0];
    let zzz = model.tokenize("zzz", false, false)[0];
    let worker = Worker::spawn(model, Arc::new(|| {}));
    let mut req = request(
        "Answer:",
        Some("root ::= \"yes\" | \"no\""),
        EngineKind::Toolrail,
        10,
    );
    req.start_paused = true;
    worker.send(Command::Start(Box::new(req)));
    let mut refusals = Vec::new();
    let mut forced_token = None;
    worker.send(Command::Force(eog));
    worker.send(Command::Force(zzz));
    worker.send(Command::Force(yes));
    worker.send(Command::Continue);
    loop {
        match next(&worker) {
            Event::Refused { token, reason } => refusals.push((token, reason)),
            Event::Token(t) if forced_token.is_none() => forced_token = Some(*t),
            Event::Done { .. } => break,
            _ => {}
        }
    }
    assert_eq!(refusals.len(), 2, "{refusals:?}");
    assert!(
        refusals[0].1.contains("end of generation is not allowed"),
        "{refusals:?}"
    );
    assert!(refusals[1].1.contains("does not allow"), "{refusals:?}");
    let first = forced_token.expect("the allowed forced token is taken");
    assert!(first.forced && first.id == yes);
}

#[test]
fn a_continuation_no_token_can_spell_ends_with_the_diagnostic() {
    let Some(model) = model() else { return };
    // llama.cpp decodes 4-byte sequences up to 0x3FFFFF (lead bytes F5-FF included), and byte
    // tokens can spell any of those; 0x400000 no sequence of pieces can.
    let worker = Worker::spawn(model, Arc::new(|| {}));
    let (tokens, stop, _) = run_to_end(
        &worker,
        request(
            "a",
            Some("root ::= \"a\" \"\\U00400000\""),
            EngineKind::Toolrail,
            10,
        ),
    );
    assert_eq!(tokens.len(), 1);
    match stop {
        Stop::DeadEnd { offset, expected } => {
            assert_eq!(offset, 1);
            assert_eq!(expected, vec!["'\\U00400000'"]);
        }
        other => panic!("expected a dead end, got {other:?}"),
    }
}

#[test]
fn toolrail_and_llama_engines_generate_the_same_tokens() {
    let Some(model) = model() else { return };
    let (prompt, grammar) = crate::common::weather_prompt_and_grammar();
    let worker = Worker::spawn(model, Arc::new(|| {}));
    let (ours, stop_ours, out_ours) = run_to_end(
        &worker,
        request(&prompt, Some(&grammar), EngineKind::Toolrail, 80),
    );
    let (theirs, stop_theirs, out_theirs) = run_to_end(
        &worker,
        request(&prompt, Some(&grammar), EngineKind::Llama, 80),
    );
    assert_eq!(out_ours, out_theirs);
    assert_eq!(stop_ours, stop_theirs);
    let ids = |v: &[TokenRecord]| v.iter().map(|t| (t.id, t.allowed)).collect::<Vec<_>>();
    assert_eq!(
        ids(&ours),
        ids(&theirs),
        "same tokens and same allowed counts at every step"
    );
    assert!(
        ours.iter().all(|t| t.stacks.is_some()),
        "every token carries the stacks after it"
    );
}

#[test]
fn the_budget_guard_closes_the_grammar_before_max_tokens() {
    let Some(model) = model() else { return };
    // A number with unbounded fraction digits: the model keeps writing digits of pi.
    let grammar = r#"root ::= "{\"pi\": " [0-9] "." [0-9]+ "}""#;
    let prompt = "The first hundred digits of pi, as JSON:";
    let g = Arc::new(Grammar::parse(grammar).unwrap());
    let worker = Worker::spawn(model, Arc::new(|| {}));
    for engine in [EngineKind::Toolrail, EngineKind::Llama] {
        let (tokens, stop, output) =
            run_to_end(&worker, request(prompt, Some(grammar), engine, 16));
        assert!(
            check(&g, output.as_bytes()).is_accepted(),
            "{engine:?}: unfinished {output:?} ({stop:?})"
        );
        assert!(tokens.len() <= 16);
        let replaced: Vec<&TokenRecord> = tokens
            .iter()
            .filter(|t| t.budget_replaced.is_some())
            .collect();
        assert!(
            !replaced.is_empty(),
            "{engine:?}: the model closed {output:?} unaided: lengthen the digits it is asked for"
        );
        for t in replaced {
            assert_ne!(
                t.budget_replaced,
                Some(t.id),
                "a replacement differs from the choice"
            );
            // It says why: the tokens left and more than that needed after the sampled one.
            let note = t
                .budget
                .as_ref()
                .expect("a replaced token carries its reason");
            assert_eq!(note.tokens_left, 16 - t.index);
            assert!(
                note.needed.is_none_or(|n| n > u64::from(note.tokens_left)),
                "{note:?}"
            );
        }
    }
    // Without the guard the same run is cut off inside the digits.
    let mut req = request(prompt, Some(grammar), EngineKind::Toolrail, 16);
    req.sampling.finish_in_budget = false;
    let (tokens, stop, output) = run_to_end(&worker, req);
    assert_eq!(stop, Stop::MaxTokens, "{output:?}");
    assert!(tokens.iter().all(|t| t.budget_replaced.is_none()));
    assert!(
        !check(&g, output.as_bytes()).is_accepted(),
        "{output:?} finished without the guard"
    );
}

/// Far from the limit the guard never acts: the weather call comes out the same, token for
/// token, whatever max tokens is, down to a few tokens more than the call needs. (It once
/// counted one token per byte of the literal parts, so that at 40 it replaced token 2.)
#[test]
fn the_budget_guard_leaves_a_call_alone_far_from_the_limit() {
    let Some(model) = model() else { return };
    let (prompt, grammar) = crate::common::weather_prompt_and_grammar();
    let worker = Worker::spawn(model, Arc::new(|| {}));
    let (free, stop, output) = run_to_end(
        &worker,
        request(&prompt, Some(&grammar), EngineKind::Toolrail, 256),
    );
    assert_eq!(stop, Stop::EndOfGeneration, "{output:?}");
    let needed = free.len() as u32;
    let ids: Vec<u32> = free.iter().map(|t| t.id).collect();
    for max_tokens in [needed + 4, 32.max(needed + 4), 40, 60, 128] {
        let (tokens, stop, limited) = run_to_end(
            &worker,
            request(&prompt, Some(&grammar), EngineKind::Toolrail, max_tokens),
        );
        let replaced: Vec<(u32, Option<String>)> = tokens
            .iter()
            .filter(|t| t.budget_replaced.is_some())
            .map(|t| (t.index, t.budget.as_ref().map(|n| n.describe())))
            .collect();
        assert!(
            replaced.is_empty(),
            "max tokens {max_tokens} (the call takes {needed}): the guard acted at {replaced:?}"
        );
        assert_eq!(stop, Stop::EndOfGeneration, "max tokens {max_tokens}");
        assert_eq!(
            tokens.iter().map(|t| t.id).collect::<Vec<_>>(),
            ids,
            "max tokens {max_tokens}: {limited:?} vs {output:?}"
        );
    }
}

#[test]
fn the_repetition_penalty_breaks_a_loop() {
    let Some(model) = model() else { return };
    let grammar = "root ::= [a-z ]{1,200}";
    let prompt = "Say it forty times: la la la la la la la la la la";
    let worker = Worker::spawn(model, Arc::new(|| {}));
    let repeats = |tokens: &[TokenRecord]| {
        let ids: Vec<u32> = tokens.iter().map(|t| t.id).collect();
        ids.iter()
            .enumerate()
            .filter(|&(i, id)| ids[..i].contains(id))
            .count()
    };
    let (plain, _, plain_text) = run_to_end(
        &worker,
        request(prompt, Some(grammar), EngineKind::Toolrail, 24),
    );
    let mut req = request(prompt, Some(grammar), EngineKind::Toolrail, 24);
    req.sampling.repeat_penalty = 3.0;
    let (penalized, _, penalized_text) = run_to_end(&worker, req);
    assert!(
        repeats(&penalized) < repeats(&plain),
        "penalty 3: {penalized_text:?}; none: {plain_text:?}"
    );
}
