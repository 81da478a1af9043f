//! Making a catalog fit (`toolrail budget --project`): relaxations of the tools' schemas, each
//! only ever looser ([`toolrail_schema::relax`]), chosen until llama.cpp loads the catalog's
//! grammar and it stays within the target's rules and bytes.
//!
//! First every tool llama.cpp refuses alone is relaxed, heaviest relaxation first, until it
//! loads; then each relaxation that is not needed is undone, and each lowered bound raised back
//! as far as the tool still loads (so a `minLength: 3000` becomes the largest bound that fits,
//! not 0). Then, while the whole catalog misses the target, the tool with the largest grammar
//! gives up its heaviest remaining relaxation. Every relaxation applied is listed with its tool
//! and JSON pointer; validation keeps the original schema (see `x-toolrail-original-parameters`
//! in `toolrail_tools`), so nothing the looser grammar lets through goes unnoticed.

use serde::Serialize;
use serde_json::Value;
use toolrail_schema::relax::{self, RelaxKind, Relaxation};

use super::{BudgetError, GrammarBuilder, GrammarCost, Verdict, cost, sizes_only, slice};

pub use toolrail_tools::toolset::ORIGINAL_PARAMETERS_KEY;

/// Where a projected grammar must land.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct Target {
    /// At most this many rules (after llama.cpp's rewrite); None: no limit but llama.cpp's.
    pub max_rules: Option<usize>,
    /// At most this many bytes of grammar text; None: no limit but llama.cpp's.
    pub max_bytes: Option<usize>,
}

impl Target {
    /// Whether `cost` meets the target: llama.cpp loads it, within the rules and bytes.
    pub fn met_by(&self, cost: &GrammarCost) -> bool {
        cost.loads()
            && self.max_rules.is_none_or(|m| cost.rules <= m)
            && self.max_bytes.is_none_or(|m| cost.bytes <= m)
    }
}

/// One relaxation applied to one tool.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Applied {
    /// The tool.
    pub tool: String,
    /// Its place in the catalog (0 first).
    pub index: usize,
    /// The relaxation; its pointer is into the tool's parameters.
    pub relaxation: Relaxation,
}

/// A catalog made to fit.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Projection {
    /// The catalog with every relaxation applied (OpenAI `tools` entries, as sent).
    pub tools: Vec<Value>,
    /// Every relaxation applied, in catalog order.
    pub applied: Vec<Applied>,
    /// The catalog's grammar before.
    pub before: GrammarCost,
    /// The projected catalog's grammar.
    pub after: GrammarCost,
    /// Whether the projected grammar meets the target.
    pub fits: bool,
    /// Tools still refused alone after every relaxation they offer (their names).
    pub unfixable: Vec<String>,
}

impl Projection {
    /// The projected catalog with each relaxed tool's original parameters kept under
    /// [`ORIGINAL_PARAMETERS_KEY`], for toolrail's validator.
    pub fn tools_keeping_validation(&self, original: &[Value]) -> Vec<Value> {
        let mut out = self.tools.clone();
        for (i, tool) in out.iter_mut().enumerate() {
            if !self.applied.iter().any(|a| a.index == i) {
                continue;
            }
            let Some(params) = parameters(&original[i]).cloned() else {
                continue;
            };
            let holder = match tool.get_mut("function") {
                Some(function) => function,
                None => tool,
            };
            if let Some(object) = holder.as_object_mut() {
                object.insert(ORIGINAL_PARAMETERS_KEY.into(), params);
            }
        }
        out
    }
}

/// Projects `tools` (OpenAI `tools` entries) under `builder` onto `target`.
pub fn project(
    tools: &[Value],
    builder: &GrammarBuilder<'_>,
    target: &Target,
) -> Result<Projection, BudgetError> {
    let first = sizes_only(tools, builder)?;
    let before = first.whole.clone();
    let mut current = tools.to_vec();
    let mut applied: Vec<Vec<Relaxation>> = vec![Vec::new(); tools.len()];
    let mut unfixable = Vec::new();
    if !target.met_by(&before) {
        // 1. the tools refused alone, each made to load with the fewest, mildest relaxations
        for (i, tool_cost) in first.tools.iter().enumerate() {
            if tool_cost.cost.loads() && loads_alone(&tools[i], builder) {
                continue;
            }
            match relax_tool(&tools[i], builder) {
                Some(list) => {
                    current[i] = with_relaxations(&tools[i], &list);
                    applied[i] = list;
                }
                None => unfixable.push(tool_cost.name.clone()),
            }
        }
        // 2. the whole catalog, largest tools first
        if unfixable.is_empty() {
            // each tool's size: its slice of the first build, or, once relaxed, its own
            let sizes = first
                .tools
                .iter()
                .enumerate()
                .map(|(i, t)| match applied[i].is_empty() {
                    true => t.cost.bytes,
                    false => tool_bytes(&current[i], builder),
                })
                .collect();
            shrink_catalog(tools, &mut current, &mut applied, sizes, builder, target);
        }
    }
    let after = whole_cost(&current, builder);
    let names: Vec<String> = first.tools.iter().map(|t| t.name.clone()).collect();
    Ok(Projection {
        fits: target.met_by(&after),
        applied: applied
            .into_iter()
            .enumerate()
            .flat_map(|(index, list)| {
                let tool = names[index].clone();
                list.into_iter().map(move |relaxation| Applied {
                    tool: tool.clone(),
                    index,
                    relaxation,
                })
            })
            .collect(),
        tools: current,
        before,
        after,
        unfixable,
    })
}

/// The whole catalog's grammar cost (llama.cpp's verdict).
fn whole_cost(tools: &[Value], builder: &GrammarBuilder<'_>) -> GrammarCost {
    match builder.build(tools) {
        Ok(built) => cost(&built.grammar, Verdict::Llama),
        Err(e) => super::unbuilt(e),
    }
}

fn loads_alone(tool: &Value, builder: &GrammarBuilder<'_>) -> bool {
    super::refusal_of(std::slice::from_ref(tool), builder).is_none()
}

/// The tool's parameters schema (OpenAI `function.parameters`, or a flat `parameters`).
fn parameters(tool: &Value) -> Option<&Value> {
    tool.pointer("/function/parameters")
        .or_else(|| tool.get("parameters"))
}

/// `tool` with `list` applied to its parameters, in order (a relaxation whose keyword an
/// earlier one removed is skipped: the schema is already looser there).
fn with_relaxations(tool: &Value, list: &[Relaxation]) -> Value {
    let mut out = tool.clone();
    let params = match out.pointer_mut("/function/parameters") {
        Some(p) => Some(p),
        None => out.get_mut("parameters"),
    };
    if let Some(params) = params {
        for r in list {
            let _ = relax::apply(params, r);
        }
    }
    out
}

/// The fewest relaxations that make `tool` load alone, each lowered bound as high as it can
/// stay; None when every relaxation together does not make it load.
fn relax_tool(tool: &Value, builder: &GrammarBuilder<'_>) -> Option<Vec<Relaxation>> {
    let candidates = relax::candidates(parameters(tool)?);
    let mut list: Vec<Relaxation> = Vec::new();
    for candidate in candidates {
        if loads_alone(&with_relaxations(tool, &list), builder) {
            break;
        }
        list.push(candidate);
    }
    if !loads_alone(&with_relaxations(tool, &list), builder) {
        return None;
    }
    // undo what is not needed, the last tried first
    let mut i = list.len();
    while i > 0 {
        i -= 1;
        let mut without = list.clone();
        without.remove(i);
        if loads_alone(&with_relaxations(tool, &without), builder) {
            list = without;
        }
    }
    // raise each lowered bound back as far as the tool still loads
    for i in 0..list.len() {
        let RelaxKind::Lower { from, .. } = list[i].kind else {
            continue;
        };
        // loads at `lo`, not known above; `from` itself does not load
        let (mut lo, mut hi) = (0u64, from);
        while hi - lo > 1 {
            let mid = lo + (hi - lo) / 2;
            let mut trial = list.clone();
            trial[i] = list[i].with_lower_bound(mid);
            if loads_alone(&with_relaxations(tool, &trial), builder) {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        list[i] = list[i].with_lower_bound(lo);
    }
    Some(list)
}

/// The bytes of `tool`'s own rules: its slice of the grammar built for it alone (the whole
/// grammar where it cannot be sliced, 0 where it cannot be built).
fn tool_bytes(tool: &Value, builder: &GrammarBuilder<'_>) -> usize {
    let Ok(built) = builder.build(std::slice::from_ref(tool)) else {
        return 0;
    };
    let name = super::tool_name(tool);
    match slice::slices(&built.grammar, std::slice::from_ref(&name)) {
        Some(slices) => slices
            .first()
            .map_or(0, |s| cost(s, Verdict::Toolrail).bytes),
        None => built.grammar.len(),
    }
}

/// While the whole catalog misses `target`, the tool with the largest grammar (`sizes`, one
/// per tool) that still has a relaxation gives up its heaviest one.
fn shrink_catalog(
    original: &[Value],
    current: &mut [Value],
    applied: &mut [Vec<Relaxation>],
    mut sizes: Vec<usize>,
    builder: &GrammarBuilder<'_>,
    target: &Target,
) {
    let mut remaining: Vec<Vec<Relaxation>> = current
        .iter()
        .map(|tool| parameters(tool).map(relax::candidates).unwrap_or_default())
        .collect();
    while !target.met_by(&whole_cost(current, builder)) {
        let Some(i) = (0..current.len())
            .filter(|&i| !remaining[i].is_empty())
            .max_by_key(|&i| sizes[i])
        else {
            return;
        };
        let next = remaining[i].remove(0);
        // a bound phase 1 lowered is lowered further in its own entry
        let same = applied[i].iter_mut().find(|a| {
            a.pointer == next.pointer
                && matches!((&a.kind, &next.kind),
                    (RelaxKind::Lower { keyword: k, .. }, RelaxKind::Lower { keyword: n, .. }) if k == n)
        });
        match same {
            Some(earlier) => *earlier = earlier.with_lower_bound(0),
            None => applied[i].push(next),
        }
        current[i] = with_relaxations(&original[i], &applied[i]);
        sizes[i] = tool_bytes(&current[i], builder);
    }
}
