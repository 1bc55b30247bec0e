#!/usr/bin/env bash
# Sets up a Debian 12 machine, builds everything and runs every test suite
# (GoogleTest engine tests, QtTest UI tests, CLI tests) through CTest.
# Vulkan tests run on the first device found; on machines without a GPU
# that is Mesa's lavapipe.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$root/tools/setup-debian.sh"
"$root/tools/build.sh"
# The openai npm client the server's integration test drives; without the npm
# registry that test skips and says why.
"$root/tools/setup-node-client.sh" "$root/build" ||
  echo "warning: could not install the openai npm client; server.openai_node_client will skip" >&2
cd "$root/build"
ctest --output-on-failure -j "${KVSCOPE_JOBS:-2}"
