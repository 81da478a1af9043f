//! What can go wrong with llama.cpp's chat code: its refusals (with llama-server's status) and,
//! when it runs in a worker process, how the worker failed. A leaf module: the shim, the worker
//! and the façade all report through it.

use std::time::Duration;

/// What can go wrong building or parsing through llama.cpp's chat code.
#[derive(Debug, thiserror::Error)]
pub enum TemplateError {
    /// A text handed to the shim holds a NUL byte (C strings cannot carry it).
    #[error("{what} contains a NUL byte at byte {offset}")]
    Nul {
        /// Which input ("the chat template", "the request", …).
        what: &'static str,
        /// Where the NUL is.
        offset: usize,
    },
    /// llama.cpp refused: its own message (a template it cannot parse or render, a request
    /// llama-server would answer with an error, a parse that does not match the format), and
    /// the HTTP status llama-server answers a request that fails so.
    #[error("llama.cpp: {message}")]
    Llama {
        /// llama.cpp's message, as llama-server returns it.
        message: String,
        /// 400 for what llama-server calls an invalid request (`std::invalid_argument`, a JSON
        /// error), 500 for the rest.
        http_status: u16,
    },
    /// The request builds, but llama-server's sampler cannot be set up with its grammar
    /// (`common_sampler_init`): llama.cpp's loader refuses the grammar, or a grammar that is not
    /// lazy refuses the generation prompt's tokens fed to it first. llama-server answers HTTP
    /// 400 "Failed to initialize samplers: {what}".
    #[error("llama-server answers HTTP 400 \"{SAMPLER_PREFIX}{what}\": {detail}")]
    SamplerRefused {
        /// The end of the server's message: `failed to parse grammar`, or `std::exception` for
        /// a refused prefill token (llama.cpp rethrows it sliced).
        what: String,
        /// Why, in words (toolrail's parser on the grammar, or the generation prompt refused).
        detail: String,
    },
    /// The shim answered with JSON toolrail does not understand (a shim/Rust mismatch).
    #[error("the chat shim's answer is not what toolrail expects: {0}")]
    Protocol(String),
    /// Running the grammar needs llama-server's sampler setup, which only a model's vocabulary
    /// gives (the template was loaded from text alone).
    #[error(
        "no vocabulary: the template's triggers cannot be turned into the sampler's without a model (load the template with a GGUF)"
    )]
    NoVocabulary,
    /// The model's vocabulary needs llama.cpp's backend, which could not be initialised.
    #[error(transparent)]
    Backend(#[from] crate::LlmError),
    /// llama.cpp's template code, run in a process of its own, crashed, ran past a limit or
    /// could not be started.
    #[error(transparent)]
    Isolated(#[from] IsolationError),
}

/// How llama-server's message starts when it cannot set up a request's sampler.
pub const SAMPLER_PREFIX: &str = "Failed to initialize samplers: ";

/// llama-server's message when the sampler cannot load a request's grammar.
pub const SAMPLER_REFUSAL: &str = "Failed to initialize samplers: failed to parse grammar";

impl TemplateError {
    /// The HTTP status llama-server answers a chat request that fails so (`None`: not a
    /// failure of the request, e.g. toolrail's own limits or a missing vocabulary).
    pub fn http_status(&self) -> Option<u16> {
        match self {
            TemplateError::Llama { http_status, .. } => Some(*http_status),
            TemplateError::SamplerRefused { .. } => Some(400),
            _ => None,
        }
    }

    /// The message llama-server answers a chat request that fails so (`None` as for
    /// [`TemplateError::http_status`]).
    pub fn server_message(&self) -> Option<String> {
        match self {
            TemplateError::Llama { message, .. } => Some(message.clone()),
            TemplateError::SamplerRefused { what, .. } => Some(format!("{SAMPLER_PREFIX}{what}")),
            _ => None,
        }
    }
}

/// A template operation went wrong in its worker: how, in words a user can act on.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IsolationError {
    /// The worker ended without answering: a stack overflow, an abort, a signal.
    #[error(
        "llama.cpp's {part} crashed while {doing} ({how}). It ran in a process of its own, so \
         nothing else is lost. {hint}; llama-server would crash on it too"
    )]
    Crashed {
        /// Which part of llama.cpp ("template engine", "output parser").
        part: &'static str,
        /// What it was doing.
        doing: &'static str,
        /// How it ended ("it overflowed its stack", "ended by signal 11").
        how: String,
        /// What input does this.
        hint: &'static str,
    },
    /// The operation ran past [`OPERATION_LIMIT`](super::isolate::OPERATION_LIMIT) and was stopped.
    #[error(
        "llama.cpp's {part} ran for more than {} s while {doing}, so toolrail stopped it. \
         A template does this when it loops for ever or builds a huge text (range(10**9), \
         'x' * 10**8)",
        limit.as_secs()
    )]
    TimedOut {
        /// Which part of llama.cpp.
        part: &'static str,
        /// What it was doing.
        doing: &'static str,
        /// The limit it ran past.
        limit: Duration,
    },
    /// The operation needed more memory than [`MEMORY_LIMIT`](super::isolate::MEMORY_LIMIT).
    #[error(
        "llama.cpp's {part} needed more than {} MiB while {doing}, so toolrail stopped it. \
         A template does this when it builds a huge text or list",
        limit >> 20
    )]
    OutOfMemory {
        /// Which part of llama.cpp.
        part: &'static str,
        /// What it was doing.
        doing: &'static str,
        /// The limit, in bytes.
        limit: u64,
    },
    /// The worker's answer was longer than [`REPLY_LIMIT`](super::isolate::REPLY_LIMIT).
    #[error(
        "llama.cpp's {part} produced more than {} MiB while {doing}, so toolrail stopped it",
        limit >> 20
    )]
    TooLarge {
        /// Which part of llama.cpp.
        part: &'static str,
        /// What it was doing.
        doing: &'static str,
        /// The limit, in bytes.
        limit: usize,
    },
    /// The worker could not be started or spoken to.
    #[error("toolrail's template process ({program}) could not be used: {error}")]
    Start {
        /// The program started.
        program: String,
        /// What went wrong.
        error: String,
    },
    /// The worker answered with a failure that is not llama.cpp's (no vocabulary, a backend
    /// that would not start, a reply toolrail does not understand).
    #[error("{0}")]
    Failed(String),
}
