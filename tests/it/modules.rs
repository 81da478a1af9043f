//! No two modules of a crate import each other, directly or through a loop: the module graph
//! of every crate in the workspace (and of the root package's `src/`), built from the source
//! text, has no cycle.
//!
//! A module imports another when it names it, or an item in it, by a path: `crate::a::X`,
//! `super::X`, `self::b::Y` or a child module's name (`b::Y`), in a `use` item or in code.
//! Declaring a child (`mod b;`) is not an import. A module `a::b` naming `a` (or an item of
//! `a`) imports `a`; so a child using items of its parent while the parent uses items of the
//! child is a cycle. Inline modules (`mod tests { ... }`) count as part of their file's module.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// One module's file and the imports found in it.
struct Module {
    file: PathBuf,
    /// Imported module → line of the first import of it.
    imports: BTreeMap<String, usize>,
}

/// A module path below its crate root, as `a::b` (`""` for the root).
fn join(path: &[String]) -> String {
    path.join("::")
}

/// The source text with comments, string and character literals blanked out (newlines kept,
/// so that line numbers stay right).
fn strip(src: &str) -> String {
    let c: Vec<char> = src.chars().collect();
    let mut out = String::with_capacity(src.len());
    let mut i = 0;
    let blank = |out: &mut String, ch: char| out.push(if ch == '\n' { '\n' } else { ' ' });
    while i < c.len() {
        if c[i] == '/' && c.get(i + 1) == Some(&'/') {
            while i < c.len() && c[i] != '\n' {
                i += 1;
            }
        } else if c[i] == '/' && c.get(i + 1) == Some(&'*') {
            let mut depth = 0;
            while i < c.len() {
                if c[i] == '/' && c.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                    out.push_str("  ");
                } else if c[i] == '*' && c.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                    out.push_str("  ");
                    if depth == 0 {
                        break;
                    }
                } else {
                    blank(&mut out, c[i]);
                    i += 1;
                }
            }
        } else if c[i] == 'r'
            && (c.get(i + 1) == Some(&'"') || c.get(i + 1) == Some(&'#'))
            && (i == 0 || !(c[i - 1].is_alphanumeric() || c[i - 1] == '_'))
        {
            // raw string r"..." or r#"..."#
            let mut j = i + 1;
            let mut hashes = 0;
            while c.get(j) == Some(&'#') {
                hashes += 1;
                j += 1;
            }
            if c.get(j) != Some(&'"') {
                out.push(c[i]);
                i += 1;
                continue;
            }
            j += 1;
            loop {
                if j >= c.len() {
                    break;
                }
                if c[j] == '"' && (0..hashes).all(|k| c.get(j + 1 + k) == Some(&'#')) {
                    j += 1 + hashes;
                    break;
                }
                j += 1;
            }
            for &ch in &c[i..j.min(c.len())] {
                blank(&mut out, ch);
            }
            i = j;
        } else if c[i] == '"' {
            let mut j = i + 1;
            while j < c.len() && c[j] != '"' {
                if c[j] == '\\' {
                    j += 1;
                }
                j += 1;
            }
            for &ch in &c[i..(j + 1).min(c.len())] {
                blank(&mut out, ch);
            }
            i = j + 1;
        } else if c[i] == '\'' {
            // a character literal ('x', '\n', '\u{..}'), or a lifetime ('a)
            if c.get(i + 1) == Some(&'\\') {
                let mut j = i + 2;
                while j < c.len() && c[j] != '\'' {
                    j += 1;
                }
                for &ch in &c[i..(j + 1).min(c.len())] {
                    blank(&mut out, ch);
                }
                i = j + 1;
            } else if c.get(i + 2) == Some(&'\'') {
                out.push_str("   ");
                i += 3;
            } else {
                out.push(c[i]);
                i += 1;
            }
        } else {
            out.push(c[i]);
            i += 1;
        }
    }
    out
}

fn is_ident_char(ch: char) -> bool {
    ch.is_alphanumeric() || ch == '_'
}

/// The paths a `use` tree stands for (`a::{b, c::{self, D}}` → `a::b`, `a::c`, `a::c::D`),
/// each as its segments (`self` dropped, `*` and `as` renames cut off).
fn use_paths(tree: &str) -> Vec<Vec<String>> {
    fn expand(tree: &str, prefix: &[String], out: &mut Vec<Vec<String>>) {
        let tree = tree.trim();
        if tree.is_empty() {
            return;
        }
        if let Some(open) = tree.find('{') {
            let head: Vec<String> = segments(&tree[..open]);
            let mut base = prefix.to_vec();
            base.extend(head);
            let inner = &tree[open + 1..tree.rfind('}').unwrap_or(tree.len())];
            let mut depth = 0;
            let mut start = 0;
            for (k, ch) in inner.char_indices() {
                match ch {
                    '{' => depth += 1,
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        expand(&inner[start..k], &base, out);
                        start = k + 1;
                    }
                    _ => {}
                }
            }
            expand(&inner[start..], &base, out);
            if inner.trim().is_empty() {
                out.push(base);
            }
        } else {
            let mut path = prefix.to_vec();
            let tree = tree.split(" as ").next().unwrap_or(tree);
            for seg in segments(tree) {
                if seg == "self" && !path.is_empty() {
                    continue;
                }
                path.push(seg);
            }
            out.push(path);
        }
    }
    fn segments(text: &str) -> Vec<String> {
        text.split("::")
            .map(str::trim)
            .filter(|s| !s.is_empty() && *s != "*")
            .map(str::to_owned)
            .collect()
    }
    let mut out = Vec::new();
    expand(tree, &[], &mut out);
    out
}

/// The module a path names, resolved from module `here` (whose children are `children`); `None`
/// when it names no module of this crate.
fn resolve(
    path: &[String],
    here: &[String],
    modules: &BTreeSet<String>,
    children: &BTreeSet<String>,
) -> Option<String> {
    let mut base: Vec<String>;
    let mut rest = path;
    match path.first().map(String::as_str) {
        Some("crate") => {
            base = Vec::new();
            rest = &path[1..];
        }
        Some("self") => {
            base = here.to_vec();
            rest = &path[1..];
        }
        Some("super") => {
            base = here.to_vec();
            while rest.first().map(String::as_str) == Some("super") {
                base.pop()?;
                rest = &rest[1..];
            }
        }
        Some(first) if children.contains(first) => base = here.to_vec(),
        _ => return None,
    }
    // the longest prefix that is a module
    let mut target = base.clone();
    let mut best = join(&base);
    for seg in rest {
        target.push(seg.clone());
        let name = join(&target);
        if modules.contains(&name) {
            best = name;
        } else {
            break;
        }
    }
    Some(best)
}

/// The modules of one crate whose root file is `root`: module path → file.
fn module_files(root: &Path) -> BTreeMap<String, PathBuf> {
    let mut files = BTreeMap::new();
    let mut todo = vec![(Vec::<String>::new(), root.to_path_buf())];
    while let Some((path, file)) = todo.pop() {
        let text = std::fs::read_to_string(&file).unwrap_or_default();
        let text = strip(&text);
        // the directory holding this module's children
        let dir = if path.is_empty() || file.file_name().is_some_and(|n| n == "mod.rs") {
            file.parent().map(Path::to_path_buf)
        } else {
            file.parent()
                .map(|p| p.join(file.file_stem().unwrap_or_default()))
        };
        for child in declared_children(&text, false) {
            let Some(dir) = &dir else { continue };
            let candidates = [
                dir.join(format!("{child}.rs")),
                dir.join(&child).join("mod.rs"),
            ];
            if let Some(found) = candidates.into_iter().find(|p| p.exists()) {
                let mut p = path.clone();
                p.push(child);
                todo.push((p, found));
            }
        }
        files.insert(join(&path), file);
    }
    files
}

/// The names of the modules declared in a (stripped) source text: `mod x;` only, or inline
/// `mod x { ... }` too.
fn declared_children(text: &str, inline_too: bool) -> Vec<String> {
    let mut out = Vec::new();
    let bytes: Vec<char> = text.chars().collect();
    let mut i = 0;
    while let Some(k) = find_word(&bytes, i, "mod") {
        i = k + 3;
        let mut j = i;
        while j < bytes.len() && bytes[j].is_whitespace() {
            j += 1;
        }
        let start = j;
        while j < bytes.len() && is_ident_char(bytes[j]) {
            j += 1;
        }
        let name: String = bytes[start..j].iter().collect();
        while j < bytes.len() && bytes[j].is_whitespace() {
            j += 1;
        }
        if name.is_empty() {
            continue;
        }
        match bytes.get(j) {
            Some(';') => out.push(name),
            Some('{') if inline_too => out.push(name),
            _ => {}
        }
    }
    out
}

/// The index of the next whole word `word` at or after `from`.
fn find_word(text: &[char], from: usize, word: &str) -> Option<usize> {
    let w: Vec<char> = word.chars().collect();
    let mut i = from;
    while i + w.len() <= text.len() {
        if text[i..i + w.len()] == w[..]
            && (i == 0 || !(is_ident_char(text[i - 1]) || text[i - 1] == '$'))
            && text.get(i + w.len()).is_none_or(|c| !is_ident_char(*c))
        {
            return Some(i);
        }
        i += 1;
    }
    None
}

/// Reads a path starting at `i` (`a::b::C`, spaces around `::` allowed); returns the segments
/// and the index after it.
fn read_path(text: &[char], mut i: usize) -> (Vec<String>, usize) {
    let mut segs = Vec::new();
    loop {
        let start = i;
        while i < text.len() && is_ident_char(text[i]) {
            i += 1;
        }
        if i == start {
            break;
        }
        segs.push(text[start..i].iter().collect());
        let mut j = i;
        while j < text.len() && text[j].is_whitespace() {
            j += 1;
        }
        if text.get(j) == Some(&':') && text.get(j + 1) == Some(&':') {
            j += 2;
            while j < text.len() && text[j].is_whitespace() {
                j += 1;
            }
            i = j;
        } else {
            break;
        }
    }
    (segs, i)
}

/// The imports of one file's module `here`: module → first line.
fn imports(text: &str, here: &[String], modules: &BTreeSet<String>) -> BTreeMap<String, usize> {
    let chars: Vec<char> = text.chars().collect();
    let line_of = |at: usize| chars[..at].iter().filter(|c| **c == '\n').count() + 1;
    let mut found: BTreeMap<String, usize> = BTreeMap::new();
    // inline modules: (name, brace depth at which it closes)
    let mut inline: Vec<(String, usize)> = Vec::new();
    let mut depth = 0usize;
    let mut i = 0;
    let me = join(here);
    let note = |path: &[String], cur: &[String], at: usize, found: &mut BTreeMap<String, usize>| {
        let cur_name = join(cur);
        let children: BTreeSet<String> = modules
            .iter()
            .filter_map(|m| {
                let rest = if cur_name.is_empty() {
                    Some(m.as_str())
                } else {
                    m.strip_prefix(&cur_name).and_then(|r| r.strip_prefix("::"))
                };
                rest.filter(|r| !r.is_empty() && !r.contains("::"))
                    .map(str::to_owned)
            })
            .collect();
        if let Some(target) = resolve(path, cur, modules, &children) {
            // an inline module's paths count for its file's module
            let target = if modules.contains(&target) {
                target
            } else {
                return;
            };
            if target != me && !target.starts_with(&format!("{me}::__inline")) {
                found.entry(target).or_insert_with(|| line_of(at));
            }
        }
    };
    while i < chars.len() {
        let ch = chars[i];
        if ch == '{' {
            depth += 1;
            i += 1;
            continue;
        }
        if ch == '}' {
            depth = depth.saturating_sub(1);
            if inline.last().is_some_and(|(_, d)| *d == depth) {
                inline.pop();
            }
            i += 1;
            continue;
        }
        if !is_ident_char(ch) || (i > 0 && (is_ident_char(chars[i - 1]) || chars[i - 1] == '$')) {
            i += 1;
            continue;
        }
        // the current module, inline modules included (their paths resolve from inside them)
        let mut cur = here.to_vec();
        cur.extend(inline.iter().map(|(n, _)| format!("__inline_{n}")));
        let preceded_by_colons = {
            let mut j = i;
            while j > 0 && chars[j - 1].is_whitespace() {
                j -= 1;
            }
            j >= 2 && chars[j - 1] == ':' && chars[j - 2] == ':'
        };
        let (word_end, word) = {
            let mut j = i;
            while j < chars.len() && is_ident_char(chars[j]) {
                j += 1;
            }
            (j, chars[i..j].iter().collect::<String>())
        };
        if word == "mod" {
            let mut j = word_end;
            while j < chars.len() && chars[j].is_whitespace() {
                j += 1;
            }
            let (segs, mut k) = read_path(&chars, j);
            while k < chars.len() && chars[k].is_whitespace() {
                k += 1;
            }
            if let (Some(name), Some('{')) = (segs.first(), chars.get(k)) {
                inline.push((name.clone(), depth));
                depth += 1;
                i = k + 1;
                continue;
            }
            i = word_end;
            continue;
        }
        if word == "use" {
            // `pub use` re-exports an item as part of this module's surface, as `mod`
            // declares a child: not an import
            let before: String = chars[i.saturating_sub(16)..i].iter().collect();
            let reexport = before
                .trim_end()
                .rsplit(|c: char| c.is_whitespace() || c == ';' || c == '}' || c == '{')
                .next()
                .is_some_and(|w| w.starts_with("pub"));
            let end = chars[i..]
                .iter()
                .position(|c| *c == ';')
                .map_or(chars.len(), |p| i + p);
            let tree: String = chars[word_end..end].iter().collect();
            let tree = tree.trim_start();
            // `use ::name` names an outside crate
            if !tree.starts_with("::") && !reexport {
                for path in use_paths(tree) {
                    note(&path, &cur, i, &mut found);
                }
            }
            i = end + 1;
            continue;
        }
        if preceded_by_colons {
            i = word_end;
            continue;
        }
        let (segs, end) = read_path(&chars, i);
        if segs.len() >= 2 {
            note(&segs, &cur, i, &mut found);
        }
        i = end.max(i + 1);
    }
    found
}

/// The module graph of the crate rooted at `root`.
fn crate_graph(root: &Path) -> BTreeMap<String, Module> {
    let files = module_files(root);
    let names: BTreeSet<String> = files.keys().cloned().collect();
    let mut graph = BTreeMap::new();
    for (name, file) in &files {
        let here: Vec<String> = if name.is_empty() {
            Vec::new()
        } else {
            name.split("::").map(str::to_owned).collect()
        };
        let text = strip(&std::fs::read_to_string(file).unwrap_or_default());
        // inline modules become modules of their own while resolving (then fold into this one)
        let mut with_inline = names.clone();
        for n in declared_children(&text, true) {
            with_inline.insert(join(
                &[here.clone(), vec![format!("__inline_{n}")]].concat(),
            ));
        }
        let mut imports = imports(&text, &here, &with_inline);
        imports.retain(|m, _| names.contains(m) && m != name);
        graph.insert(
            name.clone(),
            Module {
                file: file.clone(),
                imports,
            },
        );
    }
    graph
}

/// The strongly connected components of more than one module (Tarjan's algorithm).
fn cycles(graph: &BTreeMap<String, Module>) -> Vec<BTreeSet<String>> {
    struct State<'g> {
        graph: &'g BTreeMap<String, Module>,
        index: BTreeMap<&'g str, usize>,
        low: BTreeMap<&'g str, usize>,
        stack: Vec<&'g str>,
        on_stack: BTreeSet<&'g str>,
        next: usize,
        out: Vec<BTreeSet<String>>,
    }
    fn visit<'g>(s: &mut State<'g>, v: &'g str) {
        s.index.insert(v, s.next);
        s.low.insert(v, s.next);
        s.next += 1;
        s.stack.push(v);
        s.on_stack.insert(v);
        for w in s.graph[v].imports.keys() {
            let w = w.as_str();
            if !s.index.contains_key(w) {
                visit(s, w);
                let lw = s.low[w];
                let lv = s.low.get_mut(v).expect("visited");
                *lv = (*lv).min(lw);
            } else if s.on_stack.contains(w) {
                let iw = s.index[w];
                let lv = s.low.get_mut(v).expect("visited");
                *lv = (*lv).min(iw);
            }
        }
        if s.low[v] == s.index[v] {
            let mut scc = BTreeSet::new();
            while let Some(w) = s.stack.pop() {
                s.on_stack.remove(w);
                scc.insert(w.to_owned());
                if w == v {
                    break;
                }
            }
            if scc.len() > 1 {
                s.out.push(scc);
            }
        }
    }
    let mut s = State {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        next: 0,
        out: Vec::new(),
    };
    for v in graph.keys() {
        if !s.index.contains_key(v.as_str()) {
            visit(&mut s, v);
        }
    }
    s.out
}

/// Every crate of the workspace: (package name, root file).
fn crates() -> Vec<(String, PathBuf)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut out = vec![("toolrail".to_owned(), root.join("src/main.rs"))];
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(root.join("crates"))
        .expect("crates/ is readable")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    dirs.sort();
    for dir in dirs {
        let name = dir
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default()
            .to_owned();
        for root_file in ["src/lib.rs", "src/main.rs"] {
            if dir.join(root_file).exists() {
                out.push((name.clone(), dir.join(root_file)));
            }
        }
    }
    out
}

/// What a cycle is, in words: its modules with their files, and the imports between them.
fn describe(krate: &str, graph: &BTreeMap<String, Module>, scc: &BTreeSet<String>) -> String {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let shown = |m: &str| {
        if m.is_empty() {
            "(crate root)".to_owned()
        } else {
            m.to_owned()
        }
    };
    let mut text = format!("{krate}: a cycle through {} modules:\n", scc.len());
    for m in scc {
        let module = &graph[m];
        let file = module.file.strip_prefix(root).unwrap_or(&module.file);
        for (target, line) in &module.imports {
            if scc.contains(target) {
                text.push_str(&format!(
                    "  {} ({}:{line}) imports {}\n",
                    shown(m),
                    file.display(),
                    shown(target)
                ));
            }
        }
    }
    text
}

#[test]
fn no_module_imports_another_that_imports_it_back() {
    let mut failures = Vec::new();
    let mut modules_seen = 0;
    for (krate, root) in crates() {
        let graph = crate_graph(&root);
        modules_seen += graph.len();
        for scc in cycles(&graph) {
            failures.push(describe(&krate, &graph, &scc));
        }
    }
    assert!(modules_seen > 50, "only {modules_seen} modules found");
    assert!(
        failures.is_empty(),
        "modules that import each other (move the shared item down into the module it belongs to):\n{}",
        failures.join("\n")
    );
}

#[test]
fn the_module_graph_sees_the_imports_it_is_meant_to() {
    let modules: BTreeSet<String> = ["", "a", "a::b", "a::b::c", "d"]
        .into_iter()
        .map(str::to_owned)
        .collect();
    let here = vec!["a".to_owned(), "b".to_owned()];
    let text = strip(
        "use super::X; // crate::d::Y\nuse crate::{d, a::b::c::{self, Z}};\nfn f() { c::g(); let s = \"crate::d\"; }\nmod tests { use super::*; }\n",
    );
    let mut with_inline = modules.clone();
    with_inline.insert("a::b::__inline_tests".to_owned());
    let found = imports(&text, &here, &with_inline);
    let found: Vec<&str> = found.keys().map(String::as_str).collect();
    assert_eq!(found, ["a", "a::b::c", "d"]);
    assert_eq!(
        use_paths("a::{b, c::{self, D as E}, *}"),
        vec![
            vec!["a".to_owned(), "b".to_owned()],
            vec!["a".to_owned(), "c".to_owned()],
            vec!["a".to_owned(), "c".to_owned(), "D".to_owned()],
            vec!["a".to_owned()],
        ]
    );
}
