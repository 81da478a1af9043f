//! `toolrail compare`: two runs' transcripts side by side, as a person debugging "the server
//! answered something else" needs them: where the tokens part, what each run's probabilities
//! were there, how far the probabilities drift where the tokens agree, and which recorded
//! settings (flash attention, batch sizes, cache types, a cached prompt, sampling) explain it.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;

use toolrail_workbench::transcript::Transcript;
use toolrail_workbench::transcript::compare::RunComparison;

/// Arguments of `toolrail compare`.
#[derive(Debug, clap::Args)]
pub struct CompareArgs {
    /// The first run's transcript (e.g. a run on a llama-server: `generate --server …
    /// --transcript`).
    pub first: PathBuf,
    /// The second run's transcript (e.g. the same request in-process).
    pub second: PathBuf,
    /// Print the comparison as JSON.
    #[arg(long)]
    pub json: bool,
}

/// Runs `toolrail compare`: exit 0 when the runs took the same tokens, 1 when they part.
pub fn run(args: &CompareArgs) -> anyhow::Result<ExitCode> {
    let load = |path: &PathBuf| {
        Transcript::load(path).with_context(|| format!("reading {}", path.display()))
    };
    let (first, second) = (load(&args.first)?, load(&args.second)?);
    let comparison = RunComparison::of(&first, &second);
    if args.json {
        let mut value = serde_json::to_value(&comparison)?;
        if let Some(object) = value.as_object_mut() {
            object.insert(
                "explanation".into(),
                serde_json::to_value(comparison.explanation())?,
            );
        }
        super::output::write_json(&serde_json::to_string_pretty(&value)?)?;
    } else {
        for (label, path, t) in [
            ("first", &args.first, &first),
            ("second", &args.second, &second),
        ] {
            let settings = t.settings.as_ref().map_or_else(
                || "settings not recorded".to_owned(),
                |s| format!("{}: {}", s.engine, s.summary()),
            );
            outln!(
                "{label}: {} ({} tokens) — {settings}",
                path.display(),
                t.tokens.len()
            )?;
        }
        for line in comparison.explanation() {
            outln!("{line}")?;
        }
    }
    Ok(if comparison.same_tokens() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
