//! A llama-server as the run controller's engine: connecting (on a thread: `/health`, then
//! `/props`), what the connection shows, what a run asks the server for, and the connection's
//! errors in words a person acts on (nothing listening, no answer in time, a key refused, a
//! server that is not llama-server and what it answered instead).

use crossbeam_channel::{Receiver, bounded};
use serde::{Deserialize, Serialize};

use toolrail_llm::server::{Props, ServerClient, ServerError};
use toolrail_llm::worker::Notify;

/// What a run on a server asks the server for (the Generation pane's choice).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ServerRequestChoice {
    /// `/completion` with toolrail's grammar: the server enforces exactly what toolrail checks.
    #[default]
    Grammar,
    /// `/completion` with the workspace's plain JSON Schema, converted by the server.
    JsonSchema,
    /// `/v1/chat/completions` with the workspace's tools: the server's chat template and its
    /// own tool-call grammar.
    Tools,
}

impl ServerRequestChoice {
    /// Every choice, in the order the pane lists them.
    pub fn all() -> [ServerRequestChoice; 3] {
        [Self::Grammar, Self::JsonSchema, Self::Tools]
    }

    /// The name shown in the pane (the request field it sends).
    pub fn name(self) -> &'static str {
        match self {
            Self::Grammar => "grammar",
            Self::JsonSchema => "json_schema",
            Self::Tools => "tools",
        }
    }

    /// One line on what it sends.
    pub fn describe(self) -> &'static str {
        match self {
            Self::Grammar => {
                "/completion with toolrail's grammar (the server enforces what toolrail checks)"
            }
            Self::JsonSchema => {
                "/completion with the plain JSON Schema; the server converts it itself"
            }
            Self::Tools => {
                "/v1/chat/completions with the tools: the server's chat template and tool-call grammar"
            }
        }
    }
}

/// A server toolrail is connected to.
#[derive(Clone, Debug)]
pub struct ServerConnection {
    /// The `[[server]]` entry's name, when it came from `models.toml`.
    pub name: Option<String>,
    /// What `/props` said (model, context, chat template, build).
    pub props: Props,
    /// What `/health` said (`ok`).
    pub health: String,
    /// The client (base URL and API key).
    pub client: ServerClient,
}

impl ServerConnection {
    /// The base URL.
    pub fn url(&self) -> &str {
        self.client.url()
    }

    /// `llama-server b11434, model gemma-3-270m` (as transcripts record it).
    pub fn described(&self) -> String {
        let build = self
            .props
            .build()
            .map_or("of unknown build".to_owned(), |b| format!("b{b}"));
        format!(
            "llama-server {build} at {}, model {}",
            self.url(),
            self.model_name()
        )
    }

    /// The server's model: its alias, else its path.
    pub fn model_name(&self) -> String {
        self.props
            .model_alias
            .clone()
            .or(self.props.model_path.clone())
            .unwrap_or_else(|| "an unnamed model".into())
    }
}

/// Where the connection to a server stands.
#[derive(Clone, Debug, Default)]
pub enum ServerState {
    /// Runs are in-process.
    #[default]
    Disconnected,
    /// Asking the server for `/health` and `/props`.
    Connecting {
        /// The URL asked.
        url: String,
    },
    /// Connected: runs go to the server.
    Connected(Box<ServerConnection>),
    /// The last attempt failed (runs stay in-process).
    Failed {
        /// The URL asked.
        url: String,
        /// Why, in a person's words.
        message: String,
    },
}

/// A connection attempt on its own thread.
pub(super) struct ConnectJob {
    pub(super) url: String,
    pub(super) answer: Receiver<Result<ServerConnection, String>>,
}

/// Starts connecting to `url` on a thread; `notify` is called when it has answered.
pub(super) fn start_connect(
    url: &str,
    api_key: Option<String>,
    name: Option<String>,
    notify: Notify,
) -> Result<ConnectJob, String> {
    let client = ServerClient::new(url.trim(), api_key).map_err(|e| e.to_string())?;
    let (tx, answer) = bounded(1);
    let url = client.url().to_owned();
    std::thread::Builder::new()
        .name("toolrail-server-connect".into())
        .spawn(move || {
            let result = connect(client, name);
            let _ = tx.send(result);
            notify();
        })
        .map_err(|e| format!("cannot start the connection thread: {e}"))?;
    Ok(ConnectJob { url, answer })
}

/// `/health`, then `/props`; each failure said in a person's words.
fn connect(client: ServerClient, name: Option<String>) -> Result<ServerConnection, String> {
    client
        .health()
        .map_err(|e| in_words(client.url(), "/health", &e))?;
    let props = client
        .props()
        .map_err(|e| in_words(client.url(), "/props", &e))?;
    Ok(ServerConnection {
        name,
        props,
        health: "ok".into(),
        client,
    })
}

/// A connection error as a sentence saying what happened and what to check.
pub fn in_words(url: &str, path: &str, error: &ServerError) -> String {
    match error {
        ServerError::Unreachable { reason, .. } => {
            let lower = reason.to_lowercase();
            if lower.contains("refused") {
                format!(
                    "nothing is listening at {url} (connection refused): is llama-server \
                     running, on this host and port?"
                )
            } else if lower.contains("timed out") || lower.contains("timeout") {
                format!(
                    "{url} did not answer in time (timeout): check the host, the port and any \
                     firewall between"
                )
            } else if lower.contains("dns") || lower.contains("resolve") || lower.contains("lookup")
            {
                format!("cannot find the host of {url}: {reason}")
            } else {
                format!("cannot reach {url}: {reason}")
            }
        }
        ServerError::Http {
            status: 401 | 403,
            message,
            ..
        } => format!(
            "{url} refused the API key on {path} ({message}): set the environment variable \
             named by the server's api_key_env to its key"
        ),
        ServerError::Http {
            status: 503,
            message,
            ..
        } => format!("{url} is up but not ready ({message}): it may still be loading its model"),
        ServerError::Http {
            status, message, ..
        } if path == "/health" => format!(
            "{url} answered, but it is not llama-server: GET /health gave HTTP {status}: {}",
            if message.trim().is_empty() {
                "(an empty body)"
            } else {
                message.trim()
            }
        ),
        ServerError::NotLlamaServer { detail, .. } => {
            format!("{url} answered, but it is not llama-server: {path}: {detail}")
        }
        other => other.to_string(),
    }
}
