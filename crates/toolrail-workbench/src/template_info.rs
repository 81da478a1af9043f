//! The llama.cpp template source in words, for the panes: what llama-server would build (lazy
//! or not, the triggers, preserved tokens, generation prompt, stops, format, parser) and the
//! trigger timeline of a run (where the grammar woke, or why it never did).

use toolrail_llm::record::{LazyNote, TokenRecord};
use toolrail_llm::template::TemplateResult;

use crate::transcript::TemplateRun;

/// A template result as the Grammar pane lists it.
#[derive(Debug, Clone, PartialEq)]
pub struct TemplateInfo {
    /// One line: the format and whether the grammar is lazy.
    pub summary: String,
    /// Name and value rows: grammar, each trigger, preserved tokens, generation prompt, stops,
    /// parser, the request values llama.cpp used.
    pub rows: Vec<(&'static str, String)>,
}

/// Whether the grammar waits for a trigger, in words.
pub fn grammar_mode(result: &TemplateResult) -> &'static str {
    if result.grammar.is_empty() {
        "no grammar (unconstrained)"
    } else if result.grammar_lazy {
        "lazy: dormant until a trigger fires"
    } else {
        "not lazy: constrains from the first token"
    }
}

/// Describes `result` (see [`TemplateInfo`]).
pub fn describe(result: &TemplateResult) -> TemplateInfo {
    let mut rows: Vec<(&'static str, String)> = vec![
        ("format", result.format.clone()),
        ("grammar", grammar_mode(result).to_owned()),
    ];
    // The sampler's triggers (after llama-server's word→token conversion) when a vocabulary
    // is loaded, else the template code's.
    let triggers = result
        .sampler
        .as_ref()
        .map_or(&result.grammar_triggers, |s| &s.triggers);
    if triggers.is_empty() && result.grammar_lazy {
        rows.push(("trigger", "(none: the grammar can never wake)".to_owned()));
    }
    for trigger in triggers {
        let value = match trigger.token {
            Some(id) => format!("{} {:?} (id {id})", trigger.kind, trigger.value),
            None => format!("{} {:?}", trigger.kind, trigger.value),
        };
        rows.push(("trigger", value));
    }
    rows.push((
        "preserved tokens",
        if result.preserved_tokens.is_empty() {
            "(none)".to_owned()
        } else {
            result.preserved_tokens.join(" ")
        },
    ));
    rows.push((
        "generation prompt",
        format!("{:?}", result.generation_prompt),
    ));
    rows.push((
        "additional stops",
        if result.additional_stops.is_empty() {
            "(none)".to_owned()
        } else {
            format!("{:?}", result.additional_stops)
        },
    ));
    let parser_name = parser_name(&result.parser);
    rows.push(("parser", parser_name));
    let i = &result.inputs;
    rows.push((
        "request",
        format!(
            "tool_choice {}, parallel calls {}, thinking {}, reasoning format {} ({} defaults)",
            i.tool_choice,
            if i.parallel_tool_calls { "on" } else { "off" },
            if i.enable_thinking { "on" } else { "off" },
            i.reasoning_format,
            i.defaults
        ),
    ));
    TemplateInfo {
        summary: format!("format {}, grammar {}", result.format, grammar_mode(result)),
        rows,
    }
}

/// The parser's name: its serialized form's first word (the whole is long), with its size.
fn parser_name(parser: &str) -> String {
    if parser.is_empty() {
        return "(the format's built-in parser)".to_owned();
    }
    let head: String = parser
        .chars()
        .take_while(|c| !c.is_whitespace() && *c != '{' && *c != '(')
        .take(40)
        .collect();
    if head.is_empty() {
        format!("serialized parser, {} bytes", parser.len())
    } else {
        format!("{head} ({} bytes serialized)", parser.len())
    }
}

/// Where a run's lazy grammar woke, for a marker on that token.
#[derive(Debug, Clone, PartialEq)]
pub struct FiredMarker {
    /// The token's index in the run.
    pub index: usize,
    /// What fired (the sampler's pattern, or the trigger token).
    pub trigger: String,
    /// The matched text, when a pattern matched.
    pub matched: Option<String>,
    /// The byte of the output where the grammar starts.
    pub grammar_start: u64,
    /// The text replayed into the grammar when it woke.
    pub replayed: String,
}

impl FiredMarker {
    /// The marker's label: the trigger and the matched span.
    pub fn label(&self) -> String {
        match &self.matched {
            Some(m) => format!("trigger fired: {:?} matched {m:?}", self.trigger),
            None => format!("trigger fired: {:?}", self.trigger),
        }
    }

    /// The marker's tooltip: the text replayed into the grammar and where it starts.
    pub fn details(&self) -> String {
        format!(
            "{}\nthe grammar starts at byte {} of the output\nreplayed into the grammar: {:?}",
            self.label(),
            self.grammar_start,
            self.replayed
        )
    }
}

/// The token where a trigger fired, if one did (`output` is the run's text, for the match).
pub fn fired_marker(tokens: &[TokenRecord], output: &str) -> Option<FiredMarker> {
    tokens
        .iter()
        .enumerate()
        .find_map(|(index, t)| match &t.lazy {
            Some(LazyNote::Fired {
                trigger,
                matched,
                grammar_start,
                replayed,
                ..
            }) => Some(FiredMarker {
                index,
                trigger: trigger.clone(),
                matched: matched.and_then(|(from, to)| {
                    let bytes = output.as_bytes();
                    let (from, to) = (usize::try_from(from).ok()?, usize::try_from(to).ok()?);
                    bytes
                        .get(from..to)
                        .map(|b| String::from_utf8_lossy(b).into_owned())
                }),
                grammar_start: *grammar_start,
                replayed: replayed.clone(),
            }),
            _ => None,
        })
}

/// One token's lazy-grammar note in words, with the trigger search time after it (llama.cpp
/// searches the whole text so far, so it grows with the output).
pub fn note_text(note: &LazyNote) -> String {
    match note {
        LazyNote::Dormant { scan_ms } => {
            format!("lazy grammar asleep: nothing masked; trigger search {scan_ms:.3} ms")
        }
        LazyNote::Fired {
            trigger,
            grammar_start,
            scan_ms,
            ..
        } => format!(
            "trigger {trigger:?} fired: the grammar starts at byte {grammar_start}; trigger search {scan_ms:.3} ms"
        ),
    }
}

/// True when the token was generated while the lazy grammar slept (nothing masked).
pub fn is_dormant(token: &TokenRecord) -> bool {
    matches!(token.lazy, Some(LazyNote::Dormant { .. }))
}

/// The trigger timeline of a run in one sentence: how many tokens were free, and where the
/// grammar woke or why it never did (the nearest start of a trigger word). `None` when the run
/// had no lazy grammar. The time spent searching the triggers is [`trigger_search_ms`].
pub fn timeline(run: &TemplateRun, tokens: &[TokenRecord], output: &str) -> Option<String> {
    if !run.result.grammar_lazy || run.result.grammar.is_empty() {
        return None;
    }
    let dormant = tokens.iter().filter(|t| is_dormant(t)).count();
    let what = match fired_marker(tokens, output) {
        Some(m) => match tokens.get(m.index).and_then(|t| t.flag.as_ref()) {
            // The token the trigger woke on was refused: the run ended there.
            Some(refusal) => format!("{} at token {}; then {refusal}", m.label(), m.index),
            None => format!("{} at token {}", m.label(), m.index),
        },
        None => {
            let patterns = run
                .result
                .sampler
                .as_ref()
                .map_or(&[][..], |s| &s.patterns[..]);
            match toolrail_llm::lazy_gate::nearest_miss(patterns, output.as_bytes()) {
                Some(miss) => format!("no trigger fired; nearest: {}", miss.describe()),
                None => "no trigger fired; no trigger word starts in the output".to_owned(),
            }
        }
    };
    Some(format!(
        "{dormant} token(s) free while the grammar slept; {what}"
    ))
}

/// Milliseconds spent searching a run's output for triggers, over all its tokens (llama.cpp
/// searches the whole text so far at each token, so it grows with the output).
pub fn trigger_search_ms(tokens: &[TokenRecord]) -> f64 {
    LazyNote::total_scan_ms(tokens.iter().map(|t| t.lazy.as_ref()))
}
