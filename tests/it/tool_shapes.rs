//! Tool sets in the shapes people paste, through the command line: `toolrail grammar` on an MCP
//! `tools/list` result emits the tools' argument rules (not an empty object) and says on standard
//! error which shape it read; `validate --json` carries the shape and the load warnings.

use std::io::Write;
use std::process::{Command, Output, Stdio};

const TOOLRAIL: &str = env!("CARGO_BIN_EXE_toolrail");
/// The MCP memory server's tools (`../shared/corpus/tool-sets/`) as an argument; missing: a
/// failure under `CI=true`, otherwise None (a skip).
fn memory() -> Option<String> {
    toolrail_testkit::corpus("tool-sets/mcp__server-memory.json")
        .map(|p| p.to_string_lossy().into_owned())
}

fn run(args: &[&str], stdin: &[u8]) -> Output {
    let mut child = Command::new(TOOLRAIL)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("toolrail runs");
    child.stdin.take().unwrap().write_all(stdin).unwrap();
    child.wait_with_output().unwrap()
}

#[test]
fn grammar_on_an_mcp_file_emits_argument_rules_and_names_the_shape() {
    let Some(memory) = memory() else {
        return;
    };
    let out = run(&["grammar", &memory], b"");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    // every argument name of the set is in the grammar (as a JSON key)
    for name in [
        "entities",
        "relations",
        "observations",
        "entityNames",
        "deletions",
        "query",
        "names",
    ] {
        assert!(
            stdout.contains(&format!("\\\"{name}\\\"")),
            "{name} missing:\n{stdout}"
        );
    }
    // only read_graph (no properties) may have an empty-object argument rule
    let empty = stdout.matches("\"{\" space \"}\"").count();
    assert!(empty <= 1, "{empty} empty argument objects:\n{stdout}");
    assert!(
        stderr.contains("read as MCP tools/list result (9 tools)"),
        "{stderr}"
    );
    // the MCP-only keys are named, as notes
    assert!(
        stderr.contains("note: ") && stderr.contains("/tools/0/outputSchema"),
        "{stderr}"
    );
}

#[test]
fn grammar_reads_a_json_rpc_response_from_standard_input() {
    let doc = br#"{"jsonrpc": "2.0", "id": 7, "result": {"tools": [{"name": "get_weather",
        "inputSchema": {"type": "object", "properties": {"city": {"type": "string"}},
        "required": ["city"]}, "colour": "red"}]}}"#;
    let out = run(&["grammar", "-"], doc);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(stdout.contains("\\\"city\\\""), "{stdout}");
    assert!(
        stderr.contains("read as MCP tools/list JSON-RPC response"),
        "{stderr}"
    );
    assert!(
        stderr.contains("warning: -: tool `get_weather`, /result/tools/0/colour"),
        "{stderr}"
    );
}

#[test]
fn validate_json_carries_the_shape_and_the_warnings() {
    let Some(memory) = memory() else {
        return;
    };
    let call = br#"{"name": "search_nodes", "arguments": {"query": "x"}}"#;
    let out = run(&["validate", &memory, "-", "--json"], call);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["valid"], true);
    assert_eq!(report["shape"]["id"], "mcp-tools-list");
    assert_eq!(report["shape"]["name"], "MCP tools/list result");
    let warnings = report["warnings"].as_array().unwrap();
    assert!(
        warnings
            .iter()
            .any(|w| w["pointer"] == "/tools/0/title" && w["severity"] == "note"),
        "{warnings:?}"
    );
}
