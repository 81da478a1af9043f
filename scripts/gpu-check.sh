#!/usr/bin/env bash
# The GPU build's checks on a machine with a real GPU: the generation tests with the test model
# fully offloaded (its masks equal the CPU's at every step), then `toolrail bench` with every
# layer on the CPU and then on the GPU (tokens/s unconstrained and under each engine's grammar).
#
# Usage: scripts/gpu-check.sh [cuda|vulkan|metal]     (default: cuda)
#   Builds with that feature under target/gpu-FEATURE. On a machine without Rust, give the
#   binaries built elsewhere instead:
#     TOOLRAIL_BIN=path/to/toolrail TOOLRAIL_TEST_BIN=path/to/toolrail-llm's it test binary
#     TOOLRAIL_MODEL=path/to/gemma-3-270m-q4_k_m.gguf scripts/gpu-check.sh vulkan
# Writes what it prints to ${OUT:-target}/gpu-check.log too.
set -euo pipefail
cd "$(dirname "$0")/.."

feature="${1:-cuda}"
case "$feature" in
  cuda | vulkan | metal) ;;
  *) echo "usage: $0 [cuda|vulkan|metal]" >&2; exit 2 ;;
esac
log="${OUT:-target}/gpu-check.log"
mkdir -p "$(dirname "$log")"
exec > >(tee "$log") 2>&1

model="${TOOLRAIL_MODEL:-$(scripts/fetch-model.sh)}"
export TOOLRAIL_MODEL="$model"
if [ "$feature" = vulkan ] && [ -z "${VULKAN_SDK:-}" ] && [ -z "${TOOLRAIL_BIN:-}" ]; then
  VULKAN_SDK="$(scripts/fetch-vulkan-headers.sh)"
  export VULKAN_SDK
fi
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv

target="target/gpu-$feature"
if [ -z "${TOOLRAIL_BIN:-}" ]; then
  CARGO_TARGET_DIR="$target" cargo build --release --features "$feature"
  TOOLRAIL_BIN="$target/release/toolrail"
fi

echo "== generation tests, every layer on the GPU"
if [ -n "${TOOLRAIL_TEST_BIN:-}" ]; then
  (cd crates/toolrail-llm && CI=true TOOLRAIL_TEST_GPU_LAYERS=999 "$TOOLRAIL_TEST_BIN" \
    --test-threads 1 --nocapture gpu:: generation::)
else
  CI=true TOOLRAIL_TEST_GPU_LAYERS=999 CARGO_TARGET_DIR="$target" \
    cargo test --release -p toolrail-llm --features "$feature" --test it -- \
    --test-threads 1 --nocapture gpu:: generation::
fi

echo "== toolrail bench: CPU, then GPU"
for layers in 0 999; do
  echo "-- --gpu-layers $layers"
  "$TOOLRAIL_BIN" bench --model "$model" --gpu-layers "$layers" \
    --tools sample_schemas/weather.json --prompt "What is the weather in Oslo tomorrow?" \
    --tokens 64 --threads "${THREADS:-4}"
done
