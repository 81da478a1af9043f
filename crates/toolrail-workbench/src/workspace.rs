//! The workspace: everything the user set up (tool set text, envelope and options, hand-edited
//! grammar, test input, prompt, layout, theme, run settings), kept as one versioned JSON file in
//! the platform's config folder and saved atomically.
//!
//! A file that cannot be read as a workspace is never lost or overwritten: a damaged one is
//! renamed to `<name>.bad-<unix seconds>` next to where it was; one that cannot be read at all
//! (permissions) or moved aside is left as it is, and changes go to a copy beside it
//! ([`Loaded::save_path`]). The app starts from defaults and shows the message
//! [`Loaded::notice`] carries.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use crate::run::RunSettings;
use crate::samples;
use toolrail_tools::envelope::Format;
use toolrail_tools::grammar::GrammarOptions;

/// The template request's choices, stored in the workspace under the names llama.cpp and serde
/// give them (see [`TemplateSettings`]).
pub use toolrail_llm::template::{ReasoningFormat, ServerSwitch, ToolChoice};

/// The version written into new workspace files; files with a higher one are not read.
pub const WORKSPACE_VERSION: u32 = 1;

/// The deepest pane layout read: a real one nests a handful of containers, and laying out one
/// nested thousands deep overflows the UI thread's stack. A deeper (or cyclic) layout is
/// replaced by the default one, with a notice, and the file is kept aside as a copy.
pub const MAX_LAYOUT_DEPTH: usize = 64;

/// The file name inside the config folder.
pub const WORKSPACE_FILE: &str = "workspace.json";

/// What the Tools/Schema editor holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum SchemaMode {
    /// A tool set (OpenAI or bare function definitions): the grammar is the tool-call grammar.
    #[default]
    ToolSet,
    /// One plain JSON Schema: the grammar matches JSON values of that schema.
    PlainSchema,
}

/// Light or dark look.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Theme {
    /// Dark background.
    #[default]
    Dark,
    /// Light background.
    Light,
}

/// How often the app redraws while a run streams tokens. Every frame is drawn in full; where
/// the renderer draws on the CPU (software rendering: no GPU, remote sessions, virtual
/// machines), a frame costs more than a token of a small model and competes with it for the
/// same cores, so `Auto` refreshes once a second there and smoothly elsewhere. Tokens are never
/// dropped: a refresh shows every token since the last one. Input is never paced.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum LiveRefresh {
    /// Once a second on a software renderer, 30 times a second otherwise.
    #[default]
    Auto,
    /// A frame after every token (smoothest; slows generation where frames are drawn on the CPU).
    EveryToken,
    /// Up to 30 frames a second.
    Smooth,
    /// Up to 4 frames a second.
    FourPerSecond,
    /// Once a second.
    OncePerSecond,
}

impl LiveRefresh {
    /// Every choice, in menu order.
    pub const ALL: [LiveRefresh; 5] = [
        LiveRefresh::Auto,
        LiveRefresh::EveryToken,
        LiveRefresh::Smooth,
        LiveRefresh::FourPerSecond,
        LiveRefresh::OncePerSecond,
    ];

    /// The shortest time between two frames during a run, given whether the renderer draws on
    /// the CPU.
    pub fn interval(self, software_renderer: bool) -> std::time::Duration {
        use std::time::Duration;
        match self {
            LiveRefresh::Auto if software_renderer => Duration::from_secs(1),
            LiveRefresh::Auto | LiveRefresh::Smooth => Duration::from_millis(33),
            LiveRefresh::EveryToken => Duration::ZERO,
            LiveRefresh::FourPerSecond => Duration::from_millis(250),
            LiveRefresh::OncePerSecond => Duration::from_secs(1),
        }
    }

    /// The words the View menu shows.
    pub fn label(self) -> &'static str {
        match self {
            LiveRefresh::Auto => "Auto (once a second on software rendering)",
            LiveRefresh::EveryToken => "Every token",
            LiveRefresh::Smooth => "Up to 30 per second",
            LiveRefresh::FourPerSecond => "4 per second",
            LiveRefresh::OncePerSecond => "Once a second",
        }
    }
}

/// The tool set or schema and how it becomes a grammar.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct SchemaSettings {
    /// The JSON text in the editor.
    pub text: String,
    /// Where the text came from: a sample's file name, a path, or "" when typed.
    pub source: String,
    /// Tool set or plain schema.
    pub mode: SchemaMode,
    /// The envelope (stored by its command-line name: `openai`, `llama3`, `hermes`, `gemma`,
    /// `pythonic`).
    pub envelope: Format,
    /// Several calls allowed.
    pub parallel: bool,
    /// Plain text allowed instead of calls.
    pub auto: bool,
    /// No whitespace between JSON tokens.
    pub compact: bool,
    /// Unsupported keywords are warnings, not errors.
    pub lenient: bool,
    /// Tools the user switched off (left out of the grammar).
    pub disabled_tools: Vec<String>,
    /// Apply the pool filter (fallback tools such as asking the user leave the grammar unless the
    /// prompt asks for them).
    pub pool_filter: bool,
}

impl Default for SchemaSettings {
    fn default() -> Self {
        let sample = &samples::SAMPLES[0];
        Self {
            text: sample.text.to_owned(),
            source: sample.file.to_owned(),
            mode: SchemaMode::ToolSet,
            envelope: sample.format,
            parallel: false,
            auto: false,
            compact: false,
            lenient: false,
            disabled_tools: Vec::new(),
            pool_filter: false,
        }
    }
}

impl SchemaSettings {
    /// The grammar options these settings describe.
    pub fn grammar_options(&self) -> GrammarOptions {
        GrammarOptions {
            format: self.envelope,
            parallel: self.parallel,
            auto: self.auto,
            compact: self.compact,
            lenient: self.lenient,
        }
    }
}

/// The grammar pane's own state.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default)]
pub struct GrammarSettings {
    /// Use the hand-edited text instead of the generated grammar.
    pub hand_edited: bool,
    /// The hand-edited GBNF.
    pub text: String,
}

/// Where the grammar comes from, as the Tools pane's source picker shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GrammarSource {
    /// toolrail's grammar for the tool set (or plain schema).
    Tools,
    /// The hand-edited GBNF.
    HandEdited,
    /// What llama-server builds from a chat template for the tool set.
    Template,
}

impl GrammarSource {
    /// Every source, in the picker's order.
    pub const ALL: [GrammarSource; 3] = [
        GrammarSource::Tools,
        GrammarSource::HandEdited,
        GrammarSource::Template,
    ];

    /// The words the picker shows.
    pub fn label(self) -> &'static str {
        match self {
            GrammarSource::Tools => "tool set",
            GrammarSource::HandEdited => "hand-edited GBNF",
            GrammarSource::Template => "llama.cpp template",
        }
    }
}

/// The llama.cpp chat-template grammar source: which template, and the request settings that
/// shape what llama-server builds from it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default)]
pub struct TemplateSettings {
    /// The grammar (and the prompt) come from the template.
    pub on: bool,
    /// The template file chosen instead of the model's own (`None`: the loaded model's GGUF
    /// chat template).
    pub file: Option<PathBuf>,
    /// The chosen file's text, read when it was opened (empty without a file).
    pub text: String,
    /// `tool_choice`.
    pub tool_choice: ToolChoice,
    /// `parallel_tool_calls` (workspaces from before the choice kept `true` for on, `false` for
    /// the server's default).
    #[serde(deserialize_with = "switch_or_bool")]
    pub parallel: ServerSwitch,
    /// Thinking on or off.
    pub thinking: ServerSwitch,
    /// The reasoning format.
    pub reasoning_format: ReasoningFormat,
    /// llama-server's reasoning budget for runs (`None`: no limit, the server's default).
    pub budget: Option<crate::transcript::ThinkingBudget>,
}

/// Reads a [`ServerSwitch`], or the `true`/`false` older workspaces kept (`false` left the
/// choice to the server).
fn switch_or_bool<'de, D: serde::Deserializer<'de>>(d: D) -> Result<ServerSwitch, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Stored {
        Old(bool),
        Now(ServerSwitch),
    }
    Ok(match Stored::deserialize(d)? {
        Stored::Old(true) => ServerSwitch::On,
        Stored::Old(false) => ServerSwitch::ServerDefault,
        Stored::Now(switch) => switch,
    })
}

/// Everything the app keeps across restarts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Workspace {
    /// File format version ([`WORKSPACE_VERSION`]).
    pub version: u32,
    /// The tool set or schema.
    pub schema: SchemaSettings,
    /// The grammar pane.
    pub grammar: GrammarSettings,
    /// The llama.cpp template grammar source (off in older files).
    pub template: TemplateSettings,
    /// The Test input pane's text.
    pub test_input: String,
    /// The user prompt (also the pool filter's query).
    pub prompt: String,
    /// Light or dark.
    pub theme: Theme,
    /// How often the view refreshes while a run streams tokens.
    pub live_refresh: LiveRefresh,
    /// The pane layout, as the UI serialises it (opaque here).
    pub layout: Option<serde_json::Value>,
    /// Settings of the run controller (model, sampling, engine, prompt style); `null` in older
    /// files reads as the defaults.
    #[serde(deserialize_with = "null_as_default")]
    pub run: RunSettings,
    /// The window's inner size in points when the app last ran (restored at start).
    pub window: Option<WindowSize>,
    /// Files opened lately, newest first (the File menu's Open recent).
    pub recent: Vec<RecentFile>,
}

/// What a recent file was opened as (so that reopening it does the same).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RecentKind {
    /// A tool set or JSON Schema, into the editor.
    Schema,
    /// A `.gbnf` file, as the hand-edited grammar.
    Grammar,
    /// A transcript, replayed.
    Transcript,
    /// A GGUF model.
    Model,
    /// A workspace file.
    Workspace,
}

/// One recently opened file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecentFile {
    /// What it was opened as.
    pub kind: RecentKind,
    /// Where it is.
    pub path: PathBuf,
}

/// How many recent files are remembered.
pub const RECENT_FILES: usize = 10;

impl Workspace {
    /// Where the grammar comes from now.
    pub fn grammar_source(&self) -> GrammarSource {
        if self.template.on {
            GrammarSource::Template
        } else if self.grammar.hand_edited {
            GrammarSource::HandEdited
        } else {
            GrammarSource::Tools
        }
    }

    /// Makes `source` the grammar source.
    pub fn set_grammar_source(&mut self, source: GrammarSource) {
        self.template.on = source == GrammarSource::Template;
        match source {
            GrammarSource::Tools => self.grammar.hand_edited = false,
            GrammarSource::HandEdited => self.grammar.hand_edited = true,
            GrammarSource::Template => {}
        }
    }

    /// Puts `path` first in the recent files (once), keeping at most [`RECENT_FILES`].
    pub fn remember_recent(&mut self, kind: RecentKind, path: &Path) {
        let entry = RecentFile {
            kind,
            path: path.to_path_buf(),
        };
        self.recent.retain(|r| *r != entry);
        self.recent.insert(0, entry);
        self.recent.truncate(RECENT_FILES);
    }

    /// Takes `path` off the recent files as `kind` (it could not be opened: the list offers only
    /// files that open).
    pub fn forget_recent(&mut self, kind: RecentKind, path: &Path) {
        self.recent.retain(|r| !(r.kind == kind && r.path == path));
    }
}

/// A window's inner size in points.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct WindowSize {
    /// Width.
    pub width: f32,
    /// Height.
    pub height: f32,
}

impl WindowSize {
    /// The smallest size restored (a window saved smaller is opened at least this large).
    pub const MIN: [f32; 2] = [640.0, 480.0];
    /// The largest size restored.
    pub const MAX: [f32; 2] = [16384.0, 16384.0];

    /// The size to open a window at: clamped to [`WindowSize::MIN`]..=[`WindowSize::MAX`];
    /// `None` for a size that is not finite (a hand-edited file).
    pub fn restored(&self) -> Option<[f32; 2]> {
        if !self.width.is_finite() || !self.height.is_finite() {
            return None;
        }
        Some([
            self.width.clamp(Self::MIN[0], Self::MAX[0]),
            self.height.clamp(Self::MIN[1], Self::MAX[1]),
        ])
    }
}

/// The window size saved in the workspace file at `path`, read without loading the workspace
/// (nothing is moved aside or reported: [`load`] does that); `None` when there is none.
pub fn saved_window_size(path: &Path) -> Option<[f32; 2]> {
    #[derive(Deserialize)]
    struct WindowOnly {
        window: Option<WindowSize>,
    }
    let text =
        toolrail_llm::files::read_regular_to_string(path, toolrail_llm::files::MAX_TEXT_FILE_BYTES)
            .ok()?;
    let only: WindowOnly = serde_json::from_str(&text).ok()?;
    only.window?.restored()
}

impl Default for Workspace {
    fn default() -> Self {
        Self {
            version: WORKSPACE_VERSION,
            schema: SchemaSettings::default(),
            grammar: GrammarSettings::default(),
            template: TemplateSettings::default(),
            test_input:
                r#"{"name": "get_weather", "arguments": {"city": "Paris", "unit": "kelvin"}}"#
                    .to_owned(),
            prompt: "What is the weather in Paris?".to_owned(),
            theme: Theme::Dark,
            live_refresh: LiveRefresh::Auto,
            layout: None,
            run: RunSettings::default(),
            window: None,
            recent: Vec::new(),
        }
    }
}

/// Reads `null` as the type's default (older workspace files wrote `"run": null`).
fn null_as_default<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de> + Default,
{
    Ok(Option::<T>::deserialize(deserializer)?.unwrap_or_default())
}

/// Why a workspace could not be saved.
#[derive(Debug, thiserror::Error)]
pub enum WorkspaceError {
    /// Writing the file failed.
    #[error("cannot save the workspace to {path}: {source}")]
    Write {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// Serialising failed (not expected for this plain data).
    #[error("cannot serialise the workspace: {0}")]
    Serialise(#[from] serde_json::Error),
}

/// A loaded workspace and what the user should be told about loading it.
#[derive(Debug, Clone)]
pub struct Loaded {
    /// The workspace (defaults when there was no readable file).
    pub workspace: Workspace,
    /// A message for the user when the file was unreadable (and where its copy is).
    pub notice: Option<String>,
    /// Where changes are to be saved: the file itself, or, when it exists but could be neither
    /// read nor moved aside, a copy beside it (so the file is never overwritten unread).
    pub save_path: PathBuf,
}

/// The default workspace file: `<config dir>/toolrail/workspace.json`, or `None` when the
/// platform has no home folder.
pub fn default_path() -> Option<PathBuf> {
    directories::ProjectDirs::from("", "", "toolrail").map(|d| d.config_dir().join(WORKSPACE_FILE))
}

/// Reads the workspace at `path`. A missing file gives defaults silently; a damaged one (bad
/// JSON, wrong shape, newer version, not UTF-8) is moved aside to a `.bad-<secs>` copy and gives
/// defaults with a notice naming the problem and the copy; one that cannot be read or moved
/// aside is left untouched, and [`Loaded::save_path`] points to a copy beside it.
pub fn load(path: &Path) -> Loaded {
    let fresh = |workspace: Workspace, notice: Option<String>| Loaded {
        workspace,
        notice,
        save_path: path.to_path_buf(),
    };
    // Only a regular file: a FIFO would block the open (and the app's start) for ever.
    let bytes =
        match toolrail_llm::files::read_regular(path, toolrail_llm::files::MAX_TEXT_FILE_BYTES) {
            Ok(b) => b,
            Err(e) if e.is_not_found() => {
                return fresh(Workspace::default(), None);
            }
            Err(e) => {
                let e = e.into_io();
                let copy = copy_path(path);
                return Loaded {
                    workspace: Workspace::default(),
                    notice: Some(format!(
                        "cannot read the workspace {}: {e}; it is left as it is, and this session \
                     starts from defaults and saves to {}",
                        path.display(),
                        copy.display()
                    )),
                    save_path: copy,
                };
            }
        };
    let problem = match serde_json::from_slice::<Workspace>(&bytes) {
        Ok(ws) if ws.version <= WORKSPACE_VERSION => return checked(path, ws, &bytes),
        Ok(ws) => format!(
            "it has version {}, newer than this toolrail's {WORKSPACE_VERSION}",
            ws.version
        ),
        Err(e) => format!("line {}, column {}: {e}", e.line(), e.column()),
    };
    let backup = backup_path(path);
    match std::fs::rename(path, &backup) {
        Ok(()) => fresh(
            Workspace::default(),
            Some(format!(
                "the workspace {} could not be read ({problem}); starting from defaults, the \
                 file was kept as {}",
                path.display(),
                backup.display()
            )),
        ),
        Err(e) => {
            let copy = copy_path(path);
            Loaded {
                workspace: Workspace::default(),
                notice: Some(format!(
                    "the workspace {} could not be read ({problem}) nor moved aside ({e}); it is \
                     left as it is, and this session starts from defaults and saves to {}",
                    path.display(),
                    copy.display()
                )),
                save_path: copy,
            }
        }
    }
}

/// A workspace that parsed, checked for what serde passes silently: keys toolrail does not know
/// (ignored, but named in the notice) and a pane layout too deep or cyclic to lay out (reset to
/// the default, the file kept aside as a `.bad-<secs>` copy first since saving will replace it).
fn checked(path: &Path, mut workspace: Workspace, bytes: &[u8]) -> Loaded {
    let mut notices = Vec::new();
    let mut save_path = path.to_path_buf();
    if let Some(problem) = workspace.layout.as_ref().and_then(layout_problem) {
        workspace.layout = None;
        let backup = backup_path(path);
        match std::fs::copy(path, &backup) {
            Ok(_) => notices.push(format!(
                "the pane layout in {} {problem}; the default layout is used, and the file was \
                 kept as {}",
                path.display(),
                backup.display()
            )),
            Err(e) => {
                save_path = copy_path(path);
                notices.push(format!(
                    "the pane layout in {} {problem}; the default layout is used; the file \
                     could not be copied aside ({e}), so it is left as it is and this session \
                     saves to {}",
                    path.display(),
                    save_path.display()
                ));
            }
        }
    }
    let unknown = serde_json::from_slice::<serde_json::Value>(bytes)
        .ok()
        .zip(serde_json::to_value(&workspace).ok())
        .map(|(read, known)| unknown_keys(&read, &known))
        .unwrap_or_default();
    if !unknown.is_empty() {
        notices.push(format!(
            "the workspace {} has keys toolrail does not know, ignored: {}",
            path.display(),
            unknown.join(", ")
        ));
    }
    Loaded {
        workspace,
        notice: (!notices.is_empty()).then(|| notices.join("; ")),
        save_path,
    }
}

/// JSON pointers of the object keys in `read` that `known` (the same data as toolrail writes
/// it) does not have, skipping the opaque layout. Iterative, so any nesting is fine.
fn unknown_keys(read: &serde_json::Value, known: &serde_json::Value) -> Vec<String> {
    let mut out = Vec::new();
    let mut todo = vec![(read, known, toolrail_tools::JsonPointer::root())];
    while let Some((read, known, pointer)) = todo.pop() {
        let (Some(read), Some(known)) = (read.as_object(), known.as_object()) else {
            continue;
        };
        for (key, value) in read {
            let at = pointer.with_key(key);
            match known.get(key) {
                None => out.push(at.to_string()),
                Some(_) if pointer.is_root() && key == "layout" => {}
                Some(known_value) => todo.push((value, known_value, at)),
            }
        }
    }
    out.sort();
    out
}

/// Why a pane layout (egui_tiles' serialised tree: `root` and `tiles.tiles`, containers listing
/// `children`) cannot be laid out: nested deeper than [`MAX_LAYOUT_DEPTH`], or a tile reached
/// twice (a cycle or a shared tile). Walked iteratively; `None` when it is fine.
fn layout_problem(layout: &serde_json::Value) -> Option<String> {
    let tiles = layout.pointer("/tiles/tiles")?.as_object()?;
    let root = layout.get("root")?;
    let mut seen = std::collections::HashSet::new();
    let mut todo = vec![(root.to_string(), 1usize)];
    while let Some((id, depth)) = todo.pop() {
        if depth > MAX_LAYOUT_DEPTH {
            return Some(format!("nests panes more than {MAX_LAYOUT_DEPTH} deep"));
        }
        if !seen.insert(id.clone()) {
            return Some(format!("reaches tile {id} twice (a cycle)"));
        }
        let Some(container) = tiles.get(&id).and_then(|t| t.get("Container")) else {
            continue;
        };
        let children = container
            .as_object()
            .into_iter()
            .flat_map(|kinds| kinds.values())
            .filter_map(|kind| kind.get("children")?.as_array())
            .flatten();
        for child in children {
            todo.push((child.to_string(), depth + 1));
        }
    }
    None
}

/// A free name beside `path` for this session's copy: `<name>.copy-<unix seconds>`.
fn copy_path(path: &Path) -> PathBuf {
    free_sibling(path, "copy")
}

fn backup_path(path: &Path) -> PathBuf {
    free_sibling(path, "bad")
}

/// `<name>.<tag>-<unix seconds>` beside `path`, with `-<n>` added until no file has the name.
fn free_sibling(path: &Path, tag: &str) -> PathBuf {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| WORKSPACE_FILE.to_owned());
    let mut candidate = path.with_file_name(format!("{name}.{tag}-{secs}"));
    let mut n = 1;
    while candidate.symlink_metadata().is_ok() {
        candidate = path.with_file_name(format!("{name}.{tag}-{secs}-{n}"));
        n += 1;
    }
    candidate
}

/// Writes the workspace to `path` atomically (creating the folder).
pub fn save(path: &Path, workspace: &Workspace) -> Result<(), WorkspaceError> {
    let text = serde_json::to_string_pretty(workspace)?;
    write_text(path, &text)
}

fn write_text(path: &Path, text: &str) -> Result<(), WorkspaceError> {
    let write = || {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)?;
        }
        crate::fsutil::write_atomic(path, text.as_bytes())
    };
    write().map_err(|source| WorkspaceError::Write {
        path: path.to_owned(),
        source,
    })
}

/// Debounced saving: call [`Autosave::tick`] every frame; the file is written once the workspace
/// has stopped changing for the delay, and [`Autosave::flush`] writes it at once (on exit).
#[derive(Debug)]
pub struct Autosave {
    path: PathBuf,
    delay: Duration,
    saved: String,
    changed: Option<(String, Instant)>,
}

impl Autosave {
    /// Autosave to `path` of a workspace whose current state is already on disk (or default).
    pub fn new(path: PathBuf, current: &Workspace, delay: Duration) -> Self {
        Self {
            path,
            delay,
            saved: serde_json::to_string_pretty(current).unwrap_or_default(),
            changed: None,
        }
    }

    /// The file it writes.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Notes the current workspace and saves it when it has been stable for the delay. Returns
    /// the save error, if one happened now.
    pub fn tick(&mut self, workspace: &Workspace, now: Instant) -> Result<(), WorkspaceError> {
        let text = serde_json::to_string_pretty(workspace)?;
        if text == self.saved {
            self.changed = None;
            return Ok(());
        }
        match &self.changed {
            Some((pending, since)) if *pending == text => {
                if now.duration_since(*since) >= self.delay {
                    self.write(text)?;
                }
            }
            _ => self.changed = Some((text, now)),
        }
        Ok(())
    }

    /// True while a change waits to be written.
    pub fn pending(&self) -> bool {
        self.changed.is_some()
    }

    /// Saves now if the workspace differs from what is on disk.
    pub fn flush(&mut self, workspace: &Workspace) -> Result<(), WorkspaceError> {
        let text = serde_json::to_string_pretty(workspace)?;
        if text != self.saved {
            self.write(text)?;
        }
        Ok(())
    }

    fn write(&mut self, text: String) -> Result<(), WorkspaceError> {
        write_text(&self.path, &text)?;
        self.saved = text;
        self.changed = None;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_window_size_is_read_back_clamped() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("workspace.json");
        assert_eq!(super::saved_window_size(&path), None);
        let ws = super::Workspace {
            window: Some(super::WindowSize {
                width: 1024.0,
                height: 300.0,
            }),
            ..super::Workspace::default()
        };
        super::save(&path, &ws).unwrap();
        assert_eq!(super::saved_window_size(&path), Some([1024.0, 480.0]));
        std::fs::write(&path, r#"{"window": {"width": 1e39, "height": 700}}"#).unwrap();
        assert_eq!(super::saved_window_size(&path), None);
        std::fs::write(&path, "{ not json").unwrap();
        assert_eq!(super::saved_window_size(&path), None);
    }

    use super::*;

    #[test]
    fn round_trips_through_a_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub").join(WORKSPACE_FILE);
        let mut ws = Workspace {
            test_input: "hello".into(),
            ..Workspace::default()
        };
        ws.schema.envelope = Format::Hermes;
        ws.theme = Theme::Light;
        save(&path, &ws).unwrap();
        let loaded = load(&path);
        assert!(loaded.notice.is_none());
        assert_eq!(loaded.workspace, ws);
    }

    #[test]
    fn files_written_before_the_typed_fields_still_load() {
        use crate::run::PromptStyle;
        use toolrail_tools::prompt::PromptFamily;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(WORKSPACE_FILE);
        // The envelope and the prompt style were free strings; `run` was opaque JSON, `null`
        // until the Generation pane wrote it; the models file defaulted to "models.toml".
        std::fs::write(
            &path,
            r#"{"version": 1, "schema": {"envelope": "hermes"}, "run": null}"#,
        )
        .unwrap();
        let loaded = load(&path);
        assert!(loaded.notice.is_none(), "{:?}", loaded.notice);
        assert_eq!(loaded.workspace.schema.envelope, Format::Hermes);
        assert_eq!(loaded.workspace.run, RunSettings::default());
        std::fs::write(
            &path,
            r#"{"version": 1, "run": {"models_file": "models.toml", "prompt_style": "gemma"}}"#,
        )
        .unwrap();
        let run = load(&path).workspace.run;
        assert_eq!(run.models_file, None);
        assert_eq!(run.prompt_style, PromptStyle::Family(PromptFamily::Gemma));
        // What they are written as has not changed.
        save(&path, &load(&path).workspace).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.contains(r#""prompt_style": "gemma""#), "{text}");
        assert!(text.contains(r#""envelope": "openai""#), "{text}");
        // An unknown name is an error the user is told about, not a silent default.
        std::fs::write(&path, r#"{"version": 1, "schema": {"envelope": "xml"}}"#).unwrap();
        let notice = load(&path).notice.unwrap();
        assert!(notice.contains("unknown format 'xml'"), "{notice}");
    }

    #[test]
    fn the_template_source_is_kept_and_older_files_open_without_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(WORKSPACE_FILE);
        std::fs::write(&path, r#"{"version": 1, "grammar": {"hand_edited": true}}"#).unwrap();
        let old = load(&path);
        assert!(old.notice.is_none(), "{:?}", old.notice);
        assert_eq!(old.workspace.template, TemplateSettings::default());
        assert_eq!(old.workspace.grammar_source(), GrammarSource::HandEdited);
        let mut ws = old.workspace;
        ws.template = TemplateSettings {
            file: Some(PathBuf::from("Qwen3-Coder.jinja")),
            text: "{{ messages }}".into(),
            tool_choice: ToolChoice::Named("get_weather".into()),
            parallel: ServerSwitch::Off,
            thinking: ServerSwitch::Off,
            reasoning_format: ReasoningFormat::DeepseekLegacy,
            ..TemplateSettings::default()
        };
        ws.set_grammar_source(GrammarSource::Template);
        save(&path, &ws).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(
            text.contains(r#""reasoning_format": "deepseek-legacy""#),
            "{text}"
        );
        let again = load(&path).workspace;
        assert_eq!(again, ws);
        assert_eq!(again.grammar_source(), GrammarSource::Template);
        // Leaving the template for toolrail's grammar switches the hand-edited text off too.
        let mut back = again;
        back.set_grammar_source(GrammarSource::Tools);
        assert_eq!(back.grammar_source(), GrammarSource::Tools);
        // A reasoning format llama.cpp does not know is an error the user is told about.
        std::fs::write(
            &path,
            r#"{"version": 1, "template": {"reasoning_format": "ponder"}}"#,
        )
        .unwrap();
        let notice = load(&path).notice.unwrap();
        assert!(notice.contains("ponder"), "{notice}");
        // Parallel calls were a box: ticked was `true`, unticked the server's default.
        for (stored, switch) in [
            ("true", ServerSwitch::On),
            ("false", ServerSwitch::ServerDefault),
        ] {
            std::fs::write(
                &path,
                format!(r#"{{"version": 1, "template": {{"parallel": {stored}}}}}"#),
            )
            .unwrap();
            assert_eq!(load(&path).workspace.template.parallel, switch);
        }
    }

    #[test]
    fn an_older_template_section_reads_and_is_written_back_the_same() {
        // The template section as workspaces have stored it: each choice under its serde name.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(WORKSPACE_FILE);
        for (stored, choice) in [
            (r#""auto""#, ToolChoice::Auto),
            (r#""required""#, ToolChoice::Required),
            (r#""none""#, ToolChoice::None),
            (
                r#"{"named": "get_weather"}"#,
                ToolChoice::Named("get_weather".into()),
            ),
        ] {
            let section = format!(
                r#"{{"on": true, "file": null, "text": "", "tool_choice": {stored},
                    "parallel": "off", "thinking": "on", "reasoning_format": "deepseek-legacy",
                    "budget": null}}"#
            );
            std::fs::write(&path, format!(r#"{{"version": 1, "template": {section}}}"#)).unwrap();
            let loaded = load(&path);
            assert!(loaded.notice.is_none(), "{:?}", loaded.notice);
            let template = &loaded.workspace.template;
            assert_eq!(template.tool_choice, choice);
            assert_eq!(template.parallel, ServerSwitch::Off);
            assert_eq!(template.thinking, ServerSwitch::On);
            assert_eq!(template.reasoning_format, ReasoningFormat::DeepseekLegacy);
            save(&path, &loaded.workspace).unwrap();
            let written: serde_json::Value =
                serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
            let expected: serde_json::Value = serde_json::from_str(&section).unwrap();
            assert_eq!(written["template"], expected);
        }
        // The defaults are written as the server's.
        let section = serde_json::to_value(TemplateSettings::default()).unwrap();
        assert_eq!(section["tool_choice"], "auto");
        assert_eq!(section["parallel"], "server_default");
        assert_eq!(section["thinking"], "server_default");
        assert_eq!(section["reasoning_format"], "server-default");
    }

    #[test]
    fn a_workspace_that_cannot_be_read_is_never_overwritten() {
        // A directory in place of the file: it exists, and reading it fails (as a file without
        // read permission does for an ordinary user).
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(WORKSPACE_FILE);
        std::fs::create_dir(&path).unwrap();
        std::fs::write(path.join("inside"), "precious").unwrap();
        let loaded = load(&path);
        let notice = loaded.notice.unwrap();
        assert!(notice.contains("left as it is"), "{notice}");
        assert_ne!(loaded.save_path, path);
        assert_eq!(loaded.save_path.parent(), path.parent());
        assert!(
            notice.contains(&loaded.save_path.display().to_string()),
            "{notice}"
        );
        // Saving goes to the copy; the original is untouched.
        let mut ws = loaded.workspace;
        ws.test_input = "new work".into();
        let mut auto = Autosave::new(
            loaded.save_path.clone(),
            &Workspace::default(),
            Duration::ZERO,
        );
        auto.flush(&ws).unwrap();
        assert_eq!(load(&loaded.save_path).workspace.test_input, "new work");
        assert_eq!(
            std::fs::read_to_string(path.join("inside")).unwrap(),
            "precious"
        );
    }

    #[test]
    fn a_corrupt_file_is_kept_and_defaults_load() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(WORKSPACE_FILE);
        std::fs::write(&path, "{\"version\": 1,\n \"test_input\": [}").unwrap();
        let loaded = load(&path);
        let notice = loaded.notice.unwrap();
        assert!(notice.contains("line 2"), "{notice}");
        assert_eq!(loaded.workspace, Workspace::default());
        let backups: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(backups.len(), 1);
        assert!(backups[0].starts_with("workspace.json.bad-"), "{backups:?}");
        let kept = std::fs::read_to_string(dir.path().join(&backups[0])).unwrap();
        assert_eq!(kept, "{\"version\": 1,\n \"test_input\": [}");
    }

    #[test]
    fn recent_files_are_newest_first_once_and_bounded() {
        let mut w = Workspace::default();
        for i in 0..15 {
            w.remember_recent(RecentKind::Schema, Path::new(&format!("/s{i}.json")));
        }
        w.remember_recent(RecentKind::Schema, Path::new("/s10.json"));
        assert_eq!(w.recent.len(), RECENT_FILES);
        assert_eq!(w.recent[0].path, Path::new("/s10.json"));
        assert_eq!(
            w.recent
                .iter()
                .filter(|r| r.path == Path::new("/s10.json"))
                .count(),
            1
        );
        let text = serde_json::to_string(&w).expect("serialises");
        let back: Workspace = serde_json::from_str(&text).expect("reads back");
        assert_eq!(back.recent, w.recent);
    }

    #[test]
    fn unknown_keys_are_named_in_the_notice() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(WORKSPACE_FILE);
        std::fs::write(
            &path,
            r#"{"version": 1, "test_imput": "typo", "schema": {"envelop": "hermes"},
                "layout": {"anything": 1}, "prompt": "kept"}"#,
        )
        .unwrap();
        let loaded = load(&path);
        let notice = loaded.notice.unwrap();
        assert!(
            notice.contains("keys toolrail does not know, ignored: /schema/envelop, /test_imput"),
            "{notice}"
        );
        assert_eq!(loaded.workspace.prompt, "kept");
        assert_eq!(loaded.save_path, path);
        // A file toolrail wrote has none.
        save(&path, &loaded.workspace).unwrap();
        assert!(load(&path).notice.is_none());
    }

    /// A layout like the F5 reproducer's: `depth` tab containers, each holding the next.
    fn nested_layout(depth: usize) -> serde_json::Value {
        let mut tiles = serde_json::Map::new();
        tiles.insert("1".into(), serde_json::json!({"Pane": "Tools"}));
        for i in 0..depth {
            let child = if i + 1 < depth { 101 + i } else { 1 };
            tiles.insert(
                (100 + i).to_string(),
                serde_json::json!({"Container": {"Tabs": {"children": [child], "active": child}}}),
            );
        }
        serde_json::json!({"root": 100, "tiles": {"next_tile_id": 100 + depth + 1, "tiles": tiles, "invisible": []}})
    }

    #[test]
    fn a_layout_nested_too_deep_is_reset_and_the_file_kept() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(WORKSPACE_FILE);
        let text = serde_json::json!({"version": 1, "prompt": "my prompt", "layout": nested_layout(15_000)})
            .to_string();
        std::fs::write(&path, &text).unwrap();
        let loaded = load(&path);
        let notice = loaded.notice.unwrap();
        assert!(
            notice.contains(&format!("nests panes more than {MAX_LAYOUT_DEPTH} deep")),
            "{notice}"
        );
        assert_eq!(loaded.workspace.layout, None);
        assert_eq!(loaded.workspace.prompt, "my prompt");
        let kept: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.to_string_lossy().contains(".bad-"))
            .collect();
        assert_eq!(kept.len(), 1, "{kept:?}");
        assert_eq!(std::fs::read_to_string(&kept[0]).unwrap(), text);
        assert!(notice.contains(&kept[0].display().to_string()), "{notice}");

        // A cycle is refused too; a shallow layout is kept as it is.
        let mut cyclic = nested_layout(3);
        cyclic["tiles"]["tiles"]["102"] =
            serde_json::json!({"Container": {"Linear": {"children": [100], "dir": "Horizontal"}}});
        std::fs::write(
            &path,
            serde_json::json!({"version": 1, "layout": cyclic}).to_string(),
        )
        .unwrap();
        let notice = load(&path).notice.unwrap();
        assert!(notice.contains("reaches tile 100 twice"), "{notice}");
        let shallow = nested_layout(5);
        std::fs::write(
            &path,
            serde_json::json!({"version": 1, "layout": shallow.clone()}).to_string(),
        )
        .unwrap();
        let loaded = load(&path);
        assert!(loaded.notice.is_none(), "{:?}", loaded.notice);
        assert_eq!(loaded.workspace.layout, Some(shallow));
    }

    #[test]
    fn a_newer_version_is_not_read() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(WORKSPACE_FILE);
        std::fs::write(&path, "{\"version\": 99}").unwrap();
        let loaded = load(&path);
        assert!(loaded.notice.unwrap().contains("version 99"));
    }

    #[test]
    fn autosave_waits_for_the_change_to_settle() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(WORKSPACE_FILE);
        let mut ws = Workspace::default();
        let mut auto = Autosave::new(path.clone(), &ws, Duration::from_millis(500));
        let t0 = Instant::now();
        ws.prompt = "changed".into();
        auto.tick(&ws, t0).unwrap();
        assert!(!path.exists());
        auto.tick(&ws, t0 + Duration::from_millis(100)).unwrap();
        assert!(!path.exists());
        auto.tick(&ws, t0 + Duration::from_millis(600)).unwrap();
        assert_eq!(load(&path).workspace.prompt, "changed");
        ws.prompt = "again".into();
        auto.flush(&ws).unwrap();
        assert_eq!(load(&path).workspace.prompt, "again");
    }
}
