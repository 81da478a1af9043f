//! What the subcommands share: reading inputs (a file or standard input), loading tool sets
//! and grammars with their findings on standard error, and `--threads`.

use std::io::Read;
use std::path::Path;
use std::process::ExitCode;

use anyhow::Context as _;
use toolrail_tools::shape::{Severity, ToolSetWarning};
use toolrail_tools::toolset::ToolSet;

/// Parses a `--threads` value: 1 to twice the machine's cores.
pub fn parse_threads(text: &str) -> Result<u32, String> {
    let n: u32 = text
        .parse()
        .map_err(|_| format!("'{text}' is not a number of threads"))?;
    toolrail_llm::check_threads(n)
}

/// Reads a file, or standard input for `-`.
pub fn read_input(path: &str) -> anyhow::Result<Vec<u8>> {
    if path == "-" {
        let mut buf = Vec::new();
        std::io::stdin().read_to_end(&mut buf).map_err(|e| {
            anyhow::anyhow!(
                "cannot read standard input (after {} bytes): {e}",
                buf.len()
            )
        })?;
        Ok(buf)
    } else {
        // Only a regular file: a FIFO would block the open for ever.
        toolrail_llm::files::read_regular(
            std::path::Path::new(path),
            toolrail_llm::files::MAX_TEXT_FILE_BYTES,
        )
        .map_err(|e| cannot_read(path, &e.into_io()))
    }
}

/// The error for a file that cannot be read, saying what the path is when it is not a file.
pub fn cannot_read(path: &str, e: &std::io::Error) -> anyhow::Error {
    match std::fs::metadata(path) {
        Ok(meta) if meta.is_dir() => {
            anyhow::anyhow!("cannot read {path}: it is a directory, not a file")
        }
        _ if e.kind() == std::io::ErrorKind::NotFound => anyhow::anyhow!(
            "cannot read {path}: {e} (relative paths start at the current directory; `-` reads \
             standard input)"
        ),
        _ if e.kind() == std::io::ErrorKind::PermissionDenied => anyhow::anyhow!(
            "cannot read {path}: {e} (the file's owner or mode does not let you read it)"
        ),
        _ => anyhow::anyhow!("cannot read {path}: {e}"),
    }
}

/// Reads a file (or standard input for `-`) as UTF-8 text; `what` names its role in the error
/// ("the tool set", "the output"), which gives the first bad byte's line:column and offset.
pub fn read_text(path: &str, what: &str) -> anyhow::Result<String> {
    let bytes = read_input(path)?;
    String::from_utf8(bytes).map_err(|e| {
        let offset = e.utf8_error().valid_up_to();
        let at = toolrail_gbnf::source::line_col(e.as_bytes(), offset);
        let name = if path == "-" { "<stdin>" } else { path };
        anyhow::anyhow!("{name}:{at}: {what} is not valid UTF-8 (byte offset {offset})")
    })
}

/// Loads a tool set from `text` (read from `path`) and tells on standard error the shape it was
/// read as and every warning and note loading gave (each naming tool, JSON pointer and key).
pub fn load_tool_set(text: &str, path: &str) -> anyhow::Result<ToolSet> {
    load_tool_set_from(text, path, toolrail_tools::toolset::ToolSource::Auto)
}

/// [`load_tool_set`] from text written in `source` (JSON, Python functions, or found).
pub fn load_tool_set_from(
    text: &str,
    path: &str,
    source: toolrail_tools::toolset::ToolSource,
) -> anyhow::Result<ToolSet> {
    let tools = ToolSet::from_source(text, source).with_context(|| path.to_owned())?;
    if let Some(shape) = tools.shape() {
        let noun = if tools.len() == 1 { "tool" } else { "tools" };
        errln!("note: {path}: read as {shape} ({} {noun})", tools.len());
    }
    // Notes repeat per tool (every MCP tool's `title`, …): one line per note text, with the
    // number of tools and the first place. Warnings are printed one by one.
    let mut notes: Vec<(&str, &ToolSetWarning, usize)> = Vec::new();
    for w in tools.warnings() {
        match w.severity() {
            Severity::Warning => errln!("warning: {path}: {w}"),
            Severity::Note => match notes.iter_mut().find(|(m, _, _)| *m == w.message) {
                Some((_, _, count)) => *count += 1,
                None => notes.push((&w.message, w, 1)),
            },
        }
    }
    for (message, first, count) in notes {
        if count == 1 {
            errln!("note: {path}: {first}");
        } else {
            errln!(
                "note: {path}: {message} ({count} times, first at {})",
                first.pointer
            );
        }
    }
    Ok(tools)
}

/// The shape and the load warnings of a tool set as JSON fields (`shape`, `warnings`) for the
/// commands' `--json` output.
pub fn tool_set_json(tools: &ToolSet) -> (serde_json::Value, serde_json::Value) {
    let shape = match tools.shape() {
        Some(s) => serde_json::json!({"id": s.id(), "name": s.name()}),
        None => serde_json::Value::Null,
    };
    let warnings = tools
        .warnings()
        .iter()
        .map(|w| {
            serde_json::json!({
                "severity": w.severity().label(),
                "kind": w.kind.id(),
                "tool": w.tool,
                "pointer": w.pointer,
                "key": w.key,
                "message": w.message,
            })
        })
        .collect();
    (shape, serde_json::Value::Array(warnings))
}

/// Reads a grammar file as UTF-8, naming the first bad byte's line:column otherwise.
pub fn read_grammar(path: &str) -> anyhow::Result<String> {
    read_text(path, "the grammar")
}

/// Refuses a grammar that lint says can never be completed (GB107 as an error, GB108, GB110):
/// prints those findings and returns the failure status, so `check` and `generate` never run
/// a grammar that can only end incomplete or abort llama.cpp.
pub fn refuse_unusable(text: &str, path: &str) -> Result<(), ExitCode> {
    let unusable: Vec<_> = toolrail_gbnf::lint::lint_default(text)
        .into_iter()
        .filter(|d| d.code.makes_grammar_unusable() && d.severity == toolrail_gbnf::Severity::Error)
        .collect();
    if unusable.is_empty() {
        return Ok(());
    }
    let name = Path::new(path).display().to_string();
    for d in &unusable {
        errln!("{}", d.render(text.as_bytes(), &name));
    }
    errln!("toolrail: {name}: the grammar can never be completed (see above); not running it");
    Err(ExitCode::from(2))
}

/// Parses and builds a grammar file, printing every finding on failure.
pub fn load_grammar(path: &str) -> Result<toolrail_gbnf::Grammar, ExitCode> {
    let text = match read_grammar(path) {
        Ok(t) => t,
        Err(e) => {
            errln!("toolrail: {}", crate::cli::output::error_text(&e));
            return Err(ExitCode::from(2));
        }
    };
    toolrail_gbnf::Grammar::parse(&text).map_err(|e| {
        let name = Path::new(path).display().to_string();
        for d in &e.diagnostics {
            errln!("{}", d.render(text.as_bytes(), &name));
        }
        ExitCode::from(2)
    })
}

/// Refuses, before anything runs, a command whose outputs would overwrite one another or one
/// of its inputs: two outputs naming the same file, or an output naming an input (the model,
/// the tool set, ...). Each entry is the option and the path it names, if given; `-` (standard
/// input) and an empty path are no file. Files are compared by canonical path (an output that does not exist yet
/// by its folder's canonical path and its name).
pub fn refuse_clashing_files(
    outputs: &[(&str, Option<&Path>)],
    inputs: &[(&str, Option<&Path>)],
) -> anyhow::Result<()> {
    let named = |files: &[(&str, Option<&Path>)]| -> Vec<(String, std::path::PathBuf, String)> {
        files
            .iter()
            .filter_map(|(option, path)| Some((option.to_string(), (*path)?)))
            .filter(|(_, path)| !path.as_os_str().is_empty() && path.as_os_str() != "-")
            .map(|(option, path)| (option, file_identity(path), path.display().to_string()))
            .collect()
    };
    let outputs = named(outputs);
    let inputs = named(inputs);
    for (i, (option, identity, shown)) in outputs.iter().enumerate() {
        if let Some((other, _, other_shown)) = outputs[..i].iter().find(|(_, id, _)| id == identity)
        {
            anyhow::bail!(
                "{other} {other_shown} and {option} {shown} are the same file: each output needs \
                 a file of its own (nothing was run)"
            );
        }
        if let Some((input, _, input_shown)) = inputs.iter().find(|(_, id, _)| id == identity) {
            anyhow::bail!(
                "{option} {shown} is the {input} file {input_shown}: writing it would replace an \
                 input (nothing was run)"
            );
        }
    }
    Ok(())
}

/// What a path names, for comparing files: its canonical path when it exists, else its
/// folder's canonical path joined with its name, else the path as given.
fn file_identity(path: &Path) -> std::path::PathBuf {
    if let Ok(canonical) = std::fs::canonicalize(path) {
        return canonical;
    }
    let folder = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    match (std::fs::canonicalize(folder), path.file_name()) {
        (Ok(folder), Some(name)) => folder.join(name),
        _ => path.to_path_buf(),
    }
}
