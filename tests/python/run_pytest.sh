#!/usr/bin/env bash
# The Python package's pytest suite with Debian's interpreter (the one that
# sees python3-torch and python3-pytest). Usage: run_pytest.sh BUILD_DIR [pytest args and tests...]
# (no tests named: every test_*.py of this folder).
# Exit 77 (skip) when that interpreter lacks pytest or torch: scripts/test.sh installs them.
set -euo pipefail
build=$1
shift
python=${RESILIENT_TEST_PYTHON:-/usr/bin/python3}
if ! "$python" -c 'import pytest, torch.distributed' 2>/dev/null; then
  echo "skipped: $python cannot import pytest and torch (apt-get install python3-pytest python3-torch)"
  exit 77
fi
cd "$(dirname "$0")"
[[ $# -gt 0 ]] || set -- .
BUILD_DIR=$build exec "$python" -m pytest -p no:cacheprovider -q "$@"
