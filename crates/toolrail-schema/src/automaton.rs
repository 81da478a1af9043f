//! A `format` together with `pattern` and/or `minLength`/`maxLength`, exactly: the format's
//! regular language intersected with the pattern's and with the length bounds, as a product of
//! finite automata over decoded characters, written as right-linear rules.
//!
//! The format's rules ([`crate::formats`]) are regular (no rule refers back to itself), so
//! they become a Thompson NFA over code points (a JSON escape in a format literal, `\"` or
//! `\\`, is the one decoded character it stands for); so does the pattern (its HIR, read as
//! [`crate::regex`] reads it: ECMA classes, unanchored ends as any text). Both are made
//! deterministic over one partition of the code points, then walked together with the number
//! of characters read so far, which matters only while a bound can still be missed: once the
//! minimum is reached and the longest way on to an accepting state stays within the maximum
//! (or there is no maximum), states no longer count. The product states that can still reach
//! acceptance are merged where equivalent (Moore's refinement) and each class is one rule:
//! `s ::= [chars] t | ... | "\""` (the closing quote where the string may end), so llama.cpp
//! follows one stack per state and no repetition is generated at all.
//!
//! A product over [`MAX_STATES`] states is refused (the caller reports the keyword and
//! pointer, as before): e.g. `format: email` with `maxLength: 254` needs one rule per length
//! for every state of the unbounded parts of an address (28,019 rules, a 1.9 MB grammar,
//! measured with the limit lifted). A pattern alone is then intersected rule by rule instead
//! ([`format_pattern`]), which stays small whatever the format's size.

mod format_pattern;

pub(crate) use format_pattern::format_matching;
use regex_syntax::hir::{Class, Hir, HirKind, Look};
use rustc_hash::FxHashMap;

use crate::expr::{Expr, RuleName};
use crate::rules::RuleTable;
use crate::strings::{SCALARS, encoded_char_set};

/// The most states a product may have (one rule each).
pub(crate) const MAX_STATES: usize = 3000;

/// Most NFA or DFA states built while getting there (a bound on work for hostile input).
const MAX_AUTOMATON_STATES: usize = 20_000;

/// A nondeterministic automaton with ε-moves over code point ranges; state 0 starts, `accept`
/// accepts.
#[derive(Default)]
struct Nfa {
    /// ε-moves of each state.
    eps: Vec<Vec<usize>>,
    /// Moves on a character in an inclusive range.
    moves: Vec<Vec<(u32, u32, usize)>>,
}

impl Nfa {
    fn state(&mut self) -> Result<usize, String> {
        if self.eps.len() >= MAX_AUTOMATON_STATES {
            return Err(automaton_too_large());
        }
        self.eps.push(Vec::new());
        self.moves.push(Vec::new());
        Ok(self.eps.len() - 1)
    }

    /// Adds a chain of states reading `chars` one after another from `from` to `to` (an empty
    /// text is an epsilon move).
    fn literal(&mut self, chars: &[u32], from: usize, to: usize) -> Result<(), String> {
        if chars.is_empty() {
            self.eps[from].push(to);
        }
        let mut at = from;
        for (i, &c) in chars.iter().enumerate() {
            let next = if i + 1 == chars.len() {
                to
            } else {
                self.state()?
            };
            self.moves[at].push((c, c, next));
            at = next;
        }
        Ok(())
    }

    /// Adds the states for `e` between `from` and `to`.
    fn expr(&mut self, e: &Expr, from: usize, to: usize, depth: u32) -> Result<(), String> {
        if depth > 64 {
            return Err("format rules nested too deeply".into());
        }
        match e {
            Expr::Empty => self.eps[from].push(to),
            Expr::Literal(text) => {
                let chars = decoded(text);
                self.literal(&chars, from, to)?;
            }
            Expr::Class { ranges, negated } => {
                let set = if *negated {
                    complement(ranges)
                } else {
                    ranges.clone()
                };
                for (lo, hi) in set {
                    self.moves[from].push((lo, hi, to));
                }
            }
            Expr::AnyChar => {
                for &(lo, hi) in SCALARS {
                    self.moves[from].push((lo, hi, to));
                }
            }
            Expr::Rule(name) => {
                let body = crate::formats::rule_body(name.as_str())
                    .ok_or_else(|| format!("rule {name} is not a format rule"))?;
                self.expr(body, from, to, depth + 1)?;
            }
            Expr::Seq(items) => {
                let mut at = from;
                for (i, item) in items.iter().enumerate() {
                    let next = if i + 1 == items.len() {
                        to
                    } else {
                        self.state()?
                    };
                    self.expr(item, at, next, depth + 1)?;
                    at = next;
                }
                if items.is_empty() {
                    self.eps[from].push(to);
                }
            }
            Expr::Alt(alternatives) => {
                for a in alternatives {
                    self.expr(a, from, to, depth + 1)?;
                }
            }
            Expr::Repeat { item, min, max } => {
                let mut at = from;
                for _ in 0..*min {
                    let next = self.state()?;
                    self.expr(item, at, next, depth + 1)?;
                    at = next;
                }
                match max {
                    None => {
                        let lo = self.state()?;
                        self.eps[at].push(lo);
                        let back = self.state()?;
                        self.expr(item, lo, back, depth + 1)?;
                        self.eps[back].push(lo);
                        self.eps[lo].push(to);
                    }
                    Some(n) => {
                        for _ in *min..*n {
                            let next = self.state()?;
                            self.expr(item, at, next, depth + 1)?;
                            self.eps[at].push(to);
                            at = next;
                        }
                        self.eps[at].push(to);
                    }
                }
            }
        }
        Ok(())
    }

    /// Adds the states for the HIR `h` between `from` and `to`.
    fn hir(&mut self, h: &Hir, from: usize, to: usize, depth: u32) -> Result<(), String> {
        if depth > 256 {
            return Err("pattern nested too deeply".into());
        }
        match h.kind() {
            HirKind::Empty => self.eps[from].push(to),
            HirKind::Literal(lit) => {
                let text = std::str::from_utf8(&lit.0)
                    .map_err(|_| "a pattern literal that is not UTF-8".to_string())?;
                let chars: Vec<u32> = text.chars().map(u32::from).collect();
                self.literal(&chars, from, to)?;
            }
            HirKind::Class(Class::Unicode(c)) => {
                for r in c.iter() {
                    self.moves[from].push((u32::from(r.start()), u32::from(r.end()), to));
                }
            }
            HirKind::Class(Class::Bytes(_)) => return Err("a byte class".into()),
            HirKind::Look(_) => return Err("an anchor inside the pattern".into()),
            HirKind::Capture(c) => self.hir(&c.sub, from, to, depth + 1)?,
            HirKind::Repetition(r) => {
                let mut at = from;
                if r.max.is_some_and(|m| m > 1000) || r.min > 1000 {
                    return Err(automaton_too_large());
                }
                for _ in 0..r.min {
                    let next = self.state()?;
                    self.hir(&r.sub, at, next, depth + 1)?;
                    at = next;
                }
                match r.max {
                    None => {
                        let lo = self.state()?;
                        self.eps[at].push(lo);
                        let back = self.state()?;
                        self.hir(&r.sub, lo, back, depth + 1)?;
                        self.eps[back].push(lo);
                        self.eps[lo].push(to);
                    }
                    Some(n) => {
                        for _ in r.min..n {
                            let next = self.state()?;
                            self.hir(&r.sub, at, next, depth + 1)?;
                            self.eps[at].push(to);
                            at = next;
                        }
                        self.eps[at].push(to);
                    }
                }
            }
            HirKind::Concat(xs) => {
                let mut at = from;
                for (i, x) in xs.iter().enumerate() {
                    let next = if i + 1 == xs.len() { to } else { self.state()? };
                    self.hir(x, at, next, depth + 1)?;
                    at = next;
                }
                if xs.is_empty() {
                    self.eps[from].push(to);
                }
            }
            HirKind::Alternation(xs) => {
                for x in xs {
                    self.hir(x, from, to, depth + 1)?;
                }
            }
        }
        Ok(())
    }

    /// Any text (`.*` over every character) between `from` and `to`.
    fn any_text(&mut self, from: usize, to: usize) -> Result<(), String> {
        let lo = self.state()?;
        self.eps[from].push(lo);
        for &(a, b) in SCALARS {
            self.moves[lo].push((a, b, lo));
        }
        self.eps[lo].push(to);
        Ok(())
    }

    /// The ε-closure of `set`, sorted; `seen` holds a stamp per state (`stamp` is bumped, so
    /// the marks need no clearing between calls).
    fn closure(&self, set: &mut Vec<usize>, seen: &mut [u32], stamp: &mut u32) {
        *stamp += 1;
        for &s in set.iter() {
            seen[s] = *stamp;
        }
        let mut todo = set.clone();
        while let Some(s) = todo.pop() {
            for &t in &self.eps[s] {
                if seen[t] != *stamp {
                    seen[t] = *stamp;
                    set.push(t);
                    todo.push(t);
                }
            }
        }
        set.sort_unstable();
    }
}

fn automaton_too_large() -> String {
    format!("the automata for it need more than {MAX_AUTOMATON_STATES} states")
}

fn too_large() -> String {
    format!("the intersection needs more than {MAX_STATES} rules")
}

/// The code points a format literal matches: JSON escapes `\"` and `\\` are one character.
fn decoded(text: &str) -> Vec<u32> {
    let mut out = Vec::new();
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        match (c, c == '\\') {
            (_, true) => out.push(u32::from(chars.next().unwrap_or('\\'))),
            (c, false) => out.push(u32::from(c)),
        }
    }
    out
}

/// The scalar values outside sorted, disjoint `ranges`.
fn complement(ranges: &[(u32, u32)]) -> Vec<(u32, u32)> {
    let sorted = crate::strings::normalize(ranges.to_vec());
    let mut out = Vec::new();
    let mut next = 0u32;
    for (lo, hi) in sorted {
        if lo > next {
            out.push((next, lo - 1));
        }
        next = hi.saturating_add(1);
    }
    if next <= 0x10FFFF {
        out.push((next, 0x10FFFF));
    }
    out
}

/// A deterministic automaton over the intervals of one partition of the code points.
struct Dfa {
    /// `next[state][interval]`, None: no move.
    next: Vec<Vec<Option<usize>>>,
    accepting: Vec<bool>,
}

/// The partition of the code points by every range boundary of `nfas`: sorted, disjoint
/// intervals covering exactly the characters some move reads.
fn partition(nfas: &[&Nfa]) -> Vec<(u32, u32)> {
    let mut cuts: Vec<u32> = Vec::new();
    for nfa in nfas {
        for moves in &nfa.moves {
            for &(lo, hi, _) in moves {
                cuts.push(lo);
                cuts.push(hi + 1);
            }
        }
    }
    cuts.sort_unstable();
    cuts.dedup();
    // which of the windows between cuts some move reads
    let mut read = vec![false; cuts.len()];
    for nfa in nfas {
        for &(lo, hi, _) in nfa.moves.iter().flatten() {
            let mut k = cuts.partition_point(|&x| x < lo);
            while k + 1 < cuts.len() && cuts[k + 1] - 1 <= hi {
                read[k] = true;
                k += 1;
            }
        }
    }
    cuts.windows(2)
        .enumerate()
        .filter(|&(k, _)| read[k])
        .map(|(_, w)| (w[0], w[1] - 1))
        .collect()
}

/// The subset construction of `nfa` (accepting state `accept`) over `intervals`.
fn determinize(nfa: &Nfa, accept: usize, intervals: &[(u32, u32)]) -> Result<Dfa, String> {
    let starts: Vec<u32> = intervals.iter().map(|r| r.0).collect();
    let mut seen = vec![0u32; nfa.eps.len()];
    let mut stamp = 0u32;
    let mut start = vec![0];
    nfa.closure(&mut start, &mut seen, &mut stamp);
    let mut ids: FxHashMap<Vec<usize>, usize> = FxHashMap::default();
    let mut sets = vec![start.clone()];
    ids.insert(start, 0);
    let mut dfa = Dfa {
        next: Vec::new(),
        accepting: Vec::new(),
    };
    let mut i = 0;
    while i < sets.len() {
        let set = sets[i].clone();
        dfa.accepting.push(set.contains(&accept));
        // the targets on each interval: a move covers whole intervals of the partition
        let mut targets: Vec<Vec<usize>> = vec![Vec::new(); intervals.len()];
        for &s in &set {
            for &(a, b, t) in &nfa.moves[s] {
                let mut k = starts.partition_point(|&x| x < a);
                while k < intervals.len() && intervals[k].1 <= b {
                    targets[k].push(t);
                    k += 1;
                }
            }
        }
        let mut row = Vec::with_capacity(intervals.len());
        for mut target in targets {
            if target.is_empty() {
                row.push(None);
                continue;
            }
            target.sort_unstable();
            target.dedup();
            nfa.closure(&mut target, &mut seen, &mut stamp);
            let id = match ids.get(&target) {
                Some(&id) => id,
                None => {
                    if sets.len() >= MAX_AUTOMATON_STATES {
                        return Err(automaton_too_large());
                    }
                    ids.insert(target.clone(), sets.len());
                    sets.push(target);
                    sets.len() - 1
                }
            };
            row.push(Some(id));
        }
        dfa.next.push(row);
        i += 1;
    }
    Ok(dfa)
}

/// For each state, the most characters on a path to acceptance (None: unbounded, or no
/// path): longest paths over the states that can still accept, taken from the accepting
/// ends backwards; a state never reached that way leads into a cycle.
fn longest_to_accept(dfa: &Dfa) -> Vec<Option<u64>> {
    let n = dfa.next.len();
    let mut preds: Vec<Vec<usize>> = vec![Vec::new(); n];
    for (s, row) in dfa.next.iter().enumerate() {
        let mut targets: Vec<usize> = row.iter().flatten().copied().collect();
        targets.sort_unstable();
        targets.dedup();
        for t in targets {
            preds[t].push(s);
        }
    }
    // states that can reach acceptance
    let mut live = dfa.accepting.clone();
    let mut todo: Vec<usize> = (0..n).filter(|&s| live[s]).collect();
    while let Some(t) = todo.pop() {
        for &s in &preds[t] {
            if !live[s] {
                live[s] = true;
                todo.push(s);
            }
        }
    }
    // Kahn's order on the live part, from the states with no live move onwards
    let mut pending: Vec<usize> = (0..n)
        .map(|s| {
            let mut targets: Vec<usize> = dfa.next[s]
                .iter()
                .flatten()
                .copied()
                .filter(|&t| live[t])
                .collect();
            targets.sort_unstable();
            targets.dedup();
            targets.len()
        })
        .collect();
    let mut best: Vec<Option<u64>> = vec![None; n];
    let mut ready: Vec<usize> = (0..n).filter(|&s| live[s] && pending[s] == 0).collect();
    while let Some(t) = ready.pop() {
        let own = dfa.accepting[t].then_some(0);
        let on = dfa.next[t]
            .iter()
            .flatten()
            .filter(|&&u| live[u])
            .filter_map(|&u| best[u].map(|b| b + 1))
            .max();
        best[t] = own.max(on);
        for &s in &preds[t] {
            if live[s] {
                pending[s] -= 1;
                if pending[s] == 0 {
                    ready.push(s);
                }
            }
        }
    }
    best
}

/// How many characters a product state has read, as far as the bounds still care.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
enum Count {
    /// Exactly this many.
    Read(u64),
    /// Enough for the minimum, and no way on can pass the maximum.
    Free,
}

/// The fewest and most characters (decoded) a string of format `format` has (`None`: no
/// most), read off its rules; `None` when `format` has no rules here or they nest too deeply.
/// A length bound the whole range lies within constrains nothing; one the range misses leaves
/// no string.
pub(crate) fn format_lengths(format: &str) -> Option<(u64, Option<u64>)> {
    lengths(crate::formats::rule_body(format)?, 0)
}

fn lengths(e: &Expr, depth: u32) -> Option<(u64, Option<u64>)> {
    if depth > 64 {
        return None;
    }
    Some(match e {
        Expr::Empty => (0, Some(0)),
        Expr::Literal(text) => {
            let n = decoded(text).len() as u64;
            (n, Some(n))
        }
        Expr::Class { .. } | Expr::AnyChar => (1, Some(1)),
        Expr::Rule(name) => lengths(crate::formats::rule_body(name.as_str())?, depth + 1)?,
        Expr::Seq(items) => {
            let mut total = (0u64, Some(0u64));
            for item in items {
                let (lo, hi) = lengths(item, depth + 1)?;
                total.0 = total.0.saturating_add(lo);
                total.1 = match (total.1, hi) {
                    (Some(a), Some(b)) => Some(a.saturating_add(b)),
                    _ => None,
                };
            }
            total
        }
        Expr::Alt(alternatives) => {
            let mut out: Option<(u64, Option<u64>)> = None;
            for a in alternatives {
                let (lo, hi) = lengths(a, depth + 1)?;
                out = Some(match out {
                    None => (lo, hi),
                    Some((l, h)) => (l.min(lo), h.zip(hi).map(|(x, y)| x.max(y))),
                });
            }
            out?
        }
        Expr::Repeat { item, min, max } => {
            let (lo, hi) = lengths(item, depth + 1)?;
            let most = match (hi, max) {
                (Some(0), _) => Some(0),
                (Some(h), Some(m)) => Some(h.saturating_mul(u64::from(*m))),
                _ => None,
            };
            (lo.saturating_mul(u64::from(*min)), most)
        }
    })
}

/// The rules for a JSON string (quotes included) of format `format` that also matches
/// `pattern` and has `min` to `max` characters. `Ok(None)`: no string does; `Err`: why it
/// cannot be written (too many states, a pattern construct not read here).
pub(crate) fn format_within(
    format: &str,
    pattern: Option<&str>,
    min: u64,
    max: Option<u64>,
    rules: &mut RuleTable,
    hint: &str,
) -> Result<Option<Expr>, String> {
    let body =
        crate::formats::rule_body(format).ok_or_else(|| format!("unknown format {format}"))?;
    let mut fmt = Nfa::default();
    let (start, accept) = (fmt.state()?, fmt.state()?);
    fmt.expr(body, start, accept, 0)?;
    let mut pat = Nfa::default();
    let (pstart, paccept) = (pat.state()?, pat.state()?);
    match pattern {
        Some(p) => pattern_nfa(&mut pat, p, pstart, paccept)?,
        None => pat.any_text(pstart, paccept)?,
    }
    let intervals = partition(&[&fmt, &pat]);
    let a = determinize(&fmt, accept, &intervals)?;
    let b = determinize(&pat, paccept, &intervals)?;
    let (la, lb) = (longest_to_accept(&a), longest_to_accept(&b));
    // the longest way on from a pair: the shorter of the two (None: unbounded)
    let longest = |x: usize, y: usize| match (la[x], lb[y]) {
        (Some(p), Some(q)) => Some(p.min(q)),
        (p, q) => p.or(q),
    };
    let count = |x: usize, y: usize, read: u64| {
        let within = match (max, longest(x, y)) {
            (None, _) => true,
            (Some(m), Some(l)) => read.saturating_add(l) <= m,
            (Some(_), None) => false,
        };
        if read >= min && within {
            Count::Free
        } else {
            Count::Read(read)
        }
    };
    type State = (usize, usize, Count);
    let first: State = (0, 0, count(0, 0, 0));
    let mut ids: FxHashMap<State, usize> = FxHashMap::default();
    let mut states = vec![first];
    ids.insert(first, 0);
    // moves[state]: (interval, target)
    let mut moves: Vec<Vec<(usize, usize)>> = Vec::new();
    let mut i = 0;
    while i < states.len() {
        let (x, y, c) = states[i];
        let mut row = Vec::new();
        let read_next = match c {
            Count::Read(r) => Some(r + 1),
            Count::Free => None,
        };
        if read_next.is_none_or(|r| max.is_none_or(|m| r <= m)) {
            for k in 0..intervals.len() {
                let (Some(nx), Some(ny)) = (a.next[x][k], b.next[y][k]) else {
                    continue;
                };
                let nc = match read_next {
                    Some(r) => count(nx, ny, r),
                    None => Count::Free,
                };
                let target = (nx, ny, nc);
                let id = match ids.get(&target) {
                    Some(&id) => id,
                    None => {
                        if states.len() >= MAX_STATES {
                            return Err(too_large());
                        }
                        ids.insert(target, states.len());
                        states.push(target);
                        states.len() - 1
                    }
                };
                row.push((k, id));
            }
        }
        moves.push(row);
        i += 1;
    }
    let accepting: Vec<bool> = states
        .iter()
        .map(|&(x, y, c)| {
            a.accepting[x]
                && b.accepting[y]
                && match c {
                    Count::Free => true,
                    Count::Read(r) => r >= min && max.is_none_or(|m| r <= m),
                }
        })
        .collect();
    // product states that can still reach acceptance
    let mut live = accepting.clone();
    loop {
        let mut changed = false;
        for s in 0..states.len() {
            if !live[s] && moves[s].iter().any(|&(_, t)| live[t]) {
                live[s] = true;
                changed = true;
            }
        }
        if !changed {
            break;
        }
    }
    if !live[0] {
        return Ok(None);
    }
    let live_ids: Vec<usize> = (0..states.len()).filter(|&s| live[s]).collect();
    let class = equivalent_states(&live_ids, &moves, &accepting, &live);
    // one representative per class, in order of first appearance (state 0's class is 0)
    let mut representatives: Vec<usize> = Vec::new();
    for &s in &live_ids {
        if class[s] == representatives.len() {
            representatives.push(s);
        }
    }
    let names: Vec<RuleName> = (0..representatives.len())
        // numbered hints: each name is free at once (no search through `-2`, `-3`, ...)
        .map(|i| rules.reserve(&format!("{hint}-{format}-{i}"), None))
        .collect();
    let mut uses_char = false;
    // the `char` primitive of the grammar's literal syntax
    let char_name = rules.syntax.primitive("char");
    let mut char_rule = || {
        uses_char = true;
        Expr::Rule(RuleName::new(char_name))
    };
    for (c, &s) in representatives.iter().enumerate() {
        let mut by_target: Vec<(usize, Vec<(u32, u32)>)> = Vec::new();
        for &(k, t) in &moves[s] {
            if !live[t] {
                continue;
            }
            match by_target.iter_mut().find(|(x, _)| *x == class[t]) {
                Some((_, ranges)) => ranges.push(intervals[k]),
                None => by_target.push((class[t], vec![intervals[k]])),
            }
        }
        let mut alternatives = Vec::new();
        for (t, ranges) in by_target {
            let ranges = crate::strings::normalize(ranges);
            if let Some(chars) = encoded_char_set(&ranges, &mut char_rule) {
                alternatives.push(Expr::seq([chars, Expr::rule(&names[t])]));
            }
        }
        if accepting[s] {
            alternatives.push(Expr::literal("\""));
        }
        let body = Expr::alt(alternatives).unwrap_or(Expr::Empty);
        rules.fill(&names[c], body);
    }
    if uses_char {
        // a move over every character refers to the `char` primitive
        rules.primitive("char");
    }
    Ok(Some(Expr::seq([
        Expr::literal("\""),
        Expr::rule(&names[0]),
    ])))
}

/// A state's class, acceptance, and the class its move on each interval leads into.
type Signature = (usize, bool, Vec<(usize, usize)>);

/// The class of each live state under Moore's refinement: states with the same acceptance
/// whose moves on every interval lead into the same classes are one (dead states: `usize::MAX`).
/// Classes are numbered in order of first appearance in `live_ids`.
fn equivalent_states(
    live_ids: &[usize],
    moves: &[Vec<(usize, usize)>],
    accepting: &[bool],
    live: &[bool],
) -> Vec<usize> {
    let mut class = vec![usize::MAX; moves.len()];
    let mut count = 0;
    loop {
        let mut ids: FxHashMap<Signature, usize> = FxHashMap::default();
        let mut next = vec![usize::MAX; moves.len()];
        for &s in live_ids {
            let signature: Vec<(usize, usize)> = moves[s]
                .iter()
                .filter(|&&(_, t)| live[t])
                .map(|&(k, t)| (k, class[t]))
                .collect();
            let key = (class[s], accepting[s], signature);
            let fresh = ids.len();
            next[s] = *ids.entry(key).or_insert(fresh);
        }
        let refined = ids.len();
        class = next;
        if refined == count {
            return class;
        }
        count = refined;
    }
}

/// The pattern as an NFA between `from` and `to`, unanchored ends reading any text.
fn pattern_nfa(nfa: &mut Nfa, pattern: &str, from: usize, to: usize) -> Result<(), String> {
    let hir = crate::regex::parse(pattern)?;
    let branches: Vec<&Hir> = match hir.kind() {
        HirKind::Alternation(xs) => xs.iter().collect(),
        _ => vec![&hir],
    };
    for branch in branches {
        let mut items: Vec<&Hir> = match branch.kind() {
            HirKind::Concat(xs) => xs.iter().collect(),
            _ => vec![branch],
        };
        let starts = items
            .first()
            .is_some_and(|h| matches!(h.kind(), HirKind::Look(Look::Start)));
        if starts {
            items.remove(0);
        }
        let ends = items
            .last()
            .is_some_and(|h| matches!(h.kind(), HirKind::Look(Look::End)));
        if ends {
            items.pop();
        }
        let mut at = nfa.state()?;
        if starts {
            nfa.eps[from].push(at);
        } else {
            nfa.any_text(from, at)?;
        }
        for item in items {
            let next = nfa.state()?;
            nfa.hir(item, at, next, 0)?;
            at = next;
        }
        if ends {
            nfa.eps[at].push(to);
        } else {
            nfa.any_text(at, to)?;
        }
    }
    Ok(())
}
