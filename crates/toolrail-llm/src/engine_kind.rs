//! Which engine masks a run's tokens: the one name every record, request, bench and command line
//! shares (spelled in files and on the command line as [`EngineKind::name`]).

/// Which engine masks the tokens.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EngineKind {
    /// toolrail's own masks (token trie + memoized recognizer).
    Toolrail,
    /// llama.cpp's grammar sampler over the whole vocabulary.
    Llama,
    /// llguidance over the whole vocabulary, on the same grammar (or the request's JSON Schema).
    Llguidance,
    /// No grammar: the model's own choice.
    None,
}

impl std::fmt::Display for EngineKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl EngineKind {
    /// Every engine, in the order benches and menus list them.
    pub const ALL: [EngineKind; 4] = [
        EngineKind::Toolrail,
        EngineKind::Llama,
        EngineKind::Llguidance,
        EngineKind::None,
    ];

    /// The engine's name as written in transcripts and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            EngineKind::Toolrail => "toolrail",
            EngineKind::Llama => "llama",
            EngineKind::Llguidance => "llguidance",
            EngineKind::None => "none",
        }
    }

    /// The engine a name ([`EngineKind::name`]) stands for.
    pub fn from_name(name: &str) -> Option<EngineKind> {
        EngineKind::ALL.into_iter().find(|kind| kind.name() == name)
    }

    /// Whether the engine constrains the tokens (all but `none`).
    pub fn constrains(self) -> bool {
        self != EngineKind::None
    }
}

#[cfg(test)]
mod tests {
    use super::EngineKind;

    #[test]
    fn names_round_trip_and_match_serde() {
        for kind in EngineKind::ALL {
            assert_eq!(EngineKind::from_name(kind.name()), Some(kind));
            let json = serde_json::to_string(&kind).unwrap();
            assert_eq!(json, format!("\"{}\"", kind.name()));
        }
        assert_eq!(EngineKind::from_name("gpt"), None);
    }
}
