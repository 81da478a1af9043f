//! The recognizer: llama.cpp's stack semantics (`advance_stack`, `accept`, `accept_token`),
//! memoized. A [`State`] is a stack-set id plus a partial UTF-8 sequence; the [`Engine`] owns
//! the stacks and the caches, so a state costs 12 bytes to keep and nothing to clone.

use std::sync::Arc;

use rustc_hash::{FxHashMap, FxHashSet};

use super::stacks::{
    DEAD_SET, EMPTY_STACK, EXPLODED_SET, MAX_STEP_WORK, SetId, StackArena, StackId,
};
use super::utf8::{self, PartialUtf8, Utf8Step};
use toolrail_gbnf::charset::{CharSet, class_chars};
use toolrail_gbnf::{ElementKind, Grammar};

/// A point in recognition: which stacks are live and any UTF-8 sequence cut short.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct State {
    /// The live stacks.
    pub set: SetId,
    /// A UTF-8 sequence begun but not finished.
    pub partial: PartialUtf8,
}

impl State {
    /// True when no stack is left: every continuation is rejected.
    pub fn is_dead(self) -> bool {
        self.set == DEAD_SET || self.partial.is_invalid()
    }

    /// True when the grammar became too ambiguous to follow (a step over more than
    /// [`MAX_STEP_WORK`]).
    pub fn is_exploded(self) -> bool {
        self.set == EXPLODED_SET
    }
}

/// What may come next at a state.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Expected {
    /// Characters some stack accepts next.
    pub chars: CharSet,
    /// True if the input may end here.
    pub end: bool,
    /// Token elements on stack tops: `(negated, token id)`.
    pub tokens: Vec<(bool, u32)>,
}

impl Expected {
    /// One human description per alternative: `'{'`, `[0-9]`, `<[12]>`, `end of input`.
    pub fn describe(&self) -> Vec<String> {
        let mut out = self.chars.describe();
        for &(negated, id) in &self.tokens {
            out.push(if negated {
                format!("!<[{id}]>")
            } else {
                format!("<[{id}]>")
            });
        }
        if self.end {
            out.push("end of input".to_string());
        }
        out
    }
}

/// Working buffers of one [`Engine::step_set`] call, kept between calls.
#[derive(Clone, Debug, Default)]
struct StepScratch {
    stacks: Vec<StackId>,
    out: Vec<StackId>,
    present: SeenStacks,
    advanced: SeenStacks,
}

/// Buffers reused by [`Engine::expand`]: it runs for every new stack, and a fresh work list
/// and set each time cost more than the walk itself on deep input.
#[derive(Debug, Default)]
struct ExpandScratch {
    todo: Vec<StackId>,
    seen: SeenStacks,
}

/// Stacks met so far in one step: a short list searched linearly while small (most steps
/// touch a handful of stacks, where hashing costs more than it saves), a hash set beyond.
#[derive(Clone, Debug, Default)]
struct SeenStacks {
    few: Vec<StackId>,
    many: FxHashSet<StackId>,
}

/// How many stacks [`SeenStacks`] keeps in its list before it switches to its hash set.
const FEW_STACKS: usize = 64;

impl SeenStacks {
    /// Forgets every stack (keeps the buffers).
    fn clear(&mut self) {
        self.few.clear();
        self.many.clear();
    }

    /// Adds `stack`; true if it was not there yet.
    #[inline]
    fn insert(&mut self, stack: StackId) -> bool {
        if self.many.is_empty() {
            if self.few.contains(&stack) {
                return false;
            }
            if self.few.len() < FEW_STACKS {
                self.few.push(stack);
                return true;
            }
            self.many.extend(self.few.iter().copied());
        }
        self.many.insert(stack)
    }
}

/// A fresh [`Engine::numbering`].
fn fresh_numbering() -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

/// Runs one grammar; caches every stack expansion and every `(stack set, char)` transition.
#[derive(Debug)]
pub struct Engine {
    grammar: Arc<Grammar>,
    arena: StackArena,
    expansions: FxHashMap<StackId, (u32, u32)>,
    expansion_pool: Vec<StackId>,
    transitions: FxHashMap<u64, SetId>,
    /// Buffers reused by [`Engine::step_set`] (a memo miss allocates nothing once warm).
    scratch: StepScratch,
    /// Buffers reused by [`Engine::expand`].
    expand_scratch: ExpandScratch,
    initial: SetId,
    /// Work done by all steps so far (see [`MAX_STEP_WORK`]); memoized steps cost nothing.
    work_done: u64,
    /// See [`Engine::numbering`].
    numbering: u64,
}

impl Clone for Engine {
    /// A copy whose stack sets are numbered apart from the original's from now on (it gets its
    /// own [`Engine::numbering`]).
    fn clone(&self) -> Self {
        Engine {
            grammar: Arc::clone(&self.grammar),
            arena: self.arena.clone(),
            expansions: self.expansions.clone(),
            expansion_pool: self.expansion_pool.clone(),
            transitions: self.transitions.clone(),
            scratch: StepScratch::default(),
            expand_scratch: ExpandScratch::default(),
            initial: self.initial,
            work_done: self.work_done,
            numbering: fresh_numbering(),
        }
    }
}

impl Engine {
    /// An engine for `grammar`, with llama.cpp's initial stacks computed.
    pub fn new(grammar: Arc<Grammar>) -> Engine {
        let mut engine = Engine {
            grammar,
            arena: StackArena::default(),
            expansions: FxHashMap::default(),
            expansion_pool: Vec::new(),
            transitions: FxHashMap::default(),
            scratch: StepScratch::default(),
            expand_scratch: ExpandScratch::default(),
            initial: DEAD_SET,
            work_done: 0,
            numbering: fresh_numbering(),
        };
        engine.initial = engine.initial_set();
        engine
    }

    /// Identifies how this engine numbers its stack sets: unique per engine, renewed by
    /// [`Engine::compact`] and by cloning. Anything cached by [`SetId`] (masks) is only valid
    /// for the numbering it was computed under.
    pub fn numbering(&self) -> u64 {
        self.numbering
    }

    /// The grammar this engine runs.
    pub fn grammar(&self) -> &Arc<Grammar> {
        &self.grammar
    }

    /// The stacks and sets built so far.
    pub fn arena(&self) -> &StackArena {
        &self.arena
    }

    /// The state before any input.
    pub fn initial(&self) -> State {
        State {
            set: self.initial,
            partial: PartialUtf8::default(),
        }
    }

    /// The stacks of `state`, in llama.cpp's order.
    pub fn stacks(&self, state: State) -> &[StackId] {
        self.arena.set(state.set)
    }

    /// The element positions of `stack`, bottom first.
    pub fn stack_positions(&self, stack: StackId) -> Vec<u32> {
        self.arena.positions(stack)
    }

    /// The work done by every step so far (stacks examined plus expanded stacks visited; see
    /// [`MAX_STEP_WORK`]). Callers that walk an input bound the work per byte with it.
    pub fn work_done(&self) -> u64 {
        self.work_done
    }

    /// What the engine's memory grows with: the arena's [`StackArena::entries`] plus the memo
    /// tables (cached expansions and transitions). [`Engine::compact`] brings it back down.
    pub fn memory_entries(&self) -> usize {
        self.arena.entries() + self.expansion_pool.len() + 2 * self.transitions.len()
    }

    /// Forgets every stack, set and memo except what `state` needs, and returns `state` as it
    /// is in the fresh arena. Memory otherwise grows with every distinct state ever reached (a
    /// million nested objects take gigabytes); a caller that walks one input forward and keeps
    /// no other state (as [`crate::check::check_reader`] does) compacts when
    /// [`Engine::memory_entries`] gets large. Every other `State`, `SetId` and `StackId` from
    /// before is invalid afterwards (and masks memoized by a [`crate::MaskEngine`] with them).
    pub fn compact(&mut self, state: State) -> State {
        self.numbering = fresh_numbering();
        let (nodes, sets) = self.arena.sizes();
        // Room for about what survives (the caller compacts when memory has doubled since the
        // last time), so the indexes do not rehash their way up from nothing.
        let room = StackArena::with_capacity(nodes / 2, sets / 2);
        let old = std::mem::replace(&mut self.arena, room);
        self.expansions.clear();
        self.expansion_pool.clear();
        self.transitions.clear();
        let set = if state.set == DEAD_SET || state.set == EXPLODED_SET {
            state.set
        } else {
            // Copy each stack's nodes, sharing the ones already copied (iteratively: a stack may
            // be a million deep). Old ids are dense, so the old-to-new map is a vector: this
            // copy is most of the work of a walk into deep nesting.
            const NOT_COPIED: StackId = StackId::MAX;
            let mut copied: Vec<StackId> = vec![NOT_COPIED; nodes];
            copied[EMPTY_STACK as usize] = EMPTY_STACK;
            let mut stacks = Vec::with_capacity(old.set(state.set).len());
            let mut chain = Vec::new();
            for &stack in old.set(state.set) {
                chain.clear();
                let mut at = stack;
                while copied[at as usize] == NOT_COPIED {
                    chain.push(at);
                    at = old.pop(at);
                }
                let mut new = copied[at as usize];
                for &node in chain.iter().rev() {
                    let top = old.top(node).unwrap_or(u32::MAX);
                    new = self.arena.push(new, top);
                    copied[node as usize] = new;
                }
                stacks.push(new);
            }
            self.arena.intern_set(&stacks)
        };
        self.initial = self.initial_set();
        State {
            set,
            partial: state.partial,
        }
    }

    /// True if the input may end at `state` (some stack is empty, no UTF-8 sequence pending).
    pub fn can_end(&self, state: State) -> bool {
        state.partial.is_complete() && self.arena.set(state.set).contains(&EMPTY_STACK)
    }

    fn initial_set(&mut self) -> SetId {
        let grammar = Arc::clone(&self.grammar);
        let mut out = Vec::new();
        let mut present = SeenStacks::default();
        for start in grammar.alternatives(grammar.root()) {
            let stack = if grammar.is_end_of_sequence(start) {
                EMPTY_STACK
            } else {
                self.arena.push(EMPTY_STACK, start)
            };
            self.advance_into(stack, &mut out, &mut present);
        }
        self.arena.intern_set(&out)
    }

    /// `llama_grammar_advance_stack`: the stacks reachable from `stack` by expanding rule
    /// references, each ending on a terminal (or empty); cached per stack. Returns the range
    /// in the expansion pool and the stacks visited to compute it (0 when cached): a grammar
    /// of nested optional and repeated rules visits many rule references per stack it keeps,
    /// and that is work the ambiguity bound must count.
    fn expand(&mut self, stack: StackId) -> (u32, u32, usize) {
        if let Some(&(start, len)) = self.expansions.get(&stack) {
            return (start, len, 0);
        }
        let start = self.expansion_pool.len() as u32;
        let ExpandScratch { mut todo, mut seen } = std::mem::take(&mut self.expand_scratch);
        todo.clear();
        todo.push(stack);
        seen.clear();
        let mut visited = 0usize;
        while let Some(current) = todo.pop() {
            visited += 1;
            if !seen.insert(current) {
                continue;
            }
            let Some(pos) = self.arena.top(current) else {
                self.expansion_pool.push(current);
                continue;
            };
            let element = self.grammar.element(pos);
            match element.kind {
                ElementKind::RuleRef => {
                    let rest = self.arena.pop(current);
                    let base = if self.grammar.is_end_of_sequence(pos + 1) {
                        rest
                    } else {
                        self.arena.push(rest, pos + 1)
                    };
                    let mut sub = self.grammar.rule_start(element.value);
                    loop {
                        let next = if self.grammar.is_end_of_sequence(sub) {
                            base
                        } else {
                            self.arena.push(base, sub)
                        };
                        todo.push(next);
                        while !self.grammar.is_end_of_sequence(sub) {
                            sub += 1;
                        }
                        if self.grammar.element(sub).kind == ElementKind::Alt {
                            sub += 1;
                        } else {
                            break;
                        }
                    }
                }
                ElementKind::Char
                | ElementKind::CharNot
                | ElementKind::CharAny
                | ElementKind::Token
                | ElementKind::TokenNot => self.expansion_pool.push(current),
                // A stack never rests inside a class or on the end of an alternative: the
                // parser and `Grammar::from_rules` guarantee it. Drop such a stack if it appears.
                ElementKind::End
                | ElementKind::Alt
                | ElementKind::CharAlt
                | ElementKind::CharRngUpper => {}
            }
        }
        self.expand_scratch = ExpandScratch { todo, seen };
        let len = self.expansion_pool.len() as u32 - start;
        self.expansions.insert(stack, (start, len));
        (start, len, visited)
    }

    /// Adds the expansion of `stack` to `out` (skipping stacks in `present`); returns the
    /// number of expanded stacks visited plus, when the expansion was not cached, the stacks
    /// visited to compute it (the step's work).
    fn advance_into(
        &mut self,
        stack: StackId,
        out: &mut Vec<StackId>,
        present: &mut SeenStacks,
    ) -> usize {
        let (start, len, visited) = self.expand(stack);
        for i in start..start + len {
            let s = self.expansion_pool[i as usize];
            if present.insert(s) {
                out.push(s);
            }
        }
        len as usize + visited
    }

    /// `llama_grammar_match_char`: whether the class at `pos` accepts `c`, and the position after
    /// the class.
    #[inline]
    pub fn match_char(&self, pos: u32, c: u32) -> (bool, u32) {
        let elements = self.grammar.elements();
        let first = elements[pos as usize].kind;
        let positive = matches!(first, ElementKind::Char | ElementKind::CharAny);
        let mut found = false;
        let mut p = pos as usize;
        loop {
            if elements[p + 1].kind == ElementKind::CharRngUpper {
                found = found || (elements[p].value <= c && c <= elements[p + 1].value);
                p += 2;
            } else if elements[p].kind == ElementKind::CharAny {
                found = true;
                p += 1;
            } else {
                found = found || elements[p].value == c;
                p += 1;
            }
            if elements[p].kind != ElementKind::CharAlt {
                break;
            }
        }
        (found == positive, p as u32)
    }

    /// `llama_grammar_match_partial_char`: whether some completion of `partial` could be
    /// accepted by the class at `pos`.
    pub fn match_partial_char(&self, pos: u32, partial: PartialUtf8) -> bool {
        let elements = self.grammar.elements();
        let positive = matches!(
            elements[pos as usize].kind,
            ElementKind::Char | ElementKind::CharAny
        );
        let n_remain = i32::from(partial.n_remain);
        if n_remain < 0 || (n_remain == 1 && partial.value < 2) {
            return false;
        }
        let mut low = partial.value << (n_remain * 6);
        let high = low | ((1u32 << (n_remain * 6)) - 1);
        if low == 0 {
            if n_remain == 2 {
                low = 1 << 11;
            } else if n_remain == 3 {
                low = 1 << 16;
            }
        }
        let mut p = pos as usize;
        loop {
            if elements[p + 1].kind == ElementKind::CharRngUpper {
                if elements[p].value <= high && low <= elements[p + 1].value {
                    return positive;
                }
                p += 2;
            } else if elements[p].kind == ElementKind::CharAny {
                return true;
            } else {
                if low <= elements[p].value && elements[p].value <= high {
                    return positive;
                }
                p += 1;
            }
            if elements[p].kind != ElementKind::CharAlt {
                break;
            }
        }
        !positive
    }

    /// `llama_grammar_accept` for one code point over a whole set (memoized).
    pub fn step_set(&mut self, set: SetId, c: u32) -> SetId {
        if set == EXPLODED_SET {
            return EXPLODED_SET;
        }
        let key = (u64::from(set) << 32) | u64::from(c);
        if let Some(&next) = self.transitions.get(&key) {
            return next;
        }
        let StepScratch {
            mut stacks,
            mut out,
            mut present,
            mut advanced,
        } = std::mem::take(&mut self.scratch);
        stacks.clear();
        stacks.extend_from_slice(self.arena.set(set));
        out.clear();
        present.clear();
        // Stacks already advanced in this step: advancing one again adds nothing to `out`.
        advanced.clear();
        let mut work = 0usize;
        let mut exploded = false;
        for &stack in &stacks {
            work += 1;
            let Some(pos) = self.arena.top(stack) else {
                continue;
            };
            if self.grammar.element(pos).kind.is_token() {
                continue;
            }
            let (matched, after) = self.match_char(pos, c);
            if matched {
                let rest = self.arena.pop(stack);
                let next = if self.grammar.is_end_of_sequence(after) {
                    rest
                } else {
                    self.arena.push(rest, after)
                };
                if advanced.insert(next) {
                    work += self.advance_into(next, &mut out, &mut present);
                }
            }
            if work > MAX_STEP_WORK {
                exploded = true;
                break;
            }
        }
        self.work_done += work as u64;
        let next = if exploded {
            EXPLODED_SET
        } else {
            self.arena.intern_set(&out)
        };
        self.scratch = StepScratch {
            stacks,
            out,
            present,
            advanced,
        };
        self.transitions.insert(key, next);
        next
    }

    /// Accepts one code point.
    pub fn accept_char(&mut self, state: State, c: u32) -> State {
        State {
            set: self.step_set(state.set, c),
            partial: PartialUtf8::default(),
        }
    }

    /// Accepts one byte (code points complete across calls). Returns None if the byte is an
    /// invalid UTF-8 continuation or lead.
    #[inline]
    pub fn accept_byte(&mut self, state: State, byte: u8) -> Option<State> {
        match utf8::step(state.partial, byte) {
            Utf8Step::Char(c) => Some(self.accept_char(state, c)),
            Utf8Step::Pending(partial) => Some(State {
                set: state.set,
                partial,
            }),
            Utf8Step::Invalid => None,
        }
    }

    /// Accepts `bytes`; on failure returns the offset of the first byte of the code point that
    /// no stack accepts (or of the invalid byte), with the state just before it.
    pub fn feed(&mut self, mut state: State, bytes: &[u8]) -> Result<State, (usize, State)> {
        let mut char_start = 0;
        let mut before = state;
        for (i, &b) in bytes.iter().enumerate() {
            if state.partial.is_complete() {
                char_start = i;
                before = state;
            }
            match self.accept_byte(state, b) {
                Some(next) if next.set == EXPLODED_SET => return Err((char_start, next)),
                Some(next) if next.set != DEAD_SET => state = next,
                _ => return Err((char_start, before)),
            }
            if !state.partial.is_complete() && !self.partial_viable(state) {
                return Err((char_start, before));
            }
        }
        Ok(state)
    }

    /// True if some class on top of a stack accepts some value that the pending UTF-8 sequence
    /// can complete to. Sound, unlike llama.cpp's `match_partial_char`, which answers no for a
    /// negated class that excludes any value of the range (llama.cpp only uses that for masks).
    pub fn partial_viable(&self, state: State) -> bool {
        let n = u32::try_from(state.partial.n_remain).unwrap_or(0);
        if n == 0 {
            return false;
        }
        let low = state.partial.value << (n * 6);
        let high = low | ((1u32 << (n * 6)) - 1);
        self.arena.set(state.set).iter().any(|&s| {
            self.arena.top(s).is_some_and(|pos| {
                self.grammar.element(pos).kind.starts_char_class()
                    && self
                        .class_chars(pos)
                        .ranges()
                        .iter()
                        .any(|&(lo, hi)| lo <= high && low <= hi)
            })
        })
    }

    /// `llama_grammar_accept_token`: accepts token `token` whose text is `piece`. Each stack
    /// with a token on top matches the id; every other stack reads the piece's characters.
    /// Returns None where llama.cpp would throw (no stack survives).
    pub fn accept_token(&mut self, state: State, token: u32, piece: &[u8]) -> Option<State> {
        let (chars, partial) = utf8::decode(piece, state.partial);
        let stacks: Vec<StackId> = self.arena.set(state.set).to_vec();
        let mut out = Vec::new();
        let mut present = SeenStacks::default();
        for stack in stacks {
            let Some(pos) = self.arena.top(stack) else {
                continue;
            };
            let element = self.grammar.element(pos);
            if element.kind.is_token() {
                let matches = (element.kind == ElementKind::Token) == (element.value == token);
                if matches {
                    let rest = self.arena.pop(stack);
                    let next = if self.grammar.is_end_of_sequence(pos + 1) {
                        rest
                    } else {
                        self.arena.push(rest, pos + 1)
                    };
                    self.advance_into(next, &mut out, &mut present);
                }
            } else {
                let mut current = self.arena.intern_set(&[stack]);
                for &c in &chars {
                    current = self.step_set(current, c);
                    if current == EXPLODED_SET {
                        return Some(State {
                            set: EXPLODED_SET,
                            partial,
                        });
                    }
                    if current == DEAD_SET {
                        break;
                    }
                }
                for &s in self.arena.set(current) {
                    if present.insert(s) {
                        out.push(s);
                    }
                }
            }
        }
        if out.is_empty() || partial.is_invalid() {
            return None;
        }
        let set = if out.len() > MAX_STEP_WORK {
            EXPLODED_SET
        } else {
            self.arena.intern_set(&out)
        };
        Some(State { set, partial })
    }

    /// `llama_grammar_reject_candidates_for_stack` for one candidate: true if the stack
    /// rejects a token whose decoded code points are `chars` (ending in `partial`), with id
    /// `token`. This is the reference semantics of llama.cpp's mask, quirks included (a token
    /// element on top is compared by id even in the middle of a piece).
    ///
    /// llama.cpp recurses once per code point of the piece; this walk keeps the stacks still to
    /// try on a stack of its own (a piece of any length cannot overflow the thread's stack), in
    /// the same order, stopping at the first one that takes the rest of the piece.
    pub fn stack_rejects(
        &mut self,
        stack: StackId,
        chars: &[u32],
        partial: PartialUtf8,
        token: u32,
    ) -> bool {
        // (stack, how many code points of the piece it has read)
        let mut todo = vec![(stack, 0usize)];
        while let Some((stack, read)) = todo.pop() {
            let rest = &chars[read..];
            let rejects = match self.arena.top(stack) {
                None => !rest.is_empty() || partial.n_remain != 0,
                Some(pos) => {
                    let element = self.grammar.element(pos);
                    if element.kind.is_token() {
                        match rest.first() {
                            None => partial.n_remain != 0,
                            Some(_) => {
                                (element.kind == ElementKind::Token) != (element.value == token)
                            }
                        }
                    } else if let Some(&first) = rest.first() {
                        let (matched, after) = self.match_char(pos, first);
                        if matched {
                            let popped = self.arena.pop(stack);
                            let next = if self.grammar.is_end_of_sequence(after) {
                                popped
                            } else {
                                self.arena.push(popped, after)
                            };
                            let (start, len, visited) = self.expand(next);
                            self.work_done += visited as u64;
                            // Tried in the expansion's order: the first one is popped first.
                            for i in (start..start + len).rev() {
                                todo.push((self.expansion_pool[i as usize], read + 1));
                            }
                            continue;
                        }
                        true
                    } else {
                        partial.n_remain != 0 && !self.match_partial_char(pos, partial)
                    }
                }
            };
            if !rejects {
                return false;
            }
        }
        true
    }

    /// What may come next at `state`.
    pub fn expected(&self, state: State) -> Expected {
        let mut expected = Expected::default();
        for &stack in self.arena.set(state.set) {
            let Some(pos) = self.arena.top(stack) else {
                expected.end |= state.partial.is_complete();
                continue;
            };
            let element = self.grammar.element(pos);
            match element.kind {
                ElementKind::Token => expected.tokens.push((false, element.value)),
                ElementKind::TokenNot => expected.tokens.push((true, element.value)),
                _ => expected.chars.union_with(&self.class_chars(pos)),
            }
        }
        expected.tokens.sort_unstable();
        expected.tokens.dedup();
        expected
    }

    /// The code points accepted by the class starting at `pos`.
    pub fn class_chars(&self, pos: u32) -> CharSet {
        class_chars(&self.grammar, pos)
    }

    /// Number of cached transitions and expansions (for memory reporting).
    pub fn cache_sizes(&self) -> (usize, usize) {
        (self.transitions.len(), self.expansions.len())
    }
}
