//! Writes what `bench masks` feeds toolrail's mask engine to a file, so that the engine can be
//! profiled alone (`cargo run --release -p toolrail-engine --example mask_replay FILE`): the
//! model's token pieces and end-of-generation ids, then per schema its GBNF and the token ids
//! of every valid instance. Same seeded draw as `bench masks --limit N --seed S`.
//!
//! `cargo run --release -p toolrail-llm --example maskbench_dump MODEL.gguf MASKBENCH OUT N SEED`

use std::io::Write;

use serde_json::{Value, json};
use toolrail_engine::sample::SplitMix64;
use toolrail_llm::Model;
use toolrail_schema::{ConvertOptions, schema_to_gbnf};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let [_, model, dir, out, limit, seed] = args.as_slice() else {
        return Err("usage: maskbench_dump MODEL.gguf MASKBENCH OUT LIMIT SEED".into());
    };
    let model = Model::open(model)?;
    let data = std::path::Path::new(dir).join("data");
    let mut files: Vec<_> = std::fs::read_dir(&data)?
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    let limit: usize = limit.parse()?;
    if limit < files.len() {
        let mut rng = SplitMix64::new(seed.parse()?);
        for i in 0..limit {
            let j = i + rng.below((files.len() - i) as u64) as usize;
            files.swap(i, j);
        }
        files.truncate(limit);
        files.sort();
    }
    let table = model.shared_token_table();
    let pieces: Vec<Vec<u8>> = (0..table.len() as u32)
        .map(|id| table.piece(id).to_vec())
        .collect();
    let eog: Vec<u32> = (0..table.len() as u32)
        .filter(|&id| table.is_eog(id))
        .collect();
    let mut schemas = Vec::new();
    for path in &files {
        let doc: Value = serde_json::from_str(&std::fs::read_to_string(path)?)?;
        let schema = doc.get("schema").cloned().unwrap_or(Value::Bool(true));
        let Ok(c) = schema_to_gbnf(&schema, &ConvertOptions::default()) else {
            continue;
        };
        let mut instances = Vec::new();
        for test in doc
            .get("tests")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            if test.get("valid").and_then(Value::as_bool) != Some(true) {
                continue;
            }
            let Some(data) = test.get("data") else {
                continue;
            };
            let text = serde_json::to_string(data)?;
            instances.push(model.tokenize(&text, false, false));
        }
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
        schemas.push(json!({"name": name, "gbnf": c.gbnf, "instances": instances}));
    }
    let mut f = std::io::BufWriter::new(std::fs::File::create(out)?);
    serde_json::to_writer(
        &mut f,
        &json!({"pieces": pieces, "eog": eog, "schemas": schemas}),
    )?;
    f.flush()?;
    Ok(())
}
