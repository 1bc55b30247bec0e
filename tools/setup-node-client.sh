#!/usr/bin/env bash
# Installs the official openai npm client that tests/server/openai_client_test.mjs
# drives `kvscope-cli serve` with, into a build folder (never the source tree).
# 4.x runs on Debian 12's node 18; the version is pinned so the test does not
# change under us.
#   tools/setup-node-client.sh [BUILD_DIR]     (default: build) -> BUILD_DIR/node-client
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${1:-$root/build}
command -v npm >/dev/null || { echo "error: npm is missing (apt-get install nodejs npm)" >&2; exit 1; }
npm install --prefix "$build/node-client" --no-audit --no-fund --no-save openai@4.104.0
echo "openai client installed in $build/node-client"
