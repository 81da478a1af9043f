//! llguidance (the constrained-decoding engine behind llama.cpp's `%llguidance`, vLLM and
//! SGLang) as a third mask engine, on the same vocabulary as toolrail and llama.cpp, for
//! comparisons, benchmarks and generation. It is fed either a JSON Schema directly (its own
//! compiler), so its masks can differ from the GBNF engines' where the two grammars differ, or
//! toolrail's compiled GBNF written out in llguidance's Lark syntax ([`gbnf_to_lark`]), one
//! terminal per character class, so that llguidance's lexer cannot split the text differently
//! from llama.cpp's character-by-character reading. The differences are counted and shown,
//! never hidden.
//!
//! Special tokens: llguidance never matches them against text (it marks them with a 0xFF
//! byte), while llama.cpp's grammar sampler matches their text (`<eos>`, `<start_of_turn>`)
//! like any other piece; toolrail follows llama.cpp. Only the end-of-generation tokens are
//! marked special here (other control tokens are text, as in llama.cpp). llguidance knows one
//! end-of-generation token; where it allows it, [`LlgMatcher::mask`] allows every
//! end-of-generation token of the vocabulary, as llama.cpp does. Tokens whose piece is empty or
//! starts with NUL are masked by all three.

use std::sync::Arc;

use llguidance::api::TopLevelGrammar;
use llguidance::{Matcher, ParserFactory};
use serde_json::Value;
use toktrie::{ApproximateTokEnv, TokEnv, TokRxInfo, TokTrie};
use toolrail_engine::{TokenMask, TokenTable};
use toolrail_gbnf::source::line_col;
use toolrail_gbnf::{ElementKind, Grammar};

/// llguidance set up for one vocabulary (build once; compile grammars from it).
pub struct Llguidance {
    factory: ParserFactory,
    vocab_len: usize,
    /// The token llguidance knows as end of generation.
    eos: u32,
    /// Every end-of-generation token of the vocabulary.
    eog: Arc<[u32]>,
}

impl std::fmt::Debug for Llguidance {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Llguidance")
            .field("vocab_len", &self.vocab_len)
            .finish_non_exhaustive()
    }
}

impl Llguidance {
    /// llguidance for `table`'s vocabulary: token bytes as toolrail decodes them, end of
    /// generation at the first end-of-generation token. Errors are llguidance's, as text.
    pub fn new(table: &TokenTable) -> Result<Llguidance, String> {
        let n = table.len();
        let eos = (0..n as u32).find(|&id| table.is_eog(id)).unwrap_or(0);
        let words: Vec<Vec<u8>> = (0..n as u32)
            .map(|id| {
                let piece = table.piece(id);
                if table.is_eog(id) {
                    // special: never matched against text
                    let mut w = vec![TokTrie::SPECIAL_TOKEN_MARKER];
                    w.extend_from_slice(piece);
                    w
                } else {
                    piece.to_vec()
                }
            })
            .collect();
        let vocab_size = u32::try_from(n).map_err(|_| "vocabulary too large".to_owned())?;
        let trie = TokTrie::from(&TokRxInfo::new(vocab_size, eos), &words);
        let env: TokEnv = Arc::new(ApproximateTokEnv::new(trie));
        let mut factory = ParserFactory::new_simple(&env).map_err(|e| e.to_string())?;
        factory.quiet();
        let eog: Arc<[u32]> = (0..n as u32).filter(|&id| table.is_eog(id)).collect();
        Ok(Llguidance {
            factory,
            vocab_len: n,
            eos,
            eog,
        })
    }

    /// A matcher for the text of `grammar` (toolrail's compiled GBNF, given to llguidance as
    /// Lark by [`gbnf_to_lark`]). The error names what llguidance cannot take.
    pub fn gbnf_matcher(&self, grammar: &Grammar) -> Result<LlgMatcher, String> {
        let lark = gbnf_to_lark(grammar)?;
        self.matcher(TopLevelGrammar::from_lark(lark))
    }

    /// A matcher for values of `schema` (llguidance's own JSON Schema compiler).
    pub fn schema_matcher(&self, schema: &Value) -> Result<LlgMatcher, String> {
        self.matcher(TopLevelGrammar::from_json_schema(schema.clone()))
    }

    fn matcher(&self, grammar: TopLevelGrammar) -> Result<LlgMatcher, String> {
        let parser = self
            .factory
            .create_parser(grammar)
            .map_err(|e| e.to_string())?;
        let matcher = Matcher::new(Ok(parser));
        match matcher.get_error() {
            Some(e) => Err(e),
            None => Ok(LlgMatcher {
                matcher,
                vocab_len: self.vocab_len,
                eos: self.eos,
                eog: Arc::clone(&self.eog),
            }),
        }
    }
}

/// One llguidance grammar being followed token by token.
pub struct LlgMatcher {
    matcher: Matcher,
    vocab_len: usize,
    eos: u32,
    eog: Arc<[u32]>,
}

impl std::fmt::Debug for LlgMatcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LlgMatcher").finish_non_exhaustive()
    }
}

impl LlgMatcher {
    /// The tokens allowed next, as a [`TokenMask`] (every end-of-generation token included
    /// where the grammar may end).
    pub fn mask(&mut self) -> Result<TokenMask, String> {
        // a grammar that is complete and cannot go on stops the parser: only the end is allowed
        let vob = self
            .matcher
            .compute_mask_or_eos()
            .map_err(|e| e.to_string())?;
        let mut mask = TokenMask::empty(self.vocab_len);
        vob.iter_set_entries(|id| {
            if id < self.vocab_len {
                mask.insert(id as u32);
            }
        });
        if mask.contains(self.eos) {
            for &id in self.eog.iter() {
                mask.insert(id);
            }
        }
        Ok(mask)
    }

    /// Advances by `token` (any end-of-generation token counts as llguidance's own).
    pub fn consume(&mut self, token: u32) -> Result<(), String> {
        let token = if self.eog.contains(&token) {
            self.eos
        } else {
            token
        };
        self.matcher.consume_token(token).map_err(|e| e.to_string())
    }

    /// True if the grammar may end here.
    pub fn can_end(&mut self) -> bool {
        self.matcher.is_accepting().unwrap_or(false)
    }
}

/// The largest Unicode scalar value (llguidance's regexes take scalar values only).
const MAX_SCALAR: u32 = 0x10FFFF;

/// toolrail's compiled GBNF (llama.cpp's rules after its repetition rewrite) written in
/// llguidance's Lark syntax: rule `i` becomes `r<i>`, `start` refers to the root, every
/// character class (a literal character included) becomes a one-character regex terminal, and
/// an empty alternative becomes `""`. One character per terminal keeps llama.cpp's reading:
/// llguidance's lexer takes the longest match among its terminals, which with longer
/// literals could split text where llama.cpp would not.
///
/// Errors name what llguidance cannot take here, with its line:column in the grammar: token
/// references (`<[id]>`, `!<[id]>`: this engine matches text) and class bounds that are no
/// Unicode scalar value (surrogates, above U+10FFFF).
pub fn gbnf_to_lark(grammar: &Grammar) -> Result<String, String> {
    use std::fmt::Write as _;
    let source = grammar.source().as_bytes();
    let at = |pos: u32| line_col(source, grammar.span(pos).start as usize);
    let mut lark = String::new();
    let _ = writeln!(lark, "start: r{}", grammar.root());
    for rule in 0..grammar.rule_count() as u32 {
        let _ = write!(lark, "r{rule}:");
        let start = grammar.rule_start(rule);
        let mut pos = start;
        let mut empty_alternative = true;
        loop {
            let element = grammar.element(pos);
            match element.kind {
                ElementKind::End | ElementKind::Alt => {
                    if empty_alternative {
                        lark.push_str(" \"\"");
                    }
                    if element.kind == ElementKind::End {
                        break;
                    }
                    lark.push_str(" |");
                    empty_alternative = true;
                    pos += 1;
                }
                ElementKind::RuleRef => {
                    let _ = write!(lark, " r{}", element.value);
                    empty_alternative = false;
                    pos += 1;
                }
                ElementKind::Char | ElementKind::CharNot | ElementKind::CharAny => {
                    let mut class = String::from(" /[");
                    if element.kind == ElementKind::CharNot {
                        class.push('^');
                    }
                    if element.kind == ElementKind::CharAny {
                        let _ = write!(class, "\\x{{0}}-\\x{{{MAX_SCALAR:X}}}");
                        pos += 1;
                    } else {
                        // The class's characters and ranges, up to the next element that
                        // starts something else.
                        let mut first = true;
                        loop {
                            let e = grammar.element(pos);
                            let continues = first || e.kind == ElementKind::CharAlt;
                            if !continues {
                                break;
                            }
                            first = false;
                            let low = e.value;
                            let high = if grammar.element(pos + 1).kind == ElementKind::CharRngUpper
                            {
                                pos += 1;
                                grammar.element(pos).value
                            } else {
                                low
                            };
                            for bound in [low, high] {
                                if bound > MAX_SCALAR || (0xD800..=0xDFFF).contains(&bound) {
                                    return Err(format!(
                                        "{}: character U+{bound:X} in a class: llguidance takes \
                                         Unicode scalar values only (no surrogates, nothing above \
                                         U+10FFFF)",
                                        at(pos)
                                    ));
                                }
                            }
                            if high < low {
                                // llama.cpp's range matches nothing: an empty range
                                pos += 1;
                                continue;
                            }
                            let _ = write!(class, "\\x{{{low:X}}}");
                            if high > low {
                                let _ = write!(class, "-\\x{{{high:X}}}");
                            }
                            pos += 1;
                        }
                    }
                    class.push_str("]/");
                    if class == " /[]/" {
                        // only empty ranges: a class that matches nothing
                        return Err(format!(
                            "{}: a character class that matches nothing (every range is \
                             reversed): llguidance cannot write it",
                            at(pos.saturating_sub(1))
                        ));
                    }
                    lark.push_str(&class);
                    empty_alternative = false;
                }
                ElementKind::Token | ElementKind::TokenNot => {
                    return Err(format!(
                        "{}: token reference `{}<[{}]>`: the llguidance engine here matches \
                         text only",
                        at(pos),
                        if element.kind == ElementKind::TokenNot {
                            "!"
                        } else {
                            ""
                        },
                        element.value
                    ));
                }
                ElementKind::CharRngUpper | ElementKind::CharAlt => {
                    return Err(format!(
                        "{}: a class continuation with no class before it (a malformed \
                         compiled grammar)",
                        at(pos)
                    ));
                }
            }
        }
        lark.push('\n');
    }
    Ok(lark)
}

#[cfg(test)]
mod tests {
    use super::*;
    use toolrail_engine::{Engine, MaskEngine};

    /// Printable ASCII bytes, a few longer pieces and an end-of-generation token.
    fn table() -> Arc<TokenTable> {
        let mut pieces: Vec<Vec<u8>> = (0x20u8..0x7f).map(|b| vec![b]).collect();
        for extra in [
            "{\"", "\":", "\"name\"", "Paris", "ab", "abc", "12", "é", "日本", "\n", "<eos>", "},",
        ] {
            pieces.push(extra.as_bytes().to_vec());
        }
        let eos = pieces.len() as u32 - 2;
        Arc::new(TokenTable::new(pieces, [eos]))
    }

    /// Feeds `text` one byte-token at a time and compares toolrail's and llguidance's masks at
    /// every position (and after the end); returns the positions where they differ.
    fn differences(gbnf: &str, text: &str) -> Vec<String> {
        let table = table();
        let grammar = Grammar::parse(gbnf).unwrap();
        let llg = Llguidance::new(&table).unwrap();
        let mut matcher = llg.gbnf_matcher(&grammar).unwrap();
        let mut masks = MaskEngine::new(Arc::clone(&table));
        let mut engine = Engine::new(Arc::new(grammar));
        let mut state = engine.initial();
        let mut found = Vec::new();
        let bytes = text.as_bytes();
        for i in 0..=bytes.len() {
            let ours = masks.mask(&mut engine, state).unwrap();
            let theirs = matcher.mask().unwrap();
            if ours != theirs {
                let only = |a: &TokenMask, b: &TokenMask| -> Vec<String> {
                    a.iter()
                        .filter(|&id| !b.contains(id))
                        .map(|id| String::from_utf8_lossy(table.piece(id)).into_owned())
                        .collect()
                };
                found.push(format!(
                    "at {i}: only toolrail {:?}, only llguidance {:?}",
                    only(&ours, &theirs),
                    only(&theirs, &ours)
                ));
            }
            let Some(&b) = bytes.get(i) else { break };
            let token = (0..table.len() as u32)
                .find(|&id| table.piece(id) == [b])
                .unwrap();
            state = engine.accept_token(state, token, &[b]).unwrap();
            matcher.consume(token).unwrap();
        }
        found
    }

    #[test]
    fn gbnf_as_lark_gives_the_same_masks() {
        let cases = [
            (
                r#"root ::= "{" ws "\"name\":" ws string ws "}"
string ::= "\"" ([^"\\] | "\\" ["\\/bfnrt])* "\""
ws ::= [ \t\n]{0,3}"#,
                r#"{ "name": "Pa\"ris" }"#,
            ),
            (
                r#"root ::= num ("," num)* | "ab" | "abc" x?
num ::= "-"? [1-9] [0-9]{0,4}
x ::= . "z""#,
                "12,-305,7",
            ),
            (
                r#"root ::= "abc" x?
x ::= . "z""#,
                "abc~z",
            ),
            (r#"root ::= [a-c]+ | [^a-z]*"#, "ABC !"),
            (r#"root ::= ( "a" | ) "b" []"#, "ab"),
        ];
        for (gbnf, text) in cases {
            let found = differences(gbnf, text);
            assert!(found.is_empty(), "{gbnf}\n{text}\n{found:#?}");
        }
    }

    #[test]
    fn a_different_grammar_shows_differences() {
        // llguidance reads the GBNF it is given; fed a wider class it allows more than
        // toolrail's narrower one: the comparison must notice.
        let table = table();
        let llg = Llguidance::new(&table).unwrap();
        let narrow = Grammar::parse(r#"root ::= [a-b]+"#).unwrap();
        let wide = Grammar::parse(r#"root ::= [a-c]+"#).unwrap();
        let mut matcher = llg.gbnf_matcher(&wide).unwrap();
        let mut masks = MaskEngine::new(Arc::clone(&table));
        let mut engine = Engine::new(Arc::new(narrow));
        let state = engine.initial();
        let ours = masks.mask(&mut engine, state).unwrap();
        let theirs = matcher.mask().unwrap();
        assert_ne!(ours, theirs);
        assert!(
            theirs
                .iter()
                .any(|id| table.piece(id) == b"c" && !ours.contains(id))
        );
    }

    #[test]
    fn what_llguidance_cannot_take_is_named() {
        let table = table();
        let llg = Llguidance::new(&table).unwrap();
        let grammar = Grammar::parse("root ::= \"a\" <[5]>").unwrap();
        let error = llg.gbnf_matcher(&grammar).unwrap_err();
        assert!(error.contains("1:14") && error.contains("<[5]>"), "{error}");
    }
}
