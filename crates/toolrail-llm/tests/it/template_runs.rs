//! Runs under a chat template's lazy tool-call grammar on the generation worker, real test model:
//! the grammar sleeps (nothing masked) until a trigger fires, the record names the trigger, the
//! match and the text replayed into the grammar, both engines (toolrail's gate and masks,
//! llama.cpp's lazy sampler) allow the same number of tokens at every step and take the same
//! tokens, and llama.cpp's parser reads the call back from the output.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use toolrail_llm::lazy_gate::{GateSetup, nearest_miss};
use toolrail_llm::record::{LazyNote, Stop, TokenRecord};
use toolrail_llm::template::{ChatTemplates, TemplateResult};
use toolrail_llm::worker::{Command, EngineKind, Event, RunRequest, Worker};

use crate::common::{model, model_path, run_request};
use crate::lazy_masks::{rendered_call, request, template_text};

/// The events of run 1 until it is done.
fn collect(worker: &Worker) -> (Vec<TokenRecord>, Stop, String) {
    let mut tokens = Vec::new();
    loop {
        let tagged = worker
            .events()
            .recv_timeout(Duration::from_secs(300))
            .expect("an event within 5 minutes");
        match tagged.event {
            Event::Token(t) => tokens.push(*t),
            Event::Done { stop, output, .. } => return (tokens, stop, output),
            Event::Refused { token, reason } => panic!("token {token} refused: {reason}"),
            _ => {}
        }
    }
}

/// A run request for the template's prompt and grammar, gated as llama-server gates it.
fn template_request(result: &TemplateResult, engine: EngineKind, max_tokens: u32) -> RunRequest {
    let mut req = run_request(&result.prompt, Some(&result.grammar), engine, max_tokens);
    req.gate = Some(result.gate_setup().expect("a vocabulary gives a gate"));
    req
}

/// Forces `forced`, then generates freely until the end (greedy).
fn run(
    result: &TemplateResult,
    engine: EngineKind,
    forced: &[u32],
    max_tokens: u32,
) -> (Vec<TokenRecord>, Stop, String) {
    let model = model().expect("model present").clone();
    let worker = Worker::spawn(model, Arc::new(|| {}));
    let mut req = template_request(result, engine, max_tokens);
    req.start_paused = true;
    worker.send(Command::Start(Box::new(req)));
    for &token in forced {
        worker.send(Command::Force(token));
    }
    worker.send(Command::Continue);
    collect(&worker)
}

fn hermes() -> Option<(ChatTemplates, TemplateResult)> {
    let path = model_path()?;
    let source = template_text("NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use")?;
    let templates = ChatTemplates::from_gguf(&path, Some(&source)).unwrap();
    let result = templates.apply(&request()).unwrap();
    assert!(result.grammar_lazy, "Hermes 2 Pro's grammar is lazy");
    Some((templates, result))
}

#[test]
fn a_lazy_template_grammar_sleeps_until_its_trigger_then_both_engines_constrain_alike() {
    let Some((templates, result)) = hermes() else {
        return;
    };
    let model = model().expect("model present");
    let n_vocab = model.n_vocab() as u32;
    let call = rendered_call(&templates, &result).expect("Hermes renders a call");
    // Prose glued to the trigger: the trigger starts inside a token, so the replay begins with
    // part of a piece. Forced up to the token that completes the trigger word, then greedy.
    let text = format!("Sure!{call}");
    let ids = model.tokenize(&text, false, true);
    let mut seen = String::new();
    let mut upto = 0;
    for (i, &id) in ids.iter().enumerate() {
        seen.push_str(&String::from_utf8_lossy(&model.piece(id)));
        if seen.contains("<tool_call>") {
            upto = i + 1;
            break;
        }
    }
    assert!(upto > 0, "the trigger word is in {text:?}");
    let forced = &ids[..upto];
    let (ours, our_stop, our_output) = run(&result, EngineKind::Toolrail, forced, 48);
    let (theirs, their_stop, their_output) = run(&result, EngineKind::Llama, forced, 48);
    eprintln!("toolrail: {our_stop:?} {our_output:?}");
    eprintln!("llama:    {their_stop:?} {their_output:?}");
    assert_eq!(
        our_output, their_output,
        "the engines took different tokens"
    );
    assert_eq!(our_stop, their_stop);
    assert_eq!(ours.len(), theirs.len());
    for (a, b) in ours.iter().zip(&theirs) {
        assert_eq!(a.id, b.id, "step {}", a.index);
        assert_eq!(
            a.allowed, b.allowed,
            "allowed tokens differ at step {}",
            a.index
        );
        assert_eq!(
            a.lazy,
            b.lazy.clone().map(|n| same_scan(n, &a.lazy)),
            "step {}",
            a.index
        );
    }
    // The timeline: dormant (nothing masked) before the trigger token, fired on it, then masked.
    for record in &ours[..upto + 2] {
        eprintln!("{} {:?}: {:?}", record.index, record.piece, record.lazy);
    }
    let fired_at = ours
        .iter()
        .position(|r| matches!(r.lazy, Some(LazyNote::Fired { .. })))
        .expect("the trigger fired");
    assert!(
        fired_at + 1 >= upto,
        "fired before the trigger word was complete"
    );
    for record in &ours[..fired_at] {
        assert!(
            matches!(record.lazy, Some(LazyNote::Dormant { .. })),
            "{record:?}"
        );
        assert_eq!(record.allowed, n_vocab, "nothing is masked while dormant");
        assert!(
            record.stacks.is_none(),
            "no stacks while the grammar sleeps"
        );
    }
    match &ours[fired_at].lazy {
        Some(LazyNote::Fired {
            trigger,
            matched,
            grammar_start,
            replayed,
            ..
        }) => {
            assert!(trigger.contains("tool_call"), "{trigger}");
            let prefix = "Sure!".len() as u64;
            assert_eq!(
                *grammar_start, prefix,
                "the grammar starts at the trigger word"
            );
            let (from, to) = matched.expect("a pattern trigger has a match");
            assert!(from <= prefix && to >= prefix + "<tool_call>".len() as u64);
            assert!(replayed.starts_with("<tool_call>"), "{replayed:?}");
        }
        other => panic!("token {fired_at} should fire the trigger: {other:?}"),
    }
    assert!(ours[fired_at].stacks.is_some());
    for record in &ours[fired_at + 1..] {
        assert!(record.lazy.is_none(), "{record:?}");
        assert!(
            record.allowed < n_vocab,
            "the grammar masks after the trigger"
        );
    }
    // Greedy under the grammar and the budget guard finishes the call; llama.cpp reads it back.
    assert_eq!(our_stop, Stop::EndOfGeneration, "{our_output:?}");
    let parsed = result
        .parse(&our_output, false)
        .expect("llama.cpp parses it");
    assert_eq!(parsed.tool_calls.len(), 1, "{parsed:?}");
    assert_eq!(parsed.tool_calls[0].name, "special_function");
    let arguments: Value = serde_json::from_str(&parsed.tool_calls[0].arguments).unwrap();
    assert!(arguments["arg1"].is_i64(), "{arguments}");
    assert_eq!(parsed.content, "Sure!");
}

/// The scan time is measured per engine: compare everything else.
fn same_scan(note: LazyNote, ours: &Option<LazyNote>) -> LazyNote {
    match (note, ours) {
        (LazyNote::Dormant { .. }, Some(LazyNote::Dormant { scan_ms })) => {
            LazyNote::Dormant { scan_ms: *scan_ms }
        }
        (
            LazyNote::Fired {
                trigger,
                matched,
                grammar_start,
                replayed,
                ..
            },
            Some(LazyNote::Fired { scan_ms, .. }),
        ) => LazyNote::Fired {
            trigger,
            matched,
            grammar_start,
            replayed,
            scan_ms: *scan_ms,
        },
        (note, _) => note,
    }
}

#[test]
fn a_trigger_that_never_fires_leaves_the_run_free_and_stop_strings_end_it() {
    let Some((_, result)) = hermes() else {
        return;
    };
    let model = model().expect("model present");
    let n_vocab = model.n_vocab() as u32;
    // Prose that starts the trigger word but drifts off: the grammar never wakes, every token
    // is free, and the nearest start of the word says why.
    let prose = model.tokenize("I call <tool_c anything today.", false, true);
    let (records, _, output) = run(&result, EngineKind::Toolrail, &prose, prose.len() as u32);
    assert!(
        output.starts_with("I call <tool_c anything today."),
        "{output:?}"
    );
    assert!(
        records
            .iter()
            .all(|r| r.allowed == n_vocab && matches!(r.lazy, Some(LazyNote::Dormant { .. })))
    );
    let patterns = &result.sampler.as_ref().unwrap().patterns;
    let miss = nearest_miss(patterns, output.as_bytes()).expect("a start of the word");
    assert_eq!(
        (miss.matched, miss.at, miss.instead),
        (7, 7, Some(b' ')),
        "{}",
        miss.describe()
    );
    // A stop string ends the run and the output before it, as llama-server returns it.
    let mut gated = result.clone();
    gated.additional_stops = vec!["anything".into()];
    let model_handle = model.clone();
    let worker = Worker::spawn(model_handle, Arc::new(|| {}));
    let mut req = template_request(&gated, EngineKind::Toolrail, 64);
    req.start_paused = true;
    worker.send(Command::Start(Box::new(req)));
    for &token in &prose {
        worker.send(Command::Force(token));
    }
    let (_, stop, output) = collect(&worker);
    assert_eq!(
        stop,
        Stop::StopString {
            stop: "anything".into()
        }
    );
    assert_eq!(output, "I call <tool_c ");
}

#[test]
fn a_grammar_that_is_not_lazy_starts_after_its_prefill_and_a_template_without_vocabulary_cannot_run()
 {
    let source = r#"{%- for m in messages %}<|{{ m.role }}|>{{ m.content }}{% endfor %}{%- if add_generation_prompt %}<|assistant|>{% endif %}"#;
    let templates = ChatTemplates::from_source(source, "", "").unwrap();
    let mut req = request();
    req.tool_choice = toolrail_llm::template::ToolChoice::Required;
    let result = templates.apply(&req).unwrap();
    if !result.grammar.is_empty() {
        let err = result.gate_setup().unwrap_err().to_string();
        assert!(err.contains("no vocabulary"), "{err}");
    }
    let setup = GateSetup::default();
    assert!(!setup.lazy && setup.prefill.is_empty());
    let _ = json!(null);
}

/// The trigger completes inside a token whose rest the grammar refuses (`<tool_call` then
/// `><`): both engines end the run on that token, as llama.cpp does, and the run says so: the
/// fatal token is recorded with its trigger note and the refusal, the output keeps it, the
/// totals count it, and the refusal names the trigger, where the grammar started and the
/// character it refused.
#[test]
fn a_trigger_completed_inside_a_refused_token_ends_the_run_with_that_token_recorded() {
    let Some(path) = model_path() else {
        return;
    };
    let Some(source) = template_text("Qwen3-Coder") else {
        return;
    };
    let templates = ChatTemplates::from_gguf(&path, Some(&source)).unwrap();
    let result = templates.apply(&request()).unwrap();
    assert!(
        result.grammar_lazy,
        "Qwen3-Coder's grammar is lazy under tool_choice auto"
    );
    let model = model().expect("model present");
    let n_vocab = model.n_vocab() as u32;
    let fatal = (0..n_vocab)
        .find(|&id| model.piece(id) == b"><")
        .or_else(|| {
            (0..n_vocab).find(|&id| {
                let piece = model.piece(id);
                piece.len() == 2 && piece[0] == b'>' && piece[1].is_ascii_alphabetic()
            })
        })
        .expect("a token `>` followed by a character the grammar refuses");
    let fatal_piece = String::from_utf8_lossy(&model.piece(fatal)).into_owned();
    let mut forced = model.tokenize("Sure! <tool_call", false, true);
    forced.push(fatal);
    for engine in [EngineKind::Toolrail, EngineKind::Llama] {
        let (records, stop, output) = run(&result, engine, &forced, 48);
        assert_eq!(
            records.len(),
            forced.len(),
            "{engine:?}: every forced token is recorded, the fatal one included"
        );
        assert_eq!(
            output,
            format!("Sure! <tool_call{fatal_piece}"),
            "{engine:?}"
        );
        let last = records.last().unwrap();
        assert_eq!(last.id, fatal);
        assert!(
            matches!(last.lazy, Some(LazyNote::Fired { .. })),
            "{engine:?}: the trigger fired on the fatal token: {:?}",
            last.lazy
        );
        let Stop::Error { message } = &stop else {
            panic!("{engine:?}: the run ends on an error, not {stop:?}");
        };
        assert_eq!(last.flag.as_deref(), Some(message.as_str()), "{engine:?}");
        assert!(
            message.contains(&format!("token {}", forced.len() - 1)),
            "{message}"
        );
        let refused = fatal_piece.chars().nth(1).unwrap();
        assert!(
            message.contains("the trigger <tool_call> completed inside it")
                && message.contains(&format!("refused {refused:?} at output byte 17")),
            "{engine:?}: {message}"
        );
        assert!(stop.failure().is_some());
    }
}
