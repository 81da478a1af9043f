//! `toolrail template (--model M | --template FILE) --tools T [--tool-choice C] [--parallel]
//! [--messages FILE] [--json] [--parse OUTPUT]`: what llama-server builds when a client sends
//! `tools` (prompt, grammar, lazy triggers, preserved tokens, generation prompt, stops, format,
//! parser), computed by llama.cpp's own chat code; with `--parse`, llama.cpp's parse of a model
//! output for that format.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use serde_json::{Value, json};
use toolrail_gbnf::{Severity, lint::lint};
use toolrail_llm::server::ServerClient;
use toolrail_llm::template::{
    ChatTemplates, ParsedMessage, ReasoningFormat, RequestDefaults, ServerSwitch, TemplateError,
    TemplateRequest, TemplateResult, ToolChoice, TriggerKind,
};
use toolrail_llm::template_lint::{TemplateFinding, lint_request, lint_template};
use toolrail_tools::sent::ReadingDifference;

/// Arguments of `toolrail template`.
#[derive(Debug, clap::Args)]
pub struct TemplateArgs {
    /// A GGUF file or `models.toml` entry: its chat template and vocabulary (word triggers that
    /// are one token become token triggers, as in llama-server).
    #[arg(long, required_unless_present = "template")]
    pub model: Option<String>,
    /// The models file to look names up in.
    #[arg(long)]
    pub models: Option<PathBuf>,
    /// A Jinja chat template file, used instead of the model's (without --model: no vocabulary).
    #[arg(long)]
    pub template: Option<String>,
    /// The tool set (any shape toolrail reads).
    #[arg(long)]
    pub tools: String,
    /// `auto`, `required`, `none`, or a tool name (llama-server b11434 treats a name as `auto`).
    #[arg(long, default_value = "auto")]
    pub tool_choice: ToolChoice,
    /// Parallel tool calls: `--parallel` or `--parallel true` allows them, `--parallel false`
    /// forbids them (default: llama-server's, on when the template supports them).
    #[arg(long, num_args = 0..=1, default_missing_value = "true")]
    pub parallel: Option<bool>,
    /// A JSON array of OpenAI messages (default: one user message, --user).
    #[arg(long)]
    pub messages: Option<String>,
    /// The user message when --messages is not given.
    #[arg(long, default_value = "What is the weather like in Paris?")]
    pub user: String,
    /// Thinking on or off (default: llama-server's rule, on when the template supports it).
    #[arg(long)]
    pub thinking: Option<bool>,
    /// The reasoning format: none, auto, deepseek, deepseek-legacy (default: llama-server's, deepseek).
    #[arg(long)]
    pub reasoning_format: Option<ReasoningFormat>,
    /// Use the bare llama.cpp input defaults (as its tests do) instead of llama-server's.
    #[arg(long)]
    pub struct_defaults: bool,
    /// Pin the template's date (`date_string`, e.g. "26 Jul 2024"; default: today, as the server).
    #[arg(long)]
    pub date: Option<String>,
    /// A model output file (`-` for standard input) to parse with llama.cpp's parser.
    #[arg(long)]
    pub parse: Option<String>,
    /// Parse the output as a partial (streaming) one.
    #[arg(long, requires = "parse")]
    pub partial: bool,
    /// A custom GBNF grammar sent with the tools, as a client might: llama-server refuses the
    /// pair, and the lint says so (TP004).
    #[arg(long, value_name = "FILE")]
    pub grammar: Option<String>,
    /// Print one JSON object instead of a report.
    #[arg(long)]
    pub json: bool,
    /// Also ask this llama-server (`http://host:port`) what it builds for the same tools and
    /// messages (its `__verbose` block: prompt, grammar, lazy triggers, chat format) and say
    /// where it differs from the local build.
    #[arg(long, value_name = "URL")]
    pub server: Option<String>,
    /// The environment variable holding the server's API key (with --server).
    #[arg(long, value_name = "NAME", requires = "server")]
    pub api_key_env: Option<String>,
}

/// Runs `toolrail template`: exit 0, or 2 when llama.cpp refuses the template or request.
pub fn run(args: &TemplateArgs) -> anyhow::Result<ExitCode> {
    let tools_text = String::from_utf8(super::common::read_input(&args.tools)?)
        .with_context(|| format!("{}: the tool set is not UTF-8", args.tools))?;
    let tools = super::common::load_tool_set(&tools_text, &args.tools)?;
    let (templates, source) = load_templates(
        args.model.as_deref(),
        args.models.as_ref(),
        args.template.as_deref(),
    )?;
    let mut request = TemplateRequest::for_tools(&tools, &args.user);
    if let Some(path) = &args.messages {
        let text = super::common::read_input(path)?;
        let value: Value =
            serde_json::from_slice(&text).with_context(|| format!("{path}: not JSON"))?;
        let Value::Array(messages) = value else {
            anyhow::bail!("{path}: the messages must be a JSON array of OpenAI messages");
        };
        request.messages = messages;
    }
    request.tool_choice = args.tool_choice.clone();
    if let ToolChoice::Named(name) = &request.tool_choice
        && tools.get(name).is_none()
    {
        anyhow::bail!(
            "--tool-choice {name}: not auto, required, none, or a tool of the set ({})",
            tools.names().join(", ")
        );
    }
    request.parallel_tool_calls = ServerSwitch::from(args.parallel);
    request.enable_thinking = ServerSwitch::from(args.thinking);
    request.reasoning_format = args.reasoning_format.unwrap_or_default();
    if args.struct_defaults {
        request.defaults = RequestDefaults::Struct;
    }
    if let Some(date) = &args.date {
        request
            .chat_template_kwargs
            .insert("date_string".into(), json!(date));
    }
    if let Some(path) = &args.grammar {
        request.grammar = Some(super::common::read_grammar(path)?);
    }
    // What llama-server refuses before it builds anything.
    let refused = lint_request(&request);
    if !refused.is_empty() {
        if args.json {
            super::output::write_json(&serde_json::to_string_pretty(
                &json!({"source": source, "template_lint": refused}),
            )?)?;
        } else {
            for finding in &refused {
                outln!("{}", finding.render())?;
            }
        }
        return Ok(ExitCode::from(2));
    }
    let differences = tools.reading_differences();
    let result = match templates.apply(&request) {
        Ok(result) => result,
        Err(e) => {
            say_refused(args, &source, &templates, &request, &e, &differences)?;
            return Ok(ExitCode::from(2));
        }
    };
    let parsed = match &args.parse {
        Some(path) => {
            let bytes = super::common::read_input(path)?;
            let text = String::from_utf8(bytes)
                .with_context(|| format!("{path}: the output is not UTF-8"))?;
            Some(result.parse(&text, args.partial).map_err(|e| e.to_string()))
        }
        None => None,
    };
    let findings = lint_template(&templates, &request, &result);
    if args.json {
        print_json(&result, &source, parsed.as_ref(), &findings, &differences)?;
    } else {
        print_report(&result, &source, parsed.as_ref(), &findings, &differences)?;
    }
    if let Some(url) = &args.server {
        compare_with_server(url, args, &request, &result)?;
    }
    Ok(match parsed {
        Some(Err(_)) => ExitCode::from(1),
        _ => ExitCode::SUCCESS,
    })
}

/// The chat template of a GGUF file or `models.toml` entry (`model`, with `template` in place
/// of its own when given), or of a template file alone (no vocabulary); with a line saying
/// which, for reports.
pub fn load_templates(
    model: Option<&str>,
    models: Option<&PathBuf>,
    template: Option<&str>,
) -> anyhow::Result<(ChatTemplates, String)> {
    let template_text = match template {
        Some(path) => Some(
            String::from_utf8(super::common::read_input(path)?)
                .with_context(|| format!("{path}: the template is not UTF-8"))?,
        ),
        None => None,
    };
    Ok(match model {
        Some(model) => {
            let spec = super::generate::ModelArgs::named(model, models.cloned()).resolve()?;
            let templates = ChatTemplates::from_gguf(&spec.path, template_text.as_deref())
                .with_context(|| format!("{}", spec.path.display()))?;
            let source = match template {
                Some(path) => format!("{path} (vocabulary of {})", spec.path.display()),
                None => format!("{} (its chat template)", spec.path.display()),
            };
            (templates, source)
        }
        None => {
            let path = template.unwrap_or_default();
            let text = template_text.unwrap_or_default();
            let templates =
                ChatTemplates::from_source(&text, "", "").with_context(|| path.to_owned())?;
            (templates, format!("{path} (no vocabulary)"))
        }
    })
}

/// Says why llama-server refuses the request, as it would (its message and HTTP status), why
/// (the template lint's blame for a grammar llama.cpp cannot load), and what toolrail reads
/// differently from what the client sent (`dict` as `object`: the fix for a refused type).
fn say_refused(
    args: &TemplateArgs,
    source: &str,
    templates: &ChatTemplates,
    request: &TemplateRequest,
    error: &TemplateError,
    differences: &[ReadingDifference],
) -> anyhow::Result<()> {
    let findings = match error {
        TemplateError::SamplerRefused { .. } => templates
            .build(request)
            .map(|built| lint_template(templates, request, &built))
            .unwrap_or_default(),
        _ => Vec::new(),
    };
    let status = error.http_status();
    if args.json {
        let value = json!({
            "source": source,
            "error": error.to_string(),
            "http_status": status,
            "template_lint": findings,
            "reading_differences": differences_json(differences),
        });
        super::output::write_json(&serde_json::to_string_pretty(&value)?)?;
        return Ok(());
    }
    let answer = match (error, status) {
        (TemplateError::Llama { .. }, Some(s)) => format!(" (llama-server answers HTTP {s})"),
        _ => String::new(),
    };
    errln!("toolrail: {source}: {error}{answer}");
    for finding in &findings {
        errln!("{}", finding.render());
    }
    if !differences.is_empty() {
        errln!(
            "the tools were sent as written; toolrail's own reading differs (what it would send \
             instead):"
        );
        for difference in differences {
            errln!("note: {difference}");
        }
    }
    Ok(())
}

/// The reading differences as `--json` lists them.
fn differences_json(differences: &[ReadingDifference]) -> Value {
    differences
        .iter()
        .map(|d| {
            json!({"tool": d.tool, "pointer": d.pointer, "sent": d.sent, "read": d.read,
                   "message": d.to_string()})
        })
        .collect()
}

/// Asks the server what it builds for `request` and reports, on standard error, where its
/// prompt, grammar, triggers and format match the local build.
fn compare_with_server(
    url: &str,
    args: &TemplateArgs,
    request: &TemplateRequest,
    local: &TemplateResult,
) -> anyhow::Result<()> {
    let api_key = match &args.api_key_env {
        Some(name) => Some(
            std::env::var(name)
                .with_context(|| format!("--api-key-env {name}: the variable is not set"))?,
        ),
        None => None,
    };
    let client = ServerClient::new(url, api_key)?;
    let mut body = json!({
        "messages": request.messages,
        "tools": request.tools,
        "tool_choice": request.tool_choice.to_openai(),
        "temperature": 0.0,
    });
    if let Some(parallel) = request.parallel_tool_calls.to_request() {
        body["parallel_tool_calls"] = json!(parallel);
    }
    if !request.chat_template_kwargs.is_empty() {
        body["chat_template_kwargs"] = Value::Object(request.chat_template_kwargs.clone());
    }
    if let Some(format) = request.reasoning_format.name() {
        body["reasoning_format"] = json!(format);
    }
    let server = client.chat_build_json(body)?;
    let same = |a: bool| if a { "identical" } else { "differs" };
    errln!("\n== the server ({}) ==", client.url());
    errln!(
        "format: {} (local {})",
        server.chat_format.as_deref().unwrap_or("not reported"),
        local.format
    );
    let prompt = if server.prompt == local.prompt {
        "identical".to_owned()
    } else if let Some(prefix) = server.prompt.strip_suffix(local.prompt.as_str())
        && prefix.len() <= 16
    {
        format!("identical after the {prefix:?} the server's text starts with (its BOS token)")
    } else {
        format!(
            "differs: the server's ({} bytes):\n{}",
            server.prompt.len(),
            server.prompt
        )
    };
    errln!("prompt: {prompt}");
    errln!(
        "grammar: {} ({} bytes, {}; local {} bytes, {})",
        same(server.grammar == local.grammar),
        server.grammar.len(),
        if server.grammar_lazy {
            "lazy"
        } else {
            "not lazy"
        },
        local.grammar.len(),
        if local.grammar_lazy {
            "lazy"
        } else {
            "not lazy"
        }
    );
    let local_triggers: Vec<&str> = local
        .grammar_triggers
        .iter()
        .map(|t| t.value.as_str())
        .collect();
    let server_triggers: Vec<String> = server
        .grammar_triggers
        .iter()
        .map(|t| {
            t.get("value")
                .and_then(Value::as_str)
                .map_or_else(|| t.to_string(), str::to_owned)
        })
        .collect();
    errln!(
        "triggers: {} (server {:?}, local {:?})",
        same(
            server_triggers
                .iter()
                .map(String::as_str)
                .eq(local_triggers.iter().copied())
        ),
        server_triggers,
        local_triggers
    );
    errln!(
        "preserved tokens: {} (server {:?}, local {:?})",
        same(server.preserved_tokens == local.preserved_tokens),
        server.preserved_tokens,
        local.preserved_tokens
    );
    if server.grammar != local.grammar && !server.grammar.is_empty() {
        errln!("== the server's grammar ==\n{}", server.grammar);
    }
    Ok(())
}

fn print_json(
    result: &TemplateResult,
    source: &str,
    parsed: Option<&Result<ParsedMessage, String>>,
    template_lint: &[TemplateFinding],
    differences: &[ReadingDifference],
) -> anyhow::Result<()> {
    let mut value = serde_json::to_value(result)?;
    if let Value::Object(map) = &mut value {
        map.insert("source".into(), json!(source));
        map.insert("reading_differences".into(), differences_json(differences));
        let findings = if result.grammar.is_empty() {
            Vec::new()
        } else {
            lint(&result.grammar, toolrail_gbnf::DEFAULT_ROOT)
        };
        map.insert("lint".into(), serde_json::to_value(&findings)?);
        map.insert("template_lint".into(), serde_json::to_value(template_lint)?);
        match parsed {
            Some(Ok(message)) => {
                map.insert("parsed".into(), serde_json::to_value(message)?);
            }
            Some(Err(error)) => {
                map.insert("parse_error".into(), json!(error));
            }
            None => {}
        }
    }
    super::output::write_json(&serde_json::to_string_pretty(&value)?)?;
    Ok(())
}

fn print_report(
    result: &TemplateResult,
    source: &str,
    parsed: Option<&Result<ParsedMessage, String>>,
    template_lint: &[TemplateFinding],
    differences: &[ReadingDifference],
) -> anyhow::Result<()> {
    let inputs = &result.inputs;
    outln!("template: {source}")?;
    outln!("format: {}", result.format)?;
    outln!(
        "inputs ({} defaults): tool_choice {}, parallel calls {}, thinking {}, reasoning format {}",
        inputs.defaults,
        inputs.tool_choice,
        on_off(inputs.parallel_tool_calls),
        on_off(inputs.enable_thinking),
        inputs.reasoning_format
    )?;
    for warning in &result.warnings {
        outln!("warning: {warning}")?;
    }
    if !differences.is_empty() {
        outln!(
            "the prompt shows the tools as a client sends them (as written); toolrail's grammar \
             and validator read them differently here:"
        )?;
        for difference in differences {
            outln!("note: {difference}")?;
        }
    }
    outln!(
        "\n== prompt ({} bytes) ==\n{}",
        result.prompt.len(),
        result.prompt
    )?;
    outln!("== generation prompt ==\n{:?}", result.generation_prompt)?;
    if result.grammar.is_empty() {
        outln!("\n== grammar: none (no tool-call grammar for this request) ==")?;
    } else {
        let lazy = if result.grammar_lazy {
            "lazy: dormant until a trigger fires"
        } else {
            "not lazy: constrains from the first token"
        };
        outln!("\n== grammar ({} bytes, {lazy}) ==", result.grammar.len())?;
        out!("{}", result.grammar)?;
        if !result.grammar.ends_with('\n') {
            outln!()?;
        }
        let findings = lint(&result.grammar, toolrail_gbnf::DEFAULT_ROOT);
        let errors = findings
            .iter()
            .filter(|d| d.severity == Severity::Error)
            .count();
        outln!(
            "== lint: {} finding(s), {errors} error(s) ==",
            findings.len()
        )?;
        for d in &findings {
            outln!(
                "{}\n",
                d.render(result.grammar.as_bytes(), "template grammar")
            )?;
        }
    }
    outln!("\n== triggers ({}) ==", result.grammar_triggers.len())?;
    for trigger in &result.grammar_triggers {
        outln!("  {:<12} {:?}", trigger.kind.to_string(), trigger.value)?;
    }
    if let Some(sampler) = &result.sampler {
        outln!("after llama-server's conversion:")?;
        for trigger in &sampler.triggers {
            match (trigger.kind, trigger.token) {
                (TriggerKind::Token, Some(id)) => {
                    outln!("  token        {:?} = token {id}", trigger.value)?
                }
                _ => outln!("  {:<12} {:?}", trigger.kind.to_string(), trigger.value)?,
            }
        }
        outln!("sampler regexes: {:?}", sampler.patterns)?;
        outln!("sampler trigger tokens: {:?}", sampler.tokens)?;
        if !sampler.prefill_tokens.is_empty() {
            outln!(
                "generation prompt tokens fed to the grammar first: {:?}",
                sampler.prefill_tokens
            )?;
        }
    }
    outln!("preserved tokens: {:?}", result.preserved_tokens)?;
    outln!("additional stops: {:?}", result.additional_stops)?;
    if result.supports_thinking {
        outln!(
            "thinking: starts with {:?}, ends with {:?}",
            result.thinking_start_tag,
            result.thinking_end_tags
        )?;
    }
    outln!(
        "parser: {} bytes (llama.cpp's serialized PEG parser)",
        result.parser.len()
    )?;
    outln!("\n== template lint: {} finding(s) ==", template_lint.len())?;
    for finding in template_lint {
        outln!("{}", finding.render())?;
    }
    match parsed {
        Some(Ok(message)) => {
            outln!("\n== llama.cpp's parse ==")?;
            outln!("content: {:?}", message.content)?;
            outln!("reasoning: {:?}", message.reasoning_content)?;
            outln!("tool calls: {}", message.tool_calls.len())?;
            for call in &message.tool_calls {
                outln!("  {} {}", call.name, call.arguments)?;
            }
        }
        Some(Err(error)) => outln!("\n== llama.cpp's parse failed ==\n{error}")?,
        None => {}
    }
    Ok(())
}

fn on_off(flag: bool) -> &'static str {
    if flag { "on" } else { "off" }
}
