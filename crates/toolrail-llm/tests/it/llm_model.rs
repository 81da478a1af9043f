//! The model layer on the real test model (Gemma 3 270M Q4_K_M): metadata, the token table,
//! tokenization, `<token>` references, chat prompts, models.toml loading, and clear errors for
//! missing, truncated, foreign and unsupported files made from real bytes.
//!
//! The model is found at `$TOOLRAIL_MODEL` or in the cache `scripts/fetch-model.sh` fills. If it
//! is absent, these tests fail when `CI=true` and are skipped (with a message) otherwise.

use std::io::Write as _;
use std::path::Path;
use std::time::Instant;

use toolrail_gbnf::{Grammar, TokenVocabulary};
use toolrail_llm::{
    ChatFormat, ChatMessage, LlmError, Model, ModelSpec, Models, PromptSource, test_model_path,
};
use toolrail_tools::prompt::PromptFamily;

use crate::common::{model, model_path};

#[test]
fn metadata() {
    let Some(model) = model() else { return };
    let info = model.info();
    assert_eq!(info.architecture, "gemma3");
    assert_eq!(info.vocab_size, 262_144);
    assert_eq!(model.n_vocab(), 262_144);
    assert!(
        (200_000_000..300_000_000).contains(&info.parameters),
        "{} parameters",
        info.parameters
    );
    assert_eq!(info.context_length, 32_768);
    assert_eq!(info.layers, 18);
    assert_eq!(
        info.chat_template, None,
        "the base model has no chat template"
    );
    assert_eq!(info.file_size, 253_113_024);
    assert_eq!(info.gguf_version, 3);
    assert_eq!(info.path, test_model_path());
}

/// The tests find the test model where the app's built-in `gemma-3-270m` entry points (the
/// testkit has no dependency on this crate, so it writes the same rule down again).
#[test]
fn the_testkit_finds_the_model_where_the_app_looks() {
    assert_eq!(toolrail_testkit::model_path(), test_model_path());
    assert_eq!(
        toolrail_testkit::TEST_MODEL_FILE,
        toolrail_llm::TEST_MODEL_FILE
    );
}

#[test]
fn token_table_matches_the_vocabulary() {
    let Some(model) = model() else { return };
    let started = Instant::now();
    let table = model.token_table();
    let elapsed = started.elapsed();
    eprintln!(
        "token table: {} tokens in {:.1} ms",
        table.len(),
        elapsed.as_secs_f64() * 1e3
    );
    assert_eq!(table.len(), 262_144);
    // Generous bound for unoptimised test builds; the release figure is far lower.
    assert!(elapsed.as_millis() < 2_000, "token table took {elapsed:?}");

    // End of generation: <eos> and <end_of_turn>, and nothing ordinary.
    let eog: Vec<u32> = (0..table.len() as u32)
        .filter(|&id| table.is_eog(id))
        .collect();
    assert_eq!(eog, model.eog_tokens());
    let eos = model.tokenize_special(b"<eos>");
    let end_of_turn = model.tokenize_special(b"<end_of_turn>");
    assert_eq!(eos.len(), 1);
    assert_eq!(end_of_turn.len(), 1);
    assert!(
        eog.contains(&eos[0]) && eog.contains(&end_of_turn[0]),
        "{eog:?}"
    );
    assert!(eog.len() <= 4, "{eog:?}");
    assert!(!table.is_eog(model.tokenize("yes", false, false)[0]));

    // Special pieces are rendered, as llama.cpp's grammar sampler sees them.
    let start_of_turn = model.tokenize_special(b"<start_of_turn>")[0];
    assert_eq!(table.piece(start_of_turn), b"<start_of_turn>");
    assert_eq!(table.piece(eos[0]), b"<eos>");

    // The table agrees with the model token by token (sampled) and byte tokens are one byte.
    for id in (0..table.len() as u32).step_by(997) {
        assert_eq!(table.piece(id), model.piece(id).as_slice(), "token {id}");
    }
    let newline = model.tokenize("\n", false, false);
    assert_eq!(newline.len(), 1);
    assert_eq!(table.piece(newline[0]), b"\n");

    // Empty and NUL-led pieces: always masked by llama.cpp's grammar sampler.
    let empty: Vec<u32> = (0..table.len() as u32)
        .filter(|&id| table.piece(id).is_empty())
        .collect();
    let nul: Vec<u32> = (0..table.len() as u32)
        .filter(|&id| table.piece(id).first() == Some(&0))
        .collect();
    eprintln!("empty pieces: {empty:?}; NUL-led pieces: {nul:?}");
    for &id in empty.iter().chain(&nul) {
        assert!(table.always_masked(id) || table.is_eog(id), "token {id}");
    }
    assert!(
        !nul.is_empty(),
        "the byte token <0x00> renders as a NUL byte"
    );

    // The shared table is built once.
    let shared = model.shared_token_table();
    assert!(std::sync::Arc::ptr_eq(&shared, &model.shared_token_table()));
    assert_eq!(shared.len(), table.len());
}

#[test]
fn tokenize_round_trip() {
    let Some(model) = model() else { return };
    for text in [
        "Hello, world!",
        "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}",
        "  leading spaces, tabs\tand\nnewlines",
        "Ünïcödé — 東京 🚀",
    ] {
        let tokens = model.tokenize(text, false, false);
        assert!(!tokens.is_empty());
        assert_eq!(
            String::from_utf8(model.detokenize(&tokens)).unwrap(),
            text,
            "{tokens:?}"
        );
        let pieces: Vec<u8> = tokens.iter().flat_map(|&t| model.piece(t)).collect();
        assert_eq!(pieces, text.as_bytes());
    }
    // add_special puts BOS first.
    let with_bos = model.tokenize("hi", true, false);
    assert_eq!(Some(with_bos[0]), model.bos());
    assert_eq!(
        &with_bos[1..],
        model.tokenize("hi", false, false).as_slice()
    );
    // Special-token text is one token only with parse_special.
    assert_eq!(model.tokenize("<start_of_turn>", false, true).len(), 1);
    assert!(model.tokenize("<start_of_turn>", false, false).len() > 1);
    // Out of range ids are refused, not passed to llama.cpp.
    assert!(model.piece(u32::MAX).is_empty());
    assert!(!model.is_eog(262_144));
    assert!(matches!(
        model.check_token(262_144),
        Err(LlmError::TokenOutOfRange {
            token: 262_144,
            n_vocab: 262_144
        })
    ));
}

#[test]
fn start_of_turn_resolves_through_token_vocabulary() {
    let Some(model) = model() else { return };
    let ids = model.tokenize_special(b"<start_of_turn>");
    assert_eq!(ids.len(), 1, "{ids:?}");
    assert_eq!(model.piece(ids[0]), b"<start_of_turn>");
    let grammar = Grammar::parse_with(
        "root ::= <start_of_turn> \"model\\n\" [a-z]+",
        "root",
        Some(model as &dyn TokenVocabulary),
    );
    assert!(grammar.is_ok(), "{grammar:?}");
    // Text that is several tokens cannot be a token reference.
    assert!(model.tokenize_special(b"<start_of_turnip>").len() > 1);
    assert!(
        Grammar::parse_with(
            "root ::= <start_of_turnip>",
            "root",
            Some(model as &dyn TokenVocabulary)
        )
        .is_err()
    );
}

#[test]
fn chat_prompts_use_the_builders_without_a_template() {
    let Some(model) = model() else { return };
    let messages = [
        ChatMessage::system("Be brief."),
        ChatMessage::user("What is the weather in Paris?"),
    ];
    // Auto with no GGUF template: the generic builder.
    let prompt = model.chat_prompt(&messages, &[]).unwrap();
    assert_eq!(prompt.source, PromptSource::Builder(PromptFamily::Generic));
    assert!(prompt.text.starts_with("Be brief.\n\n"), "{}", prompt.text);
    assert!(
        prompt
            .text
            .ends_with("User: What is the weather in Paris?\nAssistant:")
    );

    // The models.toml entry says gemma.
    let file = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../..")).join("models.toml");
    let mut spec = Models::load(Some(&file))
        .unwrap()
        .find("gemma-3-270m")
        .unwrap();
    assert_eq!(spec.chat_format, ChatFormat::Family(PromptFamily::Gemma));
    spec.path = model.info().path.clone();
    let gemma = Model::load(&spec, |_| true).unwrap();
    let tools = [serde_json::json!({
        "name": "get_weather",
        "description": "Weather for a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
    })];
    let prompt = gemma.chat_prompt(&messages, &tools).unwrap();
    assert_eq!(prompt.source, PromptSource::Builder(PromptFamily::Gemma));
    assert!(
        prompt
            .text
            .starts_with("<start_of_turn>user\nBe brief.\n\n")
    );
    assert!(
        prompt
            .text
            .ends_with("<end_of_turn>\n<start_of_turn>model\n")
    );
    assert!(prompt.text.contains("get_weather"));
    let tokens = gemma.tokenize(&prompt.text, true, true);
    let start_of_turn = gemma.tokenize_special(b"<start_of_turn>")[0];
    assert_eq!(tokens[1], start_of_turn);

    // Several turns do not fit a one-query builder.
    let err = model
        .chat_prompt(
            &[
                ChatMessage::user("a"),
                ChatMessage::new("assistant", "b"),
                ChatMessage::user("c"),
            ],
            &[],
        )
        .unwrap_err();
    assert!(err.to_string().contains("3 turns"), "{err}");
    assert!(model.chat_prompt(&[ChatMessage::system("x")], &[]).is_err());
}

#[test]
fn load_by_spec_reports_progress_and_can_be_cancelled() {
    let Some(path) = model_path() else { return };
    let spec = ModelSpec::from_path(&path);
    assert_eq!(spec.name, "gemma-3-270m-q4_k_m");
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let log = std::sync::Arc::clone(&seen);
    let model = Model::load(&spec, move |p| {
        log.lock().unwrap().push(p);
        true
    })
    .unwrap();
    let seen = seen.lock().unwrap().clone();
    assert!(!seen.is_empty());
    assert_eq!(seen.last().copied(), Some(1.0));
    assert!(seen.windows(2).all(|w| w[0] <= w[1]), "{seen:?}");
    eprintln!("load time (llama.cpp): {:?}", model.info().load_time);

    // A bare path loads too; cancelling from the callback stops the load.
    let err = Model::load(path.as_path(), |_| false).unwrap_err();
    assert!(matches!(err, LlmError::LoadCancelled { .. }), "{err}");
}

/// A temporary directory for damaged copies of the model.
fn scratch() -> tempfile::TempDir {
    tempfile::tempdir().expect("temp dir")
}

/// `len` bytes from a fixed-seed generator (xorshift), never starting with "GGUF".
fn random_bytes(len: usize) -> Vec<u8> {
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    (0..len)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 24) as u8
        })
        .collect()
}

#[test]
fn missing_file() {
    let dir = scratch();
    let path = dir.path().join("nope.gguf");
    let err = Model::open(&path).unwrap_err();
    assert!(
        matches!(&err, LlmError::NotFound { path: p } if *p == path),
        "{err}"
    );
    assert_eq!(
        err.to_string(),
        format!("model file not found: {}", path.display())
    );
}

#[test]
fn random_bytes_are_not_gguf() {
    let dir = scratch();
    let path = dir.path().join("random.gguf");
    std::fs::write(&path, random_bytes(1 << 20)).unwrap();
    let err = Model::open(&path).unwrap_err();
    assert!(matches!(err, LlmError::NotGguf { .. }), "{err}");
    assert!(err.to_string().contains("is not a GGUF file"), "{err}");

    let short = dir.path().join("short.gguf");
    std::fs::write(&short, b"GG").unwrap();
    let err = Model::open(&short).unwrap_err();
    assert!(
        matches!(err, LlmError::NotGguf { ref found, .. } if found == b"GG"),
        "{err}"
    );

    let empty = dir.path().join("empty.gguf");
    std::fs::write(&empty, b"").unwrap();
    assert!(matches!(Model::open(&empty), Err(LlmError::NotGguf { .. })));
}

/// The first `len` bytes of the real model.
fn model_prefix(len: usize) -> Option<Vec<u8>> {
    use std::io::Read as _;
    let path = model_path()?;
    let mut bytes = Vec::with_capacity(len);
    std::fs::File::open(path)
        .unwrap()
        .take(len as u64)
        .read_to_end(&mut bytes)
        .unwrap();
    Some(bytes)
}

#[test]
fn truncated_copies() {
    let Some(head) = model_prefix(16 << 20) else {
        return;
    };
    let dir = scratch();

    // Cut inside the tensor data: the header is whole, the weights are not.
    let path = dir.path().join("cut-data.gguf");
    std::fs::write(&path, &head).unwrap();
    let err = Model::open(&path).unwrap_err();
    match &err {
        LlmError::Truncated { size, detail, .. } => {
            assert_eq!(*size, 16 << 20);
            assert!(detail.contains("tensors need 253113024 bytes"), "{detail}");
        }
        other => panic!("expected Truncated, got {other}"),
    }
    assert!(err.to_string().contains("is truncated"), "{err}");

    // Cut inside the header (in the vocabulary's token array).
    let path = dir.path().join("cut-header.gguf");
    std::fs::write(&path, &head[..100_000]).unwrap();
    let err = Model::open(&path).unwrap_err();
    match &err {
        LlmError::Truncated { detail, .. } => {
            assert!(detail.contains("ends inside its header"), "{detail}")
        }
        other => panic!("expected Truncated, got {other}"),
    }

    // Cut right after the magic.
    let path = dir.path().join("cut-magic.gguf");
    std::fs::write(&path, &head[..6]).unwrap();
    assert!(matches!(
        Model::open(&path),
        Err(LlmError::Truncated { .. })
    ));
}

#[test]
fn corrupt_headers() {
    let Some(mut head) = model_prefix(1 << 20) else {
        return;
    };
    let dir = scratch();

    // An unknown GGUF version.
    let mut bad = head.clone();
    bad[4..8].copy_from_slice(&99u32.to_le_bytes());
    let path = dir.path().join("version.gguf");
    std::fs::write(&path, &bad).unwrap();
    assert!(matches!(
        Model::open(&path),
        Err(LlmError::UnsupportedVersion { version: 99, .. })
    ));

    // An absurd metadata count.
    let mut bad = head.clone();
    bad[16..24].copy_from_slice(&u64::MAX.to_le_bytes());
    let path = dir.path().join("count.gguf");
    std::fs::write(&path, &bad).unwrap();
    let err = Model::open(&path).unwrap_err();
    assert!(matches!(err, LlmError::Corrupt { .. }), "{err}");

    // An unknown value type for the first key.
    let key_len = u64::from_le_bytes(head[24..32].try_into().unwrap()) as usize;
    let type_at = 32 + key_len;
    head[type_at..type_at + 4].copy_from_slice(&77u32.to_le_bytes());
    let path = dir.path().join("type.gguf");
    std::fs::write(&path, &head).unwrap();
    let err = Model::open(&path).unwrap_err();
    assert!(err.to_string().contains("unknown value type 77"), "{err}");
}

#[test]
fn unsupported_architecture() {
    let Some(path) = model_path() else { return };
    let dir = scratch();
    let mut bytes = std::fs::read(&path).unwrap();
    // Rename the architecture in place: the value of general.architecture, same length.
    let key = b"general.architecture";
    let at = bytes
        .windows(key.len())
        .position(|w| w == key)
        .expect("the key is in the header");
    let value_at = at + key.len() + 4 + 8; // type u32, string length u64
    assert_eq!(&bytes[value_at..value_at + 6], b"gemma3");
    bytes[value_at..value_at + 6].copy_from_slice(b"zorg42");
    let copy = dir.path().join("zorg.gguf");
    std::fs::File::create(&copy)
        .unwrap()
        .write_all(&bytes)
        .unwrap();
    drop(bytes);
    let err = Model::open(&copy).unwrap_err();
    match &err {
        LlmError::UnsupportedArchitecture { architecture, .. } => {
            assert_eq!(architecture, "zorg42")
        }
        other => panic!("expected UnsupportedArchitecture, got {other}"),
    }
    assert!(
        err.to_string()
            .contains("architecture 'zorg42' is not supported"),
        "{err}"
    );
}

#[test]
fn a_gguf_chat_template_builds_the_prompt_when_there_is_one() {
    let Some(path) = model_path() else { return };
    let dir = scratch();
    let copy = dir.path().join("templated.gguf");
    let template = "{% for message in messages %}<start_of_turn>{{ message['role'] }}\n\
                    {{ message['content'] }}<end_of_turn>\n{% endfor %}<start_of_turn>model\n";
    toolrail_llm::gguf::copy_with_string(&path, &copy, "tokenizer.chat_template", template)
        .unwrap();
    let model = Model::open(&copy).unwrap();
    assert_eq!(model.info().chat_template.as_deref(), Some(template));

    let messages = [
        ChatMessage::system("Be brief."),
        ChatMessage::user("What is the weather in Paris?"),
    ];
    let prompt = model.chat_prompt(&messages, &[]).unwrap();
    assert_eq!(prompt.source, PromptSource::GgufTemplate);
    // llama.cpp recognises the Gemma template: the system text joins the user's turn.
    assert_eq!(
        prompt.text,
        "<start_of_turn>user\nBe brief.\n\nWhat is the weather in Paris?<end_of_turn>\n\
         <start_of_turn>model\n"
    );
    // Tools need a builder that shows them: the template is not used then.
    let tools = [serde_json::json!({"name": "get_weather", "parameters": {"type": "object"}})];
    let with_tools = model.chat_prompt(&messages, &tools).unwrap();
    assert_eq!(
        with_tools.source,
        PromptSource::Builder(PromptFamily::Generic)
    );

    // And the generation model still runs on the copy.
    let tokens = model.tokenize(&prompt.text, true, true);
    assert_eq!(tokens[1], model.tokenize_special(b"<start_of_turn>")[0]);
}
