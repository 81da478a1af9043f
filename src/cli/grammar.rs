//! `toolrail grammar FILE [--schema] [--from auto|json|python] [--format F] [--parallel] [--auto] [--compact] [--lenient]
//! [-o OUT]`: prints (or writes) the tool-call grammar of a tool set, or with `--schema` the
//! grammar of a plain JSON Schema. The tool set's shape (MCP, Anthropic, Gemini, OpenAI, …), the
//! keys it did not read and other warnings go to standard error. `-o` writes atomically (a
//! temporary file in the same directory, then a rename). Exit 0 on success, 2 on errors.

use std::path::Path;
use std::process::ExitCode;

use anyhow::Context as _;

use toolrail_tools::envelope::Format;
use toolrail_tools::grammar::{GrammarOptions, schema_grammar, tool_call_grammar};
use toolrail_tools::toolset::ToolSource;

/// The `--format` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum FormatArg {
    /// `{"name": ..., "arguments": {...}}`.
    Openai,
    /// `{"name": ..., "parameters": {...}}` (Llama 3.1).
    Llama3,
    /// `<tool_call>\n{...}\n</tool_call>` (Hermes, Qwen).
    Hermes,
    /// `call:name{...}` (Gemma).
    Gemma,
    /// `name(arg=value, ...)` with Python literals.
    Pythonic,
}

impl From<FormatArg> for Format {
    fn from(f: FormatArg) -> Self {
        match f {
            FormatArg::Openai => Format::OpenAi,
            FormatArg::Llama3 => Format::Llama3,
            FormatArg::Hermes => Format::Hermes,
            FormatArg::Gemma => Format::Gemma,
            FormatArg::Pythonic => Format::Pythonic,
        }
    }
}

/// The `--from` values: what the tool set file is written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum FromArg {
    /// Found from the text (Python when it has `def` statements and is not JSON).
    #[default]
    Auto,
    /// JSON tool definitions in any shape.
    Json,
    /// Python function definitions (type hints, defaults, docstrings; never run).
    Python,
}

impl From<FromArg> for ToolSource {
    fn from(f: FromArg) -> Self {
        match f {
            FromArg::Auto => ToolSource::Auto,
            FromArg::Json => ToolSource::Json,
            FromArg::Python => ToolSource::Python,
        }
    }
}

/// Arguments of `toolrail grammar`.
#[derive(Debug, clap::Args)]
pub struct GrammarArgs {
    /// The tool set (OpenAI `tools` or `functions`, an MCP tools/list result, Anthropic or Gemini
    /// tools, a function list, a single tool; the shape is found; or Python function
    /// definitions), or with `--schema` a JSON Schema; `-` for standard input.
    pub file: String,
    /// What FILE is written in (default: found from the text).
    #[arg(long, value_enum, default_value_t = FromArg::Auto)]
    pub from: FromArg,
    /// FILE is a plain JSON Schema: print the grammar of its values (no envelope).
    #[arg(long)]
    pub schema: bool,
    /// The envelope calls are written in (default: openai).
    #[arg(long, value_enum)]
    pub format: Option<FormatArg>,
    /// Allow several calls (a JSON list, or envelopes separated by newlines).
    #[arg(long)]
    pub parallel: bool,
    /// Allow plain text (not starting like a call) instead of a call.
    #[arg(long)]
    pub auto: bool,
    /// No whitespace between JSON tokens (default: none or a single space).
    #[arg(long)]
    pub compact: bool,
    /// Turn unsupported keywords into warnings instead of errors.
    #[arg(long)]
    pub lenient: bool,
    /// Write the grammar to this file instead of standard output (not FILE itself).
    #[arg(short = 'o', long = "output")]
    pub out: Option<String>,
}

/// Runs `toolrail grammar`.
pub fn run(args: &GrammarArgs) -> anyhow::Result<ExitCode> {
    if args.schema && (args.format.is_some() || args.parallel || args.auto) {
        errln!("toolrail: --format, --parallel and --auto apply to tool sets, not to --schema");
        return Ok(ExitCode::from(2));
    }
    let what = if args.schema {
        "the schema"
    } else {
        "the tool set"
    };
    super::common::refuse_clashing_files(
        &[("--output", args.out.as_deref().map(Path::new))],
        &[("input", Some(Path::new(&args.file)))],
    )?;
    let text = super::common::read_text(&args.file, what)?;
    let opts = GrammarOptions {
        format: args.format.unwrap_or(FormatArg::Openai).into(),
        parallel: args.parallel,
        auto: args.auto,
        compact: args.compact,
        lenient: args.lenient,
    };
    let grammar = if args.schema {
        let schema: serde_json::Value =
            serde_json::from_str(&text).with_context(|| format!("{}: not JSON", args.file))?;
        schema_grammar(&schema, &opts).with_context(|| args.file.clone())?
    } else {
        let tools = super::common::load_tool_set_from(&text, &args.file, args.from.into())?;
        tool_call_grammar(&tools, &opts).with_context(|| args.file.clone())?
    };
    for w in &grammar.warnings {
        errln!("warning: {w}");
    }
    // The grammar is the product: it must load in llama.cpp, whose limits the parser mirrors.
    if let Err(e) = toolrail_gbnf::Grammar::parse(&grammar.text) {
        anyhow::bail!(
            "{}: llama.cpp would refuse the grammar made from it ({e}); this is a toolrail bug, \
             please report it with this file",
            args.file
        );
    }
    match &args.out {
        None => super::output::write_data(&grammar.text)?,
        Some(path) => write_atomically(Path::new(path), grammar.text.as_bytes())?,
    }
    Ok(ExitCode::SUCCESS)
}

/// Writes `data` to `path` atomically (see [`toolrail_workbench::fsutil::write_atomic`]).
pub fn write_atomically(path: &Path, data: &[u8]) -> anyhow::Result<()> {
    toolrail_workbench::fsutil::write_atomic(path, data)
        .with_context(|| format!("cannot write {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn atomic_write_replaces_and_leaves_no_temp_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("g.gbnf");
        std::fs::write(&path, "old").unwrap();
        write_atomically(&path, b"root ::= \"x\"\n").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "root ::= \"x\"\n");
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names.len(), 1, "{names:?}");
    }

    #[test]
    fn writes_a_tool_grammar_file() {
        let dir = tempfile::tempdir().unwrap();
        let tools = dir.path().join("tools.json");
        std::fs::write(
            &tools,
            r#"[{"name": "f", "parameters": {"type": "object"}}]"#,
        )
        .unwrap();
        let out = dir.path().join("out.gbnf");
        let args = GrammarArgs {
            file: tools.display().to_string(),
            schema: false,
            from: FromArg::Auto,
            format: Some(FormatArg::Pythonic),
            parallel: true,
            auto: true,
            compact: false,
            lenient: false,
            out: Some(out.display().to_string()),
        };
        assert_eq!(run(&args).unwrap(), ExitCode::SUCCESS);
        let text = std::fs::read_to_string(&out).unwrap();
        assert!(toolrail_gbnf::Grammar::parse(&text).is_ok(), "{text}");
        let schema_with_envelope = GrammarArgs {
            schema: true,
            ..args
        };
        assert_eq!(run(&schema_with_envelope).unwrap(), ExitCode::from(2));
    }
}
