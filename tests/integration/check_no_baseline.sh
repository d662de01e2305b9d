#!/bin/sh
# The shipped libraries link no benchmark baseline: no symbol of the raw TCP
# pump (plugin/transport/raw/) or of the tools' harness (tools/harness/) in
# their symbol tables, local symbols included (nm; nm -D where stripped).
# Usage: check_no_baseline.sh <control> <library>...
#   control: a program that does link the baseline (resilient-nettest), so
#   that a renamed symbol cannot make the check pass unseen.
set -u
pattern='resilient::transport::raw::|RawTcp|resilient::harness::'
symbols() {
  { nm -C "$1" 2>/dev/null; nm -DC "$1" 2>/dev/null; } | grep -E "$pattern"
}
control=$1
shift
if [ -z "$(symbols "$control")" ]; then
  echo "FAIL: the control $control has no baseline symbol: the pattern is stale"
  exit 1
fi
status=0
for lib in "$@"; do
  found=$(symbols "$lib" | head -5)
  if [ -n "$found" ]; then
    echo "FAIL: $lib links the baseline:"
    printf '%s\n' "$found"
    status=1
  else
    echo "ok: $lib"
  fi
done
exit $status
