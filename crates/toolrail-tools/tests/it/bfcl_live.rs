//! BFCL v4's live tool sets (user-contributed definitions, kept in `tests/data`): every set
//! converts strictly into a tool-call grammar or is refused naming the keywords that clash, and
//! every set with readable types converts leniently (only the one empty set is refused, as it
//! must be: no call can be written). Each lenient grammar parses as llama.cpp reads GBNF.

use serde_json::Value;
use toolrail_gbnf::Grammar;
use toolrail_tools::grammar::{GrammarOptions, tool_call_grammar};
use toolrail_tools::toolset::ToolSet;

const SETS: &str = include_str!("../data/bfcl-v4-live-tool-sets.jsonl");

#[test]
fn every_live_set_converts_strictly_or_names_the_clash_and_converts_leniently() {
    let strict = GrammarOptions::default();
    let lenient = GrammarOptions {
        lenient: true,
        ..GrammarOptions::default()
    };
    let (mut sets, mut strict_ok, mut lenient_ok) = (0, 0, 0);
    let mut refused = Vec::new();
    for line in SETS.lines() {
        let entry: Value = serde_json::from_str(line).unwrap();
        let id = entry["id"].as_str().unwrap();
        sets += 1;
        let tools = match ToolSet::from_value(&entry["function"]) {
            Ok(tools) => tools,
            Err(e) => {
                refused.push(format!("{id}: {e}"));
                continue;
            }
        };
        match tool_call_grammar(&tools, &strict) {
            Ok(_) => strict_ok += 1,
            // the one empty set: no call can be written (checked below)
            Err(e) if e.to_string().contains("the tool set is empty") => {}
            Err(e) => {
                let e = e.to_string();
                assert!(
                    e.contains(" clash"),
                    "{id}: refused without naming a clash: {e}"
                );
            }
        }
        match tool_call_grammar(&tools, &lenient) {
            Ok(g) => {
                Grammar::parse(&g.text).unwrap_or_else(|e| panic!("{id}: {e}"));
                lenient_ok += 1;
            }
            Err(e) => refused.push(format!("{id}: {e}")),
        }
    }
    assert_eq!(sets, 818);
    assert_eq!(strict_ok, 814);
    assert_eq!(lenient_ok, 817, "{refused:?}");
    assert_eq!(refused.len(), 1, "{refused:?}");
    assert!(
        refused[0].starts_with("live_irrelevance_120-9-0: "),
        "{refused:?}"
    );
    assert!(refused[0].contains("no tool"), "{refused:?}");
}
