#!/usr/bin/env bash
# Serve a model on vLLM with one patchq profile: a thin caller of `patchq serve`.
#
#   serve.sh [--dry-run] [PROFILE] [-- extra vllm serve args...]
#   serve.sh --help
#
# PROFILE (default dflash) is a profile of the series patchq uses (--series / $SERIES,
# $PATCHQ_SERIES, a patchq.toml or [tool.patchq] above the working directory, else the
# installed series: this one, once patchq-spark is installed: base, mtp, dflash, dense).
# `patchq serve` applies its patches (a fast no-op when already applied; if that fails,
# the report is printed and nothing is served), then execs `vllm serve` with the generic
# flags, the profile's own from `[profiles.PROFILE.serve]` (`args`, and `env` exported
# first; `patchq serve-args --profile PROFILE` prints them), VLLM_EXTRA_ARGS and the args
# after --.
# PATCHQ_MODE=run patches at import time instead and leaves site-packages untouched
# (read-only images, shared or uv-linked environments). Without patchq installed, use
# `patchq serve` itself: it is the same command (`patchq serve --help`).
#
# --dry-run prints the exports, the apply and the serve command and changes nothing.
#
# Environment overrides (defaults in brackets), read by `patchq serve`:
#   MODEL [/model]  PORT [8000]  HOST [0.0.0.0]  SERVED_NAME [qwen]
#   MAX_MODEL_LEN [16384]  GPU_MEMORY_UTILIZATION [0.85]  MAX_NUM_SEQS [4]  PREFIX_CACHING [1]
#   SERIES [patchq's discovery]  PATCHQ [patchq]  VLLM [the vllm beside patchq's python, else vllm on PATH]
#   PATCHQ_MODE [apply|run]  PATCHQ_STRICT [1]  VLLM_EXTRA_ARGS []
#   used by the Spark profiles' serve tables: DRAFTER [/drafter]  DRAFTER_BACKEND [FLASH_ATTN]
#   NUM_SPEC_TOKENS [12 for dflash/dense, 2 for mtp]  TOOL_PARSER [qwen3_coder]  REASONING_PARSER [qwen3]
# patchq patches the vLLM of its own environment: VLLM defaults to the `vllm` script of
# that same environment, so the server runs the code that was patched.
set -euo pipefail

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; }

dry_run=()
PROFILE="${PROFILE:-dflash}"
while [ "$#" -gt 0 ]; do
  case "$1" in
    -h|--help) usage; exit 0 ;;
    --dry-run) dry_run=(--dry-run); shift ;;
    --) shift; break ;;
    -*) echo "serve.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
    *) PROFILE="$1"; shift; [ "${1:-}" = "--" ] && shift; break ;;
  esac
done

PATCHQ="${PATCHQ:-patchq}"
if ! command -v "$PATCHQ" >/dev/null 2>&1; then
  echo "serve.sh: patchq not found (PATCHQ=$PATCHQ is not on PATH nor an executable): install patchq in the" \
       "environment that holds vllm, from its wheel or a checkout (python -m pip install" \
       "patchq-X.Y.Z-py3-none-any.whl, or python -m pip install /path/to/checkout; patchq is not on PyPI)," \
       "or set PATCHQ=/path/to/patchq" >&2
  exit 127
fi
series_opt=()
[ -n "${SERIES:-}" ] && series_opt=(--series "$SERIES")
exec "$PATCHQ" serve --profile "$PROFILE" "${dry_run[@]}" "${series_opt[@]}" -- "$@"
