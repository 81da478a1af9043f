//! Fuzz target over the workspace and transcript readers: the first byte picks the reader, the
//! rest is the file. A workspace is loaded from a file (a damaged one is moved aside, so each
//! run starts in an empty folder) and analysed as the app does at start; a transcript is parsed and rendered as Markdown. Nothing may
//! panic, abort, overflow the stack or hang.
#![no_main]

use libfuzzer_sys::fuzz_target;
use toolrail_workbench::transcript::{Transcript, to_markdown};
use toolrail_workbench::analysis::{AnalysisInput, Computer};
use toolrail_workbench::workspace;

fuzz_target!(|data: &[u8]| {
    let Some((&which, file)) = data.split_first() else { return };
    if which & 1 == 0 {
        let dir = std::env::temp_dir().join(format!("toolrail-fuzz-ws-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let _ = std::fs::create_dir_all(&dir);
        let path = dir.join("workspace.json");
        if std::fs::write(&path, file).is_err() {
            return;
        }
        let loaded = workspace::load(&path);
        // What the app does at start: analyse the workspace.
        let input = AnalysisInput::from_workspace(&loaded.workspace, usize::from(which));
        let _ = Computer::default().compute(&input);
    } else {
        let Ok(text) = std::str::from_utf8(file) else { return };
        if let Ok(transcript) = Transcript::from_json(text, "fuzz.json") {
            let _ = to_markdown(&transcript);
        }
    }
});
