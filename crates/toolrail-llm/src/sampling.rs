//! Choosing the next token from logits and a grammar mask, the same way for every engine, and
//! recording the candidates before and after the mask for the debugger.
//!
//! The chain mirrors llama.cpp's common order: mask, then top-k, softmax with temperature,
//! top-p, min-p, then a seeded draw (or the most likely allowed token at temperature 0).

use std::borrow::Cow;

use crate::record::Sampling;
use toolrail_engine::TokenMask;
use toolrail_engine::sample::SplitMix64;

/// A token and its probability.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Scored {
    /// Token id.
    pub id: u32,
    /// Probability.
    pub probability: f32,
}

/// The outcome of one sampling step.
#[derive(Clone, Debug, PartialEq)]
pub struct Choice {
    /// The chosen token, or None when the mask allows nothing (a dead end).
    pub token: Option<u32>,
    /// The most likely tokens over the whole vocabulary (probabilities over the vocabulary).
    pub before: Vec<Scored>,
    /// The most likely allowed tokens (probabilities over the allowed tokens).
    pub after: Vec<Scored>,
    /// How many tokens the mask allowed (the whole vocabulary without a mask).
    pub allowed: u32,
}

/// Picks the next token from `logits` under `mask` (None: unconstrained); `show` is how many
/// candidates to record before and after the mask.
pub fn choose(
    logits: &[f32],
    mask: Option<&TokenMask>,
    params: &Sampling,
    rng: &mut SplitMix64,
    show: usize,
) -> Choice {
    let allowed_at = |id: usize| mask.is_none_or(|m| m.contains(id as u32));
    let before = top_probabilities(logits, |_| true, show);
    let after = top_probabilities(logits, allowed_at, show);
    let allowed = mask.map_or(logits.len() as u32, |m| m.count() as u32);
    if allowed == 0 || after.is_empty() {
        return Choice {
            token: None,
            before,
            after,
            allowed,
        };
    }
    let token = if params.temperature <= 0.0 {
        after.first().map(|s| s.id)
    } else {
        Some(draw(logits, allowed_at, params, rng))
    };
    Choice {
        token,
        before,
        after,
        allowed,
    }
}

/// The highest-logit token among those `allowed` says yes to (ties: the lowest id), or `None`
/// if it allows none.
pub fn argmax(logits: &[f32], allowed: impl Fn(u32) -> bool) -> Option<u32> {
    let mut best: Option<(u32, f32)> = None;
    for (id, &logit) in logits.iter().enumerate() {
        let id = id as u32;
        if logit.is_nan() || !allowed(id) {
            continue;
        }
        if best.is_none_or(|(_, b)| logit > b) {
            best = Some((id, logit));
        }
    }
    best.map(|(id, _)| id)
}

/// One logit under llama.cpp's repetition penalty: a positive logit is divided by `penalty`,
/// a negative one multiplied (so the token always becomes less likely for a penalty above 1).
pub fn penalize(logit: f32, penalty: f32) -> f32 {
    if logit > 0.0 {
        logit / penalty
    } else {
        logit * penalty
    }
}

/// `logits` with the repetition penalty applied to every token in `recent` (each once, however
/// often it occurs, as llama.cpp's penalty does); borrowed unchanged when the penalty is off.
pub fn penalized<'a>(logits: &'a [f32], recent: &[u32], penalty: f32) -> Cow<'a, [f32]> {
    if penalty == 1.0 || recent.is_empty() {
        return Cow::Borrowed(logits);
    }
    let mut out = logits.to_vec();
    let mut seen = rustc_hash::FxHashSet::default();
    for &id in recent {
        if seen.insert(id)
            && let Some(logit) = out.get_mut(id as usize)
        {
            *logit = penalize(*logit, penalty);
        }
    }
    Cow::Owned(out)
}

/// The `n` highest-logit tokens among those `keep` accepts, with softmax probabilities over
/// all the tokens `keep` accepts.
fn top_probabilities(logits: &[f32], keep: impl Fn(usize) -> bool, n: usize) -> Vec<Scored> {
    let mut max = f32::NEG_INFINITY;
    for (i, &l) in logits.iter().enumerate() {
        if l > max && keep(i) {
            max = l;
        }
    }
    if max == f32::NEG_INFINITY {
        return Vec::new();
    }
    let mut sum = 0.0f64;
    let mut best: Vec<(f32, u32)> = Vec::with_capacity(n + 1);
    for (i, &l) in logits.iter().enumerate() {
        if !keep(i) || l.is_nan() {
            continue;
        }
        sum += f64::from((l - max).exp());
        if best.len() < n || best.last().is_some_and(|&(w, _)| l > w) {
            let at = best.partition_point(|&(w, _)| w >= l);
            best.insert(at, (l, i as u32));
            best.truncate(n);
        }
    }
    best.into_iter()
        .map(|(l, id)| Scored {
            id,
            probability: (f64::from((l - max).exp()) / sum) as f32,
        })
        .collect()
}

/// A seeded draw: top-k, softmax with temperature, top-p, min-p.
fn draw(
    logits: &[f32],
    keep: impl Fn(usize) -> bool,
    params: &Sampling,
    rng: &mut SplitMix64,
) -> u32 {
    let mut pool: Vec<(f32, u32)> = logits
        .iter()
        .enumerate()
        .filter(|&(i, l)| keep(i) && l.is_finite())
        .map(|(i, &l)| (l, i as u32))
        .collect();
    pool.sort_unstable_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    if params.top_k > 0 {
        pool.truncate(params.top_k as usize);
    }
    let Some(&(max, first)) = pool.first() else {
        return 0;
    };
    let t = f64::from(params.temperature);
    let mut probs: Vec<f64> = pool
        .iter()
        .map(|&(l, _)| (f64::from(l - max) / t).exp())
        .collect();
    let total: f64 = probs.iter().sum();
    probs.iter_mut().for_each(|p| *p /= total);
    // top-p: the smallest prefix reaching p.
    if params.top_p < 1.0 {
        let mut acc = 0.0;
        let cut = probs
            .iter()
            .position(|&p| {
                acc += p;
                acc >= f64::from(params.top_p)
            })
            .map_or(probs.len(), |i| i + 1);
        probs.truncate(cut);
    }
    // min-p: relative to the most likely.
    if params.min_p > 0.0 {
        let floor = probs[0] * f64::from(params.min_p);
        let cut = probs.iter().position(|&p| p < floor).unwrap_or(probs.len());
        probs.truncate(cut.max(1));
    }
    let total: f64 = probs.iter().sum();
    let mut x = (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64 * total;
    for (i, p) in probs.iter().enumerate() {
        if x < *p {
            return pool[i].1;
        }
        x -= p;
    }
    pool.get(probs.len().saturating_sub(1))
        .map_or(first, |&(_, id)| id)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mask_of(len: usize, ids: &[u32]) -> TokenMask {
        let mut m = TokenMask::empty(len);
        ids.iter().for_each(|&i| m.insert(i));
        m
    }

    #[test]
    fn greedy_takes_the_best_allowed_token() {
        let logits = [1.0, 5.0, 3.0, 4.0];
        let mask = mask_of(4, &[0, 2, 3]);
        let c = choose(
            &logits,
            Some(&mask),
            &Sampling::default(),
            &mut SplitMix64::new(1),
            3,
        );
        assert_eq!(c.token, Some(3));
        assert_eq!(c.before[0].id, 1);
        assert_eq!(
            c.after.iter().map(|s| s.id).collect::<Vec<_>>(),
            vec![3, 2, 0]
        );
        assert_eq!(c.allowed, 3);
        let sum: f32 = c.after.iter().map(|s| s.probability).sum();
        assert!(
            (sum - 1.0).abs() < 1e-5,
            "after-mask probabilities renormalised"
        );
    }

    #[test]
    fn empty_mask_is_a_dead_end() {
        let c = choose(
            &[1.0, 2.0],
            Some(&mask_of(2, &[])),
            &Sampling::default(),
            &mut SplitMix64::new(1),
            3,
        );
        assert_eq!(c.token, None);
        assert_eq!(c.allowed, 0);
    }

    #[test]
    fn seeded_draws_repeat_and_respect_the_mask() {
        let logits: Vec<f32> = (0..100).map(|i| (i % 7) as f32).collect();
        let mask = mask_of(100, &[3, 10, 17, 50]);
        let params = Sampling {
            temperature: 1.0,
            top_k: 0,
            top_p: 1.0,
            min_p: 0.0,
            ..Sampling::default()
        };
        let draws = |seed| {
            let mut rng = SplitMix64::new(seed);
            (0..50)
                .map(|_| {
                    choose(&logits, Some(&mask), &params, &mut rng, 2)
                        .token
                        .unwrap()
                })
                .collect::<Vec<_>>()
        };
        assert_eq!(draws(9), draws(9));
        assert!(draws(9).iter().all(|t| [3, 10, 17, 50].contains(t)));
    }

    #[test]
    fn the_repetition_penalty_lowers_recent_tokens_once() {
        let logits = [2.0f32, -2.0, 3.0, 1.0];
        assert!(matches!(penalized(&logits, &[0, 1], 1.0), Cow::Borrowed(_)));
        let out = penalized(&logits, &[0, 1, 0, 0], 2.0);
        assert_eq!(out.as_ref(), &[1.0, -4.0, 3.0, 1.0]);
        // An id outside the vocabulary is ignored.
        assert_eq!(penalized(&logits, &[9], 2.0).as_ref(), &logits);
    }
}
