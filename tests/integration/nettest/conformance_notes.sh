#!/usr/bin/env bash
# resilient-nettest over a plugin whose test() reports no sizes (issue 23
# finding 1; injected: NCCL_RESILIENT_FAULT=kind=nosizes): NCCL tolerates it,
# so the run passes with no wrong byte, and the deviation is a conformance
# note in the output and the JSON, not "data corruption".
# Usage: conformance_notes.sh NETTEST PLUGIN
set -euo pipefail
nettest=$1 plugin=$2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
set +e
NCCL_RESILIENT_FAULT='kind=nosizes,op=irecv' "$nettest" --plugin "$plugin" --ranks 3 \
  --pattern allreduce -b 8 -e 1M -f 16 -n 2 -w 1 --json "$dir/run.json" >"$dir/out" 2>&1
rc=$?
set -e
cat "$dir/out"
fail() { echo "FAIL: $*"; exit 1; }
[[ $rc -eq 0 ]] || fail "resilient-nettest exited $rc"
grep -q '^# Out of bounds values : 0 OK' "$dir/out" || fail "wrong bytes reported"
grep -q '^# Conformance notes' "$dir/out" || fail "no conformance notes section"
grep -q 'test() did not report sizes' "$dir/out" || fail "the note is missing"
grep -q '"conformance_notes": \[' "$dir/run.json" || fail "no conformance_notes in the JSON"
grep -q 'test() did not report sizes' "$dir/run.json" || fail "the JSON lacks the note"
grep -q '"errors": 0' "$dir/run.json" || fail "the JSON counts errors"
echo "PASS"
