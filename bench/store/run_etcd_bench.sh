#!/usr/bin/env bash
# Runs resilient-store-bench against a fresh local etcd cluster: MEMBERS
# members on loopback (data in /dev/shm, the fd limit raised to the hard
# limit), removed afterwards. Extra arguments go to the benchmark.
#   run_etcd_bench.sh BUILD_DIR MEMBERS [bench arguments...]
set -euo pipefail
build=$1
members=$2
shift 2
bench=$build/bench/store/resilient-store-bench
command -v etcd >/dev/null || { echo "etcd is not installed (apt-get install etcd-server)"; exit 77; }
ulimit -n "$(ulimit -Hn)"
dir=$(mktemp -d /dev/shm/resilient-etcd-bench-XXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$dir"
}
trap cleanup EXIT
freeport() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
initial=""
declare -a cports pports
for ((i = 0; i < members; i++)); do
  cports[i]=$(freeport)
  pports[i]=$(freeport)
  initial+="${initial:+,}m$i=http://127.0.0.1:${pports[i]}"
done
endpoints=""
for ((i = 0; i < members; i++)); do
  etcd --name "m$i" --data-dir "$dir/m$i" \
    --listen-client-urls "http://127.0.0.1:${cports[i]}" --advertise-client-urls "http://127.0.0.1:${cports[i]}" \
    --listen-peer-urls "http://127.0.0.1:${pports[i]}" --initial-advertise-peer-urls "http://127.0.0.1:${pports[i]}" \
    --initial-cluster "$initial" --initial-cluster-state new --initial-cluster-token "bench-$$" \
    --log-level error >"$dir/m$i.log" 2>&1 &
  pids+=($!)
  endpoints+="${endpoints:+,}127.0.0.1:${cports[i]}"
done
for ((i = 0; i < members; i++)); do
  for _ in $(seq 100); do
    curl -sf -X POST "http://127.0.0.1:${cports[i]}/v3/kv/range" -d '{"key":"AA=="}' >/dev/null && break
    sleep 0.1
  done
done
echo "etcd $(etcd --version | head -1 | awk '{print $3}'), $members member(s): $endpoints"
"$bench" --backend etcd --etcd "$endpoints" "$@"
