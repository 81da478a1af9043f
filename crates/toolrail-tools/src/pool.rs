//! The pool filter of seed 001: escape-hatch tools leave the pool (and so the grammar) unless
//! the query asks for them.
//!
//! Some tools are always injected into a planner's pool as escape hatches (synthesise a new
//! executor, ask for the user's location, undo the last turn, provider-specific tools). With a
//! grammar active the model picks them when it should not. Seed 001 drops them per query:
//!
//! | tool | dropped when |
//! | --- | --- |
//! | `request_new_executor` | the pool has 3 or more canonical tools (it is a fallback) |
//! | `request_location_from_user` | the query has no proximity marker (`near me`, `nearby`, `here`, `qua`) |
//! | `undo_last_turn` | the query has no undo marker (`annulla`, `rollback`, `undo`) |
//! | `*_google_workspace` | the query mentions none of `google`, `drive`, `gmail` |
//!
//! Markers match case-insensitively on word boundaries (so `qua` does not match inside
//! `qualcosa`, the false positive the seed paid a bench round for); the words of a
//! multi-word marker may be separated by any whitespace. [`filter_pool`] is a pure function
//! and returns a [`PoolDecision`] per tool with the [`Reason`], so a UI can show why each tool
//! was kept or dropped and where in the query the marker was found.

use std::ops::Range;

use regex::Regex;
use serde::{Deserialize, Serialize};

/// When a tool stays in the pool.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum PoolRule {
    /// An ordinary tool: always kept, and counted as canonical.
    Canonical,
    /// An escape hatch kept only when the query contains one of these markers.
    RequiresMarker {
        /// Words or phrases, matched case-insensitively on word boundaries.
        markers: Vec<String>,
    },
    /// A fallback kept only while the pool has fewer than `threshold` canonical tools.
    FallbackBelow {
        /// The number of canonical tools from which the fallback is dropped.
        threshold: usize,
    },
}

/// A tool of the pool with its rule.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PoolEntry {
    /// The tool's name.
    pub name: String,
    /// When it is kept.
    pub rule: PoolRule,
}

impl PoolEntry {
    /// An entry with an explicit rule.
    pub fn new(name: impl Into<String>, rule: PoolRule) -> Self {
        Self {
            name: name.into(),
            rule,
        }
    }

    /// A canonical (always kept) tool.
    pub fn canonical(name: impl Into<String>) -> Self {
        Self::new(name, PoolRule::Canonical)
    }
}

/// Why a tool was kept or dropped.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Reason {
    /// A canonical tool.
    Canonical,
    /// The query contains this marker at this byte span.
    MarkerFound {
        /// The marker as configured.
        marker: String,
        /// Where it matched in the query.
        span: Range<usize>,
    },
    /// The query contains none of the markers.
    NoMarker {
        /// The markers that were looked for.
        markers: Vec<String>,
    },
    /// The pool has fewer canonical tools than the threshold: the fallback stays.
    FewCanonical {
        /// Canonical tools in the pool.
        canonical: usize,
        /// The rule's threshold.
        threshold: usize,
    },
    /// The pool has enough canonical tools: the fallback goes.
    EnoughCanonical {
        /// Canonical tools in the pool.
        canonical: usize,
        /// The rule's threshold.
        threshold: usize,
    },
}

impl std::fmt::Display for Reason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Canonical => write!(f, "canonical tool"),
            Self::MarkerFound { marker, span } => {
                write!(
                    f,
                    "query mentions \"{marker}\" (bytes {}..{})",
                    span.start, span.end
                )
            }
            Self::NoMarker { markers } => {
                write!(f, "query mentions none of: {}", markers.join(", "))
            }
            Self::FewCanonical {
                canonical,
                threshold,
            } => write!(
                f,
                "only {canonical} canonical tools (< {threshold}): fallback kept"
            ),
            Self::EnoughCanonical {
                canonical,
                threshold,
            } => write!(
                f,
                "{canonical} canonical tools (>= {threshold}): fallback not needed"
            ),
        }
    }
}

/// The verdict on one tool.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PoolDecision {
    /// The tool's name.
    pub name: String,
    /// Whether it stays in the pool.
    pub kept: bool,
    /// Why.
    pub reason: Reason,
}

/// Decides, for each tool in `tools` (in order), whether it stays in the pool for `query`.
pub fn filter_pool(tools: &[PoolEntry], query: &str) -> Vec<PoolDecision> {
    let canonical = tools
        .iter()
        .filter(|t| t.rule == PoolRule::Canonical)
        .count();
    tools
        .iter()
        .map(|tool| {
            let (kept, reason) = match &tool.rule {
                PoolRule::Canonical => (true, Reason::Canonical),
                PoolRule::FallbackBelow { threshold } => {
                    let threshold = *threshold;
                    if canonical < threshold {
                        (
                            true,
                            Reason::FewCanonical {
                                canonical,
                                threshold,
                            },
                        )
                    } else {
                        (
                            false,
                            Reason::EnoughCanonical {
                                canonical,
                                threshold,
                            },
                        )
                    }
                }
                PoolRule::RequiresMarker { markers } => {
                    let found = markers
                        .iter()
                        .find_map(|m| find_marker(query, m).map(|span| (m.clone(), span)));
                    match found {
                        Some((marker, span)) => (true, Reason::MarkerFound { marker, span }),
                        None => (
                            false,
                            Reason::NoMarker {
                                markers: markers.clone(),
                            },
                        ),
                    }
                }
            };
            PoolDecision {
                name: tool.name.clone(),
                kept,
                reason,
            }
        })
        .collect()
}

/// The names of the kept tools, in order.
pub fn kept_names(decisions: &[PoolDecision]) -> Vec<&str> {
    decisions
        .iter()
        .filter(|d| d.kept)
        .map(|d| d.name.as_str())
        .collect()
}

/// Where `marker` first occurs in `query` as whole words (case-insensitive; the words of a
/// multi-word marker may be separated by any whitespace). Word boundaries apply at an edge
/// only when the marker's character there is a word character, so `notion.so` or `c++`
/// work too. Empty markers never match.
pub fn find_marker(query: &str, marker: &str) -> Option<Range<usize>> {
    let words: Vec<&str> = marker.split_whitespace().collect();
    let first = words.first()?.chars().next()?;
    let last = words.last()?.chars().last()?;
    let body = words
        .iter()
        .map(|w| regex::escape(w))
        .collect::<Vec<_>>()
        .join(r"\s+");
    let is_word = |c: char| c.is_alphanumeric() || c == '_';
    let pattern = format!(
        "(?i){}{}{}",
        if is_word(first) { r"\b" } else { "" },
        body,
        if is_word(last) { r"\b" } else { "" },
    );
    let re = Regex::new(&pattern).ok()?;
    re.find(query).map(|m| m.range())
}

/// How tools are classified: exact names and name suffixes (provider qualifiers).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PoolRules {
    /// Rules for tools with exactly this name.
    pub by_name: Vec<(String, PoolRule)>,
    /// Marker lists for tools whose name ends with this suffix (e.g. `_google_workspace`).
    pub by_suffix: Vec<(String, Vec<String>)>,
}

impl Default for PoolRules {
    /// The seed's table.
    fn default() -> Self {
        Self::seed001()
    }
}

impl PoolRules {
    /// The rules of seed 001: see the module documentation. The seed names the markers
    /// `near me`, `here`, `nearby` (and `qua` in its false-positive story), `annulla`,
    /// `rollback`, and `google`, `drive`, `gmail`; `undo` is added for English queries.
    pub fn seed001() -> Self {
        let words = |list: &[&str]| list.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        Self {
            by_name: vec![
                (
                    "request_new_executor".to_owned(),
                    PoolRule::FallbackBelow { threshold: 3 },
                ),
                (
                    "request_location_from_user".to_owned(),
                    PoolRule::RequiresMarker {
                        markers: words(&["near me", "nearby", "here", "qua"]),
                    },
                ),
                (
                    "undo_last_turn".to_owned(),
                    PoolRule::RequiresMarker {
                        markers: words(&["annulla", "rollback", "undo"]),
                    },
                ),
            ],
            by_suffix: vec![(
                "_google_workspace".to_owned(),
                words(&["google", "drive", "gmail"]),
            )],
        }
    }

    /// Adds a provider qualifier (one line per provider, as in the seed).
    pub fn with_suffix(mut self, suffix: &str, markers: &[&str]) -> Self {
        self.by_suffix.push((
            suffix.to_owned(),
            markers.iter().map(|s| (*s).to_owned()).collect(),
        ));
        self
    }

    /// The rule for a tool name: exact names first, then suffixes, else canonical.
    pub fn rule_for(&self, name: &str) -> PoolRule {
        if let Some((_, rule)) = self.by_name.iter().find(|(n, _)| n == name) {
            return rule.clone();
        }
        if let Some((_, markers)) = self
            .by_suffix
            .iter()
            .find(|(s, _)| name.ends_with(s.as_str()))
        {
            return PoolRule::RequiresMarker {
                markers: markers.clone(),
            };
        }
        PoolRule::Canonical
    }

    /// Pool entries for these tool names.
    pub fn entries<S: AsRef<str>>(&self, names: &[S]) -> Vec<PoolEntry> {
        names
            .iter()
            .map(|n| PoolEntry::new(n.as_ref(), self.rule_for(n.as_ref())))
            .collect()
    }
}
