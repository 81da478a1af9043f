#!/usr/bin/env bash
# Builds the fuzz targets and runs them. Usage:
#   scripts/fuzz.sh [SECONDS] [TARGET...]     (default: 600 seconds, every target, one after another)
# Environment: FUZZ_BUILD=0 skips the build; FUZZ_BIN=dir runs the binaries found there;
# FUZZ_TIMEOUT=seconds per input before libFuzzer calls it a hang (default 10; wall-clock, so
# raise it on a loaded machine).
# Targets: grammar (GBNF parser, lint, recognizer, sampling), schema (schema → grammar, which must
# parse in the llama.cpp-exact parser), extract (free text → calls), gguf (toolrail's GGUF
# reader), workspace (workspace and transcript readers), server_stream (llama-server's event stream
# and its chunks), template (a chat template opened and applied in toolrail's template worker; needs
# the toolrail binary beside the fuzz binaries, or TOOLRAIL_BIN). Prints libFuzzer's final statistics
# (executions, time); crashes land in fuzz/artifacts/<target>/.
#
# No cargo-fuzz needed: the stable toolchain (RUSTC_BOOTSTRAP=1 for the unstable flags) builds
# the targets in the dev profile with libFuzzer's coverage instrumentation on toolrail's own
# crates only, so llama.cpp's build is the one the main workspace already made.
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_TO_RUN="${1:-600}"
shift || true
TARGETS=("$@")
if [ "${#TARGETS[@]}" -eq 0 ]; then TARGETS=(grammar schema extract gguf workspace server_stream template); fi
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target}"
export RUSTC_BOOTSTRAP=1

SANCOV='["-Cpasses=sancov-module", "-Cllvm-args=-sanitizer-coverage-level=4",
  "-Cllvm-args=-sanitizer-coverage-inline-8bit-counters", "-Cllvm-args=-sanitizer-coverage-pc-table",
  "-Cllvm-args=-sanitizer-coverage-trace-compares", "-Cdebug-assertions", "-Coverflow-checks"]'
# toolrail-llm has a build script, and cargo gives a package's rustflags to its build script too;
# that script is not linked with libFuzzer, so it is linked with empty hooks (fuzz/sancov_stubs.c).
STUBS="$CARGO_TARGET_DIR/fuzz-sancov-stubs.o"
mkdir -p "$CARGO_TARGET_DIR"
cc -c -fPIC -O1 fuzz/sancov_stubs.c -o "$STUBS"
SANCOV_LLM="${SANCOV%]}, \"-Clink-arg=$STUBS\"]"
CONFIG=()
for crate in toolrail-fuzz toolrail-gbnf toolrail-engine toolrail-schema toolrail-tools toolrail-llm toolrail-workbench; do
  flags="$SANCOV"
  if [ "$crate" = toolrail-llm ]; then flags="$SANCOV_LLM"; fi
  CONFIG+=(--config "profile.dev.package.$crate.rustflags=$flags" --config "profile.dev.package.$crate.opt-level=3")
done
# FUZZ_BUILD=0 runs the binaries already built (e.g. a second target in parallel).
if [ "${FUZZ_BUILD:-1}" = 1 ]; then
  (cd fuzz && cargo build -Zprofile-rustflags "${CONFIG[@]}" --bins)
fi
FUZZ_BIN="${FUZZ_BIN:-$CARGO_TARGET_DIR/debug}"

for target in "${TARGETS[@]}"; do
  corpus="fuzz/corpus/$target"
  mkdir -p "$corpus" "fuzz/artifacts/$target"
  if [ -d "fuzz/seeds/$target" ]; then cp -r "fuzz/seeds/$target/." "$corpus/"; fi
  case "$target" in
    grammar) for f in ../shared/corpus/gbnf/*.gbnf ../shared/reliability/*.gbnf; do
        [ -f "$f" ] && cp "$f" "$corpus/corpus-$(basename "$f")"; done ;;
    schema) for f in sample_schemas/*.json ../shared/reliability/*.schema.json; do
        [ -f "$f" ] && { printf '\0'; cat "$f"; } > "$corpus/corpus-$(basename "$f")"; done ;;
    template) for f in ../shared/corpus/llama-cpp-chat/templates/*.jinja ../shared/reliability/turn3/*.jinja; do
        [ -f "$f" ] && cp "$f" "$corpus/corpus-$(basename "$f")"; done ;;
  esac
  echo "== $target: ${SECONDS_TO_RUN}s"
  "$FUZZ_BIN/$target" "$corpus" -artifact_prefix="fuzz/artifacts/$target/" \
    -max_total_time="$SECONDS_TO_RUN" -max_len=65536 -timeout="${FUZZ_TIMEOUT:-10}" -rss_limit_mb=2048 -print_final_stats=1
done
