#!/usr/bin/env bash
# Serve with the native MTP head (the comparison profile): serve.sh mtp.
#   mtp_serve.sh [-- extra vllm serve args...]   (NUM_SPEC_TOKENS defaults to 2)
set -euo pipefail
exec "$(dirname "$0")/serve.sh" mtp "$@"
