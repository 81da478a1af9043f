//! toolrail's server engine against a real llama-server b11434 (the llama.cpp toolrail links),
//! started on 127.0.0.1 with the test model: connection and props, API key, a grammar run
//! token for token against the in-process engine with the live check clean, the server's own
//! errors, cancel, and a server killed mid-stream.

use std::ops::ControlFlow;
use std::sync::Arc;
use std::time::Duration;

use toolrail_llm::record::{Stop, TokenRecord};
use toolrail_llm::server::{
    Chunk, CompletionRequest, Prompt, ServerClient, ServerError, ServerWorker, StreamEnd,
};
use toolrail_llm::worker::{Command, EngineKind, Event, RunRequest, Worker};

use crate::common::llama_server::{self, API_KEY, LlamaServer};
use crate::common::{model, model_path};

fn server() -> Option<LlamaServer> {
    llama_server::start(&model_path()?)
}

use crate::common::run_request as request;

/// Runs to the end on either worker; the tokens, the stop and the output.
fn run(
    send: impl Fn(Command) -> bool,
    recv: impl Fn() -> Event,
    req: RunRequest,
) -> (Vec<TokenRecord>, Stop, String) {
    send(Command::Start(Box::new(req)));
    let mut tokens = Vec::new();
    loop {
        match recv() {
            Event::Token(t) => tokens.push(*t),
            Event::Done { stop, output, .. } => return (tokens, stop, output),
            _ => {}
        }
    }
}

fn next_event(events: &crossbeam_channel::Receiver<toolrail_llm::worker::RunEvent>) -> Event {
    events
        .recv_timeout(Duration::from_secs(120))
        .expect("an event within 2 minutes")
        .event
}

#[test]
fn connects_and_reads_props_with_the_api_key() {
    let Some(server) = server() else { return };
    let client = server.client();
    client.health().unwrap();
    let props = client.props().unwrap();
    assert_eq!(props.build(), Some(11434), "{props:?}");
    assert_eq!(props.model_alias.as_deref(), Some("gemma-3-270m"));
    assert_eq!(props.n_ctx, Some(2048));
    // without the key: the server's own 401, said as such
    let anonymous = ServerClient::new(&server.url, None).unwrap();
    anonymous.health().unwrap(); // /health is public
    match anonymous.props() {
        Err(ServerError::Http { status: 401, .. }) => {}
        other => panic!("expected a 401, got {other:?}"),
    }
    let wrong = ServerClient::new(&server.url, Some(format!("{API_KEY}-wrong"))).unwrap();
    assert!(wrong.props().unwrap_err().to_string().contains("401"));
    // nothing listening: a clear "cannot reach"
    let gone = ServerClient::new("http://127.0.0.1:9", None).unwrap();
    assert!(
        gone.health()
            .unwrap_err()
            .to_string()
            .starts_with("cannot reach")
    );
    assert!(ServerClient::new("https://example.com", None).is_err());
}

#[test]
fn a_grammar_run_on_the_server_matches_the_in_process_engine_and_checks_clean() {
    let Some(server) = server() else { return };
    let Some(model) = model() else { return };
    let (prompt, grammar) = crate::common::weather_prompt_and_grammar();
    let local = Worker::spawn(model.clone(), Arc::new(|| {}));
    let (ours, stop_ours, out_ours) = run(
        |c| local.send(c),
        || next_event(local.events()),
        request(&prompt, Some(&grammar), EngineKind::Toolrail, 64),
    );
    let remote = ServerWorker::spawn(server.client(), Some(model.clone()), Arc::new(|| {}));
    let (theirs, stop_theirs, out_theirs) = run(
        |c| remote.send(c),
        || next_event(remote.events()),
        request(&prompt, Some(&grammar), EngineKind::Toolrail, 64),
    );
    let flagged: Vec<String> = theirs
        .iter()
        .filter_map(|t| t.flag.as_ref().map(|f| format!("token {}: {f}", t.index)))
        .collect();
    assert!(
        flagged.is_empty(),
        "the live check flagged tokens: {flagged:?}\nserver output {out_theirs:?}\nin-process {out_ours:?}"
    );
    assert!(theirs.iter().all(|t| t.stacks.is_some() && t.allowed > 0));
    assert!(
        theirs.iter().all(|t| !t.before.is_empty()),
        "candidates from the server"
    );
    let ids = |v: &[TokenRecord]| v.iter().map(|t| t.id).collect::<Vec<_>>();
    let first_difference = ids(&ours)
        .iter()
        .zip(ids(&theirs))
        .position(|(a, b)| *a != b);
    assert_eq!(
        first_difference, None,
        "in-process {out_ours:?} vs server {out_theirs:?}"
    );
    assert_eq!(ids(&ours), ids(&theirs));
    assert_eq!((stop_ours, out_ours), (stop_theirs, out_theirs));
}

#[test]
fn the_live_check_flags_tokens_a_looser_server_grammar_let_through() {
    let Some(server) = server() else { return };
    let Some(model) = model() else { return };
    let (prompt, grammar) = crate::common::weather_prompt_and_grammar();
    // the server enforces any JSON-ish text; toolrail checks against the tool-call grammar
    let loose = r#"root ::= "{" [^\x00]{0,60}"#.to_owned();
    let remote = ServerWorker::spawn_sending(
        server.client(),
        Some(model.clone()),
        Arc::new(|| {}),
        Some(loose),
    );
    let mut req = request(&prompt, Some(&grammar), EngineKind::Toolrail, 40);
    req.sampling.temperature = 1.5;
    req.sampling.top_k = 0;
    req.sampling.top_p = 1.0;
    req.sampling.min_p = 0.0;
    req.sampling.seed = 7;
    let (tokens, _, output) = run(|c| remote.send(c), || next_event(remote.events()), req);
    let flagged: Vec<&TokenRecord> = tokens.iter().filter(|t| t.flag.is_some()).collect();
    assert_eq!(
        flagged.len(),
        1,
        "one flag, then the check stops following: {output:?}"
    );
    let t = flagged[0];
    assert!(
        t.flag.as_deref().unwrap().contains("forbids"),
        "{:?}",
        t.flag
    );
    // the tokens before it carry stacks; the check stops following after it
    assert!(
        tokens[..t.index as usize]
            .iter()
            .all(|r| r.stacks.is_some())
    );
    assert!(
        tokens[t.index as usize + 1..]
            .iter()
            .all(|r| r.stacks.is_none())
    );
}

fn plain(prompt: Vec<u32>, grammar: Option<&str>, n_predict: u32) -> CompletionRequest {
    CompletionRequest {
        prompt: Prompt::Tokens(prompt),
        grammar: grammar.map(str::to_owned),
        json_schema: None,
        n_predict,
        temperature: 0.0,
        top_k: 40,
        top_p: 0.95,
        min_p: 0.05,
        seed: 0,
        repeat_penalty: 1.0,
        repeat_last_n: 64,
        samplers: CompletionRequest::SAMPLERS.to_vec(),
        n_probs: 3,
        stream: true,
        cache_prompt: false,
        timings_per_token: true,
        sse_ping_interval: 1,
    }
}

#[test]
fn the_servers_errors_and_its_grammar_echo_are_reported() {
    let Some(server) = server() else { return };
    let Some(model) = model() else { return };
    let client = server.client();
    let prompt = model.tokenize("Say yes:", true, true);
    // a grammar llama.cpp refuses: the server's 400, its message, the detail in its log
    let e = client
        .stream_completion(&plain(prompt.clone(), Some("root ::= (\"a\""), 4), |_| {
            ControlFlow::Continue(())
        })
        .unwrap_err();
    match &e {
        ServerError::Http {
            status: 400,
            message,
            ..
        } => {
            assert!(message.contains("grammar"), "{e}")
        }
        other => panic!("expected a 400, got {other:?}"),
    }
    // the final chunk echoes the grammar the server enforced
    let grammar = "root ::= \"yes\" | \"no\"";
    let mut chunks: Vec<Chunk> = Vec::new();
    let end = client
        .stream_completion(&plain(prompt, Some(grammar), 8), |c| {
            chunks.push(c.clone());
            ControlFlow::Continue(())
        })
        .unwrap();
    let StreamEnd::Final(last) = end else {
        panic!("not finished")
    };
    assert_eq!(last.grammar(), Some(grammar));
    let text: String = chunks.iter().map(|c| c.content.as_str()).collect();
    assert!(text == "yes" || text == "no", "{text:?}");
}

#[test]
fn cancel_stops_the_stream_and_a_killed_server_keeps_the_partial_run() {
    let Some(mut server) = server() else { return };
    let Some(model) = model() else { return };
    let remote = ServerWorker::spawn(server.client(), Some(model.clone()), Arc::new(|| {}));
    let long = request("Once upon a time", None, EngineKind::None, 200);
    remote.send(Command::Start(Box::new(long.clone())));
    let mut seen = 0;
    let stop = loop {
        match next_event(remote.events()) {
            Event::Token(_) => {
                seen += 1;
                if seen == 3 {
                    remote.send(Command::Cancel);
                }
            }
            Event::Done { stop, .. } => break stop,
            _ => {}
        }
    };
    assert_eq!(stop, Stop::Cancelled);
    assert!(seen < 200);
    // the slot is free again: a new short run is served
    let (tokens, stop, _) = run(
        |c| remote.send(c),
        || next_event(remote.events()),
        request("Once upon a time", None, EngineKind::None, 4),
    );
    assert_eq!((tokens.len(), stop), (4, Stop::MaxTokens));
    // killed mid-stream: the tokens so far are kept, the run ends with a clear error
    remote.send(Command::Start(Box::new(long)));
    let mut kept = 0;
    let (stop, output) = loop {
        match next_event(remote.events()) {
            Event::Token(_) => {
                kept += 1;
                if kept == 3 {
                    server.kill();
                }
            }
            Event::Done { stop, output, .. } => break (stop, output),
            _ => {}
        }
    };
    assert!(kept >= 3 && !output.is_empty());
    match stop {
        Stop::Error { message } => assert!(message.contains("stream"), "{message}"),
        other => panic!("expected an error, got {other:?}"),
    }
}
