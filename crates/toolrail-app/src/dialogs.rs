//! Native file dialogs that never hold the UI: the dialog is made on the UI thread (macOS needs
//! that), awaited on a helper thread, and its answer picked up by a later frame, which routes it
//! by what the dialog was opened for.

use std::path::PathBuf;

use crossbeam_channel::{Receiver, TryRecvError, bounded};

/// What a file dialog was opened for: decides what happens to the chosen path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FileRequest {
    /// Load a GGUF model.
    OpenGguf,
    /// Open a tool set or JSON Schema into the editor.
    OpenSchema,
    /// Save the editor's JSON.
    SaveSchema,
    /// Open a transcript for replay.
    OpenTranscript,
    /// Export the transcript (JSON and Markdown).
    ExportTranscript,
    /// Import a `.gbnf` as the hand-edited grammar.
    ImportGrammar,
    /// Export the grammar in force as `.gbnf`.
    ExportGrammar,
}

/// The one file dialog that may be open, and where its answer will arrive.
#[derive(Debug, Default)]
pub struct FileDialogs {
    pending: Option<(FileRequest, Receiver<Option<PathBuf>>)>,
}

impl FileDialogs {
    /// True while a dialog is open.
    pub fn is_open(&self) -> bool {
        self.pending.is_some()
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
            return false;
        }
        self.pending = Some((request, rx));
        true
    }

    /// The answer of the open dialog, once given: the request and the chosen path (None while
    /// it is open, or when it was cancelled).
    pub fn poll(&mut self) -> Option<(FileRequest, PathBuf)> {
        let (request, rx) = self.pending.as_ref()?;
        let request = *request;
        match rx.try_recv() {
            Ok(answer) => {
                self.pending = None;
                answer.map(|path| (request, path))
            }
            Err(TryRecvError::Empty) => None,
            Err(TryRecvError::Disconnected) => {
                self.pending = None;
                None
            }
        }
    }
}
