//! `toolrail bench-calls --model M [--cases FILE] [-n N] [--mode grammar|retry|both] [--server URL]`:
//! how often calls come out valid on BFCL questions — valid-call rate, first-tool match,
//! attempts, tokens and wall time, under the grammar and/or prompt only with validator-feedback
//! retries, side by side (see [`toolrail_llm::bench_calls`]), in-process or on a llama-server.

use std::path::PathBuf;
use std::process::ExitCode;

use serde_json::json;

use super::generate::ModelArgs;
use super::grammar::FormatArg;
use toolrail_engine::MaskEngine;
use toolrail_llm::ChatFormat;
use toolrail_llm::bench_calls::{
    BenchMode, CallsOptions, CallsSummary, ModeResult, ModeSummary, load_cases, run_case,
    run_case_with, server_answer,
};
use toolrail_llm::server::ServerClient;
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
    /// How many questions (the first N after the skipped ones; at least 1).
    #[arg(short = 'n', long, default_value_t = 50, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
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
    #[arg(long, default_value_t = 1, value_parser = super::common::parse_threads)]
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
    /// What to measure: the grammar, prompt only with validator-feedback retries, or both side
    /// by side.
    #[arg(long, value_enum, default_value_t = ModeArg::Both)]
    pub mode: ModeArg,
    /// Retry mode: stop after this many consecutive blocked calls (invalid or none found).
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub max_blocked: u32,
    /// Retry mode: put an example call (the question's first tool) in the prompt.
    #[arg(long)]
    pub few_shot: bool,
}

/// The `--mode` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ModeArg {
    /// Under the tool set's grammar.
    Grammar,
    /// Prompt only: extraction from free text, validator feedback as a tool message, retries.
    Retry,
    /// Both, side by side.
    Both,
}

impl From<ModeArg> for BenchMode {
    fn from(m: ModeArg) -> Self {
        match m {
            ModeArg::Grammar => BenchMode::Grammar,
            ModeArg::Retry => BenchMode::Retry,
            ModeArg::Both => BenchMode::Both,
        }
    }
}

/// Runs `toolrail bench-calls`: exit 0 when every answer under the grammar is a valid call (in
/// `retry` mode: every question ended with a valid call), 1 otherwise.
pub fn run(args: &BenchCallsArgs) -> anyhow::Result<ExitCode> {
    let spec = args.model.resolve()?;
    let format = args.format.unwrap_or(match spec.chat_format {
        ChatFormat::Family(PromptFamily::Gemma) => FormatArg::Gemma,
        ChatFormat::Family(PromptFamily::Llama31) => FormatArg::Llama3,
        ChatFormat::Family(PromptFamily::Hermes) => FormatArg::Hermes,
        ChatFormat::Family(PromptFamily::Generic) | ChatFormat::Auto => FormatArg::Openai,
    });
    let cases = load_cases(&args.cases, args.skip, args.n)?;
    if cases.is_empty() {
        // A benchmark that measured nothing is no result.
        anyhow::bail!(
            "bench-calls has no question to ask: {} holds none after skipping {} (-n {})",
            args.cases.display(),
            args.skip,
            args.n
        );
    }
    let model = args.model.load(args.json)?;
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
                errln!(
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
        mode: args.mode.into(),
        max_blocked: args.max_blocked,
        few_shot: args.few_shot,
    };
    let mut results = Vec::with_capacity(cases.len());
    let mode = BenchMode::from(args.mode);
    if !args.json {
        outln!(
            "{} questions of {} (after the first {}), {} envelope and prompt, {} tokens at most, repetition penalty {}, budget guard {}, retries: at most {} blocked calls{}",
            cases.len(),
            args.cases.display(),
            args.skip,
            format!("{format:?}").to_lowercase(),
            args.max_tokens,
            args.repeat_penalty,
            if options.budget_guard { "on" } else { "off" },
            args.max_blocked,
            if args.few_shot {
                ", few-shot prompt"
            } else {
                ""
            }
        )?;
        let mut header = format!("{:<18} {:<28}", "case", "expected tool");
        if mode.grammar() {
            header.push_str(&format!(" {:<40}", "grammar"));
        }
        if mode.retry() {
            header.push_str(&format!(" {:<40}", "prompt + retries"));
        }
        outln!("{}", header.trim_end())?;
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
            let show = |r: &ModeResult| {
                let guard = r.attempts.iter().any(|a| a.budget_replaced > 0);
                let echo = r.attempts.iter().any(|a| a.echo);
                format!(
                    "{} {} ({}x, {} tok, {:.1} s){}{}",
                    if r.valid { "valid  " } else { "INVALID" },
                    r.tool.as_deref().unwrap_or("-"),
                    r.attempts.len(),
                    r.tokens,
                    r.wall_ms / 1000.0,
                    if guard { " (guard)" } else { "" },
                    if echo { " (echo)" } else { "" }
                )
            };
            let mut line = format!(
                "{:<18} {:<28}",
                result.id,
                result.expected_tool.as_deref().unwrap_or("?")
            );
            for r in [&result.grammar, &result.retry].into_iter().flatten() {
                line.push_str(&format!(" {:<40}", show(r)));
            }
            outln!("{}", line.trim_end())?;
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
                "mode": mode,
                "max_blocked": args.max_blocked,
                "few_shot": args.few_shot,
                "summary": summary,
                "results": results,
            })
        )?;
    } else {
        let columns: Vec<(&str, &ModeSummary)> = [
            ("grammar", summary.grammar.as_ref()),
            ("prompt + retries", summary.retry.as_ref()),
        ]
        .into_iter()
        .filter_map(|(name, s)| s.map(|s| (name, s)))
        .collect();
        let row = |label: &str, cell: &dyn Fn(&ModeSummary) -> String| {
            let mut line = format!("{label:<22}");
            for (_, s) in &columns {
                line.push_str(&format!(" {:<20}", cell(s)));
            }
            line.trim_end().to_owned()
        };
        let rate = |count: usize, s: &ModeSummary| {
            format!("{count}/{} ({:.0}%)", s.cases, s.percent(count))
        };
        outln!()?;
        let mut head = format!("{:<22}", "");
        for (name, _) in &columns {
            head.push_str(&format!(" {name:<20}"));
        }
        outln!("{}", head.trim_end())?;
        outln!("{}", row("valid call", &|s| rate(s.valid, s)))?;
        outln!(
            "{}",
            row("valid at first attempt", &|s| rate(s.valid_first, s))
        )?;
        outln!("{}", row("first-tool match", &|s| rate(s.matched, s)))?;
        if args.few_shot {
            outln!("{}", row("echoed the example", &|s| rate(s.echoes, s)))?;
        }
        outln!("{}", row("repeated a call", &|s| rate(s.repeats, s)))?;
        outln!(
            "{}",
            row("attempts per question", &|s| format!(
                "{:.2}",
                s.mean(s.attempts as f64)
            ))
        )?;
        outln!(
            "{}",
            row("tokens per question", &|s| format!(
                "{:.1}",
                s.mean(s.tokens as f64)
            ))
        )?;
        outln!(
            "{}",
            row("wall time per question", &|s| format!(
                "{:.2} s",
                s.mean(s.wall_ms) / 1000.0
            ))
        )?;
    }
    let all_valid = |s: Option<ModeSummary>| s.is_none_or(|s| s.valid == s.cases);
    let ok = if mode.grammar() {
        all_valid(summary.grammar)
    } else {
        all_valid(summary.retry)
    };
    Ok(if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
