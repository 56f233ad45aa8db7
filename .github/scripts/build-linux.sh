#!/bin/sh
# Builds the addon for one Linux target natively, inside a Node image of
# that target's C library and architecture (the release workflow runs it
# with `docker run` on an x64 or arm64 runner):
#   Debian bullseye (glibc 2.31, so the binary loads on glibc >= 2.31)
#   Alpine (musl).
# usage: sh .github/scripts/build-linux.sh <rust target> <platform id>
# Writes native/syncular-native-storage.<platform id>.node.
set -eu
target=$1
id=$2

# A C toolchain, and libclang for pg_query's bindgen (with clang's headers).
if command -v apk >/dev/null 2>&1; then
  apk add --no-cache build-base clang-dev linux-headers curl git perl python3 >/dev/null
  # musl targets link the C runtime statically by default, which forbids a
  # cdylib; a .node addon must link it dynamically.
  export RUSTFLAGS="${RUSTFLAGS:-} -C target-feature=-crt-static"
else
  apt-get update -qq
  apt-get install -y -qq build-essential libclang-dev curl git python3 >/dev/null
fi

curl --proto '=https' --tlsv1.2 -sSf https://sh.rustup.rs | sh -s -- -y --profile minimal --target "$target"
# shellcheck disable=SC1091 # written by rustup just above
. "$HOME/.cargo/env"

npm install --ignore-scripts --no-audit --no-fund
npx napi build --release --output-dir native --no-js --dts binding.d.ts --target "$target"
mv native/syncular-native-storage.node "native/syncular-native-storage.$id.node"
