//! Why a run controller action could not be done, in words a person can act on (kept apart so
//! the controller's parts can name it without importing the façade).

use crate::transcript::TranscriptError;
use toolrail_llm::worker::{EngineKind, RunId};

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
