#!/usr/bin/env bash
# Saves a PNG of kvscope's main window, taken by the app itself (--screenshot) once the
# Vulkan device probe has answered, so the status bar shows the real device.
#
#   tools/screenshot.sh [OUTPUT.png]        default: docs/screenshots/main-window.png
#
# KVSCOPE_BUILD_DIR  build folder holding app/kvscope (default: build/)
# KVSCOPE_PLATFORM   xvfb (default: a virtual X server via xvfb-run, as on a desktop)
#                    or offscreen (Qt's own renderer, no X server needed)
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
build=${KVSCOPE_BUILD_DIR:-$root/build}
out=${1:-$root/docs/screenshots/main-window.png}
app=$build/app/kvscope

if [[ ! -x $app ]]; then
  echo "error: $app not found; build the kvscope target or set KVSCOPE_BUILD_DIR" >&2
  exit 1
fi
mkdir -p "$(dirname "$out")"

case ${KVSCOPE_PLATFORM:-xvfb} in
  xvfb)
    command -v xvfb-run >/dev/null || { echo "error: xvfb-run missing: apt-get install xvfb" >&2; exit 1; }
    timeout 120 xvfb-run -a -s "-screen 0 1600x1000x24" \
      env QT_QPA_PLATFORM=xcb "$app" --screenshot "$out"
    ;;
  offscreen)
    # Qt's offscreen screen is 800x600 by default; give it a desktop-sized one.
    config=$(mktemp --suffix=.json)
    trap 'rm -f "$config"' EXIT
    echo '{"screens": [{"name": "kvscope", "x": 0, "y": 0, "width": 1600, "height": 1000,
      "logicalDpi": 96, "logicalBaseDpi": 96, "dpr": 1}]}' >"$config"
    QT_QPA_PLATFORM="offscreen:configfile=$config" timeout 120 "$app" --screenshot "$out"
    ;;
  *)
    echo "error: KVSCOPE_PLATFORM must be xvfb or offscreen" >&2
    exit 1
    ;;
esac
echo "saved $out"
