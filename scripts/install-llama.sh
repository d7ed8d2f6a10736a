#!/usr/bin/env bash
# Install llama-cpp-python (the `llm` tests' local model server) built portably.
#
# pip builds it from source, and by default for the build machine's own CPU
# (-march=native): such a build dies with a general protection fault on a CPU it was
# not built for (an AMX-capable Sapphire Rapids, say). GGML_NATIVE=OFF targets AVX2
# with no AVX-512 or AMX, which runs on any x86-64 CPU of the last ten years.
# pip's wheel cache is keyed by the download URL alone, not by CMAKE_ARGS, so a native
# wheel cached earlier would be reused: the build bypasses it (--no-cache-dir) and
# keeps its wheel in a folder of its own, which only ever holds portable builds; an
# installed copy is replaced by that wheel whatever built it.
set -euo pipefail
cd "$(dirname "$0")/.."
version=$(grep -o 'llama-cpp-python\[server\]==[0-9.]*' pyproject.toml | cut -d= -f3)
wheels="${XDG_CACHE_HOME:-$HOME/.cache}/ctxcli/portable-wheels"
mkdir -p "$wheels"
if ! ls "$wheels"/llama_cpp_python-"$version"-*.whl >/dev/null 2>&1; then
    CMAKE_ARGS="-DGGML_NATIVE=OFF" pip wheel --no-cache-dir --no-deps -w "$wheels" \
        "llama-cpp-python==$version"
fi
pip install --no-cache-dir --force-reinstall --no-deps "$wheels"/llama_cpp_python-"$version"-*.whl
