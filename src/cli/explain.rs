//! `toolrail explain`: what a recorded run says about itself — why it stopped, what the lazy
//! grammar, the budget guard, the compared engines and the server did, and whether its output
//! is a valid call — in the words the app and `toolrail generate` show, for a transcript saved
//! by either (or by a CI job).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;

use toolrail_workbench::transcript::Transcript;
use toolrail_workbench::transcript::explain::{Tone, explain};

/// Arguments of `toolrail explain`.
#[derive(Debug, clap::Args)]
pub struct ExplainArgs {
    /// The run's transcript (`generate --transcript`, or Export in the app).
    pub transcript: PathBuf,
}

/// Runs `toolrail explain`: exit 0 when the run ended as asked and its output is valid (or not
/// judged), 1 when its output is invalid, 2 when the run failed (an error, a dead end) or the
/// file cannot be read.
pub fn run(args: &ExplainArgs) -> anyhow::Result<ExitCode> {
    let t = Transcript::load(&args.transcript)
        .with_context(|| format!("reading {}", args.transcript.display()))?;
    let lines = explain(&t);
    for line in &lines {
        outln!("{line}")?;
    }
    Ok(if t.stop.failure().is_some() {
        ExitCode::from(2)
    } else if lines.iter().any(|l| l.tone == Tone::Bad) {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}
