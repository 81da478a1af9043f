//! `toolrail generate --model M (--tools T [--format F] | --grammar G | --schema S) --prompt P
//! [--engine E] [--server URL [--request grammar|json-schema|tools]] [--transcript OUT.json]
//! [--markdown OUT.md]`: runs the model under the grammar through the run controller, as the
//! app does (in-process, or on a llama-server), streams the text, says what the run's
//! validation says, and writes the run's transcript.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use serde_json::Value;

use super::grammar::FormatArg;
use toolrail_llm::server::ServerClient;
use toolrail_llm::settings::{
    CacheType, ComputeOptions, FlashAttention, LogitSettings, ServerFlags,
};
use toolrail_llm::template::{
    ChatTemplates, ReasoningFormat, ServerSwitch, TemplateRequest, ToolChoice,
};
use toolrail_llm::worker::EngineKind;
use toolrail_llm::{ChatFormat, Model, ModelSpec, Models, SamplingDefaults};
use toolrail_tools::grammar::{GrammarOptions, schema_grammar, tool_call_grammar};
use toolrail_tools::toolset::ToolSet;
use toolrail_tools::validate::ValidateOptions;
use toolrail_workbench::run::{
    PromptStyle, RunController, RunId, RunInputs, RunSetup, ServerRequestChoice, ServerState,
    StartMode, family_for, prompt_notes, sampling_with_defaults,
};
use toolrail_workbench::transcript::explain::{Topic, explain};
use toolrail_workbench::transcript::{
    Sampling, Stop, TemplateRun, ThinkingBudget, TokenRecord, Transcript,
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
    /// Decoding threads (default: the models.toml entry's, else the physical cores not busy
    /// with other work, at least 1; stderr and the transcript say which and why).
    #[arg(long, value_parser = super::common::parse_threads)]
    pub threads: Option<u32>,
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
    /// The environment variable holding the server's API key (with --server or --like-server).
    #[arg(long, value_name = "NAME")]
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
    /// In-process: llama.cpp's flash attention (on, off, auto; default: the models.toml
    /// entry's, else auto, as llama-server's `-fa`).
    #[arg(long, value_name = "on|off|auto", conflicts_with = "server")]
    pub flash_attn: Option<FlashAttention>,
    /// In-process: the logical batch, as llama-server's `-b` (default: the entry's, else 2048).
    #[arg(long, value_name = "N", conflicts_with = "server", value_parser = clap::value_parser!(u32).range(1..))]
    pub batch: Option<u32>,
    /// In-process: the micro-batch, as llama-server's `-ub` (default: the entry's, else 512).
    #[arg(long, value_name = "N", conflicts_with = "server", value_parser = clap::value_parser!(u32).range(1..))]
    pub ubatch: Option<u32>,
    /// In-process: the K cache's type, as llama-server's `-ctk` (default: f16).
    #[arg(long, value_name = "TYPE", conflicts_with = "server")]
    pub cache_type_k: Option<CacheType>,
    /// In-process: the V cache's type, as llama-server's `-ctv` (default: f16).
    #[arg(long, value_name = "TYPE", conflicts_with = "server")]
    pub cache_type_v: Option<CacheType>,
    /// Run in-process computing the logits as this llama-server does (a URL or a `[[server]]`
    /// entry): its flash attention, batch sizes and cache types, from its entry's `flags` or
    /// --server-flags (llama-server does not report them), else its defaults. The flags above
    /// override single settings.
    #[arg(long, value_name = "URL", conflicts_with = "server")]
    pub like_server: Option<String>,
    /// The flags the llama-server was started with (`"-fa on -ub 256 -ctk q8_0"`), with
    /// --server or --like-server: recorded with the run's settings, since the server does not
    /// report them (default: the `[[server]]` entry's `flags`).
    #[arg(long, value_name = "FLAGS", allow_hyphen_values = true)]
    pub server_flags: Option<String>,
    /// Write the transcript (JSON) here: the exact text, control characters and all (only
    /// what is shown on the terminal is escaped). Refused when it names an input or
    /// --markdown's file.
    #[arg(long)]
    pub transcript: Option<PathBuf>,
    /// Write the transcript as Markdown here (the exact text, as --transcript).
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
    /// Model layers to put on the GPU (over the models.toml entry's `gpu_layers`; 999: all).
    /// Needs a build with a GPU backend (`--features cuda`, `vulkan` or `metal`).
    #[arg(long)]
    pub gpu_layers: Option<u32>,
}

impl ModelArgs {
    /// `--model` alone (no models file named, the entry's own GPU layers).
    pub fn named(model: impl Into<String>, models: Option<PathBuf>) -> ModelArgs {
        ModelArgs {
            model: model.into(),
            models,
            gpu_layers: None,
        }
    }

    /// Finds and loads the model, saying on stderr (unless `quiet`) which file and where it
    /// computes (the CPU, or how many layers on which GPU).
    pub fn load(&self, quiet: bool) -> anyhow::Result<Model> {
        let spec = self.resolve()?;
        if !quiet {
            errln!("loading {} ...", spec.path.display());
        }
        let model = Model::load(&spec, |_| true)?;
        if !quiet {
            errln!("compute: {}", model.info().placement.summary());
        }
        Ok(model)
    }

    /// Finds the model: an existing path, else a `models.toml` entry. A path that exists but is
    /// no regular file (a directory, a FIFO) is taken as meant, and loading it says what it is.
    pub fn resolve(&self) -> anyhow::Result<ModelSpec> {
        let model = &self.model;
        let mut spec = if std::fs::metadata(model).is_ok() {
            ModelSpec::from_path(model)
        } else {
            Models::load(self.models.as_deref())?
                .find(model)
                .with_context(|| format!("no file '{model}', and no entry of that name"))?
        };
        if let Some(layers) = self.gpu_layers {
            spec.gpu_layers = layers;
        }
        Ok(spec)
    }
}

/// The API key for a server: the environment variable `name`, which must be set.
fn api_key(name: Option<&str>) -> anyhow::Result<Option<String>> {
    match name {
        Some(name) => Ok(Some(std::env::var(name).with_context(|| {
            format!("--api-key-env {name}: the variable is not set")
        })?)),
        None => Ok(None),
    }
}

/// The in-process compute options and context size: the flags given, over a `--like-server`'s
/// settings (said on stderr, with what could not be matched).
fn compute_options(
    args: &GenerateArgs,
    model: &Model,
) -> anyhow::Result<(ComputeOptions, Option<u32>)> {
    let given = ComputeOptions {
        flash_attention: args.flash_attn,
        batch: args.batch,
        ubatch: args.ubatch,
        cache_type_k: args.cache_type_k,
        cache_type_v: args.cache_type_v,
        prompt_split: None,
    };
    let Some(name) = &args.like_server else {
        return Ok((given, None));
    };
    // The server runs the same model (the prompt is sent as its token ids).
    let settings = ServerTarget::resolve(args, name)?.settings(model.makes_server_checkpoints())?;
    let (like, unmatched) = ComputeOptions::matching(&settings);
    errln!(
        "like the server: {}: {}",
        settings.engine,
        settings.summary()
    );
    for line in unmatched {
        errln!("like the server: not matched: {line}");
    }
    Ok((given.or(like), settings.context.value().copied()))
}

/// A llama-server named on the command line: its URL, API key variable and the flags it was
/// started with (--server-flags, else its `[[server]]` entry's).
struct ServerTarget {
    url: String,
    key_env: Option<String>,
    flags: ServerFlags,
}

impl ServerTarget {
    /// `name` is a URL or the name of a `[[server]]` entry.
    fn resolve(args: &GenerateArgs, name: &str) -> anyhow::Result<ServerTarget> {
        let stated = args
            .server_flags
            .as_deref()
            .map(ServerFlags::parse)
            .transpose()
            .map_err(|e| anyhow::anyhow!("--server-flags: {e}"))?;
        if name.contains("://") {
            return Ok(ServerTarget {
                url: name.to_owned(),
                key_env: args.api_key_env.clone(),
                flags: stated.unwrap_or_default(),
            });
        }
        let entry = Models::load(args.model.models.as_deref())?.find_server(name)?;
        if let Some(vocab) = entry.vocab.as_ref().filter(|v| **v != args.model.model) {
            errln!(
                "server {}: its entry names the vocabulary of model {vocab}, but --model {} is used",
                entry.name,
                args.model.model
            );
        }
        Ok(ServerTarget {
            url: entry.url,
            key_env: args.api_key_env.clone().or(entry.api_key_env),
            flags: stated.unwrap_or(entry.flags),
        })
    }

    /// What the server computes with: `/props` and the stated flags; `checkpoints`: whether
    /// its model is one llama-server makes checkpoints for.
    fn settings(&self, checkpoints: bool) -> anyhow::Result<LogitSettings> {
        let client = ServerClient::new(&self.url, api_key(self.key_env.as_deref())?)?;
        let props = client.props()?;
        Ok(self.flags.server_settings(
            toolrail_llm::settings::Backend::Server {
                url: client.url().to_owned(),
            },
            props.n_ctx.and_then(|n| u32::try_from(n).ok()),
            props.build_info,
            None,
            Some(checkpoints),
        ))
    }
}

/// Connects `controller` to the llama-server `--server` names (a URL, or a `[[server]]` entry
/// of models.toml), waiting for the answer, and says what it is
/// (`llama-server b11434 at URL, model M`).
fn connect(controller: &mut RunController, args: &GenerateArgs, url: &str) -> anyhow::Result<()> {
    let target = ServerTarget::resolve(args, url)?;
    let url = target.url;
    controller.set_server_flags(target.flags);
    controller.connect_server(&url, api_key(target.key_env.as_deref())?, None)?;
    while matches!(controller.server_state(), ServerState::Connecting { .. }) {
        controller.wait(Duration::from_millis(100));
    }
    match controller.server_state() {
        ServerState::Connected(connection) => {
            errln!("server: {}", connection.described());
            Ok(())
        }
        ServerState::Failed { message, .. } => bail!("{message}"),
        ServerState::Disconnected | ServerState::Connecting { .. } => {
            bail!(
                "{}: the connection was dropped",
                toolrail_llm::server::redact_url(&url)
            )
        }
    }
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
    if args.api_key_env.is_some() && args.server.is_none() && args.like_server.is_none() {
        bail!("--api-key-env names a server's key: it goes with --server or --like-server");
    }
    if let Some(flags) = &args.server_flags {
        if args.server.is_none() && args.like_server.is_none() {
            bail!("--server-flags describes a server: it goes with --server or --like-server");
        }
        ServerFlags::parse(flags).map_err(|e| anyhow::anyhow!("--server-flags: {e}"))?;
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
    if args.server.is_some() {
        if !args.compare.is_empty() {
            bail!("--compare runs in-process; it does not go with --server");
        }
        if matches!(args.engine, EngineArg::Llama | EngineArg::Llguidance) {
            bail!(
                "--engine {} runs in-process; with --server the server's own llama.cpp masks the tokens",
                EngineKind::from(args.engine)
            );
        }
    }
    let schema: Option<Value> = match &args.schema {
        Some(path) => {
            let bytes = super::common::read_input(path)?;
            Some(
                serde_json::from_slice(&bytes)
                    .with_context(|| format!("{path}: not a JSON Schema (not JSON)"))?,
            )
        }
        None => None,
    };
    let grammar_text = match &args.grammar {
        Some(path) if args.tools.is_none() => {
            let text = super::common::read_grammar(path)?;
            if let Err(code) = super::common::refuse_unusable(&text, path) {
                return Ok(code);
            }
            Some(text)
        }
        _ => None,
    };
    let spec = args.model.resolve()?;
    super::common::refuse_clashing_files(
        &[
            ("--transcript", args.transcript.as_deref()),
            ("--markdown", args.markdown.as_deref()),
        ],
        &[
            ("--model", Some(spec.path.as_path())),
            ("--models", args.model.models.as_deref()),
            ("--tools", args.tools.as_deref().map(Path::new)),
            ("--grammar", args.grammar.as_deref().map(Path::new)),
            ("--schema", args.schema.as_deref().map(Path::new)),
            ("--template", args.template.as_deref().map(Path::new)),
        ],
    )?;
    errln!("loading {} ...", spec.path.display());
    let model = Model::load(&spec, |_| true)?;
    errln!("compute: {}", model.info().placement.summary());
    if args.template.is_some() && args.format != FormatArg::Openai {
        bail!(
            "--format applies to toolrail's own envelopes; with --template the chat template decides the format"
        );
    }
    let tools = match &args.tools {
        Some(path) => {
            let text = super::common::read_text(path, "the tool set")?;
            Some(super::common::load_tool_set(&text, path)?)
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
        (Some(_), _) if template.is_some() => None,
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
    let style = if args.raw {
        PromptStyle::Raw
    } else {
        PromptStyle::Family(match spec.chat_format {
            ChatFormat::Family(f) => f,
            ChatFormat::Auto => family_for(args.format.into()),
        })
    };
    let (compute, context) = compute_options(args, &model)?;
    let setup = RunSetup {
        system: String::new(),
        user: args.prompt.clone(),
        style,
        engine: if args.request == RequestArg::Tools {
            EngineKind::None
        } else {
            args.engine.into()
        },
        compare: args.compare.iter().map(|&e| e.into()).collect(),
        sampling: sampling.clone(),
        context,
        // a command line leaves no core to a window: the spec's threads, else the free
        // physical cores (the session chooses, and the transcript says how)
        threads: args.threads.or(spec.threads),
        beside_window: false,
        compute,
        show: 5,
    };
    let inputs = RunInputs {
        tools,
        format: args.format.into(),
        validate: ValidateOptions::default(),
        grammar,
        // llguidance compiles a --schema itself, and json-schema sends it to a server
        schema,
        template: template.map(Ok),
    };
    let mut controller = RunController::with_model(model, Arc::new(|| {}));
    if let Some(url) = &args.server {
        connect(&mut controller, args, url)?;
        controller.set_server_request(match args.request {
            RequestArg::Grammar => ServerRequestChoice::Grammar,
            RequestArg::JsonSchema => ServerRequestChoice::JsonSchema,
            RequestArg::Tools => ServerRequestChoice::Tools,
        });
        controller.set_server_post_sampling(!args.no_post_sampling);
    }
    let notes = prompt_notes(
        &setup,
        inputs.format,
        inputs.tools.is_some(),
        inputs.template.is_some(),
        controller.model().map(|m| m.spec()),
    );
    for note in &notes {
        let level = if note.is_warning() { "warning" } else { "note" };
        errln!("prompt: {level}: {}", note.text());
    }
    let start = Instant::now();
    let id = controller.start(&setup, &inputs, StartMode::Run)?;
    if budget.is_some()
        && let Some(run) = controller.run(id)
        && run
            .request
            .gate
            .as_ref()
            .is_some_and(|g| g.reasoning.is_none())
    {
        errln!(
            "reasoning budget: ignored: the template has no thinking tags (llama-server ignores it too)"
        );
    }
    let first_token_ms = stream(&mut controller, id, start)?;
    let run = controller
        .run(id)
        .context("the run is gone from the run controller")?;
    let transcript = run.transcript();
    let mut lines = explain(&transcript);
    // the verdict comes last, after the figures and the calls it judges
    let verdict = lines
        .last()
        .is_some_and(|l| l.topic == Topic::Validation)
        .then(|| lines.pop())
        .flatten();
    for line in &lines {
        errln!("{line}");
    }
    report_figures(&transcript, first_token_ms);
    if let Some(settings) = &transcript.settings {
        errln!("computed with: {}: {}", settings.engine, settings.summary());
    }
    let valid = report_calls(&transcript)?;
    if let Some(line) = verdict {
        errln!("{line}");
    }
    if let Some(path) = &args.transcript {
        transcript.save(path)?;
        errln!("transcript: {}", path.display());
    }
    if let Some(path) = &args.markdown {
        transcript.save_markdown(path)?;
        errln!("markdown: {}", path.display());
    }
    Ok(match transcript.stop {
        Stop::Error { .. } | Stop::DeadEnd { .. } => ExitCode::from(2),
        _ if !valid => ExitCode::from(1),
        _ => ExitCode::SUCCESS,
    })
}

/// Streams run `id`'s text to stdout as its tokens come (with the live check's flags, the
/// budget guard's and the compared engines' notes on stderr) until it ends; returns the
/// milliseconds from `start` to its first token.
fn stream(
    controller: &mut RunController,
    id: RunId,
    start: Instant,
) -> anyhow::Result<Option<f64>> {
    let mut first_token_ms: Option<f64> = None;
    let (mut printed, mut errors) = (0, 0);
    loop {
        controller.wait(Duration::from_millis(100));
        for message in controller.take_messages() {
            errln!("toolrail: {message}");
        }
        let run = controller
            .run(id)
            .context("the run is gone from the run controller")?;
        for message in &run.errors[errors..] {
            errln!("toolrail: {message}");
        }
        errors = run.errors.len();
        for record in &run.tokens[printed..] {
            first_token_ms.get_or_insert_with(|| start.elapsed().as_secs_f64() * 1e3);
            if let Some(flag) = &record.flag {
                errln!("\ntoken {}: live check: {flag}", record.index);
            }
            if let (Some(sampled), Some(note)) = (record.budget_replaced, &record.budget) {
                errln!(
                    "\ntoken {}: the budget guard took {:?} instead of token {sampled}: {}",
                    record.index,
                    record.piece,
                    note.describe()
                );
            }
            for difference in record.mask_differences() {
                errln!(
                    "\ntoken {}: mask comparison: {} ({} token(s) only {} allows, {} only toolrail allows)",
                    record.index,
                    difference.describe(),
                    difference.only_engine,
                    difference.engine,
                    difference.only_toolrail
                );
            }
            out!("{}", record.piece)?;
        }
        let _ = std::io::stdout().flush();
        printed = run.tokens.len();
        if run.finish.is_some() {
            outln!()?;
            return Ok(first_token_ms);
        }
    }
}

/// The run's figures on stderr (what [`explain`] leaves out because they differ from run to
/// run): speed, each engine's mask time, the trigger search time, and on a server the steps
/// where its candidates and toolrail's mask disagree.
fn report_figures(t: &Transcript, first_token_ms: Option<f64>) {
    let totals = &t.totals;
    let engine = t.engine;
    if let Some(choice) = t.settings.as_ref().and_then(|s| s.thread_choice) {
        errln!("threads: {}", choice.describe());
    }
    errln!(
        "speed: {} tokens, {:.1} tokens/s, mask {:.2} ms total, first token {} after start",
        totals.tokens,
        totals.tokens_per_s,
        totals.mask_ms,
        first_token_ms.map_or("never".to_owned(), |ms| format!("{ms:.0} ms"))
    );
    if let Some(run) = &t.template
        && run.result.grammar_lazy
        && !run.result.grammar.is_empty()
    {
        errln!(
            "trigger search: {:.3} ms in all",
            toolrail_workbench::template_info::trigger_search_ms(&t.tokens)
        );
    }
    if !totals.other_engines.is_empty() {
        errln!(
            "mask time per engine: {} {:.2} ms total ({} steps, the run's engine)",
            engine,
            totals.mask_ms,
            totals.tokens
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
        errln!(
            "mask time per engine: {} {:.2} ms total ({} steps){compared}",
            other.engine,
            other.mask_ms,
            other.steps
        );
    }
    if t.server.is_some() {
        let differing: Vec<&TokenRecord> = t
            .tokens
            .iter()
            .filter(|t| !t.disagreements.is_empty())
            .collect();
        if !differing.is_empty() {
            errln!(
                "server candidates: {} step(s) where the server's allowed set differs from \
                 toolrail's within the candidates returned",
                differing.len()
            );
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
            errln!("  step {}: {}", t.index, list.join(", "));
        }
    }
}

/// The calls the output holds on stderr (llama.cpp's parse of a template run, or the calls a
/// server parsed); the verdict itself is [`explain`]'s last line. Returns whether the output is
/// valid; an error when it could not be validated.
fn report_calls(t: &Transcript) -> anyhow::Result<bool> {
    let Some(validation) = &t.validation else {
        return Ok(true);
    };
    if let Some(error) = &validation.error {
        bail!("cannot validate the output: {error}");
    }
    if t.tools.is_some() && t.template.is_none() {
        for (i, call) in validation.server_calls.iter().flatten().enumerate() {
            errln!("server call {i}: {}({})", call.name, call.arguments);
        }
    }
    Ok(validation.is_valid())
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
            String::from_utf8(super::common::read_input(file)?)
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
    errln!(
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
        errln!("template: warning: {warning}");
    }
    for difference in tools.reading_differences() {
        errln!("template: note: the prompt shows the tools as sent; {difference}");
    }
    if let Some(sampler) = &result.sampler
        && result.grammar_lazy
    {
        for trigger in &sampler.triggers {
            errln!("template: trigger {} {:?}", trigger.kind, trigger.value);
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
