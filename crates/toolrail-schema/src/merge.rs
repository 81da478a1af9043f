//! `allOf` merging: the intersection of two schemas as one schema, keyword by keyword.
//!
//! Both inputs are flattened first (no top-level `$ref` or `allOf`). Keywords that combine exactly
//! (type sets, bounds, required, properties, items, enum/const) are merged; a keyword present on
//! one side only is kept; two different values of a keyword that cannot be intersected (two
//! patterns, two formats, two `oneOf`) is an error for the caller to report.

use serde_json::{Map, Value, json};

use super::keywords::is_ignored;
use super::numbers::{Decimal, cmp_decimal};
use super::validate::json_eq;

const TYPES: &[&str] = &[
    "null", "boolean", "object", "array", "number", "string", "integer",
];

fn type_set(v: Option<&Value>) -> Result<Vec<&'static str>, String> {
    let Some(v) = v else {
        return Ok(TYPES.to_vec());
    };
    let names: Vec<&str> = match v {
        Value::String(s) => vec![s.as_str()],
        Value::Array(a) => a
            .iter()
            .map(|x| x.as_str().ok_or("type names must be strings"))
            .collect::<Result<_, _>>()?,
        _ => return Err("type must be a string or an array".into()),
    };
    let mut out: Vec<&'static str> = Vec::new();
    for n in names {
        let t = TYPES
            .iter()
            .find(|t| **t == n)
            .ok_or_else(|| format!("unknown type {n:?}"))?;
        out.push(t);
        if *t == "number" {
            out.push("integer");
        }
    }
    Ok(out)
}

fn intersect_types(a: Option<&Value>, b: Option<&Value>) -> Result<Value, String> {
    let ta = type_set(a)?;
    let tb = type_set(b)?;
    let mut out: Vec<Value> = Vec::new();
    for t in TYPES {
        if ta.contains(t) && tb.contains(t) {
            if *t == "integer" && ta.contains(&"number") && tb.contains(&"number") {
                continue;
            }
            out.push(json!(t));
        }
    }
    Ok(Value::Array(out))
}

fn all_of(a: &Value, b: &Value) -> Value {
    match (a, b) {
        (Value::Bool(true), x) | (x, Value::Bool(true)) => x.clone(),
        (Value::Bool(false), _) | (_, Value::Bool(false)) => Value::Bool(false),
        _ if a == b => a.clone(),
        _ => json!({ "allOf": [a, b] }),
    }
}

fn tighter(key: &str, a: &Value, b: &Value) -> Result<Value, String> {
    let lower = key.starts_with("min") || key == "exclusiveMinimum";
    match (a.as_number(), b.as_number()) {
        (Some(x), Some(y)) => {
            let (dx, dy) = (
                Decimal::parse(&x.to_string()).ok_or("bad number")?,
                Decimal::parse(&y.to_string()).ok_or("bad number")?,
            );
            let o = cmp_decimal(&dx, &dy);
            Ok(if o.is_gt() == lower {
                a.clone()
            } else {
                b.clone()
            })
        }
        _ => Err(format!("{key} must be a number")),
    }
}

/// Merges two flattened schemas (objects or booleans). `default_additional` is what a missing
/// `additionalProperties` means (true, or false when objects are closed).
/// Err((keyword, message)) when the intersection is not expressible as one schema.
///
/// Recursive over the document, one call per level: at most [`crate::MAX_DOCUMENT_DEPTH`]
/// (a deeper document is refused before any walk).
pub(crate) fn merge(
    a: &Value,
    b: &Value,
    default_additional: &Value,
) -> Result<Value, (String, String)> {
    let (a, b) = match (a, b) {
        (Value::Bool(true), x) | (x, Value::Bool(true)) => return Ok(x.clone()),
        (Value::Bool(false), _) | (_, Value::Bool(false)) => return Ok(Value::Bool(false)),
        (Value::Object(a), Value::Object(b)) => (a, b),
        _ => {
            return Err((
                "allOf".into(),
                "a schema must be an object or a boolean".into(),
            ));
        }
    };
    let mut out = Map::new();
    let err = |k: &str, m: String| (k.to_string(), m);
    // type
    if a.contains_key("type") || b.contains_key("type") {
        out.insert(
            "type".into(),
            intersect_types(a.get("type"), b.get("type")).map_err(|m| err("type", m))?,
        );
    }
    // enum / const → enum
    let values = |m: &Map<String, Value>| -> Option<Vec<Value>> {
        let mut vs: Option<Vec<Value>> = m.get("enum").and_then(|e| e.as_array()).cloned();
        if let Some(c) = m.get("const") {
            vs = Some(match vs {
                Some(list) => list.into_iter().filter(|v| json_eq(v, c)).collect(),
                None => vec![c.clone()],
            });
        }
        vs
    };
    match (values(a), values(b)) {
        (Some(x), Some(y)) => {
            out.insert(
                "enum".into(),
                Value::Array(
                    x.into_iter()
                        .filter(|v| y.iter().any(|w| json_eq(v, w)))
                        .collect(),
                ),
            );
        }
        (Some(x), None) | (None, Some(x)) => {
            out.insert("enum".into(), Value::Array(x));
        }
        (None, None) => {}
    }
    // objects
    let props_a = a.get("properties").and_then(|p| p.as_object());
    let props_b = b.get("properties").and_then(|p| p.as_object());
    let add_a = a.get("additionalProperties").unwrap_or(default_additional);
    let add_b = b.get("additionalProperties").unwrap_or(default_additional);
    if props_a.is_some() || props_b.is_some() {
        let empty = Map::new();
        let (pa, pb) = (props_a.unwrap_or(&empty), props_b.unwrap_or(&empty));
        let mut props = Map::new();
        for (k, s) in pa {
            let other = pb.get(k).unwrap_or(add_b);
            props.insert(k.clone(), all_of(s, other));
        }
        for (k, s) in pb {
            if !pa.contains_key(k) {
                props.insert(k.clone(), all_of(add_a, s));
            }
        }
        out.insert("properties".into(), Value::Object(props));
    }
    if a.contains_key("additionalProperties") || b.contains_key("additionalProperties") {
        out.insert("additionalProperties".into(), all_of(add_a, add_b));
    }
    // arrays
    let prefix = |m: &Map<String, Value>| -> Vec<Value> {
        m.get("prefixItems")
            .and_then(|p| p.as_array())
            .cloned()
            .unwrap_or_default()
    };
    if a.get("items").is_some_and(|i| i.is_array()) || b.get("items").is_some_and(|i| i.is_array())
    {
        return Err(err("items", "array-form items inside allOf".into()));
    }
    let (xa, xb) = (prefix(a), prefix(b));
    let true_v = Value::Bool(true);
    let items_a = a.get("items").unwrap_or(&true_v);
    let items_b = b.get("items").unwrap_or(&true_v);
    if !xa.is_empty() || !xb.is_empty() {
        let n = xa.len().max(xb.len());
        let merged: Vec<Value> = (0..n)
            .map(|i| all_of(xa.get(i).unwrap_or(items_a), xb.get(i).unwrap_or(items_b)))
            .collect();
        out.insert("prefixItems".into(), Value::Array(merged));
    }
    if a.contains_key("items") || b.contains_key("items") {
        out.insert("items".into(), all_of(items_a, items_b));
    }
    let mut required: Vec<Value> = Vec::new();
    for r in [a.get("required"), b.get("required")].into_iter().flatten() {
        for x in r
            .as_array()
            .ok_or_else(|| err("required", "must be an array".into()))?
        {
            if !required.contains(x) {
                required.push(x.clone());
            }
        }
    }
    if !required.is_empty() {
        out.insert("required".into(), Value::Array(required));
    }
    // everything else
    const HANDLED: &[&str] = &[
        "type",
        "enum",
        "const",
        "properties",
        "additionalProperties",
        "prefixItems",
        "items",
        "required",
    ];
    for (k, v) in a.iter().chain(b.iter()) {
        if HANDLED.contains(&k.as_str()) || is_ignored(k) {
            continue;
        }
        match out.get(k) {
            None => {
                out.insert(k.clone(), v.clone());
            }
            Some(prev) if json_eq(prev, v) => {}
            Some(prev) => {
                let merged = match k.as_str() {
                    "minimum" | "maximum" | "exclusiveMinimum" | "exclusiveMaximum"
                    | "minLength" | "maxLength" | "minItems" | "maxItems" | "minProperties"
                    | "maxProperties" => tighter(k, prev, v).map_err(|m| err(k, m))?,
                    "anyOf" => {
                        let (p, q) = (prev.as_array(), v.as_array());
                        let (Some(p), Some(q)) = (p, q) else {
                            return Err(err(k, "must be an array".into()));
                        };
                        if p.len() * q.len() > 64 {
                            return Err(err(
                                k,
                                "two anyOf in allOf with too many combinations".into(),
                            ));
                        }
                        let mut prod = Vec::new();
                        for x in p {
                            for y in q {
                                prod.push(json!({"allOf": [x, y]}));
                            }
                        }
                        Value::Array(prod)
                    }
                    "multipleOf" => lcm_multiple(prev, v).ok_or_else(|| {
                        err(
                            k,
                            "two multipleOf values whose common multiple is not an exact decimal"
                                .into(),
                        )
                    })?,
                    "uniqueItems" => {
                        Value::Bool(prev.as_bool() == Some(true) || v.as_bool() == Some(true))
                    }
                    _ => {
                        return Err(err(
                            k,
                            "two different values inside allOf cannot be combined".into(),
                        ));
                    }
                };
                out.insert(k.clone(), merged);
            }
        }
    }
    Ok(Value::Object(out))
}

/// The least common multiple of two decimal `multipleOf` values (scaled to integers).
fn lcm_multiple(a: &Value, b: &Value) -> Option<Value> {
    let da = Decimal::parse(&a.as_number()?.to_string())?;
    let db = Decimal::parse(&b.as_number()?.to_string())?;
    let q = da.frac.len().max(db.frac.len());
    let scaled = |d: &Decimal| -> Option<u128> {
        let digits = format!("{}{}{}", d.int, d.frac, "0".repeat(q - d.frac.len()));
        digits.trim_start_matches('0').parse().ok()
    };
    let (x, y) = (scaled(&da)?, scaled(&db)?);
    let gcd = |mut a: u128, mut b: u128| {
        while b != 0 {
            (a, b) = (b, a % b);
        }
        a
    };
    let l = x / gcd(x, y) * y;
    let text = if q == 0 {
        l.to_string()
    } else {
        let s = format!("{:0>width$}", l, width = q + 1);
        format!("{}.{}", &s[..s.len() - q], &s[s.len() - q..])
    };
    serde_json::from_str(&text).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merges_objects_exactly() {
        let a = json!({"properties": {"foo": {"type": "integer"}}, "required": ["foo"]});
        let b = json!({"properties": {"bar": {"type": "string"}}, "additionalProperties": false});
        let m = merge(&a, &b, &Value::Bool(true)).unwrap();
        // foo is not among b's properties, so b's additionalProperties (false) applies to it
        assert_eq!(m["properties"]["foo"], json!(false));
        assert_eq!(m["required"], json!(["foo"]));
        assert_eq!(m["additionalProperties"], json!(false));
    }

    #[test]
    fn merges_bounds_and_types() {
        let m = merge(
            &json!({"type": ["number", "string"], "minimum": 2}),
            &json!({"type": "integer", "minimum": 5}),
            &json!(true),
        )
        .unwrap();
        assert_eq!(m["type"], json!(["integer"]));
        assert_eq!(m["minimum"], json!(5));
        assert!(
            merge(
                &json!({"pattern": "a"}),
                &json!({"pattern": "b"}),
                &json!(true)
            )
            .is_err()
        );
        let m = merge(
            &json!({"multipleOf": 4}),
            &json!({"multipleOf": 6}),
            &json!(true),
        )
        .unwrap();
        assert_eq!(m["multipleOf"], json!(12));
        let m = merge(
            &json!({"multipleOf": 0.5}),
            &json!({"multipleOf": 0.3}),
            &json!(true),
        )
        .unwrap();
        assert_eq!(m["multipleOf"], json!(1.5));
    }
}
