//! Numeric bounds as GBNF over decimal text.
//!
//! Integers: digit-range rules in the manner of llama.cpp's converter (split by digit count, then
//! by the first differing digit). Numbers: exact for decimal bounds, over the canonical text form
//! `-?int(.frac)?` (bounded numbers are written without exponent); integer part, then fraction
//! digits compared digit by digit against the bound's fraction. Built as typed [`Expr`]s.

use rustc_hash::FxHashMap;

use crate::error::{Report, SchemaError, invalid};
use crate::expr::{Expr, RuleName, never};
use crate::rules::RuleTable;
use crate::strings::normalize;

/// A decimal value split into sign, integer digits (no leading zeros, "0" for zero) and fraction
/// digits (no trailing zeros).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Decimal {
    /// Negative (never set for zero).
    pub neg: bool,
    /// Integer digits.
    pub int: String,
    /// Fraction digits.
    pub frac: String,
}

impl Decimal {
    /// Parses JSON number text (as serde_json prints it), exponent included.
    pub(crate) fn parse(text: &str) -> Option<Decimal> {
        let (neg, rest) = match text.strip_prefix('-') {
            Some(r) => (true, r),
            None => (false, text),
        };
        let (mant, exp) = match rest.find(['e', 'E']) {
            Some(i) => (&rest[..i], rest[i + 1..].parse::<i64>().ok()?),
            None => (rest, 0),
        };
        let (ip, fp) = match mant.find('.') {
            Some(i) => (&mant[..i], &mant[i + 1..]),
            None => (mant, ""),
        };
        if ip.is_empty() || !ip.bytes().chain(fp.bytes()).all(|b| b.is_ascii_digit()) {
            return None;
        }
        if exp.abs() > 400 {
            return None;
        }
        let digits: String = format!("{ip}{fp}");
        let point = ip.len() as i64 + exp;
        let (int, frac) = if point <= 0 {
            (
                String::new(),
                format!("{}{}", "0".repeat((-point) as usize), digits),
            )
        } else if point as usize >= digits.len() {
            (
                format!("{}{}", digits, "0".repeat(point as usize - digits.len())),
                String::new(),
            )
        } else {
            (
                digits[..point as usize].to_string(),
                digits[point as usize..].to_string(),
            )
        };
        let int = int.trim_start_matches('0');
        let int = if int.is_empty() {
            "0".to_string()
        } else {
            int.to_string()
        };
        let frac = frac.trim_end_matches('0').to_string();
        let zero = int == "0" && frac.is_empty();
        Some(Decimal {
            neg: neg && !zero,
            int,
            frac,
        })
    }

    /// Whether the value is an integer.
    pub(crate) fn is_integer(&self) -> bool {
        self.frac.is_empty()
    }

    /// The value as i128 rounded toward -inf (`floor`) or +inf (`ceil`), if it fits.
    pub(crate) fn to_i128(&self, ceil: bool) -> Option<i128> {
        if self.int.len() > 36 {
            return None;
        }
        let mut v: i128 = self.int.parse().ok()?;
        if self.neg {
            v = -v;
        }
        if !self.frac.is_empty() && (ceil != self.neg) {
            // positive & ceil: round up; negative & floor: round down (away from zero)
            v += if self.neg { -1 } else { 1 };
        }
        Some(v)
    }
}

/// Compares two decimals.
pub(crate) fn cmp_decimal(a: &Decimal, b: &Decimal) -> std::cmp::Ordering {
    use std::cmp::Ordering;
    match (a.neg, b.neg) {
        (false, true) => return Ordering::Greater,
        (true, false) => return Ordering::Less,
        _ => {}
    }
    let mag = a
        .int
        .len()
        .cmp(&b.int.len())
        .then_with(|| a.int.cmp(&b.int))
        .then_with(|| a.frac.cmp(&b.frac));
    if a.neg { mag.reverse() } else { mag }
}

fn alts(parts: Vec<Expr>) -> Option<Expr> {
    Expr::alt(parts)
}

/// The digits `lo..=hi` (a literal for one digit).
pub(crate) fn digit_class(lo: u8, hi: u8) -> Expr {
    if lo == hi {
        Expr::literal((lo as char).to_string())
    } else {
        Expr::Class {
            ranges: vec![(u32::from(lo), u32::from(hi))],
            negated: false,
        }
    }
}

/// Any one digit, `[0-9]`.
pub(crate) fn digit() -> Expr {
    digit_class(b'0', b'9')
}

/// `[0-9]*`.
fn digits_any() -> Expr {
    Expr::repeat(digit(), 0, None)
}

/// Exactly `n` digits.
fn any_digits(n: usize) -> Expr {
    let n = u32::try_from(n).unwrap_or(u32::MAX);
    Expr::repeat(digit(), n, Some(n))
}

/// `lo` to `hi` digits (`hi: None`: unbounded), after a non-zero digit.
fn leading_nonzero(min: usize, max: Option<usize>) -> Expr {
    let min = u32::try_from(min).unwrap_or(u32::MAX);
    let max = max.map(|m| u32::try_from(m).unwrap_or(u32::MAX));
    Expr::seq([digit_class(b'1', b'9'), Expr::repeat(digit(), min, max)])
}

/// In [`crate::ConvertOptions::llama_compat`] mode, integer parts have at most this many digits
/// when no upper bound limits them (llama.cpp's `integral-part`); otherwise any number of digits.
pub(crate) const MAX_DIGITS: usize = 16;

/// Digit strings of the same length between `a` and `b` inclusive (`a <= b`).
///
/// One call (and one level of the expression) per digit: a bound has at most a few hundred
/// ([`Decimal::parse`] refuses exponents past 400; serde_json reads at most 17 significant
/// digits), and so do the `frac_*` functions below.
fn same_len(a: &[u8], b: &[u8]) -> Expr {
    let p = a.iter().zip(b).take_while(|(x, y)| x == y).count();
    let prefix = Expr::literal(String::from_utf8_lossy(&a[..p]).into_owned());
    if p == a.len() {
        return prefix;
    }
    let (da, db) = (a[p], b[p]);
    let (ra, rb) = (&a[p + 1..], &b[p + 1..]);
    let n = ra.len();
    let mut parts = Vec::new();
    if n == 0 {
        parts.push(digit_class(da, db));
    } else {
        let lo_full = ra.iter().all(|&c| c == b'0');
        let hi_full = rb.iter().all(|&c| c == b'9');
        let start = if lo_full { da } else { da + 1 };
        let end = if hi_full { db } else { db - 1 };
        if !lo_full {
            let nines = vec![b'9'; n];
            parts.push(Expr::seq([digit_class(da, da), same_len(ra, &nines)]));
        }
        if start <= end {
            parts.push(Expr::seq([digit_class(start, end), any_digits(n)]));
        }
        if !hi_full {
            let zeros = vec![b'0'; n];
            parts.push(Expr::seq([digit_class(db, db), same_len(&zeros, rb)]));
        }
    }
    let body = alts(parts).unwrap_or(Expr::Empty);
    Expr::seq([prefix, body])
}

/// Non-negative integers (no leading zeros) in `[lo, hi]`, `hi = None` for no upper bound
/// (then at most [`MAX_DIGITS`] digits when `capped`, as llama.cpp, else any number).
pub(crate) fn uint_range(lo: u128, hi: Option<u128>, capped: bool) -> Option<Expr> {
    if hi.is_some_and(|h| h < lo) {
        return None;
    }
    let lo_s = lo.to_string();
    let mut parts = Vec::new();
    match hi {
        Some(h) => {
            let hi_s = h.to_string();
            for len in lo_s.len()..=hi_s.len() {
                let a = if len == lo_s.len() {
                    lo_s.clone()
                } else {
                    format!("1{}", "0".repeat(len - 1))
                };
                let b = if len == hi_s.len() {
                    hi_s.clone()
                } else {
                    "9".repeat(len)
                };
                parts.push(same_len(a.as_bytes(), b.as_bytes()));
            }
        }
        None => {
            parts.push(same_len(lo_s.as_bytes(), "9".repeat(lo_s.len()).as_bytes()));
            if !capped {
                parts.push(leading_nonzero(lo_s.len(), None));
            } else if lo_s.len() < MAX_DIGITS {
                // like llama.cpp, an open upper side stops at 16 digits
                parts.push(leading_nonzero(lo_s.len(), Some(MAX_DIGITS - 1)));
            }
        }
    }
    alts(parts)
}

/// Integers in `[lo, hi]` (either side open when None), canonical text (no `-0`, no leading
/// zeros). `None` when the range is empty. `capped`: see [`uint_range`].
pub(crate) fn int_range(lo: Option<i128>, hi: Option<i128>, capped: bool) -> Option<Expr> {
    if let (Some(l), Some(h)) = (lo, hi)
        && l > h
    {
        return None;
    }
    let mut parts = Vec::new();
    // negative part: -m with m in [max(1, -hi), -lo]
    if lo.is_none_or(|l| l < 0) {
        let m_lo = match hi {
            Some(h) if h < 0 => h.unsigned_abs(),
            _ => 1,
        };
        let m_hi = lo.map(|l| l.unsigned_abs());
        if let Some(r) = uint_range(m_lo, m_hi, capped) {
            parts.push(Expr::seq([Expr::literal("-"), r]));
        }
    }
    if hi.is_none_or(|h| h >= 0) {
        let a = lo.map_or(0, |l| l.max(0) as u128);
        let b = hi.map(|h| h as u128);
        if let Some(r) = uint_range(a, b, capped) {
            parts.push(r);
        }
    }
    alts(parts)
}

/// A bound on a number: value and exclusivity.
#[derive(Clone, Debug)]
pub(crate) struct Bound {
    /// The bound.
    pub value: Decimal,
    /// Exclusive bound.
    pub exclusive: bool,
}

/// (grammar for non-empty fraction digits, whether empty digits are allowed)
type Frac = (Option<Expr>, bool);

/// `d` followed by the fraction digits `rest`.
fn prefix_digit(d: u8, rest: Frac) -> Option<Expr> {
    let d = digit_class(d, d);
    match rest {
        (Some(r), true) => Some(Expr::seq([d, Expr::repeat(r, 0, Some(1))])),
        (Some(r), false) => Some(Expr::seq([d, r])),
        (None, true) => Some(d),
        (None, false) => None,
    }
}

/// `[0-9]* [1-9] [0-9]*`: digits not all zero.
fn nonzero_digits() -> Expr {
    Expr::seq([digits_any(), digit_class(b'1', b'9'), digits_any()])
}

/// Digit strings D with 0.D >= 0.f (> when `x`).
fn frac_ge(f: &[u8], x: bool) -> Frac {
    let Some((&d, rest)) = f.split_first() else {
        return if x {
            (Some(nonzero_digits()), false)
        } else {
            (Some(Expr::repeat(digit(), 1, None)), true)
        };
    };
    let mut parts = Vec::new();
    if d < b'9' {
        parts.push(Expr::seq([digit_class(d + 1, b'9'), digits_any()]));
    }
    parts.extend(prefix_digit(d, frac_ge(rest, x)));
    (alts(parts), false)
}

/// Digit strings D with 0.D <= 0.f (< when `x`).
fn frac_le(f: &[u8], x: bool) -> Frac {
    let Some((&d, rest)) = f.split_first() else {
        return if x {
            (None, false)
        } else {
            (Some(Expr::repeat(Expr::literal("0"), 1, None)), true)
        };
    };
    let mut parts = Vec::new();
    if d > b'0' {
        parts.push(Expr::seq([digit_class(b'0', d - 1), digits_any()]));
    }
    parts.extend(prefix_digit(d, frac_le(rest, x)));
    (alts(parts), true)
}

/// Digit strings D with 0.D > 0 and 0.D <= 0.b (< when `bx`).
fn frac_pos_le(b: &[u8], bx: bool) -> Frac {
    let Some((&d, rest)) = b.split_first() else {
        return (None, false);
    };
    let mut parts = Vec::new();
    if d > b'0' {
        parts.push(Expr::seq([Expr::literal("0"), nonzero_digits()]));
        if d > b'1' {
            parts.push(Expr::seq([digit_class(b'1', d - 1), digits_any()]));
        }
        parts.extend(prefix_digit(d, frac_le(rest, bx)));
    } else {
        parts.extend(prefix_digit(d, frac_pos_le(rest, bx)));
    }
    (alts(parts), false)
}

/// Digit strings D with 0.a <= 0.D <= 0.b (strict per flag), `a <= b`.
fn frac_between(a: &[u8], ax: bool, b: &[u8], bx: bool) -> Frac {
    match (a.split_first(), b.split_first()) {
        (None, _) if !ax => frac_le(b, bx),
        (None, _) => frac_pos_le(b, bx),
        (Some(_), None) => (None, false),
        (Some((&a0, ar)), Some((&b0, br))) => {
            if a0 == b0 {
                (prefix_digit(a0, frac_between(ar, ax, br, bx)), false)
            } else {
                let mut parts = Vec::new();
                parts.extend(prefix_digit(a0, frac_ge(ar, ax)));
                if a0 + 1 < b0 {
                    parts.push(Expr::seq([digit_class(a0 + 1, b0 - 1), digits_any()]));
                }
                parts.extend(prefix_digit(b0, frac_le(br, bx)));
                (alts(parts), false)
            }
        }
    }
}

/// The fraction part (dot included) for fraction digits `f`; `None` when nothing matches.
fn frac_expr(f: Frac) -> Option<Expr> {
    match f {
        (Some(r), true) => Some(Expr::repeat(Expr::seq([Expr::literal("."), r]), 0, Some(1))),
        (Some(r), false) => Some(Expr::seq([Expr::literal("."), r])),
        (None, true) => Some(Expr::Empty),
        (None, false) => None,
    }
}

/// `( "." [0-9]+ )?`: any fraction.
fn any_frac() -> Expr {
    Expr::repeat(
        Expr::seq([Expr::literal("."), Expr::repeat(digit(), 1, None)]),
        0,
        Some(1),
    )
}

/// `( "." "0"+ )?`: an integer written with a zero fraction.
pub(crate) fn zero_frac() -> Expr {
    Expr::repeat(
        Expr::seq([
            Expr::literal("."),
            Expr::repeat(Expr::literal("0"), 1, None),
        ]),
        0,
        Some(1),
    )
}

/// Magnitudes `int(.frac)?` between non-negative bounds.
fn magnitude_range(lo: &Bound, hi: Option<&Bound>, capped: bool) -> Option<Expr> {
    if let Some(h) = hi {
        let ord = cmp_decimal(&lo.value, &h.value);
        if ord.is_gt() || (ord.is_eq() && (lo.exclusive || h.exclusive)) {
            return None;
        }
    }
    let li: u128 = lo.value.int.parse().ok()?;
    let mut parts = Vec::new();
    match hi {
        Some(h) if h.value.int == lo.value.int => {
            let f = frac_between(
                lo.value.frac.as_bytes(),
                lo.exclusive,
                h.value.frac.as_bytes(),
                h.exclusive,
            );
            let ft = frac_expr(f)?;
            parts.push(Expr::seq([Expr::literal(li.to_string()), ft]));
        }
        _ => {
            if let Some(ft) = frac_expr(frac_ge(lo.value.frac.as_bytes(), lo.exclusive)) {
                parts.push(Expr::seq([Expr::literal(li.to_string()), ft]));
            }
            let hi_int: Option<u128> = match hi {
                Some(h) => Some(h.value.int.parse().ok()?),
                None => None,
            };
            let mid_hi = hi_int.map(|h| h.saturating_sub(1));
            if hi_int.is_none_or(|h| h >= li + 2)
                && let Some(r) = uint_range(li + 1, mid_hi, capped)
            {
                parts.push(Expr::seq([r, any_frac()]));
            }
            if let (Some(h), Some(hv)) = (hi, hi_int)
                && let Some(ft) = frac_expr(frac_le(h.value.frac.as_bytes(), h.exclusive))
            {
                parts.push(Expr::seq([Expr::literal(hv.to_string()), ft]));
            }
        }
    }
    alts(parts)
}

fn negate(b: &Bound) -> Bound {
    let mut v = b.value.clone();
    v.neg = !(v.neg || (v.int == "0" && v.frac.is_empty()));
    Bound {
        value: v,
        exclusive: b.exclusive,
    }
}

fn zero(exclusive: bool) -> Bound {
    Bound {
        value: Decimal {
            neg: false,
            int: "0".into(),
            frac: String::new(),
        },
        exclusive,
    }
}

/// Numbers (text `-?int(.frac)?`, no exponent) between optional bounds. `None` when empty.
/// Fails (Err) only when a bound is too large to handle.
/// `capped`: see [`uint_range`].
pub(crate) fn number_range(
    lo: Option<&Bound>,
    hi: Option<&Bound>,
    capped: bool,
) -> Result<Option<Expr>, String> {
    for b in [lo, hi].into_iter().flatten() {
        if b.value.int.len() > 36 {
            return Err("bound too large".into());
        }
    }
    let mut parts = Vec::new();
    // negative numbers: magnitude in (max(0, -hi), -lo]
    let neg_possible = lo.is_none_or(|l| l.value.neg);
    if neg_possible {
        let mag_lo = match hi {
            Some(h) if h.value.neg => negate(h),
            _ => zero(true),
        };
        let mag_hi = lo.map(negate);
        if let Some(r) = magnitude_range(&mag_lo, mag_hi.as_ref(), capped) {
            parts.push(Expr::seq([Expr::literal("-"), r]));
        }
    }
    let nonneg_possible = hi.is_none_or(|h| !h.value.neg);
    if nonneg_possible {
        let mag_lo = match lo {
            Some(l) if !l.value.neg => l.clone(),
            _ => zero(false),
        };
        if let Some(r) = magnitude_range(&mag_lo, hi, capped) {
            parts.push(r);
        }
    }
    Ok(alts(parts))
}

/// The number keywords of a node (read by [`crate::ir`]).
#[derive(Debug)]
pub(crate) struct NumberRules {
    /// Only numbers with a non-zero fraction (`not: {type: integer}`, see [`crate::ir::FRACTIONAL`]).
    pub(crate) fractional: bool,
    /// `multipleOf` (positive).
    pub(crate) multiple_of: Option<Decimal>,
    /// The tighter of `minimum` and `exclusiveMinimum`.
    pub(crate) lower: Option<Bound>,
    /// The tighter of `maximum` and `exclusiveMaximum`.
    pub(crate) upper: Option<Bound>,
}

impl NumberRules {
    /// Whether a bound is set.
    pub(crate) fn bounded(&self) -> bool {
        self.lower.is_some() || self.upper.is_some()
    }
}

/// Where a number node is, for its rules: the rule-name hint, the comment its rules carry (the
/// schema location), its JSON pointer for errors, and whether llama.cpp's digit limits apply.
pub(crate) struct Site<'a> {
    /// The rule-name hint (empty: the node is not named).
    pub(crate) hint: &'a str,
    /// The comment of the node's rules.
    pub(crate) comment: Option<String>,
    /// The node's JSON pointer, from `#`.
    pub(crate) pointer: &'a str,
    /// [`crate::ConvertOptions::llama_compat`].
    pub(crate) llama_compat: bool,
}

/// Numbers (integers when `integer`) within the node's number keywords.
pub(crate) fn number(
    table: &mut RuleTable,
    rules: &NumberRules,
    at: &Site<'_>,
    integer: bool,
    report: &mut Report<'_>,
) -> Result<Option<Expr>, SchemaError> {
    let bounded = rules.bounded();
    if rules.fractional {
        if integer {
            return Ok(None);
        }
        if bounded || rules.multiple_of.is_some() {
            report.unsupported(
                "not",
                at.pointer,
                "not integer combined with numeric bounds",
            )?;
        } else {
            let digits = || Expr::repeat(digit(), 0, None);
            return Ok(Some(Expr::seq([
                Expr::repeat(Expr::literal("-"), 0, Some(1)),
                table.primitive_rule("integral-part"),
                Expr::literal("."),
                digits(),
                digit_class(b'1', b'9'),
                digits(),
            ])));
        }
    }
    if let Some(d) = &rules.multiple_of {
        // m = p / 10^q
        let digits = format!("{}{}", d.int, d.frac);
        let p: Option<u64> = digits.trim_start_matches('0').parse().ok();
        let q = d.frac.len();
        match p {
            Some(1) if integer => {}
            Some(p) if !bounded && p <= 64 && (p as usize) * (q + 1) <= 512 => {
                return Ok(Some(Expr::Rule(multiple_of(table, at, p, q, integer))));
            }
            _ => {
                let why = if bounded {
                    "multipleOf combined with bounds"
                } else {
                    "divisor too large to express"
                };
                report.unsupported("multipleOf", at.pointer, why)?;
            }
        }
    }
    let (lo, hi) = (&rules.lower, &rules.upper);
    if lo.is_none() && hi.is_none() {
        return Ok(Some(table.primitive_rule(if integer {
            "integer"
        } else {
            "number"
        })));
    }
    let too_big = || invalid("minimum", at.pointer, "bound too large");
    if integer {
        let l = match lo {
            Some(b) => {
                let v = b.value.to_i128(true).ok_or_else(too_big)?;
                Some(if b.exclusive && b.value.is_integer() {
                    v + 1
                } else {
                    v
                })
            }
            None => None,
        };
        let h = match hi {
            Some(b) => {
                let v = b.value.to_i128(false).ok_or_else(too_big)?;
                Some(if b.exclusive && b.value.is_integer() {
                    v - 1
                } else {
                    v
                })
            }
            None => None,
        };
        if let (Some(l), Some(h)) = (l, h)
            && l > h
        {
            return Err(invalid(
                "minimum",
                at.pointer,
                "the bounds leave no integer between them: no integer is valid",
            ));
        }
        Ok(int_range(l, h, at.llama_compat).map(|r| Expr::seq([r, zero_frac()])))
    } else {
        number_range(lo.as_ref(), hi.as_ref(), at.llama_compat)
            .map_err(|m| invalid("minimum", at.pointer, m))
    }
}

/// Numbers (integers when `integer`) that are multiples of p / 10^q: a DFA over the digits
/// tracking the remainder modulo p of the value times 10^q.
fn multiple_of(table: &mut RuleTable, at: &Site<'_>, p: u64, q: usize, integer: bool) -> RuleName {
    let base = format!(
        "{}-multiple",
        if at.hint.is_empty() {
            "number"
        } else {
            at.hint
        }
    );
    let pow = |j: usize| -> u64 { (0..j).fold(1u64, |acc, _| (acc * 10) % p) };
    // digit classes from state r: (target, class)
    let steps = |r: u64, from: u8| -> Vec<(u64, Expr)> {
        let mut by_target: Vec<(u64, Vec<(u32, u32)>)> = Vec::new();
        for d in from..=9u8 {
            let t = (10 * r + d as u64) % p;
            let cp = (b'0' + d) as u32;
            match by_target.iter_mut().find(|(x, _)| *x == t) {
                Some((_, v)) => v.push((cp, cp)),
                None => by_target.push((t, vec![(cp, cp)])),
            }
        }
        by_target
            .into_iter()
            .map(|(t, v)| {
                (
                    t,
                    Expr::Class {
                        ranges: normalize(v),
                        negated: false,
                    },
                )
            })
            .collect()
    };
    let comment = at.comment.clone();
    // fraction states E(r, j): digits consumed after the point, value-so-far mod p
    let mut frac: FxHashMap<(u64, usize), Option<RuleName>> = FxHashMap::default();
    if !integer {
        for j in (1..=q).rev() {
            for r in 0..p {
                let body = if j == q {
                    (r == 0).then(|| Expr::repeat(Expr::literal("0"), 0, None))
                } else {
                    let mut alts_v = Vec::new();
                    if (r * pow(q - j)).is_multiple_of(p) {
                        alts_v.push(Expr::Empty);
                    }
                    for (t, class) in steps(r, 0) {
                        if let Some(Some(next)) = frac.get(&(t, j + 1)) {
                            alts_v.push(Expr::seq([class, Expr::rule(next)]));
                        }
                    }
                    Expr::alt(alts_v)
                };
                let name = body.map(|b| table.add(&format!("{base}-f{r}-{j}"), b, comment.clone()));
                frac.insert((r, j), name);
            }
        }
    }
    // the part after the integer digits, from state r
    let tail = |r: u64, frac: &FxHashMap<(u64, usize), Option<RuleName>>| -> Option<Expr> {
        let end_ok = (r * pow(q)).is_multiple_of(p);
        if integer {
            return end_ok.then(zero_frac);
        }
        let mut v = Vec::new();
        if end_ok {
            v.push(Expr::Empty);
        }
        if q == 0 {
            if r == 0 {
                v.push(Expr::seq([
                    Expr::literal("."),
                    Expr::repeat(Expr::literal("0"), 1, None),
                ]));
            }
        } else {
            let firsts: Vec<Expr> = steps(r, 0)
                .into_iter()
                .filter_map(|(t, class)| {
                    frac.get(&(t, 1))
                        .cloned()
                        .flatten()
                        .map(|n| Expr::seq([class, Expr::Rule(n)]))
                })
                .collect();
            if let Some(f) = Expr::alt(firsts) {
                v.push(Expr::seq([Expr::literal("."), f]));
            }
        }
        Expr::alt(v)
    };
    // integer states I(r)
    let names: Vec<RuleName> = (0..p)
        .map(|r| table.reserve(&format!("{base}-i{r}"), comment.clone()))
        .collect();
    for r in 0..p {
        let mut v: Vec<Expr> = steps(r, 0)
            .into_iter()
            .map(|(t, class)| Expr::seq([class, Expr::rule(&names[t as usize])]))
            .collect();
        if let Some(t) = tail(r, &frac) {
            v.push(t);
        }
        let body = Expr::alt(v).unwrap_or_else(never);
        table.fill(&names[r as usize], body);
    }
    let mut start: Vec<Expr> = steps(0, 1)
        .into_iter()
        .map(|(t, class)| Expr::seq([class, Expr::rule(&names[t as usize])]))
        .collect();
    start.push(Expr::seq([
        Expr::literal("0"),
        tail(0, &frac).unwrap_or(Expr::Empty),
    ]));
    let body = Expr::seq([
        Expr::repeat(Expr::literal("-"), 0, Some(1)),
        Expr::alt(start).unwrap_or_else(never),
    ]);
    table.add(&base, body, comment)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dec(s: &str) -> Decimal {
        Decimal::parse(s).unwrap()
    }

    /// Tiny matcher for the subset of GBNF these functions produce, used to check ranges by
    /// brute force.
    fn matches(grammar: &str, text: &str) -> bool {
        compile(grammar).is_match(text)
    }

    fn compile(grammar: &str) -> regex::Regex {
        // translate to a regex: literals, classes, groups, quantifiers
        let mut re = String::from("^(?:");
        let chars: Vec<char> = grammar.chars().collect();
        let mut i = 0;
        while i < chars.len() {
            match chars[i] {
                '"' => {
                    i += 1;
                    while chars[i] != '"' {
                        re.push_str(&regex_syntax::escape(&chars[i].to_string()));
                        i += 1;
                    }
                }
                '[' => {
                    while chars[i] != ']' {
                        re.push(chars[i]);
                        i += 1;
                    }
                    re.push(']');
                }
                '(' => re.push_str("(?:"),
                ' ' => {}
                c => re.push(c),
            }
            i += 1;
        }
        re.push_str(")$");
        regex::Regex::new(&re).unwrap()
    }

    #[test]
    fn parses_decimals() {
        assert_eq!(
            dec("1e2"),
            Decimal {
                neg: false,
                int: "100".into(),
                frac: "".into()
            }
        );
        assert_eq!(
            dec("-1.50"),
            Decimal {
                neg: true,
                int: "1".into(),
                frac: "5".into()
            }
        );
        assert_eq!(
            dec("1.5e-3"),
            Decimal {
                neg: false,
                int: "0".into(),
                frac: "0015".into()
            }
        );
        assert_eq!(
            dec("-0.0"),
            Decimal {
                neg: false,
                int: "0".into(),
                frac: "".into()
            }
        );
        assert_eq!(dec("2.5").to_i128(true), Some(3));
        assert_eq!(dec("-2.5").to_i128(true), Some(-2));
        assert_eq!(dec("-2.5").to_i128(false), Some(-3));
    }

    #[test]
    fn int_ranges_brute_force() {
        let cases: &[(Option<i128>, Option<i128>)] = &[
            (Some(0), Some(9)),
            (Some(5), Some(30)),
            (Some(-15), Some(7)),
            (Some(-300), Some(-12)),
            (Some(17), None),
            (None, Some(-3)),
            (None, Some(42)),
            (Some(0), None),
            (Some(100), Some(1000)),
            (Some(123), Some(4567)),
        ];
        for &(lo, hi) in cases {
            let g = int_range(lo, hi, true).unwrap().to_gbnf();
            let re = compile(&g);
            for v in -1200i128..1200 {
                let want = lo.is_none_or(|l| v >= l) && hi.is_none_or(|h| v <= h);
                assert_eq!(re.is_match(&v.to_string()), want, "{lo:?}..{hi:?} {v}: {g}");
            }
            assert!(!matches(&g, "01"));
            assert!(!matches(&g, "12345678901234567"));
            assert!(!matches(&g, "-0"));
        }
        assert_eq!(int_range(Some(3), Some(2), true), None);
    }

    #[test]
    fn number_ranges_brute_force() {
        let bounds = ["-1.25", "-1", "0", "0.5", "1.1", "2", "2.05", "10"];
        let mut values = Vec::new();
        for i in -300..300 {
            values.push(format!("{}", i as f64 / 100.0));
            values.push(format!("{:.3}", i as f64 / 100.0 + 0.004));
        }
        values.extend(["10", "10.0", "10.5", "11", "9.99", "2.050", "1.10"].map(String::from));
        for lo in bounds.iter().map(|s| Some(*s)).chain([None]) {
            for hi in bounds.iter().map(|s| Some(*s)).chain([None]) {
                for (lx, hx) in [(false, false), (true, false), (false, true), (true, true)] {
                    let lb = lo.map(|s| Bound {
                        value: dec(s),
                        exclusive: lx,
                    });
                    let hb = hi.map(|s| Bound {
                        value: dec(s),
                        exclusive: hx,
                    });
                    let g = number_range(lb.as_ref(), hb.as_ref(), true)
                        .unwrap()
                        .map(|e| e.to_gbnf());
                    let re = g.as_deref().map(compile);
                    for v in &values {
                        let d = dec(v);
                        let ok_lo = lb.as_ref().is_none_or(|b| {
                            let o = cmp_decimal(&d, &b.value);
                            o.is_gt() || (o.is_eq() && !b.exclusive)
                        });
                        let ok_hi = hb.as_ref().is_none_or(|b| {
                            let o = cmp_decimal(&d, &b.value);
                            o.is_lt() || (o.is_eq() && !b.exclusive)
                        });
                        let got = re.as_ref().is_some_and(|r| r.is_match(v));
                        assert_eq!(got, ok_lo && ok_hi, "{lo:?}{lx} {hi:?}{hx} {v}: {g:?}");
                    }
                }
            }
        }
    }
}
