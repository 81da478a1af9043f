//! Random strings of a grammar, for `toolrail sample` and property tests.
//!
//! Derivation walks the compiled rules with an explicit stack (no recursion, so deep grammars
//! cannot overflow). Each choice of alternative keeps the string within `max_len` when the
//! grammar allows it: minimal completion lengths are computed once per grammar.

use super::lengths::{INFINITE, MinLengths, next_element};
use toolrail_gbnf::charset::class_chars;
use toolrail_gbnf::{ElementKind, Grammar};

/// A small deterministic generator (SplitMix64): the same seed gives the same strings on every
/// platform and version.
#[derive(Clone, Debug)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    /// A generator seeded with `seed`.
    pub fn new(seed: u64) -> Self {
        SplitMix64(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (n > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }
}

/// Why no string could be sampled.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SampleError {
    /// Every string of the grammar needs a token element (`<[id]>`), which has no text.
    #[error(
        "the grammar has no string made only of characters (it needs token elements, or never ends)"
    )]
    NoTextString,
}

/// Samples strings of one grammar.
#[derive(Clone, Debug)]
pub struct Sampler<'g> {
    grammar: &'g Grammar,
    /// Minimal length (in characters) of each rule.
    rule_min: Vec<u64>,
    /// Minimal length from each element position to the end of its alternative.
    rest_min: Vec<u64>,
    /// Draw only readable characters (letters first, then printable ASCII) where a class has
    /// some; otherwise one character in eight comes from the whole class.
    readable: bool,
}

impl<'g> Sampler<'g> {
    /// Prepares minimal lengths for `grammar`.
    pub fn new(grammar: &'g Grammar) -> Self {
        let MinLengths { rule_min, rest_min } =
            MinLengths::new(grammar, |pos| char_cost(grammar, pos));
        Sampler {
            grammar,
            rule_min,
            rest_min,
            readable: false,
        }
    }

    /// The same sampler drawing only readable characters where a class allows (lower-case
    /// letters first, then printable ASCII): for examples a person reads, not for tests that
    /// need the whole range of characters.
    pub fn readable(mut self) -> Self {
        self.readable = true;
        self
    }

    /// The length of the shortest string of the grammar (None if it has no text-only string).
    pub fn shortest(&self) -> Option<u64> {
        let m = self.rule_min[self.grammar.root() as usize];
        (m < INFINITE).then_some(m)
    }

    /// One random string, kept to `max_len` characters when the grammar allows.
    pub fn sample(&self, rng: &mut SplitMix64, max_len: u64) -> Result<String, SampleError> {
        if self.shortest().is_none() {
            return Err(SampleError::NoTextString);
        }
        let mut out = String::new();
        let mut produced: u64 = 0;
        // Pending element positions (top = last) and the minimal length they still need.
        let mut work: Vec<u32> = Vec::new();
        let mut pending: u64 = 0;
        let root_alt = self.choose(rng, self.grammar.root(), max_len);
        work.push(root_alt);
        pending += self.rest_min[root_alt as usize];
        while let Some(pos) = work.pop() {
            pending -= self.rest_min[pos as usize];
            let element = self.grammar.element(pos);
            match element.kind {
                ElementKind::End | ElementKind::Alt => {}
                ElementKind::RuleRef => {
                    let after = pos + 1;
                    work.push(after);
                    pending += self.rest_min[after as usize];
                    let budget = max_len.saturating_sub(produced + pending);
                    let alt = self.choose(rng, element.value, budget);
                    work.push(alt);
                    pending += self.rest_min[alt as usize];
                }
                ElementKind::Token | ElementKind::TokenNot => {
                    return Err(SampleError::NoTextString);
                }
                _ => {
                    let c = self.pick_char(rng, pos);
                    out.push(c);
                    produced += 1;
                    let after = next_element(self.grammar, pos);
                    work.push(after);
                    pending += self.rest_min[after as usize];
                }
            }
        }
        Ok(out)
    }

    /// The start of an alternative of `rule`: random among those that fit `budget`, else the
    /// shortest.
    fn choose(&self, rng: &mut SplitMix64, rule: u32, budget: u64) -> u32 {
        let alts = self.grammar.alternatives(rule);
        let fitting: Vec<u32> = alts
            .iter()
            .copied()
            .filter(|&a| self.rest_min[a as usize] <= budget)
            .collect();
        // Readable: not an escape (`\u…`, `\n`) where another alternative fits.
        let plain: Vec<u32> = if self.readable {
            fitting
                .iter()
                .copied()
                .filter(|&a| !self.starts_with_backslash(a))
                .collect()
        } else {
            Vec::new()
        };
        let fitting = if plain.is_empty() { fitting } else { plain };
        if !fitting.is_empty() {
            return fitting[rng.below(fitting.len() as u64) as usize];
        }
        alts.into_iter()
            .min_by_key(|&a| self.rest_min[a as usize])
            .unwrap_or(self.grammar.rule_start(rule))
    }

    /// Whether the alternative starting at `alt` starts with a backslash and nothing else.
    fn starts_with_backslash(&self, alt: u32) -> bool {
        matches!(
            self.grammar.element(alt).kind,
            ElementKind::Char | ElementKind::CharNot
        ) && class_chars(self.grammar, alt).ranges() == [(0x5C, 0x5C)]
    }

    fn pick_char(&self, rng: &mut SplitMix64, pos: u32) -> char {
        let set = class_chars(self.grammar, pos);
        // Prefer printable ASCII when the class has some, for readable output.
        let printable = intersect_printable(&set);
        let letters = intersect_range(&set, 'a', 'z');
        let from = if self.readable && !letters.is_empty() && rng.below(8) != 0 {
            &letters
        } else if !printable.is_empty() && (self.readable || rng.below(8) != 0) {
            &printable
        } else {
            &set
        };
        for _ in 0..16 {
            let total = from.len();
            if total == 0 {
                break;
            }
            let mut k = rng.below(total);
            for &(lo, hi) in from.ranges() {
                let size = u64::from(hi - lo) + 1;
                if k < size {
                    if let Some(c) = char::from_u32(lo + k as u32) {
                        return c;
                    }
                    break;
                }
                k -= size;
            }
        }
        // A class made only of non-characters (surrogates): fall back to its first scalar value.
        set.ranges()
            .iter()
            .flat_map(|&(lo, hi)| (lo..=hi.min(lo + 4096)).filter_map(char::from_u32))
            .next()
            .unwrap_or('\u{FFFD}')
    }
}

fn intersect_printable(set: &super::CharSet) -> super::CharSet {
    intersect_range(set, ' ', '~')
}

fn intersect_range(set: &super::CharSet, from: char, to: char) -> super::CharSet {
    let mut out = super::CharSet::new();
    for &(lo, hi) in set.ranges() {
        let (lo, hi) = (lo.max(from as u32), hi.min(to as u32));
        out.add_range(lo, hi);
    }
    out
}

/// One character for a class that holds a character; token elements have no text.
fn char_cost(grammar: &Grammar, pos: u32) -> u64 {
    match grammar.element(pos).kind {
        ElementKind::Token | ElementKind::TokenNot => INFINITE,
        _ => {
            if class_chars(grammar, pos)
                .ranges()
                .iter()
                .any(|&(lo, hi)| (lo..=hi).any(|c| char::from_u32(c).is_some()))
            {
                1
            } else {
                INFINITE
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check;
    use crate::{BudgetGuard, Engine, TokenTable};
    use std::sync::Arc;

    #[test]
    fn samples_are_accepted_and_bounded() {
        let g =
            Arc::new(Grammar::parse("root ::= \"(\" root \")\" | [a-c]{1,3} | \"x\"*").unwrap());
        let sampler = Sampler::new(&g);
        let mut rng = SplitMix64::new(7);
        for _ in 0..200 {
            let s = sampler.sample(&mut rng, 20).unwrap();
            assert!(check(&g, s.as_bytes()).is_accepted(), "{s:?}");
            assert!(s.chars().count() <= 20, "{s:?}");
        }
    }

    #[test]
    fn token_only_grammars_have_no_text_strings() {
        let g = Grammar::parse("root ::= <[5]>").unwrap();
        assert_eq!(
            Sampler::new(&g).sample(&mut SplitMix64::new(1), 10),
            Err(SampleError::NoTextString)
        );
    }

    /// A 20,000-rule chain, each rule referring to the next, defined first to last: the sweeps
    /// settled one rule per sweep over all rules (15 s for the budget guard and 33 s for the
    /// sampler in a release build, minutes in a debug one); settling each rule once takes
    /// milliseconds. No time is asserted: a return to quadratic work shows as a hang.
    #[test]
    fn long_rule_chains_prepare_in_one_pass() {
        let n = 20_000;
        let mut text = String::from("root ::= r0\n");
        for i in 0..n {
            text.push_str(&format!("r{i} ::= \"a\" r{} | \"bb\" r{}\n", i + 1, i + 1));
        }
        text.push_str(&format!("r{n} ::= \"c\"\n"));
        let grammar = Arc::new(Grammar::parse(&text).expect("chain parses"));
        let sampler = Sampler::new(&grammar);
        assert_eq!(sampler.shortest(), Some(n as u64 + 1));
        let sample = sampler
            .sample(&mut SplitMix64::new(7), n as u64 + 1)
            .expect("chain samples");
        assert_eq!(sample, format!("{}c", "a".repeat(n)));
        let table = TokenTable::new((0u8..128).map(|b| vec![b]).collect(), []);
        let guard = BudgetGuard::new(&grammar, Arc::new(table));
        let engine = Engine::new(grammar);
        let start = engine.initial();
        assert_eq!(guard.tokens_needed(&engine, start), Some(n as u64 + 1));
    }
}
