//! Chat prompts: the GGUF's own template where the model has one (applied by llama.cpp), else
//! toolrail's prompt builders ([`toolrail_tools::prompt`]).

use llama_cpp_2::model::{LlamaChatMessage, LlamaChatTemplate};
use serde_json::Value;

use super::error::LlmError;
use super::model::Model;
use super::spec::ChatFormat;
use toolrail_tools::prompt::{PromptFamily, build_prompt};

/// One message of a conversation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChatMessage {
    /// `system`, `user` or `assistant`.
    pub role: String,
    /// The text.
    pub content: String,
}

impl ChatMessage {
    /// A message with `role` and `content`.
    pub fn new(role: impl Into<String>, content: impl Into<String>) -> ChatMessage {
        ChatMessage {
            role: role.into(),
            content: content.into(),
        }
    }

    /// A system message.
    pub fn system(content: impl Into<String>) -> ChatMessage {
        Self::new("system", content)
    }

    /// A user message.
    pub fn user(content: impl Into<String>) -> ChatMessage {
        Self::new("user", content)
    }
}

/// Where a prompt's format came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PromptSource {
    /// The GGUF's chat template, applied by llama.cpp.
    GgufTemplate,
    /// One of toolrail's prompt builders.
    Builder(PromptFamily),
    /// The user's text verbatim (no template, no builder).
    Raw,
    /// A chat template's own tool calling, as llama-server applies it with `tools` (the
    /// template grammar source).
    ToolCallTemplate,
}

impl std::fmt::Display for PromptSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PromptSource::GgufTemplate => f.write_str("GGUF chat template"),
            PromptSource::Builder(family) => write!(f, "{} prompt builder", family.name()),
            PromptSource::Raw => f.write_str("raw"),
            PromptSource::ToolCallTemplate => f.write_str("llama.cpp chat template with tools"),
        }
    }
}

/// A prompt ready to tokenize (with `add_special = true`, `parse_special = true`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChatPrompt {
    /// The prompt text, ending where the assistant's answer begins.
    pub text: String,
    /// How it was made.
    pub source: PromptSource,
}

impl Model {
    /// The prompt for `messages` (optionally offering `tools`, OpenAI-style function objects),
    /// ending where the assistant answers.
    ///
    /// With [`ChatFormat::Auto`] and a GGUF chat template that llama.cpp recognises (and no
    /// tools: llama.cpp's built-in templates cannot render them), the template is used. Otherwise
    /// the prompt builder of the spec's family (generic when `Auto`) is, which takes the system
    /// messages as the system text and the last user message as the query; earlier user or
    /// assistant turns are an error there.
    pub fn chat_prompt(
        &self,
        messages: &[ChatMessage],
        tools: &[Value],
    ) -> Result<ChatPrompt, LlmError> {
        let family = match self.spec().chat_format {
            ChatFormat::Family(family) => family,
            ChatFormat::Auto => {
                if tools.is_empty()
                    && let Some(text) = self.template_prompt(messages)?
                {
                    return Ok(ChatPrompt {
                        text,
                        source: PromptSource::GgufTemplate,
                    });
                }
                PromptFamily::Generic
            }
        };
        let system: Vec<&str> = messages
            .iter()
            .filter(|m| m.role == "system")
            .map(|m| m.content.as_str())
            .collect();
        let turns: Vec<&ChatMessage> = messages.iter().filter(|m| m.role != "system").collect();
        let query = match turns.as_slice() {
            [only] if only.role == "user" => only.content.as_str(),
            [] => return Err(LlmError::ChatPrompt("there is no user message".to_owned())),
            _ => {
                return Err(LlmError::ChatPrompt(format!(
                    "the {} prompt builder takes system messages and one user message, not {} turns",
                    family.name(),
                    turns.len()
                )));
            }
        };
        let system = system.join("\n\n");
        let system = (!system.is_empty()).then_some(system.as_str());
        let text = build_prompt(family, family.native_format(), tools, query, system)
            .map_err(|e| LlmError::ChatPrompt(e.to_string()))?;
        Ok(ChatPrompt {
            text,
            source: PromptSource::Builder(family),
        })
    }

    /// The messages through the GGUF's template, or `None` when the model has none or llama.cpp
    /// does not recognise it.
    fn template_prompt(&self, messages: &[ChatMessage]) -> Result<Option<String>, LlmError> {
        if self.info().chat_template.is_none() {
            return Ok(None);
        }
        let Ok(template) = self.llama().chat_template(None) else {
            return Ok(None);
        };
        let chat = messages
            .iter()
            .map(|m| LlamaChatMessage::new(m.role.clone(), m.content.clone()))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| LlmError::ChatPrompt(format!("a message contains a NUL byte: {e}")))?;
        Ok(apply(self, &template, &chat))
    }
}

fn apply(model: &Model, template: &LlamaChatTemplate, chat: &[LlamaChatMessage]) -> Option<String> {
    if chat.is_empty() {
        return None;
    }
    model.llama().apply_chat_template(template, chat, true).ok()
}
