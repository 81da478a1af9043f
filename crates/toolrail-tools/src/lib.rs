//! Tool definitions and the text side of tool calling: the shared call type, extraction of calls from free text, prompt builders per model family, and the pool filter.
pub mod call;
pub mod extract;
pub mod pool;
pub mod prompt;

pub mod envelope;
pub mod grammar;
pub mod toolset;
pub mod validate;
