//! Transcripts: everything about one generation run — model, prompt, tools, grammar,
//! parameters, every token with its candidates before and after the mask and the grammar stacks
//! after it, the result and its validation — as a versioned JSON file that reopens for replay,
//! and as Markdown for people.

pub mod compare;
pub mod explain;
mod markdown;
mod validation;

use std::path::Path;

use serde::{Deserialize, Serialize};
use toolrail_llm::settings::LogitSettings;
use toolrail_llm::template::{ParsedMessage, TemplateResult};
use toolrail_llm::worker::EngineKind;
use toolrail_tools::envelope::Format;

pub use markdown::to_markdown;
pub use validation::{CheckedCall, ExtractedCall, Validation};

/// The transcript format version this build writes and reads.
pub const TRANSCRIPT_VERSION: u32 = 1;

/// The largest transcript file read: far above a long run with every candidate and stack
/// recorded, and small enough that reading one never exhausts memory.
pub const MAX_TRANSCRIPT_BYTES: u64 = 256 << 20;

/// The longest token piece (and candidate piece) read, in bytes. Real vocabularies' pieces are
/// at most a few hundred bytes; a longer one is not a model's token, and drawing it whole would
/// exceed the GPU's limits.
pub const MAX_PIECE_BYTES: usize = 4096;

/// One generation run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Transcript {
    /// Format version ([`TRANSCRIPT_VERSION`]).
    pub version: u32,
    /// The toolrail version that wrote it.
    pub toolrail_version: String,
    /// Seconds since the Unix epoch when the run started.
    pub created_unix: u64,
    /// The model.
    pub model: ModelInfo,
    /// The prompt as sent to the model (after the chat template or prompt builder).
    pub prompt: String,
    /// The tool set, when the grammar came from tools.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<serde_json::Value>,
    /// The tool-call envelope (stored as `openai`, `llama3`, ...), when the grammar came from
    /// tools.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub format: Option<Format>,
    /// The GBNF grammar, unless the run was unconstrained.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grammar: Option<String>,
    /// Which engine masked the tokens (stored as `toolrail`, `llama` or `none`).
    pub engine: EngineKind,
    /// The llama-server the run was streamed from (`llama-server b11434 at http://…`), when it
    /// was not run in-process.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<String>,
    /// The llama-server run in detail: where, which build and model, and what was asked
    /// (absent for in-process runs and in older transcripts).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_run: Option<ServerRun>,
    /// Sampling parameters.
    pub sampling: Sampling,
    /// Every generated token, in order.
    pub tokens: Vec<TokenRecord>,
    /// The generated text.
    pub output: String,
    /// Why generation stopped.
    pub stop: Stop,
    /// The verdict on the output, as the Validator pane shows it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub validation: Option<Validation>,
    /// Totals over the run.
    pub totals: Totals,
    /// What the logits were computed with (flash attention, batch sizes, cache types, threads,
    /// cached prompt tokens), each with how it is known; absent in older transcripts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub settings: Option<LogitSettings>,
    /// The chat template whose own tool calling the run followed (prompt, grammar, triggers,
    /// llama.cpp's parse of the output); absent for other grammar sources and in older
    /// transcripts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub template: Option<TemplateRun>,
    /// What went wrong during the run without ending it, in the order reported (a server
    /// that parsed no call says why, from what it built); absent when nothing did, and in
    /// older transcripts.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<String>,
}

/// A run under a chat template's own tool calling, as recorded: what llama.cpp built from the
/// template and what its parser read back from the output. The per-token trigger timeline is in
/// the tokens' `lazy` notes.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TemplateRun {
    /// Where the template came from (`model.gguf (its chat template)`, a template file).
    pub source: String,
    /// What llama.cpp built: prompt, grammar, lazy flag, triggers, preserved tokens, stops,
    /// format and parser (enough to parse the output again).
    pub result: TemplateResult,
    /// llama.cpp's parse of the output (content, reasoning, tool calls).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parsed: Option<ParsedMessage>,
    /// Why llama.cpp's parser refused the output, when it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parse_error: Option<String>,
    /// llama-server's reasoning budget for the run (`None`: no limit, the server's default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget: Option<ThinkingBudget>,
}

/// llama-server's reasoning budget (`--reasoning-budget N`, `--reasoning-budget-message M`): at
/// most `tokens` tokens of thinking, then `message` and the end tag are forced. Templates
/// without thinking tags ignore it, as the server does.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ThinkingBudget {
    /// The most thinking tokens.
    pub tokens: u32,
    /// The text forced before the end tag when the budget runs out.
    pub message: String,
}

/// A run on a llama-server, as recorded.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ServerRun {
    /// The server's base URL.
    pub url: String,
    /// Its build (`b11434-…`, from `/props`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub build: Option<String>,
    /// Its model (alias or path, from `/props`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// What was asked.
    pub request: ServerRequest,
}

impl TemplateRun {
    /// Parses the run's `output` with llama.cpp's parser for the template's format (as
    /// llama-server returns a response), keeping the message or the parser's refusal.
    pub fn parse(&mut self, output: &str) -> &TemplateRun {
        match self.result.parse(output, false) {
            Ok(message) => {
                self.parsed = Some(message);
                self.parse_error = None;
            }
            Err(e) => {
                self.parsed = None;
                self.parse_error = Some(e.to_string());
            }
        }
        self
    }
}

/// What a server run asked for.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ServerRequest {
    /// `/completion` with the transcript's grammar.
    Grammar,
    /// `/completion` with this JSON Schema (the server converted it; toolrail followed the
    /// transcript's grammar, its own conversion).
    JsonSchema {
        /// The schema sent.
        schema: serde_json::Value,
    },
    /// `/v1/chat/completions` with the transcript's tools, the server's own template grammar.
    Tools {
        /// The user's message.
        user: String,
        /// The calls the server parsed (`name`, `arguments` as the server's JSON text).
        calls: Vec<serde_json::Value>,
    },
}

/// What identifies the model.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ModelInfo {
    /// Name (a models.toml entry or the file name).
    pub name: String,
    /// Path of the GGUF file.
    pub path: String,
    /// Architecture from the GGUF metadata.
    pub architecture: String,
    /// Vocabulary size.
    pub vocab_size: u32,
    /// File size in bytes.
    pub file_size: u64,
}

pub use toolrail_llm::record::{
    Candidate, DifferingToken, MaskDifference, OtherEngineTotals, OtherMask, PENALTY_WINDOW,
    Sampling, Stop, TokenRecord, Totals,
};

/// Why a transcript could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum TranscriptError {
    /// The file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The cause.
        source: std::io::Error,
    },
    /// The file is not a transcript (with line:column from the JSON parser).
    #[error("{path}:{line}:{column}: not a toolrail transcript: {message}")]
    Format {
        /// The file.
        path: String,
        /// 1-based line of the problem.
        line: usize,
        /// 1-based column of the problem.
        column: usize,
        /// What is wrong.
        message: String,
    },
    /// The file is larger than [`MAX_TRANSCRIPT_BYTES`].
    #[error("{path}: {size} bytes is too large for a transcript (the limit is {limit} bytes)")]
    TooLarge {
        /// The file.
        path: String,
        /// Its size in bytes.
        size: u64,
        /// [`MAX_TRANSCRIPT_BYTES`].
        limit: u64,
    },
    /// A token piece is longer than [`MAX_PIECE_BYTES`].
    #[error(
        "{path}: {pointer}: a token piece of {len} bytes is too long (the limit is {limit} bytes)"
    )]
    PieceTooLong {
        /// The file.
        path: String,
        /// JSON pointer of the piece, e.g. `/tokens/7/piece`.
        pointer: String,
        /// Its length in bytes.
        len: usize,
        /// [`MAX_PIECE_BYTES`].
        limit: usize,
    },
    /// Written by a newer toolrail.
    #[error("{path}: transcript version {found} is newer than this toolrail reads ({supported})")]
    Version {
        /// The file.
        path: String,
        /// Its version.
        found: u32,
        /// The version this build reads.
        supported: u32,
    },
}

impl Transcript {
    /// Saves as pretty JSON, atomically.
    pub fn save(&self, path: &Path) -> Result<(), TranscriptError> {
        let json = serde_json::to_vec_pretty(self).map_err(|e| TranscriptError::Format {
            path: path.display().to_string(),
            line: 0,
            column: 0,
            message: e.to_string(),
        })?;
        crate::fsutil::write_atomic(path, &json).map_err(|source| TranscriptError::Io {
            path: path.display().to_string(),
            source,
        })
    }

    /// Reads a transcript, checking its size ([`MAX_TRANSCRIPT_BYTES`]) before reading and its
    /// version before the rest.
    pub fn load(path: &Path) -> Result<Transcript, TranscriptError> {
        use std::io::Read as _;
        let shown = path.display().to_string();
        let io = |source| TranscriptError::Io {
            path: shown.clone(),
            source,
        };
        // Only a regular file: a FIFO would block the open for ever.
        let file =
            toolrail_llm::files::open_regular(path, u64::MAX).map_err(|e| io(e.into_io()))?;
        let too_large = |size| TranscriptError::TooLarge {
            path: shown.clone(),
            size,
            limit: MAX_TRANSCRIPT_BYTES,
        };
        let size = file.metadata().map_err(io)?.len();
        if size > MAX_TRANSCRIPT_BYTES {
            return Err(too_large(size));
        }
        // The file may grow while it is read (or not be a regular file): read one byte past the
        // limit at most.
        let mut bytes = Vec::new();
        file.take(MAX_TRANSCRIPT_BYTES + 1)
            .read_to_end(&mut bytes)
            .map_err(io)?;
        if bytes.len() as u64 > MAX_TRANSCRIPT_BYTES {
            return Err(too_large(bytes.len() as u64));
        }
        let text = String::from_utf8(bytes).map_err(|e| {
            io(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("not UTF-8 (byte offset {})", e.utf8_error().valid_up_to()),
            ))
        })?;
        Self::from_json(&text, &shown)
    }

    /// Parses a transcript from JSON text (`name` is used in messages).
    pub fn from_json(text: &str, name: &str) -> Result<Transcript, TranscriptError> {
        let format = |e: serde_json::Error| TranscriptError::Format {
            path: name.to_string(),
            line: e.line(),
            column: e.column(),
            message: e.to_string(),
        };
        /// The version alone: read first, so that a newer file is refused as such, not for
        /// a field this version does not know. Everything else is skipped unbuilt (a document
        /// tree of a 256 MB transcript would take gigabytes).
        #[derive(Deserialize)]
        struct VersionOnly {
            #[serde(default)]
            version: u64,
        }
        let VersionOnly { version } = serde_json::from_str(text).map_err(format)?;
        let version = u32::try_from(version).unwrap_or(u32::MAX);
        if version > TRANSCRIPT_VERSION {
            return Err(TranscriptError::Version {
                path: name.to_string(),
                found: version,
                supported: TRANSCRIPT_VERSION,
            });
        }
        let transcript: Transcript = serde_json::from_str(text).map_err(format)?;
        transcript.check_pieces(name)?;
        Ok(transcript)
    }

    /// Refuses a token or candidate piece longer than [`MAX_PIECE_BYTES`], naming where it is.
    fn check_pieces(&self, name: &str) -> Result<(), TranscriptError> {
        let too_long = |pointer: String, len: usize| TranscriptError::PieceTooLong {
            path: name.to_string(),
            pointer,
            len,
            limit: MAX_PIECE_BYTES,
        };
        for (i, token) in self.tokens.iter().enumerate() {
            if token.piece.len() > MAX_PIECE_BYTES {
                return Err(too_long(format!("/tokens/{i}/piece"), token.piece.len()));
            }
            for (list, candidates) in [("before", &token.before), ("after", &token.after)] {
                for (j, c) in candidates.iter().enumerate() {
                    if c.piece.len() > MAX_PIECE_BYTES {
                        return Err(too_long(
                            format!("/tokens/{i}/{list}/{j}/piece"),
                            c.piece.len(),
                        ));
                    }
                }
            }
        }
        Ok(())
    }

    /// Saves the Markdown rendering, atomically.
    pub fn save_markdown(&self, path: &Path) -> Result<(), TranscriptError> {
        crate::fsutil::write_atomic(path, to_markdown(self).as_bytes()).map_err(|source| {
            TranscriptError::Io {
                path: path.display().to_string(),
                source,
            }
        })
    }
}
