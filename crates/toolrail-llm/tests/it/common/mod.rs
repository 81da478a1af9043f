//! Shared by the tests that need the real test model.

use std::path::PathBuf;
use std::sync::OnceLock;
use std::time::Instant;

/// A real llama-server for the server-engine tests.
pub mod llama_server;
/// Mask comparison helpers (not every test module uses them).
pub mod masks;

use toolrail_llm::Model;

/// The test model's path. Absent: a failure when `CI=true`, otherwise `None` after saying how
/// to fetch it.
pub fn model_path() -> Option<PathBuf> {
    toolrail_testkit::model()
}

/// The layers the shared test model puts on the GPU: `TOOLRAIL_TEST_GPU_LAYERS` (the suite's
/// Vulkan pass sets 999, so that the generation tests run on the GPU), else 0.
pub fn gpu_layers() -> u32 {
    std::env::var("TOOLRAIL_TEST_GPU_LAYERS")
        .ok()
        .map(|v| {
            v.trim()
                .parse()
                .unwrap_or_else(|_| panic!("TOOLRAIL_TEST_GPU_LAYERS={v:?} is no number"))
        })
        .unwrap_or(0)
}

/// The test model, loaded once per test binary (with [`gpu_layers`] on the GPU). Absent: a
/// failure when `CI=true`, otherwise `None` after saying how to fetch it.
pub fn model() -> Option<&'static Model> {
    static MODEL: OnceLock<Option<Model>> = OnceLock::new();
    MODEL
        .get_or_init(|| {
            let path = model_path()?;
            let started = Instant::now();
            let spec = toolrail_llm::ModelSpec {
                gpu_layers: gpu_layers(),
                ..toolrail_llm::ModelSpec::from_path(&path)
            };
            let model = Model::load(spec, |_| true).expect("the test model loads");
            eprintln!("test model on {}", model.info().placement.summary());
            eprintln!(
                "model load: {:.0} ms",
                started.elapsed().as_secs_f64() * 1e3
            );
            Some(model)
        })
        .as_ref()
}

/// The weather sample's tool-call grammar (openai envelope) and a generic prompt asking for the
/// weather in Oslo: the run several tests compare across engines.
pub fn weather_prompt_and_grammar() -> (String, String) {
    use toolrail_tools::grammar::{GrammarOptions, tool_call_grammar};
    use toolrail_tools::prompt::{PromptFamily, build_prompt};
    use toolrail_tools::toolset::ToolSet;
    let text = std::fs::read_to_string(toolrail_testkit::repo_path("sample_schemas/weather.json"))
        .unwrap();
    let tools = ToolSet::from_json_str(&text).unwrap();
    let grammar = tool_call_grammar(&tools, &GrammarOptions::default())
        .unwrap()
        .text;
    let values: Vec<serde_json::Value> = tools
        .tools()
        .iter()
        .map(|t| serde_json::json!({"name": t.name, "description": t.description, "parameters": t.parameters}))
        .collect();
    let prompt = build_prompt(
        PromptFamily::Generic,
        toolrail_tools::envelope::Format::OpenAi,
        &values,
        "What is the weather in Oslo tomorrow?",
        None,
    )
    .unwrap();
    (prompt, grammar)
}

/// A run request as the model tests make it: run 1, greedy defaults, `max_tokens`, 5 candidates,
/// a 1024-token context and one decoding thread (tests run in parallel on 2 cores; one thread
/// each avoids ggml's spin-waits).
pub fn run_request(
    prompt: &str,
    grammar: Option<&str>,
    engine: toolrail_llm::worker::EngineKind,
    max_tokens: u32,
) -> toolrail_llm::worker::RunRequest {
    toolrail_llm::worker::RunRequest {
        id: 1,
        prompt: prompt.into(),
        grammar: grammar.map(str::to_string),
        schema: None,
        engine,
        compare: Vec::new(),
        sampling: toolrail_llm::record::Sampling {
            max_tokens,
            ..Default::default()
        },
        start_paused: false,
        show: 5,
        context: Some(1024),
        threads: Some(1),
        beside_window: false,
        compute: Default::default(),
        prefix: Vec::new(),
        reuse_cache: false,
        gate: None,
    }
}

/// The templates of `../shared/corpus/llama-cpp-chat/templates/` (name, path), sorted by name;
/// missing: a failure under `CI=true`, otherwise None (a skip).
pub fn corpus_templates() -> Option<Vec<(String, PathBuf)>> {
    let dir = toolrail_testkit::corpus("llama-cpp-chat/templates")?;
    let mut out: Vec<(String, PathBuf)> = std::fs::read_dir(&dir)
        .expect("corpus folder readable")
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "jinja"))
        .map(|p| {
            let name = p
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default();
            (name, p)
        })
        .collect();
    out.sort();
    assert!(
        out.len() >= 70,
        "expected the 71 templates, found {}",
        out.len()
    );
    Some(out)
}
