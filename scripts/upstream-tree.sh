#!/usr/bin/env bash
# Prepares an upstream @syncular/server tree for the host-level tests (the
# ones that drive upstream's real request handler, segment store and
# in-tree storages). Nothing of upstream enters this repository: the tree is
# extracted from a git mirror you give at run time, under $TMPDIR.
#
#   scripts/upstream-tree.sh MIRROR [REF]
#
# MIRROR is a clone (bare is fine) of the public syncular/syncular
# repository; REF defaults to its HEAD. Installs bun from the npm registry
# when none is on PATH, installs the server package's dependencies with it,
# and prints two lines to eval:
#
#   export SYNCULAR_UPSTREAM_TREE=/tmp/syncular-upstream-<sha>
#   export SYNCULAR_BUN=/path/to/bun
#
# The tests that need them skip, naming this script, when they are unset.
set -euo pipefail
MIRROR="${1:?usage: scripts/upstream-tree.sh MIRROR [REF]}"
REF="${2:-HEAD}"
TMP_ROOT="${TMPDIR:-/tmp}"
note() { printf 'upstream-tree: %s\n' "$*" >&2; }

if command -v bun >/dev/null 2>&1; then
  BUN="$(command -v bun)"
else
  TOOLS="$TMP_ROOT/syncular-upstream-tools"
  if [ ! -x "$TOOLS/node_modules/.bin/bun" ]; then
    note "installing bun@${BUN_VERSION:-1.4.5} from npm into $TOOLS"
    mkdir -p "$TOOLS"
    npm install --prefix "$TOOLS" --no-audit --no-fund --loglevel=error "bun@${BUN_VERSION:-1.4.5}" >&2
  fi
  BUN="$TOOLS/node_modules/.bin/bun"
fi
"$BUN" --version >/dev/null

SHA="$(git -C "$MIRROR" rev-parse "$REF^{commit}")"
TREE="$TMP_ROOT/syncular-upstream-${SHA:0:12}"
if [ ! -f "$TREE/packages/server/package.json" ]; then
  note "extracting $SHA into $TREE"
  mkdir -p "$TREE"
  git -C "$MIRROR" archive --format=tar "$SHA" | tar -x -C "$TREE"
fi
if [ ! -d "$TREE/node_modules" ]; then
  note "bun install (server package) in $TREE"
  (cd "$TREE" && { "$BUN" install --ignore-scripts --filter '@syncular/server' --frozen-lockfile >&2 \
    || "$BUN" install --ignore-scripts --filter '@syncular/server' >&2; })
fi
printf 'export SYNCULAR_UPSTREAM_TREE=%q\n' "$TREE"
printf 'export SYNCULAR_BUN=%q\n' "$BUN"
