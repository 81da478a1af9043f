//! The run settings that change a model's logits, on both engines: what the in-process engine
//! is asked to use ([`ComputeOptions`]), what a run was computed with and how that is known
//! ([`LogitSettings`], recorded in every transcript), the flags a llama-server was started with
//! ([`ServerFlags`], since llama-server b11434 reports neither flash attention nor batch sizes
//! in `/props` or `/slots`), and the differences between two runs' settings in words
//! ([`differences`]) — what explains two runs of the same request that part ways.
//!
//! Measured on llama.cpp b11434's CPU backend (`tests/it/logit_settings.rs`, Gemma 3 270M): the
//! thread count leaves the logits bit-identical (ggml splits a matrix product by rows, each dot
//! product on one thread); flash attention on/off changes them (largest logit difference 1.11
//! after a 30-token prompt), an f16 vs q8_0 cache too (1.04), and the micro-batch size (512 vs 4:
//! 0.80; the prompt is computed in pieces of `ubatch` tokens), so a prompt taken partly from a
//! cache, computed in other pieces, can change them too.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// llama.cpp's flash attention policy (`-fa on|off|auto`; `auto` lets llama.cpp enable it
/// where the backend supports it).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FlashAttention {
    /// Enabled where supported (llama.cpp's and llama-server's default).
    Auto,
    /// Always on.
    On,
    /// Always off.
    Off,
}

impl FlashAttention {
    /// The word llama-server's `-fa` takes.
    pub fn as_str(self) -> &'static str {
        match self {
            FlashAttention::Auto => "auto",
            FlashAttention::On => "on",
            FlashAttention::Off => "off",
        }
    }

    /// llama.cpp's `llama_flash_attn_type` value.
    pub(crate) fn llama_type(self) -> llama_cpp_sys_2::llama_flash_attn_type {
        match self {
            FlashAttention::Auto => llama_cpp_sys_2::LLAMA_FLASH_ATTN_TYPE_AUTO,
            FlashAttention::On => llama_cpp_sys_2::LLAMA_FLASH_ATTN_TYPE_ENABLED,
            FlashAttention::Off => llama_cpp_sys_2::LLAMA_FLASH_ATTN_TYPE_DISABLED,
        }
    }
}

impl fmt::Display for FlashAttention {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for FlashAttention {
    type Err = String;

    /// The words llama-server's `-fa` accepts (`on`, `enabled`, `true`, `1`; `off`, `disabled`,
    /// `false`, `0`; `auto`, `-1`).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "on" | "enabled" | "true" | "1" => Ok(FlashAttention::On),
            "off" | "disabled" | "false" | "0" => Ok(FlashAttention::Off),
            "auto" | "-1" => Ok(FlashAttention::Auto),
            other => Err(format!(
                "unknown flash attention value '{other}' (on, off or auto)"
            )),
        }
    }
}

/// A KV cache data type llama-server accepts for `-ctk`/`-ctv` (the same list as its
/// `--help`); lower precision changes the logits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CacheType {
    /// 32-bit floats.
    F32,
    /// 16-bit floats (the default).
    F16,
    /// bfloat16.
    Bf16,
    /// 8-bit blocks.
    Q8_0,
    /// 4-bit blocks.
    Q4_0,
    /// 4-bit blocks with a minimum.
    Q4_1,
    /// 4-bit non-linear.
    Iq4Nl,
    /// 5-bit blocks.
    Q5_0,
    /// 5-bit blocks with a minimum.
    Q5_1,
}

impl CacheType {
    /// Every type, in llama-server's order.
    pub const ALL: [CacheType; 9] = [
        CacheType::F32,
        CacheType::F16,
        CacheType::Bf16,
        CacheType::Q8_0,
        CacheType::Q4_0,
        CacheType::Q4_1,
        CacheType::Iq4Nl,
        CacheType::Q5_0,
        CacheType::Q5_1,
    ];

    /// ggml's name for it, as `-ctk` takes it.
    pub fn as_str(self) -> &'static str {
        match self {
            CacheType::F32 => "f32",
            CacheType::F16 => "f16",
            CacheType::Bf16 => "bf16",
            CacheType::Q8_0 => "q8_0",
            CacheType::Q4_0 => "q4_0",
            CacheType::Q4_1 => "q4_1",
            CacheType::Iq4Nl => "iq4_nl",
            CacheType::Q5_0 => "q5_0",
            CacheType::Q5_1 => "q5_1",
        }
    }

    /// llama-cpp-2's name for it.
    pub(crate) fn kv_type(self) -> llama_cpp_2::context::params::KvCacheType {
        use llama_cpp_2::context::params::KvCacheType as K;
        match self {
            CacheType::F32 => K::F32,
            CacheType::F16 => K::F16,
            CacheType::Bf16 => K::BF16,
            CacheType::Q8_0 => K::Q8_0,
            CacheType::Q4_0 => K::Q4_0,
            CacheType::Q4_1 => K::Q4_1,
            CacheType::Iq4Nl => K::IQ4_NL,
            CacheType::Q5_0 => K::Q5_0,
            CacheType::Q5_1 => K::Q5_1,
        }
    }
}

impl fmt::Display for CacheType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for CacheType {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        CacheType::ALL
            .into_iter()
            .find(|t| t.as_str() == s)
            .ok_or_else(|| {
                let all: Vec<&str> = CacheType::ALL.iter().map(|t| t.as_str()).collect();
                format!("unknown KV cache type '{s}' ({})", all.join(", "))
            })
    }
}

/// How a prompt is cut into `llama_decode` calls, which changes the logits (each piece is
/// computed apart).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PromptSplit {
    /// In batches of `batch` tokens.
    Batches,
    /// In batches, with the last `4 + ubatch` and the last 4 tokens in pieces of their own:
    /// what llama-server does to make a context checkpoint, for models whose cache cannot be
    /// cut back (sliding-window attention, recurrent or hybrid layers), unless started with
    /// `--ctx-checkpoints 0` or `--swa-full`.
    Checkpoints,
}

impl fmt::Display for PromptSplit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            PromptSplit::Batches => "in batches",
            PromptSplit::Checkpoints => "with its last tokens apart (checkpoints)",
        })
    }
}

/// The tokens before the end of a prompt where llama-server ends a piece to make a context
/// checkpoint: `4 + ubatch` and 4, each at most `batch`.
pub fn checkpoint_offsets(batch: u32, ubatch: u32) -> [u32; 2] {
    [batch.min(4 + ubatch), batch.min(4)]
}

/// llama-server's default logical batch (`-b`).
pub const SERVER_BATCH: u32 = 2048;
/// llama-server's default micro-batch (`-ub`).
pub const SERVER_UBATCH: u32 = 512;

/// What the in-process engine is asked to compute with, each `None` for llama-server's default
/// (flash attention `auto`, batch 2048, micro-batch 512, f16 caches): the context settings that
/// change logits, so that an in-process run can be made to compute as a server does.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ComputeOptions {
    /// Flash attention.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flash_attention: Option<FlashAttention>,
    /// Logical batch: the most prompt tokens handed to llama.cpp at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batch: Option<u32>,
    /// Micro-batch: the most tokens computed in one graph.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ubatch: Option<u32>,
    /// The K cache's type.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_type_k: Option<CacheType>,
    /// The V cache's type.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_type_v: Option<CacheType>,
    /// How a prompt is cut (default: as llama-server cuts it for the model).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_split: Option<PromptSplit>,
}

impl ComputeOptions {
    /// These options, each unset one taken from `fallback` (a run's own choice over its
    /// models.toml entry's).
    pub fn or(self, fallback: ComputeOptions) -> ComputeOptions {
        ComputeOptions {
            flash_attention: self.flash_attention.or(fallback.flash_attention),
            batch: self.batch.or(fallback.batch),
            ubatch: self.ubatch.or(fallback.ubatch),
            cache_type_k: self.cache_type_k.or(fallback.cache_type_k),
            cache_type_v: self.cache_type_v.or(fallback.cache_type_v),
            prompt_split: self.prompt_split.or(fallback.prompt_split),
        }
    }

    /// The options that make an in-process run compute as the server described by `settings`
    /// does, as far as they are known, and the settings that could not be matched, in words.
    pub fn matching(settings: &LogitSettings) -> (ComputeOptions, Vec<String>) {
        let mut unmatched = Vec::new();
        let mut take = |name: &str, known: bool| {
            if !known {
                unmatched.push(format!(
                    "{name}: the server does not report it and no flag states it"
                ));
            }
        };
        take(
            "flash attention",
            settings.flash_attention.value().is_some(),
        );
        take("micro-batch", settings.ubatch.value().is_some());
        let options = ComputeOptions {
            flash_attention: settings.flash_attention.value().copied(),
            batch: settings.batch.value().copied(),
            ubatch: settings.ubatch.value().copied(),
            cache_type_k: settings.cache_type_k.value().copied(),
            cache_type_v: settings.cache_type_v.value().copied(),
            prompt_split: settings.prompt_split.value().copied(),
        };
        if let Some(layers) = settings.gpu_layers.value().copied().filter(|&n| n != 0) {
            unmatched.push(format!(
                "GPU layers: {layers} on the server; in-process runs use the CPU here"
            ));
        }
        (options, unmatched)
    }
}

/// A setting's value and how it is known.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "from", content = "value", rename_all = "snake_case")]
pub enum Known<T> {
    /// Not known (a server that reports nothing, and no flag states it).
    #[default]
    Unknown,
    /// Set by this engine: the value the in-process context was made with.
    Set(T),
    /// Reported by the server (`/props`).
    Reported(T),
    /// Stated by the user: the flags the server was started with.
    Stated(T),
    /// llama-server's default, assumed because the server does not report the value and no
    /// flag states it.
    Assumed(T),
}

impl<T> Known<T> {
    /// The value, whatever its source; `None` when unknown.
    pub fn value(&self) -> Option<&T> {
        match self {
            Known::Unknown => None,
            Known::Set(v) | Known::Reported(v) | Known::Stated(v) | Known::Assumed(v) => Some(v),
        }
    }

    /// How the value is known, in words (`""` for a value the engine set itself).
    pub fn source(&self) -> &'static str {
        match self {
            Known::Unknown => "unknown",
            Known::Set(_) => "",
            Known::Reported(_) => "reported by the server",
            Known::Stated(_) => "stated by its flags",
            Known::Assumed(_) => "llama-server's default, assumed: the server does not report it",
        }
    }

    /// True when the value is not known.
    pub fn is_unknown(&self) -> bool {
        matches!(self, Known::Unknown)
    }
}

impl<T: fmt::Display> Known<T> {
    /// The value and its source in words (`off (stated by its flags)`, `unknown`).
    pub fn described(&self) -> String {
        match self.value() {
            None => "unknown".to_owned(),
            Some(v) if self.source().is_empty() => v.to_string(),
            Some(v) => format!("{v} ({})", self.source()),
        }
    }
}

/// Where a run's logits were computed: toolrail's own llama.cpp, or a llama-server. Written in
/// transcripts as the words `in-process` or `llama-server at URL` (the form older transcripts
/// hold), read back strictly: other words are an error naming them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Backend {
    /// Not recorded (a transcript written before toolrail recorded it).
    #[default]
    Unrecorded,
    /// llama.cpp linked into toolrail.
    InProcess,
    /// A llama-server, by the URL toolrail reached it at (credentials already redacted).
    Server {
        /// The server's URL.
        url: String,
    },
}

/// How a transcript writes [`Backend::InProcess`].
const IN_PROCESS: &str = "in-process";
/// What a transcript writes before a [`Backend::Server`]'s URL.
const SERVER_AT: &str = "llama-server at ";

impl fmt::Display for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Backend::Unrecorded => f.write_str("not recorded"),
            Backend::InProcess => f.write_str(IN_PROCESS),
            Backend::Server { url } => write!(f, "{SERVER_AT}{url}"),
        }
    }
}

impl FromStr for Backend {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "" => Ok(Backend::Unrecorded),
            IN_PROCESS => Ok(Backend::InProcess),
            _ => match s.strip_prefix(SERVER_AT) {
                Some(url) if !url.is_empty() => Ok(Backend::Server {
                    url: url.to_owned(),
                }),
                _ => Err(format!(
                    "unknown engine {s:?}: expected \"{IN_PROCESS}\" or \"{SERVER_AT}URL\""
                )),
            },
        }
    }
}

impl Serialize for Backend {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Backend::Unrecorded => serializer.serialize_str(""),
            other => serializer.collect_str(other),
        }
    }
}

impl<'de> Deserialize<'de> for Backend {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let words = String::deserialize(deserializer)?;
        words.parse().map_err(serde::de::Error::custom)
    }
}

/// The settings one run's logits were computed with, each with how it is known.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LogitSettings {
    /// Where the run was computed (written `in-process` or `llama-server at http://…`).
    #[serde(default)]
    pub engine: Backend,
    /// The flash attention policy.
    #[serde(default)]
    pub flash_attention: Known<FlashAttention>,
    /// What an `auto` policy became (llama.cpp's log at context creation), when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flash_attention_enabled: Option<bool>,
    /// The logical batch.
    #[serde(default)]
    pub batch: Known<u32>,
    /// The micro-batch.
    #[serde(default)]
    pub ubatch: Known<u32>,
    /// The K cache's type.
    #[serde(default)]
    pub cache_type_k: Known<CacheType>,
    /// The V cache's type.
    #[serde(default)]
    pub cache_type_v: Known<CacheType>,
    /// How the prompt is cut into pieces.
    #[serde(default)]
    pub prompt_split: Known<PromptSplit>,
    /// Decoding threads (they do not change the logits on the CPU backend; recorded to say so).
    #[serde(default)]
    pub threads: Known<u32>,
    /// How an in-process run's threads were chosen (set, or from the free cores).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thread_choice: Option<crate::threads::ThreadChoice>,
    /// Model layers offloaded to a GPU.
    #[serde(default)]
    pub gpu_layers: Known<u32>,
    /// Where the layers were computed (an in-process run: the CPU, or which GPU held how many
    /// layers); None where the engine does not say (a server).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placement: Option<crate::device::Placement>,
    /// The context size (per slot on a server).
    #[serde(default)]
    pub context: Known<u32>,
    /// Prompt tokens taken from a cache instead of computed for this run (a server's prompt
    /// cache, the app's reused context): the rest of the prompt is then computed in other
    /// pieces, which can change the logits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_cached: Option<u32>,
    /// The llama.cpp build (`b11434-…`), when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub build: Option<String>,
    /// Flags stated for the server that toolrail does not read (they do not change logits, or
    /// toolrail cannot tell), named so that none is dropped silently.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unread_flags: Vec<String>,
}

impl LogitSettings {
    /// The settings on one line (`flash attention auto: on, batch 2048, micro-batch 512, …`),
    /// each value with how it is known when the engine did not set it itself.
    pub fn summary(&self) -> String {
        let fa = match (self.flash_attention.value(), self.flash_attention_enabled) {
            (Some(FlashAttention::Auto), Some(on)) => {
                let known = map_known(&self.flash_attention, |_| {
                    format!("auto: {}", if on { "on" } else { "off" })
                });
                known.described()
            }
            _ => self.flash_attention.described(),
        };
        let mut parts = vec![
            format!("flash attention {fa}"),
            format!("batch {}", self.batch.described()),
            format!("micro-batch {}", self.ubatch.described()),
            format!("K cache {}", self.cache_type_k.described()),
            format!("V cache {}", self.cache_type_v.described()),
            format!("prompt {}", self.prompt_split.described()),
            format!("GPU layers {}", self.gpu_layers.described()),
            format!(
                "computed on {}",
                self.placement
                    .as_ref()
                    .map_or_else(|| "a backend not reported".to_owned(), |p| p.summary())
            ),
            match &self.thread_choice {
                Some(choice) => format!("threads: {}", choice.describe()),
                None => format!("threads {}", self.threads.described()),
            },
            format!("context {}", self.context.described()),
        ];
        if let Some(n) = self.prompt_cached {
            parts.push(format!("{n} prompt tokens from a cache"));
        }
        if !self.unread_flags.is_empty() {
            parts.push(format!("flags not read: {}", self.unread_flags.join(" ")));
        }
        parts.join(", ")
    }
}

/// Whether a setting changes the logits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Effect {
    /// It changes them (flash attention, cache types, micro-batch, GPU offload).
    Changes,
    /// It can change them (a prompt partly taken from a cache).
    MayChange,
    /// It does not on the CPU backend (measured: threads).
    None,
}

/// One setting two runs differ in (or that is unknown on one side).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SettingDifference {
    /// The setting, in words (`flash attention`).
    pub setting: String,
    /// Its value on the first run, with its source.
    pub first: String,
    /// Its value on the second run, with its source.
    pub second: String,
    /// Whether it changes the logits.
    pub effect: Effect,
    /// True when it is unknown on a side (so it may or may not differ).
    pub unknown: bool,
}

impl fmt::Display for SettingDifference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let effect = match self.effect {
            Effect::Changes => "",
            Effect::MayChange => " (can change the logits)",
            Effect::None => " (does not change the logits on the CPU)",
        };
        write!(
            f,
            "{}: {} in the first run, {} in the second{effect}",
            self.setting, self.first, self.second
        )
    }
}

/// The settings `a` and `b` differ in, logit-changing ones first; a setting unknown on either
/// side is listed too (it may be the one that differs).
pub fn differences(a: &LogitSettings, b: &LogitSettings) -> Vec<SettingDifference> {
    let mut out = Vec::new();
    let fa = |s: &LogitSettings| -> Known<String> {
        // What `auto` became is what computes: compare that when it is known.
        let shown = |v: &FlashAttention| match (v, s.flash_attention_enabled) {
            (FlashAttention::Auto, Some(true)) => "auto: on".to_owned(),
            (FlashAttention::Auto, Some(false)) => "auto: off".to_owned(),
            (v, _) => v.to_string(),
        };
        map_known(&s.flash_attention, shown)
    };
    let effective_fa =
        |s: &LogitSettings| match (s.flash_attention.value(), s.flash_attention_enabled) {
            (Some(FlashAttention::On), _) | (Some(FlashAttention::Auto), Some(true)) => Some(true),
            (Some(FlashAttention::Off), _) | (Some(FlashAttention::Auto), Some(false)) => {
                Some(false)
            }
            _ => None,
        };
    let fa_differs = match (effective_fa(a), effective_fa(b)) {
        (Some(x), Some(y)) => x != y,
        _ => {
            a.flash_attention.value() != b.flash_attention.value()
                || a.flash_attention.is_unknown()
                || b.flash_attention.is_unknown()
        }
    };
    if fa_differs {
        out.push(difference(
            "flash attention",
            &fa(a),
            &fa(b),
            Effect::Changes,
        ));
    }
    push_if_differs(
        &mut out,
        "K cache type",
        &a.cache_type_k,
        &b.cache_type_k,
        Effect::Changes,
    );
    push_if_differs(
        &mut out,
        "V cache type",
        &a.cache_type_v,
        &b.cache_type_v,
        Effect::Changes,
    );
    push_if_differs(
        &mut out,
        "GPU layers",
        &a.gpu_layers,
        &b.gpu_layers,
        Effect::Changes,
    );
    // a server does not say what computes: only two in-process backends are compared
    if let (Some(x), Some(y)) = (&a.placement, &b.placement)
        && x.backend() != y.backend()
    {
        let (x, y) = (Known::Set(x.backend()), Known::Set(y.backend()));
        out.push(difference("backend", &x, &y, Effect::Changes));
    }
    push_if_differs(
        &mut out,
        "micro-batch",
        &a.ubatch,
        &b.ubatch,
        Effect::Changes,
    );
    push_if_differs(
        &mut out,
        "how the prompt is cut",
        &a.prompt_split,
        &b.prompt_split,
        Effect::Changes,
    );
    let cached = |s: &LogitSettings| match s.prompt_cached {
        Some(n) => Known::Set(n),
        None => Known::Unknown,
    };
    if a.prompt_cached.unwrap_or(0) != b.prompt_cached.unwrap_or(0) {
        out.push(difference(
            "prompt tokens taken from a cache",
            &cached(a),
            &cached(b),
            Effect::MayChange,
        ));
    }
    push_if_differs(&mut out, "threads", &a.threads, &b.threads, Effect::None);
    out
}

fn map_known<T>(k: &Known<T>, f: impl Fn(&T) -> String) -> Known<String> {
    match k {
        Known::Unknown => Known::Unknown,
        Known::Set(v) => Known::Set(f(v)),
        Known::Reported(v) => Known::Reported(f(v)),
        Known::Stated(v) => Known::Stated(f(v)),
        Known::Assumed(v) => Known::Assumed(f(v)),
    }
}

fn difference<T: fmt::Display>(
    setting: &str,
    a: &Known<T>,
    b: &Known<T>,
    effect: Effect,
) -> SettingDifference {
    SettingDifference {
        setting: setting.to_owned(),
        first: a.described(),
        second: b.described(),
        effect,
        unknown: a.is_unknown() || b.is_unknown(),
    }
}

fn push_if_differs<T: fmt::Display + PartialEq>(
    out: &mut Vec<SettingDifference>,
    setting: &str,
    a: &Known<T>,
    b: &Known<T>,
    effect: Effect,
) {
    if a.value() != b.value() || a.is_unknown() || b.is_unknown() {
        out.push(difference(setting, a, b, effect));
    }
}

/// The flags a llama-server was started with, as far as they change logits (`-fa`, `-b`, `-ub`,
/// `-ctk`, `-ctv`, `-t`, `-ngl`, `-c`): llama-server b11434 does not report them, so the user
/// states them (`flags` in a `[[server]]` entry, `--server-flags`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ServerFlags {
    /// `-fa`.
    pub flash_attention: Option<FlashAttention>,
    /// `-b`.
    pub batch: Option<u32>,
    /// `-ub`.
    pub ubatch: Option<u32>,
    /// `-ctk`.
    pub cache_type_k: Option<CacheType>,
    /// `-ctv`.
    pub cache_type_v: Option<CacheType>,
    /// `-t`.
    pub threads: Option<u32>,
    /// `-ngl` as a number (`auto` and `all` leave it unknown).
    pub gpu_layers: Option<u32>,
    /// `-c`.
    pub context: Option<u32>,
    /// `--ctx-checkpoints 0` or `--swa-full`: no checkpoints, so prompts are cut in batches
    /// only.
    pub no_checkpoints: bool,
    /// The flags not read here, each as written.
    pub unread: Vec<String>,
}

impl ServerFlags {
    /// Reads a llama-server command line (the flags, split at whitespace; the program name and
    /// flags that do not change logits are kept in `unread`). A flag it reads with a value it
    /// cannot read is an error naming both.
    pub fn parse(line: &str) -> Result<ServerFlags, String> {
        let mut flags = ServerFlags::default();
        let mut words = line.split_whitespace().peekable();
        while let Some(word) = words.next() {
            let (name, inline) = match word.split_once('=') {
                Some((n, v)) if n.starts_with('-') => (n, Some(v.to_owned())),
                _ => (word, None),
            };
            let takes_value = matches!(
                name,
                "-fa"
                    | "--flash-attn"
                    | "-b"
                    | "--batch-size"
                    | "-ub"
                    | "--ubatch-size"
                    | "-ctk"
                    | "--cache-type-k"
                    | "-ctv"
                    | "--cache-type-v"
                    | "-t"
                    | "--threads"
                    | "-ngl"
                    | "--gpu-layers"
                    | "--n-gpu-layers"
                    | "-c"
                    | "--ctx-size"
            );
            if name == "--swa-full" {
                flags.no_checkpoints = true;
                continue;
            }
            if matches!(name, "-ctxcp" | "--ctx-checkpoints" | "--swa-checkpoints") {
                let value = match inline {
                    Some(v) => v,
                    None => words
                        .next()
                        .ok_or_else(|| format!("{name} needs a value"))?
                        .to_owned(),
                };
                let n: i64 = value
                    .parse()
                    .map_err(|_| format!("{name} {value}: not a number"))?;
                flags.no_checkpoints = n <= 0;
                continue;
            }
            if !takes_value {
                flags.unread.push(word.to_owned());
                continue;
            }
            let value = match inline {
                Some(v) => v,
                None => match words.next_if(|w| !w.starts_with("--")) {
                    Some(v) => v.to_owned(),
                    // `-fa` alone was a switch in older builds: on.
                    None if name == "-fa" || name == "--flash-attn" => "on".to_owned(),
                    None => return Err(format!("{name} needs a value")),
                },
            };
            let count = |v: &str| -> Result<u32, String> {
                v.parse::<u32>()
                    .map_err(|_| format!("{name} {v}: not a count"))
            };
            match name {
                "-fa" | "--flash-attn" => {
                    flags.flash_attention =
                        Some(value.parse().map_err(|e| format!("{name}: {e}"))?);
                }
                "-b" | "--batch-size" => flags.batch = Some(count(&value)?),
                "-ub" | "--ubatch-size" => flags.ubatch = Some(count(&value)?),
                "-ctk" | "--cache-type-k" => {
                    flags.cache_type_k = Some(value.parse().map_err(|e| format!("{name}: {e}"))?);
                }
                "-ctv" | "--cache-type-v" => {
                    flags.cache_type_v = Some(value.parse().map_err(|e| format!("{name}: {e}"))?);
                }
                "-t" | "--threads" => flags.threads = Some(count(&value)?),
                "-c" | "--ctx-size" => flags.context = Some(count(&value)?),
                _ => match value.as_str() {
                    "auto" | "all" => flags.unread.push(format!("{name} {value}")),
                    v => flags.gpu_layers = Some(count(v)?),
                },
            }
        }
        Ok(flags)
    }

    /// The flags read, in words (`flash attention off, micro-batch 128`), and those not read;
    /// `None` when none was given.
    pub fn summary(&self) -> Option<String> {
        let mut parts = Vec::new();
        if let Some(v) = self.flash_attention {
            parts.push(format!("flash attention {v}"));
        }
        for (name, value) in [
            ("batch", self.batch),
            ("micro-batch", self.ubatch),
            ("threads", self.threads),
            ("GPU layers", self.gpu_layers),
            ("context", self.context),
        ] {
            if let Some(v) = value {
                parts.push(format!("{name} {v}"));
            }
        }
        for (name, value) in [
            ("K cache", self.cache_type_k),
            ("V cache", self.cache_type_v),
        ] {
            if let Some(v) = value {
                parts.push(format!("{name} {v}"));
            }
        }
        if self.no_checkpoints {
            parts.push("no checkpoints".to_owned());
        }
        if !self.unread.is_empty() {
            parts.push(format!("not read: {}", self.unread.join(" ")));
        }
        (!parts.is_empty()).then(|| parts.join(", "))
    }

    /// The settings of a server run: what `/props` reports (context, build), what these flags
    /// state, llama-server's defaults for what neither says (flash attention `auto`, batch 2048,
    /// micro-batch 512, f16 caches), and unknown for what has no default that can be assumed
    /// (threads and GPU layers depend on the server's machine). `checkpoints` says whether the
    /// server's model is one llama-server makes checkpoints for (known from the same model's
    /// file here; `None`: unknown).
    pub fn server_settings(
        &self,
        engine: Backend,
        context: Option<u32>,
        build: Option<String>,
        prompt_cached: Option<u32>,
        checkpoints: Option<bool>,
    ) -> LogitSettings {
        fn pick<T>(stated: Option<T>, default: Option<T>) -> Known<T> {
            match (stated, default) {
                (Some(v), _) => Known::Stated(v),
                (None, Some(v)) => Known::Assumed(v),
                (None, None) => Known::Unknown,
            }
        }
        LogitSettings {
            engine,
            flash_attention: pick(self.flash_attention, Some(FlashAttention::Auto)),
            flash_attention_enabled: None,
            batch: pick(self.batch, Some(SERVER_BATCH)),
            ubatch: pick(self.ubatch, Some(SERVER_UBATCH)),
            cache_type_k: pick(self.cache_type_k, Some(CacheType::F16)),
            cache_type_v: pick(self.cache_type_v, Some(CacheType::F16)),
            prompt_split: match checkpoints {
                Some(false) => Known::Assumed(PromptSplit::Batches),
                _ if self.no_checkpoints => Known::Stated(PromptSplit::Batches),
                Some(true) => Known::Assumed(PromptSplit::Checkpoints),
                None => Known::Unknown,
            },
            threads: pick(self.threads, None),
            thread_choice: None,
            gpu_layers: pick(self.gpu_layers, None),
            placement: None,
            context: match context {
                Some(n) => Known::Reported(n),
                None => pick(self.context, None),
            },
            prompt_cached,
            build,
            unread_flags: self.unread.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_flags_read_what_changes_logits_and_name_the_rest() {
        let flags = ServerFlags::parse(
            "llama-server -m model.gguf -fa off -ub 128 --batch-size=256 -ctk q8_0 -t 8 -ngl auto --port 8080",
        )
        .unwrap();
        assert_eq!(flags.flash_attention, Some(FlashAttention::Off));
        assert_eq!(flags.ubatch, Some(128));
        assert_eq!(flags.batch, Some(256));
        assert_eq!(flags.cache_type_k, Some(CacheType::Q8_0));
        assert_eq!(flags.threads, Some(8));
        assert_eq!(flags.gpu_layers, None);
        assert_eq!(
            flags.unread,
            [
                "llama-server",
                "-m",
                "model.gguf",
                "-ngl auto",
                "--port",
                "8080"
            ]
        );
        assert!(
            ServerFlags::parse("-fa maybe")
                .unwrap_err()
                .contains("maybe")
        );
        assert!(ServerFlags::parse("-ub").unwrap_err().contains("-ub"));
        assert!(ServerFlags::parse("-ctk q3").unwrap_err().contains("q8_0"));
    }

    /// The backend is written as the words older transcripts hold and read back strictly.
    #[test]
    fn backend_round_trips_through_its_words() {
        let server = Backend::Server {
            url: "http://127.0.0.1:8080".into(),
        };
        for (backend, words) in [
            (Backend::InProcess, "\"in-process\""),
            (server, "\"llama-server at http://127.0.0.1:8080\""),
            (Backend::Unrecorded, "\"\""),
        ] {
            assert_eq!(serde_json::to_string(&backend).unwrap(), words);
            assert_eq!(serde_json::from_str::<Backend>(words).unwrap(), backend);
        }
        let wrong = serde_json::from_str::<Backend>("\"a toaster\"").unwrap_err();
        assert!(
            wrong.to_string().contains("unknown engine \"a toaster\""),
            "{wrong}"
        );
    }

    #[test]
    fn differences_name_the_settings_that_change_logits_first() {
        let server = ServerFlags::parse("-fa on").unwrap().server_settings(
            Backend::Server {
                url: "http://127.0.0.1:8080".into(),
            },
            Some(4096),
            None,
            Some(12),
            Some(false),
        );
        let here = LogitSettings {
            engine: Backend::InProcess,
            flash_attention: Known::Set(FlashAttention::Off),
            batch: Known::Set(2048),
            ubatch: Known::Set(512),
            cache_type_k: Known::Set(CacheType::F16),
            cache_type_v: Known::Set(CacheType::F16),
            prompt_split: Known::Set(PromptSplit::Batches),
            threads: Known::Set(2),
            gpu_layers: Known::Set(0),
            context: Known::Set(4096),
            ..LogitSettings::default()
        };
        let diff = differences(&server, &here);
        let names: Vec<&str> = diff.iter().map(|d| d.setting.as_str()).collect();
        assert_eq!(
            names,
            [
                "flash attention",
                "GPU layers",
                "prompt tokens taken from a cache",
                "threads"
            ]
        );
        assert_eq!(
            diff[0].to_string(),
            "flash attention: on (stated by its flags) in the first run, off in the second"
        );
        // `auto` that became `off` is the same computation as `off`.
        let auto_off = LogitSettings {
            flash_attention: Known::Set(FlashAttention::Auto),
            flash_attention_enabled: Some(false),
            ..here.clone()
        };
        assert!(differences(&auto_off, &here).is_empty());
        // two known backends that differ change the logits; a server's unknown one is not
        // listed
        let placed = |gpu: bool| crate::device::Placement {
            gpu: gpu.then(|| crate::device::ComputeDevice {
                name: "Vulkan0".into(),
                description: "a GPU".into(),
                kind: crate::device::DeviceKind::Gpu,
            }),
            requested_layers: 99,
            offloaded_layers: if gpu { 19 } else { 0 },
            offloadable_layers: 19,
        };
        let on = |gpu: bool| LogitSettings {
            placement: Some(placed(gpu)),
            ..here.clone()
        };
        let diff = differences(&on(false), &on(true));
        assert_eq!(diff.len(), 1, "{diff:?}");
        assert_eq!(
            diff[0].to_string(),
            "backend: CPU in the first run, Vulkan0 in the second"
        );
        assert!(differences(&on(true), &here).is_empty());
    }
}
