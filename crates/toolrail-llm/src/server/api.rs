//! llama-server's JSON, as b11434 writes and reads it (`tools/server/server-schema.cpp`,
//! `server-task.cpp`, `server-context.cpp`): what toolrail sends to `/completion` and what each
//! streamed chunk carries, and the OpenAI-shaped `/v1/chat/completions` stream used for `tools`. Only the fields toolrail uses; unknown fields are ignored because
//! servers add fields between builds.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::template::ToolChoice;

/// What the server's `/props` says about itself (the parts toolrail shows).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Props {
    /// The model's alias (`--alias`), or its path when there is none.
    pub model_alias: Option<String>,
    /// The model file on the server's machine.
    pub model_path: Option<String>,
    /// `b<build>-<commit>`, e.g. `b11434-unknown`.
    pub build_info: Option<String>,
    /// The chat template's Jinja source.
    pub chat_template: Option<String>,
    /// Context per slot.
    pub n_ctx: Option<u64>,
    /// Parallel slots.
    pub total_slots: Option<u64>,
    /// Whether the chat template renders tools (`chat_template_caps.supports_tools`).
    pub supports_tools: Option<bool>,
}

impl Props {
    /// Reads the fields from `/props`'s JSON.
    pub fn from_json(v: &Value) -> Props {
        let text = |k: &str| v.get(k).and_then(Value::as_str).map(str::to_owned);
        Props {
            model_alias: text("model_alias"),
            model_path: text("model_path"),
            build_info: text("build_info"),
            chat_template: text("chat_template"),
            n_ctx: v
                .pointer("/default_generation_settings/n_ctx")
                .and_then(Value::as_u64),
            total_slots: v.get("total_slots").and_then(Value::as_u64),
            supports_tools: v
                .pointer("/chat_template_caps/supports_tools")
                .and_then(Value::as_bool),
        }
    }

    /// The build number from `build_info` (`b11434-…` → 11434).
    pub fn build(&self) -> Option<u64> {
        let info = self.build_info.as_deref()?.strip_prefix('b')?;
        info.split('-').next()?.parse().ok()
    }
}

/// The prompt: text (tokenized by the server, special tokens parsed) or token ids (exactly
/// what toolrail tokenized; no BOS added).
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Prompt {
    /// Text.
    Text(String),
    /// Token ids.
    Tokens(Vec<u32>),
}

/// A `POST /completion` request, streamed. Field names are llama-server's.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CompletionRequest {
    /// The prompt.
    pub prompt: Prompt,
    /// GBNF (root rule `root`); wins over `json_schema` when both are sent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub grammar: Option<String>,
    /// A JSON Schema the server converts with its own converter.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub json_schema: Option<Value>,
    /// Token limit.
    pub n_predict: u32,
    /// True: the candidates after the sampler chain (`prob`, `top_probs`) instead of before.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub post_sampling_probs: bool,
    /// Sampling and streaming, as on the chat endpoint.
    #[serde(flatten)]
    pub sampling: SamplingFields,
    /// What the chat endpoint adds for a `tools` request (its template's build), when the
    /// request is one sent this way.
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub chat: Option<ChatBuildFields>,
}

/// The fields llama-server's chat endpoint hands its completion code for a `tools` request
/// (`oaicompat_chat_params_parse`, b11434), sent to `/completion` with the same prompt: the
/// server then generates exactly as for the chat request, but streams every token (the chat
/// endpoint streams a chunk only when its parsed message changes, so the tokens of tool-call
/// text never arrive one by one).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ChatBuildFields {
    /// `tool_calls`: the grammar is the template's (it is fed the generation prompt first).
    pub grammar_type: &'static str,
    /// The grammar waits for a trigger.
    pub grammar_lazy: bool,
    /// The triggers as the template gives them (`{"type": 0–3, "value", "token"?}`); the server
    /// turns one-token words into token triggers as for the chat request.
    pub grammar_triggers: Vec<Value>,
    /// Texts that stay special tokens.
    pub preserved_tokens: Vec<String>,
    /// The text the template put after the prompt for the assistant.
    pub generation_prompt: String,
    /// llama.cpp's chat format number.
    pub chat_format: i32,
    /// llama.cpp's serialized output parser.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub chat_parser: String,
    /// The template's additional stop strings.
    pub stop: Vec<String>,
    /// Tool calls are parsed from the output.
    pub parse_tool_calls: bool,
    /// The reasoning budget's tags (llama-server's default budget, -1: none), when the template
    /// thinks.
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub reasoning: Option<ReasoningBudgetFields>,
}

/// The reasoning-budget fields of a chat request's build (with the server's defaults).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ReasoningBudgetFields {
    /// -1: no budget (llama-server's default `--reasoning-budget`).
    pub reasoning_budget_tokens: i32,
    /// The tag that opens thinking.
    pub reasoning_budget_start_tag: String,
    /// The tags that close it.
    pub reasoning_budget_end_tags: Vec<String>,
    /// Text forced before the end tag (the server's default: none).
    pub reasoning_budget_message: String,
    /// Reasoning cannot be ended at runtime (the chat request's default).
    pub reasoning_control: bool,
}

impl ChatBuildFields {
    /// The fields for what llama.cpp built from a template (see [`crate::template`]).
    pub fn from_template(result: &crate::template::TemplateResult) -> ChatBuildFields {
        use crate::template::TriggerKind;
        let grammar_triggers = (result.grammar_triggers.iter())
            .map(|t| {
                let kind = match t.kind {
                    TriggerKind::Token => 0,
                    TriggerKind::Word => 1,
                    TriggerKind::Pattern => 2,
                    TriggerKind::PatternFull => 3,
                };
                let mut value = serde_json::json!({"type": kind, "value": t.value});
                if let Some(token) = t.token {
                    value["token"] = Value::from(token);
                }
                value
            })
            .collect();
        let reasoning = (!result.thinking_end_tags.is_empty()).then(|| ReasoningBudgetFields {
            reasoning_budget_tokens: -1,
            reasoning_budget_start_tag: result.thinking_start_tag.clone(),
            reasoning_budget_end_tags: result.thinking_end_tags.clone(),
            reasoning_budget_message: String::new(),
            reasoning_control: false,
        });
        ChatBuildFields {
            grammar_type: "tool_calls",
            grammar_lazy: result.grammar_lazy,
            grammar_triggers,
            preserved_tokens: result.preserved_tokens.clone(),
            generation_prompt: result.generation_prompt.clone(),
            chat_format: result.format_id,
            chat_parser: result.parser.clone(),
            stop: result.additional_stops.clone(),
            parse_tool_calls: true,
            reasoning,
        }
    }
}

/// The sampling and streaming fields a `/completion` and a `/v1/chat/completions` request
/// share (flattened into both; llama-server reads them alike on either endpoint).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SamplingFields {
    /// 0 is greedy.
    pub temperature: f32,
    /// 0 is off.
    pub top_k: u32,
    /// 1 is off.
    pub top_p: f32,
    /// 0 is off.
    pub min_p: f32,
    /// The sampler's seed.
    pub seed: u32,
    /// 1 is off.
    pub repeat_penalty: f32,
    /// The penalty's window (toolrail's is 64, llama.cpp's default).
    pub repeat_last_n: u32,
    /// The sampler chain, in order: the subset toolrail's own sampling has.
    pub samplers: Vec<&'static str>,
    /// Candidates per token (before the sampler chain).
    pub n_probs: u32,
    /// Always true: toolrail shows every token as it comes.
    pub stream: bool,
    /// False: every run decodes its prompt afresh (reused caches can change results bitwise).
    pub cache_prompt: bool,
    /// Timings in every chunk (decode time per token).
    pub timings_per_token: bool,
    /// Seconds of silence before a keep-alive line: lets a cancel be noticed during long waits.
    pub sse_ping_interval: u32,
}

impl SamplingFields {
    /// toolrail's sampling settings in llama-server's fields, with `n_probs` candidates per
    /// token: toolrail's sampler chain and penalty window, the seed cut to the server's 32
    /// bits, streamed with timings, the prompt decoded afresh.
    pub fn new(sampling: &crate::record::Sampling, n_probs: u32) -> Self {
        Self {
            temperature: sampling.temperature,
            top_k: sampling.top_k,
            top_p: sampling.top_p,
            min_p: sampling.min_p,
            // llama-server's seed is 32-bit
            seed: (sampling.seed & u64::from(u32::MAX)) as u32,
            repeat_penalty: sampling.repeat_penalty,
            repeat_last_n: crate::record::PENALTY_WINDOW as u32,
            samplers: CompletionRequest::SAMPLERS.to_vec(),
            n_probs,
            stream: true,
            cache_prompt: false,
            timings_per_token: true,
            sse_ping_interval: 1,
        }
    }
}

impl CompletionRequest {
    /// The sampler chain toolrail's own sampling applies, in llama.cpp's names.
    pub const SAMPLERS: [&'static str; 5] = ["penalties", "top_k", "top_p", "min_p", "temperature"];
}

/// One entry of a token's candidate list.
#[derive(Clone, Debug, PartialEq, Deserialize)]
pub struct TopProb {
    /// Token id.
    pub id: i64,
    /// The piece's bytes (the `token` text field is cut back to valid UTF-8; these are whole).
    #[serde(default)]
    pub bytes: Vec<u8>,
    /// Natural log of its probability over the whole vocabulary, before any sampler.
    #[serde(default)]
    pub logprob: Option<f64>,
    /// Its probability after the sampler chain (`post_sampling_probs`).
    #[serde(default)]
    pub prob: Option<f64>,
}

/// The chosen token of a chunk and its candidates.
#[derive(Clone, Debug, PartialEq, Deserialize)]
pub struct TokenProbs {
    /// Token id.
    pub id: i64,
    /// The piece's bytes.
    #[serde(default)]
    pub bytes: Vec<u8>,
    /// Its log-probability.
    #[serde(default)]
    pub logprob: Option<f64>,
    /// The most likely tokens before the sampler chain.
    #[serde(default)]
    pub top_logprobs: Vec<TopProb>,
    /// Its probability after the sampler chain (`post_sampling_probs`).
    #[serde(default)]
    pub prob: Option<f64>,
    /// The tokens the sampler chain kept, most likely first (`post_sampling_probs`).
    #[serde(default)]
    pub top_probs: Vec<TopProb>,
}

/// Timings the server reports.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
pub struct Timings {
    /// Prompt tokens taken from the slot's cache instead of decoded.
    #[serde(default)]
    pub cache_n: Option<f64>,
    /// Prompt tokens decoded.
    #[serde(default)]
    pub prompt_n: Option<f64>,
    /// Milliseconds decoding the prompt.
    #[serde(default)]
    pub prompt_ms: Option<f64>,
    /// Tokens generated so far.
    #[serde(default)]
    pub predicted_n: Option<f64>,
    /// Milliseconds generating so far.
    #[serde(default)]
    pub predicted_ms: Option<f64>,
    /// Generation speed.
    #[serde(default)]
    pub predicted_per_second: Option<f64>,
}

/// An error as llama-server reports it (`{"error": {"code", "message", "type"}}`).
#[derive(Clone, Debug, PartialEq, Deserialize)]
pub struct ApiError {
    /// The HTTP status it stands for.
    #[serde(default)]
    pub code: Option<u16>,
    /// The server's message.
    #[serde(default)]
    pub message: String,
    /// Its kind, e.g. `invalid_request_error`.
    #[serde(default, rename = "type")]
    pub kind: Option<String>,
}

/// One streamed chunk of `/completion`: a token, prompt progress, the final chunk, or an error.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
pub struct Chunk {
    /// Text released with this chunk.
    #[serde(default)]
    pub content: String,
    /// This chunk's token id (empty in the final chunk; bogus in progress chunks).
    #[serde(default)]
    pub tokens: Vec<i64>,
    /// True in the final chunk.
    #[serde(default)]
    pub stop: bool,
    /// The token's candidates (`n_probs`).
    #[serde(default)]
    pub completion_probabilities: Vec<TokenProbs>,
    /// Present in prompt-progress chunks.
    #[serde(default)]
    pub prompt_progress: Option<Value>,
    /// Prompt tokens evaluated.
    #[serde(default)]
    pub tokens_evaluated: Option<u64>,
    /// Tokens generated (final chunk).
    #[serde(default)]
    pub tokens_predicted: Option<u64>,
    /// `eos`, `limit`, `word` or `none` (final chunk).
    #[serde(default)]
    pub stop_type: Option<String>,
    /// Timings.
    #[serde(default)]
    pub timings: Option<Timings>,
    /// The settings the server used, including the GBNF it enforced (final chunk).
    #[serde(default)]
    pub generation_settings: Option<Value>,
    /// An error after streaming began.
    #[serde(default)]
    pub error: Option<ApiError>,
}

impl Chunk {
    /// The token this chunk carries, if it carries one (progress chunks carry a bogus id).
    pub fn token(&self) -> Option<u32> {
        if self.prompt_progress.is_some() {
            return None;
        }
        self.tokens.first().and_then(|&t| u32::try_from(t).ok())
    }

    /// The grammar the server enforced (echoed in the final chunk).
    pub fn grammar(&self) -> Option<&str> {
        self.generation_settings.as_ref()?.get("grammar")?.as_str()
    }
}

/// A chat message sent to `/v1/chat/completions`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ChatMessage {
    /// `system`, `user`, `assistant` or `tool`.
    pub role: String,
    /// The text.
    pub content: String,
}

/// A streamed `POST /v1/chat/completions` request with tools: the server renders its chat
/// template and builds its own tool-call grammar. Sampling fields llama-server passes through
/// to its completion settings.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ChatRequest {
    /// The conversation.
    pub messages: Vec<ChatMessage>,
    /// OpenAI-shaped tools (`{"type": "function", "function": {...}}`).
    pub tools: Vec<Value>,
    /// `tool_choice` (sent in OpenAI's shape).
    #[serde(serialize_with = "ToolChoice::serialize_openai")]
    pub tool_choice: ToolChoice,
    /// A grammar of toolrail's (llama-server refuses one together with tools, with a 400
    /// that toolrail shows as it is).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub grammar: Option<String>,
    /// Token limit.
    pub max_tokens: u32,
    /// Sampling and streaming, as on `/completion` (`n_probs` is passed through; `logprobs`
    /// is refused with tools and streaming).
    #[serde(flatten)]
    pub sampling: SamplingFields,
    /// Ask for llama-server's `__verbose` block (the prompt and the settings it built: grammar,
    /// lazy triggers, chat format); only non-streamed replies carry it.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub verbose: bool,
}

/// What llama-server built for a chat request, read from the `__verbose` block of a
/// non-streamed reply: the rendered prompt, the tool-call grammar and its lazy triggers, the
/// preserved tokens and the chat format its parser reads the output with.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ChatBuild {
    /// The prompt as the server rendered it (with the BOS text it adds, if any).
    pub prompt: String,
    /// The grammar the sampler enforces (empty: none).
    pub grammar: String,
    /// True when the grammar waits for a trigger.
    pub grammar_lazy: bool,
    /// The lazy grammar's triggers, as the server lists them (`{"type": …, "value": …}`).
    pub grammar_triggers: Vec<Value>,
    /// Tokens kept whole in the output (the tool-call markers), when listed as text.
    pub preserved_tokens: Vec<String>,
    /// The same as token ids, as llama-server b11434 lists them (its sampler's set, sorted).
    pub preserved_token_ids: Vec<i64>,
    /// The chat format the server's parser reads the output with (e.g. `peg-native`).
    pub chat_format: Option<String>,
}

impl ChatBuild {
    /// Reads a non-streamed chat reply's `__verbose` block; None when it has none (a server
    /// that ignores `verbose`, or not llama-server).
    pub fn from_reply(reply: &Value) -> Option<ChatBuild> {
        let verbose = reply.get("__verbose")?;
        let settings = verbose.get("generation_settings")?;
        let text = |v: Option<&Value>| v.and_then(Value::as_str).unwrap_or_default().to_owned();
        Some(ChatBuild {
            prompt: text(verbose.get("prompt")),
            grammar: text(settings.get("grammar")),
            grammar_lazy: settings
                .get("grammar_lazy")
                .and_then(Value::as_bool)
                .unwrap_or(false),
            grammar_triggers: settings
                .get("grammar_triggers")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default(),
            preserved_tokens: settings
                .get("preserved_tokens")
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(Value::as_str)
                        .map(str::to_owned)
                        .collect()
                })
                .unwrap_or_default(),
            preserved_token_ids: settings
                .get("preserved_tokens")
                .and_then(Value::as_array)
                .map(|a| a.iter().filter_map(Value::as_i64).collect())
                .unwrap_or_default(),
            chat_format: settings
                .get("chat_format")
                .and_then(Value::as_str)
                .map(str::to_owned),
        })
    }

    /// Why a `tools` request with `tool_choice: required` could give no parsed call, when
    /// what the server built says so: the tools absent from the prompt, no tool-call grammar.
    /// None when the server built both (the model then simply wrote no call).
    pub fn explain_no_call(&self, tool_names: &[&str]) -> Option<String> {
        let in_prompt = tool_names.iter().any(|n| self.prompt.contains(n));
        let format = self.chat_format.as_deref().unwrap_or("unknown");
        match (in_prompt, self.grammar.is_empty()) {
            (false, true) => Some(format!(
                "the server's chat template does not take tools: none of the tools is in the \
                 prompt it rendered, and it built no tool-call grammar (chat format {format}), \
                 so tool_choice \"required\" constrains nothing and its parser finds no call; \
                 use a model whose chat template supports tools, or start llama-server with \
                 --chat-template-file and one that does"
            )),
            (true, true) => Some(format!(
                "the server built no tool-call grammar (chat format {format}): the tools are in \
                 the prompt, but nothing constrains the output to a call its parser reads"
            )),
            (false, false) => Some(format!(
                "none of the tools is in the prompt the server rendered (chat format {format}): \
                 the model is constrained to a call without being told the tools"
            )),
            (true, false) => None,
        }
    }
}

/// One piece of a streamed tool call (`choices[0].delta.tool_calls[i]`).
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
pub struct ToolCallDelta {
    /// Which call this piece belongs to.
    #[serde(default)]
    pub index: usize,
    /// The function's name and a piece of its arguments' JSON text.
    #[serde(default)]
    pub function: Option<FunctionDelta>,
}

/// The function part of a [`ToolCallDelta`].
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
pub struct FunctionDelta {
    /// The name (in the call's first piece).
    #[serde(default)]
    pub name: Option<String>,
    /// A piece of the arguments' JSON text.
    #[serde(default)]
    pub arguments: Option<String>,
}

/// What changed in one chat chunk.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
pub struct ChatDelta {
    /// Text released with this chunk.
    #[serde(default)]
    pub content: Option<String>,
    /// Pieces of tool calls.
    #[serde(default)]
    pub tool_calls: Vec<ToolCallDelta>,
}

/// The token candidates of a chat chunk (`choices[0].logprobs`).
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
pub struct ChatLogprobs {
    /// One entry per token this chunk carries.
    #[serde(default)]
    pub content: Vec<TokenProbs>,
}

/// One choice of a chat chunk.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
pub struct ChatChoice {
    /// What changed.
    #[serde(default)]
    pub delta: ChatDelta,
    /// `stop`, `length` or `tool_calls` in the last chunk.
    #[serde(default)]
    pub finish_reason: Option<String>,
    /// The token's candidates (`n_probs`).
    #[serde(default)]
    pub logprobs: Option<ChatLogprobs>,
}

/// One streamed chunk of `/v1/chat/completions`.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
pub struct ChatChunk {
    /// The choices (one).
    #[serde(default)]
    pub choices: Vec<ChatChoice>,
    /// Timings.
    #[serde(default)]
    pub timings: Option<Timings>,
    /// An error after streaming began.
    #[serde(default)]
    pub error: Option<ApiError>,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Both request bodies carry the shared sampling fields at the top level, as llama-server
    /// reads them, with toolrail's settings mapped once.
    #[test]
    fn sampling_fields_are_flattened_into_both_bodies() {
        let settings = crate::record::Sampling {
            temperature: 0.5,
            top_k: 7,
            top_p: 0.9,
            min_p: 0.1,
            seed: (1u64 << 40) + 3,
            max_tokens: 12,
            finish_in_budget: false,
            repeat_penalty: 1.1,
        };
        let sampling = SamplingFields::new(&settings, 4);
        let completion = serde_json::to_value(CompletionRequest {
            prompt: Prompt::Text("x".into()),
            grammar: None,
            json_schema: None,
            n_predict: 12,
            post_sampling_probs: false,
            sampling: sampling.clone(),
            chat: None,
        })
        .unwrap();
        let chat = serde_json::to_value(ChatRequest {
            messages: Vec::new(),
            tools: Vec::new(),
            tool_choice: ToolChoice::Required,
            grammar: None,
            max_tokens: 12,
            sampling,
            verbose: false,
        })
        .unwrap();
        assert_eq!(chat["tool_choice"], serde_json::json!("required"), "{chat}");
        for body in [&completion, &chat] {
            assert!(body.get("sampling").is_none(), "{body}");
            assert_eq!(body["temperature"], serde_json::json!(0.5), "{body}");
            assert_eq!(body["top_k"], 7, "{body}");
            assert_eq!(body["seed"], 3, "{body}");
            assert_eq!(body["repeat_last_n"], 64, "{body}");
            assert_eq!(body["n_probs"], 4, "{body}");
            assert_eq!(body["samplers"][0], "penalties", "{body}");
            assert_eq!(body["stream"], true, "{body}");
            assert_eq!(body["cache_prompt"], false, "{body}");
        }
        assert_eq!(completion["n_predict"], 12);
        assert!(completion.get("post_sampling_probs").is_none());
        assert_eq!(chat["max_tokens"], 12);
    }

    #[test]
    fn reads_token_progress_and_final_chunks() {
        let token: Chunk = serde_json::from_str(
            r#"{"index":0,"content":"{","tokens":[236782],"stop":false,"completion_probabilities":[{"id":236782,"token":"{","bytes":[123],"logprob":-0.0123,"top_logprobs":[{"id":236782,"token":"{","bytes":[123],"logprob":-0.0123},{"id":107,"token":"\n","bytes":[10],"logprob":-4.61}]}]}"#,
        )
        .unwrap();
        assert_eq!(token.token(), Some(236782));
        assert_eq!(token.completion_probabilities[0].top_logprobs.len(), 2);
        let progress: Chunk =
            serde_json::from_str(r#"{"content":"","tokens":[0],"prompt_progress":{"total":17}}"#)
                .unwrap();
        assert_eq!(progress.token(), None);
        let last: Chunk = serde_json::from_str(
            r#"{"content":"","tokens":[],"stop":true,"stop_type":"eos","tokens_predicted":23,"generation_settings":{"grammar":"root ::= \"a\""}}"#,
        )
        .unwrap();
        assert_eq!((last.stop, last.grammar()), (true, Some("root ::= \"a\"")));
        assert_eq!(
            Props::from_json(&serde_json::json!({"build_info": "b11434-unknown"})).build(),
            Some(11434)
        );
        let sampled: Chunk = serde_json::from_str(
            r#"{"content":"a","tokens":[496],"completion_probabilities":[{"id":496,"bytes":[32,97],"prob":0.1,"top_probs":[{"id":506,"bytes":[32],"prob":0.2}]}]}"#,
        )
        .unwrap();
        let p = &sampled.completion_probabilities[0];
        assert_eq!((p.prob, p.top_probs.len()), (Some(0.1), 1));
    }

    #[test]
    fn reads_chat_chunks_with_tool_call_pieces() {
        let chunk: ChatChunk = serde_json::from_str(
            r#"{"choices":[{"finish_reason":null,"index":0,"delta":{"tool_calls":[{"index":0,"id":"x","type":"function","function":{"name":"get_weather","arguments":"{\"ci"}}]},"logprobs":{"content":[{"id":7,"bytes":[123],"logprob":-0.1,"top_logprobs":[]}]}}],"object":"chat.completion.chunk"}"#,
        )
        .unwrap();
        let choice = &chunk.choices[0];
        let f = choice.delta.tool_calls[0].function.clone().unwrap();
        assert_eq!(f.name.as_deref(), Some("get_weather"));
        assert_eq!(f.arguments.as_deref(), Some("{\"ci"));
        assert_eq!(choice.logprobs.as_ref().unwrap().content[0].id, 7);
    }
}
