//! The Markdown rendering of a transcript: a header, the prompt, the grammar, the output, a
//! table of tokens with their best alternatives, and the validation.

use super::Transcript;

fn fence(text: &str, lang: &str) -> String {
    let ticks = if text.contains("```") { "````" } else { "```" };
    format!("{ticks}{lang}\n{text}\n{ticks}\n")
}

fn cell(text: &str) -> String {
    text.replace('|', "\\|")
        .replace('\n', "\\n")
        .replace('\r', "\\r")
        .replace('\t', "\\t")
        .replace('`', "\\`")
}

/// The transcript as a Markdown document.
pub fn to_markdown(t: &Transcript) -> String {
    let mut out = String::new();
    out.push_str("# toolrail transcript\n\n");
    out.push_str("| | |\n|---|---|\n");
    out.push_str(&format!(
        "| model | {} ({}, {} tokens) |\n",
        cell(&t.model.name),
        cell(&t.model.architecture),
        t.model.vocab_size
    ));
    out.push_str(&format!("| engine | {} |\n", t.engine));
    if let Some(server) = &t.server {
        out.push_str(&format!("| server | {} |\n", cell(server)));
    }
    if let Some(run) = &t.server_run {
        let request = match &run.request {
            super::ServerRequest::Grammar => "grammar (/completion)".to_string(),
            super::ServerRequest::JsonSchema { .. } => "json_schema (/completion)".to_string(),
            super::ServerRequest::Tools { calls, .. } => format!(
                "tools (/v1/chat/completions), {} call(s) parsed by the server",
                calls.len()
            ),
        };
        out.push_str(&format!("| server request | {} |\n", cell(&request)));
        let flagged = t.tokens.iter().filter(|r| r.flag.is_some()).count();
        let differing = t
            .tokens
            .iter()
            .filter(|r| !r.disagreements.is_empty())
            .count();
        out.push_str(&format!(
            "| live check | {flagged} token(s) the grammar forbids, {differing} step(s) where the allowed sets differ |\n"
        ));
    }
    if let Some(settings) = &t.settings {
        out.push_str(&format!(
            "| computed with | {} |\n",
            cell(&format!("{}: {}", settings.engine, settings.summary()))
        ));
    }
    if let Some(format) = &t.format {
        out.push_str(&format!("| format | {format} |\n"));
    }
    let s = &t.sampling;
    out.push_str(&format!(
        "| sampling | temperature {}, top-k {}, top-p {}, min-p {}, seed {}, max {} tokens |\n",
        s.temperature, s.top_k, s.top_p, s.min_p, s.seed, s.max_tokens
    ));
    let explanation = super::explain::explain(t);
    if let Some(first) = explanation.first() {
        out.push_str(&format!("| stopped | {} |\n", cell(&first.text)));
    }

    if t.totals.compared_steps > 0 {
        out.push_str(&format!(
            "| mask comparison | {}'s mask vs toolrail's over the whole vocabulary: {} of {} step(s) differ |\n",
            t.engine, t.totals.differing_steps, t.totals.compared_steps
        ));
    }
    for other in &t.totals.other_engines {
        let compared = if other.compared_steps > 0 {
            format!(
                "; differs from toolrail's at {} of {} step(s)",
                other.differing_steps, other.compared_steps
            )
        } else {
            String::new()
        };
        out.push_str(&format!(
            "| {} masks (beside {}'s) | {:.1} ms over {} step(s){compared} |\n",
            other.engine, t.engine, other.mask_ms, other.steps
        ));
    }
    out.push_str(&format!(
        "| totals | {} tokens, {:.1} tokens/s, decode {:.1} ms, mask {:.1} ms |\n\n",
        t.totals.tokens, t.totals.tokens_per_s, t.totals.decode_ms, t.totals.mask_ms
    ));
    out.push_str("## What happened\n\n");
    for line in &explanation {
        out.push_str(&format!(
            "- **{}**: {}\n",
            line.topic.label(),
            cell(&line.text)
        ));
    }
    out.push_str("\n## Prompt\n\n");
    out.push_str(&fence(&t.prompt, "text"));
    if let Some(grammar) = &t.grammar {
        out.push_str("\n## Grammar\n\n");
        out.push_str(&fence(grammar, "gbnf"));
    }
    out.push_str("\n## Output\n\n");
    out.push_str(&fence(&t.output, "text"));
    if !t.tokens.is_empty() {
        out.push_str("\n## Tokens\n\n| # | token | p | allowed | best alternatives (after mask) | mask ms |\n|---|---|---|---|---|---|\n");
        for r in &t.tokens {
            let p = r
                .after
                .iter()
                .find(|c| c.id == r.id)
                .map_or(0.0, |c| c.probability);
            let alts: Vec<String> = r
                .after
                .iter()
                .filter(|c| c.id != r.id)
                .take(3)
                .map(|c| format!("`{}` {:.2}", cell(&c.piece), c.probability))
                .collect();
            out.push_str(&format!(
                "| {} | `{}`{} | {:.2} | {} | {} | {} |\n",
                r.index,
                cell(&r.piece),
                match (r.forced, r.budget_replaced, &r.flag) {
                    (_, _, Some(flag)) => format!(" (**{}**)", cell(flag)),
                    (true, _, None) => " (forced)".to_owned(),
                    (false, Some(id), None) => match &r.budget {
                        Some(note) => {
                            format!(" (budget guard, not {id}: {})", cell(&note.describe()))
                        }
                        None => format!(" (budget guard, not {id})"),
                    },
                    (false, None, None) => String::new(),
                },
                p,
                r.allowed,
                alts.join(", "),
                if r.other_masks.is_empty() {
                    format!("{:.3}", r.mask_ms)
                } else {
                    r.mask_times(t.engine)
                        .map(|(engine, ms)| format!("{engine} {ms:.3}"))
                        .collect::<Vec<_>>()
                        .join(", ")
                }
            ));
        }
    }
    let differing: Vec<_> = t
        .tokens
        .iter()
        .flat_map(|r| r.mask_differences().map(|d| (r.index, d)))
        .collect();
    if !differing.is_empty() {
        out.push_str(
            "\n## Mask differences\n\n| # | tokens allowed by one engine only |\n|---|---|\n",
        );
        for (index, d) in differing {
            out.push_str(&format!("| {index} | {} |\n", cell(&d.describe())));
        }
    }
    let stopped: Vec<_> = t
        .tokens
        .iter()
        .flat_map(|r| {
            r.other_masks
                .iter()
                .filter_map(move |m| m.stopped.as_ref().map(|why| (r.index, why)))
        })
        .collect();
    if !stopped.is_empty() {
        out.push_str("\n## Compared engines that stopped following\n\n| # | why |\n|---|---|\n");
        for (index, why) in stopped {
            out.push_str(&format!("| {index} | {} |\n", cell(why)));
        }
    }
    if let Some(run) = &t.template {
        out.push_str(&template_section(run, &t.tokens));
    }
    if let Some(validation) = &t.validation {
        out.push_str("\n## Validation\n\n");
        out.push_str(&fence(
            &serde_json::to_string_pretty(validation).unwrap_or_default(),
            "json",
        ));
    }
    out
}

/// The chat template's part: source, lazy or not, triggers, preserved tokens, stops, the
/// trigger search time and the calls llama.cpp's parser returned (the timeline, reasoning and
/// parse are lines of the explanation, above).
fn template_section(run: &super::TemplateRun, tokens: &[super::TokenRecord]) -> String {
    let r = &run.result;
    let mut out = String::from("\n## Chat template\n\n| | |\n|---|---|\n");
    out.push_str(&format!("| template | {} |\n", cell(&run.source)));
    out.push_str(&format!("| format | {} |\n", cell(&r.format)));
    out.push_str(&format!(
        "| grammar | {} |\n",
        if r.grammar.is_empty() {
            "none"
        } else if r.grammar_lazy {
            "lazy: dormant until a trigger fires"
        } else {
            "constrains from the first token"
        }
    ));
    let triggers = r
        .sampler
        .as_ref()
        .map_or(&r.grammar_triggers, |s| &s.triggers);
    for trigger in triggers {
        out.push_str(&format!(
            "| trigger | {} `{}` |\n",
            trigger.kind,
            cell(&trigger.value)
        ));
    }
    if !r.preserved_tokens.is_empty() {
        out.push_str(&format!(
            "| preserved tokens | {} |\n",
            cell(&r.preserved_tokens.join(" "))
        ));
    }
    if !r.additional_stops.is_empty() {
        out.push_str(&format!(
            "| stops | {} |\n",
            cell(&format!("{:?}", r.additional_stops))
        ));
    }
    // what happened in the run is told once, in the explanation's words ("What happened");
    // the table adds the figure and llama.cpp's calls as it returned them
    if r.grammar_lazy && !r.grammar.is_empty() {
        out.push_str(&format!(
            "| trigger search | {:.3} ms in all |\n",
            crate::template_info::trigger_search_ms(tokens)
        ));
    }
    for call in run.parsed.iter().flat_map(|p| &p.tool_calls) {
        out.push_str(&format!(
            "| llama.cpp's call | `{}` `{}` |\n",
            cell(&call.name),
            cell(&call.arguments)
        ));
    }
    out
}
