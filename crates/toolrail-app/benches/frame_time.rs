//! Frame time of the real app (egui_kittest, the wgpu renderer the app tests use; on a machine
//! without a GPU that is a software rasteriser) in two busy moments:
//!
//! - **streaming**: a real generation on the test model, started with the Run action, the
//!   window redrawn at 60 Hz while the tokens arrive (the live refresh paced as for a software
//!   renderer, as the app does on such a machine);
//! - **pasting**: a 500-tool MCP `tools/list` (the corpus's MCP servers' tools, repeated with
//!   renamed tools) pasted into the Tools / Schema editor, the window redrawn at 60 Hz until the
//!   analysis of the pasted text is shown and the autosave has written it.
//!
//! For each it prints p50, p99 and max of the UI thread's frame (the app's logic and every pane:
//! what a window waits for before it can draw) and of the frame with its drawing (rasterised and
//! read back by the wgpu renderer). Goal: UI-thread p99 ≤ 16 ms while streaming.
//!
//! `cargo bench -p toolrail-app --bench frame_time`. Under `cargo test --benches` (and
//! `--all-targets`) it runs a short version: a few tokens, 40 tools. It needs the test model
//! and `../shared/corpus/tool-sets/` beside the checkout; without them it says so and stops
//! (under `CI=true` it fails).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use egui_kittest::Harness;
use egui_kittest::kittest::Queryable;
use serde_json::{Value, json};
use toolrail_app::renderer::Renderer;
use toolrail_app::{AppOptions, ToolrailApp};
use toolrail_llm::ModelSpec;
use toolrail_workbench::actions::Action;
use toolrail_workbench::run::{LoadState, RunPhase};
use toolrail_workbench::workspace::SchemaMode;

/// The frame interval of a 60 Hz display.
const FRAME: Duration = Duration::from_micros(16_667);

/// How long the bench and its short version go.
struct Size {
    /// Tokens the streamed run may generate.
    tokens: u32,
    /// Tools in the pasted list.
    tools: usize,
    /// Whether frames are drawn (rasterised) too.
    draw: bool,
    /// Frames timed after the pasted list has settled.
    settled_frames: usize,
}

/// Frame times of one scenario, in ms.
#[derive(Default)]
struct Times {
    ui: Vec<f64>,
    drawn: Vec<f64>,
}

impl Times {
    fn print(&mut self, what: &str) {
        for (times, part) in [
            (&mut self.ui, "UI thread (logic + panes)"),
            (&mut self.drawn, "with drawing (software wgpu)"),
        ] {
            if times.is_empty() {
                continue;
            }
            times.sort_by(f64::total_cmp);
            let at = |q: f64| times[((times.len() - 1) as f64 * q).round() as usize];
            println!(
                "{what}: {part}: {} frames: p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
                times.len(),
                at(0.5),
                at(0.99),
                times[times.len() - 1]
            );
        }
    }
}

/// The MCP servers' tool lists in the corpus, or why there are none.
fn corpus_tools(dir: &Path) -> Result<Vec<Value>, String> {
    let entries = std::fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut files: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("mcp__") && n.ends_with(".json"))
        })
        .collect();
    files.sort();
    let mut tools = Vec::new();
    for file in files {
        let text =
            std::fs::read_to_string(&file).map_err(|e| format!("{}: {e}", file.display()))?;
        let value: Value =
            serde_json::from_str(&text).map_err(|e| format!("{}: {e}", file.display()))?;
        if let Some(list) = value.get("tools").and_then(Value::as_array) {
            tools.extend(list.iter().cloned());
        }
    }
    if tools.is_empty() {
        return Err(format!("no MCP tool lists in {}", dir.display()));
    }
    Ok(tools)
}

/// An MCP `tools/list` result of `n` tools (the corpus's tools in turn, a name already taken
/// given the first free `_1`, `_2`, ... suffix), and its last tool's name.
fn mcp_list(corpus: &[Value], n: usize) -> (String, String) {
    let mut taken = std::collections::HashSet::new();
    let tools: Vec<Value> = (0..n)
        .map(|i| {
            let mut tool = corpus[i % corpus.len()].clone();
            let name = tool.get("name").and_then(Value::as_str).unwrap_or("tool");
            let mut unique = name.to_owned();
            let mut round = 0;
            while taken.contains(&unique) {
                round += 1;
                unique = format!("{name}_{round}");
            }
            taken.insert(unique.clone());
            tool["name"] = json!(unique);
            tool
        })
        .collect();
    let last = (tools.last())
        .and_then(|t| t.get("name"))
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let text = serde_json::to_string_pretty(&json!({ "tools": tools })).unwrap_or_default();
    (text, last)
}

/// The real app on a workspace in `dir`, not settling (analyses arrive when they are ready, as
/// in a window), drawn as on a CPU renderer.
fn app(dir: &Path, autosave: bool) -> Harness<'static, ToolrailApp> {
    let options = AppOptions {
        workspace_path: dir.join("workspace.json"),
        autosave,
        screenshot: None,
        settle: false,
        demo_run: false,
    };
    let mut harness = Harness::builder()
        .with_size([1440.0, 900.0])
        .with_theme(egui::Theme::Dark)
        .with_max_steps(1_000_000)
        .wgpu()
        .build_eframe(move |cc| {
            let mut app = ToolrailApp::new(&cc.egui_ctx, options);
            app.shared.renderer = Renderer::Software("llvmpipe (the bench's assumption)".into());
            app
        });
    harness.step();
    harness
}

/// Frames at 60 Hz until `done` holds (or `limit` passes: an error naming `what`), timing each.
fn frames_until(
    harness: &mut Harness<'_, ToolrailApp>,
    times: Option<&mut Times>,
    draw: bool,
    what: &str,
    limit: Duration,
    mut done: impl FnMut(&ToolrailApp) -> bool,
) -> Result<(), String> {
    let give_up = Instant::now() + limit;
    let mut times = times;
    let mut next = Instant::now();
    while !done(harness.state()) {
        if Instant::now() > give_up {
            return Err(format!("gave up waiting for {what}"));
        }
        std::thread::sleep(next.saturating_duration_since(Instant::now()));
        next = Instant::now() + FRAME;
        let started = Instant::now();
        harness.step();
        let ui = started.elapsed();
        if draw {
            harness.render()?;
        }
        if let Some(t) = times.as_deref_mut() {
            t.ui.push(ui.as_secs_f64() * 1000.0);
            if draw {
                t.drawn.push(started.elapsed().as_secs_f64() * 1000.0);
            }
        }
    }
    Ok(())
}

/// The streaming scenario: load the test model, run the workspace's sample, time the frames
/// from the Run action to the run's end.
fn streaming(model: PathBuf, size: &Size) -> Result<Times, String> {
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let mut harness = app(dir.path(), false);
    {
        let run = &mut harness.state_mut().shared.run;
        run.settings.sampling.max_tokens = size.tokens;
        run.settings.threads = Some(toolrail_llm::threads_beside_a_window());
        run.controller
            .load(ModelSpec::from_path(model))
            .map_err(|e| e.to_string())?;
    }
    let long = Duration::from_secs(300);
    frames_until(&mut harness, None, false, "the model", long, |a| {
        !matches!(
            a.shared.run.controller.load_state(),
            LoadState::Loading { .. }
        ) && a.shared.analysis.grammar.is_some()
    })?;
    if let LoadState::Failed { .. } = harness.state().shared.run.controller.load_state() {
        return Err(format!(
            "the model did not load: {:?}",
            harness.state().shared.run.controller.load_state()
        ));
    }
    harness.state_mut().shared.queue(Action::Run);
    let mut times = Times::default();
    frames_until(
        &mut harness,
        Some(&mut times),
        size.draw,
        "the run",
        long,
        |a| {
            a.shared
                .run
                .controller
                .latest()
                .is_some_and(|r| r.phase == RunPhase::Finished)
        },
    )?;
    let app = harness.state();
    let tokens = app
        .shared
        .run
        .controller
        .latest()
        .map_or(0, |r| r.tokens.len());
    println!(
        "streaming: {tokens} tokens of the weather sample on the test model ({} decoding threads)",
        toolrail_llm::threads_beside_a_window()
    );
    Ok(times)
}

/// The pasting scenario: a `tools`-tool MCP list pasted into the schema editor (replacing its
/// text), frames timed until its analysis is shown and the autosave has written it.
fn pasting(corpus: &[Value], size: &Size) -> Result<Times, String> {
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let mut harness = app(dir.path(), true);
    let (list, last) = mcp_list(corpus, size.tools);
    frames_until(
        &mut harness,
        None,
        false,
        "the first analysis",
        Duration::from_secs(60),
        |a| a.shared.analysis.revision > 0,
    )?;
    harness.state_mut().shared.workspace.schema.mode = SchemaMode::ToolSet;
    harness.get_by_label("Schema JSON").click();
    harness.step();
    // Select the editor's text, then paste over it.
    harness.key_press_modifiers(egui::Modifiers::COMMAND, egui::Key::A);
    harness.step();
    harness.event(egui::Event::Paste(list.clone()));
    let workspace_file = dir.path().join("workspace.json");
    let mut times = Times::default();
    let pasted = list.clone();
    frames_until(
        &mut harness,
        Some(&mut times),
        size.draw,
        "the pasted list's analysis and autosave",
        Duration::from_secs(300),
        |a| {
            a.shared.analysis.input.schema.text == pasted
                && std::fs::read_to_string(&workspace_file).is_ok_and(|t| t.contains(&last))
        },
    )?;
    // A few more frames with the list shown (its tool list and editor drawn, nothing pending).
    let mut more = 0;
    frames_until(
        &mut harness,
        Some(&mut times),
        size.draw,
        "more frames",
        Duration::from_secs(300),
        |_| {
            more += 1;
            more > size.settled_frames
        },
    )?;
    let app = harness.state();
    if app.shared.workspace.schema.text != list {
        return Err("the paste did not reach the schema editor".into());
    }
    if let Some(issue) = &app.shared.analysis.schema_issue {
        return Err(format!("the pasted list does not load: {}", issue.message));
    }

    println!(
        "pasting: {} tools ({} KB of JSON), {} read, grammar {} KB; the analysis took {:.0} ms \
         off the UI thread",
        size.tools,
        list.len() / 1024,
        app.shared.analysis.tools.len(),
        app.shared.analysis.grammar_text.len() / 1024,
        app.shared.analysis.grammar_time.as_secs_f64() * 1000.0
    );
    Ok(times)
}

fn main() {
    // `cargo bench` passes `--bench`; under `cargo test` run the short version.
    let size = if std::env::args().any(|a| a == "--bench") {
        Size {
            tokens: 96,
            tools: 500,
            draw: true,
            settled_frames: 30,
        }
    } else {
        Size {
            tokens: 6,
            tools: 40,
            draw: false,
            settled_frames: 2,
        }
    };
    // The test model and the corpus: a failure naming what is missing under CI=true, a skip
    // otherwise.
    let Some(model) = toolrail_testkit::model() else {
        return;
    };
    let Some(tool_sets) = toolrail_testkit::corpus("tool-sets") else {
        return;
    };
    let corpus = match corpus_tools(&tool_sets) {
        Ok(tools) => tools,
        Err(e) => panic!("the frame-time bench cannot read the corpus's MCP tool lists: {e}"),
    };
    match streaming(model, &size) {
        Ok(mut times) => times.print("streaming"),
        Err(e) => panic!("streaming: {e}"),
    }
    match pasting(&corpus, &size) {
        Ok(mut times) => times.print("pasting"),
        Err(e) => panic!("pasting: {e}"),
    }
}
