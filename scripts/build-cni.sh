#!/bin/sh
# Builds eni-ipam-cni, the CNI plugin the runtime executes on the host: one static binary
# (libc only), so nothing else needs to be installed there. Run by `npm run build`.
set -eu
cd "$(dirname "$0")/.."
out=dist/bin/eni-ipam-cni
CC="${CC:-gcc}"
if ! command -v "$CC" >/dev/null 2>&1; then
  echo "build-cni: no C compiler ($CC): install gcc and libc6-dev (Debian: apt-get install -y gcc libc6-dev)" >&2
  exit 1
fi
mkdir -p dist/bin
"$CC" -std=c11 -D_GNU_SOURCE -Os -static -s -Wall -Wextra -Wshadow -Wformat=2 \
  -fstack-protector-strong -D_FORTIFY_SOURCE=2 \
  -o "$out.tmp" src/cni/*.c
mv "$out.tmp" "$out"
