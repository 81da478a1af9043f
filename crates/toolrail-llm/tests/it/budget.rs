//! `budget` on real catalogs: the largest tool set of `../shared/corpus/tool-sets/` and a
//! 260-tool catalog made by joining them all, under three corpus chat templates (Qwen3-Coder,
//! Llama 3.1, gpt-oss) and toolrail's own envelope. The verdict is what the linked llama.cpp
//! says when it loads the catalog's grammar; a catalog broken by one property is blamed on that
//! tool and pointer, and without that tool it loads; a limit no tool crosses alone is blamed on
//! the tool that crosses it. `--project`'s relaxations make the broken catalogs load, each
//! listed, and the projected grammar accepts every call the original schema allows while
//! validation keeps refusing what only the original forbids.

use std::path::Path;

use serde_json::{Value, json};
use std::sync::Arc;

use toolrail_engine::VerdictKind;
use toolrail_engine::gbnf::Grammar;
use toolrail_engine::sample::{Sampler, SplitMix64};
use toolrail_llm::budget::project::{Projection, Target, project};
use toolrail_llm::budget::{BlameKind, Budget, GrammarBuilder, PerTool, budget};
use toolrail_llm::template::{ChatTemplates, TemplateRequest, ToolChoice, llama_grammar_loads};
use toolrail_schema::relax::RelaxKind;
use toolrail_tools::envelope::Format;
use toolrail_tools::grammar::GrammarOptions;
use toolrail_tools::grammar::tool_call_grammar;
use toolrail_tools::toolset::ToolSet;
use toolrail_tools::validate::{ValidateOptions, Validator};

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
            assert_eq!(report.per_tool, PerTool::Sliced, "{name_of_template}");
            let mut without = broken.clone();
            without.remove(100);
            assert!(llama_loads(&templates, choice.clone(), &without));
            assert!(under(&templates, choice.clone(), &without).fits());
            // --project: a second breaking property on another tool, both relaxed as little as
            // llama.cpp allows, each listed; the projected catalog loads
            broken[7] = with_unwritable_pattern(&catalog[7]);
            let builder = GrammarBuilder::Template {
                templates: &templates,
                request: Box::new(request(choice.clone())),
            };
            let projection = project(&broken, &builder, &Target::default()).unwrap();
            assert!(
                projection.fits,
                "{name_of_template}: {:?}",
                projection.after
            );
            assert!(llama_loads(&templates, choice.clone(), &projection.tools));
            assert!(!projection.before.loads());
            let listed: Vec<(usize, String, String, String)> = projection
                .applied
                .iter()
                .map(|a| {
                    (
                        a.index,
                        a.relaxation.pointer.to_string(),
                        a.relaxation.before(),
                        a.relaxation.after(),
                    )
                })
                .collect();
            assert_eq!(listed.len(), 2, "{name_of_template}: {listed:?}");
            assert_eq!(
                listed[0],
                (
                    7,
                    "/properties/code".to_owned(),
                    "pattern: \"^[a-z]{3000,4000}$\"".to_owned(),
                    "pattern: \"^[a-z]+$\"".to_owned()
                ),
                "{name_of_template}"
            );
            assert_eq!(
                (listed[1].0, listed[1].1.as_str()),
                (100, "/properties/notes")
            );
            let RelaxKind::Lower { from, to, .. } = projection.applied[1].relaxation.kind else {
                panic!("{listed:?}");
            };
            // capped at the largest bound llama.cpp loads: one more does not
            assert_eq!(from, 3000);
            assert!(0 < to && to <= 2000, "{to}");
            let mut one_more = projection.tools.clone();
            one_more[100]["function"]["parameters"]["properties"]["notes"]["minLength"] =
                json!(to + 1);
            assert!(!llama_loads(&templates, choice.clone(), &one_more));
            projected_accepts_what_the_original_allows(&broken, &projection, to);
        }
    }
}

/// A copy of `tool` with one more property whose pattern llama.cpp cannot write.
fn with_unwritable_pattern(tool: &Value) -> Value {
    let mut t = tool.clone();
    let parameters = &mut t["function"]["parameters"];
    if parameters.get("properties").is_none() {
        parameters["properties"] = json!({});
    }
    parameters["properties"]["code"] = json!({"type": "string", "pattern": "^[a-z]{3000,4000}$"});
    t
}

/// For each relaxed tool of `projection`: calls drawn from toolrail's exact grammar of the
/// original tool (so valid under the original schema, which the validator confirms) are all
/// accepted by toolrail's grammar of the projected tool and valid under its schema; a call
/// only the original forbids (notes shorter than 3000 characters, within the capped bound
/// `capped`) passes the projected schema, and validation with the kept original refuses it.
fn projected_accepts_what_the_original_allows(
    original: &[Value],
    projection: &Projection,
    capped: u64,
) {
    const CALLS: usize = 24;
    let kept = projection.tools_keeping_validation(original);
    let mut relaxed: Vec<usize> = projection.applied.iter().map(|a| a.index).collect();
    relaxed.dedup();
    for i in relaxed {
        let before = ToolSet::from_value(&json!([original[i]])).unwrap();
        let after = ToolSet::from_value(&json!([projection.tools[i]])).unwrap();
        let keeping = ToolSet::from_value(&json!([kept[i]])).unwrap();
        let options = GrammarOptions::default();
        let before_grammar =
            Arc::new(Grammar::parse(&tool_call_grammar(&before, &options).unwrap().text).unwrap());
        let after_grammar =
            Arc::new(Grammar::parse(&tool_call_grammar(&after, &options).unwrap().text).unwrap());
        let original_validator = Validator::new(&before).unwrap();
        let sampler = Sampler::new(&before_grammar).readable();
        let mut rng = SplitMix64::new(i as u64);
        let mut checked = 0;
        for _ in 0..CALLS * 4 {
            if checked == CALLS {
                break;
            }
            let call = sampler.sample(&mut rng, 40_000).unwrap();
            let valid = original_validator.validate_output(
                Format::OpenAi,
                &call,
                ValidateOptions::default(),
            );
            // a number JSON allows but serde_json cannot hold (`0e794382932670991`) is drawn
            // again: the validator cannot read the call to confirm it
            if valid
                .parse_error
                .as_ref()
                .is_some_and(|e| e.message.contains("number out of range"))
            {
                continue;
            }
            checked += 1;
            assert!(valid.is_valid_call(), "{call}: {valid:?}");
            let verdict = toolrail_engine::check(&after_grammar, call.as_bytes());
            assert_eq!(verdict.kind, VerdictKind::Accepted, "{call}");
            assert!(
                Validator::new(&after)
                    .unwrap()
                    .validate_output(Format::OpenAi, &call, ValidateOptions::default())
                    .is_valid()
            );
        }
        assert_eq!(checked, CALLS, "tool {i}: too few readable calls drawn");
        if i != 100 {
            continue;
        }
        // only the original forbids it
        let mut arguments = json!({"notes": "n".repeat(capped as usize + 1)});
        for name in before.tools()[0].required_names() {
            if name != "notes" {
                arguments[name.as_str()] = json!("x");
            }
        }
        let name = before.tools()[0].name.clone();
        let call = json!({"name": name, "arguments": arguments}).to_string();
        let plain = Validator::new(&after)
            .unwrap()
            .check_call(&name, &arguments);
        let notes_only = |c: &toolrail_tools::validate::CallCheck| {
            c.issues
                .iter()
                .any(|issue| format!("{issue:?}").contains("notes"))
        };
        assert!(!notes_only(&plain), "{call}: {:?}", plain.issues);
        let strict = Validator::new(&keeping)
            .unwrap()
            .check_call(&name, &arguments);
        assert!(notes_only(&strict), "{call}: {:?}", strict.issues);
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
