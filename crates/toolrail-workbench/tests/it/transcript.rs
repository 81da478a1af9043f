//! Transcripts save atomically, reopen identical, render to Markdown, and refuse files that are
//! not transcripts (with line:column) or that a newer toolrail wrote.

use std::sync::Arc;
use toolrail_llm::settings::{CacheType, FlashAttention, Known};

use toolrail_engine::Engine;
use toolrail_gbnf::Grammar;
use toolrail_workbench::transcript::{
    Candidate, ModelInfo, Sampling, Stop, TokenRecord, Totals, Transcript, TranscriptError,
    to_markdown,
};

fn sample_transcript() -> Transcript {
    let grammar_text = "root ::= \"{\\\"ok\\\": \" (\"true\" | \"false\") \"}\"";
    let grammar = Arc::new(Grammar::parse(grammar_text).unwrap());
    let mut engine = Engine::new(grammar);
    let mut state = engine.initial();
    let mut tokens = Vec::new();
    for (i, piece) in ["{\"ok\"", ": ", "tr", "ue", "}"].iter().enumerate() {
        state = engine.feed(state, piece.as_bytes()).unwrap();
        tokens.push(TokenRecord {
            index: i as u32,
            id: 100 + i as u32,
            piece: piece.to_string(),
            piece_hex: None,
            budget_replaced: None,
            budget: None,
            forced: i == 2,
            before: vec![Candidate {
                id: 7,
                piece: "Sure".into(),
                probability: 0.6,
                masked: true,
            }],
            after: vec![Candidate {
                id: 100 + i as u32,
                piece: piece.to_string(),
                probability: 0.9,
                masked: false,
            }],
            allowed: 3,
            stacks: Some(engine.snapshot(state)),
            decode_ms: 15.5,
            mask_ms: 0.2,
            flag: None,
            sampled: Vec::new(),
            disagreements: Vec::new(),
            mask_difference: None,
            other_masks: Vec::new(),
            lazy: None,
            thinking: None,
        });
    }
    Transcript {
        version: toolrail_workbench::transcript::TRANSCRIPT_VERSION,
        toolrail_version: env!("CARGO_PKG_VERSION").into(),
        created_unix: 1_790_000_000,
        model: ModelInfo {
            name: "gemma-3-270m".into(),
            path: "/m.gguf".into(),
            architecture: "gemma3".into(),
            vocab_size: 262144,
            file_size: 253_000_000,
        },
        prompt: "Is it ok? | answer in JSON".into(),
        tools: None,
        format: None,
        grammar: Some(grammar_text.into()),
        engine: toolrail_llm::worker::EngineKind::Toolrail,
        server: None,
        server_run: None,
        sampling: Sampling::default(),
        tokens,
        output: "{\"ok\": true}".into(),
        stop: Stop::EndOfGeneration,
        validation: Some(toolrail_workbench::transcript::Validation {
            valid: Some(true),
            ..Default::default()
        }),
        totals: Totals {
            tokens: 5,
            decode_ms: 77.5,
            mask_ms: 1.0,
            tokens_per_s: 60.0,
            ..Totals::default()
        },
        settings: Some(toolrail_llm::settings::LogitSettings {
            engine: toolrail_llm::settings::Backend::Server {
                url: "http://127.0.0.1:8080".into(),
            },
            flash_attention: Known::Stated(FlashAttention::Off),
            ubatch: Known::Assumed(512),
            cache_type_k: Known::Reported(CacheType::Q8_0),
            threads: Known::Set(2),
            prompt_cached: Some(3),
            unread_flags: vec!["--port".into()],
            ..Default::default()
        }),
        template: None,
        errors: Vec::new(),
    }
}

#[test]
fn save_and_reopen_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("run.json");
    let t = sample_transcript();
    t.save(&path).unwrap();
    assert_eq!(Transcript::load(&path).unwrap(), t);
    let md = dir.path().join("run.md");
    t.save_markdown(&md).unwrap();
    let text = std::fs::read_to_string(md).unwrap();
    assert!(text.contains("| 2 | `tr` (forced) | 0.90 | 3 |"), "{text}");
    assert!(text.contains("```gbnf\nroot ::="), "{text}");
    assert!(
        text.contains("| computed with | llama-server at http://127.0.0.1:8080: flash attention off (stated by its flags), batch unknown, micro-batch 512 (llama-server's default, assumed: the server does not report it), K cache q8_0 (reported by the server)"),
        "{text}"
    );
    assert!(
        text.contains("Is it ok? | answer in JSON"),
        "prompt kept verbatim in its fence"
    );
}

#[test]
fn markdown_escapes_table_cells() {
    let mut t = sample_transcript();
    t.tokens[0].piece = "a|b\n".into();
    assert!(to_markdown(&t).contains("`a\\|b\\n`"));
}

#[test]
fn bad_files_are_named_with_position() {
    let err = Transcript::from_json("{\"version\": 1,\n \"model\": 3}", "x.json").unwrap_err();
    match err {
        TranscriptError::Format { line, .. } => assert_eq!(line, 2),
        other => panic!("{other}"),
    }
    let err = Transcript::from_json("{\"version\": 99}", "x.json").unwrap_err();
    assert!(
        matches!(err, TranscriptError::Version { found: 99, .. }),
        "{err}"
    );
    assert!(Transcript::load(std::path::Path::new("/no/such/file.json")).is_err());
}

/// The F4 reproducer: the last token's piece made 1 MB. Reading refuses it, naming the piece
/// and the limit; a piece at the limit still reads.
#[test]
fn a_huge_token_piece_is_refused_naming_it_and_the_limit() {
    use toolrail_workbench::transcript::MAX_PIECE_BYTES;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.json");
    let mut t = sample_transcript();
    let last = t.tokens.len() - 1;
    t.tokens[last].piece = "z".repeat(1_000_000);
    t.save(&path).unwrap();
    let err = Transcript::load(&path).unwrap_err();
    assert!(
        matches!(err, TranscriptError::PieceTooLong { len: 1_000_000, .. }),
        "{err}"
    );
    assert!(
        err.to_string().contains(&format!(
            "/tokens/{last}/piece: a token piece of 1000000 bytes is too long (the limit is {MAX_PIECE_BYTES} bytes)"
        )),
        "{err}"
    );
    // A candidate's piece is checked too.
    let mut t = sample_transcript();
    t.tokens[0].before[0].piece = "y".repeat(MAX_PIECE_BYTES + 1);
    t.save(&path).unwrap();
    let err = Transcript::load(&path).unwrap_err();
    assert!(
        err.to_string().contains("/tokens/0/before/0/piece"),
        "{err}"
    );
    // At the limit it reads.
    let mut t = sample_transcript();
    t.tokens[last].piece = "z".repeat(MAX_PIECE_BYTES);
    t.save(&path).unwrap();
    assert_eq!(Transcript::load(&path).unwrap(), t);
}

#[test]
fn a_transcript_over_the_size_limit_is_refused_before_it_is_read() {
    use toolrail_workbench::transcript::MAX_TRANSCRIPT_BYTES;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("big.json");
    // A sparse file: its size is over the limit, without writing the bytes.
    let file = std::fs::File::create(&path).unwrap();
    file.set_len(MAX_TRANSCRIPT_BYTES + 1).unwrap();
    let err = Transcript::load(&path).unwrap_err();
    assert!(matches!(err, TranscriptError::TooLarge { .. }), "{err}");
    assert!(
        err.to_string().contains(&format!(
            "{} bytes is too large for a transcript (the limit is {MAX_TRANSCRIPT_BYTES} bytes)",
            MAX_TRANSCRIPT_BYTES + 1
        )),
        "{err}"
    );
}

#[test]
fn a_run_compared_with_other_engines_keeps_each_engines_times_and_differences() {
    use toolrail_llm::worker::EngineKind;
    use toolrail_workbench::transcript::{DifferingToken, MaskDifference, OtherMask};
    let mut t = sample_transcript();
    for r in &mut t.tokens {
        r.other_masks = vec![
            OtherMask {
                engine: EngineKind::Llama,
                mask_ms: 55.25,
                difference: None,
                stopped: None,
            },
            OtherMask {
                engine: EngineKind::Llguidance,
                mask_ms: 0.125,
                difference: None,
                stopped: None,
            },
        ];
        t.totals.add_other_masks(&r.other_masks);
    }
    t.tokens[3].other_masks[1].difference = Some(MaskDifference {
        engine: EngineKind::Llguidance,
        only_engine: 0,
        only_toolrail: 1,
        tokens: vec![DifferingToken {
            id: 483,
            piece: "\u{fffd}".into(),
            piece_hex: Some("f5".into()),
            engine_allows: false,
        }],
    });
    t.tokens[4].other_masks[1].stopped = Some("llguidance refused token 104".into());
    // the JSON keeps them
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("run.json");
    t.save(&path).unwrap();
    let back = Transcript::load(&path).unwrap();
    assert_eq!(back, t);
    assert_eq!(back.totals.other_engines.len(), 2);
    assert_eq!(back.totals.other_engines[0].steps, 5);
    // the Markdown lists every engine's time, the differences and the stop
    let md = to_markdown(&t);
    assert!(
        md.contains("| toolrail 0.200, llama 55.250, llguidance 0.125 |"),
        "{md}"
    );
    assert!(
        md.contains("| llama masks (beside toolrail's) | 276.2 ms over 5 step(s)"),
        "{md}"
    );
    assert!(
        md.contains("| 3 | only toolrail allows bytes f5 (483) |"),
        "{md}"
    );
    assert!(md.contains("| 4 | llguidance refused token 104 |"), "{md}");
    // a transcript without comparisons keeps its plain mask column
    // (its settings row names the llama-server it ran on, which is no engine)
    let plain = to_markdown(&Transcript {
        settings: None,
        ..sample_transcript()
    });
    assert!(!plain.contains("llama"), "{plain}");
}

/// The transcripts shipped and used as fixtures (the demo run, the app's test runs) read their
/// `validation` into the typed value and write it back the same: same keys, same order.
#[test]
fn shipped_transcripts_read_and_write_their_validation_unchanged() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut files = vec![root.join("assets/demo_run.json")];
    let fixtures = root.join("crates/toolrail-app/tests/fixtures");
    for entry in std::fs::read_dir(&fixtures).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "json") {
            files.push(path);
        }
    }
    assert!(files.len() >= 5, "{files:?}");
    for path in files {
        let raw: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let transcript = Transcript::load(&path).unwrap();
        let written = serde_json::to_value(&transcript).unwrap();
        assert_eq!(
            written.get("validation"),
            raw.get("validation"),
            "{}",
            path.display()
        );
        assert_eq!(
            serde_json::to_string(&transcript.validation).unwrap(),
            serde_json::to_string(&raw.get("validation")).unwrap(),
            "{}: the same keys in the same order",
            path.display()
        );
    }
}
