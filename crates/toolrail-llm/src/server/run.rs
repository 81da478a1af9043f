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
//! Not possible on a server (the grammar state lives in the server's slot): Step, Pause and
//! Force; they are answered with an error event. Cancel closes the connection.

use std::ops::ControlFlow;
use std::sync::Arc;
use std::time::Instant;

use crossbeam_channel::{Receiver, Sender, TryRecvError};

use super::api::{Chunk, CompletionRequest, Prompt};
use super::{ServerClient, StreamEnd};
use crate::Model;
use crate::record::{Candidate, PENALTY_WINDOW, Stop, TokenRecord, Totals};
use crate::worker::{Command, EngineKind, Event, Handle, Notify, RunEvent, RunId, RunRequest};
use toolrail_engine::{Engine, MaskEngine, State, TokenMask};
use toolrail_gbnf::{Grammar, TokenVocabulary};

/// A handle on a thread that runs requests on a llama-server.
pub struct ServerWorker {
    handle: Handle,
}

impl std::fmt::Debug for ServerWorker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerWorker").finish_non_exhaustive()
    }
}

impl ServerWorker {
    /// Starts the thread. `vocab` is a local copy of the model (its vocabulary drives token-id
    /// prompts, pieces and toolrail's live check); without it the prompt is sent as text and
    /// records carry only what the server reports.
    pub fn spawn(client: ServerClient, vocab: Option<Model>, notify: Notify) -> ServerWorker {
        Self::spawn_sending(client, vocab, notify, None)
    }

    /// Like [`ServerWorker::spawn`], but every run sends `sent` to the server as its grammar
    /// while toolrail checks the tokens against the run's own grammar: e.g. to see where a
    /// server's grammar lets through what the intended one forbids.
    pub fn spawn_sending(
        client: ServerClient,
        vocab: Option<Model>,
        notify: Notify,
        sent: Option<String>,
    ) -> ServerWorker {
        let handle = Handle::spawn("toolrail-server", move |commands, events| {
            let masks = vocab
                .as_ref()
                .map(|m| MaskEngine::new(m.shared_token_table()));
            let mut state = ServerRunner {
                client,
                sent,
                vocab,
                masks,
                commands,
                events,
                notify,
            };
            state.serve();
        });
        ServerWorker { handle }
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
    /// The grammar sent instead of the run's own (which toolrail still checks against).
    sent: Option<String>,
    vocab: Option<Model>,
    masks: Option<MaskEngine>,
    commands: Receiver<Command>,
    events: Sender<RunEvent>,
    notify: Notify,
}

/// What a command seen mid-stream means for the stream.
enum Interrupt {
    None,
    Cancel,
    Shutdown,
}

impl ServerRunner {
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

    /// Runs one request; returns true if the worker must shut down.
    fn run(&mut self, request: &RunRequest) -> bool {
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
        let prompt = match &self.vocab {
            Some(model) => Prompt::Tokens(model.tokenize(&request.prompt, true, true)),
            None => Prompt::Text(request.prompt.clone()),
        };
        let s = &request.sampling;
        let body = CompletionRequest {
            prompt,
            grammar: self.sent.clone().or(grammar),
            json_schema: None,
            n_predict: s.max_tokens,
            temperature: s.temperature,
            top_k: s.top_k,
            top_p: s.top_p,
            min_p: s.min_p,
            // llama-server's seed is 32-bit
            seed: (s.seed & u64::from(u32::MAX)) as u32,
            repeat_penalty: s.repeat_penalty,
            repeat_last_n: PENALTY_WINDOW as u32,
            samplers: CompletionRequest::SAMPLERS.to_vec(),
            n_probs: request.show.max(1) as u32,
            stream: true,
            cache_prompt: false,
            timings_per_token: true,
            sse_ping_interval: 1,
        };

        let started = Instant::now();
        let mut output: Vec<u8> = Vec::new();
        let mut totals = Totals::default();
        let mut index: u32 = 0;
        let mut last_predicted_ms = 0.0;
        let mut announced = false;
        let mut shutdown = false;
        let mut failure: Option<String> = None;
        let client = self.client.clone();
        let result = client.stream_completion(&body, |chunk| {
            match self.poll_commands(request.id) {
                Interrupt::None => {}
                Interrupt::Cancel => return ControlFlow::Break(()),
                Interrupt::Shutdown => {
                    shutdown = true;
                    return ControlFlow::Break(());
                }
            }
            let Some(token) = chunk.token() else {
                return ControlFlow::Continue(());
            };
            let timings = chunk.timings.clone().unwrap_or_default();
            if !announced {
                announced = true;
                self.emit(
                    request.id,
                    Event::Started {
                        prompt_tokens: chunk.tokens_evaluated.unwrap_or(0) as usize,
                        prompt_ms: timings.prompt_ms.unwrap_or(0.0),
                    },
                );
            }
            // End of generation ends the run (as in-process, it is not a token of the output);
            // the live check asks whether the grammar could end here.
            if self.vocab.as_ref().is_some_and(|m| m.is_eog(token)) {
                if let Some((engine, state)) = &track
                    && !engine.can_end(*state)
                {
                    self.emit(
                        request.id,
                        Event::Error(format!(
                            "live check: the server ended generation (token {token}) where the \
                             grammar is not complete"
                        )),
                    );
                }
                return ControlFlow::Continue(());
            }
            let predicted_ms = timings.predicted_ms.unwrap_or(last_predicted_ms);
            let decode_ms = (predicted_ms - last_predicted_ms).max(0.0);
            last_predicted_ms = predicted_ms;
            match self.record(index, token, chunk, decode_ms, &mut track) {
                Ok(record) => {
                    output.extend_from_slice(&piece_bytes(&record));
                    totals.tokens += 1;
                    totals.decode_ms += record.decode_ms;
                    totals.mask_ms += record.mask_ms;
                    index += 1;
                    self.emit(request.id, Event::Token(Box::new(record)));
                    ControlFlow::Continue(())
                }
                Err(message) => {
                    failure = Some(message);
                    ControlFlow::Break(())
                }
            }
        });
        let stop = match (result, failure) {
            (_, Some(message)) => error(message),
            (Ok(StreamEnd::Cancelled), None) => Stop::Cancelled,
            (Ok(StreamEnd::Final(last)), None) => {
                if let Some(t) = &last.timings {
                    totals.decode_ms = t.predicted_ms.unwrap_or(totals.decode_ms);
                }
                if let Some(n) = last.tokens_predicted
                    && n > u64::from(totals.tokens)
                {
                    // llama-server streams no chunk for a token that ends inside a UTF-8
                    // character; its bytes come with the next chunk
                    self.emit(
                        request.id,
                        Event::Error(format!(
                            "the server generated {n} tokens but streamed {}: tokens ending \
                             inside a UTF-8 character are not streamed on their own",
                            totals.tokens
                        )),
                    );
                }
                match last.stop_type.as_deref() {
                    Some("eos") | Some("word") => Stop::EndOfGeneration,
                    Some("limit") => Stop::MaxTokens,
                    other => error(format!(
                        "the server stopped for an unknown reason ({})",
                        other.unwrap_or("none given")
                    )),
                }
            }
            (Err(e), None) => error(e.to_string()),
        };
        let seconds = started.elapsed().as_secs_f64();
        totals.tokens_per_s = if totals.decode_ms > 0.0 {
            f64::from(totals.tokens) * 1e3 / totals.decode_ms
        } else if seconds > 0.0 {
            f64::from(totals.tokens) / seconds
        } else {
            0.0
        };
        self.done(request.id, stop, totals, output);
        shutdown
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

    /// The record of one streamed token, with toolrail's view of it when a vocabulary is loaded.
    fn record(
        &mut self,
        index: u32,
        token: u32,
        chunk: &Chunk,
        decode_ms: f64,
        track: &mut Option<(Engine, State)>,
    ) -> Result<TokenRecord, String> {
        let probs = chunk.completion_probabilities.first();
        let piece: Vec<u8> = match (probs, &self.vocab) {
            (_, Some(model)) => model.piece(token),
            (Some(p), None) => p.bytes.clone(),
            (None, None) => chunk.content.as_bytes().to_vec(),
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
        let before: Vec<Candidate> = probs
            .map(|p| {
                p.top_logprobs
                    .iter()
                    .filter_map(|c| {
                        let id = u32::try_from(c.id).ok()?;
                        Some(Candidate {
                            id,
                            piece: String::from_utf8_lossy(&c.bytes).into_owned(),
                            probability: c.logprob.map_or(0.0, |l| l.exp() as f32),
                            masked: mask.as_ref().is_some_and(|m| !m.contains(id)),
                        })
                    })
                    .collect()
            })
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
        Ok(TokenRecord {
            index,
            id: token,
            piece: String::from_utf8_lossy(&piece).into_owned(),
            piece_hex: std::str::from_utf8(&piece)
                .is_err()
                .then(|| piece.iter().map(|b| format!("{b:02x}")).collect()),
            forced: false,
            budget_replaced: None,
            before,
            after,
            allowed: mask.as_ref().map_or(0, |m| m.count() as u32),
            stacks,
            decode_ms,
            mask_ms,
            flag,
        })
    }
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
