#!/usr/bin/env bash
# Fetches and caches the Vulkan headers llama.cpp b11434's Vulkan backend needs (1.4.309:
# Debian 12's 1.3.239 lacks VK_EXT_layer_settings), and prints a folder to use as VULKAN_SDK
# (`include/` with the headers, `lib/libvulkan.so` pointing at the system's loader).
#
# The headers come from Debian 13's libvulkan-dev package (sha256 checked), unpacked with
# dpkg-deb; nothing is installed system-wide. Skipped when the folder is already there.
#
# Destination: ${TOOLRAIL_CACHE_DIR:-$HOME/.cache/toolrail}/vulkan-sdk-1.4.309
# Needs: python3 (download), dpkg-deb, sha256sum, and the Vulkan loader (libvulkan1).
set -euo pipefail

VERSION="1.4.309.0-1"
URL="http://deb.debian.org/debian/pool/main/v/vulkan-loader/libvulkan-dev_${VERSION}_amd64.deb"
SHA256="8d329d465e16168afff58b1bd0dd6db46aac2cc3f56054a481b25a04e90b345a"
DIR="${TOOLRAIL_CACHE_DIR:-$HOME/.cache/toolrail}/vulkan-sdk-1.4.309"

log() { echo "fetch-vulkan-headers: $*" >&2; }

if [ -f "$DIR/include/vulkan/vulkan.hpp" ] && [ -e "$DIR/lib/libvulkan.so" ]; then
  echo "$DIR"
  exit 0
fi

loader=""
for candidate in /usr/lib/x86_64-linux-gnu/libvulkan.so.1 /usr/lib64/libvulkan.so.1 /usr/lib/libvulkan.so.1; do
  if [ -e "$candidate" ]; then loader="$candidate"; break; fi
done
if [ -z "$loader" ]; then
  log "error: the Vulkan loader (libvulkan.so.1) is not installed (apt install libvulkan1)"
  exit 2
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
log "downloading $URL"
python3 - "$URL" "$work/headers.deb" <<'EOF'
import sys, urllib.request
with urllib.request.urlopen(sys.argv[1], timeout=120) as r, open(sys.argv[2], "wb") as f:
    f.write(r.read())
EOF
got="$(sha256sum "$work/headers.deb" | cut -d' ' -f1)"
if [ "$got" != "$SHA256" ]; then
  log "error: sha256 of the download is $got, expected $SHA256"
  exit 2
fi
dpkg-deb -x "$work/headers.deb" "$work/x"
mkdir -p "$work/sdk/lib"
cp -r "$work/x/usr/include" "$work/sdk/include"
ln -s "$loader" "$work/sdk/lib/libvulkan.so"
mkdir -p "$(dirname "$DIR")"
rm -rf "$DIR.partial"
mv "$work/sdk" "$DIR.partial"
mv "$DIR.partial" "$DIR"
echo "$DIR"
