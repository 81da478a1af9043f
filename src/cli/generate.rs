//! `toolrail generate --model M (--tools T [--format F] | --grammar G | --schema S) --prompt P
//! [--engine E] [--server URL [--request grammar|json-schema|tools]] [--transcript OUT.json]
//! [--markdown OUT.md]`: runs the model under the grammar on the generation worker (or on a
//! llama-server), streams the text, validates the result against the tools, and writes the
//! transcript.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{Context as _, bail};
use serde_json::{Value, json};

use super::grammar::FormatArg;
use toolrail_llm::server::{Props, RequestKind, ServerClient, ServerOptions, ServerWorker};
use toolrail_llm::template::{
    ChatTemplates, ReasoningFormat, ServerSwitch, TemplateRequest, ToolChoice,
};
use toolrail_llm::worker::{Command, EngineKind, Event, RunEvent, RunRequest, Worker};
use toolrail_llm::{ChatFormat, Model, ModelSpec, Models, SamplingDefaults};
use toolrail_tools::grammar::{GrammarOptions, schema_grammar, tool_call_grammar};
use toolrail_tools::prompt::build_prompt;
use toolrail_tools::toolset::ToolSet;
use toolrail_tools::validate::{ValidateOptions, Validator};
use toolrail_workbench::run::{family_for, sampling_with_defaults};
use toolrail_workbench::transcript::{
    ModelInfo, Sampling, ServerRequest, ServerRun, Stop, TRANSCRIPT_VERSION, TemplateRun,
    ThinkingBudget, Transcript,
};

/// Arguments of `toolrail generate`.
/// The `--engine` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum EngineArg {
    /// toolrail's own masks (token trie + memoized recognizer).
    Toolrail,
    /// llama.cpp's grammar sampler over the whole vocabulary.
    Llama,
    /// llguidance over the whole vocabulary: the same grammar (or the --schema itself, with its
    /// own JSON Schema compiler); its masks are compared with toolrail's at every step.
    Llguidance,
    /// No grammar: the model's own choice.
    None,
}

impl From<EngineArg> for EngineKind {
    fn from(e: EngineArg) -> Self {
        match e {
            EngineArg::Toolrail => EngineKind::Toolrail,
            EngineArg::Llama => EngineKind::Llama,
            EngineArg::Llguidance => EngineKind::Llguidance,
            EngineArg::None => EngineKind::None,
        }
    }
}

/// The `--request` values: what a llama-server is asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum RequestArg {
    /// `/completion` with toolrail's GBNF (from --tools, --grammar or --schema).
    Grammar,
    /// `/completion` with the --schema JSON Schema: the server converts it; toolrail checks
    /// the tokens against its own conversion.
    JsonSchema,
    /// `/v1/chat/completions` with the --tools: the server's chat template and its own
    /// tool-call grammar; the calls it parses are validated by toolrail.
    Tools,
}

#[derive(Debug, clap::Args)]
pub struct GenerateArgs {
    /// The model.
    #[command(flatten)]
    pub model: ModelArgs,
    /// A tool set: the grammar is its tool-call grammar, the prompt offers the tools.
    #[arg(long, conflicts_with = "grammar")]
    pub tools: Option<String>,
    /// The envelope tool calls are written in (with --tools).
    #[arg(long, value_enum, default_value_t = FormatArg::Openai)]
    pub format: FormatArg,
    /// A GBNF grammar file (instead of --tools).
    #[arg(long, conflicts_with = "schema")]
    pub grammar: Option<String>,
    /// A JSON Schema file (instead of --tools): the grammar is toolrail's conversion of it.
    #[arg(long, conflicts_with = "tools")]
    pub schema: Option<String>,
    /// The user's message (or the whole prompt with --raw).
    #[arg(long)]
    pub prompt: String,
    /// Use --prompt verbatim instead of building a prompt for the model family.
    #[arg(long)]
    pub raw: bool,
    /// Which engine masks the tokens.
    #[arg(long, value_enum, default_value_t = EngineArg::Toolrail)]
    pub engine: EngineArg,
    /// Also compute these engines' masks at every step (comma-separated: llama, llguidance),
    /// timed and compared with toolrail's over the whole vocabulary; in-process runs only.
    #[arg(long, value_enum, value_delimiter = ',', value_name = "ENGINES")]
    pub compare: Vec<EngineArg>,
    /// Stop after this many tokens (default: the models.toml entry's, else 256).
    #[arg(long)]
    pub max_tokens: Option<u32>,
    /// Temperature, 0 for greedy (default: the entry's, else 0).
    #[arg(long)]
    pub temperature: Option<f32>,
    /// Top-k, 0 for off (default: the entry's, else 40).
    #[arg(long)]
    pub top_k: Option<u32>,
    /// Top-p, 1 for off (default: the entry's, else 0.95).
    #[arg(long)]
    pub top_p: Option<f32>,
    /// Min-p, 0 for off (default: the entry's, else 0.05).
    #[arg(long)]
    pub min_p: Option<f32>,
    /// Random seed (default: the entry's, else 0).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Repetition penalty over the last 64 generated tokens, 1 for off (default: the entry's,
    /// else 1).
    #[arg(long)]
    pub repeat_penalty: Option<f32>,
    /// Let the sampled token stand even when it leaves too few tokens to finish the grammar
    /// (by default, near --max-tokens the most likely token that can still finish is taken).
    #[arg(long)]
    pub no_budget_guard: bool,
    /// Run on this llama-server (`http://host:port`, or the name of a `[[server]]` entry of
    /// models.toml) instead of in-process. --model still
    /// gives the model's vocabulary: the prompt is sent as token ids, and toolrail's recognizer
    /// follows every token the server sends (stacks, allowed counts, and a flag on any token
    /// the grammar forbids).
    #[arg(long, value_name = "URL")]
    pub server: Option<String>,
    /// The environment variable holding the server's API key (with --server).
    #[arg(long, value_name = "NAME", requires = "server")]
    pub api_key_env: Option<String>,
    /// What the server is asked for (with --server). Default `grammar`: toolrail's own
    /// grammar, so the server enforces exactly what toolrail checks. `json-schema` sends the
    /// --schema for the server to convert; `tools` sends the --tools to the chat endpoint
    /// (the server's template and tool grammar).
    #[arg(long, value_enum, default_value_t = RequestArg::Grammar, requires = "server")]
    pub request: RequestArg,
    /// With --server: skip the second request that reads each token's candidates after the
    /// server's sampling chain (`post_sampling_probs`).
    #[arg(long, requires = "server")]
    pub no_post_sampling: bool,
    /// Generate as llama-server does for a `tools` request: prompt, tool-call grammar and its
    /// lazy triggers from a chat template (the model's own with `--template` alone, or this
    /// Jinja file), the grammar dormant until a trigger fires, the output parsed by llama.cpp's
    /// parser for the template's format. Needs --tools.
    #[arg(
        long,
        value_name = "FILE",
        num_args = 0..=1,
        default_missing_value = "",
        requires = "tools",
        conflicts_with_all = ["grammar", "schema", "server", "raw"]
    )]
    pub template: Option<String>,
    /// With --template: `auto`, `required`, `none`, or a tool name.
    #[arg(long, default_value = "auto", requires = "template")]
    pub tool_choice: ToolChoice,
    /// With --template: `--parallel` or `--parallel true` allows parallel tool calls,
    /// `--parallel false` forbids them (default: llama-server's).
    #[arg(long, requires = "template", num_args = 0..=1, default_missing_value = "true")]
    pub parallel: Option<bool>,
    /// With --template: thinking on or off (default: llama-server's rule).
    #[arg(long, requires = "template")]
    pub thinking: Option<bool>,
    /// With --template: the reasoning format (none, auto, deepseek, deepseek-legacy).
    #[arg(long, requires = "template")]
    pub reasoning_format: Option<ReasoningFormat>,
    /// With --template: llama-server's `--reasoning-budget`: at most N tokens of thinking, then
    /// the end of thinking is forced (-1: no limit, the default; 0: ends thinking at once).
    #[arg(
        long,
        value_name = "N",
        requires = "template",
        allow_negative_numbers = true
    )]
    pub reasoning_budget: Option<i64>,
    /// With --template: llama-server's `--reasoning-budget-message`: text forced before the end
    /// tag when the budget runs out.
    #[arg(long, value_name = "TEXT", requires = "template")]
    pub reasoning_budget_message: Option<String>,
    /// Write the transcript (JSON) here.
    #[arg(long)]
    pub transcript: Option<PathBuf>,
    /// Write the transcript as Markdown here.
    #[arg(long)]
    pub markdown: Option<PathBuf>,
}

/// `--model` and `--models`: the commands that run a model find it the same way.
#[derive(Debug, clap::Args)]
pub struct ModelArgs {
    /// A GGUF file, or the name of a `models.toml` entry.
    #[arg(long)]
    pub model: String,
    /// The models file to look names up in (default: the first `models.toml` in the config
    /// folder, beside the executable or in the current folder; else the built-in entry for the
    /// test model).
    #[arg(long)]
    pub models: Option<PathBuf>,
}

impl ModelArgs {
    /// Finds the model: an existing path, else a `models.toml` entry. A path that exists but is
    /// no regular file (a directory, a FIFO) is taken as meant, and loading it says what it is.
    pub fn resolve(&self) -> anyhow::Result<ModelSpec> {
        let model = &self.model;
        if std::fs::metadata(model).is_ok() {
            return Ok(ModelSpec::from_path(model));
        }
        let models = Models::load(self.models.as_deref())?;
        models
            .find(model)
            .with_context(|| format!("no file '{model}', and no entry of that name"))
    }
}

/// Where the run happens: in-process, or on a llama-server.
enum Runner {
    Local(Worker),
    Server(ServerWorker),
}

impl Runner {
    fn send(&self, command: Command) -> bool {
        match self {
            Runner::Local(w) => w.send(command),
            Runner::Server(w) => w.send(command),
        }
    }

    /// The next event (None when the worker is gone).
    fn recv(&self) -> Option<RunEvent> {
        match self {
            Runner::Local(w) => w.events().recv().ok(),
            Runner::Server(w) => w.events().recv().ok(),
        }
    }
}

/// Connects to the server and says what it is (`llama-server b11434 at URL, model M`).
fn connect(url: &str, api_key_env: Option<&str>) -> anyhow::Result<(ServerClient, String, Props)> {
    let api_key = match api_key_env {
        Some(name) => Some(
            std::env::var(name)
                .with_context(|| format!("--api-key-env {name}: the variable is not set"))?,
        ),
        None => None,
    };
    let client = ServerClient::new(url, api_key)?;
    client.health()?;
    let props = client.props()?;
    let build = props
        .build()
        .map_or("of unknown build".to_owned(), |b| format!("b{b}"));
    let model = props
        .model_alias
        .clone()
        .or(props.model_path.clone())
        .unwrap_or_else(|| "an unnamed model".into());
    Ok((
        client.clone(),
        format!("llama-server {build} at {}, model {model}", client.url()),
        props,
    ))
}

/// Runs `toolrail generate`: exit 0 when the run ends normally (and the output is a valid call
/// when tools were given), 1 when the output is not valid, 2 on errors.
pub fn run(args: &GenerateArgs) -> anyhow::Result<ExitCode> {
    // What can be compared, checked before anything is loaded.
    if let Some(e) = args
        .compare
        .iter()
        .find(|e| matches!(e, EngineArg::Toolrail | EngineArg::None))
    {
        bail!(
            "--compare {}: only llama and llguidance can be compared with toolrail's masks",
            EngineKind::from(*e)
        );
    }
    if (args.engine == EngineArg::None || args.request == RequestArg::Tools)
        && !args.compare.is_empty()
    {
        bail!("--compare needs a grammar: it does not go with --engine none or --request tools");
    }
    // The same rules as models.toml, checked before anything is loaded.
    let given = SamplingDefaults {
        temperature: args.temperature,
        top_k: args.top_k,
        top_p: args.top_p,
        min_p: args.min_p,
        seed: None,
        max_tokens: args.max_tokens,
        repeat_penalty: args.repeat_penalty,
    };
    if let Err((key, message)) = given.check() {
        bail!("--{} {message}", key.replace('_', "-"));
    }
    let budget = match args.reasoning_budget {
        None | Some(-1) => None,
        Some(n) => Some(u32::try_from(n).map_err(|_| {
            anyhow::anyhow!(
                "--reasoning-budget {n}: give -1 (no limit) or 0 to {}",
                u32::MAX
            )
        })?),
    };
    // A grammar file that can never be completed is refused before the model loads.
    if args.server.is_none() && args.request != RequestArg::Grammar {
        bail!("--request applies to runs on a llama-server: give --server");
    }
    match args.request {
        RequestArg::JsonSchema if args.schema.is_none() => {
            bail!("--request json-schema sends a JSON Schema: give --schema FILE")
        }
        RequestArg::Tools if args.tools.is_none() => {
            bail!("--request tools sends a tool set to the chat endpoint: give --tools FILE")
        }
        _ => {}
    }
    let schema: Option<Value> = match &args.schema {
        Some(path) => {
            let bytes = super::read_input(path)?;
            Some(
                serde_json::from_slice(&bytes)
                    .with_context(|| format!("{path}: not a JSON Schema (not JSON)"))?,
            )
        }
        None => None,
    };
    let grammar_text = match &args.grammar {
        Some(path) if args.tools.is_none() => {
            let text = super::read_grammar(path)?;
            if let Err(code) = super::refuse_unusable(&text, path) {
                return Ok(code);
            }
            Some(text)
        }
        _ => None,
    };
    let spec = args.model.resolve()?;
    eprintln!("loading {} ...", spec.path.display());
    let model = Model::load(&spec, |_| true)?;
    if args.template.is_some() && args.format != FormatArg::Openai {
        bail!(
            "--format applies to toolrail's own envelopes; with --template the chat template decides the format"
        );
    }
    let tools = match &args.tools {
        Some(path) => {
            let text = super::read_text(path, "the tool set")?;
            Some(super::load_tool_set(&text, path)?)
        }
        None => None,
    };
    let mut template = match (&args.template, &tools) {
        (Some(file), Some(tools)) => Some(apply_template(args, file, &spec, tools)?),
        _ => None,
    };
    // the transcript records the budget the run had
    if let Some(t) = template.as_mut() {
        t.budget = budget.map(|tokens| ThinkingBudget {
            tokens,
            message: args.reasoning_budget_message.clone().unwrap_or_default(),
        });
    }
    let grammar = match (&tools, &args.grammar) {
        (Some(_), _) if template.is_some() => template
            .as_ref()
            .map(|t| t.result.grammar.clone())
            .filter(|g| !g.is_empty()),
        // the server builds its own grammar from its chat template
        (Some(_), _) if args.request == RequestArg::Tools => None,
        (None, None) if schema.is_some() => {
            let opts = GrammarOptions::default();
            let path = args.schema.as_deref().unwrap_or_default();
            Some(
                schema_grammar(schema.as_ref().unwrap_or(&Value::Null), &opts)
                    .with_context(|| path.to_owned())?
                    .text,
            )
        }
        (Some(tools), _) => {
            let opts = GrammarOptions {
                format: args.format.into(),
                ..GrammarOptions::default()
            };
            Some(tool_call_grammar(tools, &opts)?.text)
        }
        (None, Some(_)) => grammar_text,
        (None, None) if args.engine == EngineArg::None => None,
        (None, None) => bail!("give --tools or --grammar (or --engine none)"),
    };
    let tool_values: Vec<Value> = tools
        .iter()
        .flat_map(|t| t.tools())
        .map(|t| json!({"name": t.name, "description": t.description, "parameters": t.parameters}))
        .collect();
    let prompt = if let Some(template) = &template {
        template.result.prompt.clone()
    } else if args.raw {
        args.prompt.clone()
    } else {
        let family = match spec.chat_format {
            ChatFormat::Family(f) => f,
            ChatFormat::Auto => family_for(args.format.into()),
        };
        build_prompt(family, &tool_values, &args.prompt, None)?
    };
    // The command line over the models.toml entry's defaults over toolrail's.
    let defaults = sampling_with_defaults(&Sampling::default(), &spec);
    let sampling = Sampling {
        temperature: args.temperature.unwrap_or(defaults.temperature),
        top_k: args.top_k.unwrap_or(defaults.top_k),
        top_p: args.top_p.unwrap_or(defaults.top_p),
        min_p: args.min_p.unwrap_or(defaults.min_p),
        seed: args.seed.unwrap_or(defaults.seed),
        max_tokens: args.max_tokens.unwrap_or(defaults.max_tokens),
        finish_in_budget: !args.no_budget_guard,
        repeat_penalty: args.repeat_penalty.unwrap_or(defaults.repeat_penalty),
    };
    // How llama-server gates the template's grammar, with its reasoning budget on this
    // vocabulary.
    let gate = match &template {
        Some(t) => {
            let message = args.reasoning_budget_message.as_deref().unwrap_or("");
            let gate = t.result.gate_setup_with_budget(budget, message)?;
            if budget.is_some() && gate.reasoning.is_none() {
                eprintln!(
                    "reasoning budget: ignored: the template has no thinking tags (llama-server ignores it too)"
                );
            }
            Some(gate)
        }
        None => None,
    };
    let info = model.info().clone();
    let engine: EngineKind = if args.request == RequestArg::Tools {
        EngineKind::None
    } else {
        args.engine.into()
    };
    let (worker, server, mut server_run) = match &args.server {
        Some(url) => {
            if !args.compare.is_empty() {
                bail!("--compare runs in-process; it does not go with --server");
            }
            if matches!(args.engine, EngineArg::Llama | EngineArg::Llguidance) {
                bail!(
                    "--engine {} runs in-process; with --server the server's own llama.cpp masks the tokens",
                    EngineKind::from(args.engine)
                );
            }
            let (url, key_env) = if url.starts_with("http://") || url.contains("://") {
                (url.clone(), args.api_key_env.clone())
            } else {
                let entry = Models::load(args.model.models.as_deref())?.find_server(url)?;
                (entry.url, args.api_key_env.clone().or(entry.api_key_env))
            };
            let (client, described, props) = connect(&url, key_env.as_deref())?;
            eprintln!("server: {described}");
            let (kind, recorded) = match args.request {
                RequestArg::Grammar => (RequestKind::Grammar, ServerRequest::Grammar),
                RequestArg::JsonSchema => {
                    let schema = schema.clone().unwrap_or(Value::Null);
                    (
                        RequestKind::JsonSchema(schema.clone()),
                        ServerRequest::JsonSchema { schema },
                    )
                }
                RequestArg::Tools => (
                    RequestKind::Tools {
                        tools: tool_values
                            .iter()
                            .map(|t| json!({"type": "function", "function": t}))
                            .collect(),
                        user: args.prompt.clone(),
                    },
                    ServerRequest::Tools {
                        user: args.prompt.clone(),
                        calls: Vec::new(),
                    },
                ),
            };
            let options = ServerOptions {
                request: kind,
                sent_grammar: None,
                post_sampling: !args.no_post_sampling,
            };
            (
                Runner::Server(ServerWorker::spawn_with(
                    client.clone(),
                    Some(model),
                    Arc::new(|| {}),
                    options,
                )),
                Some(described),
                Some(ServerRun {
                    url: client.url().to_owned(),
                    build: props.build_info.clone(),
                    model: props.model_alias.clone().or(props.model_path.clone()),
                    request: recorded,
                }),
            )
        }
        None => (
            Runner::Local(Worker::spawn(model, Arc::new(|| {}))),
            None,
            None,
        ),
    };
    let request = RunRequest {
        id: 1,
        prompt: prompt.clone(),
        grammar: grammar.clone(),
        // llguidance compiles a --schema itself; the tools' grammar it reads as GBNF
        schema: schema
            .clone()
            .filter(|_| tools.is_none() && args.grammar.is_none()),
        engine,
        compare: args.compare.iter().map(|&e| e.into()).collect(),
        sampling: sampling.clone(),
        start_paused: false,
        show: 5,
        context: None,
        threads: None,
        prefix: Vec::new(),
        reuse_cache: false,
        gate,
    };
    let start = std::time::Instant::now();
    let mut first_token_ms: Option<f64> = None;
    worker.send(Command::Start(Box::new(request)));
    let created_unix = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let mut tokens: Vec<toolrail_workbench::transcript::TokenRecord> = Vec::new();
    let mut server_calls: Option<Vec<Value>> = None;
    let (stop, totals, output) = loop {
        match worker.recv().map(|e| e.event) {
            Some(Event::Token(record)) => {
                first_token_ms.get_or_insert_with(|| start.elapsed().as_secs_f64() * 1e3);
                if let Some(flag) = &record.flag {
                    eprintln!("\nlive check: token {}: {flag}", record.index);
                }
                if let (Some(sampled), Some(note)) = (record.budget_replaced, &record.budget) {
                    eprintln!(
                        "\nbudget guard: token {}: took {:?} instead of token {sampled}: {}",
                        record.index,
                        record.piece,
                        note.describe()
                    );
                }
                for difference in record.mask_differences() {
                    eprintln!(
                        "\nmask comparison: token {}: {} ({} token(s) only {} allows, {} only toolrail allows)",
                        record.index,
                        difference.describe(),
                        difference.only_engine,
                        difference.engine,
                        difference.only_toolrail
                    );
                }
                out!("{}", record.piece)?;
                let _ = std::io::stdout().flush();
                tokens.push(*record);
            }
            Some(Event::Done {
                stop,
                totals,
                output,
            }) => break (stop, totals, output),
            Some(Event::Error(message)) => eprintln!("toolrail: {message}"),
            Some(Event::Amended(record)) => {
                if let Some(slot) = tokens.get_mut(record.index as usize) {
                    *slot = *record;
                }
            }
            Some(Event::ServerCalls(calls)) => server_calls = Some(calls),
            Some(_) => {}
            None => bail!(
                "the generation worker stopped unexpectedly after {} tokens (its thread ended \
                 without reporting an error); run the command again",
                tokens.len()
            ),
        }
    };
    outln!()?;
    let stop_text = match &stop {
        Stop::EndOfGeneration => "end of generation".to_string(),
        Stop::MaxTokens => format!("token limit ({})", sampling.max_tokens),
        Stop::Cancelled => "cancelled".to_string(),
        Stop::DeadEnd { offset, expected } => {
            format!(
                "dead end at byte {offset}: no token can continue; expected {}",
                expected.join(", ")
            )
        }
        Stop::StopString { stop } => format!("stop string {stop:?} (the output ends before it)"),
        Stop::Error { message } => format!("error: {message}"),
    };
    eprintln!(
        "stopped: {stop_text}; {} tokens, {:.1} tokens/s, mask {:.2} ms total, first token {} after start",
        totals.tokens,
        totals.tokens_per_s,
        totals.mask_ms,
        first_token_ms.map_or("never".to_owned(), |ms| format!("{ms:.0} ms"))
    );
    if totals.compared_steps > 0 {
        eprintln!(
            "mask comparison: {engine}'s mask and toolrail's, over the whole vocabulary: {} of {} \
             step(s) differ",
            totals.differing_steps, totals.compared_steps
        );
    }
    if !totals.other_engines.is_empty() {
        eprintln!(
            "mask time per engine: {} {:.2} ms total ({} steps, the run's engine)",
            engine, totals.mask_ms, totals.tokens
        );
    }
    for other in &totals.other_engines {
        let compared = if other.engine == EngineKind::Toolrail {
            String::new()
        } else {
            format!(
                "; its mask and toolrail's differ at {} of {} step(s)",
                other.differing_steps, other.compared_steps
            )
        };
        eprintln!(
            "mask time per engine: {} {:.2} ms total ({} steps){compared}",
            other.engine, other.mask_ms, other.steps
        );
    }
    if server.is_some() {
        let flagged = tokens.iter().filter(|t| t.flag.is_some()).count();
        let differing: Vec<&toolrail_workbench::transcript::TokenRecord> = tokens
            .iter()
            .filter(|t| !t.disagreements.is_empty())
            .collect();
        let checked = tokens.iter().filter(|t| t.stacks.is_some()).count();
        if grammar.is_some() {
            eprintln!(
                "live check: {checked} of {} tokens followed by toolrail's recognizer; {flagged} \
                 token(s) the grammar forbids; {} step(s) where the server's allowed set differs \
                 from toolrail's within the candidates returned",
                tokens.len(),
                differing.len()
            );
        } else {
            eprintln!("live check: none (the server's own grammar; toolrail validates the calls)");
        }
        for t in differing.iter().take(10) {
            let list: Vec<String> = t
                .disagreements
                .iter()
                .map(|d| {
                    format!(
                        "{:?} ({})",
                        d.piece,
                        if d.server_allows {
                            "server allows, toolrail forbids"
                        } else {
                            "toolrail allows, server forbids"
                        }
                    )
                })
                .collect();
            eprintln!("  step {}: {}", t.index, list.join(", "));
        }
    }
    let mut valid = true;
    let validation = match (&tools, &server_calls) {
        (Some(tools), None) if template.is_some() => {
            if let Some(t) = &template {
                report_thinking(&tokens);
                report_trigger(t, &tokens, &output);
            }
            let run = template.as_mut().map(|t| t.parse(&output));
            let (checked, messages) = match run {
                Some(run) => validate_parsed(tools, run, &args.tool_choice)?,
                None => (Value::Null, Vec::new()),
            };
            valid = messages.is_empty();
            if valid {
                eprintln!("validation: llama.cpp's parse is valid for the tool set");
            } else {
                eprintln!("validation: invalid: {}", messages.join("; "));
            }
            Some(json!({"valid": valid, "messages": messages, "calls": checked}))
        }
        (Some(tools), Some(calls)) => {
            let validator = Validator::new(tools)?;
            let mut messages: Vec<String> = Vec::new();
            if calls.is_empty() {
                messages.push("the server parsed no tool call from the output".into());
            }
            for (i, call) in calls.iter().enumerate() {
                let name = call["name"].as_str().unwrap_or_default();
                let text = call["arguments"].as_str().unwrap_or_default();
                eprintln!("server call {i}: {name}({text})");
                match serde_json::from_str::<Value>(text) {
                    Ok(arguments) => {
                        let check = validator.check_call(name, &arguments);
                        if !check.is_valid() {
                            messages
                                .push(format!("call {i} ({name}): {}", check.feedback.join("; ")));
                        }
                    }
                    Err(e) => messages.push(format!("call {i} ({name}): arguments not JSON: {e}")),
                }
            }
            valid = messages.is_empty();
            if valid {
                eprintln!("validation: valid call(s), as the server parsed them");
            } else {
                eprintln!("validation: invalid: {}", messages.join("; "));
            }
            if let Some(ServerRun {
                request:
                    ServerRequest::Tools {
                        calls: recorded, ..
                    },
                ..
            }) = &mut server_run
            {
                recorded.clone_from(calls);
            }
            Some(json!({"valid": valid, "messages": messages, "server_calls": calls}))
        }
        (Some(tools), None) => {
            let report = Validator::new(tools)?.validate_output(
                args.format.into(),
                &output,
                ValidateOptions::default(),
            );
            valid = report.is_valid();
            match report.feedback() {
                Some(feedback) => eprintln!("validation: invalid: {feedback}"),
                None => eprintln!("validation: valid call"),
            }
            Some(
                json!({"valid": valid, "messages": report.messages(), "feedback": report.feedback()}),
            )
        }
        (None, _) => None,
    };
    let transcript = Transcript {
        version: TRANSCRIPT_VERSION,
        toolrail_version: env!("CARGO_PKG_VERSION").into(),
        created_unix,
        model: ModelInfo {
            name: spec.name.clone(),
            path: info.path.display().to_string(),
            architecture: info.architecture.clone(),
            vocab_size: info.vocab_size as u32,
            file_size: info.file_size,
        },
        prompt,
        tools: tools.as_ref().map(|_| Value::Array(tool_values.clone())),
        format: tools.as_ref().map(|_| args.format.into()),
        grammar,
        engine,
        server,
        server_run,
        sampling,
        tokens,
        output,
        stop: stop.clone(),
        validation,
        totals,
        template,
    };
    if let Some(path) = &args.transcript {
        transcript.save(path)?;
        eprintln!("transcript: {}", path.display());
    }
    if let Some(path) = &args.markdown {
        transcript.save_markdown(path)?;
        eprintln!("markdown: {}", path.display());
    }
    Ok(match stop {
        Stop::Error { .. } | Stop::DeadEnd { .. } => ExitCode::from(2),
        _ if !valid => ExitCode::from(1),
        _ => ExitCode::SUCCESS,
    })
}

/// Builds what llama-server builds for `tools` from the chat template (`file`, or the model's own
/// when empty) with the model's vocabulary, and says what it is on stderr.
fn apply_template(
    args: &GenerateArgs,
    file: &str,
    spec: &ModelSpec,
    tools: &ToolSet,
) -> anyhow::Result<TemplateRun> {
    let text = if file.is_empty() {
        None
    } else {
        Some(
            String::from_utf8(super::read_input(file)?)
                .with_context(|| format!("{file}: the template is not UTF-8"))?,
        )
    };
    let source = if file.is_empty() {
        format!("{} (its chat template)", spec.path.display())
    } else {
        file.to_owned()
    };
    let templates =
        ChatTemplates::from_gguf(&spec.path, text.as_deref()).with_context(|| source.clone())?;
    let mut request = TemplateRequest::for_tools(tools, &args.prompt);
    request.tool_choice = args.tool_choice.clone();
    if let ToolChoice::Named(name) = &request.tool_choice
        && tools.get(name).is_none()
    {
        bail!(
            "--tool-choice {name}: not auto, required, none, or a tool of the set ({})",
            tools.names().join(", ")
        );
    }
    request.parallel_tool_calls = ServerSwitch::from(args.parallel);
    request.enable_thinking = ServerSwitch::from(args.thinking);
    request.reasoning_format = args.reasoning_format.unwrap_or_default();
    let result = templates.apply(&request).with_context(|| source.clone())?;
    eprintln!(
        "template: {source}: format {}, grammar {}",
        result.format,
        if result.grammar.is_empty() {
            "none (unconstrained)"
        } else if result.grammar_lazy {
            "lazy (dormant until a trigger fires)"
        } else {
            "not lazy (constrains from the first token)"
        }
    );
    for warning in &result.warnings {
        eprintln!("template: warning: {warning}");
    }
    if let Some(sampler) = &result.sampler
        && result.grammar_lazy
    {
        for trigger in &sampler.triggers {
            eprintln!("template: trigger {} {:?}", trigger.kind, trigger.value);
        }
    }
    Ok(TemplateRun {
        source,
        result,
        parsed: None,
        parse_error: None,
        budget: None,
    })
}

/// llama.cpp's parse of a template run's output, each call checked against the tool set:
/// the calls as JSON and what is wrong (empty when valid). A parse llama.cpp refuses, or no
/// call under `tool_choice` `required`, is invalid.
fn validate_parsed(
    tools: &ToolSet,
    run: &TemplateRun,
    tool_choice: &ToolChoice,
) -> anyhow::Result<(Value, Vec<String>)> {
    let mut messages = Vec::new();
    let Some(parsed) = &run.parsed else {
        let error = run.parse_error.clone().unwrap_or_default();
        eprintln!("llama.cpp's parse: failed: {error}");
        messages.push(format!("llama.cpp's parser refused the output: {error}"));
        return Ok((Value::Null, messages));
    };
    eprintln!(
        "llama.cpp's parse: content {:?}, reasoning {:?}, {} call(s)",
        parsed.content,
        parsed.reasoning_content,
        parsed.tool_calls.len()
    );
    if parsed.tool_calls.is_empty() && *tool_choice == ToolChoice::Required {
        messages.push("tool_choice is required but llama.cpp parsed no tool call".into());
    }
    let validator = Validator::new(tools)?;
    for (i, call) in parsed.tool_calls.iter().enumerate() {
        eprintln!("call {i}: {}({})", call.name, call.arguments);
        match serde_json::from_str::<Value>(&call.arguments) {
            Ok(arguments) => {
                let check = validator.check_call(&call.name, &arguments);
                if !check.is_valid() {
                    messages.push(format!(
                        "call {i} ({}): {}",
                        call.name,
                        check.feedback.join("; ")
                    ));
                }
            }
            Err(e) => messages.push(format!("call {i} ({}): arguments not JSON: {e}", call.name)),
        }
    }
    Ok((serde_json::to_value(&parsed.tool_calls)?, messages))
}

/// The reasoning budget on stderr: where thinking started, and where it ended (forced by the
/// budget, or closed by the model).
fn report_thinking(tokens: &[toolrail_workbench::transcript::TokenRecord]) {
    use toolrail_llm::record::ThinkingNote;
    let mut line = Vec::new();
    for t in tokens {
        match &t.thinking {
            Some(ThinkingNote::Started { budget }) => line.push(format!(
                "thinking started at token {} ({})",
                t.index,
                budget.map_or("no limit".to_owned(), |b| format!("budget {b} tokens"))
            )),
            Some(ThinkingNote::Exhausted) => line.push(format!(
                "the budget ran out at token {} ({:?}): the end was forced from token {}",
                t.index,
                t.piece,
                t.index + 1
            )),
            Some(ThinkingNote::Ended { by_budget }) => line.push(format!(
                "thinking ended at token {} ({:?}){}",
                t.index,
                t.piece,
                if *by_budget { ", forced" } else { "" }
            )),
            _ => {}
        }
    }
    if !line.is_empty() {
        eprintln!("reasoning: {}", line.join("; "));
    }
}

/// The trigger timeline on stderr: where the lazy grammar woke, or why it never did.
fn report_trigger(
    run: &TemplateRun,
    tokens: &[toolrail_workbench::transcript::TokenRecord],
    output: &str,
) {
    use toolrail_llm::record::LazyNote;
    if !run.result.grammar_lazy || run.result.grammar.is_empty() {
        return;
    }
    let scan_ms = LazyNote::total_scan_ms(tokens.iter().map(|t| t.lazy.as_ref()));
    let fired = tokens.iter().find_map(|t| match &t.lazy {
        Some(LazyNote::Fired {
            trigger,
            grammar_start,
            replayed,
            ..
        }) => Some(format!(
            "trigger {trigger:?} fired at token {} ({:?}); the grammar starts at byte {grammar_start} with {replayed:?}",
            t.index, t.piece
        )),
        _ => None,
    });
    let patterns = run
        .result
        .sampler
        .as_ref()
        .map_or(&[][..], |s| &s.patterns[..]);
    let line = match fired {
        Some(line) => line,
        None => match toolrail_llm::lazy_gate::nearest_miss(patterns, output.as_bytes()) {
            Some(miss) => format!("no trigger fired; nearest: {}", miss.describe()),
            None => "no trigger fired; no trigger word starts in the output".to_owned(),
        },
    };
    eprintln!("lazy grammar: {line}; trigger search {scan_ms:.3} ms in all");
}
