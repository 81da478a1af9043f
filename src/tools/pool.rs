//! Pool filter (in progress).
