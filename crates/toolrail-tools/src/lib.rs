//! Tool definitions and the text side of tool calling: tool sets ([`toolset`]), the call
//! envelopes and their grammars ([`envelope`], [`grammar`]), the call validator ([`validate`]),
//! extraction of calls from free text ([`extract`]), prompt builders per model family
//! ([`prompt`]), the pool filter ([`pool`]) and tools read from Python functions ([`python`]) with
//! their own argument grammars ([`custom_grammar`]).
//!
//! Layer: above `toolrail-schema` (see ARCHITECTURE.md); no C++, no model. Invariants: the
//! grammar of a tool set and the validator agree on what a valid call is; bad input is an error
//! naming the tool and the JSON pointer.
pub mod call;
pub mod custom_grammar;
pub mod extract;
pub mod pool;
pub mod prompt;
pub mod python;
pub mod sent;
pub mod shape;
pub mod source;

pub mod envelope;
pub mod grammar;
pub mod toolset;
pub mod validate;

/// JSON pointers, as every error and warning of a tool set names a place.
pub use toolrail_schema::JsonPointer;
