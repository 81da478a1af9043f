//! What the app keeps for its run panes: the [`RunController`], the run settings the Generation
//! pane edits (persisted in the workspace's `run` value), and the glue that turns the app's
//! actions (Run, Step, Continue, Cancel, Export transcript) into controller calls.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::{
    LoadState, PromptStyle, RunController, RunError, RunId, RunInputs, RunPhase, RunSetup,
    StartMode,
};
use crate::Repaint;
use crate::actions::Action;
use crate::analysis::Analysis;
use crate::transcript::Sampling;
use toolrail_llm::settings::ComputeOptions;
use toolrail_llm::worker::EngineKind;
use toolrail_llm::{MODELS_FILE, ModelSpec, Models};

/// Reads a stored models file; the bare name `models.toml` (what older workspaces stored for
/// "the current folder's") means "look it up".
fn models_file_or_lookup<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<PathBuf>, D::Error> {
    let file = Option::<PathBuf>::deserialize(deserializer)?;
    Ok(file.filter(|f| f.as_os_str() != MODELS_FILE))
}

/// The run settings, as the workspace stores them.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct RunSettings {
    /// The models file the model list comes from (`None`: looked up as
    /// [`Models::load`] does; older workspaces' `"models.toml"` reads as `None`).
    #[serde(deserialize_with = "models_file_or_lookup")]
    pub models_file: Option<PathBuf>,
    /// The chosen `models.toml` entry.
    pub model: String,
    /// A GGUF file opened directly (used instead of `model` when set).
    pub gguf: Option<PathBuf>,
    /// The engine.
    pub engine: EngineKind,
    /// Other engines (`llama`, `llguidance`) whose masks a run also computes at every step,
    /// timed and compared with toolrail's (empty in older workspaces).
    pub compare: Vec<EngineKind>,
    /// Sampling parameters.
    pub sampling: Sampling,
    /// How the prompt is built: `model`, `raw`, or a family name (`llama3`, `hermes`, `gemma`,
    /// `generic`).
    pub prompt_style: PromptStyle,
    /// System text.
    pub system: String,
    /// Decoding threads (`None`: the model's).
    pub threads: Option<u32>,
    /// Model layers on the GPU (`None`: the models.toml entry's `gpu_layers`); applies when
    /// the model is next loaded, and only in a build with a GPU backend.
    pub gpu_layers: Option<u32>,
    /// How in-process runs compute the logits (flash attention, batch sizes, cache types;
    /// unset: the model's entry, else llama-server's defaults).
    pub compute: ComputeOptions,
    /// Candidates recorded per step.
    pub show: usize,
    /// The transcript exported last (reopened for replay when the app starts).
    pub last_transcript: Option<PathBuf>,
    /// The user closed the recorded demo run: do not reopen it.
    pub demo_closed: bool,
    /// What runs on a connected llama-server ask it for.
    pub server_request: super::ServerRequestChoice,
}

impl Default for RunSettings {
    fn default() -> Self {
        RunSettings {
            models_file: None,
            model: "gemma-3-270m".into(),
            gguf: None,
            engine: EngineKind::Toolrail,
            compare: Vec::new(),
            sampling: Sampling::default(),
            prompt_style: PromptStyle::Model,
            system: String::new(),
            threads: None,
            gpu_layers: None,
            compute: ComputeOptions::default(),
            show: 8,
            last_transcript: None,
            demo_closed: false,
            server_request: super::ServerRequestChoice::Grammar,
        }
    }
}

impl RunSettings {
    /// The model to load: the opened GGUF, else the named entry of the models file.
    /// The GPU layers are the settings' when set (over the entry's).
    pub fn model_spec(&self) -> Result<ModelSpec, String> {
        let mut spec = match &self.gguf {
            Some(path) => ModelSpec::from_path(path.clone()),
            None => Models::load(self.models_file.as_deref())
                .and_then(|models| models.find(&self.model))
                .map_err(|e| e.to_string())?,
        };
        if let Some(layers) = self.gpu_layers {
            spec.gpu_layers = layers;
        }
        Ok(spec)
    }
}

/// The run panes' state: the controller, the settings, what the user selected.
#[derive(Default)]
pub struct RunState {
    /// The run controller.
    pub controller: RunController,
    /// The settings the Generation pane edits.
    pub settings: RunSettings,
    /// True once the settings were read from the workspace.
    pub settings_loaded: bool,
    /// The run the panes show.
    pub shown: Option<RunId>,
    /// Messages for the status bar, taken by the panes.
    pub messages: Vec<String>,
    /// Offer the recorded demo run when the workspace remembers no transcript (interactive use
    /// and screenshots; tests start without it).
    pub demo: bool,
    /// The Export transcript action was given: the Transcript pane asks where to save.
    pub export_requested: bool,
    /// A Run or Step asked for while no model was loaded: the selected model is loading and
    /// the run starts as soon as it is ready (dropped if the load fails).
    pub pending_start: Option<StartMode>,
    /// A GGUF file opened directly is loading: the model selected before it (its file, or
    /// `None` for the `models.toml` entry), which stays selected if the file fails to load.
    opening_gguf: Option<Option<PathBuf>>,
    /// A GGUF file opened directly that did not load (taken by the app, which drops it from
    /// the recent files).
    pub failed_gguf: Option<PathBuf>,
    /// Step presses (F10) given while a step was still being taken: each is taken as soon as
    /// the run pauses again, so none is lost.
    pub pending_steps: u32,
    /// True while the active run moves one step at a time (Step), false once it runs freely
    /// (Run, Continue).
    stepping: bool,
    /// The last finished run of this session the Transcript pane was switched to.
    followed: Option<RunId>,
    notify_set: bool,
    /// Set by [`RunState::logic`] when worker events were left for a later frame (the refresh
    /// pace held them back): the UI asks for a frame after this long.
    pub frame_due: Option<std::time::Duration>,
}

impl RunState {
    /// Takes the settings kept in the workspace and, unless a replay is already open, reopens the last transcript for replay if it still
    /// exists, shown to its end (so `toolrail gui --screenshot` shows it); with [`RunState::demo`] and no transcript
    /// remembered, opens the recorded demo run instead (until the user closes it).
    pub fn load_settings(&mut self, settings: &RunSettings) {
        self.settings_loaded = true;
        self.settings = settings.clone();
        if self.controller.replay().is_none()
            && let Some(path) = self.settings.last_transcript.clone()
            && path.is_file()
        {
            match self.controller.open_transcript(&path) {
                // Shown whole, its last token selected, as when the run ended.
                Ok(()) => {
                    if let Some(replay) = self.controller.replay_mut() {
                        replay.seek(replay.len());
                    }
                }
                Err(e) => self.messages.push(e.to_string()),
            }
        }
        if self.demo
            && !self.settings.demo_closed
            && self.settings.last_transcript.is_none()
            && self.controller.replay().is_none()
            && let Err(e) = self.controller.open_demo()
        {
            self.messages.push(e.to_string());
        }
    }

    /// The workspace's inputs for a run, from the latest analysis.
    pub fn inputs(analysis: &Analysis) -> RunInputs {
        let schema = &analysis.input.schema;
        RunInputs {
            tools: analysis.tool_set.clone(),
            format: schema.envelope,
            validate: toolrail_tools::validate::ValidateOptions {
                parallel: schema.parallel,
                auto: schema.auto,
                lenient: schema.lenient,
            },
            grammar: analysis
                .grammar
                .as_ref()
                .map(|_| analysis.grammar_text.clone()),
            // a plain schema whose grammar is the generated one: llguidance and a
            // llama-server's `json_schema` request read the schema (as the grammar read it:
            // a loosely written `type` replaced by its reading)
            schema: (schema.mode == crate::workspace::SchemaMode::PlainSchema
                && analysis.grammar.is_some()
                && analysis.grammar_text == analysis.generated)
                .then(|| serde_json::from_str::<serde_json::Value>(&schema.text).ok())
                .flatten()
                .map(|v| match toolrail_tools::toolset::read_loose_types(&v) {
                    Some((read, _)) => read,
                    None => v,
                }),
            template: analysis.template.as_ref().map(|view| {
                view.result
                    .clone()
                    .map(|result| crate::transcript::TemplateRun {
                        source: view.source.clone(),
                        result,
                        parsed: None,
                        parse_error: None,
                        budget: analysis.input.template.budget.clone(),
                    })
            }),
        }
    }

    /// The run setup from the settings and the workspace's prompt.
    pub fn setup(&self, analysis: &Analysis) -> RunSetup {
        let s = &self.settings;
        RunSetup {
            system: s.system.clone(),
            user: analysis.input.prompt.clone(),
            style: s.prompt_style,
            engine: s.engine,
            compare: s.compare.clone(),
            sampling: s.sampling.clone(),
            context: None,
            threads: s.threads,
            beside_window: true,
            compute: s.compute,
            show: s.show.max(1),
        }
    }

    /// Starts a run (loading the model first if none is loaded is left to the user).
    pub fn start(&mut self, analysis: &Analysis, mode: StartMode) -> Result<RunId, RunError> {
        let id = self
            .controller
            .start(&self.setup(analysis), &Self::inputs(analysis), mode)?;
        self.shown = Some(id);
        Ok(id)
    }

    /// Called once per frame before the panes draw: takes the run actions out of `actions`,
    /// drains the loader's and worker's events, and asks for frames while work is under way.
    pub fn logic(&mut self, actions: &mut Vec<Action>, analysis: &Analysis, repaint: &Repaint) {
        if !self.notify_set {
            self.controller.set_notify(std::sync::Arc::clone(repaint));
            self.notify_set = true;
        }
        self.controller
            .set_server_request(self.settings.server_request);
        let mut rest = Vec::with_capacity(actions.len());
        for action in actions.drain(..) {
            let result = match action {
                Action::Run => {
                    self.stepping = false;
                    self.start_or_load(analysis, StartMode::Run)
                }
                Action::Step => self.step(analysis),
                Action::Continue => {
                    self.stepping = false;
                    self.pending_steps = 0;
                    self.controller.resume()
                }
                Action::Cancel => {
                    self.pending_steps = 0;
                    self.controller.cancel();
                    Ok(())
                }
                Action::ExportTranscript => {
                    self.export_requested = true;
                    Ok(())
                }
                other => {
                    rest.push(other);
                    Ok(())
                }
            };
            if let Err(e) = result {
                self.messages.push(e.to_string());
            }
        }
        *actions = rest;
        self.frame_due = self.controller.poll_paced();
        self.messages.extend(self.controller.take_messages());
        self.settle_gguf_open();
        self.start_pending(analysis);
        self.take_pending_step();
        self.follow_latest_run();
        // No frame is asked for here while a run or a load is under way: the worker and the
        // loader notify on every event, and a frame asked for on every frame would keep the UI
        // thread drawing flat out, taking the cores decoding needs.
    }

    /// Step (F10): one more token of the paused run; with no run, starts one paused (loading
    /// the model first if needed). Pressed while a step is being taken, it is counted and taken
    /// when the run pauses; pressed while the run runs freely, it says so (Pause first).
    fn step(&mut self, analysis: &Analysis) -> Result<(), RunError> {
        match self.controller.active().map(|r| r.phase) {
            Some(RunPhase::Paused { .. }) => {
                self.stepping = true;
                self.controller.step()
            }
            Some(_) if self.stepping => {
                self.pending_steps = self.pending_steps.saturating_add(1);
                Ok(())
            }
            Some(_) => Err(RunError::RunningFreely),
            None if self.pending_start.is_some() => {
                self.pending_steps = self.pending_steps.saturating_add(1);
                Ok(())
            }
            None => {
                self.stepping = true;
                self.start_or_load(analysis, StartMode::Step)
            }
        }
    }

    /// Takes one counted Step press once the run has paused; forgets them when it ended.
    fn take_pending_step(&mut self) {
        if self.pending_steps == 0 {
            return;
        }
        match self.controller.active().map(|r| r.phase) {
            Some(RunPhase::Paused { .. }) => {
                self.pending_steps -= 1;
                self.stepping = true;
                if let Err(e) = self.controller.step() {
                    self.messages.push(e.to_string());
                }
            }
            Some(_) => {}
            None if self.pending_start.is_some() => {}
            None => self.pending_steps = 0,
        }
    }

    /// When a run of this session finishes, the Transcript pane switches to it (replacing the
    /// recorded demo run, a transcript file, or an earlier run), so the user's own latest run
    /// is what it shows.
    fn follow_latest_run(&mut self) {
        let Some(latest) = self
            .controller
            .runs()
            .iter()
            .rev()
            .find(|r| r.finish.is_some())
            .map(|r| r.id)
        else {
            return;
        };
        if self.followed == Some(latest) {
            return;
        }
        self.followed = Some(latest);
        if let Err(e) = self.controller.replay_run(latest) {
            self.messages.push(e.to_string());
        }
    }

    /// The run Export transcript writes: the run the Transcript pane shows (its replay of a run
    /// of this session), else the shown run if it has ended, else the latest ended run (`None`
    /// before any run has ended). The pane's button names the run it shows.
    pub fn export_target(&self) -> Option<RunId> {
        let ended = |id: RunId| self.controller.run(id).filter(|r| r.finish.is_some());
        let in_transcript_pane = self
            .controller
            .replay()
            .and_then(|replay| replay.run)
            .and_then(ended);
        let shown = in_transcript_pane.or_else(|| self.shown.and_then(ended));
        shown
            .or_else(|| {
                self.controller
                    .runs()
                    .iter()
                    .rev()
                    .find(|r| r.finish.is_some())
            })
            .map(|r| r.id)
    }

    /// Starts a run; with no model loaded, first loads the selected one (the run then starts
    /// when it is ready), so that Run works on a fresh start without a separate Load.
    pub fn start_or_load(&mut self, analysis: &Analysis, mode: StartMode) -> Result<(), RunError> {
        match self.start(analysis, mode) {
            Err(RunError::NoModel) => match self.settings.model_spec() {
                Ok(spec) => {
                    self.controller.load(spec)?;
                    self.pending_start = Some(mode);
                    Ok(())
                }
                Err(e) => Err(RunError::ModelSpec(e)),
            },
            other => other.map(|_| ()),
        }
    }

    /// Opens a GGUF file directly: it becomes the selected model once it loads; if it fails to
    /// load, the model selected before stays selected (and the failure is said).
    pub fn open_gguf(&mut self, path: PathBuf) {
        let previous = self.settings.gguf.replace(path.clone());
        match self.controller.load(ModelSpec::from_path(path)) {
            Ok(()) => self.opening_gguf = Some(previous),
            Err(e) => {
                self.failed_gguf = std::mem::replace(&mut self.settings.gguf, previous);
                self.messages.push(e.to_string());
            }
        }
    }

    /// Settles a GGUF file being opened: kept when loaded, the earlier selection back when it
    /// failed.
    fn settle_gguf_open(&mut self) {
        let Some(previous) = &self.opening_gguf else {
            return;
        };
        match self.controller.load_state() {
            LoadState::Loading { .. } => {}
            LoadState::Ready { .. } => self.opening_gguf = None,
            LoadState::Empty | LoadState::Failed { .. } => {
                let kept = match previous {
                    Some(file) => file.display().to_string(),
                    None => self.settings.model.clone(),
                };
                let previous = previous.clone();
                self.failed_gguf = std::mem::replace(&mut self.settings.gguf, previous);
                self.opening_gguf = None;
                self.messages.push(format!(
                    "the GGUF file did not load: {kept} stays the selected model"
                ));
            }
        }
    }

    /// Starts the run a Run or Step asked for while the model was loading, once it is loaded.
    fn start_pending(&mut self, analysis: &Analysis) {
        let Some(mode) = self.pending_start else {
            return;
        };
        match self.controller.load_state() {
            // The template source is analysed with the loaded model's vocabulary: the run
            // waits for that analysis (it follows the load within a frame or two).
            LoadState::Ready { .. }
                if analysis.input.template.on && analysis.input.model.is_none() => {}
            LoadState::Ready { .. } => {
                self.pending_start = None;
                if let Err(e) = self.start(analysis, mode) {
                    self.messages.push(e.to_string());
                }
            }
            LoadState::Loading { .. } => {}
            LoadState::Empty | LoadState::Failed { .. } => self.pending_start = None,
        }
    }

    /// Called when the app closes: cancels the run; the worker ends when the controller drops.
    pub fn shutdown(&mut self) {
        self.controller.cancel();
    }
}
