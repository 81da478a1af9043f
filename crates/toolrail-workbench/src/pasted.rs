//! A model output pasted into the Validator pane, checked the way a run's output is: the call
//! validator (tool-set mode), and where the grammar in force would have stopped the model, with
//! what it expected there as a person reads it (literals and JSON pointer).

use toolrail_engine::{Engine, VerdictKind, check_with};
use toolrail_tools::validate::{Report, ValidateOptions, Validator};

use crate::analysis::{Analysis, readable_expected};
use crate::workspace::SchemaMode;

/// The verdicts on one pasted output.
#[derive(Debug, Clone)]
pub struct PastedCheck {
    /// The call validator's report (tool-set mode, when the tool set loads).
    pub report: Option<Report>,
    /// What the grammar in force says: accepted, or where it stops and what it expected.
    pub grammar: String,
    /// True when the grammar accepts the whole text.
    pub grammar_accepts: bool,
}

/// Checks `text` against the analysis's tool set and grammar.
pub fn check_pasted(analysis: &Analysis, text: &str) -> PastedCheck {
    let settings = &analysis.input.schema;
    let report = match (&settings.mode, &analysis.tool_set) {
        (SchemaMode::ToolSet, Some(tools)) => Validator::new(tools).ok().map(|v| {
            v.validate_output(
                settings.envelope,
                text,
                ValidateOptions {
                    parallel: settings.parallel,
                    auto: settings.auto,
                },
            )
        }),
        _ => None,
    };
    let Some(grammar) = &analysis.grammar else {
        return PastedCheck {
            report,
            grammar: "no grammar in force".to_owned(),
            grammar_accepts: false,
        };
    };
    let mut engine = Engine::new(std::sync::Arc::clone(grammar));
    let verdict = check_with(&mut engine, text.as_bytes());
    let consumed = &text.as_bytes()[..verdict.offset.unwrap_or(text.len())];
    let expected = readable_expected(&engine, &verdict, consumed, &analysis.places).join(", ");
    let words = match verdict.kind {
        VerdictKind::Accepted => "the grammar accepts the whole text".to_owned(),
        VerdictKind::Incomplete => format!(
            "the grammar needs more at {}: next may be {expected}",
            verdict.position
        ),
        VerdictKind::Rejected => format!(
            "the grammar stops it at {} (byte {}): expected {expected}",
            verdict.position,
            verdict.offset.unwrap_or(0)
        ),
        VerdictKind::TooAmbiguous => format!(
            "the grammar is too ambiguous to follow at {}",
            verdict.position
        ),
    };
    PastedCheck {
        report,
        grammar: words,
        grammar_accepts: verdict.kind == VerdictKind::Accepted,
    }
}
