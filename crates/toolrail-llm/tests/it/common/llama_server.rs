//! A real llama-server b11434 for the tests (built by `scripts/build-llama-server.sh`, cached
//! under `~/.cache/toolrail/llama-server/b11434/`), started on 127.0.0.1 with the test model and
//! killed when the guard drops. Missing (found by `toolrail_testkit::llama_server`): a failure
//! under `CI=true`, otherwise a skip that says how to build it.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use toolrail_llm::server::ServerClient;

/// The API key the test servers require.
pub const API_KEY: &str = "toolrail-test-key";

/// A running server; killed (by its own pid) on drop, also when a test panics.
pub struct LlamaServer {
    child: Child,
    /// `http://127.0.0.1:PORT`.
    pub url: String,
    /// The server's last stderr lines (grammar parse errors appear only there).
    pub log: Arc<Mutex<Vec<String>>>,
}

impl LlamaServer {
    /// A client with the right key.
    pub fn client(&self) -> ServerClient {
        ServerClient::new(&self.url, Some(API_KEY.into())).unwrap()
    }

    /// Kills the server now (a "server killed mid-stream" test).
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// The server's stderr so far.
    pub fn log_text(&self) -> String {
        self.log.lock().map(|l| l.join("\n")).unwrap_or_default()
    }
}

impl Drop for LlamaServer {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Starts llama-server with the test model, or None (skip) when the binary or the model is
/// missing outside CI.
pub fn start(model: &Path) -> Option<LlamaServer> {
    match try_start(model, &[]) {
        Ok(server) => server,
        Err(log) => panic!("{log}"),
    }
}

/// Starts llama-server with the test model and `extra` arguments (e.g. `--chat-template-file`):
/// Ok(None) to skip as [`start`]; Err with the server's log when it exits before listening.
pub fn try_start(model: &Path, extra: &[&std::ffi::OsStr]) -> Result<Option<LlamaServer>, String> {
    let Some(bin) = toolrail_testkit::llama_server() else {
        return Ok(None);
    };
    let cache = tempfile::tempdir().unwrap();
    let mut command = Command::new(&bin);
    command
        .args(["-m"])
        .arg(model)
        .args([
            "--alias",
            "gemma-3-270m",
            "--host",
            "127.0.0.1",
            "--port",
            "0",
            "-c",
            "2048",
            "-np",
            "1",
            "-t",
            "1",
            "-tb",
            "1",
            "--poll",
            "0",
            "--no-warmup",
            "--offline",
            "--cache-ram",
            "0",
        ])
        .args(extra)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("LLAMA_API_KEY", API_KEY)
        .env("LLAMA_CACHE", cache.path())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let mut child = command.spawn().expect("llama-server starts");
    let stderr = child.stderr.take().unwrap();
    let log = Arc::new(Mutex::new(Vec::new()));
    let (tx, rx) = mpsc::channel();
    let lines = Arc::clone(&log);
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if let Some(at) = line.find("listening on http://") {
                let url = line[at + "listening on ".len()..]
                    .split_whitespace()
                    .next()
                    .unwrap_or_default()
                    .to_owned();
                let _ = tx.send(url);
            }
            if let Ok(mut l) = lines.lock() {
                l.push(line);
                if l.len() > 400 {
                    l.remove(0);
                }
            }
        }
    });
    let mut server = LlamaServer {
        child,
        url: String::new(),
        log,
    };
    for _ in 0..120 {
        if let Ok(url) = rx.recv_timeout(Duration::from_millis(500)) {
            server.url = url;
            break;
        }
        if let Ok(Some(status)) = server.child.try_wait() {
            return Err(format!(
                "llama-server exited ({status}) before listening:\n{}",
                server.log_text()
            ));
        }
    }
    assert!(
        !server.url.is_empty(),
        "llama-server did not start in 60 s:\n{}",
        server.log_text()
    );
    std::mem::forget(cache); // the server may still write there; the OS cleans /tmp
    Ok(Some(server))
}
