//! Golden files for toolrail's main output: the grammar of every sample tool set in every
//! envelope, and of every sample tool's parameter schema as a plain JSON Schema, compared byte
//! for byte with `tests/golden/`. A change to the converter or an envelope shows up here as a
//! diff to review; `UPDATE_GOLDEN=1 cargo test -p toolrail-tools golden` rewrites the files.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use toolrail_tools::envelope::Format;
use toolrail_tools::grammar::{GrammarOptions, schema_grammar, tool_call_grammar};
use toolrail_tools::toolset::ToolSet;

fn samples_dir() -> PathBuf {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../..")).join("sample_schemas")
}

fn golden_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden")
}

/// Every golden file's name and the text it must hold, from the samples as they are now.
fn expected() -> Vec<(String, String)> {
    let mut samples: Vec<PathBuf> = std::fs::read_dir(samples_dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json" || e == "py"))
        .collect();
    samples.sort();
    assert!(!samples.is_empty(), "no sample tool sets found");
    let mut out = Vec::new();
    for path in samples {
        let stem = path.file_stem().unwrap().to_string_lossy().into_owned();
        let tools = ToolSet::from_text(&std::fs::read_to_string(&path).unwrap())
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        for format in Format::ALL {
            let options = GrammarOptions {
                format,
                ..GrammarOptions::default()
            };
            let grammar = tool_call_grammar(&tools, &options)
                .unwrap_or_else(|e| panic!("{stem} in {format}: {e}"));
            out.push((format!("{stem}.{format}.gbnf"), grammar.text));
        }
        for tool in tools.tools() {
            let grammar = schema_grammar(&tool.parameters, &GrammarOptions::default())
                .unwrap_or_else(|e| panic!("{stem}/{}: {e}", tool.name));
            out.push((format!("{stem}.{}.schema.gbnf", tool.name), grammar.text));
        }
    }
    out
}

#[test]
fn sample_grammars_match_their_golden_files() {
    let dir = golden_dir();
    let update = std::env::var_os("UPDATE_GOLDEN").is_some_and(|v| v != "0");
    let expected = expected();
    if update {
        std::fs::create_dir_all(&dir).unwrap();
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "gbnf") {
                std::fs::remove_file(path).unwrap();
            }
        }
        for (name, text) in &expected {
            std::fs::write(dir.join(name), text).unwrap();
        }
        return;
    }
    let mut problems = Vec::new();
    for (name, text) in &expected {
        match std::fs::read_to_string(dir.join(name)) {
            Ok(golden) if golden == *text => {}
            Ok(golden) => {
                let line = golden
                    .lines()
                    .zip(text.lines())
                    .position(|(a, b)| a != b)
                    .map_or(golden.lines().count().min(text.lines().count()) + 1, |i| {
                        i + 1
                    });
                problems.push(format!("{name}: differs from line {line}"));
            }
            Err(e) => problems.push(format!("{name}: {e}")),
        }
    }
    let wanted: BTreeSet<&str> = expected.iter().map(|(n, _)| n.as_str()).collect();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let name = entry.unwrap().file_name().to_string_lossy().into_owned();
        if name.ends_with(".gbnf") && !wanted.contains(name.as_str()) {
            problems.push(format!("{name}: no sample makes this file any more"));
        }
    }
    assert!(
        problems.is_empty(),
        "golden grammars differ (review, then UPDATE_GOLDEN=1 to rewrite):\n{}",
        problems.join("\n")
    );
}
