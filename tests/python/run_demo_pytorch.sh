#!/usr/bin/env bash
# scripts/demo.py --pytorch in a short configuration (a crash and a freeze,
# the weights checked). Usage: run_demo_pytorch.sh DEMO_PY BUILD_DIR
# Exit 77 (skip) without Debian's torch; otherwise demo.py's status.
set -euo pipefail
if ! /usr/bin/python3 -c 'import torch.distributed' 2>/dev/null; then
  echo "skipped: /usr/bin/python3 cannot import torch (apt-get install python3-torch)"
  exit 77
fi
exec python3 "$1" --pytorch --build "$2" --steps 120 --kill-at 30 --stop-at 80
