#!/usr/bin/env bash
# The demo of a resilient multi-rank job (docs/demo.md): installs what the
# build needs (apt-get, only what is missing), configures build/ if it does not
# exist, builds only the demo's targets and runs scripts/demo.py, which runs an
# 8-rank job without faults, then again with a rank killed and another frozen,
# prints the timeline of each fault and checks the weights. With --nccl (passed
# on to demo.py) the same job runs on real NCCL on GPU 0 (docs/demo.md, "NCCL
# mode"); without a CUDA runtime or device it stops before starting anything.
#
# Usage: scripts/demo.sh [scripts/demo.py arguments...]   (BUILD_DIR=dir to use another build)
#        scripts/demo.sh --nccl                            (needs a GPU, CUDA 13 and NCCL)
#        scripts/demo.sh --pytorch                         (torch.distributed with gloo under
#                                                           the Python package; --nccl: on GPU 0)
# Exit status: scripts/demo.py's (0 PASS, 1 FAIL, 2 usage, 77 --nccl without a
# GPU: skipped, 130 interrupted).
set -euo pipefail

cd "$(dirname "$0")/.."
build=${BUILD_DIR:-build}

packages=(meson ninja-build pkg-config g++ python3 libcli11-dev nlohmann-json3-dev nettle-dev)
for arg in "$@"; do
  # --pytorch: the ranks are torch jobs under the Python package (Debian's torch).
  [[ $arg == --pytorch ]] && packages+=(python3-torch)
done
# shellcheck source=scripts/ensure_packages.sh
source scripts/ensure_packages.sh
ensure_packages "${packages[@]}"

if [[ ! -d $build ]]; then
  meson setup "$build"
fi
echo "== building the demo's targets in $build"
ninja -C "$build" demo/resilient-demo-train tools/store/resilient-store tools/run/resilient-run \
  restart/monitor/resilient-monitor plugin/net/abi/libnccl-net-resilient.so \
  "restart/libresilient-restart.so.$(meson introspect --projectinfo "$build" |
    python3 -c 'import json, sys; print(json.load(sys.stdin)["version"])')" \
  restart/libnccl-net-resilient.so restart/resilient-monitor
exec python3 scripts/demo.py --build "$build" "$@"
