//! Chat templates read from a model's own GGUF metadata, real test model: each template is written
//! into `tokenizer.chat_template` of a copy of the test model (toolrail's GGUF rewriter), and
//! read back three ways — from the copy's metadata, as an override on the original model, and as
//! text alone — with the same result. Then the copy runs on the generation worker under both
//! engines (toolrail's gate and masks, llama.cpp's lazy sampler): prose, then the template's own
//! rendering of a call, forced token by token, then greedy; both take the same tokens with the
//! same allowed counts and the same trigger timeline, and the output is parsed into the same call
//! by llama.cpp's parser and accepted by toolrail's validator.
//!
//! `lazy_masks.rs` compares the masks over the whole vocabulary with the template given as an
//! override; this file covers the template living in the model file, as users have it.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use toolrail_llm::Model;
use toolrail_llm::gguf::{self, GgufHeader, NewValue};
use toolrail_llm::lazy_gate::GateSetup;
use toolrail_llm::record::{LazyNote, Stop, TokenRecord};
use toolrail_llm::template::{ChatTemplates, TemplateResult};
use toolrail_llm::worker::{Command, EngineKind, Event, Worker};
use toolrail_tools::toolset::ToolSet;
use toolrail_tools::validate::Validator;

use crate::common::{model_path, run_request};
use crate::lazy_masks::{rendered_call, request, template_text};

/// Templates that support tools, with a lazy grammar on the test model's vocabulary (Llama 3.1
/// gives no grammar under these request settings, see `lazy_masks.rs`).
const TEMPLATES: &[&str] = &[
    "google-gemma-4-31B-it",
    "Qwen3-Coder",
    "Qwen-Qwen2.5-7B-Instruct",
];

/// The events of run 1 until it is done.
pub(crate) fn collect(worker: &Worker) -> (Vec<TokenRecord>, Stop, String) {
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
            Event::Error(e) => panic!("run failed: {e}"),
            _ => {}
        }
    }
}

/// Runs the template's prompt under its gated grammar on `model`: `forced` first, then greedy.
pub(crate) fn gated_run(
    model: &Model,
    result: &TemplateResult,
    engine: EngineKind,
    forced: &[u32],
    max_tokens: u32,
) -> (Vec<TokenRecord>, Stop, String) {
    let gate = result.gate_setup().expect("a vocabulary gives a gate");
    gated_run_with(model, result, &gate, engine, forced, max_tokens)
}

/// [`gated_run`] with the gate given (e.g. with a reasoning budget).
pub(crate) fn gated_run_with(
    model: &Model,
    result: &TemplateResult,
    gate: &GateSetup,
    engine: EngineKind,
    forced: &[u32],
    max_tokens: u32,
) -> (Vec<TokenRecord>, Stop, String) {
    let worker = Worker::spawn(model.clone(), Arc::new(|| {}));
    let mut req = run_request(&result.prompt, Some(&result.grammar), engine, max_tokens);
    req.gate = Some(gate.clone());
    req.start_paused = true;
    worker.send(Command::Start(Box::new(req)));
    for &token in forced {
        worker.send(Command::Force(token));
    }
    worker.send(Command::Continue);
    collect(&worker)
}

/// The same record apart from the time each engine spent (scan and mask times).
pub(crate) fn timeline(records: &[TokenRecord]) -> Vec<(u32, u32, Option<String>)> {
    records
        .iter()
        .map(|r| {
            let note = r.lazy.as_ref().map(|note| match note {
                LazyNote::Dormant { .. } => "dormant".to_owned(),
                LazyNote::Fired {
                    trigger,
                    matched,
                    grammar_start,
                    replayed,
                    ..
                } => format!("fired {trigger} {matched:?} at {grammar_start}: {replayed:?}"),
            });
            (r.id, r.allowed, note)
        })
        .collect()
}

fn special_function_tools() -> ToolSet {
    let tools = request().tools;
    ToolSet::from_json_str(&Value::Array(tools).to_string()).expect("the request's tool set")
}

/// Writes `source` into a copy of `model` as its chat template.
fn copy_with_template(model: &Path, dir: &Path, source: &str) -> std::path::PathBuf {
    let copy = dir.join("with-template.gguf");
    gguf::copy_with_value(
        model,
        &copy,
        "tokenizer.chat_template",
        &NewValue::Str(source.as_bytes().to_vec()),
    )
    .expect("the copy is written");
    copy
}

#[test]
fn templates_in_the_gguf_metadata_build_run_and_parse_like_llama_cpp() {
    let Some(path) = model_path() else { return };
    let original = Model::open(&path).expect("the test model loads");
    // The vocabulary adds BOS itself, so llama.cpp renders the template with an empty BOS text.
    assert!(original.bos().is_some());
    let bos = "";
    let eos = String::from_utf8_lossy(&original.piece(original.eog_tokens()[0])).into_owned();
    let validator = Validator::new(&special_function_tools()).unwrap();
    let mut compared = 0;
    for name in TEMPLATES {
        let Some(source) = template_text(name) else {
            return;
        };
        let dir = tempfile::tempdir().unwrap();
        let copy = copy_with_template(&path, dir.path(), &source);
        let header = GgufHeader::read(&copy).expect("the copy is a valid GGUF");
        assert_eq!(header.string("tokenizer.chat_template"), Some(&*source));

        // The same result from the metadata, from an override, and (vocabulary aside) from text.
        let from_metadata = ChatTemplates::from_gguf(&copy, None)
            .unwrap_or_else(|e| panic!("{name}: {e}"))
            .apply(&request())
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let templates = ChatTemplates::from_gguf(&path, Some(&source)).unwrap();
        let from_override = templates.apply(&request()).unwrap();
        assert_eq!(from_metadata, from_override, "{name}: metadata vs override");
        let from_text = ChatTemplates::from_source(&source, bos, &eos)
            .unwrap()
            .apply(&request())
            .unwrap();
        assert_eq!(from_text.sampler, None, "{name}: no vocabulary, no sampler");
        let same = TemplateResult {
            sampler: None,
            warnings: Vec::new(),
            ..from_metadata.clone()
        } == TemplateResult {
            warnings: Vec::new(),
            ..from_text.clone()
        };
        assert!(
            same,
            "{name}: metadata vs text: prompt {:?} / {:?}",
            from_metadata.prompt, from_text.prompt
        );
        let result = from_metadata;
        assert!(result.grammar_lazy, "{name}: the grammar is lazy");

        // Prose, then the call as the template renders it: forced, then greedy to the end.
        let model = Model::open(&copy).expect("the copy loads");
        // Gemma 4's prompt ends inside the model's turn (an empty thought channel), which a
        // rendered assistant turn does not extend: its call is written in its format instead.
        let call = match *name {
            "google-gemma-4-31B-it" => {
                "<|tool_call>call:special_function{arg1:1}<tool_call|>".to_owned()
            }
            _ => rendered_call(&templates, &result).expect("the template renders a call"),
        };
        let text = format!("Sure, calling it now.\n{call}");
        let forced = model.tokenize(&text, false, true);
        let max_tokens = forced.len() as u32 + 16;
        let (ours, our_stop, our_output) =
            gated_run(&model, &result, EngineKind::Toolrail, &forced, max_tokens);
        let (theirs, their_stop, their_output) =
            gated_run(&model, &result, EngineKind::Llama, &forced, max_tokens);
        eprintln!("{name}: {our_stop:?} {our_output:?}");
        assert_eq!(our_output, their_output, "{name}: different tokens");
        assert_eq!(our_stop, their_stop, "{name}");
        assert_eq!(
            timeline(&ours),
            timeline(&theirs),
            "{name}: timelines differ"
        );

        // The timeline: dormant with nothing masked, one fire, then masked.
        let n_vocab = model.n_vocab() as u32;
        let fired_at = ours
            .iter()
            .position(|r| matches!(r.lazy, Some(LazyNote::Fired { .. })))
            .unwrap_or_else(|| panic!("{name}: the trigger never fired"));
        assert!(
            ours[..fired_at].iter().all(|r| {
                r.allowed == n_vocab && matches!(r.lazy, Some(LazyNote::Dormant { .. }))
            })
        );
        assert!(ours[fired_at + 1..].iter().all(|r| r.lazy.is_none()));
        assert!(ours[fired_at + 1..].iter().all(|r| r.allowed < n_vocab));
        let fired = serde_json::to_value(&ours[fired_at]).unwrap();
        assert_eq!(fired["lazy"]["state"], "fired", "{fired}");
        assert!(fired["lazy"]["trigger"].is_string(), "{fired}");
        eprintln!("{name}: fired at token {fired_at}: {}", fired["lazy"]);

        // llama.cpp's parse of the output, and toolrail's validator on the parsed call.
        assert_eq!(our_stop, Stop::EndOfGeneration, "{name}: {our_output:?}");
        assert!(our_output.starts_with(&text), "{name}: {our_output:?}");
        let parsed = result
            .parse(&our_output, false)
            .unwrap_or_else(|e| panic!("{name}: llama.cpp's parser: {e}"));
        assert_eq!(parsed.tool_calls.len(), 1, "{name}: {parsed:?}");
        let call = &parsed.tool_calls[0];
        let arguments: Value = serde_json::from_str(&call.arguments).unwrap();
        assert_eq!(
            (call.name.as_str(), &arguments),
            ("special_function", &json!({"arg1": 1})),
            "{name}"
        );
        let check = validator.check_call(&call.name, &arguments);
        assert!(check.is_valid(), "{name}: {check:?}");
        compared += 1;
    }
    assert_eq!(compared, TEMPLATES.len());
}
