//! The `llama` engine: llama.cpp's own grammar sampler, made safe to drive from a debugger.
//!
//! llama.cpp's sampler has three ways to take the process down or wedge it, and this wrapper
//! closes each:
//!
//! - a grammar its parser rejects only gets a log line and a null sampler: the text is first
//!   checked by toolrail's parser ([`Grammar::parse_with`], with the model's vocabulary for
//!   `<token>` references), so llama.cpp only sees grammars toolrail accepts, and a null sampler
//!   still becomes an error;
//! - accepting end-of-generation while no grammar stack is complete is `GGML_ABORT`;
//! - accepting a token the grammar rejects throws (then the next apply asserts).
//!
//! [`LlamaGrammarSampler::accept`] therefore first applies the sampler to a one-element array
//! holding just that token — llama.cpp's own verdict, including the end-of-generation rule —
//! and only calls `try_accept` when the token survives. Nothing else advances the sampler, so
//! a token is never accepted twice.
//!
//! [`LlamaGrammarSampler::allowed`] is llama.cpp's mask over the whole vocabulary: the sampler
//! applied to an array of every token with logit 0, reading which stay finite. This is the
//! reference toolrail's own mask engine is compared with, and it costs what llama.cpp costs
//! (tens of milliseconds for a 262k vocabulary).

use llama_cpp_2::sampling::LlamaSampler;
use llama_cpp_2::token::LlamaToken;
use llama_cpp_2::token::data::LlamaTokenData;
use llama_cpp_2::token::data_array::LlamaTokenDataArray;

use super::error::LlmError;
use super::log;
use super::model::Model;
use toolrail_engine::TokenMask;
use toolrail_gbnf::{Grammar, TokenVocabulary};

/// llama.cpp's grammar sampler over one model, advanced only through checked accepts.
pub struct LlamaGrammarSampler {
    sampler: LlamaSampler,
    model: Model,
    /// The compiled grammar toolrail's parser made of the same text.
    grammar: Grammar,
    /// Tokens accepted so far.
    accepted: Vec<u32>,
    /// True once llama.cpp failed while accepting: its state is then unknown.
    poisoned: bool,
    /// Reused full-vocabulary array.
    scratch: Vec<LlamaTokenData>,
}

impl std::fmt::Debug for LlamaGrammarSampler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LlamaGrammarSampler")
            .field("accepted", &self.accepted.len())
            .field("poisoned", &self.poisoned)
            .finish_non_exhaustive()
    }
}

/// Why llama.cpp masks a token, as far as the piece alone tells.
fn rejection_reason(model: &Model, token: u32) -> String {
    if model.is_eog(token) {
        return "end of generation, but the grammar is not complete".to_owned();
    }
    let piece = model.piece(token);
    match piece.first() {
        None => "its piece is empty (llama.cpp's grammar sampler always masks it)".to_owned(),
        Some(0) => "its piece starts with a NUL byte (llama.cpp's grammar sampler always masks it)"
            .to_owned(),
        Some(_) => "the grammar does not allow it here".to_owned(),
    }
}

impl LlamaGrammarSampler {
    /// llama.cpp's grammar sampler for `text` with start rule `root`, after toolrail's parser
    /// has accepted the same text.
    pub fn new(model: &Model, text: &str, root: &str) -> Result<LlamaGrammarSampler, LlmError> {
        Self::checked(model, text, root, || {
            LlamaSampler::grammar(model.llama(), text, root)
        })
    }

    /// llama.cpp's lazy grammar sampler (what llama-server builds for a template's tool-call
    /// grammar): dormant, masking nothing, until one of `patterns` (searched in order in the
    /// generated text) matches or one of `tokens` is accepted. toolrail's parser checks the text
    /// first, as for [`LlamaGrammarSampler::new`].
    pub fn new_lazy(
        model: &Model,
        text: &str,
        root: &str,
        patterns: &[String],
        tokens: &[u32],
    ) -> Result<LlamaGrammarSampler, LlmError> {
        let ids: Vec<LlamaToken> = tokens
            .iter()
            .map(|&t| model.check_token(t))
            .collect::<Result<_, _>>()?;
        Self::checked(model, text, root, || {
            LlamaSampler::grammar_lazy_patterns(model.llama(), text, root, patterns, &ids)
        })
    }

    /// Parses `text` with toolrail's parser first (so llama.cpp never sees a grammar it would
    /// abort on), then builds llama.cpp's sampler with `build`, its log lines captured into the
    /// error when it refuses.
    fn checked<E: std::fmt::Display>(
        model: &Model,
        text: &str,
        root: &str,
        build: impl FnOnce() -> Result<LlamaSampler, E>,
    ) -> Result<LlamaGrammarSampler, LlmError> {
        let grammar = Grammar::parse_with(text, root, Some(model as &dyn TokenVocabulary))?;
        let (sampler, lines) = log::capture(build);
        let sampler = sampler.map_err(|e| {
            let reasons = log::reasons(&lines);
            LlmError::LlamaGrammar(if reasons.is_empty() {
                e.to_string()
            } else {
                format!("{e}: {}", reasons.join("; "))
            })
        })?;
        Ok(LlamaGrammarSampler {
            sampler,
            model: model.clone(),
            grammar,
            accepted: Vec::new(),
            poisoned: false,
            scratch: Vec::new(),
        })
    }

    /// The grammar as toolrail compiled it.
    pub fn grammar(&self) -> &Grammar {
        &self.grammar
    }

    /// The tokens accepted so far.
    pub fn accepted(&self) -> &[u32] {
        &self.accepted
    }

    fn check_usable(&self) -> Result<(), LlmError> {
        if self.poisoned {
            Err(LlmError::SamplerPoisoned)
        } else {
            Ok(())
        }
    }

    /// Applies llama.cpp's sampler to the whole vocabulary, all logits 0, and calls `allowed`
    /// with each token id that stays finite.
    fn apply_full(&mut self, mut allowed: impl FnMut(u32)) -> Result<(), LlmError> {
        self.check_usable()?;
        let n = self.model.n_vocab();
        let mut data = std::mem::take(&mut self.scratch);
        data.clear();
        data.extend((0..n as i32).map(|id| LlamaTokenData::new(LlamaToken(id), 0.0, 0.0)));
        let mut array = LlamaTokenDataArray::new(data, false);
        array.apply_sampler(&mut self.sampler);
        for entry in &array.data {
            if entry.logit().is_finite()
                && let Ok(id) = u32::try_from(entry.id().0)
            {
                allowed(id);
            }
        }
        self.scratch = array.data;
        Ok(())
    }

    /// llama.cpp's mask over the whole vocabulary in the current state, as toolrail's
    /// [`TokenMask`] (what the `toolrail` engine's masks are compared with).
    pub fn token_mask(&mut self) -> Result<TokenMask, LlmError> {
        let mut mask = TokenMask::empty(self.model.n_vocab());
        self.apply_full(|id| mask.insert(id))?;
        Ok(mask)
    }

    /// llama.cpp's mask over the whole vocabulary: `mask[id]` is true if token `id` is allowed.
    pub fn mask(&mut self) -> Result<Vec<bool>, LlmError> {
        let mut mask = vec![false; self.model.n_vocab()];
        self.apply_full(|id| {
            if let Some(slot) = mask.get_mut(id as usize) {
                *slot = true;
            }
        })?;
        Ok(mask)
    }

    /// The ids llama.cpp allows next, ascending.
    pub fn allowed(&mut self) -> Result<Vec<u32>, LlmError> {
        let mut ids = Vec::new();
        self.apply_full(|id| ids.push(id))?;
        ids.sort_unstable();
        Ok(ids)
    }

    /// Sets the logits of the tokens llama.cpp masks to `-inf` (`logits[id]` for token `id`).
    pub fn apply_to_logits(&mut self, logits: &mut [f32]) -> Result<(), LlmError> {
        let mask = self.mask()?;
        for (logit, ok) in logits.iter_mut().zip(mask) {
            if !ok {
                *logit = f32::NEG_INFINITY;
            }
        }
        Ok(())
    }

    /// llama.cpp's verdict on one token in the current state, without accepting it.
    pub fn allows(&mut self, token: u32) -> Result<bool, LlmError> {
        self.check_usable()?;
        let id = self.model.check_token(token)?;
        let mut one = LlamaTokenDataArray::new(vec![LlamaTokenData::new(id, 0.0, 0.0)], false);
        one.apply_sampler(&mut self.sampler);
        Ok(one.data.first().is_some_and(|d| d.logit().is_finite()))
    }

    /// True if the grammar may end here (llama.cpp would allow end of generation).
    pub fn can_end(&mut self) -> Result<bool, LlmError> {
        match self.model.eog_tokens().first() {
            Some(&eog) => self.allows(eog),
            None => Ok(false),
        }
    }

    /// Advances the grammar by `token` — after checking, on a one-element array, that llama.cpp
    /// allows it. A masked token (including end of generation before the grammar is complete)
    /// is refused with the reason and leaves the sampler as it was.
    pub fn accept(&mut self, token: u32) -> Result<(), LlmError> {
        if !self.allows(token)? {
            return Err(LlmError::TokenRejected {
                token,
                piece: String::from_utf8_lossy(&self.model.piece(token)).into_owned(),
                reason: rejection_reason(&self.model, token),
            });
        }
        let id = self.model.check_token(token)?;
        if let Err(e) = self.sampler.try_accept(id) {
            self.poisoned = true;
            return Err(LlmError::AcceptFailed {
                token,
                reason: e.to_string(),
            });
        }
        self.accepted.push(token);
        Ok(())
    }
}
