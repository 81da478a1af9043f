//! `toolrail models [--models FILE] [--check]`: which `models.toml` toolrail reads (or the
//! built-in default), its `[[model]]` entries with whether each file is there, and its
//! `[[server]]` entries; `--check` asks every server for its health and `/props`.

use std::path::PathBuf;
use std::process::ExitCode;

use toolrail_llm::Models;
use toolrail_llm::server::ServerClient;

/// Arguments of `toolrail models`.
#[derive(Debug, clap::Args)]
pub struct ModelsArgs {
    /// The models file (default: the first `models.toml` in the config folder, beside the
    /// executable or in the current folder; else the built-in entry for the test model).
    #[arg(long)]
    pub models: Option<PathBuf>,
    /// Connect to every server and show its build, model and context.
    #[arg(long)]
    pub check: bool,
}

/// Runs `toolrail models`: exit 0, or 1 when a model file is missing or a checked server does
/// not answer.
pub fn run(args: &ModelsArgs) -> anyhow::Result<ExitCode> {
    let models = Models::load(args.models.as_deref())?;
    outln!("models file: {}", models.source)?;
    let mut all_there = true;
    for spec in &models.specs {
        let there = spec.path.is_file();
        all_there &= there;
        outln!(
            "model  {}  {}{}",
            spec.name,
            spec.path.display(),
            if there { "" } else { "  (missing)" }
        )?;
    }
    for server in &models.servers {
        let key = server
            .api_key_env
            .as_deref()
            .map(|v| format!("  key from ${v}"))
            .unwrap_or_default();
        outln!("server {}  {}{key}", server.name, server.url)?;
        if args.check {
            let api_key = server
                .api_key_env
                .as_deref()
                .and_then(|v| std::env::var(v).ok());
            let status = ServerClient::new(&server.url, api_key).and_then(|c| {
                c.health()?;
                c.props()
            });
            match status {
                Ok(props) => outln!(
                    "       ok: build {}, model {}, context {}",
                    props.build_info.as_deref().unwrap_or("unknown"),
                    props
                        .model_alias
                        .as_deref()
                        .or(props.model_path.as_deref())
                        .unwrap_or("unnamed"),
                    props.n_ctx.map_or("unknown".to_owned(), |n| n.to_string())
                )?,
                Err(e) => {
                    all_there = false;
                    outln!("       {e}")?;
                }
            }
        }
    }
    Ok(if all_there {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
