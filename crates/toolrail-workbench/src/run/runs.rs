//! The runs of a session: each [`Run`] and what it produced, the queue (the worker serves one
//! run at a time, in order: the next starts only after the previous run's `Done`, so every
//! event belongs to the active run), side-by-side pairs, branches, and the replay shown.
//!
//! A run may do something by itself at its next pause before the user gets it back — a run
//! started with Step takes its one step, a branch forces its token and then pauses or goes on
//! — which is its [`AtPause`] state. The worker's events come in through [`Runs::handle`],
//! which answers with the command to send (nothing here talks to a worker), so all of this is
//! tested with events made up by hand.

use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::Value;

use super::outcome::Outcome;
use super::replay::Replay;
use super::setup::RunInputs;
use crate::transcript::explain::{Line, RunFacts, explain_facts};
use crate::transcript::{
    self, ServerRequest, ServerRun, Stop, TRANSCRIPT_VERSION, TokenRecord, Totals, Transcript,
};
use toolrail_llm::PromptSource;
use toolrail_llm::settings::LogitSettings;
use toolrail_llm::worker::{Command, EngineKind, Event, RunEvent, RunId, RunRequest};

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

/// What a run does by itself when it next pauses, before the user gets it back.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum AtPause {
    /// Nothing: it stays paused for the user.
    #[default]
    Wait,
    /// Takes one step (a run started with Step, at its first pause).
    Step,
    /// Forces `token` (a branch, at the step it branches); then goes on generating, or waits.
    Force {
        /// The token.
        token: u32,
        /// Generate on after it (else pause there).
        then_continue: bool,
    },
    /// Goes on generating (a branch, after its forced token).
    Continue,
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

impl Finish {
    /// A run that ended before it produced anything.
    fn empty(stop: Stop) -> Finish {
        Finish {
            stop,
            totals: Totals::default(),
            output: String::new(),
        }
    }
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
    /// What the logits are computed with, once started.
    pub settings: Option<LogitSettings>,
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
    /// What the run says about itself once ended ([`explain`]): empty before.
    pub explanation: Vec<Line>,
    start: StartMode,
    at_pause: AtPause,
}

impl Run {
    /// A queued run that has produced nothing yet.
    pub(super) fn new(
        kind: RunKind,
        inputs: RunInputs,
        request: RunRequest,
        prompt_source: PromptSource,
        model: transcript::ModelInfo,
        start: StartMode,
    ) -> Run {
        Run {
            id: request.id,
            kind,
            inputs,
            request,
            prompt_source,
            model,
            created_unix: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_secs()),
            phase: RunPhase::Queued,
            prompt_decode: None,
            prompt_reused: 0,
            settings: None,
            tokens: Vec::new(),
            text: String::new(),
            refusals: Vec::new(),
            errors: Vec::new(),
            server_calls: None,
            server_run: None,
            server: None,
            finish: None,
            outcome: None,
            explanation: Vec::new(),
            start,
            at_pause: AtPause::Wait,
        }
    }

    /// True when a grammar constrained it.
    pub fn is_constrained(&self) -> bool {
        self.request.engine != EngineKind::None && self.request.grammar.is_some()
    }

    /// True while tokens are still being replayed for a branch.
    pub fn is_replaying(&self) -> bool {
        matches!(self.at_pause, AtPause::Force { .. })
    }

    /// What it does by itself at its next pause.
    pub fn at_pause(&self) -> AtPause {
        self.at_pause
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
            settings: self.settings.clone(),
            template: self.inputs.template.clone().and_then(Result::ok),
            errors: self.errors.clone(),
        }
    }

    /// Ends the run with `stop` before (or instead of) anything more from the worker.
    fn end(&mut self, stop: Stop) {
        self.phase = RunPhase::Finished;
        self.at_pause = AtPause::Wait;
        self.finish = Some(Finish::empty(stop));
        self.explain();
    }

    /// Works out [`Run::explanation`] from the ended run's own parts (its transcript would copy
    /// every token).
    fn explain(&mut self) {
        let Some(finish) = &self.finish else {
            return;
        };
        let validation = self.outcome.as_ref().and_then(Outcome::to_json);
        let facts = RunFacts {
            stop: &finish.stop,
            tokens: &self.tokens,
            output: &finish.output,
            sampling: &self.request.sampling,
            engine: self.request.engine,
            totals: &finish.totals,
            on_server: self.server.is_some(),
            grammar: self.request.grammar.is_some(),
            template: self.inputs.template.as_ref().and_then(|t| t.as_ref().ok()),
            validation: validation.as_ref(),
            errors: &self.errors,
        };
        self.explanation = explain_facts(&facts);
    }

    /// Takes one worker event; returns the command it calls for and whether the run ended.
    fn take(&mut self, event: Event) -> (Option<Command>, bool) {
        match event {
            Event::Error(message) => self.errors.push(message),
            Event::Started {
                prompt_tokens,
                prompt_ms,
                reused,
                settings,
            } => {
                self.prompt_decode = Some((prompt_tokens, prompt_ms));
                self.prompt_reused = reused;
                self.settings = Some(*settings);
                self.phase = RunPhase::Running;
            }
            Event::Token(record) => {
                self.text.push_str(&record.piece);
                self.tokens.push(*record);
            }
            Event::Amended(record) => {
                if let Some(slot) = self.tokens.get_mut(record.index as usize) {
                    *slot = *record;
                }
            }
            Event::ServerCalls(calls) => self.server_calls = Some(calls),
            Event::Paused { next_index } => {
                let (command, next) = match self.at_pause {
                    AtPause::Wait => (None, AtPause::Wait),
                    AtPause::Step => (Some(Command::Step), AtPause::Wait),
                    AtPause::Force {
                        token,
                        then_continue,
                    } => (
                        Some(Command::Force(token)),
                        if then_continue {
                            AtPause::Continue
                        } else {
                            AtPause::Wait
                        },
                    ),
                    AtPause::Continue => (Some(Command::Continue), AtPause::Wait),
                };
                self.at_pause = next;
                self.phase = match command {
                    Some(_) => RunPhase::Running,
                    None => RunPhase::Paused { next_index },
                };
                return (command, false);
            }
            Event::Refused { token, reason } => {
                self.refusals.push(Refusal {
                    step: self.tokens.len() as u32,
                    token,
                    reason,
                });
                // A branch cannot go on past a refused token: it stays paused there.
                self.at_pause = AtPause::Wait;
            }
            Event::Done {
                stop,
                totals,
                output,
            } => {
                if self.server_calls.is_none()
                    && let Some(Ok(template)) = &mut self.inputs.template
                {
                    template.parse(&output);
                }
                self.outcome = Some(
                    match (&self.server_calls, &self.inputs.template) {
                        (Some(calls), _) => Outcome::judge_server_calls(calls, &self.inputs),
                        (None, Some(Ok(template))) => {
                            Outcome::judge_template(template, &self.inputs)
                        }
                        (None, _) => Outcome::judge(&output, self.is_constrained(), &self.inputs),
                    }
                    .ended_with(&stop),
                );
                self.finish = Some(Finish {
                    stop,
                    totals,
                    output,
                });
                self.explain();
                self.at_pause = AtPause::Wait;
                self.phase = RunPhase::Finished;
                return (None, true);
            }
        }
        (None, false)
    }
}

/// What handling one worker event asks of the controller.
#[derive(Debug, Default)]
pub(super) struct Handled {
    /// A command to send to the active run's worker.
    pub(super) command: Option<Command>,
    /// A message not tied to a run (an error of a run no longer active).
    pub(super) message: Option<String>,
    /// The active run ended: the next queued run may start.
    pub(super) ended: bool,
}

/// The runs of a session (see the module docs).
pub(super) struct Runs {
    runs: Vec<Run>,
    active: Option<RunId>,
    queue: std::collections::VecDeque<RunId>,
    pair: Option<Pair>,
    next_id: RunId,
    /// The transcript shown step by step (a file, the demo run, or an ended run).
    pub(super) replay: Option<Replay>,
}

impl Default for Runs {
    fn default() -> Self {
        Runs {
            runs: Vec::new(),
            active: None,
            queue: std::collections::VecDeque::new(),
            pair: None,
            next_id: 1,
            replay: None,
        }
    }
}

impl Runs {
    /// The id the next run gets.
    pub(super) fn take_id(&mut self) -> RunId {
        let id = self.next_id;
        self.next_id += 1;
        id
    }

    /// Queues `run` (its id from [`Self::take_id`]).
    pub(super) fn queue(&mut self, run: Run) -> RunId {
        let id = run.id;
        self.runs.push(run);
        self.queue.push_back(id);
        id
    }

    /// Queues a branch: `run` starts from `taken` (the source's tokens, marked forced) and
    /// does `at_pause` once the worker has replayed them.
    pub(super) fn queue_branch(
        &mut self,
        mut run: Run,
        taken: Vec<TokenRecord>,
        at_pause: AtPause,
    ) -> RunId {
        run.text = taken.iter().map(|t| t.piece.as_str()).collect();
        run.tokens = taken;
        run.at_pause = at_pause;
        self.queue(run)
    }

    /// Remembers the last side-by-side pair.
    pub(super) fn set_pair(&mut self, pair: Pair) {
        self.pair = Some(pair);
    }

    /// The last side-by-side pair.
    pub(super) fn pair(&self) -> Option<Pair> {
        self.pair
    }

    /// True while a run is active or queued.
    pub(super) fn is_busy(&self) -> bool {
        self.active.is_some() || !self.queue.is_empty()
    }

    /// The active run's id.
    pub(super) fn active_id(&self) -> Option<RunId> {
        self.active
    }

    /// Every run, oldest first.
    pub(super) fn all(&self) -> &[Run] {
        &self.runs
    }

    /// The run with this id.
    pub(super) fn get(&self, id: RunId) -> Option<&Run> {
        self.runs.iter().find(|r| r.id == id)
    }

    fn get_mut(&mut self, id: RunId) -> Option<&mut Run> {
        self.runs.iter_mut().find(|r| r.id == id)
    }

    /// The active run.
    pub(super) fn active(&self) -> Option<&Run> {
        self.active.and_then(|id| self.get(id))
    }

    /// The active run's id, if it is paused.
    pub(super) fn paused(&self) -> Option<RunId> {
        self.active()
            .filter(|run| matches!(run.phase, RunPhase::Paused { .. }))
            .map(|run| run.id)
    }

    /// Sets the active run's phase (a command was sent to it).
    pub(super) fn set_active_phase(&mut self, phase: RunPhase) {
        if let Some(id) = self.active
            && let Some(run) = self.get_mut(id)
        {
            run.phase = phase;
        }
    }

    /// Drops the queued runs (ended as cancelled).
    pub(super) fn cancel_queued(&mut self) {
        for id in std::mem::take(&mut self.queue) {
            if let Some(run) = self.get_mut(id) {
                run.end(Stop::Cancelled);
            }
        }
    }

    /// Ends the active run with an error (its worker is gone) and frees the slot.
    pub(super) fn fail_active(&mut self, message: String) {
        if let Some(id) = self.active.take()
            && let Some(run) = self.get_mut(id)
        {
            run.end(Stop::Error { message });
        }
    }

    /// Starts the next queued run when none is active: `start` sends it to its worker and
    /// says whether that worked; a run that could not be sent ends with `failed` as its error.
    pub(super) fn pump(&mut self, failed: &str, mut start: impl FnMut(&Run) -> bool) {
        if self.active.is_some() {
            return;
        }
        while let Some(id) = self.queue.pop_front() {
            let Some(index) = self.runs.iter().position(|r| r.id == id) else {
                continue;
            };
            let run = &mut self.runs[index];
            if !start(run) {
                run.end(Stop::Error {
                    message: failed.to_owned(),
                });
                continue;
            }
            // A run started in step mode takes its one step at its first pause.
            if run.start == StartMode::Step {
                run.at_pause = AtPause::Step;
            }
            run.phase = RunPhase::Running;
            self.active = Some(id);
            return;
        }
    }

    /// Takes one worker event. Events of a run that is no longer active (cancelled and
    /// replaced) are stale: only their errors are kept, as messages.
    pub(super) fn handle(&mut self, RunEvent { run: id, event }: RunEvent) -> Handled {
        if self.active != Some(id) {
            return Handled {
                message: match event {
                    Event::Error(message) => Some(message),
                    _ => None,
                },
                ..Handled::default()
            };
        }
        let Some(run) = self.get_mut(id) else {
            return Handled::default();
        };
        let (command, ended) = run.take(event);
        if ended {
            self.active = None;
        }
        Handled {
            command,
            message: None,
            ended,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run::setup::{RunSetup, build_request};

    fn run(runs: &mut Runs, kind: RunKind, start: StartMode) -> Run {
        let inputs = RunInputs {
            grammar: Some("root ::= \"a\"+".into()),
            ..RunInputs::default()
        };
        let mut request =
            build_request(&RunSetup::default(), &inputs, "p".into(), None, false).unwrap();
        request.id = runs.take_id();
        Run::new(
            kind,
            inputs,
            request,
            PromptSource::Raw,
            transcript::ModelInfo {
                name: "m".into(),
                path: "m.gguf".into(),
                architecture: "test".into(),
                vocab_size: 2,
                file_size: 0,
            },
            start,
        )
    }

    fn event(id: RunId, event: Event) -> RunEvent {
        RunEvent { run: id, event }
    }

    fn started(runs: &mut Runs) -> Vec<RunId> {
        let mut sent = Vec::new();
        runs.pump("gone", |run| {
            sent.push(run.id);
            true
        });
        sent
    }

    fn done(stop: Stop) -> Event {
        Event::Done {
            stop,
            totals: Totals::default(),
            output: "aa".into(),
        }
    }

    #[test]
    fn runs_start_one_at_a_time_in_order() {
        let mut runs = Runs::default();
        let a = run(&mut runs, RunKind::Constrained, StartMode::Run);
        let b = run(&mut runs, RunKind::Unconstrained, StartMode::Run);
        let (a, b) = (runs.queue(a), runs.queue(b));
        assert_eq!((a, b), (1, 2));
        assert_eq!(started(&mut runs), [a]);
        assert_eq!(started(&mut runs), [] as [RunId; 0], "a is still active");
        assert_eq!(runs.get(b).unwrap().phase, RunPhase::Queued);
        // an event of another run is stale; its error becomes a message
        let stale = runs.handle(event(b, Event::Error("late".into())));
        assert_eq!(stale.message.as_deref(), Some("late"));
        let handled = runs.handle(event(a, done(Stop::EndOfGeneration)));
        assert!(handled.ended && handled.command.is_none());
        let finished = runs.get(a).unwrap();
        assert_eq!(finished.phase, RunPhase::Finished);
        assert!(finished.outcome.is_some());
        assert_eq!(started(&mut runs), [b]);
        assert!(runs.is_busy());
    }

    #[test]
    fn a_run_started_with_step_takes_one_step_then_waits() {
        let mut runs = Runs::default();
        let r = run(&mut runs, RunKind::Single, StartMode::Step);
        let id = runs.queue(r);
        started(&mut runs);
        assert_eq!(runs.get(id).unwrap().at_pause(), AtPause::Step);
        let first = runs.handle(event(id, Event::Paused { next_index: 0 }));
        assert!(matches!(first.command, Some(Command::Step)));
        assert_eq!(runs.get(id).unwrap().phase, RunPhase::Running);
        let second = runs.handle(event(id, Event::Paused { next_index: 1 }));
        assert!(second.command.is_none());
        assert_eq!(runs.paused(), Some(id));
        assert_eq!(
            runs.get(id).unwrap().phase,
            RunPhase::Paused { next_index: 1 }
        );
    }

    /// A started branch of run 9 at step 0 that forces token 7, then continues or waits.
    fn started_branch(then_continue: bool) -> (Runs, RunId) {
        let mut runs = Runs::default();
        let r = run(
            &mut runs,
            RunKind::Branch {
                from: 9,
                step: 0,
                token: 7,
            },
            StartMode::Paused,
        );
        let id = runs.queue_branch(
            r,
            Vec::new(),
            AtPause::Force {
                token: 7,
                then_continue,
            },
        );
        started(&mut runs);
        (runs, id)
    }

    #[test]
    fn a_branch_forces_its_token_then_continues_or_waits() {
        for then_continue in [true, false] {
            let (mut runs, id) = started_branch(then_continue);
            assert!(runs.get(id).unwrap().is_replaying());
            let forced = runs.handle(event(id, Event::Paused { next_index: 0 }));
            assert!(matches!(forced.command, Some(Command::Force(7))));
            assert!(!runs.get(id).unwrap().is_replaying());
            let next = runs.handle(event(id, Event::Paused { next_index: 1 }));
            if then_continue {
                assert!(matches!(next.command, Some(Command::Continue)));
                assert_eq!(runs.get(id).unwrap().phase, RunPhase::Running);
            } else {
                assert!(next.command.is_none());
                assert_eq!(runs.paused(), Some(id));
            }
        }
    }

    #[test]
    fn a_refused_token_leaves_the_branch_paused_at_its_step() {
        let (mut runs, id) = started_branch(true);
        runs.handle(event(id, Event::Paused { next_index: 0 }));
        runs.handle(event(
            id,
            Event::Refused {
                token: 7,
                reason: "not allowed".into(),
            },
        ));
        let after = runs.handle(event(id, Event::Paused { next_index: 0 }));
        assert!(after.command.is_none(), "no Continue after a refusal");
        let branch = runs.get(id).unwrap();
        assert_eq!(branch.refusals.len(), 1);
        assert_eq!(branch.refusals[0].step, 0);
        assert_eq!(branch.phase, RunPhase::Paused { next_index: 0 });
    }

    #[test]
    fn cancelling_ends_the_queue_and_a_run_that_cannot_start_ends_with_an_error() {
        let mut runs = Runs::default();
        for _ in 0..3 {
            let r = run(&mut runs, RunKind::Single, StartMode::Run);
            runs.queue(r);
        }
        runs.pump("the worker is gone", |run| run.id != 1);
        assert_eq!(runs.active_id(), Some(2));
        assert!(matches!(
            &runs.get(1).unwrap().finish,
            Some(Finish { stop: Stop::Error { message }, .. }) if message == "the worker is gone"
        ));
        runs.cancel_queued();
        assert_eq!(
            runs.get(3).unwrap().finish.as_ref().map(|f| &f.stop),
            Some(&Stop::Cancelled)
        );
        runs.fail_active("gone".into());
        assert!(!runs.is_busy());
        assert_eq!(runs.get(2).unwrap().phase, RunPhase::Finished);
    }
}
