//! The run controller: everything the Generation, Validator and Transcript panes do, without
//! any UI. The UI owns one [`RunController`], calls its actions (load, start, step, continue,
//! pause, cancel, force, branch, export, open) and calls [`RunController::poll`] once per frame;
//! nothing here blocks the UI thread except [`RunController::wait`], which is for tests and the
//! command line (`toolrail generate` runs through it too).
//!
//! The controller is a façade over three parts, each in its own file:
//! - the model slot (`run/model_slot.rs`): a loader thread loads the GGUF (with progress and
//!   cancel), and the loaded model's generation [`Worker`](toolrail_llm::worker::Worker) decodes; the controller keeps a
//!   clone of the loaded [`Model`] (clones share the weights) to build prompts with its chat
//!   template;
//! - the server slot (`run/server_slot.rs`): a llama-server connected on a thread, its
//!   [`ServerWorker`](toolrail_llm::server::ServerWorker), and what runs ask it for;
//! - the runs (`run/runs.rs`): every run, the queue (a worker serves one run at a time, in
//!   order, so a queued run starts only after the previous run's `Done` arrived and every event
//!   belongs to the active run), pairs, branches and the replay shown.
//!
//! Branching ("force another allowed candidate at step i") makes a new run that starts with the
//! source run's tokens 0..i (their records copied; the worker takes them as a prefix and reuses
//! the source's context up to there instead of decoding the prompt again), pauses at step i
//! and forces the chosen token ([`AtPause`]); the worker refuses a token the grammar does not
//! allow, and the branch then stays paused at that step with the reason recorded.

mod error;
mod model_slot;
mod outcome;
mod replay;
mod runs;
mod server;
mod server_slot;
mod setup;
mod state;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::TryRecvError;

use crate::transcript::{self, TokenRecord, Transcript};
use model_slot::ModelSlot;
use runs::Runs;
use server_slot::ServerSlot;
use toolrail_llm::settings::ServerFlags;
use toolrail_llm::worker::{Command, EngineKind, Notify, RunEvent, RunRequest};
use toolrail_llm::{Model, ModelSpec, PromptSource};

pub use error::RunError;
pub use model_slot::LoadState;
pub use outcome::{Outcome, ServerCallCheck, TemplateParse};
pub use replay::Replay;
pub use runs::{AtPause, Finish, Pair, Refusal, Run, RunKind, RunPhase, StartMode};
pub use server::{ServerConnection, ServerRequestChoice, ServerState, in_words};
pub use setup::{
    PromptNote, PromptPreview, PromptStyle, RunInputs, RunSetup, build_prompt_preview,
    build_request, family_for, prompt_family, prompt_notes, sampling_with_defaults,
};
pub use state::{RunSettings, RunState};

/// Identifies a run within one controller (1, 2, ...); the worker tags its events with it.
pub use toolrail_llm::worker::RunId;

/// At most this many worker events are handled per [`RunController::poll`], so one frame
/// never spends long on a burst.
const EVENTS_PER_POLL: usize = 512;

/// The run controller (see the module docs).
pub struct RunController {
    notify: Notify,
    pace: crate::RefreshPace,
    /// When [`RunController::poll_paced`] last took the worker's events.
    last_taken: Option<Instant>,
    model: ModelSlot,
    server: ServerSlot,
    runs: Runs,
    messages: Vec<String>,
}

impl std::fmt::Debug for RunController {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunController")
            .field("load_state", self.model.state())
            .field("runs", &self.runs.all().len())
            .field("active", &self.runs.active_id())
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
            model: ModelSlot::default(),
            server: ServerSlot::default(),
            runs: Runs::default(),
            messages: Vec::new(),
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

    /// What a worker calls after every event: relayed, it never waits for the UI, and asks
    /// for frames at the UI's pace.
    fn worker_notify(&self) -> Notify {
        crate::relayed(Arc::clone(&self.notify), self.pace.clone())
    }

    // ----- model -----

    /// Starts loading a model (a `models.toml` entry or [`ModelSpec::from_path`] for an opened
    /// GGUF file) on a loader thread. Refused while a run is in progress.
    pub fn load(&mut self, spec: ModelSpec) -> Result<(), RunError> {
        if self.is_busy() {
            return Err(RunError::Busy);
        }
        self.model.load(spec, Arc::clone(&self.notify));
        Ok(())
    }

    /// Cancels a model load in progress.
    pub fn cancel_load(&mut self) {
        self.model.cancel_load();
    }

    fn install(&mut self, model: Model) {
        let notify = self.worker_notify();
        self.model.install(model, notify);
    }

    /// Where model loading stands.
    pub fn load_state(&self) -> &LoadState {
        self.model.state()
    }

    /// The loaded model.
    pub fn model(&self) -> Option<&Model> {
        self.model.model()
    }

    /// The spec of the loaded model (or of the one loading).
    pub fn spec(&self) -> Option<&ModelSpec> {
        self.model.spec()
    }

    /// Why there is no model to run: loading, or none chosen.
    fn no_model(&self) -> RunError {
        if self.model.is_loading() {
            RunError::Loading
        } else {
            RunError::NoModel
        }
    }

    // ----- events -----

    /// Takes in what the loader and the worker reported, without blocking; starts a queued run
    /// when the worker is free. Call once per frame.
    pub fn poll(&mut self) {
        self.poll_slots();
        let mut events: Vec<RunEvent> = match self.model.worker() {
            Some(worker) => std::iter::from_fn(|| worker.events().try_recv().ok())
                .take(EVENTS_PER_POLL)
                .collect(),
            None => Vec::new(),
        };
        if let Some(worker) = self.server.worker() {
            events.extend(
                std::iter::from_fn(|| worker.events().try_recv().ok()).take(EVENTS_PER_POLL),
            );
        }
        for event in events {
            self.handle(event);
        }
        self.check_worker_alive();
        self.pump();
    }

    /// The loader's and the connection's answers, without blocking.
    fn poll_slots(&mut self) {
        if let Some(model) = self.model.poll() {
            self.install(model);
        }
        self.server.poll();
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
            && self.runs.active_id().is_some()
            && !pace.is_zero()
        {
            let since = last.elapsed();
            if since < pace / 2 {
                self.poll_slots();
                let waiting = self.model.worker().is_some_and(|w| !w.events().is_empty())
                    || self.server.worker().is_some_and(|w| !w.events().is_empty());
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
        if self.model.is_loading() {
            if let Some(model) = self.model.wait(timeout) {
                self.install(model);
            }
        } else if self.server.wait(timeout) {
            // the connection answered, or the time passed
        } else if let Some(events) = self.active_events() {
            if let Ok(event) = events.recv_timeout(timeout) {
                self.handle(event);
            }
        } else {
            std::thread::sleep(timeout.min(Duration::from_millis(10)));
        }
        self.poll();
    }

    /// The event stream of the active run's worker (the server's or the model's).
    fn active_events(&self) -> Option<crossbeam_channel::Receiver<RunEvent>> {
        self.runs.active_id()?;
        if self.active_on_server() {
            self.server.worker().map(|w| w.events().clone())
        } else {
            self.model.worker().map(|w| w.events().clone())
        }
    }

    /// Ends the active run with an error when its worker's thread has ended (its events will
    /// never come), so that nothing waits for it forever.
    fn check_worker_alive(&mut self) {
        let Some(events) = self.active_events() else {
            if self.runs.active_id().is_some() {
                self.runs.fail_active(RunError::WorkerGone.to_string());
            }
            return;
        };
        match events.try_recv() {
            Ok(event) => self.handle(event),
            Err(TryRecvError::Disconnected) => {
                self.runs.fail_active(RunError::WorkerGone.to_string());
            }
            Err(TryRecvError::Empty) => {}
        }
    }

    fn send(&mut self, command: Command) -> bool {
        let sent = if self.active_on_server() {
            self.server.send(command)
        } else {
            self.model.worker().is_some_and(|w| w.send(command))
        };
        if !sent {
            self.messages.push(RunError::WorkerGone.to_string());
        }
        sent
    }

    fn handle(&mut self, event: RunEvent) {
        let handled = self.runs.handle(event);
        self.messages.extend(handled.message);
        if let Some(command) = handled.command {
            self.send(command);
        }
        if handled.ended {
            self.pump();
        }
    }

    /// Starts the next queued run if the worker is free.
    fn pump(&mut self) {
        let notify = self.worker_notify();
        let (model, server) = (&self.model, &mut self.server);
        self.runs.pump(&RunError::WorkerGone.to_string(), |run| {
            match &run.server_run {
                Some(server_run) => model.model().is_some_and(|m| {
                    server.start(
                        &run.inputs,
                        server_run,
                        run.request.clone(),
                        m,
                        Arc::clone(&notify),
                    )
                }),
                None => model
                    .worker()
                    .is_some_and(|w| w.send(Command::Start(Box::new(run.request.clone())))),
            }
        });
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
        self.server
            .connect(url, api_key, name, Arc::clone(&self.notify));
        Ok(())
    }

    /// States the flags the connected (or next) server was started with: llama-server does not
    /// report flash attention, batch sizes or cache types, and each run's recorded settings,
    /// and a comparison with an in-process run, use these.
    pub fn set_server_flags(&mut self, flags: ServerFlags) {
        self.server.set_flags(flags);
    }

    /// The flags stated for the server.
    pub fn server_flags(&self) -> &ServerFlags {
        self.server.flags()
    }

    /// Runs in-process again (refused while a run is in progress).
    pub fn disconnect_server(&mut self) -> Result<(), RunError> {
        if self.is_busy() {
            return Err(RunError::Busy);
        }
        self.server.disconnect();
        Ok(())
    }

    /// Where the connection to a server stands.
    pub fn server_state(&self) -> &ServerState {
        self.server.state()
    }

    /// The connected server, if any.
    pub fn server(&self) -> Option<&ServerConnection> {
        self.server.connection()
    }

    /// What runs on the server ask it for (from the next run on).
    pub fn set_server_request(&mut self, choice: ServerRequestChoice) {
        self.server.set_request(choice);
    }

    /// What runs on the server ask it for.
    pub fn server_request(&self) -> ServerRequestChoice {
        self.server.request()
    }

    /// Whether runs on the server ask again for each token's candidates after the server's
    /// sampling chain (`post_sampling_probs`, a second request; on by default).
    pub fn set_server_post_sampling(&mut self, on: bool) {
        self.server.set_post_sampling(on);
    }

    /// True when the active run runs on the server.
    fn active_on_server(&self) -> bool {
        self.active().is_some_and(|run| run.server_run.is_some())
    }

    // ----- runs -----

    /// True while a run is active or queued.
    pub fn is_busy(&self) -> bool {
        self.runs.is_busy()
    }

    /// `text` tokenized as a prompt by the loaded model (id and piece of each token); `None`
    /// without a model.
    pub fn prompt_tokens(&self, text: &str) -> Option<Vec<(u32, String)>> {
        let model = self.model.model()?;
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
        build_prompt_preview(setup, inputs, self.model.model(), self.model.loaded_spec())
    }

    fn new_run(
        &mut self,
        kind: RunKind,
        inputs: RunInputs,
        mut request: RunRequest,
        prompt_source: PromptSource,
        start: StartMode,
        user: &str,
    ) -> Result<Run, RunError> {
        let Some(model) = self.model.model() else {
            return Err(self.no_model());
        };
        let info = model.info();
        let model_info = transcript::ModelInfo {
            name: model.spec().name.clone(),
            path: info.path.display().to_string(),
            architecture: info.architecture.clone(),
            vocab_size: info.vocab_size as u32,
            file_size: info.file_size,
        };
        let on_server = self.server.plan(&inputs, &mut request, user)?;
        request.id = self.runs.take_id();
        let mut run = Run::new(kind, inputs, request, prompt_source, model_info, start);
        if let Some((server_run, described)) = on_server {
            run.server_run = Some(server_run);
            run.server = Some(described);
        }
        Ok(run)
    }

    fn prepared(
        &self,
        setup: &RunSetup,
        inputs: &RunInputs,
        start: StartMode,
    ) -> Result<(RunRequest, PromptSource), RunError> {
        if self.model.model().is_none() {
            return Err(self.no_model());
        }
        let preview = self.prompt_preview(setup, inputs)?;
        let request = build_request(
            setup,
            inputs,
            preview.text,
            self.model.loaded_spec(),
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
        let run = self.new_run(
            RunKind::Single,
            inputs.clone(),
            request,
            source,
            mode,
            &setup.user,
        )?;
        let id = self.runs.queue(run);
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
            constrained: self.runs.queue(c),
            unconstrained: self.runs.queue(u),
        };
        self.runs.set_pair(pair);
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
        if source.server_run.is_some() {
            return Err(RunError::Server(
                "Force replays a run in-process: a llama-server run cannot be branched (its \
                 server chose every token); disconnect the server and run it here to force tokens"
                    .into(),
            ));
        }
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
        if self.runs.active_id() == Some(from) {
            self.send(Command::Cancel);
        } else if self.is_busy() {
            return Err(RunError::Busy);
        }
        let run = self.new_run(
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
        let id = self.runs.queue_branch(
            run,
            taken,
            AtPause::Force {
                token,
                then_continue,
            },
        );
        self.pump();
        Ok(id)
    }

    /// Generates one token of the paused run.
    pub fn step(&mut self) -> Result<(), RunError> {
        self.paused_run()?;
        self.runs.set_active_phase(RunPhase::Running);
        self.send(Command::Step);
        Ok(())
    }

    /// Lets the paused run generate until done.
    pub fn resume(&mut self) -> Result<(), RunError> {
        self.paused_run()?;
        self.runs.set_active_phase(RunPhase::Running);
        self.send(Command::Continue);
        Ok(())
    }

    /// Forces `token` as the paused run's next token (one step; refused if not allowed).
    pub fn force(&mut self, token: u32) -> Result<(), RunError> {
        self.paused_run()?;
        self.runs.set_active_phase(RunPhase::Running);
        self.send(Command::Force(token));
        Ok(())
    }

    /// Asks the running run to pause after its current token.
    pub fn pause(&mut self) {
        if self.runs.active_id().is_some() {
            self.send(Command::Pause);
        }
    }

    /// Cancels the active run and drops the queued ones.
    pub fn cancel(&mut self) {
        self.runs.cancel_queued();
        if self.runs.active_id().is_some() {
            self.send(Command::Cancel);
        }
    }

    fn paused_run(&self) -> Result<RunId, RunError> {
        self.runs.paused().ok_or(RunError::NotPaused)
    }

    /// Every run of this session, oldest first.
    pub fn runs(&self) -> &[Run] {
        self.runs.all()
    }

    /// The run with this id.
    pub fn run(&self, id: RunId) -> Option<&Run> {
        self.runs.get(id)
    }

    /// The run receiving events, if any.
    pub fn active(&self) -> Option<&Run> {
        self.runs.active()
    }

    /// The most recent run.
    pub fn latest(&self) -> Option<&Run> {
        self.runs.all().last()
    }

    /// The last side-by-side pair.
    pub fn pair(&self) -> Option<Pair> {
        self.runs.pair()
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
        self.show_replay(Replay::open(path)?);
        Ok(())
    }

    /// Replays a transcript already read (by the file tasks, off the UI thread).
    pub fn show_replay(&mut self, replay: Replay) {
        self.runs.replay = Some(replay);
    }

    /// Opens the recorded demo run bundled with the app, shown up to
    /// [`samples::DEMO_POSITION`](crate::samples::DEMO_POSITION).
    pub fn open_demo(&mut self) -> Result<(), RunError> {
        let mut replay = Replay::new(crate::samples::demo_run()?, None);
        replay.demo = true;
        replay.seek(crate::samples::DEMO_POSITION);
        self.runs.replay = Some(replay);
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
        self.runs.replay = Some(replay);
        Ok(())
    }

    /// The transcript being replayed.
    pub fn replay(&self) -> Option<&Replay> {
        self.runs.replay.as_ref()
    }

    /// The transcript being replayed, to move its cursor.
    pub fn replay_mut(&mut self) -> Option<&mut Replay> {
        self.runs.replay.as_mut()
    }

    /// Closes the replay.
    pub fn close_replay(&mut self) {
        self.runs.replay = None;
    }

    /// The file a replay came from, if any.
    pub fn replay_path(&self) -> Option<PathBuf> {
        self.runs.replay.as_ref().and_then(|r| r.path.clone())
    }
}
