//! `toolrail check GRAMMAR [INPUT|-] [--prefix] [--json]`.

use std::process::ExitCode;
use std::sync::Arc;

use serde::Serialize;

use toolrail_engine::{Engine, VerdictKind, check_reader};
use toolrail_gbnf::source::LineExcerpt;

/// Arguments of `toolrail check`.
#[derive(Debug, clap::Args)]
pub struct CheckArgs {
    /// The GBNF grammar file (start rule `root`).
    pub grammar: String,
    /// The text to check: a file, or `-` (the default) for standard input.
    #[arg(default_value = "-")]
    pub input: String,
    /// Treat an incomplete input (a valid prefix) as success.
    #[arg(long)]
    pub prefix: bool,
    /// Print one JSON object instead of a report.
    #[arg(long)]
    pub json: bool,
}

#[derive(Serialize)]
struct JsonVerdict {
    verdict: VerdictKind,
    offset: Option<usize>,
    line: u32,
    column: u32,
    expected: Vec<String>,
}

/// Runs `toolrail check`.
pub fn run(args: &CheckArgs) -> anyhow::Result<ExitCode> {
    let grammar = match super::common::load_grammar(&args.grammar) {
        Ok(g) => Arc::new(g),
        Err(code) => return Ok(code),
    };
    if let Err(code) = super::common::refuse_unusable(grammar.source(), &args.grammar) {
        return Ok(code);
    }
    // The input is streamed: memory stays bounded and reading stops at the first rejected byte.
    let mut engine = Engine::new(Arc::clone(&grammar));
    let streamed = if args.input == "-" {
        check_reader(&mut engine, &mut std::io::stdin().lock())
            .map_err(|e| anyhow::anyhow!("cannot read standard input: {e}"))?
    } else {
        let cannot = |e: std::io::Error| super::common::cannot_read(&args.input, &e);
        // Only a regular file (any size: it is streamed); a FIFO would block the open for ever.
        let mut file =
            toolrail_llm::files::open_regular(std::path::Path::new(&args.input), u64::MAX)
                .map_err(|e| cannot(e.into_io()))?;
        check_reader(&mut engine, &mut file).map_err(cannot)?
    };
    let verdict = &streamed.verdict;
    // Literal alternatives where the stacks sit in a small finite rule (an enum), characters
    // otherwise; a GBNF file carries no schema locations, so a group names its rule.
    let read_up_to = verdict
        .offset
        .map_or(streamed.window.len(), |o| {
            o.saturating_sub(streamed.window_start)
        })
        .min(streamed.window.len());
    let expected = if verdict.kind == VerdictKind::TooAmbiguous {
        verdict.expected.describe()
    } else {
        engine
            .readable_expected(verdict.state, &streamed.window[..read_up_to], &|_| false)
            .describe(&|_| None)
    };
    if args.json {
        let out = JsonVerdict {
            verdict: verdict.kind,
            offset: verdict.offset,
            line: verdict.position.line,
            column: verdict.position.column,
            expected,
        };
        super::output::write_json(&serde_json::to_string(&out)?)?;
    } else {
        let name = if args.input == "-" {
            "<stdin>"
        } else {
            args.input.as_str()
        };
        match verdict.kind {
            VerdictKind::Accepted => outln!("{name}: accepted")?,
            VerdictKind::Incomplete => {
                outln!(
                    "{name}:{}: incomplete: the input is a valid prefix but the grammar needs more",
                    verdict.position
                )?;
                outln!("expected: {}", expected.join(", "))?;
            }
            VerdictKind::TooAmbiguous => {
                outln!(
                    "{name}:{}: stopped at byte {}: the grammar is so ambiguous here that following it takes more work than toolrail allows ({} stacks alive before this byte, each followed again at every character; llama.cpp would crawl and run out of memory here)",
                    verdict.position,
                    verdict.offset.unwrap_or(0),
                    engine.stacks(verdict.state).len()
                )?;
            }
            VerdictKind::Rejected => {
                let offset = verdict.offset.unwrap_or(0);
                outln!("{name}:{}: rejected at byte {offset}", verdict.position)?;
                // A window of the line around the byte (a one-line input may be megabytes).
                let shown = LineExcerpt::around(&streamed.window, offset - streamed.window_start);
                // The caret under the byte as the line is shown (control characters escaped).
                let before = toolrail_gbnf::terminal_safe(&shown.before);
                let pad: String = before
                    .chars()
                    .map(|c| if c == '\t' { '\t' } else { ' ' })
                    .collect();
                let cut = if shown.cut_right { "…" } else { "" };
                outln!("  | {before}{}{cut}\n  | {pad}^", shown.after)?;
                if expected.is_empty() {
                    outln!("expected: nothing (the grammar was already complete)")?;
                } else {
                    outln!("expected: {}", expected.join(", "))?;
                }
            }
        }
    }
    Ok(match verdict.kind {
        VerdictKind::Accepted => ExitCode::SUCCESS,
        VerdictKind::Rejected => ExitCode::from(1),
        VerdictKind::Incomplete if args.prefix => ExitCode::SUCCESS,
        VerdictKind::Incomplete => ExitCode::from(3),
        VerdictKind::TooAmbiguous => ExitCode::from(2),
    })
}
