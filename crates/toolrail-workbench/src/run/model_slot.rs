//! The model slot: the model in-process runs use, loading on its own thread (with progress and
//! cancel), loaded with its generation [`Worker`], or failed. The controller keeps a clone of
//! the loaded [`Model`] (clones share the weights) to build prompts with its chat template.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use crossbeam_channel::{Receiver, TryRecvError, bounded};

use toolrail_llm::worker::{Notify, Worker};
use toolrail_llm::{Model, ModelSpec};

/// Where model loading stands.
#[derive(Clone, Debug, Default, PartialEq)]
pub enum LoadState {
    /// No model chosen yet.
    #[default]
    Empty,
    /// Loading, with the fraction done (0..=1).
    Loading {
        /// The model's name.
        name: String,
        /// Fraction loaded.
        fraction: f32,
    },
    /// Loaded and ready.
    Ready {
        /// The model's name.
        name: String,
    },
    /// Loading failed (or was cancelled).
    Failed {
        /// The model's name.
        name: String,
        /// Why.
        message: String,
    },
}

enum LoadMessage {
    Progress(f32),
    Done(Result<Model, String>),
}

/// A model loading on its own thread.
struct LoadJob {
    spec: ModelSpec,
    messages: Receiver<LoadMessage>,
    cancel: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Drop for LoadJob {
    fn drop(&mut self) {
        self.cancel.store(true, Ordering::Relaxed);
        // Unblock a loader waiting to report.
        while self.messages.try_recv().is_ok() {}
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// The model slot (see the module docs).
#[derive(Default)]
pub(super) struct ModelSlot {
    spec: Option<ModelSpec>,
    model: Option<Model>,
    worker: Option<Worker>,
    loading: Option<LoadJob>,
    state: LoadState,
}

impl ModelSlot {
    /// Starts loading `spec` on a loader thread (dropping a load under way); `notify` is called
    /// after every progress report and when it is done.
    pub(super) fn load(&mut self, spec: ModelSpec, notify: Notify) {
        self.loading = None;
        let (tx, messages) = bounded::<LoadMessage>(256);
        let cancel = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&cancel);
        let thread_spec = spec.clone();
        let thread = std::thread::Builder::new()
            .name("toolrail-model-load".into())
            .spawn(move || {
                let progress_tx = tx.clone();
                let progress_notify = Arc::clone(&notify);
                let loaded = Model::load(thread_spec, move |fraction| {
                    let _ = progress_tx.try_send(LoadMessage::Progress(fraction));
                    progress_notify();
                    !flag.load(Ordering::Relaxed)
                });
                let _ = tx.send(LoadMessage::Done(loaded.map_err(|e| e.to_string())));
                notify();
            });
        match thread {
            Ok(thread) => {
                self.state = LoadState::Loading {
                    name: spec.name.clone(),
                    fraction: 0.0,
                };
                self.loading = Some(LoadJob {
                    spec,
                    messages,
                    cancel,
                    thread: Some(thread),
                });
            }
            Err(e) => {
                self.state = LoadState::Failed {
                    name: spec.name.clone(),
                    message: format!("cannot start the loader thread: {e}"),
                };
            }
        }
    }

    /// Cancels a load in progress.
    pub(super) fn cancel_load(&mut self) {
        if let Some(job) = self.loading.take() {
            self.state = LoadState::Failed {
                name: job.spec.name.clone(),
                message: "loading cancelled".into(),
            };
        }
    }

    /// Makes `model` the loaded one, with a new worker (the old one is idle: loads are refused
    /// during runs, so dropping it joins at once); `notify` is what the worker calls after
    /// every event.
    pub(super) fn install(&mut self, model: Model, notify: Notify) {
        self.worker = None;
        self.spec = Some(model.spec().clone());
        self.state = LoadState::Ready {
            name: model.spec().name.clone(),
        };
        self.worker = Some(Worker::spawn(model.clone(), notify));
        self.model = Some(model);
    }

    /// Takes what the loader reported, without blocking; `Some` with the loaded model once
    /// it is done (the caller installs it with the notify it wants).
    pub(super) fn poll(&mut self) -> Option<Model> {
        loop {
            let message = match &self.loading {
                Some(job) => match job.messages.try_recv() {
                    Ok(message) => message,
                    Err(TryRecvError::Empty) => return None,
                    Err(TryRecvError::Disconnected) => {
                        self.loading = None;
                        return None;
                    }
                },
                None => return None,
            };
            if let Some(model) = self.on_message(message) {
                return Some(model);
            }
        }
    }

    /// Waits up to `timeout` for the loader's next report; `Some` with the loaded model once
    /// it is done; without a load under way it returns at once.
    pub(super) fn wait(&mut self, timeout: Duration) -> Option<Model> {
        let message = self.loading.as_ref()?.messages.recv_timeout(timeout).ok()?;
        self.on_message(message)
    }

    fn on_message(&mut self, message: LoadMessage) -> Option<Model> {
        match message {
            LoadMessage::Progress(fraction) => {
                if let LoadState::Loading { fraction: f, .. } = &mut self.state {
                    *f = fraction;
                }
                None
            }
            LoadMessage::Done(result) => {
                let job = self.loading.take()?;
                match result {
                    Ok(model) => Some(model),
                    Err(message) => {
                        self.state = LoadState::Failed {
                            name: job.spec.name.clone(),
                            message,
                        };
                        None
                    }
                }
            }
        }
    }

    /// True while a model loads.
    pub(super) fn is_loading(&self) -> bool {
        self.loading.is_some()
    }

    /// Where loading stands.
    pub(super) fn state(&self) -> &LoadState {
        &self.state
    }

    /// The loaded model.
    pub(super) fn model(&self) -> Option<&Model> {
        self.model.as_ref()
    }

    /// The loaded model's worker.
    pub(super) fn worker(&self) -> Option<&Worker> {
        self.worker.as_ref()
    }

    /// The spec of the model loading, else of the loaded one.
    pub(super) fn spec(&self) -> Option<&ModelSpec> {
        self.loading
            .as_ref()
            .map(|job| &job.spec)
            .or(self.spec.as_ref())
    }

    /// The spec of the loaded model.
    pub(super) fn loaded_spec(&self) -> Option<&ModelSpec> {
        self.spec.as_ref()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wait_done(slot: &mut ModelSlot) -> Option<Model> {
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        while slot.is_loading() && std::time::Instant::now() < deadline {
            if let Some(model) = slot.wait(Duration::from_millis(100)) {
                return Some(model);
            }
        }
        None
    }

    #[test]
    fn a_missing_file_fails_with_its_reason_and_keeps_no_model() {
        let mut slot = ModelSlot::default();
        assert_eq!(slot.state(), &LoadState::Empty);
        let spec = ModelSpec::from_path("/no/such/model.gguf");
        slot.load(spec.clone(), Arc::new(|| {}));
        assert!(matches!(slot.state(), LoadState::Loading { .. }));
        assert_eq!(slot.spec(), Some(&spec));
        assert!(wait_done(&mut slot).is_none());
        match slot.state() {
            LoadState::Failed { name, message } => {
                assert_eq!(name, &spec.name);
                assert!(!message.is_empty());
            }
            other => panic!("{other:?}"),
        }
        assert!(!slot.is_loading());
        assert!(slot.model().is_none() && slot.worker().is_none());
        assert!(slot.spec().is_none(), "a failed load leaves no spec");
    }

    #[test]
    fn a_cancelled_load_says_so() {
        let mut slot = ModelSlot::default();
        slot.load(ModelSpec::from_path("/no/such/model.gguf"), Arc::new(|| {}));
        slot.cancel_load();
        assert!(!slot.is_loading());
        assert!(
            matches!(slot.state(), LoadState::Failed { message, .. } if message == "loading cancelled")
        );
        assert!(slot.poll().is_none());
    }
}
