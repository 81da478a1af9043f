//! The explain corpus: hard cases, each a real run on the test model (a clean call, a token
//! limit that cuts the call off, the budget guard finishing it, no grammar, a dead end, a
//! trigger completed inside a refused token, a trigger that never fires, a stop string, the
//! reasoning budget, compared engines, tokens chosen by hand, a cancelled run, …), with the
//! exact lines the app shows (the Generation pane's `run.explanation`, the Transcript pane's
//! reopened replay), `toolrail explain` prints and the Markdown export holds. Every line must
//! be true of its run: each case says why in its comment. Fails under CI=true if the model or
//! the corpus is missing.

use std::time::{Duration, Instant};

use toolrail_llm::worker::EngineKind;
use toolrail_tools::envelope::Format;
use toolrail_tools::grammar::{GrammarOptions, tool_call_grammar};
use toolrail_tools::toolset::ToolSet;
use toolrail_workbench::analysis::Computer;
use toolrail_workbench::run::{
    Replay, RunController, RunId, RunInputs, RunPhase, RunSetup, RunState, StartMode,
};
use toolrail_workbench::transcript::explain::explain;
use toolrail_workbench::transcript::{Sampling, ThinkingBudget, to_markdown};
use toolrail_workbench::workspace::{ServerSwitch, ToolChoice};

/// How a case is driven.
enum Drive {
    /// Runs to its end.
    Run,
    /// Takes `n` steps, then cancels.
    CancelAfter(usize),
    /// Starts paused, takes these tokens (by piece, one token each), then runs on.
    Force(Vec<&'static [u8]>),
    /// Starts paused, takes this text (tokenized) then these tokens, then runs on.
    ForceText(&'static str, Vec<&'static [u8]>),
    /// Starts paused, takes this text (tokenized) then the model's end-of-generation token.
    ForceTextThenEnd(&'static str),
}

struct Case {
    name: &'static str,
    inputs: RunInputs,
    setup: RunSetup,
    drive: Drive,
    expect: &'static [&'static str],
}

fn weather_tools() -> ToolSet {
    let text = std::fs::read_to_string(toolrail_testkit::repo_path("sample_schemas/weather.json"))
        .unwrap();
    ToolSet::from_json_str(&text).unwrap()
}

/// The weather tool set in `format`, its grammar enforced.
fn tools(format: Format) -> RunInputs {
    let tools = weather_tools();
    let options = GrammarOptions {
        format,
        ..GrammarOptions::default()
    };
    let grammar = tool_call_grammar(&tools, &options).unwrap().text;
    RunInputs {
        tools: Some(tools),
        format,
        grammar: Some(grammar),
        ..RunInputs::default()
    }
}

/// The weather tool set, no grammar: the model's own choice, judged afterwards.
fn unconstrained() -> RunInputs {
    RunInputs {
        grammar: None,
        ..tools(Format::OpenAi)
    }
}

/// A hand-written grammar, no tools.
fn grammar(text: &str) -> RunInputs {
    RunInputs {
        grammar: Some(text.to_owned()),
        ..RunInputs::default()
    }
}

/// The weather tool set under a corpus chat template (`None`: a skip, or a failure under CI).
fn template(name: &str, tool_choice: ToolChoice) -> Option<RunInputs> {
    let analysis = crate::template_source::analysis(name, tool_choice)?;
    Some(RunState::inputs(&analysis))
}

/// QwQ's template with thinking on and llama-server's reasoning budget of `tokens`.
fn thinking(tokens: u32) -> Option<RunInputs> {
    let mut input = crate::template_source::input("Qwen-QwQ-32B.jinja", ToolChoice::Auto)?;
    input.template.thinking = ServerSwitch::On;
    input.template.budget = Some(ThinkingBudget {
        tokens,
        message: "Enough.".into(),
    });
    Some(RunState::inputs(&Computer::default().compute(&input)))
}

fn setup(engine: EngineKind, max_tokens: u32) -> RunSetup {
    RunSetup {
        user: "What is the weather in Oslo tomorrow?".into(),
        engine,
        sampling: Sampling {
            max_tokens,
            ..Sampling::default()
        },
        context: Some(2048),
        // Tests run in parallel on 2 cores: one decoding thread each avoids ggml's spin-waits.
        threads: Some(1),
        ..RunSetup::default()
    }
}

fn without_guard(mut s: RunSetup) -> RunSetup {
    s.sampling.finish_in_budget = false;
    s
}

fn with_guard(mut s: RunSetup) -> RunSetup {
    s.sampling.finish_in_budget = true;
    s
}

fn comparing(mut s: RunSetup, engines: &[EngineKind]) -> RunSetup {
    s.compare = engines.to_vec();
    s
}

fn wait_for(c: &mut RunController, what: &str, done: impl Fn(&RunController) -> bool) {
    let deadline = Instant::now() + Duration::from_secs(300);
    while !done(c) {
        assert!(Instant::now() < deadline, "gave up waiting for {what}");
        c.wait(Duration::from_millis(50));
    }
}

fn settled(id: RunId) -> impl Fn(&RunController) -> bool {
    move |c| {
        c.run(id)
            .is_some_and(|r| matches!(r.phase, RunPhase::Paused { .. } | RunPhase::Finished))
    }
}

fn token(c: &RunController, piece: &[u8]) -> u32 {
    let model = c.model().unwrap();
    (0..model.n_vocab() as u32)
        .find(|&id| model.piece(id) == piece)
        .unwrap_or_else(|| panic!("the test model has the token {piece:?}"))
}

/// Runs one case to its end; returns the run's id.
fn drive(c: &mut RunController, case: &Case) -> RunId {
    let forced: Vec<u32> = match &case.drive {
        Drive::Force(pieces) => pieces.iter().map(|p| token(c, p)).collect(),
        Drive::ForceText(text, pieces) => {
            let mut ids = c.model().unwrap().tokenize(text, false, true);
            ids.extend(pieces.iter().map(|p| token(c, p)));
            ids
        }
        Drive::ForceTextThenEnd(text) => {
            let model = c.model().unwrap();
            let mut ids = model.tokenize(text, false, true);
            ids.extend(model.eog_tokens().first());
            ids
        }
        _ => Vec::new(),
    };
    let mode = match case.drive {
        Drive::Run => StartMode::Run,
        _ => StartMode::Paused,
    };
    let id = c.start(&case.setup, &case.inputs, mode).unwrap();
    match case.drive {
        Drive::Run => {}
        Drive::CancelAfter(n) => {
            for _ in 0..n {
                wait_for(c, "a pause", settled(id));
                c.step().unwrap();
            }
            wait_for(c, "a pause", settled(id));
            c.cancel();
        }
        Drive::Force(_) | Drive::ForceText(..) | Drive::ForceTextThenEnd(_) => {
            for &t in &forced {
                wait_for(c, "a pause", settled(id));
                if c.run(id).unwrap().phase == RunPhase::Finished {
                    break;
                }
                c.force(t).unwrap();
            }
            wait_for(c, "a pause", settled(id));
            if c.run(id).unwrap().phase != RunPhase::Finished {
                c.resume().unwrap();
            }
        }
    }
    wait_for(c, "the end", |c| {
        c.run(id).is_some_and(|r| r.phase == RunPhase::Finished)
    });
    id
}

fn cases() -> Option<Vec<Case>> {
    use EngineKind::{Llama, Llguidance, None as Free, Toolrail};
    let mut cases = vec![
        Case {
            name: "a clean call",
            inputs: tools(Format::OpenAi),
            setup: setup(Toolrail, 80),
            drive: Drive::Run,
            expect: &[
                r#"stopped: the model ended the generation after 32 token(s)"#,
                r#"validation: valid call"#,
            ],
        },
        Case {
            name: "the token limit cuts the call off (no budget guard)",
            inputs: tools(Format::OpenAi),
            setup: without_guard(setup(Toolrail, 8)),
            drive: Drive::Run,
            expect: &[
                r#"stopped: the token limit (8) was reached before the grammar was complete: the output is cut off"#,
                r#"validation: invalid: could not parse a tool call in the openai format at byte 0: invalid JSON: EOF while parsing a string at line 1 column 21"#,
            ],
        },
        Case {
            name: "the budget guard finishes the call within the limit",
            inputs: tools(Format::OpenAi),
            setup: with_guard(setup(Toolrail, 24)),
            drive: Drive::Run,
            expect: &[
                r#"stopped: the model ended the generation after 23 token(s)"#,
                r#"budget guard: 4 sampled token(s) replaced so that the grammar could finish within the token limit; the first at token 18 (took "\",\""): "\"," would need 7 tokens to finish; 6 are left"#,
                r#"validation: valid call"#,
            ],
        },
        Case {
            name: "the budget guard cannot: too few tokens for any call",
            inputs: tools(Format::OpenAi),
            setup: with_guard(setup(Toolrail, 4)),
            drive: Drive::Run,
            expect: &[
                r#"stopped: the token limit (4) was reached before the grammar was complete: the output is cut off; the budget guard was on, but could not make sure of a finish in so few tokens"#,
                r#"validation: invalid: could not parse a tool call in the openai format at byte 0: invalid JSON: EOF while parsing a string at line 1 column 10"#,
            ],
        },
        Case {
            name: "no grammar: the model's own answer, judged",
            inputs: unconstrained(),
            setup: setup(Free, 40),
            drive: Drive::Run,
            expect: &[
                r#"stopped: the token limit (40) was reached"#,
                r#"validation: invalid: no tool call found (expected a tool call in the openai format)"#,
            ],
        },
        Case {
            name: "no grammar, no tools",
            inputs: RunInputs::default(),
            setup: setup(Free, 6),
            drive: Drive::Run,
            expect: &[
                r#"stopped: the token limit (6) was reached"#,
                r#"validation: no tool set to validate against; 0 call(s) found in the free text"#,
            ],
        },
        Case {
            name: "the hermes envelope",
            inputs: tools(Format::Hermes),
            setup: setup(Toolrail, 80),
            drive: Drive::Run,
            expect: &[
                r#"stopped: the model ended the generation after 39 token(s)"#,
                r#"validation: valid call"#,
            ],
        },
        Case {
            name: "the gemma envelope",
            inputs: tools(Format::Gemma),
            setup: setup(Toolrail, 80),
            drive: Drive::Run,
            expect: &[
                r#"stopped: the model ended the generation after 33 token(s)"#,
                r#"validation: valid call"#,
            ],
        },
        Case {
            name: "the pythonic envelope",
            inputs: tools(Format::Pythonic),
            setup: setup(Toolrail, 80),
            drive: Drive::Run,
            expect: &[
                r#"stopped: the model ended the generation after 21 token(s)"#,
                r#"validation: valid call"#,
            ],
        },
        Case {
            name: "llama.cpp's sampler as the engine, compared with toolrail's",
            inputs: tools(Format::OpenAi),
            setup: setup(Llama, 12),
            drive: Drive::Run,
            expect: &[
                r#"stopped: the token limit (12) was reached before the grammar was complete: the output is cut off; the budget guard was on, but could not make sure of a finish in so few tokens"#,
                r#"compared engines: llama.cpp's mask and toolrail's agree at all 12 step(s) compared"#,
                r#"validation: invalid: could not parse a tool call in the openai format at byte 0: invalid JSON: EOF while parsing a value at line 1 column 36"#,
            ],
        },
        Case {
            name: "llguidance as the engine",
            inputs: tools(Format::OpenAi),
            setup: setup(Llguidance, 12),
            drive: Drive::Run,
            expect: &[
                r#"stopped: the token limit (12) was reached before the grammar was complete: the output is cut off; the budget guard was on, but could not make sure of a finish in so few tokens"#,
                r#"compared engines: llguidance's mask and toolrail's agree at all 12 step(s) compared"#,
                r#"validation: invalid: could not parse a tool call in the openai format at byte 0: invalid JSON: EOF while parsing a value at line 1 column 36"#,
            ],
        },
        Case {
            name: "toolrail's engine with llama.cpp and llguidance beside it",
            inputs: tools(Format::OpenAi),
            setup: comparing(setup(Toolrail, 12), &[Llama, Llguidance]),
            drive: Drive::Run,
            expect: &[
                r#"stopped: the token limit (12) was reached before the grammar was complete: the output is cut off; the budget guard was on, but could not make sure of a finish in so few tokens"#,
                r#"compared engines: llama.cpp's mask and toolrail's agree at all 12 step(s) compared"#,
                r#"compared engines: llguidance's mask and toolrail's agree at all 12 step(s) compared"#,
                r#"validation: invalid: could not parse a tool call in the openai format at byte 0: invalid JSON: EOF while parsing a value at line 1 column 36"#,
            ],
        },
        Case {
            name: "a dead end: no token can spell what the grammar needs",
            inputs: grammar("root ::= \"a\" \"\\U00400000\""),
            setup: setup(Toolrail, 10),
            drive: Drive::Run,
            expect: &[
                r#"stopped: the run reached a dead end at output byte 1: no token could continue the grammar (it expected '\U00400000')"#,
                r#"validation: invalid: the run reached a dead end at output byte 1: no token could continue the grammar (it expected '\U00400000')"#,
            ],
        },
        Case {
            name: "a grammar that ends: the model may end there",
            inputs: grammar("root ::= \"yes\" | \"no\""),
            setup: setup(Toolrail, 10),
            drive: Drive::Run,
            expect: &[r#"stopped: the model ended the generation after 1 token(s)"#],
        },
        Case {
            name: "cancelled after three steps",
            inputs: tools(Format::OpenAi),
            setup: setup(Toolrail, 60),
            drive: Drive::CancelAfter(3),
            expect: &[
                r#"stopped: cancelled after 3 token(s)"#,
                r#"validation: invalid: could not parse a tool call in the openai format at byte 0: invalid JSON: EOF while parsing a value at line 1 column 8"#,
            ],
        },
        Case {
            name: "tokens chosen by hand, then the model",
            inputs: tools(Format::OpenAi),
            setup: setup(Toolrail, 80),
            drive: Drive::Force(vec![b"{\"", b"name"]),
            expect: &[
                r#"stopped: the model ended the generation after 32 token(s)"#,
                r#"chosen by hand: 2 token(s) chosen instead of the sampled one: 0 ("{\""), 1 ("name")"#,
                r#"validation: valid call"#,
            ],
        },
        Case {
            name: "a hand-chosen start the model cannot finish in the limit",
            inputs: tools(Format::OpenAi),
            setup: without_guard(setup(Toolrail, 6)),
            drive: Drive::Force(vec![b"{\"", b"name"]),
            expect: &[
                r#"stopped: the token limit (6) was reached before the grammar was complete: the output is cut off"#,
                r#"chosen by hand: 2 token(s) chosen instead of the sampled one: 0 ("{\""), 1 ("name")"#,
                r#"validation: invalid: could not parse a tool call in the openai format at byte 0: invalid JSON: EOF while parsing a string at line 1 column 13"#,
            ],
        },
        Case {
            name: "no grammar, the model stopped mid-call by the limit",
            inputs: unconstrained(),
            setup: setup(Free, 5),
            drive: Drive::ForceText("{\"name\": \"get_weather\"", vec![]),
            expect: &[
                r#"stopped: the token limit (5) was reached"#,
                r#"chosen by hand: 5 token(s) chosen instead of the sampled one: 0 ("{\""), 1 ("name"), 2 ("\":"), 3 (" \""), 4 ("get")"#,
                r#"validation: invalid: could not parse a tool call in the openai format at byte 0: invalid JSON: EOF while parsing a string at line 1 column 13"#,
            ],
        },
        Case {
            name: "the llama3 envelope",
            inputs: tools(Format::Llama3),
            setup: setup(Toolrail, 80),
            drive: Drive::Run,
            expect: &[
                r#"stopped: the model ended the generation after 47 token(s)"#,
                r#"validation: valid call"#,
            ],
        },
        Case {
            name: "no grammar, the end of generation mid-call (chosen by hand)",
            inputs: unconstrained(),
            setup: setup(Free, 40),
            drive: Drive::ForceTextThenEnd("{\"name\": \"get_weather\", \"arguments\": {"),
            expect: &[
                r#"stopped: the end of generation was chosen by hand, as token 11"#,
                r#"chosen by hand: 12 token(s) chosen instead of the sampled one: 0 ("{\""), 1 ("name"), 2 ("\":"), 3 (" \""), 4 ("get") and 7 more"#,
                r#"validation: invalid: could not parse a tool call in the openai format at byte 0: invalid JSON: EOF while parsing an object at line 1 column 38"#,
            ],
        },
        Case {
            name: "llguidance compiles the schema itself and allows what the grammar does not",
            inputs: RunInputs {
                schema: Some(serde_json::json!({
                    "type": "object",
                    "properties": {"a": {"type": "integer"}},
                    "required": ["a"],
                    "additionalProperties": false
                })),
                ..grammar(r#"root ::= "{\"a\":" [1-9] [0-9]{0,3} "}""#)
            },
            setup: RunSetup {
                user: "Write a JSON object with a number a: ".into(),
                ..setup(Llguidance, 12)
            },
            drive: Drive::Run,
            expect: &[
                r#"stopped: the model ended the generation after 8 token(s)"#,
                r#"budget guard: 1 sampled token(s) replaced so that the grammar could finish within the token limit; the first at token 7 (took "}"): after "0" the grammar could not be finished; 5 tokens are left"#,
                r#"compared engines: llguidance's mask and toolrail's differ at 5 of 8 step(s); first at token 3: only llguidance allows "\n" (107), "\n\n" (108), "\n\n\n" (109), "\n\n\n\n" (110), "\n\n\n\n\n" (111), "\n\n\n\n\n\n" (112), "\n\n\n\n\n\n\n" (113), "\n\n\n\n\n\n\n\n" (114), "\n\n\n\n\n\n\n\n\n" (115), "\n\n\n\n\n\n\n\n\n\n" (116), "\n\n\n\n\n\n\n\n\n\n\n" (117), "\n\n\n\n\n\n\n\n\n\n\n\n" (118) and 90 more"#,
            ],
        },
        Case {
            name: "a left-recursive grammar under llama.cpp's sampler",
            inputs: grammar("root ::= root \"a\" | \"a\""),
            setup: setup(Llama, 6),
            drive: Drive::Run,
            expect: &[
                r#"stopped: the run stopped on an error: grammar rejected: 1:1: rule 'root' is left-recursive, which llama.cpp refuses (rewrite `x ::= x a | b` as `x ::= b a*`)"#,
                r#"validation: invalid: the run stopped on an error: grammar rejected: 1:1: rule 'root' is left-recursive, which llama.cpp refuses (rewrite `x ::= x a | b` as `x ::= b a*`)"#,
            ],
        },
    ];
    let qwen = template("Qwen3-Coder.jinja", ToolChoice::Auto)?;
    let hermes = template(
        "NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use.jinja",
        ToolChoice::Auto,
    )?;
    let mut stopped_by_word = hermes.clone();
    if let Some(Ok(run)) = &mut stopped_by_word.template {
        run.result.additional_stops = vec!["weather".into()];
    }
    let hermes_required = template(
        "NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use.jinja",
        ToolChoice::Required,
    )?;
    cases.extend([
        Case {
            name: "a lazy grammar's trigger completed inside a refused token",
            inputs: qwen.clone(),
            setup: setup(Toolrail, 60),
            drive: Drive::ForceText("Sure! <tool_call", vec![b"><"]),
            expect: &[
                r#"stopped: the run stopped on an error: token 6 ("><"): the trigger <tool_call> completed inside it, so the grammar started at output byte 6 with "<tool_call><"; the grammar refused '<' at output byte 17 (it expected '\n'); the run stops on it, as llama.cpp's does"#,
                r#"chosen by hand: 7 token(s) chosen instead of the sampled one: 0 ("Sure"), 1 ("!"), 2 (" <"), 3 ("tool"), 4 ("_") and 2 more"#,
                r#"lazy grammar: 6 token(s) free while the grammar slept; trigger fired: "<tool_call>" matched "<tool_call>" at token 6; then token 6 ("><"): the trigger <tool_call> completed inside it, so the grammar started at output byte 6 with "<tool_call><"; the grammar refused '<' at output byte 17 (it expected '\n'); the run stops on it, as llama.cpp's does"#,
                r#"llama.cpp's parse: content "Sure! ", reasoning "", 0 call(s)"#,
                r#"validation: invalid: the run stopped on an error: token 6 ("><"): the trigger <tool_call> completed inside it, so the grammar started at output byte 6 with "<tool_call><"; the grammar refused '<' at output byte 17 (it expected '\n'); the run stops on it, as llama.cpp's does"#,
            ],
        },
        Case {
            name: "a lazy grammar whose trigger never fires",
            inputs: hermes.clone(),
            setup: setup(Toolrail, 12),
            drive: Drive::ForceText("I cannot call <tool", vec![]),
            expect: &[
                r#"stopped: the token limit (12) was reached"#,
                r#"chosen by hand: 5 token(s) chosen instead of the sampled one: 0 ("I"), 1 (" cannot"), 2 (" call"), 3 (" <"), 4 ("tool")"#,
                r#"lazy grammar: 12 token(s) free while the grammar slept; no trigger fired; nearest: "<tool_call>" (11 of 12 bytes of "<tool_call>\n") at byte 14, then "<" instead of "\n""#,
                r#"llama.cpp's parse: content "I cannot call <tool_call></tool_call>", reasoning "", 0 call(s)"#,
                r#"validation: no tool call: llama.cpp's parse found only text (valid, but not a call)"#,
            ],
        },
        Case {
            name: "a lazy grammar woken by its trigger",
            inputs: hermes.clone(),
            setup: setup(Toolrail, 60),
            drive: Drive::ForceText("<tool_call>", vec![]),
            expect: &[
                r#"stopped: the model ended the generation after 43 token(s)"#,
                r#"chosen by hand: 5 token(s) chosen instead of the sampled one: 0 ("<"), 1 ("tool"), 2 ("_"), 3 ("call"), 4 (">")"#,
                r#"lazy grammar: 5 token(s) free while the grammar slept; trigger fired: "<tool_call>\n" matched "<tool_call>\n" at token 5"#,
                r#"budget guard: 1 sampled token(s) replaced so that the grammar could finish within the token limit; the first at token 35 (took "}}"): "}}," would need 30 tokens to finish; 25 are left"#,
                r#"llama.cpp's parse: content "", reasoning "", 1 call(s); get_weather({"city": "Paris", "unit": "celsius", "days": 1})"#,
                r#"validation: valid: llama.cpp's parse found 1 call(s), each valid for its tool"#,
            ],
        },
        Case {
            name: "a lazy grammar, unconstrained prose to the limit",
            inputs: hermes,
            setup: setup(Toolrail, 6),
            drive: Drive::Run,
            expect: &[
                r#"stopped: the token limit (6) was reached"#,
                r#"lazy grammar: 6 token(s) free while the grammar slept; no trigger fired; no trigger word starts in the output"#,
                r#"llama.cpp's parse: content "What is the weather in Paris", reasoning "", 0 call(s)"#,
                r#"validation: no tool call: llama.cpp's parse found only text (valid, but not a call)"#,
            ],
        },
        Case {
            name: "a stop string of the template ends the output before it",
            inputs: stopped_by_word,
            setup: setup(Toolrail, 12),
            drive: Drive::Run,
            expect: &[
                r#"stopped: the stop string "weather" appeared after 4 token(s); the output ends before it, as llama-server returns it"#,
                r#"lazy grammar: 4 token(s) free while the grammar slept; no trigger fired; no trigger word starts in the output"#,
                r#"llama.cpp's parse: content "What is the ", reasoning "", 0 call(s)"#,
                r#"validation: no tool call: llama.cpp's parse found only text (valid, but not a call)"#,
            ],
        },
        Case {
            name: "a template grammar that is not lazy (tool_choice required)",
            inputs: hermes_required,
            setup: setup(Toolrail, 80),
            drive: Drive::Run,
            expect: &[
                r#"stopped: the token limit (80) was reached"#,
                r#"budget guard: 5 sampled token(s) replaced so that the grammar could finish within the token limit; the first at token 45 (took " <"): " weather" would need 36 tokens to finish; 35 are left"#,
                r#"llama.cpp's parse: content "What is the weather in Paris?<|im_end|>\n<|im_start|>user\nWhat is the weather in Paris?<|im_end|>\n<|im_start|>assistant\nWhat is the ", reasoning "", 1 call(s); get_weather({"city": "Paris", "days": 1})"#,
                r#"validation: valid: llama.cpp's parse found 1 call(s), each valid for its tool"#,
            ],
        },
        Case {
            name: "the reasoning budget forces the end of thinking",
            inputs: thinking(4)?,
            setup: setup(Toolrail, 24),
            drive: Drive::Run,
            expect: &[
                r#"stopped: the token limit (24) was reached"#,
                r#"reasoning: the budget ran out at token 2 ("_"): the end was forced from token 3; thinking ended at token 7 (">"), forced"#,
                r#"lazy grammar: 17 token(s) free while the grammar slept; no trigger fired; nearest: "<tool_" (6 of 12 bytes of "<tool_call>\n") at byte 50, then "E" instead of "c""#,
                r#"llama.cpp's parse: content "\n<tool_Enough.</tool_Enough>\n<tool_Enough", reasoning "\n<tool_Enough.", 0 call(s)"#,
                r#"validation: no tool call: llama.cpp's parse found only text (valid, but not a call)"#,
            ],
        },
        Case {
            name: "a lazy grammar under llama.cpp's sampler, trigger inside a refused token",
            inputs: qwen,
            setup: setup(Llama, 60),
            drive: Drive::ForceText("Sure! <tool_call", vec![b"><"]),
            expect: &[
                r#"stopped: the run stopped on an error: token 6 ("><"): the trigger <tool_call> completed inside it, so the grammar started at output byte 6 with "<tool_call><"; the grammar refused '<' at output byte 17 (it expected '\n'); the run stops on it, as llama.cpp's does (llama: llama.cpp failed accepting token 1798: ffi error -3)"#,
                r#"chosen by hand: 7 token(s) chosen instead of the sampled one: 0 ("Sure"), 1 ("!"), 2 (" <"), 3 ("tool"), 4 ("_") and 2 more"#,
                r#"lazy grammar: 6 token(s) free while the grammar slept; trigger fired: "<tool_call>" matched "<tool_call>" at token 6; then token 6 ("><"): the trigger <tool_call> completed inside it, so the grammar started at output byte 6 with "<tool_call><"; the grammar refused '<' at output byte 17 (it expected '\n'); the run stops on it, as llama.cpp's does (llama: llama.cpp failed accepting token 1798: ffi error -3)"#,
                r#"llama.cpp's parse: content "Sure! ", reasoning "", 0 call(s)"#,
                r#"validation: invalid: the run stopped on an error: token 6 ("><"): the trigger <tool_call> completed inside it, so the grammar started at output byte 6 with "<tool_call><"; the grammar refused '<' at output byte 17 (it expected '\n'); the run stops on it, as llama.cpp's does (llama: llama.cpp failed accepting token 1798: ffi error -3)"#,
            ],
        },
    ]);
    Some(cases)
}

#[test]
fn each_hard_case_is_explained_in_the_same_true_words_everywhere() {
    let Some(model) = crate::common::model() else {
        return;
    };
    let Some(cases) = cases() else { return };
    let mut c = RunController::with_model(model.clone(), std::sync::Arc::new(|| {}));
    let dir = tempfile::tempdir().unwrap();
    let mut report = String::new();
    let mut failures = Vec::new();
    for (i, case) in cases.iter().enumerate() {
        let id = drive(&mut c, case);
        let run = c.run(id).unwrap();
        let shown: Vec<String> = run.explanation.iter().map(ToString::to_string).collect();
        report.push_str(&format!("== {} ==\n{}\n", case.name, shown.join("\n")));
        if shown != case.expect {
            failures.push(case.name);
        }
        // the transcript, reopened as the Transcript pane does, and its Markdown say the same
        let path = dir.path().join(format!("case-{i}.json"));
        let saved = c.export(id, &path, None).unwrap();
        if let Some(keep) = std::env::var_os("TOOLRAIL_KEEP_TRANSCRIPTS") {
            // to look at a case in the app: `toolrail gui`, Open transcript…
            std::fs::copy(
                &path,
                std::path::Path::new(&keep).join(format!("case-{i}.json")),
            )
            .unwrap();
        }
        assert_eq!(explain(&saved), run.explanation, "{}", case.name);
        let replay = Replay::open(&path).unwrap();
        assert_eq!(replay.explanation(), &run.explanation[..], "{}", case.name);
        // the Markdown tells the run once, in the same lines and order (the chat template's
        // table keeps only facts and figures)
        let markdown = to_markdown(&saved);
        let happened: Vec<&str> = markdown
            .split("## What happened\n\n")
            .nth(1)
            .unwrap_or_default()
            .lines()
            .take_while(|l| l.starts_with("- **"))
            .collect();
        let labels: Vec<String> = run
            .explanation
            .iter()
            .map(|l| format!("- **{}**: ", l.topic.label()))
            .collect();
        assert_eq!(happened.len(), labels.len(), "{}: {markdown}", case.name);
        for (bullet, label) in happened.iter().zip(&labels) {
            assert!(bullet.starts_with(label), "{}: {bullet}", case.name);
        }
        for own_words in ["| timeline |", "| thinking |", "| llama.cpp's parse |"] {
            assert!(!markdown.contains(own_words), "{}: {markdown}", case.name);
        }
    }
    assert!(cases.len() >= 30, "{} cases", cases.len());
    assert!(failures.is_empty(), "{failures:?} differ:\n{report}");
}
