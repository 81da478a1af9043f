//! Hostile and careless use of the command line, run as a process: each case must end with a
//! clear message or the right result — never a panic, an abort or a file clobbered.

use std::io::Read;
use std::path::Path;
use std::process::{Command, Output, Stdio};

const TOOLRAIL: &str = env!("CARGO_BIN_EXE_toolrail");
const WEATHER: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/sample_schemas/weather.json");
/// `../shared/corpus/gbnf/json.gbnf` as an argument; missing: a failure under `CI=true`,
/// otherwise None (a skip).
fn json_gbnf() -> Option<String> {
    toolrail_testkit::corpus("gbnf/json.gbnf").map(|p| p.to_string_lossy().into_owned())
}

/// Runs toolrail with `args` and no input, to its end.
pub(crate) fn toolrail(args: &[&str]) -> Output {
    Command::new(TOOLRAIL)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("toolrail runs")
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// No Rust panic and no abort: the process ended with one of toolrail's own statuses.
fn ended_cleanly(out: &Output) {
    let err = stderr(out);
    assert!(!err.contains("panicked"), "panic: {err}");
    assert!(out.status.code().is_some(), "killed by a signal: {err}");
    assert_ne!(out.status.code(), Some(101), "panic status: {err}");
}

#[test]
fn a_closed_pipe_ends_quietly_with_the_sigpipe_status() {
    let Some(json_gbnf) = json_gbnf() else {
        return;
    };
    let json_gbnf = json_gbnf.as_str();
    for args in [
        vec!["sample", json_gbnf, "-n", "200000"],
        vec!["grammar", WEATHER],
        vec!["compile", json_gbnf],
        vec!["lint", json_gbnf],
    ] {
        let mut child = Command::new(TOOLRAIL)
            .args(&args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // Read one byte at most, then close the pipe (as `| head -c 1` does).
        let mut stdout = child.stdout.take().unwrap();
        let mut byte = [0u8; 1];
        let _ = stdout.read(&mut byte);
        drop(stdout);
        let out = child.wait_with_output().unwrap();
        ended_cleanly(&out);
        let code = out.status.code();
        // A short output may have been written whole before the pipe closed.
        assert!(
            code == Some(141) || code == Some(0),
            "{args:?}: {code:?} {}",
            stderr(&out)
        );
        if code == Some(141) {
            assert_eq!(
                stderr(&out),
                "",
                "{args:?}: a closed pipe is not worth a message"
            );
        }
    }
}

#[cfg(target_os = "linux")]
#[test]
fn a_full_disk_is_an_error_naming_standard_output() {
    let file = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .unwrap();
    let out = Command::new(TOOLRAIL)
        .args(["grammar", WEATHER])
        .stdin(Stdio::null())
        .stdout(file)
        .output()
        .unwrap();
    ended_cleanly(&out);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(err.contains("cannot write to standard output"), "{err}");
}

#[test]
fn sampling_options_follow_the_models_toml_rules_before_anything_loads() {
    for (flag, value, says) in [
        (
            "--temperature",
            "NaN",
            "--temperature must be 0 or more, not NaN",
        ),
        (
            "--temperature",
            "inf",
            "--temperature must be 0 or more, not inf",
        ),
        ("--top-p", "2", "--top-p must be in (0, 1], not 2"),
        ("--min-p", "-1", "--min-p must be in [0, 1], not -1"),
        (
            "--repeat-penalty",
            "0",
            "--repeat-penalty must be more than 0",
        ),
        ("--max-tokens", "0", "--max-tokens must be at least 1"),
    ] {
        let option = format!("{flag}={value}");
        let out = toolrail(&[
            "generate",
            "--model",
            "no-such-model",
            "--prompt",
            "hi",
            &option,
        ]);
        ended_cleanly(&out);
        assert_eq!(out.status.code(), Some(2), "{flag} {value}");
        let err = stderr(&out);
        assert!(err.contains(says), "{flag} {value}: {err}");
    }
}

#[test]
fn absurd_thread_counts_are_refused_with_the_limit() {
    let out = toolrail(&["bench", "--model", "x", "--threads", "4096"]);
    ended_cleanly(&out);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(err.contains("4096 threads: use 1 to"), "{err}");

    let dir = tempfile::tempdir().unwrap();
    let models = dir.path().join("models.toml");
    std::fs::write(
        &models,
        "[[model]]\nname = \"t\"\npath = \"t.gguf\"\nthreads = 4096\n",
    )
    .unwrap();
    let out = toolrail(&[
        "generate",
        "--model",
        "t",
        "--models",
        models.to_str().unwrap(),
        "--prompt",
        "hi",
    ]);
    ended_cleanly(&out);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(
        err.contains("model 't': `threads`: 4096 threads: use 1 to"),
        "{err}"
    );
}

#[cfg(unix)]
#[test]
fn grammar_output_never_clobbers_links_devices_or_permissions() {
    use std::os::unix::fs::{FileTypeExt, PermissionsExt};
    let dir = tempfile::tempdir().unwrap();
    let at = |name: &str| dir.path().join(name);
    let write = |target: &Path| {
        let out = toolrail(&["grammar", WEATHER, "-o", target.to_str().unwrap()]);
        ended_cleanly(&out);
        out
    };
    // A symlinked target: the file it points to is written, the link stays.
    std::fs::create_dir(at("shared")).unwrap();
    std::fs::write(at("shared/real.gbnf"), "OLD").unwrap();
    std::os::unix::fs::symlink("shared/real.gbnf", at("out.gbnf")).unwrap();
    assert_eq!(write(&at("out.gbnf")).status.code(), Some(0));
    assert!(
        std::fs::symlink_metadata(at("out.gbnf"))
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert!(
        std::fs::read_to_string(at("shared/real.gbnf"))
            .unwrap()
            .contains("root ::=")
    );
    // A 0600 file stays 0600.
    std::fs::write(at("s.gbnf"), "secret").unwrap();
    std::fs::set_permissions(at("s.gbnf"), std::fs::Permissions::from_mode(0o600)).unwrap();
    assert_eq!(write(&at("s.gbnf")).status.code(), Some(0));
    let mode = std::fs::metadata(at("s.gbnf"))
        .unwrap()
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(mode, 0o600);
    // A directory is refused, by name.
    std::fs::create_dir(at("d.gbnf")).unwrap();
    let out = write(&at("d.gbnf"));
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("is a directory, not a file"),
        "{}",
        stderr(&out)
    );
    // A device (a private copy of /dev/null; needs root) is written through, not replaced.
    let made = Command::new("mknod")
        .arg(at("null"))
        .args(["c", "1", "3"])
        .status()
        .is_ok_and(|s| s.success());
    if made {
        assert_eq!(write(&at("null")).status.code(), Some(0));
        assert!(
            std::fs::metadata(at("null"))
                .unwrap()
                .file_type()
                .is_char_device()
        );
    }
}

#[test]
fn a_rejected_byte_on_a_huge_line_shows_a_window_not_the_line() {
    let Some(json_gbnf) = json_gbnf() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("big.json");
    // 5 MB of digits in one JSON array, then a bad byte.
    let mut text = String::from("{\"a\":[");
    text.push_str(&"1,".repeat(2_500_000));
    let bad = text.len();
    text.push_str("x]}");
    std::fs::write(&input, &text).unwrap();
    let out = toolrail(&["check", &json_gbnf, input.to_str().unwrap()]);
    ended_cleanly(&out);
    assert_eq!(out.status.code(), Some(1));
    let shown = String::from_utf8_lossy(&out.stdout);
    assert!(shown.len() < 2_000, "{} bytes of report", shown.len());
    assert!(
        shown.contains(&format!("rejected at byte {bad}")),
        "{shown}"
    );
    assert!(
        shown.contains("  | …") && shown.contains(",1,x]}"),
        "{shown}"
    );
}

/// Runs toolrail with `args`, `input` on standard input, and waits for it to end. A generous
/// guard (600 s) turns a hang into a failure instead of a stuck test run; nothing is timed.
fn toolrail_fed(args: &[&str], input: Vec<u8>) -> Output {
    use std::io::Write as _;
    let mut child = Command::new(TOOLRAIL)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("toolrail runs");
    let mut stdin = child.stdin.take().unwrap();
    // Written on a thread of its own: toolrail may stop reading early.
    let writer = std::thread::spawn(move || {
        let _ = stdin.write_all(&input);
    });
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    let out = rx
        .recv_timeout(std::time::Duration::from_secs(600))
        .unwrap_or_else(|_| panic!("toolrail {args:?} did not end"))
        .unwrap();
    writer.join().unwrap();
    out
}

#[test]
fn extract_of_a_hundred_thousand_unclosed_calls_lists_each_and_ends() {
    let line = "{\"name\": \"get_weather\", \"arguments\": {\"city\": \n";
    let out = toolrail_fed(&["extract", "-"], line.repeat(100_000).into_bytes());
    ended_cleanly(&out);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let report = String::from_utf8_lossy(&out.stdout);
    assert!(report.starts_with("0 calls\n"), "{}", &report[..200]);
    assert!(
        report.contains("at byte 4699953 (line 100000, column 1): JSON tool call never closes"),
        "the last line's diagnostic is missing"
    );
    let tags = "<tool_call>{".repeat(100_000);
    let out = toolrail_fed(&["extract", "-"], tags.into_bytes());
    ended_cleanly(&out);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
}

#[test]
fn check_of_a_million_unclosed_brackets_is_incomplete_with_the_expected_set() {
    let dir = tempfile::tempdir().unwrap();
    let grammar = dir.path().join("values.gbnf");
    // Any JSON value at the root, so arrays nest at will.
    std::fs::write(
        &grammar,
        "root ::= value\nvalue ::= array | \"1\"\narray ::= \"[\" ( value (\",\" value)* )? \"]\"\n",
    )
    .unwrap();
    let out = toolrail_fed(
        &["check", grammar.to_str().unwrap(), "-"],
        vec![b'['; 1_000_000],
    );
    ended_cleanly(&out);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    let report = String::from_utf8_lossy(&out.stdout);
    assert!(report.contains("<stdin>:1:1000001: incomplete"), "{report}");
    assert!(report.contains("expected: '1', '[', ']'"), "{report}");
}

#[test]
fn check_of_a_million_distinct_literals_accepts_the_last() {
    let dir = tempfile::tempdir().unwrap();
    let grammar = dir.path().join("literals.gbnf");
    let alternatives: Vec<String> = (0..1_000_000).map(|i| format!("\"a{i}\"")).collect();
    std::fs::write(&grammar, format!("root ::= {}\n", alternatives.join(" | "))).unwrap();
    let out = toolrail_fed(
        &["check", grammar.to_str().unwrap(), "-"],
        b"a999999".to_vec(),
    );
    ended_cleanly(&out);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("<stdin>: accepted"));
}

#[cfg(unix)]
#[test]
fn a_fifo_given_as_a_grammar_an_input_or_a_tool_set_is_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("pipe.gbnf");
    if !Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .is_ok_and(|s| s.success())
    {
        return;
    }
    let grammar = dir.path().join("x.gbnf");
    std::fs::write(&grammar, "root ::= \"x\"\n").unwrap();
    let (fifo, grammar) = (fifo.to_str().unwrap(), grammar.to_str().unwrap());
    for args in [
        vec!["check", fifo, "-"],
        vec!["check", grammar, fifo],
        vec!["grammar", fifo],
        vec!["lint", fifo],
    ] {
        let out = toolrail_fed(&args, Vec::new());
        ended_cleanly(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        assert!(
            stderr(&out).contains(&format!(
                "cannot read {fifo}: it is a FIFO (named pipe), not a regular file"
            )),
            "{args:?}: {}",
            stderr(&out)
        );
    }
}
