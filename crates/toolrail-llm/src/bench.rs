//! `toolrail bench`'s measuring logic: the same prompt, greedily, under each engine
//! (`toolrail`, `llama`, `llguidance`, `none`) in one process, with llama.cpp's and
//! llguidance's masks compared with toolrail's over the whole vocabulary at every step.
//! llguidance reads the same GBNF (as Lark, [`crate::llguidance::gbnf_to_lark`]); a grammar it
//! cannot take leaves it out, with the reason in [`BenchReport::llguidance_skipped`].
//!
//! The three runs are interleaved one token at a time, each on its own context: every engine
//! sees the same machine conditions (on a shared machine, load drifts over seconds), and the
//! masks the `toolrail` and `llama` runs compute anyway are compared for free whenever both
//! runs have taken the same tokens so far. Greedy choice is the same cheap arg-max for every
//! engine ([`Session::argmax`]), so the runs differ only by the grammar's work.
//!
//! What is timed, per engine and token: the mask alone (`mask_ms_*`), and the whole step —
//! mask, choice, advancing the grammar, decoding the token — from which `tokens_per_s` comes.
//! The prompt's decode is not counted.

use std::sync::Arc;
use std::time::Instant;

use crate::engine_kind::EngineKind;
use crate::record::{Sampling, Stop};
use crate::step::{ConstrainedRun, Following, Recording, Step, StepSetup, compare_masks};
use crate::{LlmError, Model, Session, SessionOptions};
use toolrail_engine::{MaskEngine, TokenMask};

/// Why a greedy run ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum RunEnd {
    /// It chose an end-of-generation token.
    EndOfGeneration,
    /// It reached the token limit.
    MaxTokens,
    /// The grammar allowed no token.
    DeadEnd,
}

/// One greedy generation under one engine, advanced a token at a time: the one stepping path
/// ([`ConstrainedRun`], lean recording, greedy arg-max) on a context of its own.
pub struct GreedyRun<'m> {
    run: ConstrainedRun<'m>,
    model: &'m Model,
    session: Session<'m>,
    max_tokens: u32,
    /// The tokens taken (an end-of-generation token included).
    tokens: Vec<u32>,
    end: Option<RunEnd>,
    mask_ms: Vec<f64>,
    step_ms: f64,
    /// Steps where the guard replaced the greedy choice.
    budget_replaced: u32,
}

impl std::fmt::Debug for GreedyRun<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GreedyRun")
            .field("kind", &self.run.engine())
            .field("tokens", &self.tokens.len())
            .field("end", &self.end)
            .finish_non_exhaustive()
    }
}

impl<'m> GreedyRun<'m> {
    /// A run of `kind` on a fresh context holding `prompt` (already tokenized). `grammar` is
    /// required by the constrained engines and ignored by `none`. The `llguidance` engine sets
    /// llguidance up for the model's vocabulary for this run. Only a `toolrail` run is
    /// followed by toolrail's recognizer, so each engine is timed on its own work.
    pub fn new(
        model: &'m Model,
        kind: EngineKind,
        grammar: Option<&str>,
        prompt: &[u32],
        max_tokens: u32,
        options: SessionOptions,
    ) -> Result<GreedyRun<'m>, LlmError> {
        if kind.constrains() && grammar.is_none() {
            return Err(LlmError::Generation(format!(
                "the {kind} engine needs a grammar"
            )));
        }
        let sampling = Sampling {
            temperature: 0.0,
            max_tokens,
            finish_in_budget: false,
            repeat_penalty: 1.0,
            ..Sampling::default()
        };
        let setup = StepSetup {
            engine: kind,
            compare: &[],
            grammar,
            schema: None,
            gate: None,
            sampling: &sampling,
            recording: Recording::Lean,
            following: Following::OwnRunOnly,
        };
        let (run, _) = ConstrainedRun::new(model, &model.shared_token_table(), &mut None, setup)?;
        let mut session = model.session(options)?;
        session.decode(prompt)?;
        Ok(GreedyRun {
            run,
            model,
            session,
            max_tokens,
            tokens: Vec::new(),
            end: None,
            mask_ms: Vec::new(),
            step_ms: 0.0,
            budget_replaced: 0,
        })
    }

    /// Applies llama.cpp's repetition penalty to the tokens among the last
    /// [`crate::record::PENALTY_WINDOW`] generated ones before each greedy choice: a positive
    /// logit is divided by `penalty`, a negative one multiplied (1.0 turns it off).
    pub fn with_repeat_penalty(mut self, penalty: f32) -> Self {
        self.run.set_repeat_penalty(penalty);
        self
    }

    /// Turns on the budget guard ([`toolrail_engine::BudgetGuard`]) for a `toolrail` run: near
    /// `max_tokens`, a greedy choice that would leave the grammar unable to finish in the tokens
    /// left is replaced by the most likely token that can. Off by default: `toolrail bench`
    /// compares the engines on the model's own choices.
    pub fn with_budget_guard(mut self) -> Self {
        self.run
            .set_finish_in_budget(true, &self.model.shared_token_table());
        self
    }

    /// How many steps the budget guard replaced the greedy choice.
    pub fn budget_replaced(&self) -> u32 {
        self.budget_replaced
    }

    /// The engine.
    pub fn kind(&self) -> EngineKind {
        self.run.engine()
    }

    /// True until the run has ended.
    pub fn running(&self) -> bool {
        self.end.is_none()
    }

    /// Why the run ended (None while it runs).
    pub fn end(&self) -> Option<RunEnd> {
        self.end
    }

    /// The tokens taken so far (an end-of-generation token included).
    pub fn tokens(&self) -> &[u32] {
        &self.tokens
    }

    /// The generated text so far (end-of-generation pieces excluded).
    pub fn output(&self) -> &[u8] {
        self.run.output()
    }

    /// The milliseconds each mask took, in order.
    pub fn mask_times(&self) -> &[f64] {
        &self.mask_ms
    }

    /// Total milliseconds spent in [`GreedyRun::step`].
    pub fn step_ms(&self) -> f64 {
        self.step_ms
    }

    /// The mask of the last step (None for `none`, or before the first step).
    pub fn last_mask(&self) -> Option<&TokenMask> {
        self.run.last_mask()
    }

    /// Takes one token: the mask, the greedy choice, the grammar advanced, the token decoded.
    /// `masks` serves the `toolrail` engine (its cache is kept across steps).
    pub fn step(&mut self, masks: &mut MaskEngine) -> Result<(), LlmError> {
        if self.end.is_some() {
            return Ok(());
        }
        if self.tokens.len() >= self.max_tokens as usize {
            self.end = Some(RunEnd::MaxTokens);
            self.run.clear_last_mask();
            return Ok(());
        }
        let started = Instant::now();
        let step = self.run.step(masks, self.session.logits()?, None, 0.0)?;
        if let Some(mask_ms) = self.run.last_mask_ms() {
            self.mask_ms.push(mask_ms);
        }
        match step {
            Step::Took(took) => {
                self.tokens.push(took.record.id);
                self.budget_replaced += u32::from(took.record.budget_replaced.is_some());
                self.session.feed(took.record.id)?;
            }
            Step::EndOfGeneration { token } => {
                // Counted among the tokens taken, not decoded.
                self.tokens.push(token);
                self.end = Some(RunEnd::EndOfGeneration);
            }
            Step::Ended(Stop::DeadEnd { .. }) => self.end = Some(RunEnd::DeadEnd),
            Step::Ended(Stop::Error { message }) => return Err(LlmError::Generation(message)),
            Step::Ended(other) => {
                return Err(LlmError::Generation(format!(
                    "a greedy run ended unexpectedly: {other:?}"
                )));
            }
            Step::Refused { token, reason } => {
                return Err(LlmError::Generation(format!(
                    "a greedy run forced no token, yet token {token} was refused: {reason}"
                )));
            }
        }
        self.step_ms += ms(started);
        Ok(())
    }

    /// Steps until the run ends.
    pub fn run_to_end(&mut self, masks: &mut MaskEngine) -> Result<RunEnd, LlmError> {
        loop {
            self.step(masks)?;
            if let Some(end) = self.end {
                return Ok(end);
            }
        }
    }

    /// This run's figures.
    pub fn figures(&self) -> EngineFigures {
        let mut sorted = self.mask_ms.clone();
        sorted.sort_by(f64::total_cmp);
        let n = self.tokens.len() as u32;
        EngineFigures {
            engine: self.run.engine(),
            mask_ms_p50: percentile(&sorted, 0.50),
            mask_ms_p99: percentile(&sorted, 0.99),
            mask_ms_max: sorted.last().copied().unwrap_or(0.0),
            mask_ms_mean: if sorted.is_empty() {
                0.0
            } else {
                sorted.iter().sum::<f64>() / sorted.len() as f64
            },
            tokens_per_s: if self.step_ms > 0.0 {
                f64::from(n) * 1000.0 / self.step_ms
            } else {
                0.0
            },
            tokens: n,
            end: self.end,
        }
    }
}

/// The nearest-rank percentile of ascending `sorted` (0 when empty).
pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = (p * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// One engine's figures.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct EngineFigures {
    /// The engine.
    pub engine: EngineKind,
    /// Median mask time (0 for `none`).
    pub mask_ms_p50: f64,
    /// 99th-percentile mask time.
    pub mask_ms_p99: f64,
    /// Longest mask time.
    pub mask_ms_max: f64,
    /// Tokens per second over the timed steps (mask, choice, grammar, decode).
    pub tokens_per_s: f64,
    /// Mean mask time.
    pub mask_ms_mean: f64,
    /// Tokens taken.
    pub tokens: u32,
    /// Why the run ended.
    pub end: Option<RunEnd>,
}

/// Everything `toolrail bench` measured.
#[derive(Clone, Debug, PartialEq)]
pub struct BenchReport {
    /// Vocabulary size.
    pub vocab: usize,
    /// Milliseconds to build the token table (every piece) from the model.
    pub table_ms: f64,
    /// Milliseconds to build the mask engine (trie and piece facts) from the table.
    pub trie_ms: f64,
    /// Trie nodes.
    pub trie_nodes: usize,
    /// Per engine, in the order `toolrail`, `llama`, `llguidance` (unless skipped), `none`.
    pub engines: Vec<EngineFigures>,
    /// Tokens allowed by one of toolrail and llama.cpp and not the other, summed over the
    /// compared steps.
    pub mask_differences: usize,
    /// Steps at which both masks were compared (both runs had taken the same tokens).
    pub compared_steps: u32,
    /// True if the `toolrail` and `llama` runs took the same tokens.
    pub same_tokens: bool,
    /// What the `toolrail` run generated (lossy UTF-8).
    pub toolrail_text: String,
    /// Tokens allowed by one of toolrail and llguidance and not the other, summed over the
    /// steps compared (both runs had taken the same tokens).
    pub llguidance_differences: usize,
    /// Steps at which toolrail's and llguidance's masks were compared.
    pub llguidance_compared_steps: u32,
    /// The first steps where they differ, described token by token.
    pub llguidance_examples: Vec<String>,
    /// Why llguidance was left out (it cannot take the grammar), if it was.
    pub llguidance_skipped: Option<String>,
}

impl BenchReport {
    /// The figures of one engine.
    pub fn engine(&self, kind: EngineKind) -> Option<&EngineFigures> {
        self.engines.iter().find(|e| e.engine == kind)
    }

    /// Vocabulary set-up: token table plus mask engine.
    pub fn setup_ms(&self) -> f64 {
        self.table_ms + self.trie_ms
    }

    /// How many times faster toolrail's mean mask is than llama.cpp's.
    pub fn speedup_vs_llama(&self) -> Option<f64> {
        let ours = self.engine(EngineKind::Toolrail)?.mask_ms_mean;
        let theirs = self.engine(EngineKind::Llama)?.mask_ms_mean;
        (ours > 0.0).then(|| theirs / ours)
    }

    /// An engine's tokens/s as a fraction of the unconstrained run's.
    pub fn ratio_to_unconstrained(&self, kind: EngineKind) -> Option<f64> {
        let ours = self.engine(kind)?.tokens_per_s;
        let free = self.engine(EngineKind::None)?.tokens_per_s;
        (free > 0.0).then(|| ours / free)
    }
}

/// Options of [`bench`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BenchOptions {
    /// Tokens per run at most.
    pub tokens: u32,
    /// Decoding threads per context.
    pub threads: Option<u32>,
}

/// Runs `prompt` greedily under `grammar` with each engine, interleaved token by token, and
/// measures them (see the module docs).
pub fn bench(
    model: &Model,
    grammar: &str,
    prompt: &str,
    options: BenchOptions,
) -> Result<BenchReport, LlmError> {
    // Set-up, from scratch: the table is built again even if the model has one cached.
    let started = Instant::now();
    let table = Arc::new(model.token_table());
    let table_ms = ms(started);
    let started = Instant::now();
    let mut masks = MaskEngine::new(table);
    let trie_ms = ms(started);

    let prompt = model.tokenize(prompt, true, true);
    let session = SessionOptions {
        context: Some((prompt.len() as u32).saturating_add(options.tokens) + 8),
        threads: options.threads,
        compute: Default::default(),
        beside_window: false,
    };
    let mut runs = [EngineKind::Toolrail, EngineKind::Llama]
        .into_iter()
        .map(|kind| GreedyRun::new(model, kind, Some(grammar), &prompt, options.tokens, session))
        .collect::<Result<Vec<_>, _>>()?;
    let mut llguidance_skipped = None;
    match GreedyRun::new(
        model,
        EngineKind::Llguidance,
        Some(grammar),
        &prompt,
        options.tokens,
        session,
    ) {
        Ok(run) => runs.push(run),
        Err(e) => llguidance_skipped = Some(e.to_string()),
    }
    runs.push(GreedyRun::new(
        model,
        EngineKind::None,
        Some(grammar),
        &prompt,
        options.tokens,
        session,
    )?);
    let guidance_slot = runs.iter().position(|r| r.kind() == EngineKind::Llguidance);

    let mut mask_differences = 0;
    let mut compared_steps = 0;
    let mut llguidance_differences = 0;
    let mut llguidance_compared_steps = 0;
    let mut llguidance_examples = Vec::new();
    while runs.iter().any(GreedyRun::running) {
        let before: Vec<(bool, usize)> = runs
            .iter()
            .map(|r| (r.running(), r.tokens().len()))
            .collect();
        for run in &mut runs {
            run.step(&mut masks)?;
        }
        // runs[0] is toolrail, runs[1] llama: compare the masks of a step both took from the
        // same history.
        let (ours, theirs) = (&runs[0], &runs[1]);
        let ((ours_ran, n), (theirs_ran, m)) = (before[0], before[1]);
        if ours_ran
            && theirs_ran
            && ours.tokens()[..n] == theirs.tokens()[..m]
            && let (Some(a), Some(b)) = (ours.last_mask(), theirs.last_mask())
        {
            mask_differences += a.difference_count(b);
            compared_steps += 1;
        }
        if let Some(slot) = guidance_slot {
            let (ours, theirs) = (&runs[0], &runs[slot]);
            let ((ours_ran, n), (theirs_ran, m)) = (before[0], before[slot]);
            if ours_ran
                && theirs_ran
                && ours.tokens()[..n] == theirs.tokens()[..m]
                && let (Some(a), Some(b)) = (ours.last_mask(), theirs.last_mask())
            {
                let differing = a.difference_count(b);
                llguidance_differences += differing;
                llguidance_compared_steps += 1;
                if differing > 0
                    && llguidance_examples.len() < 5
                    && let Some(d) = compare_masks(model, EngineKind::Llguidance, b, a)
                {
                    llguidance_examples.push(format!("step {n}: {}", d.describe()));
                }
            }
        }
    }
    Ok(BenchReport {
        vocab: model.n_vocab(),
        table_ms,
        trie_ms,
        trie_nodes: masks.trie().node_count(),
        same_tokens: runs[0].tokens() == runs[1].tokens(),
        toolrail_text: String::from_utf8_lossy(runs[0].output()).into_owned(),
        engines: runs.iter().map(GreedyRun::figures).collect(),
        mask_differences,
        compared_steps,
        llguidance_differences,
        llguidance_compared_steps,
        llguidance_examples,
        llguidance_skipped,
    })
}

fn ms(since: Instant) -> f64 {
    since.elapsed().as_secs_f64() * 1000.0
}

#[cfg(test)]
mod tests {
    use super::percentile;

    #[test]
    fn nearest_rank_percentiles() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile(&v, 0.5), 50.0);
        assert_eq!(percentile(&v, 0.99), 99.0);
        assert_eq!(percentile(&v[..10], 0.99), 10.0);
        assert_eq!(percentile(&[], 0.5), 0.0);
    }
}
