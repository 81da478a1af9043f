//! Replaying a saved transcript step by step, without a model: a cursor over its tokens.

use std::path::{Path, PathBuf};

use crate::transcript::explain::{Line, explain};
use crate::transcript::{Stop, TokenRecord, Transcript, TranscriptError};

/// A transcript opened for replay; `position` tokens of it are shown (0 ..= its length).
#[derive(Clone, Debug, PartialEq)]
pub struct Replay {
    /// The transcript.
    pub transcript: Transcript,
    /// The file it came from, if any.
    pub path: Option<PathBuf>,
    /// True for the recorded demo run bundled with the app (labelled as such in the panes).
    pub demo: bool,
    /// The run of this session it replays (`None` for a file or the demo run).
    pub run: Option<toolrail_llm::worker::RunId>,
    position: usize,
    /// What the run says about itself ([`explain`]), worked out once: a replay never changes.
    explanation: Vec<Line>,
}

impl Replay {
    /// A replay of `transcript`, at its start.
    pub fn new(transcript: Transcript, path: Option<PathBuf>) -> Replay {
        Replay {
            explanation: explain(&transcript),
            transcript,
            path,
            demo: false,
            run: None,
            position: 0,
        }
    }

    /// Opens a transcript file for replay (checks the version; errors name the file and
    /// line:column).
    pub fn open(path: &Path) -> Result<Replay, TranscriptError> {
        Ok(Self::new(Transcript::load(path)?, Some(path.to_path_buf())))
    }

    /// How many tokens the transcript holds.
    pub fn len(&self) -> usize {
        self.transcript.tokens.len()
    }

    /// True when the transcript has no tokens.
    pub fn is_empty(&self) -> bool {
        self.transcript.tokens.is_empty()
    }

    /// How many tokens are shown.
    pub fn position(&self) -> usize {
        self.position
    }

    /// Shows the first `position` tokens (clamped to the length).
    pub fn seek(&mut self, position: usize) {
        self.position = position.min(self.len());
    }

    /// Shows one more token; false at the end.
    pub fn forward(&mut self) -> bool {
        if self.position < self.len() {
            self.position += 1;
            true
        } else {
            false
        }
    }

    /// Shows one token less; false at the start.
    pub fn back(&mut self) -> bool {
        if self.position > 0 {
            self.position -= 1;
            true
        } else {
            false
        }
    }

    /// True when every token is shown.
    pub fn at_end(&self) -> bool {
        self.position == self.len()
    }

    /// The tokens shown so far.
    pub fn shown(&self) -> &[TokenRecord] {
        &self.transcript.tokens[..self.position]
    }

    /// The last token shown (the one whose candidates and stacks are on display).
    pub fn current(&self) -> Option<&TokenRecord> {
        self.shown().last()
    }

    /// The text generated up to the position (the transcript's exact output at the end).
    pub fn text(&self) -> String {
        if self.at_end() {
            self.transcript.output.clone()
        } else {
            self.shown().iter().map(|t| t.piece.as_str()).collect()
        }
    }

    /// Why the run stopped, once the replay reaches the end.
    pub fn stop(&self) -> Option<&Stop> {
        self.at_end().then_some(&self.transcript.stop)
    }

    /// What the whole run says about itself: why it stopped, what the grammar, the engines and
    /// the server did, and the verdict ([`explain`]).
    pub fn explanation(&self) -> &[Line] {
        &self.explanation
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transcript::{ModelInfo, Sampling, Totals};

    fn token(index: u32, piece: &str) -> TokenRecord {
        TokenRecord {
            index,
            id: index + 10,
            piece: piece.into(),
            piece_hex: None,
            forced: false,
            budget_replaced: None,
            budget: None,
            before: Vec::new(),
            after: Vec::new(),
            allowed: 1,
            stacks: None,
            decode_ms: 1.0,
            mask_ms: 0.1,
            flag: None,
            sampled: Vec::new(),
            disagreements: Vec::new(),
            mask_difference: None,
            other_masks: Vec::new(),
            lazy: None,
            thinking: None,
        }
    }

    #[test]
    fn the_cursor_moves_within_the_tokens() {
        let transcript = Transcript {
            version: crate::transcript::TRANSCRIPT_VERSION,
            toolrail_version: "0".into(),
            created_unix: 0,
            model: ModelInfo::default(),
            prompt: "p".into(),
            tools: None,
            format: None,
            grammar: None,
            engine: toolrail_llm::worker::EngineKind::None,
            server: None,
            server_run: None,
            sampling: Sampling::default(),
            tokens: vec![token(0, "ab"), token(1, "c")],
            output: "abc".into(),
            stop: Stop::EndOfGeneration,
            validation: None,
            totals: Totals::default(),
            settings: None,
            template: None,
            errors: Vec::new(),
        };
        let mut r = Replay::new(transcript, None);
        assert!(!r.back() && r.current().is_none() && r.text().is_empty());
        assert!(r.forward());
        assert_eq!((r.text().as_str(), r.stop()), ("ab", None));
        assert!(r.forward() && !r.forward());
        assert_eq!(r.current().map(|t| t.index), Some(1));
        assert_eq!(r.stop(), Some(&Stop::EndOfGeneration));
        r.seek(1);
        assert_eq!(r.shown().len(), 1);
        r.seek(99);
        assert!(r.at_end());
    }
}
