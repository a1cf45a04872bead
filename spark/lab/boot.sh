#!/usr/bin/env bash
# Device-side stages of a boot (BOOT.md beside it has the call plan), from the checkout's root there,
# each as ONE device call, each call right after the last (the machine is given back 30 s
# after a call ends). Results go to $OUT (results.jsonl, state.json, logs.tgz, probe.json,
# triton-cache.tgz). Every stage stays under the 600 s command limit.
#
#   bash spark/lab/boot.sh stage1 REL            carry .carry/vllm-REL-sm90.tar.xz: probe the machine, extract it,
#                                         launch one kernel from each slimmed extension (smoke.json)
#   bash spark/lab/boot.sh stage2 REL [JOBS]     carry .carry/deps.tar.xz (+ .carry/triton-cache.tgz if any):
#                                         deps, tiny models, launch the detached runner, wait
#   bash spark/lab/boot.sh next REL [JOBS]       carry .carry/vllm-REL-sm90.tar.xz: extract it, wait for the
#                                         running release to finish, launch REL, wait
#   bash spark/lab/boot.sh wait [SECONDS]        wait for the runner (default 540 s), collect, save Triton's cache
set -uo pipefail
cd "$(dirname "$0")/../.."  # the checkout root: .carry/ and $OUT are relative to it
PY=${PY:-python3}
OUT=${OUT:-/tmp/pq/out}
B="$PY spark/lab/boot.py"
stage=${1:?stage}; rel=${2:-}; jobs=${3:-8}
t0=$(date +%s)
left() { echo $(( ${1} - ($(date +%s) - t0) )); }   # seconds left of a budget

case "$stage" in
  stage1)
    $B probe --out "$OUT"
    $B install --release "$rel" --vllm-bundle ".carry/vllm-$rel-sm90.tar.xz" && $B smoke --release "$rel" --out "$OUT"
    ;;
  stage2)
    $B install --release "$rel" --deps-bundle .carry/deps.tar.xz || exit 1
    [ -f .carry/triton-cache.tgz ] && $B triton restore .carry/triton-cache.tgz
    $B models || exit 1
    $B run --release "$rel" --jobs "$jobs" --detach
    $B wait --out "$OUT" --max-wait "$(left 545)"
    ;;
  next)
    $B install --release "$rel" --vllm-bundle ".carry/vllm-$rel-sm90.tar.xz" || exit 1
    $B wait --out "$OUT" --max-wait "$(left 300)" >/dev/null
    $B run --release "$rel" --jobs "$jobs" --detach --base-port 8200
    $B wait --out "$OUT" --max-wait "$(left 560)"
    ;;
  wait)
    $B wait --out "$OUT" --max-wait "${2:-540}" --triton-out
    ;;
  *)
    echo "unknown stage $stage" >&2; exit 2 ;;
esac
