//! Prompt builders (in progress).
