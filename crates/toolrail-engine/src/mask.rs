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
//!
//! # Performance notes
//!
//! Gemma 3's vocabulary (262,144 tokens) makes a trie of 600,426 nodes. Measured with
//! `toolrail bench` in release on 2 shared cores (see the README for the figures of record):
//!
//! - **Memoized masks.** Masks are cached per `(stack set, pending UTF-8)`: every position
//!   inside one JSON string argument is the same stack set, so most tokens cost a hash
//!   lookup and a 32 KB copy (p50 0.01–0.2 ms).
//! - **Whole subtrees.** A cache miss used to walk every node the grammar allows: inside a JSON
//!   string that is 177k nodes and ~15 ms (a cold first mask, 40 ms). The set a code point
//!   leads to depends only on which character classes on top of the stacks match it
//!   (`TopClasses`). Each trie node carries a summary of the bytes below it (`Below`: the
//!   ASCII bytes, whether any byte is high, whether every path below is clean UTF-8, the
//!   depth). Where every class treats all of a subtree's code points alike, they all lead to
//!   one set; following that chain of sets as deep as the subtree goes decides the subtree at
//!   once: every token below is allowed if every set on the chain is alive (a set that absorbs
//!   the code points, like `[^"\\]*`, ends the chain early; a counted repetition like
//!   `[^"\\]{0,200}` or `[0-9]{0,15}` walks it), none if the first set is dead. The ids below a
//!   node are one contiguous run of `token_ids`, set without walking. Masks are unchanged (a
//!   token of `k` code points ends in the `k`-th set of the chain with nothing pending).
//! - High code points are "alike" only if every class on top matches all of
//!   U+0080..=U+10FFFF or none of it, and only where every path below decodes cleanly (no
//!   overlong form, nothing above U+10FFFF, no token ending inside a sequence: `AFTER_E0` and
//!   friends); anything else falls back to the walk.
//! - **High code points as one.** The walk steps a set by every code point it meets below a
//!   node it cannot decide at once, and Gemma's vocabulary holds ~20k distinct code points
//!   above U+007F: every fresh set inside a string (each key start, each string value in a
//!   new context, each prefix of a known property name beside `additionalProperties`) created
//!   ~20k transitions, 30–60 ms per cold mask, up to seconds. Where every class on top matches
//!   all of U+0080..=U+10FFFF or none of it (`TopClasses::high_alike`), those code points step
//!   as U+0080 does (one transition); values above U+10FFFF (lenient decoding) still step
//!   alone. Where the classes split the high range (patterns, `\u2028`-style exclusions),
//!   code points matched by the same subset of them step as one (`high_steps`; MaskBench's
//!   worst such state: 19,242 transitions → 126). An ASCII code point no class on top matches,
//!   or a high one where no class can, is dead without a transition; `partial_viable` is
//!   memoized per (set, pending bytes).
//!   `bench masks --engines toolrail,llguidance --limit 150 --seed 1` (release, load 8–12):
//!   toolrail mask p50/p90/p99/max 0.004/27.0/51.3/931 ms → 0.003/3.14/15.1/71.9 ms,
//!   first mask p50/p90/p99 0.88/14.1/117 → 0.74/7.36/41.0 ms; llguidance in the same runs
//!   0.270/0.537/9.56/115 and 0.264/0.345/8.35/37.9 ms; masks unchanged.
//! - **String bodies start at a frontier.** Subtrees holding a quote, a backslash or a
//!   control character (newlines in Gemma's whitespace tokens) are not uniform for a JSON
//!   string's class, so a cold mask inside a string used to walk into them. A *string body* is a
//!   stack set every code point but a few ASCII ones (its exceptions) takes to one same live set,
//!   with a class on top that takes every well-formed pending UTF-8 sequence (`string_body`):
//!   `[^"\\]*` (leading back to itself) or each position of `char{0,64}` (leading to the next;
//!   `body_chain` follows that chain until it absorbs, outlasts the vocabulary's longest piece,
//!   or ends in a set no non-exception code point goes on from). Along a trie path that reads
//!   only non-exception code points, cleanly encoded, the set is the chain's `d`-th, whatever the
//!   grammar; so per exception set, once per vocabulary, a `Frontier` holds the tokens of such
//!   paths with their depth and the first node of every other path (an exception at a character
//!   boundary, an overlong form, a value above U+10FFFF, a lenient lead byte). A cold mask at a
//!   string body then sets those tokens up to the chain's end and walks from the frontier only
//!   (Gemma: 500–20,000 entries instead of ~177k nodes). A frontier is built at the third cold
//!   mask meeting its exception set (`FRONTIER_AFTER`; building walks the whole trie, and each
//!   prefix of a known property name beside `additionalProperties` is its own exception set).
//!   `mask_replay dump150.json` (136 schemas, 28,032 positions, release, 2 shared cores),
//!   before → after, runs side by side: masks over 1 ms 6,078–6,163 → 3,005–3,056; replay
//!   13.0 → 8.6 s (quiet) and 19.1/20.8 → 10.9/11.7 s (loaded); mask p90/p99 1.85/3.33 →
//!   1.85/3.66 ms (quiet, within noise) and 2.92/4.54, 3.16/4.80 → 2.11/4.37, 2.08/5.11 ms
//!   (loaded). The p90/p99 masks left are mostly key starts and sets that are no body.
//!   `cargo run --release -p toolrail-engine --example frontier_check DUMP` compares every
//!   position's mask with and without frontiers on the real vocabulary (dump150.json: 28,032
//!   positions, 0 differing, 3,071 masks started at a frontier).
//!   `cargo run --release -p toolrail-engine --example mask_replay DUMP` (dump written by
//!   `toolrail-llm`'s `maskbench_dump` example) replays MaskBench through this engine alone and
//!   lists the slowest positions.
//! - **Frontiers below the root.** What was left were key starts (`{"`, `,"`) and the prefixes
//!   of known property names beside `additionalProperties`: their set is no body at the root,
//!   but one code point later it is (`char* "\""`), so every cold mask walked the whole string
//!   trie below a name's prefix, 20,000–70,000 nodes. A frontier also records which trie nodes
//!   are *interior* (reached through the body's code points only, cleanly, at a character
//!   boundary); below such a node its tokens (a run of `token_ids`) and its entries (a run of
//!   the entries, sorted by node) are exactly what a walk that finds the body there needs, with
//!   levels counted from the node (`Frontier::descend`). So the walk asks, at each node it
//!   enters with a new set, whether a body starts there (`Bodies::frontier_chain`) and then
//!   reads the subtree off the frontier. A set whose first code points lead into a body of
//!   another key (a name's prefix: `[^"\\\x00-\x1Fb]` beside the literal `b`, then the plain
//!   string) is read off that body's frontier too, with the first set's own exceptions (the
//!   literal's next letter) walked apart (`FrontierChain::skip`) and its entries stepped from
//!   the first set; never where that body's frontier would take code points above U+007F the
//!   first set does not.
//! - **Bodies of ASCII only.** Counted patterns (`[0-9A-Za-z]{8}` in a UUID, hex ids,
//!   `[0-9]*`) take no code point above U+007F, so they were no body and each position walked
//!   every alphanumeric path of the trie (5–20 ms). A set none of whose classes may match above
//!   U+007F is a body of its largest group of ASCII code points that the same classes match
//!   (at least `MIN_ASCII_BODY`): its frontier (`BodyKey::high` false) makes every high code
//!   point an entry. Counted chains' ends at the root read their tokens off per-level masks
//!   (`Frontier::upto`), and entries whose first byte no set of the chain takes are skipped
//!   without a step (lead bytes of overlong forms, which llama.cpp decodes to ASCII, excepted).
//!   Reference tests: `frontier_below_the_root_equals_reference`,
//!   `ascii_body_frontier_equals_reference` (each checked to fail under deliberate breakages:
//!   no skip, a chain's end off by one, levels not counted from the node, the first-level
//!   high-code-point rule dropped, high code points not exceptions, the overlong lead bytes
//!   filtered). `frontier_check dump150.json`: 28,032 positions, 0 differing, 7,564 masks
//!   started at a frontier and 73,865 subtrees below the root read off one.
//!   `mask_replay dump150.json` (release, 2 shared cores, runs side by side, before → after):
//!   at load 3–4.5 from other builds, replay 9.9–13.2 s → 1.6–1.9 s; mask p50 0.0025–0.0029 →
//!   0.0025–0.0027 ms, p90 2.05–2.37 → 0.084–0.099 ms, p99 4.08–6.20 → 0.48–0.56 ms; masks over
//!   1 ms 3,017–3,052 → 91–117 (at load 4.5–5: p99 6.68–12.6 → 0.64–0.79 ms, over 1 ms
//!   3,084–3,189 → 140–230). First masks (parse, engine, first mask) p50/p90/p99 0.49–0.57 /
//!   3.4–5.0 / 25.6–29.6 → 0.37–0.42 / 3.2–3.9 / 24.4–33.0 ms: parsing the grammar sets their
//!   tail (50–80 ms for two 40–95 KB grammars). What is left over 1 ms: key starts of large objects (each a
//!   few hundred new stack sets: the sets of a name trie are new at every key start, as the
//!   stacks below them differ), patterns that are no body (`char* [0-9A-Za-z]{6} char*`, time
//!   zones: 5–25 ms), classes that split the high range (`\u2028`-style exclusions beside
//!   `char`: up to 30–70 ms, the max), and first masks whose grammar takes 50–80 ms to parse.
//! - Set-up (trie + summaries + piece facts) is 75–230 ms for Gemma's vocabulary, depending on
//!   the machine's load.

use std::sync::Arc;

use rustc_hash::FxHashMap;

use super::recognizer::{Engine, State};
use super::stacks::{DEAD_SET, EMPTY_STACK, EXPLODED_SET, SetId};
use super::utf8::{self, PartialUtf8, Utf8Step};
use super::vocab::TokenTable;
use toolrail_gbnf::ElementKind;

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

    /// Forbids token `id`.
    fn remove(&mut self, id: u32) {
        if (id as usize) < self.len {
            self.bits[id as usize / 64] &= !(1 << (id % 64));
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
    /// One step took more than [`super::stacks::MAX_STEP_WORK`].
    #[error(
        "the grammar is too ambiguous at this point (one character takes more than 4,194,304 stack steps)"
    )]
    TooAmbiguous,
    /// Computing one mask took more stack steps than the mask engine's work limit
    /// ([`MASK_WORK_LIMIT`] unless set with [`MaskEngine::with_work_limit`]): a grammar that keeps
    /// thousands of stacks busy on every byte of every token would otherwise take minutes.
    #[error(
        "the grammar is too ambiguous at this point: computing the token mask took more than \
         {limit} stack steps (toolrail's work limit per mask) after {tokens} tokens were allowed"
    )]
    TooMuchWork {
        /// The limit that was passed.
        limit: u64,
        /// Tokens found allowed before the walk stopped.
        tokens: usize,
    },
    /// The state is already rejected.
    #[error("the grammar state is dead: no stack is left")]
    Dead,
}

/// Stack steps (the recognizer's [`Engine::work_done`]) one mask may take: a cold mask over a
/// 262,144-token vocabulary at a JSON value takes a few million; 2²⁶ is about one to three
/// seconds of work, so a near-cap ambiguous grammar stops there with [`MaskError::TooMuchWork`]
/// instead of running for minutes.
pub const MASK_WORK_LIMIT: u64 = 1 << 26;

/// How often the memo tables were emptied to keep memory bounded (see
/// [`MaskEngine::bound_memory`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Evictions {
    /// Times the cache of masks (and of the classes on top of stack sets) was emptied for being full.
    pub mask_cache: u64,
    /// Times the recognizer was compacted (its stacks and memo tables dropped but for the
    /// current state).
    pub engine: u64,
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
    /// Per node: what the bytes strictly below it are (for skipping whole subtrees).
    below: Vec<Below>,
    /// Per node: one past the last entry of `token_ids` in its subtree.
    token_end: Vec<u32>,
}

/// A summary of the bytes on the edges strictly below a trie node.
#[derive(Clone, Copy, Debug, Default)]
struct Below {
    /// The ASCII bytes (bit `b` for byte `b`).
    ascii: u128,
    /// Some byte is 0x80 or above.
    high: bool,
    /// Bit s: entered in decoder state s (see `AFTER_E0`), every path below is well-formed
    /// UTF-8 (no overlong form, nothing above U+10FFFF) and no token below ends inside a
    /// sequence.
    utf8_ok: u8,
    /// The most bytes on a path strictly below the node (saturating).
    depth: u8,
}

/// The decoder states the cleanliness bits track (bit index into `Below::utf8_ok`): 0 at a
/// character boundary, 1..=3 with that many continuation bytes of any value to read, and three
/// states whose next byte is restricted so that the code point is neither overlong nor above
/// U+10FFFF.
const AFTER_E0: u8 = 4;
const AFTER_F0: u8 = 5;
const AFTER_F4: u8 = 6;

/// The state a byte read at a character boundary leads to, if it starts (or is) a clean code
/// point in U+0000..=U+10FFFF.
fn boundary_next(byte: u8) -> Option<u8> {
    match byte {
        0x00..=0x7F => Some(0),
        0xC2..=0xDF => Some(1),
        0xE0 => Some(AFTER_E0),
        0xE1..=0xEF => Some(2),
        0xF0 => Some(AFTER_F0),
        0xF1..=0xF3 => Some(3),
        0xF4 => Some(AFTER_F4),
        _ => None,
    }
}

/// The state a byte read in decoder state `state` (1..=6) leads to, if it is allowed there.
fn continuation_next(state: u8, byte: u8) -> Option<u8> {
    match (state, byte) {
        (1..=3, 0x80..=0xBF) => Some(state - 1),
        (AFTER_E0, 0xA0..=0xBF) => Some(1),
        (AFTER_F0, 0x90..=0xBF) => Some(2),
        (AFTER_F4, 0x80..=0x8F) => Some(2),
        _ => None,
    }
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
        let (below, token_end) = summarize(&nodes);
        TokenTrie {
            nodes,
            token_ids,
            eog,
            vocab_len: table.len(),
            below,
            token_end,
        }
    }

    /// The ids of every token ending strictly below `node` (a contiguous run of `token_ids`:
    /// the nodes and the tokens are both in depth-first order).
    fn ids_below(&self, node: usize) -> &[u32] {
        let n = self.nodes[node];
        &self.token_ids[(n.first_token + n.token_count) as usize..self.token_end[node] as usize]
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

/// Bottom-up summaries of the trie (children have larger indices than their parent).
fn summarize(nodes: &[TrieNode]) -> (Vec<Below>, Vec<u32>) {
    let mut below = vec![Below::default(); nodes.len()];
    let mut token_end = vec![0u32; nodes.len()];
    // ok[n] bit s: every path from n, entered in decoder state s, is clean — tokens ending at
    // n included (they are clean only at a boundary, s = 0).
    let mut ok = vec![0u8; nodes.len()];
    for n in (0..nodes.len()).rev() {
        let node = nodes[n];
        let mut summary = Below::default();
        let mut end = node.first_token + node.token_count;
        let mut kids: u8 = 0b111_1111;
        let mut child = n + 1;
        while child < node.subtree_end as usize {
            let c = nodes[child];
            let b = below[child];
            if c.byte < 0x80 {
                summary.ascii |= 1u128 << c.byte;
            } else {
                summary.high = true;
            }
            summary.ascii |= b.ascii;
            summary.high |= b.high;
            summary.depth = summary.depth.max(b.depth.saturating_add(1));
            end = end.max(token_end[child]);
            for state in 0..7u8 {
                let next = if state == 0 {
                    boundary_next(c.byte)
                } else {
                    continuation_next(state, c.byte)
                };
                if next.is_none_or(|s| ok[child] & (1 << s) == 0) {
                    kids &= !(1 << state);
                }
            }
            child = c.subtree_end as usize;
        }
        summary.utf8_ok = kids;
        ok[n] = if node.token_count > 0 { kids & 1 } else { kids };
        below[n] = summary;
        token_end[n] = end;
    }
    (below, token_end)
}

/// What decides where one code point takes a stack set: the character classes on top of its
/// stacks. The set a code point leads to depends only on which of these classes match it (the
/// position after a class does not depend on the code point), so code points that every class
/// treats alike lead to the same set.
#[derive(Clone, Debug, Default)]
struct TopClasses {
    /// Per distinct class on top: the ASCII code points it matches (bit `c`), and whether it
    /// matches every code point in U+0080..=U+10FFFF (`Some(true)`), none (`Some(false)`) or
    /// some (`None`).
    classes: Vec<(u128, Option<bool>)>,
    /// Some stack has a token element on top (subtrees are then never skipped).
    token_top: bool,
    /// The ASCII code points some class on top matches: any other ASCII code point leads to
    /// the dead set, which the walk then knows without a transition.
    ascii_any: u128,
    /// Some class on top may match a code point above U+007F.
    high_any: bool,
    /// Every class on top matches all of U+0080..=U+10FFFF or none of it: every code point
    /// there leads to the set U+0080 leads to.
    high_alike: bool,
    /// The distinct positions of the classes on top (which of them match a code point decides
    /// the set it leads to).
    positions: Vec<u32>,
}

impl TopClasses {
    /// True if every class treats all of `below`'s code points alike: then they all lead to the
    /// same set. `below.high` stands for every code point above U+007F.
    fn uniform_over(&self, below: Below) -> bool {
        if self.token_top {
            return false;
        }
        self.classes.iter().all(|&(ascii, high)| {
            let hits = below.ascii & ascii;
            let ascii_alike = hits == 0 || hits == below.ascii;
            let high_alike = !below.high
                || match high {
                    None => false,
                    Some(h) => below.ascii == 0 || h == (hits != 0),
                };
            ascii_alike && high_alike
        })
    }
}

/// The ASCII code points the class at `pos` matches, and how it treats the code points above.
fn class_profile(engine: &Engine, pos: u32) -> (u128, Option<bool>) {
    let mut ascii = 0u128;
    for c in 0..128u32 {
        if engine.match_char(pos, c).0 {
            ascii |= 1u128 << c;
        }
    }
    let chars = engine.class_chars(pos);
    let covers = chars
        .ranges()
        .iter()
        .any(|&(lo, hi)| lo <= 0x80 && hi >= 0x10FFFF);
    let disjoint = chars
        .ranges()
        .iter()
        .all(|&(lo, hi)| hi < 0x80 || lo > 0x10FFFF);
    let high = if covers {
        Some(true)
    } else if disjoint {
        Some(false)
    } else {
        None
    };
    (ascii, high)
}

/// The longest chain of sets [`MaskEngine::compute`] follows to take a whole subtree at once.
const MAX_CHAIN: u8 = 64;

/// Per token: whether its (NUL-truncated) piece is valid UTF-8 from a clean start, and how many
/// whole code points it holds. Used for token elements met in the middle of a piece.
#[derive(Clone, Copy, Debug, Default)]
struct PieceInfo {
    valid: bool,
    chars: u32,
}

/// Stack sets whose top classes are kept at most (each entry is small; the table is emptied
/// with the mask cache).
const TOPS_LIMIT: usize = 1 << 16;

/// Computes masks for one grammar engine over one vocabulary, with a cache per state. Both the
/// work per mask ([`MASK_WORK_LIMIT`]) and the memo tables ([`MaskEngine::bound_memory`]) are
/// bounded.
#[derive(Debug)]
pub struct MaskEngine {
    table: Arc<TokenTable>,
    trie: TokenTrie,
    info: Vec<PieceInfo>,
    cache: FxHashMap<(SetId, PartialUtf8), TokenMask>,
    /// Bound on cached masks (each is vocab/8 bytes).
    cache_limit: usize,
    /// The [`Engine::numbering`] the caches below were filled under.
    numbering: Option<u64>,
    /// Per stack set met in a walk: the classes on top of its stacks.
    tops: FxHashMap<SetId, TopClasses>,
    /// Per grammar position of a class: its profile (see [`class_profile`]).
    profiles: FxHashMap<u32, (u128, Option<bool>)>,
    /// Per stack set and pending UTF-8 sequence met in a walk: [`Engine::partial_viable`]
    /// (which builds each top class's character set).
    viable_partials: FxHashMap<(SetId, PartialUtf8), bool>,
    /// Per stack set whose top classes split the high code points, and per subset of those
    /// classes (bits over `TopClasses::positions`): the code point stepped for every code point
    /// that exactly that subset matches.
    high_steps: FxHashMap<(SetId, u64), u32>,
    /// Per stack set met at the start of a mask (or on a string body's chain): where it is a
    /// string body (see [`string_body`]), its exceptions and the set its other code points
    /// lead to; else None.
    string_bodies: FxHashMap<SetId, Option<(BodyKey, SetId)>>,
    /// Per exception set of a string body: its trie frontier (depends on the vocabulary only).
    frontiers: FxHashMap<BodyKey, Frontier>,
    /// Per exception set without a frontier yet: the cold masks that met it (a frontier is
    /// built at the [`FRONTIER_AFTER`]-th: building one walks the whole trie).
    frontier_demand: FxHashMap<BodyKey, u32>,
    /// [`FRONTIER_AFTER`] unless set with [`MaskEngine::with_frontier_after`].
    frontier_after: u32,
    /// Masks computed from a string body's frontier so far.
    frontier_starts: u64,
    /// Subtrees below the root read off a string body's frontier so far.
    frontier_descents: u64,
    /// Stack steps one mask may take.
    work_limit: u64,
    /// Recognizer memory ([`Engine::memory_entries`]) above which [`Self::bound_memory`]
    /// compacts it.
    engine_memory_limit: usize,
    /// [`Engine::memory_entries`] right after the last compaction (the live state's size).
    kept_after_compact: usize,
    /// Memo evictions so far.
    evictions: Evictions,
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
            numbering: None,
            tops: FxHashMap::default(),
            profiles: FxHashMap::default(),
            viable_partials: FxHashMap::default(),
            high_steps: FxHashMap::default(),
            string_bodies: FxHashMap::default(),
            frontiers: FxHashMap::default(),
            frontier_demand: FxHashMap::default(),
            frontier_after: FRONTIER_AFTER,
            frontier_starts: 0,
            frontier_descents: 0,
            work_limit: MASK_WORK_LIMIT,
            engine_memory_limit: crate::check::STREAM_MEMORY_ENTRIES,
            kept_after_compact: 0,
            evictions: Evictions::default(),
        }
    }

    /// The same engine with another work limit per mask (stack steps; see [`MASK_WORK_LIMIT`]).
    pub fn with_work_limit(mut self, limit: u64) -> Self {
        self.work_limit = limit;
        self
    }

    /// The same engine with other memory bounds: at most `masks` cached masks, and the
    /// recognizer compacted by [`Self::bound_memory`] above `engine_entries`
    /// ([`Engine::memory_entries`]).
    pub fn with_memory_limits(mut self, masks: usize, engine_entries: usize) -> Self {
        self.cache_limit = masks.max(1);
        self.engine_memory_limit = engine_entries;
        self
    }

    /// The same engine building a string body's frontier at the `masks`-th cold mask that
    /// meets its exception set (see [`FRONTIER_AFTER`]; 1: at once, for tests).
    pub fn with_frontier_after(mut self, masks: u32) -> Self {
        self.frontier_after = masks;
        self
    }

    /// How often the memo tables were emptied so far.
    pub fn evictions(&self) -> Evictions {
        self.evictions
    }

    /// How many masks were computed from a string body's precomputed trie frontier (instead of
    /// a walk from the root) so far: for tests and profiling.
    pub fn frontier_starts(&self) -> u64 {
        self.frontier_starts
    }

    /// How many subtrees below the root were read off a string body's frontier (instead of
    /// walked) so far: for tests and profiling.
    pub fn frontier_descents(&self) -> u64 {
        self.frontier_descents
    }

    /// Keeps the recognizer's memory bounded while one input is walked forward (generation):
    /// when [`Engine::memory_entries`] is over the limit, compacts `engine` to what `state`
    /// needs and forgets every cached mask (their keys name the old stack sets), counting the
    /// eviction (a live state larger than the limit, from deep nesting, raises the threshold to
    /// twice its size, so the cost stays linear). Returns `state` as it is afterwards; every other state of `engine` is invalid
    /// once this compacts.
    pub fn bound_memory(&mut self, engine: &mut Engine, state: State) -> State {
        // Past the limit, and past twice what the last compaction kept: a live state larger
        // than the limit (deep nesting) is not copied again at every token.
        let threshold = self
            .engine_memory_limit
            .max(self.kept_after_compact.saturating_mul(2));
        if engine.memory_entries() <= threshold {
            return state;
        }
        self.evictions.engine += 1;
        self.cache.clear();
        self.tops.clear();
        self.viable_partials.clear();
        self.high_steps.clear();
        self.string_bodies.clear();
        let state = engine.compact(state);
        self.kept_after_compact = engine.memory_entries();
        state
    }

    /// Forgets every cached mask (call when the grammar changes: cache keys are per engine).
    pub fn clear_cache(&mut self) {
        self.cache.clear();
        self.tops.clear();
        self.viable_partials.clear();
        self.high_steps.clear();
        self.string_bodies.clear();
        self.profiles.clear();
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
        if self.numbering != Some(engine.numbering()) {
            // Cached masks and classes are keyed by another engine's (or numbering's) sets.
            self.clear_cache();
            self.numbering = Some(engine.numbering());
        }
        let key = (state.set, state.partial);
        if let Some(mask) = self.cache.get(&key) {
            return Ok(mask.clone());
        }
        let mask = self.compute(engine, state)?;
        if self.cache.len() >= self.cache_limit || self.tops.len() >= TOPS_LIMIT {
            self.cache.clear();
            self.tops.clear();
            self.viable_partials.clear();
            self.high_steps.clear();
            self.string_bodies.clear();
            self.evictions.mask_cache += 1;
        }
        if self.viable_partials.len() + self.high_steps.len() >= TOPS_LIMIT {
            // Kept apart: these tables filling up is no reason to drop the masks.
            self.viable_partials.clear();
            self.high_steps.clear();
            self.string_bodies.clear();
        }
        self.cache.insert(key, mask.clone());
        Ok(mask)
    }

    fn compute(&mut self, engine: &mut Engine, state: State) -> Result<TokenMask, MaskError> {
        let MaskEngine {
            table,
            trie,
            info,
            tops,
            profiles,
            viable_partials,
            high_steps,
            string_bodies,
            frontiers,
            frontier_demand,
            frontier_after,
            frontier_starts,
            frontier_descents,
            work_limit,
            ..
        } = self;
        let work_start = engine.work_done();
        let mut mask = TokenMask::empty(trie.vocab_len);
        if engine.stacks(state).contains(&EMPTY_STACK) {
            for &id in &trie.eog {
                mask.insert(id);
            }
        }
        // A pending UTF-8 sequence with a token element on top: rare; decide token by token.
        if !state.partial.is_complete() && has_token_top(engine, state.set) {
            for id in trie.tokens_below(0) {
                if reference_piece(engine, state, table.piece(id), id) {
                    mask.insert(id);
                }
                if engine.work_done() - work_start > *work_limit {
                    return Err(MaskError::TooMuchWork {
                        limit: *work_limit,
                        tokens: mask.count(),
                    });
                }
            }
        }
        let mut memo = StepMemo {
            engine,
            tops,
            profiles,
            viable_partials,
            high_steps,
        };
        let mut bodies = Bodies {
            string_bodies,
            frontiers,
            frontier_demand,
            frontier_after: *frontier_after,
            met: Vec::new(),
        };
        // Depth-first over the trie; each entry: node index, the state after its byte, and the
        // whole code points read so far.
        let mut todo: Vec<WalkEntry> = vec![(0, state.set, state.partial, 0, true)];
        while let Some((node, set, partial, chars_read, entered)) = todo.pop() {
            let node_info = trie.nodes[node];
            // Tokens ending here.
            if node_info.token_count > 0 && end_allows(memo.engine, set, partial) {
                for &id in &trie.token_ids[node_info.first_token as usize
                    ..(node_info.first_token + node_info.token_count) as usize]
                {
                    mask.insert(id);
                }
            }
            // A string body entered here, along a path of its code points from the root: the
            // subtree is read off its frontier. See "Performance notes" above.
            let body = if entered && partial.is_complete() && state.partial.is_complete() {
                bodies.frontier_chain(trie, &mut memo, set, (node, chars_read))
            } else {
                None
            };
            if let Some(chain) = body {
                if node == 0 {
                    *frontier_starts += 1;
                } else {
                    *frontier_descents += 1;
                }
                bodies.frontiers[&chain.key].descend(
                    trie,
                    &mut memo,
                    node,
                    chars_read,
                    (&chain.sets, chain.last),
                    chain.skip,
                    &mut mask,
                    &mut todo,
                )?;
                if memo.engine.work_done() - work_start > *work_limit {
                    return Err(MaskError::TooMuchWork {
                        limit: *work_limit,
                        tokens: mask.count(),
                    });
                }
                continue;
            }
            // A token element on top, met with code points still to read: the id alone decides
            // (for pieces valid to the end with at least one more whole code point).
            if state.partial.is_complete()
                && partial.is_complete()
                && top_classes(memo.engine, memo.tops, memo.profiles, set).token_top
            {
                for (negated, value) in token_tops(memo.engine, set) {
                    for id in trie.tokens_below(node) {
                        let PieceInfo { valid, chars } = info[id as usize];
                        if valid && chars > chars_read && (value == id) != negated {
                            mask.insert(id);
                        }
                    }
                }
            }
            // A subtree whose code points every class on top treats alike: they all lead to one
            // set, and so on down. Where that chain of sets stays alive as deep as the subtree
            // goes, every token below ends in a live set with nothing pending and is allowed;
            // where the first set is dead, none is. See "Performance notes" above.
            let end = node_info.subtree_end as usize;
            if end > node + 1 && partial.is_complete() {
                let below = trie.below[node];
                let clean = !below.high || below.utf8_ok & 1 != 0;
                if clean && below.depth <= MAX_CHAIN {
                    match uniform_chain(memo.engine, memo.tops, memo.profiles, set, below)? {
                        Chain::AllAllowed => {
                            for &id in trie.ids_below(node) {
                                mask.insert(id);
                            }
                            continue;
                        }
                        Chain::NoneAllowed => continue,
                        Chain::Mixed => {}
                    }
                }
            }
            // Children (see `child_state`).
            let mut child = node + 1;
            while child < end {
                let c = trie.nodes[child];
                let next = memo.child_state((set, partial), c.byte)?;
                if memo.engine.work_done() - work_start > *work_limit {
                    return Err(MaskError::TooMuchWork {
                        limit: *work_limit,
                        tokens: mask.count(),
                    });
                }
                if let Some((next, p, read)) = next {
                    todo.push((child, next, p, chars_read + read, next != set));
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

/// Where one byte takes the walk from `(set, partial)`: the next set, the pending sequence and
/// the whole code points read (0 or 1), or None where no token below can be allowed.
///
/// A code point no class on top matches leads to the dead set: known without a transition
/// (most children, next to a literal). Code points in U+0080..=U+10FFFF that every class treats
/// alike all step as U+0080 does: one transition instead of one per distinct code point of the
/// vocabulary (about 20,000 for Gemma's), which made every first mask inside a string cold.
fn child_state(
    engine: &mut Engine,
    tops: &mut FxHashMap<SetId, TopClasses>,
    profiles: &mut FxHashMap<u32, (u128, Option<bool>)>,
    viable_partials: &mut FxHashMap<(SetId, PartialUtf8), bool>,
    high_steps: &mut FxHashMap<(SetId, u64), u32>,
    (set, partial): (SetId, PartialUtf8),
    byte: u8,
) -> Result<Option<(SetId, PartialUtf8, u32)>, MaskError> {
    match utf8::step(partial, byte) {
        Utf8Step::Char(cp) => {
            let (ascii_any, high_any, high_alike) = {
                let t = top_classes(engine, tops, profiles, set);
                (t.ascii_any, t.high_any, t.high_alike)
            };
            let matched = if cp < 128 {
                ascii_any & (1u128 << cp) != 0
            } else {
                high_any
            };
            if !matched {
                return Ok(None);
            }
            let step_as = if cp < 0x80 {
                cp
            } else if high_alike && cp <= 0x10FFFF {
                0x80
            } else {
                // The classes on top split the high range: code points matched by the same
                // classes still lead to one set.
                let positions = &top_classes(engine, tops, profiles, set).positions;
                if positions.len() <= 64 {
                    let mut matched = 0u64;
                    for (i, &pos) in positions.iter().enumerate() {
                        if engine.match_char(pos, cp).0 {
                            matched |= 1 << i;
                        }
                    }
                    *high_steps.entry((set, matched)).or_insert(cp)
                } else {
                    cp
                }
            };
            let next = engine.step_set(set, step_as);
            if next == EXPLODED_SET {
                return Err(MaskError::TooAmbiguous);
            }
            Ok((next != DEAD_SET).then_some((next, PartialUtf8::default(), 1)))
        }
        Utf8Step::Pending(p) => {
            let viable = *viable_partials
                .entry((set, p))
                .or_insert_with(|| engine.partial_viable(State { set, partial: p }));
            Ok(viable.then_some((set, p, 0)))
        }
        Utf8Step::Invalid => Ok(None),
    }
}

/// A node the walk is to visit: its index, the state after its byte, the whole code points read
/// from the root, and whether the set changed on the way (the walk then asks whether a string
/// body starts there).
type WalkEntry = (usize, SetId, PartialUtf8, u32, bool);

/// The recognizer and the memo tables a walk steps stack sets with.
struct StepMemo<'a> {
    engine: &'a mut Engine,
    tops: &'a mut FxHashMap<SetId, TopClasses>,
    profiles: &'a mut FxHashMap<u32, (u128, Option<bool>)>,
    viable_partials: &'a mut FxHashMap<(SetId, PartialUtf8), bool>,
    high_steps: &'a mut FxHashMap<(SetId, u64), u32>,
}

impl StepMemo<'_> {
    /// See [`child_state`].
    fn child_state(
        &mut self,
        from: (SetId, PartialUtf8),
        byte: u8,
    ) -> Result<Option<(SetId, PartialUtf8, u32)>, MaskError> {
        child_state(
            self.engine,
            self.tops,
            self.profiles,
            self.viable_partials,
            self.high_steps,
            from,
            byte,
        )
    }
}

/// The string-body tables one mask computation uses (see [`MaskEngine::string_bodies`]).
struct Bodies<'a> {
    string_bodies: &'a mut FxHashMap<SetId, Option<(BodyKey, SetId)>>,
    frontiers: &'a mut FxHashMap<BodyKey, Frontier>,
    frontier_demand: &'a mut FxHashMap<BodyKey, u32>,
    frontier_after: u32,
    /// Exception sets whose demand this mask counted already.
    met: Vec<BodyKey>,
}

impl Bodies<'_> {
    /// Where `set`, met at trie node `node` after `base` code points (the root: `(0, 0)`), is a
    /// string body whose frontier serves the node's subtree: its exceptions (the key of its
    /// frontier, built here once enough masks asked for it) and its chain of sets (see
    /// [`body_chain`]). None where the walk decides: no body, a chain that ends at its first step
    /// other than as `body_chain` asks (a known property name's first letters beside
    /// `additionalProperties`), no frontier yet, a node not interior to the frontier, or a
    /// chain whose end the frontier's levels cannot tell.
    fn frontier_chain(
        &mut self,
        trie: &TokenTrie,
        memo: &mut StepMemo<'_>,
        set: SetId,
        (node, base): (usize, u32),
    ) -> Option<FrontierChain> {
        let (first, next) = string_body(
            memo.engine,
            memo.tops,
            memo.profiles,
            self.string_bodies,
            set,
        )?;
        let direct = body_chain_goes_on(
            memo.engine,
            memo.tops,
            memo.profiles,
            self.string_bodies,
            (set, next),
            first,
        );
        // Else a first step into a body of another kind (a known property name's letters
        // beside `additionalProperties`: every other code point goes on to the plain string).
        let (key, after) = if direct {
            (first, next)
        } else {
            let (key, after) = string_body(
                memo.engine,
                memo.tops,
                memo.profiles,
                self.string_bodies,
                next,
            )?;
            let goes_on = body_chain_goes_on(
                memo.engine,
                memo.tops,
                memo.profiles,
                self.string_bodies,
                (next, after),
                key,
            );
            // The frontier's first level must not take a code point above U+007F that the
            // first set does not take as its other code points (the walk only sees ASCII apart).
            if !goes_on || (key.high && !first.high) {
                return None;
            }
            (key, after)
        };
        if !self.frontiers.contains_key(&key) {
            if self.met.contains(&key) {
                return None;
            }
            self.met.push(key);
            if self.frontier_demand.len() >= TOPS_LIMIT {
                self.frontier_demand.clear();
            }
            let met = self.frontier_demand.entry(key).or_insert(0);
            *met += 1;
            if *met < self.frontier_after {
                return None;
            }
            if self.frontiers.len() >= FRONTIERS_LIMIT {
                // The least used goes (the plain JSON string's stays).
                let least = self
                    .frontiers
                    .iter()
                    .min_by_key(|(_, f)| f.uses)
                    .map(|(&k, _)| k);
                if let Some(least) = least {
                    self.frontiers.remove(&least);
                }
            }
            self.frontiers.insert(key, Frontier::new(trie, key));
        }
        let frontier = self.frontiers.get_mut(&key)?;
        if !frontier.is_interior(node) {
            return None;
        }
        frontier.uses += 1;
        let depth = frontier.max_depth().saturating_sub(base);
        let (sets, last) = if direct {
            body_chain(
                memo.engine,
                memo.tops,
                memo.profiles,
                self.string_bodies,
                (set, next),
                key,
                depth,
            )?
        } else {
            let (rest, last) = body_chain(
                memo.engine,
                memo.tops,
                memo.profiles,
                self.string_bodies,
                (next, after),
                key,
                depth.saturating_sub(1),
            )?;
            let mut sets = Vec::with_capacity(rest.len() + 1);
            sets.push(set);
            sets.extend(rest);
            (sets, last.map(|j| j + 1))
        };
        frontier.level_fits(base, last).then_some(FrontierChain {
            key,
            skip: first.exceptions & !key.exceptions,
            sets,
            last,
        })
    }
}

/// What [`Bodies::frontier_chain`] found: the frontier to read (by its key), the chain of
/// sets (see [`body_chain`]), and the ASCII code points the chain's first set treats apart from
/// the frontier's other code points (read by the walk, not off the frontier).
struct FrontierChain {
    key: BodyKey,
    skip: u128,
    sets: Vec<SetId>,
    last: Option<u32>,
}

/// What makes a set a string body (see [`string_body`]), and keys its frontier: the ASCII code
/// points apart (`exceptions`), and whether the code points above U+007F go on as the others
/// (`high`: `[^"\\]`, `.`) or are apart too (`[0-9A-Za-z]`: no class on top takes them).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct BodyKey {
    exceptions: u128,
    high: bool,
}

/// Body keys whose frontiers are kept at most (each holds up to 17 masks, a byte per token, a
/// bit per trie node and a node list: about 0.9 MB for a vocabulary of 262,144 tokens; MaskBench's
/// first 150 schemas use 21). The least used is dropped first.
const FRONTIERS_LIMIT: usize = 32;

/// Cold masks at string bodies with one exception set before its frontier is built (the walk
/// from the root serves the first ones): a grammar meets many exception sets once (each prefix
/// of a known property name beside `additionalProperties` is one), and building a frontier
/// costs about as much as a few walks.
pub const FRONTIER_AFTER: u32 = 3;

/// The highest level [`Frontier::levels`] holds as such (deeper tokens are kept at this level,
/// and a chain ending at or past it, short of the deepest token, is left to the walk).
const LEVEL_CAP: u8 = 254;

/// A string body's trie frontier, for one [`BodyKey`] (computed once per vocabulary and key). A
/// string body is a stack set that every code point but the exceptions leads to one same set
/// (see [`string_body`]): along a trie path that reads only such code points, cleanly encoded,
/// the set follows the body's chain whatever the grammar is, so the tokens there are decided by
/// their depth alone. The walk only has to start at the first node of each path that leaves
/// that: an exception at a character boundary (any code point above U+007F where the key's
/// `high` is false), or a byte that makes the encoding unclean (an overlong form, a value above
/// U+10FFFF, a lenient lead byte).
#[derive(Clone, Debug)]
struct Frontier {
    /// The tokens whose piece reads only non-exception code points, cleanly (possibly ending
    /// inside a well-formed sequence).
    allowed: TokenMask,
    /// Per entry of the trie's `token_ids`: the token's level in `allowed` (the code points it
    /// reads, plus one where it ends inside a sequence: allowed where the chain of sets stays a
    /// string body for fewer code points than its level and the set after `level` code points is
    /// alive), or `u8::MAX` outside `allowed`.
    levels: Vec<u8>,
    /// Per level `l` below [`UPTO_LEVELS`] (and up to `max_level`): the tokens of `allowed`
    /// whose level is at most `l` (a counted chain's end at the root reads its tokens off one).
    upto: Vec<TokenMask>,
    /// The highest level in `levels`.
    max_level: u32,
    /// The most code points read before an entry or by a token of `allowed`, plus one.
    max_depth: u32,
    /// The frontier: a child node, the pending sequence before its byte and the whole code
    /// points read before it (the set there is the string body itself), by node (so the
    /// entries below one node are one run).
    entries: Vec<(u32, PartialUtf8, u32)>,
    /// Bit `n`: trie node `n` is reached from the root through non-exception code points only,
    /// cleanly encoded, and ends a code point. Below such a node the frontier's tokens and
    /// entries are what a walk that finds a string body with these exceptions there needs (see
    /// [`Frontier::descend`]).
    interior: Vec<u64>,
    /// Subtrees read off this frontier so far (the least used is dropped when too many are
    /// kept).
    uses: u64,
}

/// Levels a [`Frontier`] keeps a mask of the tokens up to (each is a mask over the vocabulary).
const UPTO_LEVELS: usize = 16;

impl Frontier {
    fn new(trie: &TokenTrie, key: BodyKey) -> Self {
        let mut allowed = TokenMask::empty(trie.vocab_len);
        let mut levels = vec![u8::MAX; trie.token_ids.len()];
        let mut max_level = 0u32;
        let mut entries = Vec::new();
        let mut interior = vec![0u64; trie.nodes.len().div_ceil(64)];
        // Depth-first: node, decoder state (see `AFTER_E0`), pending sequence, code points read.
        let mut todo: Vec<(usize, u8, PartialUtf8, u32)> = vec![(0, 0, PartialUtf8::default(), 0)];
        while let Some((node, clean, partial, chars_read)) = todo.pop() {
            let n = trie.nodes[node];
            if clean == 0 {
                interior[node / 64] |= 1 << (node % 64);
            }
            for &id in
                &trie.token_ids[n.first_token as usize..(n.first_token + n.token_count) as usize]
            {
                allowed.insert(id);
            }
            let level = chars_read + u32::from(clean != 0);
            if n.token_count > 0 {
                max_level = max_level.max(level);
                let first = n.first_token as usize;
                for slot in &mut levels[first..first + n.token_count as usize] {
                    *slot = level.min(u32::from(LEVEL_CAP)) as u8;
                }
            }
            let mut child = node + 1;
            while child < n.subtree_end as usize {
                let c = trie.nodes[child];
                let next_clean = if clean == 0 {
                    boundary_next(c.byte)
                } else {
                    continuation_next(clean, c.byte)
                };
                let exception = clean == 0
                    && if c.byte < 0x80 {
                        key.exceptions & (1u128 << c.byte) != 0
                    } else {
                        !key.high
                    };
                match (utf8::step(partial, c.byte), next_clean) {
                    // No set allows anything below an invalid byte.
                    (Utf8Step::Invalid, _) => {}
                    _ if exception => entries.push((child as u32, partial, chars_read)),
                    (Utf8Step::Char(_), Some(0)) => {
                        todo.push((child, 0, PartialUtf8::default(), chars_read + 1));
                    }
                    (Utf8Step::Pending(p), Some(next)) if next != 0 => {
                        todo.push((child, next, p, chars_read));
                    }
                    _ => entries.push((child as u32, partial, chars_read)),
                }
                child = c.subtree_end as usize;
            }
        }
        entries.sort_unstable_by_key(|e| e.0);
        let mut upto =
            vec![TokenMask::empty(trie.vocab_len); (max_level as usize + 1).min(UPTO_LEVELS)];
        for (&level, &id) in levels.iter().zip(&trie.token_ids) {
            if let Some(mask) = upto.get_mut(usize::from(level)) {
                mask.insert(id);
            }
        }
        for l in 1..upto.len() {
            let (below, at) = upto.split_at_mut(l);
            at[0].union_with(&below[l - 1]);
        }
        let max_depth = entries
            .iter()
            .map(|e| e.2)
            .max()
            .unwrap_or(0)
            .max(max_level + 1);
        Frontier {
            allowed,
            levels,
            upto,
            max_level,
            max_depth,
            entries,
            interior,
            uses: 0,
        }
    }

    /// True if `node` is interior to the frontier (see [`Frontier::interior`]).
    fn is_interior(&self, node: usize) -> bool {
        self.interior[node / 64] & (1 << (node % 64)) != 0
    }

    /// True if a chain of sets from an interior node `base` code points deep, ending at `last`,
    /// can be read off `levels` (capped at [`LEVEL_CAP`]): else the walk decides.
    fn level_fits(&self, base: u32, last: Option<u32>) -> bool {
        last.is_none_or(|j| j + base < u32::from(LEVEL_CAP) || j + base >= self.max_level)
    }

    /// From interior node `node`, `base` code points deep, at a string body whose chain of sets
    /// (see [`body_chain`]) is `sets` ending at `last`: adds to `mask` the tokens strictly below
    /// the node that read only non-exception code points up to the chain's end, and steps each
    /// frontier entry below the node from the chain's set at its depth, onto `todo` (as
    /// [`MaskEngine::compute`]'s walk does). At the root (`base` 0) this is the whole trie. The
    /// node's children whose byte is in `skip` (ASCII code points the chain's first set treats
    /// apart, see [`Bodies::frontier_chain`]) are stepped from the first set onto `todo`
    /// instead, with nothing below them read off the frontier.
    #[allow(clippy::too_many_arguments)]
    fn descend(
        &self,
        trie: &TokenTrie,
        memo: &mut StepMemo<'_>,
        node: usize,
        base: u32,
        (sets, last): (&[SetId], Option<u32>),
        skip: u128,
        mask: &mut TokenMask,
        todo: &mut Vec<WalkEntry>,
    ) -> Result<(), MaskError> {
        let n = trie.nodes[node];
        let upto = match last {
            _ if node != 0 => None,
            Some(j) if j < self.max_level => self.upto.get(j as usize),
            _ => Some(&self.allowed),
        };
        let whole = upto.is_some();
        if let Some(upto) = upto {
            mask.union_with(upto);
        }
        // What each set of the chain takes at all (an entry whose first byte none takes is dead,
        // known without a step), filled at the first entry met.
        let mut takes: Vec<(u128, bool)> = Vec::new();
        let limit = last.map_or(u32::MAX, |j| j + base);
        let mut entry = self.entries.partition_point(|e| (e.0 as usize) <= node);
        let mut child = node + 1;
        while child < n.subtree_end as usize {
            let c = trie.nodes[child];
            let tokens = c.first_token as usize..trie.token_end[child] as usize;
            // The entries below this child follow (a few at most: a linear scan).
            let mut entries_end = entry;
            while self
                .entries
                .get(entries_end)
                .is_some_and(|e| e.0 < c.subtree_end)
            {
                entries_end += 1;
            }
            if c.byte < 0x80 && skip & (1u128 << c.byte) != 0 {
                // Decided by the walk below the child (the frontier allows none of its tokens
                // but through the first set, which does not take this code point as the others).
                if whole {
                    for &id in &trie.token_ids[tokens] {
                        mask.remove(id);
                    }
                }
                if let Some((set, partial, read)) =
                    memo.child_state((sets[0], PartialUtf8::default()), c.byte)?
                {
                    todo.push((child, set, partial, base + read, set != sets[0]));
                }
            } else {
                if !whole {
                    for (&level, &id) in self.levels[tokens.clone()]
                        .iter()
                        .zip(&trie.token_ids[tokens])
                    {
                        if level != u8::MAX && u32::from(level) <= limit {
                            mask.insert(id);
                        }
                    }
                }
                for &(at_node, partial, chars_read) in &self.entries[entry..entries_end] {
                    let depth = chars_read - base;
                    if last.is_some_and(|j| depth > j) {
                        // Below the end of the chain: a code point that kills the set.
                        continue;
                    }
                    let level = (depth as usize).min(sets.len() - 1);
                    let byte = trie.nodes[at_node as usize].byte;
                    if partial.is_complete() {
                        if takes.is_empty() {
                            takes = sets
                                .iter()
                                .map(|&set| {
                                    let t = top_classes(memo.engine, memo.tops, memo.profiles, set);
                                    (t.ascii_any, t.high_any || t.token_top)
                                })
                                .collect();
                        }
                        let (ascii, high) = takes[level];
                        let taken = match byte {
                            0x00..=0x7F => ascii & (1u128 << byte) != 0,
                            // Lead bytes of code points above U+007F only (C0, C1, E0 and F0 may
                            // start overlong forms of ASCII, which llama.cpp decodes).
                            0xC2..=0xDF | 0xE1..=0xEF | 0xF1..=0xF4 => high,
                            _ => true,
                        };
                        if !taken {
                            continue;
                        }
                    }
                    if let Some((set, partial, read)) =
                        memo.child_state((sets[level], partial), byte)?
                    {
                        todo.push((
                            at_node as usize,
                            set,
                            partial,
                            chars_read + read,
                            set != sets[level],
                        ));
                    }
                }
            }
            entry = entries_end;
            child = c.subtree_end as usize;
        }
        Ok(())
    }

    /// The most code points read before a frontier entry or by a token of `allowed`.
    fn max_depth(&self) -> u32 {
        self.max_depth
    }
}

/// Where `set` is a string body: its key (the ASCII code points that need not lead where the
/// others do, and whether those above U+007F do) and the set every other code point leads to (memoized in `bodies`); else
/// None. A string body: no token element on top; every class on top matches all of
/// U+0080..=U+10FFFF or none of it, and at most 64 ASCII code points differ from that (every
/// other code point is matched by the same classes, so leads to the same set, alive); and some
/// class on top takes every well-formed pending sequence both ways llama.cpp asks
/// (`partial_viable`, which reads the class's characters, and `match_partial_char`, which reads
/// its ranges), so a token ending inside such a sequence is allowed and the walk would descend
/// below it. `[^"\\]*` is one (it leads back to itself), and so is each position of
/// `[^"\\]{0,64}` (each leads to the next). A body of ASCII only: no class on top may match a
/// code point above U+007F (they are all exceptions, `BodyKey::high` false), and at least
/// [`MIN_ASCII_BODY`] ASCII code points are matched by the same classes (the largest such group
/// are the body's code points, every other one an exception): each position of
/// `[0-9A-Za-z]{8}`, or `[0-9]*`.
fn string_body(
    engine: &mut Engine,
    tops: &mut FxHashMap<SetId, TopClasses>,
    profiles: &mut FxHashMap<u32, (u128, Option<bool>)>,
    bodies: &mut FxHashMap<SetId, Option<(BodyKey, SetId)>>,
    set: SetId,
) -> Option<(BodyKey, SetId)> {
    if let Some(&known) = bodies.get(&set) {
        return known;
    }
    let found = string_body_uncached(engine, tops, profiles, set);
    bodies.insert(set, found);
    found
}

fn string_body_uncached(
    engine: &mut Engine,
    tops: &mut FxHashMap<SetId, TopClasses>,
    profiles: &mut FxHashMap<u32, (u128, Option<bool>)>,
    set: SetId,
) -> Option<(BodyKey, SetId)> {
    let (key, step_as) = {
        let t = top_classes(engine, tops, profiles, set);
        if t.token_top {
            return None;
        }
        if !t.high_any {
            // No class takes a code point above U+007F: the body is the largest group of ASCII
            // code points the same classes match (`[0-9A-Za-z]` in `[0-9A-Za-z]{8}`).
            let group = largest_ascii_group(&t.classes)?;
            if group.count_ones() < MIN_ASCII_BODY {
                return None;
            }
            let key = BodyKey {
                exceptions: !group,
                high: false,
            };
            (key, group.trailing_zeros())
        } else {
            if !t.high_alike {
                return None;
            }
            let mut exceptions = 0u128;
            for &(ascii, high) in &t.classes {
                exceptions |= if high == Some(true) { !ascii } else { ascii };
            }
            if exceptions.count_ones() > 64 {
                return None;
            }
            (
                BodyKey {
                    exceptions,
                    high: true,
                },
                0x80,
            )
        }
    };
    let takes_partials = !key.high
        || engine.arena().set(set).iter().any(|&s| {
            engine.arena().top(s).is_some_and(|pos| {
                engine.grammar().element(pos).kind.starts_char_class()
                    && profiles.get(&pos).is_some_and(|p| p.1 == Some(true))
                    && takes_every_clean_partial(engine, pos)
            })
        });
    if !takes_partials {
        return None;
    }
    let next = engine.step_set(set, step_as);
    (next != DEAD_SET && next != EXPLODED_SET).then_some((key, next))
}

/// The fewest ASCII code points a body of ASCII only (no class on top takes a code point above
/// U+007F) gathers: fewer are a literal's few letters, which the walk decides at once.
const MIN_ASCII_BODY: u32 = 8;

/// The largest group of ASCII code points that some class on top matches and that every class
/// treats alike (they all lead to one set); None with more than 64 classes.
fn largest_ascii_group(classes: &[(u128, Option<bool>)]) -> Option<u128> {
    if classes.len() > 64 {
        return None;
    }
    let mut groups: Vec<(u64, u128)> = Vec::new();
    for c in 0..128u32 {
        let mut matched = 0u64;
        for (i, &(ascii, _)) in classes.iter().enumerate() {
            if ascii & (1u128 << c) != 0 {
                matched |= 1 << i;
            }
        }
        if matched == 0 {
            continue;
        }
        match groups.iter_mut().find(|g| g.0 == matched) {
            Some(group) => group.1 |= 1u128 << c,
            None => groups.push((matched, 1u128 << c)),
        }
    }
    groups
        .into_iter()
        .map(|(_, members)| members)
        .max_by_key(|members| members.count_ones())
}

/// The sets a string body's non-exception code points lead through, from `(start, next)` (a
/// body and where its code points lead): `sets[d]` after `d` of them (the last one stands for
/// every deeper level when the chain ends in None), and the chain's end: Some(`j`) where the
/// set after `j` code points is no body with these exceptions but no non-exception code point
/// goes on from it (the end of `[^"\\]{0,64}`), None where the chain absorbs the code points
/// or outlasts `max_depth`. None at all where the chain ends otherwise (the walk decides).
fn body_chain(
    engine: &mut Engine,
    tops: &mut FxHashMap<SetId, TopClasses>,
    profiles: &mut FxHashMap<u32, (u128, Option<bool>)>,
    bodies: &mut FxHashMap<SetId, Option<(BodyKey, SetId)>>,
    (start, next): (SetId, SetId),
    key: BodyKey,
    max_depth: u32,
) -> Option<(Vec<SetId>, Option<u32>)> {
    let mut sets = vec![start];
    let mut next = next;
    loop {
        let current = sets[sets.len() - 1];
        if sets.len() > max_depth as usize || next == current {
            return Some((sets, None));
        }
        sets.push(next);
        match string_body(engine, tops, profiles, bodies, next) {
            Some((k, after)) if k == key => next = after,
            _ => {
                let t = top_classes(engine, tops, profiles, next);
                let ends = !t.token_top && !t.high_any && t.ascii_any & !key.exceptions == 0;
                return ends.then_some((sets.clone(), Some(sets.len() as u32 - 1)));
            }
        }
    }
}

/// True if [`body_chain`] from `(start, next)` with `key` gives a chain (at depth 1), without
/// building it.
fn body_chain_goes_on(
    engine: &mut Engine,
    tops: &mut FxHashMap<SetId, TopClasses>,
    profiles: &mut FxHashMap<u32, (u128, Option<bool>)>,
    bodies: &mut FxHashMap<SetId, Option<(BodyKey, SetId)>>,
    (start, next): (SetId, SetId),
    key: BodyKey,
) -> bool {
    if next == start {
        return true;
    }
    match string_body(engine, tops, profiles, bodies, next) {
        Some((k, _)) if k == key => true,
        _ => {
            let t = top_classes(engine, tops, profiles, next);
            !t.token_top && !t.high_any && t.ascii_any & !key.exceptions == 0
        }
    }
}

/// True if llama.cpp's `match_partial_char` accepts every well-formed pending sequence (whose
/// completions all lie in U+0080..=U+10FFFF, U+13FFFF for a lone F4) at the class at `pos`: `.`,
/// a class with a range over all of U+0080..=U+10FFFF, or a negated class of ASCII only.
fn takes_every_clean_partial(engine: &Engine, pos: u32) -> bool {
    let elements = engine.grammar().elements();
    let negated = elements[pos as usize].kind == ElementKind::CharNot;
    let mut p = pos as usize;
    let mut covering = false;
    let mut all_ascii = true;
    loop {
        if elements[p + 1].kind == ElementKind::CharRngUpper {
            let (lo, hi) = (elements[p].value, elements[p + 1].value);
            covering |= lo <= 0x80 && hi >= 0x10FFFF;
            all_ascii &= hi < 0x80;
            p += 2;
        } else if elements[p].kind == ElementKind::CharAny {
            return !negated;
        } else {
            all_ascii &= elements[p].value < 0x80;
            p += 1;
        }
        if elements[p].kind != ElementKind::CharAlt {
            break;
        }
    }
    if negated { all_ascii } else { covering }
}

/// What a subtree's tokens come to when its code points are treated alike all the way down.
enum Chain {
    /// Every token below is allowed.
    AllAllowed,
    /// No token below is allowed (the first code point already kills the set).
    NoneAllowed,
    /// Not decided as a whole: walk the children.
    Mixed,
}

/// Follows the sets a subtree's code points lead to from `set`, level by level (see
/// [`TopClasses`]): decided when every level is uniform over the subtree's bytes.
fn uniform_chain(
    engine: &mut Engine,
    tops: &mut FxHashMap<SetId, TopClasses>,
    profiles: &mut FxHashMap<u32, (u128, Option<bool>)>,
    set: SetId,
    below: Below,
) -> Result<Chain, MaskError> {
    // A code point standing for all of the subtree's (they are alike at every level).
    let representative = if below.ascii != 0 {
        below.ascii.trailing_zeros()
    } else {
        0x80
    };
    let mut current = set;
    for level in 0..below.depth {
        if !top_classes(engine, tops, profiles, current).uniform_over(below) {
            return Ok(Chain::Mixed);
        }
        let next = engine.step_set(current, representative);
        if next == EXPLODED_SET {
            return Err(MaskError::TooAmbiguous);
        }
        if next == DEAD_SET {
            return Ok(if level == 0 {
                Chain::NoneAllowed
            } else {
                Chain::Mixed
            });
        }
        if next == current {
            // The set absorbs the subtree's code points: every deeper level is this one.
            return Ok(Chain::AllAllowed);
        }
        current = next;
    }
    Ok(Chain::AllAllowed)
}

/// The classes on top of `set`'s stacks (memoized per set, profiles per class position).
fn top_classes<'t>(
    engine: &Engine,
    tops: &'t mut FxHashMap<SetId, TopClasses>,
    profiles: &mut FxHashMap<u32, (u128, Option<bool>)>,
    set: SetId,
) -> &'t TopClasses {
    tops.entry(set).or_insert_with(|| {
        let mut out = TopClasses {
            high_alike: true,
            ..TopClasses::default()
        };
        for &stack in engine.arena().set(set) {
            let Some(pos) = engine.arena().top(stack) else {
                continue;
            };
            if engine.grammar().element(pos).kind.is_token() {
                out.token_top = true;
                continue;
            }
            let profile = *profiles
                .entry(pos)
                .or_insert_with(|| class_profile(engine, pos));
            out.ascii_any |= profile.0;
            out.high_any |= class_may_match_high(engine, pos);
            out.high_alike &= profile.1.is_some();
            if !out.positions.contains(&pos) {
                out.positions.push(pos);
            }
            if !out.classes.contains(&profile) {
                out.classes.push(profile);
            }
        }
        out
    })
}

/// True unless the class at `pos` surely matches no code point above U+007F (a negated class,
/// `.`, or any bound at or above 0x80 may; decoded values above U+10FFFF included).
fn class_may_match_high(engine: &Engine, pos: u32) -> bool {
    let elements = engine.grammar().elements();
    if elements[pos as usize].kind != ElementKind::Char {
        return true;
    }
    let mut p = pos as usize;
    loop {
        if elements[p].kind == ElementKind::CharAny || elements[p].value >= 0x80 {
            return true;
        }
        if elements[p + 1].kind == ElementKind::CharRngUpper {
            if elements[p + 1].value >= 0x80 {
                return true;
            }
            p += 2;
        } else {
            p += 1;
        }
        if elements[p].kind != ElementKind::CharAlt {
            return false;
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn trie_of(pieces: &[&[u8]]) -> TokenTrie {
        TokenTrie::new(&TokenTable::new(
            pieces.iter().map(|p| p.to_vec()).collect(),
            [],
        ))
    }

    #[test]
    fn tokens_below_a_node_are_one_contiguous_run() {
        let trie = trie_of(&[
            b"a",
            b"ab",
            b"abc",
            b"abd",
            b"b",
            b"ba",
            b"\xc3",
            b"\xc3\xa9",
            b"\xc3\xa9t",
            b"a",
        ]);
        for node in 0..trie.node_count() {
            let mut walked: Vec<u32> = trie.tokens_below(node).collect();
            let mut run = trie.ids_below(node).to_vec();
            walked.sort_unstable();
            run.sort_unstable();
            assert_eq!(walked, run, "node {node}");
        }
    }

    #[test]
    fn utf8_cleanliness_follows_the_decoder() {
        // Node 1 is the first child of the root in sorted order.
        let clean = trie_of(&[
            b"x\xc3\xa9",
            b"x\xe4\xb8\xad",
            b"x\xe0\xa4\x85",
            b"x\xf0\x9f\x98\x80",
        ]);
        let x = 1;
        assert_eq!(trie_of(&[b"x"]).nodes[x].byte, b'x');
        assert!(
            clean.below[x].utf8_ok & 1 != 0,
            "well-formed sequences are clean"
        );
        for bad in [
            &b"x\xc0\x80"[..],    // overlong
            b"x\xe0\x80\x80",     // overlong after E0
            b"x\xf4\x90\x80\x80", // above U+10FFFF
            b"x\xc3",             // a token ending inside a sequence
            b"x\x80",             // a stray continuation byte
        ] {
            let trie = trie_of(&[bad, b"x\xc3\xa9"]);
            assert!(trie.below[x].utf8_ok & 1 == 0, "{bad:02x?} is not clean");
        }
    }
}
