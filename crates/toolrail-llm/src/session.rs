//! A decoding session: one llama.cpp context on the calling thread, fed a prompt and then one
//! token at a time, with the logits of the last position after each step.
//!
//! A context borrows its model and is not `Sync`: make the session on the thread that runs it
//! (the generation worker), from a [`Model`] that thread owns or shares.

use std::num::NonZeroU32;

use llama_cpp_2::context::LlamaContext;
use llama_cpp_2::context::params::LlamaContextParams;
use llama_cpp_2::llama_batch::LlamaBatch;
use llama_cpp_2::token::LlamaToken;

use super::backend;
use super::error::LlmError;
use super::model::Model;
use super::settings::{
    Backend, CacheType, ComputeOptions, FlashAttention, Known, LogitSettings, PromptSplit,
    SERVER_BATCH, SERVER_UBATCH, checkpoint_offsets,
};
use super::spec::check_threads;

/// Context size when neither the caller nor the spec gives one.
pub const DEFAULT_CONTEXT: u32 = 4096;

/// How to make a session's context.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SessionOptions {
    /// Context size (`None`: the spec's, else [`DEFAULT_CONTEXT`]; capped at the training length).
    pub context: Option<u32>,
    /// Decoding threads (`None`: the spec's, else chosen from the free physical cores, see
    /// [`crate::threads::choose`]).
    pub threads: Option<u32>,
    /// How the logits are computed (each unset value: the spec's, else llama-server's default).
    pub compute: ComputeOptions,
    /// A window shares the machine: a chosen thread count leaves it one core.
    pub beside_window: bool,
}

/// A context with its position: prompt in, one token at a time, logits out.
pub struct Session<'m> {
    ctx: LlamaContext<'m>,
    batch: LlamaBatch<'static>,
    n_ctx: u32,
    n_vocab: usize,
    /// Tokens in the context so far.
    tokens: Vec<u32>,
    /// Index in the last batch whose logits are available.
    logits_index: Option<i32>,
    /// Tokens handed to llama.cpp per `llama_decode` call while reading a prompt.
    n_batch: u32,
    /// Tokens computed per graph.
    n_ubatch: u32,
    /// How a prompt is cut.
    prompt_split: PromptSplit,
    /// What the context computes with.
    settings: LogitSettings,
    model: &'m Model,
}

impl std::fmt::Debug for Session<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("n_ctx", &self.n_ctx)
            .field("n_past", &self.tokens.len())
            .finish_non_exhaustive()
    }
}

impl Model {
    /// A new session over this model, on the calling thread.
    pub fn session(&self, options: SessionOptions) -> Result<Session<'_>, LlmError> {
        Session::new(self, options)
    }
}

impl<'m> Session<'m> {
    /// A new session: a fresh context of the requested size.
    pub fn new(model: &'m Model, options: SessionOptions) -> Result<Session<'m>, LlmError> {
        let spec = model.spec();
        let trained = model.info().context_length.max(1);
        let n_ctx = options
            .context
            .or(spec.context)
            .unwrap_or(DEFAULT_CONTEXT)
            .clamp(1, trained);
        let thread_choice =
            crate::threads::choose(options.threads.or(spec.threads), options.beside_window);
        let threads = check_threads(thread_choice.threads).map_err(LlmError::Threads)?;
        let compute = options.compute.or(spec.compute);
        let n_batch = compute.batch.unwrap_or(SERVER_BATCH).clamp(1, n_ctx);
        let n_ubatch = compute.ubatch.unwrap_or(SERVER_UBATCH).clamp(1, n_batch);
        let flash_attention = compute.flash_attention.unwrap_or(FlashAttention::Auto);
        let cache_type_k = compute.cache_type_k.unwrap_or(CacheType::F16);
        let cache_type_v = compute.cache_type_v.unwrap_or(CacheType::F16);
        // As llama-server cuts prompts for this model, unless asked otherwise.
        let prompt_split = compute
            .prompt_split
            .unwrap_or(if model.makes_server_checkpoints() {
                PromptSplit::Checkpoints
            } else {
                PromptSplit::Batches
            });
        let params = LlamaContextParams::default()
            .with_n_ctx(NonZeroU32::new(n_ctx))
            .with_n_batch(n_batch)
            .with_n_ubatch(n_ubatch)
            .with_n_threads(threads as i32)
            .with_n_threads_batch(threads as i32)
            .with_flash_attention_policy(flash_attention.llama_type())
            .with_type_k(cache_type_k.kv_type())
            .with_type_v(cache_type_v.kv_type());
        let backend = backend()?;
        let _ = super::log::take_flash_attention();
        let (ctx, lines) = super::log::capture(|| model.llama().new_context(backend, params));
        let resolved_flash_attention = super::log::take_flash_attention();
        let ctx = ctx.map_err(|_| {
            let reasons = super::log::reasons(&lines);
            LlmError::Context {
                path: spec.path.clone(),
                n_ctx,
                threads,
                reason: {
                    let said = if reasons.is_empty() {
                        "llama.cpp returned no context and logged no reason".to_owned()
                    } else {
                        reasons.join("; ")
                    };
                    // A refused combination of settings is its own reason; otherwise memory
                    // is the usual one.
                    if said.contains("flash_attn") || said.contains("cache") {
                        format!(
                            "{said} (flash attention {flash_attention}, K cache {cache_type_k}, \
                             V cache {cache_type_v})"
                        )
                    } else {
                        format!(
                            "{said}; a smaller context (--context, or `context` in models.toml) \
                             needs less memory"
                        )
                    }
                },
            }
        })?;
        let settings = LogitSettings {
            engine: Backend::InProcess,
            flash_attention: Known::Set(flash_attention),
            flash_attention_enabled: resolved_flash_attention,
            batch: Known::Set(n_batch),
            ubatch: Known::Set(n_ubatch),
            cache_type_k: Known::Set(cache_type_k),
            cache_type_v: Known::Set(cache_type_v),
            prompt_split: Known::Set(prompt_split),
            threads: Known::Set(threads),
            thread_choice: Some(thread_choice),
            gpu_layers: Known::Set(spec.gpu_layers),
            placement: Some(model.info().placement.clone()),
            context: Known::Set(n_ctx),
            prompt_cached: None,
            build: Some(format!("b{}", crate::LLAMA_CPP_BUILD)),
            unread_flags: Vec::new(),
        };
        Ok(Session {
            n_ctx: ctx.n_ctx(),
            ctx,
            batch: LlamaBatch::new(n_batch as usize, 1),
            n_batch,
            n_ubatch,
            prompt_split,
            settings,
            n_vocab: model.n_vocab(),
            tokens: Vec::new(),
            logits_index: None,
            model,
        })
    }

    /// The model.
    pub fn model(&self) -> &'m Model {
        self.model
    }

    /// What the context computes with (recorded with every run, compared with a server's).
    pub fn settings(&self) -> &LogitSettings {
        &self.settings
    }

    /// The context size in tokens.
    pub fn n_ctx(&self) -> u32 {
        self.n_ctx
    }

    /// The tokens decoded so far (prompt and generated).
    pub fn tokens(&self) -> &[u32] {
        &self.tokens
    }

    /// Forgets everything decoded: the context is empty again.
    pub fn clear(&mut self) {
        self.ctx.clear_kv_cache();
        self.tokens.clear();
        self.logits_index = None;
    }

    /// Keeps what the context already holds of `wanted` (the longest common prefix, but never
    /// all of it: the last wanted token is decoded again so that its logits exist) and forgets
    /// the rest; returns how many tokens are kept. Decode `wanted[kept..]` next. When the
    /// context cannot drop a tail (a model whose memory is not positional), or an earlier part
    /// of it is gone (a sliding-window cache that pruned it), it is cleared and 0 is returned.
    pub fn keep_prefix(&mut self, wanted: &[u32]) -> usize {
        let common = self
            .tokens
            .iter()
            .zip(wanted)
            .take_while(|(a, b)| a == b)
            .count();
        let keep = common.min(wanted.len().saturating_sub(1));
        if keep == 0 {
            self.clear();
            return 0;
        }
        if keep < self.tokens.len() {
            let removed = matches!(
                self.ctx
                    .clear_kv_cache_seq(Some(0), Some(keep as u32), None),
                Ok(true)
            );
            // Every kept position must still be in the cache (position 0 first).
            let whole = self.ctx.kv_cache_seq_pos_min(0) == 0
                && self.ctx.kv_cache_seq_pos_max(0) == keep as i32 - 1;
            if !(removed && whole) {
                self.clear();
                return 0;
            }
            self.tokens.truncate(keep);
        }
        self.logits_index = None;
        keep
    }

    /// Decodes `tokens` after what is already in the context (the prompt, or more of it);
    /// afterwards [`Session::logits`] are those of the last one.
    pub fn decode(&mut self, tokens: &[u32]) -> Result<(), LlmError> {
        if tokens.is_empty() {
            return Ok(());
        }
        let needed = self.tokens.len() + tokens.len();
        if needed > self.n_ctx as usize {
            return Err(LlmError::ContextFull {
                needed,
                n_ctx: self.n_ctx,
            });
        }
        let checked = tokens
            .iter()
            .map(|&t| self.model.check_token(t))
            .collect::<Result<Vec<LlamaToken>, _>>()?;
        self.logits_index = None;
        let total = checked.len();
        for piece in self.pieces(total) {
            let chunk = &checked[piece.clone()];
            self.batch.clear();
            let first = self.tokens.len() + piece.start;
            let decode_error = |reason: String| LlmError::Decode {
                path: self.model.spec().path.clone(),
                first,
                end: first + chunk.len(),
                n_ctx: self.n_ctx,
                reason,
            };
            for (i, &token) in chunk.iter().enumerate() {
                let last = piece.start + i + 1 == total;
                self.batch
                    .add(token, (first + i) as i32, &[0], last)
                    .map_err(|e| {
                        decode_error(format!(
                            "the batch has no room for token {} ({e})",
                            first + i
                        ))
                    })?;
            }
            self.ctx
                .decode(&mut self.batch)
                .map_err(|e| decode_error(decode_reason(&e)))?;
        }
        self.tokens.extend_from_slice(tokens);
        self.logits_index = Some(self.batch.n_tokens() - 1);
        Ok(())
    }

    /// The `llama_decode` calls for `count` more tokens, as ranges of them: batches of
    /// `n_batch`, and under [`PromptSplit::Checkpoints`] a cut where llama-server cuts to make a
    /// checkpoint (the last `4 + n_ubatch` and the last 4 tokens of what is decoded).
    fn pieces(&self, count: usize) -> Vec<std::ops::Range<usize>> {
        let start = self.tokens.len();
        let end = start + count;
        let mut cuts: Vec<usize> = match self.prompt_split {
            PromptSplit::Batches => Vec::new(),
            PromptSplit::Checkpoints => checkpoint_offsets(self.n_batch, self.n_ubatch)
                .iter()
                .filter_map(|&off| end.checked_sub(off as usize))
                .filter(|&at| at > start && at < end)
                .map(|at| at - start)
                .collect(),
        };
        cuts.push(count);
        cuts.sort_unstable();
        cuts.dedup();
        let batch = self.n_batch.min(self.n_ctx).max(1) as usize;
        let mut pieces = Vec::new();
        let mut from = 0;
        for cut in cuts {
            while from < cut {
                let to = (from + batch).min(cut);
                pieces.push(from..to);
                from = to;
            }
        }
        pieces
    }

    /// Decodes one more token (the one just chosen).
    pub fn feed(&mut self, token: u32) -> Result<(), LlmError> {
        self.decode(&[token])
    }

    /// The logits of the last decoded position, one per token id.
    pub fn logits(&self) -> Result<&[f32], LlmError> {
        let index = self.logits_index.ok_or(LlmError::NoLogits)?;
        let logits = self.ctx.get_logits_ith(index);
        if logits.len() != self.n_vocab {
            return Err(LlmError::LogitsSize {
                path: self.model.spec().path.clone(),
                position: self.tokens.len().saturating_sub(1),
                got: logits.len(),
                n_vocab: self.n_vocab,
            });
        }
        let nan = logits.iter().filter(|l| l.is_nan()).count();
        if nan > 0 {
            return Err(LlmError::NanLogits {
                path: self.model.spec().path.clone(),
                position: self.tokens.len().saturating_sub(1),
                nan,
                n_vocab: self.n_vocab,
            });
        }
        Ok(logits)
    }

    /// The highest-logit token among those `allowed` says yes to (ties: the lowest id), or
    /// `None` if it allows none.
    pub fn argmax(&self, allowed: impl Fn(u32) -> bool) -> Result<Option<u32>, LlmError> {
        Ok(super::sampling::argmax(self.logits()?, allowed))
    }
}

/// `llama_decode`'s failure in words, with what to do about it.
fn decode_reason(error: &llama_cpp_2::DecodeError) -> String {
    match error {
        llama_cpp_2::DecodeError::NoKvCacheSlot => {
            "no free slot in the KV cache (llama_decode returned 1); a larger context \
             (--context, or `context` in models.toml) or a shorter prompt leaves room"
                .to_owned()
        }
        llama_cpp_2::DecodeError::NTokensZero => {
            "the batch was empty (llama_decode returned -1)".to_owned()
        }
        llama_cpp_2::DecodeError::Unknown(2) => {
            "llama.cpp aborted the decode (llama_decode returned 2)".to_owned()
        }
        llama_cpp_2::DecodeError::Unknown(code) => format!(
            "llama_decode returned {code}, a fatal error (most often memory for the compute \
             buffers); a smaller context (--context, or `context` in models.toml) needs less"
        ),
    }
}
