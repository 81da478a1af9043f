//! The app on a real llama-server b11434 (started by the suite on 127.0.0.1 with the test
//! model, as the server engine's own tests do): "Connect to server…" in the model picker, the
//! server's `/health` and `/props` shown, Start run on the server, and the run's token chips
//! with candidates and toolrail's stacks; a refused connection said in words. Renders the
//! connected state at 1024×700 in both themes (written under the target's temporary folder,
//! not compared: the port and the timings differ per run). Under `CI=true` nothing skips.

use egui_kittest::Harness;
use egui_kittest::kittest::Queryable;
use toolrail_app::{AppOptions, ToolrailApp};
use toolrail_workbench::run::{LoadState, RunPhase, ServerState};
use toolrail_workbench::transcript::{ServerRequest, Stop};

use crate::common::app::{compare_runs, settle, wait_until};

#[allow(dead_code)] // shared with toolrail-llm's tests, which use all of it
#[path = "../../../toolrail-llm/tests/it/common/llama_server.rs"]
mod llama_server;

/// The variable the test sets to the server's key (typed into the connect form by name).
const KEY_VARIABLE: &str = "TOOLRAIL_APP_TEST_SERVER_KEY";

fn app_at(dir: &std::path::Path, theme: egui::Theme) -> Harness<'static, ToolrailApp> {
    let options = AppOptions {
        workspace_path: dir.join("workspace.json"),
        autosave: false,
        screenshot: None,
        settle: true,
        demo_run: false,
    };
    let mut harness = Harness::builder()
        .with_size([1024.0, 700.0])
        .with_theme(theme)
        .wgpu()
        .build_eframe(move |cc| ToolrailApp::new(&cc.egui_ctx, options));
    harness.step();
    harness
}

/// Opens the model picker, picks "Connect to server…", fills the form and connects.
fn connect_through_the_picker(
    harness: &mut Harness<'_, ToolrailApp>,
    url: &str,
    key_variable: &str,
) {
    harness.get_by_label("Model").click();
    settle(harness);
    harness.get_by_label("Connect to server…").click();
    settle(harness);
    let field = harness.get_by_label("Server URL");
    field.click();
    settle(harness);
    harness.get_by_label("Server URL").type_text(url);
    settle(harness);
    harness.get_by_label("API key variable").click();
    settle(harness);
    harness
        .get_by_label("API key variable")
        .type_text(key_variable);
    settle(harness);
    harness.get_by_label("Connect").click();
    settle(harness);
}

#[test]
fn connect_to_a_llama_server_run_there_and_see_chips_with_candidates_and_stacks() {
    let Some(model) = crate::common::model() else {
        return;
    };
    let Some(server) = llama_server::start(&model) else {
        return;
    };
    // SAFETY: set once, before the app reads it, to a name no other test uses.
    #[allow(unsafe_code)] // setting a variable is unsafe since Rust 2024 (other threads may read)
    unsafe {
        std::env::set_var(KEY_VARIABLE, llama_server::API_KEY)
    };
    let dir = tempfile::tempdir().unwrap();
    let mut harness = app_at(dir.path(), egui::Theme::Dark);
    {
        let settings = &mut harness.state_mut().shared.run.settings;
        settings.model = "gemma-3-270m".into();
        settings.gguf = Some(model.clone());
        settings.threads = Some(1);
        settings.sampling.max_tokens = 24;
    }
    connect_through_the_picker(&mut harness, &server.url, KEY_VARIABLE);
    wait_until(&mut harness, "the connection", |app| {
        !matches!(
            app.shared.run.controller.server_state(),
            ServerState::Connecting { .. }
        )
    });
    let connection = match harness.state().shared.run.controller.server_state() {
        ServerState::Connected(c) => c.clone(),
        other => panic!("not connected: {other:?}"),
    };
    assert_eq!(connection.props.build(), Some(11434));
    // what /props and /health said is on screen
    harness.get_by_label("health: ok");
    harness.get_by_label("b11434-unknown");
    harness.get_by_label("gemma-3-270m");
    harness.get_by_label("2048 tokens per slot, 1 slot(s)");
    harness.get_by_label("its chat template does not take tools");
    // Start run loads the local model (its vocabulary) first, then runs on the server
    // the pane is taller than the window now: bring the button into view, then press it
    harness.get_by_label("Start run").scroll_to_me();
    settle(&mut harness);
    harness.get_by_label("Start run").click();
    wait_until(&mut harness, "the server run to end", |app| {
        let c = &app.shared.run.controller;
        matches!(c.load_state(), LoadState::Failed { .. })
            || c.latest().is_some_and(|r| r.phase == RunPhase::Finished)
    });
    let run = harness
        .state()
        .shared
        .run
        .controller
        .latest()
        .unwrap()
        .clone();
    let server_run = run.server_run.clone().expect("the run went to the server");
    assert_eq!(server_run.url, server.url);
    assert_eq!(server_run.request, ServerRequest::Grammar);
    assert!(
        matches!(
            run.finish.as_ref().map(|f| &f.stop),
            Some(Stop::EndOfGeneration | Stop::MaxTokens)
        ),
        "{:?} {:?}",
        run.finish,
        run.errors
    );
    assert!(!run.tokens.is_empty());
    // candidates before the grammar from the server, after it from toolrail's mask, stacks
    // from toolrail's recognizer following every token; none flagged
    for t in &run.tokens {
        assert!(!t.before.is_empty(), "token {} has no candidates", t.index);
        assert!(t.stacks.is_some(), "token {} has no stacks", t.index);
        assert!(t.flag.is_none(), "token {}: {:?}", t.index, t.flag);
    }
    assert!(run.tokens.iter().any(|t| !t.after.is_empty()));
    let transcript = run.transcript();
    assert_eq!(
        transcript.server_run.as_ref().map(|r| &r.url),
        Some(&server.url)
    );
    assert!(
        transcript
            .server
            .as_deref()
            .is_some_and(|s| s.contains("b11434"))
    );
    harness.get_by_label_contains(&format!("on {} (grammar)", server.url));
    // the chips are on screen (the Generation pane draws one per token)
    assert!(
        harness.query_all_by_label(&run.tokens[0].piece).count() > 0
            || run.tokens[0].piece.trim().is_empty()
    );
    // a chip of the server's run opens its candidates before and after the mask and its stacks
    let (index, token) = run
        .tokens
        .iter()
        .enumerate()
        .find(|(_, t)| t.piece.len() > 1 && t.piece.chars().all(|c| c.is_ascii_alphanumeric()))
        .expect("a plain word token");
    // The chips may sit below the pane's scrolled view: click through accesskit.
    harness
        .get_all_by_label(&token.piece)
        .next()
        .unwrap()
        .click_accesskit();
    harness.run_steps(3);
    harness.get_by_label_contains(&format!("Token {index}: "));
    harness.get_by_label("Before the mask");
    harness.get_by_label("After the mask");
    harness.get_by_label_contains("Stacks after this token");
    // A server run cannot be branched: no Force buttons on its tokens, and Step (F10) says
    // why instead of streaming the whole answer.
    assert_eq!(harness.query_all_by_label("Force").count(), 0);
    let runs_before = harness.state().shared.run.controller.runs().len();
    harness.key_press(egui::Key::F10);
    settle(&mut harness);
    assert_eq!(
        harness.state().shared.run.controller.runs().len(),
        runs_before
    );
    harness.get_by_label_contains("Step works on in-process runs");
    // the connected state, both themes, at 1024×700
    let out = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"));
    for (theme, name) in [(egui::Theme::Dark, "dark"), (egui::Theme::Light, "light")] {
        harness.state_mut().shared.workspace.theme = match theme {
            egui::Theme::Dark => toolrail_workbench::workspace::Theme::Dark,
            egui::Theme::Light => toolrail_workbench::workspace::Theme::Light,
        };
        settle(&mut harness);
        let image = harness.render().expect("rendered");
        let (w, h) = image.dimensions();
        let color =
            egui::ColorImage::from_rgba_unmultiplied([w as usize, h as usize], image.as_raw());
        let path = out.join(format!("server_connected_{name}_1024.png"));
        toolrail_app::screenshot::write_png(&path, &color).unwrap();
        eprintln!("connected state, {name}: {}", path.display());
    }
}

#[test]
fn a_refused_connection_is_said_in_words() {
    let dir = tempfile::tempdir().unwrap();
    let mut harness = app_at(dir.path(), egui::Theme::Dark);
    // port 9 (discard): nothing listens there on a test machine
    connect_through_the_picker(&mut harness, "http://127.0.0.1:9", "");
    wait_until(&mut harness, "the attempt to fail", |app| {
        !matches!(
            app.shared.run.controller.server_state(),
            ServerState::Connecting { .. }
        )
    });
    match harness.state().shared.run.controller.server_state() {
        ServerState::Failed { message, .. } => assert!(
            message.starts_with("nothing is listening at http://127.0.0.1:9 (connection refused)"),
            "{message}"
        ),
        other => panic!("expected a failure, got {other:?}"),
    }
    harness.get_by_label_contains("nothing is listening at http://127.0.0.1:9");
}

#[test]
fn something_that_is_not_llama_server_is_named_with_what_it_answered() {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for stream in listener.incoming().take(4) {
            let Ok(mut stream) = stream else { continue };
            let mut buf = [0u8; 2048];
            let _ = stream.read(&mut buf);
            let body = "<html><body>It works!</body></html>";
            let _ = write!(
                stream,
                "HTTP/1.1 404 Not Found\r\nContent-Type: text/html\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    let dir = tempfile::tempdir().unwrap();
    let mut harness = app_at(dir.path(), egui::Theme::Dark);
    connect_through_the_picker(&mut harness, &url, "");
    wait_until(&mut harness, "the attempt to fail", |app| {
        !matches!(
            app.shared.run.controller.server_state(),
            ServerState::Connecting { .. }
        )
    });
    match harness.state().shared.run.controller.server_state() {
        ServerState::Failed { message, .. } => assert!(
            message.contains("answered, but it is not llama-server: GET /health gave HTTP 404")
                && message.contains("It works!"),
            "{message}"
        ),
        other => panic!("expected a failure, got {other:?}"),
    }
}

/// A `[[server]]` entry's `vocab` names the model whose vocabulary follows the server's tokens:
/// picking the server in the model list selects that model too.
#[test]
fn picking_a_server_entry_selects_its_vocabulary_model() {
    let dir = tempfile::tempdir().unwrap();
    let models = dir.path().join("models.toml");
    std::fs::write(
        &models,
        "[[model]]\nname = \"vocab-model\"\npath = \"/nowhere/vocab.gguf\"\n\n\
         [[model]]\nname = \"other\"\npath = \"/nowhere/other.gguf\"\n\n\
         [[server]]\nname = \"box\"\nurl = \"http://127.0.0.1:9\"\nvocab = \"vocab-model\"\n",
    )
    .unwrap();
    let mut ws = toolrail_workbench::workspace::Workspace::default();
    ws.run.models_file = Some(models);
    ws.run.model = "other".into();
    toolrail_workbench::workspace::save(&dir.path().join("workspace.json"), &ws).unwrap();
    let mut harness = app_at(dir.path(), egui::Theme::Dark);
    settle(&mut harness);
    assert_eq!(harness.state().shared.run.settings.model, "other");
    harness.get_by_label("Model").click();
    settle(&mut harness);
    harness
        .get_by_label("server: box (http://127.0.0.1:9)")
        .click();
    settle(&mut harness);
    assert_eq!(harness.state().shared.run.settings.model, "vocab-model");
}

/// A run on a server started with `-fa off`, its flags typed into the connect form, then the
/// same request in-process: the run history compares the two and names flash attention as the
/// setting that differs; "Compute in-process as Run 1" takes the server's settings for the
/// next in-process run, which then records them.
#[test]
fn the_run_history_explains_a_server_run_against_an_in_process_one_by_their_settings() {
    let Some(model) = crate::common::model() else {
        return;
    };
    let flags = [std::ffi::OsStr::new("-fa"), std::ffi::OsStr::new("off")];
    let server = match llama_server::try_start(&model, &flags) {
        Ok(Some(server)) => server,
        Ok(None) => return,
        Err(log) => panic!("{log}"),
    };
    // SAFETY: set once, before the app reads it, to a name no other test uses.
    #[allow(unsafe_code)] // setting a variable is unsafe since Rust 2024 (other threads may read)
    unsafe {
        std::env::set_var("TOOLRAIL_APP_TEST_SERVER_KEY_2", llama_server::API_KEY)
    };
    let dir = tempfile::tempdir().unwrap();
    let mut harness = app_at(dir.path(), egui::Theme::Light);
    {
        let settings = &mut harness.state_mut().shared.run.settings;
        settings.model = "gemma-3-270m".into();
        settings.gguf = Some(model.clone());
        settings.threads = Some(1);
        settings.sampling.max_tokens = 12;
    }
    harness.get_by_label("Model").click();
    settle(&mut harness);
    harness.get_by_label("Connect to server…").click();
    settle(&mut harness);
    for (label, text) in [
        ("Server URL", server.url.as_str()),
        ("API key variable", "TOOLRAIL_APP_TEST_SERVER_KEY_2"),
        ("Started with", "-fa off"),
    ] {
        harness.get_by_label(label).click();
        settle(&mut harness);
        harness.get_by_label(label).type_text(text);
        settle(&mut harness);
    }
    harness.get_by_label("Connect").click();
    wait_until(&mut harness, "the connection", |app| {
        matches!(
            app.shared.run.controller.server_state(),
            ServerState::Connected(_)
        )
    });
    let run_to_end = |harness: &mut Harness<'_, ToolrailApp>, what: &str| {
        let before = harness.state().shared.run.controller.runs().len();
        harness.get_by_label("Start run").scroll_to_me();
        settle(harness);
        harness.get_by_label("Start run").click();
        wait_until(harness, what, |app| {
            let c = &app.shared.run.controller;
            matches!(c.load_state(), LoadState::Failed { .. })
                || (c.runs().len() > before
                    && c.latest().is_some_and(|r| r.phase == RunPhase::Finished))
        });
        harness
            .state()
            .shared
            .run
            .controller
            .latest()
            .unwrap()
            .clone()
    };
    let on_server = run_to_end(&mut harness, "the server run");
    let settings = on_server
        .settings
        .clone()
        .expect("the server run has settings");
    assert_eq!(
        settings.flash_attention,
        toolrail_llm::settings::Known::Stated(toolrail_llm::settings::FlashAttention::Off)
    );
    harness
        .state_mut()
        .shared
        .run
        .controller
        .disconnect_server()
        .unwrap();
    settle(&mut harness);
    let in_process = run_to_end(&mut harness, "the in-process run");
    assert!(in_process.server.is_none());
    harness.get_by_label("Transcript").click();
    harness.run_steps(2);
    harness.get_by_label_contains("Run history").click();
    harness.run_steps(2);
    compare_runs(&mut harness, [on_server.id, in_process.id]);
    harness.get_by_label_contains(
        "Settings that change the logits differ: flash attention: off (stated by its flags) in \
         the first run, auto: on in the second",
    );
    harness
        .get_by_label(&format!("Compute in-process as Run {}", on_server.id))
        .click();
    settle(&mut harness);
    assert_eq!(
        harness.state().shared.run.settings.compute.flash_attention,
        Some(toolrail_llm::settings::FlashAttention::Off)
    );
    harness.get_by_label_contains("In-process runs now compute as Run");
    let like = run_to_end(&mut harness, "the in-process run like the server");
    let like_settings = like.settings.expect("settings recorded");
    assert_eq!(
        like_settings.flash_attention,
        toolrail_llm::settings::Known::Set(toolrail_llm::settings::FlashAttention::Off)
    );
    harness.get_by_label("Reset").click();
    settle(&mut harness);
    assert_eq!(
        harness.state().shared.run.settings.compute,
        toolrail_llm::settings::ComputeOptions::default()
    );
}
