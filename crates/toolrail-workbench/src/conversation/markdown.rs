//! A conversation as Markdown that reads as a conversation: one heading per message (who
//! speaks), the text in a fence, and for each answer of the model its pool, whether the call was
//! valid, the feedback sent back, and the turn's grammar (folded).

use std::fmt::Write as _;

use super::{CallMode, Conversation, Ending, Turn};

/// A fence longer than any run of backticks in `text`.
fn fence(text: &str) -> String {
    let mut longest = 0;
    let mut run = 0;
    for c in text.chars() {
        run = if c == '`' { run + 1 } else { 0 };
        longest = longest.max(run);
    }
    "`".repeat((longest + 1).max(3))
}

fn fenced(out: &mut String, text: &str) {
    let f = fence(text);
    let _ = writeln!(out, "{f}\n{text}\n{f}\n");
}

/// Renders `c` as Markdown.
pub fn to_markdown(c: &Conversation) -> String {
    let s = c.settings();
    let mut out = String::from("# Conversation\n\n");
    let _ = writeln!(
        out,
        "- prompt: {} builder, {} envelope\n- calls: {}{}\n- at most {} blocked calls in a row\n- tools: {}\n",
        s.family.name(),
        format!("{:?}", s.format).to_lowercase(),
        match s.mode {
            CallMode::Grammar => "under each turn's grammar",
            CallMode::PromptOnly => "prompt only, read from the free text",
        },
        if s.few_shot { ", few-shot example" } else { "" },
        s.max_blocked,
        c.tools().names().join(", ")
    );
    if !s.system.trim().is_empty() {
        out.push_str("## System\n\n");
        fenced(&mut out, s.system.trim());
    }
    let mut attempt = 0;
    for turn in c.turns() {
        match turn {
            Turn::User { content } => {
                attempt = 0;
                out.push_str("## User\n\n");
                fenced(&mut out, content);
            }
            Turn::Assistant(a) => {
                attempt += 1;
                let _ = writeln!(
                    out,
                    "## Assistant (attempt {attempt}{})\n",
                    if a.forced { ", given by hand" } else { "" }
                );
                fenced(&mut out, &a.output);
                let verdict = match (&a.call, a.valid) {
                    (Some(call), true) => format!("valid call of `{}`", call.name),
                    (Some(call), false) => format!("blocked call of `{}`", call.name),
                    (None, _) => "no call found".to_owned(),
                };
                let _ = writeln!(
                    out,
                    "{verdict}; {} tokens{}; pool: {}{}\n",
                    a.tokens,
                    match a.ending {
                        Ending::MaxTokens => ", cut off at the token limit",
                        _ => "",
                    },
                    a.pool.join(", "),
                    if !a.valid && a.blocked >= s.max_blocked {
                        format!(
                            "; stopped: {} blocked calls in a row (the limit)",
                            a.blocked
                        )
                    } else {
                        String::new()
                    }
                );
                if let Some(grammar) = &a.grammar {
                    out.push_str("<details><summary>this turn's grammar</summary>\n\n");
                    let f = fence(grammar);
                    let _ = writeln!(out, "{f}gbnf\n{grammar}\n{f}\n\n</details>\n");
                }
            }
            Turn::Tool { content, tool } => {
                match tool {
                    Some(tool) => {
                        attempt = 0;
                        let _ = writeln!(out, "## Tool `{tool}` (result)\n");
                    }
                    None => out.push_str("## Tool (validator feedback: the call was not run)\n\n"),
                }
                fenced(&mut out, content);
            }
        }
    }
    out
}
