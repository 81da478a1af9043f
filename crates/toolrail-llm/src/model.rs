//! A loaded GGUF model: metadata, the vocabulary with llama.cpp's piece rules, tokenization.
//!
//! The file is checked by toolrail's own GGUF reader ([`super::gguf`]) before llama.cpp sees it,
//! so a missing, truncated or foreign file gets a precise error and never reaches llama.cpp's
//! loader. [`Model`] is cheap to clone and `Send + Sync` (the weights sit behind an `Arc`);
//! contexts for decoding are made per thread ([`super::Session`]).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use llama_cpp_2::model::LlamaModel;
use llama_cpp_2::model::params::LlamaModelParams;
use llama_cpp_2::token::LlamaToken;

use super::device::{Placement, offloaded_in_log};
use super::error::LlmError;
use super::gguf::GgufHeader;
use super::spec::ModelSpec;
use super::{backend, log};
use toolrail_engine::TokenTable;
use toolrail_gbnf::TokenVocabulary;

/// What a model is, from its GGUF header and llama.cpp.
#[derive(Clone, Debug, PartialEq)]
pub struct ModelInfo {
    /// The file it was loaded from.
    pub path: PathBuf,
    /// `general.name`, if the file has one.
    pub name: Option<String>,
    /// `general.architecture` (`gemma3`, `llama`, ...).
    pub architecture: String,
    /// Number of parameters.
    pub parameters: u64,
    /// Context length the model was trained with.
    pub context_length: u32,
    /// Number of tokens in the vocabulary.
    pub vocab_size: usize,
    /// Number of layers.
    pub layers: u32,
    /// The GGUF's chat template (`tokenizer.chat_template`), if it has one.
    pub chat_template: Option<String>,
    /// Size of the file in bytes.
    pub file_size: u64,
    /// GGUF version of the file.
    pub gguf_version: u32,
    /// How long llama.cpp took to load it.
    pub load_time: Duration,
    /// Where its layers are (CPU, or how many on which GPU).
    pub placement: Placement,
}

/// A loaded model. Clones share the weights.
#[derive(Clone)]
pub struct Model {
    llama: Arc<LlamaModel>,
    info: Arc<ModelInfo>,
    spec: Arc<ModelSpec>,
    eog: Arc<[u32]>,
    table: Arc<OnceLock<Arc<TokenTable>>>,
}

impl std::fmt::Debug for Model {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Model")
            .field("info", &self.info)
            .field("spec", &self.spec)
            .finish_non_exhaustive()
    }
}

impl Model {
    /// Loads the GGUF at `path` with default settings.
    pub fn open(path: impl AsRef<Path>) -> Result<Model, LlmError> {
        Self::load(path.as_ref(), |_| true)
    }

    /// Loads a model: a [`ModelSpec`] (e.g. a `models.toml` entry) or a bare path (default
    /// settings). `progress` is called with the fraction loaded (0.0..=1.0); returning `false`
    /// cancels the load ([`LlmError::LoadCancelled`]).
    pub fn load(
        spec: impl Into<ModelSpec>,
        mut progress: impl FnMut(f32) -> bool + 'static,
    ) -> Result<Model, LlmError> {
        let spec: ModelSpec = spec.into();
        let path = spec.path.clone();
        let header = GgufHeader::read(&path)?;
        let backend = backend()?;

        let cancelled = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&cancelled);
        let params = LlamaModelParams::default()
            .with_n_gpu_layers(spec.gpu_layers)
            .with_progress_callback(move |fraction| {
                let go_on = progress(fraction);
                if !go_on {
                    flag.store(true, Ordering::Relaxed);
                }
                go_on
            });

        let started = Instant::now();
        let (loaded, lines) = log::capture(|| LlamaModel::load_from_file(backend, &path, &params));
        let load_time = started.elapsed();
        let llama = match loaded {
            Ok(model) => model,
            Err(e) => {
                if cancelled.load(Ordering::Relaxed) {
                    return Err(LlmError::LoadCancelled { path });
                }
                let reasons = log::reasons(&lines);
                if reasons
                    .iter()
                    .any(|r| r.contains("unknown model architecture"))
                {
                    return Err(LlmError::UnsupportedArchitecture {
                        path,
                        architecture: header.architecture().unwrap_or("").to_owned(),
                    });
                }
                let reason = if reasons.is_empty() {
                    e.to_string()
                } else {
                    reasons.join("; ")
                };
                return Err(LlmError::LoadFailed { path, reason });
            }
        };

        let architecture = header.architecture().unwrap_or("").to_owned();
        let mut placement = Placement::of(spec.gpu_layers, llama.n_layer());
        // llama.cpp's own count, where it logged one, over the rule `Placement::of` mirrors
        if let Some((done, of)) = lines.iter().find_map(|l| offloaded_in_log(&l.text)) {
            placement.offloaded_layers = done;
            placement.offloadable_layers = of;
        }
        let info = ModelInfo {
            placement,
            name: header.string("general.name").map(str::to_owned),
            context_length: llama.n_ctx_train(),
            vocab_size: usize::try_from(llama.n_vocab()).unwrap_or(0),
            parameters: llama.n_params(),
            layers: llama.n_layer(),
            chat_template: header
                .string("tokenizer.chat_template")
                .filter(|t| !t.trim().is_empty())
                .map(str::to_owned),
            file_size: header.file_size,
            gguf_version: header.version,
            architecture,
            path,
            load_time,
        };
        let eog: Arc<[u32]> = {
            let vocab = llama.vocab();
            (0..info.vocab_size as u32)
                .filter(|&id| vocab.is_eog(LlamaToken(id as i32)))
                .collect()
        };
        Ok(Model {
            llama: Arc::new(llama),
            info: Arc::new(info),
            spec: Arc::new(spec),
            eog,
            table: Arc::new(OnceLock::new()),
        })
    }

    /// The model's metadata.
    pub fn info(&self) -> &ModelInfo {
        &self.info
    }

    /// The spec it was loaded with.
    pub fn spec(&self) -> &ModelSpec {
        &self.spec
    }

    /// llama-cpp-2's model, for making contexts and samplers.
    pub fn llama(&self) -> &Arc<LlamaModel> {
        &self.llama
    }

    /// Whether llama-server makes context checkpoints for this model, cutting each prompt's
    /// last tokens into pieces of their own: its cache cannot be cut back (a sliding attention
    /// window named in the GGUF, recurrent or hybrid layers).
    pub fn makes_server_checkpoints(&self) -> bool {
        let key = format!("{}.attention.sliding_window", self.info.architecture);
        let window = self
            .llama
            .meta_val_str(&key)
            .ok()
            .and_then(|v| v.trim().parse::<i64>().ok())
            .unwrap_or(0);
        window > 0 || self.llama.is_recurrent() || self.llama.is_hybrid()
    }

    /// Number of tokens in the vocabulary.
    pub fn n_vocab(&self) -> usize {
        self.info.vocab_size
    }

    /// True if `id` is a token of the vocabulary.
    pub fn contains(&self, id: u32) -> bool {
        (id as usize) < self.info.vocab_size
    }

    /// Checks that `id` is in the vocabulary.
    pub fn check_token(&self, id: u32) -> Result<LlamaToken, LlmError> {
        match i32::try_from(id) {
            Ok(raw) if self.contains(id) => Ok(LlamaToken(raw)),
            _ => Err(LlmError::TokenOutOfRange {
                token: id,
                n_vocab: self.info.vocab_size,
            }),
        }
    }

    /// The piece of token `id` as llama.cpp's grammar sampler reads it: its text with special
    /// tokens rendered (`<start_of_turn>`), byte tokens as their byte. Empty for ids outside
    /// the vocabulary.
    pub fn piece(&self, id: u32) -> Vec<u8> {
        match self.check_token(id) {
            Ok(token) => self.llama.vocab().token_to_piece(token, true, None),
            Err(_) => Vec::new(),
        }
    }

    /// True if token `id` ends generation (EOS, end of turn, ...).
    pub fn is_eog(&self, id: u32) -> bool {
        self.check_token(id)
            .is_ok_and(|token| self.llama.vocab().is_eog(token))
    }

    /// The ids of every end-of-generation token, ascending.
    pub fn eog_tokens(&self) -> &[u32] {
        &self.eog
    }

    /// The beginning-of-sequence token, if the vocabulary has one.
    pub fn bos(&self) -> Option<u32> {
        u32::try_from(self.llama.vocab().bos().0)
            .ok()
            .filter(|&id| self.contains(id))
    }

    /// Tokenizes `text`. `add_special` adds BOS (and EOS) where the model wants them;
    /// `parse_special` turns special-token text such as `<start_of_turn>` into those tokens.
    pub fn tokenize(&self, text: &str, add_special: bool, parse_special: bool) -> Vec<u32> {
        self.tokenize_bytes(text.as_bytes(), add_special, parse_special)
    }

    /// [`Model::tokenize`] for bytes that need not be UTF-8.
    pub fn tokenize_bytes(&self, text: &[u8], add_special: bool, parse_special: bool) -> Vec<u32> {
        if text.len() >= i32::MAX as usize / 2 {
            return Vec::new();
        }
        self.llama
            .vocab()
            .tokenize(text, add_special, parse_special)
            .into_iter()
            .map(|t| t.0 as u32)
            .collect()
    }

    /// The text of `tokens` with special tokens rendered (the concatenation of their pieces).
    pub fn detokenize(&self, tokens: &[u32]) -> Vec<u8> {
        let mut out = Vec::new();
        let vocab = self.llama.vocab();
        for &id in tokens {
            if let Ok(token) = self.check_token(id) {
                vocab.token_to_piece_into(token, &mut out, true, None);
            }
        }
        out
    }

    /// Builds the vocabulary as the grammar sees it: every token's piece (special tokens
    /// rendered, exactly the pieces llama.cpp's grammar sampler caches) and the
    /// end-of-generation set. Takes tens of milliseconds for a 262k vocabulary; see
    /// [`Model::shared_token_table`] for a cached copy.
    pub fn token_table(&self) -> TokenTable {
        let vocab = self.llama.vocab();
        let n = self.info.vocab_size;
        let mut pieces = Vec::with_capacity(n);
        let mut buf = Vec::with_capacity(256);
        for id in 0..n as i32 {
            buf.clear();
            vocab.token_to_piece_into(LlamaToken(id), &mut buf, true, None);
            pieces.push(buf.as_slice().to_vec());
        }
        TokenTable::new(pieces, self.eog.iter().copied())
    }

    /// The token table, built once per loaded model and shared by its clones.
    pub fn shared_token_table(&self) -> Arc<TokenTable> {
        Arc::clone(self.table.get_or_init(|| Arc::new(self.token_table())))
    }
}

impl TokenVocabulary for Model {
    /// llama.cpp's rule for `<text>` in grammars: the text with its angle brackets, tokenized
    /// without BOS and with special tokens parsed.
    fn tokenize_special(&self, text: &[u8]) -> Vec<u32> {
        self.tokenize_bytes(text, false, true)
    }
}
