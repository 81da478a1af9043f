//! The budget guard: keeps a constrained run able to finish its grammar within its token limit.
//!
//! A grammar can allow output longer than any budget (a number's fraction digits, a free
//! string), and a small model can loop there until the limit cuts the call in half. The guard
//! knows, for every recognizer state, how many tokens surely suffice to complete the grammar:
//! a literal (the characters of a quoted string in one sequence, such as `"\"name\": "`) costs
//! its fewest tokens when spelled with the vocabulary's own pieces, any other character one
//! token per byte, a token element one (a vocabulary with a token for every byte, as
//! byte-fallback vocabularies have, can always do it in that many). When the sampled token
//! would leave more to finish than tokens remain, the guard takes instead the most likely
//! allowed token that leaves few enough. Every step it takes brings the finish one token closer,
//! so the run ends with a complete grammar. Far from the limit it never intervenes: counting
//! literals by their spelling, not their bytes, is what keeps "far" honest (a 60-byte tool-call
//! preamble is about 15 tokens, not 60).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use super::lengths::{INFINITE, MinLengths, next_element};
use super::stacks::EMPTY_STACK;
use super::{Engine, State, TokenMask, TokenTable};
use toolrail_gbnf::charset::class_chars;
use toolrail_gbnf::{ElementKind, Grammar};

/// The fewest tokens that complete a grammar from each of its states.
#[derive(Clone, Debug)]
pub struct BudgetGuard {
    table: Arc<TokenTable>,
    /// Tokens that surely suffice from each element position to the end of its sequence.
    rest: Vec<u64>,
}

/// Why the guard replaced a sampled token.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Replacement {
    /// The token taken instead.
    pub token: u32,
    /// Tokens left, counting this step.
    pub tokens_left: u32,
    /// Tokens the sampled one would have needed to finish, itself included (`None`: after it
    /// the grammar could not be finished at all, e.g. an end of generation where the grammar
    /// cannot end).
    pub needed: Option<u64>,
}

/// Pieces longer than this are not used to spell literals (the count stays an upper bound).
const LONGEST_PIECE: usize = 48;
/// At most this many literal substrings are looked up in the vocabulary; literals past that
/// budget count one token per byte (a huge grammar must not cost unbounded memory).
const MOST_SUBSTRINGS: usize = 1 << 20;

/// A maximal sequence of single-character elements in one alternative.
struct Literal {
    /// The element position of each character.
    positions: Vec<u32>,
    /// The byte offset of each character in `bytes`.
    offsets: Vec<usize>,
    /// The characters, UTF-8.
    bytes: Vec<u8>,
    /// The position after the last character.
    after: u32,
}

/// How many of the most likely allowed tokens are tried, in order, before all of them are.
const FIRST_TRIES: usize = 256;

impl BudgetGuard {
    /// Prepares the guard for `grammar` (the grammar the engine runs) over the vocabulary
    /// `table`.
    pub fn new(grammar: &Grammar, table: Arc<TokenTable>) -> Self {
        let mut cost: Vec<u64> = (0..grammar.elements().len() as u32)
            .map(|pos| terminal_tokens(grammar, pos))
            .collect();
        let literals = literals(grammar);
        let spelled = fewest_tokens(&literals, &table);
        // A literal's whole cost sits on its first character for the rules' least costs...
        for (literal, tokens) in literals.iter().zip(&spelled) {
            for (k, &pos) in literal.positions.iter().enumerate() {
                cost[pos as usize] = if k == 0 { tokens[0] } else { 0 };
            }
        }
        let mut rest = MinLengths::new(grammar, |pos| cost[pos as usize]).rest_min;
        // ...and from inside a literal, what is left of it is spelled on its own.
        for (literal, tokens) in literals.iter().zip(&spelled) {
            let after = rest[literal.after as usize];
            for (&pos, &offset) in literal.positions.iter().zip(&literal.offsets) {
                rest[pos as usize] = tokens[offset].saturating_add(after).min(INFINITE);
            }
        }
        BudgetGuard { table, rest }
    }

    /// The fewest tokens that complete the grammar from `state` (None: it cannot be completed,
    /// as in a dead or exploded state).
    pub fn tokens_needed(&self, engine: &Engine, state: State) -> Option<u64> {
        if state.is_dead() || state.is_exploded() {
            return None;
        }
        let pending = u64::try_from(state.partial.n_remain).unwrap_or(0);
        let arena = engine.arena();
        let best = engine
            .stacks(state)
            .iter()
            .map(|&stack| {
                let mut total: u64 = 0;
                let mut node = stack;
                let mut top = true;
                while let Some(pos) = arena.top(node) {
                    let cost = if top && pending > 0 {
                        // A character is half read: its missing bytes, then what follows it.
                        let next = next_element(engine.grammar(), pos);
                        self.rest[next as usize].saturating_add(pending)
                    } else {
                        self.rest[pos as usize]
                    };
                    total = total.saturating_add(cost);
                    top = false;
                    node = arena.pop(node);
                }
                if stack == EMPTY_STACK && pending > 0 {
                    INFINITE
                } else {
                    total
                }
            })
            .min()
            .unwrap_or(INFINITE);
        (best < INFINITE).then_some(best)
    }

    /// True if taking `token` at `state` leaves a grammar that can be completed in
    /// `remaining - 1` tokens (`remaining` counts this step). An end-of-generation token fits
    /// when the grammar can end here.
    pub fn fits(&self, engine: &mut Engine, state: State, token: u32, remaining: u32) -> bool {
        self.needed_with(engine, state, token)
            .is_some_and(|n| n <= u64::from(remaining))
    }

    /// Tokens needed to finish if `token` is taken at `state`, itself included (`None`: the
    /// grammar could not be finished after it).
    pub fn needed_with(&self, engine: &mut Engine, state: State, token: u32) -> Option<u64> {
        if self.table.is_eog(token) {
            return engine.can_end(state).then_some(1);
        }
        let next = engine.accept_token(state, token, self.table.piece(token))?;
        self.tokens_needed(engine, next)
            .map(|n| n.saturating_add(1))
    }

    /// The token to take instead of `chosen` so that the run can still finish in the tokens
    /// left (`remaining` counts this step), with why: None when `chosen` fits, or when no
    /// allowed token does (the budget was too small from the start). The replacement is the
    /// allowed token with the highest logit that fits.
    ///
    /// Cost: one token advanced when `chosen` fits. Otherwise the most likely allowed tokens
    /// are tried in order, and the whole allowed set only while the run is still within
    /// budget (then a fitting token exists, a byte of a shortest completion); a grammar that
    /// cannot be completed at all is left alone.
    pub fn steer(
        &self,
        engine: &mut Engine,
        state: State,
        mask: &TokenMask,
        logits: &[f32],
        chosen: u32,
        remaining: u32,
    ) -> Option<Replacement> {
        let chosen_needs = self.needed_with(engine, state, chosen);
        if chosen_needs.is_some_and(|n| n <= u64::from(remaining)) {
            return None;
        }
        let why = |token: u32| Replacement {
            token,
            tokens_left: remaining,
            needed: chosen_needs,
        };
        let needed = self.tokens_needed(engine, state)?;
        let logit = |id: u32| {
            logits
                .get(id as usize)
                .copied()
                .filter(|l| !l.is_nan())
                .unwrap_or(f32::NEG_INFINITY)
        };
        let by_logit = |a: &u32, b: &u32| logit(*b).total_cmp(&logit(*a)).then(a.cmp(b));
        let mut allowed: Vec<u32> = mask.iter().filter(|&id| id != chosen).collect();
        // The most likely few first: the replacement is nearly always among them.
        let first = FIRST_TRIES.min(allowed.len());
        if first < allowed.len() {
            allowed.select_nth_unstable_by(first, by_logit);
        }
        let (head, tail) = allowed.split_at_mut(first);
        head.sort_unstable_by(by_logit);
        if let Some(&id) = head
            .iter()
            .find(|&&id| self.fits(engine, state, id, remaining))
        {
            return Some(why(id));
        }
        if needed > u64::from(remaining) {
            // Already over budget: only a long token could catch up, and those are likely ones.
            return None;
        }
        tail.sort_unstable_by(by_logit);
        tail.iter()
            .copied()
            .find(|&id| self.fits(engine, state, id, remaining))
            .map(why)
    }
}

/// The literal character sequences of every alternative (see [`Literal`]).
fn literals(grammar: &Grammar) -> Vec<Literal> {
    let mut found = Vec::new();
    for rule in 0..grammar.rule_count() as u32 {
        for start in grammar.alternatives(rule) {
            let mut current = Literal {
                positions: Vec::new(),
                offsets: Vec::new(),
                bytes: Vec::new(),
                after: start,
            };
            let mut pos = start;
            loop {
                let end = grammar.is_end_of_sequence(pos);
                let next = if end { pos } else { next_element(grammar, pos) };
                let single =
                    (!end && grammar.element(pos).kind == ElementKind::Char && next == pos + 1)
                        .then(|| char::from_u32(grammar.element(pos).value))
                        .flatten();
                match single {
                    Some(c) => {
                        current.positions.push(pos);
                        current.offsets.push(current.bytes.len());
                        let mut buf = [0u8; 4];
                        current
                            .bytes
                            .extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
                    }
                    None if !current.positions.is_empty() => {
                        current.after = pos;
                        let done = std::mem::replace(
                            &mut current,
                            Literal {
                                positions: Vec::new(),
                                offsets: Vec::new(),
                                bytes: Vec::new(),
                                after: pos,
                            },
                        );
                        // One character is one token at most: nothing to spell.
                        if done.positions.len() > 1 {
                            found.push(done);
                        }
                    }
                    None => {}
                }
                if end {
                    break;
                }
                pos = next;
            }
        }
    }
    found
}

/// For each literal, the fewest tokens that spell its bytes from each byte offset to its end
/// (one token per byte where no piece of the vocabulary fits).
fn fewest_tokens(literals: &[Literal], table: &TokenTable) -> Vec<Vec<u64>> {
    // The substrings worth looking up, then which of them are pieces of allowed tokens.
    let mut wanted: HashSet<&[u8]> = HashSet::new();
    'all: for literal in literals {
        let b = &literal.bytes;
        for i in 0..b.len() {
            for j in i + 2..=b.len().min(i + LONGEST_PIECE) {
                if wanted.len() >= MOST_SUBSTRINGS {
                    break 'all;
                }
                wanted.insert(&b[i..j]);
            }
        }
    }
    let mut pieces: HashMap<&[u8], ()> = HashMap::new();
    for id in 0..table.len() as u32 {
        let piece = table.piece(id);
        if piece.len() >= 2
            && !table.is_eog(id)
            && !table.always_masked(id)
            && let Some(&hit) = wanted.get(piece)
        {
            pieces.insert(hit, ());
        }
    }
    literals
        .iter()
        .map(|literal| {
            let b = &literal.bytes;
            let mut fewest = vec![0u64; b.len() + 1];
            for i in (0..b.len()).rev() {
                let mut best = fewest[i + 1] + 1;
                for j in i + 2..=b.len().min(i + LONGEST_PIECE) {
                    if pieces.contains_key(&b[i..j]) {
                        best = best.min(fewest[j] + 1);
                    }
                }
                fewest[i] = best;
            }
            fewest
        })
        .collect()
}

/// Tokens needed for the terminal at `pos`: a token element takes one; a character class as
/// many as the UTF-8 length of its smallest character (one token per byte).
fn terminal_tokens(grammar: &Grammar, pos: u32) -> u64 {
    match grammar.element(pos).kind {
        ElementKind::Token | ElementKind::TokenNot => 1,
        kind if kind.starts_char_class() => class_chars(grammar, pos)
            .ranges()
            .iter()
            .find_map(|&(lo, hi)| (lo..=hi).find_map(char::from_u32))
            .map_or(INFINITE, |c| c.len_utf8() as u64),
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A vocabulary of every printable ASCII byte, a few longer pieces and an end token.
    fn table() -> TokenTable {
        let mut pieces: Vec<Vec<u8>> = (0x20u8..0x7f).map(|b| vec![b]).collect();
        for long in ["5555", "0000", "\"abc", "abcd"] {
            pieces.push(long.as_bytes().to_vec());
        }
        let eog = pieces.len() as u32;
        pieces.push(Vec::new());
        TokenTable::new(pieces, [eog])
    }

    fn id(table: &TokenTable, piece: &str) -> u32 {
        (0..table.len() as u32)
            .find(|&i| table.piece(i) == piece.as_bytes())
            .expect("piece in the test vocabulary")
    }

    fn engine(table: &TokenTable, text: &str) -> (Engine, BudgetGuard) {
        let grammar = Arc::new(Grammar::parse(text).expect("test grammar parses"));
        let guard = BudgetGuard::new(&grammar, Arc::new(table.clone()));
        (Engine::new(grammar), guard)
    }

    #[test]
    fn counts_the_fewest_tokens_to_finish() {
        let (mut engine, guard) = engine(
            &table(),
            r#"root ::= "{\"x\": " num "}"
               num ::= [0-9]+ ("." [0-9]+)?"#,
        );
        let start = engine.initial();
        // `{"x": ` (6 bytes), one digit, `}`.
        assert_eq!(guard.tokens_needed(&engine, start), Some(8));
        let after = engine.feed(start, b"{\"x\": 5.").expect("prefix accepted");
        // A fraction digit, then `}`.
        assert_eq!(guard.tokens_needed(&engine, after), Some(2));
        let done = engine.feed(after, b"0}").expect("completion accepted");
        assert_eq!(guard.tokens_needed(&engine, done), Some(0));
    }

    #[test]
    fn multibyte_characters_count_their_bytes_and_half_read_ones_the_rest() {
        let (mut engine, guard) = engine(&table(), r#"root ::= "é" "!""#);
        let start = engine.initial();
        assert_eq!(guard.tokens_needed(&engine, start), Some(3));
        let half = engine
            .feed(start, &"é".as_bytes()[..1])
            .expect("first byte");
        assert_eq!(guard.tokens_needed(&engine, half), Some(2));
    }

    #[test]
    fn steers_a_looping_number_to_a_close_in_time() {
        let (mut engine, guard) = engine(
            &table(),
            r#"root ::= "{\"x\": " num "}"
               num ::= [0-9]+ ("." [0-9]+)?"#,
        );
        let table = table();
        let five = id(&table, "5555");
        let close = id(&table, "}");
        // A model that loves "5555" and likes "}" least of all.
        let mut logits = vec![0.0f32; table.len()];
        logits[five as usize] = 10.0;
        logits[close as usize] = -10.0;
        let mut masks = super::super::MaskEngine::new(Arc::new(table.clone()));
        let mut state = engine
            .feed(engine.initial(), b"{\"x\": 5.")
            .expect("prefix");
        let budget = 6u32;
        let mut out = Vec::new();
        for step in 0..budget {
            let mask = masks.mask(&mut engine, state).expect("mask");
            let remaining = budget - step;
            let chosen = five;
            let token = guard
                .steer(&mut engine, state, &mask, &logits, chosen, remaining)
                .map_or(chosen, |r| r.token);
            if table.is_eog(token) {
                break;
            }
            out.extend_from_slice(table.piece(token));
            state = engine
                .accept_token(state, token, table.piece(token))
                .expect("the guard only takes allowed tokens");
            if engine.can_end(state) && guard.tokens_needed(&engine, state) == Some(0) {
                break;
            }
        }
        assert!(
            engine.can_end(state),
            "unfinished: {:?}",
            String::from_utf8_lossy(&out)
        );
        // The loop ran while it could, then the call was closed.
        assert!(
            out.starts_with(b"5555"),
            "{:?}",
            String::from_utf8_lossy(&out)
        );
        assert!(out.ends_with(b"}"), "{:?}", String::from_utf8_lossy(&out));
    }

    #[test]
    fn keeps_a_token_that_fits_and_ends_when_nothing_else_does() {
        let (mut engine, guard) = engine(&table(), r#"root ::= "a" ("bc")?"#);
        let table = table();
        let mut masks = super::super::MaskEngine::new(Arc::new(table.clone()));
        let logits = vec![0.0f32; table.len()];
        let state = engine.initial();
        let mask = masks.mask(&mut engine, state).expect("mask");
        let a = id(&table, "a");
        assert_eq!(guard.steer(&mut engine, state, &mask, &logits, a, 1), None);
        // After "a" with one token left, "b" would leave "c" unwritten: end instead.
        let after = engine.feed(state, b"a").expect("a");
        let mask = masks.mask(&mut engine, after).expect("mask");
        let b = id(&table, "b");
        let eog = table.len() as u32 - 1;
        assert_eq!(
            guard.steer(&mut engine, after, &mask, &logits, b, 1),
            Some(Replacement {
                token: eog,
                tokens_left: 1,
                needed: Some(2),
            })
        );
        assert_eq!(guard.steer(&mut engine, after, &mask, &logits, b, 2), None);
    }

    /// Printable ASCII bytes, the pieces given, and an end token.
    fn table_with(longer: &[&str]) -> TokenTable {
        let mut pieces: Vec<Vec<u8>> = (0x20u8..0x7f).map(|b| vec![b]).collect();
        pieces.extend(longer.iter().map(|p| p.as_bytes().to_vec()));
        let eog = pieces.len() as u32;
        pieces.push(Vec::new());
        TokenTable::new(pieces, [eog])
    }

    const CALL: &str = r#"root ::= "{\"name\": \"" [a-z]+ "\"}""#;

    #[test]
    fn literals_count_the_tokens_that_spell_them_not_their_bytes() {
        let with_piece = table_with(&["{\"name\": \""]);
        let (mut engine, guard) = engine(&with_piece, CALL);
        let start = engine.initial();
        // The preamble is one piece, a letter, then `"}` as two bytes.
        assert_eq!(guard.tokens_needed(&engine, start), Some(4));
        // Inside the literal, what is left of it is spelled on its own: `me": "` has no piece.
        let inside = engine.feed(start, b"{\"na").expect("prefix");
        assert_eq!(guard.tokens_needed(&engine, inside), Some(6 + 1 + 2));
        // Without the piece, one token per byte.
        let (engine, guard) = engine_for(&table_with(&[]), CALL);
        assert_eq!(
            guard.tokens_needed(&engine, engine.initial()),
            Some(10 + 1 + 2)
        );
    }

    /// [`engine`], callable where a local `engine` hides it.
    fn engine_for(table: &TokenTable, text: &str) -> (Engine, BudgetGuard) {
        engine(table, text)
    }

    #[test]
    fn a_token_that_fits_by_its_spelling_is_left_alone() {
        let table = table_with(&["{\"name\": \"", "\"}"]);
        let (mut engine, guard) = engine(&table, CALL);
        let mut masks = super::super::MaskEngine::new(Arc::new(table.clone()));
        let state = engine.initial();
        let mask = masks.mask(&mut engine, state).expect("mask");
        let logits = vec![0.0f32; table.len()];
        let preamble = id(&table, "{\"name\": \"");
        // Three tokens finish the call (preamble, a letter, `"}`): with three left, the guard
        // lets the model's choice stand; byte by byte it would have counted twelve.
        assert_eq!(
            guard.steer(&mut engine, state, &mask, &logits, preamble, 3),
            None
        );
        // A lone `{` would leave `"name": "` to spell byte by byte: twelve tokens in all.
        let brace = id(&table, "{");
        let replaced = guard.steer(&mut engine, state, &mask, &logits, brace, 3);
        assert_eq!(
            replaced,
            Some(Replacement {
                token: preamble,
                tokens_left: 3,
                needed: Some(1 + 9 + 1 + 1),
            })
        );
    }

    #[test]
    fn a_grammar_that_never_ends_is_left_alone() {
        let (mut engine, guard) = engine(&table(), r#"root ::= "x" root"#);
        let table = table();
        let mut masks = super::super::MaskEngine::new(Arc::new(table.clone()));
        let state = engine.initial();
        assert_eq!(guard.tokens_needed(&engine, state), None);
        let mask = masks.mask(&mut engine, state).expect("mask");
        let x = id(&table, "x");
        let logits = vec![0.0f32; table.len()];
        assert_eq!(guard.steer(&mut engine, state, &mask, &logits, x, 3), None);
    }
}
