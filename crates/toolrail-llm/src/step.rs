//! One constrained step, the one place where a run's mask is computed and a token committed —
//! whatever drives the run: the generation worker (the app and the CLI), `toolrail bench` and
//! `bench-calls` ([`crate::bench::GreedyRun`]).
//!
//! A [`ConstrainedRun`] holds everything that constrains a run, set up once from a
//! [`StepSetup`]:
//! - the run's engine and the engines compared beside it ([`EngineKind`]): toolrail's recognizer
//!   (which also follows the other engines' runs, for stacks, expected sets and comparisons),
//!   llama.cpp's grammar sampler, llguidance's matcher;
//! - a chat template's gate ([`GateSetup`]): lazy triggers, the generation prompt's prefill, stop
//!   strings, and llama-server's reasoning budget in front of the grammar;
//! - the budget guard (the grammar can still finish within the tokens left);
//! - the sampler (seeded chain or greedy arg-max) and the repetition penalty.
//!
//! [`ConstrainedRun::step`] takes the model's logits for the next position and does one whole
//! step: the masks (the engine's, the compared engines', toolrail's beside them), the choice,
//! the guard, and the commit to every follower, returning one [`TokenRecord`]. The caller owns
//! the llama.cpp context: it decodes the prompt, hands over the logits and feeds the token taken.
//!
//! Adding a mask engine touches this module only (a follower field, its arms in
//! [`ConstrainedRun::new`], `engine_mask`, `compared_masks` and `commit_to_followers`) plus
//! [`EngineKind`].

use std::sync::Arc;
use std::time::Instant;

use crate::engine_kind::EngineKind;
use crate::lazy_gate::{FiredBy, GateSetup, GateStep, LazyGate, find_stop};
use crate::llguidance::{LlgMatcher, Llguidance};
use crate::reasoning_budget::ReasoningBudget;
use crate::record::{
    BudgetNote, Candidate, DifferingToken, LazyNote, MaskDifference, OtherMask, PENALTY_WINDOW,
    Sampling, Stop, TokenRecord, Totals,
};
use crate::sampling::{Choice, Scored, argmax, choose, penalized};
use crate::{LlamaGrammarSampler, LlmError, Model};
use toolrail_engine::sample::SplitMix64;
use toolrail_engine::{BudgetGuard, Engine, MaskEngine, State, TokenMask, TokenTable};
use toolrail_gbnf::{Grammar, TokenVocabulary};

/// How much each step records.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Recording {
    /// Everything the debugger shows: `show` candidates before and after the mask, and the
    /// grammar's stacks after the token (the worker's runs).
    Full {
        /// How many candidates to record before and after the mask.
        show: usize,
    },
    /// Only what a benchmark needs: no candidates, no stacks, and at temperature 0 the cheap
    /// arg-max instead of the sampling chain (the same token), so that engines are timed on
    /// the grammar's work alone.
    Lean,
}

/// Whether toolrail's recognizer follows a run whose engine is another one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Following {
    /// It follows every constrained run: the stacks after each token, what was expected at a
    /// dead end, and toolrail's mask compared with the engine's at every step (the worker).
    Always,
    /// Only a `toolrail` run (benchmarks timing each engine alone).
    OwnRunOnly,
}

/// What a [`ConstrainedRun`] is set up from.
#[derive(Clone, Debug)]
pub struct StepSetup<'a> {
    /// The engine that masks the tokens.
    pub engine: EngineKind,
    /// Other engines whose masks are computed beside the engine's at every step, timed and
    /// compared with toolrail's (the run's own engine, `toolrail` and `none` here change
    /// nothing; ignored by an unconstrained run).
    pub compare: &'a [EngineKind],
    /// The GBNF grammar (ignored by `none`; without one, the run is unconstrained whatever its
    /// engine).
    pub grammar: Option<&'a str>,
    /// The JSON Schema the grammar was converted from, which llguidance compiles itself.
    pub schema: Option<&'a serde_json::Value>,
    /// A chat template's gate: lazy triggers, prefill, stop strings, reasoning budget.
    pub gate: Option<&'a GateSetup>,
    /// Sampling parameters (the token limit, the guard and the repetition penalty included).
    pub sampling: &'a Sampling,
    /// How much each step records.
    pub recording: Recording,
    /// Whether toolrail's recognizer follows other engines' runs.
    pub following: Following,
}

/// What one [`ConstrainedRun::step`] did.
#[derive(Debug)]
pub enum Step {
    /// A token was taken (the caller feeds it to its context next, unless `stop` is set).
    Took(Took),
    /// A forced token was refused: nothing changed; the reason in words.
    Refused {
        /// The token.
        token: u32,
        /// Why it cannot be taken here.
        reason: String,
    },
    /// The model chose an end-of-generation token (allowed: the grammar was complete); it is
    /// not committed and the run ends.
    EndOfGeneration {
        /// The token chosen.
        token: u32,
    },
    /// The run ended before a token was taken (a dead end, no token left to choose).
    Ended(Stop),
}

/// A token taken by a step.
#[derive(Debug)]
pub struct Took {
    /// The step's record.
    pub record: Box<TokenRecord>,
    /// A compared engine that refused the token without a mask at this step, in words (the
    /// ones with a mask say it in [`OtherMask::stopped`]).
    pub notices: Vec<String>,
    /// Set when the output now reaches one of the template's stop strings: the run ends here
    /// (the output was cut before the stop string).
    pub stop: Option<Stop>,
}

/// One constrained run: the followers of the grammar, the gate, the budget, the sampler, the
/// text so far and the totals (see the module docs).
pub struct ConstrainedRun<'m> {
    model: &'m Model,
    engine: EngineKind,
    gate_setup: Option<GateSetup>,
    sampling: Sampling,
    recording: Recording,
    /// toolrail's recognizer and its state (every constrained engine, unless
    /// [`Following::OwnRunOnly`]); dropped when it refuses a token another engine took.
    track: Option<(Engine, State)>,
    /// llama.cpp's grammar sampler (the `llama` engine, or compared).
    llama: Option<LlamaGrammarSampler>,
    /// llguidance's matcher (the `llguidance` engine, or compared).
    guidance: Option<LlgMatcher>,
    /// Keeps the run able to finish its grammar within the token limit.
    guard: Option<BudgetGuard>,
    /// A lazy grammar's trigger gate.
    gate: Option<LazyGate>,
    /// llama-server's reasoning budget over thinking tags.
    thinking: Option<ReasoningBudget>,
    /// Whether the grammar is lazy (behind the gate).
    lazy_grammar: bool,
    /// Where each piece the dormant gate saw starts, in its text and in the output (they part
    /// when thinking is kept from it).
    gate_map: Vec<(usize, usize)>,
    rng: SplitMix64,
    /// The generated text (end-of-generation pieces excluded; cut before a stop string).
    output: Vec<u8>,
    /// The tokens taken (the repetition penalty looks at the last ones).
    generated: Vec<u32>,
    /// The index of the next token.
    index: u32,
    totals: Totals,
    /// The run's engine's mask at the last step, and how long it took.
    last_mask: Option<TokenMask>,
    last_mask_ms: Option<f64>,
}

impl std::fmt::Debug for ConstrainedRun<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConstrainedRun")
            .field("engine", &self.engine)
            .field("index", &self.index)
            .finish_non_exhaustive()
    }
}

/// The masks of one step, before the choice.
struct StepMasks {
    /// The mask the choice obeys (the engine's, or the reasoning budget's forced token).
    mask: Option<TokenMask>,
    /// How long the engine's mask took.
    mask_ms: f64,
    /// The other engines' masks, timed and compared with toolrail's.
    other_masks: Vec<OtherMask>,
    /// The engine's mask against toolrail's: None when not compared, Some(None) when equal.
    compared: Option<Option<MaskDifference>>,
    /// Whether the grammar constrains this step (a lazy one is awake and not kept out of
    /// thinking).
    awake: bool,
    /// Whether the grammar sees the token taken (decided before the budget takes it).
    sees: bool,
}

impl<'m> ConstrainedRun<'m> {
    /// Sets a run up: parses the grammar for its followers, sets up the engines, the gate, the
    /// reasoning budget and the guard, and feeds a non-lazy template grammar the generation
    /// prompt's prefill. `table` is the vocabulary the guard reads (the mask engine's);
    /// `llg` caches llguidance's view of the vocabulary across runs (built on first use).
    /// Returns the run and what a compared engine said when it refused the prefill.
    pub fn new(
        model: &'m Model,
        table: &Arc<TokenTable>,
        llg: &mut Option<Llguidance>,
        setup: StepSetup<'_>,
    ) -> Result<(ConstrainedRun<'m>, Vec<String>), LlmError> {
        let engine = setup.engine;
        // Without a grammar (a chat template that builds none), every engine runs free.
        let grammar_text = setup.grammar.filter(|_| engine.constrains());
        let parsed = match grammar_text {
            Some(text) => Some(Arc::new(Grammar::parse_with(
                text,
                "root",
                Some(model as &dyn TokenVocabulary),
            )?)),
            None => None,
        };
        let follows = |kind: EngineKind| {
            engine == kind || (engine.constrains() && setup.compare.contains(&kind))
        };
        // toolrail's recognizer follows the grammar for every constrained engine (unless only
        // its own runs are to be followed).
        let track_wanted = engine == EngineKind::Toolrail
            || (setup.following == Following::Always && engine.constrains());
        let track = parsed.as_ref().filter(|_| track_wanted).map(|grammar| {
            let engine = Engine::new(Arc::clone(grammar));
            let state = engine.initial();
            (engine, state)
        });
        let guard = track
            .as_ref()
            .filter(|_| setup.sampling.finish_in_budget)
            .map(|(engine, _)| BudgetGuard::new(engine.grammar(), Arc::clone(table)));
        // A lazy grammar sleeps behind llama.cpp's trigger gate; toolrail's recognizer follows
        // it only once a trigger fires (the `llama` engine's sampler has its own gate).
        let lazy = setup
            .gate
            .filter(|gate| gate.lazy && grammar_text.is_some());
        let gate = match lazy {
            Some(gate) => Some(
                LazyGate::new(&gate.patterns, &gate.tokens)
                    .map_err(|e| LlmError::Generation(e.to_string()))?,
            ),
            None => None,
        };
        let llama = match (follows(EngineKind::Llama), grammar_text, lazy) {
            (true, Some(text), Some(gate)) => Some(LlamaGrammarSampler::new_lazy(
                model,
                text,
                "root",
                &gate.patterns,
                &gate.tokens,
            )?),
            (true, Some(text), None) => Some(LlamaGrammarSampler::new(model, text, "root")?),
            _ => None,
        };
        let guidance = match (follows(EngineKind::Llguidance), &parsed) {
            (true, Some(_)) if setup.gate.is_some() => {
                return Err(LlmError::Generation(
                    "llguidance does not run chat-template grammars (with their lazy triggers) \
                     here yet: use the toolrail or llama engine for a template run"
                        .to_owned(),
                ));
            }
            (true, Some(grammar)) => {
                if llg.is_none() {
                    *llg = Some(
                        Llguidance::new(table)
                            .map_err(|e| LlmError::Generation(format!("llguidance: {e}")))?,
                    );
                }
                let factory = llg
                    .as_ref()
                    .ok_or_else(|| LlmError::Generation("llguidance: not set up".to_owned()))?;
                let matcher = match setup.schema {
                    Some(schema) => factory.schema_matcher(schema).map_err(|e| {
                        LlmError::Generation(format!(
                            "llguidance cannot take this JSON Schema: {e}"
                        ))
                    })?,
                    None => factory.gbnf_matcher(grammar).map_err(|e| {
                        LlmError::Generation(format!("llguidance cannot take this grammar: {e}"))
                    })?,
                };
                Some(matcher)
            }
            _ => None,
        };
        // llama-server's reasoning budget: it forces the end of a thinking block that runs over
        // budget, and keeps a lazy grammar (and its trigger search) out of the block.
        let thinking = setup
            .gate
            .and_then(|gate| gate.reasoning.as_ref())
            .and_then(|spec| spec.resolve(model))
            .map(|budget| ReasoningBudget::new(&budget, |token| model.piece(token)));
        let mut run = ConstrainedRun {
            model,
            engine,
            gate_setup: setup.gate.cloned(),
            sampling: setup.sampling.clone(),
            recording: setup.recording,
            track,
            llama,
            guidance,
            guard,
            gate,
            thinking,
            lazy_grammar: lazy.is_some(),
            gate_map: Vec::new(),
            rng: SplitMix64::new(setup.sampling.seed),
            output: Vec::new(),
            generated: Vec::new(),
            index: 0,
            totals: Totals::default(),
            last_mask: None,
            last_mask_ms: None,
        };
        let notices = run.prefill()?;
        Ok((run, notices))
    }

    /// A grammar that is not lazy starts after the generation prompt, as llama-server feeds it
    /// (the tokens are in the prompt already, not generated).
    fn prefill(&mut self) -> Result<Vec<String>, LlmError> {
        let prefill = self
            .gate_setup
            .as_ref()
            .filter(|gate| !gate.lazy)
            .map(|gate| gate.prefill.clone())
            .unwrap_or_default();
        let mut notices = Vec::new();
        for token in prefill {
            let piece = self.model.piece(token);
            if let Some((engine, state)) = &mut self.track {
                *state = engine.accept_token(*state, token, &piece).ok_or_else(|| {
                    LlmError::Generation(format!(
                        "the generation prompt's token {token} ({:?}) is not allowed by the template's grammar",
                        String::from_utf8_lossy(&piece)
                    ))
                })?;
            }
            let stopped = self.accept_in_other_engines(token, || {
                format!("the generation prompt's token {token}")
            })?;
            notices.extend(stopped.into_iter().map(|(_, reason)| reason));
        }
        Ok(notices)
    }

    /// Follows tokens already taken before this run (a branch's copy of its source run's
    /// tokens, already in the caller's context) as if they had been forced, without records.
    /// A constrained run refuses one its grammar does not allow; returns what a compared engine
    /// said when it refused one.
    pub fn follow_prefix(&mut self, prefix: &[u32]) -> Result<Vec<String>, LlmError> {
        let mut notices = Vec::new();
        for &token in prefix {
            let index = self.index;
            let piece = self.model.piece(token);
            let sees = self.grammar_sees();
            if let Some(thinking) = &mut self.thinking {
                thinking.accept(token, &piece);
            }
            let end = self.output.len() + piece.len();
            for (tok, bytes, at) in self.grammar_tokens(sees, token, &piece, end) {
                self.note_gate_position(at);
                let (feed, _) = gated(self.gate.as_mut(), tok, &bytes, at);
                if let Some((engine, state)) = &mut self.track {
                    match feed_all(engine, *state, &feed) {
                        Some(next) => *state = next,
                        None if self.engine == EngineKind::Toolrail => {
                            return Err(LlmError::Generation(format!(
                                "token {index} of the branch's prefix ({tok}, {:?}) is not allowed by the grammar",
                                String::from_utf8_lossy(&bytes)
                            )));
                        }
                        None => self.track = None,
                    }
                }
                let stopped = self.accept_in_other_engines(tok, || {
                    format!("token {index} of the branch's prefix ({tok})")
                })?;
                notices.extend(stopped.into_iter().map(|(_, reason)| reason));
            }
            self.output.extend_from_slice(&piece);
            self.generated.push(token);
            self.index += 1;
        }
        Ok(notices)
    }

    /// One step: from the model's `logits` for the next position, the masks, the choice (or
    /// the `forced` token, checked), the budget guard and the commit to every follower.
    /// `decode_ms` is how long the caller took to decode the previous token (it goes into the
    /// record and the totals). `masks` serves toolrail's masks (its cache is kept across
    /// steps).
    pub fn step(
        &mut self,
        masks: &mut MaskEngine,
        logits: &[f32],
        forced: Option<u32>,
        decode_ms: f64,
    ) -> Result<Step, LlmError> {
        let index = self.index;
        let masked = self.masks(masks)?;
        self.last_mask = masked.mask.clone();
        self.last_mask_ms = masked.mask.as_ref().map(|_| masked.mask_ms);
        if let Some(mask) = &masked.mask
            && mask.count() == 0
            && (masked.awake || self.track.is_none())
        {
            return Ok(Step::Ended(Stop::DeadEnd {
                offset: self.output.len() as u64,
                expected: match &self.track {
                    Some((engine, state)) => engine.expected(*state).describe(),
                    None => Vec::new(),
                },
            }));
        }
        let recent = &self.generated[self.generated.len().saturating_sub(PENALTY_WINDOW)..];
        let logits = penalized(logits, recent, self.sampling.repeat_penalty);
        let logits = logits.as_ref();
        let choice = self.choose(logits, masked.mask.as_ref());
        let mut budget_replaced = None;
        let mut budget = None;
        let token = match forced {
            Some(token) => {
                if let Some(reason) = refusal(self.model, masked.mask.as_ref(), token) {
                    return Ok(Step::Refused { token, reason });
                }
                token
            }
            None => match choice.token {
                Some(token) => match self.steer(&masked, logits, token) {
                    Some((instead, note)) => {
                        budget_replaced = Some(token);
                        budget = Some(note);
                        instead
                    }
                    None => token,
                },
                None => {
                    return Ok(Step::Ended(Stop::Error {
                        message: format!(
                            "token {index} (output byte {}): no token could be chosen: \
                             every candidate is masked or has no probability left after sampling",
                            self.output.len()
                        ),
                    }));
                }
            },
        };
        if self.model.is_eog(token) {
            self.totals.mask_ms += masked.mask_ms;
            return Ok(Step::EndOfGeneration { token });
        }
        let piece = self.model.piece(token);
        let thinking_note = self
            .thinking
            .as_mut()
            .and_then(|thinking| thinking.accept(token, &piece));
        let StepMasks {
            mask,
            mask_ms,
            mut other_masks,
            compared,
            sees,
            ..
        } = masked;
        let Committed {
            lazy_note,
            notices,
            refused,
        } = self.commit_to_followers(masks, index, token, &piece, sees, &mut other_masks)?;
        let full = matches!(self.recording, Recording::Full { .. });
        let record = TokenRecord {
            index,
            id: token,
            piece: String::from_utf8_lossy(&piece).into_owned(),
            piece_hex: std::str::from_utf8(&piece).is_err().then(|| hex(&piece)),
            forced: forced.is_some(),
            budget_replaced,
            budget,
            before: candidates(self.model, &choice.before, mask.as_ref()),
            after: candidates(self.model, &choice.after, mask.as_ref()),
            allowed: choice.allowed,
            stacks: self
                .track
                .as_ref()
                .filter(|_| full && self.gate.as_ref().is_none_or(|g| !g.awaiting()))
                .map(|(engine, state)| engine.snapshot(*state)),
            decode_ms,
            mask_ms,
            flag: refused.clone(),
            sampled: Vec::new(),
            disagreements: Vec::new(),
            mask_difference: compared.clone().flatten(),
            other_masks,
            lazy: lazy_note,
            thinking: thinking_note,
        };
        if let Some(difference) = &compared {
            self.totals.compared_steps += 1;
            self.totals.differing_steps += u32::from(difference.is_some());
        }
        self.totals.add_other_masks(&record.other_masks);
        self.totals.tokens += 1;
        self.totals.decode_ms += decode_ms;
        self.totals.mask_ms += mask_ms;
        let piece_start = self.output.len();
        self.output.extend_from_slice(&piece);
        self.generated.push(token);
        self.index += 1;
        let stops = self
            .gate_setup
            .as_ref()
            .map_or(&[][..], |gate| &gate.stops[..]);
        let stop = find_stop(&self.output, piece_start, stops).map(|(at, stop)| {
            let stop = Stop::StopString {
                stop: stop.to_owned(),
            };
            (at, stop)
        });
        let stop = stop.map(|(at, stop)| {
            self.output.truncate(at);
            stop
        });
        // The run's own engine refused the token it was given: the run ends on it, as llama.cpp's
        // does, with the token recorded and the output kept.
        let stop = match refused {
            Some(message) => Some(Stop::Error { message }),
            None => stop,
        };
        Ok(Step::Took(Took {
            record: Box::new(record),
            notices,
            stop,
        }))
    }

    /// The index of the next token (the branch prefix counted).
    pub fn index(&self) -> u32 {
        self.index
    }

    /// The engine.
    pub fn engine(&self) -> EngineKind {
        self.engine
    }

    /// The text generated so far.
    pub fn output(&self) -> &[u8] {
        &self.output
    }

    /// The text generated, taken out of the run.
    pub fn into_output(self) -> Vec<u8> {
        self.output
    }

    /// The totals so far (tokens per second is left to the caller, who knows the wall time).
    pub fn totals(&self) -> &Totals {
        &self.totals
    }

    /// The run's engine's mask at the last step (None without one, e.g. for `none`).
    pub fn last_mask(&self) -> Option<&TokenMask> {
        self.last_mask.as_ref()
    }

    /// How long the run's engine's mask took at the last step (None without one).
    pub fn last_mask_ms(&self) -> Option<f64> {
        self.last_mask_ms
    }

    /// Forgets the last step's mask (a run that ended at its token limit computed none).
    pub fn clear_last_mask(&mut self) {
        self.last_mask = None;
        self.last_mask_ms = None;
    }

    /// Turns the budget guard on or off for the next steps (see [`BudgetGuard`]); it needs
    /// toolrail's recognizer, so it does nothing for a run it does not follow.
    pub fn set_finish_in_budget(&mut self, on: bool, table: &Arc<TokenTable>) {
        self.sampling.finish_in_budget = on;
        self.guard = self
            .track
            .as_ref()
            .filter(|_| on)
            .map(|(engine, _)| BudgetGuard::new(engine.grammar(), Arc::clone(table)));
    }

    /// Sets llama.cpp's repetition penalty for the next steps (1.0: off).
    pub fn set_repeat_penalty(&mut self, penalty: f32) {
        self.sampling.repeat_penalty = penalty;
    }

    /// Whether the grammar sees the next token, behind llama-server's reasoning budget: a lazy
    /// grammar does not while thinking is counted or forced (llama.cpp's
    /// `grammar_should_apply`).
    fn grammar_sees(&self) -> bool {
        !self.lazy_grammar
            || self
                .thinking
                .as_ref()
                .is_none_or(ReasoningBudget::lets_lazy_grammar_see)
    }

    /// The step's masks: the engine's, toolrail's beside another engine's, the compared
    /// engines', and the reasoning budget's forced token over them.
    fn masks(&mut self, masks: &mut MaskEngine) -> Result<StepMasks, LlmError> {
        let sees = self.grammar_sees();
        let awake = sees && self.gate.as_ref().is_none_or(|g| !g.awaiting());
        let started = Instant::now();
        let mask = self.engine_mask(masks, sees, awake)?;
        let mask_ms = ms(started);
        let (other_masks, compared) = self.compared_masks(masks, mask.as_ref(), awake)?;
        // A spent reasoning budget allows only the next token of the forced end (and only if
        // the grammar, when it applies, allows it too).
        let mask = match self
            .thinking
            .as_ref()
            .and_then(ReasoningBudget::forced_token)
        {
            Some(only) => {
                let mut forced_mask = TokenMask::empty(self.model.n_vocab());
                if mask.as_ref().is_none_or(|m| m.contains(only)) {
                    forced_mask.insert(only);
                }
                Some(forced_mask)
            }
            None => mask,
        };
        Ok(StepMasks {
            mask,
            mask_ms,
            other_masks,
            compared,
            awake,
            sees,
        })
    }

    /// The run's own engine's mask (None: unconstrained, or the grammar sleeps).
    fn engine_mask(
        &mut self,
        masks: &mut MaskEngine,
        sees: bool,
        awake: bool,
    ) -> Result<Option<TokenMask>, LlmError> {
        let index = self.index;
        let at = self.output.len();
        Ok(match (self.engine, &mut self.track, &mut self.llama) {
            (EngineKind::Llama, _, Some(llama)) if sees => Some(llama.token_mask()?),
            (EngineKind::Llguidance, _, _) if awake => match &mut self.guidance {
                Some(guidance) => Some(guidance.mask().map_err(|e| {
                    LlmError::Generation(format!(
                        "token {index} (output byte {at}): llguidance: {e}"
                    ))
                })?),
                None => None,
            },
            (EngineKind::Toolrail, Some((engine, state)), _) if awake => {
                Some(masks.mask(engine, *state).map_err(|e| {
                    LlmError::Generation(format!("token {index} (output byte {at}): {e}"))
                })?)
            }
            _ => None,
        })
    }

    /// The other engines' masks beside the run's own, each timed: toolrail's (when the run's
    /// engine is another and its mask is compared, or other engines are), then the compared
    /// engines', each compared with toolrail's. Also the run's engine's `mask` against
    /// toolrail's, over the whole vocabulary: None when not compared, Some(None) when equal.
    fn compared_masks(
        &mut self,
        masks: &mut MaskEngine,
        mask: Option<&TokenMask>,
        awake: bool,
    ) -> Result<(Vec<OtherMask>, Option<Option<MaskDifference>>), LlmError> {
        let index = self.index;
        let at = self.output.len();
        let engine = self.engine;
        let mut other_masks: Vec<OtherMask> = Vec::new();
        let wants_ours = (engine != EngineKind::Toolrail && mask.is_some())
            || self.llama.is_some()
            || self.guidance.is_some();
        let computed_ours: Option<TokenMask> = match &mut self.track {
            Some((track, state)) if awake && engine != EngineKind::Toolrail && wants_ours => {
                let started = Instant::now();
                let ours = masks.mask(track, *state).map_err(|e| {
                    LlmError::Generation(format!(
                        "token {index} (output byte {at}): toolrail's mask for the comparison: {e}"
                    ))
                })?;
                other_masks.push(OtherMask {
                    engine: EngineKind::Toolrail,
                    mask_ms: ms(started),
                    difference: None,
                    stopped: None,
                });
                Some(ours)
            }
            _ => None,
        };
        let ours = if engine == EngineKind::Toolrail {
            mask.filter(|_| awake)
        } else {
            computed_ours.as_ref()
        };
        let compared = match (engine, mask, ours) {
            (EngineKind::Llama | EngineKind::Llguidance, Some(theirs), Some(ours)) => {
                Some(compare_masks(self.model, engine, theirs, ours))
            }
            _ => None,
        };
        if let Some(ours) = ours {
            if engine != EngineKind::Llama
                && let Some(llama) = &mut self.llama
            {
                let started = Instant::now();
                let theirs = llama.token_mask()?;
                other_masks.push(OtherMask {
                    engine: EngineKind::Llama,
                    mask_ms: ms(started),
                    difference: compare_masks(self.model, EngineKind::Llama, &theirs, ours),
                    stopped: None,
                });
            }
            if engine != EngineKind::Llguidance
                && let Some(guidance) = &mut self.guidance
            {
                let started = Instant::now();
                let theirs = guidance.mask().map_err(|e| {
                    LlmError::Generation(format!(
                        "token {index} (output byte {at}): llguidance (compared): {e}"
                    ))
                })?;
                other_masks.push(OtherMask {
                    engine: EngineKind::Llguidance,
                    mask_ms: ms(started),
                    difference: compare_masks(self.model, EngineKind::Llguidance, &theirs, ours),
                    stopped: None,
                });
            }
        }
        Ok((other_masks, compared))
    }

    /// The sampler's choice under `mask`.
    fn choose(&mut self, logits: &[f32], mask: Option<&TokenMask>) -> Choice {
        match self.recording {
            Recording::Full { show } => choose(logits, mask, &self.sampling, &mut self.rng, show),
            Recording::Lean if self.sampling.temperature <= 0.0 => Choice {
                token: argmax(logits, |id| mask.is_none_or(|m| m.contains(id))),
                before: Vec::new(),
                after: Vec::new(),
                allowed: mask.map_or(logits.len() as u32, |m| m.count() as u32),
            },
            Recording::Lean => {
                let mut choice = choose(logits, mask, &self.sampling, &mut self.rng, 1);
                choice.before.clear();
                choice.after.clear();
                choice
            }
        }
    }

    /// The budget guard's replacement for the chosen `token`, with the record's note, when the
    /// grammar could not finish in the tokens left after it.
    fn steer(
        &mut self,
        masked: &StepMasks,
        logits: &[f32],
        token: u32,
    ) -> Option<(u32, BudgetNote)> {
        let (Some(guard), Some((engine, state)), Some(mask)) =
            (&self.guard, &mut self.track, &masked.mask)
        else {
            return None;
        };
        if !masked.awake {
            return None;
        }
        let remaining = self.sampling.max_tokens.saturating_sub(self.index);
        let instead = guard.steer(engine, *state, mask, logits, token, remaining)?;
        let note = BudgetNote {
            replaced_piece: String::from_utf8_lossy(&self.model.piece(token)).into_owned(),
            tokens_left: instead.tokens_left,
            needed: instead.needed,
        };
        Some((instead.token, note))
    }

    /// Commits the token taken to every follower: the gate (and its trigger note), toolrail's
    /// recognizer, llama.cpp's sampler, llguidance. A compared engine that refuses stops
    /// following: its mask of this step says why, or the returned notices do. The run's own
    /// engine refusing is not an error here: it is returned, in words, as [`Committed::refused`]
    /// (the step records the token and ends the run on it).
    fn commit_to_followers(
        &mut self,
        masks: &mut MaskEngine,
        index: u32,
        token: u32,
        piece: &[u8],
        sees: bool,
        other_masks: &mut [OtherMask],
    ) -> Result<Committed, LlmError> {
        let end = self.output.len() + piece.len();
        let mut committed = Committed::default();
        for (tok, bytes, at) in self.grammar_tokens(sees, token, piece, end) {
            self.note_gate_position(at);
            let (feed, note) = gated(self.gate.as_mut(), tok, &bytes, at);
            if let Some(note) = note {
                committed.lazy_note = Some(describe_note(
                    note,
                    self.gate_setup.as_ref(),
                    &self.output,
                    piece,
                    &self.gate_map,
                ));
            }
            // toolrail's recognizer's words for a refusal, whichever engine runs (llama.cpp's
            // own error says little).
            let mut explained = None;
            if let Some((engine, state)) = &mut self.track {
                match feed_all(engine, *state, &feed) {
                    // A long run walks through ever new stack states: keep the memo bounded.
                    Some(next) => *state = masks.bound_memory(engine, next),
                    None => {
                        let fed_from = match &committed.lazy_note {
                            Some(LazyNote::Fired { grammar_start, .. }) => *grammar_start as usize,
                            _ => at,
                        };
                        explained = Some(refusal_in_words(
                            engine,
                            *state,
                            &feed,
                            index,
                            &String::from_utf8_lossy(piece),
                            fed_from,
                            committed.lazy_note.as_ref(),
                        ));
                        if self.engine == EngineKind::Toolrail {
                            committed.refused = explained;
                            return Ok(committed);
                        }
                        self.track = None;
                    }
                }
            }
            let place = || format!("token {index} (output byte {at})");
            match self.accept_in_other_engines(tok, place) {
                Ok(stopped) => {
                    for (engine, reason) in stopped {
                        match other_masks.iter_mut().find(|m| m.engine == engine) {
                            Some(m) => m.stopped = Some(reason),
                            None => committed.notices.push(reason),
                        }
                    }
                }
                Err(e) => {
                    committed.refused = Some(match explained {
                        Some(words) => format!("{words} ({}: {e})", self.engine.name()),
                        None => format!(
                            "{}: the run's engine refused token {tok} ({:?}): {e}",
                            place(),
                            String::from_utf8_lossy(&bytes)
                        ),
                    });
                    return Ok(committed);
                }
            }
        }
        Ok(committed)
    }

    /// Records where the dormant gate's text continues in the output.
    fn note_gate_position(&mut self, at: usize) {
        if let Some(gate) = self.gate.as_ref().filter(|g| g.awaiting()) {
            self.gate_map.push((gate.buffer().len(), at));
        }
    }

    /// The tokens the grammar takes for a token the run took (`sees`: whether it saw it,
    /// decided before the reasoning budget took the token): the token itself; nothing while a
    /// lazy grammar is kept out of thinking; or, on the token that closed such a block, the end
    /// tag, replayed (it may hold a trigger), as `common_sampler_accept` does. Each with its
    /// bytes and where they start in the output, `end` being the output's length after the
    /// token.
    fn grammar_tokens(
        &self,
        sees: bool,
        token: u32,
        piece: &[u8],
        end: usize,
    ) -> Vec<(u32, Vec<u8>, usize)> {
        if sees {
            return vec![(token, piece.to_vec(), end - piece.len())];
        }
        let Some(end_tag) = self.thinking.as_ref().and_then(ReasoningBudget::end_match) else {
            return Vec::new();
        };
        let pieces: Vec<(u32, Vec<u8>)> =
            end_tag.iter().map(|&t| (t, self.model.piece(t))).collect();
        let mut at = end.saturating_sub(pieces.iter().map(|(_, p)| p.len()).sum());
        pieces
            .into_iter()
            .map(|(t, p)| {
                let start = at;
                at += p.len();
                (t, p, start)
            })
            .collect()
    }

    /// Feeds a token the run took to the other engines following it (llama.cpp's grammar
    /// sampler, llguidance's matcher); `place` says where in the run. A refusal by the run's own
    /// engine is an error; a compared engine that refuses stops following: it is dropped, and
    /// returned with the reason in words.
    fn accept_in_other_engines(
        &mut self,
        token: u32,
        place: impl Fn() -> String,
    ) -> Result<Vec<(EngineKind, String)>, LlmError> {
        let mut stopped = Vec::new();
        if let Some(sampler) = &mut self.llama
            && let Err(e) = sampler.accept(token)
        {
            if self.engine == EngineKind::Llama {
                return Err(e);
            }
            stopped.push((
                EngineKind::Llama,
                format!(
                    "{}: llama.cpp (compared) refused token {token} and stops following the run: {e}",
                    place()
                ),
            ));
            self.llama = None;
        }
        if let Some(matcher) = &mut self.guidance
            && let Err(e) = matcher.consume(token)
        {
            if self.engine == EngineKind::Llguidance {
                return Err(LlmError::Generation(format!(
                    "{}: llguidance: {e}",
                    place()
                )));
            }
            stopped.push((
                EngineKind::Llguidance,
                format!(
                    "{}: llguidance (compared) refused token {token} and stops following the run: {e}",
                    place()
                ),
            ));
            self.guidance = None;
        }
        Ok(stopped)
    }
}

/// What committing one token to the run's followers found.
#[derive(Default)]
struct Committed {
    /// The lazy gate's note on the token.
    lazy_note: Option<LazyNote>,
    /// Compared engines that stopped following, in words (those without a mask this step).
    notices: Vec<String>,
    /// The run's own engine refused the token: why, in words (the run ends on it).
    refused: Option<String>,
}

/// Why toolrail's grammar refused what a token fed it, in words: which token, the trigger that
/// woke the grammar inside it (if one did), where the grammar started, the first byte it
/// refused and what it expected there. `fed_from` is the output byte the fed text starts at.
fn refusal_in_words(
    engine: &mut Engine,
    state: State,
    feed: &[(u32, Vec<u8>)],
    index: u32,
    piece: &str,
    fed_from: usize,
    lazy: Option<&LazyNote>,
) -> String {
    let fed: Vec<u8> = feed.iter().flat_map(|(_, b)| b.iter().copied()).collect();
    let (refused_at, at_state) = match engine.feed(state, &fed) {
        Ok(_) => (None, state),
        Err((offset, before)) => (Some(offset), before),
    };
    let woke = match lazy {
        Some(LazyNote::Fired {
            trigger,
            grammar_start,
            replayed,
            ..
        }) => format!(
            "the trigger {trigger} completed inside it, so the grammar started at output byte {grammar_start} with {replayed:?}; "
        ),
        _ => String::new(),
    };
    let what = match refused_at {
        Some(i) => {
            let rest = String::from_utf8_lossy(&fed[i..]);
            let shown = rest
                .chars()
                .next()
                .map_or_else(String::new, |c| format!("{c:?}"));
            let expected = engine.expected(at_state).describe();
            format!(
                "the grammar refused {shown} at output byte {} (it expected {})",
                fed_from + i,
                if expected.is_empty() {
                    "nothing more".to_owned()
                } else {
                    expected.join(", ")
                }
            )
        }
        None => "the grammar refused the token as a whole".to_owned(),
    };
    format!("token {index} ({piece:?}): {woke}{what}; the run stops on it, as llama.cpp's does")
}

/// What a token gives the grammar behind a lazy gate: nothing while it sleeps, the replay when
/// it wakes, the token's piece once awake (and always without a gate); with the gate's verdict
/// for the record (`None` once awake and without a gate).
fn gated(
    gate: Option<&mut LazyGate>,
    token: u32,
    piece: &[u8],
    output_len: usize,
) -> (Vec<(u32, Vec<u8>)>, Option<GateNote>) {
    let Some(gate) = gate else {
        return (vec![(token, piece.to_vec())], None);
    };
    let before = gate.scan_cost().0;
    let step = gate.accept(token, piece);
    let scan_ms = (gate.scan_cost().0 - before).as_secs_f64() * 1000.0;
    match step {
        GateStep::Waiting => (Vec::new(), Some(GateNote::Dormant { scan_ms })),
        GateStep::Active => (vec![(token, piece.to_vec())], None),
        GateStep::Fired(fire) => {
            let note = GateNote::Fired {
                by: fire.by.clone(),
                grammar_start: fire.grammar_start,
                scan_ms,
                output_len,
            };
            (fire.replay, Some(note))
        }
    }
}

/// The gate's verdict on one token, before it is put in words.
enum GateNote {
    Dormant {
        scan_ms: f64,
    },
    Fired {
        by: FiredBy,
        grammar_start: usize,
        scan_ms: f64,
        /// The output's length before this token (a trigger token's grammar starts there).
        output_len: usize,
    },
}

/// The record's note for a gate verdict: `output` is the text before this token's `piece`;
/// `gate_map` translates the gate's text offsets into the output's.
fn describe_note(
    note: GateNote,
    setup: Option<&GateSetup>,
    output: &[u8],
    piece: &[u8],
    gate_map: &[(usize, usize)],
) -> LazyNote {
    let to_output = |at: usize| {
        gate_map
            .iter()
            .rev()
            .find(|(gate_at, _)| *gate_at <= at)
            .map_or(at, |(gate_at, output_at)| output_at + (at - gate_at))
    };
    match note {
        GateNote::Dormant { scan_ms } => LazyNote::Dormant { scan_ms },
        GateNote::Fired {
            by,
            grammar_start,
            scan_ms,
            output_len,
        } => {
            let (matched, start) = match &by {
                FiredBy::Token(_) => (None, output_len),
                FiredBy::Pattern { matched, .. } => (
                    Some((
                        to_output(matched.start) as u64,
                        to_output(matched.end) as u64,
                    )),
                    to_output(grammar_start),
                ),
            };
            let replayed = match output.get(start..) {
                Some(before) => [before, piece].concat(),
                None => piece
                    .get(start - output.len()..)
                    .unwrap_or_default()
                    .to_vec(),
            };
            LazyNote::Fired {
                trigger: setup.map_or_else(String::new, |s| s.describe(&by)),
                matched,
                grammar_start: start as u64,
                replayed: String::from_utf8_lossy(&replayed).into_owned(),
                scan_ms,
            }
        }
    }
}

/// Feeds the pieces to the grammar in order; `None` when one is not accepted.
fn feed_all(engine: &mut Engine, mut state: State, feed: &[(u32, Vec<u8>)]) -> Option<State> {
    for (token, bytes) in feed {
        state = engine.accept_token(state, *token, bytes)?;
    }
    Some(state)
}

/// Where `theirs` (the mask of `engine`) and toolrail's mask `ours` differ, token by token
/// (None when they agree).
pub fn compare_masks(
    model: &Model,
    engine: EngineKind,
    theirs: &TokenMask,
    ours: &TokenMask,
) -> Option<MaskDifference> {
    if theirs == ours {
        return None;
    }
    let mut difference = MaskDifference {
        engine,
        only_engine: 0,
        only_toolrail: 0,
        tokens: Vec::new(),
    };
    for (a, b, engine_allows) in [(theirs, ours, true), (ours, theirs, false)] {
        for id in a.iter().filter(|&id| !b.contains(id)) {
            let listed = if engine_allows {
                difference.only_engine += 1;
                difference.only_engine
            } else {
                difference.only_toolrail += 1;
                difference.only_toolrail
            };
            if listed as usize <= MaskDifference::LISTED {
                let piece = model.piece(id);
                difference.tokens.push(DifferingToken {
                    id,
                    piece: String::from_utf8_lossy(&piece).into_owned(),
                    piece_hex: std::str::from_utf8(&piece).is_err().then(|| hex(&piece)),
                    engine_allows,
                });
            }
        }
    }
    Some(difference)
}

/// Why a forced token cannot be taken, if it cannot.
fn refusal(model: &Model, mask: Option<&TokenMask>, token: u32) -> Option<String> {
    if !model.contains(token) {
        return Some(format!(
            "token {token} is not in the vocabulary ({} tokens)",
            model.n_vocab()
        ));
    }
    match mask {
        Some(mask) if !mask.contains(token) => Some(if model.is_eog(token) {
            "end of generation is not allowed: the grammar is not complete".into()
        } else {
            format!(
                "the grammar does not allow {:?} here",
                String::from_utf8_lossy(&model.piece(token))
            )
        }),
        _ => None,
    }
}

fn candidates(model: &Model, scored: &[Scored], mask: Option<&TokenMask>) -> Vec<Candidate> {
    scored
        .iter()
        .map(|s| Candidate {
            id: s.id,
            piece: String::from_utf8_lossy(&model.piece(s.id)).into_owned(),
            probability: s.probability,
            masked: mask.is_some_and(|m| !m.contains(s.id)),
        })
        .collect()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn ms(since: Instant) -> f64 {
    since.elapsed().as_secs_f64() * 1000.0
}
