//! Identical masks (issue 4, "Must show"): on the test model, for json.gbnf, c.gbnf and three
//! tool grammars from sample_schemas/, along walks of at least 64 tokens, toolrail's allowed set
//! equals llama.cpp's over the whole 262k vocabulary at every step. Prints a per-grammar table
//! (run with `--nocapture`) and fails on any differing token.
//!
//! The walks follow llama.cpp's mask (its sampler is advanced with every token) and take the
//! model's most likely allowed token, with two rules so that each walk really lasts 64 steps:
//! end-of-generation is never taken, and while under 64 steps a token after which the grammar
//! could end is passed over for the next most likely one that keeps it open (if there is one).
//! The tool grammars allow parallel calls, so a walk can go on past the first call.

use serde_json::{Value, json};
use toolrail_engine::{Engine, State};
use toolrail_llm::{Model, Session};
use toolrail_tools::envelope::Format;
use toolrail_tools::grammar::{GrammarOptions, tool_call_grammar};
use toolrail_tools::prompt::{PromptFamily, build_prompt};
use toolrail_tools::toolset::ToolSet;

use crate::common::masks::{MaskPair, differing_tokens};
use crate::common::model;

/// Steps every walk must take.
const STEPS: usize = 64;

/// One walk's outcome.
struct Walk {
    steps: usize,
    differing: usize,
    mean_allowed: f64,
    toolrail_ms: f64,
    llama_ms: f64,
    text: String,
}

/// The allowed tokens in descending logit order (ties: lower id first).
fn ranked(session: &Session<'_>, allowed: impl Iterator<Item = u32>) -> Vec<u32> {
    let logits = session.logits().unwrap();
    let mut ids: Vec<u32> = allowed.collect();
    ids.sort_by(|&a, &b| {
        logits[b as usize]
            .total_cmp(&logits[a as usize])
            .then(a.cmp(&b))
    });
    ids
}

/// The token the walk takes next (see the module docs), with the state after it.
fn choose(
    model: &Model,
    engine: &mut Engine,
    state: State,
    ranked: &[u32],
    keep_open: bool,
) -> Option<(u32, State)> {
    let mut fallback = None;
    for &id in ranked.iter().filter(|&&id| !model.is_eog(id)) {
        let next = engine
            .accept_token(state, id, &model.piece(id))
            .expect("toolrail's recognizer accepts every token llama.cpp allows");
        if !keep_open || !engine.can_end(next) {
            return Some((id, next));
        }
        fallback.get_or_insert((id, next));
    }
    fallback
}

fn walk(model: &Model, grammar: &str, prompt: &str) -> Walk {
    let mut pair = MaskPair::new(model, grammar, prompt, 2048);
    let mut out = Walk {
        steps: 0,
        differing: 0,
        mean_allowed: 0.0,
        toolrail_ms: 0.0,
        llama_ms: 0.0,
        text: String::new(),
    };
    let mut text = Vec::new();
    let mut allowed_sum = 0usize;
    while out.steps < STEPS + 8 {
        let (ours, theirs) = pair.masks();
        let diff = differing_tokens(&ours, &theirs, &format!("step {}", out.steps));
        out.differing += diff;
        allowed_sum += theirs.count();
        out.steps += 1;
        let ranked = ranked(&pair.session, theirs.iter());
        let Some((token, next)) = choose(
            model,
            &mut pair.engine,
            pair.state,
            &ranked,
            out.steps < STEPS,
        ) else {
            break;
        };
        pair.llama.accept(token).unwrap();
        pair.state = next;
        text.extend(model.piece(token));
        pair.session.feed(token).unwrap();
    }
    out.toolrail_ms = pair.toolrail_ms;
    out.llama_ms = pair.llama_ms;
    out.mean_allowed = allowed_sum as f64 / out.steps.max(1) as f64;
    out.text = String::from_utf8_lossy(&text).into_owned();
    out
}

fn tool_case(file: &str, format: Format, query: &str) -> (String, String) {
    let path = toolrail_testkit::repo_path(&format!("sample_schemas/{file}"));
    let text = std::fs::read_to_string(&path).unwrap();
    let tools = ToolSet::from_json_str(&text).unwrap();
    let grammar = tool_call_grammar(
        &tools,
        &GrammarOptions {
            format,
            parallel: true,
            ..GrammarOptions::default()
        },
    )
    .unwrap()
    .text;
    let values: Vec<Value> = tools
        .tools()
        .iter()
        .map(|t| json!({"name": t.name, "description": t.description, "parameters": t.parameters}))
        .collect();
    let family = match format {
        Format::Hermes => PromptFamily::Hermes,
        Format::Llama3 => PromptFamily::Llama31,
        Format::Gemma => PromptFamily::Gemma,
        Format::OpenAi | Format::Pythonic => PromptFamily::Generic,
    };
    (
        grammar,
        build_prompt(family, format, &values, query, None).unwrap(),
    )
}

/// `../shared/corpus/gbnf/<name>`; missing: a failure under `CI=true`, otherwise None (a skip).
fn corpus_grammar(name: &str) -> Option<String> {
    let path = toolrail_testkit::corpus(&format!("gbnf/{name}"))?;
    Some(std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display())))
}

#[test]
fn toolrail_masks_equal_llama_cpp_masks_along_64_token_walks() {
    let Some(model) = model() else { return };
    let (Some(json), Some(c)) = (corpus_grammar("json.gbnf"), corpus_grammar("c.gbnf")) else {
        return;
    };
    let mut cases: Vec<(String, String, String)> = vec![
        (
            "json.gbnf".into(),
            json,
            "A JSON object describing a cat, with many fields:\n".into(),
        ),
        (
            "c.gbnf".into(),
            c,
            "A C program that sums the numbers from 1 to 10:\n".into(),
        ),
    ];
    for (file, format, query) in [
        (
            "weather.json",
            Format::OpenAi,
            "What is the weather in Paris and in Rome?",
        ),
        (
            "planner_get_inputs.json",
            Format::Hermes,
            "Propose 3 morning slots next week for an appointment with Silvia, then email me the choice.",
        ),
        (
            "calculator.json",
            Format::Pythonic,
            "What is 12 times 7, and 3 plus 4?",
        ),
    ] {
        let (grammar, prompt) = tool_case(file, format, query);
        cases.push((
            format!("{file} ({}, parallel)", format.as_str()),
            grammar,
            prompt,
        ));
    }

    let mut rows = Vec::new();
    for (name, grammar, prompt) in &cases {
        rows.push((name.clone(), walk(model, grammar, prompt)));
    }
    eprintln!(
        "\n{:<38} {:>5} {:>10} {:>12} {:>12} {:>12}",
        "grammar", "steps", "differing", "mean allowed", "toolrail ms", "llama.cpp ms"
    );
    for (name, w) in &rows {
        eprintln!(
            "{:<38} {:>5} {:>10} {:>12.0} {:>12.3} {:>12.1}",
            name,
            w.steps,
            w.differing,
            w.mean_allowed,
            w.toolrail_ms / w.steps.max(1) as f64,
            w.llama_ms / w.steps.max(1) as f64
        );
    }
    for (name, w) in &rows {
        eprintln!("{name}: {:?}", w.text);
    }
    for (name, w) in &rows {
        assert!(
            w.steps >= STEPS,
            "{name}: the walk ended after {} steps",
            w.steps
        );
        assert_eq!(
            w.differing, 0,
            "{name}: toolrail's and llama.cpp's masks differ"
        );
    }
}
