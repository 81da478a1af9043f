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

/// A constraint dropped in lenient mode, a keyword llama.cpp ignores in
/// [`ConvertOptions::llama_compat`] mode, or (lenient) a schema no value satisfies as written,
/// read the one way it can mean something ([`Warning::reading`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Warning {
    /// The keyword that was dropped or read.
    pub keyword: String,
    /// JSON pointer of the schema holding the keyword.
    pub pointer: String,
    /// Why, and for a reading which reading was chosen.
    pub message: String,
    /// The keyword was not dropped but read another way (the message says which): the schema
    /// as written admits no value.
    pub reading: bool,
}

impl std::fmt::Display for Warning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let what = if self.reading { "read" } else { "dropped" };
        write!(
            f,
            "{what}: {} at {}: {}",
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
                reading: false,
            });
            Ok(())
        } else {
            Err(invalid(keyword, pointer, message))
        }
    }

    /// A schema no value satisfies as written (`why`) that has one plausible reading
    /// (`reading`): strict, an error saying why and which reading lenient mode takes; lenient,
    /// a warning naming the reading (the caller then converts that reading).
    pub(crate) fn reading(
        &mut self,
        keyword: &str,
        pointer: &str,
        why: &str,
        reading: &str,
    ) -> Result<(), SchemaError> {
        if self.lenient {
            self.warnings.push(Warning {
                keyword: keyword.to_string(),
                pointer: pointer.to_string(),
                message: format!("{why}; read as {reading}"),
                reading: true,
            });
            Ok(())
        } else {
            Err(invalid(
                keyword,
                pointer,
                format!("{why} (lenient mode reads it as {reading})"),
            ))
        }
    }

    /// A keyword that is dropped whatever the mode: a warning, recorded once.
    pub(crate) fn ignored(&mut self, keyword: &str, pointer: &str, message: impl Into<String>) {
        let w = Warning {
            keyword: keyword.to_string(),
            pointer: pointer.to_string(),
            message: message.into(),
            reading: false,
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
