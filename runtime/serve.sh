#!/usr/bin/env bash
# Serve a model on vLLM with one patchq profile.
#
#   runtime/serve.sh [--dry-run] [PROFILE] [-- extra vllm serve args...]
#   runtime/serve.sh --help
#
# PROFILE (default dflash) is a profile of the series patchq uses (--series / $SERIES,
# $PATCHQ_SERIES, a patchq.toml or [tool.patchq] above the working directory, else the
# bundled Spark series: base, mtp, dflash, dense). Its patches are applied with
# `patchq apply` (a fast no-op when already applied); if that fails, the report is printed
# and nothing is served. PATCHQ_MODE=run patches at import time instead and leaves
# site-packages untouched (read-only images, shared or uv-linked environments).
#
# The vllm serve flags: the generic ones below, then the profile's own from
# `[profiles.PROFILE.serve]` in profiles.toml (`args`, and `env` exported first; printed by
# `patchq serve-args --profile PROFILE`), then VLLM_EXTRA_ARGS, then the args after --.
# The Spark profiles declare the tool/reasoning parsers and the speculative config
# (DFlash n=12 for dflash/dense, MTP-2 for mtp).
#
# --dry-run prints the apply and serve commands (and the exported env) and changes nothing.
#
# Environment overrides (defaults in brackets):
#   MODEL [/model]  PORT [8000]  HOST [0.0.0.0]  SERVED_NAME [qwen]
#   MAX_MODEL_LEN [16384]  GPU_MEMORY_UTILIZATION [0.85]  MAX_NUM_SEQS [4]  PREFIX_CACHING [1]
#   SERIES [patchq's discovery]  PATCHQ [patchq]  VLLM [the vllm beside $PATCHQ, else vllm on PATH]
#   PATCHQ_MODE [apply|run]  PATCHQ_STRICT [1]  VLLM_EXTRA_ARGS []
#   used by the Spark profiles' serve tables: DRAFTER [/drafter]  DRAFTER_BACKEND [FLASH_ATTN]
#   NUM_SPEC_TOKENS [12 for dflash/dense, 2 for mtp]  TOOL_PARSER [qwen3_coder]  REASONING_PARSER [qwen3]
# patchq patches the vLLM of its own environment: VLLM defaults to the `vllm` script of
# that same environment, so the server runs the code that was patched.
set -euo pipefail

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; }
# one shell word, single-quoted when it needs quoting (for --dry-run)
q() { if [[ "$1" =~ ^[A-Za-z0-9_./:=,@%+-]+$ ]]; then printf '%s' "$1"; else printf "'%s'" "${1//\'/\'\\\'\'}"; fi; }

DRY_RUN=0
PROFILE="${PROFILE:-dflash}"
while [ "$#" -gt 0 ]; do
  case "$1" in
    -h|--help) usage; exit 0 ;;
    --dry-run) DRY_RUN=1; shift ;;
    --) shift; break ;;
    -*) echo "serve.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
    *) PROFILE="$1"; shift; [ "${1:-}" = "--" ] && shift; break ;;
  esac
done

MODEL="${MODEL:-/model}"
PORT="${PORT:-8000}"
HOST="${HOST:-0.0.0.0}"
SERVED_NAME="${SERVED_NAME:-qwen}"
MAX_MODEL_LEN="${MAX_MODEL_LEN:-16384}"
GPU_MEMORY_UTILIZATION="${GPU_MEMORY_UTILIZATION:-0.85}"
MAX_NUM_SEQS="${MAX_NUM_SEQS:-4}"
PREFIX_CACHING="${PREFIX_CACHING:-1}"
PATCHQ="${PATCHQ:-patchq}"
PATCHQ_MODE="${PATCHQ_MODE:-apply}"
if [ -z "${VLLM:-}" ]; then
  pq_bin="$(dirname "$(command -v "$PATCHQ" || echo "$PATCHQ")")"
  if [ -x "$pq_bin/vllm" ]; then VLLM="$pq_bin/vllm"; else VLLM=vllm; fi
fi
series_opt=()
[ -n "${SERIES:-}" ] && series_opt=(--series "$SERIES")

# The profile's own flags and env (an unknown profile stops here, exit 2).
if ! profile_args_text="$("$PATCHQ" serve-args --profile "$PROFILE" "${series_opt[@]}")"; then
  echo "serve.sh: cannot read the serve flags of profile '$PROFILE' (above)" >&2
  exit 2
fi
if ! profile_env_text="$("$PATCHQ" serve-args --profile "$PROFILE" --env "${series_opt[@]}")"; then
  echo "serve.sh: cannot read the serve env of profile '$PROFILE' (above)" >&2
  exit 2
fi
profile_args=()
[ -n "$profile_args_text" ] && mapfile -t profile_args <<< "$profile_args_text"
profile_env=()
[ -n "$profile_env_text" ] && mapfile -t profile_env <<< "$profile_env_text"

args=(serve "$MODEL"
  --served-model-name "$SERVED_NAME"
  --host "$HOST" --port "$PORT"
  --max-model-len "$MAX_MODEL_LEN"
  --gpu-memory-utilization "$GPU_MEMORY_UTILIZATION"
  --max-num-seqs "$MAX_NUM_SEQS")
if [ "$PREFIX_CACHING" = "1" ]; then
  args+=(--enable-prefix-caching)
else
  args+=(--no-enable-prefix-caching)
fi
args+=("${profile_args[@]}")

# shellcheck disable=SC2206
extra=(${VLLM_EXTRA_ARGS:-})

# Every vLLM process checks that this profile is live (patchq_runtime.plugin).
exports=("PATCHQ_EXPECT_PROFILE=$PROFILE" "PATCHQ_STRICT=${PATCHQ_STRICT:-1}" "${profile_env[@]}")

if [ "$PATCHQ_MODE" = "run" ]; then
  serve_cmd=("$PATCHQ" run --profile "$PROFILE" "${series_opt[@]}" -- "$VLLM" "${args[@]}" "${extra[@]}" "$@")
  apply_cmd=()
else
  serve_cmd=("$VLLM" "${args[@]}" "${extra[@]}" "$@")
  apply_cmd=("$PATCHQ" apply --profile "$PROFILE" "${series_opt[@]}")
fi

if [ "$DRY_RUN" = "1" ]; then
  for kv in "${exports[@]}"; do printf 'export %s\n' "$(q "$kv")"; done
  if [ "${#apply_cmd[@]}" -gt 0 ]; then
    for a in "${apply_cmd[@]}"; do printf '%s ' "$(q "$a")"; done; echo
  fi
  printf 'exec'; for a in "${serve_cmd[@]}"; do printf ' %s' "$(q "$a")"; done; echo
  exit 0
fi

for kv in "${exports[@]}"; do export "${kv?}"; done
if [ "${#apply_cmd[@]}" -gt 0 ] && ! "${apply_cmd[@]}"; then
  echo "serve.sh: patchq could not apply profile '$PROFILE' (report above); not serving" >&2
  exit 1
fi
exec "${serve_cmd[@]}"
