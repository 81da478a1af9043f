//! Fuzz target over the schema converter: the first byte picks the options, the rest is a JSON
//! schema. A schema the converter accepts must give a grammar that toolrail's llama.cpp-exact
//! parser accepts (so within llama.cpp's repetition and rule limits), and a string sampled from
//! it must be accepted by the recognizer. Nothing may panic, abort, overflow the stack or hang.
#![no_main]

use std::sync::Arc;

use libfuzzer_sys::fuzz_target;
use toolrail_engine::gbnf::Grammar;
use toolrail_engine::sample::{Sampler, SplitMix64};
use toolrail_engine::{Engine, VerdictKind, check_with};
use toolrail_schema::{ConvertOptions, schema_to_gbnf};

fuzz_target!(|data: &[u8]| {
    let Some((&flags, json)) = data.split_first() else { return };
    let Ok(text) = std::str::from_utf8(json) else { return };
    let Ok(schema) = serde_json::from_str::<serde_json::Value>(text) else { return };
    let options = ConvertOptions {
        lenient: flags & 1 != 0,
        close_objects: flags & 2 != 0,
        llama_compat: flags & 4 != 0,
        ..ConvertOptions::default()
    };
    let Ok(conversion) = schema_to_gbnf(&schema, &options) else { return };
    let grammar = match Grammar::parse(&conversion.gbnf) {
        Ok(g) => Arc::new(g),
        Err(e) => panic!("converted grammar refused: {e}\n{}", conversion.gbnf),
    };
    let mut engine = Engine::new(Arc::clone(&grammar));
    let mut rng = SplitMix64::new(u64::from(flags));
    if let Ok(s) = Sampler::new(&grammar).sample(&mut rng, 64) {
        let v = check_with(&mut engine, s.as_bytes());
        assert!(
            v.is_accepted() || v.kind == VerdictKind::TooAmbiguous,
            "sample {s:?} rejected by its own grammar\n{}",
            conversion.gbnf
        );
    }
});
