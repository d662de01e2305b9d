#!/usr/bin/env python3
"""Detection latency per fault class through the resilient plugin, on loopback.

Runs resilient-nettest (ring all-reduce, 4 ranks, 1 MiB) TRIALS times per
fault and records, for the victim's receiving neighbour (the rank that reads
from it), the time from injection to the error its plugin returned. Prints a
table and JSON (--json FILE).

usage: bench_detection.py [--build DIR] [--trials N] [--json FILE]
"""
import argparse
import json
import os
import statistics
import subprocess
import tempfile


def trial(nettest, plugin, fault, victim=2, ranks=4):
    env = dict(os.environ, NCCL_RESILIENT_SOCKET_IFNAME="lo")
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "r.json")
        subprocess.run([nettest, "--plugin", plugin, "--ranks", str(ranks), "--pattern", "allreduce",
                        "-b", "1M", "-e", "1M", "-n", "100000", "-w", "1", f"--{fault}",
                        f"{victim}@500", "--timeout", "20", "--json", out],
                       env=env, capture_output=True, text=True, timeout=120, check=True)
        faults = json.load(open(out))["faults"]
    reader = next(f for f in faults if f["rank"] == (victim + 1) % ranks)
    if reader.get("peer") != victim:
        raise RuntimeError(f"rank {reader['rank']} blamed {reader.get('peer')}, not {victim}")
    return reader["since_injection_ms"], reader.get("plugin_warning", "")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--trials", type=int, default=10)
    ap.add_argument("--json")
    args = ap.parse_args()
    nettest = os.path.join(args.build, "plugin/hostengine/resilient-nettest")
    plugin = os.path.join(args.build, "plugin/abi/libnccl-net-resilient.so")
    results = {}
    for fault in ("kill", "stop"):
        times = []
        for _ in range(args.trials):
            ms, warn = trial(nettest, plugin, fault)
            times.append(ms)
        results[fault] = {"trials": len(times), "median_ms": statistics.median(times),
                          "max_ms": max(times), "min_ms": min(times), "example_warning": warn}
    print(f"{'fault':<10} {'trials':>6} {'median ms':>10} {'min ms':>8} {'max ms':>8}")
    for fault, r in results.items():
        print(f"{fault:<10} {r['trials']:>6} {r['median_ms']:>10.1f} {r['min_ms']:>8.1f} {r['max_ms']:>8.1f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)


if __name__ == "__main__":
    main()
