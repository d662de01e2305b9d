#!/bin/sh
# The libraries we ship link none of the tools' baseline: no raw TCP pump
# (plugin/transport/raw/) and no harness (tools/harness/). Usage:
#   check_no_baseline.sh PROBE LIBRARY...
# PROBE is a program that does link the baseline (resilient-nettest): the
# check must find the baseline's symbols there, or it proves nothing.
set -eu
pattern='resilient::(transport::raw|harness)::|RawTcp'
probe=$1
shift
if ! nm -C "$probe" | grep -qE "$pattern"; then
  echo "no baseline symbol found in $probe: the check cannot see them" >&2
  exit 1
fi
status=0
for lib in "$@"; do
  if ! nm -C "$lib" | grep -q 'resilient::'; then
    echo "$lib: no symbol of ours readable: cannot check it" >&2
    status=1
    continue
  fi
  found=$(nm -C "$lib" | grep -E "$pattern" | head -5)
  if [ -n "$found" ]; then
    echo "$lib links the tools' baseline:" >&2
    echo "$found" >&2
    status=1
  else
    echo "$lib: no baseline symbol"
  fi
done
exit $status
