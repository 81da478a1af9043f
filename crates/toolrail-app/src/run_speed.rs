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
    /// The mean time the window's frames took to lay out, tessellate and paint, in ms, as
    /// eframe reports it (only for runs in a real window).
    pub frame_ms: Option<f64>,
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
    /// What drew the window's frames (in a window only).
    pub renderer: Option<crate::renderer::Renderer>,
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
                    frame_ms: None,
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
                    frame_ms: None,
                });
            }
            Ok(_) => {}
            Err(_) => return Err(RunSpeedError::WorkerGone),
        }
    }
}

/// The window the comparison runs in, in logical points.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct WindowSize {
    /// Width.
    pub width: f32,
    /// Height.
    pub height: f32,
}

/// Where a comparison in a window stands; each stage is left by a frame that sees it done.
enum Stage {
    /// The window just opened: the model is not asked for yet.
    Opening,
    /// The app's controller is loading the model.
    Loading,
    /// An app run, started with the Run action, is under way; `before` runs existed before it.
    AppRun {
        before: usize,
        frames_before: u64,
        cpu_before: f64,
    },
    /// The command line's run of the same request is under way on its own thread; the window
    /// stays open and idle meanwhile, as a user's would.
    CliRun(crossbeam_channel::Receiver<Result<PathRun, RunSpeedError>>),
    /// Finished (or failed): the outcome is reported and the window asked to close.
    Done,
}

/// The real app in a real window, driven through the comparison round by round.
struct WindowBench {
    app: ToolrailApp,
    spec: ModelSpec,
    model: Model,
    rounds: usize,
    stage: Stage,
    speed: RunSpeed,
    frames: u64,
    /// Seconds of frame time eframe reported so far (its `cpu_usage`, summed).
    frame_seconds: f64,
    deadline: Instant,
    outcome: Arc<Mutex<Option<Result<RunSpeed, RunSpeedError>>>>,
}

impl WindowBench {
    fn finish(&mut self, ctx: &egui::Context, result: Result<(), RunSpeedError>) {
        let report = result.map(|()| std::mem::take(&mut self.speed));
        if let Ok(mut slot) = self.outcome.lock() {
            *slot = Some(report);
        }
        self.stage = Stage::Done;
        ctx.send_viewport_cmd(egui::ViewportCommand::Close);
    }

    fn start_app_round(&mut self) {
        self.stage = Stage::AppRun {
            before: self.app.shared.run.controller.runs().len(),
            frames_before: self.frames,
            cpu_before: self.frame_seconds,
        };
        self.app.shared.queue(Action::Run);
    }

    /// Moves the comparison on by what this frame sees.
    fn advance(&mut self, ctx: &egui::Context) -> Result<(), RunSpeedError> {
        if Instant::now() > self.deadline {
            return Err(RunSpeedError::App("the comparison ran out of time".into()));
        }
        match &self.stage {
            Stage::Opening => {
                self.app
                    .shared
                    .run
                    .controller
                    .load(self.spec.clone())
                    .map_err(|e| RunSpeedError::App(e.to_string()))?;
                self.stage = Stage::Loading;
            }
            Stage::Loading => match self.app.shared.run.controller.load_state() {
                LoadState::Loading { .. } => {}
                LoadState::Ready { .. } => self.start_app_round(),
                other => {
                    return Err(RunSpeedError::App(format!("model not ready: {other:?}")));
                }
            },
            Stage::AppRun {
                before,
                frames_before,
                cpu_before,
            } => {
                let runs = self.app.shared.run.controller.runs();
                let Some(run) = runs.get(*before) else {
                    return Ok(());
                };
                if run.phase != RunPhase::Finished {
                    return Ok(());
                }
                let finish = run
                    .finish
                    .as_ref()
                    .ok_or_else(|| RunSpeedError::App("the run has no end".into()))?;
                let frames = self.frames - frames_before;
                let frame_ms = match frames {
                    0 => None,
                    n => Some((self.frame_seconds - cpu_before) * 1000.0 / n as f64),
                };
                self.speed.app.push(PathRun {
                    tokens: finish.totals.tokens,
                    tokens_per_s: finish.totals.tokens_per_s,
                    frames,
                    frame_ms,
                });
                let request = run.request.clone();
                self.speed.request = Some(request.clone());
                let (done, result) = crossbeam_channel::bounded(1);
                let model = self.model.clone();
                let waker = ctx.clone();
                std::thread::Builder::new()
                    .name("toolrail-bench-cli".into())
                    .spawn(move || {
                        let _ = done.send(cli_round(&model, &request));
                        waker.request_repaint();
                    })
                    .map_err(|e| RunSpeedError::App(format!("cannot start a thread: {e}")))?;
                self.stage = Stage::CliRun(result);
            }
            Stage::CliRun(result) => match result.try_recv() {
                Ok(run) => {
                    self.speed.cli.push(run?);
                    if self.speed.cli.len() < self.rounds {
                        self.start_app_round();
                    } else {
                        self.finish(ctx, Ok(()));
                    }
                }
                Err(crossbeam_channel::TryRecvError::Empty) => {}
                Err(crossbeam_channel::TryRecvError::Disconnected) => {
                    return Err(RunSpeedError::WorkerGone);
                }
            },
            Stage::Done => {}
        }
        Ok(())
    }
}

impl eframe::App for WindowBench {
    fn logic(&mut self, ctx: &egui::Context, frame: &mut eframe::Frame) {
        self.frames += 1;
        self.frame_seconds += f64::from(frame.info().cpu_usage.unwrap_or(0.0));
        eframe::App::logic(&mut self.app, ctx, frame);
        if let Err(e) = self.advance(ctx) {
            self.finish(ctx, Err(e));
        }
        // Waiting stages poll once a second at most, as a clock would; runs wake the frame
        // loop themselves.
        if matches!(self.stage, Stage::Loading) {
            ctx.request_repaint_after(Duration::from_millis(200));
        }
    }

    fn ui(&mut self, ui: &mut egui::Ui, frame: &mut eframe::Frame) {
        eframe::App::ui(&mut self.app, ui, frame);
    }

    fn on_exit(&mut self) {
        eframe::App::on_exit(&mut self.app);
    }
}

/// [`compare`] with the app in a real window of `size`, refreshing at `refresh` during runs (eframe, the platform's renderer), as a
/// person runs it: every frame is laid out, tessellated, rasterised and presented. The
/// command-line rounds run while the window stays open and idle. Must be called on the main
/// thread (windowing systems require it).
pub fn compare_in_window(
    spec: &ModelSpec,
    workspace_dir: &Path,
    rounds: usize,
    max_tokens: u32,
    size: WindowSize,
    refresh: toolrail_workbench::workspace::LiveRefresh,
) -> Result<RunSpeed, RunSpeedError> {
    let model = Model::load(spec, |_| true).map_err(|e| RunSpeedError::Model(e.to_string()))?;
    let outcome: Arc<Mutex<Option<Result<RunSpeed, RunSpeedError>>>> = Arc::default();
    let native = eframe::NativeOptions {
        viewport: egui::ViewportBuilder::default()
            .with_title("toolrail bench app")
            .with_inner_size([size.width, size.height]),
        ..Default::default()
    };
    let mut options = AppOptions::interactive(workspace_dir.join("workspace.json"));
    options.autosave = false;
    let slot = Arc::clone(&outcome);
    let spec = spec.clone();
    eframe::run_native(
        "toolrail-bench-app",
        native,
        Box::new(move |cc| {
            let mut app = ToolrailApp::in_window(cc, options);
            app.shared.run.settings.sampling.max_tokens = max_tokens;
            app.shared.workspace.live_refresh = refresh;
            let speed = RunSpeed {
                renderer: Some(app.shared.renderer.clone()),
                ..RunSpeed::default()
            };
            Ok(Box::new(WindowBench {
                app,
                spec,
                model,
                rounds: rounds.max(1),
                stage: Stage::Opening,
                speed,
                frames: 0,
                frame_seconds: 0.0,
                deadline: Instant::now() + Duration::from_secs(600 + 120 * rounds as u64),
                outcome: slot,
            }))
        }),
    )
    .map_err(|e| RunSpeedError::App(format!("cannot open the window: {e}")))?;
    let result = outcome
        .lock()
        .map_err(|_| RunSpeedError::App("the window's thread panicked".into()))?
        .take();
    result.unwrap_or_else(|| {
        Err(RunSpeedError::App(
            "the window closed before the comparison finished".into(),
        ))
    })
}
