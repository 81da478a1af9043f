//! Whole-input verdicts: accepted, incomplete (a viable prefix) or rejected at a byte offset.

use std::io::Read;
use std::sync::Arc;

use serde::Serialize;

use super::recognizer::{Engine, Expected, State};
use toolrail_gbnf::{Grammar, LineCol, source::line_col};

/// The three outcomes of matching a text against a grammar.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum VerdictKind {
    /// The whole text matches the grammar.
    Accepted,
    /// The text is a proper prefix of something the grammar matches.
    Incomplete,
    /// No string of the grammar starts with the text.
    Rejected,
    /// The grammar is so ambiguous that following it took more work than toolrail allows at
    /// `offset` (one character over [`crate::stacks::MAX_STEP_WORK`], or more than
    /// [`work_burst`] plus [`WORK_PER_BYTE`] per byte so far): toolrail stops there (llama.cpp
    /// would crawl and run out of memory).
    TooAmbiguous,
}

/// The outcome of matching a text, with where and what.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verdict {
    /// Accepted, incomplete or rejected.
    pub kind: VerdictKind,
    /// Byte offset of the first rejected byte (only when rejected).
    pub offset: Option<usize>,
    /// Line and column of the rejected byte, or of the end of the text otherwise.
    pub position: LineCol,
    /// What the grammar allowed at the rejected byte, or at the end of the text.
    pub expected: Expected,
    /// The state after the accepted part of the text (for stacks and snapshots).
    pub state: State,
}

impl Verdict {
    /// True if the whole text matches.
    pub fn is_accepted(&self) -> bool {
        self.kind == VerdictKind::Accepted
    }
}

/// Matches `text` against `grammar` from the start (a fresh engine; see [`Engine`] to reuse caches).
pub fn check(grammar: &Arc<Grammar>, text: &[u8]) -> Verdict {
    let mut engine = Engine::new(Arc::clone(grammar));
    check_with(&mut engine, text)
}

/// Work a check may do at once, beyond [`WORK_PER_BYTE`] per byte: room for a large
/// alternation at its start (a 70,000-value enum), a few seconds at most. A larger grammar
/// gets [`WORK_BURST_PER_ELEMENT`] per element instead (see [`work_burst`]).
pub const WORK_BURST: u64 = 1 << 22;

/// Work a check may do at once per element of the grammar, when that is more than
/// [`WORK_BURST`]: an unambiguous alternation of a million literals keeps a million stacks
/// alive on its first characters (llama.cpp keeps one per alternative too, and follows them),
/// which is work in proportion to the grammar, not ambiguity. Following every stack the
/// grammar can start with costs a few units per element, so this leaves room for that on the
/// first few characters and nothing more.
pub const WORK_BURST_PER_ELEMENT: u64 = 4;

/// The work a check of `grammar` may do beyond [`WORK_PER_BYTE`] per byte: [`WORK_BURST`], or
/// [`WORK_BURST_PER_ELEMENT`] per element of a grammar large enough for that to be more.
pub fn work_burst(grammar: &Grammar) -> u64 {
    let elements = u64::try_from(grammar.elements().len()).unwrap_or(u64::MAX);
    WORK_BURST.max(WORK_BURST_PER_ELEMENT.saturating_mul(elements))
}

/// Work a check may do per byte of input, on average (a JSON grammar takes tens): a grammar
/// that keeps thousands of stacks busy at every byte stops within [`WORK_BURST`] of work,
/// instead of running for minutes.
pub const WORK_PER_BYTE: u64 = 1 << 14;

/// Why [`feed_bounded`] stopped.
enum Stopped {
    /// No stack accepts the byte (or it is not UTF-8).
    Rejected,
    /// Too much work (see [`VerdictKind::TooAmbiguous`]).
    TooAmbiguous,
}

/// [`Engine::feed`] with the work bound of a check: `work_start` is the engine's work when the
/// check started and `offset` how many bytes came before `bytes`. On failure, the offset in
/// `bytes` of the character concerned and the state before it.
fn feed_bounded(
    engine: &mut Engine,
    mut state: State,
    bytes: &[u8],
    work_start: u64,
    offset: usize,
) -> Result<State, (usize, State, Stopped)> {
    let mut char_start = 0;
    let mut before = state;
    let burst = work_burst(engine.grammar());
    for (i, &b) in bytes.iter().enumerate() {
        if state.partial.is_complete() {
            char_start = i;
            before = state;
        }
        match engine.accept_byte(state, b) {
            Some(next) if next.is_exploded() => {
                return Err((char_start, before, Stopped::TooAmbiguous));
            }
            Some(next) if next.set != crate::stacks::DEAD_SET => state = next,
            _ => return Err((char_start, before, Stopped::Rejected)),
        }
        if !state.partial.is_complete() && !engine.partial_viable(state) {
            return Err((char_start, before, Stopped::Rejected));
        }
        let allowed = burst + WORK_PER_BYTE * (offset + i + 1) as u64;
        if engine.work_done() - work_start > allowed {
            return Err((char_start, before, Stopped::TooAmbiguous));
        }
    }
    Ok(state)
}

/// Matches `text` with an existing engine (its caches make repeated checks fast). The work
/// is bounded ([`work_burst`], [`WORK_PER_BYTE`]): past it the verdict is `TooAmbiguous`.
pub fn check_with(engine: &mut Engine, text: &[u8]) -> Verdict {
    let start = engine.initial();
    let work_start = engine.work_done();
    match feed_bounded(engine, start, text, work_start, 0) {
        Ok(state) => {
            let kind = if engine.can_end(state) {
                VerdictKind::Accepted
            } else {
                VerdictKind::Incomplete
            };
            Verdict {
                kind,
                offset: None,
                position: line_col(text, text.len()),
                expected: engine.expected(state),
                state,
            }
        }
        Err((offset, before, Stopped::TooAmbiguous)) => Verdict {
            kind: VerdictKind::TooAmbiguous,
            offset: Some(offset),
            position: line_col(text, offset),
            expected: Expected::default(),
            state: before,
        },
        Err((offset, before, Stopped::Rejected)) => Verdict {
            kind: VerdictKind::Rejected,
            offset: Some(offset),
            position: line_col(text, offset),
            expected: engine.expected(before),
            state: before,
        },
    }
}

/// Bytes read from a stream at a time by [`check_reader`].
const STREAM_CHUNK: usize = 8 * 1024;

/// [`Engine::memory_entries`] above which [`check_reader`] compacts the engine: the memo stays
/// under about 100 MB besides the live state (which grows only with the input's nesting).
pub const STREAM_MEMORY_ENTRIES: usize = 1 << 21;

/// Bytes of the stream kept before the current chunk, and read after a rejected byte, so the
/// caller can show the line around it (more than [`toolrail_gbnf::LineExcerpt`] looks at).
const STREAM_CONTEXT: usize = 4096;

/// A verdict on a stream, with the bytes around where it was reached (the stream itself is
/// never held whole).
#[derive(Clone, Debug)]
pub struct StreamVerdict {
    /// The verdict, as [`check_with`] gives it for the same bytes.
    pub verdict: Verdict,
    /// Input bytes around the verdict's offset (or the end of the input).
    pub window: Vec<u8>,
    /// Offset in the input of `window[0]`.
    pub window_start: usize,
}

/// Line and column of the end of the bytes seen so far (the same numbering as
/// [`toolrail_gbnf::source::line_col`]).
#[derive(Clone, Copy, Debug)]
struct PositionTracker {
    line: u32,
    /// Characters since the start of the line.
    column: u64,
}

impl PositionTracker {
    fn advance(&mut self, bytes: &[u8]) {
        for &b in bytes {
            if b == b'\n' {
                self.line = self.line.saturating_add(1);
                self.column = 0;
            } else if (b & 0xC0) != 0x80 {
                self.column += 1;
            }
        }
    }

    fn position(self) -> LineCol {
        LineCol {
            line: self.line,
            column: u32::try_from(self.column + 1).unwrap_or(u32::MAX),
        }
    }
}

/// How many leading bytes of `chunk` end on a character boundary: an unfinished UTF-8
/// sequence at its end is held back for the next chunk, so an offset is never split.
fn whole_chars_len(chunk: &[u8]) -> usize {
    for back in 1..=chunk.len().min(3) {
        let at = chunk.len() - back;
        let b = chunk[at];
        if (b & 0xC0) == 0x80 {
            continue;
        }
        let needed = match b {
            0xC0..=0xDF => 2,
            0xE0..=0xEF => 3,
            0xF0..=0xF7 => 4,
            _ => 1,
        };
        return if needed > back { at } else { chunk.len() };
    }
    chunk.len()
}

/// Reads into `buf` as much as one `read` gives, retrying when interrupted.
fn read_some(reader: &mut dyn Read, buf: &mut [u8]) -> std::io::Result<usize> {
    loop {
        match reader.read(buf) {
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            other => return other,
        }
    }
}

/// Matches a stream against the engine's grammar as it is read, in chunks: memory stays
/// bounded whatever the input's length, and reading stops at the first rejected byte (so
/// `yes | toolrail check json.gbnf -` ends at once), and the engine is compacted whenever its
/// memory passes [`STREAM_MEMORY_ENTRIES`] or twice what the last compaction kept, whichever
/// is more, so deep nesting is not recopied at every chunk (see [`Engine::compact`]; the engine's earlier
/// states are invalid after the call). The verdict is the one [`check_with`] gives for the
/// same bytes.
pub fn check_reader(engine: &mut Engine, reader: &mut dyn Read) -> std::io::Result<StreamVerdict> {
    let mut state = engine.initial();
    let work_start = engine.work_done();
    let mut tracker = PositionTracker { line: 1, column: 0 };
    // `kept` holds the last bytes before offset `consumed`.
    let mut kept: Vec<u8> = Vec::new();
    let mut consumed = 0usize;
    let mut held: Vec<u8> = Vec::new();
    let mut buf = vec![0u8; STREAM_CHUNK];
    let mut compact_above = STREAM_MEMORY_ENTRIES;
    loop {
        let n = read_some(reader, &mut buf)?;
        let at_end = n == 0;
        let mut chunk = std::mem::take(&mut held);
        chunk.extend_from_slice(&buf[..n]);
        let usable = if at_end {
            chunk.len()
        } else {
            whole_chars_len(&chunk)
        };
        held = chunk.split_off(usable);
        match feed_bounded(engine, state, &chunk, work_start, consumed) {
            Ok(next) => {
                state = next;
                if engine.memory_entries() > compact_above {
                    state = engine.compact(state);
                    // What survives is the live state, which grows with the input's nesting:
                    // compacting again only once the memory has doubled since keeps the total
                    // work linear in the input (a million unclosed brackets would otherwise
                    // recopy their stacks at every chunk).
                    compact_above = STREAM_MEMORY_ENTRIES.max(2 * engine.memory_entries());
                }
            }
            Err((offset, before, stopped)) => {
                let mut at = tracker;
                at.advance(&chunk[..offset]);
                let window_start = consumed - kept.len();
                let mut window = kept;
                window.extend_from_slice(&chunk);
                window.extend_from_slice(&held);
                // A little of what follows, to show the rest of the line.
                let mut more = vec![0u8; STREAM_CONTEXT];
                let extra = read_some(reader, &mut more).unwrap_or(0);
                window.extend_from_slice(&more[..extra]);
                let kind = match stopped {
                    Stopped::TooAmbiguous => VerdictKind::TooAmbiguous,
                    Stopped::Rejected => VerdictKind::Rejected,
                };
                let expected = if kind == VerdictKind::Rejected {
                    engine.expected(before)
                } else {
                    Expected::default()
                };
                return Ok(StreamVerdict {
                    verdict: Verdict {
                        kind,
                        offset: Some(consumed + offset),
                        position: at.position(),
                        expected,
                        state: before,
                    },
                    window,
                    window_start,
                });
            }
        }
        tracker.advance(&chunk);
        consumed += chunk.len();
        kept.extend_from_slice(&chunk);
        if kept.len() > STREAM_CONTEXT {
            kept.drain(..kept.len() - STREAM_CONTEXT);
        }
        if at_end {
            break;
        }
    }
    let kind = if engine.can_end(state) {
        VerdictKind::Accepted
    } else {
        VerdictKind::Incomplete
    };
    Ok(StreamVerdict {
        verdict: Verdict {
            kind,
            offset: None,
            position: tracker.position(),
            expected: engine.expected(state),
            state,
        },
        window_start: consumed - kept.len(),
        window: kept,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exponential_ambiguity_is_reported_not_followed() {
        // Every 'x' doubles the stacks (a 'y' or a 'z' must close each level).
        let g = Arc::new(
            Grammar::parse("root ::= a\na ::= \"x\" a \"y\" | \"x\" a \"z\" | \"\"").unwrap(),
        );
        let v = check(&g, "x".repeat(40).as_bytes());
        assert_eq!(v.kind, VerdictKind::TooAmbiguous);
        assert!(v.offset.unwrap() >= 10);
        assert!(check(&g, b"xxyz").is_accepted());
    }

    /// A reader that gives at most `step` bytes per read (to split characters across chunks).
    struct Trickle<'a> {
        bytes: &'a [u8],
        step: usize,
    }

    impl Read for Trickle<'_> {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            let n = self.step.min(buf.len()).min(self.bytes.len());
            buf[..n].copy_from_slice(&self.bytes[..n]);
            self.bytes = &self.bytes[n..];
            Ok(n)
        }
    }

    #[test]
    fn a_stream_gets_the_same_verdict_as_the_whole_text() {
        let g = Arc::new(Grammar::parse("root ::= ([a-zé€😀] | \"\\n\")* \"!\"").unwrap());
        let texts: [&[u8]; 6] = [
            "ab\né€😀!".as_bytes(),
            "ab\né€😀".as_bytes(),
            "ab\nc€X😀".as_bytes(),
            "ab\n€\u{e9}😀\u{1F600}Z".as_bytes(),
            b"\xff",
            b"",
        ];
        for text in texts {
            let whole = check(&g, text);
            for step in [1, 2, 3, 5, 1 << 20] {
                let mut engine = Engine::new(Arc::clone(&g));
                let streamed =
                    check_reader(&mut engine, &mut Trickle { bytes: text, step }).unwrap();
                let v = &streamed.verdict;
                assert_eq!(v.kind, whole.kind, "{text:?} {step}");
                assert_eq!(v.offset, whole.offset, "{text:?} {step}");
                assert_eq!(v.position, whole.position, "{text:?} {step}");
                assert_eq!(v.expected, whole.expected, "{text:?} {step}");
                let at = v.offset.unwrap_or(text.len());
                assert!(streamed.window_start <= at);
                assert_eq!(
                    &streamed.window[..],
                    &text[streamed.window_start..streamed.window_start + streamed.window.len()]
                );
            }
        }
    }

    #[test]
    fn compacting_keeps_the_state_and_frees_the_rest() {
        let g = Arc::new(
            Grammar::parse("root ::= obj\nobj ::= \"{\" (obj | \"1\") \"}\" | \"[\" obj \"]\"")
                .unwrap(),
        );
        let mut engine = Engine::new(Arc::clone(&g));
        let deep = 20_000;
        let open = "{[".repeat(deep / 2);
        let state = engine.feed(engine.initial(), open.as_bytes()).unwrap();
        let before = engine.memory_entries();
        let state = engine.compact(state);
        let after = engine.memory_entries();
        assert!(after < before / 2, "{before} -> {after}");
        let close: String = "]}".repeat(deep / 2);
        let end = engine
            .feed(state, format!("{{1}}{close}").as_bytes())
            .unwrap();
        assert!(engine.can_end(end));
        // The initial state is valid again after compacting.
        let start = engine.initial();
        assert!(engine.feed(start, b"{1}").is_ok_and(|s| engine.can_end(s)));
    }

    #[test]
    fn a_stream_stops_reading_at_the_first_rejected_byte() {
        /// Endless `y\n`, counting what was read.
        struct Yes(usize);
        impl Read for Yes {
            fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
                for (i, b) in buf.iter_mut().enumerate() {
                    *b = if i % 2 == 0 { b'y' } else { b'\n' };
                }
                self.0 += buf.len();
                Ok(buf.len() - buf.len() % 2)
            }
        }
        let g = Arc::new(Grammar::parse("root ::= \"{\" [a-z]* \"}\"").unwrap());
        let mut engine = Engine::new(Arc::clone(&g));
        let mut yes = Yes(0);
        let v = check_reader(&mut engine, &mut yes).unwrap();
        assert_eq!(v.verdict.kind, VerdictKind::Rejected);
        assert_eq!(v.verdict.offset, Some(0));
        assert!(yes.0 <= 2 * STREAM_CHUNK, "{} bytes read", yes.0);
    }

    #[test]
    fn a_large_unambiguous_alternation_is_checked() {
        // 70,000 values: more live stacks at the start than the old 65,536 cap.
        let values: Vec<String> = (0..70_000).map(|i| format!("\"v{i}\"")).collect();
        let g = Arc::new(Grammar::parse(&format!("root ::= {}", values.join(" | "))).unwrap());
        assert!(check(&g, b"v69999").is_accepted());
        assert!(check(&g, b"v12345").is_accepted());
        assert_eq!(check(&g, b"v7").kind, VerdictKind::Accepted);
        assert_eq!(check(&g, b"v70000").kind, VerdictKind::Rejected);
    }

    #[test]
    fn a_grammar_that_keeps_many_stacks_busy_stops_in_bounded_work() {
        // 10,000 rules that each read letters, owing a '!' per letter: 10,000 live stacks at
        // every byte (far under the old 65,536 cap), each byte new stacks and a lot of work.
        let n = 10_000;
        let mut text = String::from("root ::= ");
        text.push_str(
            &(0..n)
                .map(|i| format!("r{i}"))
                .collect::<Vec<_>>()
                .join(" | "),
        );
        for i in 0..n {
            text.push_str(&format!("\nr{i} ::= [a-z] r{i} \"!\" | \"\""));
        }
        let g = Arc::new(Grammar::parse(&text).unwrap());
        let mut engine = Engine::new(Arc::clone(&g));
        let input = "x".repeat(2_500);
        let v = check_with(&mut engine, input.as_bytes());
        assert_eq!(v.kind, VerdictKind::TooAmbiguous);
        let offset = v.offset.unwrap();
        assert!(offset > 10 && offset < 2_500, "stopped at {offset}");
        let limit = WORK_BURST + WORK_PER_BYTE * (offset as u64 + 1);
        assert!(engine.work_done() <= limit + crate::stacks::MAX_STEP_WORK as u64);
        // A short input is still checked.
        assert!(check(&g, b"abc!!!").is_accepted());
    }

    #[test]
    fn nested_optional_recursion_is_bounded_by_the_work_it_does() {
        // Reduced from a fuzzing timeout: `(((a)root ?)*)+` nests a repetition of an optional
        // self-reference, so each byte expands ever more rule references per stack kept. The
        // references visited are work too: the check stops with `TooAmbiguous` once they pass
        // the bound, and every stack node built was counted.
        let g = Arc::new(Grammar::parse("root ::= (((a)root ?)*)+\na ::= \"x\"? \"y\"\n").unwrap());
        let mut engine = Engine::new(Arc::clone(&g));
        let input = "xy".repeat(40);
        let v = check_with(&mut engine, input.as_bytes());
        assert_eq!(v.kind, VerdictKind::TooAmbiguous);
        let offset = v.offset.unwrap() as u64;
        let limit = WORK_BURST + WORK_PER_BYTE * (offset + 1);
        assert!(engine.work_done() <= limit + crate::stacks::MAX_STEP_WORK as u64);
        // Short inputs are still checked.
        assert!(check(&g, b"xyyxy").is_accepted());
    }

    #[test]
    fn rule_references_expanded_in_a_step_count_as_work() {
        // After "x" one stack expands through 1,000 rule references to a single terminal: the
        // step's work counts the references visited, not only the one stack it keeps.
        let mut text = String::from("root ::= \"x\" r0\n");
        for i in 0..1_000 {
            text.push_str(&format!("r{i} ::= r{}\n", i + 1));
        }
        text.push_str("r1000 ::= \"y\"\n");
        let g = Arc::new(Grammar::parse(&text).unwrap());
        let mut engine = Engine::new(Arc::clone(&g));
        let before = engine.work_done();
        assert_eq!(check_with(&mut engine, b"x").kind, VerdictKind::Incomplete);
        assert!(
            engine.work_done() - before >= 1_000,
            "work {}",
            engine.work_done() - before
        );
    }

    #[test]
    fn long_rule_chains_do_not_overflow() {
        let mut text = String::from("root ::= r0\n");
        for i in 0..200_000 {
            text.push_str(&format!("r{i} ::= r{}\n", i + 1));
        }
        text.push_str("r200000 ::= \"x\"\n");
        let g = toolrail_gbnf::Grammar::parse(&text).unwrap();
        assert!(check(&std::sync::Arc::new(g), b"x").is_accepted());
    }
}
