//! The template path against a real llama-server b11434, template by template: for every chat
//! template of `../shared/corpus/llama-cpp-chat/templates/` (the server started with it, the test
//! model's vocabulary), BFCL-style tool sets as a client sends them (`"optional"` lists, no
//! top-level `"type"`, `dict` and `float` types) and each `tool_choice`, toolrail's prompt is
//! byte-identical to the server's `/apply-template`, every request the server refuses is refused
//! with its message and HTTP status, and a grammar the server's sampler cannot load is refused
//! as the server refuses it.

use std::ffi::OsStr;
use std::path::Path;

use serde_json::{Value, json};
use toolrail_llm::server::{ServerClient, ServerError};
use toolrail_llm::template::{ChatTemplates, TemplateError, TemplateRequest, ToolChoice};
use toolrail_tools::toolset::ToolSet;

use crate::common::llama_server;
use crate::common::model_path;

const USER: &str = "What is the weather in Paris, and find me a good bakery there.";

/// Tool sets as BFCL writes them: one the server accepts (its keys are not what toolrail reads:
/// `"optional"` lists, no top-level `"type"`), one it refuses on most templates (`dict`, `float`).
fn tool_sets() -> Vec<(&'static str, Value)> {
    vec![
        (
            "bfcl-accepted",
            json!([
                {"name": "get_weather", "description": "Current weather for a city.",
                 "parameters": {"properties": {
                     "city": {"type": "string", "description": "The city's name"},
                     "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
                   "required": ["city"], "optional": ["unit"]}},
                {"name": "search_places", "description": "Search places near a city.",
                 "parameters": {"type": "object", "properties": {
                     "query": {"type": "string"}, "limit": {"type": "integer"}},
                   "required": ["query"], "optional": []}}
            ]),
        ),
        (
            "bfcl-dict",
            json!([
                {"name": "calculate_area", "description": "Area of a circle.",
                 "parameters": {"type": "dict", "properties": {
                     "radius": {"type": "float", "description": "The radius"}},
                   "required": ["radius"]}}
            ]),
        ),
    ]
}

/// What a refusal looks like from either side: HTTP status and message.
fn ours(error: &TemplateError) -> (Option<u16>, String) {
    let message = error.server_message().unwrap_or_else(|| error.to_string());
    (error.http_status(), message)
}

fn theirs(error: &ServerError) -> (Option<u16>, String) {
    match error {
        ServerError::Http {
            status, message, ..
        } => (Some(*status), message.clone()),
        other => (None, other.to_string()),
    }
}

/// Compares one template with the server; returns the differences found and the number of
/// requests compared.
fn compare_template(model: &Path, name: &str, path: &Path) -> (Vec<String>, usize) {
    let source = std::fs::read_to_string(path).expect("template readable");
    let local = ChatTemplates::from_gguf(model, Some(&source));
    let started = llama_server::try_start(
        model,
        &[OsStr::new("--chat-template-file"), path.as_os_str()],
    );
    let (local, server) = match (local, started) {
        (Ok(local), Ok(Some(server))) => (local, server),
        (Err(_), Err(_)) => return (Vec::new(), 0), // both refuse the template
        (_, Ok(None)) => return (Vec::new(), 0),    // no server outside CI: skipped
        (Ok(_), Err(log)) => {
            return (
                vec![format!(
                    "{name}: toolrail loads the template, the server does not: {log}"
                )],
                0,
            );
        }
        (Err(e), Ok(Some(_))) => {
            return (
                vec![format!(
                    "{name}: the server loads the template, toolrail does not: {e}"
                )],
                0,
            );
        }
    };
    let client: ServerClient = server.client();
    let mut differences = Vec::new();
    let mut compared = 0;
    for (set_name, doc) in tool_sets() {
        let tools = ToolSet::from_value(&doc).expect("the tool set loads");
        for choice in [ToolChoice::Auto, ToolChoice::Required, ToolChoice::None] {
            let case = format!("{name} × {set_name} × {choice}");
            let mut request = TemplateRequest::for_tools(&tools, USER);
            request.tool_choice = choice.clone();
            let body = json!({
                "messages": request.messages,
                "tools": request.tools,
                "tool_choice": choice.to_openai(),
            });
            compared += 1;
            // The prompt, as /apply-template renders it (no grammar loaded there).
            match (local.build(&request), client.apply_template(&body)) {
                (Ok(built), Ok(prompt)) => {
                    if built.prompt != prompt {
                        differences.push(format!(
                            "{case}: prompts differ\n--- toolrail ---\n{}\n--- server ---\n{prompt}",
                            built.prompt
                        ));
                    }
                }
                (Err(e), Err(s)) => {
                    if ours(&e) != theirs(&s) {
                        differences.push(format!(
                            "{case}: refused differently: toolrail {:?}, server {:?}",
                            ours(&e),
                            theirs(&s)
                        ));
                    }
                    continue;
                }
                (Ok(_), Err(s)) => {
                    differences.push(format!(
                        "{case}: the server refuses ({:?}), toolrail builds",
                        theirs(&s)
                    ));
                    continue;
                }
                (Err(e), Ok(_)) => {
                    differences.push(format!(
                        "{case}: toolrail refuses ({:?}), the server renders",
                        ours(&e)
                    ));
                    continue;
                }
            }
            // The chat request itself: the server sets its sampler up with the grammar, then
            // generates one token (whose text its parser may then refuse with a 500: the request
            // ran, what the model wrote does not parse).
            let chat = client.chat_build_json(body.clone());
            let ran = match &chat {
                Ok(_) => true,
                Err(ServerError::Http {
                    status: 500,
                    message,
                    ..
                }) => message.starts_with("The model produced output that does not match"),
                Err(_) => false,
            };
            let applied = local.apply(&request);
            match (&applied, &chat) {
                (Ok(_), _) if ran => {}
                (Err(e), Err(s)) if ours(e) == theirs(s) => {}
                _ => differences.push(format!(
                    "{case}: the chat request: toolrail {:?}, server {:?}",
                    applied.as_ref().map(|_| "accepted").map_err(ours),
                    chat.as_ref().map(|_| "accepted").map_err(theirs)
                )),
            }
        }
    }
    (differences, compared)
}

/// Runs the templates whose index is `shard` modulo `of` (the shards run in parallel).
fn run_shard(shard: usize, of: usize) {
    let Some(model) = model_path() else { return };
    let Some(paths) = crate::common::corpus_templates() else {
        return;
    };
    if toolrail_testkit::llama_server().is_none() {
        return;
    }
    let mut differences = Vec::new();
    let mut compared = 0;
    for (name, path) in paths.iter().skip(shard).step_by(of) {
        let (found, n) = compare_template(&model, name, path);
        differences.extend(found);
        compared += n;
    }
    assert!(
        differences.is_empty(),
        "{} difference(s) with llama-server in {compared} requests:\n{}",
        differences.len(),
        differences.join("\n\n")
    );
    // every template of the shard was compared (none both refused in this corpus)
    let expected = paths.iter().skip(shard).step_by(of).count() * 6;
    assert_eq!(compared, expected, "requests compared");
}

#[test]
fn the_servers_prompts_and_refusals_match_on_every_corpus_template_first_half() {
    run_shard(0, 2);
}

#[test]
fn the_servers_prompts_and_refusals_match_on_every_corpus_template_second_half() {
    run_shard(1, 2);
}

/// A template whose calls are `<call>name key=value …</call>`: llama.cpp's automatic parser
/// builds a grammar llama.cpp cannot load (whatever the tools), so the server answers every
/// tools request of it with HTTP 400 "Failed to initialize samplers: failed to parse grammar";
/// toolrail refuses each the same way, and builds the same prompt.
#[test]
fn a_template_whose_parser_emits_an_unloadable_grammar_is_refused_as_the_server_refuses_it() {
    let Some(model) = model_path() else { return };
    if toolrail_testkit::llama_server().is_none() {
        return;
    }
    let path = toolrail_testkit::repo_path("tests/fixtures/key-value-calls.jinja");
    let (differences, compared) = compare_template(&model, "key-value-calls", &path);
    assert!(differences.is_empty(), "{}", differences.join("\n\n"));
    assert_eq!(compared, 6);
    let source = std::fs::read_to_string(&path).unwrap();
    let local = ChatTemplates::from_gguf(&model, Some(&source)).unwrap();
    let tools = ToolSet::from_value(&tool_sets()[0].1).unwrap();
    let refused = local.apply(&TemplateRequest::for_tools(&tools, USER));
    assert!(
        matches!(
            &refused,
            Err(TemplateError::SamplerRefused { what, .. }) if what == "failed to parse grammar"
        ),
        "{refused:?}"
    );
}
