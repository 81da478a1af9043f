//! `toolrail sample GRAMMAR [-n N] [--seed S] [--max-len L]`.

use std::process::ExitCode;

use toolrail_engine::sample::{Sampler, SplitMix64};

/// Arguments of `toolrail sample`.
#[derive(Debug, clap::Args)]
pub struct SampleArgs {
    /// The GBNF grammar file, or `-` for standard input.
    pub grammar: String,
    /// How many strings to print.
    #[arg(short = 'n', long, default_value_t = 5)]
    pub count: u32,
    /// Seed for the random choices (the same seed prints the same strings).
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Keep strings to this many characters when the grammar allows.
    #[arg(long, default_value_t = 200)]
    pub max_len: u64,
    /// Print each string as a JSON string (one per line): the exact text, newlines visible (the
    /// plain listing shows control characters as escapes such as `\x1b`).
    #[arg(long)]
    pub json: bool,
}

/// Runs `toolrail sample`.
pub fn run(args: &SampleArgs) -> anyhow::Result<ExitCode> {
    let grammar = match super::common::load_grammar(&args.grammar) {
        Ok(g) => g,
        Err(code) => return Ok(code),
    };
    let sampler = Sampler::new(&grammar);
    let mut rng = SplitMix64::new(args.seed);
    for _ in 0..args.count {
        let s = sampler.sample(&mut rng, args.max_len)?;
        if args.json {
            super::output::write_json(&serde_json::to_string(&s)?)?;
        } else {
            outln!("{s}")?;
        }
    }
    Ok(ExitCode::SUCCESS)
}
