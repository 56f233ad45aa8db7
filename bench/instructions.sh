#!/usr/bin/env bash
# Instructions per unit of work, counted by callgrind, for this checkout
# and another built one side by side (bench/README.md, "Instructions"):
#
#   bench/instructions.sh OTHER_DIR [WORKLOAD:SMALL,LARGE ...]
#
# OTHER_DIR is a checkout of this package with its addon built (native/).
# Each workload of bench/lib/counted.mjs runs at two sizes; the difference
# divided by the difference in units cancels start-up. Only the JS thread
# is counted (callgrind --separate-threads, thread 1): the runtime's JIT
# and GC helper threads vary from run to run, and the storage's
# foreign-library watcher polls by the clock, so under valgrind's slowdown
# it would count for more than it costs. SQLite work of these workloads
# runs on the JS thread. Under Node, V8 runs --single-threaded (its
# compiler and GC on the JS thread, so when compiled code arrives does not
# depend on thread scheduling), with a fixed --hash-seed (a random seed
# costs each process a prime search of its own, 5 to 19M instructions
# under Node 24, which two sizes do not cancel); per-unit counts of two
# runs then repeat within 0.1% (request, window) to 0.7% (push1),
# whatever else the machine is doing. RUNTIME picks the runtime (default:
# node on PATH); bun ignores both flags, and its counts move more.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
other=$(cd "${1:?usage: bench/instructions.sh OTHER_DIR [WORKLOAD:SMALL,LARGE ...]}" && pwd)
shift
specs=("$@")
[ ${#specs[@]} -gt 0 ] || specs=(push1:200,1200 push10:100,500 conc16:160,960 window:100,600 touch:500,3500)
runtime=${RUNTIME:-$(command -v node)}
flags=()
"$runtime" --single-threaded --hash-seed=1 -e 0 >/dev/null 2>&1 && flags=(--single-threaded --hash-seed=1)
command -v valgrind >/dev/null || { echo "bench/instructions.sh: needs valgrind (apt-get install valgrind)" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

count() { # dir workload n -> instructions on the JS thread
  local out="$work/$RANDOM"
  mkdir -p "$out"
  valgrind --tool=callgrind --separate-threads=yes --callgrind-out-file="$out/cg" \
    "$runtime" "${flags[@]}" "$here/bench/lib/counted.mjs" "$1" "$2" "$3" >/dev/null 2>"$out/log" ||
    { cat "$out/log" >&2; exit 1; }
  awk '/^summary:/ { print $2; exit }' "$out/cg-01"
}

printf '%-8s %14s %14s %8s\n' workload "other/unit" "this/unit" ratio
for spec in "${specs[@]}"; do
  w=${spec%%:*} sizes=${spec#*:}
  a=${sizes%,*} b=${sizes#*,}
  o=$(( ($(count "$other" "$w" "$b") - $(count "$other" "$w" "$a")) / (b - a) ))
  t=$(( ($(count "$here" "$w" "$b") - $(count "$here" "$w" "$a")) / (b - a) ))
  printf '%-8s %14d %14d %8s\n' "$w" "$o" "$t" "$(awk -v t="$t" -v o="$o" 'BEGIN { printf "%.3f", t / o }')"
done
