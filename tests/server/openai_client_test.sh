#!/usr/bin/env bash
# Runs openai_client_test.mjs with node against `kvscope-cli serve`; exit 77
# (a CTest skip) when node or the openai client is not installed.
#   openai_client_test.sh KVSCOPE_CLI NODE_CLIENT_DIR
set -euo pipefail
cli=$1 client=$2
if ! command -v node >/dev/null; then
  echo "skip: node is not installed (apt-get install nodejs npm)"
  exit 77
fi
if [[ ! -f $client/node_modules/openai/package.json ]]; then
  echo "skip: the openai npm client is missing; run tools/setup-node-client.sh $(dirname "$client")"
  exit 77
fi
exec node "$(dirname "${BASH_SOURCE[0]}")/openai_client_test.mjs" "$cli" "$client"
