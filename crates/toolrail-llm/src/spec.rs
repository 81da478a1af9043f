//! Models by name: entries of a `models.toml` file, and where models are cached.
//!
//! ```toml
//! [[model]]
//! name = "gemma-3-270m"
//! path = "~/.cache/toolrail/models/gemma-3-270m-q4_k_m.gguf"   # `~` is the home directory;
//! context = 4096                                               # relative paths are relative
//! gpu_layers = 0                                               # to the models.toml file
//! threads = 2
//! flash_attn = "auto"        # how logits are computed, as llama-server's -fa, -b, -ub, -ctk,
//! batch = 2048               # -ctv (these are its defaults); a [[server]] entry's `flags`
//! ubatch = 512               # says how the server was started, which it does not report
//! cache_type_k = "f16"
//! cache_type_v = "f16"
//! prompt_split = "checkpoints" # a prompt's last tokens apart, as llama-server does for models
//!                              # with a sliding window (the default there), or "batches"
//! chat_format = "gemma"      # a prompt family, or "auto": the GGUF's template, else generic
//! temperature = 0.0          # default sampling: temperature, top_k, top_p, min_p, seed,
//! ```                        # max_tokens, repeat_penalty

use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::error::LlmError;
use super::settings::{ComputeOptions, PromptSplit, ServerFlags};
use toolrail_tools::prompt::PromptFamily;

/// File name of the test model the project's tests and benches use.
pub const TEST_MODEL_FILE: &str = "gemma-3-270m-q4_k_m.gguf";

/// Where downloaded models are cached: `$TOOLRAIL_MODEL_DIR`, else the platform cache directory
/// (`~/.cache/toolrail/models` on Linux), else `./models`.
pub fn model_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("TOOLRAIL_MODEL_DIR").filter(|d| !d.is_empty()) {
        return PathBuf::from(dir);
    }
    directories::ProjectDirs::from("", "", "toolrail")
        .map(|dirs| dirs.cache_dir().join("models"))
        .unwrap_or_else(|| PathBuf::from("models"))
}

/// The test model's path: `$TOOLRAIL_MODEL` if set, else [`TEST_MODEL_FILE`] in [`model_dir`]
/// (where `scripts/fetch-model.sh` puts it). The file may not exist.
pub fn test_model_path() -> PathBuf {
    match std::env::var_os("TOOLRAIL_MODEL").filter(|p| !p.is_empty()) {
        Some(path) => PathBuf::from(path),
        None => model_dir().join(TEST_MODEL_FILE),
    }
}

/// The machine's cores (1 when the platform cannot tell).
pub fn cores() -> u32 {
    std::thread::available_parallelism()
        .ok()
        .and_then(|n| u32::try_from(n.get()).ok())
        .unwrap_or(1)
}

/// The most decoding threads toolrail accepts: twice the machine's cores. More only makes the
/// threads wait for each other (ggml's workers spin), and thousands would exhaust the process.
pub fn max_threads() -> u32 {
    cores().saturating_mul(2)
}

/// Decoding threads when a window shares the machine: one core is left to the UI (ggml's
/// spinning workers would otherwise starve it), at least one thread.
pub fn threads_beside_a_window() -> u32 {
    cores().saturating_sub(1).max(1)
}

/// Checks a decoding thread count: 1 to [`max_threads`].
pub fn check_threads(threads: u32) -> Result<u32, String> {
    let max = max_threads();
    if (1..=max).contains(&threads) {
        Ok(threads)
    } else {
        Err(format!(
            "{threads} threads: use 1 to {max} (twice this machine's {} cores)",
            cores()
        ))
    }
}

/// Expands a leading `~` (alone or followed by `/`) to the home directory.
pub fn expand_tilde(path: &str) -> PathBuf {
    let home = || directories::BaseDirs::new().map(|d| d.home_dir().to_path_buf());
    if path == "~" {
        if let Some(home) = home() {
            return home;
        }
    } else if let Some(rest) = path.strip_prefix("~/")
        && let Some(home) = home()
    {
        return home.join(rest);
    }
    PathBuf::from(path)
}

/// How prompts are built for a model.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ChatFormat {
    /// The GGUF's own chat template where it has one, else the generic builder.
    #[default]
    Auto,
    /// One of toolrail's prompt builders.
    Family(PromptFamily),
}

/// Default sampling parameters of a model entry (each optional: the caller's defaults apply).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct SamplingDefaults {
    /// Temperature (0 = greedy).
    pub temperature: Option<f32>,
    /// Top-k (0 = off).
    pub top_k: Option<u32>,
    /// Top-p in (0, 1].
    pub top_p: Option<f32>,
    /// Min-p in [0, 1].
    pub min_p: Option<f32>,
    /// Random seed.
    pub seed: Option<u32>,
    /// Most tokens to generate.
    pub max_tokens: Option<u32>,
    /// Repetition penalty over the last generated tokens (1 = off).
    pub repeat_penalty: Option<f32>,
}

impl SamplingDefaults {
    /// Checks the values that are set; a bad one gives its key (as in `models.toml`) and what is
    /// wrong. The command line and `models.toml` share these rules.
    pub fn check(&self) -> Result<(), (&'static str, String)> {
        if let Some(t) = self.temperature
            && !(t.is_finite() && t >= 0.0)
        {
            return Err(("temperature", format!("must be 0 or more, not {t}")));
        }
        if let Some(p) = self.top_p
            && !(p > 0.0 && p <= 1.0)
        {
            return Err(("top_p", format!("must be in (0, 1], not {p}")));
        }
        if let Some(p) = self.min_p
            && !(0.0..=1.0).contains(&p)
        {
            return Err(("min_p", format!("must be in [0, 1], not {p}")));
        }
        if let Some(p) = self.repeat_penalty
            && !(p.is_finite() && p > 0.0)
        {
            return Err((
                "repeat_penalty",
                format!("must be more than 0 (1 is off), not {p}"),
            ));
        }
        if self.max_tokens == Some(0) {
            return Err(("max_tokens", "must be at least 1".to_owned()));
        }
        Ok(())
    }
}

/// A model and how to run it.
#[derive(Clone, Debug, PartialEq)]
pub struct ModelSpec {
    /// The name it is known by.
    pub name: String,
    /// The GGUF file (`~` expanded, relative paths resolved against the models file).
    pub path: PathBuf,
    /// Context size in tokens (`None`: 4096, capped at what the model was trained for).
    pub context: Option<u32>,
    /// Layers to offload to a GPU (0 on CPU-only builds).
    pub gpu_layers: u32,
    /// Threads for decoding (`None`: the number of cores).
    pub threads: Option<u32>,
    /// How the logits are computed (flash attention, batch sizes, cache types; unset:
    /// llama-server's defaults).
    pub compute: ComputeOptions,
    /// How prompts are built.
    pub chat_format: ChatFormat,
    /// Default sampling.
    pub sampling: SamplingDefaults,
}

impl ModelSpec {
    /// A spec for a bare GGUF path, with defaults and the file stem as its name.
    pub fn from_path(path: impl Into<PathBuf>) -> ModelSpec {
        let path = path.into();
        let name = path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| path.display().to_string());
        ModelSpec {
            name,
            path,
            context: None,
            gpu_layers: 0,
            threads: None,
            compute: ComputeOptions::default(),
            chat_format: ChatFormat::Auto,
            sampling: SamplingDefaults::default(),
        }
    }

    /// Every entry of the models file `file`.
    pub fn load_file(file: &Path) -> Result<Vec<ModelSpec>, LlmError> {
        let text = crate::files::read_regular_to_string(file, crate::files::MAX_TEXT_FILE_BYTES)
            .map_err(|e| LlmError::ModelsFile {
                file: file.to_path_buf(),
                message: format!("cannot read it: {}", e.into_io()),
            })?;
        Self::parse(&text, file)
    }

    /// Parses the text of a models file; `file` names it in errors and anchors relative paths.
    pub fn parse(text: &str, file: &Path) -> Result<Vec<ModelSpec>, LlmError> {
        Ok(parse_file(text, file)?.0)
    }
}

/// A llama-server toolrail can run on (a `[[server]]` entry of `models.toml`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServerSpec {
    /// The name it is known by (`--server NAME`).
    pub name: String,
    /// Its base URL, `http://host:port`.
    pub url: String,
    /// The name of the environment variable holding its API key (the key itself never goes in
    /// the file).
    pub api_key_env: Option<String>,
    /// A `[[model]]` entry of the same model (or one with the same tokenizer): its vocabulary
    /// lets toolrail send token ids and check every token the server sends.
    pub vocab: Option<String>,
    /// The flags the server was started with (`-fa on -ub 256 …`), as far as they change its
    /// logits: llama-server does not report them, and an in-process run can match them.
    pub flags: ServerFlags,
}

/// Both kinds of entries of a models file: `[[model]]` and `[[server]]`.
fn parse_file(text: &str, file: &Path) -> Result<(Vec<ModelSpec>, Vec<ServerSpec>), LlmError> {
    let raw: RawFile = toml::from_str(text).map_err(|e| LlmError::ModelsFile {
        file: file.to_path_buf(),
        message: e.to_string().trim_end().to_owned(),
    })?;
    let servers = {
        let mut servers: Vec<ServerSpec> = Vec::with_capacity(raw.server.len());
        for (index, entry) in raw.server.into_iter().enumerate() {
            let label = if entry.name.trim().is_empty() {
                format!("server #{}", index + 1)
            } else {
                entry.name.clone()
            };
            let bad = |message: &str| LlmError::ModelEntry {
                file: file.to_path_buf(),
                entry: label.clone(),
                message: message.to_owned(),
            };
            if entry.name.trim().is_empty() {
                return Err(bad("it has no `name`"));
            }
            if !entry.url.starts_with("http://") {
                return Err(bad(
                    "`url` must be an http:// URL (toolrail talks plain HTTP to llama-server)",
                ));
            }
            if servers.iter().any(|s| s.name == entry.name) {
                return Err(bad("the name is used by an earlier server"));
            }
            let flags = ServerFlags::parse(entry.flags.as_deref().unwrap_or(""))
                .map_err(|e| bad(&format!("`flags`: {e}")))?;
            servers.push(ServerSpec {
                flags,
                name: entry.name,
                url: entry.url,
                api_key_env: entry.api_key_env.filter(|v| !v.trim().is_empty()),
                vocab: entry.vocab.filter(|v| !v.trim().is_empty()),
            });
        }
        servers
    };
    Ok((models_from(raw.model, file)?, servers))
}

/// The `[[model]]` entries as specs, checked; `file` names them in errors.
fn models_from(entries: Vec<RawEntry>, file: &Path) -> Result<Vec<ModelSpec>, LlmError> {
    let base = file.parent().unwrap_or(Path::new(""));
    let mut specs: Vec<ModelSpec> = Vec::with_capacity(entries.len());
    for (index, entry) in entries.into_iter().enumerate() {
        let label = if entry.name.trim().is_empty() {
            format!("#{}", index + 1)
        } else {
            entry.name.clone()
        };
        let bad = |message: String| LlmError::ModelEntry {
            file: file.to_path_buf(),
            entry: label.clone(),
            message,
        };
        let spec = entry.into_spec(base).map_err(bad)?;
        if specs.iter().any(|s| s.name == spec.name) {
            return Err(LlmError::ModelEntry {
                file: file.to_path_buf(),
                entry: label,
                message: "the name is used by an earlier entry".to_owned(),
            });
        }
        specs.push(spec);
    }
    Ok(specs)
}

impl Models {
    /// The `[[server]]` entry called `name`.
    pub fn find_server(&self, name: &str) -> Result<ServerSpec, LlmError> {
        self.servers
            .iter()
            .find(|s| s.name == name)
            .cloned()
            .ok_or_else(|| LlmError::ModelsFile {
                file: PathBuf::from(self.source.to_string()),
                message: format!(
                    "no [[server]] entry named '{name}' (known: {})",
                    if self.servers.is_empty() {
                        "none".to_owned()
                    } else {
                        self.servers
                            .iter()
                            .map(|s| s.name.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    }
                ),
            })
    }
}

/// The name of the file that lists models by name.
pub const MODELS_FILE: &str = "models.toml";

/// Where the models toolrail knows by name came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ModelsSource {
    /// A `models.toml` file.
    File(PathBuf),
    /// No file was found: the built-in entry for the test model ([`builtin_models`]).
    BuiltIn,
}

impl std::fmt::Display for ModelsSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ModelsSource::File(path) => write!(f, "{}", path.display()),
            ModelsSource::BuiltIn => write!(f, "built-in default (no {MODELS_FILE} found)"),
        }
    }
}

/// The models toolrail knows by name, and where they came from.
#[derive(Clone, Debug, PartialEq)]
pub struct Models {
    /// The file they were read from, or the built-in default.
    pub source: ModelsSource,
    /// The entries, in file order.
    pub specs: Vec<ModelSpec>,
    /// The `[[server]]` entries, in file order.
    pub servers: Vec<ServerSpec>,
}

impl Models {
    /// Reads the models: from `explicit` when given (an error when it cannot be read), else from
    /// the first `models.toml` of [`models_file_candidates`], else the built-in default, so that
    /// a toolrail launched from anywhere finds the test model in its cache.
    pub fn load(explicit: Option<&Path>) -> Result<Models, LlmError> {
        let file = match explicit {
            Some(file) => Some(file.to_path_buf()),
            None => models_file_candidates().into_iter().find(|p| p.is_file()),
        };
        Ok(match file {
            Some(file) => {
                let text =
                    crate::files::read_regular_to_string(&file, crate::files::MAX_TEXT_FILE_BYTES)
                        .map_err(|e| LlmError::ModelsFile {
                            file: file.clone(),
                            message: format!("cannot read it: {}", e.into_io()),
                        })?;
                let (specs, servers) = parse_file(&text, &file)?;
                Models {
                    specs,
                    servers,
                    source: ModelsSource::File(file),
                }
            }
            None => Models {
                servers: Vec::new(),
                specs: builtin_models(),
                source: ModelsSource::BuiltIn,
            },
        })
    }

    /// The entry called `name`.
    pub fn find(&self, name: &str) -> Result<ModelSpec, LlmError> {
        self.specs
            .iter()
            .find(|s| s.name == name)
            .cloned()
            .ok_or_else(|| LlmError::UnknownModel {
                models: self.source.to_string(),
                name: name.to_owned(),
                known: self
                    .specs
                    .iter()
                    .map(|s| s.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
            })
    }
}

/// Where `models.toml` is looked for when no file is named, in order: the platform config
/// folder (`~/.config/toolrail/` on Linux), the folder of the running executable, the current
/// folder.
pub fn models_file_candidates() -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Some(dirs) = directories::ProjectDirs::from("", "", "toolrail") {
        out.push(dirs.config_dir().join(MODELS_FILE));
    }
    if let Some(dir) = std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent().map(Path::to_path_buf))
    {
        out.push(dir.join(MODELS_FILE));
    }
    out.push(PathBuf::from(MODELS_FILE));
    out
}

/// The entry used when no `models.toml` exists: the test model (Gemma 3 270M, fetched by
/// `scripts/fetch-model.sh`) at [`test_model_path`], as the repository's `models.toml` lists it.
pub fn builtin_models() -> Vec<ModelSpec> {
    vec![ModelSpec {
        name: "gemma-3-270m".into(),
        path: test_model_path(),
        context: Some(4096),
        gpu_layers: 0,
        threads: None,
        compute: ComputeOptions::default(),
        chat_format: ChatFormat::Family(PromptFamily::Gemma),
        sampling: SamplingDefaults {
            temperature: Some(0.0),
            ..SamplingDefaults::default()
        },
    }]
}

impl From<&ModelSpec> for ModelSpec {
    fn from(spec: &ModelSpec) -> ModelSpec {
        spec.clone()
    }
}

impl From<&Path> for ModelSpec {
    fn from(path: &Path) -> ModelSpec {
        ModelSpec::from_path(path)
    }
}

impl From<PathBuf> for ModelSpec {
    fn from(path: PathBuf) -> ModelSpec {
        ModelSpec::from_path(path)
    }
}

impl From<&PathBuf> for ModelSpec {
    fn from(path: &PathBuf) -> ModelSpec {
        ModelSpec::from_path(path.clone())
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    #[serde(default)]
    model: Vec<RawEntry>,
    #[serde(default)]
    server: Vec<RawServer>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawServer {
    #[serde(default)]
    name: String,
    #[serde(default)]
    url: String,
    api_key_env: Option<String>,
    vocab: Option<String>,
    flags: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawEntry {
    #[serde(default)]
    name: String,
    #[serde(default)]
    path: String,
    context: Option<u32>,
    #[serde(default)]
    gpu_layers: u32,
    threads: Option<u32>,
    flash_attn: Option<String>,
    batch: Option<u32>,
    ubatch: Option<u32>,
    cache_type_k: Option<String>,
    cache_type_v: Option<String>,
    prompt_split: Option<String>,
    chat_format: Option<String>,
    temperature: Option<f32>,
    top_k: Option<u32>,
    top_p: Option<f32>,
    min_p: Option<f32>,
    seed: Option<u32>,
    max_tokens: Option<u32>,
    repeat_penalty: Option<f32>,
}

impl RawEntry {
    fn into_spec(self, base: &Path) -> Result<ModelSpec, String> {
        if self.name.trim().is_empty() {
            return Err("it has no `name`".to_owned());
        }
        if self.path.trim().is_empty() {
            return Err("it has no `path`".to_owned());
        }
        let mut path = expand_tilde(&self.path);
        if path.is_relative() {
            path = base.join(path);
        }
        if self.context == Some(0) {
            return Err("`context` must be at least 1".to_owned());
        }
        if let Some(threads) = self.threads {
            check_threads(threads).map_err(|e| format!("`threads`: {e}"))?;
        }
        if self.batch == Some(0) || self.ubatch == Some(0) {
            return Err("`batch` and `ubatch` must be at least 1".to_owned());
        }
        let compute = ComputeOptions {
            flash_attention: self
                .flash_attn
                .as_deref()
                .map(str::parse)
                .transpose()
                .map_err(|e| format!("`flash_attn`: {e}"))?,
            batch: self.batch,
            ubatch: self.ubatch,
            cache_type_k: self
                .cache_type_k
                .as_deref()
                .map(str::parse)
                .transpose()
                .map_err(|e| format!("`cache_type_k`: {e}"))?,
            cache_type_v: self
                .cache_type_v
                .as_deref()
                .map(str::parse)
                .transpose()
                .map_err(|e| format!("`cache_type_v`: {e}"))?,
            prompt_split: match self.prompt_split.as_deref() {
                None => None,
                Some("batches") => Some(PromptSplit::Batches),
                Some("checkpoints") => Some(PromptSplit::Checkpoints),
                Some(other) => {
                    return Err(format!(
                        "`prompt_split`: unknown value '{other}' (batches or checkpoints)"
                    ));
                }
            },
        };
        let chat_format = match self.chat_format.as_deref() {
            None | Some("auto") => ChatFormat::Auto,
            Some(name) => ChatFormat::Family(name.parse().map_err(|_| {
                format!(
                    "unknown `chat_format` '{name}' (expected auto, llama3, hermes, gemma or generic)"
                )
            })?),
        };
        let sampling = SamplingDefaults {
            temperature: self.temperature,
            top_k: self.top_k,
            top_p: self.top_p,
            min_p: self.min_p,
            seed: self.seed,
            max_tokens: self.max_tokens,
            repeat_penalty: self.repeat_penalty,
        };
        sampling
            .check()
            .map_err(|(key, message)| format!("`{key}` {message}"))?;
        Ok(ModelSpec {
            name: self.name,
            path,
            context: self.context,
            gpu_layers: self.gpu_layers,
            threads: self.threads,
            compute,
            chat_format,
            sampling,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_server_entries_and_refuses_bad_ones() {
        let file = Path::new("/etc/toolrail/models.toml");
        let text = r#"
            [[server]]
            name = "gpu-box"
            url = "http://10.0.0.5:8080"
            api_key_env = "GPU_BOX_KEY"
            vocab = "gemma"
        "#;
        let (models, servers) = parse_file(text, file).unwrap();
        assert!(models.is_empty());
        assert_eq!(
            servers,
            vec![ServerSpec {
                name: "gpu-box".into(),
                url: "http://10.0.0.5:8080".into(),
                api_key_env: Some("GPU_BOX_KEY".into()),
                vocab: Some("gemma".into()),
                flags: ServerFlags::default(),
            }]
        );
        for (bad, says) in [
            ("[[server]]\nurl = \"http://a\"", "no `name`"),
            ("[[server]]\nname = \"a\"\nurl = \"https://a\"", "http://"),
            (
                "[[server]]\nname = \"a\"\nurl = \"http://a\"\napi_key = \"x\"",
                "api_key",
            ),
        ] {
            let e = parse_file(bad, file).unwrap_err().to_string();
            assert!(e.contains(says) && e.contains("models.toml"), "{e}");
        }
    }

    #[test]
    fn parses_the_repository_models_file() {
        let file = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../..")).join("models.toml");
        let specs = ModelSpec::load_file(&file).unwrap();
        let gemma = specs.iter().find(|s| s.name == "gemma-3-270m").unwrap();
        assert!(
            gemma
                .path
                .ends_with(".cache/toolrail/models/gemma-3-270m-q4_k_m.gguf")
        );
        assert!(!gemma.path.starts_with("~"));
        assert_eq!(gemma.context, Some(4096));
        assert_eq!(gemma.threads, None, "each run chooses its threads");
        assert_eq!(gemma.chat_format, ChatFormat::Family(PromptFamily::Gemma));
        assert_eq!(gemma.sampling.temperature, Some(0.0));
    }

    #[test]
    fn errors_name_the_file_and_entry() {
        let file = Path::new("/etc/toolrail/models.toml");
        let text = "[[model]]\nname = \"a\"\npath = \"a.gguf\"\nthreads = 0\n";
        let err = ModelSpec::parse(text, file).unwrap_err().to_string();
        assert!(
            err.starts_with(
                "/etc/toolrail/models.toml: model 'a': `threads`: 0 threads: use 1 to "
            ),
            "{err}"
        );
        // Thousands of threads would be spawned as asked: refused, with the limit.
        let text = "[[model]]\nname = \"a\"\npath = \"a.gguf\"\nthreads = 4096\n";
        let err = ModelSpec::parse(text, file).unwrap_err().to_string();
        let max = max_threads();
        assert!(
            err.contains(&format!("4096 threads: use 1 to {max}")),
            "{err}"
        );
        assert_eq!(check_threads(max), Ok(max));
        assert!(check_threads(max + 1).is_err());

        let text = "[[model]]\nname = \"a\"\npath = \"a.gguf\"\nrepeat_penalty = 0.0\n";
        let err = ModelSpec::parse(text, file).unwrap_err().to_string();
        assert_eq!(
            err,
            "/etc/toolrail/models.toml: model 'a': `repeat_penalty` must be more than 0 (1 is off), not 0"
        );
        let text = "[[model]]\nname = \"a\"\npath = \"a.gguf\"\nrepeat_penalty = 1.3\n";
        let specs = ModelSpec::parse(text, file).unwrap();
        assert_eq!(specs[0].sampling.repeat_penalty, Some(1.3));

        let text = "[[model]]\nname = \"a\"\npath = \"a.gguf\"\nchat_format = \"klingon\"\n";
        let err = ModelSpec::parse(text, file).unwrap_err().to_string();
        assert!(
            err.starts_with(
                "/etc/toolrail/models.toml: model 'a': unknown `chat_format` 'klingon'"
            ),
            "{err}"
        );

        let text = "[[model]]\npath = \"a.gguf\"\n";
        let err = ModelSpec::parse(text, file).unwrap_err().to_string();
        assert_eq!(
            err,
            "/etc/toolrail/models.toml: model '#1': it has no `name`"
        );

        let text = "[[model]]\nname = \"a\"\npath = \"a.gguf\"\ncontxt = 5\n";
        let err = ModelSpec::parse(text, file).unwrap_err().to_string();
        assert!(err.starts_with("/etc/toolrail/models.toml: "), "{err}");
        assert!(err.contains("contxt"), "{err}");

        let text =
            "[[model]]\nname = \"a\"\npath = \"x/a.gguf\"\n[[model]]\nname = \"a\"\npath = \"b\"\n";
        let err = ModelSpec::parse(text, file).unwrap_err().to_string();
        assert!(
            err.contains("model 'a': the name is used by an earlier entry"),
            "{err}"
        );
    }

    #[test]
    fn relative_paths_follow_the_file_and_unknown_names_list_the_known() {
        let text = "[[model]]\nname = \"a\"\npath = \"x/a.gguf\"\n";
        let specs = ModelSpec::parse(text, Path::new("/m/models.toml")).unwrap();
        assert_eq!(specs[0].path, PathBuf::from("/m/x/a.gguf"));
        assert_eq!(specs[0].chat_format, ChatFormat::Auto);

        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("models.toml");
        std::fs::write(&file, text).unwrap();
        let models = Models::load(Some(&file)).unwrap();
        assert_eq!(models.source, ModelsSource::File(file.clone()));
        let err = models.find("b").unwrap_err().to_string();
        assert!(err.ends_with("no model named 'b' (known: a)"), "{err}");
        assert_eq!(models.find("a").unwrap().name, "a");
        // A named file that cannot be read is an error, never the built-in default.
        let missing = dir.path().join("nope.toml");
        assert!(Models::load(Some(&missing)).is_err());
    }

    #[test]
    fn the_builtin_default_is_the_repository_entry_for_the_test_model() {
        let file = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../..")).join(MODELS_FILE);
        let repo = Models::load(Some(&file)).unwrap();
        let builtin = builtin_models();
        assert_eq!(builtin.len(), 1);
        let (a, b) = (&repo.specs[0], &builtin[0]);
        assert_eq!(
            (&a.name, a.context, a.chat_format),
            (&b.name, b.context, b.chat_format)
        );
        assert_eq!(a.sampling, b.sampling);
        assert_eq!(b.path, test_model_path());
        // The last place looked in is the current folder.
        assert_eq!(
            models_file_candidates().last(),
            Some(&PathBuf::from(MODELS_FILE))
        );
    }

    #[test]
    fn tilde_expands_to_home() {
        let home = directories::BaseDirs::new()
            .unwrap()
            .home_dir()
            .to_path_buf();
        assert_eq!(expand_tilde("~"), home);
        assert_eq!(expand_tilde("~/m.gguf"), home.join("m.gguf"));
        assert_eq!(expand_tilde("/a/~/b"), PathBuf::from("/a/~/b"));
        assert_eq!(expand_tilde("~other/x"), PathBuf::from("~other/x"));
    }
}
