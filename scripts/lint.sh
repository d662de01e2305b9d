#!/usr/bin/env bash
# clang-format (check only) and clang-tidy over the project's C/C++ sources.
# Needs a configured build directory for compile_commands.json.
# Usage: scripts/lint.sh [build dir]      (also: ninja -C build lint)
set -uo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
[[ -f $build/compile_commands.json ]] || { echo "configure $build first (meson setup $build)"; exit 2; }

mapfile -t sources < <(git ls-files '*.cc' '*.h' '*.c')
status=0
echo "== clang-format (${#sources[@]} files)"
clang-format --dry-run -Werror "${sources[@]}" || status=1

mapfile -t units < <(git ls-files 'plugin/*.cc' 'restart/*.cc' 'tests/*.cc')
echo "== clang-tidy (${#units[@]} translation units)"
# Test sources use a precompiled header (-include catch_pch.h); let clang find its source.
pch=(-extra-arg=-I"$PWD/tests/support/pch")
if command -v run-clang-tidy >/dev/null; then
  run-clang-tidy -quiet -p "$build" "${pch[@]}" "${units[@]}" >"$build/clang-tidy.log" 2>&1 || status=1
  grep -E 'warning:|error:' "$build/clang-tidy.log" | sort -u
else
  clang-tidy -quiet -p "$build" "${pch[@]}" "${units[@]}" || status=1
fi
exit $status
