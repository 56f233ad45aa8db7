#!/bin/sh
# Runs the JS suite against a prebuilt binary inside a Node image (Debian
# slim for glibc, Alpine for musl), with no Rust toolchain. PostgreSQL is
# not started here: ci.yml runs the suite against it on linux-x64-gnu.
# usage: sh .github/scripts/test-linux.sh <platform id>
# Expects native/syncular-native-storage.<platform id>.node.
set -eu
id=$1

# The layout tests read database files through the sqlite3 shell.
if command -v apk >/dev/null 2>&1; then
  apk add --no-cache sqlite >/dev/null
else
  apt-get update -qq
  apt-get install -y -qq sqlite3 >/dev/null
fi

mv "native/syncular-native-storage.$id.node" native/syncular-native-storage.node
npm install --ignore-scripts --no-audit --no-fund

# The loader must map this machine to the package this binary ships in.
# shellcheck disable=SC2016 # JavaScript, not shell
node -e '
const { id } = require("./lib/platform.js").currentPlatformPackage();
if (id !== process.argv[1]) throw new Error(`the loader maps this machine to ${id}, the binary is for ${process.argv[1]}`);
' "$id"

# CI=true would require PostgreSQL (see __test__/support/engines.mjs).
# scripts/test.mjs lists the test files: Node 22+ refuses `node --test DIR`.
CI=false node scripts/test.mjs
