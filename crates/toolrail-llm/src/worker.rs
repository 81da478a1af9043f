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
//! vocabulary; a step where they differ carries a [`crate::record::MaskDifference`] naming the tokens. A run
//! can also compare with the other engines ([`RunRequest::compare`]): each computes its mask
//! at every step beside the run's own, timed, and compared with toolrail's
//! ([`TokenRecord::other_masks`]), so one run shows all three engines' times.
//!
//! The worker owns the model, the llama.cpp context and the command loop; every step's mask,
//! choice and commit is [`crate::step::ConstrainedRun`]'s, the one stepping path it shares
//! with the benches.

use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender, TryRecvError, bounded};

use crate::lazy_gate::GateSetup;
use crate::llguidance::Llguidance;
use crate::record::{Sampling, Stop, TokenRecord, Totals};
use crate::settings::{ComputeOptions, LogitSettings};
use crate::step::{ConstrainedRun, Following, Recording, Step, StepSetup};
use crate::{LlmError, Model, Session, SessionOptions};
use toolrail_engine::MaskEngine;

pub use crate::engine_kind::EngineKind;
pub use crate::step::compare_masks;

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
    /// Decoding threads (None: the model spec's, else chosen from the free physical cores).
    pub threads: Option<u32>,
    /// A window shares the machine (the app): a chosen thread count leaves it one core.
    pub beside_window: bool,
    /// How the logits are computed (each unset value: the model spec's, else llama-server's
    /// default).
    pub compute: ComputeOptions,
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
        /// What the logits are computed with, and how that is known.
        settings: Box<LogitSettings>,
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
        let setup = StepSetup {
            engine: request.engine,
            compare: &request.compare,
            grammar: request.grammar.as_deref(),
            schema: request.schema.as_ref(),
            gate: request.gate.as_ref(),
            sampling: &request.sampling,
            recording: Recording::Full { show: request.show },
            following: Following::Always,
        };
        let table = Arc::clone(masks.table());
        let (mut run, notices) = ConstrainedRun::new(model, &table, llg, setup)?;
        for notice in notices {
            self.emit(request.id, Event::Error(notice));
        }
        let options = SessionOptions {
            context: request.context,
            threads: request.threads,
            compute: request.compute,
            beside_window: request.beside_window,
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
        let mut settings = session.settings().clone();
        settings.prompt_cached = Some(u32::try_from(reused).unwrap_or(u32::MAX));
        self.emit(
            request.id,
            Event::Started {
                prompt_tokens: prompt.len(),
                prompt_ms: decode_ms,
                reused,
                settings: Box::new(settings),
            },
        );

        let run_started = Instant::now();
        let mut paused = request.start_paused;
        // Time spent paused, waiting for Step or Continue (left out of tokens/s).
        let mut waited = Duration::ZERO;
        // The prefix: already decoded above; the grammar follows it as if it had been forced.
        for notice in run.follow_prefix(&request.prefix)? {
            self.emit(request.id, Event::Error(notice));
        }
        let stop = loop {
            if run.index() >= request.sampling.max_tokens {
                break Stop::MaxTokens;
            }
            let (forced, pause_after) =
                match self.next_flow(request.id, &mut paused, run.index(), &mut waited) {
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
            // An error past this point ends the run with what it has: its tokens, totals and
            // output stay in the record (a failure is never an empty success).
            let stepped = session
                .logits()
                .and_then(|logits| run.step(masks, logits, forced, decode_ms));
            let took = match stepped {
                Err(e) => {
                    break Stop::Error {
                        message: e.to_string(),
                    };
                }
                Ok(Step::Took(took)) => took,
                Ok(Step::Refused { token, reason }) => {
                    self.emit(request.id, Event::Refused { token, reason });
                    paused = true;
                    continue;
                }
                Ok(Step::EndOfGeneration { .. }) => break Stop::EndOfGeneration,
                Ok(Step::Ended(stop)) => break stop,
            };
            for notice in took.notices {
                self.emit(request.id, Event::Error(notice));
            }
            let token = took.record.id;
            self.emit(request.id, Event::Token(took.record));
            if let Some(stop) = took.stop {
                break stop;
            }
            let decode_started = Instant::now();
            if let Err(e) = session.feed(token) {
                break Stop::Error {
                    message: e.to_string(),
                };
            }
            decode_ms = ms(decode_started);
            if pause_after {
                paused = true;
            }
        };
        // The context stays for a branch of this run to reuse.
        *kept = Some(KeptSession { options, session });
        let seconds = run_started.elapsed().saturating_sub(waited).as_secs_f64();
        let mut totals = run.totals().clone();
        totals.tokens_per_s = if seconds > 0.0 {
            f64::from(totals.tokens) / seconds
        } else {
            0.0
        };
        Ok((stop, totals, run.into_output()))
    }
}

/// A context kept from the last run with the options it was made with.
struct KeptSession<'m> {
    options: SessionOptions,
    session: Session<'m>,
}

fn ms(since: Instant) -> f64 {
    since.elapsed().as_secs_f64() * 1000.0
}
