//! Shared by the tests that compare toolrail's masks with llama.cpp's on the real model: both
//! engines and a decoding session set up on one grammar and prompt, and one step's comparison.

use std::sync::Arc;
use std::time::Instant;

use toolrail_engine::{Engine, MaskEngine, State, TokenMask};
use toolrail_gbnf::{Grammar, TokenVocabulary};
use toolrail_llm::{LlamaGrammarSampler, Model, Session, SessionOptions};

/// toolrail's recognizer and masks, llama.cpp's grammar sampler and a session holding the
/// decoded prompt, all on the same grammar.
pub struct MaskPair<'m> {
    /// toolrail's recognizer.
    pub engine: Engine,
    /// toolrail's state after the tokens taken so far.
    pub state: State,
    /// toolrail's mask engine.
    pub masks: MaskEngine,
    /// llama.cpp's grammar sampler.
    pub llama: LlamaGrammarSampler,
    /// The context, with the prompt decoded.
    pub session: Session<'m>,
    /// Milliseconds spent in toolrail's masks, summed over the steps.
    pub toolrail_ms: f64,
    /// Milliseconds spent in llama.cpp's masks, summed over the steps.
    pub llama_ms: f64,
}

impl<'m> MaskPair<'m> {
    /// Sets both engines up on `grammar` (start rule `root`) and decodes `prompt` on one thread
    /// (ggml's spinning thread pool collapses when the cores are shared).
    pub fn new(model: &'m Model, grammar: &str, prompt: &str, context: u32) -> MaskPair<'m> {
        let compiled =
            Grammar::parse_with(grammar, "root", Some(model as &dyn TokenVocabulary)).unwrap();
        let engine = Engine::new(Arc::new(compiled));
        let state = engine.initial();
        let masks = MaskEngine::new(model.shared_token_table());
        let llama = LlamaGrammarSampler::new(model, grammar, "root").unwrap();
        let mut session = model
            .session(SessionOptions {
                context: Some(context),
                threads: Some(1),
                ..Default::default()
            })
            .unwrap();
        session.decode(&model.tokenize(prompt, true, true)).unwrap();
        MaskPair {
            engine,
            state,
            masks,
            llama,
            session,
            toolrail_ms: 0.0,
            llama_ms: 0.0,
        }
    }

    /// Both engines' masks at the current step, timed; returns (toolrail's, llama.cpp's).
    pub fn masks(&mut self) -> (TokenMask, TokenMask) {
        let started = Instant::now();
        let ours = self.masks.mask(&mut self.engine, self.state).unwrap();
        self.toolrail_ms += started.elapsed().as_secs_f64() * 1e3;
        let started = Instant::now();
        let theirs = self.llama.token_mask().unwrap();
        self.llama_ms += started.elapsed().as_secs_f64() * 1e3;
        (ours, theirs)
    }
}

/// How many tokens one mask allows and the other does not; prints the first few of each side
/// under `label` when there are any.
pub fn differing_tokens(ours: &TokenMask, theirs: &TokenMask, label: &str) -> usize {
    let diff = ours.difference_count(theirs);
    if diff > 0 {
        let only_ours: Vec<u32> = ours
            .iter()
            .filter(|&id| !theirs.contains(id))
            .take(8)
            .collect();
        let only_theirs: Vec<u32> = theirs
            .iter()
            .filter(|&id| !ours.contains(id))
            .take(8)
            .collect();
        eprintln!(
            "{label}: {diff} differ; toolrail only {only_ours:?}, llama.cpp only {only_theirs:?}"
        );
    }
    diff
}
