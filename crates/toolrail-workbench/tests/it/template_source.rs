//! The llama.cpp template grammar source through the workbench, on the real test model: the
//! analysis builds what llama-server would (prompt, grammar, lazy flag, triggers) from a corpus
//! template, a run under it records the trigger timeline token by token (dormant, then fired)
//! and llama.cpp's parse of the output, and the transcript keeps the template and reopens with
//! it. Fails under CI=true if the model is missing.

use std::time::{Duration, Instant};

use toolrail_llm::record::{LazyNote, ThinkingNote};
use toolrail_llm::worker::EngineKind;
use toolrail_workbench::analysis::{Analysis, AnalysisInput, Computer};
use toolrail_workbench::run::{
    Replay, RunController, RunId, RunPhase, RunSetup, RunState, StartMode,
};
use toolrail_workbench::template_info;
use toolrail_workbench::transcript::{Sampling, ThinkingBudget};
use toolrail_workbench::workspace::{SchemaSettings, ServerSwitch, TemplateSettings, ToolChoice};

const HERMES: &str = "NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use.jinja";

/// `../shared/corpus/llama-cpp-chat/templates/<name>`; missing: a failure under `CI=true`,
/// otherwise None (a skip).
fn template_path(name: &str) -> Option<std::path::PathBuf> {
    toolrail_testkit::corpus(&format!("llama-cpp-chat/templates/{name}"))
}

/// The analysis of the weather tool set under `template` with `tool_choice`, on the test model.
pub(crate) fn analysis(template: &str, tool_choice: ToolChoice) -> Option<Analysis> {
    Some(Computer::default().compute(&input(template, tool_choice)?))
}

/// The analysis input for the weather tool set under `template` with `tool_choice`.
pub(crate) fn input(template: &str, tool_choice: ToolChoice) -> Option<AnalysisInput> {
    let model = crate::common::model()?;
    let path = template_path(template)?;
    let input = AnalysisInput {
        schema: SchemaSettings {
            text: std::fs::read_to_string(toolrail_testkit::repo_path(
                "sample_schemas/weather.json",
            ))
            .unwrap(),
            ..SchemaSettings::default()
        },
        prompt: "What is the weather in Paris?".into(),
        template: TemplateSettings {
            on: true,
            text: std::fs::read_to_string(&path).unwrap(),
            file: Some(path),
            tool_choice,
            ..TemplateSettings::default()
        },
        model: Some(model.info().path.clone()),
        ..AnalysisInput::default()
    };
    Some(input)
}

fn setup(max_tokens: u32) -> RunSetup {
    RunSetup {
        user: "What is the weather in Paris?".into(),
        engine: EngineKind::Toolrail,
        sampling: Sampling {
            max_tokens,
            ..Sampling::default()
        },
        context: Some(2048),
        threads: Some(1),
        ..RunSetup::default()
    }
}

fn wait_for(c: &mut RunController, what: &str, done: impl Fn(&RunController) -> bool) {
    let deadline = Instant::now() + Duration::from_secs(300);
    while !done(c) {
        assert!(Instant::now() < deadline, "gave up waiting for {what}");
        c.wait(Duration::from_millis(100));
    }
}

fn paused(id: RunId) -> impl Fn(&RunController) -> bool {
    move |c| {
        c.run(id)
            .is_some_and(|r| matches!(r.phase, RunPhase::Paused { .. }))
    }
}

#[test]
fn the_analysis_shows_what_llama_server_builds_and_says_why_it_cannot() {
    let Some(lazy) = analysis(HERMES, ToolChoice::Auto) else {
        return;
    };
    let view = lazy.template.as_ref().expect("a template view");
    let result = view.result.as_ref().expect("Hermes 2 Pro builds");
    assert!(result.grammar_lazy);
    assert!(result.prompt.contains("<tools>"), "{}", result.prompt);
    assert_eq!(lazy.grammar_text, result.grammar);
    assert!(lazy.grammar.is_some(), "{:?}", lazy.findings);
    let info = template_info::describe(result);
    assert!(
        info.rows
            .iter()
            .any(|(name, value)| *name == "trigger" && value.contains("<tool_call>")),
        "{:?}",
        info.rows
    );
    eprintln!(
        "template analysis (vocabulary loaded, llama.cpp applied): {:?}",
        lazy.grammar_time
    );
    // Another tool_choice reuses the loaded templates (no second vocabulary load).
    let mut computer = Computer::default();
    computer.compute(&input(HERMES, ToolChoice::Auto).unwrap());
    let required = computer.compute(&input(HERMES, ToolChoice::Required).unwrap());
    eprintln!(
        "template analysis, tool_choice changed: {:?}",
        required.grammar_time
    );
    let result = required.template.unwrap().result.unwrap();
    assert!(!result.grammar_lazy, "required grammars constrain at once");

    // No model loaded: a message, not a crash; a named tool that is not in the set: the same.
    let mut input = AnalysisInput {
        schema: SchemaSettings::default(),
        template: TemplateSettings {
            on: true,
            ..TemplateSettings::default()
        },
        ..AnalysisInput::default()
    };
    let none = Computer::default().compute(&input);
    let error = none.template.unwrap().result.unwrap_err();
    assert!(error.contains("no model loaded"), "{error}");
    assert!(none.grammar.is_none());
    input.model = Some(crate::common::model().unwrap().info().path.clone());
    input.template.tool_choice = ToolChoice::Named("nope".into());
    let error = Computer::default()
        .compute(&input)
        .template
        .unwrap()
        .result
        .unwrap_err();
    assert!(
        error.contains("tool_choice nope: not a tool of the set"),
        "{error}"
    );
    // The model's own template (Gemma 3: no tool calling): built, with no grammar, so a run
    // is unconstrained (and still ends at the template's stops).
    input.template.tool_choice = ToolChoice::Auto;
    let own = Computer::default().compute(&input);
    let view = own.template.as_ref().unwrap();
    assert!(
        view.source.ends_with("(its chat template)"),
        "{}",
        view.source
    );
    let result = view.result.as_ref().expect("Gemma 3's template builds");
    assert!(result.grammar.is_empty());
    assert!(own.grammar.is_none());
    let request = toolrail_workbench::run::build_request(
        &setup(8),
        &RunState::inputs(&own),
        result.prompt.clone(),
        None,
        false,
    )
    .unwrap();
    assert_eq!((request.engine, request.grammar), (EngineKind::None, None));
    assert!(request.gate.is_some());
    // A template llama.cpp rejects: its message.
    input.template.tool_choice = ToolChoice::Auto;
    input.template.file = Some("broken.jinja".into());
    input.template.text = "{% for %}".into();
    let error = Computer::default()
        .compute(&input)
        .template
        .unwrap()
        .result
        .unwrap_err();
    assert!(error.starts_with("broken.jinja: "), "{error}");
}

#[test]
fn a_template_run_records_the_trigger_timeline_the_parse_and_the_template_in_its_transcript() {
    let Some(analysis) = analysis(HERMES, ToolChoice::Auto) else {
        return;
    };
    let model = crate::common::model().unwrap().clone();
    let trigger = model.tokenize("Sure! <tool_call>\n", false, true);
    let mut c = RunController::with_model(model, std::sync::Arc::new(|| {}));
    let inputs = RunState::inputs(&analysis);
    let id = c.start(&setup(60), &inputs, StartMode::Paused).unwrap();
    let run = c.run(id).unwrap();
    assert!(run.request.gate.as_ref().is_some_and(|g| g.lazy));
    assert_eq!(
        run.prompt_source.to_string(),
        "llama.cpp chat template with tools"
    );
    for &token in &trigger {
        wait_for(&mut c, "a pause", paused(id));
        c.force(token).unwrap();
    }
    wait_for(&mut c, "a pause", paused(id));
    c.resume().unwrap();
    wait_for(&mut c, "the end", |c| {
        c.run(id).is_some_and(|r| r.phase == RunPhase::Finished)
    });
    let run = c.run(id).unwrap();
    let output = &run.finish.as_ref().unwrap().output;
    eprintln!("{output:?}");
    // The timeline: dormant while the trigger word was being written, fired on its last token.
    let fired_at = run
        .tokens
        .iter()
        .position(|t| matches!(t.lazy, Some(LazyNote::Fired { .. })))
        .expect("the trigger fired");
    assert!(fired_at > 0 && fired_at < trigger.len(), "{fired_at}");
    assert!(
        run.tokens[..fired_at]
            .iter()
            .all(|t| matches!(t.lazy, Some(LazyNote::Dormant { .. })))
    );
    let marker = template_info::fired_marker(&run.tokens, output).unwrap();
    assert_eq!(
        marker.matched.as_deref(),
        Some("<tool_call>\n"),
        "{marker:?}"
    );
    // llama.cpp's parse, beside toolrail's check of the call.
    let parse = run.outcome.as_ref().unwrap().template.as_ref().unwrap();
    let parsed = parse.parsed.as_ref().expect("llama.cpp parses the call");
    assert_eq!(parsed.tool_calls.len(), 1, "{parsed:?}");
    assert_eq!(parsed.tool_calls[0].name, "get_weather");
    assert_eq!(parse.calls.len(), 1);
    assert!(parse.calls[0].is_valid(), "{parse:?}");
    assert!(parse.disagreements.is_empty(), "{:?}", parse.disagreements);

    // The transcript keeps the template, the parse and the notes; it reopens with them.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("run.json");
    let saved = c.export(id, &path, None).unwrap();
    let template = saved.template.as_ref().expect("the template recorded");
    assert!(template.source.ends_with(HERMES), "{}", template.source);
    assert_eq!(template.parsed.as_ref(), Some(parsed));
    let replay = Replay::open(&path).unwrap();
    assert_eq!(replay.transcript, saved);
    let line = template_info::timeline(template, &replay.transcript.tokens, output).unwrap();
    assert!(line.contains("trigger fired"), "{line}");
}

#[test]
fn a_thinking_budget_set_for_the_template_source_forces_the_end_of_thinking_and_is_recorded() {
    const QWQ: &str = "Qwen-QwQ-32B.jinja";
    let Some(mut input) = input(QWQ, ToolChoice::Auto) else {
        return;
    };
    input.template.thinking = ServerSwitch::On;
    input.template.budget = Some(ThinkingBudget {
        tokens: 4,
        message: "Enough.".into(),
    });
    let analysis = Computer::default().compute(&input);
    let inputs = RunState::inputs(&analysis);
    let recorded = inputs.template.as_ref().unwrap().as_ref().unwrap();
    assert_eq!(recorded.budget, input.template.budget);
    let model = crate::common::model().unwrap().clone();
    let mut c = RunController::with_model(model, std::sync::Arc::new(|| {}));
    let id = c.start(&setup(24), &inputs, StartMode::Run).unwrap();
    let run = c.run(id).unwrap();
    let reasoning = run.request.gate.as_ref().unwrap().reasoning.as_ref();
    assert_eq!(
        reasoning.map(|r| (r.budget, r.message.as_str())),
        Some((Some(4), "Enough."))
    );
    wait_for(&mut c, "the end", |c| {
        c.run(id).is_some_and(|r| r.phase == RunPhase::Finished)
    });
    let run = c.run(id).unwrap();
    let notes: Vec<_> = run.tokens.iter().map(|t| t.thinking.clone()).collect();
    eprintln!("{notes:?}");
    // The template's generation prompt opens thinking; after 4 tokens the budget is spent and
    // the message and the end tag are forced, one token at a time, ending with the end tag.
    let spent = notes
        .iter()
        .position(|n| matches!(n, Some(ThinkingNote::Exhausted)))
        .expect("the budget ran out");
    assert!(spent <= 4, "{spent}");
    let forced: Vec<_> = notes[spent + 1..]
        .iter()
        .take_while(|n| matches!(n, Some(ThinkingNote::Forced { .. })))
        .collect();
    assert!(!forced.is_empty(), "{notes:?}");
    let output = &run.finish.as_ref().unwrap().output;
    assert!(output.contains("Enough."), "{output:?}");
    assert!(output.contains("</think>"), "{output:?}");
    // The transcript keeps the budget.
    let dir = tempfile::tempdir().unwrap();
    let saved = c.export(id, &dir.path().join("run.json"), None).unwrap();
    assert_eq!(
        saved.template.as_ref().unwrap().budget,
        input.template.budget
    );
}

/// Qwen3-Coder, `tool_choice` auto: the trigger `<tool_call>` completes inside the token `><`,
/// whose second character the grammar refuses, and the run ends there. Everything says so: the
/// run keeps all its tokens (the fatal one too) and its output, the outcome is invalid with the
/// failure first (the template parse does not "agree"), the timeline names the trigger, the
/// token and the refused character, and the transcript and its Markdown hold all of it.
#[test]
fn a_template_run_ended_by_a_refused_token_is_explained_and_invalid_everywhere() {
    let Some(analysis) = analysis("Qwen3-Coder.jinja", ToolChoice::Auto) else {
        return;
    };
    let model = crate::common::model().unwrap().clone();
    let fatal = (0..model.n_vocab() as u32)
        .find(|&id| model.piece(id) == b"><")
        .expect("the test model has the token `><`");
    let mut forced = model.tokenize("Sure! <tool_call", false, true);
    forced.push(fatal);
    let mut c = RunController::with_model(model, std::sync::Arc::new(|| {}));
    let inputs = RunState::inputs(&analysis);
    let id = c.start(&setup(60), &inputs, StartMode::Paused).unwrap();
    for &token in &forced {
        wait_for(&mut c, "a pause or the end", |c| {
            c.run(id)
                .is_some_and(|r| matches!(r.phase, RunPhase::Paused { .. } | RunPhase::Finished))
        });
        if c.run(id).unwrap().phase == RunPhase::Finished {
            break;
        }
        c.force(token).unwrap();
    }
    wait_for(&mut c, "the end", |c| {
        c.run(id).is_some_and(|r| r.phase == RunPhase::Finished)
    });
    let run = c.run(id).unwrap();
    let finish = run.finish.as_ref().unwrap();
    assert_eq!(finish.output, "Sure! <tool_call><");
    assert_eq!(finish.totals.tokens as usize, forced.len());
    assert_eq!(run.tokens.len(), forced.len());
    let message = match &finish.stop {
        toolrail_llm::record::Stop::Error { message } => message.clone(),
        other => panic!("the run ends on an error, not {other:?}"),
    };
    assert!(
        message.contains("the trigger <tool_call> completed inside it")
            && message.contains("refused '<' at output byte 17"),
        "{message}"
    );
    let outcome = run.outcome.as_ref().unwrap();
    assert!(!outcome.is_valid_call());
    let parse = outcome.template.as_ref().unwrap();
    assert!(
        parse.disagreements[0].contains(&message),
        "{:?}",
        parse.disagreements
    );
    let dir = tempfile::tempdir().unwrap();
    let saved = c.export(id, &dir.path().join("run.json"), None).unwrap();
    assert_eq!(saved.output, "Sure! <tool_call><");
    assert_eq!(saved.tokens.len(), forced.len());
    let validation = saved.validation.as_ref().unwrap();
    assert_eq!(validation.valid, Some(false));
    assert!(validation.problems()[0].contains(&message));
    let template = saved.template.as_ref().unwrap();
    let line = template_info::timeline(template, &saved.tokens, &saved.output).unwrap();
    assert!(
        line.contains("trigger fired") && line.contains(&message),
        "{line}"
    );
    let markdown = toolrail_workbench::transcript::to_markdown(&saved);
    assert!(
        markdown.contains("refused '<' at output byte 17"),
        "{markdown}"
    );
}

/// *Valid example* under the template source: a string of the template's grammar that
/// llama.cpp's own parser reads as a call the schema accepts, in readable characters.
#[test]
fn a_valid_example_under_a_template_is_a_call_llama_cpp_parses() {
    let Some(analysis) = analysis(HERMES, ToolChoice::Auto) else {
        return;
    };
    for seed in 0..5 {
        let example = toolrail_workbench::example::valid_example(&analysis, seed)
            .unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        assert!(example.contains("<tool_call>"), "{example}");
        assert!(
            example
                .chars()
                .all(|c| c == '\n' || (' '..='~').contains(&c)),
            "{example:?}"
        );
    }
}
