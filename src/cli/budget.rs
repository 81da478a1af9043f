//! `toolrail budget TOOLS [--template T | --model M | --format F]`: whether llama.cpp loads the
//! catalog's tool-call grammar, what each tool costs, which tool and property break it, and what
//! the lazy triggers cost per token (exit 0 fits, 1 does not, 2 errors).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::Args;
use serde_json::json;
use toolrail_llm::budget::project::{Target, project};
use toolrail_llm::budget::{
    Blame, BlameKind, Budget, GrammarBuilder, GrammarCost, PUBLISHED_NS_PER_CHAR, PerTool, budget,
};
use toolrail_llm::template::{ServerSwitch, TemplateRequest, ToolChoice};
use toolrail_tools::grammar::GrammarOptions;

use super::grammar::FormatArg;

/// Arguments of `toolrail budget`.
#[derive(Debug, Args)]
pub struct BudgetArgs {
    /// The tool catalog (any shape toolrail reads).
    pub tools: String,
    /// A Jinja chat template file: the grammar llama-server b11434 builds from it (with
    /// --model, in place of the model's own template).
    #[arg(long)]
    pub template: Option<String>,
    /// A GGUF file or `models.toml` entry: the grammar llama-server builds from its chat
    /// template (and vocabulary).
    #[arg(long)]
    pub model: Option<String>,
    /// The models file to look names up in.
    #[arg(long)]
    pub models: Option<PathBuf>,
    /// Without --template or --model: toolrail's own grammar for this envelope.
    #[arg(long, value_enum, default_value_t = FormatArg::Openai)]
    pub format: FormatArg,
    /// With a template: `auto`, `required`, `none`, or a tool name.
    #[arg(long, default_value = "auto")]
    pub tool_choice: ToolChoice,
    /// Allow parallel calls (with a template: `--parallel false` forbids them; default
    /// llama-server's).
    #[arg(long, num_args = 0..=1, default_missing_value = "true")]
    pub parallel: Option<bool>,
    /// How many tools the table lists, most costly first (0: all).
    #[arg(long, default_value_t = 20)]
    pub top: usize,
    /// Write a version of the catalog whose grammar fits to this file (OpenAI `tools`, as a
    /// client sends them): bounds lowered or dropped, patterns opened or dropped, enums made
    /// their types, only as far as needed; every relaxation is listed. The grammar is then only
    /// ever looser than the schemas.
    #[arg(long, value_name = "OUT")]
    pub project: Option<PathBuf>,
    /// With --project: keep each relaxed tool's original parameters beside the relaxed ones
    /// (`x-toolrail-original-parameters`), so that `toolrail validate` with the written file
    /// still checks the original schema. llama-server ignores the key; a template that prints
    /// whole tool definitions shows it to the model.
    #[arg(long, requires = "project")]
    pub keep_validation: bool,
    /// With --project: the grammar must also have at most this many rules.
    #[arg(long, requires = "project")]
    pub max_rules: Option<usize>,
    /// With --project: the grammar must also have at most this many bytes.
    #[arg(long, requires = "project")]
    pub max_bytes: Option<usize>,
    /// Print one JSON object instead of a report.
    #[arg(long)]
    pub json: bool,
}

/// Runs `toolrail budget`.
pub fn run(args: &BudgetArgs) -> anyhow::Result<ExitCode> {
    let text = super::common::read_text(&args.tools, "the tool set")?;
    let tools = super::common::load_tool_set(&text, &args.tools)?;
    let client_tools = tools.client_tools();
    let templates = match (&args.model, &args.template) {
        (None, None) if args.tool_choice != ToolChoice::Auto => anyhow::bail!(
            "--tool-choice {}: applies to a chat template's grammar; give --template or --model \
             (toolrail's own grammar always allows every tool)",
            args.tool_choice
        ),
        (None, None) => None,
        (model, template) => Some(super::template::load_templates(
            model.as_deref(),
            args.models.as_ref(),
            template.as_deref(),
        )?),
    };
    let (builder, source) = match &templates {
        Some((templates, source)) => {
            let mut request = TemplateRequest::for_tools(&tools, "Which tool fits?");
            request.tool_choice = args.tool_choice.clone();
            request.parallel_tool_calls = ServerSwitch::from(args.parallel);
            (
                GrammarBuilder::Template {
                    templates,
                    request: Box::new(request),
                },
                format!("llama-server's grammar from {source}"),
            )
        }
        None => (
            GrammarBuilder::Envelope(GrammarOptions {
                format: args.format.into(),
                parallel: args.parallel.unwrap_or(false),
                ..GrammarOptions::default()
            }),
            format!(
                "toolrail's grammar for the {} envelope",
                toolrail_tools::envelope::Format::from(args.format)
            ),
        ),
    };
    if let Some(out) = &args.project {
        return run_project(args, out, &client_tools, &builder, &source);
    }
    let report = budget(&client_tools, &builder).with_context(|| args.tools.clone())?;
    if args.json {
        let value = json!({
            "source": source,
            "fits": report.fits(),
            "budget": report,
            "trigger_ms_per_token": {
                "at_1k_chars": report.trigger_ms_per_token(1_000),
                "at_8k_chars": report.trigger_ms_per_token(8_000),
                "at_32k_chars": report.trigger_ms_per_token(32_000),
            },
            "published_trigger_ms_per_token": {
                "at_1k_chars": report.published_trigger_ms_per_token(1_000),
                "at_8k_chars": report.published_trigger_ms_per_token(8_000),
                "at_32k_chars": report.published_trigger_ms_per_token(32_000),
            },
        });
        super::output::write_json(&serde_json::to_string_pretty(&value)?)?;
    } else {
        print_report(&report, &source, args.top)?;
    }
    Ok(if report.fits() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// `1,234,567`.
fn thousands(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// One line on a grammar's size.
fn size_line(cost: &GrammarCost) -> String {
    format!(
        "{} bytes, {} rules, {} elements (about {} KiB in llama.cpp), largest repetition {} of \
         2000, {} rules deep, {}, checked in {:.1} ms",
        thousands(cost.bytes),
        thousands(cost.rules),
        thousands(cost.elements),
        cost.memory_bytes.div_ceil(1024),
        cost.largest_repetition,
        cost.depth,
        match cost.stacks {
            Some(s) => format!(
                "{} stacks alive along a sampled call (median; {} at most)",
                s.median, s.most
            ),
            None => "no call sampled".to_owned(),
        },
        cost.compile_ms
    )
}

fn blame_line(blame: &Blame) -> String {
    let at = if blame.pointer.is_empty() {
        format!("tool '{}' (number {})", blame.tool, blame.index + 1)
    } else {
        format!(
            "tool '{}' (number {}) at {}",
            blame.tool,
            blame.index + 1,
            blame.pointer
        )
    };
    let how = match blame.how {
        BlameKind::Alone => "its grammar alone is refused",
        BlameKind::Crosses => {
            "no tool is refused alone; the tools before it load, and adding it makes the grammar \
             fail (remove or shrink tools from here on)"
        }
    };
    format!("{at}: {how}: {}", blame.refusal.finding)
}

fn print_report(report: &Budget, source: &str, top: usize) -> std::io::Result<()> {
    outln!("{source}, {} tool(s)", report.tools.len())?;
    let whole = &report.whole;
    match (whole.bytes, whole.rules, &whole.refusal) {
        (0, _, Some(_)) => outln!("grammar: not built")?,
        (0, _, None) => outln!(
            "grammar: none (llama-server constrains nothing for this template and tool_choice)"
        )?,
        (bytes, 0, Some(_)) => outln!(
            "grammar: {} bytes, refused while parsing (its rules were not counted)",
            thousands(bytes)
        )?,
        _ => outln!("grammar: {}", size_line(whole))?,
    }
    match &report.whole.refusal {
        None if report.whole.bytes == 0 => outln!("verdict: fits: there is no grammar to load")?,
        None => outln!("verdict: fits: llama.cpp loads the grammar")?,
        Some(refusal) => {
            outln!("verdict: does not fit: {}", refusal.finding)?;
            if let Some(words) = &refusal.llama_message {
                outln!("llama.cpp says: {words}")?;
            }
            match &report.blame {
                Some(blame) => outln!("blame: {}", blame_line(blame))?,
                None => outln!("blame: not found (the catalog's prefixes all load)")?,
            }
        }
    }
    outln!(
        "\nper tool: {}",
        match report.per_tool {
            PerTool::Sliced =>
                "its rules in the catalog's grammar (shared ones included), checked as a grammar \
                 of their own",
            PerTool::Built => "its grammar built alone",
        }
    )?;
    let mut order: Vec<usize> = (0..report.tools.len()).collect();
    order.sort_by(|&a, &b| report.tools[b].cost.bytes.cmp(&report.tools[a].cost.bytes));
    let shown = if top == 0 {
        order.len()
    } else {
        top.min(order.len())
    };
    outln!(
        "{:<32} {:>9} {:>6} {:>6} {:>8} {:>7} {:>5} {:>7} {:>7}  loads",
        "tool",
        "bytes",
        "share",
        "rules",
        "elements",
        "max rep",
        "depth",
        "stacks",
        "ms"
    )?;
    for &i in &order[..shown] {
        let t = &report.tools[i];
        let mut name = t.name.clone();
        if name.chars().count() > 32 {
            name = name.chars().take(31).collect::<String>() + "…";
        }
        let stacks = t
            .cost
            .stacks
            .map_or("-".to_owned(), |s| format!("{}/{}", s.median, s.most));
        outln!(
            "{:<32} {:>9} {:>5.1}% {:>6} {:>8} {:>7} {:>5} {:>7} {:>7.2}  {}",
            name,
            thousands(t.cost.bytes),
            t.share * 100.0,
            t.cost.rules,
            t.cost.elements,
            t.cost.largest_repetition,
            t.cost.depth,
            stacks,
            t.cost.compile_ms,
            match &t.cost.refusal {
                None => "yes".to_owned(),
                Some(r) => format!("no: {}", r.finding),
            }
        )?;
    }
    if shown < order.len() {
        outln!("… {} more (--top 0 lists all)", order.len() - shown)?;
    }
    if !report.triggers.is_empty() {
        outln!(
            "\nlazy triggers (the grammar sleeps until one fires): {}",
            report.triggers.len()
        )?;
        const SHOWN: usize = 5;
        for t in report.triggers.iter().take(SHOWN) {
            let how = if t.rescans {
                "searched again over the whole output on every token"
            } else {
                "matched on the sampled token alone"
            };
            outln!("  {} `{}`: {how}", t.trigger.kind, t.trigger.value)?;
        }
        if report.triggers.len() > SHOWN {
            outln!(
                "  … {} more (--json lists all)",
                report.triggers.len() - SHOWN
            )?;
        }
        let rescanned = report.rescanned_triggers();
        if rescanned > 0 {
            outln!(
                "trigger search: llama.cpp runs {rescanned} pattern(s) over the whole output on \
                 every token while the grammar sleeps"
            )?;
            match (&report.trigger_search, &report.trigger_search_error) {
                (Some(timing), _) => outln!(
                    "  timed here: {:.2} ns per character of output: {:.3} ms per token at 1k \
                     characters, {:.3} ms at 8k, {:.3} ms at 32k",
                    timing.ns_per_char(),
                    report.trigger_ms_per_token(1_000),
                    report.trigger_ms_per_token(8_000),
                    report.trigger_ms_per_token(32_000)
                )?,
                (None, Some(e)) => outln!("  not timed here: {e}")?,
                (None, None) => {}
            }
            outln!(
                "  llama.cpp's published figure ({PUBLISHED_NS_PER_CHAR} ns per character, one \
                 reporter's catalog and machine): {:.3} ms per token at 1k, {:.3} ms at 8k, \
                 {:.3} ms at 32k",
                report.published_trigger_ms_per_token(1_000),
                report.published_trigger_ms_per_token(8_000),
                report.published_trigger_ms_per_token(32_000)
            )?;
        }
    }
    Ok(())
}

/// `--project OUT`: relaxes the catalog until its grammar meets the target, writes it, and
/// lists every relaxation (exit 0 the written catalog fits, 1 it does not).
fn run_project(
    args: &BudgetArgs,
    out: &std::path::Path,
    tools: &[serde_json::Value],
    builder: &GrammarBuilder<'_>,
    source: &str,
) -> anyhow::Result<ExitCode> {
    let target = Target {
        max_rules: args.max_rules,
        max_bytes: args.max_bytes,
    };
    let projection = project(tools, builder, &target).with_context(|| args.tools.clone())?;
    let written = match args.keep_validation {
        true => projection.tools_keeping_validation(tools),
        false => projection.tools.clone(),
    };
    let text = serde_json::to_string_pretty(&written)? + "\n";
    super::grammar::write_atomically(out, text.as_bytes())
        .with_context(|| format!("writing {}", out.display()))?;
    if args.json {
        let value = json!({
            "source": source,
            "written": out,
            "fits": projection.fits,
            "before": projection.before,
            "after": projection.after,
            "relaxations": projection.applied.iter().map(|a| json!({
                "tool": a.tool,
                "index": a.index,
                "pointer": a.relaxation.pointer,
                "before": a.relaxation.before(),
                "after": a.relaxation.after(),
                "relaxation": a.relaxation,
            })).collect::<Vec<_>>(),
            "unfixable": projection.unfixable,
        });
        super::output::write_json(&serde_json::to_string_pretty(&value)?)?;
    } else {
        outln!("{source}, {} tool(s)", tools.len())?;
        outln!(
            "before: {}",
            match &projection.before.refusal {
                Some(r) => format!("does not fit: {}", r.finding),
                None => format!(
                    "{} bytes, {} rules",
                    thousands(projection.before.bytes),
                    thousands(projection.before.rules)
                ),
            }
        )?;
        match projection.applied.len() {
            0 => outln!("relaxations: none needed")?,
            n => outln!("relaxations ({n}; the grammar only gets looser):")?,
        }
        for a in &projection.applied {
            outln!(
                "  tool '{}' (number {}) at {}: {} → {}",
                a.tool,
                a.index + 1,
                if a.relaxation.pointer.is_root() {
                    "the parameters' root".to_owned()
                } else {
                    a.relaxation.pointer.to_string()
                },
                a.relaxation.before(),
                a.relaxation.after()
            )?;
        }
        for name in &projection.unfixable {
            outln!("  tool '{name}': still refused alone with every relaxation it offers")?;
        }
        outln!(
            "after: {}: {}",
            if projection.fits {
                "fits"
            } else {
                "does not fit"
            },
            match &projection.after.refusal {
                Some(r) => r.finding.clone(),
                None => format!(
                    "llama.cpp loads it; {} bytes, {} rules",
                    thousands(projection.after.bytes),
                    thousands(projection.after.rules)
                ),
            }
        )?;
        outln!(
            "written: {}{}",
            out.display(),
            if args.keep_validation {
                " (each relaxed tool keeps its original parameters for `toolrail validate`)"
            } else {
                " (validate against the original file: it holds what the relaxations let through)"
            }
        )?;
    }
    Ok(if projection.fits {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
