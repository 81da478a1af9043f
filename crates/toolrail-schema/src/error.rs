//! What a conversion reports: the error that stops it and the warnings of what it dropped.

/// A schema the converter cannot express exactly (or that is malformed).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unsupported: {keyword} at {pointer}: {message}")]
pub struct SchemaError {
    /// The keyword, e.g. `not`.
    pub keyword: String,
    /// JSON pointer of the schema holding the keyword, e.g. `#/properties/a`.
    pub pointer: String,
    /// What is wrong.
    pub message: String,
}

/// A constraint dropped in lenient mode, or a keyword llama.cpp ignores in
/// [`ConvertOptions::llama_compat`] mode.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Warning {
    /// The keyword that was dropped.
    pub keyword: String,
    /// JSON pointer of the schema holding the keyword.
    pub pointer: String,
    /// Why.
    pub message: String,
}

impl std::fmt::Display for Warning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "dropped: {} at {}: {}",
            self.keyword, self.pointer, self.message
        )
    }
}

/// Where a step of the conversion reports what it cannot express or what it drops: strict, an
/// unsupported keyword is a [`SchemaError`]; lenient, a [`Warning`] (the constraint dropped).
/// Keywords llama.cpp ignores are always warnings, each once.
pub(crate) struct Report<'a> {
    /// Unsupported keywords become warnings instead of errors.
    pub(crate) lenient: bool,
    /// The warnings so far.
    pub(crate) warnings: &'a mut Vec<Warning>,
}

impl Report<'_> {
    /// An unsupported keyword at `pointer`: an error, or in lenient mode a warning.
    pub(crate) fn unsupported(
        &mut self,
        keyword: &str,
        pointer: &str,
        message: impl Into<String>,
    ) -> Result<(), SchemaError> {
        let message = message.into();
        if self.lenient {
            self.warnings.push(Warning {
                keyword: keyword.to_string(),
                pointer: pointer.to_string(),
                message,
            });
            Ok(())
        } else {
            Err(invalid(keyword, pointer, message))
        }
    }

    /// A keyword that is dropped whatever the mode: a warning, recorded once.
    pub(crate) fn ignored(&mut self, keyword: &str, pointer: &str, message: impl Into<String>) {
        let w = Warning {
            keyword: keyword.to_string(),
            pointer: pointer.to_string(),
            message: message.into(),
        };
        if !self.warnings.contains(&w) {
            self.warnings.push(w);
        }
    }
}

/// The error for `keyword` at `pointer`.
pub(crate) fn invalid(keyword: &str, pointer: &str, message: impl Into<String>) -> SchemaError {
    SchemaError {
        keyword: keyword.to_string(),
        pointer: pointer.to_string(),
        message: message.into(),
    }
}
