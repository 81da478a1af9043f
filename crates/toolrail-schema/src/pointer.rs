//! JSON pointers (RFC 6901): `/properties/a~1b/0` names a place in a JSON document. Keys are
//! escaped (`~` as `~0`, `/` as `~1`) in exactly one place, [`JsonPointer::push_key`], so that
//! every error, warning and location that names a place spells it the same way.

use std::fmt;

/// A JSON pointer in its escaped text form (`""` for the whole document, else `/`-separated
/// segments). Built by pushing keys and indices, which escapes them; read back with
/// [`JsonPointer::segments`], which unescapes them.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct JsonPointer(String);

/// Text that is not a JSON pointer: it is neither empty nor starts with `/`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not a JSON pointer (it must be empty or start with '/')")]
pub struct NotAPointer(pub String);

impl JsonPointer {
    /// The pointer to the whole document (`""`).
    pub fn root() -> Self {
        Self(String::new())
    }

    /// Reads a pointer's escaped text. A `~` not followed by `0` or `1` is kept as it is (as
    /// lenient readers of `$ref` take it), so any text starting with `/` is a pointer.
    pub fn parse(text: &str) -> Result<Self, NotAPointer> {
        if text.is_empty() || text.starts_with('/') {
            Ok(Self(text.to_owned()))
        } else {
            Err(NotAPointer(text.to_owned()))
        }
    }

    /// Appends an object key, escaping `~` and `/`.
    pub fn push_key(&mut self, key: &str) {
        self.0.push('/');
        for c in key.chars() {
            match c {
                '~' => self.0.push_str("~0"),
                '/' => self.0.push_str("~1"),
                c => self.0.push(c),
            }
        }
    }

    /// Appends an array index.
    pub fn push_index(&mut self, index: usize) {
        use fmt::Write as _;
        // writing into a String cannot fail
        let _ = write!(self.0, "/{index}");
    }

    /// This pointer with an object key appended.
    pub fn with_key(&self, key: &str) -> Self {
        let mut p = self.clone();
        p.push_key(key);
        p
    }

    /// This pointer with an array index appended.
    pub fn with_index(&self, index: usize) -> Self {
        let mut p = self.clone();
        p.push_index(index);
        p
    }

    /// Whether this is the pointer to the whole document.
    pub fn is_root(&self) -> bool {
        self.0.is_empty()
    }

    /// The pointer as a URI fragment, `#` and the escaped text (`#`, `#/properties/a`): how
    /// the converter names a place in a schema document.
    pub fn fragment(&self) -> String {
        format!("#{}", self.0)
    }

    /// The escaped text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The segments, unescaped (`~1` → `/`, `~0` → `~`).
    pub fn segments(&self) -> impl Iterator<Item = String> + '_ {
        self.0.split('/').skip(1).map(unescape)
    }
}

/// One segment's text unescaped (`~1` → `/`, then `~0` → `~`).
pub fn unescape(segment: &str) -> String {
    segment.replace("~1", "/").replace("~0", "~")
}

/// Serialized as its escaped text (`"/properties/a~1b"`).
impl serde::Serialize for JsonPointer {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.0)
    }
}

impl fmt::Display for JsonPointer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::str::FromStr for JsonPointer {
    type Err = NotAPointer;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Self::parse(text)
    }
}

impl AsRef<str> for JsonPointer {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl From<JsonPointer> for String {
    fn from(p: JsonPointer) -> String {
        p.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_escaped_and_read_back() {
        let mut p = JsonPointer::root();
        assert!(p.is_root());
        p.push_key("a/b");
        p.push_key("m~n");
        p.push_index(3);
        assert_eq!(p.to_string(), "/a~1b/m~0n/3");
        assert_eq!(p.segments().collect::<Vec<_>>(), ["a/b", "m~n", "3"]);
        assert_eq!(JsonPointer::parse("/a~1b/m~0n/3"), Ok(p.clone()));
        assert_eq!(p.with_key("~1").as_str(), "/a~1b/m~0n/3/~01");
        assert!(JsonPointer::parse("a").is_err());
        assert_eq!(unescape("~01"), "~1");
    }
}
