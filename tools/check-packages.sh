#!/usr/bin/env bash
# Checks that tools/debian-packages.txt installs everything kvscope uses, on a
# machine that may have many more packages than a fresh Debian 12 one.
#
#   tools/check-packages.sh collect NEEDS [BUILD]   write NEEDS: "package<TAB>file" for every
#                                                   file the build resolved or the app loaded
#   tools/check-packages.sh check NEEDS [LIST]      fail, naming them, when packages in NEEDS
#                                                   are not installed by LIST
#   tools/check-packages.sh [LIST]                  both, with a throwaway NEEDS
#
# What counts as used, each file mapped to its package with dpkg -S:
#  - configure time: every CMake file a fresh configure runs (package config files,
#    find modules) and every file or folder path it stores in its cache (libraries,
#    include folders, programs such as glslc);
#  - build time: every header the compiler read (ninja's dependency log of BUILD,
#    default build/) and every library on a link line;
#  - run time: every shared object any process loads while the app starts under
#    xvfb and saves a screenshot (tools/screenshot.sh, with LD_DEBUG=files), which
#    includes the Qt platform plugin and the Vulkan driver, and while
#    kvscope-cli runs its Vulkan device check.
# Not traced: data files read at run time (fonts, xkb keymaps, Vulkan ICD
# manifests); the list names their packages by hand.
# What LIST installs is what apt would install for it on an empty system
# (apt-get -s with no package marked installed, recommends off, as setup-debian.sh
# installs) plus the packages of priority "required" that every Debian system has.
# A file no package owns (e.g. under /usr/local) is reported too. Exit 77 (a
# skip for CTest) where there is no dpkg or no apt package list to ask.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

# Cache entries of optional probes that CMake stores when it happens to find them
# but the build never uses, so they are not needed on a fresh machine.
#  - FindOpenGL (via Qt6Gui's WrapOpenGL) looks for GLU, EGL and GLES as well;
#    kvscope links OpenGL::GL only through Qt.
#  - FindVulkan looks for the SDK's optional tools and libraries (glslangValidator,
#    dxc, the shaderc combined library, MoltenVK); kvscope uses glslc and the loader.
optional_cache_vars='^(OPENGL_glu_LIBRARY|OPENGL_egl_LIBRARY|OPENGL_EGL_INCLUDE_DIR|OPENGL_gles2_LIBRARY|OPENGL_gles3_LIBRARY|OPENGL_GLES2_INCLUDE_DIR|OPENGL_GLES3_INCLUDE_DIR|OPENGL_GLX_INCLUDE_DIR|Vulkan_GLSLANG_VALIDATOR_EXECUTABLE|Vulkan_GLSLC_EXECUTABLE_DIR|Vulkan_dxc_EXECUTABLE|Vulkan_dxc_LIBRARY|Vulkan_shaderc_combined_LIBRARY|Vulkan_MoltenVK_LIBRARY|Vulkan_MoltenVK_INCLUDE_DIR|Vulkan_Layer_VALIDATION_LIBRARY|Vulkan_volk_LIBRARY|Vulkan_glslang_LIBRARY|Vulkan_glslang-spirv_LIBRARY|Vulkan_OSDependent_LIBRARY|Vulkan_SPIRV-Tools_LIBRARY|Vulkan_SPIRV-Tools-opt_LIBRARY|Vulkan_GenericCodeGen_LIBRARY|Vulkan_MachineIndependent_LIBRARY|Vulkan_glslang-default-resource-limits_LIBRARY|Vulkan_spirv-cross-[a-z]*_LIBRARY|Vulkan_SPIRV-Tools_[a-z]*)(-ADVANCED)?:'

# Paths that are not package files: the tree, the build, scratch and kernel files.
skip_paths() {
  local path
  while read -r path; do
    case $path in
      "$root"/* | "$build"/* | "$tmp"/* | /tmp/* | /proc/* | /sys/* | /dev/* | /run/*) ;;
      /etc/ld.so.cache) ;;
      *) printf '%s\n' "$path" ;;
    esac
  done
}

# Every file in FILE as the package that owns it, "package<TAB>path". dpkg may list
# a file under /lib while it is read as /usr/lib (merged /usr), so both are tried,
# and both a symlink and its target count.
owners() {
  local files=$1 path
  sort -u "$files" | while read -r path; do
    # Folders are shared by many packages; the files in them count.
    if [[ -f $path ]]; then printf '%s\n' "$path"; fi
  done >"$tmp/existing"
  { cat "$tmp/existing"; xargs -a "$tmp/existing" -d '\n' -r readlink -f; } | skip_paths |
    sort -u >"$tmp/paths"
  # dpkg -S prints "pkg[:arch][, pkg[:arch]]: path"; diversion lines are not ownership.
  dpkg_owners() {
    xargs -a "$1" -d '\n' -r dpkg -S 2>/dev/null | grep -v '^diversion' |
      sed -n 's|^\(.*\): \(/.*\)$|\1\t\2|p' || true
  }
  dpkg_owners "$tmp/paths" >"$tmp/owned"
  cut -f2 "$tmp/owned" | sort -u | comm -13 - "$tmp/paths" >"$tmp/unowned"
  # The other spelling of each unowned path under merged /usr, mapped back.
  sed -E 's#^/usr/(lib|lib64|bin|sbin)/#/\1/#; t; s#^/(lib|lib64|bin|sbin)/#/usr/\1/#; t; d' \
    "$tmp/unowned" >"$tmp/alt"
  paste "$tmp/alt" <(grep -E '^/(usr/)?(lib|lib64|bin|sbin)/' "$tmp/unowned") >"$tmp/alt-map"
  dpkg_owners "$tmp/alt" | awk -F'\t' 'NR == FNR {back[$1] = $2; next} {print $1 "\t" back[$2]}' \
    "$tmp/alt-map" - >>"$tmp/owned"
  cut -f2 "$tmp/owned" | sort -u | comm -13 - "$tmp/paths" >"$tmp/unowned"
  while read -r path; do
    # A symlink no package owns (made by ldconfig) counts through its target.
    if [[ ! -L $path ]]; then printf '(no-package)\t%s\n' "$path"; fi
  done <"$tmp/unowned" >>"$tmp/owned"
  # One line per (package, path); "a, b: path" means several packages ship it.
  awk -F'\t' '{n = split($1, p, ", "); for (i = 1; i <= n; ++i) {sub(/:[a-z0-9]+$/, "", p[i]); print p[i] "\t" $2}}' \
    "$tmp/owned" | sort -u
}

collect() {
  local needs=$1
  build=$(cd "${2:-$root/build}" && pwd)
  [[ -f $build/build.ninja ]] || { echo "error: $build is not a configured build folder" >&2; exit 2; }
  : >"$tmp/files"

  # Configure time: a fresh configure into a scratch folder, traced.
  cmake -S "$root" -B "$tmp/configure" -G Ninja --trace-expand --trace-format=json-v1 \
    --trace-redirect="$tmp/trace.json" >/dev/null
  sed -n 's/.*"file" *: *"\([^"]*\)".*/\1/p' "$tmp/trace.json" >>"$tmp/files"
  grep -E '^[A-Za-z0-9_.+-]+:(FILEPATH|PATH|STRING|INTERNAL)=/' "$tmp/configure/CMakeCache.txt" |
    grep -v -E "$optional_cache_vars" | sed 's/^[^=]*=//' | tr ';' '\n' | grep '^/' >>"$tmp/files" || true

  # Build time: headers from the dependency log, libraries from the link lines.
  ninja -C "$build" -t deps | sed -n 's/^ \{4\}\(\/.*\)$/\1/p' >>"$tmp/files"
  ninja -C "$build" -t commands | tr ' ' '\n' | grep -E '^/.*\.(so(\.[0-9]+)*|a)$' >>"$tmp/files" || true

  # Run time: the app under xvfb until its screenshot is saved, and the programs
  # that run it there.
  if [[ -x $build/app/kvscope ]]; then
    for program in xvfb-run Xvfb xauth; do command -v "$program" || true; done >>"$tmp/files"
    mkdir -p "$tmp/ld"
    LD_DEBUG=files LD_DEBUG_OUTPUT="$tmp/ld/log" KVSCOPE_BUILD_DIR=$build \
      "$root/tools/screenshot.sh" empty "$tmp/shot.png" >/dev/null
    [[ -s $tmp/shot.png ]] || { echo "error: the app saved no screenshot" >&2; exit 2; }
    LD_DEBUG=files LD_DEBUG_OUTPUT="$tmp/ld/cli" XDG_CACHE_HOME="$tmp/cache" \
      "$build/app/kvscope-cli" devices --check >/dev/null
    local logs=("$tmp"/ld/*)
    [[ -e ${logs[0]} ]] || { echo "error: LD_DEBUG wrote no log" >&2; exit 2; }
    cat "${logs[@]}" | sed -n 's/.*file=\(\/[^ ]*\) \[[0-9]*\]; *\(dynamically loaded\|needed\).*/\1/p; s/.*calling init: \(\/[^ ]*\)$/\1/p' >>"$tmp/files"
  else
    echo "note: $build has no app/kvscope (a build without the UI): run-time libraries not traced"
  fi
  owners "$tmp/files" >"$needs"
  echo "collected $(cut -f1 "$needs" | sort -u | wc -l) packages from $(wc -l <"$tmp/paths") files"
}

check() {
  local needs=$1 list=${2:-$root/tools/debian-packages.txt}
  local wanted
  mapfile -t wanted < <(sed -e 's/#.*//' -e '/^[[:space:]]*$/d' "$list" | tr -d ' ')
  # What apt installs for the list on an empty system, and what every system has.
  if ! apt-get install -s -qq --no-install-recommends -o Dir::State::status=/dev/null \
      "${wanted[@]}" >"$tmp/sim" 2>"$tmp/sim.err"; then
    echo "error: apt cannot resolve $list (run apt-get update?):" >&2
    cat "$tmp/sim.err" >&2
    exit 2
  fi
  { sed -n 's/^Inst \([^ ]*\) .*/\1/p' "$tmp/sim"
    dpkg-query -W -f='${Package} ${Priority}\n' | awk '$2 == "required" {print $1}'
  } | sed -E 's/:[a-z0-9]+$//' | sort -u >"$tmp/closure"
  local missing
  missing=$(cut -f1 "$needs" | sort -u | comm -23 - "$tmp/closure")
  if [[ -z $missing ]]; then
    echo "ok: $(basename "$list") installs all $(cut -f1 "$needs" | sort -u | wc -l) packages the build and the app use"
    return 0
  fi
  echo "error: $(basename "$list") does not install packages that the build or the app use:"
  local pkg
  for pkg in $missing; do
    printf '  %-28s e.g. %s\n' "$pkg" "$(awk -F'\t' -v p="$pkg" '$1 == p {print $2; exit}' "$needs")"
  done
  return 1
}

lists=(/var/lib/apt/lists/*_Packages*)
if ! command -v dpkg >/dev/null || [[ ! -e ${lists[0]} ]]; then
  echo "skipped: no dpkg or no apt package lists here (run apt-get update)"
  exit 77
fi
build=$root/build
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
case ${1:-} in
  collect) collect "${2:?NEEDS file}" "${3:-}" ;;
  check) check "${2:?NEEDS file}" "${3:-}" ;;
  *)
    collect "$tmp/needs"
    check "$tmp/needs" "${1:-}"
    ;;
esac
