//! Fuzz target over chat template evaluation as toolrail runs it: the bytes are a chat template,
//! opened and applied to a one-tool request in toolrail's template worker (the `toolrail`
//! binary beside this one, or `$TOOLRAIL_BIN`), with llama.cpp's refusals located in the text.
//! A template that crashes llama.cpp, loops or grows without bound must come back as an error;
//! toolrail itself may not panic, abort or hang. (llama.cpp's own code runs in the worker, which
//! this process does not instrument: the coverage guiding the fuzzer is toolrail's.)
#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use toolrail_llm::template::isolate::WorkerCommand;
use toolrail_llm::template::{ChatTemplates, Placement, TemplateRequest};
use toolrail_tools::toolset::ToolSet;

fn setup() -> &'static (WorkerCommand, ToolSet) {
    static SETUP: OnceLock<(WorkerCommand, ToolSet)> = OnceLock::new();
    SETUP.get_or_init(|| {
        let program = std::env::var_os("TOOLRAIL_BIN").map_or_else(
            || {
                let exe = std::env::current_exe().expect("the fuzz binary's path");
                exe.with_file_name("toolrail")
            },
            Into::into,
        );
        assert!(program.exists(), "no toolrail binary at {}: build it or set TOOLRAIL_BIN", program.display());
        let tools = ToolSet::from_json_str(
            r#"[{"name": "get_weather", "description": "Weather.", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}]"#,
        )
        .expect("the fuzz tool set");
        (WorkerCommand { program, args: vec!["template-worker".into()] }, tools)
    })
}

fuzz_target!(|data: &[u8]| {
    let Ok(source) = std::str::from_utf8(data) else {
        return;
    };
    let (command, tools) = setup();
    let placement = Placement::Worker(command.clone());
    let Ok(templates) = ChatTemplates::from_source_placed(source, "<s>", "</s>", placement) else {
        return;
    };
    let request = TemplateRequest::for_tools(tools, "What is the weather in Paris?");
    if let Ok(result) = templates.apply(&request) {
        let _ = result.parse("<tool_call>{\"name\": \"get_weather\"}</tool_call>", false);
    }
});
