#!/usr/bin/env bash
# Configures and builds kvscope into build/ (Ninja, -j2 by default).
# Extra arguments go to CMake's configure step, e.g. -DKVSCOPE_BUILD_UI=OFF.
# KVSCOPE_WERROR=ON in the environment makes warnings errors (CI sets it).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cmake -S "$root" -B "$root/build" -G Ninja -DKVSCOPE_WERROR="${KVSCOPE_WERROR:-OFF}" "$@" >/dev/null
cmake --build "$root/build" -j "${KVSCOPE_JOBS:-2}"
