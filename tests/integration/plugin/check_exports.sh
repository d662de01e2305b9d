#!/bin/sh
# The plugin library exports exactly the structs NCCL looks up, nothing else.
# Usage: check_exports.sh <library>...
set -u
status=0
for lib in "$@"; do
  symbols=$(nm -D --defined-only "$lib" | awk '{print $3}' | sort)
  unexpected=$(printf '%s\n' "$symbols" | grep -v -E '^ncclNetPlugin_v(6|7|8|9|10|11)$|^ncclProfiler_v[1-5]$' || true)
  expected=$(printf '%s\n' "$symbols" | grep -c -E '^ncclNetPlugin_v(6|7|8|9|10|11)$')
  echo "$lib: $(printf '%s ' $symbols)"
  if [ -n "$unexpected" ]; then
    echo "FAIL: $lib exports other symbols: $unexpected"; status=1
  fi
  if [ "$expected" -ne 6 ]; then
    echo "FAIL: $lib exports $expected of the 6 ncclNetPlugin_v6..v11 structs"; status=1
  fi
done
exit $status
