//! The run controller (`src/run.rs`) on the real test model (Gemma 3 270M): records with
//! candidates before and after the mask and the stacks after each token, step and cancel,
//! forcing a masked token (refused) and an allowed one (a branch), the side-by-side pair with
//! validation and extraction, export → reopen → replay, and loading a model with progress.
//! Fails under CI=true if the model is missing.

use std::time::{Duration, Instant};

use toolrail_llm::ModelSpec;
use toolrail_llm::worker::EngineKind;
use toolrail_tools::envelope::Format;
use toolrail_tools::grammar::{GrammarOptions, tool_call_grammar};
use toolrail_tools::toolset::ToolSet;
use toolrail_workbench::run::{
    LoadState, Replay, RunController, RunError, RunId, RunInputs, RunPhase, RunSetup, StartMode,
};
use toolrail_workbench::transcript::{Sampling, Stop, Transcript};

fn controller() -> Option<RunController> {
    let model = crate::common::model()?.clone();
    Some(RunController::with_model(model, std::sync::Arc::new(|| {})))
}

fn weather_inputs() -> RunInputs {
    let text = std::fs::read_to_string(toolrail_testkit::repo_path("sample_schemas/weather.json"))
        .unwrap();
    let tools = ToolSet::from_json_str(&text).unwrap();
    let grammar = tool_call_grammar(&tools, &GrammarOptions::default())
        .unwrap()
        .text;
    RunInputs {
        tools: Some(tools),
        format: Format::OpenAi,
        grammar: Some(grammar),
        ..RunInputs::default()
    }
}

fn setup(engine: EngineKind, max_tokens: u32) -> RunSetup {
    RunSetup {
        user: "What is the weather in Oslo tomorrow?".into(),
        engine,
        sampling: Sampling {
            max_tokens,
            ..Sampling::default()
        },
        context: Some(1024),
        // Tests run in parallel on 2 cores: one decoding thread each avoids ggml's spin-waits.
        threads: Some(1),
        show: 8,
        ..RunSetup::default()
    }
}

/// Polls until `done` holds (a generous limit guards against a hung worker; not a timing check).
fn wait_for(c: &mut RunController, what: &str, done: impl Fn(&RunController) -> bool) {
    let deadline = Instant::now() + Duration::from_secs(300);
    while !done(c) {
        assert!(Instant::now() < deadline, "gave up waiting for {what}");
        c.wait(Duration::from_millis(100));
    }
}

fn finished(id: RunId) -> impl Fn(&RunController) -> bool {
    move |c| c.run(id).is_some_and(|r| r.phase == RunPhase::Finished)
}

fn paused(id: RunId) -> impl Fn(&RunController) -> bool {
    move |c| {
        c.run(id)
            .is_some_and(|r| matches!(r.phase, RunPhase::Paused { .. }))
    }
}

/// Runs the weather grammar greedily to the end and returns the run's id.
fn weather_run(c: &mut RunController) -> RunId {
    let id = c
        .start(
            &setup(EngineKind::Toolrail, 60),
            &weather_inputs(),
            StartMode::Run,
        )
        .unwrap();
    wait_for(c, "the weather run", finished(id));
    id
}

#[test]
fn steps_carry_candidates_and_stacks_and_cancel_ends_the_run() {
    let Some(mut c) = controller() else { return };
    let vocab = c.model().unwrap().n_vocab() as u32;
    let id = c
        .start(
            &setup(EngineKind::Toolrail, 60),
            &weather_inputs(),
            StartMode::Step,
        )
        .unwrap();
    assert!(matches!(
        c.start(
            &setup(EngineKind::Toolrail, 60),
            &weather_inputs(),
            StartMode::Run
        ),
        Err(RunError::Busy)
    ));
    wait_for(&mut c, "the first step", paused(id));
    assert_eq!(c.run(id).unwrap().tokens.len(), 1);
    for n in 2..=3 {
        c.step().unwrap();
        wait_for(&mut c, "a step", move |c| {
            c.run(id)
                .is_some_and(|r| r.tokens.len() == n && matches!(r.phase, RunPhase::Paused { .. }))
        });
    }
    let run = c.run(id).unwrap();
    assert_eq!(
        run.phase,
        RunPhase::Paused { next_index: 3 },
        "paused before token 3"
    );
    assert_eq!(
        run.text,
        run.tokens
            .iter()
            .map(|t| t.piece.as_str())
            .collect::<String>()
    );
    assert!(
        run.text.starts_with('{'),
        "the grammar starts a JSON call: {:?}",
        run.text
    );
    for t in &run.tokens {
        assert!(!t.before.is_empty() && !t.after.is_empty(), "{t:?}");
        assert!(
            t.after.iter().all(|cand| !cand.masked),
            "after the mask: {t:?}"
        );
        assert!(t.allowed > 0 && t.allowed < vocab, "allowed {}", t.allowed);
        assert!(
            t.after.iter().any(|cand| cand.id == t.id),
            "greedy takes the best allowed"
        );
        let stacks = t
            .stacks
            .as_ref()
            .expect("stacks after every constrained token");
        assert!(!stacks.stacks.is_empty());
    }
    assert!(
        run.tokens
            .iter()
            .any(|t| t.before.iter().any(|cand| cand.masked)),
        "some likely token was masked by the grammar"
    );
    c.cancel();
    wait_for(&mut c, "the cancel", finished(id));
    let run = c.run(id).unwrap();
    assert_eq!(run.finish.as_ref().unwrap().stop, Stop::Cancelled);
    assert_eq!(run.tokens.len(), 3);

    // Cancel while running: the run ends long before its token limit.
    let long = RunInputs {
        grammar: Some("root ::= [a-z ]{1,2000}".into()),
        tools: None,
        ..RunInputs::default()
    };
    let id = c
        .start(&setup(EngineKind::Toolrail, 400), &long, StartMode::Run)
        .unwrap();
    wait_for(&mut c, "two tokens", move |c| {
        c.run(id).is_some_and(|r| r.tokens.len() >= 2)
    });
    c.cancel();
    wait_for(&mut c, "the cancel", finished(id));
    let run = c.run(id).unwrap();
    assert_eq!(run.finish.as_ref().unwrap().stop, Stop::Cancelled);
    assert!(run.tokens.len() < 400, "{} tokens", run.tokens.len());
}

#[test]
fn branches_force_the_prefix_then_the_chosen_token_and_masked_ones_are_refused() {
    let Some(mut c) = controller() else { return };
    let source = weather_run(&mut c);
    let tokens = c.run(source).unwrap().tokens.clone();
    assert!(tokens.len() >= 4, "{} tokens", tokens.len());

    // A masked candidate: refused, and the branch stays paused where it was.
    let (step, masked) = tokens
        .iter()
        .enumerate()
        .find_map(|(i, t)| {
            t.before
                .iter()
                .find(|cand| cand.masked)
                .map(|cand| (i, cand.id))
        })
        .expect("some step had a masked candidate before the mask");
    let refused = c.branch(source, step, masked, false).unwrap();
    wait_for(&mut c, "the refused branch to pause", paused(refused));
    let run = c.run(refused).unwrap();
    assert_eq!(run.refusals.len(), 1, "{:?}", run.refusals);
    assert_eq!(run.refusals[0].token, masked);
    assert_eq!(run.refusals[0].step as usize, step);
    assert!(
        run.refusals[0].reason.contains("does not allow"),
        "{:?}",
        run.refusals
    );
    assert_eq!(run.tokens.len(), step, "only the prefix was replayed");
    assert_eq!(
        run.phase,
        RunPhase::Paused {
            next_index: step as u32
        }
    );
    c.cancel();
    wait_for(&mut c, "the cancel", finished(refused));

    // An allowed alternative: the prefix replays exactly, then the chosen token is taken.
    let (step, alternative) = tokens
        .iter()
        .enumerate()
        .skip(1)
        .find_map(|(i, t)| {
            t.after
                .iter()
                .find(|cand| cand.id != t.id)
                .map(|cand| (i, cand.id))
        })
        .expect("some step had another allowed candidate");
    let branch = c.branch(source, step, alternative, false).unwrap();
    wait_for(&mut c, "the branch to pause", move |c| {
        c.run(branch)
            .is_some_and(|r| !r.is_replaying() && matches!(r.phase, RunPhase::Paused { .. }))
    });
    let run = c.run(branch).unwrap();
    assert!(run.refusals.is_empty(), "{:?}", run.refusals);
    assert_eq!(run.tokens.len(), step + 1);
    for (ours, theirs) in run.tokens.iter().zip(&tokens).take(step) {
        assert_eq!(ours.id, theirs.id);
        assert_eq!(ours.allowed, theirs.allowed);
        assert_eq!(
            ours.stacks, theirs.stacks,
            "same stacks at step {}",
            ours.index
        );
        assert!(ours.forced);
    }
    assert_eq!(run.tokens[step].id, alternative);
    assert!(run.tokens[step].forced);
    assert_ne!(run.tokens[step].stacks, tokens[step].stacks);
    c.resume().unwrap();
    wait_for(&mut c, "the branch to end", finished(branch));
    let run = c.run(branch).unwrap();
    assert!(
        run.tokens.len() > step + 1,
        "generation went on after the branch"
    );
    assert!(run.outcome.as_ref().unwrap().report.is_some());
}

/// A branch reuses the source run's context (the prompt and the tokens before the branch point
/// are not decoded again) and generates exactly what a fresh run forced the same way does:
/// the prompt decoded anew, the source's tokens forced one by one, then the chosen one.
#[test]
fn a_branch_reuses_the_context_and_matches_a_fresh_forced_run() {
    let Some(mut c) = controller() else { return };
    let source = weather_run(&mut c);
    let tokens = c.run(source).unwrap().tokens.clone();
    let (step, alternative) = tokens
        .iter()
        .enumerate()
        .skip(3)
        .find_map(|(i, t)| {
            t.after
                .iter()
                .find(|cand| cand.id != t.id)
                .map(|cand| (i, cand.id))
        })
        .expect("some step after the third had another allowed candidate");
    let at_branch_point = |id: RunId| {
        move |c: &RunController| {
            c.run(id).is_some_and(|r| {
                r.tokens.len() == step + 1 && matches!(r.phase, RunPhase::Paused { .. })
            })
        }
    };

    let started = Instant::now();
    let branch = c.branch(source, step, alternative, false).unwrap();
    wait_for(
        &mut c,
        "the branch to take its token",
        at_branch_point(branch),
    );
    let branch_time = started.elapsed();
    let run = c.run(branch).unwrap();
    let (prompt_tokens, _) = run.prompt_decode.unwrap();
    assert_eq!(
        run.prompt_reused,
        prompt_tokens + step - 1,
        "all but the last of the prompt and the {step} tokens before the branch are reused"
    );
    c.resume().unwrap();
    wait_for(&mut c, "the branch to end", finished(branch));

    let started = Instant::now();
    let fresh = c
        .start(
            &setup(EngineKind::Toolrail, 60),
            &weather_inputs(),
            StartMode::Paused,
        )
        .unwrap();
    let forced: Vec<u32> = tokens[..step]
        .iter()
        .map(|t| t.id)
        .chain([alternative])
        .collect();
    for (i, &token) in forced.iter().enumerate() {
        wait_for(&mut c, "the fresh run to pause", move |c| {
            c.run(fresh).is_some_and(
                |r| matches!(r.phase, RunPhase::Paused { next_index } if next_index as usize == i),
            )
        });
        c.force(token).unwrap();
    }
    wait_for(
        &mut c,
        "the fresh run to take its token",
        at_branch_point(fresh),
    );
    let fresh_time = started.elapsed();
    assert_eq!(c.run(fresh).unwrap().prompt_reused, 0);
    c.resume().unwrap();
    wait_for(&mut c, "the fresh run to end", finished(fresh));

    let ids = |id: RunId| -> Vec<u32> { c.run(id).unwrap().tokens.iter().map(|t| t.id).collect() };
    assert_eq!(
        ids(branch),
        ids(fresh),
        "the branch and the fresh forced run"
    );
    assert_eq!(
        c.run(branch).unwrap().finish.as_ref().unwrap().output,
        c.run(fresh).unwrap().finish.as_ref().unwrap().output
    );
    eprintln!(
        "force at token {step}: branch reusing the context {:.0} ms, fresh run forced token by token {:.0} ms",
        branch_time.as_secs_f64() * 1e3,
        fresh_time.as_secs_f64() * 1e3
    );
}

#[test]
fn export_reopen_and_replay_equal_the_run() {
    let Some(mut c) = controller() else { return };
    let id = weather_run(&mut c);
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("run.json");
    let md = dir.path().join("run.md");
    let written = c.export(id, &json, Some(&md)).unwrap();
    assert!(json.is_file() && md.is_file());
    let markdown = std::fs::read_to_string(&md).unwrap();
    assert!(markdown.contains("## Tokens"), "{markdown}");

    let run = c.run(id).unwrap().clone();
    let reopened = Transcript::load(&json).unwrap();
    assert_eq!(reopened, written);
    assert_eq!(reopened.tokens, run.tokens);
    assert_eq!(reopened.grammar, run.request.grammar);
    assert_eq!(reopened.engine, EngineKind::Toolrail);
    assert_eq!(reopened.format, Some(Format::OpenAi));
    assert_eq!(
        reopened.validation,
        run.outcome.as_ref().and_then(|o| o.to_json())
    );

    c.open_transcript(&json).unwrap();
    let replay = c.replay_mut().unwrap();
    assert_eq!(replay.position(), 0);
    assert!(replay.current().is_none());
    let mut seen = Vec::new();
    while replay.forward() {
        seen.push(replay.current().unwrap().clone());
    }
    assert_eq!(seen, run.tokens, "replay shows the run's tokens in order");
    let finish = run.finish.as_ref().unwrap();
    assert_eq!(replay.text(), finish.output);
    assert_eq!(replay.stop(), Some(&finish.stop));
    assert!(replay.back());
    assert!(replay.stop().is_none());
    replay.seek(usize::MAX);
    assert!(replay.at_end());

    // A bad file is an error naming it, never a panic.
    std::fs::write(dir.path().join("bad.json"), "{\"version\": 1,").unwrap();
    let err = Replay::open(&dir.path().join("bad.json")).unwrap_err();
    assert!(err.to_string().contains("bad.json:1:"), "{err}");
}

#[test]
fn side_by_side_runs_validate_and_extract() {
    let Some(mut c) = controller() else { return };
    let pair = c
        .start_pair(&setup(EngineKind::Toolrail, 60), &weather_inputs())
        .unwrap();
    wait_for(&mut c, "both runs", move |c| {
        finished(pair.constrained)(c) && finished(pair.unconstrained)(c)
    });
    let vocab = c.model().unwrap().n_vocab() as u32;
    let constrained = c.run(pair.constrained).unwrap();
    let free = c.run(pair.unconstrained).unwrap();
    assert_eq!(constrained.request.prompt, free.request.prompt);
    assert_eq!(free.request.engine, EngineKind::None);
    assert!(free.request.grammar.is_none());
    assert!(
        free.tokens
            .iter()
            .all(|t| t.stacks.is_none() && t.allowed == vocab)
    );

    let judged = constrained.outcome.as_ref().unwrap();
    assert!(
        judged.extraction.is_none(),
        "no extraction for a constrained run"
    );
    let report = judged.report.as_ref().unwrap();
    if constrained.finish.as_ref().unwrap().stop == Stop::EndOfGeneration {
        assert!(
            report.is_valid_call(),
            "a complete constrained output is a valid call: {:?}",
            report.messages()
        );
    }
    let judged = free.outcome.as_ref().unwrap();
    let extraction = judged
        .extraction
        .as_ref()
        .expect("extraction for free text");
    assert_eq!(judged.extracted_checks.len(), extraction.calls.len());
    assert!(judged.report.is_some(), "the free text is validated too");
}

#[test]
fn actions_without_what_they_need_are_clear_errors() {
    let mut c = RunController::default();
    assert!(matches!(
        c.start(
            &setup(EngineKind::Toolrail, 4),
            &weather_inputs(),
            StartMode::Run
        ),
        Err(RunError::NoModel)
    ));
    assert!(matches!(c.step(), Err(RunError::NotPaused)));
    assert!(matches!(
        c.export(7, std::path::Path::new("x.json"), None),
        Err(RunError::UnknownRun(7))
    ));

    let Some(mut c) = controller() else { return };
    let no_grammar = RunInputs::default();
    let err = c
        .start(&setup(EngineKind::Llama, 4), &no_grammar, StartMode::Run)
        .unwrap_err();
    assert!(
        err.to_string().contains("llama engine needs a grammar"),
        "{err}"
    );
}

#[test]
fn loads_a_model_with_progress_and_reports_a_bad_file() {
    let Some(path) = toolrail_testkit::model() else {
        return;
    };
    let mut c = RunController::default();
    c.load(ModelSpec::from_path(path)).unwrap();
    assert!(matches!(c.load_state(), LoadState::Loading { .. }));
    wait_for(&mut c, "the model to load", |c| {
        !matches!(c.load_state(), LoadState::Loading { .. })
    });
    assert!(
        matches!(c.load_state(), LoadState::Ready { .. }),
        "{:?}",
        c.load_state()
    );
    assert_eq!(c.model().unwrap().n_vocab(), 262_144);

    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("broken.gguf");
    std::fs::write(&bad, b"GGUF not really").unwrap();
    c.load(ModelSpec::from_path(&bad)).unwrap();
    wait_for(&mut c, "the bad load to fail", |c| {
        !matches!(c.load_state(), LoadState::Loading { .. })
    });
    match c.load_state() {
        LoadState::Failed { message, .. } => {
            assert!(message.contains("broken.gguf"), "{message}")
        }
        other => panic!("expected a failure, got {other:?}"),
    }
    assert!(
        c.model().is_some(),
        "the loaded model stays after a failed load"
    );
}

/// Step presses given while a step is being taken are all taken (none dropped); the time the
/// run waits paused does not count in its tokens/s; the ended run becomes the replay the
/// Transcript pane shows, and it is what Export writes.
#[test]
fn step_presses_queue_paused_time_is_not_generation_time_and_the_ended_run_is_shown() {
    use toolrail_workbench::actions::Action;
    use toolrail_workbench::analysis::Analysis;
    use toolrail_workbench::run::RunState;
    let Some(c) = controller() else {
        return;
    };
    let mut state = RunState::default();
    state.controller = c;
    let analysis = Analysis::default();
    let repaint = toolrail_workbench::no_repaint();
    let started = Instant::now();
    let id = state
        .controller
        .start(
            &setup(EngineKind::Toolrail, 60),
            &weather_inputs(),
            StartMode::Step,
        )
        .unwrap();
    wait_for(&mut state.controller, "the run to pause", paused(id));
    // The first token is in; three presses in a row: the first takes a step, the next two wait.
    for _ in 0..3 {
        state.logic(&mut vec![Action::Step], &analysis, &repaint);
    }
    assert!(state.messages.is_empty(), "{:?}", state.messages);
    let deadline = Instant::now() + Duration::from_secs(300);
    loop {
        state.logic(&mut Vec::new(), &analysis, &repaint);
        let run = state.controller.run(id).unwrap();
        if run.tokens.len() == 4 && matches!(run.phase, RunPhase::Paused { .. }) {
            break;
        }
        assert!(run.tokens.len() <= 4, "{} tokens", run.tokens.len());
        assert!(
            Instant::now() < deadline,
            "gave up waiting for 3 more steps"
        );
        state.controller.wait(Duration::from_millis(20));
    }
    assert_eq!(state.pending_steps, 0);
    // Paused for at least twice what the run took so far (however busy the machine is): with
    // that time counted, 4 tokens could not reach 4 per paused time; without it, they took at
    // most half of it.
    let pause = (started.elapsed() * 2).max(Duration::from_millis(1500));
    std::thread::sleep(pause);
    state.logic(&mut vec![Action::Cancel], &analysis, &repaint);
    while state.controller.run(id).unwrap().phase != RunPhase::Finished {
        assert!(Instant::now() < deadline, "gave up waiting for the cancel");
        state.controller.wait(Duration::from_millis(20));
        state.logic(&mut Vec::new(), &analysis, &repaint);
    }
    state.logic(&mut Vec::new(), &analysis, &repaint);
    let totals = &state
        .controller
        .run(id)
        .unwrap()
        .finish
        .as_ref()
        .unwrap()
        .totals;
    assert_eq!(totals.tokens, 4);
    let counted = 4.0 / pause.as_secs_f64();
    assert!(
        totals.tokens_per_s > counted,
        "{} tokens/s (at most {counted} with the {pause:?} pause): the paused time was counted",
        totals.tokens_per_s
    );
    let replay = state
        .controller
        .replay()
        .expect("the ended run is replayed");
    assert_eq!(replay.run, Some(id));
    assert_eq!(replay.position(), 4);
    assert_eq!(state.export_target(), Some(id));
}

/// At a refresh pace, a UI polling on every frame takes the worker's events at most about once
/// per interval (never twice within half of it), is told when the held-back events are due,
/// and loses none: the run ends with every token, exactly as an unpaced run of the same request.
#[test]
fn paced_polls_take_events_at_the_pace_and_lose_none() {
    let Some(mut c) = controller() else { return };
    let unpaced = weather_run(&mut c);
    let expected: Vec<u32> = c
        .run(unpaced)
        .unwrap()
        .tokens
        .iter()
        .map(|t| t.id)
        .collect();

    let pace = Duration::from_millis(300);
    c.refresh_pace().set(pace);
    let id = c
        .start(
            &setup(EngineKind::Toolrail, 60),
            &weather_inputs(),
            StartMode::Run,
        )
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(300);
    let mut seen = 0;
    let mut takes: Vec<Instant> = Vec::new();
    let mut told_due = false;
    while !finished(id)(&c) {
        assert!(
            Instant::now() < deadline,
            "gave up waiting for the paced run"
        );
        // A frame-like loop much faster than the pace: each iteration is one "frame".
        let due = c.poll_paced();
        told_due |= due.is_some();
        let now_seen = c.run(id).map_or(0, |r| r.tokens.len());
        if now_seen != seen {
            takes.push(Instant::now());
            seen = now_seen;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let got: Vec<u32> = c.run(id).unwrap().tokens.iter().map(|t| t.id).collect();
    assert_eq!(
        got, expected,
        "the paced run shows every token of the same run"
    );
    for pair in takes.windows(2) {
        assert!(
            pair[1] - pair[0] >= pace / 2,
            "tokens were taken twice within half the pace: {:?} apart",
            pair[1] - pair[0]
        );
    }
    // Tokens came faster than the pace (46 of them in ~1 s), so some were held back and the
    // poll said when they are due.
    if takes.len() < expected.len() {
        assert!(told_due, "held-back events come with the time they are due");
    }
}

/// Opening a file that is not a loadable GGUF leaves the model selected before it selected,
/// and says so; a real GGUF opened the same way becomes the selection.
#[test]
fn a_gguf_that_fails_to_open_does_not_replace_the_selected_model() {
    use toolrail_workbench::analysis::Analysis;
    use toolrail_workbench::run::RunState;

    let Some(model) = crate::common::model() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let broken = dir.path().join("broken.gguf");
    std::fs::write(&broken, b"GGUF but not really").unwrap();
    let mut state = RunState::default();
    state.settings.model = "gemma-3-270m".into();
    let analysis = Analysis::default();
    let repaint: toolrail_workbench::Repaint = std::sync::Arc::new(|| {});
    let settle = |state: &mut RunState| {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(300);
        while matches!(
            state.controller.load_state(),
            toolrail_workbench::run::LoadState::Loading { .. }
        ) {
            assert!(std::time::Instant::now() < deadline, "the load never ended");
            state.controller.wait(std::time::Duration::from_millis(50));
            state.logic(&mut Vec::new(), &analysis, &repaint);
        }
        state.logic(&mut Vec::new(), &analysis, &repaint);
    };
    state.open_gguf(broken.clone());
    settle(&mut state);
    assert_eq!(state.settings.gguf, None);
    assert!(
        state
            .messages
            .iter()
            .any(|m| m.contains("gemma-3-270m stays the selected model")),
        "{:?}",
        state.messages
    );
    state.messages.clear();
    let good = model.info().path.clone();
    state.open_gguf(good.clone());
    settle(&mut state);
    assert_eq!(state.settings.gguf.as_ref(), Some(&good));
    assert!(
        state
            .messages
            .iter()
            .all(|m| !m.contains("stays the selected"))
    );
}
