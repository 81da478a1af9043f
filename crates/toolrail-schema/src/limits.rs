//! llama.cpp's grammar limits, as the converter keeps within them.
//!
//! llama.cpp's GBNF parser (`llama_grammar_parser::parse_sequence` in b11434) rewrites
//! `x{m,n}` into `m` copies of `x` followed by a chain of `n - m` generated optional rules, and
//! refuses a grammar when:
//! - a count is over [`MAX_REPETITION`] (a larger maximum silently becomes unbounded);
//! - the number of rules generated inside the repeated item (a group counts itself and every
//!   rule generated within it) times the repetition's count is over [`MAX_REPETITION`]
//!   ("number of rules that are going to be repeated multiplied by the new repetition exceeds
//!   sane defaults"). An array of strings with `maxLength: 1024` written inline,
//!   `( "\"" char{0,1024} "\"" ( "," space "\"" char{0,1024} "\"" )* )?`, is refused: the
//!   outer group holds over 2,000 generated rules and `?` repeats it.
//!
//! The converter therefore writes every repetition through [`crate::rules::RuleTable::repetition`]:
//! an item that would be repeated with too many generated rules inside is given its own rule
//! first (a rule reference counts 1), counts over the limit are split into chunks, and a
//! repetition generating many rules gets its own rule, so that no enclosing group grows past
//! the limit. Long optional runs are chained *without ambiguity*: `x{0,4500}` becomes
//! `r ::= x{2000} r2 | x{0,1999}`, `r2 ::= x{2000} x{0,500} | x{0,1999}`, so that llama.cpp
//! keeps two stacks per character instead of one per way of splitting the run (chained
//! `x{0,2000} x{0,2000} x{0,500}` made its sampler run for over 20 s on a few hundred bytes).
//!
//! [`crate::expr::Expr::generated_rules`] counts, for an expression the converter or an envelope
//! built, the rules llama.cpp's parser generates for it, so the decisions above follow
//! llama.cpp's own arithmetic.

/// llama.cpp's `MAX_REPETITION_THRESHOLD`: the largest count in one `{m,n}`, and the largest
/// product of a repeated item's generated rules and its count.
pub const MAX_REPETITION: u32 = 2000;

/// A repetition that generates more rules than this gets a rule of its own, so that the groups
/// around it stay far below [`MAX_REPETITION`] whatever repeats them.
pub(crate) const INLINE_RULES: u64 = 64;
