//! The trigger gate of a lazy grammar, as llama.cpp runs it (`llama_grammar_accept_impl` while
//! `awaiting_trigger`, `src/llama-grammar.cpp` b11434): the grammar sleeps while the generated
//! text grows; after every token each trigger regex, in order, is searched in the whole text
//! generated so far, and a trigger token fires at once. When one fires, the grammar starts at the
//! trigger's first non-empty capture group (or the whole match), and every buffered token that
//! reaches past that point is replayed into it — the first one possibly as a partial piece.
//!
//! Pure Rust, so toolrail's own recognizer can run behind it; `tests/it/lazy_masks.rs` checks it
//! against llama.cpp's lazy sampler mask for mask on the real model.
//!
//! Regexes: llama.cpp builds `std::regex` (ECMAScript) over bytes. toolrail compiles them with the
//! `regex` crate in byte mode, with `.` rewritten to exclude `\r` as ECMAScript's does. Patterns
//! the crate cannot express (look-ahead, back-references) are a [`GateError::Unsupported`], never
//! an approximation.

use std::ops::Range;
use std::time::{Duration, Instant};

use regex::bytes::Regex;

/// A trigger the gate cannot mirror exactly.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GateError {
    /// The pattern uses a construct toolrail's regex engine lacks (look-around, back-reference).
    #[error("trigger pattern {pattern:?} is not supported by toolrail's trigger matcher: {reason}")]
    Unsupported {
        /// The pattern as llama.cpp has it.
        pattern: String,
        /// The regex crate's message.
        reason: String,
    },
}

/// What fired the grammar.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FiredBy {
    /// A trigger token.
    Token(u32),
    /// The pattern at this index of the list matched this span of the buffer.
    Pattern {
        /// Index in the pattern list.
        index: usize,
        /// The whole match, in bytes of the generated text.
        matched: Range<usize>,
    },
}

/// The moment the grammar woke up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fire {
    /// What fired.
    pub by: FiredBy,
    /// Where the grammar starts, in bytes of the text generated since the start.
    pub grammar_start: usize,
    /// The tokens replayed into the grammar with the bytes each one contributes (the first may
    /// be a partial piece; a trigger token gives its whole piece).
    pub replay: Vec<(u32, Vec<u8>)>,
}

/// The gate's verdict on one accepted token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GateStep {
    /// Still waiting: the grammar did not see the token (nothing is masked).
    Waiting,
    /// The grammar woke up on this token: feed it the replay.
    Fired(Fire),
    /// Already awake: feed the token's whole piece to the grammar as usual.
    Active,
}

/// How a run's grammar is gated and stopped, as llama-server sets its sampler up for a chat
/// template's tool-call grammar (see [`crate::template::TemplateResult::gate_setup`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GateSetup {
    /// The grammar sleeps until a trigger fires (else it constrains from the first token).
    pub lazy: bool,
    /// The trigger regexes, searched in order in the generated text (words escaped, full
    /// patterns anchored).
    pub patterns: Vec<String>,
    /// The trigger token ids.
    pub tokens: Vec<u32>,
    /// Tokens fed to the grammar before generation, not generated (the generation prompt of a
    /// grammar that is not lazy, as llama-server prefills it).
    pub prefill: Vec<u32>,
    /// Stop strings: the run ends when the output reaches one, and the output ends before it.
    pub stops: Vec<String>,
    /// llama-server's reasoning budget over the thinking block (see
    /// [`crate::template::TemplateResult::reasoning_spec`]), in text: the worker tokenizes it
    /// with its model; `None` when the template has no thinking tags, or neither a budget nor a
    /// lazy grammar asks for it.
    pub reasoning: Option<crate::reasoning_budget::ReasoningSpec>,
}

impl GateSetup {
    /// What fired, in words for a transcript: the pattern, or `token N`.
    pub fn describe(&self, by: &FiredBy) -> String {
        match by {
            FiredBy::Token(id) => format!("token {id}"),
            FiredBy::Pattern { index, .. } => self
                .patterns
                .get(*index)
                .cloned()
                .unwrap_or_else(|| format!("pattern #{index}")),
        }
    }
}

/// The first of `stops` that occurs in `output` at or after byte `from` (a stop may begin in
/// text seen before): its start and the stop. The earliest start wins, as in llama-server.
pub fn find_stop<'s>(output: &[u8], from: usize, stops: &'s [String]) -> Option<(usize, &'s str)> {
    stops
        .iter()
        .filter(|stop| !stop.is_empty())
        .filter_map(|stop| {
            let begin = from.saturating_sub(stop.len().saturating_sub(1));
            output
                .get(begin..)?
                .windows(stop.len())
                .position(|w| w == stop.as_bytes())
                .map(|at| (begin + at, stop.as_str()))
        })
        .min_by_key(|(at, _)| *at)
}

/// How close a word trigger came to firing in a text where no trigger fired: the longest start
/// of the word the text holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NearMiss {
    /// The trigger word (the sampler's pattern unescaped).
    pub word: String,
    /// How many bytes of the word matched.
    pub matched: usize,
    /// Where the matched start of the word begins in the text.
    pub at: usize,
    /// The byte the text has where the word goes on (`None`: the text ended there).
    pub instead: Option<u8>,
}

impl NearMiss {
    /// In words: `"<tool_cal" (9 of 12 bytes of "<tool_call>\n") at byte 11, then ">" instead
    /// of "l"`.
    pub fn describe(&self) -> String {
        let word = self.word.as_bytes();
        let next = word.get(self.matched).map_or(String::new(), |b| {
            format!("{:?}", String::from_utf8_lossy(std::slice::from_ref(b)))
        });
        let then = match self.instead {
            Some(b) => format!(
                "then {:?} instead of {next}",
                String::from_utf8_lossy(std::slice::from_ref(&b))
            ),
            None => format!("then the output ended before {next}"),
        };
        format!(
            "{:?} ({} of {} bytes of {:?}) at byte {}, {then}",
            String::from_utf8_lossy(&word[..self.matched]),
            self.matched,
            word.len(),
            self.word,
            self.at
        )
    }
}

/// The literal word a sampler pattern stands for, when it is one (llama-server escapes a word
/// trigger's `.^$|()*+?[]{}\` with a backslash); `None` for a real regex.
pub fn pattern_word(pattern: &str) -> Option<String> {
    const META: &str = ".^$|()*+?[]{}\\";
    let mut word = String::with_capacity(pattern.len());
    let mut chars = pattern.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some(next) if META.contains(next) => word.push(next),
                _ => return None,
            },
            c if META.contains(c) => return None,
            c => word.push(c),
        }
    }
    (!word.is_empty()).then_some(word)
}

/// For a text in which no trigger fired: the word trigger whose start the text comes closest to
/// (the longest start of a word it holds, the last place it occurs). Regex triggers are not
/// word starts and are left out.
pub fn nearest_miss(patterns: &[String], text: &[u8]) -> Option<NearMiss> {
    let mut best: Option<NearMiss> = None;
    for word in patterns.iter().filter_map(|p| pattern_word(p)) {
        let bytes = word.as_bytes();
        let longest = (1..bytes.len()).rev().find_map(|len| {
            let start = &bytes[..len];
            let at = text.windows(len).rposition(|w| w == start)?;
            Some((len, at))
        });
        if let Some((matched, at)) = longest
            && best.as_ref().is_none_or(|b| matched > b.matched)
        {
            best = Some(NearMiss {
                instead: text.get(at + matched).copied(),
                word: word.clone(),
                matched,
                at,
            });
        }
    }
    best
}

struct Pattern {
    source: String,
    regex: Regex,
}

/// The trigger gate in front of a lazy grammar.
pub struct LazyGate {
    patterns: Vec<Pattern>,
    tokens: Vec<u32>,
    awaiting: bool,
    buffer: Vec<u8>,
    spans: Vec<(u32, Range<usize>)>,
    scan_time: Duration,
    scanned_bytes: u64,
}

impl std::fmt::Debug for LazyGate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LazyGate")
            .field(
                "patterns",
                &self.patterns.iter().map(|p| &p.source).collect::<Vec<_>>(),
            )
            .field("tokens", &self.tokens)
            .field("awaiting", &self.awaiting)
            .field("buffered", &self.buffer.len())
            .finish()
    }
}

/// Rewrites an ECMAScript pattern for the `regex` crate in byte mode: `.` outside a class
/// becomes `[^\n\r]` (ECMAScript's `.` excludes both line terminators; the crate's only `\n`).
fn translate(pattern: &str) -> String {
    let mut out = String::with_capacity(pattern.len() + 8);
    let mut in_class = false;
    let mut chars = pattern.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                out.push(c);
                if let Some(next) = chars.next() {
                    out.push(next);
                }
            }
            '[' if !in_class => {
                in_class = true;
                out.push(c);
                // A `]` right after `[` or `[^` is a literal in the regex crate but ends an
                // empty class in ECMAScript; leave such patterns to fail or match as written.
            }
            ']' if in_class => {
                in_class = false;
                out.push(c);
            }
            '.' if !in_class => out.push_str(r"[^\n\r]"),
            _ => out.push(c),
        }
    }
    out
}

impl LazyGate {
    /// A gate over the sampler's `patterns` (in order; words already escaped, full patterns
    /// anchored, as [`crate::template::SamplerSetup`] has them) and trigger `tokens`.
    pub fn new(patterns: &[String], tokens: &[u32]) -> Result<LazyGate, GateError> {
        let patterns = patterns
            .iter()
            .map(|source| {
                let translated = format!("(?-u){}", translate(source));
                Regex::new(&translated)
                    .map(|regex| Pattern {
                        source: source.clone(),
                        regex,
                    })
                    .map_err(|e| GateError::Unsupported {
                        pattern: source.clone(),
                        reason: e.to_string().lines().last().unwrap_or_default().to_owned(),
                    })
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(LazyGate {
            patterns,
            tokens: tokens.to_vec(),
            awaiting: true,
            buffer: Vec::new(),
            spans: Vec::new(),
            scan_time: Duration::ZERO,
            scanned_bytes: 0,
        })
    }

    /// True while the grammar sleeps (llama.cpp masks nothing then).
    pub fn awaiting(&self) -> bool {
        self.awaiting
    }

    /// The text generated while waiting (cleared when the grammar wakes).
    pub fn buffer(&self) -> &[u8] {
        &self.buffer
    }

    /// Time spent searching the patterns, and the bytes searched, since the start: llama.cpp
    /// searches the whole buffer after every token, so this grows with the square of the text.
    pub fn scan_cost(&self) -> (Duration, u64) {
        (self.scan_time, self.scanned_bytes)
    }

    /// llama.cpp's `find`: the first non-empty capture group's start, else the whole match's.
    fn find(&self, pattern: &Pattern) -> Option<(usize, Range<usize>)> {
        let caps = pattern.regex.captures(&self.buffer)?;
        let whole = caps.get(0)?;
        let start = (1..caps.len())
            .filter_map(|i| caps.get(i))
            .find(|m| !m.is_empty())
            .map_or(whole.start(), |m| m.start());
        Some((start, whole.range()))
    }

    /// Accepts one generated token whose piece (special tokens rendered) is `piece`.
    pub fn accept(&mut self, token: u32, piece: &[u8]) -> GateStep {
        if !self.awaiting {
            return GateStep::Active;
        }
        if self.tokens.contains(&token) {
            self.awaiting = false;
            self.buffer.clear();
            self.spans.clear();
            return GateStep::Fired(Fire {
                by: FiredBy::Token(token),
                grammar_start: 0,
                replay: vec![(token, piece.to_vec())],
            });
        }
        let begin = self.buffer.len();
        self.buffer.extend_from_slice(piece);
        self.spans.push((token, begin..self.buffer.len()));
        let started = Instant::now();
        let mut found = None;
        for (index, pattern) in self.patterns.iter().enumerate() {
            self.scanned_bytes += self.buffer.len() as u64;
            if let Some((start, matched)) = self.find(pattern) {
                found = Some((index, start, matched));
                break;
            }
        }
        self.scan_time += started.elapsed();
        let Some((index, start, matched)) = found else {
            return GateStep::Waiting;
        };
        self.awaiting = false;
        let replay = self
            .spans
            .iter()
            .filter(|(_, span)| span.end > start)
            .map(|(tok, span)| (*tok, self.buffer[span.start.max(start)..span.end].to_vec()))
            .collect();
        self.buffer.clear();
        self.spans.clear();
        GateStep::Fired(Fire {
            by: FiredBy::Pattern { index, matched },
            grammar_start: start,
            replay,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fire(step: GateStep) -> Fire {
        match step {
            GateStep::Fired(f) => f,
            other => panic!("expected a fire, got {other:?}"),
        }
    }

    #[test]
    fn word_trigger_replays_from_the_word_with_a_partial_piece() {
        let mut gate = LazyGate::new(&[r"<tool_call>".to_owned()], &[]).unwrap();
        assert_eq!(gate.accept(1, b"Sure. <tool"), GateStep::Waiting);
        let f = fire(gate.accept(2, b"_call>\n{"));
        assert_eq!(f.grammar_start, 6);
        assert_eq!(
            f.replay,
            vec![(1, b"<tool".to_vec()), (2, b"_call>\n{".to_vec())]
        );
        assert_eq!(gate.accept(3, b"x"), GateStep::Active);
    }

    #[test]
    fn first_pattern_in_list_order_wins_and_groups_choose_the_start() {
        let mut gate =
            LazyGate::new(&["late".to_owned(), r"[\s\S]*?(<call>)".to_owned()], &[]).unwrap();
        let f = fire(gate.accept(7, b"ab <call> late"));
        assert_eq!(
            f.by,
            FiredBy::Pattern {
                index: 0,
                matched: 10..14
            }
        );
        assert_eq!(f.grammar_start, 10);
        let mut gate = LazyGate::new(&[r"[\s\S]*?(<call>)".to_owned()], &[]).unwrap();
        let f = fire(gate.accept(7, b"ab <call> late"));
        assert_eq!(f.grammar_start, 3);
        assert_eq!(f.replay, vec![(7, b"<call> late".to_vec())]);
    }

    #[test]
    fn trigger_token_fires_with_its_whole_piece_and_drops_the_buffer() {
        let mut gate = LazyGate::new(&[], &[42]).unwrap();
        assert_eq!(gate.accept(1, b"text"), GateStep::Waiting);
        let f = fire(gate.accept(42, b"<|tool_call>"));
        assert_eq!(f.replay, vec![(42, b"<|tool_call>".to_vec())]);
        assert!(gate.buffer().is_empty());
    }

    #[test]
    fn dot_excludes_carriage_return_as_in_ecmascript() {
        let mut gate = LazyGate::new(&["^a.b$".to_owned()], &[]).unwrap();
        assert_eq!(gate.accept(1, b"a\rb"), GateStep::Waiting);
        let mut gate = LazyGate::new(&["^a[.]b$".to_owned()], &[]).unwrap();
        assert_eq!(gate.accept(1, b"a\rb"), GateStep::Waiting);
        assert!(matches!(gate.accept(1, b""), GateStep::Waiting));
        let mut gate = LazyGate::new(&["^a.b$".to_owned()], &[]).unwrap();
        assert!(matches!(gate.accept(1, b"axb"), GateStep::Fired(_)));
    }

    #[test]
    fn stops_are_found_across_the_token_boundary_and_the_earliest_wins() {
        let stops = vec!["<|im_end|>".to_owned(), "END".to_owned()];
        assert_eq!(find_stop(b"abc<|im_", 5, &stops), None);
        assert_eq!(
            find_stop(b"abc<|im_end|>x", 8, &stops),
            Some((3, "<|im_end|>"))
        );
        assert_eq!(find_stop(b"ENDx<|im_end|>", 0, &stops), Some((0, "END")));
        assert_eq!(find_stop(b"xx", 0, &[String::new()]), None);
    }

    #[test]
    fn a_trigger_that_never_fired_names_the_nearest_start_of_its_word() {
        assert_eq!(pattern_word(r"<tool_call>"), Some("<tool_call>".into()));
        assert_eq!(pattern_word(r"\[TOOL_CALLS\]"), Some("[TOOL_CALLS]".into()));
        assert_eq!(pattern_word(r"[\s\S]*?(<call>)"), None);
        let patterns = vec![r"[\s\S]*?(<x>)".to_owned(), "<tool_call>\n".to_owned()];
        let miss = nearest_miss(&patterns, b"ok <tool_c <tool_cal> done").unwrap();
        assert_eq!((miss.matched, miss.at, miss.instead), (9, 11, Some(b'>')));
        assert_eq!(
            miss.describe(),
            r#""<tool_cal" (9 of 12 bytes of "<tool_call>\n") at byte 11, then ">" instead of "l""#
        );
        let miss = nearest_miss(&patterns, b"so <tool").unwrap();
        assert_eq!(miss.instead, None);
        assert!(
            miss.describe()
                .ends_with(r#"then the output ended before "_""#)
        );
        assert_eq!(nearest_miss(&patterns, b"nothing here"), None);
    }

    #[test]
    fn lookahead_is_refused_not_approximated() {
        let err = LazyGate::new(&["a(?!b)".to_owned()], &[]).unwrap_err();
        assert!(matches!(err, GateError::Unsupported { .. }), "{err}");
    }
}
