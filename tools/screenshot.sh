#!/usr/bin/env bash
# Saves PNGs of kvscope's main window, taken by the app itself (--screenshot):
#
#   tools/screenshot.sh                    both pictures below, into docs/screenshots/
#   tools/screenshot.sh empty [OUT.png]    no model: the empty state, once the Vulkan device
#                                          probe has answered (default main-window.png)
#   tools/screenshot.sh chat [OUT.png]     mid-conversation: loads a model with a compressed
#                                          KV cache, sends two prompts and captures while
#                                          the second reply streams, inspector on the KV
#                                          memory tab (default chat-inspector.png)
#   tools/screenshot.sh indexer [OUT.png]  the same conversation with sparse attention
#                                          (indexer=64:32:4, captured mass measured), on the
#                                          Indexer tab (default indexer.png)
#   tools/screenshot.sh lab [OUT.png]      the same conversation (auto policy), then
#                                          "Compare schemes on this conversation" with its
#                                          default policies (default fidelity-lab.png)
#   tools/screenshot.sh serve [OUT.png]    the chat conversation, then Server › Serve on
#                                          Localhost, captured once a curl client's two
#                                          requests were answered (default serving.png)
#   tools/screenshot.sh reopen [OUT.png]   the chat conversation, then New Chat (its KV cache
#                                          saved) and the conversation reopened, captured
#                                          once the cache was restored (default reopened.png)
#   tools/screenshot.sh firstrun [OUT.png] the demo model with the app's own defaults (auto
#                                          policy, replies a quarter of the context, the
#                                          middle left out when the chat outgrows it): five
#                                          prompts, well past the 512-token context, captured
#                                          while the fifth reply streams (default first-run.png)
#   tools/screenshot.sh measuring [OUT.png] the demo model under auto after a short first
#                                          reply, while auto still measures in f16, on the KV
#                                          memory tab (default auto-measuring.png)
#   tools/screenshot.sh experts [OUT.png]  a random-weight qwen3moe-shaped model (8 layers,
#                                          32 experts, 4 per token) in the same chat, on the
#                                          Experts tab (default experts.png)
#   tools/screenshot.sh overflow [OUT.png] the demo model with "When the context is full:
#                                          Stop": prompts until the conversation no longer
#                                          fits, captured with the error and its New Chat /
#                                          Leave Out Oldest Turns buttons (default
#                                          context-full.png)
#
# KVSCOPE_BUILD_DIR      build folder holding app/kvscope (default: build/)
# KVSCOPE_PLATFORM       xvfb (default: a virtual X server via xvfb-run, as on a desktop)
#                        or offscreen (Qt's own renderer, no X server needed)
# KVSCOPE_DEMO_MODEL     model for `chat` (default: the demo model, resources/models/)
# KVSCOPE_DEMO_POLICY    KV policy for `chat` (default: k=q8_0,v=turbo3,boundary=1)
# KVSCOPE_DEMO_ARGS      extra app options for `chat`, e.g. "--demo-backend cpu --demo-tab 3"
# KVSCOPE_DEMO_PORT      port for `serve` (default 18080)
#                        (kvscope --help lists the --demo-* options)
#
# The app runs with a throwaway home folder, so a picture never shows (or changes) the
# user's own chats and settings; its ~/models links to ../shared/models, so the empty
# state lists the shared fixtures as models found on this computer.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
build=${KVSCOPE_BUILD_DIR:-$root/build}
app=$build/app/kvscope
shots=$root/docs/screenshots

if [[ ! -x $app ]]; then
  echo "error: $app not found; build the kvscope target or set KVSCOPE_BUILD_DIR" >&2
  exit 1
fi

home=$(mktemp -d)
trap 'rm -rf "$home"' EXIT
export XDG_DATA_HOME=$home/data XDG_CONFIG_HOME=$home/config XDG_CACHE_HOME=$home/cache
[[ -d $root/../shared/models ]] && ln -s "$(cd "$root/../shared/models" && pwd)" "$home/models"
export HOME=$home

run_app() {
  case ${KVSCOPE_PLATFORM:-xvfb} in
    xvfb)
      command -v xvfb-run >/dev/null || { echo "error: xvfb-run missing: apt-get install xvfb" >&2; exit 1; }
      timeout 300 xvfb-run -a -s "-screen 0 1600x1000x24" env QT_QPA_PLATFORM=xcb "$app" "$@"
      ;;
    offscreen)
      # Qt's offscreen screen is 800x600 by default; give it a desktop-sized one.
      local config=$home/offscreen.json
      echo '{"screens": [{"name": "kvscope", "x": 0, "y": 0, "width": 1600, "height": 1000,
        "logicalDpi": 96, "logicalBaseDpi": 96, "dpr": 1}]}' >"$config"
      QT_QPA_PLATFORM="offscreen:configfile=$config" timeout 300 "$app" "$@"
      ;;
    *)
      echo "error: KVSCOPE_PLATFORM must be xvfb or offscreen" >&2
      exit 1
      ;;
  esac
}

shoot_empty() {
  local out=${1:-$shots/main-window.png}
  mkdir -p "$(dirname "$out")"
  run_app --screenshot "$out"
  echo "saved $out"
}

shoot_chat() {
  local out=${1:-$shots/chat-inspector.png}
  local model=${KVSCOPE_DEMO_MODEL:-$root/resources/models/kvscope-demo.gguf}
  [[ -e $model ]] || { echo "error: model $model not found; set KVSCOPE_DEMO_MODEL" >&2; exit 1; }
  mkdir -p "$(dirname "$out")"
  # shellcheck disable=SC2086  # KVSCOPE_DEMO_ARGS is a list of options
  run_app --screenshot "$out" --demo-model "$model" \
    --demo-kv-policy "${KVSCOPE_DEMO_POLICY-k=q8_0,v=turbo3,boundary=1}" \
    --demo-max-tokens 200 \
    --demo-chat "Tell me a story about a dog." \
    --demo-chat "Tell me another story, about a little bird." \
    ${KVSCOPE_DEMO_ARGS:-}
  echo "saved $out"
}

shoot_indexer() {
  local out=${1:-$shots/indexer.png}
  KVSCOPE_DEMO_POLICY=${KVSCOPE_DEMO_POLICY-k=q8_0,v=turbo4,indexer=64:32:4} \
    KVSCOPE_DEMO_ARGS="--demo-backend cpu --demo-tab 2 --demo-indexer-diagnostic --demo-tokens 120 ${KVSCOPE_DEMO_ARGS:-}" \
    shoot_chat "$out"
}

# A random-weight model of a mixture-of-experts shape (qwen3moe: 8 layers, 32 experts, 4
# per token; its text is noise), on the Experts tab.
shoot_experts() {
  local out=${1:-$shots/experts.png}
  local cli=$build/app/kvscope-cli
  "$cli" make-model -o "$home/moe.gguf" --arch qwen3moe --layers 8 --dim 256 --ffn 512 \
    --heads 4 --kv-heads 2 --head-dim 64 --vocab 512 --ctx 1024 --experts 32 \
    --experts-used 4 --expert-ffn 128 --seed 7 >/dev/null
  KVSCOPE_DEMO_MODEL=$home/moe.gguf \
    KVSCOPE_DEMO_ARGS="--demo-backend cpu --demo-tab 4 --demo-tokens 120 ${KVSCOPE_DEMO_ARGS:-}" \
    shoot_chat "$out"
}

shoot_lab() {
  local out=${1:-$shots/fidelity-lab.png}
  KVSCOPE_DEMO_POLICY=${KVSCOPE_DEMO_POLICY-auto} \
    KVSCOPE_DEMO_ARGS="--demo-backend cpu --demo-compare ${KVSCOPE_DEMO_ARGS:-}" \
    shoot_chat "$out"
}

# A client for the app's server: once it answers, a short completion and a streamed chat
# completion, the second's numbers then shown by the inspector.
serve_client() {
  local base=http://127.0.0.1:$1
  for _ in $(seq 600); do
    curl -sf "$base/health" >/dev/null 2>&1 && break
    sleep 0.5
  done
  curl -s "$base/v1/completions" -H 'Content-Type: application/json' \
    -d '{"prompt": "Once upon a time", "max_tokens": 16, "temperature": 0}' >/dev/null || true
  curl -sN "$base/v1/chat/completions" -H 'Content-Type: application/json' \
    -d '{"messages": [{"role": "user", "content": "Tell me a story about a cat."}],
         "max_tokens": 300, "stream": true}' >/dev/null || true
}

shoot_serve() {
  local out=${1:-$shots/serving.png}
  local port=${KVSCOPE_DEMO_PORT:-18080}
  command -v curl >/dev/null || { echo "error: curl missing: apt-get install curl" >&2; exit 1; }
  serve_client "$port" &
  local client=$!
  KVSCOPE_DEMO_ARGS="--demo-serve $port --demo-tab 3 ${KVSCOPE_DEMO_ARGS:-}" shoot_chat "$out"
  kill "$client" 2>/dev/null || true
}

shoot_reopen() {
  KVSCOPE_DEMO_ARGS="--demo-backend cpu --demo-reopen ${KVSCOPE_DEMO_ARGS:-}" \
    shoot_chat "${1:-$shots/reopened.png}"
}

shoot_defaults() {
  local out=$1
  shift
  mkdir -p "$(dirname "$out")"
  run_app --screenshot "$out" --demo-model "$root/resources/models/kvscope-demo.gguf" \
    --demo-backend cpu "$@"
  echo "saved $out"
}

shoot_firstrun() {
  shoot_defaults "${1:-$shots/first-run.png}" --demo-tokens 24 \
    --demo-chat "Say hello." \
    --demo-chat "Tell me a story about a dog." \
    --demo-chat "Tell me another one, about a cat." \
    --demo-chat "And one about a little bird." \
    --demo-chat "One more, about a fish in the sea."
}

shoot_measuring() {
  # An 8-token reply keeps the conversation under the 64 tokens auto measures.
  shoot_defaults "${1:-$shots/auto-measuring.png}" --demo-tokens 6 --demo-max-tokens 8 \
    --demo-chat "Say hello."
}

shoot_overflow() {
  shoot_defaults "${1:-$shots/context-full.png}" --demo-context-overflow stop \
    --demo-chat "Say hello." \
    --demo-chat "Tell me a story about a dog." \
    --demo-chat "Tell me another one, about a cat." \
    --demo-chat "And one about a little bird." \
    --demo-chat "One more, about a fish in the sea." \
    --demo-chat "And the last one, about a bear."
}

case ${1:-all} in
  all)
    shoot_empty && shoot_chat && shoot_indexer && shoot_lab && shoot_serve && shoot_reopen &&
      shoot_firstrun && shoot_measuring && shoot_overflow && shoot_experts
    ;;
  empty) shoot_empty "${2:-}" ;;
  chat) shoot_chat "${2:-}" ;;
  indexer) shoot_indexer "${2:-}" ;;
  lab) shoot_lab "${2:-}" ;;
  serve) shoot_serve "${2:-}" ;;
  reopen) shoot_reopen "${2:-}" ;;
  firstrun) shoot_firstrun "${2:-}" ;;
  measuring) shoot_measuring "${2:-}" ;;
  overflow) shoot_overflow "${2:-}" ;;
  experts) shoot_experts "${2:-}" ;;
  *.png) shoot_empty "$1" ;;  # the script's original form: tools/screenshot.sh OUT.png
  *)
    echo "usage: tools/screenshot.sh [all | empty | chat | indexer | lab | serve | reopen | firstrun | measuring | overflow | experts] [OUT.png]" >&2
    exit 2
    ;;
esac
