//! Where a tool set's text comes from: JSON tool definitions in any shape ([`crate::shape`]) or
//! Python function definitions ([`crate::python`]), chosen by the caller or found from the text.

use crate::python;
use crate::shape::{ToolSetWarning, WarningKind};
use crate::toolset::{ToolSet, ToolSetError};

/// What a tool set's text is written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ToolSource {
    /// Found from the text: Python when it looks like function definitions, else JSON.
    #[default]
    Auto,
    /// JSON tool definitions in any shape (see [`crate::shape`]).
    Json,
    /// Python function definitions (see [`crate::python`]).
    Python,
}

impl ToolSet {
    /// Reads a tool set from text in any accepted source: JSON in any shape, or Python function
    /// definitions (see [`crate::python`]), told apart by [`crate::python::looks_like_python`].
    pub fn from_text(text: &str) -> Result<Self, ToolSetError> {
        Self::from_source(text, ToolSource::Auto)
    }

    /// Reads a tool set from text written in `source` ([`ToolSource::Auto`]: found from the text).
    pub fn from_source(text: &str, source: ToolSource) -> Result<Self, ToolSetError> {
        // an editor's byte order mark is skipped, and said
        if let Some(rest) = text.strip_prefix('\u{feff}') {
            let mut tools = Self::from_source(rest, source)?;
            tools.warn(ToolSetWarning {
                kind: WarningKind::ByteOrderMark,
                tool: None,
                pointer: String::new(),
                key: None,
                message: "the text starts with a UTF-8 byte order mark (U+FEFF), skipped: tool \
                          definitions do not use one"
                    .to_owned(),
            });
            return Ok(tools);
        }
        let python = match source {
            ToolSource::Auto => python::looks_like_python(text),
            ToolSource::Json => false,
            ToolSource::Python => true,
        };
        if python {
            python::tools_from_python(text).map_err(ToolSetError::Python)
        } else {
            Self::from_json_str(text)
        }
    }
}
