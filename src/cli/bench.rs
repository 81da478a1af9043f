//! `toolrail bench --model M (--tools T [--format F] | --grammar G) [--prompt P] [--tokens N]
//! [--json]`: the same prompt greedily under each engine in one process (see
//! [`toolrail_llm::bench`]); prints mask times, tokens/s, the ratios, and the mask differences
//! of llama.cpp and llguidance against toolrail.

use std::process::ExitCode;

use anyhow::bail;
use serde_json::{Value, json};

use super::generate::ModelArgs;
use super::grammar::FormatArg;
use toolrail_app::run_speed::WindowSize;
use toolrail_llm::bench::{BenchOptions, BenchReport, bench};
use toolrail_llm::bench_masks::{MaskBenchOptions, bench_masks};
use toolrail_llm::worker::EngineKind;
use toolrail_tools::grammar::{GrammarOptions, tool_call_grammar};
use toolrail_tools::prompt::build_prompt;
use toolrail_workbench::run::family_for;

/// Arguments of `toolrail bench`.
#[derive(Debug, clap::Args)]
pub struct BenchArgs {
    /// Other benchmarks.
    #[command(subcommand)]
    pub what: Option<BenchWhat>,
    /// A GGUF file, or the name of a `models.toml` entry.
    #[arg(long)]
    pub model: Option<String>,
    /// The models file to look names up in (see `toolrail generate --help`).
    #[arg(long)]
    pub models: Option<std::path::PathBuf>,
    /// Model layers on the GPU (a build with a GPU backend; 999: all).
    #[arg(long)]
    pub gpu_layers: Option<u32>,
    /// A tool set: the grammar is its tool-call grammar, the prompt offers the tools.
    #[arg(long, conflicts_with = "grammar")]
    pub tools: Option<String>,
    /// The envelope tool calls are written in (with --tools).
    #[arg(long, value_enum, default_value_t = FormatArg::Openai)]
    pub format: FormatArg,
    /// A GBNF grammar file (instead of --tools); the prompt is used as it is.
    #[arg(long)]
    pub grammar: Option<String>,
    /// The user's message (with --tools) or the whole prompt (with --grammar).
    #[arg(long)]
    pub prompt: Option<String>,
    /// Tokens per engine at most (at least 1).
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u32).range(1..))]
    pub tokens: u32,
    /// Decoding threads per engine (1 keeps ggml's thread pool from spinning on busy cores).
    #[arg(long, default_value_t = 1, value_parser = super::common::parse_threads)]
    pub threads: u32,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// The benchmarks beside the default one-prompt run.
#[derive(Debug, clap::Subcommand)]
pub enum BenchWhat {
    /// Mask speed over real schemas (MaskBench's format): toolrail, llguidance and llama.cpp
    /// interleaved position by position on the model's vocabulary, with their disagreements.
    Masks(MasksArgs),
    /// How long `toolrail budget` takes on a big catalog with a chat template (one build
    /// attributed per tool, against building each tool alone), and the trigger search's
    /// predicted cost per token beside llama.cpp's lazy sampler on a long output.
    Budget(super::bench_budget::BudgetBenchArgs),
    /// The app's generation speed beside the command line's: the real app without a window
    /// (its frames, panes and tessellation, as a window would run them) and the worker as
    /// `toolrail generate` drives it, on the default sample, alternating, with the ratio.
    App(AppSpeedArgs),
}

/// Arguments of `toolrail bench app`.
#[derive(Debug, clap::Args)]
pub struct AppSpeedArgs {
    /// The model.
    #[command(flatten)]
    pub model: ModelArgs,
    /// Runs of each path (alternating; at least 1).
    #[arg(long, default_value_t = 3, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    pub rounds: usize,
    /// Tokens per run at most (at least 1).
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_tokens: u32,
    /// Run the app in a real window (the platform's renderer draws every frame) instead of
    /// headless; the command line's rounds run while the window stays open.
    #[arg(long)]
    pub window: bool,
    /// The window's size in logical points, WIDTHxHEIGHT (with --window).
    #[arg(long, default_value = "1024x700", value_parser = parse_window_size, requires = "window")]
    pub size: WindowSize,
    /// How often the window refreshes during runs (the app's View ▸ Refresh while generating).
    #[arg(long, value_enum, default_value_t = RefreshArg::Auto, requires = "window")]
    pub refresh: RefreshArg,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// `--refresh`: the app's live refresh choices.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum RefreshArg {
    /// Once a second on software rendering, up to 30 per second otherwise.
    Auto,
    /// A frame after every token.
    EveryToken,
    /// Up to 30 frames a second.
    Smooth,
    /// Up to 4 frames a second.
    FourPerSecond,
    /// Once a second.
    OncePerSecond,
}

impl From<RefreshArg> for toolrail_workbench::workspace::LiveRefresh {
    fn from(arg: RefreshArg) -> Self {
        use toolrail_workbench::workspace::LiveRefresh;
        match arg {
            RefreshArg::Auto => LiveRefresh::Auto,
            RefreshArg::EveryToken => LiveRefresh::EveryToken,
            RefreshArg::Smooth => LiveRefresh::Smooth,
            RefreshArg::FourPerSecond => LiveRefresh::FourPerSecond,
            RefreshArg::OncePerSecond => LiveRefresh::OncePerSecond,
        }
    }
}

/// The renderer as the report names it.
fn renderer_words(renderer: Option<&toolrail_app::renderer::Renderer>) -> String {
    use toolrail_app::renderer::Renderer;
    match renderer {
        Some(Renderer::Gpu(name)) => format!("the GPU {name}"),
        Some(Renderer::Software(name)) => format!("the CPU (software rendering: {name})"),
        Some(Renderer::Unknown) | None => "an unknown renderer".to_owned(),
    }
}

/// Reads `WIDTHxHEIGHT` (e.g. `1024x700`), each between 200 and 10000.
fn parse_window_size(text: &str) -> Result<WindowSize, String> {
    let (w, h) = text
        .split_once(['x', 'X'])
        .ok_or_else(|| format!("`{text}` is not WIDTHxHEIGHT (e.g. 1024x700)"))?;
    let side = |s: &str, what: &str| -> Result<f32, String> {
        match s.trim().parse::<u32>() {
            Ok(v) if (200..=10_000).contains(&v) => Ok(v as f32),
            Ok(v) => Err(format!("{what} {v} is outside 200..=10000")),
            Err(_) => Err(format!("{what} `{s}` is not a whole number")),
        }
    };
    Ok(WindowSize {
        width: side(w, "width")?,
        height: side(h, "height")?,
    })
}

/// Runs `toolrail bench app`: exit 0 when the app runs at 90% or more of the command line's
/// tokens/s, 1 when slower.
fn run_app_speed(args: &AppSpeedArgs) -> anyhow::Result<ExitCode> {
    let spec = args.model.resolve()?;
    let dir = tempfile::tempdir()?;
    let speed = if args.window {
        toolrail_app::run_speed::compare_in_window(
            &spec,
            dir.path(),
            args.rounds,
            args.max_tokens,
            args.size,
            args.refresh.into(),
        )?
    } else {
        toolrail_app::run_speed::compare(&spec, dir.path(), args.rounds, args.max_tokens)?
    };
    let ratio = speed.ratio();
    let round = |r: &toolrail_app::run_speed::PathRun| json!({"tokens": r.tokens, "tokens_per_s": r.tokens_per_s, "frames": r.frames, "frame_ms": r.frame_ms});
    let threads = speed.request.as_ref().and_then(|r| r.threads);
    if args.json {
        let report = json!({
            "model": spec.name,
            "threads": threads,
            "window": args.window.then(|| format!("{}x{}", args.size.width, args.size.height)),
            "renderer": args.window.then(|| renderer_words(speed.renderer.as_ref())),
            "app": speed.app.iter().map(round).collect::<Vec<_>>(),
            "cli": speed.cli.iter().map(round).collect::<Vec<_>>(),
            "app_median_tokens_per_s": toolrail_app::run_speed::RunSpeed::median(&speed.app),
            "cli_median_tokens_per_s": toolrail_app::run_speed::RunSpeed::median(&speed.cli),
            "ratio": ratio,
        });
        super::output::write_json(&serde_json::to_string_pretty(&report)?)?;
    } else {
        outln!(
            "model {}, {} decoding thread(s), {} rounds of at most {} tokens, {}",
            spec.name,
            threads.map_or("default".to_owned(), |t| t.to_string()),
            args.rounds,
            args.max_tokens,
            if args.window {
                format!(
                    "app in a {}x{} window drawn by {}, refresh {:?}",
                    args.size.width,
                    args.size.height,
                    renderer_words(speed.renderer.as_ref()),
                    args.refresh
                )
            } else {
                "app headless".to_owned()
            }
        )?;
        outln!("round  app tok/s (tokens, frames, ms/frame)  cli tok/s (tokens)")?;
        for (i, (a, c)) in speed.app.iter().zip(&speed.cli).enumerate() {
            outln!(
                "{:>5}  {:>9.1} ({:>3}, {:>4}, {:>8})       {:>9.1} ({:>3})",
                i + 1,
                a.tokens_per_s,
                a.tokens,
                a.frames,
                a.frame_ms.map_or("-".to_owned(), |ms| format!("{ms:.1}")),
                c.tokens_per_s,
                c.tokens
            )?;
        }
        outln!(
            "median app {:.1} tok/s, cli {:.1} tok/s: app/cli = {:.0}%",
            toolrail_app::run_speed::RunSpeed::median(&speed.app),
            toolrail_app::run_speed::RunSpeed::median(&speed.cli),
            ratio * 100.0
        )?;
    }
    Ok(if ratio >= 0.9 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// Arguments of `toolrail bench masks`.
#[derive(Debug, clap::Args)]
pub struct MasksArgs {
    /// A MaskBench folder (`data/` inside it is used when present), e.g.
    /// ../shared/corpus/maskbench.
    pub dir: std::path::PathBuf,
    /// The model whose vocabulary the instances are tokenized with.
    #[command(flatten)]
    pub model: ModelArgs,
    /// The engines, comma-separated: toolrail, llguidance, llama.
    #[arg(long, value_delimiter = ',', default_values = ["toolrail", "llguidance", "llama"])]
    pub engines: Vec<MaskEngineArg>,
    /// At most this many schemas, drawn with --seed (default: all).
    #[arg(long)]
    pub limit: Option<usize>,
    /// The draw's seed (of schemas, and of llama.cpp's positions).
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// llama.cpp computes (and is compared) at most this many positions per schema, drawn with
    /// --seed; it still follows every token (default: every position). Its sampler takes tens
    /// of milliseconds per mask on a large vocabulary.
    #[arg(long, value_name = "N")]
    pub llama_positions: Option<usize>,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// The `--engines` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum MaskEngineArg {
    /// toolrail's masks on toolrail's GBNF.
    Toolrail,
    /// llguidance on the JSON Schema (its own compiler).
    Llguidance,
    /// llama.cpp's grammar sampler on toolrail's GBNF.
    Llama,
}

impl From<MaskEngineArg> for EngineKind {
    fn from(e: MaskEngineArg) -> Self {
        match e {
            MaskEngineArg::Toolrail => EngineKind::Toolrail,
            MaskEngineArg::Llguidance => EngineKind::Llguidance,
            MaskEngineArg::Llama => EngineKind::Llama,
        }
    }
}

/// Runs `toolrail bench masks`: exit 0, or 1 when toolrail's and llama.cpp's masks differ; an
/// error (exit 2) when it measured nothing (each unreadable file named with why).
fn run_masks(args: &MasksArgs) -> anyhow::Result<ExitCode> {
    let model = args.model.load(false)?;
    let mut engines: Vec<EngineKind> = Vec::new();
    for e in &args.engines {
        if !engines.contains(&(*e).into()) {
            engines.push((*e).into());
        }
    }
    let options = MaskBenchOptions {
        dir: args.dir.clone(),
        engines,
        limit: args.limit,
        seed: args.seed,
        llama_positions: args.llama_positions,
    };
    let report = bench_masks(&model, &options)?;
    let unreadable: Vec<String> = report
        .unreadable
        .iter()
        .map(|f| format!("{}: {}", f.path.display(), f.reason))
        .collect();
    let masks: usize = report.engines.iter().map(|e| e.mask_ms.count).sum();
    if masks == 0 {
        // A benchmark that measured nothing is no result: say why.
        let why = if report.schemas == 0 && unreadable.is_empty() {
            format!("no .json schema file in {}", args.dir.display())
        } else if report.schemas == 0 {
            format!(
                "no schema file could be read ({} passed over):\n  {}",
                unreadable.len(),
                unreadable.join("\n  ")
            )
        } else {
            format!(
                "{} schema(s) read, {} valid instance(s), no engine computed a mask \
                 (no schema compiled, or no instance to follow)",
                report.schemas, report.instances
            )
        };
        anyhow::bail!("bench masks measured nothing: {why}");
    }
    for line in &unreadable {
        errln!("warning: passed over {line}");
    }
    if args.json {
        super::output::write_json(&serde_json::to_string_pretty(&report)?)?;
    } else {
        outln!(
            "{} schemas{}, {} valid instances, {} tokens ({} positions followed); vocabulary of {} tokens",
            report.schemas,
            if unreadable.is_empty() {
                String::new()
            } else {
                format!(" ({} unreadable file(s) passed over)", unreadable.len())
            },
            report.instances,
            report.tokens,
            report.positions,
            model.n_vocab()
        )?;
        if let Some(n) = report.llama_positions {
            outln!("llama.cpp computes at most {n} positions per schema (a seeded draw)")?;
        }
        outln!(
            "{:<11} {:>8}  {:>26}  {:>9}  {:>34}  {:>8}",
            "engine",
            "compiled",
            "first mask ms p50/p90/p99",
            "masks",
            "mask ms p50/p90/p99/max",
            "rejected"
        )?;
        for e in &report.engines {
            outln!(
                "{:<11} {:>8}  {:>26}  {:>9}  {:>34}  {:>8}",
                e.engine.name(),
                e.compiled,
                format!(
                    "{:.2}/{:.2}/{:.2}",
                    e.compile_ms.p50, e.compile_ms.p90, e.compile_ms.p99
                ),
                e.mask_ms.count,
                format!(
                    "{:.3}/{:.3}/{:.3}/{:.2}",
                    e.mask_ms.p50, e.mask_ms.p90, e.mask_ms.p99, e.mask_ms.max
                ),
                e.rejected_instances
            )?;
        }
        outln!(
            "positions where masks differ: toolrail vs llama.cpp {} of {} compared (schemas llama.cpp could not run: {}), toolrail vs llguidance {} of {} compared",
            report.toolrail_llama_differences,
            report.toolrail_llama_compared,
            report.llama_not_run,
            report.toolrail_llguidance_differences,
            report.toolrail_llguidance_compared
        )?;
        for e in report
            .llama_examples
            .iter()
            .chain(report.llguidance_examples.iter().take(5))
        {
            outln!("  {e}")?;
        }
    }
    Ok(if report.toolrail_llama_differences == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// The prompt when --tools is given without --prompt.
const DEFAULT_TOOLS_PROMPT: &str = "Call the most fitting tool, with every argument filled in.";
/// The prompt when --grammar is given without --prompt.
const DEFAULT_GRAMMAR_PROMPT: &str = "Here is a long, detailed example:\n";

/// Runs `toolrail bench`: exit 0 when toolrail's and llama.cpp's masks agree, 1 when they differ.
pub fn run(args: &BenchArgs) -> anyhow::Result<ExitCode> {
    match &args.what {
        Some(BenchWhat::Masks(masks)) => return run_masks(masks),
        Some(BenchWhat::Budget(budget)) => return super::bench_budget::run(budget),
        Some(BenchWhat::App(app)) => return run_app_speed(app),
        None => {}
    }
    let Some(model) = args.model.clone() else {
        bail!("give --model (a GGUF file or a models.toml name)");
    };
    if args.tools.is_none() && args.grammar.is_none() {
        bail!("give --tools or --grammar");
    }
    let model_args = ModelArgs {
        gpu_layers: args.gpu_layers,
        ..ModelArgs::named(model, args.models.clone())
    };
    let spec = model_args.resolve()?;
    let (grammar, prompt, what) = match (&args.tools, &args.grammar) {
        (Some(path), _) => {
            let text = super::common::read_text(path, "the tool set")?;
            let tools = super::common::load_tool_set(&text, path)?;
            let opts = GrammarOptions {
                format: args.format.into(),
                ..GrammarOptions::default()
            };
            let grammar = tool_call_grammar(&tools, &opts)?.text;
            let values: Vec<Value> = tools
                .tools()
                .iter()
                .map(|t| json!({"name": t.name, "description": t.description, "parameters": t.parameters}))
                .collect();
            let query = args.prompt.as_deref().unwrap_or(DEFAULT_TOOLS_PROMPT);
            let prompt = build_prompt(
                family_for(args.format.into()),
                args.format.into(),
                &values,
                query,
                None,
            )?;
            (grammar, prompt, path.clone())
        }
        (None, Some(path)) => (
            super::common::read_grammar(path)?,
            args.prompt
                .clone()
                .unwrap_or_else(|| DEFAULT_GRAMMAR_PROMPT.to_owned()),
            path.clone(),
        ),
        (None, None) => bail!("give --tools or --grammar"),
    };
    let model = model_args.load(args.json)?;
    let report = bench(
        &model,
        &grammar,
        &prompt,
        BenchOptions {
            tokens: args.tokens,
            threads: Some(args.threads),
        },
    )?;
    if args.json {
        super::output::write_json(&to_json(&spec.name, &what, &report).to_string())?;
    } else {
        print_table(&spec.name, &what, &report)?;
    }
    Ok(if report.mask_differences == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// The `--json` object: the documented keys first, then extras.
fn to_json(model: &str, grammar: &str, report: &BenchReport) -> Value {
    let engines: Vec<Value> = report
        .engines
        .iter()
        .map(|e| {
            json!({
                "engine": e.engine.name(),
                "mask_ms_p50": round(e.mask_ms_p50, 4),
                "mask_ms_p99": round(e.mask_ms_p99, 4),
                "mask_ms_max": round(e.mask_ms_max, 4),
                "tokens_per_s": round(e.tokens_per_s, 2),
                "mask_ms_mean": round(e.mask_ms_mean, 4),
                "tokens": e.tokens,
                "end": e.end,
                "ratio_to_unconstrained": report.ratio_to_unconstrained(e.engine).map(|r| round(r, 3)),
            })
        })
        .collect();
    json!({
        "model": model,
        "vocab": report.vocab,
        "engines": engines,
        "mask_differences": report.mask_differences,
        "compared_steps": report.compared_steps,
        "same_tokens": report.same_tokens,
        "llguidance_mask_differences": report.llguidance_differences,
        "llguidance_compared_steps": report.llguidance_compared_steps,
        "llguidance_examples": report.llguidance_examples,
        "llguidance_skipped": report.llguidance_skipped,
        "toolrail_vs_llama_speedup": report.speedup_vs_llama().map(|r| round(r, 1)),
        "setup_ms": round(report.setup_ms(), 1),
        "table_ms": round(report.table_ms, 1),
        "trie_ms": round(report.trie_ms, 1),
        "trie_nodes": report.trie_nodes,
        "grammar": grammar,
        "text": report.toolrail_text,
    })
}

fn print_table(model: &str, grammar: &str, report: &BenchReport) -> std::io::Result<()> {
    outln!(
        "model {model}, vocabulary {} tokens, grammar {grammar}",
        report.vocab
    )?;
    outln!(
        "set-up: token table {:.1} ms + trie {:.1} ms = {:.1} ms ({} trie nodes)",
        report.table_ms,
        report.trie_ms,
        report.setup_ms(),
        report.trie_nodes
    )?;
    outln!(
        "{:<10} {:>6} {:>10} {:>10} {:>10} {:>10} {:>9} {:>8}",
        "engine",
        "tokens",
        "mask p50",
        "mask p99",
        "mask max",
        "mask mean",
        "tokens/s",
        "vs none"
    )?;
    for e in &report.engines {
        let ratio = report
            .ratio_to_unconstrained(e.engine)
            .map_or("-".to_owned(), |r| format!("{:.0}%", r * 100.0));
        outln!(
            "{:<10} {:>6} {:>7.3} ms {:>7.3} ms {:>7.3} ms {:>7.3} ms {:>9.1} {:>8}",
            e.engine.name(),
            e.tokens,
            e.mask_ms_p50,
            e.mask_ms_p99,
            e.mask_ms_max,
            e.mask_ms_mean,
            e.tokens_per_s,
            ratio
        )?;
    }
    if let Some(speedup) = report.speedup_vs_llama() {
        outln!("toolrail's masks are {speedup:.0}x faster than llama.cpp's (mean)")?;
    }
    outln!(
        "mask differences toolrail vs llama.cpp: {} over {} compared steps; same tokens: {}",
        report.mask_differences,
        report.compared_steps,
        if report.same_tokens { "yes" } else { "no" }
    )?;
    match &report.llguidance_skipped {
        Some(why) => outln!("llguidance left out: {why}")?,
        None => {
            outln!(
                "mask differences toolrail vs llguidance: {} over {} compared steps",
                report.llguidance_differences,
                report.llguidance_compared_steps
            )?;
            for example in &report.llguidance_examples {
                outln!("  {example}")?;
            }
        }
    }
    if report.engine(EngineKind::Toolrail).is_some() {
        outln!("toolrail text: {:?}", report.toolrail_text)?;
    }
    Ok(())
}

fn round(x: f64, digits: i32) -> f64 {
    let scale = 10f64.powi(digits);
    (x * scale).round() / scale
}
