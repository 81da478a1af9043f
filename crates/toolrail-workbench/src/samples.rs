//! The sample tool sets of `sample_schemas/`, built into the binary so the app offers them
//! wherever it runs (no source tree needed).

/// One sample tool set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sample {
    /// The file name in `sample_schemas/`.
    pub file: &'static str,
    /// The envelope the sample is meant for (`openai` unless its README says otherwise).
    pub format: toolrail_tools::envelope::Format,
    /// The text (JSON, or Python function definitions for `.py` samples).
    pub text: &'static str,
}

impl Sample {
    /// The sample's `description` field (a Python sample's module docstring), or "" when it has
    /// none or the text does not load.
    pub fn description(&self) -> String {
        toolrail_tools::toolset::ToolSet::from_text(self.text)
            .ok()
            .and_then(|set| set.description)
            .unwrap_or_default()
    }
}

use toolrail_tools::envelope::Format;

/// Every sample, the default one (`weather.json`) first.
pub const SAMPLES: [Sample; 7] = [
    Sample {
        file: "weather.json",
        format: Format::OpenAi,
        text: include_str!("../../../sample_schemas/weather.json"),
    },
    Sample {
        file: "planner_get_inputs.json",
        format: Format::OpenAi,
        text: include_str!("../../../sample_schemas/planner_get_inputs.json"),
    },
    Sample {
        file: "calculator.json",
        format: Format::OpenAi,
        text: include_str!("../../../sample_schemas/calculator.json"),
    },
    Sample {
        file: "memory_llama31.json",
        format: Format::Llama3,
        text: include_str!("../../../sample_schemas/memory_llama31.json"),
    },
    Sample {
        file: "bfcl_excerpt.json",
        format: Format::OpenAi,
        text: include_str!("../../../sample_schemas/bfcl_excerpt.json"),
    },
    Sample {
        file: "outline_recursive.json",
        format: Format::OpenAi,
        text: include_str!("../../../sample_schemas/outline_recursive.json"),
    },
    Sample {
        file: "python_functions.py",
        format: Format::Pythonic,
        text: include_str!("../../../sample_schemas/python_functions.py"),
    },
];

/// The sample with this file name.
pub fn find(file: &str) -> Option<&'static Sample> {
    SAMPLES.iter().find(|s| s.file == file)
}

/// The recorded demo run shipped with the app (`assets/demo_run.json` at the repository root: the test model,
/// Gemma 3 270M, calling `get_weather` under the default sample's grammar), replayed in a fresh
/// workspace so the Generation and Transcript panes show tokens, candidates and stacks before any
/// model is loaded.
pub const DEMO_RUN: &str = include_str!("../../../assets/demo_run.json");

/// How many tokens of the demo run are shown when it opens: up to `"unit":`, a step whose
/// candidates include masked ones and whose four stacks lead to the unit's enum.
pub const DEMO_POSITION: usize = 30;

/// The demo run as a transcript.
pub fn demo_run() -> Result<crate::transcript::Transcript, crate::transcript::TranscriptError> {
    crate::transcript::Transcript::from_json(DEMO_RUN, "the bundled demo run")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_sample_loads_and_has_a_description() {
        for s in &SAMPLES {
            toolrail_tools::toolset::ToolSet::from_text(s.text)
                .unwrap_or_else(|e| panic!("{}: {e}", s.file));
            assert!(!s.description().is_empty(), "{} has no description", s.file);
        }
    }

    #[test]
    fn the_demo_run_loads_and_its_shown_token_has_stacks() {
        let demo = demo_run().unwrap();
        assert!(DEMO_POSITION > 0 && DEMO_POSITION <= demo.tokens.len());
        let shown = &demo.tokens[DEMO_POSITION - 1];
        assert!(shown.stacks.as_ref().is_some_and(|s| !s.stacks.is_empty()));
        assert!(shown.before.iter().any(|c| c.masked));
    }
}
