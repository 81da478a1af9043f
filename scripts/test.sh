#!/usr/bin/env bash
# The whole test suite, on a fresh Debian machine: installs what it lacks, then runs format,
# lint and every test (unit, integration, property, CLI, benches in test mode).
# Usage: scripts/test.sh     (run from anywhere; needs ../shared beside the checkout)
set -euo pipefail
cd "$(dirname "$0")/.."

# System packages the build and tests need (Debian names): a C/C++ toolchain, cmake and
# libclang for llama.cpp (llama-cpp-sys-2 runs cmake and bindgen); glslc and the SPIR-V headers
# for its Vulkan build (the Vulkan headers come from scripts/fetch-vulkan-headers.sh); for the
# app, Mesa's CPU Vulkan driver (lavapipe: headless kittest snapshots, and the Vulkan build's
# tests) and GL, the X11/Wayland client libraries winit loads, and Xvfb for the whole-app
# screenshot.
APT_PACKAGES=(build-essential pkg-config cmake clang libclang-dev glslc spirv-headers
  xvfb xauth mesa-vulkan-drivers libvulkan1 libgl1-mesa-dri libegl1 libxkbcommon-x11-0
  libx11-xcb1 libxcursor1 libxrandr2 libxi6 libwayland-client0)
missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
  echo "installing: ${missing[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}"
fi

# The conformance corpus: ../shared beside the checkout, or $TOOLRAIL_SHARED_DIR (the tests find
# it the same way, through crates/toolrail-testkit).
if [ ! -d "${TOOLRAIL_SHARED_DIR:-../shared}/corpus" ]; then
  echo "error: ${TOOLRAIL_SHARED_DIR:-../shared}/corpus not found (the conformance corpus; put the shared folder beside the checkout or set TOOLRAIL_SHARED_DIR)" >&2
  exit 2
fi

# The test model (Gemma 3 270M, 253 MB), cached under ~/.cache/toolrail/models; skipped when present.
scripts/fetch-model.sh >/dev/null
# A real llama-server b11434 for the server-engine tests, built once per machine (about 10 min on
# 2 cores) and cached under ~/.cache/toolrail/llama-server; skipped when present.
scripts/build-llama-server.sh >/dev/null

# A fresh CI checkout gains nothing from incremental compilation, which only costs disk.
if [ "${CI:-}" = "true" ]; then export CARGO_INCREMENTAL=0; fi
# Property tests draw the same cases on every run here (a failure reproduces, and a run passes
# or fails by the code alone); each test's proptest-regressions file replays past failures
# first. To explore new cases: PROPTEST_RNG_SEED=random scripts/test.sh, or cargo test with
# PROPTEST_RNG_SEED unset.
if [ "${PROPTEST_RNG_SEED:-}" = "random" ]; then unset PROPTEST_RNG_SEED; else export PROPTEST_RNG_SEED="${PROPTEST_RNG_SEED:-20261128}"; fi

rustup component add rustfmt clippy >/dev/null 2>&1 || true
started=$SECONDS
cargo fmt --all --check
cargo clippy --locked --workspace --all-targets -- -D warnings
cargo test --locked --workspace --all-targets
# The Vulkan build (llama.cpp's Vulkan backend, the `vulkan` feature) on Mesa's software Vulkan
# (lavapipe): the test model fully offloaded, the generation tests pass and every step's mask
# equals the CPU's. llama.cpp skips CPU devices unless GGML_VK_VISIBLE_DEVICES names one, and
# Debian 12's lavapipe (Mesa 22.3) crashes in its own worker thread on the graphs llama.cpp
# reorders for concurrency, so that reordering is off here (GGML_VK_DISABLE_GRAPH_OPTIMIZE).
# Same target folder: the dependencies without llama.cpp are shared with the CPU build.
VULKAN_SDK="$(scripts/fetch-vulkan-headers.sh)" GGML_VK_VISIBLE_DEVICES=0 \
  GGML_VK_DISABLE_GRAPH_OPTIMIZE=1 TOOLRAIL_TEST_GPU_LAYERS=999 \
  cargo test --locked -p toolrail-llm --features vulkan --test it -- gpu:: generation::
# The whole app under Xvfb: opens with a fresh default workspace, renders, saves a screenshot.
shot_ws="$(mktemp -d)"
xvfb-run -a -s "-screen 0 1600x1000x24" \
  "${CARGO_TARGET_DIR:-target}/debug/toolrail" gui --workspace "$shot_ws/workspace.json" \
  --screenshot docs/screenshot.png
rm -rf "$shot_ws"
test -s docs/screenshot.png || { echo "error: docs/screenshot.png was not written" >&2; exit 1; }
# The fuzz target must keep compiling (running it is scripts/fuzz.sh).
CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-target}" cargo check --locked --manifest-path fuzz/Cargo.toml
# How much disk the build took (CI machines have little to spare).
du -sh "${CARGO_TARGET_DIR:-target}" 2>/dev/null || true
echo "test command: $((SECONDS - started)) s from fmt to the fuzz check"
