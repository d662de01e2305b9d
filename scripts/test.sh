#!/usr/bin/env bash
# The test command for a fresh Debian 12 machine: installs what the build and
# the tests need (apt-get, only what is missing), configures build/, builds,
# runs the default test suites (unit + integration) and the chaos suite, then
# does the same with
# AddressSanitizer + UndefinedBehaviorSanitizer in build-asan/.
#
# Usage: scripts/test.sh [--no-asan] [extra `meson test` arguments...]
# Exit status: non-zero when anything fails.
set -euo pipefail

cd "$(dirname "$0")/.."
asan=1
if [[ ${1:-} == --no-asan ]]; then
  asan=0
  shift
fi

packages=(
  meson ninja-build pkg-config g++ gcc clang   # build; clang also checks the ABI headers
  catch2 libcli11-dev nlohmann-json3-dev       # tests, command-line tools
  iproute2 procps nftables python3             # ip/tc/ss/pkill/nft, the Python test drivers
  etcd-server etcd-client libcurl4-openssl-dev # coordination store: etcd backend and its tests
  libbenchmark-dev                             # bench-profiler (Google Benchmark)
)
# shellcheck source=scripts/ensure_packages.sh
source scripts/ensure_packages.sh
ensure_packages "${packages[@]}"

run_suites() {
  local dir=$1 setup=$2
  shift 2
  if [[ ! -d $dir ]]; then
    meson setup "$dir" -Dwerror=true "$@"
  fi
  echo "== building $dir"
  ninja -C "$dir"
  echo "== testing $dir (setup $setup)"
  meson test -C "$dir" --setup "$setup" --print-errorlogs "${extra[@]}"
  # Faults (process kills, frozen peers; namespace tests skip without root).
  echo "== chaos suite in $dir"
  meson test -C "$dir" --suite chaos --print-errorlogs
}

extra=("$@")
run_suites build default
if ((asan)); then
  # -O1: what ASan recommends, and a faster build than -O2 on a small CI machine.
  run_suites build-asan asan -Db_sanitize=address,undefined -Db_lundef=false -Doptimization=1
fi
echo "== all test suites passed"
