#!/usr/bin/env bash
# Sets up a Debian 12 machine, builds kvscope and opens the desktop app.
# Arguments are passed to the app (e.g. a model path).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$root/tools/setup-debian.sh"
"$root/tools/build.sh"
exec "$root/build/app/kvscope" "$@"
