//! The analysis job: tool set (or plain schema) → grammar → lint findings → test-input verdict
//! and the stacks at the cursor. The app runs it on its own thread (the `analyzer` module),
//! which coalesces quick edits and hands back a complete [`Analysis`] the panes read.

use std::ops::Range;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::workspace::{GrammarSettings, SchemaMode, SchemaSettings, TemplateSettings, Workspace};
use std::collections::BTreeMap;
use std::path::PathBuf;
use toolrail_engine::Engine;
use toolrail_engine::check::{STREAM_MEMORY_ENTRIES, Verdict, check_reader, check_with};
use toolrail_llm::template::{ChatTemplates, TemplateRequest, TemplateResult, ToolChoice};

/// Bytes walked between memory checks on the way to the cursor.
const WALK_CHUNK: usize = 8 * 1024;
use toolrail_engine::snapshot::Snapshot;
use toolrail_gbnf::{Diagnostic, Grammar, LineCol};
use toolrail_tools::grammar::{
    GrammarError, GrammarPlace, ToolGrammar, schema_grammar, tool_call_grammar,
};
use toolrail_tools::pool::{PoolDecision, PoolRules, filter_pool};
use toolrail_tools::sent::ReadingDifference;
use toolrail_tools::shape::{Severity, ToolSetShape, ToolSetWarning};
use toolrail_tools::toolset::{ToolSet, ToolSetError};

/// What the analysis reads from the workspace.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct AnalysisInput {
    /// The tool set or schema and its grammar options.
    pub schema: SchemaSettings,
    /// The user prompt (the pool filter's query).
    pub prompt: String,
    /// Hand-edited grammar, if switched on.
    pub grammar: GrammarSettings,
    /// The test input.
    pub test_input: String,
    /// Byte offset in the test input whose stacks are shown.
    pub cursor: usize,
    /// The llama.cpp template grammar source.
    pub template: TemplateSettings,
    /// The system text (the template's system message when not empty).
    pub system: String,
    /// The loaded model's GGUF (its chat template and vocabulary feed the template source);
    /// the app sets it, the workspace does not hold it.
    pub model: Option<PathBuf>,
}

impl AnalysisInput {
    /// The input for a workspace with the test cursor at `cursor` (clamped to a char boundary).
    pub fn from_workspace(ws: &Workspace, cursor: usize) -> Self {
        let mut cursor = cursor.min(ws.test_input.len());
        while !ws.test_input.is_char_boundary(cursor) {
            cursor -= 1;
        }
        Self {
            schema: ws.schema.clone(),
            prompt: ws.prompt.clone(),
            grammar: ws.grammar.clone(),
            test_input: ws.test_input.clone(),
            cursor,
            template: ws.template.clone(),
            system: ws.run.system.clone(),
            model: None,
        }
    }

    /// What the grammar part depends on: the template's inputs only while it is the source.
    pub(crate) fn grammar_part(&self) -> GrammarKey<'_> {
        let template =
            self.template
                .on
                .then_some((&self.template, self.system.as_str(), self.model.as_ref()));
        (&self.schema, &self.prompt, &self.grammar, template)
    }
}

/// The inputs the grammar part is computed from (see [`AnalysisInput::grammar_part`]).
pub(crate) type GrammarKey<'a> = (
    &'a SchemaSettings,
    &'a str,
    &'a GrammarSettings,
    Option<(&'a TemplateSettings, &'a str, Option<&'a PathBuf>)>,
);

/// What llama.cpp builds from the chosen chat template for the tool set (the template grammar
/// source), or why it could not.
#[derive(Debug, Clone, PartialEq)]
pub struct TemplateView {
    /// Where the template came from (`model.gguf (its chat template)` or the file's path).
    pub source: String,
    /// What llama-server would build, or the error in words (no model loaded, no template in
    /// the GGUF, a template llama.cpp rejects, a tool set that does not load).
    pub result: Result<TemplateResult, String>,
    /// Where toolrail's reading of the tools (its grammar and validation) differs from the
    /// tools as a client sends them, which the template's prompt shows.
    pub reading_differences: Vec<ReadingDifference>,
}

impl TemplateView {
    /// The result, when llama.cpp built one.
    pub fn built(&self) -> Option<&TemplateResult> {
        self.result.as_ref().ok()
    }
}

/// One tool of the tool list.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolEntry {
    /// The tool's name.
    pub name: String,
    /// Its description.
    pub description: String,
    /// Switched on by the user.
    pub enabled: bool,
    /// The pool filter's decision (when the filter is on).
    pub pool: Option<PoolDecision>,
    /// In the grammar: enabled and kept by the pool filter.
    pub in_grammar: bool,
}

/// An error in the schema editor's text, located as precisely as possible.
#[derive(Debug, Clone, PartialEq)]
pub struct SchemaIssue {
    /// The full message (names the tool and JSON pointer when known).
    pub message: String,
    /// Line and column in the editor text, when known.
    pub position: Option<LineCol>,
    /// Byte range in the editor text to underline, when known.
    pub span: Option<Range<usize>>,
}

/// The verdict on the test input, and the stacks at the cursor.
#[derive(Debug, Clone, PartialEq)]
pub struct TestReport {
    /// The whole-input verdict.
    pub verdict: Verdict,
    /// The human list of what was expected at the rejected byte or at the end.
    pub expected: Vec<String>,
    /// The byte offset the stacks belong to (the cursor, or the rejected byte if earlier).
    pub stacks_at: usize,
    /// The stacks after the text up to `stacks_at`.
    pub stacks: Snapshot,
}

/// The result of one analysis.
#[derive(Debug, Clone, Default)]
pub struct Analysis {
    /// Increases with every analysis handed out.
    pub revision: u64,
    /// The input it was computed from.
    pub input: AnalysisInput,
    /// The tool set's description (tool-set mode).
    pub description: Option<String>,
    /// The tool list (tool-set mode).
    pub tools: Vec<ToolEntry>,
    /// The tools the grammar was built from (enabled and kept), for the validator.
    pub tool_set: Option<ToolSet>,
    /// The shape the tool set was written in (tool-set mode, when it loads).
    pub tool_set_shape: Option<ToolSetShape>,
    /// What loading the tool set noticed (keys not read, tools without a schema, built-in tools
    /// left out), notes included; the warnings among them are also in [`Analysis::warnings`].
    pub tool_set_warnings: Vec<ToolSetWarning>,
    /// What is wrong with the schema text, if anything.
    pub schema_issue: Option<SchemaIssue>,
    /// The generated GBNF ("" when generation failed).
    pub generated: String,
    /// The tool set's load warnings, then the converter's warnings.
    pub warnings: Vec<String>,
    /// The grammar in force: hand-edited text when switched on, else the generated one.
    pub grammar_text: String,
    /// Lint findings on `grammar_text` (parse errors included).
    pub findings: Vec<Diagnostic>,
    /// The compiled grammar, when `grammar_text` builds.
    pub grammar: Option<Arc<Grammar>>,
    /// The test input's verdict, when the grammar builds.
    pub test: Option<TestReport>,
    /// Time the grammar part took (zero when it came from the cache).
    pub grammar_time: Duration,
    /// The place in a call each generated rule stands for (empty for a hand-edited grammar):
    /// errors name JSON pointers with it.
    pub places: BTreeMap<String, GrammarPlace>,
    /// In plain-schema mode, the number of tools when the document is a tool set rather than
    /// a JSON Schema (read as a schema it would constrain nothing useful): the app warns and
    /// offers tool-set mode.
    pub plain_schema_is_tool_set: Option<usize>,
    /// Time the test part took.
    pub test_time: Duration,
    /// The llama.cpp template source's result, while it is the grammar source.
    pub template: Option<TemplateView>,
}

/// The grammar part of an analysis (everything but the test input), cached between runs.
#[derive(Debug, Clone, Default)]
struct GrammarPart {
    description: Option<String>,
    tools: Vec<ToolEntry>,
    tool_set: Option<ToolSet>,
    tool_set_shape: Option<ToolSetShape>,
    tool_set_warnings: Vec<ToolSetWarning>,
    schema_issue: Option<SchemaIssue>,
    generated: String,
    warnings: Vec<String>,
    grammar_text: String,
    findings: Vec<Diagnostic>,
    grammar: Option<Arc<Grammar>>,
    plain_schema_is_tool_set: Option<usize>,
    /// The place in the call each generated rule stands for (empty for a hand-edited grammar).
    places: BTreeMap<String, GrammarPlace>,
    template: Option<TemplateView>,
}

/// Computes analyses, caching the grammar part and the recognizer between calls.
#[derive(Default)]
pub struct Computer {
    cached: Option<(AnalysisInput, GrammarPart)>,
    engine: Option<Engine>,
    revision: u64,
    /// Times the recognizer's memo was dropped to keep memory bounded.
    memo_evictions: u64,
    /// The chat templates last loaded: the GGUF and the template text that override its own
    /// ("" for none), kept so that changing a setting does not load the vocabulary again.
    templates: Option<(PathBuf, String, ChatTemplates)>,
}

impl Analysis {
    /// What the app shows about how the tool set was read: the shape it was found in, then the
    /// notes (known keys not needed, mapped keys), one line each; empty outside tool-set mode.
    pub fn tool_set_notes(&self) -> Vec<String> {
        let Some(shape) = self.tool_set_shape else {
            return Vec::new();
        };
        let mut lines = vec![format!("read as {shape}")];
        lines.extend(
            self.tool_set_warnings
                .iter()
                .filter(|w| w.severity() == Severity::Note)
                .map(|w| format!("note: {w}")),
        );
        lines
    }
}

impl Computer {
    /// Analyses `input`, reusing the grammar part when only the test input or cursor changed.
    pub fn compute(&mut self, input: &AnalysisInput) -> Analysis {
        let t0 = Instant::now();
        let reuse =
            matches!(&self.cached, Some((old, _)) if old.grammar_part() == input.grammar_part());
        if !reuse {
            let part = grammar_part(input, &mut self.templates);
            self.engine = part.grammar.as_ref().map(|g| Engine::new(Arc::clone(g)));
            self.cached = Some((input.clone(), part));
        }
        let grammar_time = if reuse { Duration::ZERO } else { t0.elapsed() };
        let t1 = Instant::now();
        let places = self
            .cached
            .as_ref()
            .map(|(_, p)| &p.places)
            .cloned()
            .unwrap_or_default();
        let evictions = &mut self.memo_evictions;
        let test = self
            .engine
            .as_mut()
            .map(|e| test_report(e, input, &places, evictions));
        let test_time = t1.elapsed();
        let part = self
            .cached
            .as_ref()
            .map(|(_, p)| p.clone())
            .unwrap_or_default();
        self.revision += 1;
        Analysis {
            revision: self.revision,
            input: input.clone(),
            description: part.description,
            tools: part.tools,
            tool_set: part.tool_set,
            tool_set_shape: part.tool_set_shape,
            tool_set_warnings: part.tool_set_warnings,
            schema_issue: part.schema_issue,
            generated: part.generated,
            warnings: part.warnings,
            grammar_text: part.grammar_text,
            findings: part.findings,
            grammar: part.grammar,
            plain_schema_is_tool_set: part.plain_schema_is_tool_set,
            test,
            grammar_time,
            test_time,
            places,
            template: part.template,
        }
    }
}

impl Computer {
    /// Times the recognizer's memo tables were dropped to keep memory bounded (they grow with
    /// every distinct stack state met; see [`STREAM_MEMORY_ENTRIES`]).
    pub fn memo_evictions(&self) -> u64 {
        self.memo_evictions
    }

    /// What the recognizer's memory holds now ([`Engine::memory_entries`]; 0 without a
    /// grammar).
    pub fn memory_entries(&self) -> usize {
        self.engine.as_ref().map_or(0, Engine::memory_entries)
    }
}

/// Checks the test input and takes the stacks at the cursor with the recognizer's memory
/// bounded: the check streams (compacting the engine as it goes) and the walk to the cursor
/// compacts in chunks, so a 10 MB test input of distinct states costs no more than the memo
/// limit. Each compaction is counted in `evictions`.
fn test_report(
    engine: &mut Engine,
    input: &AnalysisInput,
    places: &BTreeMap<String, GrammarPlace>,
    evictions: &mut u64,
) -> TestReport {
    let text = input.test_input.as_bytes();
    let before = engine.memory_entries();
    let verdict = match check_reader(engine, &mut &text[..]) {
        Ok(streamed) => streamed.verdict,
        // Reading a slice cannot fail; were it to, the unbounded check still answers.
        Err(_) => check_with(engine, text),
    };
    if engine.memory_entries() < before {
        *evictions += 1;
    }
    let consumed = &text[..verdict.offset.unwrap_or(text.len())];
    let expected = readable_expected(engine, &verdict, consumed, places);
    let mut stacks_at = input.cursor.min(text.len());
    if let Some(off) = verdict.offset {
        stacks_at = stacks_at.min(off);
    }
    let mut state = engine.initial();
    for chunk in text[..stacks_at].chunks(WALK_CHUNK) {
        match engine.feed(state, chunk) {
            Ok(next) => state = next,
            Err((_, before)) => {
                state = before;
                break;
            }
        }
        if engine.memory_entries() > STREAM_MEMORY_ENTRIES {
            state = engine.compact(state);
            *evictions += 1;
        }
    }
    let stacks = engine.snapshot(state);
    TestReport {
        verdict,
        expected,
        stacks_at,
        stacks,
    }
}

/// What a verdict expected, as a person reads it: literal alternatives with the JSON pointer
/// they stand for where the grammar came from a schema, characters otherwise.
pub fn readable_expected(
    engine: &Engine,
    verdict: &Verdict,
    consumed: &[u8],
    places: &BTreeMap<String, GrammarPlace>,
) -> Vec<String> {
    if verdict.kind == toolrail_engine::VerdictKind::TooAmbiguous {
        return verdict.expected.describe();
    }
    engine
        .readable_expected(verdict.state, consumed, &|rule| places.contains_key(rule))
        .describe(&|rule| places.get(rule).map(ToString::to_string))
}

fn grammar_part(
    input: &AnalysisInput,
    templates: &mut Option<(PathBuf, String, ChatTemplates)>,
) -> GrammarPart {
    let mut part = GrammarPart::default();
    let settings = &input.schema;
    let generated = match settings.mode {
        SchemaMode::ToolSet => tool_set_grammar(input, &mut part),
        SchemaMode::PlainSchema => plain_schema_grammar(settings, &mut part),
    };
    if input.template.on {
        let view = template_view(input, part.tool_set.as_ref(), templates);
        part.grammar_text = view.built().map(|r| r.grammar.clone()).unwrap_or_default();
        part.template = Some(view);
        part.warnings = part
            .tool_set_warnings
            .iter()
            .filter(|w| w.severity() == Severity::Warning)
            .map(ToString::to_string)
            .collect();
        if let Some(g) = generated {
            part.generated = g.text;
        }
        if !part.grammar_text.is_empty() {
            part.findings = toolrail_gbnf::lint::lint_default(&part.grammar_text);
            part.grammar = Grammar::parse(&part.grammar_text).ok().map(Arc::new);
        }
        return part;
    }
    part.warnings = part
        .tool_set_warnings
        .iter()
        .filter(|w| w.severity() == Severity::Warning)
        .map(ToString::to_string)
        .collect();
    if let Some(g) = generated {
        part.generated = g.text;
        part.warnings.extend(g.warnings);
        if !input.grammar.hand_edited {
            part.places = g.places;
        }
    }
    part.grammar_text = if input.grammar.hand_edited {
        input.grammar.text.clone()
    } else {
        part.generated.clone()
    };
    if !part.grammar_text.is_empty() || input.grammar.hand_edited {
        part.findings = toolrail_gbnf::lint::lint_default(&part.grammar_text);
        part.grammar = Grammar::parse(&part.grammar_text).ok().map(Arc::new);
    }
    part
}

/// What llama.cpp builds from the chosen template for `tools` (see [`TemplateView`]); the
/// loaded templates are reused while the model and the template text stay the same.
fn template_view(
    input: &AnalysisInput,
    tools: Option<&ToolSet>,
    templates: &mut Option<(PathBuf, String, ChatTemplates)>,
) -> TemplateView {
    let settings = &input.template;
    let source = match (&settings.file, &input.model) {
        (Some(file), _) => file.display().to_string(),
        (None, Some(model)) => format!(
            "{} (its chat template)",
            model.file_name().map_or_else(
                || model.display().to_string(),
                |n| n.to_string_lossy().into_owned()
            )
        ),
        (None, None) => "the model's chat template".to_owned(),
    };
    let result = (|| {
        if input.schema.mode != SchemaMode::ToolSet {
            return Err(
                "the llama.cpp template source needs a tool set: press Switch to tool-set mode in the Tools pane"
                    .to_owned(),
            );
        }
        let tools = tools.ok_or_else(|| {
            "the tool set has an error (see the Tools pane): llama.cpp gets no tools".to_owned()
        })?;
        let model = input.model.as_ref().ok_or_else(|| {
            "no model loaded: load one in the Generation pane (the template's prompt and \
             triggers depend on its vocabulary)"
                .to_owned()
        })?;
        if settings.file.is_some() && settings.text.trim().is_empty() {
            return Err(format!("{source}: the template file is empty"));
        }
        let cached =
            matches!(templates, Some((path, text, _)) if path == model && *text == settings.text);
        if !cached {
            *templates = None;
            let over = settings.file.as_ref().map(|_| settings.text.as_str());
            let loaded =
                ChatTemplates::from_gguf(model, over).map_err(|e| format!("{source}: {e}"))?;
            *templates = Some((model.clone(), settings.text.clone(), loaded));
        }
        let Some((_, _, loaded)) = templates.as_ref() else {
            return Err(format!("{source}: the template did not load"));
        };
        let mut request = TemplateRequest::for_tools(tools, &input.prompt);
        if !input.system.trim().is_empty() {
            request.messages.insert(
                0,
                serde_json::json!({"role": "system", "content": input.system}),
            );
        }
        if let ToolChoice::Named(name) = &settings.tool_choice
            && tools.get(name).is_none()
        {
            return Err(format!(
                "tool_choice {name}: not a tool of the set ({})",
                tools.names().join(", ")
            ));
        }
        request.tool_choice = settings.tool_choice.clone();
        request.parallel_tool_calls = settings.parallel;
        request.enable_thinking = settings.thinking;
        request.reasoning_format = settings.reasoning_format;
        loaded.apply(&request).map_err(|e| format!("{source}: {e}"))
    })();
    let reading_differences = tools.map(ToolSet::reading_differences).unwrap_or_default();
    TemplateView {
        source,
        result,
        reading_differences,
    }
}

fn parse_json(text: &str, part: &mut GrammarPart) -> Option<serde_json::Value> {
    match serde_json::from_str::<serde_json::Value>(text) {
        Ok(v) => Some(v),
        Err(e) => {
            let position = LineCol {
                line: e.line() as u32,
                column: e.column() as u32,
            };
            let offset = offset_of(text, position);
            part.schema_issue = Some(SchemaIssue {
                message: format!("{}:{}: {e}", e.line(), e.column()),
                position: Some(position),
                span: offset.map(|o| o..next_char_end(text, o)),
            });
            None
        }
    }
}

fn tool_set_grammar(input: &AnalysisInput, part: &mut GrammarPart) -> Option<ToolGrammar> {
    let settings = &input.schema;
    let loaded = if toolrail_tools::python::looks_like_python(&settings.text) {
        toolrail_tools::python::tools_from_python(&settings.text).map_err(|e| {
            let position = LineCol {
                line: e.line,
                column: e.column,
            };
            let span =
                offset_of(&settings.text, position).map(|o| o..next_char_end(&settings.text, o));
            SchemaIssue {
                message: e.to_string(),
                position: Some(position),
                span,
            }
        })
    } else {
        let doc = parse_json(&settings.text, part)?;
        ToolSet::from_value(&doc).map_err(|e| issue_at_pointer(&settings.text, &e))
    };
    let set = match loaded {
        Ok(set) => set,
        Err(issue) => {
            part.schema_issue = Some(issue);
            return None;
        }
    };
    part.description = set.description.clone();
    part.tool_set_shape = set.shape();
    part.tool_set_warnings = set.warnings().to_vec();
    let names: Vec<&str> = set.names();
    let decisions = settings
        .pool_filter
        .then(|| filter_pool(&PoolRules::default().entries(&names), &input.prompt));
    let mut kept = Vec::new();
    for (i, tool) in set.tools().iter().enumerate() {
        let enabled = !settings.disabled_tools.contains(&tool.name);
        let pool = decisions.as_ref().and_then(|d| d.get(i).cloned());
        let in_grammar = enabled && pool.as_ref().is_none_or(|d| d.kept);
        if in_grammar {
            kept.push(tool.clone());
        }
        part.tools.push(ToolEntry {
            name: tool.name.clone(),
            description: tool.description.clone(),
            enabled,
            pool,
            in_grammar,
        });
    }
    let chosen = match ToolSet::new(kept) {
        Ok(set) => set,
        Err(e) => {
            part.schema_issue = Some(issue_at_pointer(&settings.text, &e));
            return None;
        }
    };
    let result = tool_call_grammar(&chosen, &settings.grammar_options());
    part.tool_set = Some(chosen);
    match result {
        Ok(g) => Some(g),
        Err(e) => {
            let place = match &e {
                GrammarError::Schema { tool, error } => Some((
                    tool.as_str(),
                    error.pointer.as_str(),
                    error.keyword.as_str(),
                )),
                _ => None,
            };
            let span = place.and_then(|(tool, pointer, keyword)| {
                let schema = set.schema_pointer(tool)?;
                locate_in_schema(&settings.text, schema, pointer, keyword)
            });
            part.schema_issue = Some(located_issue(&settings.text, e.to_string(), span));
            None
        }
    }
}

/// The text span of `keyword` at `pointer` (relative to a tool's parameter schema, which is at
/// `schema` in the document) in the editor text; the nearest enclosing value when the exact
/// place is not in the text (loaders normalise some shapes), up to the tool's definition.
fn locate_in_schema(
    text: &str,
    schema: &str,
    pointer: &str,
    keyword: &str,
) -> Option<Range<usize>> {
    let inner = pointer.trim_start_matches('#');
    let mut candidates = vec![
        format!(
            "{schema}{inner}{}",
            toolrail_tools::JsonPointer::root().with_key(keyword)
        ),
        format!("{schema}{inner}"),
    ];
    // the tool's own object: the schema's parent
    let tool_at = schema.rfind('/').unwrap_or(0);
    let mut cut = format!("{schema}{inner}");
    while let Some(at) = cut.rfind('/') {
        cut.truncate(at);
        if cut.len() < tool_at {
            break;
        }
        candidates.push(cut.clone());
    }
    candidates
        .iter()
        .find_map(|p| crate::jsonpos::locate(text, p))
}

fn located_issue(text: &str, message: String, span: Option<Range<usize>>) -> SchemaIssue {
    let position = span
        .as_ref()
        .map(|s| toolrail_gbnf::source::line_col(text.as_bytes(), s.start));
    let message = match &position {
        Some(at) => format!("{at}: {message}"),
        None => message,
    };
    SchemaIssue {
        message,
        position,
        span,
    }
}

fn plain_schema_grammar(settings: &SchemaSettings, part: &mut GrammarPart) -> Option<ToolGrammar> {
    let doc = parse_json(&settings.text, part)?;
    part.plain_schema_is_tool_set = ToolSet::from_value(&doc)
        .ok()
        .map(|set| set.tools().len())
        .filter(|&n| n > 0);
    match schema_grammar(&doc, &settings.grammar_options()) {
        Ok(g) => Some(g),
        Err(e) => {
            part.schema_issue = Some(SchemaIssue {
                message: e.to_string(),
                position: None,
                span: None,
            });
            None
        }
    }
}

fn issue_at_pointer(text: &str, e: &ToolSetError) -> SchemaIssue {
    let pointer = match e {
        ToolSetError::Shape { pointer, .. } | ToolSetError::Tool { pointer, .. } => Some(pointer),
        ToolSetError::Duplicate { pointer, .. } => Some(pointer),
        ToolSetError::Json(_) | ToolSetError::Python(_) => None,
    };
    let span = pointer.and_then(|p| crate::jsonpos::locate(text, p));
    located_issue(text, e.to_string(), span)
}

/// Byte offset of a 1-based line:column (columns in chars), if inside the text.
fn offset_of(text: &str, at: LineCol) -> Option<usize> {
    let line_start = if at.line <= 1 {
        0
    } else {
        text.match_indices('\n')
            .nth(at.line as usize - 2)
            .map(|(i, _)| i + 1)?
    };
    let col = at.column.saturating_sub(1) as usize;
    let rest = &text[line_start..];
    let within = rest
        .char_indices()
        .nth(col)
        .map(|(i, _)| i)
        .unwrap_or(rest.len());
    Some(line_start + within)
}

fn next_char_end(text: &str, at: usize) -> usize {
    text[at..]
        .chars()
        .next()
        .map(|c| at + c.len_utf8())
        .unwrap_or(at)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input() -> AnalysisInput {
        AnalysisInput::from_workspace(&Workspace::default(), usize::MAX)
    }

    #[test]
    fn default_workspace_builds_a_grammar_and_rejects_the_bad_unit() {
        let a = Computer::default().compute(&input());
        assert!(a.schema_issue.is_none(), "{:?}", a.schema_issue);
        assert!(a.grammar_text.contains("root ::="));
        assert!(a.grammar.is_some());
        let test = a.test.unwrap();
        assert_eq!(
            test.verdict.kind,
            toolrail_engine::check::VerdictKind::Rejected
        );
        let text = &a.input.test_input;
        let off = test.verdict.offset.unwrap();
        assert!(text[off..].starts_with("kelvin"), "rejected at {off}");
    }

    #[test]
    fn bad_json_names_line_and_column() {
        let mut i = input();
        i.schema.text = "{\n  \"tools\": [,]\n}".into();
        let a = Computer::default().compute(&i);
        let issue = a.schema_issue.unwrap();
        assert_eq!(
            issue.position,
            Some(LineCol {
                line: 2,
                column: 13
            })
        );
        assert_eq!(issue.span, Some(14..15));
        assert!(a.grammar.is_none());
    }

    #[test]
    fn disabled_tools_leave_the_grammar() {
        let mut i = input();
        i.schema.text = crate::samples::find("planner_get_inputs.json")
            .unwrap()
            .text
            .into();
        let all = Computer::default().compute(&i);
        assert!(all.grammar_text.contains("get_now"));
        i.schema.disabled_tools = vec!["get_now".into()];
        let some = Computer::default().compute(&i);
        assert!(!some.grammar_text.contains("\\\"get_now\\\""));
        assert!(
            !some
                .tools
                .iter()
                .find(|t| t.name == "get_now")
                .unwrap()
                .in_grammar
        );
    }

    #[test]
    fn the_pool_filter_drops_escape_hatches_the_prompt_does_not_ask_for() {
        let tool = |name: &str| serde_json::json!({"name": name, "description": "", "parameters": {"type": "object", "properties": {}}});
        let mut i = input();
        i.schema.text =
            serde_json::json!([tool("search"), tool("request_location_from_user")]).to_string();
        i.schema.pool_filter = true;
        i.prompt = "find a good pizza".into();
        let a = Computer::default().compute(&i);
        let hatch = a
            .tools
            .iter()
            .find(|t| t.name == "request_location_from_user")
            .unwrap();
        assert!(!hatch.in_grammar);
        assert!(!hatch.pool.as_ref().unwrap().kept);
        assert!(!a.grammar_text.contains("request_location_from_user"));
        i.prompt = "find a good pizza near me".into();
        let a = Computer::default().compute(&i);
        assert!(a.grammar_text.contains("request_location_from_user"));
    }

    #[test]
    fn a_bad_tool_is_located_by_its_pointer() {
        let mut i = input();
        i.schema.text = "[\n  {\"name\": \"ok\"},\n  {\"description\": \"no name\"}\n]".into();
        let a = Computer::default().compute(&i);
        let issue = a.schema_issue.unwrap();
        assert!(issue.message.contains("/1"), "{}", issue.message);
        assert_eq!(issue.position.map(|p| p.line), Some(3), "{}", issue.message);
    }

    #[test]
    fn an_unsupported_keyword_is_located_in_its_tool() {
        let mut i = input();
        i.schema.text = r#"{"tools": [
  {"name": "a", "parameters": {"type": "object", "properties": {}}},
  {"type": "function", "function": {"name": "b", "parameters": {"type": "object",
    "properties": {"x": {"type": "string", "not": {"const": "y"}}}}}}
]}"#
        .into();
        let a = Computer::default().compute(&i);
        let issue = a.schema_issue.unwrap();
        let span = issue.span.clone().expect("located");
        assert!(
            i.schema.text[span].starts_with("\"not\""),
            "{}",
            issue.message
        );
        assert_eq!(issue.position.map(|p| p.line), Some(4), "{}", issue.message);
        assert!(issue.message.contains("tool 'b'"), "{}", issue.message);
    }

    #[test]
    fn pasted_python_functions_are_a_tool_set_with_their_shape() {
        let mut i = input();
        let sample = crate::samples::find("python_functions.py").unwrap();
        i.schema.text = sample.text.into();
        i.schema.envelope = sample.format;
        i.test_input = r#"tool_function(param1="a", param2="value2")"#.into();
        let a = Computer::default().compute(&i);
        assert!(a.schema_issue.is_none(), "{:?}", a.schema_issue);
        assert_eq!(a.tool_set_shape, Some(ToolSetShape::PythonFunctions));
        assert_eq!(a.tool_set_notes()[0], "read as Python functions");
        let verdict = a.test.as_ref().unwrap().verdict.kind;
        assert_eq!(verdict, toolrail_engine::check::VerdictKind::Accepted);
        // the tool's own grammar forbids what its type hint allows
        i.test_input = r#"tool_function(param1="a", param2="value3")"#.into();
        let a = Computer::default().compute(&i);
        let verdict = a.test.as_ref().unwrap().verdict.kind;
        assert_eq!(verdict, toolrail_engine::check::VerdictKind::Rejected);
    }

    #[test]
    fn a_python_error_is_located_at_its_line_and_column() {
        let mut i = input();
        i.schema.text = "def f(a: int,
      b: Widget):
    pass
"
        .into();
        let a = Computer::default().compute(&i);
        let issue = a.schema_issue.unwrap();
        assert_eq!(
            issue.position.map(|p| (p.line, p.column)),
            Some((2, 10)),
            "{}",
            issue.message
        );
        let span = issue.span.clone().expect("located");
        assert!(i.schema.text[span.start..].starts_with("Widget"));
        assert!(issue.message.contains("parameter `b`"), "{}", issue.message);
    }

    #[test]
    fn an_mcp_tool_set_shows_its_shape_warnings_and_arguments() {
        let mut i = input();
        i.schema.text = r#"{"tools": [
  {"name": "get_weather", "title": "Weather", "inputSchema": {"type": "object",
    "properties": {"city": {"type": "string"}}, "required": ["city"]}, "icon": "sun.png"},
  {"name": "now"}
]}"#
        .into();
        i.test_input = r#"{"name": "get_weather", "arguments": {"city": "Oslo"}}"#.into();
        let a = Computer::default().compute(&i);
        assert!(a.schema_issue.is_none(), "{:?}", a.schema_issue);
        assert_eq!(a.tool_set_shape, Some(ToolSetShape::McpToolsList));
        // the arguments are in the grammar: the call is accepted
        let verdict = a.test.as_ref().unwrap().verdict.kind;
        assert_eq!(verdict, toolrail_engine::check::VerdictKind::Accepted);
        // warnings shown in the panes; the note (title) and the shape on hover
        assert_eq!(a.warnings.len(), 2, "{:?}", a.warnings);
        assert!(a.warnings[0].contains("/tools/0/icon"), "{:?}", a.warnings);
        assert!(
            a.warnings[1].contains("tool `now` has no parameter schema"),
            "{:?}",
            a.warnings
        );
        let notes = a.tool_set_notes();
        assert_eq!(notes[0], "read as MCP tools/list result");
        assert!(notes[1].contains("/tools/0/title"), "{notes:?}");
    }

    #[test]
    fn an_unsupported_keyword_is_located_in_an_mcp_tool() {
        let mut i = input();
        i.schema.text = r#"{"tools": [
  {"name": "b", "inputSchema": {"type": "object",
    "properties": {"x": {"type": "string", "not": {"const": "y"}}}}}
]}"#
        .into();
        let a = Computer::default().compute(&i);
        let issue = a.schema_issue.unwrap();
        let span = issue.span.clone().expect("located");
        assert!(
            i.schema.text[span].starts_with("\"not\""),
            "{}",
            issue.message
        );
    }

    #[test]
    fn plain_schema_mode_and_hand_edited_grammars() {
        let mut i = input();
        i.schema.mode = SchemaMode::PlainSchema;
        i.schema.text = r#"{"type": "object", "properties": {"n": {"type": "integer"}}}"#.into();
        i.test_input = r#"{"n": 12}"#.into();
        let a = Computer::default().compute(&i);
        assert!(a.test.unwrap().verdict.is_accepted());
        i.grammar.hand_edited = true;
        i.grammar.text = "root ::= \"x\" undefined-rule\n".into();
        let a = Computer::default().compute(&i);
        assert!(a.grammar.is_none());
        assert!(
            a.findings
                .iter()
                .any(|f| f.message.contains("undefined-rule"))
        );
    }

    #[test]
    fn a_tool_set_in_plain_schema_mode_is_noticed() {
        let mut i = input();
        i.schema.mode = SchemaMode::PlainSchema;
        let a = Computer::default().compute(&i);
        assert_eq!(a.plain_schema_is_tool_set, Some(1), "{:?}", a.schema_issue);
        i.schema.text = r#"{"type": "object", "properties": {"n": {"type": "integer"}}}"#.into();
        let a = Computer::default().compute(&i);
        assert_eq!(a.plain_schema_is_tool_set, None);
        // Tool-set mode never asks.
        let a = Computer::default().compute(&input());
        assert_eq!(a.plain_schema_is_tool_set, None);
    }
}
