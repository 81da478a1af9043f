//! The model layer's errors: one enum, each variant a sentence that names the file, entry or
//! token concerned.

use std::path::PathBuf;

use toolrail_gbnf::GrammarError;

/// Everything that can go wrong loading a model, running it, or driving llama.cpp's grammar
/// sampler.
#[derive(Debug, thiserror::Error)]
pub enum LlmError {
    /// llama.cpp's backend could not be initialised (someone else initialised it first).
    #[error("llama.cpp backend: {0}")]
    Backend(String),

    /// The model file does not exist.
    #[error("model file not found: {}", .path.display())]
    NotFound {
        /// The path looked for.
        path: PathBuf,
    },

    /// The path names something that is not a regular file: a directory, a FIFO, a device.
    #[error("{} is {kind}, not a model file", .path.display())]
    NotAFile {
        /// The path.
        path: PathBuf,
        /// What it is instead ("a directory", "a FIFO (named pipe)", …).
        kind: &'static str,
    },

    /// The GGUF holds no tensors: a vocabulary- or metadata-only file, nothing to run.
    #[error("{} has no tensors (no weights): it is a metadata- or vocabulary-only GGUF, not a model to run", .path.display())]
    NoTensors {
        /// The file.
        path: PathBuf,
    },

    /// The model file could not be read.
    #[error("cannot read {}: {source}", .path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },

    /// The file does not start with the GGUF magic.
    #[error(
        "{} is not a GGUF file (it starts with {found:02x?}, a GGUF file starts with \"GGUF\")",
        .path.display()
    )]
    NotGguf {
        /// The file.
        path: PathBuf,
        /// Its first bytes (fewer than 4 when the file is that short).
        found: Vec<u8>,
    },

    /// A GGUF version llama.cpp cannot read.
    #[error("{}: GGUF version {version} is not supported (llama.cpp reads versions 2 and 3)", .path.display())]
    UnsupportedVersion {
        /// The file.
        path: PathBuf,
        /// The version in its header.
        version: u32,
    },

    /// The file ends before its header or its tensor data does: an interrupted download or copy.
    #[error("{} is truncated: {detail} (the file has {size} bytes)", .path.display())]
    Truncated {
        /// The file.
        path: PathBuf,
        /// Its size in bytes.
        size: u64,
        /// Where it ends too early.
        detail: String,
    },

    /// The GGUF header is malformed.
    #[error("{} is corrupt: {reason}", .path.display())]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },

    /// A metadata value is readable but one llama.cpp would abort on (or misread): a duplicate
    /// token, an impossible layer count, a NaN epsilon, an unaligned data section.
    #[error("{} has a bad metadata value: '{key}' {reason}", .path.display())]
    BadMetadata {
        /// The file.
        path: PathBuf,
        /// The metadata key concerned.
        key: String,
        /// What is wrong with its value, and what llama.cpp needs.
        reason: String,
    },

    /// llama.cpp does not know the model's architecture.
    #[error("{}: architecture '{architecture}' is not supported by the linked llama.cpp", .path.display())]
    UnsupportedArchitecture {
        /// The file.
        path: PathBuf,
        /// `general.architecture` from the file.
        architecture: String,
    },

    /// llama.cpp refused to load the model for another reason.
    #[error("llama.cpp could not load {}: {reason}", .path.display())]
    LoadFailed {
        /// The file.
        path: PathBuf,
        /// llama.cpp's own error lines, or a summary.
        reason: String,
    },

    /// The load was cancelled by the progress callback.
    #[error("loading {} was cancelled", .path.display())]
    LoadCancelled {
        /// The file.
        path: PathBuf,
    },

    /// A `models.toml` file could not be read or parsed.
    #[error("{}: {message}", .file.display())]
    ModelsFile {
        /// The file.
        file: PathBuf,
        /// What is wrong, with line and column where known.
        message: String,
    },

    /// An entry of a `models.toml` file is not usable.
    #[error("{}: model '{entry}': {message}", .file.display())]
    ModelEntry {
        /// The file.
        file: PathBuf,
        /// The entry's name (or `#n` when it has none).
        entry: String,
        /// What is wrong.
        message: String,
    },

    /// No entry of that name.
    #[error("{models}: no model named '{name}' (known: {known})")]
    UnknownModel {
        /// Where the models came from (a file, or the built-in default).
        models: String,
        /// The name asked for.
        name: String,
        /// The names it has, comma-separated.
        known: String,
    },

    /// A decoding thread count out of range.
    #[error("decoding threads: {0}")]
    Threads(String),

    /// A llama.cpp context could not be created (most often: not enough memory for the KV
    /// cache of that many tokens).
    #[error(
        "cannot create a llama.cpp context for {} ({n_ctx} tokens, {threads} threads): {reason}",
        .path.display()
    )]
    Context {
        /// The model file.
        path: PathBuf,
        /// The context size asked for, in tokens.
        n_ctx: u32,
        /// The decoding threads asked for.
        threads: u32,
        /// llama.cpp's error, with its log lines when it wrote any.
        reason: String,
    },

    /// `llama_decode` failed on a batch of tokens.
    #[error(
        "llama.cpp could not decode tokens {first}..{end} of {} (context {n_ctx} tokens): {reason}",
        .path.display()
    )]
    Decode {
        /// The model file.
        path: PathBuf,
        /// Context position of the batch's first token.
        first: usize,
        /// Context position after the batch's last token.
        end: usize,
        /// The context size.
        n_ctx: u32,
        /// What llama.cpp said, and what to do about it.
        reason: String,
    },

    /// llama.cpp returned logits of another length than the vocabulary.
    #[error(
        "llama.cpp returned {got} logits for context position {position} of {}, but the vocabulary has {n_vocab} tokens",
        .path.display()
    )]
    LogitsSize {
        /// The model file.
        path: PathBuf,
        /// The position whose logits were read.
        position: usize,
        /// How many logits came back.
        got: usize,
        /// The vocabulary size.
        n_vocab: usize,
    },

    /// The model computed NaN (not a number) logits: no token can be chosen from them.
    #[error(
        "the model computed {nan} NaN logits of {n_vocab} at context position {position} of {}: \
         the model file's weights are damaged, or the backend computed wrongly (try another \
         quantisation of the model, flash attention off, or the CPU backend)",
        .path.display()
    )]
    NanLogits {
        /// The model file.
        path: PathBuf,
        /// The position whose logits were read.
        position: usize,
        /// How many logits are NaN.
        nan: usize,
        /// The vocabulary size.
        n_vocab: usize,
    },

    /// The prompt or the generated text no longer fits the context.
    #[error("context full: {needed} tokens needed, the context holds {n_ctx}")]
    ContextFull {
        /// Positions the operation needs.
        needed: usize,
        /// The context size.
        n_ctx: u32,
    },

    /// There are no logits to read (nothing decoded yet).
    #[error("no logits: decode a prompt first")]
    NoLogits,

    /// A token id outside the vocabulary.
    #[error("token {token} is outside the vocabulary ({n_vocab} tokens)")]
    TokenOutOfRange {
        /// The id.
        token: u32,
        /// The vocabulary size.
        n_vocab: usize,
    },

    /// The chat prompt could not be built.
    #[error("cannot build the chat prompt: {0}")]
    ChatPrompt(String),

    /// toolrail's parser rejects the grammar, so it is never handed to llama.cpp.
    #[error("grammar rejected: {0}")]
    Grammar(#[from] GrammarError),

    /// llama.cpp's grammar sampler refused a grammar toolrail accepts.
    #[error("llama.cpp refused the grammar: {0}")]
    LlamaGrammar(String),

    /// The grammar does not allow `token` here; llama.cpp was not asked to accept it.
    #[error("token {token} ({piece:?}) is not allowed here: {reason}")]
    TokenRejected {
        /// The id.
        token: u32,
        /// Its piece, lossily decoded.
        piece: String,
        /// Why.
        reason: String,
    },

    /// llama.cpp threw while accepting a token it had allowed; the sampler is no longer usable.
    #[error("llama.cpp failed accepting token {token}: {reason}")]
    AcceptFailed {
        /// The id.
        token: u32,
        /// llama.cpp's status.
        reason: String,
    },

    /// The sampler was poisoned by an earlier failure.
    #[error("the grammar sampler is unusable after an earlier failure")]
    SamplerPoisoned,

    /// toolrail's engine could not go on (a mask could not be computed, or an allowed token was
    /// not accepted).
    #[error("generation stopped: {0}")]
    Generation(String),
}
