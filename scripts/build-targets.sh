#!/usr/bin/env bash
# Cross-builds the release addon, on Linux x64, for every target this
# machine can build, each into its npm/<id>/ package, and checks each
# binary (docs/platforms.md):
#
#   scripts/build-targets.sh [ID ...]      default: all of them
#
#   linux-arm64-gnu   cargo-zigbuild, aarch64-unknown-linux-gnu.2.17: needs glibc >= 2.17
#   linux-x64-musl    cargo-zigbuild, C runtime linked dynamically (-crt-static off)
#   linux-arm64-musl  the same for arm64
#   win32-x64-gnu     Debian's mingw-w64; kept in target/platforms/win32-x64-gnu/, not in
#                     a package: the release ships win32-x64-msvc, built on Windows
#   darwin-arm64      cargo-zigbuild, macOS 11+, ad-hoc signed (zig's linker signs arm64)
#   darwin-x64        cargo-zigbuild, macOS 11+
#
# (linux-x64-gnu is this machine's own build: `npm run build`.) The tools
# are installed on first use, by name, from apt, PyPI, npm and rustup:
# scripts/platform/common.sh lists them. Every Rust warning of this crate
# is an error on every target (-D warnings), as a CI lint job would make it.
#
# One target at a time, under `nice -n 19` with CARGO_BUILD_JOBS=1 unless
# CARGO_BUILD_JOBS is set. Checks of each binary (fails on the first miss):
#   file                  the format and architecture
#   readelf               Linux: max GLIBC_ symbol version <= 2.17, or musl (no glibc
#                         version, NEEDED only libc.so); napi_register_module_v1 exported
#   llvm-objdump/llvm-nm  Windows: a PE32+ DLL exporting it, importing no node.exe/libnode
#                         nor a mingw runtime DLL. macOS: exported, install name not an
#                         absolute path, minos 11.0, and on arm64 an ad-hoc signature whose
#                         page hashes match (scripts/platform/macho-signature.mjs)
#   npm pack --dry-run    each npm/<id>/ package packs its binary
set -euo pipefail
# shellcheck source=scripts/platform/common.sh
. "$(dirname "$0")/platform/common.sh"
cd "$REPO"

ids=${*:-$ALL_IDS}
for id in $ids; do rust_target "$id" >/dev/null; done

need_apt file binutils llvm libclang-dev
need_node_modules
export CARGO_BUILD_JOBS=${CARGO_BUILD_JOBS:-1}
export MACOSX_DEPLOYMENT_TARGET=11.0

# Environment for one target's build (in a subshell).
setup_target() {
  local id=$1 triple=${2%%.2.*}
  local var
  var=CARGO_TARGET_$(echo "$triple" | tr 'a-z-' 'A-Z_')_RUSTFLAGS
  local flags="-D warnings"
  # A cdylib cannot link musl's C runtime statically (the target's default).
  case $id in *-musl) flags="$flags -C target-feature=-crt-static" ;; esac
  # The per-target variable, not RUSTFLAGS: host build scripts stay cached.
  export "$var=$flags"
  if [ "$id" = win32-x64-gnu ]; then
    need_apt gcc-mingw-w64-x86-64
    export CARGO_TARGET_X86_64_PC_WINDOWS_GNU_LINKER=x86_64-w64-mingw32-gcc
    export CC_x86_64_pc_windows_gnu=x86_64-w64-mingw32-gcc
    export AR_x86_64_pc_windows_gnu=x86_64-w64-mingw32-ar
    # bindgen (pg_query.h) with mingw's headers and gcc's own (stdbool.h).
    BINDGEN_EXTRA_CLANG_ARGS_x86_64_pc_windows_gnu="-isystem $(x86_64-w64-mingw32-gcc -print-file-name=include) -isystem /usr/x86_64-w64-mingw32/include"
    export BINDGEN_EXTRA_CLANG_ARGS_x86_64_pc_windows_gnu
    # napi-build, for *-windows-gnu, requires a libnode.dll in LIBNODE_PATH
    # and links -lnode. Nothing is taken from it: napi 3 resolves N-API from
    # the host process at load time. Empty stand-ins satisfy both.
    export LIBNODE_PATH=$TOOLS/libnode-stub
    if [ ! -e "$LIBNODE_PATH/libnode.a" ]; then
      mkdir -p "$LIBNODE_PATH"
      : >"$LIBNODE_PATH/libnode.dll"
      x86_64-w64-mingw32-ar rc "$LIBNODE_PATH/libnode.a"
    fi
  else
    need_zig
  fi
  need_rust_target "$triple"
}

check_linux() {
  local id=$1 bin=$2 desc=$3
  case $id in
    *arm64*) [[ $desc == *"ARM aarch64"* ]] || die "$id: not an arm64 ELF: $desc" ;;
    *x64*) [[ $desc == *"x86-64"* ]] || die "$id: not an x86-64 ELF: $desc" ;;
  esac
  [[ $desc == *"shared object"* ]] || die "$id: not a shared object: $desc"
  [ -n "$(readelf --dyn-syms -W "$bin" | awk '$7 != "UND" && $8 ~ /^napi_register_module_v1(@|$)/')" ] ||
    die "$id: napi_register_module_v1 is not exported"
  local needed glibc
  needed=$(readelf -d -W "$bin" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | tr '\n' ' ')
  glibc=$(readelf -V -W "$bin" | grep -o 'GLIBC_[0-9][0-9.]*' | sed 's/GLIBC_//' | sort -uV | tail -1 || true)
  case $id in
    *-gnu)
      [ -n "$glibc" ] || die "$id: no GLIBC_ symbol versions: is this a glibc build?"
      [ "$(printf '%s\n2.17\n' "$glibc" | sort -V | tail -1)" = 2.17 ] || die "$id: needs GLIBC_$glibc (> 2.17)"
      say "$id: glibc >= $glibc; NEEDED $needed"
      ;;
    *-musl)
      [ -z "$glibc" ] || die "$id: musl build carries GLIBC_$glibc symbol versions"
      for n in $needed; do [[ $n == libc.* ]] || die "$id: NEEDED $n (musl: only the C library)"; done
      say "$id: musl; NEEDED $needed"
      ;;
  esac
}

check_windows() {
  local id=$1 bin=$2 desc=$3
  [[ $desc == *"PE32+"*"(DLL)"*"x86-64"* ]] || die "$id: not an x86-64 PE32+ DLL: $desc"
  local dump
  dump=$(llvm-objdump -p "$bin")
  grep -qE '^ +[0-9]+ +0x[0-9a-f]+ +napi_register_module_v1$|[[:space:]]napi_register_module_v1$' <<<"$dump" ||
    die "$id: napi_register_module_v1 is not exported"
  local dlls
  dlls=$(sed -n 's/^ *DLL Name: //p' <<<"$dump" | tr '[:upper:]' '[:lower:]' | sort -u | tr '\n' ' ')
  for d in $dlls; do
    case $d in node.exe | libnode* | libgcc* | libwinpthread* | libstdc++*) die "$id: imports $d" ;; esac
  done
  say "$id: imports $dlls"
}

check_macos() {
  local id=$1 bin=$2 desc=$3 arch=arm64
  [ "$id" = darwin-x64 ] && arch=x86_64
  [[ $desc == *"Mach-O 64-bit"*"$arch"*"dynamically linked shared library"* ]] ||
    die "$id: not a $arch Mach-O dylib: $desc"
  # (grep -q on a pipe would end it early: with pipefail, a failure)
  grep -qE ' T _napi_register_module_v1$' <<<"$(llvm-nm --defined-only --extern-only "$bin")" ||
    die "$id: _napi_register_module_v1 is not exported"
  local heads name minos
  heads=$(llvm-objdump --macho --private-headers "$bin")
  name=$(awk '/cmd LC_ID_DYLIB/ { f = 1 } f && $1 == "name" { print $2; exit }' <<<"$heads")
  [ -n "$name" ] || die "$id: no LC_ID_DYLIB"
  [[ $name != /* ]] || die "$id: install name is an absolute path: $name"
  minos=$(awk '/cmd LC_BUILD_VERSION/ { f = 1 } f && $1 == "minos" { print $2; exit }' <<<"$heads")
  [ "$minos" = 11.0 ] || die "$id: minimum macOS is '$minos', not 11.0"
  local signed=unsigned
  if [ "$id" = darwin-arm64 ]; then
    signed=$(node scripts/platform/macho-signature.mjs "$bin") || die "$id: $signed"
  fi
  say "$id: install name $name, minos $minos, $signed"
}

build_one() {
  local id=$1 target out bin start
  target=$(rust_target "$id")
  out=$REPO/target/platforms/$id
  bin=$(binary_of "$id")
  start=$(date +%s)
  rm -f "$out/$BINARY.node"
  (
    setup_target "$id" "$target"
    cross=(-x)
    [ "$id" = win32-x64-gnu ] && cross=()
    say "$id: napi build --release --target $target ${cross[*]} (CARGO_BUILD_JOBS=$CARGO_BUILD_JOBS)"
    nice -n 19 npx napi build --release --output-dir "$out" --no-js --dts binding.d.ts --target "$target" "${cross[@]}"
  ) || die "$id: the build failed"
  [ -s "$out/$BINARY.node" ] || die "$id: the build wrote no $out/$BINARY.node"
  local desc
  desc=$(file -b "$out/$BINARY.node")
  case $id in
    linux-*) check_linux "$id" "$out/$BINARY.node" "$desc" ;;
    win32-*) check_windows "$id" "$out/$BINARY.node" "$desc" ;;
    darwin-*) check_macos "$id" "$out/$BINARY.node" "$desc" ;;
  esac
  [ "$bin" = "$out/$BINARY.node" ] || cp "$out/$BINARY.node" "$bin"
  if [ "$id" != win32-x64-gnu ]; then
    local listed
    listed=$(cd "$(dirname "$bin")" && npm pack --dry-run --json 2>/dev/null | node -e '
      const [p] = JSON.parse(require("fs").readFileSync(0, "utf8"));
      console.log(p.files.map((f) => f.path).join(" "));')
    [[ " $listed " == *" $(basename "$bin") "* ]] || die "$id: npm pack --dry-run in npm/$id does not pack $(basename "$bin") (packs: $listed)"
  fi
  say "$id: OK $(du -h "$bin" | cut -f1) $bin ($(($(date +%s) - start)) s)"
}

for id in $ids; do build_one "$id"; done
