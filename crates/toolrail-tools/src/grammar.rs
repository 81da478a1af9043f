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
//! `pythonic` calls are `name(arg=value, ...)` with Python literals. Arguments are written as
//! keyword arguments **in the schema's declared property order**: required ones always, optional
//! ones optionally, separated by `","` and the whitespace rule. (The validator accepts any order,
//! since Python keyword arguments mean the same in any order; everything the grammar accepts, it
//! accepts.) Values follow the schema: `True`/`False`, `None`, lists, dicts with double-quoted keys,
//! enum/const values as Python literals; strings and numbers reuse the converter's JSON rules
//! (JSON string and number syntax is valid Python), so `pattern`, `format`, length and range
//! keywords hold there too. Keywords the pythonic builder cannot express exactly are an error
//! naming the keyword and pointer (a warning with `lenient`).
//!
//! Options: `parallel` (JSON envelopes: a JSON list of one or more calls; others: calls separated
//! by `"\n"`), `auto` (plain text not starting like a call, or the calls), whitespace style
//! (`compact`), `lenient`.

use crate::custom_grammar::{BaseType, CustomGrammar};
use crate::envelope::{Format, Spacing, is_name_char, write_python};
use crate::toolset::{Tool, ToolSet, escape_pointer};
use serde_json::{Map, Value};
use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use toolrail_schema::{
    ConvertOptions, Expr, MemberOrder, RuleName, SchemaConverter, SchemaError, Whitespace,
    gbnf_literal,
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
    /// The pythonic builder cannot express a keyword exactly.
    #[error("tool '{tool}', {pointer}: unsupported in pythonic calls: {keyword} ({message})")]
    Unsupported {
        /// The tool.
        tool: String,
        /// JSON pointer into the tool's parameters schema.
        pointer: String,
        /// The keyword.
        keyword: String,
        /// Why.
        message: String,
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
pub fn schema_grammar(schema: &Value, opts: &GrammarOptions) -> Result<ToolGrammar, GrammarError> {
    let conversion = toolrail_schema::schema_to_gbnf(schema, &convert_options(opts, false))
        .map_err(GrammarError::PlainSchema)?;
    Ok(ToolGrammar {
        places: places_of(
            conversion.rule_locations.clone(),
            &HashMap::from([(String::new(), (None, String::new()))]),
        ),
        text: conversion.gbnf,
        warnings: conversion
            .warnings
            .iter()
            .map(|w| w.to_string())
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
/// The envelope's own rules (`call`, `call-<tool>`, `calls`, `plain-text`, `py-…`) are appended
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
    let mut conv = SchemaConverter::new(convert_options(opts, false));
    let space_name = conv.space_rule();
    let space = Expr::rule(&space_name);
    let mut out = Emitter::default();
    let mut warnings = Vec::new();
    let mut tool_rules = Vec::new();
    let mut documents = HashMap::new();
    let mut pairs = Vec::new();
    let mut py = PyBuilder::new(space_name.to_string(), opts.lenient);
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
    for tool in tools.tools() {
        check_tool_name(tool, opts.format)?;
        let slug = slug(&tool.name);
        let schema = tool.arguments_schema();
        let pair_name = out.name(&mut conv, &format!("call-{slug}"));
        let base = match opts.format {
            Format::OpenAi | Format::Llama3 | Format::Hermes => {
                format!("/{}", opts.format.arguments_key())
            }
            _ => String::new(),
        };
        if opts.format != Format::Pythonic {
            documents.insert(format!("args-{slug}"), (Some(tool.name.clone()), base));
        }
        let comment = tool_comment(tool);
        if let Some(custom) = &tool.custom_grammar {
            let args = custom_args(tool, custom, &slug, opts, &mut conv, &mut out, &mut bases)?;
            let body = match opts.format {
                Format::OpenAi | Format::Llama3 | Format::Hermes => json_pair(&tool.name, args),
                Format::Gemma => Expr::seq([Expr::literal(&tool.name), args]),
                Format::Pythonic => Expr::seq([
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
            match opts.format {
                Format::OpenAi | Format::Llama3 | Format::Hermes => {
                    let args = schema_args(&mut conv)?;
                    out.define(&pair_name, json_pair(&tool.name, args), Some(&comment));
                }
                Format::Gemma => {
                    let args = schema_args(&mut conv)?;
                    let body = Expr::seq([Expr::literal(&tool.name), args]);
                    out.define(&pair_name, body, Some(&comment));
                }
                Format::Pythonic => {
                    // The keyword arguments are the pythonic value builder's text (see
                    // `Emitter::rule`), so this one pair rule is written as text too.
                    let kwargs = py.kwargs(tool, &schema, &mut conv, &mut out)?;
                    let name = Expr::literal(&tool.name).to_gbnf();
                    let body = if kwargs.is_empty() {
                        format!("{name} \"()\"")
                    } else {
                        format!("{name} \"(\" {kwargs} \")\"")
                    };
                    out.comment(&comment);
                    out.rule(pair_name.as_str(), &body);
                }
            }
        }
        tool_rules.push((tool.name.clone(), pair_name.to_string()));
        pairs.push(Expr::rule(&pair_name));
    }
    warnings.append(&mut py.warnings);
    let union = Expr::alt(pairs).ok_or(GrammarError::Empty)?;
    let newline = || Expr::literal("\n");
    let (sep, one) = match opts.format {
        Format::OpenAi | Format::Llama3 | Format::Hermes => {
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
            if opts.format == Format::Hermes {
                let block = out.name(&mut conv, "tool-call-block");
                let body = Expr::seq([
                    Expr::literal("<tool_call>\n"),
                    Expr::rule(&call),
                    Expr::literal("\n</tool_call>"),
                ]);
                out.define(&block, body, None);
                (newline(), block)
            } else {
                (Expr::seq([Expr::literal(","), space.clone()]), call)
            }
        }
        Format::Gemma => {
            let call = out.name(&mut conv, "call");
            out.define(&call, Expr::seq([Expr::literal("call:"), union]), None);
            (newline(), call)
        }
        Format::Pythonic => {
            let call = out.name(&mut conv, "call");
            out.define(&call, union, None);
            (newline(), call)
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
        if opts.format == Format::Pythonic {
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
    opts: &GrammarOptions,
    conv: &mut SchemaConverter,
    out: &mut Emitter,
    bases: &mut HashMap<BaseType, Expr>,
) -> Result<Expr, GrammarError> {
    let mut names: HashMap<String, Expr> = HashMap::new();
    for base in custom.base_types() {
        let rule = match bases.get(base) {
            Some(rule) => rule.clone(),
            None => {
                let rule = if opts.format == Format::Pythonic && *base == BaseType::Bool {
                    let rule = out.name(conv, "py-bool");
                    let body = Expr::alt([Expr::literal("True"), Expr::literal("False")]);
                    out.define(&rule, body.unwrap_or(Expr::Empty), None);
                    Expr::rule(&rule)
                } else {
                    conv.add_schema(&format!("base-{}", base.name()), &base.schema())
                        .map_err(|error| GrammarError::Schema {
                            tool: tool.name.clone(),
                            error,
                        })?
                };
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
    match format {
        Format::Pythonic
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
        Format::Gemma if tool.name.chars().any(|c| c.is_whitespace() || c == '{') => {
            Err(bad("no whitespace or '{'"))
        }
        _ => Ok(()),
    }
}

/// True when `name` is a Python identifier (ASCII): usable as a keyword argument.
fn is_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// The texts a call starts with, for the `auto` option's "plain text" branch.
fn call_prefixes(opts: &GrammarOptions) -> Vec<String> {
    match opts.format {
        // Both, whatever `parallel` says: the validator reads `[` as a list of calls.
        Format::OpenAi | Format::Llama3 => vec!["{".into(), "[".into()],
        Format::Hermes => vec!["<tool_call>".into()],
        Format::Gemma => vec!["call:".into()],
        Format::Pythonic => Vec::new(),
    }
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

/// A character inside a class written as text (the pythonic value builder's key rules).
fn class_char(c: char) -> String {
    match c {
        // llama.cpp knows `\\ \] \[ \-` but not `\^`: hex for that one.
        '\\' | ']' | '[' | '-' => format!("\\{c}"),
        '^' => "\\x5E".to_owned(),
        c if (c as u32) < 0x20 || c as u32 == 0x7f => format!("\\x{:02X}", c as u32),
        c => c.to_string(),
    }
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
    /// Rules written as text: a tool's own argument grammar (the user's rules, renamed) and,
    /// until the converter's walker replaces it, the pythonic value builder's rules.
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

    fn comment(&mut self, c: &str) {
        self.items.push(Item::Comment(c.replace('\n', " ")));
    }

    /// Rules written as text (see [`Item::Text`]).
    fn verbatim(&mut self, text: &str) {
        self.items.push(Item::Text(text.to_owned()));
    }

    /// A rule name for the pythonic value builder, which writes its rules as text.
    fn fresh(&mut self, conv: &mut SchemaConverter, hint: &str) -> String {
        conv.reserve_rule_name(hint).into()
    }

    /// A rule of the pythonic value builder, written as text.
    fn rule(&mut self, name: &str, body: &str) {
        self.verbatim(&format!("{name} ::= {}", body.trim_end()));
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

/// Keywords that never constrain values.
const ANNOTATIONS: &[&str] = &[
    "description",
    "title",
    "default",
    "examples",
    "example",
    "$comment",
    "$schema",
    "$id",
    "$anchor",
    "deprecated",
    "readOnly",
    "writeOnly",
    "$defs",
    "definitions",
];

const STRING_KEYWORDS: &[&str] = &[
    "minLength",
    "maxLength",
    "pattern",
    "format",
    "contentEncoding",
    "contentMediaType",
];
const NUMBER_KEYWORDS: &[&str] = &[
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
];

/// How object keys are written in pythonic calls.
#[derive(Clone, Copy)]
enum KeyStyle {
    /// `name=` (the call's keyword arguments).
    Kwarg,
    /// `"name": ` (a dict literal).
    DictKey,
}

/// Builds Python-literal value rules.
struct PyBuilder {
    space: String,
    lenient: bool,
    warnings: Vec<String>,
    generic: Option<String>,
    /// The rule for any Python string literal, once built.
    py_string: Option<String>,
    /// Rules built for `$ref` targets, by (tool, ref).
    refs: HashMap<(String, String), String>,
    /// Converter rules for string/number leaves, by the leaf schema's JSON text.
    leaves: HashMap<String, String>,
}

struct Ctx<'a> {
    tool: &'a str,
    root: &'a Value,
}

impl PyBuilder {
    fn new(space: String, lenient: bool) -> Self {
        Self {
            space,
            lenient,
            warnings: Vec::new(),
            generic: None,
            py_string: None,
            refs: HashMap::new(),
            leaves: HashMap::new(),
        }
    }

    fn unsupported(
        &mut self,
        ctx: &Ctx<'_>,
        pointer: &str,
        keyword: &str,
        message: &str,
    ) -> Result<(), GrammarError> {
        if self.lenient {
            self.warnings.push(format!(
                "tool '{}', {pointer}: {keyword} not enforced in pythonic calls ({message})",
                ctx.tool
            ));
            Ok(())
        } else {
            Err(GrammarError::Unsupported {
                tool: ctx.tool.to_owned(),
                pointer: pointer.to_owned(),
                keyword: keyword.to_owned(),
                message: message.to_owned(),
            })
        }
    }

    /// The keyword arguments of a tool: an expression (not a rule) to put between the parentheses.
    fn kwargs(
        &mut self,
        tool: &Tool,
        schema: &Value,
        conv: &mut SchemaConverter,
        out: &mut Emitter,
    ) -> Result<String, GrammarError> {
        let ctx = Ctx {
            tool: &tool.name,
            root: schema,
        };
        let obj = schema.as_object().cloned().unwrap_or_default();
        for key in obj.keys() {
            let k = key.as_str();
            if ANNOTATIONS.contains(&k)
                || matches!(
                    k,
                    "type" | "properties" | "required" | "additionalProperties"
                )
            {
                continue;
            }
            self.unsupported(&ctx, "", k, "keyword on the arguments object")?;
        }
        if let Some(props) = obj.get("properties").and_then(Value::as_object)
            && let Some(bad) = props.keys().find(|k| !is_identifier(k))
        {
            return Err(GrammarError::BadName {
                tool: tool.name.clone(),
                name: bad.clone(),
                format: Format::Pythonic,
                why: "keyword arguments must be Python identifiers",
            });
        }
        let slug = slug(&tool.name);
        self.entries(&ctx, &obj, "", &slug, conv, out, KeyStyle::Kwarg)
    }

    /// The sequence of `key value` entries of an object, in declared order, keys written as
    /// keyword arguments (`a=`) or dict keys (`"a": `).
    #[allow(clippy::too_many_arguments)]
    fn entries(
        &mut self,
        ctx: &Ctx<'_>,
        obj: &Map<String, Value>,
        pointer: &str,
        hint: &str,
        conv: &mut SchemaConverter,
        out: &mut Emitter,
        style: KeyStyle,
    ) -> Result<String, GrammarError> {
        let required: Vec<&str> = obj
            .get("required")
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let empty = Map::new();
        let props = obj
            .get("properties")
            .and_then(Value::as_object)
            .unwrap_or(&empty);
        let additional = obj.get("additionalProperties");
        let closed = matches!(additional, Some(Value::Bool(false)));
        for r in &required {
            if !props.contains_key(*r) && closed {
                self.unsupported(
                    ctx,
                    pointer,
                    "required",
                    &format!("'{r}' is required but the object admits no such key"),
                )?;
            }
        }
        let space = self.space.clone();
        let sep = format!("\",\" {space}");
        let key = |k: &str| match style {
            KeyStyle::Kwarg => gbnf_literal(&format!("{k}=")),
            KeyStyle::DictKey => {
                format!("{} {space}", gbnf_literal(&format!("{}:", json_string(k))))
            }
        };
        // Values of undeclared members (also of required names missing from `properties`).
        let extra_value = if closed {
            None
        } else {
            Some(match additional {
                Some(s @ Value::Object(_)) => self.value(
                    ctx,
                    s,
                    &format!("{pointer}/additionalProperties"),
                    &format!("{hint}-extra"),
                    conv,
                    out,
                )?,
                _ => self.generic(conv, out),
            })
        };
        let mut items: Vec<(String, bool)> = Vec::new();
        let mut declared: Vec<String> = Vec::new();
        for (name, sub) in props {
            let p = format!("{pointer}/properties/{}", escape_pointer(name));
            let v = self.value(ctx, sub, &p, &format!("{hint}-{}", slug(name)), conv, out)?;
            items.push((
                format!("{} {v}", key(name)),
                required.contains(&name.as_str()),
            ));
            declared.push(name.clone());
        }
        if let Some(v) = &extra_value {
            for r in &required {
                if !props.contains_key(*r) && !declared.iter().any(|d| d == r) {
                    items.push((format!("{} {v}", key(r)), true));
                    declared.push((*r).to_owned());
                }
            }
        }
        // Undeclared members come after the declared ones, with keys that are none of them.
        let (tail_written, tail_empty) = match &extra_value {
            None => (String::new(), "\"\"".to_owned()),
            Some(v) => {
                let k = self.excluded_key(ctx, pointer, &declared, style, hint, conv, out)?;
                let kv = match style {
                    KeyStyle::DictKey => format!("{k} \":\" {space} {v}"),
                    KeyStyle::Kwarg => format!("{k} {v}"),
                };
                (
                    format!("( {sep} {kv} )*"),
                    format!("( {kv} ( {sep} {kv} )* )?"),
                )
            }
        };
        if items.is_empty() {
            return Ok(tail_empty);
        }
        // start(i): nothing written yet; after(i): something written, each item needs `sep`.
        let after = |i: usize| -> String {
            let mut parts: Vec<String> = items[i..]
                .iter()
                .map(|(kv, req)| {
                    if *req {
                        format!("{sep} {kv}")
                    } else {
                        format!("( {sep} {kv} )?")
                    }
                })
                .collect();
            if !tail_written.is_empty() {
                parts.push(tail_written.clone());
            }
            parts.join(" ")
        };
        let mut start = String::new();
        let mut closing = 0usize;
        for (i, (kv, req)) in items.iter().enumerate() {
            let rest = after(i + 1);
            let seq = if rest.is_empty() {
                kv.clone()
            } else {
                format!("{kv} {rest}")
            };
            if *req {
                start.push_str(&seq);
                break;
            }
            start.push_str(&format!("( {seq} | "));
            closing += 1;
            if i + 1 == items.len() {
                start.push_str(&tail_empty);
            }
        }
        for _ in 0..closing {
            start.push_str(" )");
        }
        Ok(start)
    }

    /// A rule for the key of an undeclared member (with its `=` for keyword arguments): any key
    /// except the `declared` names. Dict keys are JSON strings without `\\u` or `\\/` escapes,
    /// so no other spelling can denote a declared name; keyword names are Python identifiers.
    // the converter (for rule names) travels beside the emitter, as in every builder method
    #[allow(clippy::too_many_arguments)]
    fn excluded_key(
        &mut self,
        ctx: &Ctx<'_>,
        pointer: &str,
        declared: &[String],
        style: KeyStyle,
        hint: &str,
        conv: &mut SchemaConverter,
        out: &mut Emitter,
    ) -> Result<String, GrammarError> {
        #[derive(Default)]
        struct Node {
            end: bool,
            children: BTreeMap<char, Node>,
        }
        let mut root = Node::default();
        for name in declared {
            let ok = match style {
                KeyStyle::Kwarg => is_identifier(name),
                KeyStyle::DictKey => !name.chars().any(|c| c == '"' || c == '\\' || c < ' '),
            };
            if !ok {
                self.unsupported(
                    ctx,
                    pointer,
                    "properties",
                    &format!("cannot exclude the key {name:?} from undeclared members"),
                )?;
                continue;
            }
            let mut n = &mut root;
            for c in name.chars() {
                n = n.children.entry(c).or_default();
            }
            n.end = true;
        }
        let name = out.fresh(conv, &format!("{hint}-extra-key"));
        let body = match style {
            KeyStyle::DictKey => {
                let ch = "[^\"\\\\\\x00-\\x1F]";
                let esc = "\"\\\\\" [\"\\\\bfnrt]";
                let rest = format!("( {ch} | {esc} )* \"\\\"\"");
                fn expr(node: &Node, rest: &str, esc: &str) -> String {
                    let mut alts = Vec::new();
                    if !node.end {
                        alts.push("\"\\\"\"".to_owned());
                    }
                    let kids: String = node.children.keys().map(|&c| class_char(c)).collect();
                    alts.push(format!("( [^\"\\\\\\x00-\\x1F{kids}] | {esc} ) {rest}"));
                    for (c, child) in &node.children {
                        alts.push(format!(
                            "{} {}",
                            gbnf_literal(&c.to_string()),
                            expr(child, rest, esc)
                        ));
                    }
                    format!("( {} )", alts.join(" | "))
                }
                format!("\"\\\"\" {}", expr(&root, &rest, esc))
            }
            KeyStyle::Kwarg => {
                fn class_without(chars: &str, kids: &BTreeMap<char, Node>) -> String {
                    let keep: String = chars.chars().filter(|c| !kids.contains_key(c)).collect();
                    if keep.is_empty() {
                        String::new()
                    } else {
                        format!("[{keep}]")
                    }
                }
                const FIRST: &str = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_";
                const NEXT: &str =
                    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_";
                fn expr(node: &Node, first: bool) -> String {
                    let mut alts = Vec::new();
                    if !node.end && !first {
                        alts.push("\"=\"".to_owned());
                    }
                    let class = class_without(if first { FIRST } else { NEXT }, &node.children);
                    if !class.is_empty() {
                        alts.push(format!("{class} [a-zA-Z0-9_]* \"=\""));
                    }
                    for (c, child) in &node.children {
                        alts.push(format!(
                            "{} {}",
                            gbnf_literal(&c.to_string()),
                            expr(child, false)
                        ));
                    }
                    format!("( {} )", alts.join(" | "))
                }
                expr(&root, true)
            }
        };
        out.comment(&format!(
            "keys other than {}",
            declared
                .iter()
                .map(|d| format!("'{d}'"))
                .collect::<Vec<_>>()
                .join(", ")
        ));
        out.rule(&name, &body);
        Ok(name)
    }

    fn generic(&mut self, conv: &mut SchemaConverter, out: &mut Emitter) -> String {
        if let Some(g) = &self.generic {
            return g.clone();
        }
        let s = self.space.clone();
        let value = out.fresh(conv, "py-value");
        let list = out.fresh(conv, "py-list");
        let dict = out.fresh(conv, "py-dict");
        let string = self.generic_string(conv, out);
        let number = out.fresh(conv, "py-number");
        out.comment("any Python literal");
        out.rule(
            &value,
            &format!("{string} | {number} | \"True\" | \"False\" | \"None\" | {list} | {dict}"),
        );
        out.rule(
            &list,
            &format!("\"[\" {s} ( {value} ( \",\" {s} {value} )* )? \"]\""),
        );
        out.rule(
            &dict,
            &format!(
                "\"{{\" {s} ( {string} \":\" {s} {value} ( \",\" {s} {string} \":\" {s} {value} )* )? \"}}\""
            ),
        );
        out.rule(
            &number,
            "\"-\"? ( [0-9] | [1-9] [0-9]{1,15} ) ( \".\" [0-9]{1,16} )? ( [eE] [-+]? [0-9]{1,3} )?",
        );
        self.generic = Some(value.clone());
        value
    }

    fn generic_string(&mut self, conv: &mut SchemaConverter, out: &mut Emitter) -> String {
        if let Some(name) = &self.py_string {
            return name.clone();
        }
        let name = out.fresh(conv, "py-string");
        out.rule(
            &name,
            "\"\\\"\" ( [^\"\\\\\\x7F\\x00-\\x1F] | \"\\\\\" ( [\"\\\\/bfnrt] | \"u\" [0-9a-fA-F]{4} ) )* \"\\\"\"",
        );
        self.py_string = Some(name.clone());
        name
    }

    /// A rule (or expression) for a Python literal satisfying `schema`.
    fn value(
        &mut self,
        ctx: &Ctx<'_>,
        schema: &Value,
        pointer: &str,
        hint: &str,
        conv: &mut SchemaConverter,
        out: &mut Emitter,
    ) -> Result<String, GrammarError> {
        let obj = match schema {
            Value::Bool(true) => return Ok(self.generic(conv, out)),
            Value::Bool(false) => {
                self.unsupported(ctx, pointer, "false", "a schema that accepts nothing")?;
                return Ok(self.generic(conv, out));
            }
            Value::Object(o) => o,
            _ => return Ok(self.generic(conv, out)),
        };
        if let Some(Value::String(r)) = obj.get("$ref") {
            return self.reference(ctx, r, pointer, conv, out);
        }
        if let Some(c) = obj.get("const") {
            return Ok(literal_alts(std::slice::from_ref(c)));
        }
        if let Some(Value::Array(values)) = obj.get("enum") {
            if values.is_empty() {
                self.unsupported(ctx, &format!("{pointer}/enum"), "enum", "an empty enum")?;
                return Ok(self.generic(conv, out));
            }
            return Ok(literal_alts(values));
        }
        for key in ["anyOf", "oneOf"] {
            if let Some(Value::Array(alts)) = obj.get(key) {
                if key == "oneOf" {
                    self.warnings.push(format!(
                        "tool '{}', {pointer}: oneOf is treated as anyOf in pythonic calls",
                        ctx.tool
                    ));
                }
                let mut parts = Vec::new();
                for (i, a) in alts.iter().enumerate() {
                    let merged = merge_siblings(obj, a, key);
                    parts.push(self.value(
                        ctx,
                        &merged,
                        &format!("{pointer}/{key}/{i}"),
                        &format!("{hint}-{i}"),
                        conv,
                        out,
                    )?);
                }
                let name = out.fresh(conv, hint);
                out.rule(&name, &parts.join(" | "));
                return Ok(name);
            }
        }
        if let Some(Value::Array(all)) = obj.get("allOf") {
            if all.len() == 1 {
                let merged = merge_siblings(obj, &all[0], "allOf");
                return self.value(ctx, &merged, &format!("{pointer}/allOf/0"), hint, conv, out);
            }
            self.unsupported(ctx, pointer, "allOf", "several allOf members")?;
        }
        let types: Vec<String> = match obj.get("type") {
            Some(Value::String(t)) => vec![t.clone()],
            Some(Value::Array(ts)) => ts
                .iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect(),
            _ => infer_types(obj),
        };
        let known: &[&str] = &[
            "type", "enum", "const", "anyOf", "oneOf", "allOf", "$ref", "nullable",
        ];
        for key in obj.keys() {
            let k = key.as_str();
            let relevant = ANNOTATIONS.contains(&k)
                || known.contains(&k)
                || STRING_KEYWORDS.contains(&k)
                || NUMBER_KEYWORDS.contains(&k)
                || matches!(
                    k,
                    "properties"
                        | "required"
                        | "additionalProperties"
                        | "items"
                        | "prefixItems"
                        | "minItems"
                        | "maxItems"
                );
            if !relevant {
                self.unsupported(ctx, &format!("{pointer}/{k}"), k, "keyword")?;
            }
        }
        if types.is_empty() {
            return Ok(self.generic(conv, out));
        }
        let mut parts = Vec::new();
        for t in &types {
            let part = match t.as_str() {
                "null" => "\"None\"".to_owned(),
                "boolean" => "( \"True\" | \"False\" )".to_owned(),
                "string" | "number" | "integer" => {
                    let allowed: &[&str] = if t == "string" {
                        STRING_KEYWORDS
                    } else {
                        NUMBER_KEYWORDS
                    };
                    let mut leaf = Map::new();
                    leaf.insert("type".into(), Value::String(t.clone()));
                    for (k, v) in obj {
                        if allowed.contains(&k.as_str()) {
                            leaf.insert(k.clone(), v.clone());
                        }
                    }
                    let leaf = Value::Object(leaf);
                    let memo_key = leaf.to_string();
                    match self.leaves.get(&memo_key) {
                        Some(rule) => rule.clone(),
                        None => {
                            let leaf_hint = if leaf.as_object().is_some_and(|m| m.len() == 1) {
                                format!("py-{t}-value")
                            } else {
                                format!("py-{hint}-{t}")
                            };
                            let rule = conv
                                .add_schema(&leaf_hint, &leaf)
                                .map_err(|error| GrammarError::Schema {
                                    tool: ctx.tool.to_owned(),
                                    error: pointed(error, pointer),
                                })?
                                .to_gbnf_item();
                            self.leaves.insert(memo_key, rule.clone());
                            rule
                        }
                    }
                }
                "array" => self.array(ctx, obj, pointer, hint, conv, out)?,
                "object" => {
                    let s = self.space.clone();
                    let entries =
                        self.entries(ctx, obj, pointer, hint, conv, out, KeyStyle::DictKey)?;
                    let name = out.fresh(conv, hint);
                    out.rule(&name, &format!("\"{{\" {s} {entries} {s} \"}}\""));
                    name
                }
                other => {
                    self.unsupported(ctx, &format!("{pointer}/type"), "type", other)?;
                    self.generic(conv, out)
                }
            };
            parts.push(part);
        }
        if parts.len() == 1 {
            return Ok(parts.remove(0));
        }
        Ok(format!("( {} )", parts.join(" | ")))
    }

    fn array(
        &mut self,
        ctx: &Ctx<'_>,
        obj: &Map<String, Value>,
        pointer: &str,
        hint: &str,
        conv: &mut SchemaConverter,
        out: &mut Emitter,
    ) -> Result<String, GrammarError> {
        let s = self.space.clone();
        let min = obj.get("minItems").and_then(Value::as_u64).unwrap_or(0) as usize;
        let max = obj
            .get("maxItems")
            .and_then(Value::as_u64)
            .map(|m| m as usize);
        let mut prefix = Vec::new();
        if let Some(Value::Array(pi)) = obj.get("prefixItems") {
            for (i, sub) in pi.iter().enumerate() {
                prefix.push(self.value(
                    ctx,
                    sub,
                    &format!("{pointer}/prefixItems/{i}"),
                    &format!("{hint}-{i}"),
                    conv,
                    out,
                )?);
            }
        }
        let item = match obj.get("items") {
            Some(Value::Bool(false)) => None,
            Some(Value::Array(_)) => {
                self.unsupported(ctx, &format!("{pointer}/items"), "items", "array form")?;
                Some(self.generic(conv, out))
            }
            Some(sub) => Some(self.value(
                ctx,
                sub,
                &format!("{pointer}/items"),
                &format!("{hint}-item"),
                conv,
                out,
            )?),
            None => Some(self.generic(conv, out)),
        };
        if !prefix.is_empty() && (min > 0 || max.is_some()) {
            self.unsupported(ctx, pointer, "minItems", "bounds together with prefixItems")?;
        }
        let sep = format!("\",\" {s}");
        let body = if !prefix.is_empty() {
            // Prefix items: all of them, possibly fewer (a prefix), then more items.
            let mut seq = String::new();
            let mut close = 0;
            for (i, p) in prefix.iter().enumerate() {
                if i == 0 {
                    seq.push_str(&format!("( {p} "));
                } else {
                    seq.push_str(&format!("( {sep} {p} "));
                }
                close += 1;
            }
            if let Some(item) = &item {
                seq.push_str(&format!("( {sep} {item} )* "));
            }
            for _ in 0..close {
                seq.push_str(")? ");
            }
            seq
        } else if let Some(item) = &item {
            match (min, max) {
                (0, None) => format!("( {item} ( {sep} {item} )* )?"),
                (1, None) => format!("{item} ( {sep} {item} )*"),
                (m, None) => format!("{item} ( {sep} {item} ){{{},}}", m - 1),
                (0, Some(0)) => String::new(),
                (0, Some(n)) => format!("( {item} ( {sep} {item} ){{0,{}}} )?", n - 1),
                (m, Some(n)) => format!(
                    "{item} ( {sep} {item} ){{{},{}}}",
                    m - 1,
                    n.saturating_sub(1).max(m - 1)
                ),
            }
        } else {
            String::new()
        };
        let name = out.fresh(conv, hint);
        out.rule(&name, &format!("\"[\" {s} {body} {s} \"]\""));
        Ok(name)
    }

    fn reference(
        &mut self,
        ctx: &Ctx<'_>,
        reference: &str,
        pointer: &str,
        conv: &mut SchemaConverter,
        out: &mut Emitter,
    ) -> Result<String, GrammarError> {
        let key = (ctx.tool.to_owned(), reference.to_owned());
        if let Some(rule) = self.refs.get(&key) {
            return Ok(rule.clone());
        }
        let Some(frag) = reference.strip_prefix('#') else {
            self.unsupported(
                ctx,
                &format!("{pointer}/$ref"),
                "$ref",
                "only local references",
            )?;
            return Ok(self.generic(conv, out));
        };
        let Some(target) = ctx.root.pointer(frag).cloned() else {
            self.unsupported(
                ctx,
                &format!("{pointer}/$ref"),
                "$ref",
                "unresolved reference",
            )?;
            return Ok(self.generic(conv, out));
        };
        let hint = slug(frag.rsplit('/').next().unwrap_or("ref"));
        let name = out.fresh(conv, &format!("ref-{hint}"));
        self.refs.insert(key, name.clone());
        let body = self.value(ctx, &target, frag, &format!("{hint}-v"), conv, out)?;
        out.rule(&name, &body);
        Ok(name)
    }
}

fn pointed(mut e: SchemaError, prefix: &str) -> SchemaError {
    if !prefix.is_empty() && !e.pointer.starts_with(prefix) {
        e.pointer = format!("{prefix}{}", e.pointer);
    }
    e
}

/// Merges the keywords beside an `anyOf`/`oneOf`/`allOf` into one of its members.
fn merge_siblings(parent: &Map<String, Value>, member: &Value, key: &str) -> Value {
    let Value::Object(m) = member else {
        return member.clone();
    };
    let mut merged = m.clone();
    for (k, v) in parent {
        if k != key && !ANNOTATIONS.contains(&k.as_str()) && !merged.contains_key(k) {
            merged.insert(k.clone(), v.clone());
        }
    }
    Value::Object(merged)
}

fn infer_types(obj: &Map<String, Value>) -> Vec<String> {
    let mut t = Vec::new();
    if obj.keys().any(|k| STRING_KEYWORDS.contains(&k.as_str())) {
        t.push("string".to_owned());
    }
    if obj.keys().any(|k| NUMBER_KEYWORDS.contains(&k.as_str())) {
        t.push("number".to_owned());
    }
    if obj.contains_key("properties")
        || obj.contains_key("required")
        || obj.contains_key("additionalProperties")
    {
        t.push("object".to_owned());
    }
    if obj.contains_key("items")
        || obj.contains_key("prefixItems")
        || obj.contains_key("minItems")
        || obj.contains_key("maxItems")
    {
        t.push("array".to_owned());
    }
    t
}

/// Alternatives matching exactly these values written as Python literals (spaced and compact).
fn literal_alts(values: &[Value]) -> String {
    let mut alts: Vec<String> = Vec::new();
    for v in values {
        for spacing in [Spacing::Spaced, Spacing::Compact] {
            let mut s = String::new();
            write_python(v, spacing, &mut s);
            let lit = gbnf_literal(&s);
            if !alts.contains(&lit) {
                alts.push(lit);
            }
        }
    }
    format!("( {} )", alts.join(" | "))
}
