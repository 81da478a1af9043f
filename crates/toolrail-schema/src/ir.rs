//! The typed reading of a schema node: what the converter's per-type functions walk.
//!
//! A schema object is read once per visit into typed keyword groups ([`TypeSet`],
//! [`read_values`], [`StringRules`], [`NumberRules`], [`ArrayRules`], [`ObjectRules`]). Reading
//! checks each keyword's JSON type (a keyword of the wrong type is an error naming the keyword
//! and the node's JSON pointer) and the contradictions between the keywords of one group
//! (`minLength` above `maxLength`, bounds leaving no number, ...). Keyword names as strings
//! appear only here and in messages; the converter reads the groups' fields.
//!
//! Child schemas stay borrowed `&Value`s, read into a node when the converter visits them, so
//! that no subschema is copied. What JSON Schema lets a keyword say that the converter cannot
//! express (a size above the repetition limit, `contains`, `multipleOf` with bounds) is still
//! the converter's to report, as an error or, lenient, a warning: reading only says what the
//! schema says.

use serde_json::{Map, Value};

use super::error::SchemaError;
pub(crate) use super::numbers::NumberRules;
use super::numbers::{self, Bound, Decimal};
use super::validate::value_types;

/// Internal keyword (made by negating `type: integer`): numbers must have a non-zero fraction.
pub(crate) const FRACTIONAL: &str = "x-toolrail-fractional";

/// An error naming `keyword` at `pointer`.
fn invalid(keyword: &str, pointer: &str, message: impl Into<String>) -> SchemaError {
    SchemaError {
        keyword: keyword.to_string(),
        pointer: pointer.to_string(),
        message: message.into(),
    }
}

/// One of JSON Schema's seven type names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum JsonType {
    /// `null`.
    Null,
    /// `true` or `false`.
    Boolean,
    /// A number without a fraction (`3`, `3.0`).
    Integer,
    /// Any number.
    Number,
    /// A string.
    String,
    /// An array.
    Array,
    /// An object.
    Object,
}

impl JsonType {
    /// Every type, in the order the converter writes a node's alternatives.
    pub(crate) const ALL: [JsonType; 7] = [
        JsonType::Null,
        JsonType::Boolean,
        JsonType::Integer,
        JsonType::Number,
        JsonType::String,
        JsonType::Array,
        JsonType::Object,
    ];

    /// The type's name in a schema (`"integer"`).
    pub(crate) fn name(self) -> &'static str {
        match self {
            JsonType::Null => "null",
            JsonType::Boolean => "boolean",
            JsonType::Integer => "integer",
            JsonType::Number => "number",
            JsonType::String => "string",
            JsonType::Array => "array",
            JsonType::Object => "object",
        }
    }

    /// The type a schema names, if it is one of the seven.
    pub(crate) fn from_name(name: &str) -> Option<JsonType> {
        JsonType::ALL.into_iter().find(|t| t.name() == name)
    }

    fn bit(self) -> u8 {
        1 << self as u8
    }
}

/// A set of JSON types (a bitset): the `type` keyword as read, or the types a schema admits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct TypeSet(u8);

impl TypeSet {
    /// No type.
    pub(crate) const EMPTY: TypeSet = TypeSet(0);
    /// Every type (a node without `type`).
    pub(crate) const ALL: TypeSet = TypeSet(0b111_1111);

    /// The set of `t` alone.
    pub(crate) fn only(t: JsonType) -> TypeSet {
        TypeSet(t.bit())
    }

    /// Whether `t` is in the set.
    pub(crate) fn contains(self, t: JsonType) -> bool {
        self.0 & t.bit() != 0
    }

    /// Adds `t`.
    pub(crate) fn insert(&mut self, t: JsonType) {
        self.0 |= t.bit();
    }

    /// The types in both sets.
    pub(crate) fn intersection(self, other: TypeSet) -> TypeSet {
        TypeSet(self.0 & other.0)
    }

    /// The types in the set, in [`JsonType::ALL`] order.
    pub(crate) fn iter(self) -> impl Iterator<Item = JsonType> {
        JsonType::ALL.into_iter().filter(move |t| self.contains(*t))
    }

    /// The set with `integer` added when it has `number` (every integer is a number): the
    /// values the set admits, as types.
    pub(crate) fn with_integers(mut self) -> TypeSet {
        if self.contains(JsonType::Number) {
            self.insert(JsonType::Integer);
        }
        self
    }

    /// The types a value has (an integral number is `integer` and `number`).
    pub(crate) fn of_value(v: &Value) -> TypeSet {
        let mut set = TypeSet::EMPTY;
        for name in value_types(v) {
            if let Some(t) = JsonType::from_name(name) {
                set.insert(t);
            }
        }
        set
    }

    /// The `type` keyword of a node, strictly: absent is every type, a name or a list of names
    /// (entries that are not strings are skipped); anything else, or an unknown name, is an
    /// error naming `type` at `pointer`.
    pub(crate) fn read(map: &Map<String, Value>, pointer: &str) -> Result<TypeSet, SchemaError> {
        let mut set = TypeSet::EMPTY;
        let mut add = |name: &str| match JsonType::from_name(name) {
            Some(t) => {
                set.insert(t);
                Ok(())
            }
            None => Err(invalid("type", pointer, format!("unknown type {name:?}"))),
        };
        match map.get("type") {
            None => return Ok(TypeSet::ALL),
            Some(Value::String(s)) => add(s)?,
            Some(Value::Array(a)) => {
                for name in a.iter().filter_map(Value::as_str) {
                    add(name)?;
                }
            }
            Some(_) => {
                return Err(invalid(
                    "type",
                    pointer,
                    "must be a string or an array of strings",
                ));
            }
        }
        Ok(set)
    }

    /// The `type` keyword read leniently, for proofs that never fail (disjointness): `None`
    /// when it is absent or not a name or list of names; unknown names are left out.
    pub(crate) fn read_lenient(map: &Map<String, Value>) -> Option<TypeSet> {
        let mut set = TypeSet::EMPTY;
        match map.get("type")? {
            Value::String(s) => {
                if let Some(t) = JsonType::from_name(s) {
                    set.insert(t);
                }
            }
            Value::Array(a) => {
                for t in a
                    .iter()
                    .filter_map(Value::as_str)
                    .filter_map(JsonType::from_name)
                {
                    set.insert(t);
                }
            }
            _ => return None,
        }
        Some(set)
    }
}

/// JSON Schema keywords the converter does not express, whatever the node's type.
const ALWAYS_UNSUPPORTED: [&str; 5] = [
    "not",
    "$dynamicRef",
    "$recursiveRef",
    "unevaluatedProperties",
    "unevaluatedItems",
];

/// A keyword of a node that the converter cannot express, found by reading it.
#[derive(Debug)]
pub(crate) struct UnsupportedKeyword {
    /// The keyword.
    pub(crate) keyword: &'static str,
    /// Why.
    pub(crate) message: String,
    /// Whether lenient conversion drops it from the node (else it constrains nothing the
    /// converter reads, and stays).
    pub(crate) dropped: bool,
}

/// The keywords of a node the converter cannot express, whatever its type, in a fixed order:
/// `not` (when it has no positive form, see the converter), references to dynamic scopes,
/// `unevaluated*` (unless `true`), `if` with `then`/`else`, and `$id` below the document root
/// (an embedded resource). The converter reports each as an error or, lenient, a warning.
pub(crate) fn unsupported_keywords(
    map: &Map<String, Value>,
    is_root: bool,
) -> Vec<UnsupportedKeyword> {
    let mut out = Vec::new();
    for keyword in ALWAYS_UNSUPPORTED {
        let Some(v) = map.get(keyword) else { continue };
        // trivially true forms
        if matches!(keyword, "unevaluatedProperties" | "unevaluatedItems")
            && v == &Value::Bool(true)
        {
            continue;
        }
        out.push(UnsupportedKeyword {
            keyword,
            message: "keyword not supported".to_string(),
            dropped: true,
        });
    }
    if map.contains_key("if") && (map.contains_key("then") || map.contains_key("else")) {
        out.push(UnsupportedKeyword {
            keyword: "if",
            message: "conditional schemas (if/then/else) are not supported".to_string(),
            dropped: true,
        });
    }
    if let Some(id) = map.get("$id")
        && !is_root
    {
        out.push(UnsupportedKeyword {
            keyword: "$id",
            message: format!("embedded schema resource {id}"),
            dropped: false,
        });
    }
    out
}

/// The keywords of a node that JSON Schema does not define (ignored, with a note).
pub(crate) fn unknown_keywords(map: &Map<String, Value>) -> impl Iterator<Item = &String> {
    map.keys().filter(|k| super::keywords::is_unknown(k))
}

/// `anyOf` or `oneOf`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Alternation {
    /// `anyOf`: at least one branch holds.
    AnyOf,
    /// `oneOf`: exactly one branch holds.
    OneOf,
}

impl Alternation {
    /// The keyword.
    pub(crate) fn keyword(self) -> &'static str {
        match self {
            Alternation::AnyOf => "anyOf",
            Alternation::OneOf => "oneOf",
        }
    }
}

/// How the converter takes a schema object apart, once `not`, the dependency keywords and the
/// unsupported keywords are dealt with: the first of these that applies.
#[derive(Debug)]
pub(crate) enum Shape<'a> {
    /// `$ref` and nothing else that constrains: a reference to the target's rule.
    Reference(&'a str),
    /// `$ref` with constraining siblings, or `allOf`: merged into one schema, then read again.
    Merged,
    /// `anyOf` (or else `oneOf`); the other keywords hold in every branch.
    Alternatives {
        /// Which keyword.
        alternation: Alternation,
        /// The branch schemas.
        branches: &'a [Value],
    },
    /// Only per-type keywords (and `enum`/`const`): [`TypeSet`] and the keyword groups.
    Typed,
}

impl<'a> Shape<'a> {
    /// Reads the shape of a schema object; a `$ref` that is not a string or an `anyOf`/`oneOf`
    /// that is not an array is an error naming it.
    pub(crate) fn read(map: &'a Map<String, Value>, pointer: &str) -> Result<Self, SchemaError> {
        if let Some(r) = map.get("$ref") {
            let r = r
                .as_str()
                .ok_or_else(|| invalid("$ref", pointer, "must be a string"))?;
            let siblings = map
                .keys()
                .any(|k| k != "$ref" && !super::keywords::is_ignored(k));
            return Ok(if siblings {
                Shape::Merged
            } else {
                Shape::Reference(r)
            });
        }
        if map.contains_key("allOf") {
            return Ok(Shape::Merged);
        }
        for alternation in [Alternation::AnyOf, Alternation::OneOf] {
            let key = alternation.keyword();
            if let Some(list) = map.get(key) {
                let branches = list
                    .as_array()
                    .ok_or_else(|| invalid(key, pointer, "must be an array"))?;
                return Ok(Shape::Alternatives {
                    alternation,
                    branches,
                });
            }
        }
        Ok(Shape::Typed)
    }
}

/// The `type` names in the order written (entries of a list that are not strings skipped);
/// `None` when `type` is absent or neither a name nor a list, or names an unknown type.
pub(crate) fn listed_types(map: &Map<String, Value>) -> Option<Vec<JsonType>> {
    match map.get("type")? {
        Value::String(t) => Some(vec![JsonType::from_name(t)?]),
        Value::Array(a) => a
            .iter()
            .filter_map(Value::as_str)
            .map(JsonType::from_name)
            .collect(),
        _ => None,
    }
}

/// The names a schema requires when requiring them is all it does (every other keyword an
/// annotation): `oneOf` over such branches is written as disjoint alternatives.
pub(crate) fn required_only(schema: &Value) -> Option<Vec<&str>> {
    let map = schema.as_object()?;
    if map
        .keys()
        .any(|k| k != "required" && !super::keywords::is_ignored(k))
    {
        return None;
    }
    map.get("required")?
        .as_array()?
        .iter()
        .map(Value::as_str)
        .collect()
}

/// The values `enum` and `const` allow (`const` narrows `enum` to the members equal to it),
/// borrowed from the schema; `None` when the node has neither. An empty `enum` and an `enum`
/// that is not an array are errors.
pub(crate) fn read_values<'a>(
    map: &'a Map<String, Value>,
    pointer: &str,
) -> Result<Option<Vec<&'a Value>>, SchemaError> {
    let mut values: Vec<&Value> = match map.get("enum") {
        Some(Value::Array(a)) if a.is_empty() => {
            return Err(invalid("enum", pointer, "an empty enum: no value is valid"));
        }
        Some(Value::Array(a)) => a.iter().collect(),
        Some(_) => return Err(invalid("enum", pointer, "must be an array")),
        None if !map.contains_key("const") => return Ok(None),
        None => Vec::new(),
    };
    if let Some(c) = map.get("const") {
        if map.contains_key("enum") {
            values.retain(|v| super::validate::json_eq(v, c));
        } else {
            values = vec![c];
        }
    }
    Ok(Some(values))
}

/// A non-negative integer keyword (`2` or `2.0`), or an error naming it.
pub(crate) fn read_count(
    map: &Map<String, Value>,
    keyword: &str,
    pointer: &str,
) -> Result<Option<u64>, SchemaError> {
    match map.get(keyword) {
        None => Ok(None),
        Some(v) => v
            .as_u64()
            .or_else(|| {
                v.as_f64()
                    .filter(|f| *f >= 0.0 && f.fract() == 0.0 && *f < 1e15)
                    .map(|f| f as u64)
            })
            .map(Some)
            .ok_or_else(|| invalid(keyword, pointer, "must be a non-negative integer")),
    }
}

/// A `minX`/`maxX` pair, checked for a minimum above the maximum (no value valid).
fn read_counts(
    map: &Map<String, Value>,
    (min_key, max_key): (&str, &str),
    what: &str,
    pointer: &str,
) -> Result<(Option<u64>, Option<u64>), SchemaError> {
    let min = read_count(map, min_key, pointer)?;
    let max = read_count(map, max_key, pointer)?;
    if let (Some(lo), Some(hi)) = (min, max)
        && lo > hi
    {
        return Err(invalid(
            min_key,
            pointer,
            format!("{min_key} {lo} is above {max_key} {hi}: no {what} is valid"),
        ));
    }
    Ok((min, max))
}

/// The string keywords of a node.
#[derive(Debug)]
pub(crate) struct StringRules<'a> {
    /// `minLength` (at most `maxLength`).
    pub(crate) min_length: Option<u64>,
    /// `maxLength`.
    pub(crate) max_length: Option<u64>,
    /// `format` when it is a string (any other value is no format).
    pub(crate) format: Option<&'a str>,
    /// `pattern`.
    pub(crate) pattern: Option<&'a str>,
}

impl<'a> StringRules<'a> {
    /// Reads `minLength`, `maxLength`, `format` and `pattern`.
    pub(crate) fn read(map: &'a Map<String, Value>, pointer: &str) -> Result<Self, SchemaError> {
        let (min_length, max_length) =
            read_counts(map, ("minLength", "maxLength"), "string", pointer)?;
        let pattern = match map.get("pattern") {
            None => None,
            Some(Value::String(p)) => Some(p.as_str()),
            Some(_) => return Err(invalid("pattern", pointer, "must be a string")),
        };
        Ok(StringRules {
            min_length,
            max_length,
            format: map.get("format").and_then(Value::as_str),
            pattern,
        })
    }
}

impl NumberRules {
    /// Reads `multipleOf` and the four bounds; bounds that leave no number between them are an
    /// error naming both.
    pub(crate) fn read(map: &Map<String, Value>, pointer: &str) -> Result<Self, SchemaError> {
        let multiple_of = match map.get("multipleOf") {
            None => None,
            Some(m) => Some(
                m.as_number()
                    .and_then(|n| Decimal::parse(&n.to_string()))
                    .filter(|d| !(d.neg || (d.int == "0" && d.frac.is_empty())))
                    .ok_or_else(|| invalid("multipleOf", pointer, "must be a positive number"))?,
            ),
        };
        let bound = |key: &str| -> Result<Option<Decimal>, SchemaError> {
            match map.get(key) {
                None => Ok(None),
                Some(Value::Number(n)) => Decimal::parse(&n.to_string())
                    .map(Some)
                    .ok_or_else(|| invalid(key, pointer, "not a decimal number")),
                Some(Value::Bool(_)) => Err(invalid(
                    key,
                    pointer,
                    "boolean exclusive bounds (draft 4) are not supported",
                )),
                Some(_) => Err(invalid(key, pointer, "must be a number")),
            }
        };
        let lower = tighter(bound("minimum")?, bound("exclusiveMinimum")?, true);
        let upper = tighter(bound("maximum")?, bound("exclusiveMaximum")?, false);
        if let (Some(l), Some(h)) = (&lower, &upper) {
            let o = numbers::cmp_decimal(&l.value, &h.value);
            if o.is_gt() || (o.is_eq() && (l.exclusive || h.exclusive)) {
                let (lk, hk) = (l.keyword(true), h.keyword(false));
                return Err(invalid(
                    lk,
                    pointer,
                    format!("{lk} and {hk} leave no number between them: no value is valid"),
                ));
            }
        }
        Ok(NumberRules {
            fractional: map.get(FRACTIONAL) == Some(&Value::Bool(true)),
            multiple_of,
            lower,
            upper,
        })
    }
}

/// Of an inclusive and an exclusive bound on the same side, the tighter one (`lower`: the
/// larger); on a tie, the exclusive one.
fn tighter(inclusive: Option<Decimal>, exclusive: Option<Decimal>, lower: bool) -> Option<Bound> {
    match (inclusive, exclusive) {
        (None, None) => None,
        (Some(value), None) => Some(Bound {
            value,
            exclusive: false,
        }),
        (None, Some(value)) => Some(Bound {
            value,
            exclusive: true,
        }),
        (Some(x), Some(y)) => {
            let o = numbers::cmp_decimal(&x, &y);
            let take_inclusive = !o.is_eq() && o.is_gt() == lower;
            Some(if take_inclusive {
                Bound {
                    value: x,
                    exclusive: false,
                }
            } else {
                Bound {
                    value: y,
                    exclusive: true,
                }
            })
        }
    }
}

/// The array keywords of a node.
#[derive(Debug)]
pub(crate) struct ArrayRules<'a> {
    /// `minItems` (at most `maxItems`).
    pub(crate) min_items: Option<u64>,
    /// `maxItems`.
    pub(crate) max_items: Option<u64>,
    /// The schemas of the first items (`prefixItems`, or a list under `items`).
    pub(crate) prefix: &'a [Value],
    /// The keyword of [`Self::prefix`], for pointers.
    pub(crate) prefix_key: &'static str,
    /// The schema of the items after the prefix (`items`, or `additionalItems` after a list
    /// under `items`); `None`: any value.
    pub(crate) rest: Option<&'a Value>,
    /// The keyword of [`Self::rest`], for pointers.
    pub(crate) rest_key: &'static str,
    /// A tuple form (a list of prefix schemas) whose rest is `false`: the prefix caps the length.
    pub(crate) closed_tuple: bool,
    /// `uniqueItems: true`.
    pub(crate) unique_items: bool,
    /// `contains` is present.
    pub(crate) contains: bool,
}

impl<'a> ArrayRules<'a> {
    /// Reads the item keywords. A `prefixItems` that is not a list is not valid JSON Schema;
    /// llama.cpp reads a lone schema there as the item schema, and so does this.
    pub(crate) fn read(map: &'a Map<String, Value>, pointer: &str) -> Result<Self, SchemaError> {
        let (min_items, max_items) = read_counts(map, ("minItems", "maxItems"), "array", pointer)?;
        let has_prefix_items = map.contains_key("prefixItems");
        let (prefix, rest_key, tuple): (&[Value], &'static str, bool) =
            match (map.get("prefixItems"), map.get("items")) {
                (Some(Value::Array(p)), _) => (p, "items", true),
                (Some(_), Some(_)) => (&[], "items", false),
                (Some(_), None) => (&[], "prefixItems", false),
                (None, Some(Value::Array(p))) => (p, "additionalItems", true),
                (None, _) => (&[], "items", false),
            };
        let rest = map.get(rest_key);
        Ok(ArrayRules {
            min_items,
            max_items,
            prefix,
            prefix_key: if has_prefix_items {
                "prefixItems"
            } else {
                "items"
            },
            rest,
            rest_key,
            closed_tuple: tuple && rest == Some(&Value::Bool(false)),
            unique_items: map.get("uniqueItems") == Some(&Value::Bool(true)),
            contains: map.contains_key("contains"),
        })
    }
}

/// The dependency keywords, none of which the per-type object walk expresses (outside
/// llama.cpp's reading they are rewritten into alternatives before it).
pub(crate) const DEPENDENCY_KEYWORDS: [&str; 3] =
    ["dependentRequired", "dependentSchemas", "dependencies"];

/// What a dependency asks of an object that has its trigger name.
#[derive(Debug)]
pub(crate) enum DependencyNeed<'a> {
    /// These names are present too (a non-empty list of strings).
    Names(&'a [Value]),
    /// The object satisfies this schema (an object, or `false`).
    Schema(&'a Value),
}

/// One entry of `dependentRequired`, `dependentSchemas` or `dependencies`.
#[derive(Debug)]
pub(crate) struct Dependency<'a> {
    /// The trigger name.
    pub(crate) name: &'a String,
    /// What the trigger name needs.
    pub(crate) need: DependencyNeed<'a>,
}

/// The dependency keywords' entries in keyword order, entries that ask nothing (`true`, no
/// names) left out; `None` when the node has none of the keywords. A keyword that is not an
/// object, names that are not strings, and an entry that is neither a list of names (not
/// under `dependentSchemas`) nor a schema (not under `dependentRequired`) are errors.
pub(crate) fn read_dependencies<'a>(
    map: &'a Map<String, Value>,
    pointer: &str,
) -> Result<Option<Vec<Dependency<'a>>>, SchemaError> {
    if !DEPENDENCY_KEYWORDS.iter().any(|k| map.contains_key(*k)) {
        return Ok(None);
    }
    let mut out = Vec::new();
    for keyword in DEPENDENCY_KEYWORDS {
        let Some(v) = map.get(keyword) else { continue };
        let Value::Object(entries) = v else {
            return Err(invalid(keyword, pointer, "must be an object"));
        };
        for (name, need) in entries {
            let need = match need {
                Value::Array(names) if keyword != "dependentSchemas" => {
                    if names.is_empty() {
                        continue;
                    }
                    if names.iter().any(|n| !n.is_string()) {
                        return Err(invalid(keyword, pointer, "names must be strings"));
                    }
                    DependencyNeed::Names(names)
                }
                Value::Bool(true) => continue,
                Value::Object(_) | Value::Bool(false) if keyword != "dependentRequired" => {
                    DependencyNeed::Schema(need)
                }
                _ => {
                    return Err(invalid(
                        keyword,
                        pointer,
                        format!("the entry for {name:?} must be a list of names or a schema"),
                    ));
                }
            };
            out.push(Dependency { name, need });
        }
    }
    Ok(Some(out))
}

/// The object keywords of a node.
#[derive(Debug)]
pub(crate) struct ObjectRules<'a> {
    /// `properties`, in the schema's order.
    pub(crate) properties: Vec<(&'a String, &'a Value)>,
    /// `properties` is present (even empty).
    pub(crate) has_properties: bool,
    /// `patternProperties`, in the schema's order.
    pub(crate) pattern_properties: Vec<(&'a String, &'a Value)>,
    /// `required`.
    pub(crate) required: Vec<&'a str>,
    /// `additionalProperties` as written (`None`: absent).
    pub(crate) additional: Option<&'a Value>,
    /// `propertyNames` unless trivially true.
    pub(crate) property_names: Option<&'a Value>,
    /// The keywords that constrain undeclared names (`patternProperties`, `propertyNames`)
    /// present, even trivially: a call's keyword arguments cannot have them.
    pub(crate) name_keywords: Vec<&'static str>,
    /// The dependency keywords present and not trivially true.
    pub(crate) dependencies: Vec<&'static str>,
    /// `minProperties` (0 when absent; at most `maxProperties`).
    pub(crate) min_properties: u64,
    /// `maxProperties`.
    pub(crate) max_properties: Option<u64>,
}

impl<'a> ObjectRules<'a> {
    /// Reads the member keywords.
    pub(crate) fn read(map: &'a Map<String, Value>, pointer: &str) -> Result<Self, SchemaError> {
        let trivial =
            |v: &Value| v == &Value::Bool(true) || v.as_object().is_some_and(|o| o.is_empty());
        let members = |key: &str| -> Result<Vec<(&'a String, &'a Value)>, SchemaError> {
            match map.get(key) {
                None => Ok(Vec::new()),
                Some(Value::Object(p)) => Ok(p.iter().collect()),
                Some(_) => Err(invalid(key, pointer, "must be an object")),
            }
        };
        let properties = members("properties")?;
        let pattern_properties = members("patternProperties")?;
        let required = match map.get("required") {
            None => Vec::new(),
            Some(Value::Array(a)) => a
                .iter()
                .map(|x| {
                    x.as_str()
                        .ok_or_else(|| invalid("required", pointer, "must be strings"))
                })
                .collect::<Result<_, _>>()?,
            Some(_) => return Err(invalid("required", pointer, "must be an array")),
        };
        let min = read_count(map, "minProperties", pointer)?.unwrap_or(0);
        let max = read_count(map, "maxProperties", pointer)?;
        if let Some(hi) = max
            && min > hi
        {
            return Err(invalid(
                "minProperties",
                pointer,
                format!("minProperties {min} is above maxProperties {hi}: no object is valid"),
            ));
        }
        Ok(ObjectRules {
            properties,
            has_properties: map.contains_key("properties"),
            pattern_properties,
            required,
            additional: map.get("additionalProperties"),
            property_names: map.get("propertyNames").filter(|v| !trivial(v)),
            name_keywords: ["patternProperties", "propertyNames"]
                .into_iter()
                .filter(|k| map.contains_key(*k))
                .collect(),
            dependencies: DEPENDENCY_KEYWORDS
                .into_iter()
                .filter(|k| map.get(*k).is_some_and(|v| !trivial(v)))
                .collect(),
            min_properties: min,
            max_properties: max,
        })
    }
}

/// The `true` schema, for a member no keyword constrains.
static TRUE_SCHEMA: Value = Value::Bool(true);

/// What the proof that two `oneOf` branches are disjoint reads of a flattened branch. Read
/// leniently: a keyword of the wrong JSON type is no fact, so the proof fails rather than
/// succeeds wrongly (the branch itself is read strictly when it is converted).
#[derive(Debug)]
pub(crate) struct Facts<'a> {
    /// The branch has `anyOf` or `oneOf` (nothing is proved about it).
    pub(crate) alternatives: bool,
    /// The branch has `not`.
    pub(crate) negation: bool,
    /// The `enum` values, else the `const` value.
    pub(crate) values: Option<&'a [Value]>,
    /// The node, for the facts read on demand (bounds, counts, required names).
    map: &'a Map<String, Value>,
    /// `properties` as written.
    properties: Option<&'a Value>,
    /// `patternProperties` is present.
    pattern_properties: bool,
    /// `additionalProperties` as written.
    additional: Option<&'a Value>,
}

impl<'a> Facts<'a> {
    /// Reads the facts of a flattened schema object.
    pub(crate) fn read(map: &'a Map<String, Value>) -> Self {
        let values = match (map.get("enum").and_then(Value::as_array), map.get("const")) {
            (Some(vals), _) => Some(vals.as_slice()),
            (None, Some(c)) => Some(std::slice::from_ref(c)),
            (None, None) => None,
        };
        Facts {
            alternatives: map.contains_key("anyOf") || map.contains_key("oneOf"),
            negation: map.contains_key("not"),
            values,
            map,
            properties: map.get("properties"),
            pattern_properties: map.contains_key("patternProperties"),
            additional: map.get("additionalProperties"),
        }
    }

    /// The types its values may have: [`Facts::values`]' types, else `type` (every integer
    /// being a number), else every type.
    pub(crate) fn types(&self) -> TypeSet {
        match self.values {
            Some(vals) => {
                let mut set = TypeSet::EMPTY;
                for t in vals.iter().flat_map(|v| TypeSet::of_value(v).iter()) {
                    set.insert(t);
                }
                set
            }
            None => TypeSet::read_lenient(self.map).map_or(TypeSet::ALL, TypeSet::with_integers),
        }
    }

    /// The `required` names (entries that are not strings skipped).
    pub(crate) fn required(&self) -> impl Iterator<Item = &'a str> {
        self.map
            .get("required")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
    }

    /// A bound keyword's value, if it is a number.
    fn decimal(&self, keyword: &str) -> Option<Decimal> {
        self.map
            .get(keyword)
            .and_then(Value::as_number)
            .and_then(|n| Decimal::parse(&n.to_string()))
    }

    /// `inclusive` if it is a number, else `exclusive`.
    fn bound(&self, inclusive: &str, exclusive: &str) -> Option<Bound> {
        self.decimal(inclusive)
            .map(|value| Bound {
                value,
                exclusive: false,
            })
            .or_else(|| {
                self.decimal(exclusive).map(|value| Bound {
                    value,
                    exclusive: true,
                })
            })
    }

    /// `minimum`, else `exclusiveMinimum`.
    pub(crate) fn lower(&self) -> Option<Bound> {
        self.bound("minimum", "exclusiveMinimum")
    }

    /// `maximum`, else `exclusiveMaximum`.
    pub(crate) fn upper(&self) -> Option<Bound> {
        self.bound("maximum", "exclusiveMaximum")
    }

    /// A count keyword's value, if it is a non-negative integer.
    fn count(&self, keyword: &str) -> Option<u64> {
        self.map.get(keyword).and_then(Value::as_u64)
    }

    /// `minLength`, `maxLength`.
    pub(crate) fn lengths(&self) -> (Option<u64>, Option<u64>) {
        (self.count("minLength"), self.count("maxLength"))
    }

    /// `minItems`, `maxItems`.
    pub(crate) fn items(&self) -> (Option<u64>, Option<u64>) {
        (self.count("minItems"), self.count("maxItems"))
    }

    /// The schema a member named `name` satisfies: its `properties` entry, else
    /// `additionalProperties` (`true` when absent); `None` when `patternProperties` may apply.
    pub(crate) fn member_schema(&self, name: &str) -> Option<&'a Value> {
        if let Some(p) = self.properties.and_then(|p| p.get(name)) {
            return Some(p);
        }
        if self.pattern_properties {
            return None;
        }
        Some(self.additional.unwrap_or(&TRUE_SCHEMA))
    }
}

impl Bound {
    /// The keyword that sets this bound (`lower`: a minimum).
    pub(crate) fn keyword(&self, lower: bool) -> &'static str {
        match (self.exclusive, lower) {
            (true, true) => "exclusiveMinimum",
            (false, true) => "minimum",
            (true, false) => "exclusiveMaximum",
            (false, false) => "maximum",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn map(v: Value) -> Map<String, Value> {
        match v {
            Value::Object(m) => m,
            _ => Map::new(),
        }
    }

    #[test]
    fn type_set_reads_names_and_refuses_unknown_ones() {
        let set = TypeSet::read(&map(json!({"type": ["string", "null"]})), "#").unwrap();
        assert!(set.contains(JsonType::String) && set.contains(JsonType::Null));
        assert!(!set.contains(JsonType::Number));
        assert_eq!(TypeSet::read(&map(json!({})), "#").unwrap(), TypeSet::ALL);
        let e = TypeSet::read(&map(json!({"type": "str"})), "#/a").unwrap_err();
        assert_eq!((e.keyword.as_str(), e.pointer.as_str()), ("type", "#/a"));
        let e = TypeSet::read(&map(json!({"type": 3})), "#").unwrap_err();
        assert!(e.message.contains("must be a string"));
        let n = TypeSet::read(&map(json!({"type": "number"})), "#").unwrap();
        assert!(!n.contains(JsonType::Integer) && n.with_integers().contains(JsonType::Integer));
    }

    #[test]
    fn shape_is_the_first_combinator_that_applies() {
        let m = map(json!({"$ref": "#/$defs/a", "description": "x"}));
        assert!(matches!(
            Shape::read(&m, "#").unwrap(),
            Shape::Reference("#/$defs/a")
        ));
        let m = map(json!({"$ref": "#/$defs/a", "minLength": 1}));
        assert!(matches!(Shape::read(&m, "#").unwrap(), Shape::Merged));
        let m = map(json!({"oneOf": [true, false], "anyOf": [true]}));
        let Shape::Alternatives {
            alternation,
            branches,
        } = Shape::read(&m, "#").unwrap()
        else {
            panic!("not alternatives");
        };
        assert_eq!((alternation, branches.len()), (Alternation::AnyOf, 1));
        assert!(matches!(
            Shape::read(&map(json!({"type": "null"})), "#").unwrap(),
            Shape::Typed
        ));
        let e = Shape::read(&map(json!({"$ref": 1})), "#/r").unwrap_err();
        assert_eq!((e.keyword.as_str(), e.pointer.as_str()), ("$ref", "#/r"));
        let e = Shape::read(&map(json!({"oneOf": {}})), "#").unwrap_err();
        assert_eq!(e.keyword, "oneOf");
    }

    #[test]
    fn unsupported_and_unknown_keywords_are_listed() {
        let m = map(json!({
            "unevaluatedItems": true, "unevaluatedProperties": false, "if": {}, "then": {},
            "$id": "x", "x-vendor": 1, "title": "t"
        }));
        let found: Vec<(&str, bool)> = unsupported_keywords(&m, false)
            .iter()
            .map(|u| (u.keyword, u.dropped))
            .collect();
        assert_eq!(
            found,
            [
                ("unevaluatedProperties", true),
                ("if", true),
                ("$id", false)
            ]
        );
        assert_eq!(unsupported_keywords(&m, true).len(), 2);
        let unknown: Vec<&String> = unknown_keywords(&m).collect();
        assert_eq!(unknown, ["x-vendor"]);
    }

    #[test]
    fn dependencies_are_read_in_keyword_order() {
        let m = map(json!({
            "dependencies": {"c": {"required": ["d"]}, "e": true},
            "dependentRequired": {"a": ["b"], "z": []}
        }));
        let deps = read_dependencies(&m, "#").unwrap().unwrap();
        let names: Vec<&str> = deps.iter().map(|d| d.name.as_str()).collect();
        assert_eq!(names, ["a", "c"]);
        assert!(matches!(deps[0].need, DependencyNeed::Names(n) if n.len() == 1));
        assert!(matches!(deps[1].need, DependencyNeed::Schema(_)));
        assert!(read_dependencies(&map(json!({})), "#").unwrap().is_none());
        let m = map(json!({"dependentRequired": {"a": {"type": "object"}}}));
        let e = read_dependencies(&m, "#/o").unwrap_err();
        assert_eq!(
            (e.keyword.as_str(), e.pointer.as_str()),
            ("dependentRequired", "#/o")
        );
    }

    #[test]
    fn facts_are_read_leniently() {
        let m = map(json!({
            "const": 3, "type": "string", "required": ["a", 1], "maximum": "x",
            "exclusiveMaximum": 4, "maxLength": 2.5, "properties": {"a": {"type": "null"}},
            "additionalProperties": false
        }));
        let f = Facts::read(&m);
        assert_eq!(f.values, Some(&[json!(3)][..]));
        assert!(f.types().contains(JsonType::Integer) && !f.types().contains(JsonType::String));
        assert_eq!(f.required().collect::<Vec<_>>(), ["a"]);
        assert!(f.upper().is_some_and(|b| b.exclusive) && f.lower().is_none());
        assert_eq!(f.lengths(), (None, None));
        assert_eq!(f.member_schema("a"), Some(&json!({"type": "null"})));
        assert_eq!(f.member_schema("b"), Some(&json!(false)));
        let open = map(json!({"patternProperties": {"^x": true}}));
        assert_eq!(Facts::read(&open).member_schema("b"), None);
        assert_eq!(
            Facts::read(&map(json!({}))).member_schema("b"),
            Some(&json!(true))
        );
    }

    #[test]
    fn listed_types_and_required_only_names() {
        let m = map(json!({"type": ["boolean", 1, "null"]}));
        assert_eq!(
            listed_types(&m),
            Some(vec![JsonType::Boolean, JsonType::Null])
        );
        assert_eq!(listed_types(&map(json!({"type": ["null", "nil"]}))), None);
        assert_eq!(listed_types(&map(json!({}))), None);
        let b = json!({"required": ["a", "b"], "description": "d"});
        assert_eq!(required_only(&b), Some(vec!["a", "b"]));
        assert_eq!(
            required_only(&json!({"required": ["a"], "type": "object"})),
            None
        );
        assert_eq!(required_only(&json!({"required": [1]})), None);
    }

    #[test]
    fn values_narrow_enum_by_const() {
        let m = map(json!({"enum": [1, 2, 3], "const": 2.0}));
        let v = read_values(&m, "#").unwrap().unwrap();
        assert_eq!(v, vec![&json!(2)]);
        assert!(
            read_values(&map(json!({"type": "string"})), "#")
                .unwrap()
                .is_none()
        );
        let e = read_values(&map(json!({"enum": []})), "#/x").unwrap_err();
        assert_eq!((e.keyword.as_str(), e.pointer.as_str()), ("enum", "#/x"));
    }

    #[test]
    fn string_lengths_are_checked() {
        let m = map(json!({"minLength": 2.0, "maxLength": 5, "pattern": "^a", "format": 3}));
        let r = StringRules::read(&m, "#").unwrap();
        assert_eq!((r.min_length, r.max_length), (Some(2), Some(5)));
        assert_eq!((r.pattern, r.format), (Some("^a"), None));
        let e = StringRules::read(&map(json!({"minLength": 3, "maxLength": 2})), "#").unwrap_err();
        assert_eq!(e.keyword, "minLength");
        let e = StringRules::read(&map(json!({"maxLength": -1})), "#/p").unwrap_err();
        assert_eq!(
            (e.keyword.as_str(), e.pointer.as_str()),
            ("maxLength", "#/p")
        );
    }

    #[test]
    fn number_bounds_take_the_tighter_keyword() {
        let m =
            map(json!({"minimum": 1, "exclusiveMinimum": 1, "maximum": 9, "exclusiveMaximum": 10}));
        let r = NumberRules::read(&m, "#").unwrap();
        let (lo, hi) = (r.lower.unwrap(), r.upper.unwrap());
        assert_eq!(
            (lo.keyword(true), hi.keyword(false)),
            ("exclusiveMinimum", "maximum")
        );
        let e =
            NumberRules::read(&map(json!({"minimum": 2, "exclusiveMaximum": 2})), "#").unwrap_err();
        assert_eq!(e.keyword, "minimum");
        let e = NumberRules::read(&map(json!({"multipleOf": 0})), "#").unwrap_err();
        assert_eq!(e.keyword, "multipleOf");
        let e = NumberRules::read(&map(json!({"exclusiveMinimum": true})), "#").unwrap_err();
        assert!(e.message.contains("draft 4"));
    }

    #[test]
    fn array_forms_are_told_apart() {
        let m = map(json!({"items": [{"type": "string"}], "additionalItems": false}));
        let r = ArrayRules::read(&m, "#").unwrap();
        assert_eq!(
            (r.prefix.len(), r.prefix_key, r.rest_key),
            (1, "items", "additionalItems")
        );
        assert!(r.closed_tuple);
        let m = map(json!({"prefixItems": [true], "items": {"type": "null"}, "uniqueItems": true}));
        let r = ArrayRules::read(&m, "#").unwrap();
        assert_eq!((r.prefix_key, r.rest_key), ("prefixItems", "items"));
        assert!(r.unique_items && !r.closed_tuple && !r.contains);
    }

    #[test]
    fn object_keywords_keep_their_order() {
        let m = map(json!({
            "properties": {"b": true, "a": {"type": "string"}},
            "required": ["a"], "propertyNames": {}, "dependentRequired": {"a": ["b"]},
            "minProperties": 1
        }));
        let r = ObjectRules::read(&m, "#").unwrap();
        let names: Vec<&str> = r.properties.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(names, ["b", "a"]);
        assert_eq!(r.required, ["a"]);
        assert!(r.property_names.is_none() && r.additional.is_none());
        assert_eq!(r.dependencies, ["dependentRequired"]);
        let e = ObjectRules::read(&map(json!({"required": [1]})), "#/o").unwrap_err();
        assert_eq!(
            (e.keyword.as_str(), e.pointer.as_str()),
            ("required", "#/o")
        );
    }
}
