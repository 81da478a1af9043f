//! The app's generation speed without a window, beside the command line's, in one process.
//!
//! The app path is the real [`ToolrailApp`]: an `egui::Context` runs its frames (logic, every
//! pane, tessellation) whenever the app or its background threads ask for one, exactly as eframe
//! would, minus drawing the triangles on a GPU. A run is started with the Run action (what the
//! button and Ctrl+Enter queue) on the workspace's tool set and prompt. The command-line path is
//! what `toolrail generate` does: the generation worker, its events read in a blocking loop. Both
//! get the same request (the app's), on the same loaded model, round after round, alternating,
//! so that both see the same machine load.

use std::path::Path;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use toolrail_llm::worker::{Command, Event, RunRequest, Worker};
use toolrail_llm::{Model, ModelSpec};
use toolrail_workbench::actions::Action;
use toolrail_workbench::run::{LoadState, RunPhase};

use crate::{AppOptions, ToolrailApp};

/// Why the comparison could not be made.
#[derive(Debug, thiserror::Error)]
pub enum RunSpeedError {
    /// The model did not load.
    #[error("cannot load the model: {0}")]
    Model(String),
    /// The app could not start or finish a run.
    #[error("the app could not start or finish the run: {0}")]
    App(String),
    /// The worker stopped without ending the run.
    #[error(
        "the generation worker stopped unexpectedly (its thread ended without reporting an error)"
    )]
    WorkerGone,
}

/// One run of one path.
#[derive(Clone, Debug, PartialEq)]
pub struct PathRun {
    /// Tokens generated.
    pub tokens: u32,
    /// Tokens per second as the worker counts them (generation only, no prompt).
    pub tokens_per_s: f64,
    /// Frames the app drew during the run (0 for the command-line path).
    pub frames: u64,
}

/// The rounds of both paths, in the order they ran.
#[derive(Clone, Debug, Default)]
pub struct RunSpeed {
    /// The app's runs.
    pub app: Vec<PathRun>,
    /// The command line's runs.
    pub cli: Vec<PathRun>,
    /// The request both ran (the app's).
    pub request: Option<RunRequest>,
}

impl RunSpeed {
    /// The median tokens/s of some runs (0 when there are none).
    pub fn median(runs: &[PathRun]) -> f64 {
        let mut v: Vec<f64> = runs.iter().map(|r| r.tokens_per_s).collect();
        v.sort_by(f64::total_cmp);
        match v.len() {
            0 => 0.0,
            n if n % 2 == 1 => v[n / 2],
            n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
        }
    }

    /// The app's median tokens/s over the command line's (0 when the latter is 0).
    pub fn ratio(&self) -> f64 {
        let cli = Self::median(&self.cli);
        if cli > 0.0 {
            Self::median(&self.app) / cli
        } else {
            0.0
        }
    }
}

/// Wakes the frame loop when egui asks for a repaint (now or after a delay), as eframe's event
/// loop does.
#[derive(Default)]
struct RepaintClock {
    due: Mutex<Option<Instant>>,
    changed: Condvar,
}

impl RepaintClock {
    fn request(&self, delay: Duration) {
        let at = Instant::now() + delay;
        if let Ok(mut due) = self.due.lock() {
            *due = Some(due.map_or(at, |d| d.min(at)));
            self.changed.notify_one();
        }
    }

    /// Waits until a repaint is due (at most `limit`).
    fn wait(&self, limit: Duration) {
        let give_up = Instant::now() + limit;
        let Ok(mut due) = self.due.lock() else {
            return;
        };
        loop {
            let now = Instant::now();
            match *due {
                Some(at) if at <= now => {
                    *due = None;
                    return;
                }
                _ if now >= give_up => return,
                Some(at) => {
                    let wait = at.min(give_up) - now;
                    match self.changed.wait_timeout(due, wait) {
                        Ok((d, _)) => due = d,
                        Err(_) => return,
                    }
                }
                None => match self.changed.wait_timeout(due, give_up - now) {
                    Ok((d, _)) => due = d,
                    Err(_) => return,
                },
            }
        }
    }
}

/// The real app without a window: its frames run when asked for.
struct HeadlessApp {
    ctx: egui::Context,
    app: ToolrailApp,
    clock: Arc<RepaintClock>,
    frame: eframe::Frame,
    frames: u64,
}

impl HeadlessApp {
    fn new(workspace: &Path) -> HeadlessApp {
        let ctx = egui::Context::default();
        let clock = Arc::new(RepaintClock::default());
        let waker = Arc::clone(&clock);
        ctx.set_request_repaint_callback(move |info| waker.request(info.delay));
        let app = ToolrailApp::new(
            &ctx,
            AppOptions {
                workspace_path: workspace.to_path_buf(),
                autosave: false,
                screenshot: None,
                settle: true,
                demo_run: false,
            },
        );
        HeadlessApp {
            ctx,
            app,
            clock,
            frame: eframe::Frame::_new_kittest(),
            frames: 0,
        }
    }

    /// Runs one frame as eframe does (logic, then the panes), and tessellates its shapes.
    fn frame(&mut self) {
        let input = egui::RawInput {
            screen_rect: Some(egui::Rect::from_min_size(
                egui::Pos2::ZERO,
                egui::vec2(1600.0, 1000.0),
            )),
            ..egui::RawInput::default()
        };
        let (app, frame) = (&mut self.app, &mut self.frame);
        let output = self.ctx.run_ui(input, |ui| {
            eframe::App::logic(app, ui.ctx(), frame);
            eframe::App::ui(app, ui, frame);
        });
        let _ = self.ctx.tessellate(output.shapes, output.pixels_per_point);
        // A renderer would upload the font atlas changes; here they are only dropped.
        let mut textures = output.textures_delta;
        textures.clear();
        self.frames += 1;
    }

    /// Frames until `done` says so, each when the app asked for it (or after a second).
    fn frames_until(
        &mut self,
        limit: Duration,
        mut done: impl FnMut(&ToolrailApp) -> bool,
    ) -> bool {
        let give_up = Instant::now() + limit;
        while Instant::now() < give_up {
            self.frame();
            if done(&self.app) {
                return true;
            }
            self.clock.wait(Duration::from_secs(1));
        }
        false
    }
}

/// Runs the workspace's default sample (the weather tool) `rounds` times in the app and on the
/// worker as the command line drives it, alternating, with `max_tokens` each.
pub fn compare(
    spec: &ModelSpec,
    workspace_dir: &Path,
    rounds: usize,
    max_tokens: u32,
) -> Result<RunSpeed, RunSpeedError> {
    let model = Model::load(spec, |_| true).map_err(|e| RunSpeedError::Model(e.to_string()))?;
    let mut app = HeadlessApp::new(&workspace_dir.join("workspace.json"));
    app.app.shared.run.settings.sampling.max_tokens = max_tokens;
    app.app
        .shared
        .run
        .controller
        .load(spec.clone())
        .map_err(|e| RunSpeedError::App(e.to_string()))?;
    let loaded = app.frames_until(Duration::from_secs(300), |a| {
        !matches!(
            a.shared.run.controller.load_state(),
            LoadState::Loading { .. }
        )
    });
    match app.app.shared.run.controller.load_state() {
        LoadState::Ready { .. } if loaded => {}
        other => return Err(RunSpeedError::App(format!("model not ready: {other:?}"))),
    }
    let mut speed = RunSpeed::default();
    for _ in 0..rounds {
        let (request, app_run) = app_round(&mut app)?;
        speed.app.push(app_run);
        speed.cli.push(cli_round(&model, &request)?);
        speed.request = Some(request);
    }
    Ok(speed)
}

/// One run in the app, started with the Run action; returns its request and speed.
fn app_round(app: &mut HeadlessApp) -> Result<(RunRequest, PathRun), RunSpeedError> {
    let before = app.app.shared.run.controller.runs().len();
    app.app.shared.queue(Action::Run);
    let frames_before = app.frames;
    let finished = app.frames_until(Duration::from_secs(600), |a| {
        let runs = a.shared.run.controller.runs();
        runs.len() > before && runs.last().is_some_and(|r| r.phase == RunPhase::Finished)
    });
    let frames = app.frames - frames_before;
    let run = app.app.shared.run.controller.runs().get(before).cloned();
    let messages = app.app.shared.run.messages.join("; ");
    match run {
        Some(run) if finished => {
            let finish = run
                .finish
                .ok_or_else(|| RunSpeedError::App("the run has no end".into()))?;
            Ok((
                run.request,
                PathRun {
                    tokens: finish.totals.tokens,
                    tokens_per_s: finish.totals.tokens_per_s,
                    frames,
                },
            ))
        }
        _ => Err(RunSpeedError::App(format!(
            "the run did not finish ({messages})"
        ))),
    }
}

/// One run of `request` on a worker read as `toolrail generate` reads it.
fn cli_round(model: &Model, request: &RunRequest) -> Result<PathRun, RunSpeedError> {
    let worker = Worker::spawn(model.clone(), Arc::new(|| {}));
    let mut request = request.clone();
    request.start_paused = false;
    if !worker.send(Command::Start(Box::new(request))) {
        return Err(RunSpeedError::WorkerGone);
    }
    loop {
        match worker.events().recv().map(|e| e.event) {
            Ok(Event::Done { totals, .. }) => {
                return Ok(PathRun {
                    tokens: totals.tokens,
                    tokens_per_s: totals.tokens_per_s,
                    frames: 0,
                });
            }
            Ok(_) => {}
            Err(_) => return Err(RunSpeedError::WorkerGone),
        }
    }
}
