//! (filled in by the tools work)
pub mod envelope;
pub mod toolset;
pub mod validate;
