#!/bin/sh
# The plugin libraries export exactly the structs NCCL looks up, nothing else.
# Usage: check_exports.sh <kind> <library> [<kind> <library>]...
#   kind: net (ncclNetPlugin_v6..v12 only: the plain TCP baseline, which has
#         no CollNet), profiler (ncclProfiler_v1..v7), or net+profiler (the
#         resilient library: ncclNetPlugin_v6..v12, the CollNet NCCL looks up
#         in the same library, ncclCollNetPlugin_v6..v12, and ncclProfiler_v1..v7)
set -u
status=0
while [ $# -ge 2 ]; do
  kind=$1 lib=$2
  shift 2
  symbols=$(nm -D --defined-only "$lib" | awk '{print $3}' | sort)
  versions='(6|7|8|9|10|11|12)'
  unexpected=$(printf '%s\n' "$symbols" | grep -v -E "^ncclNetPlugin_v$versions\$|^ncclCollNetPlugin_v$versions\$|^ncclProfiler_v[1-7]\$" || true)
  nets=$(printf '%s\n' "$symbols" | grep -c -E "^ncclNetPlugin_v$versions\$")
  collnets=$(printf '%s\n' "$symbols" | grep -c -E "^ncclCollNetPlugin_v$versions\$")
  profilers=$(printf '%s\n' "$symbols" | grep -c -E '^ncclProfiler_v[1-7]$')
  case $kind in
    net) want_nets=7 want_collnets=0 want_profilers=0 ;;
    profiler) want_nets=0 want_collnets=0 want_profilers=7 ;;
    net+profiler) want_nets=7 want_collnets=7 want_profilers=7 ;;
    *) echo "FAIL: unknown kind $kind"; exit 2 ;;
  esac
  echo "$lib ($kind): $(printf '%s ' $symbols)"
  if [ -n "$unexpected" ]; then
    echo "FAIL: $lib exports other symbols: $unexpected"; status=1
  fi
  if [ "$nets" -ne "$want_nets" ]; then
    echo "FAIL: $lib exports $nets ncclNetPlugin_v6..v12 structs, expected $want_nets"; status=1
  fi
  if [ "$collnets" -ne "$want_collnets" ]; then
    echo "FAIL: $lib exports $collnets ncclCollNetPlugin_v6..v12 structs, expected $want_collnets"; status=1
  fi
  if [ "$profilers" -ne "$want_profilers" ]; then
    echo "FAIL: $lib exports $profilers ncclProfiler_v1..v7 structs, expected $want_profilers"; status=1
  fi
done
exit $status
