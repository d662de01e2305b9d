#!/bin/sh
# The shared Catch2 main must exit 77 when a precondition fails and run the
# tests otherwise. $1: the skip_probe binary.
probe=$1
RESILIENT_TEST_FORCE_SKIP=1 "$probe" >/dev/null; rc=$?
[ "$rc" -eq 77 ] || { echo "expected exit 77 with a failed precondition, got $rc"; exit 1; }
env -u RESILIENT_TEST_FORCE_SKIP "$probe" >/dev/null; rc=$?
[ "$rc" -eq 0 ] || { echo "expected exit 0 without a failed precondition, got $rc"; exit 1; }
echo "skip probe: 77 when skipped, 0 otherwise"
