//! toolrail's server engine against a real llama-server b11434 (the llama.cpp toolrail links),
//! started on 127.0.0.1 with the test model: connection and props, API key, a grammar run
//! token for token against the in-process engine with the live check clean, the server's own
//! errors, cancel, and a server killed mid-stream.

use std::ops::ControlFlow;
use std::sync::Arc;
use std::time::Duration;

use toolrail_llm::record::{Stop, TokenRecord};
use toolrail_llm::server::{
    Chunk, CompletionRequest, Prompt, RequestKind, ServerClient, ServerError, ServerOptions,
    ServerWorker, StreamEnd,
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
            Event::Amended(t) => {
                let i = t.index as usize;
                tokens[i] = *t;
            }
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
    // after the server's sampling chain: greedy keeps exactly the chosen token, probability 1
    for t in &theirs {
        assert_eq!(t.sampled.len(), 1, "token {}: {:?}", t.index, t.sampled);
        assert_eq!((t.sampled[0].id, t.sampled[0].probability), (t.id, 1.0));
        assert!(
            t.disagreements.is_empty(),
            "token {}: {:?}",
            t.index,
            t.disagreements
        );
    }
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
    // the server's grammar (echoed) against toolrail's, within the candidates returned: the
    // loose grammar allows candidates toolrail's forbids, at steps up to the flagged token
    let disagreeing: Vec<&TokenRecord> = tokens
        .iter()
        .filter(|r| !r.disagreements.is_empty())
        .collect();
    assert!(
        !disagreeing.is_empty(),
        "no step where the allowed sets differ: {output:?}"
    );
    assert!(disagreeing.iter().all(|r| r.index <= t.index));
    assert!(
        disagreeing
            .iter()
            .flat_map(|r| &r.disagreements)
            .any(|d| d.server_allows)
    );
    // the sampling chain (temperature 1.5, no top-k) kept several candidates at every step,
    // probabilities over what it kept, most likely first
    for r in &tokens {
        assert!(r.sampled.len() > 1, "token {}: {:?}", r.index, r.sampled);
        assert!(
            r.sampled
                .windows(2)
                .all(|w| w[0].probability >= w[1].probability)
        );
        assert!(r.sampled.iter().map(|c| c.probability).sum::<f32>() <= 1.0 + 1e-4);
    }
}

/// A run on any server worker with any options, collecting server-parsed calls and errors.
fn run_collecting(
    worker: &ServerWorker,
    req: RunRequest,
) -> (
    Vec<TokenRecord>,
    Stop,
    String,
    Option<Vec<serde_json::Value>>,
    Vec<String>,
) {
    worker.send(Command::Start(Box::new(req)));
    let mut tokens: Vec<TokenRecord> = Vec::new();
    let mut calls = None;
    let mut errors = Vec::new();
    loop {
        match next_event(worker.events()) {
            Event::Token(t) => tokens.push(*t),
            Event::Amended(t) => {
                let i = t.index as usize;
                tokens[i] = *t;
            }
            Event::ServerCalls(c) => calls = Some(c),
            Event::Error(e) => errors.push(e),
            Event::Done { stop, output, .. } => return (tokens, stop, output, calls, errors),
            _ => {}
        }
    }
}

#[test]
fn a_json_schema_request_is_converted_by_the_server_and_checked_against_toolrails_conversion() {
    let Some(server) = server() else { return };
    let Some(model) = model() else { return };
    let schema = serde_json::json!({
        "type": "object",
        "properties": {"city": {"type": "string", "maxLength": 12}, "days": {"type": "integer", "minimum": 1, "maximum": 7}},
        "required": ["city", "days"],
        "additionalProperties": false
    });
    let ours = toolrail_schema::schema_to_gbnf(&schema, &Default::default())
        .unwrap()
        .gbnf;
    let remote = ServerWorker::spawn_with(
        server.client(),
        Some(model.clone()),
        Arc::new(|| {}),
        ServerOptions {
            request: RequestKind::JsonSchema(schema.clone()),
            ..ServerOptions::default()
        },
    );
    let req = request(
        "The weather forecast for Paris for 3 days as JSON:",
        Some(&ours),
        EngineKind::Toolrail,
        60,
    );
    let (tokens, stop, output, _, errors) = run_collecting(&remote, req);
    assert_eq!(stop, Stop::EndOfGeneration, "{output:?} {errors:?}");
    let value: serde_json::Value = serde_json::from_str(&output).unwrap();
    assert!(
        value["city"].is_string() && value["days"].is_i64(),
        "{value}"
    );
    assert!(
        tokens
            .iter()
            .all(|t| t.flag.is_none() && t.stacks.is_some())
    );
    assert!(tokens.iter().all(|t| !t.sampled.is_empty()));
    // the server's own conversion differs in text from toolrail's, so the live check replayed
    // it: no message about it failing, and every disagreement names a returned candidate
    assert!(
        errors.iter().all(|e| !e.contains("live check")),
        "{errors:?}"
    );
    for t in &tokens {
        for d in &t.disagreements {
            assert!(t.before.iter().chain(&t.sampled).any(|c| c.id == d.id));
        }
    }
    let total: usize = tokens.iter().map(|t| t.disagreements.len()).sum();
    eprintln!(
        "json_schema run: {output}; {total} candidate disagreements with toolrail's conversion"
    );
}

#[test]
fn a_tools_request_streams_the_servers_template_run_and_its_parsed_calls() {
    let Some(server) = server() else { return };
    let Some(model) = model() else { return };
    let text = std::fs::read_to_string("../../sample_schemas/weather.json").unwrap();
    let tools = toolrail_tools::toolset::ToolSet::from_json_str(&text).unwrap();
    let openai: Vec<serde_json::Value> = tools
        .tools()
        .iter()
        .map(|t| serde_json::json!({"type": "function", "function": {"name": t.name, "description": t.description, "parameters": t.parameters}}))
        .collect();
    let kind = RequestKind::Tools {
        tools: openai,
        user: "What is the weather in Paris?".into(),
    };
    let remote = ServerWorker::spawn_with(
        server.client(),
        Some(model.clone()),
        Arc::new(|| {}),
        ServerOptions {
            request: kind.clone(),
            ..ServerOptions::default()
        },
    );
    let req = request("", None, EngineKind::None, 24);
    let (tokens, stop, output, calls, errors) = run_collecting(&remote, req);
    assert!(
        matches!(stop, Stop::EndOfGeneration | Stop::MaxTokens),
        "{stop:?} {errors:?}"
    );
    assert!(!tokens.is_empty() && tokens.iter().all(|t| !t.before.is_empty()));
    let joined: String = tokens.iter().map(|t| t.piece.as_str()).collect();
    assert_eq!(joined, output);
    // the server parsed its output for calls: none, because the test model's chat template
    // does not take tools (see below); the run says why instead of leaving an empty list
    let calls = calls.expect("the server's parsed calls are reported before Done");
    assert!(calls.is_empty(), "{calls:?}");
    assert!(
        errors.iter().any(|e| e
            .starts_with("no tool call parsed: the server's chat template does not take tools")
            && e.contains("chat format peg-native")),
        "{errors:?}"
    );
    // a grammar together with tools: the server's own 400, word for word
    let refusing = ServerWorker::spawn_with(
        server.client(),
        Some(model.clone()),
        Arc::new(|| {}),
        ServerOptions {
            request: kind,
            sent_grammar: Some("root ::= \"x\"".into()),
            ..ServerOptions::default()
        },
    );
    let (_, stop, _, _, _) = run_collecting(&refusing, request("", None, EngineKind::None, 8));
    match stop {
        Stop::Error { message } => assert!(
            message.contains("400")
                && message.contains("Cannot use custom grammar constraints with tools."),
            "{message}"
        ),
        other => panic!("expected the server's refusal, got {other:?}"),
    }
}

/// Why the test model under `tools` + `tool_choice: required` yields no parsed call on b11434:
/// its GGUF's chat template is a plain ChatML one that never renders `tools`, so llama.cpp's
/// chat code finds no tool-call format in it (`peg-native`), builds no grammar and no trigger,
/// and the prompt the server decodes holds no tool; not the lazy grammar, not the parser.
#[test]
fn the_test_models_template_takes_no_tools_so_the_server_builds_no_tool_grammar() {
    let Some(server) = server() else { return };
    let client = server.client();
    let props = client.props().unwrap();
    assert_eq!(props.supports_tools, Some(false), "{props:?}");
    let template = props.chat_template.clone().unwrap_or_default();
    assert!(
        template.contains("<|im_start|>") && !template.contains("tools"),
        "{template}"
    );
    let request = toolrail_llm::server::ChatRequest {
        messages: vec![toolrail_llm::server::ChatMessage {
            role: "user".into(),
            content: "What is the weather in Paris?".into(),
        }],
        tools: vec![serde_json::json!({"type": "function", "function": {
            "name": "get_weather",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
        }})],
        tool_choice: toolrail_llm::template::ToolChoice::Required,
        grammar: None,
        max_tokens: 8,
        sampling: toolrail_llm::server::SamplingFields {
            temperature: 0.0,
            top_k: 40,
            top_p: 0.95,
            min_p: 0.05,
            seed: 0,
            repeat_penalty: 1.0,
            repeat_last_n: 64,
            samplers: CompletionRequest::SAMPLERS.to_vec(),
            n_probs: 1,
            stream: true,
            cache_prompt: false,
            timings_per_token: true,
            sse_ping_interval: 1,
        },
        verbose: false,
    };
    let build = client.chat_build(&request).unwrap();
    assert!(
        build.prompt.contains("What is the weather in Paris?"),
        "{build:?}"
    );
    assert!(!build.prompt.contains("get_weather"), "{build:?}");
    assert_eq!(build.grammar, "", "{build:?}");
    assert!(build.grammar_triggers.is_empty(), "{build:?}");
    assert_eq!(build.chat_format.as_deref(), Some("peg-native"));
    let why = build.explain_no_call(&["get_weather"]).unwrap();
    assert!(why.contains("does not take tools"), "{why}");
    // a build with the tools in the prompt and a grammar explains nothing
    let healthy = toolrail_llm::server::ChatBuild {
        prompt: "… get_weather …".into(),
        grammar: "root ::= \"x\"".into(),
        ..build
    };
    assert_eq!(healthy.explain_no_call(&["get_weather"]), None);
}

fn plain(prompt: Vec<u32>, grammar: Option<&str>, n_predict: u32) -> CompletionRequest {
    CompletionRequest {
        prompt: Prompt::Tokens(prompt),
        grammar: grammar.map(str::to_owned),
        json_schema: None,
        n_predict,
        post_sampling_probs: false,
        chat: None,
        sampling: toolrail_llm::server::SamplingFields {
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
        },
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

/// A `tools` run on a server with a tool-calling template (Gemma 4, `tool_choice: required`: the
/// call starts at once): the chat endpoint would stream no chunk for the tokens of the tool-call
/// text, so
/// the run goes to `/completion` with the server's own build; every token the server generated
/// is recorded (the count the server reports equals the records plus the end of generation),
/// the tool-call text is among them, and the server's parser reads the call from the output.
#[test]
fn a_template_run_on_the_server_records_every_token_of_the_tool_call_text() {
    let Some(model) = model() else { return };
    let Some(template) =
        toolrail_testkit::corpus("llama-cpp-chat/templates/google-gemma-4-31B-it.jinja")
    else {
        return;
    };
    let Some(server) = llama_server::try_start(
        &model_path().unwrap(),
        &[
            std::ffi::OsStr::new("--chat-template-file"),
            template.as_os_str(),
        ],
    )
    .unwrap() else {
        return;
    };
    let text = std::fs::read_to_string("../../sample_schemas/weather.json").unwrap();
    let tools = toolrail_tools::toolset::ToolSet::from_json_str(&text).unwrap();
    let remote = ServerWorker::spawn_with(
        server.client(),
        Some(model.clone()),
        Arc::new(|| {}),
        ServerOptions {
            request: RequestKind::Tools {
                tools: tools.client_tools(),
                user: "What is the weather in Paris?".into(),
            },
            post_sampling: false,
            ..ServerOptions::default()
        },
    );
    let req = request("", None, EngineKind::None, 96);
    remote.send(Command::Start(Box::new(req)));
    let mut tokens = Vec::new();
    let mut calls = None;
    let mut errors = Vec::new();
    let (stop, totals, output) = loop {
        match next_event(remote.events()) {
            Event::Token(t) => tokens.push(*t),
            Event::ServerCalls(c) => calls = Some(c),
            Event::Error(e) => errors.push(e),
            Event::Done {
                stop,
                totals,
                output,
            } => break (stop, totals, output),
            _ => {}
        }
    };
    assert!(
        matches!(stop, Stop::EndOfGeneration | Stop::MaxTokens),
        "{stop:?} {errors:?}"
    );
    let generated = totals.server_tokens.expect("the server's count");
    let eog = u64::from(stop == Stop::EndOfGeneration);
    assert_eq!(
        tokens.len() as u64 + eog,
        generated,
        "records vs the server's tokens_predicted; {errors:?}\n{output}"
    );
    // the tool-call text, token by token (the chat endpoint streams none of it)
    assert!(
        output.starts_with("<|tool_call>call:get_weather{"),
        "{output}"
    );
    assert!(errors.is_empty(), "{errors:?}");
    assert!(tokens.len() > 8, "{} tokens: {output}", tokens.len());
    let joined: String = tokens.iter().map(|t| t.piece.as_str()).collect();
    assert_eq!(joined, output);
    let calls = calls.expect("the parsed calls");
    assert_eq!(calls.len(), 1, "{calls:?}\n{output}");
    assert_eq!(calls[0]["name"], "get_weather", "{calls:?}");
}
