//! The options of a conversion: whitespace, member order, strictness, llama.cpp's reading.

/// Whitespace allowed between JSON tokens.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Whitespace {
    /// Compact JSON, single spaces, or newlines with indentation (llama.cpp's `space` rule).
    #[default]
    Spaced,
    /// No whitespace at all.
    Compact,
}

/// Objects with at most this many declared members accept them in any order (one rule per set
/// of members still to come: 2^n - 1 rules at most, 63 for 6 members); larger objects keep the
/// declared order, so that a grammar stays small.
pub const ANY_ORDER_MAX_MEMBERS: usize = 6;

/// The order in which an object's declared members may appear.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum MemberOrder {
    /// Any order, for objects with at most [`ANY_ORDER_MAX_MEMBERS`] declared members (larger
    /// objects: declared order).
    #[default]
    Any,
    /// The order of `properties` (a smaller grammar; the model writes one canonical order).
    Declared,
}

/// Options for a conversion.
#[derive(Clone, Debug, Default)]
pub struct ConvertOptions {
    /// Whitespace between tokens.
    pub whitespace: Whitespace,
    /// Order of declared object members ([`ConvertOptions::llama_compat`] always uses llama.cpp's
    /// fixed order).
    pub member_order: MemberOrder,
    /// Turn "unsupported" errors into warnings and drop the constraint.
    pub lenient: bool,
    /// Objects that declare `properties` but no `additionalProperties` are closed to the names
    /// they declare or require (tool arguments), instead of open. Objects without `properties`
    /// stay free-form.
    pub close_objects: bool,
    /// Convert as llama.cpp's `json_schema_to_grammar` does (the one vendored by
    /// llama-cpp-sys-2 0.1.161), so that the grammar is the one llama-server would enforce for
    /// the schema, instead of standard JSON Schema semantics (see "llama.cpp compatibility" in
    /// the module docs and [`crate::llama`]):
    /// - without `type`, the type is inferred from the keywords as llama.cpp does
    ///   (`properties` or a non-`true` `additionalProperties` → object, `items`/`prefixItems` →
    ///   array, `pattern`/`minLength`/`maxLength`/known `format` → string, else any value);
    /// - objects with `properties` are closed unless `additionalProperties` says otherwise;
    ///   required members come first, then optional ones, then additional ones;
    /// - keywords llama.cpp ignores are dropped with a [`crate::Warning`] instead of an error.
    pub llama_compat: bool,
}
