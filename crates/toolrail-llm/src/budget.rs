//! What a tool catalog costs in llama.cpp's grammar, whether llama.cpp loads it, and which tool
//! and property break it (`toolrail budget`).
//!
//! The grammar is built as llama-server b11434 builds it from a chat template
//! ([`GrammarBuilder::Template`]) or as toolrail writes it for one of its envelopes
//! ([`GrammarBuilder::Envelope`]); the verdict is llama.cpp's own loader, linked in
//! ([`llama_grammar_loads`]), with toolrail's parser (which agrees with llama.cpp's, error for
//! error) saying where and why.
//!
//! The per-tool table comes from one build: a template's grammar is cut into each tool's slice
//! (its rules, see [`slice`]); toolrail's envelopes, cheap to build, are built per tool. Blame is
//! found by construction, never guessed: the first tool refused in the table is built again
//! alone (and then its properties one at a time) to confirm it; where no tool fails alone (a
//! limit the whole catalog crosses together), the shortest prefix of the catalog that fails names
//! the tool that crosses it.

pub mod project;
mod slice;

use std::sync::Arc;
use std::time::Instant;

use serde::Serialize;
use serde_json::{Value, json};
use toolrail_engine::Engine;
use toolrail_engine::sample::{Sampler, SplitMix64};
use toolrail_gbnf::parser::MAX_REPETITION;
use toolrail_gbnf::{ElementKind, Grammar, Severity};
use toolrail_schema::JsonPointer;
use toolrail_tools::grammar::{GrammarOptions, tool_call_grammar};
use toolrail_tools::toolset::ToolSet;

use crate::template::{
    ChatTemplates, TemplateRequest, Trigger, TriggerSearchTiming, llama_grammar_loads,
    measure_trigger_search,
};

/// The output lengths (bytes) the trigger search is timed at: its cost per character is the
/// slope between them.
const TRIGGER_SEARCH_LENGTHS: [usize; 2] = [1_000, 4_000];

/// Bytes llama.cpp holds per grammar element (`llama_grammar_element`: type and value, 32 bits
/// each).
const ELEMENT_BYTES: usize = 8;
/// Bytes of a rule's `std::vector` header in llama.cpp's rule table (pointer, size, capacity).
const RULE_BYTES: usize = 24;

/// How the catalog's grammar is built.
pub enum GrammarBuilder<'a> {
    /// toolrail's own tool-call grammar for one envelope.
    Envelope(GrammarOptions),
    /// llama-server's: the chat template's grammar for this request, its tools replaced by the
    /// catalog (or the part of it being probed).
    Template {
        /// The chat template (and vocabulary, if any).
        templates: &'a ChatTemplates,
        /// The request: messages, `tool_choice`, parallel calls, thinking.
        request: Box<TemplateRequest>,
    },
}

/// A grammar built for some tools: its text and the lazy triggers that wake it.
struct Built {
    grammar: String,
    triggers: Vec<Trigger>,
}

impl GrammarBuilder<'_> {
    /// The grammar for `tools` (OpenAI `tools` entries, as a client sends them). Err: why no
    /// grammar could be built at all (the template refused the request, a tool toolrail cannot
    /// convert), in words.
    fn build(&self, tools: &[Value]) -> Result<Built, String> {
        match self {
            GrammarBuilder::Envelope(options) => {
                let set = ToolSet::from_value(&Value::Array(tools.to_vec()))
                    .map_err(|e| e.to_string())?;
                let grammar = tool_call_grammar(&set, options).map_err(|e| e.to_string())?;
                Ok(Built {
                    grammar: grammar.text,
                    triggers: Vec::new(),
                })
            }
            GrammarBuilder::Template { templates, request } => {
                let request = TemplateRequest {
                    tools: tools.to_vec(),
                    ..(**request).clone()
                };
                let result = templates.build(&request).map_err(|e| e.to_string())?;
                Ok(Built {
                    grammar: result.grammar,
                    triggers: if result.grammar_lazy {
                        result.grammar_triggers
                    } else {
                        Vec::new()
                    },
                })
            }
        }
    }
}

/// Why llama.cpp does not load a grammar.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Refusal {
    /// toolrail's finding (its parser and loader checks agree with llama.cpp's), with its code
    /// and the grammar's line and column: `GB011 at 3:14: this repetition would make …`.
    pub finding: String,
    /// What llama.cpp itself says for that finding, where toolrail knows its words.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub llama_message: Option<String>,
}

/// What one grammar costs llama.cpp.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct GrammarCost {
    /// The grammar text's size.
    pub bytes: usize,
    /// Rules after llama.cpp's rewrite (groups and repetitions become rules of their own).
    pub rules: usize,
    /// Grammar elements llama.cpp holds.
    pub elements: usize,
    /// The largest count llama.cpp's repetition check computes, against its limit of 2000.
    pub largest_repetition: u64,
    /// The longest chain of rule references from `root` before a rule repeats: how deep
    /// llama.cpp's stacks grow.
    pub depth: usize,
    /// The stacks llama.cpp keeps alive while reading one call the grammar allows (a readable
    /// one drawn with a fixed seed): the median over its characters, and the most. None when
    /// no call could be drawn (a grammar of tokens, or refused).
    pub stacks: Option<StackCount>,
    /// The memory llama.cpp's parsed grammar holds for its rules (elements and rule headers;
    /// the stacks it builds while sampling come on top).
    pub memory_bytes: usize,
    /// How long toolrail's parser and loader checks took, in milliseconds.
    pub compile_ms: f64,
    /// Why llama.cpp refuses it; `None`: it loads.
    pub refusal: Option<Refusal>,
}

impl GrammarCost {
    /// Whether llama.cpp loads the grammar.
    pub fn loads(&self) -> bool {
        self.refusal.is_none()
    }
}

/// Live stacks along one call the grammar allows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct StackCount {
    /// The median over the call's characters.
    pub median: usize,
    /// The most at any character.
    pub most: usize,
}

/// What one tool of the catalog costs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolCost {
    /// The tool.
    pub name: String,
    /// Its grammar's cost (see [`PerTool`] for which grammar).
    pub cost: GrammarCost,
    /// Its share of the catalog: its grammar's bytes over the sum of every tool's.
    pub share: f64,
}

/// Which grammar each tool's cost is measured on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PerTool {
    /// Its slice of the catalog's grammar: the rules reachable from its own rule, shared ones
    /// included, under a root of their own (one build for the whole catalog).
    Sliced,
    /// Its grammar built alone, the catalog reduced to that tool.
    Built,
}

/// What breaks the catalog's grammar.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Blame {
    /// The tool.
    pub tool: String,
    /// Its place in the catalog (0 first).
    pub index: usize,
    /// JSON pointer into its parameters (`/properties/tags`); empty: the tool as a whole.
    pub pointer: String,
    /// How it was found.
    pub how: BlameKind,
    /// llama.cpp's refusal of the smallest grammar that shows it.
    pub refusal: Refusal,
}

/// How a [`Blame`] was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum BlameKind {
    /// The tool's grammar alone is refused (with the property, when one alone is refused too).
    Alone,
    /// No tool fails alone: the catalog's tools up to this one load, and adding it makes the
    /// grammar fail (a limit they cross together).
    Crosses,
}

/// A lazy trigger and what searching for it costs llama.cpp per generated token.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TriggerCost {
    /// The trigger as llama.cpp reports it.
    pub trigger: Trigger,
    /// Whether llama.cpp searches the whole output for it again on every token (word and
    /// pattern triggers; a token trigger is matched on the token alone).
    pub rescans: bool,
}

/// llama.cpp's published cost of its lazy-grammar trigger search: 27.75 ns per character of
/// output on every token (llama.cpp issue #27615: about 60 s over a 32k-token output, for the
/// reporter's catalog; the search runs every pattern, so it grows with their number).
pub const PUBLISHED_NS_PER_CHAR: f64 = 27.75;

/// The budget of a catalog under one grammar builder.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Budget {
    /// The whole catalog's grammar.
    pub whole: GrammarCost,
    /// Each tool, in catalog order.
    pub tools: Vec<ToolCost>,
    /// How each tool's cost was measured.
    pub per_tool: PerTool,
    /// What breaks the catalog, when it does not load and the blame could be found.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub blame: Option<Blame>,
    /// The lazy triggers (none when the grammar is not lazy).
    pub triggers: Vec<TriggerCost>,
    /// llama.cpp's search for the triggers timed on this machine (None when no trigger is
    /// searched over the output, or the timing failed: see `trigger_search_error`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trigger_search: Option<TriggerSearchTiming>,
    /// Why the trigger search could not be timed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trigger_search_error: Option<String>,
}

impl Budget {
    /// Whether llama.cpp loads the catalog's grammar.
    pub fn fits(&self) -> bool {
        self.whole.loads()
    }

    /// How many triggers llama.cpp searches the whole output for again on every token.
    pub fn rescanned_triggers(&self) -> usize {
        self.triggers.iter().filter(|t| t.rescans).count()
    }

    /// Predicted trigger search time per token, in milliseconds, once the output holds
    /// `chars` characters, from the search timed on this machine; 0 when no trigger is
    /// searched that way or it could not be timed.
    pub fn trigger_ms_per_token(&self, chars: usize) -> f64 {
        match &self.trigger_search {
            Some(timing) if self.rescanned_triggers() > 0 => timing.ns_at(chars) / 1e6,
            _ => 0.0,
        }
    }

    /// The same from llama.cpp's published constant ([`PUBLISHED_NS_PER_CHAR`], one reporter's
    /// catalog and machine); 0 when no trigger is searched that way.
    pub fn published_trigger_ms_per_token(&self, chars: usize) -> f64 {
        match self.rescanned_triggers() {
            0 => 0.0,
            _ => chars as f64 * PUBLISHED_NS_PER_CHAR / 1e6,
        }
    }
}

/// Why the budget could not be made at all.
#[derive(Debug, thiserror::Error)]
pub enum BudgetError {
    /// The catalog has no tool.
    #[error("the catalog has no tool")]
    Empty,
}

/// The budget of `tools` (OpenAI `tools` entries, as a client sends them) under `builder`,
/// each tool's cost from its slice of one build where the grammar allows it.
pub fn budget(tools: &[Value], builder: &GrammarBuilder<'_>) -> Result<Budget, BudgetError> {
    budget_measured(tools, builder, PerTool::Sliced)
}

/// [`budget`], each tool measured as `prefer` says ([`PerTool::Sliced`] falls back to
/// building each tool alone where a grammar cannot be sliced): the bench compares the two.
pub fn budget_measured(
    tools: &[Value],
    builder: &GrammarBuilder<'_>,
    prefer: PerTool,
) -> Result<Budget, BudgetError> {
    measure(tools, builder, prefer, TriggerTiming::Measure)
}

/// Whether a budget times llama.cpp's trigger search (a budget made only for its sizes, as
/// the projection's, skips it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TriggerTiming {
    Measure,
    Skip,
}

/// The catalog's sizes, per tool, without timing the trigger search: what the projection
/// ranks tools by.
pub(crate) fn sizes_only(
    tools: &[Value],
    builder: &GrammarBuilder<'_>,
) -> Result<Budget, BudgetError> {
    measure(tools, builder, PerTool::Sliced, TriggerTiming::Skip)
}

fn measure(
    tools: &[Value],
    builder: &GrammarBuilder<'_>,
    prefer: PerTool,
    timing: TriggerTiming,
) -> Result<Budget, BudgetError> {
    if tools.is_empty() {
        return Err(BudgetError::Empty);
    }
    // a catalog no grammar can be built for is refused as llama-server refuses the request
    let built = builder.build(tools);
    let (whole, triggers) = match &built {
        Ok(built) => (cost(&built.grammar, Verdict::Llama), built.triggers.clone()),
        Err(e) => (unbuilt(e.clone()), Vec::new()),
    };
    let names: Vec<String> = tools.iter().map(tool_name).collect();
    let sliced = match (&built, builder, prefer) {
        (Ok(built), GrammarBuilder::Template { .. }, PerTool::Sliced) => {
            slice::slices(&built.grammar, &names)
        }
        _ => None,
    };
    let per_tool = match sliced {
        Some(_) => PerTool::Sliced,
        None => PerTool::Built,
    };
    let costs: Vec<GrammarCost> = match sliced {
        Some(slices) => costs_in_parallel(&slices),
        // a tool that cannot be built alone is refused as llama-server would refuse it
        None => tools
            .iter()
            .map(|tool| match builder.build(std::slice::from_ref(tool)) {
                Ok(b) => cost(&b.grammar, Verdict::Toolrail),
                Err(e) => unbuilt(e),
            })
            .collect(),
    };
    let total: usize = costs.iter().map(|c| c.bytes).sum();
    let tool_costs: Vec<ToolCost> = names
        .into_iter()
        .zip(costs)
        .map(|(name, cost)| ToolCost {
            share: if total == 0 {
                0.0
            } else {
                cost.bytes as f64 / total as f64
            },
            name,
            cost,
        })
        .collect();
    let blame = match whole.loads() {
        true => None,
        false => find_blame(tools, &tool_costs, builder),
    };
    let triggers: Vec<TriggerCost> = triggers
        .into_iter()
        .map(|trigger| TriggerCost {
            rescans: !matches!(trigger.kind, crate::template::TriggerKind::Token),
            trigger,
        })
        .collect();
    let rescanned: Vec<Trigger> = triggers
        .iter()
        .filter(|t| t.rescans)
        .map(|t| t.trigger.clone())
        .collect();
    let (trigger_search, trigger_search_error) =
        match rescanned.is_empty() || timing == TriggerTiming::Skip {
            true => (None, None),
            false => match measure_trigger_search(&rescanned, &TRIGGER_SEARCH_LENGTHS) {
                Ok(timing) => (Some(timing), None),
                Err(e) => (None, Some(e.to_string())),
            },
        };
    Ok(Budget {
        whole,
        tools: tool_costs,
        per_tool,
        blame,
        triggers,
        trigger_search,
        trigger_search_error,
    })
}

/// One catalog from several tool sets (OpenAI `tools` entries): every tool once by name, in
/// order, then, up to `count` tools, renamed copies (`name_2`, `name_3`, …) of them: the big
/// catalog a user joining many MCP servers sends.
pub fn joined_catalog(sets: &[Vec<Value>], count: Option<usize>) -> Vec<Value> {
    let mut distinct: Vec<Value> = Vec::new();
    for tool in sets.iter().flatten() {
        let name = tool_name(tool);
        if !distinct.iter().any(|t| tool_name(t) == name) {
            distinct.push(tool.clone());
        }
    }
    let Some(count) = count else {
        return distinct;
    };
    if distinct.is_empty() {
        return distinct;
    }
    let mut out = Vec::with_capacity(count);
    for copy in 1.. {
        for tool in &distinct {
            if out.len() == count {
                return out;
            }
            let mut t = tool.clone();
            if copy > 1 {
                let renamed = json!(format!("{}_{copy}", tool_name(tool)));
                if let Some(name) = t.pointer_mut("/function/name") {
                    *name = renamed;
                } else if let Some(object) = t.as_object_mut() {
                    object.insert("name".into(), renamed);
                }
            }
            out.push(t);
        }
    }
    out
}

/// llama.cpp's lazy grammar sampler timed on a long output that never fires it: the sampler
/// llama-server builds from `grammar` and `setup` (the template's patterns and trigger tokens,
/// with the model's vocabulary) accepts [`TRIGGER_SEARCH_PROSE`] repeated, token by token, up
/// to `tokens` tokens. Answers, for each of `lengths` (output bytes) the output reached, the
/// mean time llama.cpp took to accept one token over the 32 tokens that reached it: the
/// search the issue reports grows with the output, the token's own work does not.
pub fn time_lazy_sampler(
    model: &crate::Model,
    grammar: &str,
    setup: &crate::template::SamplerSetup,
    tokens: usize,
    lengths: &[usize],
) -> Result<Vec<crate::template::TriggerSearchPoint>, crate::LlmError> {
    const WINDOW: usize = 32;
    let trigger_tokens: Vec<u32> = setup
        .tokens
        .iter()
        .filter_map(|&t| u32::try_from(t).ok())
        .collect();
    let mut sampler = crate::LlamaGrammarSampler::new_lazy(
        model,
        grammar,
        "root",
        &setup.patterns,
        &trigger_tokens,
    )?;
    let prose = crate::template::TRIGGER_SEARCH_PROSE.repeat(16);
    let chunk = model.tokenize(&prose, false, false);
    if chunk.is_empty() {
        return Ok(Vec::new());
    }
    // (output bytes after the token, nanoseconds to accept it)
    let mut times: Vec<(usize, f64)> = Vec::with_capacity(tokens);
    let mut chars = 0usize;
    for &token in chunk.iter().cycle().take(tokens) {
        let started = Instant::now();
        sampler.accept(token)?;
        let ns = started.elapsed().as_secs_f64() * 1e9;
        chars += model.piece(token).len();
        times.push((chars, ns));
    }
    Ok(lengths
        .iter()
        .filter_map(|&length| {
            let reached = times.iter().position(|(c, _)| *c >= length)?;
            let from = (reached + 1).saturating_sub(WINDOW);
            let window = &times[from..=reached];
            let mean = window.iter().map(|(_, ns)| ns).sum::<f64>() / window.len() as f64;
            Some(crate::template::TriggerSearchPoint {
                chars: times[reached].0,
                ns: mean,
            })
        })
        .collect())
}

/// The name a client definition gives its tool.
fn tool_name(tool: &Value) -> String {
    tool.pointer("/function/name")
        .or_else(|| tool.get("name"))
        .and_then(Value::as_str)
        .unwrap_or("?")
        .to_owned()
}

/// Each slice's cost (toolrail's verdict), the slices shared out over the machine's cores.
fn costs_in_parallel(slices: &[String]) -> Vec<GrammarCost> {
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .clamp(1, 8);
    let chunk = slices.len().div_ceil(threads).max(1);
    std::thread::scope(|scope| {
        let handles: Vec<_> = slices
            .chunks(chunk)
            .map(|part| {
                scope.spawn(move || {
                    part.iter()
                        .map(|grammar| cost(grammar, Verdict::Toolrail))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| match h.join() {
                Ok(costs) => costs,
                // a panic in a costing thread is a bug; it is raised again here
                Err(panic) => std::panic::resume_unwind(panic),
            })
            .collect()
    })
}

/// A grammar that could not even be built: refused, with the builder's reason.
fn unbuilt(reason: String) -> GrammarCost {
    GrammarCost {
        refusal: Some(Refusal {
            finding: reason,
            llama_message: None,
        }),
        ..GrammarCost::default()
    }
}

/// Who says whether a grammar loads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// The linked llama.cpp's loader (after toolrail's parser, which refuses first what both
    /// refuse, so llama.cpp never prints a refused grammar).
    Llama,
    /// toolrail's parser and loader checks alone (they agree with llama.cpp's, error for error,
    /// on every held-out corpus): for the per-tool table, where asking llama.cpp hundreds of
    /// times would only repeat the answer.
    Toolrail,
}

/// The cost of one grammar text, and the verdict on it.
pub fn cost(grammar: &str, verdict: Verdict) -> GrammarCost {
    let started = Instant::now();
    let parsed = Grammar::parse(grammar);
    let compile_ms = started.elapsed().as_secs_f64() * 1000.0;
    let mut out = GrammarCost {
        bytes: grammar.len(),
        compile_ms,
        ..GrammarCost::default()
    };
    if grammar.is_empty() {
        // no grammar: llama-server constrains nothing, so nothing can fail to load
        return out;
    }
    match parsed {
        Ok(g) => {
            out.rules = g.rule_count();
            out.elements = g.elements().len();
            out.largest_repetition = g.parsed().largest_repetition;
            out.memory_bytes = out.elements * ELEMENT_BYTES + out.rules * RULE_BYTES;
            out.depth = nesting_depth(&g);
            out.stacks = stacks_along_a_call(g);
            // the linked llama.cpp decides (toolrail's parser agrees with it, error for error)
            if verdict == Verdict::Llama && !llama_grammar_loads(grammar).unwrap_or(false) {
                out.refusal = Some(Refusal {
                    finding: "llama.cpp's grammar loader refuses it".to_owned(),
                    llama_message: None,
                });
            }
        }
        Err(e) => {
            let first = e
                .diagnostics
                .iter()
                .find(|d| d.severity == Severity::Error)
                .or(e.diagnostics.first());
            out.refusal = Some(match first {
                Some(d) => Refusal {
                    finding: format!("{} at {}: {}", d.code.as_str(), d.position, d.message),
                    llama_message: llama_words(d),
                },
                None => Refusal {
                    finding: "toolrail's parser refuses it".to_owned(),
                    llama_message: None,
                },
            });
        }
    }
    out
}

/// The longest chain of rule references from `root` in which no rule repeats (a depth-first
/// walk without recursion: a grammar's rule graph can be deep).
fn nesting_depth(g: &Grammar) -> usize {
    const NEW: u8 = 0;
    const ON_PATH: u8 = 1;
    const DONE: u8 = 2;
    let mut depth = vec![0usize; g.rule_count()];
    let mut mark = vec![NEW; g.rule_count()];
    let root = g.root();
    mark[root as usize] = ON_PATH;
    // (rule, index of the next element to look at)
    let mut path: Vec<(u32, usize)> = vec![(root, 0)];
    while let Some(&(rule, at)) = path.last() {
        let elements = g.rule(rule);
        let next = elements[at.min(elements.len())..]
            .iter()
            .position(|e| e.kind == ElementKind::RuleRef && mark[e.value as usize] == NEW)
            .map(|i| at + i);
        match next {
            Some(i) => {
                if let Some(top) = path.last_mut() {
                    top.1 = i + 1;
                }
                let child = elements[i].value;
                mark[child as usize] = ON_PATH;
                path.push((child, 0));
            }
            None => {
                let below = elements
                    .iter()
                    .filter(|e| e.kind == ElementKind::RuleRef && mark[e.value as usize] == DONE)
                    .map(|e| depth[e.value as usize])
                    .max()
                    .unwrap_or(0);
                depth[rule as usize] = below + 1;
                mark[rule as usize] = DONE;
                path.pop();
            }
        }
    }
    depth[root as usize]
}

/// The live stacks while reading one readable call of `grammar`, drawn with a fixed seed.
fn stacks_along_a_call(grammar: Grammar) -> Option<StackCount> {
    const LONGEST: u64 = 4096;
    let grammar = Arc::new(grammar);
    let text = Sampler::new(&grammar)
        .readable()
        .sample(&mut SplitMix64::new(2026), LONGEST)
        .ok()?;
    let mut engine = Engine::new(Arc::clone(&grammar));
    let mut state = engine.initial();
    let mut counts = Vec::with_capacity(text.len());
    for c in text.chars() {
        state = engine.accept_char(state, u32::from(c));
        if state.is_dead() || state.is_exploded() {
            break;
        }
        counts.push(engine.stacks(state).len());
    }
    counts.sort_unstable();
    Some(StackCount {
        median: *counts.get(counts.len() / 2)?,
        most: *counts.last()?,
    })
}

/// llama.cpp b11434's own message for a refusal toolrail reports as `d`, where llama.cpp has
/// one fixed text for it (`llama-grammar.cpp`, `parse_sequence`).
fn llama_words(d: &toolrail_gbnf::Diagnostic) -> Option<String> {
    if d.code != toolrail_gbnf::Code::RepetitionLimit {
        return None;
    }
    if d.message.starts_with("a minimum of") {
        return Some(
            "number of repetitions exceeds sane defaults, please reduce the number of repetitions"
                .to_owned(),
        );
    }
    d.message
        .starts_with("this repetition would make llama.cpp create")
        .then(|| {
            format!(
                "number of rules that are going to be repeated multiplied by the new repetition \
             exceeds sane defaults, please reduce the number of repetitions or rule complexity \
             (its limit: {MAX_REPETITION})"
            )
        })
}

/// What breaks a catalog whose grammar llama.cpp refuses: the first tool refused alone (and
/// its first property refused alone), else the tool whose addition first makes the catalog's
/// prefix fail.
fn find_blame(tools: &[Value], costs: &[ToolCost], builder: &GrammarBuilder<'_>) -> Option<Blame> {
    // the table's refusals, each confirmed by building that tool alone
    for (i, _) in costs.iter().enumerate().filter(|(_, c)| !c.cost.loads()) {
        let Some(alone) = refusal_of(std::slice::from_ref(&tools[i]), builder) else {
            continue;
        };
        let (pointer, refusal) =
            property_blame(&tools[i], builder).unwrap_or((String::new(), alone));
        return Some(Blame {
            tool: costs[i].name.clone(),
            index: i,
            pointer,
            how: BlameKind::Alone,
            refusal,
        });
    }
    // no tool fails alone: the shortest failing prefix (prefixes only grow: binary search)
    let fails = |n: usize| refusal_of(&tools[..n], builder);
    let (mut lo, mut hi) = (1, tools.len());
    let mut refusal = fails(hi)?;
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        match fails(mid) {
            Some(r) => {
                hi = mid;
                refusal = r;
            }
            None => lo = mid + 1,
        }
    }
    Some(Blame {
        tool: costs[hi - 1].name.clone(),
        index: hi - 1,
        pointer: String::new(),
        how: BlameKind::Crosses,
        refusal,
    })
}

/// Why llama.cpp refuses the grammar of `tools` (None: it loads); a grammar that cannot be
/// built is refused with the builder's reason.
fn refusal_of(tools: &[Value], builder: &GrammarBuilder<'_>) -> Option<Refusal> {
    match builder.build(tools) {
        Ok(b) => cost(&b.grammar, Verdict::Llama).refusal,
        Err(e) => unbuilt(e).refusal,
    }
}

/// The first property of `tool` whose schema alone (in a tool of that one property) makes the
/// grammar fail, with the refusal; `None` when none does alone.
fn property_blame(tool: &Value, builder: &GrammarBuilder<'_>) -> Option<(String, Refusal)> {
    let function = tool.get("function").unwrap_or(tool);
    let parameters = function.get("parameters")?;
    let properties = parameters.get("properties")?.as_object()?;
    let required: Vec<&str> = parameters
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    for (name, schema) in properties {
        let mut probe_parameters = parameters.clone();
        if let Some(object) = probe_parameters.as_object_mut() {
            object.insert("properties".into(), json!({ name.clone(): schema }));
            let kept: Vec<&str> = required.iter().copied().filter(|r| r == name).collect();
            object.insert("required".into(), json!(kept));
        }
        let probe = json!({"type": "function", "function": {
            "name": tool_name(tool),
            "description": function.get("description").cloned().unwrap_or(json!("")),
            "parameters": probe_parameters,
        }});
        if let Some(refusal) = refusal_of(std::slice::from_ref(&probe), builder) {
            let pointer = JsonPointer::root()
                .with_key("properties")
                .with_key(name)
                .to_string();
            return Some((pointer, refusal));
        }
    }
    None
}
