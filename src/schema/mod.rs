//! (filled in by the schema work)
