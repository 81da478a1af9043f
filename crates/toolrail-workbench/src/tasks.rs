//! File reads and writes off the UI thread: the UI sends a [`Task`] (save the workspace, export
//! a grammar or a transcript, open a file), one background thread does it in order, and the
//! outcome comes back as a [`Done`] the UI picks up on a later frame ([`Tasks::poll`]) and
//! applies. Writes are atomic and flushed to disk ([`crate::fsutil::write_atomic`]), which can take
//! long on a busy disk: that is why they are here.
//!
//! The thread also owns the workspace's autosave: the UI sends the workspace whenever it
//! differs from what it sent last ([`Task::WorkspaceChanged`]), and the thread writes it once it
//! has stopped changing for the delay (serialising and comparing it there too).

use std::path::PathBuf;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender, TryRecvError};

use crate::Repaint;
use crate::actions::FileRequest;
use crate::conversation::{Conversation, ReplayStep};
use crate::run::Replay;
use crate::transcript::Transcript;
use crate::workspace::{self, Autosave, Loaded, Workspace};
use toolrail_llm::worker::RunId;

/// Something to do with files.
#[derive(Debug)]
pub enum Task {
    /// The workspace as it is now: autosaved once it has stopped changing for the delay.
    WorkspaceChanged(Box<Workspace>),
    /// Save the workspace now (Save workspace, closing the app).
    SaveWorkspace(Box<Workspace>),
    /// Save the workspace to a new file, and autosave there from then on.
    SaveWorkspaceAs(PathBuf, Box<Workspace>),
    /// Save the current workspace (when it is autosaved), then read the one at `path`;
    /// autosave writes there from then on.
    OpenWorkspace {
        /// The file to open.
        path: PathBuf,
        /// The workspace being left.
        current: Box<Workspace>,
    },
    /// Write `bytes` to `path` for `request` (an export, a saved tool set).
    Write {
        /// The file.
        path: PathBuf,
        /// Its content.
        bytes: Vec<u8>,
        /// What it was asked for.
        request: FileRequest,
    },
    /// Read the text file at `path` for `request` (a tool set, a grammar, a template).
    Read {
        /// The file.
        path: PathBuf,
        /// What it was asked for.
        request: FileRequest,
    },
    /// Write a transcript as JSON and as Markdown beside it.
    ExportTranscript {
        /// The transcript.
        transcript: Box<Transcript>,
        /// The run it records.
        run: RunId,
        /// The JSON file.
        json: PathBuf,
        /// The Markdown file.
        markdown: PathBuf,
    },
    /// Write a conversation as JSON and as Markdown beside it.
    SaveConversation {
        /// The conversation.
        conversation: Box<Conversation>,
        /// The JSON file.
        json: PathBuf,
        /// The Markdown file.
        markdown: PathBuf,
    },
    /// Read a conversation and replay it (each assistant turn's pool and grammar rebuilt).
    OpenConversation(PathBuf),
    /// Read a transcript for replay (a transcript may be hundreds of megabytes).
    OpenTranscript(PathBuf),
}

/// A conversation read from a file, and its replay (or why the replay failed, in words).
pub type OpenedConversation = (Box<Conversation>, Result<Vec<ReplayStep>, String>);

/// The outcome of a [`Task`] (an autosave reports only its failures).
#[derive(Debug)]
pub enum Done {
    /// The workspace was saved (or not) to `path`; `None`: saving is off in this session.
    WorkspaceSaved {
        /// The file written.
        path: Option<PathBuf>,
        /// Whether the user asked for it (an autosave's success is not reported).
        asked: bool,
        /// What went wrong, in words.
        result: Result<(), String>,
    },
    /// The workspace was saved to a new file (autosave goes there now), or not.
    WorkspaceSavedAs {
        /// The new file.
        path: PathBuf,
        /// What went wrong, in words.
        result: Result<(), String>,
    },
    /// Another workspace was read (defaults and a notice when it could not be).
    WorkspaceOpened {
        /// The file asked for.
        path: PathBuf,
        /// What was read, and where it is saved from now on.
        loaded: Box<Loaded>,
        /// Whether the workspace left was saved first.
        saved: Result<(), String>,
    },
    /// A file was written for `request`.
    Written {
        /// The file.
        path: PathBuf,
        /// What it was asked for.
        request: FileRequest,
        /// What went wrong, in words.
        result: Result<(), String>,
    },
    /// A text file was read for `request`.
    Read {
        /// The file.
        path: PathBuf,
        /// What it was asked for.
        request: FileRequest,
        /// Its text, or what went wrong in words.
        result: Result<String, String>,
    },
    /// A transcript was exported.
    TranscriptExported {
        /// The run it records.
        run: RunId,
        /// The JSON file.
        json: PathBuf,
        /// The Markdown file.
        markdown: PathBuf,
        /// What went wrong, in words.
        result: Result<(), String>,
    },
    /// A transcript was read for replay, or not.
    TranscriptOpened {
        /// The file.
        path: PathBuf,
        /// The replay, or what went wrong in words.
        result: Result<Box<Replay>, String>,
    },
    /// A conversation was saved.
    ConversationSaved {
        /// The JSON file.
        json: PathBuf,
        /// The Markdown file.
        markdown: PathBuf,
        /// What went wrong, in words.
        result: Result<(), String>,
    },
    /// A conversation was read and replayed.
    ConversationOpened {
        /// The file.
        path: PathBuf,
        /// The conversation and its replay, or what went wrong in words.
        result: Result<OpenedConversation, String>,
    },
}

/// The background task queue (one thread, tasks done in the order sent).
pub struct Tasks {
    tasks: Sender<Task>,
    done: Receiver<Done>,
    /// Tasks sent whose outcome has not been taken yet (autosave notes excluded).
    in_flight: usize,
    handle: Option<std::thread::JoinHandle<()>>,
}

impl Tasks {
    /// Starts the thread; `autosave`: the workspace file and the workspace it holds now (`None`:
    /// saving is off until Save workspace as). `repaint` is called when an outcome is ready.
    pub fn start(autosave: Option<Autosave>, repaint: Repaint) -> Self {
        let (tasks, task_rx) = crossbeam_channel::unbounded::<Task>();
        let (done_tx, done) = crossbeam_channel::unbounded::<Done>();
        let handle = std::thread::Builder::new()
            .name("toolrail-files".into())
            .spawn(move || worker(task_rx, done_tx, autosave, repaint))
            .ok();
        Tasks {
            tasks,
            done,
            in_flight: 0,
            handle,
        }
    }

    /// Sends a task (done in order after those sent before).
    pub fn send(&mut self, task: Task) {
        let reported = !matches!(task, Task::WorkspaceChanged(_));
        if self.tasks.send(task).is_ok() && reported {
            self.in_flight += 1;
        }
    }

    /// True while a task's outcome has not been taken.
    pub fn busy(&self) -> bool {
        self.in_flight > 0
    }

    /// The outcomes that arrived since the last call, in order.
    pub fn poll(&mut self) -> Vec<Done> {
        let mut out = Vec::new();
        loop {
            match self.done.try_recv() {
                Ok(done) => out.push(self.taken(done)),
                Err(TryRecvError::Empty | TryRecvError::Disconnected) => return out,
            }
        }
    }

    /// Waits up to `timeout` for every task sent to be done, and returns the outcomes (closing
    /// the app, headless runs and tests, which need a settled UI).
    pub fn wait_idle(&mut self, timeout: Duration) -> Vec<Done> {
        let deadline = Instant::now() + timeout;
        let mut out = self.poll();
        while self.in_flight > 0 {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.done.recv_timeout(left) {
                Ok(done) => out.push(self.taken(done)),
                Err(_) => break,
            }
        }
        out
    }

    fn taken(&mut self, done: Done) -> Done {
        let autosaved = matches!(done, Done::WorkspaceSaved { asked: false, .. });
        if !autosaved {
            self.in_flight = self.in_flight.saturating_sub(1);
        }
        done
    }
}

impl Drop for Tasks {
    fn drop(&mut self) {
        // Closing the channel ends the thread after the tasks already sent.
        let (closed, _) = crossbeam_channel::unbounded();
        self.tasks = closed;
        if let Some(handle) = self.handle.take() {
            let _ = handle.join();
        }
    }
}

fn worker(tasks: Receiver<Task>, done: Sender<Done>, autosave: Option<Autosave>, repaint: Repaint) {
    let mut autosave = autosave;
    // The newest workspace the UI sent, while its autosave waits for the delay.
    let mut pending: Option<Box<Workspace>> = None;
    loop {
        let task = if pending.is_some() {
            match tasks.recv_timeout(Duration::from_millis(250)) {
                Ok(task) => Some(task),
                Err(RecvTimeoutError::Timeout) => None,
                Err(RecvTimeoutError::Disconnected) => return,
            }
        } else {
            match tasks.recv() {
                Ok(task) => Some(task),
                Err(_) => return,
            }
        };
        let outcome = match task {
            None => None,
            Some(Task::WorkspaceChanged(ws)) => {
                pending = Some(ws);
                None
            }
            Some(task) => {
                pending = None;
                Some(run(task, &mut autosave))
            }
        };
        let mut outcomes: Vec<Done> = outcome.into_iter().collect();
        if let (Some(auto), Some(ws)) = (&mut autosave, &pending) {
            let result = auto.tick(ws, Instant::now()).map_err(|e| e.to_string());
            if !auto.pending() {
                pending = None;
            }
            if let Err(e) = result {
                outcomes.push(Done::WorkspaceSaved {
                    path: Some(auto.path().to_path_buf()),
                    asked: false,
                    result: Err(e),
                });
            }
        } else if autosave.is_none() {
            pending = None;
        }
        for outcome in outcomes {
            if done.send(outcome).is_err() {
                return;
            }
            repaint();
        }
    }
}

/// Does one task (not an autosave note).
fn run(task: Task, autosave: &mut Option<Autosave>) -> Done {
    match task {
        Task::WorkspaceChanged(_) => Done::WorkspaceSaved {
            path: None,
            asked: false,
            result: Ok(()),
        },
        Task::SaveWorkspace(ws) => match autosave {
            Some(auto) => Done::WorkspaceSaved {
                path: Some(auto.path().to_path_buf()),
                asked: true,
                result: auto.flush(&ws).map_err(|e| e.to_string()),
            },
            None => Done::WorkspaceSaved {
                path: None,
                asked: true,
                result: Ok(()),
            },
        },
        Task::SaveWorkspaceAs(path, ws) => {
            let mut auto = Autosave::new(path.clone(), &Workspace::default(), DELAY);
            let result = auto.flush(&ws).map_err(|e| e.to_string());
            if result.is_ok() {
                *autosave = Some(auto);
            }
            Done::WorkspaceSavedAs { path, result }
        }
        Task::OpenWorkspace { path, current } => {
            let saved = match autosave {
                Some(auto) => auto.flush(&current).map_err(|e| e.to_string()),
                None => Ok(()),
            };
            let loaded = workspace::load(&path);
            *autosave = Some(Autosave::new(
                loaded.save_path.clone(),
                &loaded.workspace,
                DELAY,
            ));
            Done::WorkspaceOpened {
                path,
                loaded: Box::new(loaded),
                saved,
            }
        }
        Task::Write {
            path,
            bytes,
            request,
        } => {
            let result = crate::fsutil::write_atomic(&path, &bytes)
                .map_err(|e| format!("cannot write {}: {e}", path.display()));
            Done::Written {
                path,
                request,
                result,
            }
        }
        Task::Read { path, request } => {
            let result = toolrail_llm::files::read_regular_to_string(
                &path,
                toolrail_llm::files::MAX_TEXT_FILE_BYTES,
            )
            .map_err(|e| e.to_string());
            Done::Read {
                path,
                request,
                result,
            }
        }
        Task::ExportTranscript {
            transcript,
            run,
            json,
            markdown,
        } => {
            let result = transcript
                .save(&json)
                .and_then(|()| transcript.save_markdown(&markdown))
                .map_err(|e| e.to_string());
            Done::TranscriptExported {
                run,
                json,
                markdown,
                result,
            }
        }
        Task::SaveConversation {
            conversation,
            json,
            markdown,
        } => {
            let result = conversation
                .save(&json)
                .and_then(|()| conversation.save_markdown(&markdown))
                .map_err(|e| e.to_string());
            Done::ConversationSaved {
                json,
                markdown,
                result,
            }
        }
        Task::OpenTranscript(path) => {
            let result = Replay::open(&path).map(Box::new).map_err(|e| e.to_string());
            Done::TranscriptOpened { path, result }
        }
        Task::OpenConversation(path) => {
            let result = Conversation::load(&path)
                .map(|conversation| {
                    let replay = conversation.replay().map_err(|e| e.to_string());
                    (Box::new(conversation), replay)
                })
                .map_err(|e| e.to_string());
            Done::ConversationOpened { path, result }
        }
    }
}

/// How long the workspace must stay unchanged before it is autosaved.
pub const DELAY: Duration = Duration::from_secs(1);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_and_reads_come_back_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("g.gbnf");
        let mut tasks = Tasks::start(None, crate::no_repaint());
        tasks.send(Task::Write {
            path: path.clone(),
            bytes: b"root ::= \"a\"".to_vec(),
            request: FileRequest::ExportGrammar,
        });
        tasks.send(Task::Read {
            path: path.clone(),
            request: FileRequest::ImportGrammar,
        });
        let done = tasks.wait_idle(Duration::from_secs(30));
        assert_eq!(done.len(), 2, "{done:?}");
        assert!(matches!(&done[0], Done::Written { result: Ok(()), .. }));
        match &done[1] {
            Done::Read { result, .. } => assert_eq!(result.as_deref(), Ok("root ::= \"a\"")),
            other => panic!("{other:?}"),
        }
        assert!(!tasks.busy());
    }

    #[test]
    fn the_workspace_is_autosaved_once_it_settles_and_saved_at_once_when_asked() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("workspace.json");
        let auto = Autosave::new(path.clone(), &Workspace::default(), DELAY);
        let mut tasks = Tasks::start(Some(auto), crate::no_repaint());
        let mut ws = Workspace {
            test_input: "changed".into(),
            ..Workspace::default()
        };
        tasks.send(Task::WorkspaceChanged(Box::new(ws.clone())));
        let deadline = Instant::now() + Duration::from_secs(30);
        while !std::fs::read_to_string(&path).is_ok_and(|t| t.contains("changed")) {
            assert!(Instant::now() < deadline, "never autosaved");
            std::thread::sleep(Duration::from_millis(50));
        }
        ws.test_input = "saved now".into();
        tasks.send(Task::SaveWorkspace(Box::new(ws)));
        let done = tasks.wait_idle(Duration::from_secs(30));
        assert!(
            matches!(
                &done[..],
                [Done::WorkspaceSaved {
                    asked: true,
                    result: Ok(()),
                    ..
                }]
            ),
            "{done:?}"
        );
        assert!(
            std::fs::read_to_string(&path)
                .unwrap()
                .contains("saved now")
        );
    }
}
