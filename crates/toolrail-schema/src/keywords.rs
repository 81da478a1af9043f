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
