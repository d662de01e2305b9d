#!/usr/bin/env bash
# The GPU validation kit (docs/gpu-validation.md): proves the net plugin, the
# profiler plugin and the restart library under real NCCL on any machine with
# a GPU, PyTorch and its NCCL, in one command of at most 8 minutes. Build the
# carried set first with scripts/gpu/build_kit.sh (on a Debian machine).
#
# Usage: scripts/gpu/validate.sh --out DIR [--kit DIR] [--only step,...]
#        scripts/gpu/validate.sh --dry-run --out DIR    (what needs no GPU)
#        scripts/gpu/validate.sh --print-plan
# Exit status: 0 every step passed; 1 a step failed; 2 bad usage or an
# unusable kit; 77 no GPU here.
set -euo pipefail
cd "$(dirname "$0")/../.."
exec python3 tests/gpu/validate.py "$@"
