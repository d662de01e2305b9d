#!/usr/bin/env bash
# The test command for a fresh Debian 12 machine: installs what the build and
# the tests need (apt-get, only what is missing), configures build/ with every
# feature its suites need (reconfiguring a build/ that another command, such
# as scripts/demo.sh, configured without them), builds, runs the default test
# suites (unit + integration) and the chaos suite, the thirdparty suite (real
# partner plugins built from ../shared/thirdparty; plain build only), the
# python suite (the Python package with Debian's torch; plain build only), the
# observability suite (slow links, stragglers, the report formats; plain build
# only), builds
# the GPU validation kit and runs its dry run, then runs the default and chaos
# suites again with AddressSanitizer + UndefinedBehaviorSanitizer in build-asan/.
#
# A suite that runs no test fails (a build without its tests must not pass as
# green). The last line says "N passed, M failed, K skipped" over every run.
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
  nettle-dev                                   # HMAC of the handshakes (linked statically)
  iproute2 procps nftables python3             # ip/tc/ss/pkill/nft, the Python test drivers
  python3-torch python3-pytest python3-venv    # the Python package's suite (torch, gloo)
  python3-mesonpy                              # pip install . in the python suite (meson-python)
  python3-prometheus-client chromium           # the observability suite: metrics parsed, HTML drawn
  etcd-server etcd-client libcurl4-openssl-dev # coordination store: etcd backend and its tests
  libbenchmark-dev                             # bench-profiler (Google Benchmark)
  binutils                                     # strip, nm, ldd checks (GPU kit, exports)
  autoconf automake libtool make               # the thirdparty suite's partner builds,
  libfabric-dev libhwloc-dev                   # aws-ofi-nccl's dependencies,
  libucx-dev libibverbs-dev                    # nccl-rdma-sharp-plugins' dependencies
)
# shellcheck source=scripts/ensure_packages.sh
source scripts/ensure_packages.sh
ensure_packages "${packages[@]}"

# The options every suite below needs; an existing build directory is
# reconfigured with them (meson keeps its other options).
features=(-Dtests=enabled -Dwerror=true -Detcd=enabled)
# Line tables only (-g1: file:line in backtraces and sanitizer reports, no
# types or locals): a third less compile time than -g, most of this
# command's time on a fresh machine. Reconfigure with -Ddebug=true and
# empty c_args/cpp_args for a build to debug in.
features+=(-Ddebug=false -Dc_args=-g1 -Dcpp_args=-g1)
# The thirdparty suite's partner archives: ../shared/thirdparty beside the
# checkout, or wherever RESILIENT_THIRDPARTY_DIR says.
thirdparty_dir=$(realpath -m "${RESILIENT_THIRDPARTY_DIR:-../shared/thirdparty}")
features+=("-Dthirdparty_dir=$thirdparty_dir")

passed=0 failed=0 skipped=0 failures=()

# tally DIR LOGBASE LABEL: adds the results of one `meson test` run (its JSON
# log) to the totals; a run of zero tests counts as a failure.
tally() {
  local counts
  # meson names the log <logbase>-<setup>.json when a setup is given.
  counts=$(python3 - "$1"/meson-logs/"$2"*.json <<'PY'
import json, os, sys
ok = bad = skip = 0
for path in sys.argv[1:]:
    if not os.path.exists(path):
        continue
    with open(path) as f:
        for line in f:
            r = json.loads(line)["result"]
            if r in ("OK", "EXPECTEDFAIL"):
                ok += 1
            elif r == "SKIP":
                skip += 1
            else:
                bad += 1
print(ok, bad, skip)
PY
)
  local ok bad skip
  read -r ok bad skip <<<"$counts"
  passed=$((passed + ok)) failed=$((failed + bad)) skipped=$((skipped + skip))
  echo "== $3: $ok passed, $bad failed, $skip skipped"
  if ((ok + bad + skip == 0)); then
    failed=$((failed + 1))
    failures+=("$3: no tests ran")
    echo "== $3: FAILED: no tests ran"
  elif ((bad > 0)); then
    failures+=("$3: $bad failed")
  fi
}

# run_suite DIR LOGBASE LABEL [meson test arguments...]
run_suite() {
  local dir=$1 logbase=$2 label=$3
  shift 3
  echo "== $label"
  rm -f "$dir"/meson-logs/"$logbase"*.json
  meson test -C "$dir" --print-errorlogs --logbase "$logbase" "$@" || true
  tally "$dir" "$logbase" "$label"
}

run_suites() {
  local dir=$1 setup=$2
  shift 2
  if [[ -d $dir ]]; then
    meson setup --reconfigure "$dir" "${features[@]}" "$@" >/dev/null
  else
    meson setup "$dir" "${features[@]}" "$@"
  fi
  echo "== building $dir"
  ninja -C "$dir"
  run_suite "$dir" "default-$setup" "$dir default suites (setup $setup)" --setup "$setup" "${extra[@]}"
  # Faults (process kills, frozen peers; namespace tests skip without root).
  run_suite "$dir" "chaos-$setup" "$dir chaos suite" --suite chaos
}

extra=("$@")
run_suites build default

# Real partner plugins (aws-ofi-nccl, nccl-rdma-sharp-plugins), built once into
# build/ from ../shared/thirdparty by the suite itself; skipped without them.
if [[ ! -d $thirdparty_dir ]]; then
  echo "== WARNING: no partner archives in $thirdparty_dir (set RESILIENT_THIRDPARTY_DIR):" \
    "the thirdparty suite's tests skip"
fi
run_suite build thirdparty "build thirdparty suite" --suite thirdparty
# The Python package (pytest with Debian's torch; pip install . into a fresh venv,
# a second build of the project through meson-python; the torch demo).
run_suite build python "build python suite" --suite python
run_suite build observability "build observability suite" --suite observability
# A sample of the restart library's reliability matrix (docs/reliability.md):
# other cells every run, the seed printed in its log.
run_suite build reliability "build reliability matrix sample" --suite reliability

# The GPU validation kit (docs/gpu-validation.md): its carried set, checked
# with ldd, and the dry run of everything that needs no GPU.
echo "== GPU validation kit: build and dry run"
if bash scripts/gpu/build_kit.sh && bash scripts/gpu/validate.sh --dry-run --out build/gpu-dry-run; then
  passed=$((passed + 1))
else
  failed=$((failed + 1))
  failures+=("GPU validation kit dry run")
fi

if ((asan)); then
  # -O1: what ASan recommends, and a faster build than -O2 on a small CI machine.
  run_suites build-asan asan -Db_sanitize=address,undefined -Db_lundef=false -Doptimization=1
fi
for f in "${failures[@]}"; do
  echo "== FAILED: $f"
done
echo "$passed passed, $failed failed, $skipped skipped"
((failed == 0))
