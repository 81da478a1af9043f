//! Writes every conversion of the MaskBench schemas and of the JSON-Schema-Test-Suite schemas
//! (under several option sets, and as a Python call's keyword arguments) into a directory, one file per schema and option set: the
//! grammar, or the error, then the warnings and notes. Two dumps (before and after a change to
//! the converter) are compared with `diff -r` to prove the output byte-identical.
//!
//! `cargo run --release -p toolrail-schema --example dump_conversions -- <out-dir>`

use std::fmt::Write as _;
use std::path::PathBuf;

use serde_json::Value;
use toolrail_schema::{
    ConvertOptions, LiteralSyntax, MemberOrder, SchemaConverter, Whitespace, schema_to_gbnf,
};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let out = PathBuf::from(
        std::env::args()
            .nth(1)
            .ok_or("usage: dump_conversions <out-dir>")?,
    );
    std::fs::create_dir_all(&out)?;
    let corpus = toolrail_testkit::shared("corpus").ok_or("the conformance corpus is missing")?;
    let mut schemas: Vec<(String, Value)> = Vec::new();
    let mut files: Vec<PathBuf> = std::fs::read_dir(corpus.join("maskbench/data"))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    files.sort();
    for path in files {
        let file: Value = serde_json::from_str(&std::fs::read_to_string(&path)?)?;
        let name = path
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or("x")
            .to_string();
        schemas.push((format!("mb-{name}"), file["schema"].clone()));
    }
    let suite = corpus.join("json-schema-test-suite");
    let mut files: Vec<PathBuf> = Vec::new();
    for dir in [suite.clone(), suite.join("format")] {
        if let Ok(entries) = std::fs::read_dir(&dir) {
            files.extend(entries.filter_map(|e| e.ok().map(|e| e.path())));
        }
    }
    files.sort();
    {
        for path in files
            .into_iter()
            .filter(|p| p.extension().is_some_and(|e| e == "json"))
        {
            let groups: Value = serde_json::from_str(&std::fs::read_to_string(&path)?)?;
            let dir = path
                .parent()
                .and_then(|d| d.file_name())
                .and_then(|s| s.to_str());
            let file = path.file_stem().and_then(|s| s.to_str()).unwrap_or("x");
            let stem = format!("{}-{file}", dir.unwrap_or("x"));
            for (i, g) in groups.as_array().into_iter().flatten().enumerate() {
                schemas.push((format!("suite-{stem}-{i}"), g["schema"].clone()));
            }
        }
    }
    let option_sets: [(&str, ConvertOptions); 4] = [
        ("default", ConvertOptions::default()),
        (
            "lenient",
            ConvertOptions {
                lenient: true,
                ..Default::default()
            },
        ),
        (
            "llama",
            ConvertOptions {
                llama_compat: true,
                ..Default::default()
            },
        ),
        (
            "closed",
            ConvertOptions {
                close_objects: true,
                member_order: MemberOrder::Declared,
                whitespace: Whitespace::Compact,
                ..Default::default()
            },
        ),
    ];
    for (name, schema) in &schemas {
        for (label, options) in &option_sets {
            let mut text = String::new();
            match schema_to_gbnf(schema, options) {
                Ok(c) => {
                    text.push_str(&c.gbnf);
                    for w in &c.warnings {
                        writeln!(text, "warning {} {}: {}", w.keyword, w.pointer, w.message)?;
                    }
                    for n in &c.notes {
                        writeln!(text, "note {} {}: {}", n.keyword, n.pointer, n.message)?;
                    }
                }
                Err(e) => writeln!(text, "error {} {}: {}", e.keyword, e.pointer, e.message)?,
            }
            std::fs::write(out.join(format!("{name}.{label}.txt")), text)?;
        }
        // the schema as a Python call's keyword arguments, in Python literal syntax
        let mut text = String::new();
        let mut converter =
            SchemaConverter::with_syntax(ConvertOptions::default(), LiteralSyntax::Python);
        match converter.add_arguments("args", schema) {
            Ok(root) => {
                for w in converter.warnings() {
                    writeln!(text, "warning {} {}: {}", w.keyword, w.pointer, w.message)?;
                }
                text.push_str(&converter.finish(&root));
            }
            Err(e) => writeln!(text, "error {} {}: {}", e.keyword, e.pointer, e.message)?,
        }
        std::fs::write(out.join(format!("{name}.python-kwargs.txt")), text)?;
    }
    println!(
        "{} schemas, {} option sets and Python keyword arguments",
        schemas.len(),
        option_sets.len()
    );
    Ok(())
}
