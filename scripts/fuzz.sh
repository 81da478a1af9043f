#!/usr/bin/env bash
# Runs the grammar fuzz target for SECONDS (default 600) and prints libFuzzer's execution count.
# Needs cargo-fuzz (`cargo install cargo-fuzz`); RUSTC_BOOTSTRAP lets the stable toolchain
# accept the sanitizer flags cargo-fuzz passes.
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_TO_RUN="${1:-600}"
mkdir -p fuzz/corpus/grammar
cp fuzz/seeds/* fuzz/corpus/grammar/
for f in ../shared/corpus/gbnf/*.gbnf; do cp "$f" "fuzz/corpus/grammar/corpus-$(basename "$f")"; done
RUSTC_BOOTSTRAP=1 cargo fuzz run grammar fuzz/corpus/grammar -- \
  -max_total_time="$SECONDS_TO_RUN" -max_len=4096 -timeout=10 -rss_limit_mb=4096 -print_final_stats=1
