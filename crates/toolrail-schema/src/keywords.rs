//! Keyword tables shared by the converter and llama.cpp's reading of a schema ([`crate::llama`]).

/// Keywords that never constrain.
pub(crate) const ANNOTATIONS: &[&str] = &[
    "title",
    "description",
    "$comment",
    "examples",
    "default",
    "$schema",
    "$id",
    "$anchor",
    "$defs",
    "definitions",
    "deprecated",
    "readOnly",
    "writeOnly",
    "contentMediaType",
    "contentEncoding",
    "contentSchema",
    "$vocabulary",
    "$dynamicAnchor",
];

/// Keywords that constrain a value (or locate the schemas that do), in any draft from 4 to
/// 2020-12, plus the converter's internal ones. Every other keyword of a schema object is an
/// annotation or unknown, and JSON Schema says those never constrain: the converter ignores them
/// (a keyword that is neither here nor in [`ANNOTATIONS`] is reported as a note).
pub(crate) const CONSTRAINTS: &[&str] = &[
    "type",
    "enum",
    "const",
    "multipleOf",
    "maximum",
    "exclusiveMaximum",
    "minimum",
    "exclusiveMinimum",
    "maxLength",
    "minLength",
    "pattern",
    "format",
    "maxItems",
    "minItems",
    "uniqueItems",
    "maxContains",
    "minContains",
    "contains",
    "items",
    "prefixItems",
    "additionalItems",
    "unevaluatedItems",
    "maxProperties",
    "minProperties",
    "required",
    "properties",
    "patternProperties",
    "additionalProperties",
    "unevaluatedProperties",
    "propertyNames",
    "dependentRequired",
    "dependentSchemas",
    "dependencies",
    "allOf",
    "anyOf",
    "oneOf",
    "not",
    "if",
    "then",
    "else",
    "$ref",
    "$dynamicRef",
    "$recursiveRef",
    // made by the converter when it negates `type: integer`
    "x-toolrail-fractional",
];

/// True for a keyword that never constrains (an annotation, `$id`-like identifiers, or a keyword
/// JSON Schema does not define): the converter ignores it.
pub(crate) fn is_ignored(keyword: &str) -> bool {
    !CONSTRAINTS.contains(&keyword)
}

/// True for a keyword that JSON Schema does not define at all (neither a constraint nor an
/// annotation): ignored like annotations, but listed in [`crate::Conversion::notes`], since
/// it may be a misspelling (`require`, `maxlength`) of one that would constrain.
pub(crate) fn is_unknown(keyword: &str) -> bool {
    is_ignored(keyword) && !ANNOTATIONS.contains(&keyword) && !EXTRA_KNOWN.contains(&keyword)
}

/// Keywords of older drafts or common vocabularies that are known not to constrain (so not
/// reported as unknown).
const EXTRA_KNOWN: &[&str] = &["id", "$recursiveAnchor", "example"];
