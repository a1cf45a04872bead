#!/usr/bin/env bash
# What a CI job runs: the compatibility matrix of every profile on every vLLM release.
#
#   ci/matrix.sh [OUT_DIR]          (default OUT_DIR: matrix)
#
# Environment (all optional):
#   PATCHQ_RELEASES  release range or list        (default '>=0.15.1': every release to the newest the index lists)
#   PATCHQ_PROFILES  comma-separated profiles     (default base,mtp,dflash,dense)
#   PATCHQ_WORKERS   releases checked in parallel (default: number of CPUs)
#   PATCHQ_LEVELS    space-separated `patchq probe --json` files to merge (import/probe)
#                    (default: spark/lab/evidence/probe/probe-*.json)
#   PATCHQ_BOOT      space-separated boot-record JSON files to merge (boot level)
#                    (default: spark/lab/evidence/boot-*.json[l] and cpu-limits.jsonl, the unpatched
#                    controls; spark/lab/boot.py's results.jsonl works)
#   PATCHQ_STRICT    1: fail the job when a cell blocks (apply would fail); default 0:
#                    the report is published either way and the job stays green
#   PATCHQ           the patchq command (default: patchq)
# Writes OUT_DIR/matrix.{json,md,html} and OUT_DIR/index.html (a copy, for Pages); appends
# matrix.md to $GITHUB_STEP_SUMMARY when set. Caches: ~/.cache/patchq (release trees,
# wheels, the PyPI release list); a warm cache needs no download.
set -euo pipefail

out="${1:-matrix}"
releases="${PATCHQ_RELEASES:->=0.15.1}"
profiles="${PATCHQ_PROFILES:-base,mtp,dflash,dense}"
workers="${PATCHQ_WORKERS:-$(nproc 2>/dev/null || echo 2)}"
patchq="${PATCHQ:-patchq}"

here="$(cd "$(dirname "$0")" && pwd)"
shopt -s nullglob
default_levels=("$here"/../spark/lab/evidence/probe/probe-*.json)
default_boot=("$here"/../spark/lab/evidence/boot-*.json "$here"/../spark/lab/evidence/boot-*.jsonl "$here"/../spark/lab/evidence/cpu-limits.jsonl)
shopt -u nullglob
extra=()
for f in ${PATCHQ_LEVELS-${default_levels[@]+"${default_levels[@]}"}}; do extra+=(--levels "$f"); done
for f in ${PATCHQ_BOOT-${default_boot[@]+"${default_boot[@]}"}}; do extra+=(--boot "$f"); done

set +e
$patchq matrix --releases "$releases" --profiles "$profiles" --out "$out" \
    --workers "$workers" ${extra[@]+"${extra[@]}"}
code=$?
set -e

# exit 1 means blocking cells (the report is complete); anything else is an error
if [ "$code" -gt 1 ] || [ ! -f "$out/matrix.html" ]; then
    echo "ci/matrix.sh: patchq matrix failed (exit $code)" >&2
    exit "$code"
fi
cp "$out/matrix.html" "$out/index.html"
if [ -n "${GITHUB_STEP_SUMMARY:-}" ]; then
    cat "$out/matrix.md" >> "$GITHUB_STEP_SUMMARY"
fi
if [ "$code" -ne 0 ]; then
    echo "ci/matrix.sh: some cells block (patchq apply would fail there); see $out/matrix.md" >&2
    [ "${PATCHQ_STRICT:-0}" = 1 ] && exit "$code"
fi
exit 0
