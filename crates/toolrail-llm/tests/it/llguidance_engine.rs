//! llguidance as the generation worker's third engine on the real test model: on the weather
//! sample it reads the same GBNF and its masks are compared with toolrail's over the whole
//! vocabulary at every step; a deliberately different grammar (llguidance compiling a JSON
//! Schema itself) shows the differences token by token.

use std::sync::Arc;
use std::time::Duration;

use toolrail_llm::record::{Stop, TokenRecord, Totals};
use toolrail_llm::worker::{Command, EngineKind, Event, RunRequest, Worker};

use crate::common::run_request as request;

/// Runs to the end; returns the tokens, the stop, the totals and the output.
fn run_to_end(worker: &Worker, req: RunRequest) -> (Vec<TokenRecord>, Stop, Totals, String) {
    worker.send(Command::Start(Box::new(req)));
    let mut tokens = Vec::new();
    loop {
        let tagged = worker
            .events()
            .recv_timeout(Duration::from_secs(300))
            .expect("an event within 5 minutes");
        match tagged.event {
            Event::Token(t) => tokens.push(*t),
            Event::Done {
                stop,
                totals,
                output,
            } => return (tokens, stop, totals, output),
            _ => {}
        }
    }
}

/// llama.cpp reads a byte 0xF5–0xFF as the first of a 4-byte UTF-8 sequence (its decoder
/// looks at the top four bits only), so inside a string it allows the byte tokens that start
/// with one; llguidance follows strict UTF-8 and never allows them. The one known difference.
fn is_lenient_utf8_lead(piece: &[u8]) -> bool {
    piece.first().is_some_and(|&b| b >= 0xF5)
}

#[test]
fn llguidance_on_the_weather_sample_agrees_with_toolrail_but_for_invalid_utf8_leads() {
    let Some(model) = crate::common::model().cloned() else {
        return;
    };
    let pieces = model.clone();
    let (prompt, grammar) = crate::common::weather_prompt_and_grammar();
    let worker = Worker::spawn(model, Arc::new(|| {}));
    let (ours, _, _, out_ours) = run_to_end(
        &worker,
        request(&prompt, Some(&grammar), EngineKind::Toolrail, 80),
    );
    let (theirs, stop, totals, out_theirs) = run_to_end(
        &worker,
        request(&prompt, Some(&grammar), EngineKind::Llguidance, 80),
    );
    assert_eq!(stop, Stop::EndOfGeneration, "{out_theirs}");
    assert_eq!(
        out_ours, out_theirs,
        "the same greedy call under both engines"
    );
    assert_eq!(
        totals.compared_steps as usize,
        theirs.len(),
        "every step compared over the whole vocabulary"
    );
    let mut differing = 0;
    for t in &theirs {
        let Some(d) = &t.mask_difference else {
            continue;
        };
        differing += 1;
        assert_eq!(d.engine, EngineKind::Llguidance);
        assert_eq!(
            d.only_engine,
            0,
            "step {}: llguidance allows what toolrail forbids: {}",
            t.index,
            d.describe()
        );
        assert!(d.only_toolrail <= 11, "step {}: {}", t.index, d.describe());
        for token in &d.tokens {
            assert!(
                is_lenient_utf8_lead(&pieces.piece(token.id)),
                "step {}: token {} differs and is not an invalid UTF-8 lead byte: {}",
                t.index,
                token.id,
                d.describe()
            );
        }
    }
    assert_eq!(differing, totals.differing_steps);
    // the toolrail run's allowed counts are llguidance's plus the lenient lead bytes
    for (a, b) in ours.iter().zip(&theirs) {
        let extra = b.mask_difference.as_ref().map_or(0, |d| d.only_toolrail);
        assert_eq!(a.allowed, b.allowed + extra, "step {}", a.index);
    }
    eprintln!(
        "weather under llguidance: {} steps compared, {} differ (invalid UTF-8 lead bytes only)",
        totals.compared_steps, totals.differing_steps
    );
}

#[test]
fn the_llama_engine_is_compared_with_toolrail_at_every_step_and_agrees() {
    let Some(model) = crate::common::model().cloned() else {
        return;
    };
    let (prompt, grammar) = crate::common::weather_prompt_and_grammar();
    let worker = Worker::spawn(model, Arc::new(|| {}));
    let (tokens, _, totals, _) = run_to_end(
        &worker,
        request(&prompt, Some(&grammar), EngineKind::Llama, 80),
    );
    assert_eq!(totals.compared_steps as usize, tokens.len());
    assert_eq!(
        totals.differing_steps,
        0,
        "{:?}",
        tokens
            .iter()
            .filter_map(|t| t.mask_difference.as_ref().map(|d| d.describe()))
            .collect::<Vec<_>>()
    );
}

#[test]
fn a_deliberately_different_grammar_shows_the_differences_token_by_token() {
    let Some(model) = crate::common::model().cloned() else {
        return;
    };
    // toolrail follows a grammar of non-negative integers with no spaces; llguidance compiles
    // a schema of any integer: it allows a minus sign where toolrail's grammar does not.
    let grammar = r#"root ::= "{\"a\":" [1-9] [0-9]{0,3} "}""#;
    let schema = serde_json::json!({
        "type": "object",
        "properties": {"a": {"type": "integer"}},
        "required": ["a"],
        "additionalProperties": false
    });
    let worker = Worker::spawn(model, Arc::new(|| {}));
    let mut req = request(
        "Write a JSON object with a number a: ",
        Some(grammar),
        EngineKind::Llguidance,
        12,
    );
    req.schema = Some(schema);
    let (tokens, _, totals, output) = run_to_end(&worker, req);
    assert!(totals.compared_steps > 0, "{output}");
    assert!(totals.differing_steps > 0, "{output}");
    let first = tokens
        .iter()
        .filter_map(|t| t.mask_difference.as_ref())
        .find(|d| d.only_engine > 0)
        .expect("a step where llguidance allows what toolrail forbids");
    assert!(
        first.tokens.iter().any(|t| t.engine_allows),
        "{}",
        first.describe()
    );
    assert!(first.describe().contains("only llguidance allows"));
    assert!(first.tokens.len() <= 2 * toolrail_llm::record::MaskDifference::LISTED);
}

#[test]
fn bench_runs_the_three_engines_and_compares_their_masks_with_toolrails() {
    let Some(model) = crate::common::model() else {
        return;
    };
    let (prompt, grammar) = crate::common::weather_prompt_and_grammar();
    let report = toolrail_llm::bench::bench(
        model,
        &grammar,
        &prompt,
        toolrail_llm::bench::BenchOptions {
            tokens: 24,
            threads: Some(1),
        },
    )
    .unwrap();
    assert_eq!(report.llguidance_skipped, None);
    let names: Vec<&str> = report.engines.iter().map(|e| e.engine.name()).collect();
    assert_eq!(names, ["toolrail", "llama", "llguidance", "none"]);
    assert_eq!(report.mask_differences, 0);
    assert!(report.llguidance_compared_steps > 0);
    // the only known difference: toolrail (as llama.cpp) allows the 11 lead bytes 0xF5–0xFF
    assert_eq!(report.llguidance_differences % 11, 0, "{report:?}");
    for example in &report.llguidance_examples {
        assert!(
            example.contains("only toolrail allows bytes f5")
                && !example.contains("only llguidance"),
            "{example}"
        );
    }
}

#[test]
fn a_toolrail_run_compared_with_both_engines_records_three_engines_times() {
    let Some(model) = crate::common::model().cloned() else {
        return;
    };
    let pieces = model.clone();
    let (prompt, grammar) = crate::common::weather_prompt_and_grammar();
    let worker = Worker::spawn(model, Arc::new(|| {}));
    let mut req = request(&prompt, Some(&grammar), EngineKind::Toolrail, 80);
    req.compare = vec![EngineKind::Llama, EngineKind::Llguidance];
    let (tokens, stop, totals, output) = run_to_end(&worker, req);
    assert_eq!(stop, Stop::EndOfGeneration, "{output}");
    assert!(!tokens.is_empty());
    for t in &tokens {
        // the run's own engine is toolrail: no difference of its own, two engines beside it
        assert_eq!(t.mask_difference, None);
        let engines: Vec<EngineKind> = t.other_masks.iter().map(|m| m.engine).collect();
        assert_eq!(
            engines,
            [EngineKind::Llama, EngineKind::Llguidance],
            "step {}",
            t.index
        );
        let times: Vec<(EngineKind, f64)> = t.mask_times(EngineKind::Toolrail).collect();
        assert_eq!(times.len(), 3, "three engines' times at step {}", t.index);
        assert!(times.iter().all(|&(_, ms)| ms > 0.0), "{times:?}");
        assert!(t.other_masks.iter().all(|m| m.stopped.is_none()));
        let llama = &t.other_masks[0];
        assert_eq!(
            llama.difference,
            None,
            "step {}: llama.cpp and toolrail differ: {}",
            t.index,
            llama
                .difference
                .as_ref()
                .map_or(String::new(), |d| d.describe())
        );
        // llguidance: only the lead bytes 0xF5–0xFF, which toolrail (as llama.cpp) allows
        if let Some(d) = &t.other_masks[1].difference {
            assert_eq!(d.engine, EngineKind::Llguidance);
            assert_eq!(d.only_engine, 0, "step {}: {}", t.index, d.describe());
            assert!(
                d.tokens
                    .iter()
                    .all(|token| is_lenient_utf8_lead(&pieces.piece(token.id))),
                "step {}: {}",
                t.index,
                d.describe()
            );
        }
    }
    let engines: Vec<EngineKind> = totals.other_engines.iter().map(|e| e.engine).collect();
    assert_eq!(engines, [EngineKind::Llama, EngineKind::Llguidance]);
    for e in &totals.other_engines {
        assert_eq!(e.steps as usize, tokens.len());
        assert_eq!(e.compared_steps as usize, tokens.len());
        assert!(e.mask_ms > 0.0);
    }
    assert_eq!(totals.other_engines[0].differing_steps, 0);
    // the same greedy call as an uncompared toolrail run
    let (_, _, _, plain) = run_to_end(
        &worker,
        request(&prompt, Some(&grammar), EngineKind::Toolrail, 80),
    );
    assert_eq!(plain, output);
    eprintln!(
        "weather compared with both engines: {} steps; mask ms total toolrail {:.1}, llama {:.1}, llguidance {:.1}; llguidance differs at {} step(s)",
        tokens.len(),
        totals.mask_ms,
        totals.other_engines[0].mask_ms,
        totals.other_engines[1].mask_ms,
        totals.other_engines[1].differing_steps
    );
}

#[test]
fn a_llama_run_compared_with_llguidance_times_toolrail_too() {
    let Some(model) = crate::common::model().cloned() else {
        return;
    };
    let (prompt, grammar) = crate::common::weather_prompt_and_grammar();
    let worker = Worker::spawn(model, Arc::new(|| {}));
    let mut req = request(&prompt, Some(&grammar), EngineKind::Llama, 24);
    req.compare = vec![EngineKind::Llguidance, EngineKind::Llama];
    let (tokens, _, totals, _) = run_to_end(&worker, req);
    assert!(!tokens.is_empty());
    for t in &tokens {
        let engines: Vec<EngineKind> = t.mask_times(EngineKind::Llama).map(|(e, _)| e).collect();
        assert_eq!(
            engines,
            [
                EngineKind::Llama,
                EngineKind::Toolrail,
                EngineKind::Llguidance
            ],
            "step {}",
            t.index
        );
        assert_eq!(t.mask_difference, None, "llama.cpp agrees with toolrail");
    }
    assert_eq!(totals.compared_steps as usize, tokens.len());
    assert_eq!(totals.differing_steps, 0);
}
