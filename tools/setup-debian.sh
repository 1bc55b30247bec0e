#!/usr/bin/env bash
# Installs the Debian 12 packages in tools/debian-packages.txt that are missing.
# Idempotent and non-interactive; uses sudo when not run as root.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

mapfile -t wanted < <(sed -e 's/#.*//' -e '/^[[:space:]]*$/d' "$here/debian-packages.txt")
missing=()
for pkg in "${wanted[@]}"; do
  # A nodejs from outside Debian (e.g. nodesource's) bundles npm and conflicts
  # with Debian's npm package: the command is what the tests need.
  if [ "$pkg" = npm ] && command -v npm >/dev/null; then continue; fi
  if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$pkg")
  fi
done
# tools/check-packages.sh (a test) asks apt what the list installs: it needs the
# package lists even when nothing is missing.
lists=(/var/lib/apt/lists/*_Packages*)
[ ${#missing[@]} -eq 0 ] && [ -e "${lists[0]}" ] && exit 0

sudo=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "error: run as root or install sudo to install: ${missing[*]}" >&2; exit 1; }
  sudo="sudo"
fi
$sudo apt-get update -qq
[ ${#missing[@]} -eq 0 ] && exit 0
echo "Installing: ${missing[*]}"
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
