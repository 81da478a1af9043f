//! Sets of code points as sorted inclusive ranges: what a grammar allows next.

use serde::Serialize;

use crate::{ElementKind, Grammar};

/// The largest Unicode scalar value.
pub const MAX_CHAR: u32 = 0x10FFFF;

/// The largest value a class is matched against. llama.cpp compares decoded values, which reach
/// past U+10FFFF for lead bytes F5–FF and `\U` escapes, so `[^x]` and `.` match those too.
pub const MAX_VALUE: u32 = u32::MAX;

/// A set of code points, as sorted, disjoint, non-adjacent inclusive ranges.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize)]
pub struct CharSet {
    ranges: Vec<(u32, u32)>,
}

impl CharSet {
    /// The empty set.
    pub fn new() -> Self {
        CharSet::default()
    }

    /// Every value (`.`).
    pub fn all() -> Self {
        CharSet {
            ranges: vec![(0, MAX_VALUE)],
        }
    }

    /// Adds `lo..=hi` (ignored when `lo > hi`).
    pub fn add_range(&mut self, lo: u32, hi: u32) {
        if lo <= hi {
            self.ranges.push((lo, hi));
            self.normalize();
        }
    }

    /// Adds every code point of `other`.
    pub fn union_with(&mut self, other: &CharSet) {
        self.ranges.extend_from_slice(&other.ranges);
        self.normalize();
    }

    /// The values of `0..=MAX_VALUE` not in this set.
    pub fn complement(&self) -> CharSet {
        let mut out = Vec::new();
        let mut next = 0u32;
        for &(lo, hi) in &self.ranges {
            if lo > next {
                out.push((next, lo - 1));
            }
            next = hi.saturating_add(1);
        }
        if self.ranges.last().is_none_or(|&(_, hi)| hi < MAX_VALUE) {
            out.push((next, MAX_VALUE));
        }
        CharSet { ranges: out }
    }

    /// True if `c` is in the set.
    pub fn contains(&self, c: u32) -> bool {
        let i = self.ranges.partition_point(|&(_, hi)| hi < c);
        self.ranges.get(i).is_some_and(|&(lo, _)| lo <= c)
    }

    /// True if the set has no code point.
    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }

    /// The ranges, sorted.
    pub fn ranges(&self) -> &[(u32, u32)] {
        &self.ranges
    }

    /// Number of code points in the set.
    pub fn len(&self) -> u64 {
        self.ranges
            .iter()
            .map(|&(lo, hi)| u64::from(hi - lo) + 1)
            .sum()
    }

    fn normalize(&mut self) {
        self.ranges.sort_unstable();
        let mut merged: Vec<(u32, u32)> = Vec::with_capacity(self.ranges.len());
        for &(lo, hi) in &self.ranges {
            match merged.last_mut() {
                Some(last) if lo <= last.1.saturating_add(1) => last.1 = last.1.max(hi),
                _ => merged.push((lo, hi)),
            }
        }
        self.ranges = merged;
    }

    /// Human descriptions, one per range (`'a'`, `[0-9]`), or "any character except ..." when
    /// the set is most of Unicode.
    pub fn describe(&self) -> Vec<String> {
        if self.len() > u64::from(MAX_CHAR) / 2 {
            // Describe by what is missing, among real characters.
            let mut missing = self.complement();
            missing.ranges.retain(|&(lo, _)| lo <= MAX_CHAR);
            if let Some(last) = missing.ranges.last_mut() {
                last.1 = last.1.min(MAX_CHAR);
            }
            if missing.is_empty() {
                return vec!["any character".to_string()];
            }
            let parts: Vec<String> = missing.ranges.iter().map(|&r| describe_range(r)).collect();
            return vec![format!("any character except {}", parts.join(" "))];
        }
        self.ranges.iter().map(|&r| describe_range(r)).collect()
    }
}

fn describe_range((lo, hi): (u32, u32)) -> String {
    if lo == hi {
        format!("'{}'", show_char(lo))
    } else {
        format!("[{}-{}]", show_char(lo), show_char(hi))
    }
}

/// A code point as a person would write it inside quotes: escapes for control characters.
pub fn show_char(c: u32) -> String {
    match char::from_u32(c) {
        Some('\n') => "\\n".into(),
        Some('\r') => "\\r".into(),
        Some('\t') => "\\t".into(),
        Some('\'') => "\\'".into(),
        Some('\\') => "\\\\".into(),
        Some(ch) if !ch.is_control() => ch.to_string(),
        _ if c <= 0xFF => format!("\\x{c:02X}"),
        _ if c <= 0xFFFF => format!("\\u{c:04X}"),
        _ => format!("\\U{c:08X}"),
    }
}

/// The code points accepted by the class starting at `pos` of `grammar`.
pub fn class_chars(grammar: &Grammar, pos: u32) -> CharSet {
    let elements = grammar.elements();
    let first = elements[pos as usize].kind;
    let mut set = CharSet::new();
    let mut p = pos as usize;
    loop {
        if elements[p + 1].kind == ElementKind::CharRngUpper {
            set.add_range(elements[p].value, elements[p + 1].value);
            p += 2;
        } else if elements[p].kind == ElementKind::CharAny {
            set = CharSet::all();
            p += 1;
        } else {
            set.add_range(elements[p].value, elements[p].value);
            p += 1;
        }
        if elements[p].kind != ElementKind::CharAlt {
            break;
        }
    }
    if first == ElementKind::CharNot {
        set.complement()
    } else {
        set
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn union_and_complement() {
        let mut s = CharSet::new();
        s.add_range('a' as u32, 'c' as u32);
        s.add_range('d' as u32, 'f' as u32);
        s.add_range('0' as u32, '0' as u32);
        assert_eq!(s.ranges(), &[(48, 48), (97, 102)]);
        assert!(s.contains('e' as u32) && !s.contains('g' as u32));
        assert_eq!(s.complement().complement(), s);
        assert_eq!(s.describe(), vec!["'0'", "[a-f]"]);
        let not_quote = CharSet {
            ranges: vec![(34, 34)],
        }
        .complement();
        assert_eq!(not_quote.describe(), vec!["any character except '\"'"]);
    }
}
