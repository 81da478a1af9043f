//! What a finished run says about itself, in words: why it stopped, the tokens chosen by hand,
//! what the reasoning budget, the lazy grammar, the budget guard, the compared engines and the
//! server's live check did, llama.cpp's parse, and the verdict. The app (Generation and
//! Transcript panes), `toolrail generate`, `toolrail explain` and the Markdown export all show
//! these lines, so each says the same thing in the same words. Every line is a fact of the
//! transcript (no timings: they differ from run to run and are shown beside, not here).

use toolrail_llm::record::{Sampling, Stop, ThinkingNote, TokenRecord, Totals};
use toolrail_llm::worker::EngineKind;

use super::{TemplateRun, Transcript, Validation};

/// What a line is about; its label is the word the CLI prints before it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Topic {
    /// Why the run stopped.
    Stopped,
    /// Tokens the user chose instead of the sampled ones.
    Forced,
    /// What the reasoning budget did.
    Reasoning,
    /// Where a chat template's lazy grammar woke, or why it never did.
    LazyGrammar,
    /// Sampled tokens the budget guard replaced to finish within the token limit.
    BudgetGuard,
    /// Another engine's masks beside toolrail's: where they differ, where it stopped following.
    ComparedEngines,
    /// A llama-server's tokens checked against the grammar as they came.
    LiveCheck,
    /// llama.cpp's parse of a template run's output.
    Parse,
    /// What went wrong during the run without ending it (a server that parsed no call says
    /// why).
    Reported,
    /// Whether the output is a valid call.
    Validation,
}

impl Topic {
    /// The label (`stopped`, `lazy grammar`, …).
    pub fn label(self) -> &'static str {
        match self {
            Topic::Stopped => "stopped",
            Topic::Forced => "chosen by hand",
            Topic::Reasoning => "reasoning",
            Topic::LazyGrammar => "lazy grammar",
            Topic::BudgetGuard => "budget guard",
            Topic::ComparedEngines => "compared engines",
            Topic::LiveCheck => "live check",
            Topic::Parse => "llama.cpp's parse",
            Topic::Reported => "reported",
            Topic::Validation => "validation",
        }
    }
}

/// How a line reads: a plain fact, a good sign, something to look at, or a failure.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tone {
    /// A fact.
    Plain,
    /// The run did what was asked (a valid call).
    Good,
    /// Worth a look: it may explain a bad output.
    Warning,
    /// The run failed or its output is invalid.
    Bad,
}

/// One line of an explanation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Line {
    /// What it is about.
    pub topic: Topic,
    /// How it reads.
    pub tone: Tone,
    /// The words.
    pub text: String,
}

impl std::fmt::Display for Line {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.topic.label(), self.text)
    }
}

/// The parts of a finished run an explanation reads, borrowed: a transcript's, or a run's as
/// it ends (without building its transcript, which would copy every token).
#[derive(Clone, Copy, Debug)]
pub struct RunFacts<'a> {
    /// Why it stopped.
    pub stop: &'a Stop,
    /// Its tokens.
    pub tokens: &'a [TokenRecord],
    /// Its text.
    pub output: &'a str,
    /// Its sampling (the token limit, the budget guard).
    pub sampling: &'a Sampling,
    /// The engine that masked its tokens.
    pub engine: EngineKind,
    /// Its totals (the mask comparisons).
    pub totals: &'a Totals,
    /// It was streamed from a llama-server.
    pub on_server: bool,
    /// A grammar of toolrail's constrained it (or, on a server, was checked against it).
    pub grammar: bool,
    /// The chat template whose tool calling it followed.
    pub template: Option<&'a TemplateRun>,
    /// The verdict on its output.
    pub validation: Option<&'a Validation>,
    /// What went wrong without ending it.
    pub errors: &'a [String],
}

impl<'a> RunFacts<'a> {
    /// A transcript's facts.
    pub fn of(t: &'a Transcript) -> RunFacts<'a> {
        RunFacts {
            stop: &t.stop,
            tokens: &t.tokens,
            output: &t.output,
            sampling: &t.sampling,
            engine: t.engine,
            totals: &t.totals,
            on_server: t.server.is_some(),
            grammar: t.grammar.is_some(),
            template: t.template.as_ref(),
            validation: t.validation.as_ref(),
            errors: &t.errors,
        }
    }
}

/// The lines that explain a recorded run ([`explain_facts`] of its transcript).
pub fn explain(t: &Transcript) -> Vec<Line> {
    explain_facts(&RunFacts::of(t))
}

/// The lines that explain a finished run, in the order they happened: why it stopped first,
/// the verdict last.
pub fn explain_facts(t: &RunFacts<'_>) -> Vec<Line> {
    let mut lines = vec![stopped(t)];
    lines.extend(forced(t.tokens));
    lines.extend(reasoning(t.tokens));
    if let Some(run) = t.template
        && let Some(text) = crate::template_info::timeline(run, t.tokens, t.output)
    {
        lines.push(line(Topic::LazyGrammar, Tone::Plain, text));
    }
    lines.extend(budget_guard(t.tokens));
    lines.extend(compared_engines(t));
    lines.extend(live_check(t));
    lines.extend(parse(t));
    lines.extend(
        t.errors
            .iter()
            .map(|e| line(Topic::Reported, Tone::Warning, e.clone())),
    );
    lines.extend(validation(t));
    lines
}

fn line(topic: Topic, tone: Tone, text: String) -> Line {
    Line { topic, tone, text }
}

/// Why a run stopped, in a few words (a run's status, a chip's caption): `token limit`,
/// `error: …`. [`explain`]'s first line says it whole.
pub fn stop_words(stop: &Stop) -> String {
    match stop {
        Stop::EndOfGeneration => "end of generation".to_owned(),
        Stop::MaxTokens => "token limit".to_owned(),
        Stop::Cancelled => "cancelled".to_owned(),
        Stop::DeadEnd { offset, .. } => format!("dead end at output byte {offset}"),
        Stop::StopString { stop } => format!("stop string {stop:?}"),
        Stop::Error { message } => format!("error: {message}"),
    }
}

/// True when the grammar was active after the last token and could not end there (no stack
/// was complete); false when it could, or nothing says (unconstrained, a dormant lazy grammar).
fn grammar_incomplete(tokens: &[TokenRecord]) -> bool {
    tokens
        .last()
        .and_then(|t| t.stacks.as_ref())
        .is_some_and(|s| !s.stacks.iter().any(|stack| stack.frames.is_empty()))
}

fn stopped(t: &RunFacts<'_>) -> Line {
    let n = t.tokens.len();
    let by_hand = t.tokens.last().is_some_and(|last| last.forced);
    let (tone, text) = match t.stop {
        Stop::EndOfGeneration if by_hand => (
            Tone::Plain,
            format!(
                "the end of generation was chosen by hand, as token {}",
                n.saturating_sub(1)
            ),
        ),
        Stop::EndOfGeneration if grammar_incomplete(t.tokens) => (
            Tone::Warning,
            format!(
                "the model ended the generation after {n} token(s), before the grammar was \
                 complete: the output is cut off"
            ),
        ),
        Stop::EndOfGeneration => (
            Tone::Plain,
            format!("the model ended the generation after {n} token(s)"),
        ),
        Stop::MaxTokens if grammar_incomplete(t.tokens) => (
            Tone::Warning,
            format!(
                "the token limit ({}) was reached before the grammar was complete: the output \
                 is cut off{}",
                t.sampling.max_tokens,
                if t.sampling.finish_in_budget {
                    "; the budget guard was on, but could not make sure of a finish in so \
                     few tokens"
                } else {
                    ""
                }
            ),
        ),
        Stop::MaxTokens => (
            Tone::Plain,
            format!("the token limit ({}) was reached", t.sampling.max_tokens),
        ),
        Stop::Cancelled => (Tone::Plain, format!("cancelled after {n} token(s)")),
        Stop::StopString { stop } => (
            Tone::Plain,
            format!(
                "the stop string {stop:?} appeared after {n} token(s); the output ends before it, \
                 as llama-server returns it"
            ),
        ),
        Stop::DeadEnd { .. } | Stop::Error { .. } => (
            Tone::Bad,
            t.stop.failure().unwrap_or_else(|| stop_words(t.stop)),
        ),
    };
    line(Topic::Stopped, tone, text)
}

/// At most this many tokens are listed in one line; the rest are counted.
const LISTED: usize = 5;

/// `3 ("<"), 4 ("><") and 2 more`.
fn listed<'a>(tokens: impl Iterator<Item = &'a TokenRecord>) -> (usize, String) {
    let all: Vec<&TokenRecord> = tokens.collect();
    let mut text = all
        .iter()
        .take(LISTED)
        .map(|t| format!("{} ({:?})", t.index, t.piece))
        .collect::<Vec<_>>()
        .join(", ");
    if all.len() > LISTED {
        text.push_str(&format!(" and {} more", all.len() - LISTED));
    }
    (all.len(), text)
}

fn forced(tokens: &[TokenRecord]) -> Option<Line> {
    let (n, list) = listed(tokens.iter().filter(|t| t.forced));
    (n > 0).then(|| {
        line(
            Topic::Forced,
            Tone::Plain,
            format!("{n} token(s) chosen instead of the sampled one: {list}"),
        )
    })
}

fn reasoning(tokens: &[TokenRecord]) -> Option<Line> {
    let mut parts = Vec::new();
    for t in tokens {
        match &t.thinking {
            Some(ThinkingNote::Started { budget }) => parts.push(format!(
                "thinking started at token {} ({})",
                t.index,
                budget.map_or("no limit".to_owned(), |b| format!("budget {b} tokens"))
            )),
            Some(ThinkingNote::Exhausted) => parts.push(format!(
                "the budget ran out at token {} ({:?}): the end was forced from token {}",
                t.index,
                t.piece,
                t.index + 1
            )),
            Some(ThinkingNote::Ended { by_budget }) => parts.push(format!(
                "thinking ended at token {} ({:?}){}",
                t.index,
                t.piece,
                if *by_budget { ", forced" } else { "" }
            )),
            _ => {}
        }
    }
    (!parts.is_empty()).then(|| line(Topic::Reasoning, Tone::Plain, parts.join("; ")))
}

fn budget_guard(tokens: &[TokenRecord]) -> Option<Line> {
    let replaced: Vec<&TokenRecord> = tokens
        .iter()
        .filter(|t| t.budget_replaced.is_some())
        .collect();
    let first = replaced.first()?;
    let why = first
        .budget
        .as_ref()
        .map_or_else(String::new, |b| format!(": {}", b.describe()));
    Some(line(
        Topic::BudgetGuard,
        Tone::Warning,
        format!(
            "{} sampled token(s) replaced so that the grammar could finish within the token \
             limit; the first at token {} (took {:?}){why}",
            replaced.len(),
            first.index,
            first.piece
        ),
    ))
}

/// An engine as people name it: `llama.cpp`, `llguidance`, `toolrail`.
fn engine_name(engine: EngineKind) -> &'static str {
    match engine {
        EngineKind::Llama => "llama.cpp",
        other => other.name(),
    }
}

fn compared_engines(t: &RunFacts<'_>) -> Vec<Line> {
    let mut lines = Vec::new();
    // the run's own engine against toolrail's, then the engines compared beside it
    let mut engines = vec![(t.engine, t.totals.compared_steps, t.totals.differing_steps)];
    engines.extend(
        t.totals
            .other_engines
            .iter()
            .map(|o| (o.engine, o.compared_steps, o.differing_steps)),
    );
    for (engine, compared, differing) in engines {
        if compared == 0 {
            continue;
        }
        let first = t.tokens.iter().find_map(|r| {
            r.mask_differences()
                .find(|d| d.engine == engine)
                .map(|d| (r.index, d.describe()))
        });
        let text = match (differing, first) {
            (0, _) => format!(
                "{}'s mask and toolrail's agree at all {compared} step(s) compared",
                engine_name(engine)
            ),
            (_, Some((index, what))) => format!(
                "{}'s mask and toolrail's differ at {differing} of {compared} step(s); first at \
                 token {index}: {what}",
                engine_name(engine)
            ),
            (_, None) => format!(
                "{}'s mask and toolrail's differ at {differing} of {compared} step(s)",
                engine_name(engine)
            ),
        };
        let tone = if differing == 0 {
            Tone::Plain
        } else {
            Tone::Warning
        };
        lines.push(line(Topic::ComparedEngines, tone, text));
    }
    for r in t.tokens {
        for m in &r.other_masks {
            if let Some(why) = &m.stopped {
                lines.push(line(
                    Topic::ComparedEngines,
                    Tone::Warning,
                    format!(
                        "{} stopped following the run at token {} ({:?}): {why}",
                        engine_name(m.engine),
                        r.index,
                        r.piece
                    ),
                ));
            }
        }
    }
    lines
}

fn live_check(t: &RunFacts<'_>) -> Option<Line> {
    if !t.on_server || !t.grammar {
        return None;
    }
    let (n, list) = listed(t.tokens.iter().filter(|r| r.flag.is_some()));
    let checked = t.tokens.iter().filter(|r| r.stacks.is_some()).count();
    Some(if n == 0 {
        line(
            Topic::LiveCheck,
            Tone::Plain,
            format!(
                "the grammar allows every token the server sent ({checked} of {} followed)",
                t.tokens.len()
            ),
        )
    } else {
        let first = t
            .tokens
            .iter()
            .find_map(|r| r.flag.as_ref())
            .cloned()
            .unwrap_or_default();
        line(
            Topic::LiveCheck,
            Tone::Bad,
            format!("the server sent {n} token(s) the grammar forbids: {list}; the first: {first}"),
        )
    })
}

fn parse(t: &RunFacts<'_>) -> Option<Line> {
    let run = t.template?;
    Some(match (&run.parsed, &run.parse_error) {
        (Some(parsed), _) => line(
            Topic::Parse,
            Tone::Plain,
            format!(
                "content {:?}, reasoning {:?}, {} call(s){}",
                parsed.content,
                parsed.reasoning_content,
                parsed.tool_calls.len(),
                parsed
                    .tool_calls
                    .iter()
                    .map(|c| format!("; {}({})", c.name, c.arguments))
                    .collect::<String>()
            ),
        ),
        (None, error) => line(
            Topic::Parse,
            Tone::Bad,
            format!("failed: {}", error.as_deref().unwrap_or("no reason given")),
        ),
    })
}

fn validation(t: &RunFacts<'_>) -> Option<Line> {
    let v = t.validation?;
    if let Some(error) = &v.error {
        return Some(line(
            Topic::Validation,
            Tone::Bad,
            format!("cannot validate the output: {error}"),
        ));
    }
    if v.valid.is_none() {
        // no tool set: only calls found in free text
        let found = v.extracted.as_ref().map_or(0, Vec::len);
        return Some(line(
            Topic::Validation,
            Tone::Plain,
            format!("no tool set to validate against; {found} call(s) found in the free text"),
        ));
    }
    if !v.is_valid() {
        return Some(line(
            Topic::Validation,
            Tone::Bad,
            format!("invalid: {}", v.problems().join("; ")),
        ));
    }
    // a call is what was asked for; a valid answer without one is not a success
    let calls = if let Some(run) = t.template {
        Some((
            run.parsed.as_ref().map_or(0, |p| p.tool_calls.len()),
            "llama.cpp's parse",
        ))
    } else {
        v.server_calls
            .as_ref()
            .map(|calls| (calls.len(), "the server's parser"))
    };
    Some(match calls {
        Some((0, by)) => line(
            Topic::Validation,
            Tone::Warning,
            format!("no tool call: {by} found only text (valid, but not a call)"),
        ),
        Some((n, by)) => line(
            Topic::Validation,
            Tone::Good,
            format!("valid: {by} found {n} call(s), each valid for its tool"),
        ),
        None => line(Topic::Validation, Tone::Good, "valid call".to_owned()),
    })
}
