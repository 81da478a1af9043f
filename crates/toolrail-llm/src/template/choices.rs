//! The choices a chat request makes that llama-server has words for: `tool_choice`, the
//! reasoning format, and the switches it has its own default for (`parallel_tool_calls`,
//! `enable_thinking`). One type each, used by the template request, the server request, the
//! workspace, the app and the command line; their spelling in files is the serde one below, and
//! the words llama.cpp knows them by are written only where a request or a report is built.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// `tool_choice`: how the model may or must call tools. Stored in workspaces as `"auto"`,
/// `"required"`, `"none"` or `{"named": "<tool>"}`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolChoice {
    /// The model decides (llama-server's default).
    #[default]
    Auto,
    /// The model must call a tool.
    Required,
    /// The model must not call a tool.
    None,
    /// The model must call this tool. llama-server b11434 ignores this form and uses `auto`
    /// (a template result's warnings say so).
    Named(String),
}

impl ToolChoice {
    /// The words shown for it: `auto`, `required`, `none`, or the tool's name.
    pub fn label(&self) -> &str {
        match self {
            ToolChoice::Auto => "auto",
            ToolChoice::Required => "required",
            ToolChoice::None => "none",
            ToolChoice::Named(name) => name,
        }
    }

    /// The OpenAI request's `tool_choice`: a word, or `{"type": "function", "function":
    /// {"name": …}}` for a named tool.
    pub fn to_openai(&self) -> Value {
        match self {
            ToolChoice::Named(name) => json!({"type": "function", "function": {"name": name}}),
            other => json!(other.label()),
        }
    }

    /// Serializes as [`ToolChoice::to_openai`] (for request bodies).
    pub fn serialize_openai<S: serde::Serializer>(
        choice: &ToolChoice,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        choice.to_openai().serialize(serializer)
    }
}

impl fmt::Display for ToolChoice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.label())
    }
}

/// Reads `auto`, `required`, `none`, or a tool name (never fails: any other word names a tool).
impl FromStr for ToolChoice {
    type Err = std::convert::Infallible;

    fn from_str(text: &str) -> Result<ToolChoice, Self::Err> {
        Ok(match text {
            "auto" => ToolChoice::Auto,
            "required" => ToolChoice::Required,
            "none" => ToolChoice::None,
            name => ToolChoice::Named(name.to_owned()),
        })
    }
}

/// The reasoning format of a chat request: how llama.cpp's parser separates thinking from the
/// content. Spelled as llama.cpp names it (`deepseek-legacy`), and `server-default` for
/// "not sent".
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ReasoningFormat {
    /// Not sent: the request's defaults apply (llama-server's is `deepseek`, the bare
    /// llama.cpp defaults' `none`).
    #[default]
    ServerDefault,
    /// `none`: thinking stays in the content.
    None,
    /// `auto`.
    Auto,
    /// `deepseek`: thinking goes to `reasoning_content`.
    Deepseek,
    /// `deepseek-legacy`.
    DeepseekLegacy,
}

impl ReasoningFormat {
    /// Every choice, in menu order.
    pub const ALL: [ReasoningFormat; 5] = [
        ReasoningFormat::ServerDefault,
        ReasoningFormat::None,
        ReasoningFormat::Auto,
        ReasoningFormat::Deepseek,
        ReasoningFormat::DeepseekLegacy,
    ];

    /// The name llama.cpp knows it by (`None` for the server's default: nothing is sent).
    pub fn name(self) -> Option<&'static str> {
        match self {
            ReasoningFormat::ServerDefault => None,
            ReasoningFormat::None => Some("none"),
            ReasoningFormat::Auto => Some("auto"),
            ReasoningFormat::Deepseek => Some("deepseek"),
            ReasoningFormat::DeepseekLegacy => Some("deepseek-legacy"),
        }
    }

    /// The words shown for it (its name, or `server default`).
    pub fn label(self) -> &'static str {
        self.name().unwrap_or("server default")
    }
}

impl fmt::Display for ReasoningFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.label())
    }
}

/// A reasoning format's name that llama.cpp does not know.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown reasoning format {0:?} (none, auto, deepseek, deepseek-legacy)")]
pub struct UnknownReasoningFormat(pub String);

/// Reads a name llama.cpp knows (`none`, `auto`, `deepseek`, `deepseek-legacy`).
impl FromStr for ReasoningFormat {
    type Err = UnknownReasoningFormat;

    fn from_str(text: &str) -> Result<ReasoningFormat, Self::Err> {
        ReasoningFormat::ALL
            .into_iter()
            .find(|f| f.name() == Some(text))
            .ok_or_else(|| UnknownReasoningFormat(text.to_owned()))
    }
}

/// A request switch llama-server has its own default for (`enable_thinking`,
/// `parallel_tool_calls`): left to the server, or sent on or off.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ServerSwitch {
    /// Not sent: the request's defaults decide (llama-server's, for thinking and parallel
    /// calls: on when the template supports them).
    #[default]
    ServerDefault,
    /// Sent as `true`.
    On,
    /// Sent as `false`.
    Off,
}

impl ServerSwitch {
    /// Every choice, in menu order.
    pub const ALL: [ServerSwitch; 3] = [
        ServerSwitch::ServerDefault,
        ServerSwitch::On,
        ServerSwitch::Off,
    ];

    /// The words shown for it.
    pub fn label(self) -> &'static str {
        match self {
            ServerSwitch::ServerDefault => "server default",
            ServerSwitch::On => "on",
            ServerSwitch::Off => "off",
        }
    }

    /// The value sent (`None`: not sent).
    pub fn to_request(self) -> Option<bool> {
        match self {
            ServerSwitch::ServerDefault => None,
            ServerSwitch::On => Some(true),
            ServerSwitch::Off => Some(false),
        }
    }
}

/// `None` is the server's default, `Some(b)` sends `b` (a command line's optional `true`/`false`).
impl From<Option<bool>> for ServerSwitch {
    fn from(value: Option<bool>) -> ServerSwitch {
        match value {
            None => ServerSwitch::ServerDefault,
            Some(true) => ServerSwitch::On,
            Some(false) => ServerSwitch::Off,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::template::{RequestDefaults, ResolvedInputs};

    #[test]
    fn a_tool_choice_reads_a_word_or_a_name_and_is_sent_in_openai_shape() {
        for (text, choice) in [
            ("auto", ToolChoice::Auto),
            ("required", ToolChoice::Required),
            ("none", ToolChoice::None),
            ("get_weather", ToolChoice::Named("get_weather".into())),
        ] {
            assert_eq!(text.parse::<ToolChoice>(), Ok(choice.clone()));
            assert_eq!(choice.to_string(), text);
        }
        assert_eq!(ToolChoice::Required.to_openai(), json!("required"));
        assert_eq!(
            ToolChoice::Named("f".into()).to_openai(),
            json!({"type": "function", "function": {"name": "f"}})
        );
    }

    #[test]
    fn a_reasoning_format_reads_llama_cpp_names_only() {
        for format in ReasoningFormat::ALL {
            match format.name() {
                Some(name) => assert_eq!(name.parse::<ReasoningFormat>(), Ok(format)),
                None => assert_eq!(format, ReasoningFormat::ServerDefault),
            }
        }
        let refused = "ponder".parse::<ReasoningFormat>().unwrap_err();
        assert!(refused.to_string().contains("deepseek-legacy"), "{refused}");
    }

    #[test]
    fn recorded_inputs_read_as_the_typed_choices_and_write_the_same() {
        // The inputs part of a template run as transcripts have recorded it.
        let recorded = json!({
            "defaults": "server",
            "tool_choice": "required",
            "parallel_tool_calls": true,
            "add_generation_prompt": true,
            "continue_final_message": false,
            "reasoning_format": "deepseek-legacy",
            "enable_thinking": false,
            "chat_template_kwargs": {"preserve_reasoning": "true"}
        });
        let inputs: ResolvedInputs = serde_json::from_value(recorded.clone()).unwrap();
        assert_eq!(inputs.defaults, RequestDefaults::Server);
        assert_eq!(inputs.tool_choice, ToolChoice::Required);
        assert_eq!(inputs.reasoning_format, ReasoningFormat::DeepseekLegacy);
        assert_eq!(serde_json::to_value(&inputs).unwrap(), recorded);
    }

    #[test]
    fn a_switch_from_an_optional_flag() {
        for value in [None, Some(true), Some(false)] {
            assert_eq!(ServerSwitch::from(value).to_request(), value);
        }
    }
}
