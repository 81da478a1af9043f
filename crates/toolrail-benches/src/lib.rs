//! Criterion benchmarks of the C++-free core (`cargo bench -p toolrail-benches`): the recognizer
//! (`benches/recognizer.rs`) and the schema converter (`benches/schema_convert.rs`).
//!
//! They live in this crate, not beside the code they measure, so that `toolrail-gbnf`,
//! `toolrail-engine`, `toolrail-schema` and `toolrail-tools` have no benchmark harness (and none
//! of its command-line parser) in their dependency trees. This library is empty.
