//! A conversation driven through the app's run controller: each assistant turn is a generation
//! run on the worker (a raw prompt, the turn's grammar), so its tokens, candidates and stacks
//! show in the Generation pane like any run's; a blocked call's retry starts by itself.

use toolrail_llm::bench::RunEnd;
use toolrail_llm::bench_calls::Answer;
use toolrail_llm::worker::EngineKind;

use super::{Conversation, ConversationError, Next};
use crate::run::{PromptStyle, RunId, RunPhase, RunState, StartMode};

/// A conversation and the run that is answering its current turn, if any.
#[derive(Debug)]
pub struct ConversationSession {
    /// The conversation.
    pub conversation: Conversation,
    pending: Option<RunId>,
    /// The run of each assistant turn, in order (for showing a turn's tokens).
    pub runs: Vec<RunId>,
}

impl ConversationSession {
    /// A session over `conversation`.
    pub fn new(conversation: Conversation) -> ConversationSession {
        ConversationSession {
            conversation,
            pending: None,
            runs: Vec::new(),
        }
    }

    /// True while a run is answering.
    pub fn is_waiting(&self) -> bool {
        self.pending.is_some()
    }

    /// Starts the run that answers the current turn (the conversation must wait for the model).
    /// `base` gives the sampling, threads and candidate count.
    pub fn ask_model(
        &mut self,
        run: &mut RunState,
        analysis: &crate::analysis::Analysis,
    ) -> Result<RunId, String> {
        let request = self.conversation.request().map_err(|e| e.to_string())?;
        let mut setup = run.setup(analysis);
        setup.style = PromptStyle::Raw;
        setup.system = String::new();
        setup.user = request.prompt;
        setup.engine = if request.grammar.is_some() {
            match setup.engine {
                EngineKind::None => EngineKind::Toolrail,
                engine => engine,
            }
        } else {
            EngineKind::None
        };
        let mut inputs = RunState::inputs(analysis);
        inputs.grammar = request.grammar;
        inputs.format = self.conversation.settings().format;
        // A conversation builds its own prompt and grammar per turn: the llama.cpp template
        // source (one request's prompt and grammar) does not apply to it.
        inputs.template = None;
        let id = run
            .controller
            .start(&setup, &inputs, StartMode::Run)
            .map_err(|e| e.to_string())?;
        run.shown = Some(id);
        self.pending = Some(id);
        self.runs.push(id);
        Ok(id)
    }

    /// Called once per frame: when the answering run has ended, its output is the turn's
    /// answer; a blocked call's retry is started at once. Returns an error to show, if any.
    pub fn poll(
        &mut self,
        run: &mut RunState,
        analysis: &crate::analysis::Analysis,
    ) -> Option<String> {
        let id = self.pending?;
        let finished = run.controller.run(id)?;
        if finished.phase != RunPhase::Finished {
            return None;
        }
        self.pending = None;
        let Some(finish) = &finished.finish else {
            return Some(format!("run {id} ended without a result"));
        };
        let answer = Answer {
            output: finish.output.clone(),
            tokens: finished.tokens.len() as u32,
            end: match finish.stop {
                toolrail_llm::record::Stop::EndOfGeneration => Some(RunEnd::EndOfGeneration),
                toolrail_llm::record::Stop::MaxTokens => Some(RunEnd::MaxTokens),
                _ => None,
            },
            budget_replaced: 0,
        };
        if let Err(e) = self.conversation.accept(answer, false) {
            return Some(e.to_string());
        }
        if self.conversation.next() == Next::Model {
            return self.ask_model(run, analysis).err();
        }
        None
    }

    /// Adds a user message or the awaited tool's result, then asks the model.
    pub fn send(
        &mut self,
        text: &str,
        run: &mut RunState,
        analysis: &crate::analysis::Analysis,
    ) -> Result<(), String> {
        let added: Result<(), ConversationError> = match self.conversation.next() {
            Next::ToolResult { .. } => self.conversation.tool_result(text),
            _ => self.conversation.user(text),
        };
        added.map_err(|e| e.to_string())?;
        self.ask_model(run, analysis).map(|_| ())
    }
}
