//! `toolrail bench masks DIR`: mask speed over real schemas (MaskBench's format: each file a
//! `schema` and `tests` with `valid` instances), for toolrail, llguidance and llama.cpp in one
//! process, interleaved position by position, one thread each, no decoding.
//!
//! For every schema: each engine compiles it (toolrail: its converter, GBNF parser and first
//! mask; llama.cpp: its grammar sampler on toolrail's GBNF and first mask; llguidance: its own
//! JSON Schema compiler and first mask) — the time to first mask. Then every valid instance
//! (compact JSON) is tokenized with the model's vocabulary and fed token by token; at each
//! position every engine still following it computes its mask over the whole vocabulary (timed)
//! and then takes the token. toolrail's masks are compared with llama.cpp's (the same GBNF:
//! they must agree everywhere) and with llguidance's (its own grammar: differences are counted
//! and the first ones described). A schema toolrail cannot convert gives llama.cpp nothing to
//! run; that is counted apart.
//!
//! llama.cpp's sampler costs tens of milliseconds per mask on a large vocabulary, so with
//! [`MaskBenchOptions::llama_positions`] it computes (and is compared) only at a seeded draw of
//! that many positions per schema; it still takes every token, so it follows the instances to
//! their ends. The report counts, per engine, the positions it computed and, per pair, the
//! positions actually compared: a "0 differences" figure stands on those only.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use serde::Serialize;
use serde_json::Value;

use super::bench::percentile;
use super::llguidance::{LlgMatcher, Llguidance};
use super::{LlamaGrammarSampler, LlmError, Model};
use crate::engine_kind::EngineKind;
use toolrail_engine::sample::SplitMix64;
use toolrail_engine::{Engine, MaskEngine, State, TokenMask};
use toolrail_gbnf::{Grammar, TokenVocabulary};
use toolrail_schema::{ConvertOptions, schema_to_gbnf};

/// What to run.
#[derive(Clone, Debug)]
pub struct MaskBenchOptions {
    /// A MaskBench folder (its `data/` subfolder is used when there is one).
    pub dir: PathBuf,
    /// The engines, in the order they are timed at each position.
    pub engines: Vec<EngineKind>,
    /// At most this many schema files, drawn with `seed` (all, in name order, when None).
    pub limit: Option<usize>,
    /// The draw's seed (also for the positions llama.cpp computes).
    pub seed: u64,
    /// At most this many positions per schema where llama.cpp computes its mask, drawn with
    /// `seed` from all of the schema's positions (every position when None).
    pub llama_positions: Option<usize>,
}

/// Quantiles of a set of times, in milliseconds.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Quantiles {
    /// How many times.
    pub count: usize,
    /// Median.
    pub p50: f64,
    /// 90th percentile.
    pub p90: f64,
    /// 99th percentile.
    pub p99: f64,
    /// Longest.
    pub max: f64,
}

impl Quantiles {
    fn of(mut times: Vec<f64>) -> Quantiles {
        times.sort_by(f64::total_cmp);
        Quantiles {
            count: times.len(),
            p50: percentile(&times, 0.5),
            p90: percentile(&times, 0.9),
            p99: percentile(&times, 0.99),
            max: times.last().copied().unwrap_or(0.0),
        }
    }
}

/// One engine's figures.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct MaskEngineFigures {
    /// The engine.
    pub engine: EngineKind,
    /// Schemas it compiled.
    pub compiled: usize,
    /// Time to first mask per compiled schema.
    pub compile_ms: Quantiles,
    /// Mask time over every position it computed (`mask_ms.count` positions).
    pub mask_ms: Quantiles,
    /// Positions where it followed the instance but was not asked for a mask (llama.cpp
    /// outside its draw of `--llama-positions`; 0 for the others).
    pub positions_skipped: usize,
    /// Instances it rejected before their end (a token it did not allow).
    pub rejected_instances: usize,
}

/// Everything `bench masks` measured.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct MaskBenchReport {
    /// Schema files read (JSON, as MaskBench writes them).
    pub schemas: usize,
    /// The `.json` files that could not be read as JSON, with why: not measured.
    pub unreadable: Vec<UnreadableFile>,
    /// Valid instances fed.
    pub instances: usize,
    /// Tokens in all valid instances: every position, followed by an engine or not.
    pub tokens: usize,
    /// Positions where at least one engine followed the instance.
    pub positions: usize,
    /// The per-schema cap on llama.cpp's positions, if one was set.
    pub llama_positions: Option<usize>,
    /// Per engine.
    pub engines: Vec<MaskEngineFigures>,
    /// Positions where both toolrail's and llama.cpp's masks were computed and compared.
    pub toolrail_llama_compared: usize,
    /// Positions where toolrail's and llama.cpp's masks differ (of those compared).
    pub toolrail_llama_differences: usize,
    /// Schemas llama.cpp could not run (toolrail gave no grammar, or llama.cpp refused it).
    pub llama_not_run: usize,
    /// Positions where both toolrail's and llguidance's masks were computed and compared.
    pub toolrail_llguidance_compared: usize,
    /// Positions where toolrail's and llguidance's masks differ (of those compared).
    pub toolrail_llguidance_differences: usize,
    /// The first toolrail/llama.cpp differences, described (file, position, which engine
    /// allows what).
    pub llama_examples: Vec<String>,
    /// The first toolrail/llguidance differences, described.
    pub llguidance_examples: Vec<String>,
}

/// A schema file `bench masks` passed over.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct UnreadableFile {
    /// The file.
    pub path: PathBuf,
    /// Why it was passed over (the read or JSON error).
    pub reason: String,
}

/// The schema files of `dir` (or `dir/data`), sorted; a seeded draw of `limit` of them.
fn files(options: &MaskBenchOptions) -> Result<Vec<PathBuf>, LlmError> {
    let data = options.dir.join("data");
    let dir = if data.is_dir() {
        data
    } else {
        options.dir.clone()
    };
    let entries = std::fs::read_dir(&dir).map_err(|source| LlmError::Io {
        path: dir.clone(),
        source,
    })?;
    let mut files: Vec<PathBuf> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    if let Some(limit) = options.limit.filter(|&l| l < files.len()) {
        let mut rng = SplitMix64::new(options.seed);
        // a partial Fisher–Yates shuffle: the first `limit` are a uniform draw
        for i in 0..limit {
            let j = i + rng.below((files.len() - i) as u64) as usize;
            files.swap(i, j);
        }
        files.truncate(limit);
        files.sort();
    }
    Ok(files)
}

/// Which of a schema's `total` positions llama.cpp computes: all when `cap` is None or not
/// below `total`, else a uniform draw of `cap` of them (a partial Fisher–Yates shuffle).
fn llama_draw(total: usize, cap: Option<usize>, rng: &mut SplitMix64) -> Vec<bool> {
    match cap.filter(|&c| c < total) {
        None => vec![true; total],
        Some(cap) => {
            let mut order: Vec<usize> = (0..total).collect();
            for i in 0..cap {
                let j = i + rng.below((total - i) as u64) as usize;
                order.swap(i, j);
            }
            let mut drawn = vec![false; total];
            for &p in &order[..cap] {
                drawn[p] = true;
            }
            drawn
        }
    }
}

/// The engines following one instance.
struct Followers {
    toolrail: Option<State>,
    llama: Option<LlamaGrammarSampler>,
    llguidance: Option<LlgMatcher>,
}

fn ms(since: Instant) -> f64 {
    since.elapsed().as_secs_f64() * 1e3
}

/// Describes where two masks differ (a few token ids each way).
fn describe(model: &Model, a: &TokenMask, a_name: &str, b: &TokenMask, b_name: &str) -> String {
    let only = |x: &TokenMask, y: &TokenMask| -> Vec<String> {
        x.iter()
            .filter(|&id| !y.contains(id))
            .take(4)
            .map(|id| format!("{id} {:?}", String::from_utf8_lossy(&model.piece(id))))
            .collect()
    };
    format!(
        "only {a_name} allows [{}]; only {b_name} allows [{}]",
        only(a, b).join(", "),
        only(b, a).join(", ")
    )
}

/// Runs the benchmark on `model`'s vocabulary.
pub fn bench_masks(model: &Model, options: &MaskBenchOptions) -> Result<MaskBenchReport, LlmError> {
    if options.engines.contains(&EngineKind::None) {
        return Err(LlmError::Generation(
            "bench masks times mask engines: `none` computes no mask (use toolrail, llama or \
             llguidance)"
                .to_owned(),
        ));
    }
    let files = files(options)?;
    let wants = |k: EngineKind| options.engines.contains(&k);
    let table = model.shared_token_table();
    let mut masks = MaskEngine::new(Arc::clone(&table));
    let llg = if wants(EngineKind::Llguidance) {
        Some(Llguidance::new(&table).map_err(LlmError::Generation)?)
    } else {
        None
    };
    let mut compile: [Vec<f64>; 4] = Default::default();
    let mut mask_times: [Vec<f64>; 4] = Default::default();
    let mut rejected = [0usize; 4];
    let mut skipped = [0usize; 4];
    let mut draw_rng = SplitMix64::new(options.seed ^ 0x6c6c_616d_612e_6370);
    let slot = |k: EngineKind| k as usize;
    let mut report = MaskBenchReport {
        schemas: 0,
        unreadable: Vec::new(),
        instances: 0,
        tokens: 0,
        positions: 0,
        llama_positions: options.llama_positions,
        engines: Vec::new(),
        toolrail_llama_compared: 0,
        toolrail_llama_differences: 0,
        llama_not_run: 0,
        toolrail_llguidance_compared: 0,
        toolrail_llguidance_differences: 0,
        llama_examples: Vec::new(),
        llguidance_examples: Vec::new(),
    };
    for path in &files {
        let name = path
            .file_name()
            .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
        let doc =
            match crate::files::read_regular_to_string(path, crate::files::MAX_TEXT_FILE_BYTES) {
                Ok(text) => {
                    serde_json::from_str::<Value>(&text).map_err(|e| format!("not JSON: {e}"))
                }
                Err(e) => Err(format!("cannot read it: {}", e.into_io())),
            };
        let doc = match doc {
            Ok(doc) => doc,
            Err(reason) => {
                report.unreadable.push(UnreadableFile {
                    path: path.clone(),
                    reason,
                });
                continue;
            }
        };
        report.schemas += 1;
        let schema = doc.get("schema").cloned().unwrap_or(Value::Bool(true));
        // Compile: the time to first mask.
        // One recognizer per schema: the mask engine's memo is keyed on its states, so
        // instances share it (and it is cleared for the next schema).
        let mut engine: Option<Engine> = None;
        let mut text_grammar = String::new();
        if wants(EngineKind::Toolrail) || wants(EngineKind::Llama) {
            let started = Instant::now();
            if let Ok(c) = schema_to_gbnf(&schema, &ConvertOptions::default())
                && let Ok(g) =
                    Grammar::parse_with(&c.gbnf, "root", Some(model as &dyn TokenVocabulary))
            {
                masks.clear_cache();
                let mut e = Engine::new(Arc::new(g));
                let state = e.initial();
                if masks.mask(&mut e, state).is_ok() && wants(EngineKind::Toolrail) {
                    compile[slot(EngineKind::Toolrail)].push(ms(started));
                }
                text_grammar = c.gbnf;
                engine = Some(e);
            }
        }
        let mut llama_ok = false;
        if wants(EngineKind::Llama) && engine.is_some() {
            let started = Instant::now();
            if let Ok(mut s) = LlamaGrammarSampler::new(model, &text_grammar, "root")
                && s.token_mask().is_ok()
            {
                compile[slot(EngineKind::Llama)].push(ms(started));
                llama_ok = true;
            }
        }
        if wants(EngineKind::Llama) && !llama_ok {
            report.llama_not_run += 1;
        }
        let mut llg_ok = false;
        if let Some(llg) = &llg {
            let started = Instant::now();
            if let Ok(mut m) = llg.schema_matcher(&schema)
                && m.mask().is_ok()
            {
                compile[slot(EngineKind::Llguidance)].push(ms(started));
                llg_ok = true;
            }
        }
        // Every valid instance, tokenized first so llama.cpp's positions can be drawn.
        let instances: Vec<Vec<u32>> = doc
            .get("tests")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter(|test| test.get("valid").and_then(Value::as_bool) == Some(true))
            .filter_map(|test| serde_json::to_string(test.get("data")?).ok())
            .map(|text| model.tokenize(&text, false, false))
            .collect();
        let total: usize = instances.iter().map(Vec::len).sum();
        report.tokens += total;
        let llama_drawn = if llama_ok {
            llama_draw(total, options.llama_positions, &mut draw_rng)
        } else {
            Vec::new()
        };
        let mut schema_position = 0usize;
        // Each instance, token by token.
        for tokens in &instances {
            report.instances += 1;
            let mut f = Followers {
                toolrail: engine
                    .as_ref()
                    .filter(|_| wants(EngineKind::Toolrail) || llama_ok)
                    .map(Engine::initial),
                llama: if llama_ok {
                    LlamaGrammarSampler::new(model, &text_grammar, "root").ok()
                } else {
                    None
                },
                llguidance: match (&llg, llg_ok) {
                    (Some(llg), true) => llg.schema_matcher(&schema).ok(),
                    _ => None,
                },
            };
            for (position, &token) in tokens.iter().enumerate() {
                let llama_computes = llama_drawn
                    .get(schema_position + position)
                    .copied()
                    .unwrap_or(false);
                if f.toolrail.is_none() && f.llama.is_none() && f.llguidance.is_none() {
                    break;
                }
                report.positions += 1;
                let mut ours: Option<TokenMask> = None;
                let mut theirs: Option<TokenMask> = None;
                let mut llgs: Option<TokenMask> = None;
                for &kind in &options.engines {
                    let started = Instant::now();
                    match kind {
                        EngineKind::Toolrail => {
                            if let (Some(state), Some(engine)) = (f.toolrail, engine.as_mut()) {
                                ours = masks.mask(engine, state).ok();
                            }
                        }
                        EngineKind::Llama => {
                            if let Some(s) = f.llama.as_mut() {
                                if llama_computes {
                                    theirs = s.token_mask().ok();
                                } else {
                                    skipped[slot(kind)] += 1;
                                }
                            }
                        }
                        EngineKind::Llguidance => {
                            if let Some(m) = f.llguidance.as_mut() {
                                llgs = m.mask().ok();
                            }
                        }
                        EngineKind::None => {}
                    }
                    let took = ms(started);
                    let computed = match kind {
                        EngineKind::Toolrail => ours.is_some() && wants(kind),
                        EngineKind::Llama => theirs.is_some(),
                        EngineKind::Llguidance => llgs.is_some(),
                        EngineKind::None => false,
                    };
                    if computed {
                        mask_times[slot(kind)].push(took);
                    }
                }
                if ours.is_some() && theirs.is_some() {
                    report.toolrail_llama_compared += 1;
                }
                if ours.is_some() && llgs.is_some() {
                    report.toolrail_llguidance_compared += 1;
                }
                if let (Some(a), Some(b)) = (&ours, &theirs)
                    && a != b
                {
                    report.toolrail_llama_differences += 1;
                    if report.llama_examples.len() < 10 {
                        report.llama_examples.push(format!(
                            "{name} position {position}: {}",
                            describe(model, a, "toolrail", b, "llama.cpp")
                        ));
                    }
                }
                if let (Some(a), Some(c)) = (&ours, &llgs)
                    && a != c
                {
                    report.toolrail_llguidance_differences += 1;
                    if report.llguidance_examples.len() < 10 {
                        report.llguidance_examples.push(format!(
                            "{name} position {position}: {}",
                            describe(model, a, "toolrail", c, "llguidance")
                        ));
                    }
                }
                // Take the token; an engine that does not allow it stops following.
                let piece = model.piece(token);
                if let (Some(state), Some(engine)) = (f.toolrail.as_mut(), engine.as_mut()) {
                    match engine.accept_token(*state, token, &piece) {
                        Some(next) => *state = next,
                        None => {
                            rejected[slot(EngineKind::Toolrail)] += 1;
                            f.toolrail = None;
                        }
                    }
                }
                if let Some(s) = f.llama.as_mut()
                    && s.accept(token).is_err()
                {
                    rejected[slot(EngineKind::Llama)] += 1;
                    f.llama = None;
                }
                if let Some(m) = f.llguidance.as_mut()
                    && m.consume(token).is_err()
                {
                    rejected[slot(EngineKind::Llguidance)] += 1;
                    f.llguidance = None;
                }
            }
            schema_position += tokens.len();
        }
    }
    for &kind in &options.engines {
        report.engines.push(MaskEngineFigures {
            engine: kind,
            compiled: compile[slot(kind)].len(),
            compile_ms: Quantiles::of(std::mem::take(&mut compile[slot(kind)])),
            mask_ms: Quantiles::of(std::mem::take(&mut mask_times[slot(kind)])),
            rejected_instances: rejected[slot(kind)],
            positions_skipped: skipped[slot(kind)],
        });
    }
    Ok(report)
}

/// The schema folder's default location beside a checkout (for help texts).
pub fn default_dir() -> &'static Path {
    Path::new("../shared/corpus/maskbench")
}
