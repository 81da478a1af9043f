//! Where in a chat template llama.cpp's refusal points: some of its Jinja parser's messages carry
//! no position ("Unexpected token type" for a block never closed, "Unknown statement: include"),
//! so toolrail finds the place itself with a light scan of the template's tags (statements,
//! expressions, comments, raw blocks, quoted strings inside tags) and says it as line:column.

/// A block statement and the end tag that closes it.
const BLOCKS: [(&str, &str); 7] = [
    ("if", "endif"),
    ("for", "endfor"),
    ("macro", "endmacro"),
    ("call", "endcall"),
    ("filter", "endfilter"),
    ("generation", "endgeneration"),
    ("set", "endset"),
];

/// The place a refusal without a position is about, in words with its line:column, when the
/// scan finds it (`None` when the message has a position already or nothing was found).
pub(crate) fn locate_refusal(source: &str, message: &str) -> Option<String> {
    let tags = scan(source);
    if let Some(name) = message.strip_prefix("Unknown statement: ") {
        let name = name.trim();
        let tag = tags
            .iter()
            .find(|t| t.kind == TagKind::Statement && t.word == name)?;
        let (line, column) = line_column(source, tag.at);
        return Some(format!(
            "`{{% {name} %}}` at line {line}, column {column}: llama.cpp's Jinja has no `{name}` statement"
        ));
    }
    if message == "Unknown statement" {
        let tag = tags
            .iter()
            .find(|t| t.kind == TagKind::Statement && t.word.is_empty())?;
        let (line, column) = line_column(source, tag.at);
        return Some(format!(
            "the statement at line {line}, column {column} does not start with a name"
        ));
    }
    if message == "Unexpected token type" {
        return unclosed(source, &tags);
    }
    None
}

/// The first block closed by the wrong end tag, or the innermost block never closed.
fn unclosed(source: &str, tags: &[Tag]) -> Option<String> {
    let mut open: Vec<(&str, usize)> = Vec::new();
    for tag in tags {
        match tag.kind {
            TagKind::Unterminated(what) => {
                let (line, column) = line_column(source, tag.at);
                return Some(format!(
                    "the {what} at line {line}, column {column} is never closed"
                ));
            }
            TagKind::Expression | TagKind::Comment => continue,
            TagKind::Statement => {}
        }
        let word = tag.word.as_str();
        if let Some(&(_, end)) = BLOCKS.iter().find(|(start, _)| *start == word) {
            // `{% set x = … %}` is a statement; `{% set x %}…{% endset %}` a block
            if word != "set" || !tag.assigns {
                open.push((end, tag.at));
            }
            continue;
        }
        if BLOCKS.iter().any(|(_, end)| *end == word) {
            match open.pop() {
                Some((expected, _)) if expected == word => {}
                Some((expected, at)) => {
                    let (line, column) = line_column(source, tag.at);
                    let (open_line, open_column) = line_column(source, at);
                    let start = block_start(expected);
                    return Some(format!(
                        "`{{% {word} %}}` at line {line}, column {column} does not close the \
                         `{{% {start} %}}` opened at line {open_line}, column {open_column} \
                         (it needs `{{% {expected} %}}` first)"
                    ));
                }
                None => {
                    let (line, column) = line_column(source, tag.at);
                    return Some(format!(
                        "`{{% {word} %}}` at line {line}, column {column} closes no block"
                    ));
                }
            }
        }
    }
    let (end, at) = open.pop()?;
    let (line, column) = line_column(source, at);
    let start = block_start(end);
    Some(format!(
        "`{{% {start} %}}` at line {line}, column {column} is never closed (no `{{% {end} %}}`)"
    ))
}

/// The block statement an end tag closes.
fn block_start(end: &str) -> &'static str {
    BLOCKS
        .iter()
        .find(|(_, e)| *e == end)
        .map_or("block", |(start, _)| start)
}

/// What a tag is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TagKind {
    /// `{% … %}`.
    Statement,
    /// `{{ … }}`.
    Expression,
    /// `{# … #}`.
    Comment,
    /// A tag (or a string in it) with no end: what it is.
    Unterminated(&'static str),
}

/// One tag of a template.
#[derive(Debug, Clone)]
struct Tag {
    kind: TagKind,
    /// Byte offset of its `{`.
    at: usize,
    /// A statement's first word (empty when it starts with something else).
    word: String,
    /// A statement holds a top-level `=` (an assignment, for `set`).
    assigns: bool,
}

/// The tags of `source`, in order; `{% raw %}` blocks are skipped whole.
fn scan(source: &str) -> Vec<Tag> {
    let bytes = source.as_bytes();
    let mut tags = Vec::new();
    let mut at = 0;
    while let Some(found) = source[at..].find('{') {
        let start = at + found;
        let (kind, close) = match bytes.get(start + 1) {
            Some(b'%') => (TagKind::Statement, "%}"),
            Some(b'{') => (TagKind::Expression, "}}"),
            Some(b'#') => (TagKind::Comment, "#}"),
            _ => {
                at = start + 1;
                continue;
            }
        };
        let body_start = start + 2;
        let end = if kind == TagKind::Comment {
            source[body_start..].find(close).map(|e| body_start + e)
        } else {
            find_close(source, body_start, close)
        };
        let Some(end) = end else {
            let what = match kind {
                TagKind::Statement => "statement `{%`",
                TagKind::Expression => "expression `{{`",
                _ => "comment `{#`",
            };
            tags.push(Tag {
                kind: TagKind::Unterminated(what),
                at: start,
                word: String::new(),
                assigns: false,
            });
            break;
        };
        let body = source[body_start..end]
            .trim_start_matches(['-', '+'])
            .trim_end_matches(['-', '+'])
            .trim();
        let word: String = body
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        let word = if word.starts_with(|c: char| c.is_ascii_digit()) {
            String::new()
        } else {
            word
        };
        let assigns = kind == TagKind::Statement && has_assignment(body);
        at = end + close.len();
        if kind == TagKind::Statement && word == "raw" {
            // everything up to `{% endraw %}` is text
            at = source[at..]
                .find("endraw")
                .and_then(|e| source[at + e..].find("%}").map(|c| at + e + c + 2))
                .unwrap_or(source.len());
        }
        tags.push(Tag {
            kind,
            at: start,
            word,
            assigns,
        });
    }
    tags
}

/// The offset of `close` after `from`, outside quoted strings.
fn find_close(source: &str, from: usize, close: &str) -> Option<usize> {
    let bytes = source.as_bytes();
    let mut i = from;
    let mut quote: Option<u8> = None;
    while i < bytes.len() {
        let b = bytes[i];
        match quote {
            Some(_) if b == b'\\' => i += 1,
            Some(q) if b == q => quote = None,
            Some(_) => {}
            None if b == b'\'' || b == b'"' => quote = Some(b),
            // bytes, not a slice of the text: `i` may be inside a multi-byte character
            None if bytes[i..].starts_with(close.as_bytes()) => return Some(i),
            None => {}
        }
        i += 1;
    }
    None
}

/// Whether a statement's body holds an `=` that is not part of `==`, `!=`, `<=` or `>=`,
/// outside strings.
fn has_assignment(body: &str) -> bool {
    let bytes = body.as_bytes();
    let mut quote: Option<u8> = None;
    for (i, &b) in bytes.iter().enumerate() {
        match quote {
            Some(q) if b == q => quote = None,
            Some(_) => {}
            None if b == b'\'' || b == b'"' => quote = Some(b),
            None if b == b'=' => {
                let before = i.checked_sub(1).map(|j| bytes[j]);
                let after = bytes.get(i + 1).copied();
                if !matches!(before, Some(b'=' | b'!' | b'<' | b'>')) && after != Some(b'=') {
                    return true;
                }
            }
            None => {}
        }
    }
    false
}

/// 1-based line and column (in characters) of byte `at`.
fn line_column(source: &str, at: usize) -> (usize, usize) {
    let before = &source[..at.min(source.len())];
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |n| n + 1);
    (line, before[line_start..].chars().count() + 1)
}

#[cfg(test)]
mod tests {
    use super::locate_refusal;

    #[test]
    fn an_unclosed_block_is_named_with_its_place() {
        let at = locate_refusal("{% if true %}x", "Unexpected token type").unwrap();
        assert_eq!(
            at,
            "`{% if %}` at line 1, column 1 is never closed (no `{% endif %}`)"
        );
        let source = "a\n{% for m in messages %}\n  {% if m %}{{ m }}\n{% endfor %}";
        let at = locate_refusal(source, "Unexpected token type").unwrap();
        assert!(
            at.starts_with("`{% endfor %}` at line 4, column 1 does not close the `{% if %}` opened at line 3, column 3"),
            "{at}"
        );
        // a set with a value is no block; one without is
        let at = locate_refusal("{% set x = 1 %}{% set y %}z", "Unexpected token type").unwrap();
        assert!(at.starts_with("`{% set %}` at line 1, column 16"), "{at}");
        // quoted %} and raw blocks do not confuse the scan
        let source = "{% if '%}' == x %}{% raw %}{% if %}{% endraw %}";
        let at = locate_refusal(source, "Unexpected token type").unwrap();
        assert!(at.starts_with("`{% if %}` at line 1, column 1"), "{at}");
        let at = locate_refusal("ok {{ x ", "Unexpected token type").unwrap();
        assert_eq!(
            at,
            "the expression `{{` at line 1, column 4 is never closed"
        );
    }

    #[test]
    fn text_with_multi_byte_characters_inside_tags_is_scanned() {
        // found by the template fuzz target: the scan sliced the text inside a character
        let at =
            locate_refusal("{% if x == 'é—ü' %}{{ '日本' }}", "Unexpected token type").unwrap();
        assert!(at.starts_with("`{% if %}` at line 1, column 1"), "{at}");
        let at = locate_refusal("ä\n  {% include 'ß' %}", "Unknown statement: include").unwrap();
        assert!(at.contains("line 2, column 3"), "{at}");
    }

    #[test]
    fn an_unknown_statement_is_named_with_its_place() {
        let at = locate_refusal(
            "{% if true %}x\n  {%- include '/etc/passwd' %}",
            "Unknown statement: include",
        )
        .unwrap();
        assert_eq!(
            at,
            "`{% include %}` at line 2, column 3: llama.cpp's Jinja has no `include` statement"
        );
        assert_eq!(locate_refusal("{{ x }}", "Parser Error: something"), None);
    }
}
