#!/usr/bin/env bash
# Runs a command that needs Debian's torch (/usr/bin/python3 with
# torch.distributed): the torch demo, the torch agent drill.
# Usage: with_torch.sh COMMAND [ARGS...]
# Exit 77 (skip) without it; otherwise the command's status.
set -euo pipefail
if ! /usr/bin/python3 -c 'import torch.distributed' 2>/dev/null; then
  echo "skipped: /usr/bin/python3 cannot import torch (apt-get install python3-torch)"
  exit 77
fi
exec "$@"
