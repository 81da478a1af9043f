//! Lazy template grammars on the real test model: for chat templates given as files (Hermes 2 Pro,
//! Qwen3-Coder, Llama 3.1, Gemma 4, Qwen 3.5, Qwen 2.5, Granite 4; those whose grammar is lazy and
//! whose rendering of a call extends the prompt), what llama-server builds with the test model's
//! vocabulary (word triggers, converted tokens, sampler regexes), then a text a model would write
//! — free prose, then the template's own rendering of a tool call — fed token by token to
//! llama.cpp's lazy grammar sampler and to toolrail's [`LazyGate`] in front of toolrail's
//! recognizer. At every step both masks over the whole vocabulary must be identical (everything
//! while the grammar sleeps, the grammar's set after it wakes), the gate must wake on the same
//! token as llama.cpp, and the call must parse back through llama.cpp's parser.

use std::sync::Arc;

use serde_json::{Value, json};
use toolrail_engine::{Engine, MaskEngine, TokenMask};
use toolrail_gbnf::{Grammar, TokenVocabulary};
use toolrail_llm::LlamaGrammarSampler;
use toolrail_llm::lazy_gate::{GateStep, LazyGate};
use toolrail_llm::template::{
    ChatTemplates, ReasoningFormat, RequestDefaults, ServerSwitch, TemplateRequest, TemplateResult,
    ToolChoice,
};

use crate::common::masks::differing_tokens;
use crate::common::{model, model_path};

const TEMPLATES: &[&str] = &[
    "NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use",
    "Qwen3-Coder",
    "meta-llama-Llama-3.1-8B-Instruct",
    "google-gemma-4-31B-it",
    "Qwen3.5-4B",
    "Qwen-Qwen2.5-7B-Instruct",
    "ibm-granite-granite-4.0",
];

/// `../shared/corpus/llama-cpp-chat/templates/<name>.jinja`; missing: a failure under
/// `CI=true`, otherwise None (a skip).
pub(crate) fn template_text(name: &str) -> Option<String> {
    let path = toolrail_testkit::corpus(&format!("llama-cpp-chat/templates/{name}.jinja"))?;
    Some(std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display())))
}

pub(crate) fn request() -> TemplateRequest {
    let mut request = TemplateRequest {
        messages: vec![json!({"role": "user", "content": "Call the special function with 1."})],
        tools: vec![json!({"type": "function", "function": {
            "name": "special_function", "description": "I'm special",
            "parameters": {"type": "object",
                "properties": {"arg1": {"type": "integer"}}, "required": ["arg1"]}}})],
        tool_choice: ToolChoice::Auto,
        enable_thinking: ServerSwitch::Off,
        reasoning_format: ReasoningFormat::Deepseek,
        // llama-server would continue a final assistant message (the renderings below add one)
        defaults: RequestDefaults::Struct,
        ..TemplateRequest::default()
    };
    request
        .chat_template_kwargs
        .insert("date_string".into(), json!("26 Jul 2024"));
    request
}

/// The template's own rendering of the call, without the end of turn (see chat_templates.rs).
pub(crate) fn rendered_call(templates: &ChatTemplates, base: &TemplateResult) -> Option<String> {
    let turn = |message: Value| -> Option<String> {
        let mut history = request();
        history.messages.push(message);
        history.add_generation_prompt = Some(false);
        let rendered = templates.apply(&history).ok()?;
        rendered
            .prompt
            .strip_prefix(base.prompt.as_str())
            .map(str::to_owned)
    };
    let call = turn(json!({"role": "assistant", "content": "",
        "tool_calls": [{"type": "function", "id": "call_0",
            "function": {"name": "special_function", "arguments": "{\"arg1\": 1}"}}]}))?;
    let marker = "Plain answer 7.";
    let plain = turn(json!({"role": "assistant", "content": marker}))?;
    let end = &plain[plain.find(marker)? + marker.len()..];
    Some(call.strip_suffix(end).unwrap_or(&call).to_owned())
}

/// Walks `text` under both engines; returns (steps, differing tokens, step the gate woke at).
fn walk(name: &str, result: &TemplateResult, text: &str) -> (usize, usize, Option<usize>) {
    let model = model().expect("model present");
    let sampler = result
        .sampler
        .as_ref()
        .expect("a vocabulary gives a sampler setup");
    let tokens: Vec<u32> = sampler.tokens.iter().map(|&t| t as u32).collect();
    let mut llama =
        LlamaGrammarSampler::new_lazy(model, &result.grammar, "root", &sampler.patterns, &tokens)
            .unwrap_or_else(|e| panic!("{name}: llama.cpp's lazy sampler: {e}"));
    let grammar =
        Grammar::parse_with(&result.grammar, "root", Some(model as &dyn TokenVocabulary)).unwrap();
    let mut engine = Engine::new(Arc::new(grammar));
    let mut state = engine.initial();
    let mut masks = MaskEngine::new(model.shared_token_table());
    let mut gate =
        LazyGate::new(&sampler.patterns, &tokens).unwrap_or_else(|e| panic!("{name}: {e}"));
    let mut everything = TokenMask::empty(model.n_vocab());
    for id in 0..model.n_vocab() as u32 {
        everything.insert(id);
    }
    let ids = model.tokenize(text, false, true);
    let mut differing = 0;
    let mut woke = None;
    for (step, &token) in ids.iter().enumerate() {
        let theirs = llama.token_mask().unwrap();
        let ours = if gate.awaiting() {
            everything.clone()
        } else {
            masks.mask(&mut engine, state).unwrap()
        };
        differing += differing_tokens(&ours, &theirs, &format!("{name} step {step}"));
        llama
            .accept(token)
            .unwrap_or_else(|e| panic!("{name} step {step}: llama.cpp refused token {token}: {e}"));
        let piece = model.piece(token);
        match gate.accept(token, &piece) {
            GateStep::Waiting => {}
            GateStep::Fired(fire) => {
                woke = Some(step);
                eprintln!(
                    "{name}: trigger fired at token {step} ({:?}) by {:?}; grammar starts at byte {}",
                    String::from_utf8_lossy(&piece),
                    fire.by,
                    fire.grammar_start
                );
                if let Some((tok, bytes)) = fire.replay.first()
                    && *bytes != model.piece(*tok)
                {
                    eprintln!(
                        "{name}: replay starts with a partial piece {:?} of token {tok}",
                        String::from_utf8_lossy(bytes)
                    );
                }
                for (tok, bytes) in fire.replay {
                    state = engine.accept_token(state, tok, &bytes).unwrap_or_else(|| {
                        panic!(
                            "{name}: replay of {:?} rejected",
                            String::from_utf8_lossy(&bytes)
                        )
                    });
                }
            }
            GateStep::Active => {
                state = engine
                    .accept_token(state, token, &piece)
                    .unwrap_or_else(|| {
                        panic!(
                            "{name} step {step}: toolrail rejected {:?}",
                            String::from_utf8_lossy(&piece)
                        )
                    });
            }
        }
    }
    let (time, bytes) = gate.scan_cost();
    eprintln!(
        "{name}: {} tokens, {differing} differing, trigger scans {bytes} bytes in {:.3} ms",
        ids.len(),
        time.as_secs_f64() * 1e3
    );
    (ids.len(), differing, woke)
}

#[test]
fn lazy_template_grammars_mask_like_llama_cpp_on_the_test_model() {
    let Some(path) = model_path() else { return };
    let mut compared = 0;
    let mut total_differing = 0;
    for name in TEMPLATES {
        let Some(source) = template_text(name) else {
            return;
        };
        let templates = ChatTemplates::from_gguf(&path, Some(&source))
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let result = templates
            .apply(&request())
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        if !result.grammar_lazy {
            eprintln!("{name}: grammar not lazy, skipped");
            continue;
        }
        let Some(call) = rendered_call(&templates, &result) else {
            eprintln!("{name}: the rendered call does not extend the prompt, skipped");
            continue;
        };
        // After a newline the trigger starts a token; glued to prose it can start inside one,
        // and the replay then begins with a partial piece.
        for prose in ["Let me check that for you.\n", "Sure!"] {
            let text = format!("{prose}{call}");
            let (_, differing, woke) = walk(name, &result, &text);
            assert!(
                woke.is_some(),
                "{name}: the trigger never fired on {text:?}"
            );
            total_differing += differing;
        }
        let text = format!("Let me check that for you.\n{call}");
        let parsed = result
            .parse(&text, false)
            .unwrap_or_else(|e| panic!("{name}: llama.cpp's parser: {e}"));
        assert_eq!(parsed.tool_calls.len(), 1, "{name}: {parsed:?}");
        assert_eq!(parsed.tool_calls[0].name, "special_function");
        let arguments: Value = serde_json::from_str(&parsed.tool_calls[0].arguments).unwrap();
        assert_eq!(arguments, json!({"arg1": 1}), "{name}");
        compared += 1;
    }
    assert!(compared >= 3, "only {compared} templates compared");
    assert_eq!(total_differing, 0, "masks differ");
}
