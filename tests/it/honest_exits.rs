//! Exits that say what happened: a result that cannot be written is an error (a closed standard
//! output, a full disk), a reader that went away ends the command quietly, a benchmark that
//! measured nothing fails saying why, and an output that would overwrite an input or another
//! output is refused before anything runs.

use std::path::Path;
use std::process::{Command, Output, Stdio};

const TOOLRAIL: &str = env!("CARGO_BIN_EXE_toolrail");
const WEATHER: &str = "sample_schemas/weather.json";

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Runs toolrail with `args`, its standard output `stdout`.
fn toolrail_to(args: &[&str], stdout: Stdio) -> Output {
    Command::new(TOOLRAIL)
        .args(args)
        .stdin(Stdio::null())
        .stdout(stdout)
        .stderr(Stdio::piped())
        .output()
        .unwrap()
}

fn toolrail(args: &[&str]) -> Output {
    toolrail_to(args, Stdio::piped())
}

/// A grammar file for the commands that read one.
fn grammar_file(dir: &Path) -> String {
    let path = dir.join("g.gbnf");
    std::fs::write(&path, "root ::= \"yes\" | \"no\"\n").unwrap();
    path.display().to_string()
}

/// The commands that print their result, on inputs they succeed on.
fn printing_commands(dir: &Path) -> Vec<Vec<String>> {
    let grammar = grammar_file(dir);
    let output = dir.join("output.txt");
    std::fs::write(
        &output,
        r#"{"name": "get_weather", "arguments": {"city": "Paris"}}"#,
    )
    .unwrap();
    let output = output.display().to_string();
    [
        vec!["grammar", WEATHER],
        vec!["lint", &grammar],
        vec!["lint", "--json", &grammar],
        vec!["compile", &grammar],
        vec!["sample", &grammar],
        vec!["validate", WEATHER, &output],
        vec!["validate", "--json", WEATHER, &output],
        vec!["extract", r#"call:f{x: 1}"#],
        vec!["check", &grammar, &output],
        vec!["--version"],
        vec!["grammar", "--help"],
    ]
    .into_iter()
    .map(|args| args.into_iter().map(str::to_owned).collect())
    .collect()
}

#[cfg(unix)]
#[test]
fn a_closed_standard_output_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    for args in printing_commands(dir.path()) {
        // `exec >&-` closes descriptor 1 before toolrail starts.
        let out = Command::new("sh")
            .arg("-c")
            .arg("exec >&-; exec \"$0\" \"$@\"")
            .arg(TOOLRAIL)
            .args(&args)
            .stdin(Stdio::null())
            .stderr(Stdio::piped())
            .output()
            .unwrap();
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(
            stderr.contains("cannot write to standard output: it is closed"),
            "{args:?}: {stderr}"
        );
    }
    // A command whose result goes to a file does not need standard output.
    let written = dir.path().join("w.gbnf").display().to_string();
    let out = Command::new("sh")
        .arg("-c")
        .arg("exec >&-; exec \"$0\" \"$@\"")
        .arg(TOOLRAIL)
        .args(["grammar", WEATHER, "-o", &written])
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        std::fs::read_to_string(&written)
            .unwrap()
            .starts_with("root ::= ")
    );
}

#[cfg(target_os = "linux")]
#[test]
fn a_full_disk_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    for args in printing_commands(dir.path()) {
        let full = std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/full")
            .unwrap();
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = toolrail_to(&args, Stdio::from(full));
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(
            stderr.contains("cannot write to standard output: No space left on device"),
            "{args:?}: {stderr}"
        );
    }
}

#[test]
fn a_reader_that_went_away_ends_the_command_quietly() {
    let dir = tempfile::tempdir().unwrap();
    let grammar = grammar_file(dir.path());
    let mut child = Command::new(TOOLRAIL)
        .args(["sample", &grammar, "-n", "100000"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The reader closes its end before reading anything.
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    let stderr = text(&out.stderr);
    assert!(
        matches!(out.status.code(), Some(0 | 141)),
        "{:?}: {stderr}",
        out.status
    );
    assert!(stderr.is_empty(), "{stderr}");
}

#[test]
fn bench_masks_over_unreadable_files_fails_naming_them() {
    let Some(model) = toolrail_testkit::model() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.json"), "garbage\n").unwrap();
    std::fs::write(dir.path().join("b.json"), "{\n").unwrap();
    let out = toolrail(&[
        "bench",
        "masks",
        &dir.path().display().to_string(),
        "--model",
        &model.display().to_string(),
        "--engines",
        "toolrail",
    ]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("measured nothing"), "{stderr}");
    for name in ["a.json: not JSON", "b.json: not JSON"] {
        assert!(stderr.contains(name), "{name}: {stderr}");
    }
}

#[test]
fn benchmarks_with_nothing_to_measure_fail_saying_so() {
    let dir = tempfile::tempdir().unwrap();
    // The questions are read before the model loads: any file stands for the model here.
    let model = dir.path().join("model.gguf");
    std::fs::write(&model, "not read").unwrap();
    let cases = dir.path().join("cases.json");
    std::fs::write(&cases, "").unwrap();
    let out = toolrail(&[
        "bench-calls",
        "--model",
        &model.display().to_string(),
        "--cases",
        &cases.display().to_string(),
    ]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("no question to ask"), "{stderr}");
    // Nothing to measure by the command line's own choice is a usage error.
    for args in [
        vec!["bench-calls", "--model", "m", "-n", "0"],
        vec!["bench", "--model", "m", "--tokens", "0"],
        vec!["bench", "app", "--model", "m", "--rounds", "0"],
    ] {
        let out = toolrail(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(text(&out.stderr).contains("0 is not in 1.."), "{args:?}");
    }
}

/// `generate` with `extra` after a model file that is never loaded (the clash is refused first).
fn generate_refused(dir: &Path, extra: &[&str]) -> String {
    let model = dir.join("m.gguf");
    let model = model.display().to_string();
    let mut args = vec![
        "generate",
        "--model",
        &model,
        "--tools",
        WEATHER,
        "--prompt",
        "Weather in Paris?",
    ];
    args.extend_from_slice(extra);
    let out = toolrail(&args);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{extra:?}: {stderr}");
    assert!(!stderr.contains("loading"), "{extra:?}: {stderr}");
    stderr
}

#[test]
fn generate_refuses_outputs_naming_one_file_or_an_input() {
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("m.gguf");
    std::fs::write(&model, "the model").unwrap();
    let run_out = dir.path().join("run.out").display().to_string();
    let same_by_another_name = dir.path().join(".").join("run.out").display().to_string();
    let stderr = generate_refused(
        dir.path(),
        &[
            "--transcript",
            &run_out,
            "--markdown",
            &same_by_another_name,
        ],
    );
    assert!(stderr.contains("are the same file"), "{stderr}");
    assert!(!dir.path().join("run.out").exists());

    let stderr = generate_refused(dir.path(), &["--transcript", &model.display().to_string()]);
    assert!(stderr.contains("is the --model file"), "{stderr}");
    let stderr = generate_refused(dir.path(), &["--markdown", WEATHER]);
    assert!(stderr.contains("is the --tools file"), "{stderr}");
    assert_eq!(std::fs::read_to_string(&model).unwrap(), "the model");
}

#[test]
fn grammar_refuses_to_write_over_its_input() {
    let dir = tempfile::tempdir().unwrap();
    let tools = dir.path().join("tools.json");
    let original = std::fs::read_to_string(WEATHER).unwrap();
    std::fs::write(&tools, &original).unwrap();
    let tools = tools.display().to_string();
    let out = toolrail(&["grammar", &tools, "-o", &tools]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("writing it would replace an input"),
        "{stderr}"
    );
    assert_eq!(std::fs::read_to_string(&tools).unwrap(), original);
}

#[test]
fn gui_refuses_a_screenshot_over_its_workspace() {
    let dir = tempfile::tempdir().unwrap();
    let workspace = dir.path().join("workspace.json");
    std::fs::write(&workspace, "{}").unwrap();
    let workspace = workspace.display().to_string();
    let out = toolrail(&["gui", "--workspace", &workspace, "--screenshot", &workspace]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("is the --workspace file"), "{stderr}");
    assert_eq!(std::fs::read_to_string(&workspace).unwrap(), "{}");
}
