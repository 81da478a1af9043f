//! `toolrail bench-calls --model M [--cases FILE] [-n N] [--server URL]`: how often calls come out
//! valid on BFCL questions — valid-call rate and first-tool match, with the grammar and without
//! (see [`toolrail_llm::bench_calls`]), in-process or on a llama-server.

use std::path::PathBuf;
use std::process::ExitCode;

use serde_json::json;

use super::generate::ModelArgs;
use super::grammar::FormatArg;
use toolrail_engine::MaskEngine;
use toolrail_llm::bench_calls::{
    CallsOptions, CallsSummary, load_cases, run_case, run_case_with, server_answer,
};
use toolrail_llm::server::ServerClient;
use toolrail_llm::{ChatFormat, Model};
use toolrail_tools::prompt::PromptFamily;
use toolrail_workbench::run::family_for;

/// Arguments of `toolrail bench-calls`.
#[derive(Debug, clap::Args)]
pub struct BenchCallsArgs {
    /// The model.
    #[command(flatten)]
    pub model: ModelArgs,
    /// A BFCL v4 cases file (its `.answers.json` beside it gives the expected tools).
    #[arg(long, default_value = "../shared/corpus/bfcl/BFCL_v4_multiple.json")]
    pub cases: PathBuf,
    /// How many questions (the first N after the skipped ones).
    #[arg(short = 'n', long, default_value_t = 50)]
    pub n: usize,
    /// Questions to pass over first (e.g. `--skip 50` for held-out questions 51-100).
    #[arg(long, default_value_t = 0)]
    pub skip: usize,
    /// The envelope of the grammar; the prompt builder is the envelope's family (default: the
    /// model's `chat_format` in models.toml — gemma, llama3, hermes — else openai).
    #[arg(long, value_enum)]
    pub format: Option<FormatArg>,
    /// Tokens per answer at most.
    #[arg(long, default_value_t = 128)]
    pub max_tokens: u32,
    /// Repetition penalty over the last 64 generated tokens, both runs (1.0: off, plain greedy).
    #[arg(long, default_value_t = 1.0)]
    pub repeat_penalty: f32,
    /// Let the greedy choice stand even when it leaves too few tokens to finish the grammar
    /// (by default, near --max-tokens the most likely token that can still finish is taken).
    #[arg(long)]
    pub no_budget_guard: bool,
    /// Decoding threads (1 keeps ggml's thread pool from spinning on busy cores).
    #[arg(long, default_value_t = 1, value_parser = super::parse_threads)]
    pub threads: u32,
    /// Print one JSON object (summary and every answer) instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Answer on this llama-server (`http://host:port`, or a `[[server]]` entry's name) instead
    /// of in-process: the same prompts (token ids from --model's vocabulary) and grammars,
    /// greedy; the budget guard is toolrail's own and is off there.
    #[arg(long, value_name = "URL")]
    pub server: Option<String>,
    /// The environment variable holding the server's API key (with --server).
    #[arg(long, value_name = "NAME", requires = "server")]
    pub api_key_env: Option<String>,
}

/// Runs `toolrail bench-calls`: exit 0 when every answer under the grammar is a valid call, 1
/// otherwise.
pub fn run(args: &BenchCallsArgs) -> anyhow::Result<ExitCode> {
    let spec = args.model.resolve()?;
    let format = args.format.unwrap_or(match spec.chat_format {
        ChatFormat::Family(PromptFamily::Gemma) => FormatArg::Gemma,
        ChatFormat::Family(PromptFamily::Llama31) => FormatArg::Llama3,
        ChatFormat::Family(PromptFamily::Hermes) => FormatArg::Hermes,
        ChatFormat::Family(PromptFamily::Generic) | ChatFormat::Auto => FormatArg::Openai,
    });
    let cases = load_cases(&args.cases, args.skip, args.n)?;
    if !args.json {
        eprintln!("loading {} ...", spec.path.display());
    }
    let model = Model::load(&spec, |_| true)?;
    let mut masks = MaskEngine::new(model.shared_token_table());
    let server = match &args.server {
        Some(url) => {
            let (url, key_env) = if url.contains("://") {
                (url.clone(), args.api_key_env.clone())
            } else {
                let entry =
                    toolrail_llm::Models::load(args.model.models.as_deref())?.find_server(url)?;
                (entry.url, args.api_key_env.clone().or(entry.api_key_env))
            };
            let api_key = match key_env {
                Some(name) => Some(std::env::var(&name).map_err(|_| {
                    anyhow::anyhow!("--api-key-env {name}: the variable is not set")
                })?),
                None => None,
            };
            let client = ServerClient::new(&url, api_key)?;
            client.health()?;
            if !args.json {
                let props = client.props()?;
                eprintln!(
                    "server: llama-server {} at {url}, model {}",
                    props.build_info.as_deref().unwrap_or("of unknown build"),
                    props
                        .model_alias
                        .as_deref()
                        .or(props.model_path.as_deref())
                        .unwrap_or("unnamed")
                );
            }
            Some(client)
        }
        None => None,
    };
    let options = CallsOptions {
        format: format.into(),
        family: family_for(format.into()),
        max_tokens: args.max_tokens,
        threads: Some(args.threads),
        repeat_penalty: args.repeat_penalty,
        budget_guard: !args.no_budget_guard && server.is_none(),
    };
    let mut results = Vec::with_capacity(cases.len());
    if !args.json {
        outln!(
            "{} questions of {} (after the first {}), {} envelope and prompt, {} tokens at most, repetition penalty {}, budget guard {}",
            cases.len(),
            args.cases.display(),
            args.skip,
            format!("{format:?}").to_lowercase(),
            args.max_tokens,
            args.repeat_penalty,
            if options.budget_guard { "on" } else { "off" }
        )?;
        outln!(
            "{:<18} {:<28} {:<34} {:<34}",
            "case",
            "expected tool",
            "with grammar",
            "without grammar"
        )?;
    }
    for case in &cases {
        let result = match &server {
            Some(client) => run_case_with(case, options, &mut |prompt, grammar| {
                server_answer(
                    client,
                    &model,
                    prompt,
                    grammar,
                    args.max_tokens,
                    args.repeat_penalty,
                )
            })?,
            None => run_case(&model, &mut masks, case, options)?,
        };
        if !args.json {
            let show = |a: &toolrail_llm::bench_calls::Attempt| {
                format!(
                    "{} {}{}",
                    if a.valid { "valid  " } else { "INVALID" },
                    a.tool.as_deref().unwrap_or("-"),
                    if a.budget_replaced > 0 {
                        " (guard)"
                    } else {
                        ""
                    }
                )
            };
            outln!(
                "{:<18} {:<28} {:<34} {:<34}",
                result.id,
                result.expected_tool.as_deref().unwrap_or("?"),
                show(&result.with_grammar),
                show(&result.without_grammar)
            )?;
        }
        results.push(result);
    }
    let summary = CallsSummary::of(&results);
    if args.json {
        outln!(
            "{}",
            json!({
                "model": spec.name,
                "cases_file": args.cases.display().to_string(),
                "skip": args.skip,
                "format": format!("{format:?}").to_lowercase(),
                "max_tokens": args.max_tokens,
                "repeat_penalty": args.repeat_penalty,
                "budget_guard": options.budget_guard,
                "server": args.server,
                "summary": summary,
                "results": results,
            })
        )?;
    } else {
        let rate =
            |count: usize| format!("{count}/{} ({:.0}%)", summary.cases, summary.percent(count));
        outln!()?;
        outln!(
            "{:<16} {:<16} {:<16}",
            "",
            "with grammar",
            "without grammar"
        )?;
        outln!(
            "{:<16} {:<16} {:<16}",
            "valid call",
            rate(summary.valid_with_grammar),
            rate(summary.valid_without_grammar)
        )?;
        outln!(
            "{:<16} {:<16} {:<16}",
            "first-tool match",
            rate(summary.match_with_grammar),
            rate(summary.match_without_grammar)
        )?;
    }
    Ok(if summary.valid_with_grammar == summary.cases {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
