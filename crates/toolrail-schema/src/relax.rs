//! Relaxations: edits that make a schema looser, never stricter, so that its grammar fits a
//! limit (llama.cpp's repetition limit, a rule or byte budget).
//!
//! Every [`Relaxation`] keeps each instance the schema accepted: a lower bound is lowered, an
//! upper bound, a `format` or a numeric bound is removed, a pattern's counted repetitions are
//! opened (`{3,5000}` → `+`) or the pattern removed, an `enum`/`const` becomes the types of its
//! values. [`candidates`] only looks where loosening a subschema loosens the whole: never under
//! `not` or `if` (loosening them makes the schema stricter), nor under `oneOf` (a looser branch
//! can make an instance match two), nor in `$defs`/`definitions` when the schema uses any of
//! those three anywhere (a definition can be referenced from under them).

use serde::Serialize;
use serde_json::{Map, Value, json};

use crate::pointer::JsonPointer;

/// Keywords whose subschema (or map or list of subschemas) loosens the whole when loosened.
const MONOTONE_SCHEMA: &[&str] = &[
    "items",
    "additionalProperties",
    "contains",
    "propertyNames",
    "unevaluatedItems",
    "unevaluatedProperties",
    "additionalItems",
    "then",
    "else",
];
/// Keywords holding a map of monotone subschemas.
const MONOTONE_MAPS: &[&str] = &["properties", "patternProperties", "dependentSchemas"];
/// Keywords holding a list of monotone subschemas.
const MONOTONE_LISTS: &[&str] = &["prefixItems", "anyOf", "allOf", "items"];
/// Keywords under which loosening is not monotone.
const NOT_MONOTONE: &[&str] = &["not", "if", "oneOf"];
/// Lower size bounds, lowered (or removed) by a relaxation.
const LOWER_BOUNDS: &[&str] = &["minLength", "minItems", "minProperties"];
/// Keywords a relaxation removes: upper size bounds, numeric bounds, `format`.
const DROPPED: &[&str] = &[
    "maxLength",
    "maxItems",
    "maxProperties",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
    "format",
];

/// One way a schema object is made looser.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum RelaxKind {
    /// A lower size bound (`minLength`, `minItems`, `minProperties`) lowered to `to`; 0
    /// removes it.
    Lower {
        /// The keyword.
        keyword: String,
        /// Its value in the schema.
        from: u64,
        /// Its value after the relaxation.
        to: u64,
    },
    /// A keyword removed (an upper bound, a numeric bound, `format`).
    Drop {
        /// The keyword.
        keyword: String,
        /// Its value in the schema.
        value: Value,
    },
    /// A pattern's counted repetitions opened: `x{2,5000}` → `x+`, `x{0,9}` → `x*`.
    OpenRepetitions {
        /// The pattern in the schema.
        from: String,
        /// The pattern after the relaxation.
        to: String,
    },
    /// The pattern removed.
    DropPattern {
        /// The pattern in the schema (its counted repetitions already opened, if that came
        /// first).
        pattern: String,
    },
    /// An `enum` or `const` replaced by the types of its values.
    ValuesToTypes {
        /// `enum` or `const`.
        keyword: String,
        /// How many values it listed.
        values: usize,
        /// The JSON types that replace them.
        types: Vec<String>,
    },
}

/// One relaxation at one place of a schema.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Relaxation {
    /// The schema object it edits (a JSON pointer into the schema).
    pub pointer: JsonPointer,
    /// What it does.
    #[serde(flatten)]
    pub kind: RelaxKind,
}

impl Relaxation {
    /// The keyword as the schema has it: `minLength: 3000`.
    pub fn before(&self) -> String {
        match &self.kind {
            RelaxKind::Lower { keyword, from, .. } => format!("{keyword}: {from}"),
            RelaxKind::Drop { keyword, value } => format!("{keyword}: {value}"),
            RelaxKind::OpenRepetitions { from, .. } => format!("pattern: {}", json!(from)),
            RelaxKind::DropPattern { pattern } => format!("pattern: {}", json!(pattern)),
            RelaxKind::ValuesToTypes {
                keyword, values, ..
            } => match keyword.as_str() {
                "const" => format!("{keyword}: 1 value"),
                _ => format!("{keyword}: {values} values"),
            },
        }
    }

    /// What the relaxation leaves: `minLength: 2000`, `(none)`, `type: ["string"]`.
    pub fn after(&self) -> String {
        match &self.kind {
            RelaxKind::Lower { keyword, to, .. } if *to > 0 => format!("{keyword}: {to}"),
            RelaxKind::Lower { .. } | RelaxKind::Drop { .. } | RelaxKind::DropPattern { .. } => {
                "(none)".to_owned()
            }
            RelaxKind::OpenRepetitions { to, .. } => format!("pattern: {}", json!(to)),
            RelaxKind::ValuesToTypes { types, .. } => format!("type: {}", json!(types)),
        }
    }

    /// How much of the grammar it is likely to free, to try the heaviest first: the bound's
    /// value, the pattern's counted repetitions, the listed values' length.
    pub fn weight(&self) -> u64 {
        match &self.kind {
            RelaxKind::Lower { from, to, .. } => from - to,
            RelaxKind::Drop { keyword, value } => match keyword.as_str() {
                "format" => 64,
                _ => value.as_u64().unwrap_or(1).max(1),
            },
            RelaxKind::OpenRepetitions { from, .. } => counted_weight(from).max(1),
            RelaxKind::DropPattern { pattern } => counted_weight(pattern).max(1),
            RelaxKind::ValuesToTypes { values, .. } => *values as u64,
        }
    }
}

/// Why a relaxation could not be applied.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RelaxError {
    /// Its pointer names no schema object.
    #[error("no schema object at {0}")]
    NoSchema(String),
    /// The schema object no longer has what the relaxation edits.
    #[error("the schema at {pointer} has no {keyword} to relax")]
    Missing {
        /// The schema object.
        pointer: String,
        /// The keyword.
        keyword: String,
    },
}

/// Every relaxation `schema` offers, heaviest first (ties in document order). Each is looser
/// on its own; applying several is looser still. A pattern offers both opening its
/// repetitions and dropping it; an object offers its lower bound lowered to 0 (callers raise
/// it back as far as their limit allows, see [`Relaxation::with_lower_bound`]).
pub fn candidates(schema: &Value) -> Vec<Relaxation> {
    let defs_safe = !uses_non_monotone(schema);
    let mut out = Vec::new();
    walk(schema, &JsonPointer::root(), defs_safe, &mut out);
    // stable: equal weights keep document order
    out.sort_by_key(|r| std::cmp::Reverse(r.weight()));
    out
}

impl Relaxation {
    /// The same lowering with another target value (`Lower` only; others unchanged).
    pub fn with_lower_bound(&self, value: u64) -> Relaxation {
        let mut out = self.clone();
        if let RelaxKind::Lower { to, from, .. } = &mut out.kind {
            *to = value.min(*from);
        }
        out
    }
}

/// Applies `relaxation` to `schema`.
pub fn apply(schema: &mut Value, relaxation: &Relaxation) -> Result<(), RelaxError> {
    let at = relaxation.pointer.as_str();
    let object = schema
        .pointer_mut(at)
        .and_then(Value::as_object_mut)
        .ok_or_else(|| RelaxError::NoSchema(display_pointer(at)))?;
    let missing = |keyword: &str| RelaxError::Missing {
        pointer: display_pointer(at),
        keyword: keyword.to_owned(),
    };
    match &relaxation.kind {
        RelaxKind::Lower { keyword, to, .. } => {
            if !object.contains_key(keyword) {
                return Err(missing(keyword));
            }
            if *to == 0 {
                object.remove(keyword);
            } else {
                object.insert(keyword.clone(), json!(to));
            }
        }
        RelaxKind::Drop { keyword, .. } => {
            object.remove(keyword).ok_or_else(|| missing(keyword))?;
        }
        RelaxKind::OpenRepetitions { to, .. } => {
            if !object.contains_key("pattern") {
                return Err(missing("pattern"));
            }
            object.insert("pattern".into(), json!(to));
        }
        RelaxKind::DropPattern { .. } => {
            object.remove("pattern").ok_or_else(|| missing("pattern"))?;
        }
        RelaxKind::ValuesToTypes { keyword, types, .. } => {
            object.remove(keyword).ok_or_else(|| missing(keyword))?;
            // the values' types, within what a `type` beside them already allowed
            let types: Vec<Value> = types.iter().map(|t| json!(t)).collect();
            match types.as_slice() {
                [one] => object.insert("type".into(), one.clone()),
                _ => object.insert("type".into(), Value::Array(types)),
            };
        }
    }
    Ok(())
}

fn display_pointer(at: &str) -> String {
    match at {
        "" => "the schema's root".to_owned(),
        p => p.to_owned(),
    }
}

/// Whether `not`, `if` or `oneOf` appears anywhere in the schema.
fn uses_non_monotone(value: &Value) -> bool {
    match value {
        Value::Object(map) => map
            .iter()
            .any(|(k, v)| NOT_MONOTONE.contains(&k.as_str()) || uses_non_monotone(v)),
        Value::Array(items) => items.iter().any(uses_non_monotone),
        _ => false,
    }
}

fn walk(schema: &Value, at: &JsonPointer, defs_safe: bool, out: &mut Vec<Relaxation>) {
    let Some(object) = schema.as_object() else {
        return;
    };
    own_candidates(object, at, out);
    for (key, value) in object {
        let here = at.with_key(key);
        let key = key.as_str();
        if MONOTONE_SCHEMA.contains(&key) && value.is_object() {
            walk(value, &here, defs_safe, out);
        }
        if MONOTONE_LISTS.contains(&key)
            && let Some(items) = value.as_array()
        {
            for (i, item) in items.iter().enumerate() {
                walk(item, &here.with_index(i), defs_safe, out);
            }
        }
        let is_defs = key == "$defs" || key == "definitions";
        if (MONOTONE_MAPS.contains(&key) || (is_defs && defs_safe))
            && let Some(map) = value.as_object()
        {
            for (name, sub) in map {
                walk(sub, &here.with_key(name), defs_safe, out);
            }
        }
    }
}

/// The relaxations of one schema object's own keywords.
fn own_candidates(object: &Map<String, Value>, at: &JsonPointer, out: &mut Vec<Relaxation>) {
    let mut push = |kind| {
        out.push(Relaxation {
            pointer: at.clone(),
            kind,
        })
    };
    for keyword in LOWER_BOUNDS {
        if let Some(from) = object.get(*keyword).and_then(Value::as_u64)
            && from > 0
        {
            push(RelaxKind::Lower {
                keyword: (*keyword).to_owned(),
                from,
                to: 0,
            });
        }
    }
    for keyword in DROPPED {
        if let Some(value) = object.get(*keyword) {
            push(RelaxKind::Drop {
                keyword: (*keyword).to_owned(),
                value: value.clone(),
            });
        }
    }
    if let Some(pattern) = object.get("pattern").and_then(Value::as_str) {
        let opened = open_repetitions(pattern);
        if opened != pattern {
            push(RelaxKind::OpenRepetitions {
                from: pattern.to_owned(),
                to: opened,
            });
        }
        push(RelaxKind::DropPattern {
            pattern: pattern.to_owned(),
        });
    }
    for keyword in ["enum", "const"] {
        let values: Vec<&Value> = match object.get(keyword) {
            Some(Value::Array(values)) if keyword == "enum" => values.iter().collect(),
            Some(value) if keyword == "const" => vec![value],
            _ => continue,
        };
        if let Some(types) = value_types(&values, object.get("type")) {
            push(RelaxKind::ValuesToTypes {
                keyword: keyword.to_owned(),
                values: values.len(),
                types,
            });
        }
    }
}

/// The JSON types of `values`, in a fixed order, or None when a `type` beside them does not
/// allow one of them (the replacement would then widen past the values' own types; keeping
/// the `enum` is the only loosening that cannot do that) or no value is listed.
fn value_types(values: &[&Value], declared: Option<&Value>) -> Option<Vec<String>> {
    const ORDER: &[&str] = &[
        "string", "integer", "number", "boolean", "null", "array", "object",
    ];
    let mut kinds: Vec<&str> = values
        .iter()
        .map(|v| match v {
            Value::String(_) => "string",
            Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
            Value::Number(_) => "number",
            Value::Bool(_) => "boolean",
            Value::Null => "null",
            Value::Array(_) => "array",
            Value::Object(_) => "object",
        })
        .collect();
    if kinds.is_empty() {
        return None;
    }
    // an integer beside a number is a number
    if kinds.contains(&"number") {
        kinds.retain(|k| *k != "integer");
    }
    let allowed: Option<Vec<&str>> = declared.map(|d| match d {
        Value::String(s) => vec![s.as_str()],
        Value::Array(items) => items.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    });
    if let Some(allowed) = &allowed
        && kinds
            .iter()
            .any(|k| !(allowed.contains(k) || (*k == "integer" && allowed.contains(&"number"))))
    {
        return None;
    }
    Some(
        ORDER
            .iter()
            .filter(|k| kinds.contains(k))
            .map(|k| (*k).to_owned())
            .collect(),
    )
}

/// `pattern` with every counted repetition `{n}`, `{n,}`, `{n,m}` (outside character classes,
/// not escaped) replaced by `+` when n ≥ 1 and `*` when n = 0: a superset of the language
/// whatever the rest of the pattern says.
pub fn open_repetitions(pattern: &str) -> String {
    let chars: Vec<char> = pattern.chars().collect();
    let mut out = String::with_capacity(pattern.len());
    let mut in_class = false;
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        match c {
            '\\' => {
                out.push(c);
                if let Some(next) = chars.get(i + 1) {
                    out.push(*next);
                }
                i += 2;
                continue;
            }
            '[' if !in_class => in_class = true,
            ']' if in_class => in_class = false,
            '{' if !in_class => {
                if let Some((min, len)) = counted(&chars[i..]) {
                    out.push(if min == 0 { '*' } else { '+' });
                    i += len;
                    // a lazy or possessive suffix stays meaningful after `*`/`+`
                    continue;
                }
            }
            _ => {}
        }
        out.push(c);
        i += 1;
    }
    out
}

/// `{n}`, `{n,}` or `{n,m}` at the start of `text`: its minimum and length in chars.
fn counted(text: &[char]) -> Option<(u64, usize)> {
    let close = text.iter().position(|c| *c == '}')?;
    let inner: String = text[1..close].iter().collect();
    let (min, max) = match inner.split_once(',') {
        Some((min, max)) => (min, Some(max)),
        None => (inner.as_str(), None),
    };
    let digits = |s: &str| !s.is_empty() && s.chars().all(|c| c.is_ascii_digit());
    if !digits(min) || max.is_some_and(|m| !m.is_empty() && !digits(m)) {
        return None;
    }
    Some((min.parse().ok()?, close + 1))
}

/// The sum of the counted repetitions' largest counts (their minimum when open-ended).
fn counted_weight(pattern: &str) -> u64 {
    let chars: Vec<char> = pattern.chars().collect();
    let mut total = 0u64;
    let mut i = 0;
    while i < chars.len() {
        if chars[i] == '\\' {
            i += 2;
            continue;
        }
        if chars[i] == '{'
            && let Some((min, len)) = counted(&chars[i..])
        {
            let inner: String = chars[i + 1..i + len - 1].iter().collect();
            let max = inner
                .split_once(',')
                .and_then(|(_, m)| m.parse::<u64>().ok())
                .unwrap_or(min);
            total = total.saturating_add(max.max(min));
            i += len;
            continue;
        }
        i += 1;
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repetitions_open_outside_classes_and_escapes() {
        assert_eq!(open_repetitions("^[a-z]{1,5000}$"), "^[a-z]+$");
        assert_eq!(open_repetitions("^a{0,3}b{2}$"), "^a*b+$");
        assert_eq!(open_repetitions(r"^\{1,2}[{]{3,}$"), r"^\{1,2}[{]+$");
        assert_eq!(open_repetitions("^a{x}$"), "^a{x}$");
        assert_eq!(counted_weight("^[a-z]{1,5000}b{3}$"), 5003);
    }

    #[test]
    fn candidates_skip_not_if_and_one_of() {
        let schema = json!({
            "type": "object",
            "properties": {
                "note": {"type": "string", "minLength": 3000, "maxLength": 4000},
                "code": {"type": "string", "pattern": "^[A-Z]{2,9}$"},
                "either": {"oneOf": [{"type": "string", "maxLength": 5}]},
                "neg": {"not": {"maxLength": 5}}
            }
        });
        let found = candidates(&schema);
        let places: Vec<String> = found
            .iter()
            .map(|r| format!("{} {}", r.pointer, r.before()))
            .collect();
        assert_eq!(
            places,
            [
                "/properties/note maxLength: 4000",
                "/properties/note minLength: 3000",
                "/properties/code pattern: \"^[A-Z]{2,9}$\"",
                "/properties/code pattern: \"^[A-Z]{2,9}$\"",
            ]
        );
        assert_eq!(found[2].after(), "pattern: \"^[A-Z]+$\"");
        assert_eq!(found[3].after(), "(none)");
    }

    #[test]
    fn applying_lowers_drops_and_types() {
        let mut schema = json!({"properties": {
            "n": {"type": "string", "minLength": 3000},
            "e": {"enum": ["a", "b", 3]}
        }});
        for r in candidates(&schema) {
            let r = r.with_lower_bound(100);
            apply(&mut schema, &r).unwrap();
        }
        assert_eq!(
            schema,
            json!({"properties": {
                "n": {"type": "string", "minLength": 100},
                "e": {"type": ["string", "integer"]}
            }})
        );
        let gone = Relaxation {
            pointer: JsonPointer::parse("/properties/n").unwrap(),
            kind: RelaxKind::DropPattern {
                pattern: "x".into(),
            },
        };
        assert_eq!(
            apply(&mut schema, &gone).unwrap_err().to_string(),
            "the schema at /properties/n has no pattern to relax"
        );
    }

    #[test]
    fn an_enum_outside_its_declared_type_is_kept() {
        let schema = json!({"type": "integer", "enum": ["1", 2]});
        assert!(candidates(&schema).is_empty());
    }
}
