//! `budget` on real catalogs: the largest tool set of `../shared/corpus/tool-sets/` and a
//! 260-tool catalog made by joining them all, under three corpus chat templates (Qwen3-Coder,
//! Llama 3.1, gpt-oss) and toolrail's own envelope. The verdict is what the linked llama.cpp
//! says when it loads the catalog's grammar; a catalog broken by one property is blamed on that
//! tool and pointer, and without that tool it loads; a limit no tool crosses alone is blamed on
//! the tool that crosses it.

use std::path::Path;

use serde_json::{Value, json};
use toolrail_llm::budget::{BlameKind, Budget, GrammarBuilder, budget};
use toolrail_llm::template::{ChatTemplates, TemplateRequest, ToolChoice, llama_grammar_loads};
use toolrail_tools::grammar::GrammarOptions;
use toolrail_tools::toolset::ToolSet;

const TEMPLATES: [&str; 3] = [
    "Qwen3-Coder",
    "meta-llama-Llama-3.1-8B-Instruct",
    "openai-gpt-oss-120b",
];

/// Every tool of every tool set in the corpus, as a client sends it, each name once; and the
/// largest set alone.
fn corpus_catalogs(dir: &Path) -> (Vec<Value>, Vec<Value>) {
    let mut all: Vec<Value> = Vec::new();
    let mut largest: Vec<Value> = Vec::new();
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    for path in files {
        let Ok(set) = ToolSet::from_json_str(&std::fs::read_to_string(&path).unwrap()) else {
            continue; // the manifest
        };
        let tools = set.client_tools();
        if tools.len() > largest.len() {
            largest = tools.clone();
        }
        for tool in tools {
            if !all.iter().any(|t| name(t) == name(&tool)) {
                all.push(tool);
            }
        }
    }
    (all, largest)
}

fn name(tool: &Value) -> &str {
    tool["function"]["name"].as_str().unwrap()
}

/// `tools` joined with renamed copies of themselves up to `n` tools.
fn catalog_of(tools: &[Value], n: usize) -> Vec<Value> {
    let mut out = Vec::with_capacity(n);
    for copy in 1.. {
        for tool in tools {
            if out.len() == n {
                return out;
            }
            let mut t = tool.clone();
            if copy > 1 {
                t["function"]["name"] = json!(format!("{}_{copy}", name(tool)));
            }
            out.push(t);
        }
    }
    out
}

fn template(name: &str) -> ChatTemplates {
    let dir = toolrail_testkit::corpus("llama-cpp-chat/templates").unwrap();
    let source = std::fs::read_to_string(dir.join(format!("{name}.jinja"))).unwrap();
    ChatTemplates::from_source(&source, "", "").unwrap()
}

fn request(tool_choice: ToolChoice) -> TemplateRequest {
    TemplateRequest {
        messages: vec![json!({"role": "user", "content": "Which tool fits?"})],
        tool_choice,
        ..TemplateRequest::default()
    }
}

/// What the linked llama.cpp says of the catalog's grammar under `templates` (no grammar:
/// nothing to refuse).
fn llama_loads(templates: &ChatTemplates, choice: ToolChoice, tools: &[Value]) -> bool {
    let built = templates
        .build(&TemplateRequest {
            tools: tools.to_vec(),
            ..request(choice)
        })
        .unwrap();
    built.grammar.is_empty() || llama_grammar_loads(&built.grammar).unwrap()
}

fn under(templates: &ChatTemplates, choice: ToolChoice, tools: &[Value]) -> Budget {
    let builder = GrammarBuilder::Template {
        templates,
        request: Box::new(request(choice)),
    };
    budget(tools, &builder).unwrap()
}

/// A copy of `tool` with one more property whose bound llama.cpp cannot write.
fn with_unwritable_bound(tool: &Value) -> Value {
    let mut t = tool.clone();
    let parameters = &mut t["function"]["parameters"];
    if parameters.get("properties").is_none() {
        parameters["properties"] = json!({});
    }
    parameters["properties"]["notes"] = json!({"type": "string", "minLength": 3000});
    t
}

#[test]
fn the_verdict_is_llama_cpps_and_the_blame_is_the_breaking_tool() {
    let dir = toolrail_testkit::require!(toolrail_testkit::corpus("tool-sets"));
    let (all, largest) = corpus_catalogs(&dir);
    assert!(largest.len() >= 20, "{}", largest.len());
    let catalog = catalog_of(&all, 260);
    assert_eq!(catalog.len(), 260);
    for name_of_template in TEMPLATES {
        let templates = template(name_of_template);
        // Llama 3.x constrains only a required call; the others from `auto` on
        for choice in [ToolChoice::Auto, ToolChoice::Required] {
            for tools in [&largest, &catalog] {
                let report = under(&templates, choice.clone(), tools);
                assert_eq!(
                    report.fits(),
                    llama_loads(&templates, choice.clone(), tools),
                    "{name_of_template} {choice:?} {} tools",
                    tools.len()
                );
                assert_eq!(report.tools.len(), tools.len());
                assert!(report.fits(), "{name_of_template}: {:?}", report.whole);
                if report.whole.bytes > 0 {
                    // a grammar that loads has a depth and a sampled call to count stacks on
                    assert!(report.whole.depth > 1, "{:?}", report.whole);
                    let stacks = report.whole.stacks.expect("a call is drawn");
                    assert!(0 < stacks.median && stacks.median <= stacks.most);
                }
            }
            // one property breaks it: blamed by tool and pointer, and without it, it loads
            let mut broken = catalog.clone();
            broken[100] = with_unwritable_bound(&catalog[100]);
            let report = under(&templates, choice.clone(), &broken);
            let loads = llama_loads(&templates, choice.clone(), &broken);
            assert_eq!(report.fits(), loads, "{name_of_template} {choice:?}");
            if report.whole.bytes == 0 {
                continue; // no grammar for this choice: nothing to break
            }
            if loads {
                // the template writes strings without their bounds (Qwen3-Coder's XML
                // arguments): nothing breaks, and the budget says so
                assert!(report.blame.is_none());
                continue;
            }
            let blame = report.blame.expect("a refused catalog is blamed");
            assert_eq!(
                (blame.tool.as_str(), blame.index),
                (name(&catalog[100]), 100),
                "{name_of_template}"
            );
            assert_eq!(blame.pointer, "/properties/notes", "{name_of_template}");
            assert_eq!(blame.how, BlameKind::Alone);
            assert!(
                blame.refusal.finding.contains("3000"),
                "{}",
                blame.refusal.finding
            );
            let mut without = broken.clone();
            without.remove(100);
            assert!(llama_loads(&templates, choice.clone(), &without));
            assert!(under(&templates, choice, &without).fits());
        }
    }
}

/// Two MCP servers with a tool of the same name: each tool's grammar builds alone, the catalog
/// does not, and the blame is the tool that makes it fail (the second of the pair), found by
/// building the catalog's prefixes.
#[test]
fn a_limit_no_tool_crosses_alone_is_blamed_on_the_tool_that_crosses_it() {
    let tool = |name: &str| {
        json!({"type": "function", "function": {"name": name, "description": "d",
            "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}}})
    };
    let catalog = [
        tool("read_file"),
        tool("write_file"),
        tool("list_directory"),
        tool("read_file"),
        tool("search"),
    ];
    let report = budget(
        &catalog,
        &GrammarBuilder::Envelope(GrammarOptions::default()),
    )
    .unwrap();
    assert!(!report.fits());
    assert!(report.tools.iter().all(|t| t.cost.loads()));
    let blame = report.blame.unwrap();
    assert_eq!(blame.how, BlameKind::Crosses);
    assert_eq!((blame.tool.as_str(), blame.index), ("read_file", 3));
    assert!(
        blame.refusal.finding.contains("read_file"),
        "{:?}",
        blame.refusal
    );
    // the table's shares add up to the whole
    let shares: f64 = report.tools.iter().map(|t| t.share).sum();
    assert!((shares - 1.0).abs() < 1e-9, "{shares}");
}
