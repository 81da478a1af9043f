//! Which schema location a generated rule stands for, so that an error found by the grammar can
//! say where in the JSON value it is (`/arguments/sortBy`) instead of naming a rule.

/// The schema location a rule was generated for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RuleLocation {
    /// The document's label given to the converter (`args-list-files`; empty for a lone schema).
    pub document: String,
    /// The JSON pointer into that schema document (`/properties/sortBy`; empty for its root).
    pub pointer: String,
}

impl RuleLocation {
    /// Reads the `label#pointer` comment the converter gives a rule; `None` for comments that
    /// are not a location (notes such as "members still to come").
    pub(crate) fn from_comment(comment: &str) -> Option<Self> {
        let (document, pointer) = comment.split_once('#')?;
        (pointer.is_empty() || pointer.starts_with('/')).then(|| RuleLocation {
            document: document.to_owned(),
            pointer: pointer.to_owned(),
        })
    }

    /// Where in a valid JSON value this location's instances sit, as a JSON pointer with `*`
    /// for any array index or member name (`/properties/tags/items` → `/tags/*`). `None` when
    /// the schema location says nothing about it (inside `$defs`, `not`, …).
    pub fn instance_pointer(&self) -> Option<String> {
        let mut out = String::new();
        let mut tokens = self.pointer.split('/').skip(1);
        while let Some(token) = tokens.next() {
            match token {
                "properties" => {
                    out.push('/');
                    out.push_str(tokens.next()?);
                }
                "items"
                | "additionalItems"
                | "contains"
                | "additionalProperties"
                | "unevaluatedProperties"
                | "unevaluatedItems" => out.push_str("/*"),
                "prefixItems" => {
                    out.push('/');
                    out.push_str(tokens.next()?);
                }
                "patternProperties" => {
                    tokens.next()?;
                    out.push_str("/*");
                }
                "anyOf" | "oneOf" | "allOf" | "dependentSchemas" => {
                    tokens.next()?;
                }
                "if" | "then" | "else" => {}
                _ => return None,
            }
        }
        Some(out)
    }
}

/// The locations of the rules in `table`, by rule name.
pub(crate) fn rule_locations(table: &crate::rules::RuleTable) -> Vec<(String, RuleLocation)> {
    table
        .locations()
        .into_iter()
        .filter_map(|(name, comment)| Some((name, RuleLocation::from_comment(&comment)?)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::RuleLocation;

    fn instance(pointer: &str) -> Option<String> {
        RuleLocation {
            document: String::new(),
            pointer: pointer.to_owned(),
        }
        .instance_pointer()
    }

    #[test]
    fn schema_pointers_become_instance_pointers() {
        assert_eq!(instance("/properties/sortBy").as_deref(), Some("/sortBy"));
        assert_eq!(
            instance("/properties/tags/items/anyOf/1").as_deref(),
            Some("/tags/*")
        );
        assert_eq!(instance("/prefixItems/2").as_deref(), Some("/2"));
        assert_eq!(instance("").as_deref(), Some(""));
        assert_eq!(instance("/$defs/unit"), None);
    }
}
