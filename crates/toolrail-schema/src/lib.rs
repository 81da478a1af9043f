//! JSON Schema → GBNF.
//!
//! Layer: depends on no other toolrail crate (see ARCHITECTURE.md); no C++. Invariant: a
//! grammar it emits never accepts an instance the schema rejects; what it cannot express is an
//! error naming the keyword and the JSON pointer.
//!
//! [`SchemaConverter`] turns JSON Schemas into GBNF rules that accept exactly the JSON texts
//! valid against them, or says which keyword at which JSON pointer it cannot express
//! ([`SchemaError`]); with [`ConvertOptions::lenient`] that becomes a [`Warning`] and the
//! constraint is dropped. Several schemas (one per tool) can share one grammar; envelope rules
//! are built as [`expr::Expr`] values with names from the same namespace
//! ([`SchemaConverter::reserve_rule_name`], [`SchemaConverter::add_rule`]).
//!
//! # What "exact" means
//! A schema constrains JSON *values*; a grammar constrains *text*. The grammar accepts every
//! valid value in at least its canonical spelling and never accepts an invalid value:
//! - strings: characters raw, except `"`, `\` and U+0000..U+001F, which are escaped
//!   (`\"`, `\\`, `\n`, `\u001f`...), as every JSON serializer writes them;
//! - numbers under bounds, integers and enum members are written without exponent; integers
//!   may carry a zero fraction (`3.0` is an integer in JSON Schema);
//! - integer parts have any number of digits (in [`ConvertOptions::llama_compat`] mode at
//!   most 16 unless a bound says otherwise, as llama.cpp's `integral-part`);
//! - object members may come in any order (JSON objects are unordered) when the object has at
//!   most [`ANY_ORDER_MAX_MEMBERS`] declared members (properties, and required names missing
//!   from `properties`); beyond that, or with [`MemberOrder::Declared`], declared members appear
//!   in the order of `properties` (required names missing from `properties` after them, or
//!   sorted in by name when `properties` is sorted by name), and undeclared members anywhere.
//!   The same holds for object values of `const` and `enum`. No case of the
//!   JSON-Schema-Test-Suite depends on the declared order (`tests/it/suite.rs` checks every
//!   member order of every instance);
//! - size keywords (`minLength`, `maxLength`, `minItems`, `maxItems`, `minProperties`,
//!   `maxProperties`) and `pattern` repetitions above [`MAX_REPEAT_TOTAL`] are an error (lenient:
//!   the bound is dropped with a [`Warning`], which only widens the grammar), documents
//!   nested deeper than [`MAX_DOCUMENT_DEPTH`] are refused before any work, and schemas nested
//!   (through subschemas, `$ref`s and `allOf`/`anyOf`/`oneOf` branches) deeper than
//!   [`MAX_SCHEMA_NESTING`] are an error naming the place: the converter's walks recurse, and
//!   these bounds keep them within a 2 MiB thread stack whatever the input (a chain of
//!   100,000 `$ref`s included);
//! - contradictory bounds (`minLength` above `maxLength`, `minimum` above `maximum` or exclusive
//!   bounds leaving no value, `minItems` above `maxItems`, `minProperties` above
//!   `maxProperties` or below the required count, an empty `enum`, a required property that
//!   can never be present) are an error naming the keyword and pointer, never a grammar that
//!   silently matches nothing;
//! - leap seconds (`format: time`, `date-time`) are accepted with any offset, exactly when they
//!   fall on 23:59:60 UTC (see [`formats`]);
//! - keywords that do not constrain are ignored, as JSON Schema says: annotations silently,
//!   keywords JSON Schema does not define (and `format`s it does not define, such as `byte`)
//!   with a note in [`Conversion::notes`]. `docs/json-schema.md` lists what is expressed.
//!
//! # llama.cpp compatibility
//! With [`ConvertOptions::llama_compat`] a schema is read the way llama.cpp's own converter
//! (`json_schema_to_grammar`, as vendored by llama-cpp-sys-2 0.1.161) reads it, so the grammar
//! is the one llama-server would enforce; the default stays standard JSON Schema semantics.
//! llama.cpp sorts each schema object into one kind and reads only that kind's keywords
//! ([`llama`] lists the rules), so in this mode:
//! - a schema without `type` gets the type llama.cpp infers: `{"items": {...}, "minItems": 3}`
//!   is an array (so `1` is rejected), `{"minItems": 3}` alone any value;
//! - an object with `properties` and no `additionalProperties` is closed; its members are
//!   written required first, then optional, then additional ones (llama.cpp's order), and
//!   `required` names missing from `properties` are not required;
//! - a list under `items`/`prefixItems` is a tuple of exactly that length; `oneOf` is `anyOf`;
//! - integer parts stop at 16 digits where no bound limits them (llama.cpp's `integral-part`);
//! - every keyword llama.cpp ignores (siblings of `$ref`, `anyOf`, `const`, `enum`; number
//!   bounds; `multipleOf`; `uniqueItems`; `not`; `if`; formats it does not know; ...) is dropped
//!   with a [`Warning`] instead of an error, whatever [`ConvertOptions::lenient`] says.
//!
//! - `allOf` is read as llama.cpp reads it: the enum values common to all members, else one
//!   closed object with the members' properties, all required except those of `anyOf`
//!   members (a [`Warning`] says so, and names the members it ignores).
//!
//! What this converter otherwise does stays the same in this mode, so the grammar can still
//! differ from llama.cpp's in details: the primitives are this module's (string characters,
//! number syntax, integers with a zero fraction such as `2.0`, integer ranges, `format`
//! rules); what this converter cannot express is still an error unless lenient. Two llama.cpp
//! bugs are not copied: a property named `""` (llama.cpp names its rule `root`, so the whole
//! grammar becomes that property's value) and additional property names that are a proper
//! prefix of a declared one (llama.cpp refuses them: with `ab` declared, `a` is refused).
//!
//! Whitespace: [`Whitespace::Spaced`] accepts compact JSON, single spaces after `:`, `,`, `{`
//! and `[`, and pretty-printed JSON (llama.cpp's `space` rule); [`Whitespace::Compact`] none.
//!
//! # Layout
//! - [`convert`]: the walk over a schema (refs, combinators, per-type keywords);
//! - `ir`: a schema node read once into its shape (reference, merge, alternatives, typed)
//!   and typed keyword groups (types, values, string, number, array and object keywords),
//!   checked as read; unsupported and unknown keywords listed; what the walk reads;
//! - [`merge`]: `allOf` as one schema; [`validate`]: checks known values (enum, oneOf);
//! - `keywords`: which keywords constrain (every other one is ignored);
//! - [`numbers`]: integer and decimal ranges; [`regex`]: `pattern` via `regex-syntax` HIR;
//! - [`formats`]: `format` rules; [`strings`]: JSON string encoding as GBNF;
//! - [`syntax`]: JSON or Python literals ([`LiteralSyntax`]), keys or keyword arguments;
//! - `automaton`: a `format` with `pattern`/`minLength`/`maxLength`, as a product of automata;
//! - [`llama`]: what llama.cpp reads of a schema ([`ConvertOptions::llama_compat`]);
//! - [`expr`]: typed GBNF expressions and their one printer (parentheses by precedence);
//! - [`rules`]: the rule table (naming, deduplication, output order);
//! - [`limits`]: llama.cpp's repetition limits, and how every repetition stays within them.

mod automaton;
pub mod convert;
mod error;
pub mod expr;
pub mod formats;
mod gbnf_text;
mod ir;
mod keywords;
pub mod limits;
pub mod llama;
pub mod locations;
pub mod merge;
pub mod numbers;
mod options;
pub mod pointer;
mod proofs;
mod refs;
pub mod regex;
pub mod relax;
pub mod rules;
pub mod strings;
pub mod syntax;
pub mod validate;

use serde_json::Value;

pub use convert::{MAX_DOCUMENT_DEPTH, MAX_SCHEMA_NESTING, check_depth};
pub use error::{SchemaError, Warning};
pub use expr::{Expr, RuleName};
pub use gbnf_text::gbnf_literal;
pub use locations::RuleLocation;
pub use options::{ANY_ORDER_MAX_MEMBERS, ConvertOptions, MemberOrder, Whitespace};
pub use pointer::JsonPointer;
pub use regex::MAX_REPEAT_TOTAL;
pub use syntax::{LiteralSyntax, is_identifier};

/// Builds one grammar from any number of schemas and hand-written rules.
pub struct SchemaConverter {
    inner: convert::Converter,
}

impl SchemaConverter {
    /// A converter with the given options, writing JSON text.
    pub fn new(options: ConvertOptions) -> Self {
        Self::with_syntax(options, LiteralSyntax::Json)
    }

    /// A converter with the given options whose grammar writes values in `syntax` (the
    /// pythonic call envelope: [`LiteralSyntax::Python`]). The same walk, the same rules for
    /// every keyword; only the spelling of literals differs (see [`syntax`]).
    pub fn with_syntax(options: ConvertOptions, syntax: LiteralSyntax) -> Self {
        let mut inner = convert::Converter::new(options);
        inner.rules.syntax = syntax;
        Self { inner }
    }

    /// Adds one schema (its own document for `$ref` resolution); returns the expression
    /// (usually a rule reference) matching any value valid against it, in the converter's
    /// syntax. `name_hint` is a kebab-case prefix, e.g. `get-weather-args`.
    pub fn add_schema(&mut self, name_hint: &str, schema: &Value) -> Result<Expr, SchemaError> {
        let hint = rules::sanitize(name_hint);
        self.inner
            .add_document(&hint, &hint, schema, true, syntax::KeyStyle::DictKey)
    }

    /// Adds a call's arguments schema, its root object written as keyword arguments
    /// (`a=1, b="x"`, without the parentheses) and everything inside it in the converter's
    /// syntax: the object lowering of [`SchemaConverter::add_schema`] with `name=` for
    /// `"name": ` (required, optional, member order, `additionalProperties`,
    /// `minProperties`/`maxProperties`, `anyOf`/`oneOf`/`allOf`/`$ref` at the root all as for
    /// an object). Names must be Python identifiers ([`is_identifier`]); undeclared names are
    /// any other identifier. An error names the keyword and pointer where the root cannot be
    /// written as keyword arguments (not an object, `enum`/`const`, `patternProperties` or
    /// `propertyNames` constraining undeclared names).
    pub fn add_arguments(&mut self, name_hint: &str, schema: &Value) -> Result<Expr, SchemaError> {
        let hint = rules::sanitize(name_hint);
        self.inner
            .add_document(&hint, &hint, schema, true, syntax::KeyStyle::Kwarg)
    }

    /// Adds an envelope rule to the grammar's rules (rendered among the converter's, in
    /// creation order); returns its name, or the name of an existing rule with the same body.
    pub fn add_rule(&mut self, name_hint: &str, body: Expr) -> RuleName {
        self.inner.rules.add(name_hint, body, None)
    }

    /// Reserves a rule name in this grammar's one namespace for a rule the caller defines
    /// itself (an envelope rule rendered after [`SchemaConverter::finish`]'s text): no rule of
    /// the converter will take it, and it never takes one of theirs or a built-in name.
    pub fn reserve_rule_name(&mut self, name_hint: &str) -> RuleName {
        self.inner.rules.reserve(name_hint, None)
    }

    /// The whitespace rule to place between envelope tokens (`space`; it matches nothing but
    /// the empty string in [`Whitespace::Compact`] mode).
    pub fn space_rule(&mut self) -> RuleName {
        RuleName::new(self.inner.rules.primitive("space"))
    }

    /// Constraints dropped so far (lenient and llama_compat modes; and for keyword arguments,
    /// that an undeclared one may be written twice, which no grammar can forbid).
    pub fn warnings(&self) -> &[Warning] {
        &self.inner.warnings
    }

    /// The schema location each generated rule stands for, by rule name (rules shared by
    /// several locations left out): lets a grammar error name a JSON pointer.
    pub fn rule_locations(&self) -> Vec<(String, RuleLocation)> {
        locations::rule_locations(&self.inner.rules)
    }

    /// Keywords JSON Schema does not define, ignored so far ([`Conversion::notes`]).
    pub fn notes(&self) -> &[Warning] {
        &self.inner.notes
    }

    /// The whole grammar text: `root ::= <root_body>` first, then every rule used, in a
    /// deterministic order.
    pub fn finish(self, root_body: &Expr) -> String {
        self.inner.rules.render(root_body)
    }
}

/// The result of [`schema_to_gbnf`].
#[derive(Clone, Debug)]
pub struct Conversion {
    /// The grammar; its `root` matches the valid JSON texts.
    pub gbnf: String,
    /// Constraints dropped (lenient and llama_compat modes only).
    pub warnings: Vec<Warning>,
    /// Keywords that JSON Schema does not define (`readonly`, `x-...`, misspellings), ignored as
    /// the standard says; listed so that a misspelt constraint does not go unseen. Annotations
    /// (`title`, `examples`, `$comment`...) are ignored without a note.
    pub notes: Vec<Warning>,
    /// The schema location each rule stands for, by rule name (document label empty).
    pub rule_locations: Vec<(String, RuleLocation)>,
}

/// The schema as lenient conversion reads it (`options.lenient` is taken as set): every reading
/// the grammar takes ([`Warning::reading`]) applied to a copy, so that a validator checking this
/// schema agrees with the lenient grammar (`type: integer` with `enum: ["1", "2"]` is checked as
/// `enum: [1, 2]`). Constraints lenient mode drops are not dropped here: the validator still
/// checks them. Returns the schema and the readings' warnings.
pub fn read_leniently(
    schema: &Value,
    options: &ConvertOptions,
) -> Result<(Value, Vec<Warning>), SchemaError> {
    let options = ConvertOptions {
        lenient: true,
        ..options.clone()
    };
    let mut c = convert::Converter::new(options);
    c.add_document("", "", schema, false, syntax::KeyStyle::DictKey)?;
    let mut out = schema.clone();
    for reading in c.readings.iter().filter(|r| r.doc == 0) {
        let Some(node) = out.pointer_mut(reading.at.as_str()) else {
            continue;
        };
        match &reading.edit {
            convert::ReadingEdit::Replace(map) => *node = Value::Object(map.clone()),
            convert::ReadingEdit::AdmitProperty(name) => {
                if let Value::Object(object) = node {
                    let properties = object
                        .entry("properties")
                        .or_insert_with(|| Value::Object(serde_json::Map::new()));
                    if let Value::Object(p) = properties {
                        p.entry(name.clone()).or_insert(Value::Bool(true));
                    }
                }
            }
        }
    }
    let warnings = c.warnings.into_iter().filter(|w| w.reading).collect();
    Ok((out, warnings))
}

/// Converts one schema into a complete grammar whose `root` matches exactly its valid values.
pub fn schema_to_gbnf(schema: &Value, options: &ConvertOptions) -> Result<Conversion, SchemaError> {
    let mut c = convert::Converter::new(options.clone());
    let expr = c.add_document("", "", schema, false, syntax::KeyStyle::DictKey)?;
    let warnings = std::mem::take(&mut c.warnings);
    let notes = std::mem::take(&mut c.notes);
    let rule_locations = locations::rule_locations(&c.rules);
    Ok(Conversion {
        rule_locations,
        gbnf: c.rules.render(&expr),
        warnings,
        notes,
    })
}
