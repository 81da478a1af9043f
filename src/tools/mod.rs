//! (filled in by the tools work)
pub mod toolset;
