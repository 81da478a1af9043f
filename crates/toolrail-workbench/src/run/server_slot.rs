//! The server slot: the llama-server runs go to, when one is connected — connecting (on a
//! thread), connected with its [`ServerWorker`] (spawned for the loaded model's vocabulary,
//! which toolrail follows the tokens with), or failed — and what its runs ask it for.

use std::path::PathBuf;
use std::time::Duration;

use crossbeam_channel::TryRecvError;

use super::error::RunError;
use super::server::{self, ServerConnection, ServerRequestChoice, ServerState};
use super::setup::RunInputs;
use crate::transcript::{ServerRequest, ServerRun};
use toolrail_llm::Model;
use toolrail_llm::server::{RequestKind, ServerOptions, ServerWorker};
use toolrail_llm::settings::ServerFlags;
use toolrail_llm::worker::{Command, EngineKind, Notify, RunRequest};

/// The server slot (see the module docs).
pub(super) struct ServerSlot {
    state: ServerState,
    connecting: Option<server::ConnectJob>,
    /// The server worker and the GGUF whose vocabulary it follows the tokens with.
    worker: Option<(ServerWorker, PathBuf)>,
    request: ServerRequestChoice,
    post_sampling: bool,
    /// The flags the server was started with, as the user states them.
    flags: ServerFlags,
}

impl Default for ServerSlot {
    fn default() -> Self {
        ServerSlot {
            state: ServerState::Disconnected,
            connecting: None,
            worker: None,
            request: ServerRequestChoice::Grammar,
            post_sampling: ServerOptions::default().post_sampling,
            flags: ServerFlags::default(),
        }
    }
}

impl ServerSlot {
    /// States the flags the server was started with (it does not report those that change
    /// its logits); every later run records the settings they give.
    pub(super) fn set_flags(&mut self, flags: ServerFlags) {
        self.flags = flags;
    }

    /// The flags stated for the server.
    pub(super) fn flags(&self) -> &ServerFlags {
        &self.flags
    }

    /// Starts connecting to `url` (`/health`, then `/props`, on a thread that calls `notify`
    /// when it has answered).
    pub(super) fn connect(
        &mut self,
        url: &str,
        api_key: Option<String>,
        name: Option<String>,
        notify: Notify,
    ) {
        match server::start_connect(url, api_key, name, notify) {
            Ok(job) => {
                self.state = ServerState::Connecting {
                    url: job.url.clone(),
                };
                self.connecting = Some(job);
            }
            Err(message) => {
                self.connecting = None;
                self.state = ServerState::Failed {
                    url: toolrail_llm::server::redact_url(url),
                    message,
                };
            }
        }
    }

    /// Forgets the server: runs are in-process again.
    pub(super) fn disconnect(&mut self) {
        self.connecting = None;
        self.worker = None;
        self.state = ServerState::Disconnected;
    }

    /// Takes the connection thread's answer, without blocking.
    pub(super) fn poll(&mut self) {
        let answer = match &self.connecting {
            Some(job) => match job.answer.try_recv() {
                Ok(answer) => answer,
                Err(TryRecvError::Empty) => return,
                Err(TryRecvError::Disconnected) => {
                    Err("the connection thread stopped without an answer".into())
                }
            },
            None => return,
        };
        self.on_answer(answer);
    }

    /// Waits up to `timeout` for the connection thread's answer; false when no connection is
    /// under way (nothing waited for).
    pub(super) fn wait(&mut self, timeout: Duration) -> bool {
        let Some(job) = &self.connecting else {
            return false;
        };
        if let Ok(answer) = job.answer.recv_timeout(timeout) {
            self.on_answer(answer);
        }
        true
    }

    fn on_answer(&mut self, answer: Result<ServerConnection, String>) {
        let Some(job) = self.connecting.take() else {
            return;
        };
        self.worker = None;
        self.state = match answer {
            Ok(connection) => ServerState::Connected(Box::new(connection)),
            Err(message) => ServerState::Failed {
                url: job.url,
                message,
            },
        };
    }

    /// Where the connection stands.
    pub(super) fn state(&self) -> &ServerState {
        &self.state
    }

    /// The connected server, if any.
    pub(super) fn connection(&self) -> Option<&ServerConnection> {
        match &self.state {
            ServerState::Connected(c) => Some(c),
            _ => None,
        }
    }

    /// What runs on the server ask it for (from the next run on).
    pub(super) fn set_request(&mut self, choice: ServerRequestChoice) {
        self.request = choice;
    }

    /// What runs on the server ask it for.
    pub(super) fn request(&self) -> ServerRequestChoice {
        self.request
    }

    /// Whether runs ask again for each token's candidates after the server's sampling chain
    /// (from the next run on).
    pub(super) fn set_post_sampling(&mut self, on: bool) {
        self.post_sampling = on;
    }

    /// The server worker, once a run went to the server.
    pub(super) fn worker(&self) -> Option<&ServerWorker> {
        self.worker.as_ref().map(|(w, _)| w)
    }

    /// Sends a command to the server worker; false without one (or when it is gone).
    pub(super) fn send(&self, command: Command) -> bool {
        self.worker().is_some_and(|w| w.send(command))
    }

    /// What a run of `request` over `inputs` records and asks the server for (`user`: the
    /// user's message, for the chat endpoint), and the request as changed for it (engine, and
    /// no grammar for a `tools` request); `None` when no server is connected.
    pub(super) fn plan(
        &self,
        inputs: &RunInputs,
        request: &mut RunRequest,
        user: &str,
    ) -> Result<Option<(ServerRun, String)>, RunError> {
        let Some(connection) = self.connection() else {
            return Ok(None);
        };
        if inputs.template.is_some() {
            return Err(RunError::Template(
                "a connected llama-server applies its own template: disconnect to run a template in-process"
                    .to_owned(),
            ));
        }
        if request.start_paused {
            return Err(RunError::Server(
                "Step works on in-process runs: a llama-server streams the whole answer at once; \
                 press Start run to run it there, or disconnect the server to step"
                    .into(),
            ));
        }
        if !request.compare.is_empty() {
            return Err(RunError::Server(
                "comparing other engines' masks runs in-process: untick Compare with for \
                 a run on the server (toolrail follows every token it sends)"
                    .into(),
            ));
        }
        let (server_request, engine) = server_request_for(self.request, inputs, request, user)?;
        request.engine = engine;
        if matches!(server_request, ServerRequest::Tools { .. }) {
            request.grammar = None;
        }
        Ok(Some((
            ServerRun {
                url: connection.url().to_owned(),
                build: connection.props.build_info.clone(),
                model: Some(connection.model_name()),
                request: server_request,
            },
            connection.described(),
        )))
    }

    /// Starts `request` on the server worker (spawned, or respawned for another vocabulary,
    /// here, with `notify`), asking what `server_run` says; false when no server is connected
    /// or the worker is gone.
    pub(super) fn start(
        &mut self,
        inputs: &RunInputs,
        server_run: &ServerRun,
        request: RunRequest,
        model: &Model,
        notify: Notify,
    ) -> bool {
        let Some(connection) = self.connection() else {
            return false;
        };
        let vocab_path = model.info().path.clone();
        if self
            .worker
            .as_ref()
            .is_none_or(|(_, path)| *path != vocab_path)
        {
            let worker =
                ServerWorker::spawn(connection.client.clone(), Some(model.clone()), notify);
            self.worker = Some((worker, vocab_path));
        }
        let kind = match &server_run.request {
            ServerRequest::Grammar => RequestKind::Grammar,
            ServerRequest::JsonSchema { schema } => RequestKind::JsonSchema(schema.clone()),
            ServerRequest::Tools { user, .. } => RequestKind::Tools {
                tools: inputs.client_tools(),
                user: user.clone(),
            },
        };
        let Some(worker) = self.worker() else {
            return false;
        };
        worker.set_options(ServerOptions {
            request: kind,
            post_sampling: self.post_sampling,
            flags: self.flags.clone(),
            ..ServerOptions::default()
        });
        worker.send(Command::Start(Box::new(request)))
    }
}

/// What a run on the server asks for, and the engine its record carries, from the pane's
/// choice and the workspace's inputs; an error says what is missing.
fn server_request_for(
    choice: ServerRequestChoice,
    inputs: &RunInputs,
    request: &RunRequest,
    user: &str,
) -> Result<(ServerRequest, EngineKind), RunError> {
    match choice {
        ServerRequestChoice::Grammar => match request.engine {
            EngineKind::Llama => Err(RunError::Server(
                "the engine 'llama' runs llama.cpp in-process; on a server its own llama.cpp \
                 masks the tokens: choose the engine 'toolrail' (toolrail follows every token) \
                 or 'none'"
                    .into(),
            )),
            engine => Ok((ServerRequest::Grammar, engine)),
        },
        ServerRequestChoice::JsonSchema => match &inputs.schema {
            Some(schema) if request.grammar.is_some() => Ok((
                ServerRequest::JsonSchema {
                    schema: schema.clone(),
                },
                EngineKind::Toolrail,
            )),
            _ => Err(RunError::Server(
                "json_schema sends the workspace's plain JSON Schema: switch the Tools pane to \
                 a plain schema that converts to a grammar, or ask for 'grammar' or 'tools'"
                    .into(),
            )),
        },
        ServerRequestChoice::Tools => match &inputs.tools {
            Some(tools) if !tools.tools().is_empty() => Ok((
                ServerRequest::Tools {
                    user: user.to_owned(),
                    calls: Vec::new(),
                },
                EngineKind::None,
            )),
            _ => Err(RunError::Server(
                "tools sends the workspace's tool set to the chat endpoint: the Tools pane has \
                 no tools"
                    .into(),
            )),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use toolrail_tools::toolset::ToolSet;

    fn request(engine: EngineKind) -> RunRequest {
        let setup = super::super::setup::RunSetup {
            engine,
            ..super::super::setup::RunSetup::default()
        };
        let inputs = RunInputs {
            grammar: Some("root ::= \"x\"".into()),
            ..RunInputs::default()
        };
        super::super::setup::build_request(&setup, &inputs, "p".into(), None, false).unwrap()
    }

    #[test]
    fn each_choice_says_what_it_needs() {
        let empty = RunInputs::default();
        let llama = server_request_for(
            ServerRequestChoice::Grammar,
            &empty,
            &request(EngineKind::Llama),
            "u",
        );
        assert!(
            matches!(llama, Err(RunError::Server(m)) if m.contains("'llama' runs llama.cpp in-process"))
        );
        let (asked, engine) = server_request_for(
            ServerRequestChoice::Grammar,
            &empty,
            &request(EngineKind::Toolrail),
            "u",
        )
        .unwrap();
        assert_eq!(
            (asked, engine),
            (ServerRequest::Grammar, EngineKind::Toolrail)
        );
        let schema = server_request_for(
            ServerRequestChoice::JsonSchema,
            &empty,
            &request(EngineKind::Toolrail),
            "u",
        );
        assert!(matches!(schema, Err(RunError::Server(m)) if m.contains("plain JSON Schema")));
        let tools = server_request_for(
            ServerRequestChoice::Tools,
            &empty,
            &request(EngineKind::Toolrail),
            "u",
        );
        assert!(matches!(tools, Err(RunError::Server(m)) if m.contains("no tools")));
        let with_tools = RunInputs {
            tools: Some(
                ToolSet::from_json_str(r#"[{"name": "f", "parameters": {"type": "object"}}]"#)
                    .unwrap(),
            ),
            ..RunInputs::default()
        };
        let (asked, engine) = server_request_for(
            ServerRequestChoice::Tools,
            &with_tools,
            &request(EngineKind::Toolrail),
            "hello",
        )
        .unwrap();
        assert_eq!(engine, EngineKind::None);
        assert_eq!(
            asked,
            ServerRequest::Tools {
                user: "hello".into(),
                calls: Vec::new()
            }
        );
    }

    #[test]
    fn disconnected_plans_nothing_and_a_bad_url_fails_at_once() {
        let mut slot = ServerSlot::default();
        let mut req = request(EngineKind::Toolrail);
        assert!(matches!(
            slot.plan(&RunInputs::default(), &mut req, "u"),
            Ok(None)
        ));
        slot.connect("not a url", None, None, Arc::new(|| {}));
        assert!(
            matches!(slot.state(), ServerState::Failed { .. }),
            "{:?}",
            slot.state()
        );
        assert!(!slot.wait(Duration::from_millis(1)), "nothing to wait for");
        slot.disconnect();
        assert!(matches!(slot.state(), ServerState::Disconnected));
        assert!(!slot.send(Command::Cancel), "no worker");
    }

    #[test]
    fn nothing_listening_is_said_in_words() {
        // A port that was just free: nothing listens there.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut slot = ServerSlot::default();
        slot.connect(
            &format!("http://127.0.0.1:{port}"),
            None,
            None,
            Arc::new(|| {}),
        );
        assert!(matches!(slot.state(), ServerState::Connecting { .. }));
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        while matches!(slot.state(), ServerState::Connecting { .. })
            && std::time::Instant::now() < deadline
        {
            slot.wait(Duration::from_millis(100));
        }
        match slot.state() {
            ServerState::Failed { message, .. } => {
                assert!(message.contains("nothing is listening"), "{message}")
            }
            other => panic!("{other:?}"),
        }
        assert!(slot.connection().is_none());
    }
}
