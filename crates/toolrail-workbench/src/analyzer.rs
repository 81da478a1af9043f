//! The analysis thread: the UI submits what its panes show (a [`Job`]: the workspace's analysis
//! input, the output pasted into the Validator pane, the prompt preview's settings) and picks up
//! the [`Analyzed`] result on a later frame, without waiting. Everything that can take more than
//! a moment is computed here, never on the UI thread: the grammar and its checks, llama.cpp's
//! template renders, the validator's verdict on a pasted output and the prompt preview (a GGUF
//! chat template applied by llama.cpp).

use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender, TryRecvError};
use toolrail_llm::Model;

use crate::Repaint;
use crate::analysis::{Analysis, AnalysisInput, Computer};
use crate::pasted::{PastedCheck, check_pasted};
use crate::run::{PromptPreview, RunSetup, RunState, build_prompt_preview};

/// A loaded model handed to the analysis thread (the prompt preview applies its chat template).
/// Two are equal when they are the same load of a model.
#[derive(Debug, Clone)]
pub struct LoadedModel(pub Model);

impl PartialEq for LoadedModel {
    fn eq(&self, other: &Self) -> bool {
        // Clones of one load share their info; another load (even of the same file) does not.
        std::ptr::eq(self.0.info(), other.0.info())
    }
}

/// What the prompt preview is built from.
#[derive(Debug, Clone, PartialEq)]
pub struct PreviewInput {
    /// The run settings and the prompt, as a run would get them.
    pub setup: RunSetup,
    /// The loaded model, if any (its chat template and spec decide the prompt format).
    pub model: Option<LoadedModel>,
}

/// One submission: what the panes show now.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Job {
    /// The workspace's tool set, grammar, test input and template settings.
    pub input: AnalysisInput,
    /// A model output pasted into the Validator pane (empty: none).
    pub pasted: String,
    /// The prompt preview's inputs, while the preview is shown (`None`: not wanted).
    pub preview: Option<PreviewInput>,
}

/// The result of one job.
#[derive(Debug, Clone, Default)]
pub struct Analyzed {
    /// The analysis of the job's input.
    pub analysis: Analysis,
    /// The job it answers.
    pub job: Job,
    /// The verdicts on the pasted output (when there is one).
    pub pasted: Option<PastedCheck>,
    /// The prompt preview (when it was asked for), or why there is none.
    pub preview: Option<Result<PromptPreview, String>>,
}

/// Computes a job: the analysis, then what depends on it.
fn compute(computer: &mut Computer, job: &Job) -> Analyzed {
    let analysis = computer.compute(&job.input);
    let pasted = (!job.pasted.is_empty()).then(|| check_pasted(&analysis, &job.pasted));
    let preview = job.preview.as_ref().map(|p| {
        let model = p.model.as_ref().map(|m| &m.0);
        build_prompt_preview(
            &p.setup,
            &RunState::inputs(&analysis),
            model,
            model.map(Model::spec),
        )
        .map_err(|e| e.to_string())
    });
    Analyzed {
        analysis,
        job: job.clone(),
        pasted,
        preview,
    }
}

/// Runs the analysis on a background thread: the UI submits jobs and picks up results without
/// waiting. Jobs that arrive within the debounce delay of each other are coalesced (only the
/// last is computed); jobs that leave the grammar part unchanged (test input, cursor, pasted
/// output, preview) skip the delay because they are cheap.
pub struct Analyzer {
    jobs: Sender<Job>,
    results: Receiver<Analyzed>,
    submitted: Option<Job>,
    handle: Option<std::thread::JoinHandle<()>>,
}

impl Analyzer {
    /// Starts the analysis thread; `repaint` is called when a result is ready.
    pub fn start(debounce: Duration, repaint: Repaint) -> Self {
        let (jobs, job_rx) = crossbeam_channel::bounded::<Job>(16);
        let (result_tx, results) = crossbeam_channel::bounded::<Analyzed>(4);
        let handle = std::thread::Builder::new()
            .name("toolrail-analysis".into())
            // the schema converter recurses once per level of nesting, up to its own limit
            .stack_size(16 << 20)
            .spawn(move || worker(job_rx, result_tx, debounce, repaint))
            .ok();
        Self {
            jobs,
            results,
            submitted: None,
            handle,
        }
    }

    /// Submits `job` unless it equals the last one submitted. Returns true if submitted.
    pub fn submit(&mut self, job: Job) -> bool {
        if self.submitted.as_ref() == Some(&job) {
            return false;
        }
        if self.handle.is_none() {
            return false;
        }
        let sent = self.jobs.try_send(job.clone()).is_ok();
        if sent {
            self.submitted = Some(job);
        }
        sent
    }

    /// The newest finished result, if one arrived since the last call.
    pub fn poll(&mut self) -> Option<Analyzed> {
        let mut latest = None;
        loop {
            match self.results.try_recv() {
                Ok(a) => latest = Some(a),
                Err(TryRecvError::Empty | TryRecvError::Disconnected) => return latest,
            }
        }
    }

    /// Waits up to `timeout` for the result of the last submitted job (headless runs and
    /// tests, which need a settled UI).
    pub fn wait_settled(&mut self, timeout: Duration) -> Option<Analyzed> {
        let deadline = Instant::now() + timeout;
        let mut latest = None;
        loop {
            let remaining = deadline.saturating_duration_since(Instant::now());
            match self.results.recv_timeout(remaining) {
                Ok(a) => {
                    let done = Some(&a.job) == self.submitted.as_ref();
                    latest = Some(a);
                    if done {
                        return latest;
                    }
                }
                Err(_) => return latest,
            }
        }
    }
}

impl Drop for Analyzer {
    fn drop(&mut self) {
        // Closing the job channel ends the worker loop once it has finished its current job;
        // results are drained meanwhile so that it never waits on a full result channel.
        let (closed, _) = crossbeam_channel::bounded(0);
        self.jobs = closed;
        if let Some(handle) = self.handle.take() {
            while !handle.is_finished() {
                let _ = self.results.recv_timeout(Duration::from_millis(10));
            }
            let _ = handle.join();
        }
    }
}

fn worker(jobs: Receiver<Job>, results: Sender<Analyzed>, debounce: Duration, repaint: Repaint) {
    let mut computer = Computer::default();
    let mut last: Option<Job> = None;
    while let Ok(mut job) = jobs.recv() {
        // Coalesce: keep taking newer jobs while they keep coming within the delay.
        loop {
            while let Ok(newer) = jobs.try_recv() {
                job = newer;
            }
            let cheap = last
                .as_ref()
                .is_some_and(|l| l.input.grammar_part() == job.input.grammar_part());
            if cheap {
                break;
            }
            match jobs.recv_timeout(debounce) {
                Ok(newer) => job = newer,
                Err(_) => break,
            }
        }
        let analyzed = compute(&mut computer, &job);
        last = Some(job);
        if results.send(analyzed).is_err() {
            return;
        }
        repaint();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workspace::Workspace;

    fn input() -> AnalysisInput {
        AnalysisInput::from_workspace(&Workspace::default(), usize::MAX)
    }

    #[test]
    fn the_analyzer_thread_answers() {
        let mut an = Analyzer::start(Duration::from_millis(10), crate::no_repaint());
        assert!(an.submit(Job {
            input: input(),
            ..Job::default()
        }));
        let a = an.wait_settled(Duration::from_secs(30)).unwrap();
        assert!(a.analysis.grammar.is_some());
        assert!(a.pasted.is_none() && a.preview.is_none());
    }

    #[test]
    fn a_pasted_output_and_the_prompt_preview_come_back_with_the_analysis() {
        let mut an = Analyzer::start(Duration::from_millis(10), crate::no_repaint());
        let mut setup = RunState::default().setup(&Analysis::default());
        setup.user = input().prompt;
        setup.style = crate::run::PromptStyle::Raw;
        assert!(an.submit(Job {
            input: input(),
            pasted: "not a call".into(),
            preview: Some(PreviewInput { setup, model: None }),
        }));
        let a = an.wait_settled(Duration::from_secs(30)).unwrap();
        let pasted = a.pasted.expect("the pasted output is checked");
        assert!(!pasted.grammar_accepts, "{}", pasted.grammar);
        let preview = a.preview.expect("the preview is built").unwrap();
        assert_eq!(preview.text, input().prompt);
    }
}
