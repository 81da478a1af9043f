//! Native file dialogs that never hold the UI: the dialog is made on the UI thread (macOS needs
//! that), awaited on a helper thread, and its answer picked up by a later frame, which routes it
//! by what the dialog was opened for.
//!
//! Where no native dialog can open (no desktop portal and no `zenity`: minimal Linux,
//! containers, remote sessions), or one closes at once without an answer, an in-app path field
//! ([`PathPrompt`]) takes its place and says why.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, TryRecvError, bounded};
pub use toolrail_workbench::actions::FileRequest;
use toolrail_workbench::paths::{self, Completion, PathUse};

/// A native dialog that answers "nothing chosen" sooner than this never showed (no person
/// cancels a dialog this fast): the path field is offered instead.
const CLOSED_AT_ONCE: Duration = Duration::from_millis(250);

/// The in-app path field shown instead of a native dialog.
#[derive(Debug, Clone)]
pub struct PathPrompt {
    /// What the path is for.
    pub request: FileRequest,
    /// The path as typed.
    pub typed: String,
    /// Why the native dialog is not used.
    pub reason: String,
    /// Why the last typed path was refused, if it was.
    pub error: Option<String>,
    /// The completions of `typed` (recomputed when it changes).
    completions: Vec<Completion>,
    completed_for: Option<String>,
    /// The field was given the keyboard focus (once, when the prompt opens).
    focused: bool,
}

impl PathPrompt {
    /// A prompt for `request`, starting in the current folder.
    pub fn new(request: FileRequest, reason: String) -> Self {
        let folder = std::env::current_dir()
            .map(|d| {
                let mut s = d.display().to_string();
                if !s.ends_with(std::path::MAIN_SEPARATOR) {
                    s.push(std::path::MAIN_SEPARATOR);
                }
                s
            })
            .unwrap_or_default();
        PathPrompt {
            request,
            typed: format!("{folder}{}", request.default_name()),
            reason,
            error: None,
            completions: Vec::new(),
            completed_for: None,
            focused: false,
        }
    }

    /// The folder entries that complete the typed path.
    pub fn completions(&mut self) -> &[Completion] {
        if self.completed_for.as_deref() != Some(self.typed.as_str()) {
            let base = std::env::current_dir().unwrap_or_default();
            self.completions = paths::complete(&self.typed, &base);
            self.completed_for = Some(self.typed.clone());
        }
        &self.completions
    }

    /// The typed path if it can be used; otherwise the reason is kept in `error`.
    pub fn accept(&mut self) -> Option<PathBuf> {
        let base = std::env::current_dir().unwrap_or_default();
        match paths::check_typed_path(&self.typed, &base, self.request.path_use()) {
            Ok(path) => Some(path),
            Err(e) => {
                self.error = Some(e);
                None
            }
        }
    }
}

/// What the path field did this frame.
pub enum PromptOutcome {
    /// Still open.
    Open,
    /// Closed without a path.
    Cancelled,
    /// A usable path was given.
    Chosen(PathBuf),
}

/// Draws the path field as a modal window.
pub fn prompt_ui(ctx: &egui::Context, prompt: &mut PathPrompt) -> PromptOutcome {
    let mut outcome = PromptOutcome::Open;
    let modal = egui::Modal::new(egui::Id::unique("toolrail-path-prompt")).show(ctx, |ui| {
        // A fixed size from the first frame, so the centred window does not move when the
        // completions arrive.
        ui.set_width(560.0);
        ui.heading(prompt.request.title());
        ui.add(
            egui::Label::new(egui::RichText::new(&prompt.reason).color(ui.visuals().warn_fg_color))
                .wrap(),
        );
        let label = ui.label("File path");
        let field = ui
            .add(
                egui::TextEdit::singleline(&mut prompt.typed)
                    .id(egui::Id::unique("toolrail-path-field"))
                    .desired_width(f32::INFINITY)
                    .font(egui::TextStyle::Monospace),
            )
            .labelled_by(label.id);
        if !std::mem::replace(&mut prompt.focused, true) {
            ui.memory_mut(|m| m.request_focus(field.id));
        }
        if field.changed() {
            prompt.error = None;
        }
        let entered = field.lost_focus() && ui.input(|i| i.key_pressed(egui::Key::Enter));
        if let Some(error) = &prompt.error {
            ui.label(egui::RichText::new(error).color(ui.visuals().error_fg_color));
        }
        let mut completed = None;
        let completions = prompt.completions();
        ui.label(egui::RichText::new("In this folder (click to complete):").weak());
        egui::ScrollArea::vertical()
            .id_salt("toolrail-path-completions")
            .max_height(180.0)
            .min_scrolled_height(180.0)
            .auto_shrink([false, false])
            .show(ui, |ui| {
                if completions.is_empty() {
                    ui.label(egui::RichText::new("nothing here starts like the typed name").weak());
                }
                for c in completions {
                    let name = if c.is_dir {
                        format!("{}{}", c.name, std::path::MAIN_SEPARATOR)
                    } else {
                        c.name.clone()
                    };
                    if ui
                        .selectable_label(false, egui::RichText::new(name).monospace())
                        .clicked()
                    {
                        completed = Some(c.path.clone());
                    }
                }
            });
        if let Some(path) = completed {
            prompt.typed = path;
            prompt.error = None;
            ui.memory_mut(|m| m.request_focus(field.id));
        }
        ui.horizontal(|ui| {
            let verb = match prompt.request.path_use() {
                PathUse::Open => "Open",
                PathUse::Save => "Save",
            };
            if (ui.button(verb).clicked() || entered)
                && let Some(path) = prompt.accept()
            {
                outcome = PromptOutcome::Chosen(path);
            }
            if ui.button("Cancel").clicked() {
                outcome = PromptOutcome::Cancelled;
            }
        });
    });
    if modal.should_close() && matches!(outcome, PromptOutcome::Open) {
        outcome = PromptOutcome::Cancelled;
    }
    outcome
}

/// Whether the system's file dialogs are used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DialogBackend {
    /// Not decided yet: checked (once) when the first dialog is asked for.
    Unchecked,
    /// The native dialogs.
    Native,
    /// The in-app path field, for this reason.
    InApp(String),
}

/// The one file dialog that may be open, and where its answer will arrive.
#[derive(Debug)]
pub struct FileDialogs {
    pending: Option<(FileRequest, Receiver<Option<PathBuf>>, Instant)>,
    /// The path field open instead of a native dialog.
    pub prompt: Option<PathPrompt>,
    /// Native dialogs or the path field.
    pub backend: DialogBackend,
}

impl Default for FileDialogs {
    fn default() -> Self {
        FileDialogs {
            pending: None,
            prompt: None,
            backend: DialogBackend::Unchecked,
        }
    }
}

impl FileDialogs {
    /// Dialogs that always use the in-app path field (tests, and systems known to lack one).
    pub fn in_app(reason: impl Into<String>) -> Self {
        FileDialogs {
            backend: DialogBackend::InApp(reason.into()),
            ..FileDialogs::default()
        }
    }

    /// True while a dialog (native or the path field) is open.
    pub fn is_open(&self) -> bool {
        self.pending.is_some() || self.prompt.is_some()
    }

    /// The reason the path field replaces native dialogs, checking the system once.
    fn in_app_reason(&mut self) -> Option<String> {
        if self.backend == DialogBackend::Unchecked {
            self.backend = match paths::native_dialog_unavailable() {
                Some(reason) => DialogBackend::InApp(reason),
                None => DialogBackend::Native,
            };
        }
        match &self.backend {
            DialogBackend::InApp(reason) => Some(reason.clone()),
            _ => None,
        }
    }

    /// Opens `dialog` to pick an existing file for `request`; `repaint` is called when the user
    /// answers. False (and nothing opened) while another dialog is open.
    pub fn pick(
        &mut self,
        request: FileRequest,
        dialog: rfd::AsyncFileDialog,
        repaint: impl Fn() + Send + 'static,
    ) -> bool {
        self.spawn(request, dialog.pick_file(), repaint)
    }

    /// Opens `dialog` to choose where to save for `request` (see [`FileDialogs::pick`]).
    pub fn save(
        &mut self,
        request: FileRequest,
        dialog: rfd::AsyncFileDialog,
        repaint: impl Fn() + Send + 'static,
    ) -> bool {
        self.spawn(request, dialog.save_file(), repaint)
    }

    fn spawn(
        &mut self,
        request: FileRequest,
        answer: impl Future<Output = Option<rfd::FileHandle>> + Send + 'static,
        repaint: impl Fn() + Send + 'static,
    ) -> bool {
        if self.is_open() {
            return false;
        }
        if let Some(reason) = self.in_app_reason() {
            self.prompt = Some(PathPrompt::new(request, reason));
            return true;
        }
        let (tx, rx) = bounded(1);
        let spawned = std::thread::Builder::new()
            .name("toolrail-file-dialog".into())
            .spawn(move || {
                let path = pollster::block_on(answer).map(PathBuf::from);
                // The receiver is gone only if the app closed meanwhile: nothing to tell.
                let _ = tx.send(path);
                repaint();
            });
        if spawned.is_err() {
            self.prompt = Some(PathPrompt::new(
                request,
                "the file dialog could not be started: type the path instead".to_owned(),
            ));
            return true;
        }
        self.pending = Some((request, rx, Instant::now()));
        true
    }

    /// The answer of the open dialog, once given: the request and the chosen path (None while
    /// it is open, or when it was cancelled).
    pub fn poll(&mut self) -> Option<(FileRequest, PathBuf)> {
        let (request, rx, opened) = self.pending.as_ref()?;
        let (request, opened) = (*request, *opened);
        match rx.try_recv() {
            Ok(answer) => {
                self.pending = None;
                if answer.is_none() && opened.elapsed() < CLOSED_AT_ONCE {
                    // It never showed: use the path field from now on.
                    let reason = "the system file dialog closed at once without showing (is a \
                                  desktop portal or zenity installed?): type the path instead"
                        .to_owned();
                    self.backend = DialogBackend::InApp(reason.clone());
                    self.prompt = Some(PathPrompt::new(request, reason));
                }
                answer.map(|path| (request, path))
            }
            Err(TryRecvError::Empty) => None,
            Err(TryRecvError::Disconnected) => {
                self.pending = None;
                None
            }
        }
    }

    /// Draws the path field if it is open; returns its answer once given.
    pub fn prompt_ui(&mut self, ctx: &egui::Context) -> Option<(FileRequest, PathBuf)> {
        let prompt = self.prompt.as_mut()?;
        let request = prompt.request;
        match prompt_ui(ctx, prompt) {
            PromptOutcome::Open => None,
            PromptOutcome::Cancelled => {
                self.prompt = None;
                None
            }
            PromptOutcome::Chosen(path) => {
                self.prompt = None;
                Some((request, path))
            }
        }
    }
}
