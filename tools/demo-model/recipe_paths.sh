# Sourced by the model recipes (make-*-model.sh): where the tools, the CLI, the
# teacher model and Debian's python (which has torch) are.
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
cli="${KVSCOPE_CLI:-$root/build/app/kvscope-cli}"
shared="${KVSCOPE_SHARED:-$root/../shared}"
teacher="$shared/models/stories260K.gguf"
python=/usr/bin/python3
