//! Lint for llama.cpp's own tool calling: findings about a `tools` request and what llama-server
//! builds from it, with stable codes (TP001–TP005, see `docs/lint.md`), a severity, the tool or
//! trigger concerned, and a hint. Shown by `toolrail template` (report and `--json`) and
//! available to the app as data.
//!
//! - TP001: the template's tool-call grammar breaks llama.cpp's grammar limits: an error when its
//!   loader refuses it (or toolrail's GBNF lint finds an error), a warning when a bound over 2000
//!   is silently dropped (GB105); the finding names the tools whose grammar alone already does.
//! - TP002: a word trigger that can match inside a word: it begins or ends with a letter,
//!   digit or `_`, so `function` also fires in `functional` (llama.cpp searches the text for it
//!   with no word boundary).
//! - TP003: `tool_choice: required` with thinking on: the grammar is not lazy and constrains
//!   from the first token; unless it has room for the thinking block, the model cannot think.
//! - TP004: a custom `grammar` sent with `tools`: llama-server refuses the request ("Cannot use
//!   custom grammar constraints with tools").
//! - TP005: the prompt holds −9223372036854775808, which llama.cpp's Jinja computes for an
//!   integer division or modulo by zero (Python's Jinja raises an error there); llama-server
//!   sends it to the model as is.

use serde::{Deserialize, Serialize};
use toolrail_gbnf::{Code, Severity as GbnfSeverity};

use crate::lazy_gate::pattern_word;
use crate::template::{
    ChatTemplates, TemplateRequest, TemplateResult, ToolChoice, TriggerKind, llama_grammar_loads,
};

/// Which finding.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum TemplateLintCode {
    /// TP001: the template grammar is over llama.cpp's limits.
    #[serde(rename = "TP001")]
    OverLimits,
    /// TP002: a word trigger can match inside a word.
    #[serde(rename = "TP002")]
    TriggerInsideWord,
    /// TP003: a required tool call with thinking on.
    #[serde(rename = "TP003")]
    RequiredWithThinking,
    /// TP004: `grammar` and `tools` sent together.
    #[serde(rename = "TP004")]
    GrammarWithTools,
    /// TP005: the template divided by zero (the prompt holds the smallest 64-bit integer).
    #[serde(rename = "TP005")]
    DivisionByZero,
}

impl TemplateLintCode {
    /// The code as written in reports, e.g. `TP002`.
    pub fn as_str(self) -> &'static str {
        match self {
            TemplateLintCode::OverLimits => "TP001",
            TemplateLintCode::TriggerInsideWord => "TP002",
            TemplateLintCode::RequiredWithThinking => "TP003",
            TemplateLintCode::GrammarWithTools => "TP004",
            TemplateLintCode::DivisionByZero => "TP005",
        }
    }
}

/// How bad a finding is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TemplateLintSeverity {
    /// llama-server refuses the request or the grammar.
    Error,
    /// It runs, but not as the user likely expects.
    Warning,
}

/// One finding.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TemplateFinding {
    /// Its code.
    pub code: TemplateLintCode,
    /// Its severity.
    pub severity: TemplateLintSeverity,
    /// What is wrong, naming the tool, trigger or setting.
    pub message: String,
    /// What to do about it.
    pub hint: String,
    /// The tools concerned (TP001), when known.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<String>,
}

impl TemplateFinding {
    /// One line: `TP002 warning: … (hint: …)`.
    pub fn render(&self) -> String {
        let severity = match self.severity {
            TemplateLintSeverity::Error => "error",
            TemplateLintSeverity::Warning => "warning",
        };
        format!(
            "{} {severity}: {}\n  hint: {}",
            self.code.as_str(),
            self.message,
            self.hint
        )
    }
}

/// The findings on the request alone (before llama.cpp builds anything): TP004.
pub fn lint_request(request: &TemplateRequest) -> Vec<TemplateFinding> {
    let mut findings = Vec::new();
    if request.grammar.as_deref().is_some_and(|g| !g.is_empty()) && !request.tools.is_empty() {
        findings.push(TemplateFinding {
            code: TemplateLintCode::GrammarWithTools,
            severity: TemplateLintSeverity::Error,
            message: format!(
                "a custom grammar is sent with {} tool(s): llama-server refuses the request \
                 (\"Cannot use custom grammar constraints with tools.\")",
                request.tools.len()
            ),
            hint: "send either `tools` (llama.cpp builds the tool-call grammar from the chat \
                   template) or `grammar` (your own GBNF, with the tools described in the prompt)"
                .to_owned(),
            tools: Vec::new(),
        });
    }
    findings
}

/// Every finding on `request` and the `result` llama.cpp built for it with `templates`
/// ([`ChatTemplates::build`]: a grammar llama.cpp refuses is TP001, blamed on the template when
/// the simplest tools fail too — no arguments, one string argument —, else on the tools that
/// fail alone):
/// [`lint_request`]'s, then TP001–TP003 and TP005.
pub fn lint_template(
    templates: &ChatTemplates,
    request: &TemplateRequest,
    result: &TemplateResult,
) -> Vec<TemplateFinding> {
    let mut findings = lint_request(request);
    findings.extend(over_limits(templates, request, result));
    findings.extend(triggers_inside_words(result));
    findings.extend(required_with_thinking(request, result));
    findings.extend(division_by_zero(result));
    findings
}

/// What llama.cpp's Jinja (b11434) renders for an integer `x % 0` or `x // 0`: the smallest
/// 64-bit integer, where Python's Jinja raises `ZeroDivisionError`.
const DIVIDED_BY_ZERO: &str = "-9223372036854775808";

/// TP005: the prompt holds [`DIVIDED_BY_ZERO`], naming where in the prompt.
fn division_by_zero(result: &TemplateResult) -> Option<TemplateFinding> {
    let at = result.prompt.find(DIVIDED_BY_ZERO)?;
    let before = &result.prompt[..at];
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    Some(TemplateFinding {
        code: TemplateLintCode::DivisionByZero,
        severity: TemplateLintSeverity::Warning,
        message: format!(
            "the prompt holds {DIVIDED_BY_ZERO} at line {line}, column {column}: llama.cpp's \
             Jinja renders that for an integer division or modulo by zero (Python's Jinja \
             raises an error), and llama-server sends it to the model as is"
        ),
        hint: "look in the template for `%` or `//` by a value that can be 0 (a loop length, \
               a count of tools or messages) and guard it"
            .to_owned(),
        tools: Vec::new(),
    })
}

/// Why a grammar breaks llama.cpp's limits: an error when llama.cpp's loader refuses it or
/// toolrail's lint finds an error (a count over 2000 in a repeated group, …); a warning when a
/// repetition maximum over 2000 is silently made unbounded (GB105: the schema's bound is lost).
/// `None` when it is within them.
fn limit_problem(grammar: &str) -> Option<(TemplateLintSeverity, String)> {
    if grammar.is_empty() {
        return None;
    }
    let findings = toolrail_gbnf::lint::lint(grammar, toolrail_gbnf::DEFAULT_ROOT);
    let first = |keep: &dyn Fn(&toolrail_gbnf::Diagnostic) -> bool| {
        let kept: Vec<String> = findings
            .iter()
            .filter(|d| keep(d))
            .map(|d| format!("{} {}", d.code.as_str(), d.message))
            .collect();
        let more = match kept.len() {
            0 | 1 => String::new(),
            n => format!(" (and {} more)", n - 1),
        };
        kept.first().map(|f| format!("{f}{more}"))
    };
    if let Some(error) = first(&|d| d.severity == GbnfSeverity::Error) {
        return Some((TemplateLintSeverity::Error, error));
    }
    // only now: llama.cpp prints a grammar it cannot parse whole on stderr
    if !llama_grammar_loads(grammar).unwrap_or(false) {
        return Some((
            TemplateLintSeverity::Error,
            "llama.cpp's grammar loader refuses it".to_owned(),
        ));
    }
    first(&|d| d.code == Code::UnboundedMaximum).map(|lost| (TemplateLintSeverity::Warning, lost))
}

fn over_limits(
    templates: &ChatTemplates,
    request: &TemplateRequest,
    result: &TemplateResult,
) -> Option<TemplateFinding> {
    let (severity, problem) = limit_problem(&result.grammar)?;
    // The template's own doing: the simplest tools (no arguments; one string argument) give a
    // grammar llama.cpp refuses too.
    let probes = [
        ("a tool with no arguments", serde_json::json!({})),
        (
            "a tool with one string argument",
            serde_json::json!({"text": {"type": "string"}}),
        ),
    ];
    let failing_probe = (severity == TemplateLintSeverity::Error)
        .then(|| {
            probes.iter().find(|(_, properties)| {
                let required: Vec<&String> = properties
                    .as_object()
                    .map(|m| m.keys().collect())
                    .unwrap_or_default();
                let probe = TemplateRequest {
                    tools: vec![serde_json::json!({"type": "function", "function": {
                        "name": "probe",
                        "parameters": {"type": "object", "properties": properties, "required": required}
                    }})],
                    ..request.clone()
                };
                templates.build(&probe).is_ok_and(|built| {
                    limit_problem(&built.grammar)
                        .is_some_and(|(s, _)| s == TemplateLintSeverity::Error)
                })
            })
        })
        .flatten();
    if let Some((which, _)) = failing_probe {
        return Some(TemplateFinding {
            code: TemplateLintCode::OverLimits,
            severity,
            message: format!(
                "the template's parser emits a tool-call grammar llama.cpp cannot load, whatever \
                 the tools ({which} gives the same): {problem}"
            ),
            hint: format!(
                "not your tools: llama-server answers HTTP 400 (\"{}\") for this template and \
                 tool_choice {}; use another tool_choice or template",
                crate::template::SAMPLER_REFUSAL,
                request.tool_choice
            ),
            tools: Vec::new(),
        });
    }
    // Which tools do it alone: the same request with one tool at a time.
    let mut culprits = Vec::new();
    if request.tools.len() > 1 {
        for tool in &request.tools {
            let alone = TemplateRequest {
                tools: vec![tool.clone()],
                ..request.clone()
            };
            if let Ok(built) = templates.build(&alone)
                && limit_problem(&built.grammar).is_some()
            {
                culprits.push(tool_name(tool));
            }
        }
    } else if let Some(tool) = request.tools.first() {
        culprits.push(tool_name(tool));
    }
    let whose = match culprits.len() {
        0 => "the tools together".to_owned(),
        _ => format!("tool(s) {}", culprits.join(", ")),
    };
    let hint = match severity {
        TemplateLintSeverity::Error => {
            "llama-server fails the request when it loads this grammar: bound the schema within \
             the limits (a maxLength, maxItems or repetition count of at most 2000), or leave the \
             bound to validation"
        }
        TemplateLintSeverity::Warning => {
            "llama.cpp drops the bound, so the model may write more than the schema allows: keep \
             maxLength / maxItems at 2000 or less, or rely on validation for the bound"
        }
    };
    Some(TemplateFinding {
        code: TemplateLintCode::OverLimits,
        severity,
        message: format!(
            "the template's tool-call grammar is over llama.cpp's grammar limits because of {whose}: {problem}"
        ),
        hint: hint.to_owned(),
        tools: culprits,
    })
}

fn tool_name(tool: &serde_json::Value) -> String {
    tool.pointer("/function/name")
        .and_then(serde_json::Value::as_str)
        .unwrap_or("(unnamed)")
        .to_owned()
}

/// A word character as a regex `\w` sees it (ASCII letters, digits, `_`).
fn is_word_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

fn triggers_inside_words(result: &TemplateResult) -> Vec<TemplateFinding> {
    if result.grammar.is_empty() || !result.grammar_lazy {
        return Vec::new();
    }
    // The triggers as the sampler has them when a vocabulary is loaded (a word that became a
    // token cannot match inside a word), else as the template gives them.
    let words: Vec<String> = match &result.sampler {
        Some(sampler) => sampler
            .patterns
            .iter()
            .filter_map(|p| pattern_word(p))
            .collect(),
        None => result
            .grammar_triggers
            .iter()
            .filter(|t| t.kind == TriggerKind::Word)
            .map(|t| t.value.clone())
            .collect(),
    };
    words
        .into_iter()
        .filter_map(|word| {
            let bytes = word.as_bytes();
            let starts = bytes.first().copied().is_some_and(is_word_byte);
            let ends = bytes.last().copied().is_some_and(is_word_byte);
            let example = match (starts, ends) {
                (_, true) => format!("{word}…"),
                (true, false) => format!("…{word}"),
                (false, false) => return None,
            };
            Some(TemplateFinding {
                code: TemplateLintCode::TriggerInsideWord,
                severity: TemplateLintSeverity::Warning,
                message: format!(
                    "the trigger word {word:?} can match inside a word: llama.cpp searches the \
                     generated text for it with no word boundary, so any word written {example:?} in \
                     ordinary prose wakes the tool-call grammar"
                ),
                hint: "watch the trigger timeline for fires inside prose; a template whose call \
                       marker is a special token (or starts and ends with punctuation) avoids it"
                    .to_owned(),
                tools: Vec::new(),
            })
        })
        .collect()
}

fn required_with_thinking(
    request: &TemplateRequest,
    result: &TemplateResult,
) -> Option<TemplateFinding> {
    if request.tool_choice != ToolChoice::Required
        || !result.inputs.enable_thinking
        || !result.supports_thinking
        || result.grammar.is_empty()
    {
        return None;
    }
    let room = result
        .thinking_end_tags
        .iter()
        .map(|tag| tag.trim())
        .any(|tag| !tag.is_empty() && result.grammar.contains(tag));
    let room_text = if room {
        "the grammar has room for a thinking block (it holds the end-of-thinking tag), but \
         constrains it"
    } else {
        "the grammar holds no end-of-thinking tag, so the model cannot think: it must call a tool \
         at once"
    };
    Some(TemplateFinding {
        code: TemplateLintCode::RequiredWithThinking,
        severity: TemplateLintSeverity::Warning,
        message: format!(
            "tool_choice is required and thinking is on: the tool-call grammar is not lazy and \
             constrains from the first token; {room_text}"
        ),
        hint: "use tool_choice auto (the grammar then waits for its trigger, after thinking), or \
               turn thinking off for this request"
            .to_owned(),
        tools: Vec::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grammars_over_the_limits_are_errors_and_dropped_bounds_warnings() {
        assert_eq!(limit_problem(r#"root ::= "a"{0,20}"#), None);
        let (severity, text) = limit_problem(r#"root ::= "a"{0,5000}"#).unwrap();
        assert_eq!(severity, TemplateLintSeverity::Warning);
        assert!(text.starts_with("GB105"), "{text}");
        // 1,500 generated rules repeated 3 times: llama.cpp refuses it.
        let (severity, text) = limit_problem(r#"root ::= ("a"{0,1500}){3}"#).unwrap();
        assert_eq!(severity, TemplateLintSeverity::Error, "{text}");
    }

    #[test]
    fn grammar_and_tools_together_are_refused() {
        let request = TemplateRequest {
            tools: vec![serde_json::json!({"type": "function", "function": {"name": "f"}})],
            grammar: Some("root ::= \"x\"".into()),
            ..TemplateRequest::default()
        };
        let findings = lint_request(&request);
        assert_eq!(findings.len(), 1);
        assert_eq!(findings[0].code, TemplateLintCode::GrammarWithTools);
        assert!(findings[0].render().starts_with("TP004 error: "));
        let json = serde_json::to_value(&findings[0]).unwrap();
        assert_eq!(json["code"], "TP004");
        assert!(lint_request(&TemplateRequest::default()).is_empty());
    }
}
