//! [`ServerWorker`]: runs a [`RunRequest`] on a llama-server and reports the in-process
//! worker's events, so the CLI, the app and transcripts treat both alike.
//!
//! With the model's vocabulary loaded locally (the same GGUF, or any GGUF with the same
//! tokenizer), the prompt is sent as token ids (exactly what toolrail tokenized) and toolrail's
//! recognizer follows every token the server sends: each record has the stacks after it, how
//! many tokens toolrail's mask allowed, and which of the server's candidates the grammar masks.
//! A token the grammar forbids is the live check's finding: it is flagged on the record and
//! the recognizer stops following. The server's candidates are its raw probabilities before any
//! sampler; "after the mask" is those candidates that toolrail's mask allows, renormalised
//! (an approximation over the top candidates: the server does not report its masked list).
//!
//! After a `/completion` stream ends, two follow-ups complete the records (sent as
//! [`Event::Amended`] before `Done`):
//! - with [`ServerOptions::post_sampling`], the same request again with `post_sampling_probs`:
//!   each token's candidates after the server's sampling chain ([`TokenRecord::sampled`]). The
//!   server reports either list per request, never both, so it takes two; the seed and
//!   `cache_prompt: false` make the second run take the same tokens (checked token by token).
//! - the grammar the server echoes as enforced (its own conversion for `json_schema`, or a
//!   grammar sent instead of the run's) is replayed through toolrail's engine over the same
//!   tokens, and every returned candidate that one grammar allows and the other forbids is a
//!   [`Disagreement`] on the record. When the echo is byte for byte the grammar toolrail
//!   follows, the allowed sets are equal by construction and no replay is needed.
//!
//! `tools` requests go to `/v1/chat/completions`: the server renders its chat template and
//! builds its own tool-call grammar; toolrail records the tokens and candidates and reports the
//! calls the server parsed ([`Event::ServerCalls`]) for toolrail's validator.
//!
//! Not possible on a server (the grammar state lives in the server's slot): Step, Pause and
//! Force; they are answered with an error event. Cancel closes the connection.

use std::ops::ControlFlow;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use crossbeam_channel::{Receiver, Sender, TryRecvError};

use serde_json::{Value, json};

use super::api::{
    ChatBuildFields, ChatMessage, ChatRequest, CompletionRequest, Prompt, SamplingFields, Timings,
    TokenProbs, TopProb,
};
use super::{ServerClient, StreamEnd};
use crate::Model;
use crate::record::{Candidate, Disagreement, Stop, TokenRecord, Totals};
use crate::settings::{Backend, LogitSettings, ServerFlags};
use crate::template::{ChatTemplates, TemplateRequest, TemplateResult, ToolChoice};
use crate::worker::{Command, EngineKind, Event, Handle, Notify, RunEvent, RunId, RunRequest};
use toolrail_engine::{Engine, MaskEngine, State, TokenMask};
use toolrail_gbnf::{Grammar, TokenVocabulary};

/// What a server run asks the server for.
#[derive(Clone, Debug, PartialEq)]
pub enum RequestKind {
    /// `/completion` with the run's GBNF (`grammar`).
    Grammar,
    /// `/completion` with this JSON Schema (`json_schema`): the server converts it with its own
    /// converter; toolrail follows the run's grammar (toolrail's conversion of the schema).
    JsonSchema(Value),
    /// `/v1/chat/completions` with these OpenAI-shaped tools (`{"type": "function",
    /// "function": {...}}`) and `tool_choice: required`: the server renders its chat template
    /// around `user` and builds its own tool-call grammar.
    Tools {
        /// The tools.
        tools: Vec<Value>,
        /// The user's message.
        user: String,
    },
}

/// Tokens read past a run's `n_predict` before a server that ignores it is cut off (a server
/// may send a few more, e.g. the end of a stop string).
const PAST_N_PREDICT: u32 = 16;

/// How a [`ServerWorker`] runs its requests.
#[derive(Clone, Debug, PartialEq)]
pub struct ServerOptions {
    /// What is sent.
    pub request: RequestKind,
    /// A grammar sent instead of the run's own (which toolrail still follows): e.g. to see
    /// where a server's grammar lets through what the intended one forbids.
    pub sent_grammar: Option<String>,
    /// Ask again with `post_sampling_probs` for each token's candidates after the server's
    /// sampling chain (`/completion` requests; a second request).
    pub post_sampling: bool,
    /// The flags the server was started with, as the user states them (it does not report
    /// flash attention, batch sizes or cache types): recorded with each run's settings.
    pub flags: ServerFlags,
}

impl Default for ServerOptions {
    fn default() -> Self {
        ServerOptions {
            request: RequestKind::Grammar,
            sent_grammar: None,
            post_sampling: true,
            flags: ServerFlags::default(),
        }
    }
}

/// A handle on a thread that runs requests on a llama-server.
pub struct ServerWorker {
    handle: Handle,
    /// Options for the next run, taken by the thread when that run starts.
    next_options: Arc<Mutex<Option<ServerOptions>>>,
}

impl std::fmt::Debug for ServerWorker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerWorker").finish_non_exhaustive()
    }
}

impl ServerWorker {
    /// Starts the thread with the default options (`grammar` requests, candidates after the
    /// sampling chain). `vocab` is a local copy of the model (its vocabulary drives token-id
    /// prompts, pieces and toolrail's live check); without it the prompt is sent as text and
    /// records carry only what the server reports.
    pub fn spawn(client: ServerClient, vocab: Option<Model>, notify: Notify) -> ServerWorker {
        Self::spawn_with(client, vocab, notify, ServerOptions::default())
    }

    /// Like [`ServerWorker::spawn`], but every run sends `sent` to the server as its grammar
    /// while toolrail checks the tokens against the run's own grammar.
    pub fn spawn_sending(
        client: ServerClient,
        vocab: Option<Model>,
        notify: Notify,
        sent: Option<String>,
    ) -> ServerWorker {
        let options = ServerOptions {
            sent_grammar: sent,
            ..ServerOptions::default()
        };
        Self::spawn_with(client, vocab, notify, options)
    }

    /// Starts the thread with these options.
    pub fn spawn_with(
        client: ServerClient,
        vocab: Option<Model>,
        notify: Notify,
        options: ServerOptions,
    ) -> ServerWorker {
        let next_options: Arc<Mutex<Option<ServerOptions>>> = Arc::new(Mutex::new(None));
        let pending = Arc::clone(&next_options);
        let handle = Handle::spawn("toolrail-server", move |commands, events| {
            let masks = vocab
                .as_ref()
                .map(|m| MaskEngine::new(m.shared_token_table()));
            let mut state = ServerRunner {
                client,
                options,
                vocab,
                masks,
                commands,
                events,
                notify,
                pending,
                mirror: None,
            };
            state.serve();
        });
        ServerWorker {
            handle,
            next_options,
        }
    }

    /// Sets the options the runs started from now on use (what is asked of the server: the
    /// app picks `grammar`, `json_schema` or `tools` per run).
    pub fn set_options(&self, options: ServerOptions) {
        if let Ok(mut next) = self.next_options.lock() {
            *next = Some(options);
        }
    }

    /// Sends a command (blocks only if 64 commands are already queued).
    pub fn send(&self, command: Command) -> bool {
        self.handle.send(command)
    }

    /// The event stream.
    pub fn events(&self) -> &Receiver<RunEvent> {
        self.handle.events()
    }
}

struct ServerRunner {
    client: ServerClient,
    options: ServerOptions,
    vocab: Option<Model>,
    masks: Option<MaskEngine>,
    commands: Receiver<Command>,
    events: Sender<RunEvent>,
    notify: Notify,
    pending: Arc<Mutex<Option<ServerOptions>>>,
    /// The server's chat template loaded with the local vocabulary (the template text it was
    /// loaded from), to rebuild a `tools` request as the server builds it.
    mirror: Option<(String, ChatTemplates)>,
}

/// What a command seen mid-stream means for the stream.
enum Interrupt {
    None,
    Cancel,
    Shutdown,
}

/// One run's progress while its tokens stream in.
struct Progress {
    run: RunId,
    output: Vec<u8>,
    totals: Totals,
    last_predicted_ms: f64,
    announced: bool,
    /// End-of-generation tokens the server streamed (not records).
    eog_streamed: u64,
    shutdown: bool,
    failure: Option<String>,
    /// toolrail's recognizer on the run's grammar, until it forbids a token.
    track: Option<(Engine, State)>,
    /// Every record sent, to amend after the stream.
    records: Vec<TokenRecord>,
    /// toolrail's mask at each record's step (None once the recognizer stopped following).
    masks: Vec<Option<TokenMask>>,
    /// What the server computes with, as far as it is known (sent with the run's start).
    settings: LogitSettings,
    /// The run's token limit (`n_predict`).
    max_tokens: u32,
}

impl Progress {
    fn new(
        run: RunId,
        track: Option<(Engine, State)>,
        settings: LogitSettings,
        max_tokens: u32,
    ) -> Progress {
        Progress {
            settings,
            max_tokens,
            run,
            output: Vec::new(),
            totals: Totals::default(),
            last_predicted_ms: 0.0,
            announced: false,
            eog_streamed: 0,
            shutdown: false,
            failure: None,
            track,
            records: Vec::new(),
            masks: Vec::new(),
        }
    }

    /// True when toolrail followed the grammar from the first token.
    fn followed(&self) -> bool {
        self.masks.first().is_some_and(Option::is_some)
    }
}

impl ServerRunner {
    /// What the server computes with: `/props` (context, build), the stated flags, and
    /// llama-server's defaults for the rest.
    fn settings(&self) -> LogitSettings {
        let props = self.client.props().ok();
        let build = props.as_ref().and_then(|p| p.build_info.clone());
        let context = props
            .as_ref()
            .and_then(|p| p.n_ctx)
            .and_then(|n| u32::try_from(n).ok());
        let engine = Backend::Server {
            url: self.client.url().to_owned(),
        };
        self.options.flags.server_settings(
            engine,
            context,
            build,
            None,
            self.vocab.as_ref().map(Model::makes_server_checkpoints),
        )
    }

    fn emit(&self, run: RunId, event: Event) {
        let _ = self.events.send(RunEvent { run, event });
        (self.notify)();
    }

    fn serve(&mut self) {
        while let Ok(command) = self.commands.recv() {
            match command {
                Command::Shutdown => return,
                Command::Start(request) if self.run(&request) => return,
                _ => {}
            }
        }
    }

    /// Commands that arrived while streaming: cancel and shutdown stop the stream; step, pause
    /// and force are refused (the server's slot holds the grammar state).
    fn poll_commands(&self, run: RunId) -> Interrupt {
        loop {
            match self.commands.try_recv() {
                Ok(Command::Cancel) => return Interrupt::Cancel,
                Ok(Command::Shutdown) | Err(TryRecvError::Disconnected) => {
                    return Interrupt::Shutdown;
                }
                Ok(Command::Start(_)) => self.emit(
                    run,
                    Event::Error("a run is already streaming from the server".into()),
                ),
                Ok(Command::Step | Command::Pause | Command::Force(_)) => self.emit(
                    run,
                    Event::Error(
                        "step, pause and force are not possible on a server: its slot holds the \
                         grammar state (run the model in-process to step through tokens)"
                            .into(),
                    ),
                ),
                Ok(Command::Continue) => {}
                Err(TryRecvError::Empty) => return Interrupt::None,
            }
        }
    }

    /// Checks the commands; Break when the stream must stop.
    fn interrupted(&self, progress: &mut Progress) -> ControlFlow<()> {
        match self.poll_commands(progress.run) {
            Interrupt::None => ControlFlow::Continue(()),
            Interrupt::Cancel => ControlFlow::Break(()),
            Interrupt::Shutdown => {
                progress.shutdown = true;
                ControlFlow::Break(())
            }
        }
    }

    /// Runs one request; returns true if the worker must shut down.
    fn run(&mut self, request: &RunRequest) -> bool {
        if let Some(options) = self.pending.lock().ok().and_then(|mut next| next.take()) {
            self.options = options;
        }
        if !request.prefix.is_empty() {
            self.done(
                request.id,
                error(
                    "a branch (tokens taken before generating) needs the in-process engine: \
                     a llama-server cannot be given them"
                        .into(),
                ),
                Totals::default(),
                Vec::new(),
            );
            return false;
        }
        let grammar = request
            .grammar
            .clone()
            .filter(|_| request.engine != EngineKind::None);
        let mut track: Option<(Engine, State)> = None;
        if let (Some(text), Some(model)) = (&grammar, &self.vocab) {
            match Grammar::parse_with(text, "root", Some(model as &dyn TokenVocabulary)) {
                Ok(g) => {
                    let engine = Engine::new(Arc::new(g));
                    let state = engine.initial();
                    track = Some((engine, state));
                    // Cached masks belong to the previous run's engine (keyed by its sets).
                    if let Some(masks) = self.masks.as_mut() {
                        masks.clear_cache();
                    }
                }
                Err(e) => {
                    self.done(
                        request.id,
                        error(format!("the grammar: {e}")),
                        Totals::default(),
                        Vec::new(),
                    );
                    return false;
                }
            }
        }
        let started = Instant::now();
        let mut progress = Progress::new(
            request.id,
            track,
            self.settings(),
            request.sampling.max_tokens,
        );
        let stop = match self.options.request.clone() {
            RequestKind::Tools { tools, user } => {
                self.run_chat(request, &tools, &user, &mut progress)
            }
            kind => self.run_completion(request, grammar, &kind, None, &mut progress),
        };
        let totals = &mut progress.totals;
        let seconds = started.elapsed().as_secs_f64();
        totals.tokens_per_s = if totals.decode_ms > 0.0 {
            f64::from(totals.tokens) * 1e3 / totals.decode_ms
        } else if seconds > 0.0 {
            f64::from(totals.tokens) / seconds
        } else {
            0.0
        };
        let output = std::mem::take(&mut progress.output);
        self.done(request.id, stop, progress.totals.clone(), output);
        progress.shutdown
    }

    /// The `/completion` body of a run.
    fn completion_body(
        &self,
        request: &RunRequest,
        grammar: Option<String>,
        kind: &RequestKind,
        chat: Option<ChatBuildFields>,
    ) -> CompletionRequest {
        let prompt = match &self.vocab {
            Some(model) => Prompt::Tokens(model.tokenize(&request.prompt, true, true)),
            None => Prompt::Text(request.prompt.clone()),
        };
        let s = &request.sampling;
        let (grammar, json_schema) = match kind {
            RequestKind::JsonSchema(schema) => {
                (self.options.sent_grammar.clone(), Some(schema.clone()))
            }
            _ => (self.options.sent_grammar.clone().or(grammar), None),
        };
        CompletionRequest {
            prompt,
            grammar,
            json_schema,
            n_predict: s.max_tokens,
            post_sampling_probs: false,
            sampling: SamplingFields::new(s, request.show.max(1) as u32),
            chat,
        }
    }

    /// A `grammar` or `json_schema` run on `/completion`, then its follow-ups.
    fn run_completion(
        &mut self,
        request: &RunRequest,
        grammar: Option<String>,
        kind: &RequestKind,
        chat: Option<ChatBuildFields>,
        progress: &mut Progress,
    ) -> Stop {
        let body = self.completion_body(request, grammar.clone(), kind, chat);
        let client = self.client.clone();
        let result = client.stream_completion(&body, |chunk| {
            self.interrupted(progress)?;
            let Some(token) = chunk.token() else {
                return ControlFlow::Continue(());
            };
            let timings = chunk.timings.clone().unwrap_or_default();
            self.on_token(
                progress,
                token,
                chunk.completion_probabilities.first(),
                &chunk.content,
                &timings,
                chunk.tokens_evaluated,
            )
        });
        if let Some(message) = progress.failure.take() {
            return error(message);
        }
        let last = match result {
            Ok(StreamEnd::Cancelled) => return Stop::Cancelled,
            Err(e) => return error(e.to_string()),
            Ok(StreamEnd::Final(last)) => last,
        };
        if let Some(t) = &last.timings {
            progress.totals.decode_ms = t.predicted_ms.unwrap_or(progress.totals.decode_ms);
        }
        progress.totals.server_tokens = last.tokens_predicted;
        // the end-of-generation token is counted, streamed or not
        let eog = if last.stop_type.as_deref() == Some("eos") {
            progress.eog_streamed.max(1)
        } else {
            progress.eog_streamed
        };
        if let Some(n) = last.tokens_predicted
            && n > u64::from(progress.totals.tokens) + eog
        {
            // llama-server streams no chunk for a token that ends inside a UTF-8
            // character; its bytes come with the next chunk
            self.emit(
                request.id,
                Event::Error(format!(
                    "the server generated {n} tokens but streamed {}: tokens ending inside a \
                     UTF-8 character are not streamed on their own",
                    u64::from(progress.totals.tokens) + eog
                )),
            );
        }
        let stop = match last.stop_type.as_deref() {
            Some("eos") | Some("word") => Stop::EndOfGeneration,
            Some("limit") => Stop::MaxTokens,
            other => error(format!(
                "the server stopped for an unknown reason ({})",
                other.unwrap_or("none given")
            )),
        };
        let mut amended = vec![false; progress.records.len()];
        if self.options.post_sampling && !progress.records.is_empty() {
            let mut again = body.clone();
            again.post_sampling_probs = true;
            if self.sampled_candidates(&again, progress, &mut amended) {
                return Stop::Cancelled;
            }
        }
        if let Some(enforced) = last.grammar()
            && progress.followed()
            && grammar.as_deref() != Some(enforced)
        {
            self.compare_grammars(enforced, progress, &mut amended);
        }
        for (record, changed) in progress.records.iter().zip(amended) {
            if changed {
                self.emit(progress.run, Event::Amended(Box::new(record.clone())));
            }
        }
        stop
    }

    /// Runs `again` (the same request with `post_sampling_probs`) and puts each token's
    /// candidates after the sampling chain on its record. True when the run was cancelled.
    fn sampled_candidates(
        &self,
        again: &CompletionRequest,
        progress: &mut Progress,
        amended: &mut [bool],
    ) -> bool {
        let mut k = 0usize;
        let mut diverged: Option<String> = None;
        let mut cancelled = false;
        let client = self.client.clone();
        let result = client.stream_completion(again, |chunk| {
            if self.interrupted(progress).is_break() {
                cancelled = true;
                return ControlFlow::Break(());
            }
            let Some(token) = chunk.token() else {
                return ControlFlow::Continue(());
            };
            if self.vocab.as_ref().is_some_and(|m| m.is_eog(token)) {
                return ControlFlow::Continue(());
            }
            let Some(record) = progress.records.get_mut(k) else {
                return ControlFlow::Break(());
            };
            if record.id != token {
                diverged = Some(format!(
                    "the request for candidates after the sampling chain took token {token} at \
                     step {k} where the run took {}: those candidates stop there",
                    record.id
                ));
                return ControlFlow::Break(());
            }
            let mask = progress.masks.get(k).and_then(Option::as_ref);
            if let Some(p) = chunk.completion_probabilities.first() {
                record.sampled = candidates(&p.top_probs, |c| c.prob, mask);
                amended[k] = true;
            }
            k += 1;
            ControlFlow::Continue(())
        });
        if let Some(message) = diverged {
            self.emit(progress.run, Event::Error(message));
        }
        if let Err(e) = result {
            self.emit(
                progress.run,
                Event::Error(format!(
                    "the candidates after the sampling chain could not be read: {e}"
                )),
            );
        }
        cancelled
    }

    /// Replays the run's tokens under the grammar the server enforced and records, at each
    /// step, the returned candidates on which it and toolrail's grammar disagree.
    fn compare_grammars(&mut self, enforced: &str, progress: &mut Progress, amended: &mut [bool]) {
        let (Some(model), Some(masks)) = (&self.vocab, self.masks.as_mut()) else {
            return;
        };
        let mut engine = match Grammar::parse_with(
            enforced,
            "root",
            Some(model as &dyn TokenVocabulary),
        ) {
            Ok(g) => Engine::new(Arc::new(g)),
            Err(e) => {
                let message = format!(
                    "live check: the grammar the server enforced does not parse in toolrail: {e}"
                );
                let _ = self.events.send(RunEvent {
                    run: progress.run,
                    event: Event::Error(message),
                });
                (self.notify)();
                return;
            }
        };
        // The mask cache is keyed by the stack sets of one engine: start this grammar's replay
        // empty, and leave it empty for the next run's engine.
        masks.clear_cache();
        let mut state = engine.initial();
        let mut problem: Option<String> = None;
        for (k, record) in progress.records.iter_mut().enumerate() {
            let Some(Some(ours)) = progress.masks.get(k) else {
                break;
            };
            let theirs = match masks.mask(&mut engine, state) {
                Ok(m) => m,
                Err(e) => {
                    problem = Some(format!(
                        "live check: the mask of the server's grammar at step {k}: {e}"
                    ));
                    break;
                }
            };
            let mut seen: Vec<u32> = Vec::new();
            for c in record.before.iter().chain(&record.sampled) {
                if seen.contains(&c.id) {
                    continue;
                }
                seen.push(c.id);
                let server_allows = theirs.contains(c.id);
                if server_allows != ours.contains(c.id) {
                    record.disagreements.push(Disagreement {
                        id: c.id,
                        piece: c.piece.clone(),
                        server_allows,
                    });
                    amended[k] = true;
                }
            }
            let piece = model.piece(record.id);
            match engine.accept_token(state, record.id, &piece) {
                Some(next) => state = next,
                None => {
                    problem = Some(format!(
                        "live check: toolrail's engine refuses token {} at step {k} under the \
                         grammar the server enforced (the server took it)",
                        record.id
                    ));
                    break;
                }
            }
        }
        masks.clear_cache();
        if let Some(message) = problem {
            self.emit(progress.run, Event::Error(message));
        }
    }

    /// A `tools` run. The chat endpoint streams a chunk only when its parsed message changes,
    /// so the tokens of tool-call text never arrive one by one; when the server's own build of
    /// the request (its `__verbose` block) is the one toolrail makes from the server's template
    /// with the local vocabulary, the run is sent to `/completion` with that build, as the chat
    /// endpoint hands it to its completion code: the same generation, every token streamed,
    /// and the output parsed by llama.cpp's parser as the server parses it. Otherwise it is
    /// streamed from `/v1/chat/completions`, and the run says how many tokens did not arrive.
    fn run_chat(
        &mut self,
        request: &RunRequest,
        tools: &[Value],
        user: &str,
        progress: &mut Progress,
    ) -> Stop {
        let s = &request.sampling;
        let body = ChatRequest {
            messages: vec![ChatMessage {
                role: "user".into(),
                content: user.to_owned(),
            }],
            tools: tools.to_vec(),
            tool_choice: ToolChoice::Required,
            grammar: self.options.sent_grammar.clone(),
            max_tokens: s.max_tokens,
            sampling: SamplingFields::new(s, request.show.max(1) as u32),
            verbose: false,
        };
        let fallback = match self.mirror_build(&body) {
            Ok(built) => return self.run_chat_as_completion(request, &built, &body, progress),
            Err(reason) => reason,
        };
        let stop = self.run_chat_stream(&body, tools, progress);
        if let Some(generated) = progress.totals.server_tokens {
            let streamed = u64::from(progress.totals.tokens) + progress.eog_streamed;
            if generated > streamed {
                self.emit(
                    progress.run,
                    Event::Error(format!(
                        "the server generated {generated} tokens, {streamed} arrived: its chat \
                         endpoint streams no chunk for a token that leaves its parsed message \
                         unchanged (tool-call text); toolrail could not send the request as the \
                         server builds it, where every token streams: {fallback}"
                    )),
                );
            }
        }
        stop
    }

    /// What llama.cpp builds for `body` from the server's own chat template with the local
    /// vocabulary, when the server reports the same build (prompt up to its BOS text, grammar,
    /// laziness, triggers, preserved tokens); otherwise why not, in words.
    fn mirror_build(&mut self, body: &ChatRequest) -> Result<TemplateResult, String> {
        if body.grammar.is_some() {
            return Err("a grammar is sent with the tools".into());
        }
        let model = (self.vocab.as_ref()).ok_or("no local copy of the model's vocabulary")?;
        let props =
            (self.client.props()).map_err(|e| format!("reading the server's props: {e}"))?;
        let template = (props.chat_template.filter(|t| !t.is_empty()))
            .ok_or("the server reports no chat template")?;
        if self
            .mirror
            .as_ref()
            .is_none_or(|(text, _)| *text != template)
        {
            self.mirror = None;
            let loaded = ChatTemplates::from_gguf(&model.info().path, Some(&template))
                .map_err(|e| format!("toolrail cannot load the server's template: {e}"))?;
            self.mirror = Some((template, loaded));
        }
        let (_, templates) = self.mirror.as_ref().ok_or("the template did not load")?;
        let local = TemplateRequest {
            messages: body
                .messages
                .iter()
                .map(|m| json!({"role": m.role, "content": m.content}))
                .collect(),
            tools: body.tools.clone(),
            tool_choice: body.tool_choice.clone(),
            ..TemplateRequest::default()
        };
        let built = (templates.apply(&local))
            .map_err(|e| format!("toolrail's build of the request fails: {e}"))?;
        let server = (self.client.chat_build(body))
            .map_err(|e| format!("asking the server what it builds: {e}"))?;
        let prompt_same = server.prompt == built.prompt
            || (server.prompt.strip_suffix(built.prompt.as_str()))
                .is_some_and(|bos| bos.len() <= 16);
        let ours: Vec<&str> = (built.sampler.iter())
            .flat_map(|sampler| sampler.triggers.iter().map(|t| t.value.as_str()))
            .collect();
        let theirs: Vec<&str> = (server.grammar_triggers.iter())
            .filter_map(|t| t.get("value").and_then(Value::as_str))
            .collect();
        let differs = [
            ("prompt", !prompt_same),
            ("grammar", server.grammar != built.grammar),
            ("lazy flag", server.grammar_lazy != built.grammar_lazy),
            ("triggers", ours != theirs),
            ("preserved tokens", !Self::same_preserved(&server, &built)),
        ];
        let differing: Vec<&str> = (differs.iter())
            .filter(|(_, differs)| *differs)
            .map(|(what, _)| *what)
            .collect();
        if differing.is_empty() {
            Ok(built)
        } else {
            Err(format!(
                "the server's build differs from toolrail's ({}): another llama.cpp build or \
                 a vocabulary that is not the server's model's",
                differing.join(", ")
            ))
        }
    }

    /// A `tools` run sent to `/completion` with the build the chat endpoint makes (`built`):
    /// every token streams; the output is parsed by llama.cpp's parser for the format.
    fn run_chat_as_completion(
        &mut self,
        request: &RunRequest,
        built: &TemplateResult,
        body: &ChatRequest,
        progress: &mut Progress,
    ) -> Stop {
        let mut sent = request.clone();
        sent.prompt = built.prompt.clone();
        let grammar = (!built.grammar.is_empty()).then(|| built.grammar.clone());
        let fields = ChatBuildFields::from_template(built);
        let stop = self.run_completion(
            &sent,
            grammar,
            &RequestKind::Grammar,
            Some(fields),
            progress,
        );
        if !matches!(stop, Stop::EndOfGeneration | Stop::MaxTokens) {
            return stop;
        }
        let text = String::from_utf8_lossy(&progress.output).into_owned();
        let calls: Vec<Value> = match built.parse(&text, false) {
            Ok(message) => (message.tool_calls.iter())
                .map(|c| json!({"name": c.name, "arguments": c.arguments}))
                .collect(),
            Err(e) => {
                self.emit(
                    progress.run,
                    Event::Error(format!(
                        "the server's parser refuses the output (its chat endpoint answers HTTP \
                         500 for it): {e}"
                    )),
                );
                Vec::new()
            }
        };
        if calls.is_empty() {
            let client = self.client.clone();
            self.explain_no_call(progress.run, &client, body, &body.tools);
        }
        self.emit(progress.run, Event::ServerCalls(calls));
        stop
    }

    /// A `tools` run streamed from `/v1/chat/completions`.
    fn run_chat_stream(
        &mut self,
        body: &ChatRequest,
        tools: &[Value],
        progress: &mut Progress,
    ) -> Stop {
        // (name, arguments text) per call index
        let mut calls: Vec<(String, String)> = Vec::new();
        let client = self.client.clone();
        let result = client.stream_chat(body, |chunk| {
            self.interrupted(progress)?;
            if let Some(n) = chunk.timings.as_ref().and_then(|t| t.predicted_n) {
                progress.totals.server_tokens = Some(n as u64);
            }
            let Some(choice) = chunk.choices.first() else {
                return ControlFlow::Continue(());
            };
            for piece in &choice.delta.tool_calls {
                if piece.index >= calls.len() {
                    if piece.index > 64 {
                        progress.failure = Some(format!(
                            "the server sent tool call {}: too many",
                            piece.index
                        ));
                        return ControlFlow::Break(());
                    }
                    calls.resize(piece.index + 1, (String::new(), String::new()));
                }
                if let Some(f) = &piece.function {
                    let call = &mut calls[piece.index];
                    call.0.push_str(f.name.as_deref().unwrap_or_default());
                    call.1.push_str(f.arguments.as_deref().unwrap_or_default());
                }
            }
            let timings = chunk.timings.clone().unwrap_or_default();
            let content = choice.delta.content.as_deref().unwrap_or_default();
            for probs in choice.logprobs.iter().flat_map(|l| &l.content) {
                let Ok(token) = u32::try_from(probs.id) else {
                    continue;
                };
                self.on_token(progress, token, Some(probs), content, &timings, None)?;
            }
            ControlFlow::Continue(())
        });
        if let Some(message) = progress.failure.take() {
            return error(message);
        }
        let reason = match result {
            Ok(None) => return Stop::Cancelled,
            Err(e) => return error(e.to_string()),
            Ok(Some(reason)) => reason,
        };
        let parsed: Vec<Value> = calls
            .into_iter()
            .map(|(name, arguments)| json!({"name": name, "arguments": arguments}))
            .collect();
        if parsed.is_empty() {
            self.explain_no_call(progress.run, &client, body, tools);
        }
        self.emit(progress.run, Event::ServerCalls(parsed));
        match reason.as_str() {
            "stop" | "tool_calls" => Stop::EndOfGeneration,
            "length" => Stop::MaxTokens,
            other => error(format!(
                "the server stopped for an unknown reason ({other})"
            )),
        }
    }

    /// Whether the server lists the same preserved tokens as `built` (as texts, or as the ids its
    /// sampler holds).
    fn same_preserved(server: &super::ChatBuild, built: &TemplateResult) -> bool {
        if !server.preserved_tokens.is_empty() {
            return server.preserved_tokens == built.preserved_tokens;
        }
        let mut ours: Vec<i64> = (built.sampler.iter())
            .flat_map(|s| s.preserved_token_ids.iter().map(|&id| i64::from(id)))
            .collect();
        ours.sort_unstable();
        ours.dedup();
        let mut theirs = server.preserved_token_ids.clone();
        theirs.sort_unstable();
        ours == theirs
    }

    /// No call was parsed: asks the server what it built for the request and, when that
    /// explains it (the tools not in its prompt, no tool-call grammar), says so as an error event
    /// on the run; otherwise says that the server built both and the model wrote no call.
    fn explain_no_call(
        &self,
        run: RunId,
        client: &ServerClient,
        body: &ChatRequest,
        tools: &[Value],
    ) {
        let names: Vec<&str> = tools
            .iter()
            .filter_map(|t| t.pointer("/function/name").and_then(Value::as_str))
            .collect();
        let message = match client.chat_build(body) {
            Ok(build) => match build.explain_no_call(&names) {
                Some(reason) => format!("no tool call parsed: {reason}"),
                None => format!(
                    "no tool call parsed: the server put the tools in the prompt and built a \
                     tool-call grammar ({}{}), but its parser found no call in the output",
                    if build.grammar_lazy { "lazy, " } else { "" },
                    build.chat_format.as_deref().unwrap_or("unknown format")
                ),
            },
            Err(e) => format!("no tool call parsed; asking the server what it built failed: {e}"),
        };
        self.emit(run, Event::Error(message));
    }

    /// One streamed token: the run's start, end of generation, or a record sent on.
    fn on_token(
        &mut self,
        progress: &mut Progress,
        token: u32,
        probs: Option<&TokenProbs>,
        content: &str,
        timings: &Timings,
        tokens_evaluated: Option<u64>,
    ) -> ControlFlow<()> {
        if !progress.announced {
            progress.announced = true;
            self.emit(
                progress.run,
                Event::Started {
                    prompt_tokens: tokens_evaluated
                        .or(timings.prompt_n.map(|n| n as u64))
                        .unwrap_or(0) as usize,
                    prompt_ms: timings.prompt_ms.unwrap_or(0.0),
                    reused: timings.cache_n.map_or(0, |n| n as usize),
                    settings: Box::new(LogitSettings {
                        prompt_cached: timings.cache_n.map(|n| n as u32),
                        ..progress.settings.clone()
                    }),
                },
            );
        }
        // End of generation ends the run (as in-process, it is not a token of the output);
        // the live check asks whether the grammar could end here.
        if self.vocab.as_ref().is_some_and(|m| m.is_eog(token)) {
            progress.eog_streamed += 1;
            if let Some((engine, state)) = &progress.track
                && !engine.can_end(*state)
            {
                self.emit(
                    progress.run,
                    Event::Error(format!(
                        "live check: the server ended generation (token {token}) where the \
                         grammar is not complete"
                    )),
                );
            }
            return ControlFlow::Continue(());
        }
        let predicted_ms = timings.predicted_ms.unwrap_or(progress.last_predicted_ms);
        let decode_ms = (predicted_ms - progress.last_predicted_ms).max(0.0);
        progress.last_predicted_ms = predicted_ms;
        let index = progress.records.len() as u32;
        match self.record(index, token, probs, content, decode_ms, &mut progress.track) {
            Ok((record, mask)) => {
                progress.output.extend_from_slice(&piece_bytes(&record));
                progress.totals.tokens += 1;
                progress.totals.decode_ms += record.decode_ms;
                progress.totals.mask_ms += record.mask_ms;
                progress.records.push(record.clone());
                progress.masks.push(mask);
                self.emit(progress.run, Event::Token(Box::new(record)));
                // A server that ignores `n_predict` is not read without end.
                let limit = progress.max_tokens.saturating_add(PAST_N_PREDICT);
                if progress.totals.tokens > limit {
                    progress.failure = Some(format!(
                        "the server sent more than {limit} tokens for n_predict {} (it ignores \
                         the limit): toolrail stopped reading",
                        progress.max_tokens
                    ));
                    return ControlFlow::Break(());
                }
                ControlFlow::Continue(())
            }
            Err(message) => {
                progress.failure = Some(message);
                ControlFlow::Break(())
            }
        }
    }

    fn done(&self, run: RunId, stop: Stop, totals: Totals, output: Vec<u8>) {
        self.emit(
            run,
            Event::Done {
                stop,
                totals,
                output: String::from_utf8_lossy(&output).into_owned(),
            },
        );
    }

    /// The record of one streamed token, with toolrail's view of it when a vocabulary is
    /// loaded, and toolrail's mask at that step.
    fn record(
        &mut self,
        index: u32,
        token: u32,
        probs: Option<&TokenProbs>,
        content: &str,
        decode_ms: f64,
        track: &mut Option<(Engine, State)>,
    ) -> Result<(TokenRecord, Option<TokenMask>), String> {
        let piece: Vec<u8> = match (probs, &self.vocab) {
            (_, Some(model)) => {
                // an id outside the local vocabulary is neither followed nor dropped: the
                // server runs another model than the one toolrail reads its tokens with
                model.check_token(token).map_err(|e| {
                    format!(
                        "token {index}: the server sent token id {token}, which is not in the \
                         local vocabulary of {} ({e}): the server runs another model, or sent \
                         an id that is no token",
                        model.info().path.display()
                    )
                })?;
                model.piece(token)
            }
            (Some(p), None) => p.bytes.clone(),
            (None, None) => content.as_bytes().to_vec(),
        };
        let mask_started = Instant::now();
        let mask: Option<TokenMask> = match (track.as_mut(), self.masks.as_mut()) {
            (Some((engine, state)), Some(masks)) => Some(
                masks
                    .mask(engine, *state)
                    .map_err(|e| format!("toolrail's mask at token {index} (id {token}): {e}"))?,
            ),
            _ => None,
        };
        let mask_ms = mask_started.elapsed().as_secs_f64() * 1e3;
        let mut flag = None;
        if let Some((engine, state)) = track.as_mut() {
            match engine.accept_token(*state, token, &piece) {
                // A long run walks through ever new stack states: keep the memo bounded.
                Some(next) => {
                    *state = match self.masks.as_mut() {
                        Some(masks) => masks.bound_memory(engine, next),
                        None => next,
                    }
                }
                None => {
                    flag = Some(format!(
                        "the server produced token {token} ({:?}), which the grammar forbids here",
                        String::from_utf8_lossy(&piece)
                    ));
                }
            }
        }
        let stacks = track
            .as_ref()
            .map(|(engine, state)| engine.snapshot(*state));
        if flag.is_some() {
            *track = None;
        }
        let before = probs
            .map(|p| candidates(&p.top_logprobs, |c| c.logprob.map(f64::exp), mask.as_ref()))
            .unwrap_or_default();
        let kept: f32 = before
            .iter()
            .filter(|c| !c.masked)
            .map(|c| c.probability)
            .sum();
        let after = before
            .iter()
            .filter(|c| !c.masked)
            .map(|c| Candidate {
                probability: if kept > 0.0 {
                    c.probability / kept
                } else {
                    0.0
                },
                ..c.clone()
            })
            .collect();
        let record = TokenRecord {
            index,
            id: token,
            piece: String::from_utf8_lossy(&piece).into_owned(),
            piece_hex: std::str::from_utf8(&piece)
                .is_err()
                .then(|| piece.iter().map(|b| format!("{b:02x}")).collect()),
            forced: false,
            budget_replaced: None,
            budget: None,
            before,
            after,
            allowed: mask.as_ref().map_or(0, |m| m.count() as u32),
            stacks,
            decode_ms,
            mask_ms,
            flag,
            sampled: Vec::new(),
            disagreements: Vec::new(),
            mask_difference: None,
            other_masks: Vec::new(),
            lazy: None,
            thinking: None,
        };
        Ok((record, mask))
    }
}

/// The server's candidate list as records: `probability` read by `probability`, `masked` from
/// toolrail's mask at that step.
fn candidates(
    list: &[TopProb],
    probability: impl Fn(&TopProb) -> Option<f64>,
    mask: Option<&TokenMask>,
) -> Vec<Candidate> {
    list.iter()
        .filter_map(|c| {
            let id = u32::try_from(c.id).ok()?;
            Some(Candidate {
                id,
                piece: String::from_utf8_lossy(&c.bytes).into_owned(),
                probability: probability(c).unwrap_or(0.0) as f32,
                masked: mask.is_some_and(|m| !m.contains(id)),
            })
        })
        .collect()
}

fn error(message: String) -> Stop {
    Stop::Error { message }
}

/// A record's piece as bytes (from its hex when the text is lossy).
fn piece_bytes(record: &TokenRecord) -> Vec<u8> {
    match &record.piece_hex {
        Some(hex) => (0..hex.len() / 2)
            .filter_map(|i| u8::from_str_radix(hex.get(2 * i..2 * i + 2)?, 16).ok())
            .collect(),
        None => record.piece.as_bytes().to_vec(),
    }
}
