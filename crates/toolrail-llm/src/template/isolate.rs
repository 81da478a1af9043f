//! llama.cpp's template code in a process of its own.
//!
//! llama.cpp's Jinja engine and its output parser recurse without a depth limit and run without a
//! step or memory budget: a chat template with a macro calling itself, 10,000 nested `{% if %}`
//! or 100,000 nested parentheses overflows the stack and aborts the process; `range(10**9)` or
//! `'x' * 10**8` runs for minutes. A GGUF carries its template, so such a model would take down
//! every program that reads it, the app at every start. A program that names a worker with
//! [`run_templates_in`] (toolrail's binary names itself, with its hidden `template-worker`
//! subcommand) has every template operation run there instead: a crash, an operation over
//! [`OPERATION_LIMIT`], an answer over [`REPLY_LIMIT`] or memory over [`MEMORY_LIMIT`] becomes an
//! [`IsolationError`] saying what happened, and the next operation starts a fresh worker. Without
//! a worker (tests, library users) the code runs in this process, as before.
//!
//! The protocol is one JSON line per request on the worker's standard input and one per reply on
//! its standard output ([`Request`], [`Reply`]).

use std::ffi::OsString;
use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

use serde::{Deserialize, Serialize};

pub use super::error::IsolationError;
use super::error::TemplateError;
use super::native::{Native, Opening, native_grammar_loads, native_parse, native_trigger_search};

/// The longest one template operation (opening a template, building a request, parsing an
/// output) may run in a worker before it is stopped. Real templates take milliseconds; a
/// 260-tool catalog about a second.
pub const OPERATION_LIMIT: Duration = Duration::from_secs(10);

/// The most heap a worker may hold (on Unix, its `RLIMIT_DATA`): above it llama.cpp's
/// allocations fail and the operation is refused.
pub const MEMORY_LIMIT: u64 = 1 << 30;

/// The longest reply a worker may send (a prompt or grammar of this size is not a request any
/// server takes).
pub const REPLY_LIMIT: usize = 256 << 20;

/// The stack of the worker's thread that runs llama.cpp: deeper than a program thread's (2–8
/// MiB), so real templates never meet it, and small enough that a recursion without end ends
/// quickly.
const WORKER_STACK: usize = 64 << 20;

/// The last bytes of a worker's standard error kept to say how it ended.
const STDERR_TAIL: usize = 4096;

/// How to start a template worker: a program and its arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerCommand {
    /// The program (toolrail's binary: `std::env::current_exe()`).
    pub program: PathBuf,
    /// Its arguments (toolrail's hidden `template-worker` subcommand).
    pub args: Vec<OsString>,
}

static WORKER: OnceLock<WorkerCommand> = OnceLock::new();

/// Runs every later template operation of this process in workers started with `command`,
/// which must serve [`serve_worker`]. The first call decides; returns whether this one did.
pub fn run_templates_in(command: WorkerCommand) -> bool {
    WORKER.set(command).is_ok()
}

/// The worker command, when the program named one.
pub(crate) fn worker() -> Option<&'static WorkerCommand> {
    WORKER.get()
}

/// One request to a worker.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub(crate) enum Request {
    /// Open the worker's template (its first request).
    Open {
        /// What to open.
        opening: Opening,
    },
    /// `toolrail_chat_apply`: the request as JSON text.
    Build { request: String },
    /// `toolrail_chat_sampler_check`: the sampler setup as JSON text.
    SamplerCheck { setup: String },
    /// `toolrail_chat_parse`: the parser's parameters as JSON text, and the output.
    Parse {
        params: String,
        text: String,
        partial: bool,
    },
    /// `toolrail_grammar_loads`.
    GrammarLoads { grammar: String },
    /// `toolrail_trigger_search`: the request as JSON text.
    TriggerSearch { request: String },
}

impl Request {
    /// Which part of llama.cpp the request runs, what it does, and what input makes it crash.
    fn describe(&self) -> (&'static str, &'static str, &'static str) {
        const ENGINE: &str = "template engine";
        const TEMPLATE_HINT: &str = "A template does this when it recurses without end (a macro \
             calling itself, a list that contains itself written with tojson) or nests deeper \
             than llama.cpp's stack allows (thousands of nested blocks or brackets)";
        match self {
            Request::Open { .. } => (ENGINE, "opening the chat template", TEMPLATE_HINT),
            Request::Build { .. } => (ENGINE, "applying the chat template", TEMPLATE_HINT),
            Request::SamplerCheck { .. } => (
                "sampler",
                "setting up the sampler with the template's grammar",
                "A grammar nested deeper than llama.cpp's stack allows does this",
            ),
            Request::Parse { .. } => (
                "output parser",
                "parsing the model's output",
                "An output nested deeper than llama.cpp's stack allows (arguments thousands of \
                 levels deep) does this",
            ),
            Request::GrammarLoads { .. } => (
                "grammar loader",
                "loading a grammar",
                "A grammar nested deeper than llama.cpp's stack allows does this",
            ),
            Request::TriggerSearch { .. } => (
                "trigger search",
                "timing the lazy grammar's trigger patterns",
                "A trigger pattern that makes std::regex recurse past the stack on a long \
                 output does this",
            ),
        }
    }
}

/// One reply from a worker.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Reply {
    /// Opened.
    Done,
    /// A text answer (JSON from the shim, or a refusal's text).
    Text(String),
    /// A yes/no answer.
    Flag(bool),
    /// llama.cpp refused, with its message and llama-server's HTTP status.
    Refused { message: String, http_status: u16 },
    /// llama.cpp could not allocate (over [`MEMORY_LIMIT`]).
    OutOfMemory,
    /// Another failure, in words.
    Failed(String),
}

/// The worker side: serves requests from standard input until it closes, with the heap limited
/// to [`MEMORY_LIMIT`] and llama.cpp on a thread of its own stack. Returns the process's exit
/// status (0 when its input ended).
pub fn serve_worker() -> i32 {
    limit_own_memory(MEMORY_LIMIT);
    let served = std::thread::Builder::new()
        .name("template-worker".to_owned())
        .stack_size(WORKER_STACK)
        .spawn(serve_requests);
    match served.map(JoinHandle::join) {
        Ok(Ok(Ok(()))) => 0,
        Ok(Ok(Err(e))) => {
            eprintln!("template worker: {e}");
            2
        }
        Ok(Err(_)) => 101,
        Err(e) => {
            eprintln!("template worker: cannot start its thread: {e}");
            2
        }
    }
}

/// Reads requests line by line and answers each.
fn serve_requests() -> std::io::Result<()> {
    let stdin = std::io::stdin();
    let mut stdout = std::io::stdout().lock();
    let mut opened: Option<Native> = None;
    for line in stdin.lock().lines() {
        let line = line?;
        let reply = match serde_json::from_str::<Request>(&line) {
            Ok(request) => answer(request, &mut opened),
            Err(e) => Reply::Failed(format!("a request toolrail's worker cannot read: {e}")),
        };
        let text = serde_json::to_string(&reply).map_err(std::io::Error::other)?;
        stdout.write_all(text.as_bytes())?;
        stdout.write_all(b"\n")?;
        stdout.flush()?;
    }
    Ok(())
}

/// Runs one request in this process.
fn answer(request: Request, opened: &mut Option<Native>) -> Reply {
    let result = match request {
        Request::Open { opening } => Native::open(&opening).map(|native| {
            *opened = Some(native);
            Reply::Done
        }),
        Request::Build { request } => match opened {
            Some(native) => native.build_json(&request).map(Reply::Text),
            None => return Reply::Failed("no template is open".to_owned()),
        },
        Request::SamplerCheck { setup } => match opened {
            Some(native) => native.sampler_check_json(&setup).map(Reply::Text),
            None => return Reply::Failed("no template is open".to_owned()),
        },
        Request::Parse {
            params,
            text,
            partial,
        } => native_parse(&params, &text, partial).map(Reply::Text),
        Request::GrammarLoads { grammar } => native_grammar_loads(&grammar).map(Reply::Flag),
        Request::TriggerSearch { request } => native_trigger_search(&request).map(Reply::Text),
    };
    match result {
        Ok(reply) => reply,
        Err(TemplateError::Llama { message, .. }) if message.contains("bad_alloc") => {
            Reply::OutOfMemory
        }
        Err(TemplateError::Llama {
            message,
            http_status,
        }) => Reply::Refused {
            message,
            http_status,
        },
        Err(e) => Reply::Failed(e.to_string()),
    }
}

/// Limits this process's heap (`RLIMIT_DATA`), so that llama.cpp's allocations fail above it.
#[cfg(unix)]
fn limit_own_memory(bytes: u64) {
    let limit = libc::rlimit {
        rlim_cur: bytes as libc::rlim_t,
        rlim_max: bytes as libc::rlim_t,
    };
    // SAFETY: setrlimit reads the struct passed by reference and changes only this process's
    // limit; a failure leaves the limit as it was (the time limit still holds).
    let _ = unsafe { libc::setrlimit(libc::RLIMIT_DATA, &limit) };
}

/// No per-process heap limit without `RLIMIT_DATA`: the time and reply limits still hold.
#[cfg(not(unix))]
fn limit_own_memory(_bytes: u64) {}

/// Why a worker's standard output ended a reply early.
enum ReadEnd {
    /// It closed: the worker ended.
    Closed,
    /// A reply longer than [`REPLY_LIMIT`].
    TooLarge,
}

/// A running worker.
struct Process {
    child: Child,
    stdin: ChildStdin,
    replies: Receiver<Result<Vec<u8>, ReadEnd>>,
    stderr: Arc<Mutex<Vec<u8>>>,
    stderr_reader: Option<JoinHandle<()>>,
}

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Process {
    /// Starts a worker.
    fn start(command: &WorkerCommand) -> Result<Process, IsolationError> {
        let start_error = |e: std::io::Error| IsolationError::Start {
            program: command.program.display().to_string(),
            error: e.to_string(),
        };
        let mut child = Command::new(&command.program)
            .args(&command.args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(start_error)?;
        let missing = || {
            start_error(std::io::Error::other(
                "its standard streams are not connected",
            ))
        };
        let stdin = child.stdin.take().ok_or_else(missing)?;
        let stdout = child.stdout.take().ok_or_else(missing)?;
        let mut stderr_pipe = child.stderr.take().ok_or_else(missing)?;
        let (send, replies) = mpsc::channel();
        std::thread::Builder::new()
            .name("template-replies".to_owned())
            .spawn(move || {
                let mut reader = BufReader::new(stdout);
                loop {
                    let mut line = Vec::new();
                    let limit = REPLY_LIMIT as u64 + 1;
                    let read = (&mut reader).take(limit).read_until(b'\n', &mut line);
                    let end = match read {
                        Ok(0) | Err(_) => Some(ReadEnd::Closed),
                        Ok(_) if line.len() > REPLY_LIMIT => Some(ReadEnd::TooLarge),
                        Ok(_) => None,
                    };
                    let stop = end.is_some();
                    if send.send(end.map_or(Ok(line), Err)).is_err() || stop {
                        return;
                    }
                }
            })
            .map_err(start_error)?;
        let stderr = Arc::new(Mutex::new(Vec::new()));
        let tail = Arc::clone(&stderr);
        let stderr_reader = std::thread::Builder::new()
            .name("template-stderr".to_owned())
            .spawn(move || {
                let mut chunk = [0u8; 4096];
                while let Ok(n) = stderr_pipe.read(&mut chunk) {
                    if n == 0 {
                        return;
                    }
                    let mut kept = tail.lock().unwrap_or_else(PoisonError::into_inner);
                    kept.extend_from_slice(&chunk[..n]);
                    let excess = kept.len().saturating_sub(STDERR_TAIL);
                    kept.drain(..excess);
                }
            })
            .map_err(start_error)?;
        Ok(Process {
            child,
            stdin,
            replies,
            stderr,
            stderr_reader: Some(stderr_reader),
        })
    }

    /// Sends `request` and waits for its reply, within [`OPERATION_LIMIT`]. An error leaves
    /// the worker ended.
    fn ask(&mut self, request: &Request) -> Result<Reply, IsolationError> {
        let (part, doing, hint) = request.describe();
        let line = serde_json::to_string(request)
            .map_err(|e| IsolationError::Failed(format!("a request toolrail cannot write: {e}")))?;
        let sent = self
            .stdin
            .write_all(line.as_bytes())
            .and_then(|()| self.stdin.write_all(b"\n"))
            .and_then(|()| self.stdin.flush());
        // a write that fails means the worker ended: its reply channel says how
        let received = match sent {
            Ok(()) => self.replies.recv_timeout(OPERATION_LIMIT),
            Err(_) => Err(RecvTimeoutError::Disconnected),
        };
        match received {
            Ok(Ok(bytes)) => match serde_json::from_slice(&bytes) {
                Ok(Reply::OutOfMemory) => Err(IsolationError::OutOfMemory {
                    part,
                    doing,
                    limit: MEMORY_LIMIT,
                }),
                Ok(reply) => Ok(reply),
                Err(e) => Err(IsolationError::Failed(format!(
                    "toolrail's template process answered what toolrail cannot read: {e}"
                ))),
            },
            Ok(Err(ReadEnd::TooLarge)) => Err(IsolationError::TooLarge {
                part,
                doing,
                limit: REPLY_LIMIT,
            }),
            Err(RecvTimeoutError::Timeout) => Err(IsolationError::TimedOut {
                part,
                doing,
                limit: OPERATION_LIMIT,
            }),
            Ok(Err(ReadEnd::Closed)) | Err(RecvTimeoutError::Disconnected) => {
                let status = self.child.wait().ok();
                if let Some(reader) = self.stderr_reader.take() {
                    let _ = reader.join();
                }
                let stderr = self.stderr.lock().unwrap_or_else(PoisonError::into_inner);
                let stderr = String::from_utf8_lossy(&stderr);
                if stderr.contains("memory allocation of") {
                    return Err(IsolationError::OutOfMemory {
                        part,
                        doing,
                        limit: MEMORY_LIMIT,
                    });
                }
                Err(IsolationError::Crashed {
                    part,
                    doing,
                    how: how_it_ended(status, &stderr),
                    hint,
                })
            }
        }
    }
}

/// How a worker ended, in words: its stack overflow, its signal or its exit code, with the last
/// line it wrote.
fn how_it_ended(status: Option<ExitStatus>, stderr: &str) -> String {
    if stderr.contains("has overflowed its stack") {
        return "it overflowed its stack".to_owned();
    }
    let last_line = stderr
        .lines()
        .rev()
        .map(str::trim)
        .find(|line| !line.is_empty())
        .map(|line| line.chars().take(200).collect::<String>());
    let ended = match status {
        None => "it ended".to_owned(),
        Some(status) => match (status.code(), signal_of(status)) {
            (Some(code), _) => format!("it ended with exit code {code}"),
            (None, Some(signal)) => format!("it was ended by signal {signal}"),
            (None, None) => "it ended".to_owned(),
        },
    };
    match last_line {
        Some(line) => format!("{ended}: {line}"),
        None => ended,
    }
}

/// The signal that ended a process, with its name where it is a common one.
#[cfg(unix)]
fn signal_of(status: ExitStatus) -> Option<String> {
    use std::os::unix::process::ExitStatusExt as _;
    let signal = status.signal()?;
    let name = match signal {
        6 => " (SIGABRT)",
        9 => " (SIGKILL)",
        11 => " (SIGSEGV)",
        _ => "",
    };
    Some(format!("{signal}{name}"))
}

/// No signals outside Unix.
#[cfg(not(unix))]
fn signal_of(_status: ExitStatus) -> Option<String> {
    None
}

/// The client side: one worker, started on first use (and again after a failure) and opened
/// with `opening`.
pub(crate) struct Worker {
    command: WorkerCommand,
    opening: Option<Opening>,
    process: Mutex<Option<Process>>,
}

impl std::fmt::Debug for Worker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Worker")
            .field("command", &self.command)
            .finish_non_exhaustive()
    }
}

impl Worker {
    /// A worker with `opening` open: started and opened now, so that a template that cannot
    /// be opened is an error here.
    pub(crate) fn open(command: WorkerCommand, opening: Opening) -> Result<Worker, TemplateError> {
        let worker = Worker {
            command,
            opening: Some(opening),
            process: Mutex::new(None),
        };
        worker.with_process(|_| Ok(()))?;
        Ok(worker)
    }

    /// Runs `request` and turns its reply into a result.
    pub(crate) fn call(&self, request: Request) -> Result<Reply, TemplateError> {
        self.with_process(|process| process.ask(&request).map_err(TemplateError::from))
            .and_then(reply_result)
    }

    /// Runs `body` with a started (and opened) worker; any failure ends the worker, so that
    /// the next call starts a fresh one.
    fn with_process<T>(
        &self,
        body: impl FnOnce(&mut Process) -> Result<T, TemplateError>,
    ) -> Result<T, TemplateError> {
        let mut slot = self.process.lock().unwrap_or_else(PoisonError::into_inner);
        if slot.is_none() {
            let mut process = Process::start(&self.command)?;
            if let Some(opening) = &self.opening {
                let opened = process.ask(&Request::Open {
                    opening: opening.clone(),
                })?;
                reply_result(opened)?;
            }
            *slot = Some(process);
        }
        let Some(process) = slot.as_mut() else {
            return Err(
                IsolationError::Failed("the template process did not start".to_owned()).into(),
            );
        };
        let result = body(process);
        if matches!(result, Err(TemplateError::Isolated(_))) {
            *slot = None;
        }
        result
    }
}

/// The worker every operation without a template uses (parsing an output, loading a grammar),
/// when the program named a worker command.
pub(crate) fn shared() -> Option<&'static Worker> {
    static SHARED: OnceLock<Option<Worker>> = OnceLock::new();
    SHARED
        .get_or_init(|| {
            worker().map(|command| Worker {
                command: command.clone(),
                opening: None,
                process: Mutex::new(None),
            })
        })
        .as_ref()
}

/// A reply as a result: llama.cpp's refusals and the worker's failures become errors.
fn reply_result(reply: Reply) -> Result<Reply, TemplateError> {
    match reply {
        Reply::Refused {
            message,
            http_status,
        } => Err(TemplateError::Llama {
            message,
            http_status,
        }),
        Reply::Failed(message) => Err(IsolationError::Failed(message).into()),
        // answered as an error by `Process::ask`, which knows what was being done
        Reply::OutOfMemory => {
            Err(IsolationError::Failed("llama.cpp ran out of memory".to_owned()).into())
        }
        reply => Ok(reply),
    }
}
