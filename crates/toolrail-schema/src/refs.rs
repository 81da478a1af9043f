//! References: a local `$ref` resolved to its target (a document and a JSON pointer in it), and
//! the target read from the document without copying it. The walk ([`crate::convert`]) keys a
//! target's rule by its [`RefTarget`], so that a reference met again (a cycle) becomes a
//! reference to that rule.

use serde_json::Value;

use crate::pointer::{self, JsonPointer};

/// A resolved `$ref`: the document (its index among the converter's documents) and the JSON
/// pointer of the target in it (`#` or `#/...`). It keys the target's rule, so that a
/// reference met again (a cycle) becomes a reference to that rule.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct RefTarget {
    /// The document.
    pub(crate) doc: usize,
    /// The target's JSON pointer, from `#`.
    pub(crate) pointer: String,
}

impl RefTarget {
    /// Whether the target is the document's root (`#`).
    pub(crate) fn is_root(&self) -> bool {
        self.pointer == "#"
    }

    /// The target's pointer without the `#` (its segments as written in the `$ref`).
    pub(crate) fn json_pointer(&self) -> JsonPointer {
        JsonPointer::parse(&self.pointer[1..]).unwrap_or_default()
    }

    /// A rule-name hint for the target: its last segment, percent-decoded (`root-schema` for
    /// the root).
    pub(crate) fn hint(&self) -> String {
        if self.is_root() {
            return "root-schema".to_string();
        }
        let seg = self.pointer.rsplit('/').next().unwrap_or("ref");
        percent_decode(seg)
    }
}

/// Resolves the local reference `reference` found in document `doc`, whose root is `root` (an
/// absolute reference to the document's own `$id` is local); the error says why it cannot be
/// followed (the caller names the `$ref` keyword and where it is).
pub(crate) fn resolve(root: &Value, doc: usize, reference: &str) -> Result<RefTarget, String> {
    let own_id = root.get("$id").and_then(|v| v.as_str()).unwrap_or("");
    let reference = match reference.strip_prefix(own_id) {
        Some(rest) if !own_id.is_empty() && (rest.is_empty() || rest.starts_with('#')) => {
            if rest.is_empty() { "#" } else { rest }
        }
        _ => reference,
    };
    let Some(frag) = reference.strip_prefix('#') else {
        return Err(format!(
            "only local references (#...) are supported, not {reference:?}"
        ));
    };
    if !frag.is_empty() && !frag.starts_with('/') {
        return Err(format!(
            "anchor references ({reference:?}) are not supported"
        ));
    }
    if lookup(root, frag).is_none() {
        return Err(format!("{reference:?} does not resolve"));
    }
    Ok(RefTarget {
        doc,
        pointer: format!("#{frag}"),
    })
}

/// The schema a resolved `$ref` points to in its document's root (`false` if it is gone,
/// which [`resolve`] rules out).
pub(crate) fn target_schema<'r>(root: &'r Value, target: &RefTarget) -> &'r Value {
    static FALSE_SCHEMA: Value = Value::Bool(false);
    lookup(root, &target.pointer[1..]).unwrap_or(&FALSE_SCHEMA)
}

/// The value at the JSON pointer `pointer` (`/a/b`, segments percent-encoded as in a URI
/// fragment) inside `root`; `None` when it does not resolve.
fn lookup<'a>(root: &'a Value, pointer: &str) -> Option<&'a Value> {
    let mut node = root;
    for seg in pointer.split('/').skip(1) {
        let seg = pointer::unescape(&percent_decode(seg));
        node = match node {
            Value::Object(m) => m.get(&seg),
            Value::Array(a) => seg.parse::<usize>().ok().and_then(|i| a.get(i)),
            _ => None,
        }?;
    }
    Some(node)
}

/// `%XX` escapes of a URI fragment decoded (invalid ones kept as they are).
fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%'
            && i + 3 <= b.len()
            && let Some(v) = std::str::from_utf8(&b[i + 1..i + 3])
                .ok()
                .and_then(|h| u8::from_str_radix(h, 16).ok())
        {
            out.push(v);
            i += 3;
            continue;
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}
