#!/usr/bin/env bash
# tools/check-packages.sh against this build: tools/debian-packages.txt installs
# every package the configure step resolves, the compiler and linker read and
# the app loads; and with a package taken out of the list, the check fails and
# names it — one package for each of configure time (Qt6Charts needs Qt6OpenGL's
# CMake files), build time (glslc) and run time (lavapipe, loaded by the app).
# usage: packages_test.sh SOURCE_DIR BUILD_DIR
set -euo pipefail
root=$1 build=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

"$root/tools/check-packages.sh" collect "$tmp/needs" "$build" || exit $?
"$root/tools/check-packages.sh" check "$tmp/needs"

failed=0
for pkg in libqt6opengl6-dev glslc mesa-vulkan-drivers; do
  grep -v -x "$pkg" "$root/tools/debian-packages.txt" >"$tmp/list"
  if out=$("$root/tools/check-packages.sh" check "$tmp/needs" "$tmp/list"); then
    echo "FAIL: the check passed with $pkg left out of the list"
    failed=1
  elif ! grep -q "^  $pkg " <<<"$out"; then
    echo "FAIL: with $pkg left out, the check did not name it:"
    echo "$out"
    failed=1
  else
    echo "ok: without $pkg the check fails: $(grep "^  $pkg " <<<"$out" | tr -s ' ')"
  fi
done
exit $failed
