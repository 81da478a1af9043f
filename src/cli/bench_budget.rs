//! `toolrail bench budget CATALOG --template T [--model M] [--count N]`: how long `toolrail
//! budget` takes on a big catalog (one build attributed per tool, against building every tool
//! alone, and toolrail's own envelope), and the trigger search's predicted cost per token
//! beside llama.cpp's lazy sampler measured on a long output, in the same run.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use anyhow::{Context, bail};
use serde_json::{Value, json};
use toolrail_llm::budget::{
    Budget, GrammarBuilder, PUBLISHED_NS_PER_CHAR, PerTool, budget_measured, joined_catalog,
    time_lazy_sampler,
};
use toolrail_llm::template::{TemplateRequest, TriggerSearchPoint};
use toolrail_tools::envelope::Format;
use toolrail_tools::grammar::GrammarOptions;
use toolrail_tools::toolset::ToolSet;

/// Arguments of `toolrail bench budget`.
#[derive(Debug, clap::Args)]
pub struct BudgetBenchArgs {
    /// A tool set, or a folder of tool sets (every tool of every set, each name once), e.g.
    /// ../shared/corpus/tool-sets.
    pub catalog: PathBuf,
    /// Make the catalog this many tools, adding renamed copies of its tools (0: as it is).
    #[arg(long, default_value_t = 260)]
    pub count: usize,
    /// The chat template whose grammar llama-server builds.
    #[arg(long)]
    pub template: String,
    /// A GGUF file or `models.toml` entry: its vocabulary for the lazy sampler's measured run
    /// (default: the test model's entry, `gemma-3-270m`).
    #[arg(long, default_value = "gemma-3-270m")]
    pub model: String,
    /// The models file to look names up in.
    #[arg(long)]
    pub models: Option<PathBuf>,
    /// Runs of each budget (the median is reported; at least 1).
    #[arg(long, default_value_t = 3, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    pub rounds: usize,
    /// Tokens of output the lazy sampler accepts in its measured run.
    #[arg(long, default_value_t = 2048)]
    pub output_tokens: usize,
    /// Also write the joined catalog to this file (OpenAI `tools`), to run `toolrail budget`
    /// on it.
    #[arg(long, value_name = "FILE")]
    pub write_catalog: Option<PathBuf>,
    /// Print one JSON object instead of a report.
    #[arg(long)]
    pub json: bool,
}

/// The output lengths (bytes) the prediction and the measured run are compared at.
const LENGTHS: [usize; 4] = [1_000, 2_000, 4_000, 8_000];

/// Runs `toolrail bench budget`.
pub fn run(args: &BudgetBenchArgs) -> anyhow::Result<ExitCode> {
    let tools = read_catalog(&args.catalog, args.count)?;
    if tools.is_empty() {
        bail!("{}: no tool found", args.catalog.display());
    }
    if let Some(path) = &args.write_catalog {
        let text = serde_json::to_string_pretty(&tools)? + "\n";
        super::grammar::write_atomically(path, text.as_bytes())
            .with_context(|| format!("writing {}", path.display()))?;
    }
    let (templates, source) = super::template::load_templates(
        Some(&args.model),
        args.models.as_ref(),
        Some(&args.template),
    )?;
    let set = ToolSet::from_value(&Value::Array(tools.clone()))
        .with_context(|| format!("{}: the joined catalog", args.catalog.display()))?;
    let request = TemplateRequest::for_tools(&set, "Which tool fits?");
    let template = GrammarBuilder::Template {
        templates: &templates,
        request: Box::new(request.clone()),
    };
    let envelope = GrammarBuilder::Envelope(GrammarOptions {
        format: Format::Hermes,
        ..GrammarOptions::default()
    });
    let mut sliced = Vec::new();
    let mut built = Vec::new();
    let mut hermes = Vec::new();
    let mut report = None;
    // alternating, so that a busy moment does not favour one
    for _ in 0..args.rounds {
        let (t, r) = timed(|| budget_measured(&tools, &template, PerTool::Sliced))?;
        sliced.push(t);
        built.push(timed(|| budget_measured(&tools, &template, PerTool::Built))?.0);
        hermes.push(timed(|| budget_measured(&tools, &envelope, PerTool::Built))?.0);
        report = Some(r);
    }
    let Some(report) = report else {
        bail!("no round ran");
    };
    let result = templates.build(&request)?;
    let measured = match &result.sampler {
        Some(setup) if result.grammar_lazy => {
            let model = super::generate::ModelArgs::named(args.model.clone(), args.models.clone())
                .load(true)?;
            time_lazy_sampler(&model, &result.grammar, setup, args.output_tokens, &LENGTHS)?
        }
        _ => Vec::new(),
    };
    let (sliced, built, hermes) = (median(sliced), median(built), median(hermes));
    if args.json {
        let value = json!({
            "catalog": args.catalog,
            "tools": tools.len(),
            "template": source,
            "per_tool": report.per_tool,
            "budget_s": {"one_build": sliced, "each_tool_built": built, "hermes_envelope": hermes},
            "speedup": built / sliced,
            "trigger_patterns": report.rescanned_triggers(),
            "ns_per_char_here": report.trigger_search.as_ref().map(|t| t.ns_per_char()),
            "ns_per_char_published": PUBLISHED_NS_PER_CHAR,
            "points": comparison(&report, &measured),
        });
        super::output::write_json(&serde_json::to_string_pretty(&value)?)?;
        return Ok(ExitCode::SUCCESS);
    }
    outln!(
        "catalog: {} tools from {}; template {source}",
        tools.len(),
        args.catalog.display()
    )?;
    outln!(
        "budget (median of {} rounds): {sliced:.3} s with one build attributed per tool ({}), \
         {built:.3} s building each tool alone: {:.1}× faster; toolrail's hermes envelope \
         {hermes:.3} s",
        args.rounds,
        match report.per_tool {
            PerTool::Sliced => "sliced",
            PerTool::Built => "fell back to building each tool",
        },
        built / sliced
    )?;
    outln!(
        "verdict: {}",
        if report.fits() {
            "fits"
        } else {
            "does not fit"
        }
    )?;
    match (&report.trigger_search, report.rescanned_triggers()) {
        (_, 0) => outln!("no trigger is searched over the output: nothing to predict")?,
        (None, n) => outln!(
            "{n} trigger pattern(s); the search could not be timed: {}",
            report.trigger_search_error.as_deref().unwrap_or("")
        )?,
        (Some(timing), n) => {
            outln!(
                "trigger search: {n} pattern(s), {:.2} ns per character of output timed here \
                 (llama.cpp's published figure: {PUBLISHED_NS_PER_CHAR})",
                timing.ns_per_char()
            )?;
            outln!(
                "{:>8} {:>16} {:>16} {:>22}",
                "output",
                "predicted ms/tok",
                "published ms/tok",
                "llama.cpp lazy sampler"
            )?;
            for point in comparison(&report, &measured) {
                outln!(
                    "{:>8} {:>16.4} {:>16.4} {:>22}",
                    point["chars"],
                    point["predicted_ms"].as_f64().unwrap_or(0.0),
                    point["published_ms"].as_f64().unwrap_or(0.0),
                    match point["measured_ms"].as_f64() {
                        Some(ms) => format!("{ms:.4} ms/tok"),
                        None => "-".to_owned(),
                    }
                )?;
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The prediction and the measured run, by output length (the measured run's lengths: a token
/// ends where it ends).
fn comparison(report: &Budget, measured: &[TriggerSearchPoint]) -> Vec<Value> {
    let lengths: Vec<usize> = match measured.is_empty() {
        true => LENGTHS.to_vec(),
        false => measured.iter().map(|p| p.chars).collect(),
    };
    lengths
        .iter()
        .map(|&chars| {
            json!({
                "chars": chars,
                "predicted_ms": report.trigger_ms_per_token(chars),
                "published_ms": report.published_trigger_ms_per_token(chars),
                "measured_ms": measured.iter().find(|p| p.chars == chars).map(|p| p.ns / 1e6),
            })
        })
        .collect()
}

/// `f`'s result and its time in seconds.
fn timed<T, E>(f: impl FnOnce() -> Result<T, E>) -> anyhow::Result<(f64, T)>
where
    anyhow::Error: From<E>,
{
    let started = Instant::now();
    let value = f()?;
    Ok((started.elapsed().as_secs_f64(), value))
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values.get(values.len() / 2).copied().unwrap_or(0.0)
}

/// The catalog: a tool set, or every tool set of a folder, joined up to `count` tools.
fn read_catalog(path: &PathBuf, count: usize) -> anyhow::Result<Vec<Value>> {
    let mut sets = Vec::new();
    if path.is_dir() {
        let mut files: Vec<PathBuf> = std::fs::read_dir(path)
            .with_context(|| path.display().to_string())?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "json"))
            .collect();
        files.sort();
        for file in files {
            let text =
                std::fs::read_to_string(&file).with_context(|| file.display().to_string())?;
            // a file of the folder that is not a tool set (a manifest) is left out, and said
            match ToolSet::from_json_str(&text) {
                Ok(set) => sets.push(set.client_tools()),
                Err(e) => errln!("note: {}: not a tool set, left out: {e}", file.display()),
            }
        }
    } else {
        let shown = path.display().to_string();
        let text = super::common::read_text(&shown, "the tool set")?;
        sets.push(super::common::load_tool_set(&text, &shown)?.client_tools());
    }
    Ok(joined_catalog(&sets, (count > 0).then_some(count)))
}
