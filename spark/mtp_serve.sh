#!/usr/bin/env bash
# Serve with the native MTP head (the comparison profile): runtime/serve.sh mtp.
#   runtime/mtp_serve.sh [-- extra vllm serve args...]   (NUM_SPEC_TOKENS defaults to 2)
set -euo pipefail
exec "$(dirname "$0")/serve.sh" mtp "$@"
