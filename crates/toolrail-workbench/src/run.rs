//! The run controller: everything the Generation, Validator and Transcript panes do, without
//! any UI. The UI owns one [`RunController`], calls its actions (load, start, step, continue,
//! pause, cancel, force, branch, export, open) and calls [`RunController::poll`] once per frame;
//! nothing here blocks the UI thread except [`RunController::wait`], which is for tests and the
//! command line.
//!
//! Model work happens off the UI thread: a loader thread loads the GGUF (with progress and
//! cancel) and the generation [`Worker`] decodes. The controller keeps a clone of the loaded
//! [`Model`] (clones share the weights) to build prompts with its chat template.
//!
//! Worker events carry no run id: the worker serves one run at a time, in order, so the
//! controller starts a queued run only after the previous run's `Done` arrived, and every event
//! belongs to the active run.
//!
//! Branching ("force another allowed candidate at step i") makes a new run that starts with the
//! source run's tokens 0..i (their records copied; the worker takes them as a prefix and reuses
//! the source's context up to there instead of decoding the prompt again), pauses at step i
//! and forces the chosen token; the worker refuses a token the grammar does not allow, and the
//! branch then stays paused at that step with the reason recorded.

mod outcome;
mod replay;
mod server;
mod setup;
mod state;

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crossbeam_channel::{Receiver, RecvTimeoutError, TryRecvError, bounded};
use serde_json::Value;

use crate::transcript::{
    self, ServerRequest, ServerRun, Stop, TRANSCRIPT_VERSION, TokenRecord, Totals, Transcript,
    TranscriptError,
};
use toolrail_llm::server::{RequestKind, ServerOptions, ServerWorker};
use toolrail_llm::worker::{Command, EngineKind, Event, Notify, RunEvent, RunRequest, Worker};
use toolrail_llm::{Model, ModelSpec, PromptSource};

pub use outcome::{Outcome, ServerCallCheck, TemplateParse};
pub use replay::Replay;
pub use server::{ServerConnection, ServerRequestChoice, ServerState, in_words};
pub use setup::{
    PromptPreview, PromptStyle, RunInputs, RunSetup, build_prompt_preview, build_request,
    family_for, sampling_with_defaults,
};
pub use state::{RunSettings, RunState};

/// Identifies a run within one controller (1, 2, ...); the worker tags its events with it.
pub use toolrail_llm::worker::RunId;

/// At most this many worker events are handled per [`RunController::poll`], so one frame
/// never spends long on a burst.
const EVENTS_PER_POLL: usize = 512;

/// Why an action could not be done.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// No model is loaded.
    #[error("no model is loaded: pick one in the model list or open a GGUF file")]
    NoModel,
    /// The selected model cannot be found (models.toml entry or GGUF path).
    #[error("cannot load the model: {0}")]
    ModelSpec(String),
    /// A model is loading.
    #[error("a model is loading: wait for it or cancel the load")]
    Loading,
    /// A run is in progress.
    #[error("a run is in progress: cancel it first")]
    Busy,
    /// The action needs a paused run.
    #[error("no run is paused: press Pause while a run is going, then Step")]
    NotPaused,
    /// Step was pressed while the run runs freely.
    #[error("the run is running freely: press Pause, then Step")]
    RunningFreely,
    /// A constrained engine without a grammar.
    #[error(
        "the {0} engine needs a grammar: fix the tool set or the grammar, or choose the engine 'none'"
    )]
    NoGrammar(EngineKind),
    /// The prompt could not be built.
    #[error("cannot build the prompt: {0}")]
    Prompt(String),
    /// The llama.cpp template source has nothing to run (its error in words).
    #[error("llama.cpp template: {0}")]
    Template(String),
    /// A run on the connected server cannot be made from these inputs.
    #[error("on the server: {0}")]
    Server(String),
    /// No run has this id.
    #[error("there is no run {0} (it was cleared or never started): pick a run in the run list")]
    UnknownRun(RunId),
    /// A branch step outside the run.
    #[error("run {run} has {len} tokens: cannot branch at step {step} (steps go from 0 to {len})")]
    BadStep {
        /// The run.
        run: RunId,
        /// The step asked for.
        step: usize,
        /// The run's token count.
        len: usize,
    },
    /// The run has not ended yet.
    #[error("run {0} has not ended: cancel it or let it finish first")]
    NotFinished(RunId),
    /// The worker thread is gone.
    #[error(
        "the generation worker stopped unexpectedly (its thread ended, so this run cannot go on): \
         load the model again to start a new worker"
    )]
    WorkerGone,
    /// Reading or writing a transcript failed.
    #[error(transparent)]
    Transcript(#[from] TranscriptError),
}

/// Where model loading stands.
#[derive(Clone, Debug, Default, PartialEq)]
pub enum LoadState {
    /// No model chosen yet.
    #[default]
    Empty,
    /// Loading, with the fraction done (0..=1).
    Loading {
        /// The model's name.
        name: String,
        /// Fraction loaded.
        fraction: f32,
    },
    /// Loaded and ready.
    Ready {
        /// The model's name.
        name: String,
    },
    /// Loading failed (or was cancelled).
    Failed {
        /// The model's name.
        name: String,
        /// Why.
        message: String,
    },
}

/// How a new run begins.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StartMode {
    /// Generate until done.
    Run,
    /// Generate one token, then pause.
    Step,
    /// Decode the prompt and pause before the first token.
    Paused,
}

/// Where a run stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RunPhase {
    /// Waiting for the worker (another run is still ending).
    Queued,
    /// Generating (or replaying forced tokens).
    Running,
    /// Paused before token `next_index`.
    Paused {
        /// Index of the next token.
        next_index: u32,
    },
    /// Ended (see [`Run::finish`]).
    Finished,
}

/// Why a run exists.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RunKind {
    /// A run the user started.
    Single,
    /// The constrained half of a side-by-side pair.
    Constrained,
    /// The unconstrained half of a side-by-side pair.
    Unconstrained,
    /// A branch of run `from`: its tokens 0..`step` taken from it, then `token` forced at `step`.
    Branch {
        /// The source run.
        from: RunId,
        /// The step where the branch takes another token.
        step: u32,
        /// The token forced there.
        token: u32,
    },
}

/// A forced token the worker refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refusal {
    /// The step it was forced at.
    pub step: u32,
    /// The token.
    pub token: u32,
    /// Why it was refused.
    pub reason: String,
}

/// How a run ended.
#[derive(Clone, Debug, PartialEq)]
pub struct Finish {
    /// Why it stopped.
    pub stop: Stop,
    /// Totals over the run.
    pub totals: Totals,
    /// The generated text (exact, lossy UTF-8 only where bytes are not UTF-8).
    pub output: String,
}

/// A constrained and an unconstrained run of the same prompt.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pair {
    /// The run under the grammar.
    pub constrained: RunId,
    /// The run without it.
    pub unconstrained: RunId,
}

/// One generation run and everything it produced so far.
#[derive(Clone, Debug)]
pub struct Run {
    /// Its id.
    pub id: RunId,
    /// Why it exists.
    pub kind: RunKind,
    /// The workspace's inputs when it started (tools, envelope, grammar).
    pub inputs: RunInputs,
    /// What was sent to the worker.
    pub request: RunRequest,
    /// Where the prompt's format came from.
    pub prompt_source: PromptSource,
    /// The model it runs on.
    pub model: transcript::ModelInfo,
    /// Seconds since the Unix epoch when it was created.
    pub created_unix: u64,
    /// Where it stands.
    pub phase: RunPhase,
    /// Prompt length in tokens and milliseconds to decode it, once started.
    pub prompt_decode: Option<(usize, f64)>,
    /// Tokens of the prompt and prefix reused from the previous run's context (a branch).
    pub prompt_reused: usize,
    /// Every token so far.
    pub tokens: Vec<TokenRecord>,
    /// The text so far (the pieces joined).
    pub text: String,
    /// Forced tokens the worker refused.
    pub refusals: Vec<Refusal>,
    /// Errors the worker reported during the run.
    pub errors: Vec<String>,
    /// The tool calls a llama-server parsed from the output (`tools` requests only).
    pub server_calls: Option<Vec<Value>>,
    /// The server it ran on and what was asked (None: in-process).
    pub server_run: Option<ServerRun>,
    /// The server as a sentence (`llama-server b11434 at URL, model M`).
    pub server: Option<String>,
    /// How it ended.
    pub finish: Option<Finish>,
    /// The verdict on its output, once ended.
    pub outcome: Option<Outcome>,
    start: StartMode,
    forced: VecDeque<u32>,
    continue_after_forced: bool,
    step_at_pause: bool,
}

impl Run {
    /// True when a grammar constrained it.
    pub fn is_constrained(&self) -> bool {
        self.request.engine != EngineKind::None && self.request.grammar.is_some()
    }

    /// True while tokens are still being replayed for a branch.
    pub fn is_replaying(&self) -> bool {
        !self.forced.is_empty()
    }

    /// The versioned transcript of the run (tokens so far; the stop is `cancelled` while it has
    /// not ended).
    pub fn transcript(&self) -> Transcript {
        let (stop, totals, output) = match &self.finish {
            Some(f) => (f.stop.clone(), f.totals.clone(), f.output.clone()),
            None => (Stop::Cancelled, Totals::default(), self.text.clone()),
        };
        let with_tools = self.inputs.tools.is_some();
        Transcript {
            version: TRANSCRIPT_VERSION,
            toolrail_version: env!("CARGO_PKG_VERSION").into(),
            created_unix: self.created_unix,
            model: self.model.clone(),
            prompt: self.request.prompt.clone(),
            tools: with_tools.then(|| Value::Array(self.inputs.tool_values())),
            format: with_tools.then_some(self.inputs.format),
            grammar: self.request.grammar.clone(),
            engine: self.request.engine,
            server: self.server.clone(),
            server_run: self.server_run.clone().map(|mut r| {
                if let (ServerRequest::Tools { calls, .. }, Some(parsed)) =
                    (&mut r.request, &self.server_calls)
                {
                    calls.clone_from(parsed);
                }
                r
            }),
            sampling: self.request.sampling.clone(),
            tokens: self.tokens.clone(),
            output,
            stop,
            validation: self.outcome.as_ref().and_then(Outcome::to_json),
            totals,
            template: self.inputs.template.clone().and_then(Result::ok),
        }
    }
}

enum LoadMessage {
    Progress(f32),
    Done(Result<Model, String>),
}

/// A model loading on its own thread.
struct LoadJob {
    spec: ModelSpec,
    messages: Receiver<LoadMessage>,
    cancel: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Drop for LoadJob {
    fn drop(&mut self) {
        self.cancel.store(true, Ordering::Relaxed);
        // Unblock a loader waiting to report.
        while self.messages.try_recv().is_ok() {}
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// The run controller (see the module docs).
pub struct RunController {
    notify: Notify,
    pace: crate::RefreshPace,
    /// When [`RunController::poll_paced`] last took the worker's events.
    last_taken: Option<Instant>,
    spec: Option<ModelSpec>,
    model: Option<Model>,
    worker: Option<Worker>,
    loading: Option<LoadJob>,
    load_state: LoadState,
    runs: Vec<Run>,
    active: Option<RunId>,
    queue: VecDeque<RunId>,
    pair: Option<Pair>,
    replay: Option<Replay>,
    messages: Vec<String>,
    next_id: RunId,
    server: ServerState,
    connecting: Option<server::ConnectJob>,
    /// The server worker and the GGUF whose vocabulary it follows the tokens with.
    server_worker: Option<(ServerWorker, PathBuf)>,
    server_request: ServerRequestChoice,
}

impl std::fmt::Debug for RunController {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunController")
            .field("load_state", &self.load_state)
            .field("runs", &self.runs.len())
            .field("active", &self.active)
            .finish_non_exhaustive()
    }
}

impl Default for RunController {
    fn default() -> Self {
        Self::new(Arc::new(|| {}))
    }
}

impl RunController {
    /// A controller with no model; `notify` is called after every event from the loader or the
    /// worker (a UI passes `ctx.request_repaint()`).
    pub fn new(notify: Notify) -> RunController {
        RunController {
            notify,
            pace: crate::RefreshPace::default(),
            last_taken: None,
            spec: None,
            model: None,
            worker: None,
            loading: None,
            load_state: LoadState::Empty,
            runs: Vec::new(),
            active: None,
            queue: VecDeque::new(),
            pair: None,
            replay: None,
            messages: Vec::new(),
            next_id: 1,
            server: ServerState::Disconnected,
            connecting: None,
            server_worker: None,
            server_request: ServerRequestChoice::Grammar,
        }
    }

    /// A controller with an already loaded model (tests, the command line).
    pub fn with_model(model: Model, notify: Notify) -> RunController {
        let mut controller = Self::new(notify);
        controller.install(model);
        controller
    }

    /// The pace at which the worker's events ask for frames (see [`crate::relayed`]); the UI
    /// sets it from its live refresh setting. Shared with the worker's relay: a change takes
    /// effect at once, also during a run.
    pub fn refresh_pace(&self) -> &crate::RefreshPace {
        &self.pace
    }

    /// Replaces the notify callback (takes effect for the next model loaded).
    pub fn set_notify(&mut self, notify: Notify) {
        self.notify = notify;
    }

    // ----- model -----

    /// Starts loading a model (a `models.toml` entry or [`ModelSpec::from_path`] for an opened
    /// GGUF file) on a loader thread. Refused while a run is in progress.
    pub fn load(&mut self, spec: ModelSpec) -> Result<(), RunError> {
        if self.is_busy() {
            return Err(RunError::Busy);
        }
        self.loading = None;
        let (tx, messages) = bounded::<LoadMessage>(256);
        let cancel = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&cancel);
        let notify = Arc::clone(&self.notify);
        let thread_spec = spec.clone();
        let thread = std::thread::Builder::new()
            .name("toolrail-model-load".into())
            .spawn(move || {
                let progress_tx = tx.clone();
                let progress_notify = Arc::clone(&notify);
                let loaded = Model::load(thread_spec, move |fraction| {
                    let _ = progress_tx.try_send(LoadMessage::Progress(fraction));
                    progress_notify();
                    !flag.load(Ordering::Relaxed)
                });
                let _ = tx.send(LoadMessage::Done(loaded.map_err(|e| e.to_string())));
                notify();
            });
        match thread {
            Ok(thread) => {
                self.load_state = LoadState::Loading {
                    name: spec.name.clone(),
                    fraction: 0.0,
                };
                self.loading = Some(LoadJob {
                    spec,
                    messages,
                    cancel,
                    thread: Some(thread),
                });
            }
            Err(e) => {
                self.load_state = LoadState::Failed {
                    name: spec.name.clone(),
                    message: format!("cannot start the loader thread: {e}"),
                };
            }
        }
        Ok(())
    }

    /// Cancels a model load in progress.
    pub fn cancel_load(&mut self) {
        if let Some(job) = self.loading.take() {
            self.load_state = LoadState::Failed {
                name: job.spec.name.clone(),
                message: "loading cancelled".into(),
            };
        }
    }

    fn install(&mut self, model: Model) {
        // The old worker is idle (loads are refused during runs): dropping it joins at once.
        self.worker = None;
        self.spec = Some(model.spec().clone());
        self.load_state = LoadState::Ready {
            name: model.spec().name.clone(),
        };
        // The worker notifies after every token; relayed, it never waits for the UI, and asks
        // for frames at the UI's pace.
        self.worker = Some(Worker::spawn(
            model.clone(),
            crate::relayed(Arc::clone(&self.notify), self.pace.clone()),
        ));
        self.model = Some(model);
    }

    /// Where model loading stands.
    pub fn load_state(&self) -> &LoadState {
        &self.load_state
    }

    /// The loaded model.
    pub fn model(&self) -> Option<&Model> {
        self.model.as_ref()
    }

    /// The spec of the loaded model (or of the one loading).
    pub fn spec(&self) -> Option<&ModelSpec> {
        self.loading
            .as_ref()
            .map(|job| &job.spec)
            .or(self.spec.as_ref())
    }

    // ----- events -----

    /// Takes in what the loader and the worker reported, without blocking; starts a queued run
    /// when the worker is free. Call once per frame.
    pub fn poll(&mut self) {
        self.poll_load();
        self.poll_connect();
        let mut events: Vec<RunEvent> = match &self.worker {
            Some(worker) => std::iter::from_fn(|| worker.events().try_recv().ok())
                .take(EVENTS_PER_POLL)
                .collect(),
            None => Vec::new(),
        };
        if let Some((worker, _)) = &self.server_worker {
            events.extend(
                std::iter::from_fn(|| worker.events().try_recv().ok()).take(EVENTS_PER_POLL),
            );
        }
        for event in events {
            self.handle(event);
        }
        self.pump();
    }

    /// [`Self::poll`] at the refresh pace (see [`Self::refresh_pace`]): while a run streams,
    /// the worker's events are taken at most about once per interval, so that a frame something
    /// else caused (input, or egui drawing a widget that just appeared a second time) does not
    /// show new tokens and so cause yet another frame: frames stay at about two per interval
    /// however fast tokens come. Returns how long until the events left waiting are due, for
    /// the UI to ask for a frame then (none is lost).
    pub fn poll_paced(&mut self) -> Option<Duration> {
        let pace = self.pace.get();
        if let Some(last) = self.last_taken
            && self.active.is_some()
            && !pace.is_zero()
        {
            let since = last.elapsed();
            if since < pace / 2 {
                self.poll_load();
                self.poll_connect();
                let waiting = self.worker.as_ref().is_some_and(|w| !w.events().is_empty())
                    || (self.server_worker.as_ref()).is_some_and(|(w, _)| !w.events().is_empty());
                return waiting.then(|| pace.saturating_sub(since));
            }
        }
        self.last_taken = Some(Instant::now());
        self.poll();
        None
    }

    /// Blocks until the loader or the worker reports something or `timeout` passes, then polls.
    /// For tests and the command line; a UI calls [`Self::poll`].
    pub fn wait(&mut self, timeout: Duration) {
        if let Some(job) = &self.loading {
            match job.messages.recv_timeout(timeout) {
                Ok(message) => self.on_load_message(message),
                Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => {}
            }
        } else if let Some(job) = &self.connecting {
            if let Ok(answer) = job.answer.recv_timeout(timeout) {
                self.on_connected(answer);
            }
        } else if let Some((worker, _)) = &self.server_worker
            && self.active_on_server()
        {
            if let Ok(event) = worker.events().recv_timeout(timeout) {
                self.handle(event);
            }
        } else if let Some(worker) = &self.worker
            && self.active.is_some()
        {
            if let Ok(event) = worker.events().recv_timeout(timeout) {
                self.handle(event);
            }
        } else {
            std::thread::sleep(timeout.min(Duration::from_millis(10)));
        }
        self.poll();
    }

    fn poll_load(&mut self) {
        loop {
            let message = match &self.loading {
                Some(job) => match job.messages.try_recv() {
                    Ok(message) => message,
                    Err(TryRecvError::Empty) => return,
                    Err(TryRecvError::Disconnected) => {
                        self.loading = None;
                        return;
                    }
                },
                None => return,
            };
            self.on_load_message(message);
        }
    }

    fn on_load_message(&mut self, message: LoadMessage) {
        match message {
            LoadMessage::Progress(fraction) => {
                if let LoadState::Loading { fraction: f, .. } = &mut self.load_state {
                    *f = fraction;
                }
            }
            LoadMessage::Done(result) => {
                let Some(job) = self.loading.take() else {
                    return;
                };
                match result {
                    Ok(model) => self.install(model),
                    Err(message) => {
                        self.load_state = LoadState::Failed {
                            name: job.spec.name.clone(),
                            message,
                        }
                    }
                }
            }
        }
    }

    fn send(&mut self, command: Command) -> bool {
        let sent = if self.active_on_server() {
            self.server_worker
                .as_ref()
                .is_some_and(|(w, _)| w.send(command))
        } else {
            self.worker.as_ref().is_some_and(|w| w.send(command))
        };
        if !sent {
            self.messages.push(RunError::WorkerGone.to_string());
        }
        sent
    }

    fn handle(&mut self, RunEvent { run: id, event }: RunEvent) {
        // Events of a run that is no longer active (e.g. cancelled and replaced) are stale.
        if self.active != Some(id) {
            if let Event::Error(message) = event {
                self.messages.push(message);
            }
            return;
        }
        let mut command = None;
        let mut ended = false;
        let Some(run) = self.runs.iter_mut().find(|r| r.id == id) else {
            return;
        };
        match event {
            Event::Error(message) => run.errors.push(message),
            Event::Started {
                prompt_tokens,
                prompt_ms,
                reused,
            } => {
                run.prompt_decode = Some((prompt_tokens, prompt_ms));
                run.prompt_reused = reused;
                run.phase = RunPhase::Running;
            }
            Event::Token(record) => {
                run.text.push_str(&record.piece);
                run.tokens.push(*record);
            }
            Event::Amended(record) => {
                if let Some(slot) = run.tokens.get_mut(record.index as usize) {
                    *slot = *record;
                }
            }
            Event::ServerCalls(calls) => run.server_calls = Some(calls),
            Event::Paused { next_index } => {
                if run.step_at_pause {
                    run.step_at_pause = false;
                    command = Some(Command::Step);
                    run.phase = RunPhase::Running;
                } else if let Some(token) = run.forced.pop_front() {
                    command = Some(Command::Force(token));
                    run.phase = RunPhase::Running;
                } else if run.continue_after_forced {
                    run.continue_after_forced = false;
                    command = Some(Command::Continue);
                    run.phase = RunPhase::Running;
                } else {
                    run.phase = RunPhase::Paused { next_index };
                }
            }
            Event::Refused { token, reason } => {
                run.refusals.push(Refusal {
                    step: run.tokens.len() as u32,
                    token,
                    reason,
                });
                // A branch cannot go on past a refused token: it stays paused there.
                run.forced.clear();
                run.continue_after_forced = false;
            }
            Event::Done {
                stop,
                totals,
                output,
            } => {
                if run.server_calls.is_none()
                    && let Some(Ok(template)) = &mut run.inputs.template
                {
                    template.parse(&output);
                }
                run.outcome = Some(match (&run.server_calls, &run.inputs.template) {
                    (Some(calls), _) => Outcome::judge_server_calls(calls, &run.inputs),
                    (None, Some(Ok(template))) => Outcome::judge_template(template, &run.inputs),
                    (None, _) => Outcome::judge(&output, run.is_constrained(), &run.inputs),
                });
                run.finish = Some(Finish {
                    stop,
                    totals,
                    output,
                });
                run.forced.clear();
                run.phase = RunPhase::Finished;
                ended = true;
            }
        }
        if let Some(command) = command {
            self.send(command);
        }
        if ended {
            self.active = None;
            self.pump();
        }
    }

    /// Starts the next queued run if the worker is free.
    fn pump(&mut self) {
        if self.active.is_some() {
            return;
        }
        while let Some(id) = self.queue.pop_front() {
            let Some(index) = self.runs.iter().position(|r| r.id == id) else {
                continue;
            };
            let request = self.runs[index].request.clone();
            let start = self.runs[index].start;
            let sent = match self.runs[index].server_run.clone() {
                Some(server_run) => {
                    self.send_to_server(&self.runs[index].inputs.clone(), &server_run, request)
                }
                None => self
                    .worker
                    .as_ref()
                    .is_some_and(|w| w.send(Command::Start(Box::new(request)))),
            };
            if !sent {
                let run = &mut self.runs[index];
                run.phase = RunPhase::Finished;
                run.finish = Some(Finish {
                    stop: Stop::Error {
                        message: RunError::WorkerGone.to_string(),
                    },
                    totals: Totals::default(),
                    output: String::new(),
                });
                continue;
            }
            // A run started in step mode takes its one step at its first pause.
            self.runs[index].step_at_pause = start == StartMode::Step;
            self.runs[index].phase = RunPhase::Running;
            self.active = Some(id);
            return;
        }
    }

    // ----- server -----

    /// Starts connecting to the llama-server at `url` (`/health`, then `/props`, on a thread);
    /// once connected, runs go to it. `name` is its `models.toml` entry, if any. Refused while
    /// a run is in progress.
    pub fn connect_server(
        &mut self,
        url: &str,
        api_key: Option<String>,
        name: Option<String>,
    ) -> Result<(), RunError> {
        if self.is_busy() {
            return Err(RunError::Busy);
        }
        match server::start_connect(url, api_key, name, Arc::clone(&self.notify)) {
            Ok(job) => {
                self.server = ServerState::Connecting {
                    url: job.url.clone(),
                };
                self.connecting = Some(job);
            }
            Err(message) => {
                self.connecting = None;
                self.server = ServerState::Failed {
                    url: url.to_owned(),
                    message,
                };
            }
        }
        Ok(())
    }

    /// Runs in-process again (refused while a run is in progress).
    pub fn disconnect_server(&mut self) -> Result<(), RunError> {
        if self.is_busy() {
            return Err(RunError::Busy);
        }
        self.connecting = None;
        self.server_worker = None;
        self.server = ServerState::Disconnected;
        Ok(())
    }

    /// Where the connection to a server stands.
    pub fn server_state(&self) -> &ServerState {
        &self.server
    }

    /// The connected server, if any.
    pub fn server(&self) -> Option<&ServerConnection> {
        match &self.server {
            ServerState::Connected(c) => Some(c),
            _ => None,
        }
    }

    /// What runs on the server ask it for (from the next run on).
    pub fn set_server_request(&mut self, choice: ServerRequestChoice) {
        self.server_request = choice;
    }

    /// What runs on the server ask it for.
    pub fn server_request(&self) -> ServerRequestChoice {
        self.server_request
    }

    fn poll_connect(&mut self) {
        let answer = match &self.connecting {
            Some(job) => match job.answer.try_recv() {
                Ok(answer) => answer,
                Err(TryRecvError::Empty) => return,
                Err(TryRecvError::Disconnected) => {
                    Err("the connection thread stopped without an answer".into())
                }
            },
            None => return,
        };
        self.on_connected(answer);
    }

    fn on_connected(&mut self, answer: Result<ServerConnection, String>) {
        let Some(job) = self.connecting.take() else {
            return;
        };
        self.server_worker = None;
        self.server = match answer {
            Ok(connection) => ServerState::Connected(Box::new(connection)),
            Err(message) => ServerState::Failed {
                url: job.url,
                message,
            },
        };
    }

    /// True when the active run runs on the server.
    fn active_on_server(&self) -> bool {
        self.active().is_some_and(|run| run.server_run.is_some())
    }

    /// Starts `request` on the server worker (spawned, or respawned for another vocabulary,
    /// here), asking what `server_run` says.
    fn send_to_server(
        &mut self,
        inputs: &RunInputs,
        server_run: &ServerRun,
        request: RunRequest,
    ) -> bool {
        let (Some(connection), Some(model)) = (self.server(), &self.model) else {
            return false;
        };
        let vocab_path = model.info().path.clone();
        if self
            .server_worker
            .as_ref()
            .is_none_or(|(_, path)| *path != vocab_path)
        {
            let worker = ServerWorker::spawn(
                connection.client.clone(),
                Some(model.clone()),
                crate::relayed(Arc::clone(&self.notify), self.pace.clone()),
            );
            self.server_worker = Some((worker, vocab_path));
        }
        let kind = match &server_run.request {
            ServerRequest::Grammar => RequestKind::Grammar,
            ServerRequest::JsonSchema { schema } => RequestKind::JsonSchema(schema.clone()),
            ServerRequest::Tools { user, .. } => RequestKind::Tools {
                tools: inputs
                    .tool_values()
                    .into_iter()
                    .map(|t| serde_json::json!({"type": "function", "function": t}))
                    .collect(),
                user: user.clone(),
            },
        };
        let Some((worker, _)) = &self.server_worker else {
            return false;
        };
        worker.set_options(ServerOptions {
            request: kind,
            ..ServerOptions::default()
        });
        worker.send(Command::Start(Box::new(request)))
    }

    // ----- runs -----

    /// True while a run is active or queued.
    pub fn is_busy(&self) -> bool {
        self.active.is_some() || !self.queue.is_empty()
    }

    /// `text` tokenized as a prompt by the loaded model (id and piece of each token); `None`
    /// without a model.
    pub fn prompt_tokens(&self, text: &str) -> Option<Vec<(u32, String)>> {
        let model = self.model.as_ref()?;
        Some(
            model
                .tokenize(text, true, true)
                .into_iter()
                .map(|id| (id, String::from_utf8_lossy(&model.piece(id)).into_owned()))
                .collect(),
        )
    }

    /// The prompt `setup` and `inputs` make with the current model.
    pub fn prompt_preview(
        &self,
        setup: &RunSetup,
        inputs: &RunInputs,
    ) -> Result<PromptPreview, RunError> {
        build_prompt_preview(setup, inputs, self.model.as_ref(), self.spec.as_ref())
    }

    fn new_run(
        &mut self,
        kind: RunKind,
        inputs: RunInputs,
        mut request: RunRequest,
        prompt_source: PromptSource,
        start: StartMode,
        user: &str,
    ) -> Result<RunId, RunError> {
        let Some(model) = &self.model else {
            return Err(if self.loading.is_some() {
                RunError::Loading
            } else {
                RunError::NoModel
            });
        };
        let info = model.info();
        let id = self.next_id;
        self.next_id += 1;
        request.id = id;
        let (server_run, server) = match &self.server {
            ServerState::Connected(_) if inputs.template.is_some() => {
                return Err(RunError::Template(
                    "a connected llama-server applies its own template: disconnect to run a template in-process"
                        .to_owned(),
                ));
            }
            ServerState::Connected(connection) => {
                if !request.compare.is_empty() {
                    return Err(RunError::Server(
                        "comparing other engines' masks runs in-process: untick Compare with for \
                         a run on the server (toolrail follows every token it sends)"
                            .into(),
                    ));
                }
                let (server_request, engine) =
                    server_request_for(self.server_request, &inputs, &request, user)?;
                request.engine = engine;
                if matches!(server_request, ServerRequest::Tools { .. }) {
                    request.grammar = None;
                }
                (
                    Some(ServerRun {
                        url: connection.url().to_owned(),
                        build: connection.props.build_info.clone(),
                        model: Some(connection.model_name()),
                        request: server_request,
                    }),
                    Some(connection.described()),
                )
            }
            _ => (None, None),
        };
        self.runs.push(Run {
            id,
            kind,
            inputs,
            request,
            prompt_source,
            model: transcript::ModelInfo {
                name: model.spec().name.clone(),
                path: info.path.display().to_string(),
                architecture: info.architecture.clone(),
                vocab_size: info.vocab_size as u32,
                file_size: info.file_size,
            },
            created_unix: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_secs()),
            phase: RunPhase::Queued,
            prompt_decode: None,
            prompt_reused: 0,
            tokens: Vec::new(),
            text: String::new(),
            refusals: Vec::new(),
            server_calls: None,
            server_run,
            server,
            errors: Vec::new(),
            finish: None,
            outcome: None,
            start,
            forced: VecDeque::new(),
            continue_after_forced: false,
            step_at_pause: false,
        });
        self.queue.push_back(id);
        Ok(id)
    }

    fn prepared(
        &self,
        setup: &RunSetup,
        inputs: &RunInputs,
        start: StartMode,
    ) -> Result<(RunRequest, PromptSource), RunError> {
        if self.model.is_none() {
            return Err(if self.loading.is_some() {
                RunError::Loading
            } else {
                RunError::NoModel
            });
        }
        let preview = self.prompt_preview(setup, inputs)?;
        let request = build_request(
            setup,
            inputs,
            preview.text,
            self.spec.as_ref(),
            start != StartMode::Run,
        )?;
        Ok((request, preview.source))
    }

    /// Starts a run of `setup` over `inputs`. Refused while another run is in progress.
    pub fn start(
        &mut self,
        setup: &RunSetup,
        inputs: &RunInputs,
        mode: StartMode,
    ) -> Result<RunId, RunError> {
        if self.is_busy() {
            return Err(RunError::Busy);
        }
        let (request, source) = self.prepared(setup, inputs, mode)?;
        let id = self.new_run(
            RunKind::Single,
            inputs.clone(),
            request,
            source,
            mode,
            &setup.user,
        )?;
        self.pump();
        Ok(id)
    }

    /// Runs the same prompt twice, under the grammar (the setup's engine, or toolrail's when it
    /// is `none`) and without it, one after the other; both results are kept as a [`Pair`].
    pub fn start_pair(&mut self, setup: &RunSetup, inputs: &RunInputs) -> Result<Pair, RunError> {
        if self.is_busy() {
            return Err(RunError::Busy);
        }
        let mut constrained = setup.clone();
        if constrained.engine == EngineKind::None {
            constrained.engine = EngineKind::Toolrail;
        }
        let mut free = setup.clone();
        free.engine = EngineKind::None;
        let (request_c, source) = self.prepared(&constrained, inputs, StartMode::Run)?;
        let (request_u, _) = self.prepared(&free, inputs, StartMode::Run)?;
        let c = self.new_run(
            RunKind::Constrained,
            inputs.clone(),
            request_c,
            source,
            StartMode::Run,
            &setup.user,
        )?;
        let u = self.new_run(
            RunKind::Unconstrained,
            inputs.clone(),
            request_u,
            source,
            StartMode::Run,
            &setup.user,
        )?;
        let pair = Pair {
            constrained: c,
            unconstrained: u,
        };
        self.pair = Some(pair);
        self.pump();
        Ok(pair)
    }

    /// Branches run `from` at `step`: a new run from the same prompt and settings that starts
    /// with `from`'s tokens 0..`step` (records copied; the worker reuses the context it holds
    /// of them), then `token` forced at `step`. If `from` is the active run it is cancelled
    /// first. With `then_continue` the branch generates on after the forced
    /// tokens; otherwise it pauses there. A token the grammar does not allow is refused by the
    /// worker (see [`Run::refusals`]) and the branch stays paused at `step`.
    pub fn branch(
        &mut self,
        from: RunId,
        step: usize,
        token: u32,
        then_continue: bool,
    ) -> Result<RunId, RunError> {
        let source = self.run(from).ok_or(RunError::UnknownRun(from))?;
        if step > source.tokens.len() {
            return Err(RunError::BadStep {
                run: from,
                step,
                len: source.tokens.len(),
            });
        }
        let taken: Vec<TokenRecord> = source.tokens[..step]
            .iter()
            .cloned()
            .map(|mut t| {
                t.forced = true;
                t
            })
            .collect();
        let mut request = source.request.clone();
        request.start_paused = true;
        request.prefix = taken.iter().map(|t| t.id).collect();
        request.reuse_cache = true;
        let inputs = source.inputs.clone();
        let prompt_source = source.prompt_source;
        if self.active == Some(from) {
            self.send(Command::Cancel);
        } else if self.is_busy() {
            return Err(RunError::Busy);
        }
        let id = self.new_run(
            RunKind::Branch {
                from,
                step: step as u32,
                token,
            },
            inputs,
            request,
            prompt_source,
            StartMode::Paused,
            "",
        )?;
        if let Some(run) = self.runs.iter_mut().find(|r| r.id == id) {
            run.text = taken.iter().map(|t| t.piece.as_str()).collect();
            run.tokens = taken;
            run.forced = VecDeque::from([token]);
            run.continue_after_forced = then_continue;
        }
        self.pump();
        Ok(id)
    }

    /// Generates one token of the paused run.
    pub fn step(&mut self) -> Result<(), RunError> {
        self.paused_run()?;
        self.set_active_phase(RunPhase::Running);
        self.send(Command::Step);
        Ok(())
    }

    /// Lets the paused run generate until done.
    pub fn resume(&mut self) -> Result<(), RunError> {
        self.paused_run()?;
        self.set_active_phase(RunPhase::Running);
        self.send(Command::Continue);
        Ok(())
    }

    /// Forces `token` as the paused run's next token (one step; refused if not allowed).
    pub fn force(&mut self, token: u32) -> Result<(), RunError> {
        self.paused_run()?;
        self.set_active_phase(RunPhase::Running);
        self.send(Command::Force(token));
        Ok(())
    }

    /// Asks the running run to pause after its current token.
    pub fn pause(&mut self) {
        if self.active.is_some() {
            self.send(Command::Pause);
        }
    }

    /// Cancels the active run and drops the queued ones.
    pub fn cancel(&mut self) {
        for id in std::mem::take(&mut self.queue) {
            if let Some(run) = self.runs.iter_mut().find(|r| r.id == id) {
                run.phase = RunPhase::Finished;
                run.finish = Some(Finish {
                    stop: Stop::Cancelled,
                    totals: Totals::default(),
                    output: String::new(),
                });
            }
        }
        if self.active.is_some() {
            self.send(Command::Cancel);
        }
    }

    fn paused_run(&self) -> Result<RunId, RunError> {
        match self.active.and_then(|id| self.run(id)) {
            Some(run) if matches!(run.phase, RunPhase::Paused { .. }) => Ok(run.id),
            _ => Err(RunError::NotPaused),
        }
    }

    fn set_active_phase(&mut self, phase: RunPhase) {
        if let Some(id) = self.active
            && let Some(run) = self.runs.iter_mut().find(|r| r.id == id)
        {
            run.phase = phase;
        }
    }

    /// Every run of this session, oldest first.
    pub fn runs(&self) -> &[Run] {
        &self.runs
    }

    /// The run with this id.
    pub fn run(&self, id: RunId) -> Option<&Run> {
        self.runs.iter().find(|r| r.id == id)
    }

    /// The run receiving events, if any.
    pub fn active(&self) -> Option<&Run> {
        self.active.and_then(|id| self.run(id))
    }

    /// The most recent run.
    pub fn latest(&self) -> Option<&Run> {
        self.runs.last()
    }

    /// The last side-by-side pair.
    pub fn pair(&self) -> Option<Pair> {
        self.pair
    }

    /// Messages not tied to a run (worker errors), oldest first; taking them clears them.
    pub fn take_messages(&mut self) -> Vec<String> {
        std::mem::take(&mut self.messages)
    }

    // ----- transcripts -----

    /// Writes run `id`'s transcript as JSON to `json` and, if given, as Markdown to `markdown`
    /// (both atomically). The run must have ended.
    pub fn export(
        &self,
        id: RunId,
        json: &Path,
        markdown: Option<&Path>,
    ) -> Result<Transcript, RunError> {
        let run = self.run(id).ok_or(RunError::UnknownRun(id))?;
        if run.finish.is_none() {
            return Err(RunError::NotFinished(id));
        }
        let transcript = run.transcript();
        transcript.save(json)?;
        if let Some(markdown) = markdown {
            transcript.save_markdown(markdown)?;
        }
        Ok(transcript)
    }

    /// Opens a transcript file for step-by-step replay (no model needed).
    pub fn open_transcript(&mut self, path: &Path) -> Result<(), RunError> {
        self.replay = Some(Replay::open(path)?);
        Ok(())
    }

    /// Opens the recorded demo run bundled with the app, shown up to
    /// [`samples::DEMO_POSITION`](crate::samples::DEMO_POSITION).
    pub fn open_demo(&mut self) -> Result<(), RunError> {
        let mut replay = Replay::new(crate::samples::demo_run()?, None);
        replay.demo = true;
        replay.seek(crate::samples::DEMO_POSITION);
        self.replay = Some(replay);
        Ok(())
    }

    /// Replays run `id` (ended) without a file, shown whole.
    pub fn replay_run(&mut self, id: RunId) -> Result<(), RunError> {
        let run = self.run(id).ok_or(RunError::UnknownRun(id))?;
        if run.finish.is_none() {
            return Err(RunError::NotFinished(id));
        }
        let mut replay = Replay::new(run.transcript(), None);
        replay.run = Some(id);
        replay.seek(replay.len());
        self.replay = Some(replay);
        Ok(())
    }

    /// The transcript being replayed.
    pub fn replay(&self) -> Option<&Replay> {
        self.replay.as_ref()
    }

    /// The transcript being replayed, to move its cursor.
    pub fn replay_mut(&mut self) -> Option<&mut Replay> {
        self.replay.as_mut()
    }

    /// Closes the replay.
    pub fn close_replay(&mut self) {
        self.replay = None;
    }

    /// The file a replay came from, if any.
    pub fn replay_path(&self) -> Option<PathBuf> {
        self.replay.as_ref().and_then(|r| r.path.clone())
    }
}

/// What a run on the server asks for, and the engine its record carries, from the pane's
/// choice and the workspace's inputs; an error says what is missing.
fn server_request_for(
    choice: ServerRequestChoice,
    inputs: &RunInputs,
    request: &RunRequest,
    user: &str,
) -> Result<(ServerRequest, EngineKind), RunError> {
    match choice {
        ServerRequestChoice::Grammar => match request.engine {
            EngineKind::Llama => Err(RunError::Server(
                "the engine 'llama' runs llama.cpp in-process; on a server its own llama.cpp \
                 masks the tokens: choose the engine 'toolrail' (toolrail follows every token) \
                 or 'none'"
                    .into(),
            )),
            engine => Ok((ServerRequest::Grammar, engine)),
        },
        ServerRequestChoice::JsonSchema => match &inputs.schema {
            Some(schema) if request.grammar.is_some() => Ok((
                ServerRequest::JsonSchema {
                    schema: schema.clone(),
                },
                EngineKind::Toolrail,
            )),
            _ => Err(RunError::Server(
                "json_schema sends the workspace's plain JSON Schema: switch the Tools pane to \
                 a plain schema that converts to a grammar, or ask for 'grammar' or 'tools'"
                    .into(),
            )),
        },
        ServerRequestChoice::Tools => match &inputs.tools {
            Some(tools) if !tools.tools().is_empty() => Ok((
                ServerRequest::Tools {
                    user: user.to_owned(),
                    calls: Vec::new(),
                },
                EngineKind::None,
            )),
            _ => Err(RunError::Server(
                "tools sends the workspace's tool set to the chat endpoint: the Tools pane has \
                 no tools"
                    .into(),
            )),
        },
    }
}
