//! The layering ARCHITECTURE.md describes, checked on the resolved dependency graph
//! (`cargo metadata`): workspace crates depend only on the layers below them, and the C++-free
//! core pulls in no llama.cpp, GUI, GPU or command-line crate, not even for its tests.

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;

use serde_json::Value;

/// The layers, bottom up; a crate may depend on the crates before it.
const LAYERS: &[&str] = &[
    "toolrail-gbnf",
    "toolrail-engine",
    "toolrail-schema",
    "toolrail-tools",
    "toolrail-llm",
    "toolrail-workbench",
    "toolrail-app",
    "toolrail",
];

/// The crates that build without C++ and run their tests without a model or a display.
const CORE: &[&str] = &[
    "toolrail-gbnf",
    "toolrail-engine",
    "toolrail-schema",
    "toolrail-tools",
];

/// Crates only tests, benches and examples use: a dev-dependency of any crate, a normal or
/// build dependency of none; they depend on no crate of ours, so every layer's tests may use
/// them.
const DEV_ONLY: &[&str] = &["toolrail-testkit"];

/// What the core must not pull in.
const NOT_IN_CORE: &[&str] = &[
    "llama-cpp-2",
    "llama-cpp-sys-2",
    "egui",
    "eframe",
    "wgpu",
    "clap",
];

/// The resolved graph: package name → (dependency name, dependency kinds) for every package.
fn graph() -> BTreeMap<String, Vec<(String, Vec<String>)>> {
    let out = Command::new(env!("CARGO"))
        .args(["metadata", "--format-version", "1", "--locked"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo metadata runs");
    assert!(
        out.status.success(),
        "cargo metadata failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let meta: Value = serde_json::from_slice(&out.stdout).unwrap();
    let name_of: BTreeMap<&str, &str> = meta["packages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p["id"].as_str().unwrap(), p["name"].as_str().unwrap()))
        .collect();
    let mut graph = BTreeMap::new();
    for node in meta["resolve"]["nodes"].as_array().unwrap() {
        let name = name_of[node["id"].as_str().unwrap()].to_owned();
        let deps = node["deps"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| {
                let kinds = d["dep_kinds"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|k| k["kind"].as_str().unwrap_or("normal").to_owned())
                    .collect();
                (name_of[d["pkg"].as_str().unwrap()].to_owned(), kinds)
            })
            .collect();
        graph.insert(name, deps);
    }
    graph
}

/// Everything `root` pulls in: its own dependencies of any kind (tests and build scripts
/// included), then their normal and build dependencies, transitively.
fn closure(graph: &BTreeMap<String, Vec<(String, Vec<String>)>>, root: &str) -> BTreeSet<String> {
    let mut seen = BTreeSet::new();
    let mut todo: Vec<String> = graph[root].iter().map(|(d, _)| d.clone()).collect();
    while let Some(name) = todo.pop() {
        if seen.insert(name.clone()) {
            todo.extend(
                graph[&name]
                    .iter()
                    .filter(|(_, kinds)| kinds.iter().any(|k| k != "dev"))
                    .map(|(d, _)| d.clone()),
            );
        }
    }
    seen
}

#[test]
fn crates_depend_only_on_the_layers_below() {
    let graph = graph();
    for (i, layer) in LAYERS.iter().enumerate() {
        let deps = graph
            .get(*layer)
            .unwrap_or_else(|| panic!("{layer} is not in the workspace"));
        for (dep, kinds) in deps {
            if let Some(j) = LAYERS.iter().position(|l| l == dep) {
                let dev_only = kinds.iter().all(|k| k == "dev");
                assert!(
                    j < i || dev_only,
                    "{layer} depends on {dep}, a layer above it ({kinds:?})"
                );
            }
        }
    }
}

#[test]
fn the_core_pulls_in_no_llama_cpp_gui_gpu_or_clap() {
    let graph = graph();
    for core in CORE {
        let pulled = closure(&graph, core);
        let bad: Vec<_> = NOT_IN_CORE
            .iter()
            .filter(|c| pulled.contains(**c))
            .collect();
        assert!(bad.is_empty(), "{core} pulls in {bad:?}");
    }
    // The check can fail: the binary pulls in all of them.
    let all = closure(&graph, "toolrail");
    assert!(NOT_IN_CORE.iter().all(|c| all.contains(*c)));
}

#[test]
fn dev_only_crates_are_never_a_normal_dependency_and_depend_on_no_layer() {
    let graph = graph();
    for dev in DEV_ONLY {
        let deps = graph
            .get(*dev)
            .unwrap_or_else(|| panic!("{dev} is not in the workspace"));
        let ours: Vec<_> = deps
            .iter()
            .filter(|(d, _)| LAYERS.contains(&d.as_str()) || DEV_ONLY.contains(&d.as_str()))
            .collect();
        assert!(ours.is_empty(), "{dev} depends on {ours:?}");
        let mut users = 0;
        for (name, deps) in &graph {
            for (dep, kinds) in deps {
                if dep == dev {
                    assert!(
                        kinds.iter().all(|k| k == "dev"),
                        "{name} depends on {dev} as {kinds:?}: it is for tests only"
                    );
                    users += 1;
                }
            }
        }
        // The check can fail: the crates whose tests read the corpus or the model use it.
        assert!(users >= 2, "{dev} is used by {users} crates");
    }
}
