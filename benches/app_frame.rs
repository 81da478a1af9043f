//! Frame time of the desktop app with a 50-tool schema: the whole `ToolrailApp` (logic + every
//! pane) driven by egui_kittest without rendering, at 1440×900, for 300 frames. Prints p50, p95
//! and max; the analysis itself runs off the UI thread and is reported separately.
//!
//! `cargo bench --bench app_frame`

use std::time::{Duration, Instant};

use egui_kittest::Harness;
use serde_json::json;
use toolrail::app::{AppOptions, ToolrailApp};
use toolrail::workbench::analysis::{AnalysisInput, Computer};
use toolrail::workbench::workspace::{self, Workspace};

fn fifty_tools() -> String {
    let tools: Vec<_> = (0..50)
        .map(|i| {
            json!({"type": "function", "function": {
                "name": format!("tool_{i:02}"),
                "description": format!("Tool number {i}: does one thing with a city and options."),
                "parameters": {"type": "object", "properties": {
                    "city": {"type": "string", "description": "A city."},
                    "unit": {"type": "string", "enum": ["celsius", "fahrenheit", "kelvin"]},
                    "days": {"type": "integer", "minimum": 1, "maximum": 14},
                    "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 4},
                    "exact": {"type": "boolean"}
                }, "required": ["city"]}
            }})
        })
        .collect();
    serde_json::to_string_pretty(&json!({"description": "50 generated tools", "tools": tools}))
        .unwrap_or_default()
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i]
}

fn main() {
    // `cargo bench` passes `--bench`; under `cargo test --all-targets` run a short smoke pass.
    let frames = if std::env::args().any(|a| a == "--bench") {
        300
    } else {
        5
    };
    let dir = std::env::temp_dir().join(format!("toolrail-bench-{}", std::process::id()));
    let path = dir.join("workspace.json");
    let mut ws = Workspace::default();
    ws.schema.text = fifty_tools();
    ws.schema.source.clear();
    ws.test_input =
        r#"{"name": "tool_42", "arguments": {"city": "Paris", "unit": "kelvin", "days": 3}}"#
            .into();
    workspace::save(&path, &ws).expect("bench workspace");

    let mut computer = Computer::default();
    let t = Instant::now();
    let analysis = computer.compute(&AnalysisInput::from_workspace(&ws, usize::MAX));
    println!(
        "analysis (off the UI thread): {:.1} ms for {} tools, grammar {} bytes, {} rules",
        t.elapsed().as_secs_f64() * 1e3,
        analysis.tools.len(),
        analysis.grammar_text.len(),
        analysis.grammar.as_ref().map_or(0, |g| g.rule_count())
    );

    let options = AppOptions {
        workspace_path: path,
        autosave: false,
        screenshot: None,
        settle: true,
    };
    let mut harness = Harness::builder()
        .with_size([1440.0, 900.0])
        .with_accessibility_check(false)
        .build_eframe(move |cc| ToolrailApp::new(&cc.egui_ctx, options));
    for _ in 0..10 {
        harness.step();
    }
    let mut times = Vec::new();
    for _ in 0..frames {
        let t = Instant::now();
        harness.step();
        times.push(t.elapsed());
    }
    times.sort();
    println!(
        "frame (logic + all panes, no rendering), {frames} frames: p50 {:.2} ms, p95 {:.2} ms, max {:.2} ms",
        percentile(&times, 0.5).as_secs_f64() * 1e3,
        percentile(&times, 0.95).as_secs_f64() * 1e3,
        times.last().map_or(0.0, |d| d.as_secs_f64() * 1e3)
    );
    let _ = std::fs::remove_dir_all(&dir);
}
