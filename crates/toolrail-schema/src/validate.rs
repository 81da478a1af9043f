//! A small JSON Schema checker for *known* values (enum/const members, oneOf disjointness).
//!
//! It answers `Some(valid)` when every keyword involved is one it understands and `None`
//! otherwise, so that the converter never guesses: an unknown answer becomes an "unsupported"
//! error. It is not a general validator (the `tools` module uses the `jsonschema` crate).

use serde_json::{Map, Value};

use super::keywords::is_ignored;
use super::numbers::{Decimal, cmp_decimal};

/// JSON Schema equality: numbers compare by value (1 == 1.0), objects ignore key order.
///
/// Recursive over the document, one call per level: at most [`crate::MAX_DOCUMENT_DEPTH`]
/// (a deeper document is refused before any walk).
pub(crate) fn json_eq(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => {
            match (
                Decimal::parse(&x.to_string()),
                Decimal::parse(&y.to_string()),
            ) {
                (Some(p), Some(q)) => p == q,
                _ => false,
            }
        }
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| json_eq(p, q))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| json_eq(v, w)))
        }
        _ => a == b,
    }
}

/// The JSON Schema type names a value has (integer values are also numbers).
pub(crate) fn value_types(v: &Value) -> &'static [&'static str] {
    match v {
        Value::Null => &["null"],
        Value::Bool(_) => &["boolean"],
        Value::Number(n) => {
            if Decimal::parse(&n.to_string()).is_some_and(|d| d.is_integer()) {
                &["integer", "number"]
            } else {
                &["number"]
            }
        }
        Value::String(_) => &["string"],
        Value::Array(_) => &["array"],
        Value::Object(_) => &["object"],
    }
}

fn num(v: &Value) -> Option<Decimal> {
    v.as_number().and_then(|n| Decimal::parse(&n.to_string()))
}

fn all(results: impl IntoIterator<Item = Option<bool>>) -> Option<bool> {
    let mut unknown = false;
    for r in results {
        match r {
            Some(false) => return Some(false),
            None => unknown = true,
            Some(true) => {}
        }
    }
    if unknown { None } else { Some(true) }
}

/// Checks `v` against `schema` when possible.
///
/// Recursive over the document, one call per level: at most [`crate::MAX_DOCUMENT_DEPTH`]
/// (a deeper document is refused before any walk).
pub(crate) fn check(v: &Value, schema: &Value) -> Option<bool> {
    let map = match schema {
        Value::Bool(b) => return Some(*b),
        Value::Object(m) => m,
        _ => return None,
    };
    check_siblings(v, map, &[])
}

/// Checks `v` against the keywords of `map` other than those in `skip` (an `enum` member
/// against the keywords beside `enum` and `const`), without copying the map.
pub(crate) fn check_siblings(v: &Value, map: &Map<String, Value>, skip: &[&str]) -> Option<bool> {
    let mut results = Vec::new();
    for (k, kv) in map.iter().filter(|(k, _)| !skip.contains(&k.as_str())) {
        let r = match k.as_str() {
            k if is_ignored(k) => Some(true),
            "type" => {
                let names: Vec<&str> = match kv {
                    Value::String(s) => vec![s.as_str()],
                    Value::Array(a) => a.iter().filter_map(|x| x.as_str()).collect(),
                    _ => return None,
                };
                Some(value_types(v).iter().any(|t| names.contains(t)))
            }
            "const" => Some(json_eq(v, kv)),
            "enum" => Some(kv.as_array()?.iter().any(|e| json_eq(v, e))),
            "minimum" | "maximum" | "exclusiveMinimum" | "exclusiveMaximum" => match v {
                Value::Number(n) => {
                    let d = Decimal::parse(&n.to_string())?;
                    let b = num(kv)?;
                    let o = cmp_decimal(&d, &b);
                    Some(match k.as_str() {
                        "minimum" => !o.is_lt(),
                        "maximum" => !o.is_gt(),
                        "exclusiveMinimum" => o.is_gt(),
                        _ => o.is_lt(),
                    })
                }
                _ => Some(true),
            },
            "minLength" | "maxLength" => match v {
                Value::String(s) => {
                    let n = s.chars().count() as u64;
                    let b = kv.as_u64()?;
                    Some(if k.as_str() == "minLength" {
                        n >= b
                    } else {
                        n <= b
                    })
                }
                _ => Some(true),
            },
            "minItems" | "maxItems" => match v {
                Value::Array(a) => {
                    let b = kv.as_u64()?;
                    Some(if k.as_str() == "minItems" {
                        a.len() as u64 >= b
                    } else {
                        a.len() as u64 <= b
                    })
                }
                _ => Some(true),
            },
            "minProperties" | "maxProperties" => match v {
                Value::Object(o) => {
                    let b = kv.as_u64()?;
                    Some(if k.as_str() == "minProperties" {
                        o.len() as u64 >= b
                    } else {
                        o.len() as u64 <= b
                    })
                }
                _ => Some(true),
            },
            "required" => match v {
                Value::Object(o) => Some(
                    kv.as_array()?
                        .iter()
                        .all(|r| r.as_str().is_some_and(|r| o.contains_key(r))),
                ),
                _ => Some(true),
            },
            "properties" => match v {
                Value::Object(o) => {
                    let props = kv.as_object()?;
                    all(o
                        .iter()
                        .filter_map(|(pk, pv)| props.get(pk).map(|s| check(pv, s))))
                }
                _ => Some(true),
            },
            "additionalProperties" => match v {
                Value::Object(o) => {
                    let props = map.get("properties").and_then(|p| p.as_object());
                    if map.contains_key("patternProperties") {
                        return None;
                    }
                    all(o
                        .iter()
                        .filter(|(pk, _)| props.is_none_or(|p| !p.contains_key(*pk)))
                        .map(|(_, pv)| check(pv, kv)))
                }
                _ => Some(true),
            },
            "prefixItems" => match v {
                Value::Array(a) => all(kv.as_array()?.iter().zip(a).map(|(s, x)| check(x, s))),
                _ => Some(true),
            },
            "items" => match v {
                Value::Array(a) => {
                    if kv.is_array() {
                        return None;
                    }
                    let skip = map
                        .get("prefixItems")
                        .and_then(|p| p.as_array())
                        .map_or(0, |p| p.len());
                    all(a.iter().skip(skip).map(|x| check(x, kv)))
                }
                _ => Some(true),
            },
            "allOf" => all(kv.as_array()?.iter().map(|s| check(v, s))),
            "anyOf" => {
                let rs: Vec<Option<bool>> = kv.as_array()?.iter().map(|s| check(v, s)).collect();
                if rs.contains(&Some(true)) {
                    Some(true)
                } else if rs.contains(&None) {
                    None
                } else {
                    Some(false)
                }
            }
            "oneOf" => {
                let rs: Vec<Option<bool>> = kv.as_array()?.iter().map(|s| check(v, s)).collect();
                if rs.contains(&None) {
                    None
                } else {
                    Some(rs.iter().filter(|r| **r == Some(true)).count() == 1)
                }
            }
            "not" => check(v, kv).map(|b| !b),
            "uniqueItems" => match (v, kv) {
                (_, Value::Bool(false)) => Some(true),
                (Value::Array(a), _) => Some(
                    a.iter()
                        .enumerate()
                        .all(|(i, x)| a[i + 1..].iter().all(|y| !json_eq(x, y))),
                ),
                _ => Some(true),
            },
            _ => None,
        };
        results.push(r);
    }
    all(results)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn equality_is_by_value() {
        assert!(json_eq(&json!(1), &json!(1.0)));
        assert!(json_eq(&json!({"a": [1, 2.0]}), &json!({"a": [1.0, 2]})));
        assert!(!json_eq(&json!(false), &json!(0)));
    }

    #[test]
    fn checks_known_keywords() {
        let s = json!({"type": "integer", "minimum": 2});
        assert_eq!(check(&json!(3), &s), Some(true));
        assert_eq!(check(&json!(1), &s), Some(false));
        assert_eq!(check(&json!(2.5), &s), Some(false));
        assert_eq!(check(&json!("a"), &json!({"pattern": "a"})), None);
        assert_eq!(
            check(
                &json!({"a": 1}),
                &json!({"required": ["a"], "properties": {"a": {"const": 1}}})
            ),
            Some(true)
        );
    }
}
