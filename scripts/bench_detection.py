#!/usr/bin/env python3
"""Detection latency per fault class through the resilient plugin.

kill, stop: resilient-nettest (ring all-reduce, 4 ranks, 1 MiB, loopback)
  with one rank SIGKILLed or SIGSTOPped; the time from injection to the error
  the plugin returned to the victim's receiving neighbour (the rank that
  reads from it).
linkdown, drop (root, network namespaces): tests/chaos/net_faults.py: two
  ranks in two namespaces, the veth link set down or blackholed by nftables;
  the time until each rank's plugin returned the error (both ranks counted).
Every trial also checks that the right peer was blamed. Prints a table and
JSON (--json FILE).

usage: bench_detection.py [--build DIR] [--trials N] [--faults F ...] [--json FILE]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
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


def net_trial(nettest, plugin, fault):
    script = os.path.join(os.path.dirname(__file__), "..", "tests", "chaos", "net_faults.py")
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "d.json")
        proc = subprocess.run([sys.executable, script, nettest, plugin, fault, "--json", out],
                              capture_output=True, text=True, timeout=120)
        if proc.returncode == 77:
            raise SystemExit(f"{fault}: skipped (needs root and network namespaces)")
        if proc.returncode != 0:
            raise RuntimeError(f"{fault}: {proc.stdout[-2000:]} {proc.stderr[-2000:]}")
        ranks = json.load(open(out))["ranks"]
    return [r["ms"] for r in ranks], ranks[0]["warning"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--trials", type=int, default=10)
    ap.add_argument("--faults", nargs="+", default=["kill", "stop", "linkdown", "drop"])
    ap.add_argument("--json")
    args = ap.parse_args()
    nettest = os.path.join(args.build, "tools/nettest/resilient-nettest")
    plugin = os.path.join(args.build, "plugin/net/abi/libnccl-net-resilient.so")
    results = {}
    for fault in args.faults:
        times = []
        for _ in range(args.trials):
            if fault in ("kill", "stop"):
                ms, warn = trial(nettest, plugin, fault)
                times.append(ms)
            else:
                ms_list, warn = net_trial(nettest, plugin, fault)
                times += ms_list
        results[fault] = {"trials": args.trials, "detections": len(times), "median_ms": statistics.median(times),
                          "max_ms": max(times), "min_ms": min(times), "example_warning": warn}
    print(f"{'fault':<10} {'trials':>6} {'detections':>10} {'median ms':>10} {'min ms':>8} "
          f"{'max ms':>8}")
    for fault, r in results.items():
        print(f"{fault:<10} {r['trials']:>6} {r['detections']:>10} {r['median_ms']:>10.1f} "
              f"{r['min_ms']:>8.1f} {r['max_ms']:>8.1f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)


if __name__ == "__main__":
    main()
