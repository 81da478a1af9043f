//! llguidance (the constrained-decoding engine behind llama.cpp's `%llguidance`, vLLM and
//! SGLang) as a third mask engine, on the same vocabulary as toolrail and llama.cpp, for
//! comparisons and benchmarks. It is fed a JSON Schema directly (its own compiler), so its
//! masks can differ from the GBNF engines' where the two grammars differ; the differences are
//! counted and shown, never hidden.
//!
//! Special tokens: llguidance never matches them against text (it marks them with a 0xFF
//! byte), while llama.cpp's grammar sampler matches their text (`<eos>`, `<start_of_turn>`)
//! like any other piece; toolrail follows llama.cpp. Tokens whose piece is empty or starts with
//! NUL are masked by all three.

use std::sync::Arc;

use llguidance::api::TopLevelGrammar;
use llguidance::{Matcher, ParserFactory};
use serde_json::Value;
use toktrie::{ApproximateTokEnv, TokEnv, TokRxInfo, TokTrie};
use toolrail_engine::{TokenMask, TokenTable};

/// llguidance set up for one vocabulary (build once; compile grammars from it).
pub struct Llguidance {
    factory: ParserFactory,
    vocab_len: usize,
}

impl std::fmt::Debug for Llguidance {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Llguidance")
            .field("vocab_len", &self.vocab_len)
            .finish_non_exhaustive()
    }
}

impl Llguidance {
    /// llguidance for `table`'s vocabulary: token bytes as toolrail decodes them, end of
    /// generation at the first end-of-generation token. Errors are llguidance's, as text.
    pub fn new(table: &TokenTable) -> Result<Llguidance, String> {
        let n = table.len();
        let eos = (0..n as u32).find(|&id| table.is_eog(id)).unwrap_or(0);
        let words: Vec<Vec<u8>> = (0..n as u32)
            .map(|id| {
                let piece = table.piece(id);
                if table.is_eog(id) {
                    // special: never matched against text
                    let mut w = vec![TokTrie::SPECIAL_TOKEN_MARKER];
                    w.extend_from_slice(piece);
                    w
                } else {
                    piece.to_vec()
                }
            })
            .collect();
        let vocab_size = u32::try_from(n).map_err(|_| "vocabulary too large".to_owned())?;
        let trie = TokTrie::from(&TokRxInfo::new(vocab_size, eos), &words);
        let env: TokEnv = Arc::new(ApproximateTokEnv::new(trie));
        let mut factory = ParserFactory::new_simple(&env).map_err(|e| e.to_string())?;
        factory.quiet();
        Ok(Llguidance {
            factory,
            vocab_len: n,
        })
    }

    /// A matcher for values of `schema` (llguidance's own JSON Schema compiler).
    pub fn schema_matcher(&self, schema: &Value) -> Result<LlgMatcher, String> {
        let grammar = TopLevelGrammar::from_json_schema(schema.clone());
        let parser = self
            .factory
            .create_parser(grammar)
            .map_err(|e| e.to_string())?;
        let matcher = Matcher::new(Ok(parser));
        match matcher.get_error() {
            Some(e) => Err(e),
            None => Ok(LlgMatcher {
                matcher,
                vocab_len: self.vocab_len,
            }),
        }
    }
}

/// One llguidance grammar being followed token by token.
pub struct LlgMatcher {
    matcher: Matcher,
    vocab_len: usize,
}

impl std::fmt::Debug for LlgMatcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LlgMatcher").finish_non_exhaustive()
    }
}

impl LlgMatcher {
    /// The tokens allowed next, as a [`TokenMask`] (end of generation included where the
    /// grammar may end).
    pub fn mask(&mut self) -> Result<TokenMask, String> {
        let vob = self.matcher.compute_mask().map_err(|e| e.to_string())?;
        let mut mask = TokenMask::empty(self.vocab_len);
        vob.iter_set_entries(|id| {
            if id < self.vocab_len {
                mask.insert(id as u32);
            }
        });
        Ok(mask)
    }

    /// Advances by `token`.
    pub fn consume(&mut self, token: u32) -> Result<(), String> {
        self.matcher.consume_token(token).map_err(|e| e.to_string())
    }

    /// True if the grammar may end here.
    pub fn can_end(&mut self) -> bool {
        self.matcher.is_accepting().unwrap_or(false)
    }
}
