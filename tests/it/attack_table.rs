//! The attack suite's table: generated hostile and careless inputs for every class of the
//! reliability issue (crashes, hangs, wrong results, memory, unclear messages, security and
//! data loss), each run as a process with a time and a memory bound, each outcome one of
//! OK, unclear, wrong, crash, hang, memory. The test prints the class × outcome table (run
//! `cargo test -p toolrail --test it attack_table -- --nocapture` to see it) and fails if any
//! case is not OK, naming the case and what it printed.

use std::fmt::Write as _;
use std::io::{Read as _, Write as _};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const TOOLRAIL: &str = env!("CARGO_BIN_EXE_toolrail");

/// The classes of the reliability issue.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Class {
    Crash,
    Hang,
    Wrong,
    Memory,
    Unclear,
    Security,
}

impl Class {
    const ALL: [Class; 6] = [
        Class::Crash,
        Class::Hang,
        Class::Wrong,
        Class::Memory,
        Class::Unclear,
        Class::Security,
    ];

    fn label(self) -> &'static str {
        match self {
            Class::Crash => "crashes",
            Class::Hang => "hangs",
            Class::Wrong => "wrong results",
            Class::Memory => "memory",
            Class::Unclear => "unclear messages",
            Class::Security => "security / data loss",
        }
    }
}

/// What happened to one case.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Outcome {
    Ok,
    Unclear,
    Wrong,
    Crash,
    Hang,
    Memory,
}

impl Outcome {
    const ALL: [Outcome; 6] = [
        Outcome::Ok,
        Outcome::Unclear,
        Outcome::Wrong,
        Outcome::Crash,
        Outcome::Hang,
        Outcome::Memory,
    ];

    fn label(self) -> &'static str {
        match self {
            Outcome::Ok => "OK",
            Outcome::Unclear => "unclear",
            Outcome::Wrong => "wrong",
            Outcome::Crash => "crash",
            Outcome::Hang => "hang",
            Outcome::Memory => "memory",
        }
    }
}

/// A check run on the files after the process ended (security cases): `Err` says what is wrong.
type After = Box<dyn Fn() -> Result<(), String>>;

/// One generated case.
struct Case {
    class: Class,
    generator: &'static str,
    name: String,
    args: Vec<String>,
    stdin: Vec<u8>,
    /// The exit status that is the right result.
    code: i32,
    /// Text the output (stdout or stderr) must contain: the message saying what and where, or
    /// the right result.
    says: Vec<String>,
    /// Time bound.
    time: Duration,
    /// Peak resident memory bound, in MB (measured on Linux).
    memory_mb: u64,
    /// Text that must appear in neither output (a secret, a raw control sequence).
    hidden: Vec<String>,
    after: Option<After>,
    /// Environment variables set for the process (the app's display).
    env: Vec<(String, String)>,
}

impl Case {
    fn new(class: Class, generator: &'static str, name: impl Into<String>, args: &[&str]) -> Case {
        Case {
            class,
            generator,
            name: name.into(),
            args: args.iter().map(|a| a.to_string()).collect(),
            stdin: Vec::new(),
            code: 0,
            says: Vec::new(),
            time: Duration::from_secs(60),
            memory_mb: 1024,
            hidden: Vec::new(),
            after: None,
            env: Vec::new(),
        }
    }

    /// Sets an environment variable for the process.
    fn env(mut self, key: &str, value: &str) -> Case {
        self.env.push((key.to_owned(), value.to_owned()));
        self
    }

    /// Text that must not appear in standard output or error (a password, a raw escape).
    fn hides(mut self, texts: &[&str]) -> Case {
        self.hidden = texts.iter().map(|t| t.to_string()).collect();
        self
    }

    /// Bounds the peak resident memory (of toolrail and the processes it starts), in MB.
    fn memory(mut self, mb: u64) -> Case {
        self.memory_mb = mb;
        self
    }

    fn ends(mut self, code: i32, says: &[&str]) -> Case {
        self.code = code;
        self.says = says.iter().map(|s| s.to_string()).collect();
        self
    }

    fn stdin(mut self, bytes: Vec<u8>) -> Case {
        self.stdin = bytes;
        self
    }

    fn after(mut self, check: impl Fn() -> Result<(), String> + 'static) -> Case {
        self.after = Some(Box::new(check));
        self
    }
}

/// The peak resident memory of a running process, in kB (Linux; 0 elsewhere).
fn peak_kb(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}

/// The peak resident memory of a running process and of the processes it started (toolrail's
/// template workers), in kB: each one's peak, summed (Linux; 0 elsewhere).
fn tree_peak_kb(pid: u32) -> u64 {
    let children: Vec<u32> = std::fs::read_dir(format!("/proc/{pid}/task"))
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|task| std::fs::read_to_string(task.path().join("children")).ok())
        .flat_map(|list| {
            list.split_whitespace()
                .filter_map(|p| p.parse().ok())
                .collect::<Vec<u32>>()
        })
        .collect();
    peak_kb(pid) + children.into_iter().map(tree_peak_kb).sum::<u64>()
}

/// Runs one case and judges it.
fn run(case: &Case) -> (Outcome, String) {
    let mut child = Command::new(TOOLRAIL)
        .args(&case.args)
        .envs(case.env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("toolrail runs");
    let mut stdin = child.stdin.take().expect("piped");
    let input = case.stdin.clone();
    let writer = std::thread::spawn(move || {
        let _ = stdin.write_all(&input);
    });
    let mut stdout = child.stdout.take().expect("piped");
    let mut stderr = child.stderr.take().expect("piped");
    let out_reader = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = stdout.read_to_end(&mut v);
        v
    });
    let err_reader = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = stderr.read_to_end(&mut v);
        v
    });
    let started = Instant::now();
    let mut peak = 0;
    let status = loop {
        peak = peak.max(tree_peak_kb(child.id()));
        if let Some(status) = child.try_wait().expect("wait") {
            break Some(status);
        }
        if started.elapsed() > case.time {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let _ = writer.join();
    let out = String::from_utf8_lossy(&out_reader.join().unwrap_or_default()).into_owned();
    let err = String::from_utf8_lossy(&err_reader.join().unwrap_or_default()).into_owned();
    let shown = |s: &str| s.chars().take(600).collect::<String>();
    let detail = format!(
        "status {:?}, {:.1} s, {} MB\nstdout: {}\nstderr: {}",
        status.and_then(|s| s.code()),
        started.elapsed().as_secs_f64(),
        peak / 1024,
        shown(&out),
        shown(&err)
    );
    let Some(status) = status else {
        return (Outcome::Hang, detail);
    };
    if err.contains("panicked") || status.code().is_none() || status.code() == Some(101) {
        return (Outcome::Crash, detail);
    }
    if peak / 1024 > case.memory_mb {
        return (Outcome::Memory, detail);
    }
    if status.code() != Some(case.code) {
        return (Outcome::Wrong, detail);
    }
    if let Some(shown) = case
        .hidden
        .iter()
        .find(|h| out.contains(h.as_str()) || err.contains(h.as_str()))
    {
        return (Outcome::Wrong, format!("{shown:?} was shown\n{detail}"));
    }
    if let Some(after) = &case.after
        && let Err(why) = after()
    {
        return (Outcome::Wrong, format!("{why}\n{detail}"));
    }
    if !case
        .says
        .iter()
        .all(|s| out.contains(s.as_str()) || err.contains(s.as_str()))
    {
        return (
            Outcome::Unclear,
            format!("expected {:?}\n{detail}", case.says),
        );
    }
    (Outcome::Ok, detail)
}

fn write(dir: &Path, name: &str, contents: impl AsRef<[u8]>) -> String {
    let path = dir.join(name);
    std::fs::write(&path, contents).expect("write a case file");
    path.to_string_lossy().into_owned()
}

/// Schemas: size keywords and pattern counters far past the limits, unsatisfiable schemas,
/// remote references, large enums, deep nesting.
fn schema_cases(dir: &Path, cases: &mut Vec<Case>) {
    for keyword in [
        "maxLength",
        "minLength",
        "minItems",
        "maxItems",
        "minProperties",
    ] {
        for value in [
            "100001",
            "10000000",
            "100000000",
            "1000000000",
            "9223372036854775807",
        ] {
            let ty = match keyword {
                "maxLength" | "minLength" => "string",
                "minItems" | "maxItems" => "array",
                _ => "object",
            };
            let file = write(
                dir,
                &format!("{keyword}-{value}.json"),
                format!("{{\"type\": \"{ty}\", \"{keyword}\": {value}}}"),
            );
            cases.push(
                Case::new(
                    Class::Crash,
                    "schema size keywords",
                    format!("{keyword} {value}"),
                    &["grammar", "--schema", &file],
                )
                .ends(
                    2,
                    &[&format!(
                        "{keyword} at #: {value} is above the limit of 100000"
                    )],
                ),
            );
        }
    }
    for count in ["100001", "100000000", "4294967296"] {
        let file = write(
            dir,
            &format!("pattern-{count}.json"),
            format!("{{\"type\": \"string\", \"pattern\": \"a{{{count}}}\"}}"),
        );
        cases.push(
            Case::new(
                Class::Crash,
                "schema pattern counters",
                format!("a{{{count}}}"),
                &["grammar", "--schema", &file],
            )
            .ends(2, &["pattern at #", count]),
        );
    }
    // Nested arrays 3,000 deep (the converter's depth limit is far lower).
    let deep = format!(
        "{}{{\"type\": \"string\"}}{}",
        "{\"type\": \"array\", \"items\": ".repeat(3000),
        "}".repeat(3000)
    );
    let file = write(dir, "deep-schema.json", deep);
    cases.push(
        Case::new(
            Class::Crash,
            "schema nesting",
            "3,000 nested arrays",
            &["grammar", "--schema", &file],
        )
        .ends(
            2,
            &[
                "deep-schema.json",
                "recursion limit exceeded at line 1 column",
            ],
        ),
    );
    for (name, schema, says) in [
        (
            "minLength above maxLength",
            r#"{"type": "string", "minLength": 3, "maxLength": 2}"#,
            "minLength at #: minLength 3 is above maxLength 2",
        ),
        (
            "minimum above maximum",
            r#"{"type": "integer", "minimum": 5, "maximum": 3}"#,
            "minimum at #: minimum and maximum leave no number between them",
        ),
        (
            "empty enum",
            r#"{"type": "string", "enum": []}"#,
            "enum at #: an empty enum",
        ),
        (
            "allOf of two types",
            r#"{"allOf": [{"type": "string"}, {"type": "integer"}]}"#,
            "allOf at #: no value satisfies `allOf`",
        ),
        (
            "const against type",
            r#"{"type": "string", "const": 5}"#,
            "no value satisfies `type`, `const` together",
        ),
        (
            "not anything",
            r#"{"not": {}}"#,
            "not at #: no value satisfies `not`",
        ),
        ("false", "false", "the schema is `false`"),
        (
            "required property that is false",
            r#"{"type": "object", "required": ["a"], "properties": {"a": false}}"#,
            "required at #: required property \"a\" can never be present",
        ),
    ] {
        let file = write(dir, &format!("{}.json", name.replace(' ', "-")), schema);
        cases.push(
            Case::new(
                Class::Wrong,
                "unsatisfiable schemas",
                name,
                &["grammar", "--schema", &file],
            )
            .ends(2, &[says]),
        );
    }
    let tools = r#"[{"type": "function", "function": {"name": "f", "parameters":
        {"type": "object", "properties": {"a": {"$ref": "http://example.com/s.json"}}}}}]"#;
    let file = write(dir, "remote-ref.json", tools);
    cases.push(
        Case::new(
            Class::Security,
            "schema remote refs",
            "remote $ref",
            &["grammar", &file],
        )
        .ends(
            2,
            &[
                "tool 'f'",
                "$ref at #/properties/a",
                "only local references",
            ],
        ),
    );
    // 100,000 strings in an enum: converted in near-linear time.
    let values: Vec<String> = (0..100_000).map(|i| format!("\"value-{i}\"")).collect();
    let file = write(
        dir,
        "enum-100k.json",
        format!("{{\"enum\": [{}]}}", values.join(",")),
    );
    let mut case = Case::new(
        Class::Hang,
        "large enums",
        "100,000 strings",
        &["grammar", "--schema", &file],
    )
    .ends(0, &["value-99999"]);
    case.time = Duration::from_secs(60);
    cases.push(case);
}

/// Grammars: deep groups, long rule chains, huge counts, left recursion, NUL bytes, bad UTF-8.
fn grammar_cases(dir: &Path, cases: &mut Vec<Case>) {
    for depth in [200, 100_000] {
        let file = write(
            dir,
            &format!("groups-{depth}.gbnf"),
            format!("root ::= {}\"a\"{}", "(".repeat(depth), ")".repeat(depth)),
        );
        cases.push(
            Case::new(
                Class::Crash,
                "deep grammars",
                format!("{depth} nested groups"),
                &["lint", &file],
            )
            .ends(
                1,
                &["error[GB010]: groups are nested more than 128 deep", ":1:"],
            ),
        );
    }
    let mut chain = String::from("root ::= r0\n");
    for i in 0..20_000 {
        let _ = writeln!(chain, "r{i} ::= \"x\" r{}", i + 1);
    }
    chain.push_str("r20000 ::= \"x\"\n");
    let file = write(dir, "chain.gbnf", &chain);
    cases.push(
        Case::new(
            Class::Hang,
            "long rule chains",
            "lint of 20,000 chained rules",
            &["lint", &file],
        )
        .ends(0, &["no findings"]),
    );
    cases.push(
        Case::new(
            Class::Hang,
            "long rule chains",
            "sample of 20,000 chained rules",
            &["sample", &file, "-n", "3"],
        )
        .ends(0, &["xxxxxxxxxx"]),
    );
    for count in ["2001", "100000000", "99999999999999999999"] {
        let file = write(
            dir,
            &format!("count-{count}.gbnf"),
            format!("root ::= \"a\"{{{count}}}\n"),
        );
        cases.push(
            Case::new(
                Class::Crash,
                "repetition counts",
                format!("\"a\"{{{count}}}"),
                &["lint", &file],
            )
            .ends(1, &[&format!("count-{count}.gbnf:1:"), "GB005"]),
        );
    }
    let file = write(dir, "left.gbnf", "root ::= root \"a\" | \"b\"\n");
    cases.push(
        Case::new(
            Class::Hang,
            "left recursion",
            "check a left-recursive grammar",
            &["check", &file, "-"],
        )
        .ends(
            2,
            &["left.gbnf:1:1: error[GB103]: rule 'root' is left-recursive"],
        ),
    );
    for (name, bytes, says) in [
        (
            "nul-first",
            b"\0root ::= \"a\"\n".to_vec(),
            "the grammar was cut at a NUL byte at 1:1",
        ),
        (
            "nul-literal",
            b"root ::= \"a\0b\"\n".to_vec(),
            "the grammar was cut at a NUL byte at 1:12",
        ),
        (
            "latin1",
            b"root ::= \"caf\xe9\"\n".to_vec(),
            "not valid UTF-8 (byte offset 13)",
        ),
        (
            "binary",
            vec![0xFF, 0xFE, 0x00, 0x01],
            "not valid UTF-8 (byte offset 0)",
        ),
    ] {
        let file = write(dir, &format!("{name}.gbnf"), bytes);
        cases.push(
            Case::new(Class::Unclear, "grammar bytes", name, &["lint", &file]).ends(
                if name.starts_with("nul") { 1 } else { 2 },
                &[says, &format!("{name}.gbnf")],
            ),
        );
    }
    for (name, text, says) in [
        (
            "unclosed group",
            "root ::= \"a\" (",
            "1:15: error[GB002]: expected ')'",
        ),
        (
            "undefined rule",
            "root ::= foo",
            "1:10: error[GB101]: rule 'foo' is used but never defined",
        ),
        ("no root", "start ::= \"a\"", "root"),
        (
            "backwards range",
            "root ::= [z-a] | \"b\"",
            "1:10: warning[GB112]",
        ),
    ] {
        let file = write(dir, &format!("{}.gbnf", name.replace(' ', "-")), text);
        let code = if name == "backwards range" { 0 } else { 1 };
        cases.push(
            Case::new(Class::Unclear, "grammar mistakes", name, &["lint", &file])
                .ends(code, &[says]),
        );
    }
}

/// Check inputs: ambiguity near the cap, large alternations, endless and deep input, long lines.
fn check_cases(dir: &Path, json: &str, cases: &mut Vec<Case>) {
    // 70,000 alternatives: more live stacks than the old cap, yet unambiguous.
    let values: Vec<String> = (0..70_000).map(|i| format!("\"v{i}\"")).collect();
    let file = write(
        dir,
        "enum-70k.gbnf",
        format!("root ::= {}\n", values.join(" | ")),
    );
    cases.push(
        Case::new(
            Class::Wrong,
            "large alternations",
            "70,000-way alternation",
            &["check", &file, "-"],
        )
        .stdin(b"v69999".to_vec())
        .ends(0, &["accepted"]),
    );
    // Reduced from a fuzzing timeout: nested optional self-references expand ever more rule
    // references per byte; the check stops with the work limit's message in bounded time.
    let nested = write(
        dir,
        "nested-optional.gbnf",
        "root ::= (((a)root ?)*)+\na ::= \"x\"? \"y\"\n",
    );
    let mut case = Case::new(
        Class::Hang,
        "ambiguous grammars",
        "nested optional self-reference, 80 bytes",
        &["check", &nested, "-"],
    )
    .stdin("xy".repeat(40).into_bytes())
    .ends(
        2,
        &["so ambiguous here that following it takes more work than toolrail allows"],
    );
    case.time = Duration::from_secs(60);
    cases.push(case);
    // (A near-cap ambiguous grammar stopping in bounded work is the engine's own test,
    // `a_grammar_that_keeps_many_stacks_busy_stops_in_bounded_work`, and for masks
    // `mask_limits`: through a debug build of the CLI it takes minutes.)
    // Endless input rejected at byte 0 (`yes | toolrail check json.gbnf -`).
    cases.push(
        Case::new(
            Class::Memory,
            "check inputs",
            "64 MB of y\\n",
            &["check", json, "-"],
        )
        .stdin(b"y\n".repeat(32 << 20))
        .ends(1, &["<stdin>:1:1: rejected at byte 0"]),
    );
    // A million nested arrays: distinct stack states all the way down.
    let mut deep = String::from("{\"a\":");
    deep.push_str(&"[".repeat(200_000));
    deep.push_str(&"]".repeat(200_000));
    deep.push('}');
    let mut case = Case::new(
        Class::Memory,
        "check inputs",
        "200,000 nested arrays",
        &["check", json, "-"],
    )
    .stdin(deep.into_bytes())
    .ends(0, &["accepted"]);
    case.time = Duration::from_secs(60);
    cases.push(case);
    // A bad byte at the end of a 5 MB line: the report shows a window.
    let mut line = String::from("{\"a\":[");
    line.push_str(&"1,".repeat(2_500_000));
    let bad = line.len();
    line.push_str("x]}");
    cases.push(
        Case::new(
            Class::Unclear,
            "check inputs",
            "bad byte on a 5 MB line",
            &["check", json, "-"],
        )
        .stdin(line.into_bytes())
        .ends(1, &[&format!("rejected at byte {bad}"), "  | …"]),
    );
    let file = write(dir, "deadend.gbnf", "root ::= \"a\" x\nx ::= \"b\" x\n");
    cases.push(
        Case::new(
            Class::Wrong,
            "dead-end grammars",
            "check --prefix on a grammar that never ends",
            &["check", "--prefix", &file, "-"],
        )
        .stdin(b"ab".to_vec())
        .ends(2, &["error[GB108]"]),
    );
    cases.push(
        Case::new(
            Class::Unclear,
            "check inputs",
            "invalid UTF-8 input",
            &["check", json, "-"],
        )
        .stdin(b"{\"a\":\"\xff\"}".to_vec())
        .ends(1, &["rejected at byte 6"]),
    );
}

/// Extraction: repeated openers, tool definitions that look like calls.
fn extract_cases(cases: &mut Vec<Case>) {
    for (name, text) in [
        ("1 MB of {", "{".repeat(1 << 20)),
        ("1 MB of [", "[".repeat(1 << 20)),
        ("1 MB of <tool_call>", "<tool_call>".repeat(100_000)),
        ("1 MB of call:", "call:".repeat(200_000)),
        (
            "1 MB of call:x (verbs never opened)",
            "call:x ".repeat(150_000),
        ),
        ("1 MB of quotes", "{\"".repeat(1 << 19)),
    ] {
        let mut case = Case::new(Class::Hang, "extract text", name, &["extract", "-"])
            .stdin(text.into_bytes())
            .ends(1, &["0 calls"]);
        case.time = Duration::from_secs(60);
        cases.push(case);
    }
    let definition = r#"Tools: {"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {"a": {"type": "string"}}}}}"#;
    cases.push(
        Case::new(
            Class::Wrong,
            "extract text",
            "OpenAI tool definition without description",
            &["extract", definition],
        )
        .ends(1, &["0 calls"]),
    );
    for (name, definition) in [
        (
            "OpenAI tool definition with a bare object schema",
            r#"{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}"#,
        ),
        (
            "Anthropic tool definition",
            r#"{"name":"f","input_schema":{"type":"object"}}"#,
        ),
    ] {
        cases.push(
            Case::new(Class::Wrong, "extract text", name, &["extract", definition])
                .ends(1, &["0 calls"]),
        );
    }
    let call = r#"<tool_call>{"name": "f", "arguments": {"a": 12345678901234567890}}</tool_call>"#;
    cases.push(
        Case::new(
            Class::Wrong,
            "extract text",
            "a call with a 20-digit integer",
            &["extract", call],
        )
        .ends(0, &["1 call", "12345678901234567890"]),
    );
    cases.push(
        Case::new(
            Class::Unclear,
            "extract text",
            "input that is not UTF-8",
            &["extract", "-"],
        )
        .stdin(b"call:f{\xff}".to_vec())
        .ends(
            2,
            &["standard input is not UTF-8 (invalid byte at offset 7)"],
        ),
    );
}

/// Models, models.toml and sampling options: refused before anything loads.
fn model_cases(dir: &Path, cases: &mut Vec<Case>) {
    let tiny = write(dir, "tiny.gbnf", "root ::= \"a\"\n");
    let generate = |model: &str, extra: &[&str]| {
        let mut args = vec![
            "generate",
            "--model",
            model,
            "--grammar",
            &tiny,
            "--prompt",
            "hi",
        ];
        args.extend_from_slice(extra);
        args.iter().map(|a| a.to_string()).collect::<Vec<_>>()
    };
    for (flag, value, says) in [
        (
            "--temperature",
            "NaN",
            "--temperature must be 0 or more, not NaN",
        ),
        (
            "--temperature",
            "-inf",
            "--temperature must be 0 or more, not -inf",
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
        let mut case = Case::new(Class::Unclear, "sampling options", option.clone(), &[]);
        case.args = generate("no-such-model", &[&option]);
        cases.push(case.ends(2, &[says]));
    }
    let mut case = Case::new(Class::Unclear, "models", "a directory as the model", &[]);
    case.args = generate(dir.to_str().unwrap_or("."), &[]);
    cases.push(case.ends(2, &["is a directory, not a model file"]));
    let garbage = write(
        dir,
        "garbage.gguf",
        b"not a gguf at all, just text".repeat(10),
    );
    let mut case = Case::new(Class::Unclear, "models", "a text file as the model", &[]);
    case.args = generate(&garbage, &[]);
    cases.push(case.ends(2, &["garbage.gguf", "not a GGUF file"]));
    let mut header = b"GGUF".to_vec();
    header.extend_from_slice(&3u32.to_le_bytes());
    header.extend_from_slice(&u64::MAX.to_le_bytes());
    header.extend_from_slice(&u64::MAX.to_le_bytes());
    let huge = write(dir, "huge-counts.gguf", header);
    let mut case = Case::new(Class::Memory, "models", "a GGUF claiming 2^64 tensors", &[]);
    case.args = generate(&huge, &[]);
    cases.push(case.ends(2, &["huge-counts.gguf"]));
    for (name, toml, says) in [
        (
            "4096 threads",
            "[[model]]\nname = \"t\"\npath = \"t.gguf\"\nthreads = 4096\n",
            "model 't': `threads`: 4096 threads: use 1 to",
        ),
        (
            "unknown key",
            "[[model]]\nname = \"t\"\npath = \"t.gguf\"\ntemprature = 0.5\n",
            "temprature",
        ),
        (
            "not TOML",
            "[[model]\nname = ",
            "TOML parse error at line 1, column 9",
        ),
    ] {
        let file = write(
            dir,
            &format!("models-{}.toml", name.replace(' ', "-")),
            toml,
        );
        cases.push(
            Case::new(
                Class::Unclear,
                "models.toml",
                name,
                &[
                    "generate", "--model", "t", "--models", &file, "--prompt", "hi",
                ],
            )
            .ends(2, &[says]),
        );
    }
    let mut case = Case::new(
        Class::Unclear,
        "models",
        "absurd --threads",
        &["bench", "--model", "x", "--threads", "4096"],
    );
    case = case.ends(2, &["4096 threads: use 1 to"]);
    cases.push(case);
}

/// Output paths: links, directories, modes; no file clobbered, no temporary file left.
#[cfg(unix)]
fn output_cases(dir: &Path, cases: &mut Vec<Case>) {
    use std::os::unix::fs::PermissionsExt;
    let schema = write(dir, "out-schema.json", r#"{"type": "string"}"#);
    let grammar_to = |target: &Path| -> Vec<String> {
        [
            "grammar",
            "--schema",
            &schema,
            "-o",
            target.to_str().unwrap_or(""),
        ]
        .iter()
        .map(|a| a.to_string())
        .collect()
    };
    let out = dir.join("out");
    let _ = std::fs::create_dir(&out);
    // A symlinked target: the file it points to is written, the link stays.
    let real = out.join("real.gbnf");
    let link = out.join("link.gbnf");
    let _ = std::fs::write(&real, "OLD");
    let _ = std::os::unix::fs::symlink(&real, &link);
    let mut case = Case::new(Class::Security, "output paths", "a symlinked target", &[]);
    case.args = grammar_to(&link);
    let (l, r) = (link.clone(), real.clone());
    cases.push(case.ends(0, &[]).after(move || {
        let is_link = std::fs::symlink_metadata(&l)
            .map_err(|e| e.to_string())?
            .file_type()
            .is_symlink();
        let written = std::fs::read_to_string(&r).map_err(|e| e.to_string())?;
        (is_link && written.contains("root ::="))
            .then_some(())
            .ok_or(format!("link kept: {is_link}, target: {written:?}"))
    }));
    // A 0600 file stays 0600.
    let private = out.join("private.gbnf");
    let _ = std::fs::write(&private, "secret");
    let _ = std::fs::set_permissions(&private, std::fs::Permissions::from_mode(0o600));
    let mut case = Case::new(Class::Security, "output paths", "a 0600 target", &[]);
    case.args = grammar_to(&private);
    let p = private.clone();
    cases.push(case.ends(0, &[]).after(move || {
        let mode = std::fs::metadata(&p)
            .map_err(|e| e.to_string())?
            .permissions()
            .mode()
            & 0o777;
        (mode == 0o600)
            .then_some(())
            .ok_or(format!("mode {mode:o}"))
    }));
    // A directory is refused by name and left alone.
    let folder = out.join("folder.gbnf");
    let _ = std::fs::create_dir(&folder);
    let mut case = Case::new(
        Class::Security,
        "output paths",
        "a directory as the target",
        &[],
    );
    case.args = grammar_to(&folder);
    let f = folder.clone();
    cases.push(
        case.ends(2, &["folder.gbnf", "is a directory, not a file"])
            .after(move || {
                f.is_dir()
                    .then_some(())
                    .ok_or("the directory is gone".to_string())
            }),
    );
    // A target in a folder that does not exist.
    let mut case = Case::new(Class::Security, "output paths", "a missing folder", &[]);
    case.args = grammar_to(&out.join("no-such-folder/x.gbnf"));
    cases.push(case.ends(2, &["no-such-folder"]));
    // No temporary file is left beside the targets.
    let o = out.clone();
    let mut case = Case::new(
        Class::Security,
        "output paths",
        "no temporary file left",
        &[],
    );
    case.args = grammar_to(&out.join("plain.gbnf"));
    cases.push(case.ends(0, &[]).after(move || {
        let left: Vec<PathBuf> = std::fs::read_dir(&o)
            .map_err(|e| e.to_string())?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| {
                p.file_name()
                    .is_some_and(|n| n.to_string_lossy().contains(".tmp"))
            })
            .collect();
        left.is_empty()
            .then_some(())
            .ok_or(format!("left behind: {left:?}"))
    }));
}

#[cfg(not(unix))]
fn output_cases(_dir: &Path, _cases: &mut Vec<Case>) {}

/// Missing and unreadable files for each command: named, with the reason.
fn file_cases(dir: &Path, json: &str, cases: &mut Vec<Case>) {
    let missing = dir.join("missing.gbnf");
    let missing = missing.to_string_lossy().into_owned();
    for args in [
        vec!["lint", missing.as_str()],
        vec!["check", missing.as_str(), "-"],
        vec!["check", json, missing.as_str()],
        vec!["sample", missing.as_str()],
        vec!["compile", missing.as_str()],
        vec!["grammar", missing.as_str()],
        vec!["grammar", "--schema", missing.as_str()],
        vec!["validate", missing.as_str(), missing.as_str()],
    ] {
        cases.push(
            Case::new(
                Class::Unclear,
                "missing files",
                args.join(" ").replace(dir.to_str().unwrap_or(""), ""),
                &args,
            )
            .ends(2, &["missing.gbnf", "No such file"]),
        );
    }
    // Text given where a file is expected: the message says how to pass standard input.
    cases.push(
        Case::new(
            Class::Unclear,
            "missing files",
            "check with text instead of an input file",
            &["check", json, "xyxy"],
        )
        .ends(2, &["cannot read xyxy", "`-` reads standard input"]),
    );
    let empty = write(dir, "empty-tools.json", "[]");
    cases.push(
        Case::new(
            Class::Unclear,
            "tool sets",
            "an empty tool set",
            &["grammar", &empty],
        )
        .ends(
            2,
            &["empty-tools.json", "give at least one tool definition"],
        ),
    );
    let bad_json = write(
        dir,
        "bad-tools.json",
        "[{\"type\": \"function\",\n  \"function\": {\"name\": }}]",
    );
    cases.push(
        Case::new(
            Class::Unclear,
            "tool sets",
            "tool set that is not JSON",
            &["grammar", &bad_json],
        )
        .ends(2, &["bad-tools.json", "line 2 column"]),
    );
}

/// Chat templates that crash llama.cpp's Jinja engine (recursion without end, nesting past its
/// stack), that it evaluates without end or to huge texts, and nesting that fits: each an error
/// naming what happened, or the right prompt. Run as `template --template FILE --tools W`.
fn template_cases(dir: &Path, cases: &mut Vec<Case>) {
    let tools = concat!(env!("CARGO_MANIFEST_DIR"), "/sample_schemas/weather.json");
    let deep = 100_000;
    let crashing = [
        (
            "a macro calling itself",
            "{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}".to_owned(),
        ),
        (
            "100,000 nested parentheses",
            format!("{{{{ {}1{} }}}}", "(".repeat(deep), ")".repeat(deep)),
        ),
        (
            "100,000 nested lists",
            format!("{{{{ {}1{} }}}}", "[".repeat(deep), "]".repeat(deep)),
        ),
        (
            "100,000 attributes",
            format!("{{{{ messages{} }}}}", ".a".repeat(deep)),
        ),
        (
            "100,000 additions",
            format!("{{{{ 1{} }}}}", " + 1".repeat(deep)),
        ),
        (
            "100,000 nested ifs",
            format!(
                "{}x{}",
                "{% if true %}".repeat(deep),
                "{% endif %}".repeat(deep)
            ),
        ),
        (
            "a list that contains itself, to tojson",
            "{% set a = [] %}{% set _ = a.append(a) %}{{ a | tojson }}".to_owned(),
        ),
    ];
    let fitting = [
        (
            "10,000 nested ifs",
            format!(
                "{}x{}",
                "{% if true %}".repeat(10_000),
                "{% endif %}".repeat(10_000)
            ),
        ),
        (
            "100,000 nots",
            format!("{{{{ {}true }}}}", "not ".repeat(deep)),
        ),
    ];
    // a template that crashes llama.cpp is an error naming the overflow; one that fits, a prompt
    let crashes = crashing
        .into_iter()
        .map(|c| (c, 2, ["crashed", "overflowed its stack"].as_slice()));
    let fits = fitting
        .into_iter()
        .map(|c| (c, 0, ["== prompt ("].as_slice()));
    for (i, ((name, template), code, says)) in crashes.chain(fits).enumerate() {
        let file = write(dir, &format!("template-{i}.jinja"), template);
        cases.push(
            Case::new(
                Class::Crash,
                "templates",
                name,
                &["template", "--template", &file, "--tools", tools],
            )
            .ends(code, says)
            .memory(2048),
        );
    }
    let bombs = [
        (
            Class::Memory,
            "range(10**9)",
            "{% for i in range(1000000000) %}{% endfor %}done",
        ),
        (
            Class::Hang,
            "range past the 64-bit integers",
            "{% for i in range(9223372036854775800, 9223372036854775807, 100) %}{{ i }}{% endfor %}",
        ),
        (Class::Hang, "'x' * 10**8", "{{ 'x' * 100000000 }}"),
        (
            Class::Memory,
            "indent(10**9)",
            "{{ 'x\ny' | indent(1000000000) }}",
        ),
        (
            Class::Hang,
            "nested loops of 10**10 steps",
            "{% for a in range(100000) %}{% for b in range(100000) %}{{ a }}{% endfor %}{% endfor %}",
        ),
    ];
    for (i, (class, name, template)) in bombs.into_iter().enumerate() {
        let file = write(dir, &format!("bomb-{i}.jinja"), template);
        cases.push(
            Case::new(
                class,
                "templates",
                name,
                &["template", "--template", &file, "--tools", tools],
            )
            .ends(2, &["so toolrail stopped it"])
            .memory(2048),
        );
    }
    if !cfg!(unix) {
        return;
    }
    cases.push(
        Case::new(
            Class::Hang,
            "templates",
            "/dev/zero as the template",
            &["template", "--template", "/dev/zero", "--tools", tools],
        )
        .ends(2, &["/dev/zero", "not a regular file"]),
    );
}

/// A hostile llama-server on 127.0.0.1: `GET`s (`/health`, `/props`) answered as a server
/// would, each `POST` answered by `reply`. Its threads live as long as the test.
fn hostile_server(reply: fn(&mut std::net::TcpStream)) -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a local port");
    let url = format!("http://{}", listener.local_addr().expect("its address"));
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            std::thread::spawn(move || {
                let mut request = Vec::new();
                let mut buf = [0u8; 65536];
                // the head, then the body its Content-Length announces
                loop {
                    let Ok(n) = stream.read(&mut buf) else { return };
                    if n == 0 {
                        return;
                    }
                    request.extend_from_slice(&buf[..n]);
                    let text = String::from_utf8_lossy(&request).to_lowercase();
                    if let Some(end) = text.find("\r\n\r\n") {
                        let length = text
                            .lines()
                            .find_map(|l| l.strip_prefix("content-length:"))
                            .and_then(|v| v.trim().parse::<usize>().ok())
                            .unwrap_or(0);
                        if request.len() >= end + 4 + length {
                            break;
                        }
                    }
                }
                if request.starts_with(b"GET") {
                    let body = if request.starts_with(b"GET /props") {
                        r#"{"build_info":"b11434-hostile","model_path":"m.gguf","total_slots":1,"default_generation_settings":{"n_ctx":4096}}"#
                    } else {
                        r#"{"status":"ok"}"#
                    };
                    let _ = write!(
                        stream,
                        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                        body.len()
                    );
                    return;
                }
                reply(&mut stream);
            });
        }
    });
    url
}

const EVENTS: &str =
    "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n";

/// Hostile llama-servers (redirects, a stream without end, a huge event, bytes that are not
/// text, a page instead of events, terminal escapes in the model's output), secrets in server
/// URLs, and big files where toolrail reads corpora.
fn server_cases(dir: &Path, cases: &mut Vec<Case>) {
    let generate = |url: &str| -> Vec<String> {
        [
            "generate",
            "--model",
            "gemma-3-270m",
            "--server",
            url,
            "--prompt",
            "hi",
            "--max-tokens",
            "12",
            "--engine",
            "none",
        ]
        .iter()
        .map(|a| a.to_string())
        .collect()
    };
    let server_case = |class, name: &str, url: String, says: &[&str]| {
        let args = generate(&url);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        Case::new(class, "hostile servers", name, &args).ends(2, says)
    };
    let redirect = hostile_server(|stream| {
        let _ = stream.write_all(
            b"HTTP/1.1 302 Found\r\nLocation: http://127.0.0.1:9/completion\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
        );
    });
    cases.push(server_case(
        Class::Security,
        "a redirect to another address",
        redirect,
        &["answered a redirect (302)", "does not follow redirects"],
    ));
    let endless = hostile_server(|stream| {
        let _ = stream.write_all(EVENTS.as_bytes());
        loop {
            let chunk = b"data: {\"content\":\"a\",\"tokens\":[64],\"stop\":false}\n\n";
            if stream.write_all(chunk).is_err() {
                return;
            }
        }
    });
    cases.push(server_case(
        Class::Memory,
        "a stream that ignores n_predict",
        endless,
        &["it ignores the limit"],
    ));
    let huge = hostile_server(|stream| {
        let _ = stream.write_all(EVENTS.as_bytes());
        let _ = stream.write_all(b"data: ");
        let block = vec![b'a'; 1 << 20];
        for _ in 0..100 {
            if stream.write_all(&block).is_err() {
                return;
            }
        }
    });
    cases.push(server_case(
        Class::Memory,
        "one event of 100 MB",
        huge,
        &["exceeds 67108864 bytes"],
    ));
    let binary = hostile_server(|stream| {
        let _ = stream.write_all(EVENTS.as_bytes());
        let _ = stream.write_all(b"data: \xff\xfe\x00\n\n");
    });
    cases.push(server_case(
        Class::Unclear,
        "an event that is not UTF-8",
        binary,
        &["not UTF-8"],
    ));
    let page = hostile_server(|stream| {
        let body = "<html><body>It works!</body></html>";
        let _ = write!(
            stream,
            "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        );
    });
    cases.push(server_case(
        Class::Unclear,
        "a web page instead of events",
        page,
        &[
            "does not look like llama-server",
            "it answered text/html, not an event stream",
            "It works!",
        ],
    ));
    // the test model's tokens for ESC [ 2 J and ESC ] 5 2 ; BEL (byte tokens and characters)
    let escapes = hostile_server(|stream| {
        let _ = stream.write_all(EVENTS.as_bytes());
        for token in [
            265, 236840, 236778, 236863, 265, 236842, 236810, 236778, 236793, 245,
        ] {
            let _ = write!(
                stream,
                "data: {{\"content\":\"\",\"tokens\":[{token}],\"stop\":false}}\n\n"
            );
        }
        let _ =
            stream.write_all(b"data: {\"content\":\"\",\"stop\":true,\"stop_type\":\"eos\"}\n\n");
    });
    let args = generate(&escapes);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    cases.push(
        Case::new(
            Class::Security,
            "terminal output",
            "escape sequences in the model's output",
            &args,
        )
        .ends(0, &["\\x1b[2J"])
        .hides(&["\u{1b}", "\u{7}"]),
    );
    // a password in the server's URL is never shown
    let args = generate("http://ada:hunter2@127.0.0.1:9");
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    cases.push(
        Case::new(
            Class::Security,
            "secrets",
            "a password in the server URL",
            &args,
        )
        .ends(2, &["ada:***@127.0.0.1:9"])
        .hides(&["hunter2"]),
    );
    // big files where corpora are read: a 300 MB cases file is read within the bounds
    let big = dir.join("big-cases.json");
    let file = std::fs::File::create(&big).expect("a big file");
    file.set_len(300 << 20).expect("300 MB");
    let big = big.to_string_lossy().into_owned();
    cases.push(
        Case::new(
            Class::Memory,
            "big files",
            "a 300 MB BFCL cases file of NUL bytes",
            &[
                "bench-calls",
                "--model",
                "gemma-3-270m",
                "--cases",
                &big,
                "-n",
                "1",
            ],
        )
        .ends(2, &["big-cases.json"]),
    );
}

/// An X server of its own for the app's cases (Xvfb picks a free display and says which).
struct Display {
    server: std::process::Child,
    name: String,
}

impl Display {
    /// Starts Xvfb at 1024×700; `None` (having said `skipped: …`, or failed under `CI=true`)
    /// where it is not installed.
    fn start() -> Option<Display> {
        let started = Command::new("Xvfb")
            .args([
                "-displayfd",
                "1",
                "-screen",
                "0",
                "1024x700x24",
                "-nolisten",
                "tcp",
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn();
        let Ok(mut server) = started else {
            return toolrail_testkit::missing(
                "Xvfb not found (the app's cases run the app in a window)",
                "install it (Debian: xvfb; scripts/test.sh does)",
            );
        };
        let mut number = String::new();
        let mut stdout = server.stdout.take().expect("piped");
        let mut byte = [0u8; 1];
        while stdout.read(&mut byte).is_ok_and(|n| n == 1) && byte[0] != b'\n' {
            number.push(byte[0] as char);
        }
        assert!(!number.is_empty(), "Xvfb said no display number");
        Some(Display {
            server,
            name: format!(":{}", number.trim()),
        })
    }
}

impl Drop for Display {
    fn drop(&mut self) {
        let _ = self.server.kill();
        let _ = self.server.wait();
    }
}

/// The app with huge content, in a real window, screenshot taken once it has settled: a
/// 12 MB text in two editors, a 50,000-rule chain, a 200 MB transcript reopened at start.
fn app_cases(dir: &Path, display: &Display, cases: &mut Vec<Case>) {
    let lines: String = (0..330_000)
        .map(|i| format!("  \"line {i} with some words in it\",\n"))
        .collect();
    let workspace = serde_json::json!({
        "version": 1,
        "schema": {"text": format!("[\n{lines}")},
        "test_input": lines,
    });
    let texts = write(dir, "app-texts.json", workspace.to_string());
    let shot = dir.join("app-shot.png").to_string_lossy().into_owned();
    let app = |class: Class, name: &str, workspace: &str| {
        Case::new(
            class,
            "app, big content",
            name,
            &["gui", "--workspace", workspace, "--screenshot", &shot],
        )
        .env("DISPLAY", &display.name)
        .memory(2048)
        .ends(0, &["screenshot written"])
    };
    cases.push(app(
        Class::Memory,
        "a 12 MB text in the Schema editor and the test input",
        &texts,
    ));
    // A workspace whose hand-edited grammar chains 50,000 rules, with a test input it does not
    // accept: the "expected" report walks the chain (it once overflowed the analysis thread's
    // stack, at every start).
    let mut chain = String::from("root ::= r0\n");
    for i in 0..50_000 {
        chain.push_str(&format!("r{i} ::= \"a\" r{}\n", i + 1));
    }
    chain.push_str("r50000 ::= \"a\"\n");
    let workspace = serde_json::json!({
        "version": 1,
        "grammar": {"hand_edited": true, "text": chain},
        "test_input": "aaaaa",
    });
    let chained = write(dir, "app-chain.json", workspace.to_string());
    cases.push(app(
        Class::Crash,
        "a hand-edited grammar chaining 50,000 rules, its input not accepted",
        &chained,
    ));
    // A transcript near the size limit: the test fixture's tokens over and over.
    let fixture =
        toolrail_testkit::repo_root().join("crates/toolrail-app/tests/fixtures/weather_run.json");
    let mut transcript: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(fixture).expect("the fixture"))
            .expect("the fixture is JSON");
    let tokens = transcript["tokens"].take();
    let tokens = tokens.as_array().expect("tokens");
    let per_token = serde_json::to_string(tokens).expect("JSON").len() / tokens.len();
    let count = (200 << 20) / per_token;
    let mut many = Vec::with_capacity(count);
    let mut output = String::new();
    for i in 0..count {
        let mut token = tokens[i % tokens.len()].clone();
        token["index"] = serde_json::json!(i);
        output.push_str(token["piece"].as_str().unwrap_or_default());
        many.push(token);
    }
    transcript["tokens"] = serde_json::Value::Array(many);
    transcript["output"] = serde_json::json!(output);
    let big = write(dir, "app-transcript.json", transcript.to_string());
    let workspace = serde_json::json!({"version": 1, "run": {"last_transcript": big}});
    let reopened = write(dir, "app-transcript-workspace.json", workspace.to_string());
    cases.push(app(
        Class::Memory,
        &format!(
            "a {} MB transcript of {count} tokens reopened",
            (count * per_token) >> 20
        ),
        &reopened,
    ));
}

#[test]
fn every_attack_ends_with_a_clear_error_or_the_right_result() {
    let Some(json) = toolrail_testkit::corpus("gbnf/json.gbnf") else {
        return;
    };
    let json = json.to_string_lossy().into_owned();
    let dir = tempfile::tempdir().expect("a temporary folder");
    let mut cases = Vec::new();
    schema_cases(dir.path(), &mut cases);
    grammar_cases(dir.path(), &mut cases);
    check_cases(dir.path(), &json, &mut cases);
    extract_cases(&mut cases);
    model_cases(dir.path(), &mut cases);
    output_cases(dir.path(), &mut cases);
    file_cases(dir.path(), &json, &mut cases);
    template_cases(dir.path(), &mut cases);
    server_cases(dir.path(), &mut cases);
    let display = Display::start();
    if let Some(display) = &display {
        app_cases(dir.path(), display, &mut cases);
    }

    let mut results = Vec::new();
    for case in &cases {
        let (outcome, detail) = run(case);
        results.push((case, outcome, detail));
    }

    // The table: class × outcome, then the generators.
    let mut table = String::from("\nattack suite: class × outcome\n");
    let _ = write!(table, "{:<22}{:>6}", "class", "cases");
    for o in Outcome::ALL {
        let _ = write!(table, "{:>9}", o.label());
    }
    table.push('\n');
    for class in Class::ALL {
        let of_class: Vec<_> = results
            .iter()
            .filter(|(c, _, _)| c.class == class)
            .collect();
        let _ = write!(table, "{:<22}{:>6}", class.label(), of_class.len());
        for o in Outcome::ALL {
            let _ = write!(
                table,
                "{:>9}",
                of_class.iter().filter(|(_, out, _)| *out == o).count()
            );
        }
        table.push('\n');
    }
    let _ = write!(table, "{:<22}{:>6}", "all", results.len());
    for o in Outcome::ALL {
        let _ = write!(
            table,
            "{:>9}",
            results.iter().filter(|(_, out, _)| *out == o).count()
        );
    }
    table.push_str("\n\ngenerators: ");
    let mut generators: Vec<&str> = results.iter().map(|(c, _, _)| c.generator).collect();
    generators.dedup();
    table.push_str(&generators.join(", "));
    // The memory cases' figures (time and peak of toolrail and what it started).
    table.push_str("\n\nmemory cases:\n");
    for (case, outcome, detail) in results.iter().filter(|(c, _, _)| c.class == Class::Memory) {
        let figures = detail.lines().next().unwrap_or_default();
        let _ = writeln!(table, "  {}: {} ({figures})", case.name, outcome.label());
    }
    println!("{table}\n");

    let failures: Vec<String> = results
        .iter()
        .filter(|(_, o, _)| *o != Outcome::Ok)
        .map(|(c, o, d)| {
            format!(
                "[{}] {} / {}: {}\n{d}",
                o.label(),
                c.generator,
                c.name,
                c.class.label()
            )
        })
        .collect();
    assert!(
        failures.is_empty(),
        "{} case(s) not OK:\n\n{}",
        failures.len(),
        failures.join("\n\n")
    );
}
