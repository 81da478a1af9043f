//! The model side: sampling over logits and a grammar mask.

pub mod sampling;
