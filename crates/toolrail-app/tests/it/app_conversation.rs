//! The Conversation window on the real test model: Run ▸ Conversation…, a user message, the
//! model's call under the turn's grammar, a typed tool result, the model's next call; every
//! attempt listed. Fails under CI=true without the model.

use egui_kittest::Harness;
use egui_kittest::kittest::Queryable;
use toolrail_app::dialogs::FileRequest;
use toolrail_app::{AppOptions, ToolrailApp};
use toolrail_workbench::conversation::{Next, Turn};

use crate::common::app::wait_until;

fn waiting_for_tool_result(app: &ToolrailApp) -> bool {
    app.conversation.session.as_ref().is_some_and(|s| {
        !s.is_waiting()
            && (matches!(s.conversation.next(), Next::ToolResult { .. })
                || s.conversation.stopped_at_limit())
    })
}

#[test]
fn a_conversation_with_a_typed_tool_result_runs_in_the_window() {
    if crate::common::model().is_none() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let options = AppOptions {
        workspace_path: dir.path().join("workspace.json"),
        autosave: false,
        screenshot: None,
        settle: true,
        demo_run: false,
    };
    let mut harness = Harness::builder()
        .with_size([1440.0, 1000.0])
        .build_eframe(move |cc| ToolrailApp::new(&cc.egui_ctx, options));
    harness.step();
    {
        let settings = &mut harness.state_mut().shared.run.settings;
        settings.threads = Some(1);
        settings.sampling.max_tokens = 96;
    }
    crate::common::app::load_model(&mut harness);
    wait_until(&mut harness, "the analysis", |app| {
        app.shared.analysis.tool_set.is_some()
    });

    harness.get_by_label("Run").click();
    harness.run_steps(3);
    harness.get_by_label("Conversation…").click();
    harness.run_steps(3);
    harness.get_by_label("New conversation").click();
    harness.step();
    harness.state_mut().conversation.input = "What is the weather in Paris?".into();
    harness.step();
    harness.get_by_label("Send").click();
    wait_until(&mut harness, "the first call", waiting_for_tool_result);
    let session = harness.state().conversation.session.as_ref().unwrap();
    let Next::ToolResult { tool } = session.conversation.next() else {
        panic!("no valid first call: {:#?}", session.conversation.turns())
    };
    harness.get_by_label("Assistant, attempt 1");
    harness.get_by_label(&format!("Result of {tool}:"));
    harness
        .get_all_by_label_contains(&format!("valid call of {tool}"))
        .next()
        .unwrap();

    harness.state_mut().conversation.input = "18 degrees and cloudy.".into();
    harness.step();
    harness.get_by_label("Send").click();
    harness.step();
    wait_until(&mut harness, "the second call", waiting_for_tool_result);
    let turns = harness
        .state()
        .conversation
        .session
        .as_ref()
        .unwrap()
        .conversation
        .turns()
        .to_vec();
    assert!(
        matches!(&turns[2], Turn::Tool { tool: Some(t), content } if *t == tool && content == "18 degrees and cloudy.")
    );
    let answers = turns
        .iter()
        .filter(|t| matches!(t, Turn::Assistant(a) if a.tokens > 0))
        .count();
    assert!(answers >= 2, "{turns:#?}");
    harness.get_by_label(&format!("Tool {tool} (result)"));
    // Each answer was a generation run of the session.
    assert!(harness.state().shared.run.controller.runs().len() >= answers);
    // Its prompts are those of Start run: the loaded model's family (Gemma for the test
    // model), not the one the envelope alone would pick.
    assert_eq!(
        harness
            .state()
            .conversation
            .session
            .as_ref()
            .unwrap()
            .conversation
            .settings()
            .family,
        toolrail_tools::prompt::PromptFamily::Gemma
    );
    // New conversation asks before it discards this one; Keep it keeps it.
    harness.get_by_label("New conversation").click();
    harness.run_steps(2);
    harness.get_by_label_contains("Discard the conversation under way");
    harness.get_by_label("Keep it").click();
    harness.run_steps(2);
    assert_eq!(
        harness
            .state()
            .conversation
            .session
            .as_ref()
            .unwrap()
            .conversation
            .turns()
            .len(),
        turns.len()
    );

    // Saved (as the Save… dialog's answer would be handled), then opened again: the same turns,
    // replayed with every grammar and verdict as recorded; the Markdown reads as a conversation.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("talk.json");
    harness
        .state_mut()
        .shared
        .file_chosen(FileRequest::SaveConversation, file.clone());
    let markdown_file = file.with_extension("md");
    wait_until(&mut harness, "the conversation to be saved", |_| {
        file.is_file() && markdown_file.is_file()
    });
    let markdown = std::fs::read_to_string(file.with_extension("md")).unwrap();
    assert!(markdown.contains("18 degrees and cloudy."), "{markdown}");
    harness.state_mut().conversation.session = None;
    harness
        .state_mut()
        .shared
        .file_chosen(FileRequest::OpenConversation, file);
    wait_until(&mut harness, "the conversation to open", |app| {
        app.conversation.session.is_some()
    });
    let reopened = harness.state().conversation.session.as_ref().unwrap();
    assert_eq!(reopened.conversation.turns(), &turns[..]);
    let summary = harness.state().conversation.replay_summary.clone().unwrap();
    assert!(
        summary.contains("every grammar and verdict as recorded"),
        "{summary}"
    );
    harness.step();
    harness.get_by_label_contains("every grammar and verdict as recorded");
}
