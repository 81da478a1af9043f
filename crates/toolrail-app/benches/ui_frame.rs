//! Frame time of the real app (egui_kittest, no GPU) in the heavy case of issue 5: a 50-tool
//! schema in the Tools and Grammar panes and a 2,000-token transcript replayed in the Generation
//! and Transcript panes, with a token selected (its candidates, stacks and the mask-time plot are
//! drawn). Prints the analysis time (which runs off the UI thread in the app) and the frame time
//! mean, p50, p99 and max over 300 frames (goal: < 16 ms).
//!
//! `cargo bench --bench ui_frame`. Under `cargo test --all-targets` it runs a 5-frame smoke pass.

// A bench fails by panicking, as a test does.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Instant;

use egui_kittest::Harness;
use egui_kittest::kittest::Queryable;
use serde_json::json;
use toolrail_app::panes::transcript::open_from;
use toolrail_app::{AppOptions, ToolrailApp};
use toolrail_workbench::analysis::{AnalysisInput, Computer};
use toolrail_workbench::transcript::Transcript;

const TOKENS: usize = 2000;
const TOOLS: usize = 50;
const FRAMES: usize = 300;
/// The selected token (the replay's position): the candidates and stacks of this one are shown.
const SELECTED: usize = 1500;

/// A tool set of `n` tools with a few typed, bounded and enumerated arguments each.
fn tool_set(n: usize) -> String {
    let tools: Vec<_> = (0..n)
        .map(|i| {
            json!({"type": "function", "function": {
                "name": format!("tool_{i}"),
                "description": format!("Tool number {i}."),
                "parameters": {"type": "object", "properties": {
                    "query": {"type": "string", "description": "What to look up."},
                    "limit": {"type": "integer", "minimum": 1, "maximum": 50},
                    "mode": {"type": "string", "enum": ["fast", "exact", "fuzzy"]},
                    "tags": {"type": "array", "items": {"type": "string"}}
                }, "required": ["query"]}
            }})
        })
        .collect();
    serde_json::to_string_pretty(&json!({ "tools": tools })).unwrap()
}

/// The fixture run's tokens repeated up to `n` tokens (real candidates and stacks each).
fn long_transcript(n: usize, dir: &std::path::Path) -> std::path::PathBuf {
    let mut t = Transcript::load(std::path::Path::new("tests/fixtures/weather_run.json")).unwrap();
    let base = t.tokens.clone();
    t.tokens = (0..n)
        .map(|i| {
            let mut r = base[i % base.len()].clone();
            r.index = i as u32;
            r
        })
        .collect();
    t.output = t.tokens.iter().map(|r| r.piece.as_str()).collect();
    let path = dir.join("long.json");
    t.save(&path).unwrap();
    path
}

fn main() {
    // `cargo bench` passes `--bench`; under `cargo test --all-targets` run a short smoke pass.
    let frames = if std::env::args().any(|a| a == "--bench") {
        FRAMES
    } else {
        5
    };
    let dir = tempfile::tempdir().unwrap();
    let transcript = long_transcript(TOKENS, dir.path());
    let options = AppOptions {
        workspace_path: dir.path().join("workspace.json"),
        autosave: false,
        screenshot: None,
        settle: true,
        demo_run: false,
    };
    let mut harness = Harness::builder()
        .with_size([1440.0, 900.0])
        .with_max_steps(10_000)
        .build_eframe(move |cc| ToolrailApp::new(&cc.egui_ctx, options));
    harness.step();
    {
        let shared = &mut harness.state_mut().shared;
        shared.workspace.schema.text = tool_set(TOOLS);
        shared.workspace.schema.source = String::new();
        open_from(shared, &transcript);
        if let Some(replay) = shared.run.controller.replay_mut() {
            replay.seek(SELECTED);
        }
    }

    // The analysis the app runs on its worker thread for this workspace, timed here on its own.
    let input = AnalysisInput::from_workspace(&harness.state().shared.workspace, usize::MAX);
    let started = Instant::now();
    let analysis = Computer::default().compute(&input);
    let analysis_ms = started.elapsed().as_secs_f64() * 1000.0;
    println!(
        "analysis (off the UI thread): {analysis_ms:.1} ms for {} tools, grammar {} bytes, {} rules",
        analysis.tools.len(),
        analysis.grammar_text.len(),
        analysis.grammar.as_ref().map_or(0, |g| g.rule_count())
    );

    // Let the app's own analysis arrive and the layout settle.
    for _ in 0..20 {
        harness.step();
    }
    let app = harness.state();
    let rules = app
        .shared
        .analysis
        .grammar
        .as_ref()
        .map_or(0, |g| g.rule_count());
    let tools = app.shared.analysis.tools.len();
    let shown = app
        .shared
        .run
        .controller
        .replay()
        .map_or(0, |r| r.shown().len());
    assert_eq!(tools, TOOLS, "the 50-tool schema is analysed");
    assert_eq!(
        shown, SELECTED,
        "the transcript is replayed up to the selected token"
    );
    // The selected token's details are on screen: its stacks header and the mask plot.
    let _ = harness.get_all_by_label_contains("Stacks after this token");
    let _ = harness.get_all_by_label("Mask time per token (ms)");

    let mut times: Vec<f64> = Vec::with_capacity(frames);
    for _ in 0..frames {
        let started = Instant::now();
        harness.step();
        times.push(started.elapsed().as_secs_f64() * 1000.0);
    }
    times.sort_by(f64::total_cmp);
    let mean = times.iter().sum::<f64>() / times.len() as f64;
    let at = |q: f64| times[((times.len() - 1) as f64 * q).round() as usize];
    println!(
        "ui frame (whole app, egui layout + logic, no GPU): {tools} tools ({rules} grammar rules), \
         {TOKENS}-token transcript replayed to token {shown} (selected); {frames} frames: \
         mean {mean:.2} ms, p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
        at(0.5),
        at(0.99),
        times[times.len() - 1]
    );
}
