#!/usr/bin/env bash
# Configures and builds kvscope into build/ (Ninja, -j2 by default).
# Extra arguments go to CMake's configure step, e.g. -DKVSCOPE_BUILD_UI=OFF.
# KVSCOPE_WERROR=ON in the environment makes warnings errors, and
# KVSCOPE_BUILD_TYPE picks the CMake build type (default RelWithDebInfo: -O2 -g
# with assertions); CI sets both, to Release (-O3, no assertions: what
# packagers build) with warnings as errors.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cmake -S "$root" -B "$root/build" -G Ninja -DCMAKE_BUILD_TYPE="${KVSCOPE_BUILD_TYPE:-RelWithDebInfo}" \
  -DKVSCOPE_WERROR="${KVSCOPE_WERROR:-OFF}" "$@" >/dev/null
cmake --build "$root/build" -j "${KVSCOPE_JOBS:-2}"
