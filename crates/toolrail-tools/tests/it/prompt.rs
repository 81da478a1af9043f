//! Prompt builders: full expected strings per family. The Llama 3.1 system prompt is compared
//! with seed 004's "Expected System Prompt Output", copied verbatim.

use serde_json::{Value, json};
use toolrail_tools::envelope::Format;
use toolrail_tools::prompt::{
    PromptError, PromptFamily, build_prompt, gemma_prompt, generic_prompt, hermes_prompt,
    llama31_prompt,
};

/// The tools of seed 004, as OpenAI function objects.
fn seed004_tools() -> Vec<Value> {
    vec![
        json!({
            "type": "function",
            "function": {
                "name": "search_memory",
                "description": "Search historical conversation context for relevant information that may have slid out of the current context window",
                "parameters": {
                    "type": "object",
                    "properties": {
                        "query": {"type": "string", "description": "The search query to find relevant information"},
                        "max_results": {"type": "string", "description": "Maximum number of results to return"}
                    },
                    "required": ["query"]
                }
            }
        }),
        json!({
            "name": "get_fact",
            "description": "Retrieve a specific piece of information that was previously stored...",
            "parameters": {
                "type": "object",
                "properties": {
                    "key": {"type": "string", "description": "Identifier of the fact to retrieve"}
                },
                "required": ["key"]
            }
        }),
        json!({
            "name": "set_fact",
            "description": "Store a specific piece of information for later retrieval...",
            "parameters": {
                "type": "object",
                "properties": {
                    "key": {"type": "string", "description": "Identifier for the fact to store"},
                    "value": {"type": "string", "description": "Content of the fact to store"}
                },
                "required": ["key", "value"]
            }
        }),
    ]
}

fn weather_tool() -> Vec<Value> {
    vec![json!({
        "name": "get_weather",
        "description": "Current weather for a city.",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string"},
                "days": {"type": "integer"},
                "hours": {"type": "array", "items": {"type": "integer"}},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"], "default": "celsius"}
            },
            "required": ["city"]
        }
    })]
}

/// Seed 004's expected Llama 3.1 system prompt, verbatim.
const SEED004_SYSTEM: &str = r#"Environment: ipython

When you receive a tool call response, use the output to format an answer to the original user question.

Given the following functions, please respond with a JSON for a function call with its proper arguments that best answers the given prompt.

Respond in the format {"name": function name, "parameters": dictionary of argument name and its value}. Do not use variables.

{
  "type": "function",
  "function": {
    "name": "search_memory",
    "description": "Search historical conversation context for relevant information that may have slid out of the current context window",
    "parameters": {
      "type": "object",
      "properties": {
        "query": {
          "type": "string",
          "description": "The search query to find relevant information"
        },
        "max_results": {
          "type": "string",
          "description": "Maximum number of results to return"
        }
      },
      "required": ["query"]
    }
  }
}

{
  "type": "function",
  "function": {
    "name": "get_fact",
    "description": "Retrieve a specific piece of information that was previously stored...",
    "parameters": {
      "type": "object",
      "properties": {
        "key": {
          "type": "string",
          "description": "Identifier of the fact to retrieve"
        }
      },
      "required": ["key"]
    }
  }
}

{
  "type": "function",
  "function": {
    "name": "set_fact",
    "description": "Store a specific piece of information for later retrieval...",
    "parameters": {
      "type": "object",
      "properties": {
        "key": {
          "type": "string",
          "description": "Identifier for the fact to store"
        },
        "value": {
          "type": "string",
          "description": "Content of the fact to store"
        }
      },
      "required": ["key", "value"]
    }
  }
}"#;

#[test]
fn llama31_matches_seed004_exactly() {
    let prompt = llama31_prompt(
        Format::Llama3,
        &seed004_tools(),
        "What did I say about Rome?",
        None,
    );
    let expected = format!(
        "<|start_header_id|>system<|end_header_id|>\n\n{SEED004_SYSTEM}<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nWhat did I say about Rome?<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"
    );
    assert_eq!(prompt, Ok(expected));
}

#[test]
fn llama31_with_system_text_and_nested_schema() {
    let prompt = llama31_prompt(
        Format::Llama3,
        &weather_tool(),
        "Weather in Oslo?",
        Some("Answer briefly."),
    );
    let expected = r#"<|start_header_id|>system<|end_header_id|>

Environment: ipython

Answer briefly.

When you receive a tool call response, use the output to format an answer to the original user question.

Given the following functions, please respond with a JSON for a function call with its proper arguments that best answers the given prompt.

Respond in the format {"name": function name, "parameters": dictionary of argument name and its value}. Do not use variables.

{
  "type": "function",
  "function": {
    "name": "get_weather",
    "description": "Current weather for a city.",
    "parameters": {
      "type": "object",
      "properties": {
        "city": {
          "type": "string"
        },
        "days": {
          "type": "integer"
        },
        "hours": {
          "type": "array",
          "items": {
            "type": "integer"
          }
        },
        "unit": {
          "type": "string",
          "enum": ["celsius", "fahrenheit"],
          "default": "celsius"
        }
      },
      "required": ["city"]
    }
  }
}<|eot_id|><|start_header_id|>user<|end_header_id|>

Weather in Oslo?<|eot_id|><|start_header_id|>assistant<|end_header_id|>

"#;
    assert_eq!(prompt.as_deref(), Ok(expected));
}

#[test]
fn hermes_full_prompt() {
    let prompt = hermes_prompt(
        Format::Hermes,
        &weather_tool(),
        "Weather in Oslo?",
        Some("You are Qwen."),
    );
    let expected = r#"<|im_start|>system
You are Qwen.

# Tools

You may call one or more functions to assist with the user query.

You are provided with function signatures within <tools></tools> XML tags:
<tools>
{"type": "function", "function": {"name": "get_weather", "description": "Current weather for a city.", "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}, "hours": {"type": "array", "items": {"type": "integer"}}, "unit": {"type": "string", "enum": ["celsius", "fahrenheit"], "default": "celsius"}}, "required": ["city"]}}}
</tools>

For each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:
<tool_call>
{"name": <function-name>, "arguments": <args-json-object>}
</tool_call><|im_end|>
<|im_start|>user
Weather in Oslo?<|im_end|>
<|im_start|>assistant
"#;
    assert_eq!(prompt.as_deref(), Ok(expected));
}

#[test]
fn hermes_without_system_lists_every_tool() {
    let prompt = hermes_prompt(Format::Hermes, &seed004_tools(), "hi", None).unwrap_or_default();
    assert!(prompt.starts_with("<|im_start|>system\n# Tools\n\n"));
    let tools_block: Vec<&str> = prompt
        .lines()
        .skip_while(|l| *l != "<tools>")
        .skip(1)
        .take_while(|l| *l != "</tools>")
        .collect();
    assert_eq!(tools_block.len(), 3);
    assert!(
        tools_block[0]
            .starts_with(r#"{"type": "function", "function": {"name": "search_memory", "#)
    );
    assert!(
        tools_block[0].contains(r#""properties": {"query": {"#),
        "required first"
    );
}

#[test]
fn gemma_full_prompt() {
    let prompt = gemma_prompt(
        Format::Gemma,
        &weather_tool(),
        "Weather in Oslo?",
        Some("Be terse."),
    );
    let expected = r#"<start_of_turn>user
Be terse.

You have access to the following tools:

{"name": "get_weather", "description": "Current weather for a city.", "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}, "hours": {"type": "array", "items": {"type": "integer"}}, "unit": {"type": "string", "enum": ["celsius", "fahrenheit"], "default": "celsius"}}, "required": ["city"]}}

To call a tool, reply with only call:NAME{ARGUMENTS}, where NAME is the tool's name and ARGUMENTS is a JSON object of its arguments, for example:
call:tool_name{"argument": "value"}

Weather in Oslo?<end_of_turn>
<start_of_turn>model
"#;
    assert_eq!(prompt.as_deref(), Ok(expected));
}

#[test]
fn generic_full_prompt() {
    let prompt = generic_prompt(
        Format::OpenAi,
        &seed004_tools(),
        "What did I say about Rome?",
        None,
    );
    let expected = r#"You can call the following tools:
- search_memory(query: string, max_results?: string): Search historical conversation context for relevant information that may have slid out of the current context window
- get_fact(key: string): Retrieve a specific piece of information that was previously stored...
- set_fact(key: string, value: string): Store a specific piece of information for later retrieval...

To call a tool, reply with only a JSON object {"name": tool name, "arguments": {argument name: value}}.

User: What did I say about Rome?
Assistant:"#;
    assert_eq!(prompt.as_deref(), Ok(expected));
}

#[test]
fn generic_signature_types_and_defaults() {
    let prompt = generic_prompt(
        Format::OpenAi,
        &weather_tool(),
        "Weather in Oslo?",
        Some("System text."),
    );
    let expected = r#"System text.

You can call the following tools:
- get_weather(city: string, days?: integer, hours?: array of integer, unit: "celsius" | "fahrenheit" = "celsius"): Current weather for a city.

To call a tool, reply with only a JSON object {"name": tool name, "arguments": {argument name: value}}.

User: Weather in Oslo?
Assistant:"#;
    assert_eq!(prompt.as_deref(), Ok(expected));
}

#[test]
fn build_prompt_dispatches_and_families_parse() {
    for family in PromptFamily::ALL {
        assert_eq!(family.name().parse::<PromptFamily>(), Ok(family));
        let built = build_prompt(family, family.native_format(), &weather_tool(), "q", None);
        assert!(built.is_ok_and(|p| p.contains("get_weather")));
    }
    assert_eq!("qwen".parse::<PromptFamily>(), Ok(PromptFamily::Hermes));
    assert!(matches!(
        "gpt".parse::<PromptFamily>(),
        Err(PromptError::UnknownFamily(_))
    ));
}

#[test]
fn bad_tools_are_errors() {
    let err = llama31_prompt(
        Format::Llama3,
        &[json!({"description": "no name"})],
        "q",
        None,
    );
    assert_eq!(
        err,
        Err(PromptError::BadTool {
            index: 0,
            message: "missing `name`".to_owned()
        })
    );
    let err = hermes_prompt(Format::Hermes, &[json!({"name": "a"}), json!(3)], "q", None);
    assert!(matches!(err, Err(PromptError::BadTool { index: 1, .. })));
    let err = gemma_prompt(
        Format::Gemma,
        &[json!({"name": "a", "parameters": []})],
        "q",
        None,
    );
    assert!(matches!(err, Err(PromptError::BadTool { index: 0, .. })));
}

#[test]
fn tool_without_parameters_or_description() {
    let prompt = generic_prompt(Format::OpenAi, &[json!({"name": "get_now"})], "time?", None);
    assert!(prompt.is_ok_and(|p| p.contains("- get_now()\n")));
    let prompt = gemma_prompt(Format::Gemma, &[json!({"name": "get_now"})], "time?", None);
    assert!(prompt.is_ok_and(|p| {
        p.contains(r#"{"name": "get_now", "parameters": {"type": "object", "properties": {}}}"#)
    }));
}

#[test]
fn prompts_round_trip_through_the_extractor() {
    // The answer formats each prompt asks for are understood by the extractor.
    use toolrail_tools::extract::extract_calls;
    let answers = [
        r#"{"name": "get_weather", "parameters": {"city": "Oslo"}}"#,
        "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}\n</tool_call>",
        r#"call:get_weather{"city": "Oslo"}"#,
        r#"{"name": "get_weather", "arguments": {"city": "Oslo"}}"#,
    ];
    for answer in answers {
        let calls = extract_calls(answer).tool_calls();
        assert_eq!(calls.len(), 1, "{answer}");
        assert_eq!(calls[0].name, "get_weather");
        assert_eq!(calls[0].arguments.get("city"), Some(&json!("Oslo")));
    }
}

#[test]
fn a_tool_turn_continues_each_family_and_reopens_the_assistant_turn() {
    use toolrail_tools::prompt::tool_feedback_turn;
    let gemma = tool_feedback_turn(PromptFamily::Gemma, "call:f{}", "error: x");
    assert_eq!(
        gemma,
        "call:f{}<end_of_turn>\n<start_of_turn>user\nerror: x<end_of_turn>\n<start_of_turn>model\n"
    );
    let hermes = tool_feedback_turn(PromptFamily::Hermes, "a", "r");
    assert!(
        hermes.contains("<tool_response>\nr\n</tool_response>"),
        "{hermes}"
    );
    assert!(hermes.ends_with("<|im_start|>assistant\n"), "{hermes}");
    let llama = tool_feedback_turn(PromptFamily::Llama31, "a", "r");
    assert!(
        llama.contains("ipython<|end_header_id|>\n\nr<|eot_id|>"),
        "{llama}"
    );
    assert!(tool_feedback_turn(PromptFamily::Generic, "a", "r").ends_with("Tool: r\nAssistant:"));
}

#[test]
fn a_user_turn_continues_each_family_and_reopens_the_assistant_turn() {
    use toolrail_tools::prompt::user_turn;
    assert_eq!(
        user_turn(PromptFamily::Gemma, "call:f{}", "and Rome?"),
        "call:f{}<end_of_turn>\n<start_of_turn>user\nand Rome?<end_of_turn>\n<start_of_turn>model\n"
    );
    let hermes = user_turn(PromptFamily::Hermes, "a", "u");
    assert!(
        hermes.starts_with("a<|im_end|>\n<|im_start|>user\nu<|im_end|>"),
        "{hermes}"
    );
    assert!(hermes.ends_with("<|im_start|>assistant\n"), "{hermes}");
    let llama = user_turn(PromptFamily::Llama31, "a", "u");
    assert!(
        llama.contains("user<|end_header_id|>\n\nu<|eot_id|>"),
        "{llama}"
    );
    assert!(user_turn(PromptFamily::Generic, "a", "u").ends_with("User: u\nAssistant:"));
}

/// Whatever family's turns the prompt uses, it asks for the envelope the grammar enforces: the
/// example call it shows is accepted by that envelope's grammar, and it shows no other envelope's
/// opener. With the family's own envelope it is the family's own prompt, word for word.
#[test]
fn every_family_asks_for_the_envelope_its_grammar_enforces() {
    use std::sync::Arc;
    use toolrail_gbnf::Grammar;
    use toolrail_tools::grammar::{GrammarOptions, tool_call_grammar};
    use toolrail_tools::prompt::{answer_instruction, answer_note, user_text_conflict};
    use toolrail_tools::toolset::ToolSet;

    let example_tool = json!([{"name": "tool_name", "parameters": {"type": "object",
        "properties": {"argument": {"type": "string"}}, "required": ["argument"]}}]);
    let tools = ToolSet::from_json_str(&example_tool.to_string()).unwrap();
    for format in Format::ALL {
        let grammar = tool_call_grammar(
            &tools,
            &GrammarOptions {
                format,
                ..GrammarOptions::default()
            },
        )
        .unwrap();
        let grammar = Arc::new(Grammar::parse(&grammar.text).unwrap());
        let instruction = answer_instruction(format);
        let example = instruction
            .split_once("for example:\n")
            .unwrap()
            .1
            .trim_end();
        assert!(
            toolrail_engine::check(&grammar, example.as_bytes()).is_accepted(),
            "{format}: the example {example:?} is not what the grammar allows"
        );
        for family in PromptFamily::ALL {
            let prompt = build_prompt(family, format, &weather_tool(), "q", None).unwrap();
            let native =
                build_prompt(family, family.native_format(), &weather_tool(), "q", None).unwrap();
            if family.native_format() == format {
                assert!(answer_note(family, format).is_none());
                assert_eq!(prompt, native);
            } else {
                assert!(answer_note(family, format).is_some());
                assert!(
                    prompt.contains(instruction.trim_end()),
                    "{} prompt for {format}:\n{prompt}",
                    family.name()
                );
            }
            if format != Format::Pythonic {
                assert_eq!(
                    user_text_conflict(&prompt, format, true),
                    None,
                    "{} prompt for {format}:\n{prompt}",
                    family.name()
                );
            }
        }
    }
}

/// A raw prompt or a system text that asks for another envelope's opener is named, as is a
/// raw prompt that never shows the envelope's own syntax; "recall:" is not Gemma's opener.
#[test]
fn user_text_that_asks_for_another_syntax_is_warned_about() {
    use toolrail_tools::prompt::user_text_conflict;

    let hermes_style = "Answer inside <tool_call></tool_call> tags.";
    let warning = user_text_conflict(hermes_style, Format::OpenAi, false).unwrap();
    assert!(
        warning.contains("hermes") && warning.contains("openai") && warning.contains("system text"),
        "{warning}"
    );
    assert_eq!(user_text_conflict(hermes_style, Format::Hermes, true), None);
    let gemma_style = "Reply with call:NAME{ARGS}.";
    assert!(user_text_conflict(gemma_style, Format::Llama3, true).is_some());
    assert_eq!(
        user_text_conflict("Please recall: the user is in Oslo.", Format::OpenAi, false),
        None
    );
    let silent = user_text_conflict("What is the weather in Oslo?", Format::OpenAi, true).unwrap();
    assert!(
        silent.contains("never shows") && silent.contains("\"arguments\""),
        "{silent}"
    );
    assert_eq!(
        user_text_conflict("What is the weather?", Format::OpenAi, false),
        None
    );
}
