//! What a run is made of: the workspace's inputs (tools, envelope, grammar) and the run settings
//! (prompt, engine, sampling), turned into the worker's [`RunRequest`] and a prompt preview.

use serde_json::{Value, json};

use super::error::RunError;
use crate::transcript::{Sampling, TemplateRun};
use toolrail_llm::settings::ComputeOptions;
use toolrail_llm::worker::{EngineKind, RunRequest};
use toolrail_llm::{
    ChatFormat, ChatMessage, Model, ModelSpec, PromptSource, threads_beside_a_window,
};
use toolrail_tools::envelope::Format;
use toolrail_tools::prompt::{PromptFamily, answer_note, build_prompt, user_text_conflict};
use toolrail_tools::toolset::ToolSet;
use toolrail_tools::validate::ValidateOptions;

/// What the workspace gives a run: the tools offered in the prompt and checked afterwards, the
/// envelope calls are written in, and the grammar that constrains the model.
#[derive(Clone, Debug)]
pub struct RunInputs {
    /// The (enabled) tool set, if the grammar came from tools; offered in the prompt and used to
    /// validate the output.
    pub tools: Option<ToolSet>,
    /// The envelope tool calls are written in.
    pub format: Format,
    /// How outputs are read by the validator (parallel calls, plain text allowed).
    pub validate: ValidateOptions,
    /// The GBNF grammar (generated from the tools or written by hand); `None` allows only
    /// unconstrained runs.
    pub grammar: Option<String>,
    /// The plain JSON Schema the grammar was generated from (not hand-edited): the llguidance
    /// engine compiles it itself, and a llama-server gets it as `json_schema`.
    pub schema: Option<serde_json::Value>,
    /// The llama.cpp template source: what llama.cpp built (its prompt, grammar, triggers and
    /// parser replace toolrail's), or why it could not; `None` for the other sources.
    pub template: Option<Result<TemplateRun, String>>,
}

impl Default for RunInputs {
    fn default() -> Self {
        RunInputs {
            tools: None,
            format: Format::OpenAi,
            validate: ValidateOptions::default(),
            grammar: None,
            schema: None,
            template: None,
        }
    }
}

impl RunInputs {
    /// The tools as OpenAI-style function objects, as the prompt builders take them.
    pub fn tool_values(&self) -> Vec<Value> {
        self.tools
            .iter()
            .flat_map(|t| t.tools())
            .map(|t| json!({"name": t.name, "description": t.description, "parameters": t.parameters}))
            .collect()
    }

    /// The tools as a client sends them in a chat request's `tools` (OpenAI entries, each
    /// parameter schema as its document wrote it): what a server's chat template is given.
    pub fn client_tools(&self) -> Vec<Value> {
        self.tools.iter().flat_map(ToolSet::client_tools).collect()
    }
}

/// How the prompt text is made from the system and user text. Stored (workspace files) by its
/// name: `model`, `raw`, or a prompt family's name.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(into = "&'static str", try_from = "String")]
pub enum PromptStyle {
    /// The model's own way: its `models.toml` family; else, without tools, the GGUF chat
    /// template (when the model is loaded and llama.cpp knows it); else the family matching the
    /// envelope.
    #[default]
    Model,
    /// One of toolrail's prompt builders.
    Family(PromptFamily),
    /// The user text verbatim (the system text is ignored).
    Raw,
}

impl PromptStyle {
    /// Every style, in the order the Generation pane offers them.
    pub fn all() -> impl Iterator<Item = PromptStyle> {
        [PromptStyle::Model, PromptStyle::Raw]
            .into_iter()
            .chain(PromptFamily::ALL.iter().map(|f| PromptStyle::Family(*f)))
    }

    /// The style's name (`model`, `raw`, or the family's name).
    pub fn name(self) -> &'static str {
        match self {
            PromptStyle::Model => "model",
            PromptStyle::Raw => "raw",
            PromptStyle::Family(f) => f.name(),
        }
    }
}

impl From<PromptStyle> for &'static str {
    fn from(style: PromptStyle) -> Self {
        style.name()
    }
}

impl TryFrom<String> for PromptStyle {
    type Error = String;
    fn try_from(name: String) -> Result<Self, Self::Error> {
        PromptStyle::all()
            .find(|s| s.name() == name)
            .ok_or_else(|| {
                let names: Vec<_> = PromptStyle::all().map(PromptStyle::name).collect();
                format!(
                    "unknown prompt style '{name}' (expected {})",
                    names.join(", ")
                )
            })
    }
}

/// The settings of a run that the Generation pane edits.
#[derive(Clone, Debug, PartialEq)]
pub struct RunSetup {
    /// System text (empty: none).
    pub system: String,
    /// The user's message (or the whole prompt with [`PromptStyle::Raw`]).
    pub user: String,
    /// How the prompt is built.
    pub style: PromptStyle,
    /// Which engine masks the tokens.
    pub engine: EngineKind,
    /// Other engines whose masks are computed beside it and compared with toolrail's
    /// ([`RunRequest::compare`]).
    pub compare: Vec<EngineKind>,
    /// Sampling parameters.
    pub sampling: Sampling,
    /// Context size (`None`: the model spec's, else the default).
    pub context: Option<u32>,
    /// Decoding threads (`None`: the model spec's, else chosen from the free physical cores,
    /// one left to the UI when `beside_window`).
    pub threads: Option<u32>,
    /// A window shares the machine (the app): threads leave it a core.
    pub beside_window: bool,
    /// How the logits are computed in-process (each unset value: the model spec's, else
    /// llama-server's default): set to a server's to compare runs on both.
    pub compute: ComputeOptions,
    /// How many candidates to record before and after the mask at each step.
    pub show: usize,
}

impl Default for RunSetup {
    fn default() -> Self {
        RunSetup {
            system: String::new(),
            user: "What is the weather in Paris?".into(),
            style: PromptStyle::Model,
            engine: EngineKind::Toolrail,
            compare: Vec::new(),
            sampling: Sampling::default(),
            context: None,
            threads: None,
            beside_window: true,
            compute: ComputeOptions::default(),
            show: 8,
        }
    }
}

/// A built prompt and where its format came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PromptPreview {
    /// The text sent to the model.
    pub text: String,
    /// Where it came from (shown as `gemma prompt builder`, `GGUF chat template`, `raw`).
    pub source: PromptSource,
    /// What a reader of the prompt should know about it beside the grammar, shown with it in
    /// the app and on stderr by the CLI.
    pub notes: Vec<PromptNote>,
}

/// A remark on a built prompt: how it relates to the grammar the run enforces.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PromptNote {
    /// The prompt family's own answer format is not the envelope; the builder asked for the
    /// envelope instead (prompt and grammar agree; the model may be less used to it).
    AnswerAdapted(String),
    /// Text the user wrote asks for another syntax than the grammar allows, or a raw prompt
    /// never shows the allowed one: the model is told one thing and allowed another.
    Conflict(String),
}

impl PromptNote {
    /// The note in words.
    pub fn text(&self) -> &str {
        match self {
            Self::AnswerAdapted(text) | Self::Conflict(text) => text,
        }
    }

    /// Whether the note warns of a disagreement (rather than informs).
    pub fn is_warning(&self) -> bool {
        matches!(self, Self::Conflict(_))
    }
}

/// The prompt family that matches an envelope, for models that name none.
pub fn family_for(format: Format) -> PromptFamily {
    match format {
        Format::Llama3 => PromptFamily::Llama31,
        Format::Hermes => PromptFamily::Hermes,
        Format::Gemma => PromptFamily::Gemma,
        Format::OpenAi | Format::Pythonic => PromptFamily::Generic,
    }
}

/// The prompt family a run with tools uses under `style`: the chosen family; under the model's
/// own way, its `models.toml` family, else the family matching the envelope `format` (also
/// for a raw prompt, whose later turns need turn markers). The Conversation window uses it so
/// its prompts are those of Start run.
pub fn prompt_family(style: PromptStyle, format: Format, spec: Option<&ModelSpec>) -> PromptFamily {
    match style {
        PromptStyle::Family(family) => family,
        PromptStyle::Model => match spec.map(|s| s.chat_format) {
            Some(ChatFormat::Family(family)) => family,
            _ => family_for(format),
        },
        PromptStyle::Raw => family_for(format),
    }
}

/// The sampling parameters with a model entry's defaults applied over `base`.
pub fn sampling_with_defaults(base: &Sampling, spec: &ModelSpec) -> Sampling {
    let d = &spec.sampling;
    Sampling {
        temperature: d.temperature.unwrap_or(base.temperature),
        top_k: d.top_k.unwrap_or(base.top_k),
        top_p: d.top_p.unwrap_or(base.top_p),
        min_p: d.min_p.unwrap_or(base.min_p),
        seed: d.seed.map_or(base.seed, u64::from),
        max_tokens: d.max_tokens.unwrap_or(base.max_tokens),
        finish_in_budget: base.finish_in_budget,
        repeat_penalty: d.repeat_penalty.unwrap_or(base.repeat_penalty),
    }
}

/// Builds the prompt for `setup` and `inputs`. `model` (when loaded) gives the GGUF chat
/// template; `spec` (when chosen) gives the model's family.
pub fn build_prompt_preview(
    setup: &RunSetup,
    inputs: &RunInputs,
    model: Option<&Model>,
    spec: Option<&ModelSpec>,
) -> Result<PromptPreview, RunError> {
    match &inputs.template {
        Some(Ok(template)) => {
            return Ok(PromptPreview {
                text: template.result.prompt.clone(),
                source: PromptSource::ToolCallTemplate,
                notes: Vec::new(),
            });
        }
        Some(Err(e)) => return Err(RunError::Template(e.clone())),
        None => {}
    }
    let notes = prompt_notes(setup, inputs.format, inputs.tools.is_some(), false, spec);
    if setup.style == PromptStyle::Raw {
        return Ok(PromptPreview {
            text: setup.user.clone(),
            source: PromptSource::Raw,
            notes,
        });
    }
    let tools = inputs.tool_values();
    let family_named = matches!(spec.map(|s| s.chat_format), Some(ChatFormat::Family(_)));
    // The model's own way without tools and without a family in models.toml: its GGUF template.
    if setup.style == PromptStyle::Model
        && !family_named
        && tools.is_empty()
        && let Some(model) = model
        && let Some(preview) = template_prompt(model, setup)?
    {
        return Ok(preview);
    }
    let family = prompt_family(setup.style, inputs.format, spec);
    let system = (!setup.system.trim().is_empty()).then_some(setup.system.as_str());
    let text = build_prompt(family, inputs.format, &tools, &setup.user, system)
        .map_err(|e| RunError::Prompt(e.to_string()))?;
    Ok(PromptPreview {
        text,
        source: PromptSource::Builder(family),
        notes,
    })
}

/// What a reader of the prompt for `setup` should know beside the grammar (see
/// [`PromptNote`]), without building the prompt: cheap enough for every frame. `tools`: the
/// grammar comes from a tool set (envelope `format`); `template`: the llama.cpp template
/// source builds the prompt (it and its grammar agree by construction: no notes).
pub fn prompt_notes(
    setup: &RunSetup,
    format: Format,
    tools: bool,
    template: bool,
    spec: Option<&ModelSpec>,
) -> Vec<PromptNote> {
    if !tools || template {
        return Vec::new();
    }
    if setup.style == PromptStyle::Raw {
        return user_text_conflict(&setup.user, format, true)
            .map(PromptNote::Conflict)
            .into_iter()
            .collect();
    }
    let family = prompt_family(setup.style, format, spec);
    let system = (!setup.system.trim().is_empty()).then_some(setup.system.as_str());
    answer_note(family, format)
        .map(PromptNote::AnswerAdapted)
        .into_iter()
        .chain(
            system
                .and_then(|system| user_text_conflict(system, format, false))
                .map(PromptNote::Conflict),
        )
        .collect()
}

/// The GGUF chat template applied by llama.cpp, if the model has one llama.cpp recognises.
fn template_prompt(model: &Model, setup: &RunSetup) -> Result<Option<PromptPreview>, RunError> {
    let mut messages = Vec::new();
    if !setup.system.trim().is_empty() {
        messages.push(ChatMessage::system(setup.system.clone()));
    }
    messages.push(ChatMessage::user(setup.user.clone()));
    let prompt = model
        .chat_prompt(&messages, &[])
        .map_err(|e| RunError::Prompt(e.to_string()))?;
    Ok(
        (prompt.source == PromptSource::GgufTemplate).then_some(PromptPreview {
            text: prompt.text,
            source: PromptSource::GgufTemplate,
            notes: Vec::new(),
        }),
    )
}

/// The worker's request for `setup`, `inputs` and an already built prompt.
pub fn build_request(
    setup: &RunSetup,
    inputs: &RunInputs,
    prompt: String,
    spec: Option<&ModelSpec>,
    start_paused: bool,
) -> Result<RunRequest, RunError> {
    if let Some(template) = &inputs.template {
        return template_request(setup, inputs, prompt, spec, start_paused, template);
    }
    let grammar = match setup.engine {
        EngineKind::None => None,
        EngineKind::Toolrail | EngineKind::Llama | EngineKind::Llguidance => {
            match &inputs.grammar {
                Some(text) if !text.trim().is_empty() => Some(text.clone()),
                _ => return Err(RunError::NoGrammar(setup.engine)),
            }
        }
    };
    Ok(RunRequest {
        // The controller gives the run its id when it queues it.
        id: 0,
        prompt,
        grammar,
        schema: inputs.schema.clone(),
        engine: setup.engine,
        compare: setup.compare.clone(),
        sampling: setup.sampling.clone(),
        start_paused,
        show: setup.show,
        context: setup.context.or(spec.and_then(|s| s.context)),
        // The user's own count stands; beside a window a models.toml entry's is kept below the
        // cores a window leaves free (ggml's threads spin: one more than the free cores fights
        // the UI for its core and slows both); with neither, the session chooses from the free
        // physical cores.
        threads: setup.threads.or_else(|| {
            spec.and_then(|s| s.threads)
                .map(|t| match setup.beside_window {
                    true => t.min(threads_beside_a_window()),
                    false => t,
                })
        }),
        beside_window: setup.beside_window,
        compute: setup.compute,
        prefix: Vec::new(),
        reuse_cache: false,
        gate: None,
    })
}

/// The worker's request under the llama.cpp template source: the template's grammar gated as
/// llama-server gates it (dormant until a trigger, or prefilled with the generation prompt;
/// the additional stops), with the model's vocabulary the analysis loaded. A template that
/// builds no grammar (`tool_choice` none, a format without tool calls) runs unconstrained.
fn template_request(
    setup: &RunSetup,
    inputs: &RunInputs,
    prompt: String,
    spec: Option<&ModelSpec>,
    start_paused: bool,
    template: &Result<TemplateRun, String>,
) -> Result<RunRequest, RunError> {
    let template = template
        .as_ref()
        .map_err(|e| RunError::Template(e.clone()))?;
    let result = &template.result;
    let (budget, message) = template
        .budget
        .as_ref()
        .map_or((None, ""), |b| (Some(b.tokens), b.message.as_str()));
    let gate = result
        .gate_setup_with_budget(budget, message)
        .map_err(|e| RunError::Template(e.to_string()))?;
    let constrained = !result.grammar.is_empty() && setup.engine != EngineKind::None;
    if setup.engine == EngineKind::Llguidance && constrained {
        return Err(RunError::Template(
            "the llguidance engine does not run lazy template grammars: choose toolrail or llama"
                .to_owned(),
        ));
    }
    let plain = build_request(
        &RunSetup {
            engine: EngineKind::None,
            ..setup.clone()
        },
        &RunInputs {
            template: None,
            ..inputs.clone()
        },
        prompt,
        spec,
        start_paused,
    )?;
    Ok(RunRequest {
        grammar: constrained.then(|| result.grammar.clone()),
        schema: None,
        engine: if constrained {
            setup.engine
        } else {
            EngineKind::None
        },
        gate: Some(gate),
        ..plain
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use toolrail_llm::ModelSpec;

    fn weather() -> RunInputs {
        let tools = ToolSet::from_json_str(
            r#"[{"name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}]"#,
        )
        .unwrap();
        RunInputs {
            tools: Some(tools),
            format: Format::Hermes,
            grammar: Some("root ::= \"x\"".into()),
            ..RunInputs::default()
        }
    }

    #[test]
    fn the_model_style_follows_the_spec_family_else_the_envelope() {
        let setup = RunSetup::default();
        let inputs = weather();
        let by_envelope = build_prompt_preview(&setup, &inputs, None, None).unwrap();
        assert_eq!(by_envelope.source.to_string(), "hermes prompt builder");
        assert!(by_envelope.text.contains("<tools>"), "{}", by_envelope.text);
        let mut spec = ModelSpec::from_path("m.gguf");
        spec.chat_format = ChatFormat::Family(PromptFamily::Gemma);
        let by_spec = build_prompt_preview(&setup, &inputs, None, Some(&spec)).unwrap();
        assert_eq!(by_spec.source.to_string(), "gemma prompt builder");
        assert!(
            by_spec.text.contains("<start_of_turn>user"),
            "{}",
            by_spec.text
        );
        let raw = RunSetup {
            style: PromptStyle::Raw,
            user: "verbatim".into(),
            ..RunSetup::default()
        };
        assert_eq!(
            build_prompt_preview(&raw, &inputs, None, None)
                .unwrap()
                .text,
            "verbatim"
        );
    }

    #[test]
    fn requests_take_the_grammar_only_for_constrained_engines_and_spec_defaults() {
        let inputs = weather();
        let mut spec = ModelSpec::from_path("m.gguf");
        spec.threads = Some(3);
        spec.context = Some(2048);
        let setup = RunSetup {
            engine: EngineKind::None,
            ..RunSetup::default()
        };
        let free = build_request(&setup, &inputs, "p".into(), Some(&spec), false).unwrap();
        assert_eq!(free.grammar, None);
        let beside = threads_beside_a_window();
        assert_eq!(
            (free.threads, free.context),
            (Some(3.min(beside)), Some(2048))
        );
        // with no threads anywhere, the session chooses (beside the window)
        let unset = build_request(&setup, &inputs, "p".into(), None, false).unwrap();
        assert_eq!((unset.threads, unset.beside_window), (None, true));
        let setup = RunSetup {
            engine: EngineKind::Toolrail,
            threads: Some(1),
            ..RunSetup::default()
        };
        let constrained = build_request(&setup, &inputs, "p".into(), Some(&spec), true).unwrap();
        assert_eq!(constrained.grammar.as_deref(), Some("root ::= \"x\""));
        assert_eq!(constrained.threads, Some(1));
        assert!(constrained.start_paused);
        let no_grammar = RunInputs {
            grammar: None,
            ..weather()
        };
        let err = build_request(&setup, &no_grammar, "p".into(), None, false).unwrap_err();
        assert!(
            err.to_string().contains("toolrail engine needs a grammar"),
            "{err}"
        );
    }

    #[test]
    fn model_sampling_defaults_override_the_base() {
        let mut spec = ModelSpec::from_path("m.gguf");
        spec.sampling.temperature = Some(0.7);
        spec.sampling.seed = Some(9);
        let s = sampling_with_defaults(&Sampling::default(), &spec);
        assert_eq!((s.temperature, s.seed), (0.7, 9));
        assert_eq!(s.top_k, Sampling::default().top_k);
    }
}
