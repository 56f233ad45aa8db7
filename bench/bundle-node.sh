#!/usr/bin/env bash
# Bundles an extracted upstream tree's @syncular/server for Node (the host
# workloads and the in-tree SQLite storage on node:sqlite, Node >= 22.5):
#   bench/bundle-node.sh <extracted upstream tree> <out dir> [bun binary]
# writes <out>/server.mjs (index-node.ts, with its one static bun:sqlite
# import, which index-node never uses, stubbed) and <out>/node_modules/
# @syncular/core (the codec bench/lib/server.mjs loads beside the server).
# Nothing of upstream enters this repository. See bench/README.md.
set -euo pipefail
tree=${1:?usage: bench/bundle-node.sh <upstream tree> <out dir> [bun]}
out=${2:?usage: bench/bundle-node.sh <upstream tree> <out dir> [bun]}
bun=${3:-${BUN:-bun}}
tree=$(cd "$tree" && pwd)
mkdir -p "$out/node_modules/@syncular/core"
out=$(cd "$out" && pwd)
(cd "$tree" && "$bun" build packages/server/src/index-node.ts --target=node --conditions=bun \
  --format=esm --external bun:sqlite --outfile="$out/server.mjs" >/dev/null)
sed -i 's#^import { Database } from "bun:sqlite";#const Database = class { constructor() { throw new Error("bun:sqlite is not available under Node"); } };#' "$out/server.mjs"
if grep -q 'from "bun:sqlite"' "$out/server.mjs"; then
  echo "bundle-node: a bun:sqlite import is left in $out/server.mjs" >&2
  exit 1
fi
(cd "$tree" && "$bun" build packages/core/src/index.ts --target=node --conditions=bun \
  --format=esm --outfile="$out/node_modules/@syncular/core/index.mjs" >/dev/null)
printf '%s\n' '{"name":"@syncular/core","version":"0.0.0","type":"module","exports":{".":"./index.mjs"}}' \
  > "$out/node_modules/@syncular/core/package.json"
echo "bundle-node: $out/server.mjs"
