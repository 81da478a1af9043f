//! Two runs of one request compared, as a person debugging "the server said something else"
//! asks: where their tokens part, what each run's probabilities were there (a near tie is
//! decided by the smallest difference in the logits), how far their probabilities drift even
//! where they agree, and which settings explain it (flash attention, batch sizes, cache types,
//! a cached prompt, sampling) — from the settings each transcript recorded.

use serde::Serialize;

use super::Transcript;
use toolrail_llm::record::{Candidate, Sampling, TokenRecord};
use toolrail_llm::settings::{Backend, Effect, LogitSettings, SettingDifference, differences};

/// Probabilities closer than this at the step where two runs part make the step a near tie.
pub const NEAR_TIE: f32 = 0.05;

/// Probability differences below this are rounding in the transcripts, not a difference in
/// the logits.
pub const SAME_PROBABILITY: f32 = 1e-4;

/// One run's side of the step where two runs part.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PartingSide {
    /// The token the run took (`None`: the run had ended).
    pub token: Option<Candidate>,
    /// The most likely token it did not take, when recorded.
    pub runner_up: Option<Candidate>,
}

/// The first step where two runs' tokens differ.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Parting {
    /// The step (0-based index in the output).
    pub index: usize,
    /// The first run's side.
    pub first: PartingSide,
    /// The second run's side.
    pub second: PartingSide,
}

/// The largest probability difference of one token over the steps both runs share.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Drift {
    /// The step.
    pub index: usize,
    /// The token.
    pub id: u32,
    /// Its piece.
    pub piece: String,
    /// Its probability in the first run (before the mask).
    pub first: f32,
    /// Its probability in the second run.
    pub second: f32,
}

impl Drift {
    /// The absolute difference.
    pub fn size(&self) -> f32 {
        (self.first - self.second).abs()
    }
}

/// Two runs compared.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RunComparison {
    /// Where each run was computed.
    pub engines: [Backend; 2],
    /// True when both runs had the same prompt (else they are not runs of one request).
    pub same_prompt: bool,
    /// Each run's token count.
    pub lengths: [usize; 2],
    /// Tokens the runs share from the start.
    pub common: usize,
    /// Where they part (`None`: the same tokens).
    pub parting: Option<Parting>,
    /// The largest probability difference over the shared steps (`None`: no candidate recorded
    /// in both).
    pub drift: Option<Drift>,
    /// Sampling parameters that differ, in words.
    pub sampling: Vec<String>,
    /// The settings that differ (`None`: a transcript recorded none).
    pub settings: Option<Vec<SettingDifference>>,
}

/// What a comparison reads of one run: a transcript, or a run still in the app.
#[derive(Clone, Copy, Debug)]
pub struct RunSide<'a> {
    /// Its tokens.
    pub tokens: &'a [TokenRecord],
    /// Its prompt.
    pub prompt: &'a str,
    /// Its sampling.
    pub sampling: &'a Sampling,
    /// What its logits were computed with.
    pub settings: Option<&'a LogitSettings>,
    /// The server it ran on (older transcripts record no settings).
    pub server: Option<&'a str>,
}

impl<'a> From<&'a Transcript> for RunSide<'a> {
    fn from(t: &'a Transcript) -> Self {
        RunSide {
            tokens: &t.tokens,
            prompt: &t.prompt,
            sampling: &t.sampling,
            settings: t.settings.as_ref(),
            server: t.server.as_deref(),
        }
    }
}

impl RunComparison {
    /// Compares `first` with `second`.
    pub fn of(first: &Transcript, second: &Transcript) -> RunComparison {
        RunComparison::between(first.into(), second.into())
    }

    /// Compares two runs.
    pub fn between(first: RunSide<'_>, second: RunSide<'_>) -> RunComparison {
        let common = first
            .tokens
            .iter()
            .zip(second.tokens)
            .take_while(|(a, b)| a.id == b.id)
            .count();
        let differ = common < first.tokens.len() || common < second.tokens.len();
        let parting = differ.then(|| Parting {
            index: common,
            first: side(first.tokens.get(common)),
            second: side(second.tokens.get(common)),
        });
        let engine = |t: &RunSide<'_>| match (t.settings, t.server) {
            (Some(settings), _) => settings.engine.clone(),
            // An older transcript names its server in words: `llama-server b… at URL`.
            (None, Some(server)) => Backend::Server {
                url: server.rsplit(" at ").next().unwrap_or(server).to_owned(),
            },
            (None, None) => Backend::InProcess,
        };
        RunComparison {
            engines: [engine(&first), engine(&second)],
            same_prompt: first.prompt == second.prompt,
            lengths: [first.tokens.len(), second.tokens.len()],
            common,
            parting,
            drift: drift(first.tokens, second.tokens, common),
            sampling: sampling_differences(first.sampling, second.sampling),
            settings: match (first.settings, second.settings) {
                (Some(a), Some(b)) => Some(differences(a, b)),
                _ => None,
            },
        }
    }

    /// True when the runs took the same tokens.
    pub fn same_tokens(&self) -> bool {
        self.parting.is_none()
    }

    /// The comparison in sentences, most telling first: where the runs part, whether it was a
    /// near tie, how far the probabilities drift, and what explains it.
    pub fn explanation(&self) -> Vec<String> {
        let mut lines = Vec::new();
        if !self.same_prompt {
            lines.push(
                "The prompts differ: these are not runs of the same request, and nothing below \
                 can be blamed on the engines."
                    .to_owned(),
            );
        }
        match &self.parting {
            None => lines.push(format!("The same {} tokens.", self.common)),
            Some(p) => {
                lines.push(format!(
                    "The same first {} tokens; at token {} the first run {} and the second {}.",
                    self.common,
                    p.index,
                    took(&p.first),
                    took(&p.second)
                ));
                if let Some(gap) = near_tie(&p.first).or(near_tie(&p.second)) {
                    lines.push(format!(
                        "A near tie: the two most likely tokens were {gap:.3} apart, so the \
                         smallest difference in the logits decides it."
                    ));
                }
            }
        }
        match &self.drift {
            Some(d) if d.size() >= SAME_PROBABILITY => lines.push(format!(
                "Over the shared tokens the probabilities differ by up to {:.4} (token {}, {:?}: \
                 {:.4} in the first run, {:.4} in the second): the logits are not the same.",
                d.size(),
                d.index,
                d.piece,
                d.first,
                d.second
            )),
            Some(_) => lines.push(
                "Over the shared tokens the probabilities agree to 4 decimal places.".to_owned(),
            ),
            None => {}
        }
        if !self.sampling.is_empty() {
            lines.push(format!("Sampling differs: {}.", self.sampling.join("; ")));
        }
        match &self.settings {
            None => lines.push(
                "A transcript records no settings (written by an older toolrail): what the \
                 logits were computed with is unknown."
                    .to_owned(),
            ),
            Some(diffs) => {
                let telling: Vec<String> = diffs
                    .iter()
                    .filter(|d| d.effect != Effect::None && !d.unknown)
                    .map(ToString::to_string)
                    .collect();
                let unknown: Vec<String> = diffs
                    .iter()
                    .filter(|d| d.effect != Effect::None && d.unknown)
                    .map(ToString::to_string)
                    .collect();
                if !unknown.is_empty() {
                    lines.push(format!(
                        "Not known on both sides, so they may differ: {}.",
                        unknown.join("; ")
                    ));
                }
                if telling.is_empty() && unknown.is_empty() {
                    lines.push(
                        "The settings that change logits agree (flash attention, batch sizes, \
                         cache types, GPU layers, cached prompt)."
                            .to_owned(),
                    );
                } else if !telling.is_empty() {
                    lines.push(format!(
                        "Settings that change the logits differ: {}.",
                        telling.join("; ")
                    ));
                }
                for d in diffs.iter().filter(|d| d.effect == Effect::None) {
                    lines.push(format!("Also: {d}."));
                }
                if diffs
                    .iter()
                    .any(|d| d.first.contains("assumed") || d.second.contains("assumed"))
                {
                    lines.push(
                        "llama-server does not report flash attention, batch sizes or cache \
                         types: state the flags it was started with (`flags` in its \
                         models.toml entry, or --server-flags) to replace what is assumed."
                            .to_owned(),
                    );
                }
            }
        }
        lines
    }
}

fn side(record: Option<&TokenRecord>) -> PartingSide {
    let Some(record) = record else {
        return PartingSide {
            token: None,
            runner_up: None,
        };
    };
    let probability = record
        .before
        .iter()
        .find(|c| c.id == record.id)
        .map_or(f32::NAN, |c| c.probability);
    PartingSide {
        token: Some(Candidate {
            id: record.id,
            piece: record.piece.clone(),
            probability,
            masked: false,
        }),
        runner_up: record.before.iter().find(|c| c.id != record.id).cloned(),
    }
}

fn took(side: &PartingSide) -> String {
    match &side.token {
        None => "had ended".to_owned(),
        Some(t) if t.probability.is_nan() => format!("took {:?} (id {})", t.piece, t.id),
        Some(t) => format!(
            "took {:?} (id {}, probability {:.3})",
            t.piece, t.id, t.probability
        ),
    }
}

/// How far apart the taken token and the runner-up were, when they are within [`NEAR_TIE`].
fn near_tie(side: &PartingSide) -> Option<f32> {
    let (token, other) = (side.token.as_ref()?, side.runner_up.as_ref()?);
    let gap = (token.probability - other.probability).abs();
    (gap < NEAR_TIE).then_some(gap)
}

/// The largest difference of one token's probability before the mask over the first `common`
/// steps, among the tokens both runs recorded.
fn drift(a: &[TokenRecord], b: &[TokenRecord], common: usize) -> Option<Drift> {
    let mut best: Option<Drift> = None;
    for (index, (ra, rb)) in a.iter().zip(b).take(common).enumerate() {
        for ca in &ra.before {
            let Some(cb) = rb.before.iter().find(|c| c.id == ca.id) else {
                continue;
            };
            let d = Drift {
                index,
                id: ca.id,
                piece: ca.piece.clone(),
                first: ca.probability,
                second: cb.probability,
            };
            if best.as_ref().is_none_or(|b| d.size() > b.size()) {
                best = Some(d);
            }
        }
    }
    best
}

fn sampling_differences(x: &Sampling, y: &Sampling) -> Vec<String> {
    let mut out = Vec::new();
    let mut field = |name: &str, p: String, q: String| {
        if p != q {
            out.push(format!("{name} {p} in the first run, {q} in the second"));
        }
    };
    field(
        "temperature",
        x.temperature.to_string(),
        y.temperature.to_string(),
    );
    // With greedy choice on both sides the filters and the seed change nothing.
    if x.temperature > 0.0 || y.temperature > 0.0 {
        field("top-k", x.top_k.to_string(), y.top_k.to_string());
        field("top-p", x.top_p.to_string(), y.top_p.to_string());
        field("min-p", x.min_p.to_string(), y.min_p.to_string());
        field("seed", x.seed.to_string(), y.seed.to_string());
    }
    field(
        "repeat penalty",
        x.repeat_penalty.to_string(),
        y.repeat_penalty.to_string(),
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use toolrail_llm::settings::{CacheType, FlashAttention, Known, LogitSettings, PromptSplit};

    fn record(index: u32, id: u32, before: &[(u32, f32)]) -> TokenRecord {
        TokenRecord {
            index,
            id,
            piece: format!("t{id}"),
            piece_hex: None,
            forced: false,
            budget_replaced: None,
            budget: None,
            before: before
                .iter()
                .map(|&(id, probability)| Candidate {
                    id,
                    piece: format!("t{id}"),
                    probability,
                    masked: false,
                })
                .collect(),
            after: Vec::new(),
            allowed: 0,
            stacks: None,
            decode_ms: 0.0,
            mask_ms: 0.0,
            flag: None,
            sampled: Vec::new(),
            disagreements: Vec::new(),
            mask_difference: None,
            other_masks: Vec::new(),
            lazy: None,
            thinking: None,
        }
    }

    fn transcript(tokens: Vec<TokenRecord>, fa: FlashAttention) -> Transcript {
        let mut t: Transcript =
            serde_json::from_value(serde_json::json!({
                "version": 1, "toolrail_version": "0", "created_unix": 0,
                "model": {"name": "m", "path": "m", "architecture": "a", "vocab_size": 9, "file_size": 1},
                "prompt": "p", "engine": "toolrail",
                "sampling": {"temperature": 0.0, "top_k": 40, "top_p": 0.95, "min_p": 0.05, "seed": 0, "max_tokens": 9},
                "tokens": [], "output": "", "stop": {"reason": "end-of-generation"},
                "totals": {"tokens": 0, "decode_ms": 0.0, "mask_ms": 0.0, "tokens_per_s": 0.0}
            }))
            .unwrap();
        t.tokens = tokens;
        t.settings = Some(LogitSettings {
            engine: Backend::InProcess,
            flash_attention: Known::Set(fa),
            batch: Known::Set(2048),
            ubatch: Known::Set(512),
            cache_type_k: Known::Set(CacheType::F16),
            cache_type_v: Known::Set(CacheType::F16),
            prompt_split: Known::Set(PromptSplit::Checkpoints),
            threads: Known::Set(1),
            gpu_layers: Known::Set(0),
            context: Known::Set(4096),
            ..LogitSettings::default()
        });
        t
    }

    #[test]
    fn a_parting_at_a_near_tie_is_explained_by_the_setting_that_differs() {
        let a = transcript(
            vec![
                record(0, 1, &[(1, 0.9), (2, 0.1)]),
                record(1, 3, &[(3, 0.51), (4, 0.49)]),
            ],
            FlashAttention::On,
        );
        let b = transcript(
            vec![
                record(0, 1, &[(1, 0.88), (2, 0.11)]),
                record(1, 4, &[(4, 0.505), (3, 0.495)]),
            ],
            FlashAttention::Off,
        );
        let c = RunComparison::of(&a, &b);
        assert_eq!(c.common, 1);
        assert_eq!(c.parting.as_ref().map(|p| p.index), Some(1));
        let drift = c.drift.as_ref().unwrap();
        assert_eq!((drift.index, drift.id), (0, 1));
        let text = c.explanation().join("\n");
        assert!(
            text.contains("at token 1 the first run took \"t3\""),
            "{text}"
        );
        assert!(
            text.contains("A near tie: the two most likely tokens were 0.020 apart"),
            "{text}"
        );
        assert!(text.contains("differ by up to 0.0200"), "{text}");
        assert!(
            text.contains("Settings that change the logits differ: flash attention: on in the first run, off in the second"),
            "{text}"
        );
        let same = RunComparison::of(&a, &a);
        assert!(same.same_tokens());
        let text = same.explanation().join("\n");
        assert!(text.contains("The same 2 tokens."), "{text}");
        assert!(text.contains("agree to 4 decimal places"), "{text}");
        assert!(
            text.contains("The settings that change logits agree"),
            "{text}"
        );
    }
}
