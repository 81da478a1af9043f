//! A real llama-server as an engine: a blocking HTTP client for its `/health`, `/props` and
//! streamed `/completion` (server-sent events), and [`ServerWorker`], which runs a
//! [`crate::worker::RunRequest`] there and reports the same events as the in-process worker —
//! with toolrail's recognizer following every token the server sends (stacks, allowed counts,
//! and a flag on any token the grammar forbids) when the model's vocabulary is loaded locally.
//!
//! `http`, `sse` and `api` do not touch llama.cpp, so they could move to a crate of their own.
//! Plain `http://` only (no TLS library is compiled in); an API key is sent as a bearer token.

pub mod api;
mod run;
pub mod sse;

use std::io::BufReader;
use std::ops::ControlFlow;
use std::time::Duration;

use serde_json::Value;

pub use api::{
    ChatBuild, ChatBuildFields, ChatChunk, ChatMessage, ChatRequest, Chunk, CompletionRequest,
    Prompt, Props, ReasoningBudgetFields, SamplingFields,
};
pub use run::{RequestKind, ServerOptions, ServerWorker};
use sse::{SseEvent, SseReader};

/// The largest non-streamed reply toolrail reads (`/props` carries the chat template).
const MAX_REPLY_BYTES: u64 = 16 << 20;

/// The longest a `/health` or `/props` request may take, from connecting to the last byte.
const GET_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a streamed request may wait, phase by phase: a server that accepts and stalls,
/// goes silent mid-stream or streams without end is cut, with a message naming the limit.
/// llama-server sends nothing while it reads a prompt (no keep-alive), so `idle` must cover
/// the longest prompt: a long one on a CPU can take many minutes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timeouts {
    /// Connecting.
    pub connect: Duration,
    /// Any wait for the next bytes (the reply's headers included), and a stream of only
    /// keep-alive pings.
    pub idle: Duration,
    /// The whole stream.
    pub total: Duration,
}

impl Default for Timeouts {
    fn default() -> Self {
        Timeouts {
            connect: Duration::from_secs(5),
            idle: Duration::from_secs(15 * 60),
            total: Duration::from_secs(4 * 60 * 60),
        }
    }
}

/// Everything that can go wrong talking to a server; each a sentence naming the server.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// The URL is not a plain `http://` URL.
    #[error(
        "{url}: not an http:// URL (toolrail talks plain HTTP to llama-server; use an SSH tunnel or a local proxy for remote TLS servers)"
    )]
    BadUrl {
        /// The URL given.
        url: String,
    },
    /// No connection (refused, unknown host, timeout).
    #[error("cannot reach {url}: {reason}")]
    Unreachable {
        /// The server.
        url: String,
        /// What the network layer said.
        reason: String,
    },
    /// The server took longer than a time limit.
    #[error("{url} {what}: toolrail stopped waiting")]
    Timeout {
        /// The server or request.
        url: String,
        /// What it did, with the limit (`sent nothing for 900 s`).
        what: String,
    },
    /// The server answered with an HTTP error.
    #[error("{url} answered {status}{}: {message}", .kind.as_deref().map(|k| format!(" ({k})")).unwrap_or_default())]
    Http {
        /// The request's URL.
        url: String,
        /// The HTTP status.
        status: u16,
        /// llama-server's error type, e.g. `invalid_request_error`.
        kind: Option<String>,
        /// The server's message (or the start of the body when it is not llama-server's JSON).
        message: String,
    },
    /// The server answered with a redirect, which toolrail does not follow: it talks only to
    /// the address the user gave.
    #[error(
        "{url} answered a redirect ({status}); toolrail does not follow redirects, it talks only to the address you gave: give the server's own address"
    )]
    Redirect {
        /// The request's URL.
        url: String,
        /// The HTTP status (301, 302, 303, 307, 308, …).
        status: u16,
    },
    /// The server answered something that is not llama-server's protocol.
    #[error("{url} does not look like llama-server: {detail}")]
    NotLlamaServer {
        /// The request's URL.
        url: String,
        /// What was found instead.
        detail: String,
    },
    /// The stream broke or carried an error.
    #[error("{url}: {detail}")]
    Stream {
        /// The request's URL.
        url: String,
        /// What happened.
        detail: String,
    },
}

/// How a streamed completion ended.
#[derive(Debug)]
pub enum StreamEnd {
    /// The server's final chunk (stop reason, totals, the grammar it enforced).
    Final(Box<Chunk>),
    /// The caller stopped reading (the connection is closed, so the server stops too).
    Cancelled,
}

/// A llama-server at a base URL.
#[derive(Clone)]
pub struct ServerClient {
    /// The base URL requests go to (with any credentials in it).
    base: String,
    /// The base URL as shown, recorded and put in errors (credentials redacted).
    shown: String,
    api_key: Option<String>,
    agent: ureq::Agent,
    timeouts: Timeouts,
}

/// The URL and whether a key is sent; never the key itself (debug output ends up in logs).
impl std::fmt::Debug for ServerClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerClient")
            .field("base", &self.shown)
            .field("api_key", &self.api_key.as_ref().map(|_| "(set)"))
            .finish_non_exhaustive()
    }
}

impl ServerClient {
    /// A client for the server at `url` (`http://host:port`), sending `api_key` if given.
    pub fn new(url: &str, api_key: Option<String>) -> Result<ServerClient, ServerError> {
        let base = url.trim_end_matches('/').to_owned();
        if !base.starts_with("http://") || base.len() <= "http://".len() {
            return Err(ServerError::BadUrl {
                url: redact_url(url),
            });
        }
        let shown = redact_url(&base);
        let timeouts = Timeouts::default();
        Ok(ServerClient {
            base,
            shown,
            api_key: api_key.filter(|k| !k.is_empty()),
            agent: Self::agent(&timeouts),
            timeouts,
        })
    }

    /// The same client with other time limits.
    pub fn with_timeouts(mut self, timeouts: Timeouts) -> ServerClient {
        self.agent = Self::agent(&timeouts);
        self.timeouts = timeouts;
        self
    }

    /// The time limits of streamed requests.
    pub fn timeouts(&self) -> Timeouts {
        self.timeouts
    }

    fn agent(timeouts: &Timeouts) -> ureq::Agent {
        ureq::Agent::config_builder()
            .http_status_as_error(false)
            // toolrail talks only to the address the user gave: a redirect is an error
            .max_redirects(0)
            .timeout_connect(Some(timeouts.connect))
            .build()
            .into()
    }

    /// The base URL as shown and recorded: a password (or a token in the user's place) in it
    /// is replaced by `***` (see [`redact_url`]).
    pub fn url(&self) -> &str {
        &self.shown
    }

    /// An endpoint's URL as shown in messages (redacted).
    fn endpoint(&self, path: &str) -> String {
        format!("{}{path}", self.shown)
    }

    /// The URL requests go to, from an [`ServerClient::endpoint`] (with the credentials).
    fn real(&self, shown: &str) -> String {
        match shown.strip_prefix(self.shown.as_str()) {
            Some(path) => format!("{}{path}", self.base),
            None => shown.to_owned(),
        }
    }

    fn unreachable(&self, e: &ureq::Error) -> ServerError {
        match e {
            ureq::Error::Timeout(kind) if !matches!(kind, ureq::Timeout::Connect) => {
                ServerError::Timeout {
                    url: self.shown.clone(),
                    what: match kind {
                        ureq::Timeout::PerRead | ureq::Timeout::RecvResponse => {
                            format!("sent nothing for {} s", self.timeouts.idle.as_secs())
                        }
                        _ => format!("did not finish within its time limit ({e})"),
                    },
                }
            }
            _ => ServerError::Unreachable {
                url: self.shown.clone(),
                reason: e.to_string(),
            },
        }
    }

    /// The stream's next event other than a keep-alive ping (`last_data`: when the last data
    /// came); only pings for longer than the idle limit is a timeout.
    fn next_event<R: std::io::BufRead>(
        &self,
        url: &str,
        events: &mut SseReader<R>,
        last_data: &mut std::time::Instant,
    ) -> Result<Option<SseEvent>, ServerError> {
        loop {
            match events.next_event().map_err(|e| self.stream_error(url, e))? {
                Some(SseEvent::Ping) if last_data.elapsed() > self.timeouts.idle => {
                    return Err(ServerError::Timeout {
                        url: url.to_owned(),
                        what: format!(
                            "sent only keep-alive pings for {} s",
                            self.timeouts.idle.as_secs()
                        ),
                    });
                }
                Some(SseEvent::Ping) => {}
                Some(SseEvent::Data(d)) => {
                    *last_data = std::time::Instant::now();
                    return Ok(Some(SseEvent::Data(d)));
                }
                other => return Ok(other),
            }
        }
    }

    /// A stream's read error: a read that waited past the idle limit, or a broken stream.
    fn stream_error(&self, url: &str, e: sse::SseError) -> ServerError {
        match &e {
            sse::SseError::Io(io)
                if io.kind() == std::io::ErrorKind::TimedOut
                    || io
                        .get_ref()
                        .and_then(|inner| inner.downcast_ref::<ureq::Error>())
                        .is_some_and(|u| matches!(u, ureq::Error::Timeout(_))) =>
            {
                ServerError::Timeout {
                    url: url.to_owned(),
                    what: format!(
                        "sent nothing for {} s mid-stream",
                        self.timeouts.idle.as_secs()
                    ),
                }
            }
            _ => ServerError::Stream {
                url: url.to_owned(),
                detail: format!("the stream broke: {e}"),
            },
        }
    }

    /// An HTTP error from a reply's status and body.
    fn http_error(url: String, status: u16, body: &str) -> ServerError {
        if (300..400).contains(&status) {
            return ServerError::Redirect { url, status };
        }
        let parsed: Option<api::ApiError> = serde_json::from_str::<Value>(body)
            .ok()
            .and_then(|v| serde_json::from_value(v.get("error")?.clone()).ok());
        match parsed {
            Some(e) => ServerError::Http {
                url,
                status,
                kind: e.kind,
                message: e.message,
            },
            None => ServerError::Http {
                url,
                status,
                kind: None,
                message: body.chars().take(300).collect(),
            },
        }
    }

    fn get_json(&self, path: &str) -> Result<Value, ServerError> {
        let url = self.endpoint(path);
        // A server that accepts the connection but never answers is cut after this long.
        let mut request = self
            .agent
            .get(&self.real(&url))
            .config()
            .timeout_global(Some(GET_TIMEOUT))
            .build();
        if let Some(key) = &self.api_key {
            request = request.header("Authorization", format!("Bearer {key}"));
        }
        let reply = request.call().map_err(|e| self.unreachable(&e))?;
        Self::json_reply(url, reply)
    }

    /// A reply's body as JSON: read up to [`MAX_REPLY_BYTES`]; any status but 200 is the
    /// server's error with its message; a body that is no JSON means no llama-server answered.
    fn json_reply(
        url: String,
        mut reply: ureq::http::Response<ureq::Body>,
    ) -> Result<Value, ServerError> {
        let status = reply.status().as_u16();
        let body = reply
            .body_mut()
            .with_config()
            .limit(MAX_REPLY_BYTES)
            .read_to_string()
            .map_err(|e| ServerError::Stream {
                url: url.clone(),
                detail: format!("reading the reply failed: {e}"),
            })?;
        if status != 200 {
            return Err(Self::http_error(url, status, &body));
        }
        serde_json::from_str(&body).map_err(|_| ServerError::NotLlamaServer {
            url,
            detail: format!(
                "the reply is not JSON: {}",
                body.chars().take(120).collect::<String>()
            ),
        })
    }

    /// `GET /health`: Ok when the model is loaded and the server takes requests.
    pub fn health(&self) -> Result<(), ServerError> {
        let v = self.get_json("/health")?;
        match v.get("status").and_then(Value::as_str) {
            Some("ok") => Ok(()),
            _ => Err(ServerError::NotLlamaServer {
                url: self.endpoint("/health"),
                detail: format!("expected {{\"status\": \"ok\"}}, got {v}"),
            }),
        }
    }

    /// `GET /props`: the model, context, chat template and build.
    pub fn props(&self) -> Result<Props, ServerError> {
        let v = self.get_json("/props")?;
        if v.get("build_info").is_none() && v.get("default_generation_settings").is_none() {
            return Err(ServerError::NotLlamaServer {
                url: self.endpoint("/props"),
                detail: "no build_info or default_generation_settings in /props".into(),
            });
        }
        Ok(Props::from_json(&v))
    }

    /// Posts `body` to `path` asking for a stream; the event reader once the server answered 200.
    fn open_stream(
        &self,
        path: &str,
        body: &impl serde::Serialize,
    ) -> Result<SseReader<BufReader<ureq::BodyReader<'static>>>, ServerError> {
        let url = self.endpoint(path);
        let body = serde_json::to_vec(body).map_err(|e| ServerError::Stream {
            url: url.clone(),
            detail: format!("cannot write the request: {e}"),
        })?;
        let mut post = self
            .agent
            .post(&self.real(&url))
            .config()
            .timeout_per_read(Some(self.timeouts.idle))
            .timeout_recv_response(Some(self.timeouts.idle))
            .timeout_global(Some(self.timeouts.total))
            .build()
            .header("Content-Type", "application/json")
            .header("Accept", "text/event-stream");
        if let Some(key) = &self.api_key {
            post = post.header("Authorization", format!("Bearer {key}"));
        }
        let mut reply = post.send(&body[..]).map_err(|e| self.unreachable(&e))?;
        let status = reply.status().as_u16();
        if status != 200 {
            let text = reply
                .body_mut()
                .with_config()
                .limit(MAX_REPLY_BYTES)
                .read_to_string()
                .unwrap_or_default();
            return Err(Self::http_error(url, status, &text));
        }
        // llama-server streams as text/event-stream; a page or a JSON document instead is not
        // its protocol, said with what came (a missing header is let through)
        let content_type = reply
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        if let Some(kind) = content_type
            && !kind.trim_start().starts_with("text/event-stream")
        {
            let text = reply
                .body_mut()
                .with_config()
                .limit(MAX_REPLY_BYTES)
                .read_to_string()
                .unwrap_or_default();
            let shown: String = text.chars().take(200).collect();
            return Err(ServerError::NotLlamaServer {
                url,
                detail: format!("it answered {kind}, not an event stream: {shown:?}"),
            });
        }
        Ok(SseReader::new(BufReader::new(
            reply.into_body().into_reader(),
        )))
    }

    /// What the server builds for `request` (prompt, tool-call grammar, triggers, chat
    /// format): the same request, not streamed, one token long, with `verbose` (llama-server
    /// reports what it built only in a non-streamed reply's `__verbose` block).
    pub fn chat_build(&self, request: &ChatRequest) -> Result<ChatBuild, ServerError> {
        let body = serde_json::to_value(request).map_err(|e| ServerError::Stream {
            url: self.endpoint("/v1/chat/completions"),
            detail: format!("cannot write the request: {e}"),
        })?;
        self.chat_build_json(body)
    }

    /// `POST /apply-template`: the prompt the server's chat template renders for an OpenAI chat
    /// body (messages, tools, tool_choice, …), built as for a chat request (a request the
    /// server refuses is its HTTP error), without generating.
    pub fn apply_template(&self, body: &Value) -> Result<String, ServerError> {
        let (url, value) = self.post_json("/apply-template", body, Some(GET_TIMEOUT))?;
        value
            .get("prompt")
            .and_then(Value::as_str)
            .map(str::to_owned)
            .ok_or_else(|| ServerError::NotLlamaServer {
                url,
                detail: "the reply has no \"prompt\"".into(),
            })
    }

    /// Like [`ServerClient::chat_build`] for a request given as JSON (any OpenAI chat body);
    /// `stream`, `verbose` and `max_tokens` are set here.
    pub fn chat_build_json(&self, mut probe: Value) -> Result<ChatBuild, ServerError> {
        if let Some(map) = probe.as_object_mut() {
            map.insert("stream".into(), Value::Bool(false));
            map.insert("verbose".into(), Value::Bool(true));
            map.insert("max_tokens".into(), Value::from(1));
        }
        let (url, value) = self.post_json("/v1/chat/completions", &probe, None)?;
        ChatBuild::from_reply(&value).ok_or_else(|| ServerError::NotLlamaServer {
            url,
            detail: "the reply has no __verbose block (llama-server reports the prompt and grammar it built there)".into(),
        })
    }

    /// Posts `body` to `path` (cut after `timeout` when given) and reads the JSON reply; the
    /// endpoint's URL as shown comes back with it, for the caller's errors.
    fn post_json(
        &self,
        path: &str,
        body: &Value,
        timeout: Option<Duration>,
    ) -> Result<(String, Value), ServerError> {
        let url = self.endpoint(path);
        let bytes = serde_json::to_vec(body).map_err(|e| ServerError::Stream {
            url: url.clone(),
            detail: format!("cannot write the request: {e}"),
        })?;
        let mut post = self
            .agent
            .post(&self.real(&url))
            .config()
            .timeout_global(timeout)
            .build()
            .header("Content-Type", "application/json");
        if let Some(key) = &self.api_key {
            post = post.header("Authorization", format!("Bearer {key}"));
        }
        let reply = post.send(&bytes[..]).map_err(|e| self.unreachable(&e))?;
        let value = Self::json_reply(url.clone(), reply)?;
        Ok((url, value))
    }

    /// Streams `POST /completion`, calling `on_chunk` for every chunk before the final one;
    /// `on_chunk` returning `Break` closes the connection (the server stops within a token or
    /// a keep-alive interval).
    pub fn stream_completion(
        &self,
        request: &CompletionRequest,
        mut on_chunk: impl FnMut(&Chunk) -> ControlFlow<()>,
    ) -> Result<StreamEnd, ServerError> {
        let url = self.endpoint("/completion");
        let broken = |detail: String| ServerError::Stream {
            url: url.clone(),
            detail,
        };
        let mut events = self.open_stream("/completion", request)?;
        let mut last_data = std::time::Instant::now();
        loop {
            let event = self.next_event(&url, &mut events, &mut last_data)?;
            let data = match event {
                None | Some(SseEvent::Done) => {
                    return Err(broken(
                        "the stream ended without a final chunk (the server stopped or was killed)"
                            .into(),
                    ));
                }
                // (next_event skips pings)
                Some(SseEvent::Ping) => continue,
                Some(SseEvent::Data(d)) => d,
            };
            let chunk: Chunk = parse_chunk(&url, &data)?;
            if let Some(e) = &chunk.error {
                return Err(in_stream_error(&url, e));
            }
            if (chunk.token().is_some() || !chunk.stop) && on_chunk(&chunk).is_break() {
                return Ok(StreamEnd::Cancelled);
            }
            if chunk.stop {
                return Ok(StreamEnd::Final(Box::new(chunk)));
            }
        }
    }

    /// Streams `POST /v1/chat/completions`, calling `on_chunk` for every chunk until
    /// `data: [DONE]`; returns the finish reason (`stop`, `length`, `tool_calls`), or None when
    /// `on_chunk` returned `Break` (the connection is then closed).
    pub fn stream_chat(
        &self,
        request: &ChatRequest,
        mut on_chunk: impl FnMut(&ChatChunk) -> ControlFlow<()>,
    ) -> Result<Option<String>, ServerError> {
        let url = self.endpoint("/v1/chat/completions");
        let broken = |detail: String| ServerError::Stream {
            url: url.clone(),
            detail,
        };
        let mut events = self.open_stream("/v1/chat/completions", request)?;
        let mut finish: Option<String> = None;
        let mut last_data = std::time::Instant::now();
        loop {
            let event = self.next_event(&url, &mut events, &mut last_data)?;
            let data = match event {
                Some(SseEvent::Done) => {
                    return finish
                        .map(Some)
                        .ok_or_else(|| broken("the stream ended without a finish reason".into()));
                }
                None => {
                    return Err(broken(
                        "the stream ended before [DONE] (the server stopped or was killed)".into(),
                    ));
                }
                // (next_event skips pings)
                Some(SseEvent::Ping) => continue,
                Some(SseEvent::Data(d)) => d,
            };
            let chunk: ChatChunk = parse_chunk(&url, &data)?;
            if let Some(e) = &chunk.error {
                return Err(in_stream_error(&url, e));
            }
            if let Some(reason) = chunk.choices.first().and_then(|c| c.finish_reason.clone()) {
                finish = Some(reason);
            }
            if on_chunk(&chunk).is_break() {
                return Ok(None);
            }
        }
    }
}

/// A chunk of llama-server's JSON, or an error saying the server speaks something else.
fn parse_chunk<T: serde::de::DeserializeOwned>(url: &str, data: &str) -> Result<T, ServerError> {
    serde_json::from_str(data).map_err(|e| ServerError::NotLlamaServer {
        url: url.to_owned(),
        detail: format!(
            "a chunk is not llama-server's JSON ({e}): {}",
            data.chars().take(120).collect::<String>()
        ),
    })
}

/// An error the server reported inside a stream (an `error` object in a chunk), as an HTTP
/// error with the server's own status, kind and message.
fn in_stream_error(url: &str, e: &api::ApiError) -> ServerError {
    ServerError::Http {
        url: url.to_owned(),
        status: e.code.unwrap_or(500),
        kind: e.kind.clone(),
        message: e.message.clone(),
    }
}

/// `url` with the credentials of its authority hidden, for messages, transcripts and exports:
/// `http://user:secret@host:8080/x` → `http://user:***@host:8080/x`; a user name alone (often a
/// token) → `***@`. A URL without credentials is unchanged.
pub fn redact_url(url: &str) -> String {
    let (scheme, rest) = match url.find("://") {
        Some(at) => url.split_at(at + 3),
        None => ("", url),
    };
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(authority_end);
    let Some(at) = authority.rfind('@') else {
        return url.to_owned();
    };
    let (userinfo, host) = authority.split_at(at);
    let hidden = match userinfo.split_once(':') {
        Some((user, _)) => format!("{user}:***"),
        None => "***".to_owned(),
    };
    format!("{scheme}{hidden}{host}{tail}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_in_a_url_are_redacted() {
        assert_eq!(
            redact_url("http://alice:s3cret@127.0.0.1:8080/v1"),
            "http://alice:***@127.0.0.1:8080/v1"
        );
        assert_eq!(redact_url("http://tok3n@host:1"), "http://***@host:1");
        assert_eq!(redact_url("http://host:1/a@b"), "http://host:1/a@b");
        assert_eq!(redact_url("http://127.0.0.1:8080"), "http://127.0.0.1:8080");
        let client = ServerClient::new("http://alice:s3cret@127.0.0.1:9", None).unwrap();
        assert_eq!(client.url(), "http://alice:***@127.0.0.1:9");
        assert!(!format!("{client:?}").contains("s3cret"));
        let error = client.health().unwrap_err().to_string();
        assert!(
            !error.contains("s3cret") && error.contains("alice:***@"),
            "{error}"
        );
        let bad = ServerClient::new("https://alice:s3cret@host", None).unwrap_err();
        assert!(!bad.to_string().contains("s3cret"), "{bad}");
    }
    use std::io::{Read, Write};
    use std::net::TcpListener;

    /// A server that answers a redirect to another address on 127.0.0.1 (a GET and a POST):
    /// toolrail does not follow it, says so, and the other address is never contacted.
    #[test]
    fn a_redirect_is_an_error_and_is_not_followed() {
        let elsewhere = TcpListener::bind("127.0.0.1:0").unwrap();
        elsewhere.set_nonblocking(true).unwrap();
        let target = elsewhere.local_addr().unwrap();
        let hostile = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", hostile.local_addr().unwrap());
        let server = std::thread::spawn(move || {
            for status in ["302 Found", "303 See Other"] {
                let (mut stream, _) = hostile.accept().unwrap();
                let mut buf = [0u8; 4096];
                let _ = stream.read(&mut buf).unwrap();
                let reply = format!(
                    "HTTP/1.1 {status}\r\nLocation: http://{target}/health\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                );
                stream.write_all(reply.as_bytes()).unwrap();
            }
        });
        let client = ServerClient::new(&url, None).unwrap();
        let got = client.health();
        assert!(
            matches!(got, Err(ServerError::Redirect { status: 302, .. })),
            "{got:?}"
        );
        let posted = client.apply_template(&serde_json::json!({"messages": []}));
        let Err(error) = posted else {
            panic!("{posted:?}")
        };
        assert!(
            error.to_string().contains("does not follow redirects"),
            "{error}"
        );
        server.join().unwrap();
        assert!(
            elsewhere.accept().is_err(),
            "the redirect's target was contacted"
        );
    }

    /// A hostile server on 127.0.0.1 for one streamed request: `reply` writes what it does
    /// after reading the request (and keeps the connection open as long as it runs).
    /// A GET (`/props`) is answered with an empty JSON object.
    fn hostile(reply: impl Fn(&mut std::net::TcpStream) + Send + Sync + 'static) -> String {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let reply = std::sync::Arc::new(reply);
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { return };
                let reply = std::sync::Arc::clone(&reply);
                std::thread::spawn(move || {
                    let mut buf = [0u8; 65536];
                    let n = stream.read(&mut buf).unwrap_or(0);
                    if buf[..n].starts_with(b"GET") {
                        let _ = stream.write_all(
                            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}",
                        );
                        return;
                    }
                    reply(&mut stream);
                });
            }
        });
        url
    }

    fn short_limits(url: &str) -> ServerClient {
        ServerClient::new(url, None)
            .unwrap()
            .with_timeouts(Timeouts {
                connect: Duration::from_secs(2),
                idle: Duration::from_secs(1),
                total: Duration::from_secs(20),
            })
    }

    fn request() -> CompletionRequest {
        CompletionRequest {
            prompt: Prompt::Text("hi".into()),
            grammar: None,
            json_schema: None,
            n_predict: 4,
            post_sampling_probs: false,
            sampling: SamplingFields::new(&crate::record::Sampling::default(), 0),
            chat: None,
        }
    }

    const HEADERS: &str = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n";

    /// Accepts and says nothing; answers headers and then nothing; pings for ever: each is cut
    /// at the idle limit with a message naming what the server did.
    #[test]
    fn a_stalling_server_is_cut_at_the_idle_limit_with_what_it_did() {
        let hold = |stream: &mut std::net::TcpStream| {
            let _ = stream;
            std::thread::sleep(Duration::from_secs(30));
        };
        let silent = hostile(hold);
        let got =
            short_limits(&silent).stream_completion(&request(), |_| ControlFlow::Continue(()));
        let message = got.unwrap_err().to_string();
        assert!(message.contains("sent nothing for 1 s"), "{message}");

        let headers_only = hostile(move |stream| {
            stream.write_all(HEADERS.as_bytes()).unwrap();
            stream.flush().unwrap();
            std::thread::sleep(Duration::from_secs(30));
        });
        let got = short_limits(&headers_only)
            .stream_completion(&request(), |_| ControlFlow::Continue(()));
        let message = got.unwrap_err().to_string();
        assert!(message.contains("sent nothing for 1 s"), "{message}");

        let pings = hostile(move |stream| {
            let _ = stream.write_all(HEADERS.as_bytes());
            for _ in 0..200 {
                if stream.write_all(b":\n\n").is_err() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        });
        let got = short_limits(&pings).stream_completion(&request(), |_| ControlFlow::Continue(()));
        let message = got.unwrap_err().to_string();
        assert!(
            message.contains("sent only keep-alive pings for 1 s"),
            "{message}"
        );
    }

    /// A server that ignores `n_predict` and streams tokens without end: the run stops reading
    /// a few tokens past the limit and ends with an error saying why.
    #[test]
    fn a_server_that_ignores_n_predict_is_not_read_without_end() {
        let url = hostile(|stream| {
            let _ = stream.write_all(HEADERS.as_bytes());
            for _ in 0..100_000 {
                let chunk = b"data: {\"content\":\"a\",\"tokens\":[64],\"stop\":false}\n\n";
                if stream.write_all(chunk).is_err() {
                    return;
                }
            }
        });
        let (tokens, stop) = run_to_end(&url, None);
        assert!(tokens <= 4 + 17, "{tokens} tokens read");
        let crate::record::Stop::Error { message } = stop else {
            panic!("{stop:?}")
        };
        assert!(message.contains("it ignores the limit"), "{message}");
    }

    /// The run's request for the hostile-server tests: 4 tokens, no grammar.
    fn run_request() -> crate::worker::RunRequest {
        crate::worker::RunRequest {
            id: 7,
            prompt: "hi".into(),
            grammar: None,
            schema: None,
            engine: crate::worker::EngineKind::None,
            compare: Vec::new(),
            sampling: crate::record::Sampling {
                max_tokens: 4,
                ..Default::default()
            },
            start_paused: false,
            show: 2,
            context: None,
            threads: None,
            beside_window: false,
            compute: Default::default(),
            prefix: Vec::new(),
            reuse_cache: false,
            gate: None,
        }
    }

    /// Runs [`run_request`] on the server at `url` (no post-sampling request) to its end: the
    /// tokens it streamed and how it stopped.
    fn run_to_end(url: &str, vocab: Option<crate::Model>) -> (u32, crate::record::Stop) {
        let worker = ServerWorker::spawn(short_limits(url), vocab, std::sync::Arc::new(|| {}));
        worker.set_options(ServerOptions {
            post_sampling: false,
            ..ServerOptions::default()
        });
        assert!(worker.send(crate::worker::Command::Start(Box::new(run_request()))));
        let mut tokens = 0;
        let stop = loop {
            let event = worker
                .events()
                .recv_timeout(Duration::from_secs(600))
                .expect("the run ends");
            match event.event {
                crate::worker::Event::Token(_) => tokens += 1,
                crate::worker::Event::Done { stop, .. } => break stop,
                _ => {}
            }
        };
        (tokens, stop)
    }

    /// A token id outside the local vocabulary is neither followed nor dropped: the run ends
    /// with an error naming the id, what was recorded before it kept.
    #[test]
    fn a_token_id_outside_the_vocabulary_ends_the_run_naming_it() {
        let Some(path) = toolrail_testkit::model() else {
            return;
        };
        let vocab = crate::Model::open(&path).unwrap();
        let url = hostile(|stream| {
            let _ = stream.write_all(HEADERS.as_bytes());
            let _ =
                stream.write_all(b"data: {\"content\":\"a\",\"tokens\":[64],\"stop\":false}\n\n");
            let _ = stream
                .write_all(b"data: {\"content\":\"?\",\"tokens\":[4000000000],\"stop\":false}\n\n");
            let _ = stream.write_all(b"data: {\"content\":\"\",\"stop\":true}\n\n");
        });
        let (tokens, stop) = run_to_end(&url, Some(vocab));
        assert_eq!(tokens, 1, "the token before the bad id is kept");
        let crate::record::Stop::Error { message } = stop else {
            panic!("{stop:?}")
        };
        assert!(
            message.contains("token id 4000000000, which is not in the local vocabulary"),
            "{message}"
        );
    }
}
