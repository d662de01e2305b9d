#!/bin/sh
# Builds the TCP store protocol fuzz target with clang's libFuzzer (plus
# ASan/UBSan) and runs it for a bounded time from the seed corpus.
#   run_fuzz.sh SOURCE_ROOT WORK_DIR [SECONDS]
# Exit status: 0 no crash, 1 a crash (the reproducer is in WORK_DIR),
# 77 when clang with libFuzzer is not available (meson's "skipped").
set -u
src=$1
work=$2
seconds=${3:-60}
cxx=${CLANGXX:-clang++}
command -v "$cxx" >/dev/null 2>&1 || { echo "SKIP: $cxx not found"; exit 77; }
mkdir -p "$work/corpus" "$work/artifacts" || exit 1
store=$src/store
bin=$work/fuzz-store-protocol
flags="-std=c++20 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -I$src -I$src/include"
if ! $cxx $flags -o "$bin" \
    "$src/fuzz/store/fuzz_protocol.cc" \
    "$store/tcp/protocol.cc" "$store/tcp/wire.cc" "$store/tcp/frame_decoder.cc" \
    "$store/tcp/request_handler.cc" "$store/engine.cc" "$store/barrier_state.cc" \
    "$store/errors.cc" "$store/store.cc" "$src/common/status.cc" 2>"$work/build.log"; then
  if grep -q -e "fuzzer" -e "libclang_rt" "$work/build.log"; then
    echo "SKIP: $cxx cannot link -fsanitize=fuzzer"; cat "$work/build.log"; exit 77
  fi
  cat "$work/build.log"; exit 1
fi
echo "fuzzing the store protocol for $seconds s ($bin)"
# -rss_limit_mb/-malloc_limit_mb: a lying length field must never make the
# parser allocate much; -timeout: no input may take a second.
"$bin" -max_total_time="$seconds" -rss_limit_mb=1024 -malloc_limit_mb=256 -timeout=5 \
  -print_final_stats=1 -artifact_prefix="$work/artifacts/" "$work/corpus" "$src/fuzz/store/seeds"
rc=$?
[ $rc -eq 0 ] || { echo "fuzzer found a failing input: $(ls "$work/artifacts")"; exit 1; }
exit 0
