//! Every grammar toolrail's converter emits for the MaskBench schemas
//! (`../shared/corpus/maskbench/data/`) loads in llama.cpp, and llama.cpp's own grammar
//! sampler, fed each test instance token by token on the test model's vocabulary, reaches the
//! same verdict as toolrail's recognizer, each instance within one second (a bound against the
//! sampler blow-ups of ambiguous grammars, not a speed goal). Prints a summary (`--nocapture`).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;
use toolrail_engine::{VerdictKind, check};
use toolrail_gbnf::Grammar;
use toolrail_llm::{LlamaGrammarSampler, LlmError, Model};
use toolrail_schema::{ConvertOptions, schema_to_gbnf};

use crate::common::model;

/// The most llama.cpp may take to judge one instance.
const PER_INSTANCE: Duration = Duration::from_secs(1);

/// llama.cpp's verdict on `text` (every token accepted and the grammar able to end), and the
/// time its sampler took (loading the grammar not included).
fn llama_accepts(model: &Model, gbnf: &str, text: &str) -> (Result<bool, LlmError>, Duration) {
    let mut sampler = match LlamaGrammarSampler::new(model, gbnf, "root") {
        Ok(s) => s,
        Err(e) => return (Err(e), Duration::ZERO),
    };
    let tokens = model.tokenize(text, false, false);
    let started = Instant::now();
    let verdict = judge(&mut sampler, &tokens);
    (verdict, started.elapsed())
}

fn judge(sampler: &mut LlamaGrammarSampler, tokens: &[u32]) -> Result<bool, LlmError> {
    for &token in tokens {
        match sampler.accept(token) {
            Ok(()) => {}
            Err(LlmError::TokenRejected { .. }) => return Ok(false),
            Err(e) => return Err(e),
        }
    }
    sampler.can_end()
}

/// The converter recurses once per level of schema nesting (up to its own limit): run it on
/// a stack as large as a main thread's, as the CLI and the app's analysis thread do.
const STACK: usize = 16 << 20;

#[test]
fn maskbench_grammars_load_and_judge_in_llama_cpp() {
    let (Some(model), Some(dir)) = (model(), toolrail_testkit::corpus("maskbench/data")) else {
        return;
    };
    std::thread::Builder::new()
        .stack_size(STACK)
        .spawn(move || judge_all(model, &dir))
        .unwrap()
        .join()
        .unwrap();
}

fn judge_all(model: &Model, dir: &Path) {
    let entries = std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    let mut files: Vec<PathBuf> = entries.flatten().map(|e| e.path()).collect();
    files.sort();
    let (mut converted, mut instances, mut skipped_ambiguous) = (0usize, 0usize, 0usize);
    let mut slowest = (Duration::ZERO, String::new());
    let mut failures = Vec::new();
    for path in &files {
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let doc: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        let Ok(c) = schema_to_gbnf(&doc["schema"], &ConvertOptions::default()) else {
            continue;
        };
        converted += 1;
        let grammar = match Grammar::parse(&c.gbnf) {
            Ok(g) => Arc::new(g),
            Err(e) => {
                failures.push(format!(
                    "{name}: toolrail's parser refuses its own grammar: {e}"
                ));
                continue;
            }
        };
        if let Err(e) = LlamaGrammarSampler::new(model, &c.gbnf, "root") {
            failures.push(format!("{name}: llama.cpp refuses the grammar: {e}"));
            continue;
        }
        for test in doc["tests"].as_array().into_iter().flatten() {
            let text = serde_json::to_string(&test["data"]).unwrap();
            let ours = check(&grammar, text.as_bytes());
            if ours.kind == VerdictKind::TooAmbiguous {
                skipped_ambiguous += 1;
                failures.push(format!("{name}: too ambiguous for toolrail on {text:.80}"));
                continue;
            }
            instances += 1;
            let (theirs, took) = llama_accepts(model, &c.gbnf, &text);
            if took > slowest.0 {
                slowest = (took, name.clone());
            }
            match theirs {
                Ok(accepted) if accepted == ours.is_accepted() => {}
                Ok(accepted) => failures.push(format!(
                    "{name}: llama.cpp {} {text:.120}, toolrail {:?}",
                    if accepted { "accepts" } else { "rejects" },
                    ours.kind
                )),
                Err(e) => failures.push(format!("{name}: llama.cpp failed on {text:.80}: {e}")),
            }
            if took > PER_INSTANCE {
                failures.push(format!(
                    "{name}: llama.cpp took {:.1} s on {text:.80}",
                    took.as_secs_f64()
                ));
            }
        }
    }
    eprintln!(
        "maskbench through llama.cpp: {} files, {converted} converted, all loaded unless listed; \
         {instances} instances judged, {skipped_ambiguous} too ambiguous; slowest {:.0} ms ({})",
        files.len(),
        slowest.0.as_secs_f64() * 1e3,
        slowest.1
    );
    assert!(converted > 0, "no schema converted");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
