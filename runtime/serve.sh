#!/usr/bin/env bash
# Serve a Qwen3.5 hybrid target on vLLM with one patchq profile.
#
#   runtime/serve.sh [PROFILE] [-- extra vllm serve args...]
#
# PROFILE: dflash (default) | dense | base | mtp. The profile's patches are applied with
# `patchq apply` (a fast no-op when already applied); if that fails, the report is
# printed and nothing is served. PATCHQ_MODE=run patches at import time instead and
# leaves site-packages untouched (read-only images, shared or uv-linked environments).
#
# Environment overrides (defaults in brackets):
#   MODEL [/model]  DRAFTER [/drafter]  PORT [8000]  HOST [0.0.0.0]  SERVED_NAME [qwen]
#   MAX_MODEL_LEN [16384]  GPU_MEMORY_UTILIZATION [0.85]  MAX_NUM_SEQS [4]
#   NUM_SPEC_TOKENS [12 for dflash/dense, 2 for mtp]  DRAFTER_BACKEND [FLASH_ATTN]
#   PREFIX_CACHING [1]  TOOL_PARSER [qwen3_coder]  REASONING_PARSER [qwen3]
#   PATCHQ [patchq]  VLLM [the vllm beside $PATCHQ, else vllm on PATH]
#   PATCHQ_MODE [apply|run]  PATCHQ_STRICT [1]  VLLM_EXTRA_ARGS []
# patchq patches the vLLM of its own environment: VLLM defaults to the `vllm` script of
# that same environment, so the server runs the code that was patched.
set -euo pipefail

PROFILE="${PROFILE:-dflash}"
if [ "$#" -gt 0 ] && [ "$1" != "--" ]; then PROFILE="$1"; shift; fi
[ "${1:-}" = "--" ] && shift

MODEL="${MODEL:-/model}"
DRAFTER="${DRAFTER:-/drafter}"
PORT="${PORT:-8000}"
HOST="${HOST:-0.0.0.0}"
SERVED_NAME="${SERVED_NAME:-qwen}"
MAX_MODEL_LEN="${MAX_MODEL_LEN:-16384}"
GPU_MEMORY_UTILIZATION="${GPU_MEMORY_UTILIZATION:-0.85}"
MAX_NUM_SEQS="${MAX_NUM_SEQS:-4}"
DRAFTER_BACKEND="${DRAFTER_BACKEND:-FLASH_ATTN}"
PREFIX_CACHING="${PREFIX_CACHING:-1}"
TOOL_PARSER="${TOOL_PARSER:-qwen3_coder}"
REASONING_PARSER="${REASONING_PARSER:-qwen3}"
PATCHQ="${PATCHQ:-patchq}"
PATCHQ_MODE="${PATCHQ_MODE:-apply}"
if [ -z "${VLLM:-}" ]; then
  pq_bin="$(dirname "$(command -v "$PATCHQ" || echo "$PATCHQ")")"
  if [ -x "$pq_bin/vllm" ]; then VLLM="$pq_bin/vllm"; else VLLM=vllm; fi
fi

args=(serve "$MODEL"
  --served-model-name "$SERVED_NAME"
  --host "$HOST" --port "$PORT"
  --max-model-len "$MAX_MODEL_LEN"
  --gpu-memory-utilization "$GPU_MEMORY_UTILIZATION"
  --max-num-seqs "$MAX_NUM_SEQS"
  --enable-auto-tool-choice --tool-call-parser "$TOOL_PARSER"
  --reasoning-parser "$REASONING_PARSER")

if [ "$PREFIX_CACHING" = "1" ]; then
  args+=(--enable-prefix-caching)
else
  args+=(--no-enable-prefix-caching)
fi

case "$PROFILE" in
  dflash|dense)
    n="${NUM_SPEC_TOKENS:-12}"
    args+=(--speculative-config "{\"method\":\"dflash\",\"model\":\"$DRAFTER\",\"num_speculative_tokens\":$n,\"attention_backend\":\"$DRAFTER_BACKEND\"}")
    ;;
  mtp)
    n="${NUM_SPEC_TOKENS:-2}"
    args+=(--speculative-config "{\"method\":\"mtp\",\"num_speculative_tokens\":$n}")
    ;;
  base) ;;
  *) echo "serve.sh: unknown profile '$PROFILE' (dflash, dense, base, mtp)" >&2; exit 2 ;;
esac

# Every vLLM process checks that this profile is live (patchq_runtime.plugin).
export PATCHQ_EXPECT_PROFILE="$PROFILE"
export PATCHQ_STRICT="${PATCHQ_STRICT:-1}"

# shellcheck disable=SC2206
extra=(${VLLM_EXTRA_ARGS:-})

if [ "$PATCHQ_MODE" = "run" ]; then
  exec "$PATCHQ" run --profile "$PROFILE" -- "$VLLM" "${args[@]}" "${extra[@]}" "$@"
fi
if ! "$PATCHQ" apply --profile "$PROFILE"; then
  echo "serve.sh: patchq could not apply profile '$PROFILE' (report above); not serving" >&2
  exit 1
fi
exec "$VLLM" "${args[@]}" "${extra[@]}" "$@"
