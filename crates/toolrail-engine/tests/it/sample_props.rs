//! Property tests: every string `sample` produces is accepted, and every proper prefix of it
//! (cut at any byte, even inside a UTF-8 sequence) is incomplete or accepted, never rejected.

use std::sync::Arc;

use proptest::prelude::*;
use toolrail_engine::sample::{Sampler, SplitMix64};
use toolrail_engine::{Engine, VerdictKind, check_with};
use toolrail_gbnf::Grammar;

/// `../shared/corpus/gbnf/<name>.gbnf`; missing: a failure under `CI=true`, otherwise None.
fn corpus_grammar(name: &str) -> Option<Arc<Grammar>> {
    let path = toolrail_testkit::corpus(&format!("gbnf/{name}.gbnf"))?;
    let text = std::fs::read_to_string(path).unwrap();
    Some(Arc::new(Grammar::parse(&text).unwrap()))
}

const EXTRA: &[&str] = &[
    // A tool-call shaped grammar with nesting, repetition bounds and alternatives.
    r#"root ::= "{\"name\": " name ", \"arguments\": " args "}"
name ::= "\"get-weather\"" | "\"search\""
args ::= "{" ( pair ( ", " pair ){0,3} )? "}"
pair ::= "\"" [a-z]{1,8} "\": " value
value ::= [0-9]{1,4} | "\"" [^"\\\x00-\x1f]* "\"" | args"#,
    // Unicode classes and negation.
    r#"root ::= ([α-ω] | [^a-z\n] | "\u00e9")+ "\n""#,
    // Negated classes whose excluded ranges share UTF-8 lead bytes with allowed characters.
    r#"root ::= [^,\x00-\x81f]+ ("," [^\x00-\u07ff\u0800-\u0fff]*)? [^\x00-\x7f\u00a0]?"#,
];

fn check_samples(grammar: &Arc<Grammar>, seed: u64) -> Result<(), TestCaseError> {
    let sampler = Sampler::new(grammar);
    let mut rng = SplitMix64::new(seed);
    let mut engine = Engine::new(Arc::clone(grammar));
    let s = sampler
        .sample(&mut rng, 80)
        .map_err(|e| TestCaseError::fail(e.to_string()))?;
    let bytes = s.as_bytes();
    let verdict = check_with(&mut engine, bytes);
    prop_assert_eq!(verdict.kind, VerdictKind::Accepted, "sample {:?}", s);
    for cut in 0..bytes.len() {
        let v = check_with(&mut engine, &bytes[..cut]);
        prop_assert_ne!(
            v.kind,
            VerdictKind::Rejected,
            "prefix {:?} of {:?}",
            &bytes[..cut],
            s
        );
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn corpus_samples_and_prefixes(seed in any::<u64>(), which in 0usize..7) {
        let names = ["arithmetic", "c", "chess", "japanese", "json", "json_arr", "list"];
        let Some(grammar) = corpus_grammar(names[which]) else {
            return Ok(());
        };
        check_samples(&grammar, seed)?;
    }

    #[test]
    fn extra_samples_and_prefixes(seed in any::<u64>(), which in 0usize..EXTRA.len()) {
        let g = Arc::new(Grammar::parse(EXTRA[which]).unwrap());
        check_samples(&g, seed)?;
    }
}
