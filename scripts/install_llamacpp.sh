#!/usr/bin/env bash
# Install llama-cpp-python (the `llamacpp` backend and its OpenAI-compatible server) into a
# virtual environment, compiled for this CPU but without llama.cpp's AMX kernels.
#
#   scripts/install_llamacpp.sh .venv/bin/pip
#
# Why AMX is off: llama-cpp-python ships as source and compiles llama.cpp with -march=native.
# On Intel CPUs that report AMX (Sapphire Rapids and later) that compiles llama.cpp's AMX
# kernels, and in the Firecracker VMs this project is developed and tested in they segfault on
# the first prompt longer than one token (2026-11-25, Xeon with amx_int8). AMX only speeds up
# int8 prefill; every other kernel stays native. Explicit -mno-amx-* flags win over
# -march=native in GCC and Clang whatever their order, so CFLAGS/CXXFLAGS carry them.
#
# Why a wheel folder of our own: pip's wheel cache keys a build on the source archive, not on
# the compiler flags, so a wheel built earlier with AMX would be reused silently. The wheel is
# built once per (flags, machine, compiler) into its own folder under the longctx cache and
# installed from there with --only-binary, so a later `make install` reuses it.
set -euo pipefail

pip="${1:?usage: $0 PATH/TO/venv/bin/pip}"
version="0.3.36"
cc="${CC:-cc}"

flags=""
case "$(uname -m)" in
  x86_64 | amd64)
    # Older compilers do not know the AMX options; they cannot emit AMX code either.
    if echo 'int main(void){return 0;}' | "$cc" -x c -mno-amx-tile -mno-amx-int8 -mno-amx-bf16 -o /dev/null - 2>/dev/null; then
      flags="-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
    fi
    ;;
esac

python="$(dirname "$pip")/python"
build_id=$(printf '%s\n' "$version" "$flags" "$(uname -m)" "$("$cc" --version 2>/dev/null | head -n1)" "${CMAKE_ARGS:-}" \
  "$("$python" -c 'import sys; print(sys.version)')" |
  sha256sum | cut -c1-12)
# LONGCTX_WHEELS moves the wheel folder out of the cache (CI empties the cache but keeps wheels).
wheels="${LONGCTX_WHEELS:-${LONGCTX_CACHE:-$HOME/.cache/longctx}/wheels}/llama-cpp-python-$version-$build_id"

if ! ls "$wheels"/llama_cpp_python-"$version"-*.whl >/dev/null 2>&1; then
  echo "compiling llama-cpp-python $version (llama.cpp; about 3-4 minutes on 2 cores; flags: ${flags:-none})"
  mkdir -p "$wheels"
  CFLAGS="${CFLAGS:-} $flags" CXXFLAGS="${CXXFLAGS:-} $flags" \
    "$pip" wheel -q --no-deps --no-cache-dir --no-binary llama-cpp-python -w "$wheels" "llama-cpp-python==$version"
fi
# Our build replaces any 0.3.36 already there (one from pip's cache would count as installed);
# the second call then adds only its dependencies and the server extras.
"$pip" install -q --no-deps --force-reinstall "$wheels"/llama_cpp_python-"$version"-*.whl
"$pip" install -q --find-links "$wheels" --only-binary llama-cpp-python "llama-cpp-python[server]==$version"
"$python" - <<'PY'
import llama_cpp
info = llama_cpp.llama_print_system_info().decode()
if "AMX" in info:
    raise SystemExit(f"llama.cpp was built with AMX kernels, which crash here: {info}")
print("llama.cpp:", info.strip())
PY
