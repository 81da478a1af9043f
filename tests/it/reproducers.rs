//! One test per reproducer of the reliability issue (`../shared/reliability/`, F-numbers in the
//! names), run as a process with a time bound: each ends with a clear message or the right
//! result. Reproducers that need the app or a workspace are tested in `toolrail-workbench`
//! (F1's workspace, F4, F5, F7: `tests/it/reliability.rs`, `transcript.rs`, `workspace.rs`);
//! F6 is `attacks::grammar_output_never_clobbers_links_devices_or_permissions`.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use toolrail_testkit::require;

const TOOLRAIL: &str = env!("CARGO_BIN_EXE_toolrail");
/// A file of `../shared/` as an argument; missing: a failure under `CI=true`, otherwise None
/// (a skip).
fn shared_arg(sub: &str) -> Option<String> {
    toolrail_testkit::shared(sub).map(|p| p.to_string_lossy().into_owned())
}

/// A reproducer file (`../shared/reliability/<name>`); missing: see [`shared_arg`].
fn reproducer(name: &str) -> Option<String> {
    shared_arg(&format!("reliability/{name}"))
}

/// Waits for `child` at most `limit`, killing it (and failing) past that.
fn finish_within(mut child: Child, limit: Duration, what: &str) -> Output {
    let started = Instant::now();
    loop {
        if child.try_wait().unwrap().is_some() {
            return child.wait_with_output().unwrap();
        }
        if started.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what}: still running after {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Runs toolrail with `args` (no input), failing past `secs` seconds.
fn toolrail_within(args: &[&str], secs: u64) -> Output {
    let child = Command::new(TOOLRAIL)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    finish_within(child, Duration::from_secs(secs), &format!("{args:?}"))
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// No panic, no abort, the given status, and `says` in standard error or output.
fn ends_with(out: &Output, code: i32, says: &str) {
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(!stderr.contains("panicked"), "panic: {stderr}");
    assert_eq!(out.status.code(), Some(code), "{stdout}{stderr}");
    assert!(
        stdout.contains(says) || stderr.contains(says),
        "expected {says:?} in:\n{stdout}{stderr}"
    );
}

#[test]
fn f1_a_billion_character_maximum_is_refused_with_the_limit() {
    let schema = require!(reproducer("F1-maxlength-1e9.schema.json"));
    let out = toolrail_within(&["grammar", "--schema", &schema], 20);
    ends_with(
        &out,
        2,
        "maxLength at #: 1000000000 is above the limit of 100000",
    );
}

#[test]
fn f2_a_hostile_gguf_is_refused_before_llama_cpp_sees_it() {
    let Some(model) = toolrail_testkit::model() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("blocks-0.gguf");
    toolrail_llm::gguf::copy_with_value(
        &model,
        &copy,
        "gemma3.block_count",
        &toolrail_llm::gguf::NewValue::U32(0),
    )
    .unwrap();
    let tiny = require!(reproducer("tiny.gbnf"));
    let out = toolrail_within(
        &[
            "generate",
            "--model",
            copy.to_str().unwrap(),
            "--grammar",
            &tiny,
            "--prompt",
            "hi",
            "--raw",
            "--max-tokens",
            "3",
        ],
        60,
    );
    ends_with(
        &out,
        2,
        "has a bad metadata value: 'gemma3.block_count' is 0; it must be 1 to 512",
    );
}

#[test]
fn f9_a_17_digit_integer_argument_is_valid() {
    let out = toolrail_within(
        &[
            "validate",
            &require!(reproducer("F9-int-tool.json")),
            &require!(reproducer("F9-int17-call.txt")),
        ],
        20,
    );
    ends_with(&out, 0, "call 0: f — valid");
}

#[test]
fn f11_a_grammar_that_can_never_finish_is_not_run() {
    let grammar = require!(reproducer("F11-deadend.gbnf"));
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("aaa.txt");
    std::fs::write(&input, "aaa").unwrap();
    let out = toolrail_within(
        &["check", "--prefix", &grammar, input.to_str().unwrap()],
        20,
    );
    ends_with(&out, 2, "error[GB110]: dead end");
    ends_with(&out, 2, "the grammar can never be completed");
    // generate stops before loading any model (there is none by that name).
    let out = toolrail_within(
        &[
            "generate",
            "--model",
            "no-such-model",
            "--grammar",
            &grammar,
            "--prompt",
            "hi",
        ],
        20,
    );
    ends_with(
        &out,
        2,
        "error[GB108]: the grammar matches no string at all",
    );
    assert!(
        !text(&out.stderr).contains("loading"),
        "{}",
        text(&out.stderr)
    );
    // A grammar that can finish still runs.
    let out = toolrail_within(&["check", &require!(reproducer("tiny.gbnf")), "-"], 20);
    ends_with(&out, 3, "incomplete");
}

#[test]
fn f12_a_tool_no_string_satisfies_is_named() {
    let out = toolrail_within(
        &["grammar", &require!(reproducer("F12-unsat-tool.json"))],
        20,
    );
    ends_with(
        &out,
        2,
        "tool 'f': unsupported: minLength at #/properties/s: minLength 3 is above maxLength 2",
    );
}

#[test]
fn f18_check_streams_and_stops_at_the_first_rejected_byte() {
    let json_gbnf = require!(shared_arg("corpus/gbnf/json.gbnf"));
    // `yes | toolrail check json.gbnf -`: endless input, rejected at byte 0.
    let mut child = Command::new(TOOLRAIL)
        .args(["check", &json_gbnf, "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || {
        let chunk = "y\n".repeat(32 * 1024);
        let mut written = 0usize;
        // Until toolrail closes its end (or 1 GB, which would mean it reads without bound).
        while written < 1 << 30 && stdin.write_all(chunk.as_bytes()).is_ok() {
            written += chunk.len();
        }
        written
    });
    let out = finish_within(child, Duration::from_secs(20), "check of endless input");
    let written = writer.join().unwrap();
    ends_with(&out, 1, "<stdin>:1:1: rejected at byte 0");
    assert!(written < 64 << 20, "{written} bytes were taken in");
}

#[test]
fn f20_an_absurd_thread_count_in_models_toml_is_refused() {
    let out = toolrail_within(
        &[
            "generate",
            "--model",
            "t",
            "--models",
            &require!(reproducer("F20-models.toml")),
            "--prompt",
            "hi",
        ],
        20,
    );
    ends_with(&out, 2, "model 't': `threads`: 4096 threads: use 1 to");
}

#[test]
fn f22_a_directory_or_fifo_given_as_a_model_says_what_it_is() {
    let dir = tempfile::tempdir().unwrap();
    let tiny = require!(reproducer("tiny.gbnf"));
    let generate = |model: &Path| {
        toolrail_within(
            &[
                "generate",
                "--model",
                model.to_str().unwrap(),
                "--grammar",
                &tiny,
                "--prompt",
                "hi",
            ],
            20,
        )
    };
    let out = generate(dir.path());
    ends_with(&out, 2, "is a directory, not a model file");
    #[cfg(unix)]
    {
        let fifo: PathBuf = dir.path().join("pipe.gguf");
        if Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .is_ok_and(|s| s.success())
        {
            let out = generate(&fifo);
            ends_with(&out, 2, "is a FIFO (named pipe), not a model file");
        }
    }
}

#[test]
fn f23_a_nul_byte_in_a_grammar_is_named() {
    let out = toolrail_within(&["lint", &require!(reproducer("F23-nul-first.gbnf"))], 20);
    ends_with(&out, 1, "the grammar was cut at a NUL byte at 1:1");
    let out = toolrail_within(
        &["lint", &require!(reproducer("F23-nul-in-literal.gbnf"))],
        20,
    );
    ends_with(&out, 1, "the grammar was cut at a NUL byte at 1:12");
    let out = toolrail_within(
        &[
            "check",
            &require!(reproducer("F23-nul-in-literal.gbnf")),
            "-",
        ],
        20,
    );
    ends_with(&out, 2, "error[GB002]");
}

#[test]
fn n20_a_schema_with_no_finite_instance_is_refused_not_printed() {
    let schema = require!(reproducer("turn3/N20-required-self.schema.json"));
    let out = toolrail_within(&["grammar", &schema, "--schema"], 20);
    ends_with(
        &out,
        2,
        "$ref at #: no finite JSON value satisfies the schema",
    );
    assert!(out.stdout.is_empty(), "{}", text(&out.stdout));
}

#[test]
fn n18_template_refusals_without_a_position_say_where() {
    let tools = concat!(env!("CARGO_MANIFEST_DIR"), "/sample_schemas/weather.json");
    for (file, says) in [
        (
            "turn3/N18-include.jinja",
            "Unknown statement: include (`{% include %}` at line 1, column 1: llama.cpp's Jinja has no `include` statement)",
        ),
        (
            "turn3/N18-unclosed-if.jinja",
            "Unexpected token type (`{% if %}` at line 1, column 1 is never closed (no `{% endif %}`))",
        ),
    ] {
        let template = require!(reproducer(file));
        let out = toolrail_within(&["template", "--template", &template, "--tools", tools], 30);
        ends_with(&out, 2, says);
    }
}

/// `{{ 1 % 0 }}` renders as llama.cpp renders it (llama-server sends the same prompt), and the
/// report says what that number is.
#[test]
fn n18_a_division_by_zero_in_a_template_is_named() {
    let tools = concat!(env!("CARGO_MANIFEST_DIR"), "/sample_schemas/weather.json");
    let template = require!(reproducer("turn3/N18-mod-zero.jinja"));
    let out = toolrail_within(&["template", "--template", &template, "--tools", tools], 30);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", text(&out.stderr));
    assert!(
        stdout.contains(
            "TP005 warning: the prompt holds -9223372036854775808 at line 1, column 1: \
             llama.cpp's Jinja renders that for an integer division or modulo by zero"
        ),
        "{stdout}"
    );
}

/// A call holding the key `city` twice is refused, naming the key and where; llama.cpp's JSON
/// parser would keep one of the two, and the grammar cannot produce it.
#[test]
fn n13_a_call_with_a_key_twice_is_invalid_naming_it() {
    let tools = concat!(env!("CARGO_MANIFEST_DIR"), "/sample_schemas/weather.json");
    let call = require!(reproducer("turn3/N13-dup-keys-call.txt"));
    let out = toolrail_within(&["validate", tools, &call], 30);
    ends_with(
        &out,
        1,
        "the key \"city\" appears twice in one object at line 1 column 61",
    );
}

/// Terminal control sequences in a tool's name, in a description and in a model's output are
/// shown escaped (`\x1b]0;PWNED\x07`), never written raw to the terminal.
#[test]
fn n4_terminal_escapes_from_tool_files_and_model_output_are_shown_escaped() {
    let name = require!(reproducer("turn3/N4-esc-tool-name.json"));
    let description = require!(reproducer("turn3/N4-esc-description.json"));
    let output = require!(reproducer("turn3/N4-esc-model-output.txt"));
    let extract = Command::new(TOOLRAIL)
        .args(["extract", "-"])
        .stdin(std::fs::File::open(&output).unwrap())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    for (out, code, says) in [
        (
            toolrail_within(&["grammar", &name], 30),
            2,
            "tool 'x\\x1b]0;PWNED\\x07\\x1b[2J'",
        ),
        (
            toolrail_within(&["grammar", &description], 30),
            0,
            "\\x1b]0;PWNED\\x07\\x1b[2J",
        ),
        (
            finish_within(extract, Duration::from_secs(30), "extract"),
            0,
            "x\\x1b]0;PWNED\\x07\\x1b[2J",
        ),
    ] {
        ends_with(&out, code, says);
        for bytes in [&out.stdout, &out.stderr] {
            assert!(
                !bytes.iter().any(|&b| b == 0x1b || b == 0x07),
                "a raw control byte reached the terminal: {}",
                text(bytes)
            );
        }
    }
}

/// A conversation with an unknown key inside its settings is refused, naming the key and the
/// part it is in (the app shows the same error when the file is opened).
#[test]
fn n15_an_unknown_key_inside_a_conversation_is_refused_naming_it() {
    let file = require!(reproducer(
        "turn3/N15-conversation-nested-unknown-keys.json"
    ));
    let error = toolrail_workbench::conversation::Conversation::load(Path::new(&file))
        .expect_err("refused")
        .to_string();
    assert!(error.contains("/settings: unknown field `evil`"), "{error}");
}

/// Byte offset and length of the data of the tensor `name` in a GGUF, read from its tensor
/// descriptions (name, dimensions, type, offset).
fn tensor_data(path: &Path, name: &str) -> (u64, u64) {
    let header = toolrail_llm::gguf::GgufHeader::read(path).unwrap();
    let bytes = std::fs::read(path).unwrap();
    let mut at = header.metadata_end as usize;
    let u64_at = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap());
    let u32_at = |at: usize| u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap());
    for _ in 0..header.tensor_count {
        let len = u64_at(at) as usize;
        let this = &bytes[at + 8..at + 8 + len];
        at += 8 + len;
        let dims = u32_at(at) as usize;
        at += 4;
        let count: u64 = (0..dims).map(|d| u64_at(at + 8 * d)).product();
        at += 8 * dims;
        let kind = u32_at(at);
        at += 4;
        let offset = u64_at(at);
        at += 8;
        if this == name.as_bytes() {
            assert_eq!(kind, 0, "{name} is not F32");
            return (header.data_offset + offset, count * 4);
        }
    }
    panic!("no tensor {name}");
}

#[test]
fn n21_nan_logits_are_named_not_sampled() {
    let Some(model) = toolrail_testkit::model() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("nan.gguf");
    std::fs::copy(&model, &copy).unwrap();
    let (offset, len) = tensor_data(&copy, "output_norm.weight");
    let mut bytes = std::fs::read(&copy).unwrap();
    for chunk in bytes[offset as usize..(offset + len) as usize].chunks_mut(4) {
        chunk.copy_from_slice(&f32::NAN.to_le_bytes());
    }
    std::fs::write(&copy, bytes).unwrap();
    let out = toolrail_within(
        &[
            "generate",
            "--model",
            copy.to_str().unwrap(),
            "--prompt",
            "hi",
            "--max-tokens",
            "2",
            "--engine",
            "none",
        ],
        120,
    );
    ends_with(&out, 2, "NaN logits of");
}
