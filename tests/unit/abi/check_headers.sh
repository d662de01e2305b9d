#!/bin/sh
# Every ABI header compiles on its own, as C11 and as C++20, with all warnings
# as errors, under both GCC and (where installed) clang. Its static_asserts
# check docs/reference/nccl-abi.md's sizes and offsets in each of these compilations.
# Usage: check_headers.sh <include dir> <header>...
set -u
inc=$1; shift
compilers="gcc:c11 g++:c++20"
command -v clang >/dev/null 2>&1 && compilers="$compilers clang:c11 clang++:c++20"
failed=0; checked=0
for h in "$@"; do
  for pair in $compilers; do
    cc=${pair%%:*}; std=${pair#*:}
    case $std in c11) lang=c;; *) lang=c++;; esac
    if ! printf '#include "nccl/%s"\n' "$h" |
        "$cc" -std="$std" -Wall -Wextra -Wpedantic -Werror -fsyntax-only -I"$inc" -x "$lang" -; then
      echo "FAIL: nccl/$h with $cc -std=$std"; failed=$((failed + 1))
    fi
    checked=$((checked + 1))
  done
done
echo "$checked header compilations, $failed failed"
[ "$failed" -eq 0 ]
