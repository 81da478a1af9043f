//! `toolrail generate --model M (--tools T [--format F] | --grammar G) --prompt P [--engine E]
//! [--transcript OUT.json] [--markdown OUT.md]`: runs the model under the grammar on the
//! generation worker, streams the text, validates the result against the tools, and writes the
//! transcript.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{Context as _, bail};
use serde_json::{Value, json};

use super::grammar::FormatArg;
use toolrail_llm::server::{ServerClient, ServerWorker};
use toolrail_llm::worker::{Command, EngineKind, Event, RunEvent, RunRequest, Worker};
use toolrail_llm::{ChatFormat, Model, ModelSpec, Models, SamplingDefaults};
use toolrail_tools::grammar::{GrammarOptions, tool_call_grammar};
use toolrail_tools::prompt::build_prompt;
use toolrail_tools::validate::{ValidateOptions, Validator};
use toolrail_workbench::run::{family_for, sampling_with_defaults};
use toolrail_workbench::transcript::{ModelInfo, Sampling, Stop, TRANSCRIPT_VERSION, Transcript};

/// Arguments of `toolrail generate`.
/// The `--engine` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum EngineArg {
    /// toolrail's own masks (token trie + memoized recognizer).
    Toolrail,
    /// llama.cpp's grammar sampler over the whole vocabulary.
    Llama,
    /// No grammar: the model's own choice.
    None,
}

impl From<EngineArg> for EngineKind {
    fn from(e: EngineArg) -> Self {
        match e {
            EngineArg::Toolrail => EngineKind::Toolrail,
            EngineArg::Llama => EngineKind::Llama,
            EngineArg::None => EngineKind::None,
        }
    }
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
    #[arg(long)]
    pub grammar: Option<String>,
    /// The user's message (or the whole prompt with --raw).
    #[arg(long)]
    pub prompt: String,
    /// Use --prompt verbatim instead of building a prompt for the model family.
    #[arg(long)]
    pub raw: bool,
    /// Which engine masks the tokens.
    #[arg(long, value_enum, default_value_t = EngineArg::Toolrail)]
    pub engine: EngineArg,
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
fn connect(url: &str, api_key_env: Option<&str>) -> anyhow::Result<(ServerClient, String)> {
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
        .or(props.model_path)
        .unwrap_or_else(|| "an unnamed model".into());
    Ok((
        client.clone(),
        format!("llama-server {build} at {}, model {model}", client.url()),
    ))
}

/// Runs `toolrail generate`: exit 0 when the run ends normally (and the output is a valid call
/// when tools were given), 1 when the output is not valid, 2 on errors.
pub fn run(args: &GenerateArgs) -> anyhow::Result<ExitCode> {
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
    // A grammar file that can never be completed is refused before the model loads.
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
    let tools = match &args.tools {
        Some(path) => {
            let text = super::read_text(path, "the tool set")?;
            Some(super::load_tool_set(&text, path)?)
        }
        None => None,
    };
    let grammar = match (&tools, &args.grammar) {
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
    let prompt = if args.raw {
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
    let info = model.info().clone();
    let (worker, server) = match &args.server {
        Some(url) => {
            if args.engine == EngineArg::Llama {
                bail!(
                    "--engine llama runs llama.cpp in-process; with --server the server's own llama.cpp masks the tokens"
                );
            }
            let (url, key_env) = if url.starts_with("http://") || url.contains("://") {
                (url.clone(), args.api_key_env.clone())
            } else {
                let entry = Models::load(args.model.models.as_deref())?.find_server(url)?;
                (entry.url, args.api_key_env.clone().or(entry.api_key_env))
            };
            let (client, described) = connect(&url, key_env.as_deref())?;
            eprintln!("server: {described}");
            (
                Runner::Server(ServerWorker::spawn(client, Some(model), Arc::new(|| {}))),
                Some(described),
            )
        }
        None => (Runner::Local(Worker::spawn(model, Arc::new(|| {}))), None),
    };
    let request = RunRequest {
        id: 1,
        prompt: prompt.clone(),
        grammar: grammar.clone(),
        engine: args.engine.into(),
        sampling: sampling.clone(),
        start_paused: false,
        show: 5,
        context: None,
        threads: None,
    };
    worker.send(Command::Start(Box::new(request)));
    let created_unix = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let mut tokens = Vec::new();
    let (stop, totals, output) = loop {
        match worker.recv().map(|e| e.event) {
            Some(Event::Token(record)) => {
                if let Some(flag) = &record.flag {
                    eprintln!("\nlive check: token {}: {flag}", record.index);
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
            Some(_) => {}
            None => bail!("the generation worker stopped unexpectedly"),
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
        Stop::Error { message } => format!("error: {message}"),
    };
    eprintln!(
        "stopped: {stop_text}; {} tokens, {:.1} tokens/s, mask {:.2} ms total",
        totals.tokens, totals.tokens_per_s, totals.mask_ms
    );
    let mut valid = true;
    let validation = match &tools {
        Some(tools) => {
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
        None => None,
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
        engine: args.engine.into(),
        server,
        sampling,
        tokens,
        output,
        stop: stop.clone(),
        validation,
        totals,
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
