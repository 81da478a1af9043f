//! Token masks: which tokens llama.cpp's grammar sampler allows at a state, computed by walking
//! a byte trie of the vocabulary with the recognizer, memoized per state.
//!
//! The semantics are `llama_grammar_apply_impl` exactly, quirks included:
//! - an end-of-generation token is allowed iff some stack is empty;
//! - a token whose piece is empty or starts with NUL is never allowed; a piece is read up to its
//!   first NUL; a piece that is not valid UTF-8 (after the pending partial sequence) never is;
//! - a token is allowed iff some stack does not reject it, where a stack rejects a token by
//!   reading its code points one by one (`llama_grammar_reject_candidates_for_stack`);
//! - a piece that ends inside a UTF-8 sequence is allowed where some class *could* take the
//!   completion (llama.cpp's `match_partial_char`, which is conservative for negated classes);
//! - a stack with a token element on top, met with code points still to read, compares the
//!   token id and ignores the rest of the piece.
//!
//! [`MaskEngine::reference_allowed`] implements those rules token by token (slow, obviously
//! right); [`MaskEngine::mask`] gives the same answer by walking the trie once, pruning every
//! subtree whose prefix no stack accepts. Tests compare the two.

use std::sync::Arc;

use rustc_hash::FxHashMap;

use super::recognizer::{Engine, State};
use super::stacks::{DEAD_SET, EMPTY_STACK, EXPLODED_SET, SetId};
use super::utf8::{self, PartialUtf8, Utf8Step};
use super::vocab::TokenTable;
use crate::gbnf::ElementKind;

/// A set of allowed token ids, as a bitset over the vocabulary.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TokenMask {
    bits: Vec<u64>,
    len: usize,
}

impl TokenMask {
    /// No token allowed, for a vocabulary of `len` tokens.
    pub fn empty(len: usize) -> Self {
        TokenMask {
            bits: vec![0; len.div_ceil(64)],
            len,
        }
    }

    /// Allows token `id`.
    pub fn insert(&mut self, id: u32) {
        if (id as usize) < self.len {
            self.bits[id as usize / 64] |= 1 << (id % 64);
        }
    }

    /// True if token `id` is allowed.
    pub fn contains(&self, id: u32) -> bool {
        (id as usize) < self.len && self.bits[id as usize / 64] & (1 << (id % 64)) != 0
    }

    /// Number of allowed tokens.
    pub fn count(&self) -> usize {
        self.bits.iter().map(|w| w.count_ones() as usize).sum()
    }

    /// Vocabulary size the mask covers.
    pub fn vocab_len(&self) -> usize {
        self.len
    }

    /// The allowed ids, ascending.
    pub fn iter(&self) -> impl Iterator<Item = u32> + '_ {
        self.bits.iter().enumerate().flat_map(|(w, &bits)| {
            let mut bits = bits;
            std::iter::from_fn(move || {
                if bits == 0 {
                    return None;
                }
                let tz = bits.trailing_zeros();
                bits &= bits - 1;
                Some(w as u32 * 64 + tz)
            })
        })
    }

    /// Adds every token of `other`.
    pub fn union_with(&mut self, other: &TokenMask) {
        for (a, b) in self.bits.iter_mut().zip(&other.bits) {
            *a |= *b;
        }
    }

    /// Ids allowed by exactly one of the two masks (for comparing engines).
    pub fn difference_count(&self, other: &TokenMask) -> usize {
        self.bits
            .iter()
            .zip(&other.bits)
            .map(|(a, b)| (a ^ b).count_ones() as usize)
            .sum()
    }
}

/// Why a mask could not be computed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum MaskError {
    /// More than 65,536 stacks at once (see [`super::stacks::MAX_STACKS`]).
    #[error("the grammar is too ambiguous at this point (more than 65,536 live stacks)")]
    TooAmbiguous,
    /// The state is already rejected.
    #[error("the grammar state is dead: no stack is left")]
    Dead,
}

#[derive(Clone, Copy, Debug)]
struct TrieNode {
    byte: u8,
    /// One past the last node of this node's subtree (nodes are in depth-first order).
    subtree_end: u32,
    /// Tokens whose (NUL-truncated) piece ends exactly here: `token_ids[first..first + count]`.
    first_token: u32,
    token_count: u32,
}

/// The vocabulary's pieces as a flattened byte trie (depth-first order), built once per model.
#[derive(Clone, Debug)]
pub struct TokenTrie {
    nodes: Vec<TrieNode>,
    token_ids: Vec<u32>,
    /// Tokens that end generation.
    eog: Vec<u32>,
    /// Vocabulary size.
    vocab_len: usize,
}

impl TokenTrie {
    /// Builds the trie of every token that can ever be allowed by a character path (not EOG,
    /// piece non-empty and not starting with NUL), keyed by the piece up to its first NUL.
    pub fn new(table: &TokenTable) -> Self {
        let mut entries: Vec<(&[u8], u32)> = Vec::with_capacity(table.len());
        let mut eog = Vec::new();
        for id in 0..table.len() as u32 {
            if table.is_eog(id) {
                eog.push(id);
                continue;
            }
            if table.always_masked(id) {
                continue;
            }
            let piece = table.piece(id);
            let piece = piece
                .iter()
                .position(|&b| b == 0)
                .map_or(piece, |nul| &piece[..nul]);
            entries.push((piece, id));
        }
        entries.sort_unstable();
        // Build depth-first: the root is node 0 (no byte). `open` holds the path's node indices.
        let mut nodes = vec![TrieNode {
            byte: 0,
            subtree_end: 0,
            first_token: 0,
            token_count: 0,
        }];
        let mut token_ids = Vec::with_capacity(entries.len());
        let mut path: Vec<u8> = Vec::new();
        let mut open: Vec<usize> = vec![0];
        for (piece, id) in entries {
            let common = path.iter().zip(piece).take_while(|(a, b)| a == b).count();
            while path.len() > common {
                path.pop();
                if let Some(done) = open.pop() {
                    nodes[done].subtree_end = nodes.len() as u32;
                }
            }
            for &b in &piece[common..] {
                path.push(b);
                open.push(nodes.len());
                nodes.push(TrieNode {
                    byte: b,
                    subtree_end: 0,
                    first_token: token_ids.len() as u32,
                    token_count: 0,
                });
            }
            let here = open.last().copied().unwrap_or(0);
            if nodes[here].token_count == 0 {
                nodes[here].first_token = token_ids.len() as u32;
            }
            nodes[here].token_count += 1;
            token_ids.push(id);
        }
        let end = nodes.len() as u32;
        for done in open {
            nodes[done].subtree_end = end;
        }
        TokenTrie {
            nodes,
            token_ids,
            eog,
            vocab_len: table.len(),
        }
    }

    /// Number of trie nodes (for reporting).
    pub fn node_count(&self) -> usize {
        self.nodes.len()
    }

    /// Every token id in the subtree of `node` that ends strictly below it.
    fn tokens_below(&self, node: usize) -> impl Iterator<Item = u32> + '_ {
        (node + 1..self.nodes[node].subtree_end as usize).flat_map(move |n| {
            let t = self.nodes[n];
            self.token_ids[t.first_token as usize..(t.first_token + t.token_count) as usize]
                .iter()
                .copied()
        })
    }
}

/// Per token: whether its (NUL-truncated) piece is valid UTF-8 from a clean start, and how many
/// whole code points it holds. Used for token elements met in the middle of a piece.
#[derive(Clone, Copy, Debug, Default)]
struct PieceInfo {
    valid: bool,
    chars: u32,
}

/// Computes masks for one grammar engine over one vocabulary, with a cache per state.
#[derive(Debug)]
pub struct MaskEngine {
    table: Arc<TokenTable>,
    trie: TokenTrie,
    info: Vec<PieceInfo>,
    cache: FxHashMap<(SetId, PartialUtf8), TokenMask>,
    /// Bound on cached masks (each is vocab/8 bytes).
    cache_limit: usize,
}

impl MaskEngine {
    /// A mask engine over `table` (builds the trie: do it once per model and clone).
    pub fn new(table: Arc<TokenTable>) -> Self {
        let trie = TokenTrie::new(&table);
        let info = (0..table.len() as u32)
            .map(|id| {
                let piece = table.piece(id);
                let (chars, end) = utf8::decode(piece, PartialUtf8::default());
                PieceInfo {
                    valid: !end.is_invalid(),
                    chars: chars.len() as u32,
                }
            })
            .collect();
        MaskEngine {
            table,
            trie,
            info,
            cache: FxHashMap::default(),
            cache_limit: 4096,
        }
    }

    /// Forgets every cached mask (call when the grammar changes: cache keys are per engine).
    pub fn clear_cache(&mut self) {
        self.cache.clear();
    }

    /// The vocabulary.
    pub fn table(&self) -> &Arc<TokenTable> {
        &self.table
    }

    /// The trie.
    pub fn trie(&self) -> &TokenTrie {
        &self.trie
    }

    /// The tokens llama.cpp's grammar sampler allows at `state` (memoized).
    pub fn mask(&mut self, engine: &mut Engine, state: State) -> Result<TokenMask, MaskError> {
        if state.set == EXPLODED_SET {
            return Err(MaskError::TooAmbiguous);
        }
        if state.set == DEAD_SET {
            return Err(MaskError::Dead);
        }
        let key = (state.set, state.partial);
        if let Some(mask) = self.cache.get(&key) {
            return Ok(mask.clone());
        }
        let mask = self.compute(engine, state)?;
        if self.cache.len() >= self.cache_limit {
            self.cache.clear();
        }
        self.cache.insert(key, mask.clone());
        Ok(mask)
    }

    fn compute(&self, engine: &mut Engine, state: State) -> Result<TokenMask, MaskError> {
        let trie = &self.trie;
        let mut mask = TokenMask::empty(trie.vocab_len);
        if engine.stacks(state).contains(&EMPTY_STACK) {
            for &id in &trie.eog {
                mask.insert(id);
            }
        }
        // A pending UTF-8 sequence with a token element on top: rare; decide token by token.
        if !state.partial.is_complete() && has_token_top(engine, state.set) {
            for id in trie.tokens_below(0) {
                if reference_piece(engine, state, self.table.piece(id), id) {
                    mask.insert(id);
                }
            }
        }
        // Depth-first over the trie; each entry: node index, the state after its byte, and the
        // whole code points read so far.
        let mut todo: Vec<(usize, SetId, PartialUtf8, u32)> =
            vec![(0, state.set, state.partial, 0)];
        while let Some((node, set, partial, chars_read)) = todo.pop() {
            let info = trie.nodes[node];
            // Tokens ending here.
            if info.token_count > 0 && end_allows(engine, set, partial) {
                for &id in &trie.token_ids
                    [info.first_token as usize..(info.first_token + info.token_count) as usize]
                {
                    mask.insert(id);
                }
            }
            // A token element on top, met with code points still to read: the id alone decides
            // (for pieces valid to the end with at least one more whole code point).
            if state.partial.is_complete() && partial.is_complete() {
                for (negated, value) in token_tops(engine, set) {
                    for id in trie.tokens_below(node) {
                        let PieceInfo { valid, chars } = self.info[id as usize];
                        if valid && chars > chars_read && (value == id) != negated {
                            mask.insert(id);
                        }
                    }
                }
            }
            // Children.
            let mut child = node + 1;
            let end = info.subtree_end as usize;
            while child < end {
                let c = trie.nodes[child];
                match utf8::step(partial, c.byte) {
                    Utf8Step::Char(cp) => {
                        let next = engine.step_set(set, cp);
                        if next == EXPLODED_SET {
                            return Err(MaskError::TooAmbiguous);
                        }
                        if next != DEAD_SET {
                            todo.push((child, next, PartialUtf8::default(), chars_read + 1));
                        }
                    }
                    Utf8Step::Pending(p) => {
                        if engine.partial_viable(State { set, partial: p }) {
                            todo.push((child, set, p, chars_read));
                        }
                    }
                    Utf8Step::Invalid => {}
                }
                child = c.subtree_end as usize;
            }
        }
        Ok(mask)
    }

    /// The same verdict as [`Self::mask`] for one token, computed the slow, literal way.
    pub fn reference_allowed(&self, engine: &mut Engine, state: State, id: u32) -> bool {
        if self.table.is_eog(id) {
            return engine.stacks(state).contains(&EMPTY_STACK);
        }
        if self.table.always_masked(id) {
            return false;
        }
        reference_piece(engine, state, self.table.piece(id), id)
    }
}

/// llama.cpp's per-candidate rule applied literally: decode the piece after the pending
/// partial sequence and ask every stack.
fn reference_piece(engine: &mut Engine, state: State, piece: &[u8], id: u32) -> bool {
    let (chars, partial) = utf8::decode(piece, state.partial);
    let stacks: Vec<u32> = engine.stacks(state).to_vec();
    stacks
        .into_iter()
        .any(|s| !engine.stack_rejects(s, &chars, partial, id))
}

/// At the end of a piece: allowed iff some stack takes it (llama.cpp's rules for an exhausted
/// candidate: any stack when no UTF-8 sequence is pending, else a class that could complete it).
fn end_allows(engine: &Engine, set: SetId, partial: PartialUtf8) -> bool {
    if partial.is_invalid() {
        return false;
    }
    let stacks = engine.arena().set(set);
    if partial.is_complete() {
        return !stacks.is_empty();
    }
    stacks.iter().any(|&s| {
        engine.arena().top(s).is_some_and(|pos| {
            engine.grammar().element(pos).kind.starts_char_class()
                && engine.match_partial_char(pos, partial)
        })
    })
}

fn has_token_top(engine: &Engine, set: SetId) -> bool {
    !token_tops(engine, set).is_empty()
}

/// The token elements on top of the stacks of `set`: `(negated, token id)`.
fn token_tops(engine: &Engine, set: SetId) -> Vec<(bool, u32)> {
    let mut tops: Vec<(bool, u32)> = engine
        .arena()
        .set(set)
        .iter()
        .filter_map(|&s| engine.arena().top(s))
        .map(|pos| engine.grammar().element(pos))
        .filter(|e| e.kind.is_token())
        .map(|e| (e.kind == ElementKind::TokenNot, e.value))
        .collect();
    tops.sort_unstable();
    tops.dedup();
    tops
}
