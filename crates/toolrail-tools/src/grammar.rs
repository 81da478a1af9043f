//! Tool-call grammars: a discriminated union over a tool set, in every envelope.
//!
//! A tool's name can only be followed by that tool's own arguments (seed 001's fix for the
//! "name of one tool, arguments of another" bug): each tool gets its own rule pairing its quoted
//! name with its arguments rule, and the call rule is the union of those pairs.
//!
//! ```text
//! root ::= call
//! call ::= "{" space "\"name\"" ":" space ( call-get-weather | call-send-messages ) space "}"
//! # tool 'get_weather': Current weather for a city
//! call-get-weather ::= "\"get_weather\"" "," space "\"arguments\"" ":" space args-get-weather
//! ```
//!
//! Arguments of the JSON envelopes (`openai`, `llama3`, `hermes`, `gemma`) come from the JSON Schema
//! converter ([`toolrail_schema`]) applied to [`Tool::arguments_schema`] (objects closed unless the
//! schema says otherwise); the validator checks against the very same schema.
//!
//! `pythonic` calls are `name(arg=value, ...)` with Python literals, from the same converter
//! walk as the JSON envelopes ([`SchemaConverter::with_syntax`] with
//! [`toolrail_schema::LiteralSyntax::Python`], [`SchemaConverter::add_arguments`]): the arguments object is
//! written as keyword arguments with exactly the object rules of JSON (required ones always,
//! optional ones optionally, in any order for small objects as JSON members are,
//! `additionalProperties` as any other identifier), and every value as a Python literal:
//! `True`/`False`, `None`, lists, dicts with double-quoted keys, double-quoted strings with the
//! escapes JSON and Python read alike. Every keyword the converter expresses for JSON holds
//! for Python calls too; what it cannot express is the same error naming keyword and pointer
//! (a warning with `lenient`). The validator reads the call text back into a JSON value
//! ([`crate::envelope`]) and checks it against the same schema.
//!
//! Options: `parallel` (JSON envelopes: a JSON list of one or more calls; others: calls separated
//! by `"\n"`), `auto` (plain text not starting like a call, or the calls), whitespace style
//! (`compact`), `lenient`.

use crate::custom_grammar::{BaseType, CustomGrammar};
use crate::envelope::{CallSyntax, Format, Parallel, Spacing, is_name_char};
use crate::shape::WarningKind;
use crate::toolset::READ_AS;
use crate::toolset::{Tool, ToolSet};
use serde_json::Value;
use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use toolrail_schema::{
    ConvertOptions, Expr, JsonPointer, MemberOrder, RuleName, SchemaConverter, SchemaError,
    Whitespace, is_identifier,
};

/// Options of the tool-call grammar.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GrammarOptions {
    /// The envelope calls are written in.
    pub format: Format,
    /// Allow several calls.
    pub parallel: bool,
    /// Allow plain text (not starting like a call) instead of calls.
    pub auto: bool,
    /// No whitespace at all between JSON tokens (default: none or one space, like llama.cpp).
    pub compact: bool,
    /// Turn unsupported keywords into warnings instead of errors.
    pub lenient: bool,
}

impl Default for GrammarOptions {
    fn default() -> Self {
        Self {
            format: Format::OpenAi,
            parallel: false,
            auto: false,
            compact: false,
            lenient: false,
        }
    }
}

impl GrammarOptions {
    /// The rendering spacing matching these options.
    pub fn spacing(&self) -> Spacing {
        if self.compact {
            Spacing::Compact
        } else {
            Spacing::Spaced
        }
    }
}

/// Why a tool-call grammar could not be built.
#[derive(Debug, thiserror::Error)]
pub enum GrammarError {
    /// The tool set is empty: no call can be written.
    #[error(
        "the tool set is empty: no tool, so no call can be written; give at least one tool definition"
    )]
    Empty,
    /// The converter rejected a tool's arguments schema.
    #[error("tool '{tool}': {error}")]
    Schema {
        /// The tool.
        tool: String,
        /// The converter's error (keyword, pointer, message).
        error: SchemaError,
    },
    /// A tool or argument name cannot be written in this envelope (pythonic calls need
    /// identifier-like names; gemma tool names cannot contain whitespace or `{`).
    #[error("tool '{tool}': name '{name}' cannot be written in {format} calls ({why})")]
    BadName {
        /// The tool.
        tool: String,
        /// The offending tool or argument name.
        name: String,
        /// The envelope.
        format: Format,
        /// What is allowed.
        why: &'static str,
    },
    /// A plain JSON Schema (`grammar --schema`) could not be converted.
    #[error("{0}")]
    PlainSchema(SchemaError),
    /// A plain JSON Schema's `type` names no JSON Schema type (`"str, optional"`); strict
    /// grammars refuse it, lenient ones read it ([`crate::toolset::read_loose_types`]).
    #[error("unsupported: type at {pointer}: {what} (lenient mode reads it as {reading})")]
    PlainTypeName {
        /// JSON pointer of the `type` keyword (`#/...`).
        pointer: String,
        /// What is wrong with it (the value as written).
        what: String,
        /// The reading lenient mode takes.
        reading: String,
    },
    /// A tool's `type` names no JSON Schema type (`"str, optional"`); strict grammars refuse
    /// it, lenient ones use the reading the loader chose
    /// ([`crate::toolset::TypeReading`]), with a warning.
    #[error(
        "tool '{tool}': unsupported: type at {pointer}: {what} (lenient mode reads it as {reading})"
    )]
    TypeName {
        /// The tool.
        tool: String,
        /// JSON pointer of the `type` keyword in the loaded document.
        pointer: String,
        /// What is wrong with it (the value as written).
        what: String,
        /// The reading lenient mode takes.
        reading: String,
    },
}

/// A generated tool-call grammar.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolGrammar {
    /// The GBNF text (`root` first).
    pub text: String,
    /// Warnings (lenient conversions, approximations), each naming a tool or pointer.
    pub warnings: Vec<String>,
    /// For each tool, the rule holding its name-and-arguments pair.
    pub tool_rules: Vec<(String, String)>,
    /// Where in a call each schema rule's text sits, by rule name: lets an error the grammar
    /// finds name a JSON pointer (`expected "name" | "size" at /arguments/sortBy`).
    pub places: BTreeMap<String, GrammarPlace>,
}

/// The place in a call (or a lone JSON value) a grammar rule stands for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GrammarPlace {
    /// The tool whose arguments it is in (none for a lone schema).
    pub tool: Option<String>,
    /// JSON pointer into the call (`/arguments/sortBy`) or the value; `*` for any index or key.
    pub pointer: String,
}

impl std::fmt::Display for GrammarPlace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let pointer = if self.pointer.is_empty() {
            "the top level"
        } else {
            &self.pointer
        };
        match &self.tool {
            Some(tool) => write!(f, "{pointer} in {tool}"),
            None => f.write_str(pointer),
        }
    }
}

/// The places of the rules a converter made: `documents` maps a document label to its tool and
/// the pointer its value sits at in the call.
fn places_of(
    locations: Vec<(String, toolrail_schema::RuleLocation)>,
    documents: &HashMap<String, (Option<String>, String)>,
) -> BTreeMap<String, GrammarPlace> {
    locations
        .into_iter()
        .filter_map(|(rule, location)| {
            let (tool, base) = documents.get(&location.document)?;
            let inner = location.instance_pointer()?;
            Some((
                rule,
                GrammarPlace {
                    tool: tool.clone(),
                    pointer: format!("{base}{inner}"),
                },
            ))
        })
        .collect()
}

/// Builds the GBNF grammar for one JSON Schema value (`toolrail grammar --schema`).
/// A `type` written loosely (`"str, optional"`) is refused strictly and read, with a warning,
/// in lenient mode, as in tool sets.
pub fn schema_grammar(schema: &Value, opts: &GrammarOptions) -> Result<ToolGrammar, GrammarError> {
    let mut read_warnings = Vec::new();
    let read = match crate::toolset::read_loose_types(schema) {
        Some((read, readings)) => {
            if let (Some(first), false) = (readings.first(), opts.lenient) {
                let message = first.to_string();
                let (what, reading) = message.split_once(READ_AS).unwrap_or((&message, "?"));
                return Err(GrammarError::PlainTypeName {
                    pointer: first.pointer.clone(),
                    what: what.to_string(),
                    reading: reading.to_string(),
                });
            }
            read_warnings = readings
                .iter()
                .map(|r| format!("read: type at {}: {r}", r.pointer))
                .collect();
            Some(read)
        }
        None => None,
    };
    let schema = read.as_ref().unwrap_or(schema);
    let conversion = toolrail_schema::schema_to_gbnf(schema, &convert_options(opts, false))
        .map_err(GrammarError::PlainSchema)?;
    Ok(ToolGrammar {
        places: places_of(
            conversion.rule_locations.clone(),
            &HashMap::from([(String::new(), (None, String::new()))]),
        ),
        text: conversion.gbnf,
        warnings: read_warnings
            .into_iter()
            .chain(conversion.warnings.iter().map(|w| w.to_string()))
            .chain(conversion.notes.iter().map(note_text))
            .collect(),
        tool_rules: Vec::new(),
    })
}

/// A keyword the converter ignored because JSON Schema does not define it (it constrains
/// nothing), as a warning line: `ignored: readonly at #/properties/a: ...`.
fn note_text(note: &toolrail_schema::Warning) -> String {
    format!(
        "ignored: {} at {}: {}",
        note.keyword, note.pointer, note.message
    )
}

fn convert_options(opts: &GrammarOptions, close_objects: bool) -> ConvertOptions {
    ConvertOptions {
        whitespace: if opts.compact {
            Whitespace::Compact
        } else {
            Whitespace::Spaced
        },
        member_order: MemberOrder::Any,
        lenient: opts.lenient,
        close_objects,
        llama_compat: false,
    }
}

/// Builds the tool-call grammar for a tool set.
///
/// The envelope's own rules (`call`, `call-<tool>`, `calls`, `plain-text`) are appended
/// after the converter's rules. Their names come from the converter's one rule namespace
/// ([`SchemaConverter::reserve_rule_name`]), so they can never clash with a converter rule, and
/// their bodies are [`Expr`] values printed by the converter's one printer.
pub fn tool_call_grammar(
    tools: &ToolSet,
    opts: &GrammarOptions,
) -> Result<ToolGrammar, GrammarError> {
    if tools.is_empty() {
        return Err(GrammarError::Empty);
    }
    // Objects are closed explicitly in `arguments_schema`, so the converter sees exactly the schema
    // the validator uses.
    let spec = opts.format.spec();
    let mut conv = SchemaConverter::with_syntax(convert_options(opts, false), spec.literals());
    let space_name = conv.space_rule();
    let space = Expr::rule(&space_name);
    let mut out = Emitter::default();
    let mut warnings = Vec::new();
    let mut tool_rules = Vec::new();
    let mut documents = HashMap::new();
    let mut pairs = Vec::new();
    let mut bases: HashMap<BaseType, Expr> = HashMap::new();
    // `"name"` `,` space `"arguments"` `:` space args: the JSON envelopes' name-and-arguments pair
    let json_pair = |name: &str, args: Expr| {
        Expr::seq([
            Expr::literal(json_string(name)),
            Expr::literal(","),
            space.clone(),
            Expr::literal(json_string(opts.format.arguments_key())),
            Expr::literal(":"),
            space.clone(),
            args,
        ])
    };
    // `type` values read loosely when the set was loaded: refused strictly, else warned about
    for w in tools
        .warnings()
        .iter()
        .filter(|w| w.kind == WarningKind::TypeReading)
    {
        if !opts.lenient {
            let (what, reading) = w
                .message
                .split_once(READ_AS)
                .unwrap_or((w.message.as_str(), "?"));
            return Err(GrammarError::TypeName {
                tool: w.tool.clone().unwrap_or_default(),
                pointer: w.pointer.clone(),
                what: what.to_string(),
                reading: reading.to_string(),
            });
        }
        warnings.push(format!("read: type at {}: {}", w.pointer, w.message));
    }
    for tool in tools.tools() {
        check_tool_name(tool, opts.format)?;
        let slug = slug(&tool.name);
        let schema = tool.arguments_schema();
        let pair_name = out.name(&mut conv, &format!("call-{slug}"));
        let base = match spec.call {
            CallSyntax::JsonObject { arguments_key } => {
                JsonPointer::root().with_key(arguments_key).to_string()
            }
            CallSyntax::NameThenJson | CallSyntax::PythonCall => String::new(),
        };
        documents.insert(format!("args-{slug}"), (Some(tool.name.clone()), base));
        let comment = tool_comment(tool);
        if let Some(custom) = &tool.custom_grammar {
            let args = custom_args(tool, custom, &slug, &mut conv, &mut out, &mut bases)?;
            let body = match spec.call {
                CallSyntax::JsonObject { .. } => json_pair(&tool.name, args),
                CallSyntax::NameThenJson => Expr::seq([Expr::literal(&tool.name), args]),
                CallSyntax::PythonCall => Expr::seq([
                    Expr::literal(&tool.name),
                    Expr::literal("("),
                    args,
                    Expr::literal(")"),
                ]),
            };
            out.define(&pair_name, body, Some(&comment));
        } else {
            let schema_args = |conv: &mut SchemaConverter| {
                conv.add_schema(&format!("args-{slug}"), &schema)
                    .map_err(|error| GrammarError::Schema {
                        tool: tool.name.clone(),
                        error,
                    })
            };
            match spec.call {
                CallSyntax::JsonObject { .. } => {
                    let args = schema_args(&mut conv)?;
                    out.define(&pair_name, json_pair(&tool.name, args), Some(&comment));
                }
                CallSyntax::NameThenJson => {
                    let args = schema_args(&mut conv)?;
                    let body = Expr::seq([Expr::literal(&tool.name), args]);
                    out.define(&pair_name, body, Some(&comment));
                }
                CallSyntax::PythonCall => {
                    check_argument_names(tool, &schema)?;
                    let args = conv
                        .add_arguments(&format!("args-{slug}"), &schema)
                        .map_err(|error| GrammarError::Schema {
                            tool: tool.name.clone(),
                            error,
                        })?;
                    let body = Expr::seq([
                        Expr::literal(&tool.name),
                        Expr::literal("("),
                        args,
                        Expr::literal(")"),
                    ]);
                    out.define(&pair_name, body, Some(&comment));
                }
            }
        }
        tool_rules.push((tool.name.clone(), pair_name.to_string()));
        pairs.push(Expr::rule(&pair_name));
    }
    let union = Expr::alt(pairs).ok_or(GrammarError::Empty)?;
    let newline = || Expr::literal("\n");
    let sep = match spec.parallel {
        Parallel::JsonList => Expr::seq([Expr::literal(","), space.clone()]),
        Parallel::Lines => newline(),
    };
    let one = match spec.call {
        CallSyntax::JsonObject { .. } => {
            let call = out.name(&mut conv, "call");
            let body = Expr::seq([
                Expr::literal("{"),
                space.clone(),
                Expr::literal("\"name\""),
                Expr::literal(":"),
                space.clone(),
                union,
                space.clone(),
                Expr::literal("}"),
            ]);
            out.define(&call, body, None);
            if spec.open.is_empty() && spec.close.is_empty() {
                call
            } else {
                // the tags around the JSON call, in a rule of their own
                let block = out.name(&mut conv, "tool-call-block");
                let body = Expr::seq([
                    Expr::literal(spec.open),
                    Expr::rule(&call),
                    Expr::literal(spec.close),
                ]);
                out.define(&block, body, None);
                block
            }
        }
        CallSyntax::NameThenJson => {
            let call = out.name(&mut conv, "call");
            out.define(&call, Expr::seq([Expr::literal(spec.open), union]), None);
            call
        }
        CallSyntax::PythonCall => {
            let call = out.name(&mut conv, "call");
            out.define(&call, union, None);
            call
        }
    };
    let calls = if opts.parallel {
        let name = out.name(&mut conv, "calls");
        let one = Expr::rule(&one);
        let more = Expr::repeat(Expr::seq([sep, one.clone()]), 0, None);
        let body = if opts.format.is_json() {
            Expr::seq([
                Expr::literal("["),
                space.clone(),
                one,
                more,
                space.clone(),
                Expr::literal("]"),
            ])
        } else {
            Expr::seq([one, more])
        };
        out.define(&name, body, None);
        name
    } else {
        one
    };
    let root_body = if opts.auto {
        let text_rule = out.name(&mut conv, "plain-text");
        if spec.call == CallSyntax::PythonCall {
            // Not `identifier(`: what the validator reads as a call, known tool or not.
            let rest = out.name(&mut conv, "plain-text-name");
            let first: &[(char, char)] = &[('a', 'z'), ('A', 'Z'), ('_', '_')];
            let next: &[(char, char)] = &[
                ('a', 'z'),
                ('A', 'Z'),
                ('0', '9'),
                ('_', '_'),
                ('.', '.'),
                ('-', '-'),
            ];
            let not_next: &[(char, char)] = &[
                ('a', 'z'),
                ('A', 'Z'),
                ('0', '9'),
                ('_', '_'),
                ('.', '.'),
                ('(', '('),
                ('-', '-'),
            ];
            out.comment("plain text: anything not starting like a call (a name, then '(')");
            let body = Expr::alt([
                Expr::seq([class(first, true), any_text()]),
                Expr::seq([class(first, false), Expr::rule(&rest)]),
                Expr::Empty,
            ]);
            out.define(&text_rule, body.unwrap_or(Expr::Empty), None);
            let body = Expr::alt([
                Expr::seq([class(next, false), Expr::rule(&rest)]),
                Expr::seq([class(not_next, true), any_text()]),
                Expr::Empty,
            ]);
            out.define(&rest, body.unwrap_or(Expr::Empty), None);
        } else {
            let prefixes = call_prefixes(opts);
            out.comment(&format!(
                "plain text: anything not starting like a call ({})",
                prefixes.join(", ")
            ));
            out.define(&text_rule, not_prefixed(&prefixes), None);
        }
        Expr::alt([Expr::rule(&text_rule), Expr::rule(&calls)]).unwrap_or(Expr::Empty)
    } else {
        Expr::rule(&calls)
    };
    warnings.extend(conv.warnings().iter().map(|w| w.to_string()));
    warnings.extend(conv.notes().iter().map(note_text));
    let places = places_of(conv.rule_locations(), &documents);
    let mut text = conv.finish(&root_body);
    if !text.ends_with('\n') {
        text.push('\n');
    }
    text.push('\n');
    out.render_into(&mut text);
    Ok(ToolGrammar {
        text,
        warnings,
        tool_rules,
        places,
    })
}

/// A character class of `ranges` (in the order given), or of every character outside them.
fn class(ranges: &[(char, char)], negated: bool) -> Expr {
    Expr::Class {
        ranges: ranges.iter().map(|&(a, b)| (a as u32, b as u32)).collect(),
        negated,
    }
}

/// `.*`: any text.
fn any_text() -> Expr {
    Expr::repeat(Expr::AnyChar, 0, None)
}

/// Emits a tool's custom argument grammar with every rule renamed `custom-<tool>-<rule>` (so two
/// tools' rules cannot clash) and the base rules it uses built in the envelope's syntax; returns
/// a reference to the rule its start rule became.
fn custom_args(
    tool: &Tool,
    custom: &CustomGrammar,
    slug: &str,
    conv: &mut SchemaConverter,
    out: &mut Emitter,
    bases: &mut HashMap<BaseType, Expr>,
) -> Result<Expr, GrammarError> {
    let mut names: HashMap<String, Expr> = HashMap::new();
    for base in custom.base_types() {
        let rule = match bases.get(base) {
            Some(rule) => rule.clone(),
            None => {
                // in the envelope's literal syntax (`True`/`False` in pythonic calls)
                let rule = conv
                    .add_schema(&format!("base-{}", base.name()), &base.schema())
                    .map_err(|error| GrammarError::Schema {
                        tool: tool.name.clone(),
                        error,
                    })?;
                bases.insert(*base, rule.clone());
                rule
            }
        };
        names.insert(base.name().to_owned(), rule);
    }
    for name in custom.defined_names() {
        let fresh = out.name(conv, &format!("custom-{slug}-{name}"));
        names.insert(name.clone(), Expr::rule(&fresh));
    }
    out.comment(&format!(
        "tool '{}': its own argument grammar (start rule `{}`)",
        tool.name,
        custom.root()
    ));
    // The user's own rules, parsed and linted when the tool was read, with every rule name
    // replaced by its name in this grammar's namespace (a base type's rule is a reference).
    let text = custom.renamed(&|name| {
        names
            .get(name)
            .map_or_else(|| name.to_owned(), Expr::to_gbnf_item)
    });
    out.verbatim(text.trim_end());
    // the start rule is always one the text defines (`CustomGrammar::root`)
    Ok(names.get(custom.root()).cloned().unwrap_or(Expr::Empty))
}

fn check_tool_name(tool: &Tool, format: Format) -> Result<(), GrammarError> {
    let bad = |why| GrammarError::BadName {
        tool: tool.name.clone(),
        name: tool.name.clone(),
        format,
        why,
    };
    match format.spec().call {
        CallSyntax::PythonCall
            if !tool.name.chars().all(is_name_char)
                || !tool
                    .name
                    .chars()
                    .next()
                    .is_some_and(|c| c.is_ascii_alphabetic() || c == '_') =>
        {
            Err(bad(
                "ASCII letters, digits, '_', '.' and '-' only, starting with a letter or '_'",
            ))
        }
        CallSyntax::NameThenJson if tool.name.chars().any(|c| c.is_whitespace() || c == '{') => {
            Err(bad("no whitespace or '{'"))
        }
        _ => Ok(()),
    }
}

/// A pythonic tool's declared argument names must be Python identifiers (the converter says
/// so too, with a pointer, for names deeper in `anyOf`/`allOf`/`$ref`).
fn check_argument_names(tool: &Tool, schema: &Value) -> Result<(), GrammarError> {
    if let Some(props) = schema.get("properties").and_then(Value::as_object)
        && let Some(bad) = props.keys().find(|k| !is_identifier(k))
    {
        return Err(GrammarError::BadName {
            tool: tool.name.clone(),
            name: bad.clone(),
            format: Format::Pythonic,
            why: "keyword arguments must be Python identifiers",
        });
    }
    Ok(())
}

/// The texts a call starts with, for the `auto` option's "plain text" branch.
fn call_prefixes(opts: &GrammarOptions) -> Vec<String> {
    opts.format
        .spec()
        .starts
        .iter()
        .map(|s| (*s).to_owned())
        .collect()
}

/// An expression matching every text that does not start with one of `prefixes` (including the
/// empty text and proper prefixes of them): a trie of the prefixes, complemented.
fn not_prefixed(prefixes: &[String]) -> Expr {
    #[derive(Default)]
    struct Node {
        end: bool,
        children: BTreeMap<char, Node>,
    }
    let mut root = Node::default();
    for p in prefixes {
        let mut n = &mut root;
        for c in p.chars() {
            n = n.children.entry(c).or_default();
        }
        n.end = true;
    }
    fn expr(node: &Node) -> Expr {
        let next: Vec<(char, char)> = node.children.keys().map(|&c| (c, c)).collect();
        let mut alts = vec![Expr::seq([class(&next, true), any_text()])];
        for (c, child) in &node.children {
            if !child.end {
                alts.push(Expr::seq([Expr::literal(c.to_string()), expr(child)]));
            }
        }
        alts.push(Expr::Empty);
        Expr::alt(alts).unwrap_or(Expr::Empty)
    }
    expr(&root)
}

fn tool_comment(tool: &Tool) -> String {
    let desc: String = tool
        .description
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    let desc: String = desc.chars().take(100).collect();
    if desc.is_empty() {
        format!("tool '{}'", tool.name)
    } else {
        format!("tool '{}': {desc}", tool.name)
    }
}

fn json_string(s: &str) -> String {
    Value::String(s.to_owned()).to_string()
}

/// A rule name fragment from a tool name: `[a-zA-Z0-9-]` only.
fn slug(name: &str) -> String {
    let mut s: String = name
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    while s.contains("--") {
        s = s.replace("--", "-");
    }
    let s = s.trim_matches('-').to_owned();
    if s.is_empty() { "tool".into() } else { s }
}

/// One entry of the envelope's part of the grammar.
enum Item {
    /// A rule built as an expression.
    Rule {
        /// Its name, from the converter's namespace.
        name: RuleName,
        /// Its body.
        body: Expr,
    },
    /// A comment line.
    Comment(String),
    /// Rules written as text: a tool's own argument grammar (the user's rules, renamed).
    Text(String),
}

/// Our own rules, appended after the converter's, named in the converter's namespace.
#[derive(Default)]
struct Emitter {
    items: Vec<Item>,
}

impl Emitter {
    /// A name for an envelope rule, unique among every rule of the grammar.
    fn name(&mut self, conv: &mut SchemaConverter, hint: &str) -> RuleName {
        conv.reserve_rule_name(hint)
    }

    /// Defines the rule `name` (reserved with [`Emitter::name`]), after a comment line.
    fn define(&mut self, name: &RuleName, body: Expr, comment: Option<&str>) {
        if let Some(c) = comment {
            self.comment(c);
        }
        self.items.push(Item::Rule {
            name: name.clone(),
            body,
        });
    }

    /// A comment line: line breaks become spaces and control characters visible escapes
    /// (a tool description may carry terminal escapes; the grammar is printed on terminals).
    fn comment(&mut self, c: &str) {
        let line = c.replace('\n', " ");
        let safe = toolrail_gbnf::terminal_safe(&line).into_owned();
        self.items.push(Item::Comment(safe));
    }

    /// Rules written as text (see [`Item::Text`]), raw control characters as GBNF escapes (the
    /// same grammar, safe to print on a terminal).
    fn verbatim(&mut self, text: &str) {
        let safe = toolrail_gbnf::terminal_safe_gbnf(text).into_owned();
        self.items.push(Item::Text(safe));
    }

    /// Appends every entry, one line each (a text entry as its lines).
    fn render_into(&self, out: &mut String) {
        for item in &self.items {
            match item {
                Item::Rule { name, body } => {
                    let _ = writeln!(out, "{name} ::= {}", body.to_gbnf());
                }
                Item::Comment(c) => {
                    let _ = writeln!(out, "# {c}");
                }
                Item::Text(text) => {
                    out.push_str(text);
                    out.push('\n');
                }
            }
        }
    }
}
