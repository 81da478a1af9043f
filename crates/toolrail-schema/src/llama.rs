//! llama.cpp compatibility ([`super::ConvertOptions::llama_compat`]): what llama.cpp's
//! `json_schema_to_grammar` reads of a schema object.
//!
//! llama.cpp (`common/json-schema.cpp`, llama-cpp-sys-2 0.1.161) first sorts each schema
//! object into one kind and then reads only that kind's keywords; everything else is silently
//! ignored. `view` rewrites one schema object into the schema llama.cpp effectively
//! enforces and lists the keywords it ignores (the converter turns them into warnings):
//!
//! 1. `$ref`: only the reference (siblings ignored);
//! 2. `oneOf` (else `anyOf`): only the alternatives, `oneOf` read as `anyOf`;
//! 3. `const`, else `enum`: only the values (a `type` beside them is ignored too);
//! 4. otherwise by `type` (each member of a type array on its own, the kept keywords united):
//!    - no `type`: `properties`, or an `additionalProperties` other than `true`, make an object;
//!      else `allOf` is read alone; else `items`/`prefixItems` make an array; else `pattern`,
//!      `minLength`, `maxLength` or a known `format` make a string; else any value
//!      (so `{"minItems": 1}` or `{"minimum": 0}` alone constrain nothing);
//!    - `object`: `properties`, `required` (names not in `properties` ignored),
//!      `additionalProperties`; `allOf` only when neither of the first and last is there;
//!    - `string`: `allOf` alone if present; else `pattern` (any string when it is not
//!      anchored with `^` and `$`, or has groups other than `(?:`, or anchors inside), else a
//!      known `format` (`date`,
//!      `time`, `date-time`, `uuid`, `uuid1`..`uuid5`), else `minLength`/`maxLength`;
//!    - `array`: `items` wins over `prefixItems`; a list of schemas is a tuple of exactly that
//!      length (`minItems`/`maxItems` ignored), one schema the item schema with
//!      `minItems`/`maxItems`; `uniqueItems`, `contains` ignored;
//!    - `integer`: `minimum` (else `exclusiveMinimum`) and `maximum` (else `exclusiveMaximum`);
//!      `multipleOf` ignored;
//!    - `number`, `boolean`, `null`: nothing but the type (number bounds are ignored).
//!
//! Objects with `properties` and no `additionalProperties` are closed (the converter does that
//! part, see `close_objects`), and so is an `allOf`, which the converter reads as llama.cpp
//! does (the enum values common to all members, else the members' object properties, all
//! required except those of `anyOf` members). Annotations are kept.

use serde_json::{Map, Value};

use super::error::{Report, SchemaError, invalid};
use super::keywords::ANNOTATIONS;
use super::pointer::JsonPointer;
use super::refs;

/// A keyword llama.cpp ignores: (keyword, why).
pub(crate) type Ignored = (String, String);

/// The `format` names llama.cpp's converter knows, and the one this converter uses for it.
fn known_format(f: &str) -> Option<&'static str> {
    match f {
        "date" => Some("date"),
        "time" => Some("time"),
        "date-time" => Some("date-time"),
        "uuid" | "uuid1" | "uuid2" | "uuid3" | "uuid4" | "uuid5" => Some("uuid"),
        _ => None,
    }
}

/// The schema llama.cpp reads from `map` (see the module docs), and the keywords it ignores.
/// `root`: the document root (where `$id` is an annotation; elsewhere llama.cpp ignores it).
/// Err((keyword, message)) for what llama.cpp refuses and this converter cannot read either.
///
/// Recursive over the document, one call per level: at most [`crate::MAX_DOCUMENT_DEPTH`]
/// (a deeper document is refused before any walk).
pub(crate) fn view(map: &Map<String, Value>, root: bool) -> Result<(Value, Vec<Ignored>), Ignored> {
    let mut out = Map::new();
    let mut ignored = Vec::new();
    for (k, v) in map {
        if ANNOTATIONS.contains(&k.as_str()) && (root || k != "$id") {
            out.insert(k.clone(), v.clone());
        }
    }
    let copy = |out: &mut Map<String, Value>, k: &str| {
        if let Some(v) = map.get(k) {
            out.insert(k.to_string(), v.clone());
        }
    };
    let kind: String;
    if map.contains_key("$ref") {
        copy(&mut out, "$ref");
        kind = "a $ref (llama.cpp reads nothing else beside it)".into();
    } else if let Some((key, alts)) = map
        .get("oneOf")
        .map(|a| ("oneOf", a))
        .or_else(|| map.get("anyOf").map(|a| ("anyOf", a)))
    {
        // the converter reads oneOf as anyOf in this mode
        out.insert(key.into(), alts.clone());
        kind = format!("{key} (llama.cpp reads nothing else beside it)");
    } else if map.contains_key("const") {
        copy(&mut out, "const");
        kind = "const (llama.cpp reads nothing else beside it)".into();
    } else if map.contains_key("enum") {
        copy(&mut out, "enum");
        kind = "enum (llama.cpp reads nothing else beside it)".into();
    } else {
        let types: Vec<Option<&str>> = match map.get("type") {
            None => vec![None],
            Some(Value::String(t)) => vec![Some(t.as_str())],
            Some(Value::Array(a)) if a.is_empty() => {
                return Err(("type".into(), "must not be empty".into()));
            }
            Some(Value::Array(a)) => a.iter().map(|t| t.as_str()).collect(),
            Some(_) => {
                return Err((
                    "type".into(),
                    "must be a string or an array of strings".into(),
                ));
            }
        };
        let mut kinds = Vec::new();
        for t in &types {
            let Some(t) = t else {
                if map.get("type").is_some() {
                    return Err(("type".into(), "must be strings".into()));
                }
                kinds.push(typed(map, None, &mut out, &mut ignored));
                continue;
            };
            kinds.push(typed(map, Some(t), &mut out, &mut ignored));
        }
        if let Some(t) = map.get("type") {
            out.insert("type".into(), t.clone());
        }
        kind = kinds.join(", ");
    }
    for k in map.keys() {
        if !out.contains_key(k) && !ignored.iter().any(|(i, _)| i == k) {
            ignored.push((
                k.clone(),
                format!("ignored by llama.cpp: the schema is read as {kind}"),
            ));
        }
    }
    Ok((Value::Object(out), ignored))
}

/// Keeps into `out` what llama.cpp reads for one type (`None`: no `type`); returns a
/// description of the kind.
fn typed(
    map: &Map<String, Value>,
    t: Option<&str>,
    out: &mut Map<String, Value>,
    ignored: &mut Vec<Ignored>,
) -> String {
    let has = |k: &str| map.contains_key(k);
    let copy = |out: &mut Map<String, Value>, k: &str| {
        if let Some(v) = map.get(k) {
            out.insert(k.to_string(), v.clone());
        }
    };
    let has_properties = has("properties")
        || map
            .get("additionalProperties")
            .is_some_and(|a| a != &Value::Bool(true));
    let string_keywords = has("pattern")
        || has("minLength")
        || has("maxLength")
        || map
            .get("format")
            .and_then(|f| f.as_str())
            .and_then(known_format)
            .is_some();
    let infer = |out: &mut Map<String, Value>, t: &str| {
        out.insert("type".into(), Value::String(t.into()));
    };
    match t {
        None if has_properties => {
            infer(out, "object");
            object(map, out, ignored);
            "an object (inferred from its keywords)".into()
        }
        None if has("allOf") => {
            copy(out, "allOf");
            "allOf (llama.cpp reads nothing else beside it)".into()
        }
        None if has("items") || has("prefixItems") => {
            infer(out, "array");
            array(map, out, ignored);
            "an array (inferred from its keywords)".into()
        }
        None if string_keywords => {
            infer(out, "string");
            string(map, out, ignored);
            "a string (inferred from its keywords)".into()
        }
        None => "any value (no type, and no keyword llama.cpp infers one from)".into(),
        Some("object") if !has_properties && has("allOf") => {
            copy(out, "allOf");
            "an object given by allOf".into()
        }
        Some("object") => {
            object(map, out, ignored);
            "an object".into()
        }
        Some("string") if has("allOf") => {
            copy(out, "allOf");
            "a string given by allOf".into()
        }
        Some("string") => {
            string(map, out, ignored);
            "a string".into()
        }
        Some("array") => {
            array(map, out, ignored);
            "an array".into()
        }
        Some("integer") => {
            for (a, b) in [
                ("minimum", "exclusiveMinimum"),
                ("maximum", "exclusiveMaximum"),
            ] {
                if has(a) {
                    copy(out, a);
                    if has(b) {
                        ignored.push((b.into(), format!("ignored by llama.cpp beside {a}")));
                    }
                } else {
                    copy(out, b);
                }
            }
            "an integer".into()
        }
        Some("number") => "a number (llama.cpp reads no bounds on numbers)".into(),
        Some(other) => format!("type {other}"),
    }
}

fn object(map: &Map<String, Value>, out: &mut Map<String, Value>, ignored: &mut Vec<Ignored>) {
    let props = map.get("properties");
    for k in ["properties", "additionalProperties"] {
        if let Some(v) = map.get(k) {
            out.insert(k.into(), v.clone());
        }
    }
    if let Some(req) = map.get("required") {
        let Some(list) = req.as_array() else {
            // not read at all
            return;
        };
        let declared = |name: &str| props.and_then(|p| p.get(name)).is_some();
        let (kept, dropped): (Vec<&Value>, Vec<&Value>) =
            list.iter().partition(|n| n.as_str().is_some_and(declared));
        for n in dropped {
            ignored.push((
                "required".into(),
                format!("{n} is not in properties: llama.cpp does not require it"),
            ));
        }
        out.insert(
            "required".into(),
            Value::Array(kept.into_iter().cloned().collect()),
        );
    }
}

fn array(map: &Map<String, Value>, out: &mut Map<String, Value>, ignored: &mut Vec<Ignored>) {
    // `{"prefixItems": [...], "items": false}` is how a tuple reads back (llama.cpp itself
    // refuses boolean schemas), so that a schema read twice reads the same
    let own_tuple = map.get("items") == Some(&Value::Bool(false))
        && map.get("prefixItems").is_some_and(Value::is_array);
    let key = if own_tuple {
        Some("prefixItems")
    } else if map.contains_key("items") {
        if map.contains_key("prefixItems") {
            ignored.push((
                "prefixItems".into(),
                "ignored by llama.cpp: items wins".into(),
            ));
        }
        Some("items")
    } else if map.contains_key("prefixItems") {
        Some("prefixItems")
    } else {
        None
    };
    match key.and_then(|k| map.get(k).map(|v| (k, v))) {
        Some((k, Value::Array(tuple))) => {
            // a tuple of exactly these items
            out.insert("prefixItems".into(), Value::Array(tuple.clone()));
            out.insert("items".into(), Value::Bool(false));
            out.insert("minItems".into(), Value::from(tuple.len()));
            for m in ["minItems", "maxItems"] {
                if map
                    .get(m)
                    .is_some_and(|v| v.as_u64() != Some(tuple.len() as u64))
                {
                    ignored.push((
                        m.into(),
                        format!("ignored by llama.cpp: {k} lists a tuple of exact length"),
                    ));
                }
            }
        }
        Some((_, item)) => {
            out.insert("items".into(), item.clone());
            keep_counts(map, out);
        }
        None => keep_counts(map, out),
    }
}

fn keep_counts(map: &Map<String, Value>, out: &mut Map<String, Value>) {
    for m in ["minItems", "maxItems"] {
        if let Some(v) = map.get(m) {
            out.insert(m.into(), v.clone());
        }
    }
}

fn string(map: &Map<String, Value>, out: &mut Map<String, Value>, ignored: &mut Vec<Ignored>) {
    let format = map.get("format").and_then(|f| f.as_str());
    if let Some(p) = map.get("pattern") {
        // llama.cpp then reads nothing else; a pattern it cannot translate is any string
        match p.as_str().and_then(pattern_unsupported) {
            Some(why) => ignored.push((
                "pattern".into(),
                format!("llama.cpp does not support this pattern ({why}) and accepts any string"),
            )),
            None => {
                out.insert("pattern".into(), p.clone());
            }
        }
        return;
    }
    if let Some(f) = format {
        match known_format(f) {
            Some(ours) => {
                out.insert("format".into(), Value::String(ours.into()));
                return;
            }
            None => ignored.push((
                "format".into(),
                format!("ignored by llama.cpp: it does not know format {f:?}"),
            )),
        }
    }
    for m in ["minLength", "maxLength"] {
        if let Some(v) = map.get(m) {
            out.insert(m.into(), v.clone());
        }
    }
}

/// Why llama.cpp's pattern translation gives up on `p` (it then accepts any string): not
/// anchored with `^` and `$`, anchors inside, groups other than `(...)` and `(?:...)`, escapes
/// other than `\t \r \n \\ \" \[ \] \- \xHH \uHHHH \UHHHHHHHH` (outside a class also the escaped
/// regex operators `^ $ . [ ] ( ) | { } * + ?`; so no `\d`, `\w`, `\s`, `\b`, `\/`...), bad
/// `{m,n}` counts, a stray `]` or `}`. None when it translates it (or finds it invalid, which
/// is an error in both converters).
fn pattern_unsupported(p: &str) -> Option<&'static str> {
    if p.len() < 2 || !p.starts_with('^') || !p.ends_with('$') {
        return Some("not anchored with '^' and '$'");
    }
    let c: Vec<char> = p[1..p.len() - 1].chars().collect();
    let gbnf_escape = |i: usize| -> bool {
        let hex = |n: usize| {
            c.len() >= i + 2 + n && c[i + 2..i + 2 + n].iter().all(char::is_ascii_hexdigit)
        };
        match c.get(i + 1) {
            Some('x') => hex(2),
            Some('u') => hex(4),
            Some('U') => hex(8),
            Some('t' | 'r' | 'n' | '\\' | '"' | '[' | ']' | '-') => true,
            _ => false,
        }
    };
    let gbnf_escape_len = |i: usize| match c.get(i + 1) {
        Some('x') => 4,
        Some('u') => 6,
        Some('U') => 10,
        _ => 2,
    };
    let mut i = 0;
    while i < c.len() {
        match c[i] {
            '\\' if i + 1 == c.len() => return None,
            '\\' if "^$.[]()|{}*+?".contains(c[i + 1]) => i += 2,
            '\\' if gbnf_escape(i) => i += gbnf_escape_len(i),
            '\\' => return Some("unsupported escape"),
            '^' | '$' => return Some("anchor inside the pattern"),
            '(' if c.get(i + 1) == Some(&'?') && c.get(i + 2) != Some(&':') => {
                return Some("unsupported group syntax");
            }
            '[' => {
                i += 1;
                while i < c.len() && c[i] != ']' {
                    if c[i] == '\\' {
                        if !gbnf_escape(i) {
                            return Some("unsupported escape in character class");
                        }
                        i += gbnf_escape_len(i);
                    } else {
                        i += 1;
                    }
                }
                i += 1;
            }
            '{' => {
                let Some(end) = c[i..].iter().position(|x| *x == '}') else {
                    return Some("unterminated curly brackets");
                };
                let body: String = c[i + 1..i + end].iter().collect();
                let nums: Vec<&str> = body.split(',').collect();
                // std::stoi: optional leading space and sign, then a digit
                let int = |s: &str| {
                    let s = s.trim_start();
                    let s = s.strip_prefix(['+', '-']).unwrap_or(s);
                    s.starts_with(|d: char| d.is_ascii_digit())
                };
                let ok = match nums.as_slice() {
                    [n] => int(n),
                    [a, b] => (a.is_empty() || int(a)) && (b.is_empty() || int(b)),
                    _ => return Some("wrong number of values in curly brackets"),
                };
                if !ok {
                    return Some("invalid number in curly brackets");
                }
                i += end + 1;
            }
            ']' | '}' => return Some("unsupported character"),
            _ => i += 1,
        }
    }
    None
}

/// The `oneOf` branches llama.cpp reads as `anyOf` (more than one, beside no `$ref`): the walk
/// proves them disjoint or warns ([`one_of_overlap`]).
pub(crate) fn one_of_branches(map: &Map<String, Value>) -> Option<&[Value]> {
    if map.contains_key("$ref") {
        return None;
    }
    match map.get("oneOf") {
        Some(Value::Array(list)) if list.len() > 1 => Some(list),
        _ => None,
    }
}

/// The warning for `oneOf` branches `i` and `j` that may overlap, read as `anyOf`.
pub(crate) fn one_of_overlap(i: usize, j: usize) -> String {
    format!(
        "llama.cpp reads oneOf as anyOf: branches {i} and {j} may overlap, and a value matching both is accepted"
    )
}

/// The schema llama.cpp reads of `map` at `at` ([`view`], then `allOf` as llama.cpp reads it),
/// with a warning for each keyword it ignores. `doc_root` is the document `$ref`s resolve in.
pub(crate) fn reading(
    map: &Map<String, Value>,
    at: &JsonPointer,
    doc_root: &Value,
    doc: usize,
    report: &mut Report<'_>,
) -> Result<Value, SchemaError> {
    let here = at.fragment();
    let (view, ignored) = view(map, at.is_root()).map_err(|(k, m)| invalid(&k, &here, m))?;
    for (k, m) in ignored {
        report.ignored(&k, &here, m);
    }
    match view.get("allOf") {
        Some(Value::Array(list)) => {
            let list = list.clone();
            all_of(&list, at, doc_root, doc, report)
        }
        Some(_) => Err(invalid("allOf", &here, "must be an array")),
        None => Ok(view),
    }
}

/// `allOf` as llama.cpp reads it: the enum values common to all
/// members if there are any, else a closed object with the members' properties, all
/// required except those of `anyOf` members; whatever else the members say is ignored.
fn all_of(
    list: &[Value],
    at: &JsonPointer,
    doc_root: &Value,
    doc: usize,
    report: &mut Report<'_>,
) -> Result<Value, SchemaError> {
    #[derive(Default)]
    struct Acc {
        props: Vec<(String, Value)>,
        required: Vec<String>,
        enums: Vec<(Value, usize)>,
    }
    // one member: follows $refs, reads an object's properties or an enum's values
    fn component(
        (doc_root, doc): (&Value, usize),
        schema: &Value,
        required: bool,
        mcx: &JsonPointer,
        acc: &mut Acc,
        guard: usize,
    ) -> Result<bool, SchemaError> {
        let Some(m) = schema.as_object() else {
            return Ok(false);
        };
        if let Some(r) = m.get("$ref") {
            let r = r
                .as_str()
                .ok_or_else(|| invalid("$ref", &mcx.fragment(), "must be a string"))?;
            if guard > 32 {
                return Ok(false);
            }
            let target =
                refs::resolve(doc_root, doc, r).map_err(|m| invalid("$ref", &mcx.fragment(), m))?;
            let target = refs::target_schema(doc_root, &target);
            return component((doc_root, doc), target, required, mcx, acc, guard + 1);
        }
        if ["oneOf", "anyOf", "const"]
            .iter()
            .any(|k| m.contains_key(*k))
            || m.get("type").is_some_and(Value::is_array)
        {
            return Ok(false);
        }
        if let Some(Value::Array(vals)) = m.get("enum") {
            for v in vals {
                match acc.enums.iter_mut().find(|(x, _)| x == v) {
                    Some((_, n)) => *n += 1,
                    None => acc.enums.push((v.clone(), 1)),
                }
            }
            return Ok(true);
        }
        let (view, _) = view(m, false).map_err(|(k, msg)| invalid(&k, &mcx.fragment(), msg))?;
        let is_object = view.get("type") == Some(&Value::String("object".into()))
            && view.get("allOf").is_none();
        if !is_object {
            return Ok(false);
        }
        if let Some(Value::Object(props)) = view.get("properties") {
            for (k, v) in props {
                acc.props.push((k.clone(), v.clone()));
                if required && !acc.required.contains(k) {
                    acc.required.push(k.clone());
                }
            }
        }
        Ok(true)
    }
    let mut acc = Acc::default();
    for (i, member) in list.iter().enumerate() {
        let mcx = at.with_key("allOf").with_index(i);
        let alts = member.as_object().and_then(|m| {
            if m.contains_key("$ref") {
                None
            } else if let Some(Value::Array(a)) = m.get("oneOf").or_else(|| m.get("anyOf")) {
                Some(a.clone())
            } else if let Some(Value::Array(ts)) = m.get("type") {
                Some(
                    ts.iter()
                        .map(|t| {
                            let mut b = m.clone();
                            b.insert("type".into(), t.clone());
                            Value::Object(b)
                        })
                        .collect(),
                )
            } else {
                None
            }
        });
        let read = match alts {
            Some(alts) => {
                let mut any = false;
                for a in &alts {
                    any |= component((doc_root, doc), a, false, &mcx, &mut acc, 0)?;
                }
                any
            }
            None => component((doc_root, doc), member, true, &mcx, &mut acc, 0)?,
        };
        if !read {
            report.ignored(
                "allOf",
                &mcx.fragment(),
                "ignored by llama.cpp: of allOf members it reads only object properties and enum values",
            );
        }
    }
    let common: Vec<Value> = acc
        .enums
        .iter()
        .filter(|(_, n)| *n == list.len())
        .map(|(v, _)| v.clone())
        .collect();
    if !common.is_empty() {
        return Ok(serde_json::json!({ "enum": common }));
    }
    if !acc.props.is_empty() {
        report.ignored(
            "allOf",
            &at.fragment(),
            "read as llama.cpp reads it: one closed object with the members' properties, all required except those of anyOf members",
        );
    }
    let mut props = Map::new();
    for (k, v) in acc.props {
        props.insert(k, v);
    }
    Ok(serde_json::json!({
        "type": "object",
        "properties": props,
        "required": acc.required,
        "additionalProperties": false,
    }))
}
