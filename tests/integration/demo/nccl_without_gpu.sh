#!/bin/sh
# The demo's --nccl mode on a machine without a usable GPU (no CUDA driver or
# device): resilient-demo-train and scripts/demo.py stop at once with exit 77
# and say why, before starting anything; nothing hangs. Skipped (77) where a
# GPU is present: the real --nccl run applies there.
# $1: resilient-demo-train, $2: scripts/demo.py, $3: the build directory.
train=$1
demo=$2
build=$3

fail() {
  echo "FAIL: $1"
  exit 1
}

# expect NAME RC OUTPUT PATTERN: RC must be 77 and OUTPUT must match PATTERN.
expect() {
  [ "$2" -ne 124 ] || fail "$1 did not end within its time limit (hang)"
  [ "$2" -eq 77 ] || fail "$1 exited with $2 instead of 77: $3"
  printf '%s\n' "$3" | grep -q -e "$4" || fail "$1 said \"$3\", not \"$4\""
  echo "ok: $1 -> 77: $3"
}

if out=$(timeout 60 "$train" --check-cuda 2>&1); then
  echo "SKIP: a CUDA device is present ($out); run scripts/demo.sh --nccl instead"
  exit 77
fi

out=$(timeout 30 "$train" --nccl --run-dir=/nonexistent/demo-run 2>&1)
expect "resilient-demo-train --nccl" $? "$out" "^resilient-demo-train: --nccl needs \(a CUDA device\|the CUDA runtime\): "

out=$(timeout 30 "$train" --nccl --cuda-library=/nonexistent/libcudart.so.13 \
  --run-dir=/nonexistent/demo-run 2>&1)
expect "resilient-demo-train --nccl --cuda-library=<missing>" $? "$out" \
  "--nccl needs the CUDA runtime: /nonexistent/libcudart.so.13 could not be loaded: "

out=$(timeout 60 python3 "$demo" --build "$build" --nccl 2>&1)
expect "demo.py --nccl" $? "$out" "^demo: skipped: --nccl needs "
printf '%s\n' "$out" | grep -q "^store:" && fail "demo.py --nccl started the store: $out"
exit 0
