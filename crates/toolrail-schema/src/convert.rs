//! The converter proper: walks a schema and builds GBNF rules.
//!
//! Every schema node becomes an expression matching exactly the JSON texts valid against it
//! (in canonical form, see the module docs of [`super`]). `None` stands for "no value is valid"
//! (the `false` schema, contradictory keywords); it is dropped from alternatives and poisons
//! sequences.
//!
//! Order of work for an object schema: unsupported keywords are reported; `$ref` with siblings
//! and `allOf` are merged into one schema ([`super::merge`]); `anyOf`/`oneOf` become alternatives
//! (siblings distributed into each branch); `enum`/`const` become literals checked against their
//! siblings ([`super::validate`]); everything else is split by JSON type, each type's keywords
//! producing that type's grammar.
//!
//! This module is the walk; the phases it calls live beside it: `$ref` resolution and targets
//! ([`super::refs`]), the proofs on JSON values (`oneOf` disjointness, `not` rewritten, finite
//! value sets, unsatisfiable schemas: `proofs`), number grammars ([`super::numbers`]) and
//! llama.cpp's reading of a schema ([`super::llama`]).

use std::borrow::Cow;
use std::rc::Rc;

use rustc_hash::FxHashMap;
use serde_json::{Map, Value};

use super::error::{Report, SchemaError, Warning, invalid};
use super::expr::{Expr, RuleName, never};
use super::ir::{self, JsonType};
use super::keywords::is_ignored;
use super::numbers::{self, Decimal};
use super::options::{ANY_ORDER_MAX_MEMBERS, ConvertOptions, MemberOrder};
use super::pointer::JsonPointer;
use super::proofs::{
    exactly_one_required, first_overlap, literal_prefix, negate, no_object_matches, object_only,
    unsatisfiable,
};
use super::refs::{self, RefTarget, target_schema};
use super::regex::{self, MAX_REPEAT_TOTAL, pattern_to_gbnf};
use super::rules::RuleTable;
use super::strings::{encoded_char_set, json_encode_char};
use super::syntax::{self, KeyStyle};
use super::validate::{check, check_siblings, json_eq};
use super::{automaton, formats, llama, merge, rules};

/// A grammar expression, or None when nothing matches.
pub(crate) type Frag = Option<Expr>;

/// Where a node is: document, pointer, rule-name hint.
#[derive(Clone)]
struct Ctx {
    doc: usize,
    ptr: JsonPointer,
    hint: String,
    /// The node's expression becomes a rule body as is (ref targets, document roots).
    top: bool,
    /// How the node's object members are keyed: a call's keyword arguments (the root of an
    /// arguments document and its `anyOf`/`oneOf` branches) or a dict.
    keys: KeyStyle,
}

impl Ctx {
    fn child(&self, seg: &str, hint_seg: &str) -> Ctx {
        Ctx {
            doc: self.doc,
            ptr: self.ptr.with_key(seg),
            hint: if self.hint.is_empty() {
                hint_seg.to_string()
            } else {
                format!("{}-{}", self.hint, hint_seg)
            },
            top: false,
            keys: KeyStyle::DictKey,
        }
    }

    /// The node's JSON pointer from `#`, as errors and warnings name it.
    fn at(&self) -> String {
        self.ptr.fragment()
    }
}

/// The converter state shared by every schema added to one grammar.
pub(crate) struct Converter {
    pub(crate) opts: ConvertOptions,
    pub(crate) rules: RuleTable,
    pub(crate) warnings: Vec<Warning>,
    /// Keywords JSON Schema does not define, ignored (see [`crate::Conversion::notes`]).
    pub(crate) notes: Vec<Warning>,
    docs: Vec<Rc<Value>>,
    labels: Vec<String>,
    /// The rule of every `$ref` target met (and of each document's root).
    refs: FxHashMap<RefTarget, RuleName>,
    /// The targets being converted, with the nesting of arrays and objects when they were
    /// entered (a cycle back to one at the same nesting consumes no input).
    in_progress: FxHashMap<RefTarget, usize>,
    consumed: usize,
    /// The walk's nesting ([`MAX_SCHEMA_NESTING`]).
    depth: usize,
    /// The nesting of [`Converter::flatten_map`] calls ([`MAX_SCHEMA_NESTING`]).
    flattening: usize,
    root_referenced: bool,
    /// `patternProperties` patterns compiled once ([`regex::is_match`] compiles each time;
    /// an object tests every declared name against every pattern).
    compiled_patterns: FxHashMap<String, Result<::regex::Regex, String>>,
    /// The lenient readings taken, as edits of the documents ([`crate::read_leniently`]).
    pub(crate) readings: Vec<Reading>,
}

/// A lenient reading as an edit of a schema document: what a validator must check instead of
/// the schema as written, so that it agrees with the grammar.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Reading {
    /// The document (its index in the order added).
    pub(crate) doc: usize,
    /// The node read.
    pub(crate) at: JsonPointer,
    /// How it is read.
    pub(crate) edit: ReadingEdit,
}

/// How a [`Reading`] changes the node it names.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum ReadingEdit {
    /// The node is read as this schema.
    Replace(Map<String, Value>),
    /// The object admits this required name with any value.
    AdmitProperty(String),
}

/// The deepest nesting of JSON arrays and objects a schema document may have. Deeper documents
/// are refused before any other work: the walk, cloning, merging, comparing and writing
/// `const`/`enum` values recurse over the document, one call per level. serde_json refuses text
/// nested deeper than 128 levels (its recursion limit) before any of this, so no schema read
/// from text is refused here; a document built in code is held to the same depth, at which
/// every recursive walk over it fits a 2 MiB thread stack (a test thread's) even unoptimised.
pub const MAX_DOCUMENT_DEPTH: usize = 128;

/// How deep the converter's walk may nest: a schema inside a schema (`properties`, `items`,
/// `not`, ...), a `$ref` followed, a branch of `allOf`/`anyOf`/`oneOf` each count one level, and
/// so do the `$ref`s and `allOf`s followed to flatten (merge) a schema. A document of
/// [`MAX_DOCUMENT_DEPTH`] levels can nest its schemas less deep than that, but a chain of
/// `$ref`s is flat text of any length: past this nesting the conversion is an error naming the
/// place, not a stack overflow. An unoptimised build spends up to about 37 KiB of stack per
/// level (`patternProperties` nested in `patternProperties`; 12 KiB through `properties` or
/// `items`): this many levels, with as many flattening ones below them, fit a 2 MiB thread
/// stack with room to spare (measured: 56 levels of `patternProperties` do not).
pub const MAX_SCHEMA_NESTING: usize = 40;

/// Refuses a document nested deeper than [`MAX_DOCUMENT_DEPTH`], without recursion; the error
/// names the key at which the limit is crossed and its JSON pointer (from `#`). Callers that
/// walk a schema recursively before converting it (tool loading) call this first.
pub fn check_depth(schema: &Value) -> Result<(), SchemaError> {
    scan_document(schema).map(|_| ())
}

/// [`check_depth`], and whether the document has a `$ref` key anywhere (else nothing in it
/// refers to it, and the converter keeps no copy of it).
fn scan_document(schema: &Value) -> Result<bool, SchemaError> {
    let mut has_refs = false;
    /// A container's key in its parent.
    enum Key<'a> {
        Name(&'a str),
        Index(usize),
    }
    // the containers met: (parent, key in it); pointers are built only for the error
    let mut path: Vec<(Option<usize>, Key<'_>)> = Vec::new();
    // (container, depth, its entry in `path`, or None for the root)
    let mut stack: Vec<(&Value, usize, Option<usize>)> = vec![(schema, 1, None)];
    while let Some((v, depth, at)) = stack.pop() {
        if !matches!(v, Value::Array(_) | Value::Object(_)) {
            continue;
        }
        if depth > MAX_DOCUMENT_DEPTH {
            let key_text = |key: &Key<'_>| match key {
                Key::Name(k) => (*k).to_string(),
                Key::Index(i) => i.to_string(),
            };
            let mut segments = Vec::new();
            let mut cursor = at;
            while let Some(i) = cursor {
                segments.push(key_text(&path[i].1));
                cursor = path[i].0;
            }
            segments.reverse();
            let mut pointer = JsonPointer::root();
            for seg in &segments {
                pointer.push_key(seg);
            }
            let pointer = pointer.fragment();
            return Err(SchemaError {
                keyword: segments
                    .last()
                    .cloned()
                    .unwrap_or_else(|| "schema".to_string()),
                pointer,
                message: format!(
                    "the schema is nested deeper than {MAX_DOCUMENT_DEPTH} levels of arrays and objects"
                ),
            });
        }
        let parent = at;
        match v {
            Value::Array(a) => {
                for (i, x) in a.iter().enumerate() {
                    if matches!(x, Value::Array(_) | Value::Object(_)) {
                        path.push((parent, Key::Index(i)));
                        stack.push((x, depth + 1, Some(path.len() - 1)));
                    }
                }
            }
            Value::Object(m) => {
                has_refs |= m.contains_key("$ref");
                for (k, x) in m {
                    if matches!(x, Value::Array(_) | Value::Object(_)) {
                        path.push((parent, Key::Name(k)));
                        stack.push((x, depth + 1, Some(path.len() - 1)));
                    }
                }
            }
            _ => {}
        }
    }
    Ok(has_refs)
}

/// Whether the expression is a bare rule reference (needs no rule of its own).
/// `minLength`/`maxLength` as a condition, e.g. "minLength 3 and maxLength 8 rule out".
fn bounds_text(min: Option<u64>, max: Option<u64>) -> String {
    match (min.filter(|&m| m > 0), max) {
        (Some(lo), Some(hi)) => format!("minLength {lo} and maxLength {hi} rule out"),
        (Some(lo), None) => format!("minLength {lo} rules out"),
        (None, Some(hi)) => format!("maxLength {hi} rules out"),
        (None, None) => "nothing rules out".to_string(),
    }
}

/// The keywords a `format` is combined with and their values: `pattern "^a"`,
/// `maxLength 64`..., for the messages about that combination. For "no string matches", the
/// words before the list say what is missed.
fn combination_text(
    pattern: Option<&str>,
    min: Option<u64>,
    max: Option<u64>,
    sep: &str,
) -> String {
    let mut parts = Vec::new();
    if let Some(p) = pattern {
        parts.push(format!("pattern {p:?}"));
    }
    if let Some(lo) = min.filter(|&m| m > 0) {
        parts.push(format!("minLength {lo}"));
    }
    if let Some(hi) = max {
        parts.push(format!("maxLength {hi}"));
    }
    parts.join(sep)
}

/// A `type` with an `enum` none of whose values has that type: the clash in words
/// (`type "array" and an enum of strings clash`, `type "integer" and an enum of strings
/// clash`); `None` when the schema is not that.
fn type_enum_clash(schema: &Value) -> Option<String> {
    let map = schema.as_object()?;
    let types: Vec<&str> = match map.get("type")? {
        Value::String(t) => vec![t.as_str()],
        Value::Array(list) => list.iter().filter_map(Value::as_str).collect(),
        _ => return None,
    };
    let values = map.get("enum")?.as_array()?;
    let fits = |v: &Value| {
        let kind = json_kind(v);
        types
            .iter()
            .any(|&t| t == kind || (t == "number" && kind == "integer"))
    };
    if values.is_empty() || types.is_empty() || values.iter().any(fits) {
        return None;
    }
    let kinds: Vec<String> = value_kinds(values)
        .iter()
        .map(|k| format!("{k}s"))
        .collect();
    let types: Vec<String> = types.iter().map(|t| format!("{t:?}")).collect();
    Some(format!(
        "type {} and an enum of {} clash",
        types.join(" or "),
        kinds.join(" and ")
    ))
}

/// The kinds of `values` ([`json_kind`]), each once, sorted.
fn value_kinds(values: &[Value]) -> Vec<&'static str> {
    let mut kinds: Vec<&str> = values.iter().map(json_kind).collect();
    kinds.sort_unstable();
    kinds.dedup();
    kinds
}

/// The JSON Schema type name of a value's kind (`integer` only for integral numbers).
fn json_kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// Why a schema plainly allows no value (`false`, an empty `enum`), for the messages of the
/// arrays whose items it describes; `None` when it is not plainly empty.
fn no_value_reason(schema: &Value) -> Option<&'static str> {
    match schema {
        Value::Bool(false) => Some("it is false"),
        Value::Object(m) => match m.get("enum") {
            Some(Value::Array(a)) if a.is_empty() => Some("enum is empty"),
            _ => None,
        },
        _ => None,
    }
}

fn is_rule(e: &Expr) -> bool {
    matches!(e, Expr::Rule(_))
}

/// The alternation of `parts`, duplicates dropped (first occurrence kept; compared as typed
/// values in a hash set, so that an enum of 100,000 values stays near-linear).
fn distinct_alternatives(parts: Vec<Expr>) -> Option<Expr> {
    let mut seen: rustc_hash::FxHashSet<Expr> = rustc_hash::FxHashSet::default();
    Expr::alt(parts.into_iter().filter(|p| seen.insert(p.clone())))
}

impl Converter {
    /// A converter with no schemas yet.
    pub(crate) fn new(opts: ConvertOptions) -> Self {
        let mut rules = RuleTable::new(opts.whitespace);
        rules.capped_digits = opts.llama_compat;
        Self {
            rules,
            opts,
            warnings: Vec::new(),
            notes: Vec::new(),
            docs: Vec::new(),
            labels: Vec::new(),
            refs: FxHashMap::default(),
            in_progress: FxHashMap::default(),
            consumed: 0,
            depth: 0,
            flattening: 0,
            root_referenced: false,
            compiled_patterns: FxHashMap::default(),
            readings: Vec::new(),
        }
    }

    /// Where unsupported and ignored keywords are reported.
    fn report(&mut self) -> Report<'_> {
        Report {
            lenient: self.opts.lenient,
            warnings: &mut self.warnings,
        }
    }

    /// An unsupported keyword: an error, or in lenient mode a warning (the constraint dropped).
    fn unsupported(
        &mut self,
        keyword: &str,
        cx: &Ctx,
        message: impl Into<String>,
    ) -> Result<(), SchemaError> {
        self.report().unsupported(keyword, &cx.at(), message)
    }

    /// A keyword llama.cpp ignores ([`ConvertOptions::llama_compat`]), or a constraint no
    /// grammar can hold (a keyword argument written twice): always a warning (once).
    fn ignored(&mut self, keyword: &str, cx: &Ctx, message: impl Into<String>) {
        self.report().ignored(keyword, &cx.at(), message);
    }

    /// llama_compat: the schema llama.cpp reads of `map` ([`llama::reading`]), with a warning
    /// for each keyword it ignores; `oneOf` branches not provably disjoint are warned about,
    /// since llama.cpp reads `oneOf` as `anyOf`.
    fn llama_view(&mut self, map: &Map<String, Value>, cx: &Ctx) -> Result<Value, SchemaError> {
        if let Some(list) = llama::one_of_branches(map) {
            let branches: Vec<(Cow<'_, Value>, Ctx)> = list
                .iter()
                .enumerate()
                .map(|(i, b)| {
                    let bcx = cx.child("oneOf", "").child(&i.to_string(), "");
                    (Cow::Borrowed(b), bcx)
                })
                .collect();
            if let Some((i, j)) = self.overlapping(&branches) {
                self.ignored("oneOf", cx, llama::one_of_overlap(i, j));
            }
        }
        let root = Rc::clone(&self.docs[cx.doc]);
        llama::reading(map, &cx.ptr, &root, cx.doc, &mut self.report())
    }

    /// The error for `keyword` at the node.
    fn invalid(keyword: &str, cx: &Ctx, message: impl Into<String>) -> SchemaError {
        invalid(keyword, &cx.at(), message)
    }

    /// A size keyword's value (`minLength`, `maxItems`, ...) checked against
    /// [`MAX_REPEAT_TOTAL`]: above it, an error naming the keyword and the limit; in lenient
    /// mode a warning and `None`, the bound dropped (callers read a dropped minimum as 0 and a
    /// dropped maximum as none, so the grammar only widens).
    fn size_bound(
        &mut self,
        keyword: &str,
        cx: &Ctx,
        value: Option<u64>,
    ) -> Result<Option<u64>, SchemaError> {
        match value {
            Some(v) if v > MAX_REPEAT_TOTAL => {
                self.unsupported(
                    keyword,
                    cx,
                    format!(
                        "{v} is above the limit of {MAX_REPEAT_TOTAL} (llama.cpp expands every \
                         repetition into copies, so the grammar would be unusable)"
                    ),
                )?;
                Ok(None)
            }
            v => Ok(v),
        }
    }

    /// Adds a document; returns a rule name (when `want_rule`, or when the root is referenced
    /// by `#`), or else the root expression itself. `keys`: how the root object's members are
    /// keyed ([`KeyStyle::Kwarg`]: a call's keyword arguments; a `$ref` to `#` inside is then
    /// the root as a dict, a rule of its own).
    pub(crate) fn add_document(
        &mut self,
        label: &str,
        hint: &str,
        schema: &Value,
        want_rule: bool,
        keys: KeyStyle,
    ) -> Result<Expr, SchemaError> {
        let has_refs = scan_document(schema)?;
        let doc = self.docs.len();
        // a copy is kept only for `$ref`s to resolve against (the one use of `docs`); without
        // any, the caller's document is walked as it is
        self.docs.push(Rc::new(if has_refs {
            schema.clone()
        } else {
            Value::Null
        }));
        self.labels.push(label.to_string());
        let name = self.rules.reserve(
            if hint.is_empty() { "root-schema" } else { hint },
            Some(format!("{label}#")),
        );
        let cx = Ctx {
            doc,
            ptr: JsonPointer::root(),
            hint: if hint.is_empty() {
                String::new()
            } else {
                name.to_string()
            },
            top: true,
            keys,
        };
        let stored = Rc::clone(&self.docs[doc]);
        let root = if has_refs { &*stored } else { schema };
        // the root is reachable as "#": register it so that `{"$ref": "#"}` recursion works
        let key = RefTarget {
            doc,
            pointer: JsonPointer::root().fragment(),
        };
        let root_is_value = keys == KeyStyle::DictKey;
        if root_is_value {
            self.refs.insert(key.clone(), name.clone());
            self.in_progress.insert(key.clone(), self.consumed);
        }
        self.root_referenced = false;
        let expr = self.visit(root, &cx, false);
        if root_is_value {
            self.in_progress.remove(&key);
        }
        let Some(expr) = expr? else {
            let mut e = unsatisfiable(root, &cx.at());
            if !root_is_value {
                e.message.push_str(
                    " (a call's arguments are keyword arguments: only objects can be written)",
                );
            }
            return Err(e);
        };
        // no rule for nothing (the keyword arguments of a call without parameters)
        let expr = if self.root_referenced || (want_rule && !is_rule(&expr) && !expr.is_empty()) {
            self.rules.fill(&name, expr);
            Expr::Rule(name)
        } else {
            if root_is_value {
                self.refs.remove(&key);
            }
            self.rules.unreserve(&name);
            expr
        };
        // a schema whose every value holds another without end has no finite instance: its
        // grammar could never finish (the model could never stop)
        if let Some(pointer) = self.rules.endless_location(&expr) {
            return Err(SchemaError {
                keyword: "$ref".to_owned(),
                pointer,
                message: "no finite JSON value satisfies the schema: every value here must \
                          hold another one like it (a required property, or minItems, that \
                          refers back through $ref), without end, so a grammar for it could \
                          never finish"
                    .to_owned(),
            });
        }
        Ok(expr)
    }

    fn comment(&self, cx: &Ctx) -> Option<String> {
        Some(format!(
            "{}{}",
            self.labels.get(cx.doc).map(String::as_str).unwrap_or(""),
            cx.at()
        ))
    }

    /// Wraps a non-trivial expression into a named rule (with the schema pointer as comment).
    fn name(&mut self, cx: &Ctx, expr: Frag, force: bool) -> Frag {
        let e = expr?;
        let short = || {
            e.to_gbnf_item_within(40)
                .is_some_and(|text| !text.contains(" | "))
        };
        if cx.top || cx.hint.is_empty() || is_rule(&e) || (!force && short()) {
            return Some(e);
        }
        let comment = self.comment(cx);
        Some(Expr::Rule(self.rules.add(&cx.hint, e, comment)))
    }

    fn visit(&mut self, schema: &Value, cx: &Ctx, named: bool) -> Result<Frag, SchemaError> {
        self.depth += 1;
        if self.depth > MAX_SCHEMA_NESTING {
            self.depth -= 1;
            return Err(Self::invalid(
                "schema",
                cx,
                format!(
                    "schemas are nested more than {MAX_SCHEMA_NESTING} deep here (a subschema, a $ref followed and an allOf/anyOf/oneOf branch each count one)"
                ),
            ));
        }
        let r = match schema {
            // any keyword arguments
            Value::Bool(true) if cx.keys == KeyStyle::Kwarg => self.visit_map(&Map::new(), cx),
            Value::Bool(true) => Ok(Some(self.rules.primitive_rule("value"))),
            Value::Bool(false) => Ok(None),
            Value::Object(map) => self
                .visit_map(map, cx)
                .map(|e| if named { self.name(cx, e, false) } else { e }),
            _ => Err(Self::invalid(
                "schema",
                cx,
                "a schema must be an object or a boolean",
            )),
        };
        self.depth -= 1;
        r
    }

    fn child(&mut self, schema: &Value, cx: &Ctx) -> Result<Frag, SchemaError> {
        self.visit(schema, cx, true)
    }

    /// Follows a local `$ref` ([`refs::resolve`]); returns its target and the document's root,
    /// from which [`target_schema`] reads the target without copying it.
    fn resolve(&self, cx: &Ctx, reference: &str) -> Result<(RefTarget, Rc<Value>), SchemaError> {
        let root = Rc::clone(&self.docs[cx.doc]);
        let target =
            refs::resolve(&root, cx.doc, reference).map_err(|m| Self::invalid("$ref", cx, m))?;
        Ok((target, root))
    }

    /// A `$ref` in place: the target's rule (named after the target, converted once).
    fn visit_ref(&mut self, cx: &Ctx, reference: &str) -> Result<Frag, SchemaError> {
        let (key, root) = self.resolve(cx, reference)?;
        if let Some(&at) = self.in_progress.get(&key)
            && at == self.consumed
        {
            return Err(Self::invalid(
                "$ref",
                cx,
                "reference cycle that consumes no input (left recursion)",
            ));
        }
        if let Some(name) = self.refs.get(&key) {
            if key.is_root() {
                self.root_referenced = true;
            }
            return Ok(Some(Expr::Rule(name.clone())));
        }
        let hint = key.hint();
        let tcx = Ctx {
            doc: key.doc,
            ptr: key.json_pointer(),
            hint: hint.clone(),
            top: true,
            keys: KeyStyle::DictKey,
        };
        let name = self.rules.reserve(&hint, self.comment(&tcx));
        self.refs.insert(key.clone(), name.clone());
        self.in_progress.insert(key.clone(), self.consumed);
        let tcx = Ctx {
            hint: name.to_string(),
            ..tcx
        };
        let r = self.visit(target_schema(&root, &key), &tcx, false);
        self.in_progress.remove(&key);
        let expr = r?;
        self.rules.fill(&name, expr.unwrap_or_else(never));
        Ok(Some(Expr::Rule(name)))
    }

    /// Flattens a schema: follows a top-level `$ref` (merging siblings) and merges `allOf`.
    fn flatten(&mut self, schema: &Value, cx: &Ctx, guard: usize) -> Result<Value, SchemaError> {
        match schema {
            Value::Object(map) => self.flatten_map(Cow::Borrowed(map), cx, guard),
            other => Ok(other.clone()),
        }
    }

    /// [`Self::flatten`] of an object schema, taken by value when the caller has a copy (the
    /// map holds the whole subtree below it: it is copied at most once).
    fn flatten_map(
        &mut self,
        map: Cow<'_, Map<String, Value>>,
        cx: &Ctx,
        guard: usize,
    ) -> Result<Value, SchemaError> {
        // Flattening recurses through `$ref`s and `allOf`s, and through llama_compat's view of
        // `oneOf` (which flattens each branch afresh): bounded over all of them at once.
        if self.flattening >= MAX_SCHEMA_NESTING {
            return Err(Self::invalid(
                "$ref",
                cx,
                format!(
                    "references and allOf are nested more than {MAX_SCHEMA_NESTING} deep here to merge this schema"
                ),
            ));
        }
        self.flattening += 1;
        let flat = self.flatten_map_nested(map, cx, guard);
        self.flattening -= 1;
        flat
    }

    /// [`Self::flatten_map`] inside its nesting bound.
    fn flatten_map_nested(
        &mut self,
        map: Cow<'_, Map<String, Value>>,
        cx: &Ctx,
        guard: usize,
    ) -> Result<Value, SchemaError> {
        if guard > 32 {
            return Err(Self::invalid(
                "$ref",
                cx,
                "recursive reference inside allOf cannot be merged",
            ));
        }
        let map = if self.opts.llama_compat {
            match self.llama_view(&map, cx)? {
                Value::Object(m) => Cow::Owned(m),
                other => return Ok(other),
            }
        } else {
            map
        };
        let dropped = match self.drop_unsupported(&map, cx)? {
            Cow::Owned(m) => Some(m),
            Cow::Borrowed(_) => None,
        };
        let mut rest = dropped.unwrap_or_else(|| map.into_owned());
        let mut acc = Value::Bool(true);
        if let Some(r) = rest.remove("$ref") {
            let r = r
                .as_str()
                .ok_or_else(|| Self::invalid("$ref", cx, "must be a string"))?;
            let (target, root) = self.resolve(cx, r)?;
            acc = self.flatten(target_schema(&root, &target), cx, guard + 1)?;
        }
        if let Some(all) = rest.remove("allOf") {
            let list = all
                .as_array()
                .ok_or_else(|| Self::invalid("allOf", cx, "must be an array"))?;
            for (i, s) in list.iter().enumerate() {
                let scx = cx.child("allOf", "").child(&i.to_string(), "");
                let f = self.flatten(
                    s,
                    &Ctx {
                        hint: cx.hint.clone(),
                        ..scx
                    },
                    guard + 1,
                )?;
                acc = self.merge_owned(acc, f, cx)?;
            }
        }
        self.merge_owned(acc, Value::Object(rest), cx)
    }

    /// [`Self::merge`] of values the caller owns: a `true` side returns the other unchanged,
    /// without a copy.
    fn merge_owned(&mut self, a: Value, b: Value, cx: &Ctx) -> Result<Value, SchemaError> {
        match (a, b) {
            (Value::Bool(true), x) | (x, Value::Bool(true)) => Ok(x),
            (a, b) => self.merge(&a, &b, cx),
        }
    }

    /// [`regex::is_match`], with each pattern compiled once per converter.
    fn pattern_matches(&mut self, pattern: &str, text: &str) -> Result<bool, String> {
        if !self.compiled_patterns.contains_key(pattern) {
            let compiled = regex::compile(pattern);
            self.compiled_patterns.insert(pattern.to_string(), compiled);
        }
        match self.compiled_patterns.get(pattern) {
            Some(Ok(re)) => Ok(re.is_match(text)),
            Some(Err(e)) => Err(e.clone()),
            None => regex::is_match(pattern, text),
        }
    }

    fn merge(&mut self, a: &Value, b: &Value, cx: &Ctx) -> Result<Value, SchemaError> {
        match merge::merge(a, b, &Value::Bool(true)) {
            Ok(v) => Ok(v),
            Err((k, m)) => Err(Self::invalid(&k, cx, m)),
        }
    }

    /// Reports unsupported keywords that apply to every type; in lenient mode returns the map
    /// without them.
    /// (A copy only when something is dropped: the map holds the whole subtree below it.)
    fn drop_unsupported<'m>(
        &mut self,
        map: &'m Map<String, Value>,
        cx: &Ctx,
    ) -> Result<Cow<'m, Map<String, Value>>, SchemaError> {
        let mut out = Cow::Borrowed(map);
        for found in ir::unsupported_keywords(map, cx.ptr.is_root()) {
            self.unsupported(found.keyword, cx, found.message)?;
            if found.dropped {
                out.to_mut().remove(found.keyword);
            }
        }
        Ok(out)
    }

    /// `dependentRequired`, `dependentSchemas` and `dependencies` as `allOf` members, one per
    /// trigger name: `anyOf` [the name absent, the name present with what it needs]. The two
    /// alternatives are disjoint for objects, so the grammar stays exact. None when `map` has
    /// none; unsupported beyond [`MAX_DEPENDENCIES`] trigger names (each one doubles the
    /// alternatives).
    fn dependencies_as_alternatives(
        &mut self,
        map: &Map<String, Value>,
        cx: &Ctx,
    ) -> Result<Option<Map<String, Value>>, SchemaError> {
        let Some(dependencies) = ir::read_dependencies(map, &cx.at())? else {
            return Ok(None);
        };
        let required: Vec<&str> = map
            .get("required")
            .and_then(|r| r.as_array())
            .map(|r| r.iter().filter_map(|x| x.as_str()).collect())
            .unwrap_or_default();
        let mut rest = map.clone();
        for keyword in ir::DEPENDENCY_KEYWORDS {
            rest.remove(keyword);
        }
        let mut conditions = Vec::new();
        for ir::Dependency { name, need, .. } in dependencies {
            let present = match need {
                ir::DependencyNeed::Names(names) => {
                    let mut all = vec![Value::String(name.clone())];
                    all.extend(names.iter().cloned());
                    serde_json::json!({ "required": all })
                }
                ir::DependencyNeed::Schema(need) => {
                    serde_json::json!({ "allOf": [{ "required": [name] }, need] })
                }
            };
            let condition = if required.contains(&name.as_str()) {
                present
            } else {
                let mut absent = Map::new();
                absent.insert(name.clone(), Value::Bool(false));
                serde_json::json!({ "anyOf": [{ "properties": absent }, present] })
            };
            conditions.push(condition);
        }
        if conditions.len() > MAX_DEPENDENCIES {
            self.unsupported(
                "dependencies",
                cx,
                format!(
                    "{} names with dependencies (at most {MAX_DEPENDENCIES}: each doubles the grammar)",
                    conditions.len()
                ),
            )?;
            return Ok(Some(rest));
        }
        if conditions.is_empty() {
            return Ok(Some(rest));
        }
        let mut all = match rest.remove("allOf") {
            Some(Value::Array(a)) => a,
            Some(_) => return Err(Self::invalid("allOf", cx, "must be an array")),
            None => Vec::new(),
        };
        all.extend(conditions);
        rest.insert("allOf".into(), Value::Array(all));
        Ok(Some(rest))
    }

    /// Notes the keywords of `map` that JSON Schema does not define (they are ignored).
    fn note_unknown(&mut self, map: &Map<String, Value>, cx: &Ctx) {
        for k in ir::unknown_keywords(map) {
            self.note(k, cx, "not a JSON Schema keyword: ignored");
        }
    }

    /// Records a note (once): something in the schema that is ignored because it constrains
    /// nothing.
    fn note(&mut self, keyword: &str, cx: &Ctx, message: impl Into<String>) {
        let note = Warning {
            keyword: keyword.to_string(),
            pointer: cx.at(),
            message: message.into(),
            reading: false,
        };
        if !self.notes.contains(&note) {
            self.notes.push(note);
        }
    }

    fn visit_map(&mut self, map: &Map<String, Value>, cx: &Ctx) -> Result<Frag, SchemaError> {
        if self.opts.llama_compat {
            let view = self.llama_view(map, cx)?;
            return match &view {
                Value::Object(m) => self.visit_exact(m, cx),
                other => self.visit(other, cx, false),
            };
        }
        self.visit_exact(map, cx)
    }

    /// [`Self::visit_map`] after the llama_compat view, if any.
    fn visit_exact(&mut self, map: &Map<String, Value>, cx: &Ctx) -> Result<Frag, SchemaError> {
        if let Some(n) = map.get("not")
            && let Some(positive) = negate(n)
        {
            let mut rest = map.clone();
            rest.remove("not");
            let both = serde_json::json!({ "allOf": [Value::Object(rest), positive] });
            return self.visit(&both, cx, false);
        }
        self.note_unknown(map, cx);
        if !self.opts.llama_compat
            && let Some(rewritten) = self.dependencies_as_alternatives(map, cx)?
        {
            return self.visit_exact(&rewritten, cx);
        }
        let map = self.drop_unsupported(map, cx)?;
        let (alternation, list) = match ir::Shape::read(&map, &cx.at())? {
            // keyword arguments are not a value another place may refer to: merged in place
            ir::Shape::Reference(r) if cx.keys == KeyStyle::DictKey => {
                return self.visit_ref(cx, r);
            }
            ir::Shape::Reference(_) | ir::Shape::Merged => {
                let flat = self.flatten_map(map, cx, 0)?;
                return match &flat {
                    Value::Object(m) => self.visit_map(m, cx),
                    other => self.visit(other, cx, false),
                };
            }
            ir::Shape::Typed => return self.visit_typed(&map, cx),
            ir::Shape::Alternatives {
                alternation,
                branches,
            } => (alternation, branches),
        };
        self.visit_alternatives(&map, cx, alternation, list)
    }

    /// [`Self::visit_exact`] of an `anyOf`/`oneOf` node: one alternative per branch. A function
    /// of its own so that its frame is on the stack only where a schema has branches.
    fn visit_alternatives(
        &mut self,
        map: &Map<String, Value>,
        cx: &Ctx,
        alternation: ir::Alternation,
        list: &[Value],
    ) -> Result<Frag, SchemaError> {
        let key = alternation.keyword();
        let one_of = alternation == ir::Alternation::OneOf;
        if one_of
            && !self.opts.llama_compat
            && let Some(alternatives) = exactly_one_required(list)
        {
            let mut rewritten = map.clone();
            rewritten.remove("oneOf");
            rewritten.insert("anyOf".into(), Value::Array(alternatives));
            return self.visit_exact(&rewritten, cx);
        }
        // the other keywords, distributed into every branch (copied only when there are any)
        let has_rest = map.keys().any(|k| k != key && !is_ignored(k));
        let rest = has_rest.then(|| {
            let mut rest = map.clone();
            rest.remove(key);
            rest
        });
        let mut branches = Vec::new();
        for (i, b) in list.iter().enumerate() {
            let bcx = cx
                .child(key, "")
                .child(&i.to_string(), &format!("{}", i + 1));
            let bcx = Ctx {
                hint: if cx.hint.is_empty() {
                    format!("alt-{}", i + 1)
                } else {
                    format!("{}-{}", cx.hint, i + 1)
                },
                keys: cx.keys,
                ..bcx
            };
            let b = match &rest {
                Some(rest) => {
                    let fb = self.flatten(b, &bcx, 0)?;
                    Cow::Owned(self.merge_owned(Value::Object(rest.clone()), fb, &bcx)?)
                }
                None => Cow::Borrowed(b),
            };
            branches.push((b, bcx));
        }
        // llama_compat: oneOf is anyOf, as llama.cpp reads it (warned in llama_view)
        if one_of && !self.opts.llama_compat {
            // `false` never matches; a branch matching everything twice leaves nothing
            branches.retain(|(b, _)| **b != Value::Bool(false));
            let trivially_true = |b: &Value| {
                b == &Value::Bool(true)
                    || b.as_object()
                        .is_some_and(|o| o.keys().all(|k| is_ignored(k)))
            };
            if branches.iter().filter(|(b, _)| trivially_true(b)).count() >= 2 {
                return Ok(None);
            }
            // oneOf [B, {}]: exactly one matches ⇔ B does not
            if let [(x, xcx), (y, ycx)] = branches.as_slice() {
                let (other, ocx) = if trivially_true(x) {
                    (y, ycx)
                } else {
                    (x, xcx)
                };
                if (trivially_true(x) || trivially_true(y))
                    && let Some(neg) = negate(other)
                {
                    return self.child(&neg, ocx);
                }
            }
            self.check_disjoint(&branches, cx)?;
        }
        let mut parts = Vec::new();
        let mut left_out = None;
        for (b, bcx) in &branches {
            match self.child(b, bcx) {
                Ok(Some(e)) => parts.push(e),
                Ok(None) => {}
                // an object-only branch that no object satisfies (a required name it
                // forbids) matches nothing: the other branches stand. Only the branch itself:
                // the same error from a schema inside it (an `additionalProperties` no object
                // satisfies) says nothing of whether the branch matches
                Err(e) if no_object_matches(&e) && e.pointer == bcx.at() && object_only(b) => {
                    left_out = Some(e)
                }
                Err(e) => return Err(e),
            }
        }
        if let Some(e) = left_out
            && parts.is_empty()
        {
            return Err(e);
        }
        Ok(distinct_alternatives(parts))
    }

    fn check_disjoint(
        &mut self,
        branches: &[(Cow<'_, Value>, Ctx)],
        cx: &Ctx,
    ) -> Result<(), SchemaError> {
        match self.overlapping(branches) {
            Some((i, j)) => self.unsupported(
                "oneOf",
                cx,
                format!("branches {} and {} may overlap (oneOf is only expressible when branches are provably disjoint)", i, j),
            ),
            None => Ok(()),
        }
    }

    /// The first two branches not provably disjoint, if any ([`first_overlap`] of the
    /// flattened branches).
    fn overlapping(&mut self, branches: &[(Cow<'_, Value>, Ctx)]) -> Option<(usize, usize)> {
        let mut flat = Vec::new();
        for (b, bcx) in branches {
            flat.push(self.flatten(b, bcx, 0).ok());
        }
        first_overlap(&flat)
    }

    /// A node without combinators or references: its `enum`/`const` values, or else one
    /// alternative per type it admits, each from that type's keyword group ([`ir`]).
    fn visit_typed(&mut self, map: &Map<String, Value>, cx: &Ctx) -> Result<Frag, SchemaError> {
        let types = ir::TypeSet::read(map, &cx.at())?;
        if cx.keys == KeyStyle::Kwarg {
            // keyword arguments: an object written without braces, never a literal; an
            // `anyOf` branch admitting no object matches no call
            if !types.contains(JsonType::Object) {
                return Ok(None);
            }
            for k in ["enum", "const"] {
                if map.contains_key(k) {
                    return Err(Self::invalid(
                        k,
                        cx,
                        "cannot be written as keyword arguments (only properties can)",
                    ));
                }
            }
            return self.object(&ir::ObjectRules::read(map, &cx.at())?, cx);
        }
        if let Some(items_enum) = self.enum_for_items(map, types, cx)? {
            return self.visit_typed(&items_enum, cx);
        }
        if let Some(typed) = self.enum_as_typed(map, types, cx)? {
            return self.visit_typed(&typed, cx);
        }
        if let Some(values) = ir::read_values(map, &cx.at())? {
            return self.typed_values(map, values, cx);
        }
        let has = |t: JsonType| types.contains(t);
        let mut parts = Vec::new();
        let mut plain = 0;
        if has(JsonType::Null) {
            parts.push(self.rules.primitive_rule("null"));
            plain += 1;
        }
        if has(JsonType::Boolean) {
            parts.push(self.rules.primitive_rule("boolean"));
            plain += 1;
        }
        if has(JsonType::Number) || has(JsonType::Integer) {
            let rules = ir::NumberRules::read(map, &cx.at())?;
            if has(JsonType::Number) {
                if let Some(e) = self.number(&rules, cx, false)? {
                    plain += usize::from(self.rules.is_primitive(&e, "number"));
                    parts.push(e);
                }
            } else if let Some(e) = self.number(&rules, cx, true)? {
                parts.push(e);
            }
        }
        if has(JsonType::String)
            && let Some(e) = self.string(&ir::StringRules::read(map, &cx.at())?, cx)?
        {
            plain += usize::from(self.rules.is_primitive(&e, "string"));
            parts.push(e);
        }
        if has(JsonType::Array)
            && let Some(e) = self.array(&ir::ArrayRules::read(map, &cx.at())?, cx)?
        {
            plain += usize::from(self.rules.is_primitive(&e, "array"));
            parts.push(e);
        }
        if has(JsonType::Object)
            && let Some(e) = self.object(&ir::ObjectRules::read(map, &cx.at())?, cx)?
        {
            plain += usize::from(self.rules.is_primitive(&e, "object"));
            parts.push(e);
        }
        if plain == 6 {
            return Ok(Some(self.rules.primitive_rule("value")));
        }
        Ok(distinct_alternatives(parts))
    }

    /// [`Self::visit_typed`] of a node with `enum`/`const` `values`: one literal per value
    /// its sibling keywords admit. A function of its own so that its frame is on the stack only
    /// for such a node.
    fn typed_values(
        &mut self,
        map: &Map<String, Value>,
        values: Vec<&Value>,
        cx: &Ctx,
    ) -> Result<Frag, SchemaError> {
        let mut kept = Vec::new();
        for v in values {
            match check_siblings(v, map, &["enum", "const"]) {
                Some(true) => kept.push(v),
                Some(false) => {}
                None => {
                    self.unsupported(
                        "enum",
                        cx,
                        "cannot check enum/const values against their sibling keywords",
                    )?;
                    kept.push(v);
                }
            }
        }
        // integers share one optional zero fraction: ( "15" | "30" ) ( "." "0"+ )?
        let mut parts = Vec::new();
        let mut ints = Vec::new();
        for v in kept {
            match v.as_number().and_then(|n| Decimal::parse(&n.to_string())) {
                Some(d) if d.is_integer() && d.int != "0" => {
                    let sign = if d.neg { "-" } else { "" };
                    ints.push(Expr::literal(format!("{sign}{}", d.int)));
                }
                _ => parts.push(self.literal(v, cx)),
            }
        }
        if let Some(group) = distinct_alternatives(ints) {
            parts.push(Expr::seq([group, numbers::zero_frac()]));
        }
        Ok(distinct_alternatives(parts))
    }

    /// `"type": "array"` with an `enum` (or `const`) of values that are not arrays (BFCL writes
    /// the items' values on the array): no value is valid as written. Strict, an error saying
    /// so (by the caller, when no value is left); lenient, the node read with the values moved
    /// to its items (typed by the values), with a warning. `None`: not that case, or strict.
    fn enum_for_items(
        &mut self,
        map: &Map<String, Value>,
        types: ir::TypeSet,
        cx: &Ctx,
    ) -> Result<Option<Map<String, Value>>, SchemaError> {
        // strict: the node admits no value (an optional property is left out, else the
        // caller names the clashing `type` and `enum`)
        if !self.opts.lenient
            || types != ir::TypeSet::only(JsonType::Array)
            || map.contains_key("const")
        {
            return Ok(None);
        }
        let Some(Value::Array(values)) = map.get("enum") else {
            return Ok(None);
        };
        if values.is_empty() || values.iter().any(Value::is_array) {
            return Ok(None);
        }
        let kinds = value_kinds(values);
        let item_type = match kinds.as_slice() {
            [one] => Some(*one),
            _ => None,
        };
        let mut item = Map::new();
        if let Some(t) = item_type {
            item.insert("type".into(), Value::String(t.into()));
        }
        item.insert("enum".into(), Value::Array(values.clone()));
        let items = match map.get("items") {
            None | Some(Value::Bool(true)) => Value::Object(item),
            Some(Value::Object(o)) if o.is_empty() => Value::Object(item),
            Some(other) => serde_json::json!({"allOf": [other, Value::Object(item)]}),
        };
        let listed = kinds
            .iter()
            .map(|k| format!("{k}s"))
            .collect::<Vec<_>>()
            .join(" and ");
        let why = format!(
            "type is \"array\" but enum lists only {listed}: the keywords clash, no value is valid"
        );
        let reading = format!(
            "the enum of the items: items at {} is {}",
            cx.child("items", "").at().trim_start_matches('#'),
            items
        );
        self.report().reading("enum", &cx.at(), &why, &reading)?;
        let mut out = map.clone();
        out.remove("enum");
        out.insert("items".into(), items);
        self.read_as(cx, ReadingEdit::Replace(out.clone()));
        Ok(Some(out))
    }

    /// `"type": "integer"` (or `number`, `boolean`) with an `enum` of strings that each spell
    /// a value of that type (`["1", "2"]`, as BFCL's live tools write it): no value is valid
    /// as written. Strict, an error naming the clash (by the caller, when no value is left);
    /// lenient, the node read with the values as the type says, with a warning. `None`: not
    /// that case, or strict.
    fn enum_as_typed(
        &mut self,
        map: &Map<String, Value>,
        types: ir::TypeSet,
        cx: &Ctx,
    ) -> Result<Option<Map<String, Value>>, SchemaError> {
        let target = [JsonType::Integer, JsonType::Number, JsonType::Boolean]
            .into_iter()
            .find(|&t| types == ir::TypeSet::only(t));
        let (Some(target), true, Some(Value::Array(values))) =
            (target, self.opts.lenient, map.get("enum"))
        else {
            return Ok(None);
        };
        let read: Option<Vec<Value>> = values
            .iter()
            .map(|v| {
                let text = v.as_str()?.trim();
                let parsed: Value = serde_json::from_str(text).ok()?;
                let fits = match target {
                    JsonType::Integer => parsed.is_i64() || parsed.is_u64(),
                    JsonType::Number => parsed.is_number(),
                    _ => parsed.is_boolean(),
                };
                fits.then_some(parsed)
            })
            .collect();
        let Some(read) = read.filter(|r| !r.is_empty()) else {
            return Ok(None);
        };
        let name = target.name();
        let why = format!(
            "type is {name:?} but enum lists only strings: the keywords clash, no value is valid"
        );
        let reading = format!(
            "the enum's strings as {name}s: {}",
            Value::Array(read.clone())
        );
        self.report().reading("enum", &cx.at(), &why, &reading)?;
        let mut out = map.clone();
        out.insert("enum".into(), Value::Array(read));
        self.read_as(cx, ReadingEdit::Replace(out.clone()));
        Ok(Some(out))
    }

    /// Records a lenient reading of the node at `cx` (once: a `$ref` target is met again).
    fn read_as(&mut self, cx: &Ctx, edit: ReadingEdit) {
        let reading = Reading {
            doc: cx.doc,
            at: cx.ptr.clone(),
            edit,
        };
        if !self.readings.contains(&reading) {
            self.readings.push(reading);
        }
    }

    /// The grammar of one JSON value (enum/const member): structural, with optional space.
    /// Exactly the JSON texts of `v` (objects: members in any order when small enough, see
    /// [`Self::any_order`]).
    ///
    /// Recursive over the value, one call per level: at most [`MAX_DOCUMENT_DEPTH`].
    fn literal(&mut self, v: &Value, cx: &Ctx) -> Expr {
        match v {
            Value::Null => Expr::literal(self.rules.syntax.null()),
            Value::Bool(b) => Expr::literal(self.rules.syntax.boolean(*b)),
            Value::Number(n) => match Decimal::parse(&n.to_string()) {
                Some(d) => {
                    let sign = if d.neg {
                        Expr::literal("-")
                    } else {
                        Expr::Empty
                    };
                    if d.frac.is_empty() {
                        if d.int == "0" {
                            Expr::seq([
                                Expr::repeat(Expr::literal("-"), 0, Some(1)),
                                Expr::literal("0"),
                                numbers::zero_frac(),
                            ])
                        } else {
                            Expr::seq([sign, Expr::literal(d.int), numbers::zero_frac()])
                        }
                    } else {
                        Expr::seq([
                            sign,
                            Expr::literal(format!("{}.{}", d.int, d.frac)),
                            Expr::repeat(Expr::literal("0"), 0, None),
                        ])
                    }
                }
                None => Expr::literal(n.to_string()),
            },
            Value::String(s) => {
                let mut enc = String::from("\"");
                for c in s.chars() {
                    json_encode_char(c, &mut enc);
                }
                enc.push('"');
                Expr::literal(enc)
            }
            Value::Array(a) => {
                let sp = self.rules.primitive_rule("space");
                let mut items = Vec::with_capacity(a.len() * 3);
                for (i, x) in a.iter().enumerate() {
                    if i > 0 {
                        items.extend([Expr::literal(","), sp.clone()]);
                    }
                    items.push(self.literal(x, cx));
                }
                if items.is_empty() {
                    Expr::seq([Expr::literal("["), sp, Expr::literal("]")])
                } else {
                    Expr::seq(
                        [Expr::literal("["), sp.clone()]
                            .into_iter()
                            .chain(items)
                            .chain([sp, Expr::literal("]")]),
                    )
                }
            }
            Value::Object(m) => {
                let sp = self.rules.primitive_rule("space");
                let items: Vec<Expr> = m
                    .iter()
                    .map(|(k, x)| {
                        Expr::seq([
                            Expr::literal(Value::String(k.clone()).to_string()),
                            Expr::literal(":"),
                            sp.clone(),
                            self.literal(x, cx),
                        ])
                    })
                    .collect();
                let braces = |body: Expr| {
                    Expr::seq([
                        Expr::literal("{"),
                        sp.clone(),
                        body,
                        sp.clone(),
                        Expr::literal("}"),
                    ])
                };
                if self.any_order(items.len()) {
                    let hint = if cx.hint.is_empty() {
                        "const".to_string()
                    } else {
                        format!("{}-const", cx.hint)
                    };
                    let members: Vec<Member> = m
                        .keys()
                        .zip(items)
                        .map(|(k, kv)| Member {
                            name: k.clone(),
                            kv: self.rules.add(
                                &format!("{hint}-{}-kv", rules::sanitize(k)),
                                kv,
                                None,
                            ),
                            required: true,
                        })
                        .collect();
                    let lcx = Ctx { hint, ..cx.clone() };
                    let sep = Expr::seq([Expr::literal(","), sp.clone()]);
                    braces(self.any_order_members(&lcx, &members, None, &sep, false))
                } else if items.is_empty() {
                    Expr::seq([Expr::literal("{"), sp, Expr::literal("}")])
                } else {
                    let mut body = Vec::with_capacity(items.len() * 3);
                    for (i, item) in items.into_iter().enumerate() {
                        if i > 0 {
                            body.extend([Expr::literal(","), sp.clone()]);
                        }
                        body.push(item);
                    }
                    braces(Expr::seq(body))
                }
            }
        }
    }

    /// Numbers (integers when `integer`) within the node's number keywords ([`numbers::number`]).
    fn number(
        &mut self,
        rules: &ir::NumberRules,
        cx: &Ctx,
        integer: bool,
    ) -> Result<Frag, SchemaError> {
        let pointer = cx.at();
        let site = numbers::Site {
            hint: &cx.hint,
            comment: self.comment(cx),
            pointer: &pointer,
            llama_compat: self.opts.llama_compat,
        };
        let mut report = Report {
            lenient: self.opts.lenient,
            warnings: &mut self.warnings,
        };
        numbers::number(&mut self.rules, rules, &site, integer, &mut report)
    }

    /// Strings within the node's string keywords.
    fn string(&mut self, rules: &ir::StringRules, cx: &Ctx) -> Result<Frag, SchemaError> {
        let (min, max) = (rules.min_length, rules.max_length);
        let min = self.size_bound("minLength", cx, min)?;
        let max = self.size_bound("maxLength", cx, max)?;
        let lengths = min.is_some_and(|m| m > 0) || max.is_some();
        let mut format = rules.format;
        if let Some(f) = format
            && !formats::FORMATS.contains(&f)
            && !formats::KNOWN_UNSUPPORTED.contains(&f)
        {
            // not a format any validator checks: an annotation
            self.note(
                "format",
                cx,
                format!("{f:?} is not a format JSON Schema defines: ignored"),
            );
            format = None;
        }
        if let Some(f) = format
            && !formats::FORMATS.contains(&f)
        {
            self.unsupported(
                "format",
                cx,
                format!(
                    "format {f:?} cannot be expressed exactly{} (supported: {})",
                    formats::unsupported_reason(f),
                    formats::FORMATS.join(", ")
                ),
            )?;
            format = None;
        }
        let pattern = rules.pattern;
        if let Some(f) = format {
            let lo = min.unwrap_or(0);
            // length bounds every string of the format meets constrain nothing; bounds none
            // meets leave no string (exact either way, without a product of automata)
            let mut lengths = lengths;
            if lengths && let Some((flo, fhi)) = automaton::format_lengths(f) {
                let within = flo >= lo && max.is_none_or(|m| fhi.is_some_and(|h| h <= m));
                let missed = max.is_some_and(|m| flo > m) || fhi.is_some_and(|h| h < lo);
                let range = match fhi {
                    Some(h) if h == flo => format!("exactly {flo} characters"),
                    Some(h) => format!("{flo} to {h} characters"),
                    None => format!("at least {flo} characters"),
                };
                if missed {
                    return Err(Self::invalid(
                        "format",
                        cx,
                        format!(
                            "format {f:?} strings have {range}, which {}: no string is valid",
                            bounds_text(min, max)
                        ),
                    ));
                }
                lengths = !within;
            }
            if lengths || pattern.is_some() {
                let mut found =
                    automaton::format_within(f, pattern, lo, max, &mut self.rules, &cx.hint);
                // too large as one automaton: a pattern alone is walked through the rules
                if let (Err(_), Some(p), false) = (&found, pattern, lengths) {
                    found = automaton::format_matching(f, p, &mut self.rules, &cx.hint);
                }
                match found {
                    Ok(Some(e)) => return Ok(Some(e)),
                    Ok(None) => {
                        return Err(Self::invalid(
                            "format",
                            cx,
                            format!(
                                "no string of format {f:?} meets {}",
                                combination_text(pattern, min, max, " and ")
                            ),
                        ));
                    }
                    Err(m) => {
                        let combination = combination_text(pattern, min, max, ", ");
                        // lenient: what the grammar keeps, and who still checks the rest
                        let kept = if self.opts.lenient {
                            format!(
                                "; the grammar keeps format {f:?} alone (wider), and validation \
                                 still checks {combination}"
                            )
                        } else {
                            format!(
                                " (lenient mode keeps format {f:?} alone and leaves \
                                 {combination} to validation)"
                            )
                        };
                        self.unsupported(
                            "format",
                            cx,
                            format!(
                                "format {f:?} combined with {combination} is not supported: {m}{kept}"
                            ),
                        )?
                    }
                }
            }
            return Ok(self
                .rules
                .format_string(f)
                .map(|name| Expr::Rule(RuleName::new(name))));
        }
        if let Some(p) = pattern
            && lengths
        {
            let r = regex::pattern_with_lengths(p, min.unwrap_or(0), max, &mut self.rules);
            match r {
                Ok(Some(Some(e))) => return Ok(self.name(cx, Some(e), false)),
                Ok(Some(None)) => {
                    return Err(Self::invalid(
                        "pattern",
                        cx,
                        "no string matching the pattern has a length within minLength/maxLength",
                    ));
                }
                Ok(None) => {}
                Err(m) => {
                    self.unsupported("pattern", cx, m)?;
                    return Ok(Some(self.rules.primitive_rule("string")));
                }
            }
        }
        if let Some(p) = pattern {
            if lengths {
                self.unsupported("pattern", cx, "pattern combined with minLength/maxLength")?;
            }
            let r = pattern_to_gbnf(p, &mut self.rules);
            return match r {
                Ok(e) => Ok(self.name(cx, e, false)),
                Err(m) => {
                    self.unsupported("pattern", cx, m)?;
                    Ok(Some(self.rules.primitive_rule("string")))
                }
            };
        }
        if !lengths {
            return Ok(Some(self.rules.primitive_rule("string")));
        }
        let (min, max) = (min.unwrap_or(0), max);
        let c = self.rules.primitive_rule("char");
        let clamp = |x: u64| u32::try_from(x).unwrap_or(u32::MAX);
        let quote = || Expr::literal("\"");
        let chars = self.rules.repetition(c, clamp(min), max.map(clamp));
        Ok(Some(Expr::seq([quote(), chars, quote()])))
    }

    /// Arrays within the node's array keywords.
    fn array(&mut self, rules: &ir::ArrayRules, cx: &Ctx) -> Result<Frag, SchemaError> {
        let (min, max) = (rules.min_items, rules.max_items);
        let min = self.size_bound("minItems", cx, min)?.unwrap_or(0);
        // items after the prefix that must be absent cap the length themselves (exact)
        let mut max = if rules.closed_tuple {
            max
        } else {
            self.size_bound("maxItems", cx, max)?
        };
        let unique = rules.unique_items && max.is_none_or(|m| m > 1);
        if rules.contains {
            self.unsupported("contains", cx, "keyword not supported")?;
        }
        // prefix schemas and the schema for the rest
        let (prefix, prefix_key) = (rules.prefix, rules.prefix_key);
        if unique {
            match self.unique_arrays(prefix, rules.rest, min, max, cx)? {
                Some(e) => return Ok(self.name(cx, e, true)),
                None => self.unsupported(
                    "uniqueItems",
                    cx,
                    "only expressible when the items have a small finite set of values",
                )?,
            }
        }
        self.consumed += 1;
        let r = (|| -> Result<Frag, SchemaError> {
            let mut elems: Vec<Expr> = Vec::new();
            for (i, s) in prefix.iter().enumerate() {
                let pcx = cx.child(prefix_key, "").child(&i.to_string(), "");
                let pcx = Ctx {
                    hint: format!(
                        "{}-{}",
                        if cx.hint.is_empty() { "item" } else { &cx.hint },
                        i + 1
                    ),
                    ..pcx
                };
                match self.child(s, &pcx)? {
                    Some(e) => elems.push(e),
                    None => {
                        max = Some(max.map_or(i as u64, |m| m.min(i as u64)));
                        break;
                    }
                }
            }
            let rcx = cx.child(rules.rest_key, "item");
            // an item schema that plainly allows no value (`false`, an empty `enum`): arrays
            // without such items are still valid, down to `[]`
            let no_item = rules.rest.and_then(no_value_reason);
            let rest = match rules.rest {
                None => Some(self.rules.primitive_rule("value")),
                Some(_) if no_item.is_some() => None,
                Some(s) => self.child(s, &rcx)?,
            };
            if rest.is_none() {
                let k = elems.len() as u64;
                if let Some(why) = no_item
                    && min > k
                {
                    let at = rcx.at();
                    let at = at.trim_start_matches('#');
                    let most = if k == 0 {
                        String::new()
                    } else {
                        format!(" (at most the {k} {} items)", rules.prefix_key)
                    };
                    return Err(Self::invalid(
                        "minItems",
                        cx,
                        format!(
                            "{} at {at} allows no value ({why}) and minItems is {min}: no array \
                             is valid{most}",
                            rules.rest_key
                        ),
                    ));
                }
                max = Some(max.map_or(k, |m| m.min(k)));
            }
            if max.is_some_and(|m| m < min) {
                return Ok(None);
            }
            let sp = self.rules.primitive_rule("space");
            let sep = Expr::seq([Expr::literal(","), sp.clone()]);
            let empty_array = Expr::seq([Expr::literal("["), sp.clone(), Expr::literal("]")]);
            // element j's grammar
            let elem =
                |j: usize| -> Option<Expr> { elems.get(j).cloned().or_else(|| rest.clone()) };
            // items after the first, from index j
            let clamp = |x: u64| u32::try_from(x).unwrap_or(u32::MAX);
            let mut tail = Expr::Empty;
            // rest part (indices >= prefix len, excluding index 0 handled separately)
            let k = elems.len();
            let first_rest = k.max(1);
            if max.is_none_or(|m| m > first_rest as u64)
                && let Some(r) = &rest
            {
                let lo = min.saturating_sub(first_rest as u64);
                let hi = max.map(|m| m - first_rest as u64);
                let item = Expr::seq([sep.clone(), r.clone()]);
                tail = self.rules.repetition(item, clamp(lo), hi.map(clamp));
            }
            // prefix part, from the last prefix element back to index 1
            for j in (1..k.min(max.map_or(usize::MAX, |m| m as usize))).rev() {
                let e = elem(j).unwrap_or(Expr::Empty);
                let piece = Expr::seq([sep.clone(), e, tail]);
                tail = if (j as u64) < min {
                    piece
                } else {
                    Expr::repeat(piece, 0, Some(1))
                };
            }
            if max == Some(0) {
                return Ok(Some(empty_array));
            }
            let Some(first) = elem(0) else {
                return Ok(if min == 0 { Some(empty_array) } else { None });
            };
            let body = Expr::seq([first, tail]);
            let body = if min == 0 {
                Expr::repeat(body, 0, Some(1))
            } else {
                body
            };
            let array = Expr::seq([Expr::literal("["), sp.clone(), body, sp, Expr::literal("]")]);
            Ok(Some(array))
        })();
        self.consumed -= 1;
        let e = r?;
        Ok(self.name(cx, e, true))
    }

    /// The finite set of values a schema allows, when it is small and known
    /// ([`crate::proofs::finite_values`] of the flattened schema).
    fn finite_values(&mut self, schema: &Value, cx: &Ctx) -> Option<Vec<Value>> {
        let flat = self.flatten(schema, cx, 0).ok()?;
        crate::proofs::finite_values(&flat)
    }

    /// `uniqueItems` over items with finite value sets: every array of distinct values, listed.
    /// Ok(None) when the items are not finite or there are too many arrays.
    fn unique_arrays(
        &mut self,
        prefix: &[Value],
        rest: Option<&Value>,
        min: u64,
        max: Option<u64>,
        cx: &Ctx,
    ) -> Result<Option<Frag>, SchemaError> {
        const LIMIT: usize = 512;
        let mut domains = Vec::new();
        for (i, s) in prefix.iter().enumerate() {
            let icx = cx.child("prefixItems", "").child(&i.to_string(), "");
            match self.finite_values(s, &icx) {
                Some(v) => domains.push(v),
                None => return Ok(None),
            }
        }
        let rest_domain = match rest {
            Some(s) => self.finite_values(s, &cx.child("items", "")),
            None => None,
        };
        let cap = match &rest_domain {
            Some(d) => prefix.len() + d.len(),
            None if max.is_some_and(|m| m as usize <= prefix.len()) => prefix.len(),
            None => return Ok(None),
        };
        let longest = max.map_or(cap, |m| (m as usize).min(cap));
        let domain = |j: usize| -> &[Value] {
            if j < domains.len() {
                &domains[j]
            } else {
                rest_domain.as_deref().unwrap_or(&[])
            }
        };
        let mut arrays: Vec<Vec<Value>> = Vec::new();
        let mut stack: Vec<(Vec<Value>, usize)> = vec![(Vec::new(), 0)];
        while let Some((cur, _)) = stack.pop() {
            if cur.len() as u64 >= min {
                arrays.push(cur.clone());
                if arrays.len() > LIMIT {
                    return Ok(None);
                }
            }
            if cur.len() < longest {
                for v in domain(cur.len()).iter().rev() {
                    if !cur.iter().any(|x| json_eq(x, v)) {
                        let mut next = cur.clone();
                        next.push(v.clone());
                        stack.push((next, 0));
                    }
                }
            }
        }
        arrays.sort_by_key(|a| a.len());
        let parts: Vec<Expr> = arrays
            .into_iter()
            .map(|a| self.literal(&Value::Array(a), cx))
            .collect();
        Ok(Some(distinct_alternatives(parts)))
    }

    /// Objects within the node's object keywords.
    fn object(&mut self, rules: &ir::ObjectRules, cx: &Ctx) -> Result<Frag, SchemaError> {
        let property_names = rules.property_names;
        for k in &rules.dependencies {
            self.unsupported(k, cx, "keyword not supported")?;
        }
        // borrowed: each member's schema holds its whole subtree
        let props = &rules.properties;
        let patterns = &rules.pattern_properties;
        let required = &rules.required;
        let kwargs = cx.keys == KeyStyle::Kwarg;
        if kwargs {
            for (keyword, name) in props
                .iter()
                .map(|(k, _)| ("properties", k.as_str()))
                .chain(required.iter().map(|k| ("required", *k)))
            {
                if !syntax::is_identifier(name) {
                    return Err(Self::invalid(
                        keyword,
                        cx,
                        format!(
                            "{name:?} cannot be a keyword argument: names must be Python identifiers"
                        ),
                    ));
                }
            }
        }
        // close_objects closes objects that declare their properties; a schema without
        // `properties` is a free-form object
        let closed_by_default = (self.opts.close_objects || self.opts.llama_compat)
            && rules.additional.is_none()
            && rules.has_properties;
        let additional = match rules.additional {
            Some(v) => Cow::Borrowed(v),
            None => Cow::Owned(Value::Bool(!closed_by_default)),
        };

        self.consumed += 1;
        let r = (|| -> Result<Frag, SchemaError> {
            let sp = self.rules.primitive_rule("space");
            // declared properties: (key, kv rule or None when the value can't match, required)
            let mut declared: Vec<(String, Option<RuleName>, bool)> = Vec::new();
            for (k, s) in props {
                let pcx = cx.child("properties", "").child(k, k);
                let pcx = Ctx {
                    hint: if cx.hint.is_empty() {
                        k.to_string()
                    } else {
                        format!("{}-{}", cx.hint, k)
                    },
                    ..pcx
                };
                let written_false = **s == Value::Bool(false);
                let s = self.with_patterns(k, s, patterns, cx)?;
                let mut v = self.child(&s, &pcx)?;
                if v.is_none() && !written_false && !required.contains(&k.as_str()) {
                    // exact (the property can never be present), but rarely what was meant
                    self.report().ignored(
                        "properties",
                        &pcx.at(),
                        format!(
                            "the schema of {k:?} admits no value, so {k:?} can never be present: \
                             the grammar leaves it out"
                        ),
                    );
                }
                if let Some(pn) = property_names {
                    match check(&Value::String(k.to_string()), pn) {
                        Some(true) => {}
                        Some(false) => v = None,
                        None => self.unsupported(
                            "propertyNames",
                            cx,
                            format!("cannot check property name {k:?} against propertyNames"),
                        )?,
                    }
                }
                let kv = v.map(|v| self.kv_rule(&pcx, k, v, &sp, cx.keys));
                declared.push((k.to_string(), kv, required.contains(&k.as_str())));
            }
            let add_cx = cx.child("additionalProperties", "additional");
            let add_value = self.child(&additional, &add_cx)?;
            for &r in required {
                if !props.iter().any(|(k, _)| *k == r) {
                    // a closed-by-default object still admits the names it requires
                    let matched = self.with_patterns(r, &Value::Bool(true), patterns, cx)?;
                    let value = if *matched != Value::Bool(true) {
                        let mcx = cx.child("patternProperties", "pattern");
                        self.child(&matched, &mcx)?
                    } else if closed_by_default {
                        Some(self.rules.primitive_rule("value"))
                    } else if add_value.is_none() && self.opts.lenient {
                        // lenient: a required name the object closes out (a misspelt
                        // property, or a tool's object closed by toolrail) is admitted as
                        // written without `additionalProperties`: any value
                        self.report().reading(
                            "required",
                            &cx.at(),
                            &format!(
                                "required property {r:?} is not under properties and \
                                 additionalProperties admits no value for it: no object is valid"
                            ),
                            &format!("{r:?} admitted with any value"),
                        )?;
                        self.read_as(cx, ReadingEdit::AdmitProperty(r.to_string()));
                        Some(self.rules.primitive_rule("value"))
                    } else {
                        add_value.clone()
                    };
                    let kv = value.as_ref().map(|v| {
                        let pcx = Ctx {
                            hint: format!(
                                "{}-{}",
                                if cx.hint.is_empty() { "prop" } else { &cx.hint },
                                r
                            ),
                            ..add_cx.clone()
                        };
                        self.kv_rule(&pcx, r, v.clone(), &sp, cx.keys)
                    });
                    declared.push((r.to_string(), kv, true));
                }
            }
            self.object_lowered(rules, cx, declared, add_value, add_cx, sp)
        })();
        self.consumed -= 1;
        let e = r?;
        Ok(self.name(cx, e, true))
    }

    /// The rest of [`Self::object`] once its members' values are converted: the object's
    /// grammar. A function of its own so that the large frame this lowering takes is not on
    /// the stack while the members' schemas are converted (the walk recurses through
    /// `object`, [`MAX_SCHEMA_NESTING`] times at most).
    fn object_lowered(
        &mut self,
        rules: &ir::ObjectRules,
        cx: &Ctx,
        mut declared: Vec<(String, Option<RuleName>, bool)>,
        add_value: Frag,
        add_cx: Ctx,
        sp: Expr,
    ) -> Result<Frag, SchemaError> {
        let property_names = rules.property_names;
        let props = &rules.properties;
        let patterns = &rules.pattern_properties;
        let kwargs = cx.keys == KeyStyle::Kwarg;
        let (min_p, max_p) = (rules.min_properties, rules.max_properties);
        if let Some((name, _, _)) = declared.iter().find(|(_, kv, req)| *req && kv.is_none()) {
            let why = match props.iter().find(|(k, _)| *k == name) {
                Some((_, s)) => match type_enum_clash(s) {
                    Some(clash) => format!(
                        "its schema at {} admits no value ({clash})",
                        cx.child("properties", "").child(name, "").at()
                    ),
                    None => "its schema under properties (or propertyNames) admits no value".into(),
                },
                None => "additionalProperties admits no value for it".to_string(),
            };
            return Err(Self::invalid(
                "required",
                cx,
                format!(
                    "required property {name:?} can never be present: {why}; no object is valid"
                ),
            ));
        }
        if props.windows(2).all(|w| w[0].0 <= w[1].0) {
            declared.sort_by(|a, b| a.0.cmp(&b.0));
        }
        if self.opts.llama_compat {
            // llama.cpp writes the required members first (stable: in declared order)
            declared.sort_by_key(|(_, _, req)| !*req);
        }
        let names: Vec<String> = declared.iter().map(|(k, _, _)| k.clone()).collect();
        if names.is_empty()
            && !kwargs
            && patterns.is_empty()
            && property_names.is_none()
            && min_p == 0
            && max_p.is_none()
            && add_value
                .as_ref()
                .is_some_and(|v| self.rules.is_primitive(v, "value"))
        {
            return Ok(Some(self.rules.primitive_rule("object")));
        }
        let members: Vec<Member> = declared
            .into_iter()
            .filter_map(|(name, kv, required)| kv.map(|kv| Member { name, kv, required }))
            .collect();
        let key: Option<Expr> = match property_names {
            _ if add_value.is_none() && (!kwargs || patterns.is_empty()) => None,
            // keyword arguments: an identifier, then `=`
            _ if kwargs => {
                for &keyword in &rules.name_keywords {
                    // lenient: any other identifier with any value (wider)
                    self.unsupported(
                        keyword,
                        cx,
                        "names of undeclared keyword arguments cannot be constrained",
                    )?;
                }
                let declared: Vec<&str> = names.iter().map(String::as_str).collect();
                let key = syntax::identifier_not_in(&declared).ok_or_else(|| {
                    Self::invalid(
                        "properties",
                        cx,
                        format!(
                            "a declared name longer than {} characters cannot be told apart from undeclared keyword arguments",
                            syntax::MAX_EXCLUDED_IDENTIFIER
                        ),
                    )
                })?;
                Some(Expr::Rule(self.rules.add(
                    &format!("{}-other-name", cx.hint),
                    key,
                    None,
                )))
            }
            None if names.is_empty() => Some(self.rules.primitive_rule("string")),
            None => Some(Expr::Rule(self.not_strings(&add_cx, &names))),
            Some(pn) => {
                if !names.is_empty() {
                    self.unsupported(
                        "propertyNames",
                        cx,
                        "propertyNames with both declared and additional properties",
                    )?;
                }
                let pcx = cx.child("propertyNames", "name");
                let string_only = self.merge(pn, &serde_json::json!({"type": "string"}), &pcx)?;
                self.child(&string_only, &pcx)?
            }
        };
        let extra: Option<Expr> = match (&add_value, key) {
            (_, Some(key)) if kwargs => {
                let value = match &add_value {
                    Some(v) if patterns.is_empty() => v.clone(),
                    _ => self.rules.primitive_rule("value"),
                };
                // a grammar cannot remember which names were written: said, not hidden
                self.ignored(
                    "additionalProperties",
                    cx,
                    "undeclared keyword arguments: the grammar cannot forbid repeating one \
                     (`f(x=1, x=2)`, a Python syntax error that validation rejects)",
                );
                let comment = self.comment(&add_cx);
                Some(Expr::Rule(self.rules.add(
                    &format!("{}-additional-kv", cx.hint),
                    Expr::seq([key, value]),
                    comment,
                )))
            }
            _ if !patterns.is_empty() => self
                .pattern_members(
                    cx,
                    patterns,
                    &names,
                    add_value.clone(),
                    property_names.is_some(),
                )?
                .map(Expr::Rule),
            (Some(v), Some(key)) => {
                let body = Expr::seq([key, Expr::literal(":"), sp.clone(), v.clone()]);
                let comment = self.comment(&add_cx);
                Some(Expr::Rule(self.rules.add(
                    &format!(
                        "{}-additional-kv",
                        if cx.hint.is_empty() { "root" } else { &cx.hint }
                    ),
                    body,
                    comment,
                )))
            }
            _ => None,
        };
        let n_req = members.iter().filter(|m| m.required).count() as u64;
        if let Some(m) = max_p
            && m < n_req
        {
            return Err(Self::invalid(
                "maxProperties",
                cx,
                format!(
                    "maxProperties {m} is below the {n_req} required properties: no object is valid"
                ),
            ));
        }
        // keyword arguments: the parentheses are the caller's
        let braces = |body: Expr| {
            if kwargs {
                return body;
            }
            Expr::seq([
                Expr::literal("{"),
                sp.clone(),
                body,
                sp.clone(),
                Expr::literal("}"),
            ])
        };
        let empty_object = if kwargs {
            Expr::Empty
        } else {
            Expr::seq([Expr::literal("{"), sp.clone(), Expr::literal("}")])
        };
        let sep = Expr::seq([Expr::literal(","), sp.clone()]);
        if members.is_empty() {
            let Some(x) = extra else {
                return Ok(if min_p == 0 {
                    Some(empty_object.clone())
                } else {
                    None
                });
            };
            if max_p == Some(0) {
                return Ok(Some(empty_object.clone()));
            }
            let min_p = self
                .size_bound("minProperties", cx, Some(min_p))?
                .unwrap_or(0);
            let max_p = self.size_bound("maxProperties", cx, max_p)?;
            let clamp = |v: u64| u32::try_from(v).unwrap_or(u32::MAX);
            let item = Expr::seq([sep.clone(), x.clone()]);
            let rest = self.rules.repetition(
                item,
                clamp(min_p.saturating_sub(1)),
                max_p.map(|m| clamp(m - 1)),
            );
            let body = Expr::seq([x, rest]);
            let body = if min_p == 0 {
                Expr::repeat(body, 0, Some(1))
            } else {
                body
            };
            return Ok(Some(braces(body)));
        }
        // minProperties 1 without required members: the first member is not optional
        if min_p > n_req && !(min_p == 1 && n_req == 0) {
            self.unsupported(
                "minProperties",
                cx,
                "minProperties beyond the required properties",
            )?;
        }
        if let Some(m) = max_p
            && (extra.is_some() || (members.len() as u64) > m)
        {
            self.unsupported(
                "maxProperties",
                cx,
                "maxProperties with optional or additional properties",
            )?;
        }
        if self.any_order(members.len()) {
            let body = self.any_order_members(cx, &members, extra.as_ref(), &sep, min_p >= 1);
            return Ok(Some(braces(body)));
        }
        let declared: Vec<(RuleName, bool)> =
            members.into_iter().map(|m| (m.kv, m.required)).collect();
        let xs = extra
            .as_ref()
            .map(|x| Expr::repeat(Expr::seq([sep.clone(), x.clone()]), 0, None))
            .unwrap_or(Expr::Empty);
        // T_i: what may follow once at least one member is written, from declared index i.
        // Extra members attach to the member before them (unambiguous: one parse per text);
        // llama_compat: they all come last, as llama.cpp writes them.
        let compat = self.opts.llama_compat;
        let (after_each, at_end) = if compat {
            (Expr::Empty, xs.clone())
        } else {
            (xs.clone(), Expr::Empty)
        };
        let member = |kv: &RuleName, req: bool| -> Expr {
            let m = Expr::seq([sep.clone(), Expr::rule(kv), after_each.clone()]);
            if req { m } else { Expr::repeat(m, 0, Some(1)) }
        };
        let n = declared.len();
        let mut tails: Vec<Expr> = vec![Expr::Empty; n + 1];
        tails[n] = at_end;
        let named = n > 4;
        for i in (0..n).rev() {
            let (kv, req) = &declared[i];
            let text = Expr::seq([member(kv, *req), tails[i + 1].clone()]);
            tails[i] = if named && !tails[i + 1].is_empty() {
                let hint = format!(
                    "{}-rest-{}",
                    if cx.hint.is_empty() {
                        "object"
                    } else {
                        &cx.hint
                    },
                    i + 1
                );
                Expr::Rule(self.rules.add(&hint, text, None))
            } else {
                text
            };
        }
        let tail = |i: usize| tails[i].clone();
        let first_req = declared.iter().position(|(_, r)| *r);
        let mut heads = Vec::new();
        if let Some(x) = &extra {
            if !compat {
                heads.push(Expr::seq([x.clone(), xs.clone(), tail(0)]));
            } else if first_req.is_none() {
                heads.push(Expr::seq([x.clone(), xs.clone()]));
            }
        }
        let last = first_req.unwrap_or(declared.len() - 1);
        for (i, (kv, _)) in declared.iter().enumerate().take(last + 1) {
            heads.push(Expr::seq([Expr::rule(kv), after_each.clone(), tail(i + 1)]));
        }
        let heads = Expr::alt(heads).unwrap_or(Expr::Empty);
        let body = if first_req.is_none() && min_p == 0 {
            Expr::repeat(heads, 0, Some(1))
        } else {
            heads
        };
        Ok(Some(braces(body)))
    }

    /// The schema of declared property `name` with those of the `patternProperties` whose
    /// pattern matches it (all must hold): `allOf` when any match.
    fn with_patterns<'s>(
        &mut self,
        name: &str,
        schema: &'s Value,
        patterns: &[(&String, &Value)],
        cx: &Ctx,
    ) -> Result<Cow<'s, Value>, SchemaError> {
        let mut all = Vec::new();
        for (p, ps) in patterns {
            match self.pattern_matches(p, name) {
                Ok(true) => all.push((*ps).clone()),
                Ok(false) => {}
                Err(m) => {
                    let pcx = cx.child("patternProperties", "").child(p, "");
                    return Err(Self::invalid("patternProperties", &pcx, m));
                }
            }
        }
        if all.is_empty() {
            return Ok(Cow::Borrowed(schema));
        }
        if schema != &Value::Bool(true) {
            all.insert(0, schema.clone());
        }
        Ok(Cow::Owned(match all.len() {
            1 => all.remove(0),
            _ => serde_json::json!({ "allOf": all }),
        }))
    }

    /// The rule of one member not among `names` (the declared and required ones) of an object
    /// with `patternProperties`: a name matching a pattern takes that pattern's schema, any other
    /// name `additional` (None: no other name). Exact cases: patterns with one schema, or
    /// several whose literal prefixes (`^x-`, `^contexts_`) cannot both match a name; a pattern
    /// matching no declared name, or every name (`.*`); other names either refused or
    /// described by a simple complement ([`regex::complement_to_gbnf`]). Anything else is
    /// unsupported; lenient: any other name with any value (wider, never narrower).
    fn pattern_members(
        &mut self,
        cx: &Ctx,
        patterns: &[(&String, &Value)],
        names: &[String],
        additional: Option<Expr>,
        has_property_names: bool,
    ) -> Result<Option<RuleName>, SchemaError> {
        let sp = self.rules.primitive_rule("space");
        let base = if cx.hint.is_empty() {
            "root".to_string()
        } else {
            cx.hint.clone()
        };
        let add_cx = cx.child("additionalProperties", "additional");
        let any_key = |this: &mut Self| -> Expr {
            if names.is_empty() {
                this.rules.primitive_rule("string")
            } else {
                Expr::Rule(this.not_strings(&add_cx, names))
            }
        };
        let kv_body =
            |key: Expr, value: Expr| Expr::seq([key, Expr::literal(":"), sp.clone(), value]);
        let lenient_fallback = |this: &mut Self| -> Option<RuleName> {
            let key = any_key(this);
            let value = this.rules.primitive_rule("value");
            Some(
                this.rules
                    .add(&format!("{base}-additional-kv"), kv_body(key, value), None),
            )
        };
        if has_property_names {
            self.unsupported(
                "patternProperties",
                cx,
                "patternProperties together with propertyNames",
            )?;
            return Ok(lenient_fallback(self));
        }
        // patterns with the same schema form one alternation
        let mut groups: Vec<(String, Value, Ctx)> = Vec::new();
        for (p, ps) in patterns {
            if let Some(g) = groups.iter_mut().find(|g| g.1 == **ps) {
                g.0 = format!("(?:{})|(?:{})", g.0, p);
            } else {
                let pcx = cx.child("patternProperties", "").child(p, "");
                let pcx = Ctx {
                    hint: format!("{base}-pattern-{}", groups.len() + 1),
                    ..pcx
                };
                groups.push((p.to_string(), (*ps).clone(), pcx));
            }
        }
        let mut values = Vec::new();
        for (_, ps, pcx) in &groups {
            values.push(self.child(ps, pcx)?);
        }
        // with additional members of any value, a pattern of any value constrains nothing
        let open = additional
            .as_ref()
            .is_some_and(|v| self.rules.is_primitive(v, "value"));
        let mut kept: Vec<(String, Option<Expr>, Ctx)> = Vec::new();
        for ((p, _, pcx), v) in groups.into_iter().zip(values) {
            if !(open
                && v.as_ref()
                    .is_some_and(|v| self.rules.is_primitive(v, "value")))
            {
                kept.push((p, v, pcx));
            }
        }
        if kept.len() > 1 {
            let prefixes: Vec<Option<String>> =
                kept.iter().map(|(p, _, _)| literal_prefix(p)).collect();
            for i in 0..kept.len() {
                for j in i + 1..kept.len() {
                    let apart = match (&prefixes[i], &prefixes[j]) {
                        (Some(a), Some(b)) => {
                            !a.starts_with(b.as_str()) && !b.starts_with(a.as_str())
                        }
                        _ => false,
                    };
                    if !apart {
                        self.unsupported(
                            "patternProperties",
                            cx,
                            format!(
                                "patterns {:?} and {:?} have different schemas and may match the same name",
                                kept[i].0, kept[j].0
                            ),
                        )?;
                        return Ok(lenient_fallback(self));
                    }
                }
            }
        }
        let mut kvs = Vec::new();
        let mut everything_matched = false;
        for (p, v, pcx) in &kept {
            let complement = regex::complement_to_gbnf(p, &mut self.rules);
            let key = match complement {
                Err(m) => {
                    self.unsupported("patternProperties", pcx, m)?;
                    return Ok(lenient_fallback(self));
                }
                Ok(Some(regex::Complement::Nothing)) => {
                    everything_matched = true;
                    any_key(self)
                }
                Ok(_) => {
                    if let Some(n) = names
                        .iter()
                        .find(|n| self.pattern_matches(p, n).unwrap_or(true))
                    {
                        self.unsupported(
                            "patternProperties",
                            pcx,
                            format!("the pattern also matches the declared property {n:?}"),
                        )?;
                        return Ok(lenient_fallback(self));
                    }
                    match pattern_to_gbnf(p, &mut self.rules) {
                        Ok(Some(k)) => {
                            Expr::Rule(self.rules.add(&format!("{}-name", pcx.hint), k, None))
                        }
                        Ok(None) => continue,
                        Err(m) => {
                            self.unsupported("patternProperties", pcx, m)?;
                            return Ok(lenient_fallback(self));
                        }
                    }
                }
            };
            if let Some(v) = v {
                let body = kv_body(key, v.clone());
                let comment = self.comment(pcx);
                kvs.push(self.rules.add(&format!("{}-kv", pcx.hint), body, comment));
            }
        }
        if let Some(av) = additional
            && !everything_matched
        {
            let complement = match kept.as_slice() {
                [] => Some(Some(any_key(self))),
                [(p, _, _)] if names.is_empty() => {
                    match regex::complement_to_gbnf(p, &mut self.rules) {
                        Ok(Some(regex::Complement::Grammar(g))) => Some(g),
                        _ => None,
                    }
                }
                _ => None,
            };
            match complement {
                Some(Some(key)) => {
                    let body = kv_body(key, av);
                    let comment = self.comment(&add_cx);
                    kvs.push(
                        self.rules
                            .add(&format!("{base}-additional-kv"), body, comment),
                    );
                }
                Some(None) => {}
                None => {
                    self.unsupported(
                        "patternProperties",
                        cx,
                        "names matching no pattern are allowed (additionalProperties) but cannot be told apart from those that match",
                    )?;
                    return Ok(lenient_fallback(self));
                }
            }
        }
        Ok(match kvs.len() {
            0 => None,
            1 => kvs.pop(),
            _ => Expr::alt(kvs.into_iter().map(Expr::Rule))
                .map(|body| self.rules.add(&format!("{base}-member-kv"), body, None)),
        })
    }

    /// Whether an object with `n` declared members takes them in any order ([`MemberOrder`];
    /// with one member or none, every order is the declared one).
    fn any_order(&self, n: usize) -> bool {
        !self.opts.llama_compat
            && self.opts.member_order == MemberOrder::Any
            && (2..=ANY_ORDER_MAX_MEMBERS).contains(&n)
    }

    /// An object's members in any order (what follows `"{" space`, up to the closing space):
    /// one rule per set of declared members still to come, each written at most once, the
    /// required ones before the object may end; undeclared members (`extra`) anywhere.
    ///
    /// `rest(S)` is what may follow once a member is written, with `S` the declared members
    /// left: `( sep extra )* ( sep ( m rest(S - m) | ... ) )?` over the members `m` of `S`
    /// (the `?` only when `S` holds no required member). Keys are distinct literals and
    /// `extra` excludes every declared name, so each text has one parse. `at_least_one`: the
    /// object may not be empty (`minProperties: 1`) even without required members.
    fn any_order_members(
        &mut self,
        cx: &Ctx,
        members: &[Member],
        extra: Option<&Expr>,
        sep: &Expr,
        at_least_one: bool,
    ) -> Expr {
        let n = members.len();
        let full = (1usize << n) - 1;
        let xs = extra
            .map(|x| Expr::repeat(Expr::seq([sep.clone(), x.clone()]), 0, None))
            .unwrap_or(Expr::Empty);
        let hint = if cx.hint.is_empty() {
            "object"
        } else {
            cx.hint.as_str()
        };
        // the members of a set, in declared order
        let of = |set: usize| (0..n).filter(move |i| set & (1 << i) != 0);
        // choices(S): each member of S followed by rest(S - member)
        let choices = |set: usize, rest: &[Expr]| -> Vec<Expr> {
            of(set)
                .map(|i| Expr::seq([Expr::rule(&members[i].kv), rest[set & !(1 << i)].clone()]))
                .collect()
        };
        let group = |alts: Vec<Expr>| -> Expr { Expr::alt(alts).unwrap_or(Expr::Empty) };
        // rest(S), built from the smallest sets up so that each one's successors exist
        let mut rest: Vec<Expr> = vec![Expr::Empty; full + 1];
        let mut sets: Vec<usize> = (0..full).collect();
        if extra.is_some() {
            sets.push(full);
        }
        sets.sort_by_key(|s| (s.count_ones(), *s));
        for set in sets {
            let more = if set == 0 {
                Expr::Empty
            } else {
                let next = Expr::seq([sep.clone(), group(choices(set, &rest))]);
                if of(set).any(|i| members[i].required) {
                    next
                } else {
                    Expr::repeat(next, 0, Some(1))
                }
            };
            let body = Expr::seq([xs.clone(), more]);
            rest[set] = if body.is_empty() || (extra.is_none() && set.count_ones() == 1) {
                body
            } else {
                let keys: Vec<String> =
                    of(set).map(|i| rules::sanitize(&members[i].name)).collect();
                let left: Vec<String> = of(set)
                    .map(|i| {
                        let key = Value::String(members[i].name.clone()).to_string();
                        if members[i].required {
                            format!("{key} (required)")
                        } else {
                            key
                        }
                    })
                    .collect();
                let comment = format!(
                    "{}: members still to come, in any order: {}{}",
                    self.comment(cx).unwrap_or_default(),
                    if left.is_empty() {
                        "none".to_string()
                    } else {
                        left.join(", ")
                    },
                    if extra.is_some() {
                        ", and additional ones"
                    } else {
                        ""
                    },
                );
                let name = if keys.is_empty() {
                    format!("{hint}-rest-none")
                } else {
                    format!("{hint}-rest-{}", keys.join("-"))
                };
                Expr::Rule(self.rules.add(&name, body, Some(comment)))
            };
        }
        let mut heads = Vec::new();
        if let Some(x) = extra {
            heads.push(Expr::seq([x.clone(), rest[full].clone()]));
        }
        heads.extend(choices(full, &rest));
        if !members.iter().any(|m| m.required) && !at_least_one {
            Expr::repeat(group(heads), 0, Some(1))
        } else {
            group(heads)
        }
    }

    /// The rule `"key" ":" space value` of one declared member (`key=value` for a keyword
    /// argument).
    fn kv_rule(&mut self, cx: &Ctx, key: &str, value: Expr, sp: &Expr, keys: KeyStyle) -> RuleName {
        let body = match keys {
            KeyStyle::DictKey => {
                let key_lit = Expr::literal(Value::String(key.to_string()).to_string());
                Expr::seq([key_lit, Expr::literal(":"), sp.clone(), value])
            }
            KeyStyle::Kwarg => Expr::seq([Expr::literal(format!("{key}=")), value]),
        };
        self.rules.add(&format!("{}-kv", cx.hint), body, None)
    }

    /// A JSON string whose decoded value is none of `names` (trie over the names).
    fn not_strings(&mut self, cx: &Ctx, names: &[String]) -> RuleName {
        /// A trie of the names in an arena (index 0 is the root): no recursion over its depth,
        /// which the names' length decides, neither to build it nor to drop it.
        #[derive(Default)]
        struct Node {
            children: Vec<(char, usize)>,
            end: bool,
        }
        let mut trie: Vec<Node> = vec![Node::default()];
        for n in names {
            let mut at = 0;
            for c in n.chars() {
                at = match trie[at].children.iter().find(|(d, _)| *d == c) {
                    Some(&(_, next)) => next,
                    None => {
                        trie.push(Node::default());
                        let next = trie.len() - 1;
                        trie[at].children.push((c, next));
                        next
                    }
                };
            }
            trie[at].end = true;
        }
        let ch = self.rules.primitive_rule("char");
        /// Trie levels written as nested groups in one rule; deeper levels start a rule of
        /// their own (llama.cpp refuses groups nested more than 128 deep, and one level of the
        /// trie is one group). It also bounds the recursion below: a deeper subtree is reserved
        /// as a rule and built later from the work list.
        const LEVELS_PER_RULE: usize = 64;
        struct Build<'a> {
            trie: &'a [Node],
            ch: &'a Expr,
            hint: &'a str,
            /// Subtrees left for rules of their own: (node, its reserved rule).
            pending: Vec<(usize, RuleName)>,
        }
        impl Build<'_> {
            fn node(&mut self, at: usize, depth: usize, rules: &mut RuleTable) -> Expr {
                let node = &self.trie[at];
                let mut alts = Vec::new();
                let mut excluded: Vec<(u32, u32)> = Vec::new();
                for &(c, child) in &node.children {
                    let mut enc = String::new();
                    json_encode_char(c, &mut enc);
                    let rest = if depth + 1 >= LEVELS_PER_RULE {
                        let name = rules.reserve(&format!("{}-key-rest", self.hint), None);
                        self.pending.push((child, name.clone()));
                        Expr::rule(&name)
                    } else {
                        self.node(child, depth + 1, rules)
                    };
                    alts.push(Expr::seq([Expr::literal(enc), rest]));
                    excluded.push((c as u32, c as u32));
                }
                let others =
                    super::strings::complement(&super::strings::normalize(excluded), 0x10FFFF);
                if let Some(o) = encoded_char_set(&others, &mut || rules.primitive_rule("char")) {
                    alts.push(Expr::seq([
                        o,
                        Expr::repeat(self.ch.clone(), 0, None),
                        Expr::literal("\""),
                    ]));
                }
                if !node.end {
                    alts.push(Expr::literal("\""));
                }
                Expr::alt(alts).unwrap_or(Expr::Empty)
            }
        }
        let mut rules = std::mem::replace(&mut self.rules, RuleTable::new(self.opts.whitespace));
        let mut build = Build {
            trie: &trie,
            ch: &ch,
            hint: &cx.hint,
            pending: Vec::new(),
        };
        let body = Expr::seq([Expr::literal("\""), build.node(0, 0, &mut rules)]);
        while let Some((at, name)) = build.pending.pop() {
            let rest = build.node(at, 0, &mut rules);
            rules.fill(&name, rest);
        }
        self.rules = rules;
        let comment = self.comment(cx);
        self.rules.add(&format!("{}-key", cx.hint), body, comment)
    }
}

/// A declared object member: its name, its `key: value` rule, whether it is required.
struct Member {
    name: String,
    kv: RuleName,
    required: bool,
}

/// Most names with `dependencies` / `dependentRequired` / `dependentSchemas` in one schema
/// (2^n alternatives; the `anyOf` products of `allOf` merging stop at 64).
const MAX_DEPENDENCIES: usize = 5;
