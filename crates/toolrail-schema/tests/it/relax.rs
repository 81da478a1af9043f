//! Relaxations only ever loosen: on every MaskBench schema, every instance the schema accepts
//! (the corpus's valid instances, confirmed by the jsonschema crate with formats checked) is
//! still accepted after each relaxation the schema offers alone, and after all of them
//! together.

use serde_json::Value;
use toolrail_schema::relax::{apply, candidates};

fn validator(schema: &Value) -> Option<jsonschema::Validator> {
    jsonschema::options()
        .should_validate_formats(true)
        .build(schema)
        .ok()
}

#[test]
fn every_relaxation_keeps_every_valid_instance() {
    let dir = toolrail_testkit::require!(toolrail_testkit::corpus("maskbench"));
    let files = crate::maskbench_files(&dir.join("data"));
    let (mut relaxations, mut checks) = (0usize, 0usize);
    let mut kinds = std::collections::BTreeSet::new();
    for path in &files {
        let file: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        let schema = &file["schema"];
        let Some(original) = validator(schema) else {
            continue; // a schema the crate cannot compile says nothing here
        };
        let valid: Vec<&Value> = file["tests"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|t| &t["data"])
            .filter(|data| original.is_valid(data))
            .collect();
        if valid.is_empty() {
            continue;
        }
        let found = candidates(schema);
        let mut all = schema.clone();
        for relaxation in &found {
            relaxations += 1;
            kinds.insert(
                format!("{:?}", relaxation.kind)
                    .split([' ', '{'])
                    .next()
                    .unwrap_or("")
                    .to_owned(),
            );
            let mut one = schema.clone();
            apply(&mut one, relaxation).unwrap();
            // a later relaxation may find its keyword gone (a pattern opened, then dropped)
            let _ = apply(&mut all, relaxation);
            let Some(looser) = validator(&one) else {
                panic!(
                    "{}: {relaxation:?} made a schema the crate cannot compile",
                    path.display()
                );
            };
            for data in &valid {
                checks += 1;
                assert!(
                    looser.is_valid(data),
                    "{}: {} {} → {} refuses {data}",
                    path.display(),
                    relaxation.pointer,
                    relaxation.before(),
                    relaxation.after()
                );
            }
        }
        let loosest = validator(&all).unwrap();
        for data in &valid {
            assert!(
                loosest.is_valid(data),
                "{}: all relaxations refuse {data}",
                path.display()
            );
        }
    }
    println!(
        "{relaxations} relaxations over {} schemas, {checks} instance checks",
        files.len()
    );
    // the corpus exercises every kind of relaxation, many times
    assert!(relaxations > 1000, "{relaxations}");
    assert!(checks > relaxations, "{checks}");
    assert_eq!(
        kinds.into_iter().collect::<Vec<_>>(),
        [
            "Drop",
            "DropPattern",
            "Lower",
            "OpenRepetitions",
            "ValuesToTypes"
        ],
    );
}
