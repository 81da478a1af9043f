//! Proofs about schemas, on JSON values: that `oneOf` branches are disjoint (so that the
//! alternation of their grammars is exact), the positive form of a `not`, the finite values a
//! schema allows, and what to say when no value satisfies a schema at all. Each proof is
//! sufficient, never necessary: "cannot prove" makes the walk refuse (or, lenient, widen), never
//! accept an invalid value.

use serde_json::{Map, Value};

use crate::error::{SchemaError, invalid};
use crate::ir::{self, JsonType, TypeSet};
use crate::keywords::is_ignored;
use crate::numbers;
use crate::validate::{check, json_eq};

/// The schema equivalent to `not: n`, when it can be written without `not`.
///
/// Recursive over the document, one call per level: at most [`crate::MAX_DOCUMENT_DEPTH`]
/// (a deeper document is refused before any walk).
pub(crate) fn negate(n: &Value) -> Option<Value> {
    match n {
        Value::Bool(b) => Some(Value::Bool(!b)),
        Value::Object(o) => {
            let constraining: Vec<&str> = o
                .keys()
                .map(String::as_str)
                .filter(|k| !is_ignored(k))
                .collect();
            match constraining.as_slice() {
                [] => Some(Value::Bool(false)),
                ["not"] => Some(o["not"].clone()),
                ["type"] => {
                    let listed = TypeSet::read_lenient(o)?;
                    // not integer: every other type, and numbers with a fraction
                    let fractional =
                        listed.contains(JsonType::Integer) && !listed.contains(JsonType::Number);
                    let rest: Vec<Value> = JsonType::ALL
                        .into_iter()
                        .filter(|t| !listed.with_integers().contains(*t))
                        .map(|t| Value::String(t.name().to_string()))
                        .collect();
                    if rest.is_empty() {
                        return Some(Value::Bool(false));
                    }
                    if fractional {
                        let mut m = Map::new();
                        m.insert("type".into(), Value::Array(rest));
                        m.insert(ir::FRACTIONAL.into(), Value::Bool(true));
                        return Some(Value::Object(m));
                    }
                    Some(serde_json::json!({ "type": rest }))
                }
                _ => None,
            }
        }
        _ => None,
    }
}

/// Whether `e` says that no object satisfies a schema because a required name can never be
/// present.
pub(crate) fn no_object_matches(e: &SchemaError) -> bool {
    e.keyword == "required" && e.message.contains("can never be present")
}

/// Whether a schema admits objects only (`type: "object"` or `["object"]`).
pub(crate) fn object_only(schema: &Value) -> bool {
    match schema.get("type") {
        Some(Value::String(t)) => t == "object",
        Some(Value::Array(ts)) => !ts.is_empty() && ts.iter().all(|t| t == "object"),
        _ => false,
    }
}

/// Most alternatives [`exactly_one_required`] writes for one `oneOf`.
pub(crate) const EXACTLY_ONE_MAX_ALTERNATIVES: usize = 32;

/// `oneOf` over branches that only require names (`[{"required": ["a"]}, {"required": ["b",
/// "c"]}]`) as alternatives that are disjoint by construction: each branch's names present
/// and, for every other branch, one of the names it requires absent (a property `false`);
/// only objects (every branch matches any other value, so with two or more branches no other
/// value is valid). None when a branch says more, or the alternatives would exceed
/// [`EXACTLY_ONE_MAX_ALTERNATIVES`].
pub(crate) fn exactly_one_required(list: &[Value]) -> Option<Vec<Value>> {
    let mut sets: Vec<Vec<String>> = Vec::new();
    for b in list {
        let names = ir::required_only(b)?;
        sets.push(names.into_iter().map(str::to_string).collect());
    }
    if sets.len() < 2 {
        return None;
    }
    let mut out = Vec::new();
    for (i, mine) in sets.iter().enumerate() {
        // one name to leave out per other branch: every combination
        let mut choices: Vec<Vec<String>> = vec![Vec::new()];
        for (j, theirs) in sets.iter().enumerate() {
            if i == j {
                continue;
            }
            let missing: Vec<&String> = theirs.iter().filter(|k| !mine.contains(k)).collect();
            let mut next = Vec::new();
            for c in &choices {
                for k in &missing {
                    let mut c = c.clone();
                    if !c.contains(k) {
                        c.push((*k).clone());
                    }
                    next.push(c);
                }
            }
            // no name to leave out: this branch implies the other, so never exactly one
            choices = next;
            if choices.len() > EXACTLY_ONE_MAX_ALTERNATIVES {
                return None;
            }
        }
        for absent in choices {
            let props: Map<String, Value> = absent
                .into_iter()
                .map(|k| (k, Value::Bool(false)))
                .collect();
            out.push(serde_json::json!({
                "type": "object",
                "required": mine,
                "properties": props,
            }));
            if out.len() > EXACTLY_ONE_MAX_ALTERNATIVES {
                return None;
            }
        }
    }
    Some(out)
}

/// The literal text a pattern anchored with `^` requires its matches to start with (`^x-` →
/// `x-`), cut before any quantifier; None without `^` or a literal start.
pub(crate) fn literal_prefix(pattern: &str) -> Option<String> {
    let rest = pattern.strip_prefix('^')?;
    if rest.contains('|') {
        return None;
    }
    let mut out: Vec<char> = Vec::new();
    for c in rest.chars() {
        if c.is_alphanumeric() || c == '_' || c == '-' || c == ':' || c == '/' {
            out.push(c);
        } else {
            if matches!(c, '?' | '*' | '{') {
                out.pop();
            }
            break;
        }
    }
    (!out.is_empty()).then(|| out.into_iter().collect())
}

/// The error for a whole schema no value satisfies (a grammar matching nothing is useless and
/// easy to miss): names the schema's keywords, which between them conflict.
pub(crate) fn unsatisfiable(schema: &Value, pointer: &str) -> SchemaError {
    const ANNOTATIONS: [&str; 9] = [
        "title",
        "description",
        "$schema",
        "$id",
        "$comment",
        "examples",
        "default",
        "$defs",
        "definitions",
    ];
    let keywords: Vec<&str> = match schema {
        Value::Object(map) => map
            .keys()
            .map(String::as_str)
            .filter(|k| !ANNOTATIONS.contains(k))
            .collect(),
        _ => Vec::new(),
    };
    let (keyword, message) = match keywords.as_slice() {
        [] => (
            "false".to_string(),
            "the schema is `false`: no value is valid".to_string(),
        ),
        [one] => (
            (*one).to_string(),
            format!("no value satisfies `{one}`: the grammar would match nothing"),
        ),
        many => (
            many[0].to_string(),
            format!(
                "no value satisfies {} together: they conflict, and the grammar would match nothing",
                many.iter()
                    .map(|k| format!("`{k}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        ),
    };
    invalid(&keyword, pointer, message)
}

/// Whether no value can satisfy both flattened schemas (a sufficient check, on what
/// [`ir::Facts`] reads of each).
pub(crate) fn disjoint(a: &Value, b: &Value) -> bool {
    let (am, bm) = match (a, b) {
        (Value::Bool(false), _) | (_, Value::Bool(false)) => return true,
        (Value::Object(x), Value::Object(y)) => (x, y),
        _ => return false,
    };
    let (fa, fb) = (ir::Facts::read(am), ir::Facts::read(bm));
    if fa.alternatives || fb.alternatives {
        return false;
    }
    // finite value sets
    for facts in [&fa, &fb] {
        if let Some(vals) = facts.values
            && vals
                .iter()
                .all(|v| check(v, a) == Some(false) || check(v, b) == Some(false))
        {
            return true;
        }
    }
    // a name one side requires, with values the two sides cannot share (a closed object that
    // cannot have it at all, different const/enum discriminators...)
    let members_apart = |x: &ir::Facts, y: &ir::Facts| {
        x.required()
            .any(|k| match (x.member_schema(k), y.member_schema(k)) {
                (Some(p), Some(q)) => disjoint(p, q),
                _ => false,
            })
    };
    // every number of x is below every number of y
    let below = |x: &ir::Facts, y: &ir::Facts| match (x.upper(), y.lower()) {
        (Some(h), Some(l)) => {
            let o = numbers::cmp_decimal(&h.value, &l.value);
            o.is_lt() || (o.is_eq() && (h.exclusive || l.exclusive))
        }
        _ => false,
    };
    // lengths or item counts that cannot meet
    let counts_apart = |x: (Option<u64>, Option<u64>), y: (Option<u64>, Option<u64>)| {
        matches!((x.1, y.0), (Some(h), Some(l)) if h < l)
            || matches!((y.1, x.0), (Some(h), Some(l)) if h < l)
    };
    fa.types().intersection(fb.types()).iter().all(|t| match t {
        JsonType::Object => members_apart(&fa, &fb) || members_apart(&fb, &fa),
        JsonType::Integer | JsonType::Number => below(&fa, &fb) || below(&fb, &fa),
        JsonType::String => counts_apart(fa.lengths(), fb.lengths()),
        JsonType::Array => counts_apart(fa.items(), fb.items()),
        JsonType::Null | JsonType::Boolean => false,
    })
}

/// The first two of `flattened` branches (`None`: a branch that could not be flattened) not
/// provably disjoint, if any.
pub(crate) fn first_overlap(flattened: &[Option<Value>]) -> Option<(usize, usize)> {
    for i in 0..flattened.len() {
        for j in i + 1..flattened.len() {
            let apart = match (&flattened[i], &flattened[j]) {
                (Some(a), Some(b)) => disjoint(a, b),
                _ => false,
            };
            if !apart {
                return Some((i, j));
            }
        }
    }
    None
}

/// The finite set of values a flattened schema allows, when it is small and known (`false`:
/// none; listed values or only `null`/`boolean` types, each checked against the schema).
pub(crate) fn finite_values(flat: &Value) -> Option<Vec<Value>> {
    let m = match flat {
        Value::Bool(false) => return Some(Vec::new()),
        Value::Object(m) => m,
        _ => return None,
    };
    let facts = ir::Facts::read(m);
    if facts.alternatives || facts.negation {
        return None;
    }
    let candidates: Vec<Value> = match facts.values {
        Some(vals) => vals.to_vec(),
        None => {
            let mut out = Vec::new();
            for t in ir::listed_types(m)? {
                match t {
                    JsonType::Boolean => out.extend([Value::Bool(false), Value::Bool(true)]),
                    JsonType::Null => out.push(Value::Null),
                    _ => return None,
                }
            }
            out
        }
    };
    let mut kept = Vec::new();
    for v in candidates {
        if check(&v, flat)? && !kept.iter().any(|k| json_eq(k, &v)) {
            kept.push(v);
        }
    }
    Some(kept)
}
