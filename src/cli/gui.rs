//! `toolrail gui` (and `toolrail` with no arguments): opens the desktop app.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};

use anyhow::{Context as _, anyhow};
use clap::Args;

use toolrail_app::{AppOptions, ToolrailApp};

/// Options of `toolrail gui`.
#[derive(Debug, Args, Default)]
pub struct GuiArgs {
    /// The workspace file to load and save (default: workspace.json in toolrail's config folder).
    #[arg(long, value_name = "PATH")]
    pub workspace: Option<PathBuf>,
    /// Render the app once with its workspace, save a PNG screenshot here and exit.
    #[arg(long, value_name = "OUT.png")]
    pub screenshot: Option<PathBuf>,
}

/// Runs the app until its window closes.
pub fn run(args: &GuiArgs) -> anyhow::Result<ExitCode> {
    super::common::refuse_clashing_files(
        &[("--screenshot", args.screenshot.as_deref())],
        &[("--workspace", args.workspace.as_deref())],
    )?;
    let workspace_path = match &args.workspace {
        Some(p) => p.clone(),
        None => toolrail_workbench::workspace::default_path().ok_or_else(|| {
            anyhow!("no home folder to keep the workspace in; pass --workspace PATH")
        })?,
    };
    let outcome: toolrail_app::screenshot::Outcome = Arc::new(Mutex::new(None));
    let mut options = AppOptions::interactive(workspace_path);
    if let Some(out) = &args.screenshot {
        options.screenshot = Some((out.clone(), Arc::clone(&outcome)));
        options.settle = true;
        options.autosave = false;
    }
    // The window opens at the size it had when the app last closed (kept in the workspace).
    let size = toolrail_workbench::workspace::saved_window_size(&options.workspace_path)
        .unwrap_or([1440.0, 900.0]);
    let mut viewport = egui::ViewportBuilder::default()
        .with_title("toolrail")
        .with_inner_size(size);
    if let Some(icon) = toolrail_app::icon::window_icon() {
        viewport = viewport.with_icon(icon);
    }
    let native = eframe::NativeOptions {
        viewport,
        ..Default::default()
    };
    eframe::run_native(
        "toolrail",
        native,
        Box::new(move |cc| Ok(Box::new(ToolrailApp::in_window(cc, options)))),
    )
    .map_err(|e| {
        anyhow!(
            "cannot open the window: {e} (the app needs a display: a desktop session, or \
             DISPLAY/WAYLAND_DISPLAY set; the subcommands in `toolrail --help` work without one)"
        )
    })?;
    if let Some(out) = &args.screenshot {
        let result = outcome
            .lock()
            .map_err(|_| anyhow!("the screenshot callback panicked"))?
            .take();
        match result {
            Some(Ok(())) => outln!("screenshot written to {}", out.display())?,
            Some(Err(e)) => return Err(anyhow!(e)),
            None => {
                return Err(anyhow!("the window closed before the screenshot was taken"))
                    .context(format!("writing {}", out.display()));
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
