//! A valid example for the current envelope: a random string of the grammar in force, made of
//! readable characters where the grammar allows, checked by the recognizer and, in tool-set
//! mode, by the call validator (a call with valid arguments) — or, under the llama.cpp template
//! source, by llama.cpp's own parser and the schema check of each call it parses — so that what
//! the app shows as "valid" has been proven valid.

use toolrail_engine::sample::{Sampler, SplitMix64};
use toolrail_engine::{Engine, VerdictKind, check_with};
use toolrail_tools::validate::{ValidateOptions, Validator};

use crate::analysis::Analysis;
use crate::run::{Outcome, RunState};
use crate::workspace::SchemaMode;

/// Random strings tried before giving up.
const ATTEMPTS: u64 = 64;
/// Characters an example is kept to where the grammar allows.
const EXAMPLE_CHARS: u64 = 300;

/// Why no example could be made.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ExampleError {
    /// The grammar does not build.
    #[error("no grammar: fix the schema or the GBNF first")]
    NoGrammar,
    /// The grammar has no string made of text only (it needs tokens), or none was found.
    #[error("no valid example found in {ATTEMPTS} tries: {0}")]
    NotFound(String),
}

/// A string the grammar in force accepts (in tool-set mode: one that is also a call the
/// validator finds valid; plain text is skipped), from random seed `seed` on.
pub fn valid_example(analysis: &Analysis, seed: u64) -> Result<String, ExampleError> {
    let grammar = analysis.grammar.as_ref().ok_or(ExampleError::NoGrammar)?;
    let sampler = Sampler::new(grammar).readable();
    let inputs = RunState::inputs(analysis);
    let template = match &inputs.template {
        Some(Ok(template)) => Some(template.clone()),
        Some(Err(e)) => return Err(ExampleError::NotFound(e.clone())),
        None => None,
    };
    let validator = match (&analysis.input.schema.mode, &analysis.tool_set) {
        (SchemaMode::ToolSet, Some(tools)) => {
            let lenient = analysis.input.schema.lenient;
            Some(
                Validator::with_readings(tools, lenient)
                    .map_err(|e| ExampleError::NotFound(e.to_string()))?,
            )
        }
        _ => None,
    };
    let settings = &analysis.input.schema;
    let mut engine = Engine::new(std::sync::Arc::clone(grammar));
    let mut last_problem = String::from("the grammar produced nothing");
    for attempt in 0..ATTEMPTS {
        let mut rng = SplitMix64::new(seed.wrapping_add(attempt));
        let text = match sampler.sample(&mut rng, EXAMPLE_CHARS) {
            Ok(t) => t,
            Err(e) => return Err(ExampleError::NotFound(e.to_string())),
        };
        if check_with(&mut engine, text.as_bytes()).kind != VerdictKind::Accepted {
            last_problem = "the grammar did not accept its own sample".to_owned();
            continue;
        }
        if let Some(template) = &template {
            // The template's own format: llama.cpp's parser reads the calls, toolrail checks
            // each against its tool.
            let mut run = template.clone();
            run.parse(&text);
            let outcome = Outcome::judge_template(&run, &inputs);
            if outcome.is_valid_call() {
                return Ok(text);
            }
            last_problem = outcome
                .template
                .and_then(|t| t.disagreements.into_iter().next())
                .unwrap_or_else(|| "llama.cpp's parser found no call in the sample".to_owned());
            continue;
        }
        let Some(validator) = &validator else {
            return Ok(text);
        };
        let opts = ValidateOptions {
            parallel: settings.parallel,
            auto: settings.auto,
            lenient: settings.lenient,
        };
        let report = validator.validate_output(settings.envelope, &text, opts);
        if report.is_valid() && !report.calls.is_empty() {
            return Ok(text);
        }
        last_problem = if report.calls.is_empty() {
            "only plain text came out".to_owned()
        } else {
            "the validator rejected the sample".to_owned()
        };
    }
    Err(ExampleError::NotFound(last_problem))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::{AnalysisInput, Computer};
    use crate::workspace::Workspace;

    /// The weather sample's examples are calls the validator accepts, written in characters a
    /// person reads (no control characters or stray code points as a city).
    #[test]
    fn examples_are_valid_calls_in_readable_characters() {
        let analysis =
            Computer::default().compute(&AnalysisInput::from_workspace(&Workspace::default(), 0));
        for seed in 0..20 {
            let example = valid_example(&analysis, seed).unwrap();
            assert!(
                example
                    .chars()
                    .all(|c| c == '\n' || (' '..='~').contains(&c)),
                "{example:?}"
            );
            assert!(!example.contains("\\u"), "{example:?}");
        }
    }
}
