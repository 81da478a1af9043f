//! The generation worker: one thread that owns the model, runs constrained generation token by
//! token, and talks over bounded channels — commands in, events out. The UI and the CLI drive it
//! the same way; the worker calls `notify` after each event so a UI can repaint.
//!
//! Engines: `toolrail` (toolrail's masks), `llama` (llama.cpp's own grammar sampler, made safe),
//! `llguidance` (llguidance on the same grammar written as Lark, or on the JSON Schema itself
//! when the request carries one), `none` (unconstrained). Whatever the engine, toolrail's
//! recognizer follows the grammar so that every token carries the stacks after it and a dead
//! end can say what was expected. Under `llama` and `llguidance`, toolrail's mask is also
//! computed at every step (after the engine's, timed apart) and compared over the whole
//! vocabulary; a step where they differ carries a [`MaskDifference`] naming the tokens. A run
//! can also compare with the other engines ([`RunRequest::compare`]): each computes its mask
//! at every step beside the run's own, timed, and compared with toolrail's
//! ([`TokenRecord::other_masks`]), so one run shows all three engines' times.

use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender, TryRecvError, bounded};

use super::sampling::{Scored, choose, penalized};
use super::{LlamaGrammarSampler, LlmError, Model, Session, SessionOptions};
use crate::lazy_gate::{FiredBy, GateSetup, GateStep, LazyGate, find_stop};
use crate::llguidance::{LlgMatcher, Llguidance};
use crate::reasoning_budget::ReasoningBudget;
use crate::record::{
    BudgetNote, Candidate, DifferingToken, LazyNote, MaskDifference, OtherMask, PENALTY_WINDOW,
    Sampling, Stop, TokenRecord, Totals,
};
use toolrail_engine::sample::SplitMix64;
use toolrail_engine::{BudgetGuard, Engine, MaskEngine, State, TokenMask};
use toolrail_gbnf::{Grammar, TokenVocabulary};

/// Which engine masks the tokens.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EngineKind {
    /// toolrail's own masks (token trie + memoized recognizer).
    Toolrail,
    /// llama.cpp's grammar sampler over the whole vocabulary.
    Llama,
    /// llguidance over the whole vocabulary, on the same grammar (or the request's JSON Schema).
    Llguidance,
    /// No grammar: the model's own choice.
    None,
}

impl std::fmt::Display for EngineKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl EngineKind {
    /// The engine's name as written in transcripts and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            EngineKind::Toolrail => "toolrail",
            EngineKind::Llama => "llama",
            EngineKind::Llguidance => "llguidance",
            EngineKind::None => "none",
        }
    }
}

/// Which run a request or an event belongs to (chosen by whoever sends the request).
pub type RunId = u64;

/// One generation run.
#[derive(Clone, Debug)]
pub struct RunRequest {
    /// The run's id: every event of this run carries it.
    pub id: RunId,
    /// The whole prompt (after the chat template or prompt builder), tokenized with special tokens.
    pub prompt: String,
    /// The GBNF grammar (ignored by the `none` engine, which runs unconstrained).
    pub grammar: Option<String>,
    /// The JSON Schema `grammar` was converted from, when the source is a schema: the
    /// `llguidance` engine compiles it with its own JSON Schema compiler instead of reading
    /// the GBNF (other engines ignore it).
    pub schema: Option<serde_json::Value>,
    /// The engine.
    pub engine: EngineKind,
    /// Other engines (`llama`, `llguidance`) whose masks are computed beside the engine's own
    /// at every step while toolrail's recognizer follows the run, timed and compared with
    /// toolrail's mask. The run's own engine, `toolrail` and `none` here change nothing. A
    /// compared engine that refuses a token the run takes stops following (the step says
    /// why) without ending the run.
    pub compare: Vec<EngineKind>,
    /// Sampling parameters.
    pub sampling: Sampling,
    /// Start paused: nothing is generated until `Step` or `Continue`.
    pub start_paused: bool,
    /// How many candidates to record before and after the mask.
    pub show: usize,
    /// Context size (None: the model's default).
    pub context: Option<u32>,
    /// Decoding threads (None: the model spec's, else the number of cores).
    pub threads: Option<u32>,
    /// Tokens taken before generation begins, as if forced, without events (a branch's copy of
    /// the tokens its source run took before the branch point). They must be allowed by the
    /// grammar; a constrained engine ends the run with an error on one that is not.
    pub prefix: Vec<u32>,
    /// Reuse the previous run's context for what it holds of the prompt and `prefix` (only the
    /// tokens after the common part are decoded). Off, the run decodes its prompt in a fresh
    /// context, so that a run's numbers never depend on the run before it.
    pub reuse_cache: bool,
    /// A chat template's gating of the grammar (lazy triggers, prefill, stop strings), as
    /// llama-server runs a `tools` request; `None` for a plain grammar, which constrains from
    /// the first token.
    pub gate: Option<GateSetup>,
}

/// What the worker is told.
#[derive(Clone, Debug)]
pub enum Command {
    /// Start a run (the model must be loaded).
    Start(Box<RunRequest>),
    /// Generate one token, then pause.
    Step,
    /// Generate until done.
    Continue,
    /// Pause after the current token.
    Pause,
    /// Take this token now, as one step, instead of the sampled one (it must be allowed; if it
    /// is not, a `Refused` event says why and the run pauses where it was).
    Force(u32),
    /// Stop the run (honoured before the next token).
    Cancel,
    /// End the worker thread.
    Shutdown,
}

/// What the worker reports.
#[derive(Clone, Debug)]
pub enum Event {
    /// A run started: the prompt is decoded.
    Started {
        /// Prompt length in tokens.
        prompt_tokens: usize,
        /// Milliseconds to decode the prompt (and a branch's prefix).
        prompt_ms: f64,
        /// Tokens of the prompt and prefix found in the previous run's context and not decoded
        /// again (0 unless [`RunRequest::reuse_cache`]).
        reused: usize,
    },
    /// One token was generated.
    Token(Box<TokenRecord>),
    /// The run is paused before token `next_index`.
    Paused {
        /// Index of the next token.
        next_index: u32,
    },
    /// A forced token was refused, with the reason; the run stays where it was.
    Refused {
        /// The token.
        token: u32,
        /// Why.
        reason: String,
    },
    /// The run ended.
    Done {
        /// Why.
        stop: Stop,
        /// Totals.
        totals: Totals,
        /// The generated text (lossy UTF-8).
        output: String,
    },
    /// A command for this run could not be carried out (e.g. a second start while it runs).
    Error(String),
    /// A token already reported, completed after the stream (a server run's candidates after
    /// its sampling chain, and where its grammar disagrees with toolrail's); replaces the
    /// record with the same index. Sent before `Done`.
    Amended(Box<TokenRecord>),
    /// The tool calls a llama-server parsed from its output (`tools` requests): each
    /// `{"name": …, "arguments": "<JSON text as the server sent it>"}`. Sent before `Done`.
    ServerCalls(Vec<serde_json::Value>),
}

/// An event and the run it belongs to.
#[derive(Clone, Debug)]
pub struct RunEvent {
    /// The run ([`RunRequest::id`]).
    pub run: RunId,
    /// What happened.
    pub event: Event,
}

/// The channels and the thread of a generation thread, in-process or on a server: commands in,
/// run-tagged events out. Dropping it cancels the run, stops the thread and waits for it.
pub(crate) struct Handle {
    commands: Sender<Command>,
    events: Receiver<RunEvent>,
    thread: Option<JoinHandle<()>>,
}

impl Handle {
    /// Runs `body` on a thread called `name`, with the receiving end of the commands and the
    /// sending end of the events.
    pub(crate) fn spawn(
        name: &str,
        body: impl FnOnce(Receiver<Command>, Sender<RunEvent>) + Send + 'static,
    ) -> Handle {
        let (commands, command_rx) = bounded::<Command>(64);
        let (event_tx, events) = bounded::<RunEvent>(4096);
        let thread = std::thread::Builder::new()
            .name(name.into())
            .spawn(move || body(command_rx, event_tx))
            .ok();
        Handle {
            commands,
            events,
            thread,
        }
    }

    /// Sends a command (blocks only if 64 commands are already queued).
    pub(crate) fn send(&self, command: Command) -> bool {
        self.commands.send(command).is_ok()
    }

    /// The event stream.
    pub(crate) fn events(&self) -> &Receiver<RunEvent> {
        &self.events
    }
}

impl Drop for Handle {
    fn drop(&mut self) {
        let _ = self.commands.try_send(Command::Cancel);
        let _ = self.commands.try_send(Command::Shutdown);
        // Unblock a thread waiting to send an event.
        while self.events.try_recv().is_ok() {}
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// A handle on the worker thread.
pub struct Worker {
    handle: Handle,
}

impl std::fmt::Debug for Worker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Worker").finish_non_exhaustive()
    }
}

/// Called after every event (e.g. `ctx.request_repaint()`).
pub type Notify = Arc<dyn Fn() + Send + Sync>;

impl Worker {
    /// Starts the worker thread, which owns `model` from now on.
    pub fn spawn(model: Model, notify: Notify) -> Worker {
        let handle = Handle::spawn("toolrail-generation", move |commands, events| {
            let state = WorkerState {
                commands,
                events,
                notify,
            };
            let masks = MaskEngine::new(model.shared_token_table());
            state.serve(&model, masks);
        });
        Worker { handle }
    }

    /// Sends a command (blocks only if 64 commands are already queued).
    pub fn send(&self, command: Command) -> bool {
        self.handle.send(command)
    }

    /// The event stream.
    pub fn events(&self) -> &Receiver<RunEvent> {
        self.handle.events()
    }
}

struct WorkerState {
    commands: Receiver<Command>,
    events: Sender<RunEvent>,
    notify: Notify,
}

/// What the run loop should do next.
enum Flow {
    Go {
        forced: Option<u32>,
        pause_after: bool,
    },
    Stop(Stop),
    Shutdown,
}

impl WorkerState {
    fn emit(&self, run: RunId, event: Event) {
        let _ = self.events.send(RunEvent { run, event });
        (self.notify)();
    }

    fn serve(&self, model: &Model, mut masks: MaskEngine) {
        // The last run's context, for a branch to reuse.
        let mut kept: Option<KeptSession<'_>> = None;
        // llguidance's view of the vocabulary, built by the first llguidance run.
        let mut llg: Option<Llguidance> = None;
        while let Ok(command) = self.commands.recv() {
            match command {
                Command::Shutdown => return,
                Command::Start(request) => {
                    if self.run(model, &mut masks, &mut llg, &mut kept, &request) {
                        return;
                    }
                }
                Command::Step
                | Command::Continue
                | Command::Pause
                | Command::Force(_)
                | Command::Cancel => {}
            }
        }
    }

    /// Runs one request; returns true if the worker must shut down.
    fn run<'m>(
        &self,
        model: &'m Model,
        masks: &mut MaskEngine,
        llg: &mut Option<Llguidance>,
        kept: &mut Option<KeptSession<'m>>,
        request: &RunRequest,
    ) -> bool {
        masks.clear_cache();
        let mut shutdown = false;
        let (stop, totals, output) =
            match self.generate(model, masks, llg, kept, request, &mut shutdown) {
                Ok(done) => done,
                Err(e) => (
                    Stop::Error {
                        message: e.to_string(),
                    },
                    Totals::default(),
                    Vec::new(),
                ),
            };
        self.emit(
            request.id,
            Event::Done {
                stop,
                totals,
                output: String::from_utf8_lossy(&output).into_owned(),
            },
        );
        shutdown
    }

    /// Waits for or polls commands before a token; the time spent waiting while paused is
    /// added to `waited` (it is not generation time: tokens/s leaves it out).
    fn next_flow(&self, run: RunId, paused: &mut bool, index: u32, waited: &mut Duration) -> Flow {
        let forced = None;
        loop {
            let command = if *paused {
                self.emit(run, Event::Paused { next_index: index });
                let wait_started = Instant::now();
                let received = self.commands.recv();
                *waited += wait_started.elapsed();
                match received {
                    Ok(c) => c,
                    Err(_) => return Flow::Shutdown,
                }
            } else {
                match self.commands.try_recv() {
                    Ok(c) => c,
                    Err(TryRecvError::Empty) => {
                        return Flow::Go {
                            forced,
                            pause_after: *paused,
                        };
                    }
                    Err(TryRecvError::Disconnected) => return Flow::Shutdown,
                }
            };
            match command {
                Command::Cancel => return Flow::Stop(Stop::Cancelled),
                Command::Shutdown => return Flow::Shutdown,
                Command::Pause => *paused = true,
                Command::Continue => {
                    *paused = false;
                    return Flow::Go {
                        forced,
                        pause_after: false,
                    };
                }
                Command::Step => {
                    return Flow::Go {
                        forced,
                        pause_after: true,
                    };
                }
                Command::Force(token) => {
                    return Flow::Go {
                        forced: Some(token),
                        pause_after: *paused,
                    };
                }
                Command::Start(other) => self.emit(
                    other.id,
                    Event::Error("a run is in progress: cancel it first".into()),
                ),
            }
        }
    }

    fn generate<'m>(
        &self,
        model: &'m Model,
        masks: &mut MaskEngine,
        llg: &mut Option<Llguidance>,
        kept: &mut Option<KeptSession<'m>>,
        request: &RunRequest,
        shutdown: &mut bool,
    ) -> Result<(Stop, Totals, Vec<u8>), LlmError> {
        let grammar_text = request
            .grammar
            .as_deref()
            .filter(|_| request.engine != EngineKind::None);
        // toolrail's recognizer follows the grammar for every constrained engine.
        let mut track: Option<(Engine, State)> = match grammar_text {
            Some(text) => {
                let grammar =
                    Grammar::parse_with(text, "root", Some(model as &dyn TokenVocabulary))?;
                let engine = Engine::new(Arc::new(grammar));
                let state = engine.initial();
                Some((engine, state))
            }
            None => None,
        };
        // Keeps the run able to finish its grammar within max_tokens.
        let guard = track
            .as_ref()
            .filter(|_| request.sampling.finish_in_budget)
            .map(|(engine, _)| BudgetGuard::new(engine.grammar(), masks.table().clone()));
        // A lazy grammar sleeps behind llama.cpp's trigger gate; toolrail's recognizer follows
        // it only once a trigger fires (the `llama` engine's sampler has its own gate).
        let lazy = request
            .gate
            .as_ref()
            .filter(|setup| setup.lazy && grammar_text.is_some());
        let mut gate = match lazy {
            Some(setup) => Some(
                LazyGate::new(&setup.patterns, &setup.tokens)
                    .map_err(|e| LlmError::Generation(e.to_string()))?,
            ),
            None => None,
        };
        // Whether an engine follows the run: as its engine, or compared with toolrail's.
        let follows = |kind: EngineKind| {
            request.engine == kind
                || (request.engine != EngineKind::None && request.compare.contains(&kind))
        };
        let mut llama = match (follows(EngineKind::Llama), grammar_text, lazy) {
            (true, Some(text), Some(setup)) => Some(LlamaGrammarSampler::new_lazy(
                model,
                text,
                "root",
                &setup.patterns,
                &setup.tokens,
            )?),
            (true, Some(text), None) => Some(LlamaGrammarSampler::new(model, text, "root")?),
            _ => None,
        };
        let mut guidance: Option<LlgMatcher> = match (follows(EngineKind::Llguidance), &track) {
            (true, Some(_)) if request.gate.is_some() => {
                return Err(LlmError::Generation(
                    "llguidance does not run chat-template grammars (with their lazy triggers) \
                     here yet: use the toolrail or llama engine for a template run"
                        .to_owned(),
                ));
            }
            (true, Some((engine, _))) => {
                if llg.is_none() {
                    *llg = Some(
                        Llguidance::new(masks.table())
                            .map_err(|e| LlmError::Generation(format!("llguidance: {e}")))?,
                    );
                }
                let factory = llg
                    .as_ref()
                    .ok_or_else(|| LlmError::Generation("llguidance: not set up".to_owned()))?;
                let matcher = match &request.schema {
                    Some(schema) => factory.schema_matcher(schema).map_err(|e| {
                        LlmError::Generation(format!(
                            "llguidance cannot take this JSON Schema: {e}"
                        ))
                    })?,
                    None => factory.gbnf_matcher(engine.grammar()).map_err(|e| {
                        LlmError::Generation(format!("llguidance cannot take this grammar: {e}"))
                    })?,
                };
                Some(matcher)
            }
            _ => None,
        };
        // llama-server's reasoning budget: it forces the end of a thinking block that runs over
        // budget, and keeps a lazy grammar (and its trigger search) out of the block.
        let mut thinking = request
            .gate
            .as_ref()
            .and_then(|setup| setup.reasoning.as_ref())
            .and_then(|spec| spec.resolve(model))
            .map(|setup| ReasoningBudget::new(&setup, |token| model.piece(token)));
        let lazy_grammar = lazy.is_some();
        // Where each piece the dormant gate saw starts, in its text and in the output (they part
        // when thinking is kept from it).
        let mut gate_map: Vec<(usize, usize)> = Vec::new();
        // A grammar that is not lazy starts after the generation prompt, as llama-server feeds
        // it (the tokens are in the prompt already, not generated).
        let prefill = request
            .gate
            .as_ref()
            .filter(|setup| !setup.lazy)
            .map_or(&[][..], |setup| &setup.prefill[..]);
        for &token in prefill {
            let piece = model.piece(token);
            if let Some((engine, state)) = &mut track {
                *state = engine.accept_token(*state, token, &piece).ok_or_else(|| {
                    LlmError::Generation(format!(
                        "the generation prompt's token {token} ({:?}) is not allowed by the template's grammar",
                        String::from_utf8_lossy(&piece)
                    ))
                })?;
            }
            for (_, reason) in
                accept_in_other_engines(request.engine, &mut llama, &mut guidance, token, || {
                    format!("the generation prompt's token {token}")
                })?
            {
                self.emit(request.id, Event::Error(reason));
            }
        }
        let stops = request
            .gate
            .as_ref()
            .map_or(&[][..], |setup| &setup.stops[..]);
        let options = SessionOptions {
            context: request.context,
            threads: request.threads,
        };
        // The previous run's context serves only a run that asks for it, with the same options;
        // otherwise it is dropped before a fresh one is made.
        if !(request.reuse_cache && kept.as_ref().is_some_and(|k| k.options == options)) {
            *kept = None;
        }
        let mut session = match kept.take() {
            Some(k) => k.session,
            None => model.session(options)?,
        };
        let prompt = model.tokenize(&request.prompt, true, true);
        let mut wanted = prompt.clone();
        wanted.extend_from_slice(&request.prefix);
        let started = Instant::now();
        let reused = session.keep_prefix(&wanted);
        session.decode(&wanted[reused..])?;
        let mut decode_ms = ms(started);
        self.emit(
            request.id,
            Event::Started {
                prompt_tokens: prompt.len(),
                prompt_ms: decode_ms,
                reused,
            },
        );

        let run_started = Instant::now();
        let mut rng = SplitMix64::new(request.sampling.seed);
        let mut totals = Totals::default();
        let mut output: Vec<u8> = Vec::new();
        // The tokens taken so far (the repetition penalty looks at the last ones).
        let mut generated: Vec<u32> = Vec::new();
        let mut paused = request.start_paused;
        // Time spent paused, waiting for Step or Continue (left out of tokens/s).
        let mut waited = Duration::ZERO;
        let mut index: u32 = 0;
        // The prefix: already decoded above; the grammar follows it as if it had been forced.
        for &token in &request.prefix {
            let piece = model.piece(token);
            let sees = grammar_sees(thinking.as_ref(), lazy_grammar);
            if let Some(thinking) = &mut thinking {
                thinking.accept(token, &piece);
            }
            let end = output.len() + piece.len();
            for (tok, bytes, at) in
                grammar_tokens(model, sees, thinking.as_ref(), token, &piece, end)
            {
                if let Some(gate) = gate.as_ref().filter(|g| g.awaiting()) {
                    gate_map.push((gate.buffer().len(), at));
                }
                let (feed, _) = gated(gate.as_mut(), tok, &bytes, at);
                if let Some((engine, state)) = &mut track {
                    match feed_all(engine, *state, &feed) {
                        Some(next) => *state = next,
                        None if request.engine == EngineKind::Toolrail => {
                            return Err(LlmError::Generation(format!(
                                "token {index} of the branch's prefix ({tok}, {:?}) is not allowed by the grammar",
                                String::from_utf8_lossy(&bytes)
                            )));
                        }
                        None => track = None,
                    }
                }
                for (_, reason) in
                    accept_in_other_engines(request.engine, &mut llama, &mut guidance, tok, || {
                        format!("token {index} of the branch's prefix ({tok})")
                    })?
                {
                    self.emit(request.id, Event::Error(reason));
                }
            }
            output.extend_from_slice(&piece);
            generated.push(token);
            index += 1;
        }
        let stop = loop {
            if index >= request.sampling.max_tokens {
                break Stop::MaxTokens;
            }
            let (forced, pause_after) =
                match self.next_flow(request.id, &mut paused, index, &mut waited) {
                    Flow::Go {
                        forced,
                        pause_after,
                    } => (forced, pause_after),
                    Flow::Stop(stop) => break stop,
                    Flow::Shutdown => {
                        *shutdown = true;
                        break Stop::Cancelled;
                    }
                };
            // The grammar constrains unless a lazy one still sleeps, or is kept out of thinking.
            let sees = grammar_sees(thinking.as_ref(), lazy_grammar);
            let awake = sees && gate.as_ref().is_none_or(|g| !g.awaiting());
            // The mask.
            let mask_started = Instant::now();
            let mask: Option<TokenMask> = match (request.engine, &mut track, &mut llama) {
                (EngineKind::Llama, _, Some(llama)) if sees => Some(llama.token_mask()?),
                (EngineKind::Llguidance, _, _) if awake => match &mut guidance {
                    Some(guidance) => Some(guidance.mask().map_err(|e| {
                        LlmError::Generation(format!(
                            "token {index} (output byte {}): llguidance: {e}",
                            output.len()
                        ))
                    })?),
                    None => None,
                },
                (EngineKind::Toolrail, Some((engine, state)), _) if awake => {
                    Some(masks.mask(engine, *state).map_err(|e| {
                        LlmError::Generation(format!(
                            "token {index} (output byte {}): {e}",
                            output.len()
                        ))
                    })?)
                }
                _ => None,
            };
            let mask_ms = ms(mask_started);
            // The other engines' masks beside the run's own, each timed: toolrail's (when the
            // run's engine is another and its mask is compared, or other engines are), then the
            // compared engines'.
            let mut other_masks: Vec<OtherMask> = Vec::new();
            let wants_ours = (request.engine != EngineKind::Toolrail && mask.is_some())
                || llama.is_some()
                || guidance.is_some();
            let computed_ours: Option<TokenMask> = match &mut track {
                Some((engine, state))
                    if awake && request.engine != EngineKind::Toolrail && wants_ours =>
                {
                    let started = Instant::now();
                    let ours = masks.mask(engine, *state).map_err(|e| {
                        LlmError::Generation(format!(
                            "token {index} (output byte {}): toolrail's mask for the comparison: {e}",
                            output.len()
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
            let ours = if request.engine == EngineKind::Toolrail {
                mask.as_ref().filter(|_| awake)
            } else {
                computed_ours.as_ref()
            };
            // The run's engine's mask against toolrail's, over the whole vocabulary: None when
            // not compared, Some(None) when they agree. Counted in the totals with the step's
            // record (a step that ends the run has none).
            let compared = match (request.engine, &mask, ours) {
                (EngineKind::Llama | EngineKind::Llguidance, Some(theirs), Some(ours)) => {
                    Some(compare_masks(model, request.engine, theirs, ours))
                }
                _ => None,
            };
            if let Some(ours) = ours {
                if request.engine != EngineKind::Llama
                    && let Some(llama) = &mut llama
                {
                    let started = Instant::now();
                    let theirs = llama.token_mask()?;
                    other_masks.push(OtherMask {
                        engine: EngineKind::Llama,
                        mask_ms: ms(started),
                        difference: compare_masks(model, EngineKind::Llama, &theirs, ours),
                        stopped: None,
                    });
                }
                if request.engine != EngineKind::Llguidance
                    && let Some(guidance) = &mut guidance
                {
                    let started = Instant::now();
                    let theirs = guidance.mask().map_err(|e| {
                        LlmError::Generation(format!(
                            "token {index} (output byte {}): llguidance (compared): {e}",
                            output.len()
                        ))
                    })?;
                    other_masks.push(OtherMask {
                        engine: EngineKind::Llguidance,
                        mask_ms: ms(started),
                        difference: compare_masks(model, EngineKind::Llguidance, &theirs, ours),
                        stopped: None,
                    });
                }
            }
            // A spent reasoning budget allows only the next token of the forced end (and only if
            // the grammar, when it applies, allows it too).
            let mask = match thinking.as_ref().and_then(ReasoningBudget::forced_token) {
                Some(only) => {
                    let mut forced_mask = TokenMask::empty(model.n_vocab());
                    if mask.as_ref().is_none_or(|m| m.contains(only)) {
                        forced_mask.insert(only);
                    }
                    Some(forced_mask)
                }
                None => mask,
            };
            if let (Some(mask), Some((engine, state)), true) = (&mask, &track, awake)
                && mask.count() == 0
            {
                break Stop::DeadEnd {
                    offset: output.len() as u64,
                    expected: engine.expected(*state).describe(),
                };
            }
            let recent = &generated[generated.len().saturating_sub(PENALTY_WINDOW)..];
            let logits = penalized(session.logits()?, recent, request.sampling.repeat_penalty);
            let logits = logits.as_ref();
            let choice = choose(
                logits,
                mask.as_ref(),
                &request.sampling,
                &mut rng,
                request.show,
            );
            let mut budget_replaced = None;
            let mut budget = None;
            let token = match forced {
                Some(token) => {
                    if let Some(reason) = refusal(model, mask.as_ref(), token) {
                        self.emit(request.id, Event::Refused { token, reason });
                        paused = true;
                        continue;
                    }
                    token
                }
                None => match choice.token {
                    Some(token) => match (&guard, &mut track, &mask) {
                        (Some(guard), Some((engine, state)), Some(mask)) if awake => {
                            let remaining = request.sampling.max_tokens - index;
                            match guard.steer(engine, *state, mask, logits, token, remaining) {
                                Some(instead) => {
                                    budget_replaced = Some(token);
                                    budget = Some(BudgetNote {
                                        replaced_piece: String::from_utf8_lossy(
                                            &model.piece(token),
                                        )
                                        .into_owned(),
                                        tokens_left: instead.tokens_left,
                                        needed: instead.needed,
                                    });
                                    instead.token
                                }
                                None => token,
                            }
                        }
                        _ => token,
                    },
                    None => {
                        break Stop::Error {
                            message: format!(
                                "token {index} (output byte {}): no token could be chosen: \
                                 every candidate is masked or has no probability left after sampling",
                                output.len()
                            ),
                        };
                    }
                },
            };
            if model.is_eog(token) {
                totals.mask_ms += mask_ms;
                break Stop::EndOfGeneration;
            }
            let piece = model.piece(token);
            let thinking_note = thinking
                .as_mut()
                .and_then(|thinking| thinking.accept(token, &piece));
            let end = output.len() + piece.len();
            let mut lazy_note = None;
            for (tok, bytes, at) in
                grammar_tokens(model, sees, thinking.as_ref(), token, &piece, end)
            {
                if let Some(gate) = gate.as_ref().filter(|g| g.awaiting()) {
                    gate_map.push((gate.buffer().len(), at));
                }
                let (feed, note) = gated(gate.as_mut(), tok, &bytes, at);
                if let Some(note) = note {
                    lazy_note = Some(describe_note(
                        note,
                        request.gate.as_ref(),
                        &output,
                        &piece,
                        &gate_map,
                    ));
                }
                if let Some((engine, state)) = &mut track {
                    match feed_all(engine, *state, &feed) {
                        // A long run walks through ever new stack states: keep the memo bounded.
                        Some(next) => *state = masks.bound_memory(engine, next),
                        None if request.engine == EngineKind::Toolrail => {
                            return Err(LlmError::Generation(format!(
                                "token {index} (output byte {at}): token id {tok} ({:?}) was allowed \
                                 by the mask but not accepted by the grammar",
                                String::from_utf8_lossy(&bytes)
                            )));
                        }
                        None => track = None,
                    }
                }
                let stopped = accept_in_other_engines(
                    request.engine,
                    &mut llama,
                    &mut guidance,
                    tok,
                    || format!("token {index} (output byte {at})"),
                )?;
                for (engine, reason) in stopped {
                    match other_masks.iter_mut().find(|m| m.engine == engine) {
                        Some(m) => m.stopped = Some(reason),
                        None => self.emit(request.id, Event::Error(reason)),
                    }
                }
            }
            let record = TokenRecord {
                index,
                id: token,
                piece: String::from_utf8_lossy(&piece).into_owned(),
                piece_hex: std::str::from_utf8(&piece).is_err().then(|| hex(&piece)),
                forced: forced.is_some(),
                budget_replaced,
                budget,
                before: candidates(model, &choice.before, mask.as_ref()),
                after: candidates(model, &choice.after, mask.as_ref()),
                allowed: choice.allowed,
                stacks: track
                    .as_ref()
                    .filter(|_| gate.as_ref().is_none_or(|g| !g.awaiting()))
                    .map(|(engine, state)| engine.snapshot(*state)),
                decode_ms,
                mask_ms,
                flag: None,
                sampled: Vec::new(),
                disagreements: Vec::new(),
                mask_difference: compared.clone().flatten(),
                other_masks,
                lazy: lazy_note,
                thinking: thinking_note,
            };
            if let Some(difference) = &compared {
                totals.compared_steps += 1;
                totals.differing_steps += u32::from(difference.is_some());
            }
            totals.add_other_masks(&record.other_masks);
            totals.tokens += 1;
            totals.decode_ms += decode_ms;
            totals.mask_ms += mask_ms;
            let piece_start = output.len();
            output.extend_from_slice(&piece);
            generated.push(token);
            self.emit(request.id, Event::Token(Box::new(record)));
            index += 1;
            if let Some((at, stop)) = find_stop(&output, piece_start, stops) {
                output.truncate(at);
                break Stop::StopString {
                    stop: stop.to_owned(),
                };
            }
            let decode_started = Instant::now();
            session.feed(token)?;
            decode_ms = ms(decode_started);
            if pause_after {
                paused = true;
            }
        };
        // The context stays for a branch of this run to reuse.
        *kept = Some(KeptSession { options, session });
        let seconds = run_started.elapsed().saturating_sub(waited).as_secs_f64();
        totals.tokens_per_s = if seconds > 0.0 {
            f64::from(totals.tokens) / seconds
        } else {
            0.0
        };
        Ok((stop, totals, output))
    }
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

/// Whether the grammar sees the next token, behind llama-server's reasoning budget: a lazy
/// grammar does not while thinking is counted or forced (llama.cpp's `grammar_should_apply`).
fn grammar_sees(thinking: Option<&ReasoningBudget>, lazy_grammar: bool) -> bool {
    !lazy_grammar || thinking.is_none_or(ReasoningBudget::lets_lazy_grammar_see)
}

/// The tokens the grammar takes for a token the run took (`sees`: whether it saw it, decided
/// before the reasoning budget took the token): the token itself; nothing while a lazy grammar
/// is kept out of thinking; or, on the token that closed such a block, the end tag, replayed
/// (it may hold a trigger), as `common_sampler_accept` does. Each with its bytes and where they
/// start in the output, `end` being the output's length after the token.
fn grammar_tokens(
    model: &Model,
    sees: bool,
    thinking: Option<&ReasoningBudget>,
    token: u32,
    piece: &[u8],
    end: usize,
) -> Vec<(u32, Vec<u8>, usize)> {
    if sees {
        return vec![(token, piece.to_vec(), end - piece.len())];
    }
    let Some(end_tag) = thinking.and_then(ReasoningBudget::end_match) else {
        return Vec::new();
    };
    let pieces: Vec<(u32, Vec<u8>)> = end_tag.iter().map(|&t| (t, model.piece(t))).collect();
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
/// `gate_map` translates the gate's text offsets into the output's (see `generate`).
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

/// A context kept from the last run with the options it was made with.
struct KeptSession<'m> {
    options: SessionOptions,
    session: Session<'m>,
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
        engine: engine.name().to_owned(),
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

/// Feeds a token the run took to the other engines following it (llama.cpp's grammar sampler,
/// llguidance's matcher); `place` says where in the run. A refusal by the run's own `engine` is
/// an error; a compared engine that refuses stops following: it is dropped, and returned with
/// the reason in words.
fn accept_in_other_engines(
    engine: EngineKind,
    llama: &mut Option<LlamaGrammarSampler>,
    guidance: &mut Option<LlgMatcher>,
    token: u32,
    place: impl Fn() -> String,
) -> Result<Vec<(EngineKind, String)>, LlmError> {
    let mut stopped = Vec::new();
    if let Some(sampler) = llama
        && let Err(e) = sampler.accept(token)
    {
        if engine == EngineKind::Llama {
            return Err(e);
        }
        stopped.push((
            EngineKind::Llama,
            format!(
                "{}: llama.cpp (compared) refused token {token} and stops following the run: {e}",
                place()
            ),
        ));
        *llama = None;
    }
    if let Some(matcher) = guidance
        && let Err(e) = matcher.consume(token)
    {
        if engine == EngineKind::Llguidance {
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
        *guidance = None;
    }
    Ok(stopped)
}
