#!/usr/bin/env python3
"""Bound on the bandwidth the resilient layer costs, from a direct measurement.

End-to-end bandwidth on a small VM is too noisy (+-3..15 %) to show a 1 %
difference, so this measures the parts instead:
  1. bench-net-layer (Google Benchmark): the layer's cost per data-path call
     (with --consumed: each receive also consumed, irecvConsumed passed through),
     libnccl-net-resilient.so against the instant fake plugin it wraps, at
     0 bytes (the layer never touches the data; larger sizes add the fake's
     memcpy to both sides and are shown as a check):
       send = isend + test until done, recv = (grouped) irecv + test until
       done, poll = one not-done test
  2. resilient-nettest through the plain TCP plugin (libnccl-net-tcp-plain.so):
     the time of one message of each size, and the net requests it becomes
     (chunks of --chunk, each sent as one isend per piece and received as one
     irecv of all its pieces, pieces >= --min-piece, at most --multi-recv)
and prints per size: the plain time per message and per isend, the layer's
cost per message = isends x (send + poll) + irecvs x (recv + poll) (one
extra not-done poll per request: the completion noticed one poll later), and
the bound plain / resilient bandwidth >= t / (t + cost). Both sides' costs
are charged to the one message (pingpong: they run in two processes).

usage: bench_net_layer.py [--build DIR] [--pattern P] [-b MIN] [-e MAX] [-n ITERS]
                          [--multi-recv N] [--repetitions N] [--min-time S]
                          [--consumed] [--json FILE]
Then JSON of everything on stdout after the tables.
"""
import argparse
import json
import os
import platform
import subprocess

import nettest_report


def run_bench(args):
    bench = os.path.join(args.build, "bench/net_layer/bench-net-layer")
    cmd = [bench, "--benchmark_format=json", f"--benchmark_repetitions={args.repetitions}",
           f"--benchmark_min_time={args.min_time}", "--benchmark_report_aggregates_only=true",
           "--benchmark_enable_random_interleaving=true"]
    env = dict(os.environ)
    env.setdefault("NCCL_RESILIENT_SOCKET_IFNAME", "lo")
    if args.consumed:
        env["RESILIENT_BENCH_CONSUMED"] = "1"
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900, check=True)
    report = json.loads(out.stdout)
    # "Send/resilient/bytes:0/manual_time_median" -> ("Send", "resilient", "bytes:0"): ns
    medians = {}
    for b in report["benchmarks"]:
        if b.get("aggregate_name") != "median":
            continue
        assert b["time_unit"] == "ns", b
        parts = [p for p in b["run_name"].split("/") if p != "manual_time"]
        medians[(parts[0], parts[1], "/".join(parts[2:]))] = b["real_time"]
    return report["context"], medians


def layer_costs(medians):
    """Resilient minus inner, ns, per benchmark (kind, args)."""
    out = {}
    for (kind, plugin, params), ns in medians.items():
        if plugin == "resilient" and (kind, "inner", params) in medians:
            out[(kind, params)] = {"inner_ns": medians[(kind, "inner", params)],
                                   "resilient_ns": ns,
                                   "layer_ns": ns - medians[(kind, "inner", params)]}
    return out


def run_nettest(args):
    nettest = os.path.join(args.build, "tools/nettest/resilient-nettest")
    plain = os.path.join(args.build, "plugin/net/abi/libnccl-net-tcp-plain.so")
    cmd = [nettest, "--ranks", "2", "--pattern", args.pattern, "-b", args.minbytes, "-e",
           args.maxbytes, "-n", str(args.iters), "--plugin", plain, "--chunk", args.chunk,
           "--multi-recv", str(args.multi_recv)]
    return cmd, nettest_report.run_nettest(cmd, "resilient-nettest")


def requests_per_message(nbytes, transport):
    """(isends, irecvs, pieces of the first irecv), as the host engine splits a message."""
    chunk = transport["chunk_bytes"]
    items = max(1, -(-nbytes // chunk))
    isends = 0
    first = None
    for i in range(items):
        item = nbytes // items + (1 if i < nbytes % items else 0)
        by_min = item // transport["min_piece_bytes"] if transport["min_piece_bytes"] else item
        n = min(max(by_min, 1), transport["pieces_per_recv"], max(item, 1))
        isends += n
        first = n if first is None else first
    return isends, items, first


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--build", default="build-netbench")
    p.add_argument("--pattern", default="pingpong", choices=["pingpong", "sendrecv"])
    p.add_argument("-b", "--minbytes", default="1M")
    p.add_argument("-e", "--maxbytes", default="64M")
    p.add_argument("-n", "--iters", type=int, default=20)
    p.add_argument("--chunk", default="512K")
    p.add_argument("--multi-recv", type=int, default=8)
    p.add_argument("--repetitions", type=int, default=10, help="of each benchmark (median)")
    p.add_argument("--min-time", default="0.2", help="seconds per benchmark repetition")
    p.add_argument("--consumed", action="store_true",
                   help="the inner plugin has irecvConsumed and every receive is consumed "
                        "(the device-unpack path passed through)")
    p.add_argument("--json", help="also write the JSON to this file")
    args = p.parse_args()
    if args.repetitions < 2:
        p.error("--repetitions must be at least 2: Google Benchmark reports medians only then")

    context, medians = run_bench(args)
    costs = layer_costs(medians)
    cmd, plain = run_nettest(args)
    transport = plain["transport"]

    print(f"# bench-net-layer: {context['num_cpus']} CPUs, load {context.get('load_avg')}, "
          f"median of {args.repetitions}; ns per request (Poll: per test call)")
    print(f"{'benchmark':<28}{'inner ns':>10}{'resilient ns':>14}{'layer ns':>10}")
    for (kind, params), c in sorted(costs.items()):
        print(f"{kind + ' ' + params:<28}{c['inner_ns']:>10.1f}{c['resilient_ns']:>14.1f}"
              f"{c['layer_ns']:>10.1f}")

    poll = costs[("Poll", "")]["layer_ns"]
    send = costs[("Send", "bytes:0")]["layer_ns"]
    recv_by_pieces = {int(params.split("pieces:")[1]): c["layer_ns"]
                      for (kind, params), c in costs.items()
                      if kind == "Recv" and params.startswith("bytes:0/")}
    rows = []
    for r in plain["results"]:
        isends, irecvs, pieces = requests_per_message(r["bytes"], transport)
        # the measured grouped receive nearest in size (the layer's loop over pieces is tiny)
        measured = min(recv_by_pieces, key=lambda n: abs(n - pieces))
        recv = recv_by_pieces[measured]
        layer_ns = isends * (send + poll) + irecvs * (recv + poll)
        t_us = r["time_us"]
        rows.append({"bytes": r["bytes"], "isends": isends, "irecvs": irecvs,
                     "pieces_per_irecv": pieces, "recv_pieces_measured": measured,
                     "plain_us_per_message": t_us, "plain_us_per_isend": t_us / isends,
                     "plain_busbw_gbps": r["busbw_gbps"], "layer_ns_per_message": layer_ns,
                     "layer_ns_per_isend": layer_ns / isends,
                     "bound_percent": 100.0 * t_us * 1e3 / (t_us * 1e3 + max(layer_ns, 0.0))})

    print(f"\n# plain TCP ({args.pattern}, chunk {transport['chunk_bytes']} B, "
          f"{transport['pieces_per_recv']} pieces max of >= {transport['min_piece_bytes']} B); "
          f"layer per request: send {send:.1f} ns, recv "
          + ", ".join(f"{n} pieces {ns:.1f} ns" for n, ns in sorted(recv_by_pieces.items()))
          + f", poll {poll:.1f} ns")
    print(f"{'bytes':>10}{'isend+irecv':>13}{'plain us/msg':>14}{'plain us/req':>14}"
          f"{'layer ns/msg':>14}{'layer ns/req':>14}{'bound %':>10}")
    for row in rows:
        print(f"{row['bytes']:>10}{str(row['isends']) + '+' + str(row['irecvs']):>13}"
              f"{row['plain_us_per_message']:>14.1f}{row['plain_us_per_isend']:>14.2f}"
              f"{row['layer_ns_per_message']:>14.1f}{row['layer_ns_per_isend']:>14.1f}"
              f"{row['bound_percent']:>10.3f}")

    result = {"tool": "bench_net_layer.py", "host": platform.node(),
              "load_avg": os.getloadavg(), "bench_context": context,
              "layer": {f"{k}/{p}" if p else k: c for (k, p), c in sorted(costs.items())},
              "nettest_command": cmd, "nettest_transport": transport, "pattern": args.pattern,
              "consumed": args.consumed,
              "rows": rows}
    text = json.dumps(result, indent=2)
    print(text)
    if args.json:
        with open(args.json, "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
