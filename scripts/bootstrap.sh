#!/usr/bin/env bash
# Installs what callgate needs on a Debian machine with Node 20 (development; production runs Node 24
# LTS, which scripts/test-node24.sh tests), and nothing when all is there.
#   scripts/bootstrap.sh          runtime needs: npm packages, redis-server, and espeak-ng and sox
#                                 (the local realtime simulator speaks with them)
#   scripts/bootstrap.sh --test   also what the tests drive: sipp (sip-tester), tshark, promtool,
#                                 baresip (a real softphone, headless), faketime (libfaketime: the
#                                 chaos run's clock offsets), openssl (the TLS tests' certificates)
# Safe to run again: each step checks first and is skipped when already done.
set -euo pipefail
cd "$(dirname "$0")/.."

want_test=0
for arg in "$@"; do
  case "$arg" in
    --test) want_test=1 ;;
    *) echo "bootstrap: unknown argument $arg" >&2; exit 2 ;;
  esac
done

say() { printf 'bootstrap: %s\n' "$*"; }

node_major=$(node -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0)
if [ "$node_major" -lt 20 ]; then
  echo "bootstrap: callgate needs Node.js 24 LTS, or 20 for development (found: $(node --version 2>/dev/null || echo none))" >&2
  exit 1
fi
case "$node_major" in
  20 | 24) ;;
  *) say "Node.js $(node --version) is not tested; the supported versions are 24 LTS and 20 (package.json engines)" ;;
esac

# Debian packages: command -> package. The C toolchain builds the native modules (@discordjs/opus
# during npm ci, callgate's RTP sockets below).
declare -A packages=([redis-server]=redis-server [espeak-ng]=espeak-ng [sox]=sox [make]=make [g++]=g++ [python3]=python3)
if [ "$want_test" = 1 ]; then
  packages[sipp]=sip-tester
  packages[tshark]=tshark
  packages[promtool]=prometheus
  packages[baresip]=baresip-core
  packages[faketime]=faketime
  packages[openssl]=openssl # the TLS tests make their own certificates
fi
missing=()
for cmd in "${!packages[@]}"; do
  command -v "$cmd" >/dev/null 2>&1 || missing+=("${packages[$cmd]}")
done
[ -f /usr/include/srtp2/srtp.h ] || missing+=(libsrtp2-dev) # SRTP: gateway/media/native/srtp_binding.c
# spandsp's G.722 (a header, no command), built into gateway/media/native/g722_codec.c.
[ -e /usr/include/spandsp/g722.h ] || missing+=(libspandsp-dev)
if [ "${#missing[@]}" -gt 0 ]; then
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null 2>&1 || { echo "bootstrap: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
    sudo="sudo"
  fi
  say "installing Debian packages: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  # tshark asks whether non-root users may capture; answer no without a prompt.
  echo "wireshark-common wireshark-common/install-setuid boolean false" | $sudo debconf-set-selections 2>/dev/null || true
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  # The Debian package starts a system-wide redis on 6379; callgate never uses it unless REDIS_URL says so.
fi

# Native modules build against this Node's own headers when it has them, not a download.
nodedir=$(npm config get nodedir 2>/dev/null || true)
node_prefix=$(dirname "$(dirname "$(command -v node)")")
if { [ -z "$nodedir" ] || [ "$nodedir" = "undefined" ] || [ "$nodedir" = "null" ]; } && [ -f "$node_prefix/include/node/node_api.h" ]; then
  export npm_config_nodedir="$node_prefix"
fi

# npm packages: reinstall only when package-lock.json changed since the last install.
stamp=node_modules/.callgate-lock-hash
lock_hash=$(sha256sum package-lock.json | cut -d' ' -f1)
if [ -L node_modules ]; then
  # npm ci would empty the linked directory, which other checkouts share.
  say "node_modules is a link ($(readlink node_modules)): not reinstalling it"
elif [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$lock_hash" ]; then
  say "npm ci"
  npm ci --no-audit --no-fund --loglevel=error
  echo "$lock_hash" > "$stamp"
fi

# callgate's native RTP sockets (gateway/media/native): rebuilt when its sources are newer than the
# module. Without a C compiler the gateway still runs, on Node's dgram (rtp.sockets: auto).
native=gateway/media/native
if [ ! -f "$native/build/Release/rtp_udp.node" ] || [ ! -f "$native/build/Release/g722_codec.node" ] \
   || [ ! -f "$native/build/Release/srtp_binding.node" ] \
   || [ -n "$(find "$native"/*.c "$native"/*.h "$native/binding.gyp" -newer "$native/build/Release/rtp_udp.node" 2>/dev/null)" ]; then
  say "building the native RTP module"
  if ! npm run --silent build:native >/dev/null; then
    # The tests exercise the module: without it they cannot pass.
    [ "$want_test" = 1 ] && { echo "bootstrap: the native RTP module did not build (see above)" >&2; exit 1; }
    say "the native RTP module did not build (see above); the gateway will use Node's dgram for RTP"
  fi
fi
