//! A `format` together with a `pattern`, rule by rule: where the product of the two automata
//! ([`super::format_within`]) is too large (`date-time` alone has thousands of states, for its
//! leap seconds), the format's rules are intersected with the pattern's deterministic automaton
//! instead (the Bar-Hillel construction for a regular grammar): each format rule read from
//! pattern state `p` to state `q` becomes one rule, `name` from `p` to `q`.
//!
//! Only the pattern is made deterministic, and it is usually small: `^2026-` has seven
//! states, `Z$` two. Once the pattern can no longer fail (a state from which every text is
//! accepted, as after the prefix of `^2026-`), the rest of the format is its own rules,
//! unchanged. So the grammar grows with the pattern's states where they matter, not with the
//! format's size.

use rustc_hash::FxHashMap;

use super::{Dfa, MAX_STATES, Nfa, decoded, determinize, partition, pattern_nfa, too_large};
use crate::expr::{Expr, RuleName};
use crate::rules::RuleTable;
use crate::strings::SCALARS;

/// The strings of `format` that match `pattern`, quotes included: Ok(None) when there are
/// none; Err naming why it cannot be written (too many rules, a construct the walk does not
/// read).
pub(crate) fn format_matching(
    format: &str,
    pattern: &str,
    rules: &mut RuleTable,
    hint: &str,
) -> Result<Option<Expr>, String> {
    let mut nfa = Nfa::default();
    let (start, accept) = (nfa.state()?, nfa.state()?);
    pattern_nfa(&mut nfa, pattern, start, accept)?;
    let intervals = partition(&[&nfa]);
    let dfa = determinize(&nfa, accept, &intervals)?;
    let mut walk = Walk::new(dfa, intervals, rules, format!("{hint}-{format}"));
    let ends = walk.expr(&Expr::Rule(RuleName::new(format)), 0, 0)?;
    let accepted: Vec<Expr> = ends
        .into_iter()
        .filter(|(q, _)| walk.dfa.accepting[*q])
        .map(|(_, e)| e)
        .collect();
    let Some(body) = Expr::alt(accepted) else {
        return Ok(None);
    };
    for name in std::mem::take(&mut walk.unchanged) {
        walk.rules.format_rules(name);
    }
    Ok(Some(Expr::seq([
        Expr::literal("\""),
        body,
        Expr::literal("\""),
    ])))
}

/// The walk of the format's rules through the pattern's automaton.
struct Walk<'a> {
    dfa: Dfa,
    /// The partition the automaton reads (sorted, disjoint).
    intervals: Vec<(u32, u32)>,
    /// The state every state that accepts any text is read as (they are all alike).
    universal: Option<usize>,
    /// Which states accept any text.
    accepts_all: Vec<bool>,
    rules: &'a mut RuleTable,
    hint: String,
    /// Each format rule read from a state: where it can end, and the rule for each end.
    done: FxHashMap<(&'static str, usize), Vec<(usize, Expr)>>,
    /// Format rules used as they are (from the universal state).
    unchanged: Vec<&'static str>,
    made: usize,
}

/// Each pattern state a part of the format can end in, with the strings that take it there.
type Ends = Vec<(usize, Expr)>;

impl<'a> Walk<'a> {
    fn new(dfa: Dfa, intervals: Vec<(u32, u32)>, rules: &'a mut RuleTable, hint: String) -> Self {
        let accepts_all = universal_states(&dfa, &intervals);
        let universal = accepts_all.iter().position(|&u| u);
        Self {
            dfa,
            intervals,
            universal,
            accepts_all,
            rules,
            hint,
            done: FxHashMap::default(),
            unchanged: Vec::new(),
            made: 0,
        }
    }

    /// The state after reading the character `c` from `p` (None: the pattern fails).
    fn step(&self, p: usize, c: u32) -> Option<usize> {
        let k = self.intervals.partition_point(|r| r.1 < c);
        let (lo, hi) = *self.intervals.get(k)?;
        if c < lo || c > hi {
            return None;
        }
        self.dfa.next[p][k].map(|q| self.canonical(q))
    }

    /// `q`, or the one universal state where `q` accepts any text.
    fn canonical(&self, q: usize) -> usize {
        match self.universal {
            Some(u) if self.accepts_all[q] => u,
            _ => q,
        }
    }

    /// A fresh rule-name hint (`{hint}-{what}-{n}`), counted against [`MAX_STATES`].
    fn fresh_hint(&mut self, what: &str) -> Result<String, String> {
        self.made += 1;
        if self.made > MAX_STATES {
            return Err(too_large());
        }
        Ok(format!("{}-{what}-{}", self.hint, self.made))
    }

    /// A new rule for `body`, counted against [`MAX_STATES`].
    fn name(&mut self, what: &str, body: Expr) -> Result<Expr, String> {
        let hint = self.fresh_hint(what)?;
        Ok(Expr::rule(&self.rules.add(&hint, body, None)))
    }

    /// Where `e` read from state `p` can end, and how.
    fn expr(&mut self, e: &Expr, p: usize, depth: u32) -> Result<Ends, String> {
        if depth > 64 {
            return Err("format rules nested too deeply".into());
        }
        if Some(p) == self.universal {
            self.keep_unchanged(e);
            return Ok(vec![(p, e.clone())]);
        }
        match e {
            Expr::Empty => Ok(vec![(p, Expr::Empty)]),
            Expr::Literal(text) => {
                let mut at = p;
                for c in decoded(text) {
                    match self.step(at, c) {
                        Some(q) => at = q,
                        None => return Ok(Vec::new()),
                    }
                }
                Ok(vec![(at, e.clone())])
            }
            Expr::Class {
                ranges,
                negated: false,
            } => Ok(self.class(ranges, p)),
            Expr::Class { negated: true, .. } | Expr::AnyChar => {
                Err("a format rule with a negated class".into())
            }
            Expr::Rule(name) => self.rule(name, p, depth),
            Expr::Alt(alternatives) => {
                let mut ends = Vec::new();
                for a in alternatives {
                    ends.extend(self.expr(a, p, depth + 1)?);
                }
                Ok(union(ends))
            }
            Expr::Seq(items) => {
                let mut at: Ends = vec![(p, Expr::Empty)];
                for item in items {
                    at = self.then(at, item, depth)?;
                }
                Ok(at)
            }
            Expr::Repeat { item, min, max } => {
                let mut at: Ends = vec![(p, Expr::Empty)];
                for _ in 0..*min {
                    at = self.then(at, item, depth)?;
                }
                match max {
                    Some(n) => {
                        let mut all = at.clone();
                        for _ in *min..*n {
                            at = self.then(at, item, depth)?;
                            all.extend(at.iter().cloned());
                        }
                        Ok(union(all))
                    }
                    None => self.star(at, item, depth),
                }
            }
        }
    }

    /// The class `ranges` read from `p`: its characters grouped by the state they lead to.
    fn class(&self, ranges: &[(u32, u32)], p: usize) -> Ends {
        let mut by_target: Vec<(usize, Vec<(u32, u32)>)> = Vec::new();
        for &(lo, hi) in ranges {
            let mut k = self.intervals.partition_point(|r| r.1 < lo);
            while let Some(&(a, b)) = self.intervals.get(k) {
                if a > hi {
                    break;
                }
                if let Some(q) = self.dfa.next[p][k] {
                    let q = self.canonical(q);
                    let piece = (a.max(lo), b.min(hi));
                    match by_target.iter_mut().find(|(t, _)| *t == q) {
                        Some((_, pieces)) => pieces.push(piece),
                        None => by_target.push((q, vec![piece])),
                    }
                }
                k += 1;
            }
        }
        by_target
            .into_iter()
            .map(|(q, pieces)| (q, class_or_char(crate::strings::normalize(pieces))))
            .collect()
    }

    /// A format rule read from `p`: one new rule per end (remembered per rule and state).
    fn rule(&mut self, name: &RuleName, p: usize, depth: u32) -> Result<Ends, String> {
        let body = crate::formats::rule_body(name.as_str())
            .ok_or_else(|| format!("rule {name} is not a format rule"))?;
        let key = crate::formats::rule_name(name.as_str())
            .ok_or_else(|| format!("rule {name} is not a format rule"))?;
        if let Some(ends) = self.done.get(&(key, p)) {
            return Ok(ends.clone());
        }
        let found = self.expr(body, p, depth + 1)?;
        let mut ends = Vec::new();
        for (q, e) in found {
            let e = if is_small(&e) { e } else { self.name(key, e)? };
            ends.push((q, e));
        }
        self.done.insert((key, p), ends.clone());
        Ok(ends)
    }

    /// `item` read after each of `at`: a prefix that several ends share becomes a rule.
    fn then(&mut self, at: Ends, item: &Expr, depth: u32) -> Result<Ends, String> {
        let mut next = Vec::new();
        for (r, before) in at {
            let found = self.expr(item, r, depth + 1)?;
            let before = if found.len() > 1 && !is_small(&before) {
                self.name("part", before)?
            } else {
                before
            };
            for (q, e) in found {
                next.push((q, joined(before.clone(), e)));
            }
        }
        Ok(union(next))
    }

    /// Any number of `item` read after each of `at`: a right-recursive rule per pair of
    /// states, `from-r-to-q ::= item(r→s) from-s-to-q | ...` (and `""` where r is q).
    fn star(&mut self, at: Ends, item: &Expr, depth: u32) -> Result<Ends, String> {
        if nullable(item, 0) {
            return Err("a repetition of a part that can be empty".into());
        }
        // the states reachable by repetitions, and each one's moves
        let mut states: Vec<usize> = at.iter().map(|(r, _)| *r).collect();
        states.sort_unstable();
        states.dedup();
        let mut moves: FxHashMap<usize, Ends> = FxHashMap::default();
        let mut i = 0;
        while i < states.len() {
            let r = states[i];
            let found = self.expr(item, r, depth + 1)?;
            for (s, _) in &found {
                if !states.contains(s) {
                    states.push(*s);
                }
            }
            moves.insert(r, found);
            i += 1;
        }
        let reach = reachability(&states, &moves);
        // names first, since the rules refer to each other; only pairs with a way between
        // them get one, so every rule has an alternative and none admits a wrong end
        let mut names: FxHashMap<(usize, usize), RuleName> = FxHashMap::default();
        for &pair in &reach {
            let hint = self.fresh_hint("rep")?;
            names.insert(pair, self.rules.reserve(&hint, None));
        }
        for &(r, q) in &reach {
            let mut alternatives = Vec::new();
            for (s, e) in moves.get(&r).into_iter().flatten() {
                if let Some(rest) = names.get(&(*s, q)) {
                    alternatives.push(Expr::seq([e.clone(), Expr::rule(rest)]));
                }
            }
            if r == q {
                alternatives.push(Expr::Empty);
            }
            let body = Expr::alt(alternatives).unwrap_or(Expr::Empty);
            self.rules.fill(&names[&(r, q)], body);
        }
        let mut out = Vec::new();
        for (r, before) in at {
            for &(from, q) in &reach {
                if from == r {
                    out.push((q, Expr::seq([before.clone(), Expr::rule(&names[&(r, q)])])));
                }
            }
        }
        Ok(union(out))
    }

    /// Records the format rules `e` refers to, to be written as they are.
    fn keep_unchanged(&mut self, e: &Expr) {
        match e {
            Expr::Rule(name) => {
                if let Some(key) = crate::formats::rule_name(name.as_str())
                    && !self.unchanged.contains(&key)
                {
                    self.unchanged.push(key);
                }
            }
            Expr::Seq(items) | Expr::Alt(items) => {
                for item in items {
                    self.keep_unchanged(item);
                }
            }
            Expr::Repeat { item, .. } => self.keep_unchanged(item),
            Expr::Empty | Expr::Literal(_) | Expr::Class { .. } | Expr::AnyChar => {}
        }
    }
}

/// A class, or the one character it holds as a literal (`"2"` rather than `[2]`; format
/// classes hold no quote or backslash, which a literal would have to escape).
fn class_or_char(ranges: Vec<(u32, u32)>) -> Expr {
    if let [(lo, hi)] = ranges.as_slice()
        && lo == hi
        && let Some(c) = char::from_u32(*lo)
        && c != '"'
        && c != '\\'
    {
        return Expr::literal(c.to_string());
    }
    Expr::Class {
        ranges,
        negated: false,
    }
}

/// `a` then `b`, a literal ending `a` and one starting `b` written as one.
fn joined(a: Expr, b: Expr) -> Expr {
    let mut items = match Expr::seq([a, b]) {
        Expr::Seq(items) => items,
        other => return other,
    };
    let mut out: Vec<Expr> = Vec::with_capacity(items.len());
    for item in items.drain(..) {
        match (out.last_mut(), item) {
            (Some(Expr::Literal(x)), Expr::Literal(y)) => x.push_str(&y),
            (_, item) => out.push(item),
        }
    }
    Expr::seq(out)
}

/// Whether an expression is cheap to repeat where it is used (no rule needed for it).
fn is_small(e: &Expr) -> bool {
    matches!(
        e,
        Expr::Empty | Expr::Literal(_) | Expr::Class { .. } | Expr::Rule(_)
    )
}

/// The ends merged by state, in order of first appearance.
fn union(ends: impl IntoIterator<Item = (usize, Expr)>) -> Ends {
    let mut by_state: Vec<(usize, Vec<Expr>)> = Vec::new();
    for (q, e) in ends {
        match by_state.iter_mut().find(|(s, _)| *s == q) {
            Some((_, es)) => {
                if !es.contains(&e) {
                    es.push(e);
                }
            }
            None => by_state.push((q, vec![e])),
        }
    }
    by_state
        .into_iter()
        .filter_map(|(q, es)| Some((q, optional_alt(es)?)))
        .collect()
}

/// The alternatives as one expression, an empty one written as `?` on the rest.
fn optional_alt(alternatives: Vec<Expr>) -> Option<Expr> {
    let had_empty = alternatives.contains(&Expr::Empty);
    let rest: Vec<Expr> = alternatives
        .into_iter()
        .filter(|e| *e != Expr::Empty)
        .collect();
    match (Expr::alt(rest), had_empty) {
        (Some(e), true) => Some(Expr::repeat(e, 0, Some(1))),
        (Some(e), false) => Some(e),
        (None, true) => Some(Expr::Empty),
        (None, false) => None,
    }
}

/// The pairs (r, q) with q reachable from r in zero or more moves.
fn reachability(states: &[usize], moves: &FxHashMap<usize, Ends>) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    for &r in states {
        let mut seen = vec![r];
        let mut i = 0;
        while i < seen.len() {
            for (s, _) in moves.get(&seen[i]).into_iter().flatten() {
                if !seen.contains(s) {
                    seen.push(*s);
                }
            }
            i += 1;
        }
        out.extend(seen.into_iter().map(|q| (r, q)));
    }
    out
}

/// Whether `e` matches the empty string (format rules are not recursive; depth-bounded).
fn nullable(e: &Expr, depth: u32) -> bool {
    if depth > 64 {
        return true;
    }
    match e {
        Expr::Empty => true,
        Expr::Literal(t) => t.is_empty(),
        Expr::Class { .. } | Expr::AnyChar => false,
        Expr::Rule(name) => {
            crate::formats::rule_body(name.as_str()).is_none_or(|b| nullable(b, depth + 1))
        }
        Expr::Seq(items) => items.iter().all(|i| nullable(i, depth + 1)),
        Expr::Alt(items) => items.iter().any(|i| nullable(i, depth + 1)),
        Expr::Repeat { item, min, .. } => *min == 0 || nullable(item, depth + 1),
    }
}

/// For each state, whether every text read from it is accepted: it accepts, it moves on
/// every character, and so does every state it moves to (the greatest such set).
fn universal_states(dfa: &Dfa, intervals: &[(u32, u32)]) -> Vec<bool> {
    let covers_all = crate::strings::normalize(intervals.to_vec()) == SCALARS;
    let mut universal: Vec<bool> = (0..dfa.next.len())
        .map(|s| covers_all && dfa.accepting[s] && dfa.next[s].iter().all(Option::is_some))
        .collect();
    loop {
        let mut changed = false;
        for s in 0..dfa.next.len() {
            if universal[s] && dfa.next[s].iter().flatten().any(|&t| !universal[t]) {
                universal[s] = false;
                changed = true;
            }
        }
        if !changed {
            return universal;
        }
    }
}
