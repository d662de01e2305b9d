#!/usr/bin/env python3
"""Overhead of the net plugins against the raw TCP pump, in one run.

Runs resilient-nettest with 2 ranks on loopback through three transports:
  raw        --raw-tcp: plain TCP sockets of our own, no plugin (the physical baseline)
  plain      libnccl-net-tcp-plain.so: our TCP transport without the resilient layer
  resilient  libnccl-net-resilient.so over the same TCP transport
ROUNDS times each, interleaved (the order rotates every round) so that a busy
moment of the machine hits all three alike, and reports per size the median
over the rounds of each transport's time and bus bandwidth, with the ratios
the acceptance criteria name: plain/raw and resilient/plain bandwidth, and
the latency resilient adds over plain, each paired within a round and then
the median over the rounds. With --sample-bytes every size is its own run,
the three transports back to back, with enough iterations to carry that many
bytes: a 1 MiB sample of 20 iterations lasts a few milliseconds, too short
for a 1 % comparison on a shared machine. With --ab each round is one
resilient-net-ab run: the three transports set up side by side in the same two
processes and compared block by block (-n iterations each, in an order
drawn per block; the transports' places permuted over the rounds), so that
drifts of the machine between runs cancel out of the ratios. --size-bytes
gives small sizes more blocks. --socket-buffer fixes the socket buffers of
all three: with the kernel's autotuning two connections of the very same
plugin differ by several percent for their whole life, which no number of
blocks on those connections averages out.

Two patterns: `pingpong` (time = half the round trip: latency) and
`sendrecv` (both ranks send and receive at once: bandwidth). All three carry
the same messages: the raw pump has no grouped receives, so the plugins run
with --multi-recv 1 too (the default here; --multi-recv N to change it).

usage: bench_overhead.py [--build DIR] [--rounds N] [--pattern P ...]
                         [-b MIN] [-e MAX] [-f FACTOR] [-n ITERS] [-w WARMUP]
                         [--ab [--blocks N] [--size-bytes B] [--socket-buffer B]]
                         [--sample-bytes B] [--pin-cpus]
                         [--latency-iters N] [--json FILE]
Extra environment (e.g. NCCL_RESILIENT_SOCKET_NTHREADS) applies to both plugins.
"""
import argparse
import itertools
import json
import os
import platform
import statistics

from nettest_report import run_nettest

TRANSPORTS = ("raw", "plain", "resilient")


def parse_bytes(text):
    """"8", "64K", "1M", "2G" -> bytes (resilient-nettest's size syntax)."""
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    text = text.strip().upper()
    if text and text[-1] in units:
        return int(text[:-1]) * units[text[-1]]
    return int(text)


def invocations(args, sizes, scaled):
    """The (minbytes, maxbytes, iters, warmup) runs of one sample: one run of
    every size, or with --sample-bytes one run per size whose iterations carry
    at least that many bytes (a 1 MiB sample then lasts as long as a 64 MiB
    one instead of a few milliseconds)."""
    minbytes, maxbytes, iters, warmup = sizes
    if args.sample_bytes is None or not scaled:
        return [sizes]
    runs = []
    size = parse_bytes(minbytes)
    while size <= parse_bytes(maxbytes):
        n = max(iters, -(-args.sample_bytes // size))
        runs.append((str(size), str(size), n, max(warmup, n // 10)))
        size *= args.factor
    return runs


def run_one(args, transport, pattern, sizes):
    nettest = os.path.join(args.build, "tools/nettest/resilient-nettest")
    minbytes, maxbytes, iters, warmup = sizes
    cmd = [nettest, "--ranks", "2", "--pattern", pattern, "-b", minbytes, "-e", maxbytes, "-f",
           str(args.factor), "-n", str(iters), "-w", str(warmup), "--multi-recv",
           str(args.multi_recv)]
    if args.pin_cpus:
        cmd.append("--pin-cpus")
    if transport == "raw":
        cmd.append("--raw-tcp")
    else:
        name = "libnccl-net-tcp-plain.so" if transport == "plain" else "libnccl-net-resilient.so"
        cmd += ["--plugin", os.path.join(args.build, "plugin/net/abi", name)]
    report = run_nettest(cmd, f"{transport} {pattern}")
    return {r["bytes"]: (r["time_us"], r["busbw_gbps"]) for r in report["results"]}


def human(n):
    for unit, shift in (("G", 30), ("M", 20), ("K", 10)):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return f"{n >> shift}{unit}"
    return str(n)


def measure(args, pattern, sizes, scaled=True):
    samples = {t: {} for t in TRANSPORTS}  # transport -> bytes -> [(time, bw)]
    for r in range(args.rounds):
        order = TRANSPORTS[r % 3:] + TRANSPORTS[:r % 3]
        for run in invocations(args, sizes, scaled):  # with --sample-bytes: size by size
            for t in order:
                for size, value in run_one(args, t, pattern, run).items():
                    samples[t].setdefault(size, []).append(value)
    rows = []
    for size in sorted(samples["raw"]):
        row = {"bytes": size}
        for t in TRANSPORTS:
            row[f"{t}_time_us"] = statistics.median(v[0] for v in samples[t][size])
            row[f"{t}_busbw_gbps"] = statistics.median(v[1] for v in samples[t][size])
        # Ratios and differences are paired within a round (the runs of one round
        # are seconds apart, so they share the machine's state) and the median is
        # taken over the rounds: steadier than a ratio of two medians.
        raw, plain, resil = (samples[t][size] for t in TRANSPORTS)
        row["plain_vs_raw_bw"] = statistics.median(p[1] / r[1] for p, r in zip(plain, raw))
        row["resilient_vs_plain_bw"] = statistics.median(s[1] / p[1] for s, p in zip(resil, plain))
        row["resilient_added_us"] = statistics.median(s[0] - p[0] for s, p in zip(resil, plain))
        rows.append(row)
    return rows


def measure_ab(args, pattern, sizes, scaled=True):
    """--ab: each round is one resilient-net-ab run of the three transports in
    the same two processes, compared block by block; the ratios and added
    times are paired per block and the median is taken over every block of
    every round (per-round medians give the spread between process pairs).
    The transports' places (which is loaded and connected first) go through
    all six orders over the rounds, and every round draws its own order per
    block (--seed), so that neither place nor predecessor favours one."""
    tool = os.path.join(args.build, "tools/net_ab/resilient-net-ab")
    plugins = os.path.join(args.build, "plugin/net/abi")
    specs = {"raw": "raw",
             "plain": os.path.join(plugins, "libnccl-net-tcp-plain.so"),
             "resilient": os.path.join(plugins, "libnccl-net-resilient.so")}
    places = list(itertools.permutations(TRANSPORTS))
    minbytes, maxbytes, iters, warmup = sizes
    env = dict(os.environ)
    if args.socket_buffer:
        env["NCCL_RESILIENT_SOCKET_BUFFER_BYTES"] = str(args.socket_buffer)
    blocks = {}  # bytes -> [(raw, plain, resilient) seconds per iteration]
    per_round = {}  # bytes -> [(plain/raw, resilient/plain) per-round medians]
    for r in range(args.rounds):
        order = places[r % len(places)]
        cmd = [tool, "--pattern", pattern, "-b", minbytes, "-e", maxbytes, "-f", str(args.factor),
               "-n", str(iters), "-w", str(warmup), "--blocks", str(args.blocks),
               "--seed", str(r + 1), "--multi-recv", str(args.multi_recv),
               "--raw-socket-buffer", str(args.socket_buffer)]
        if args.size_bytes and scaled:
            cmd += ["--size-bytes", str(args.size_bytes)]
        for t in order:
            cmd += ["--transport", specs[t]]
        if args.pin_cpus:
            cmd.append("--pin-cpus")
        report = run_nettest(cmd, f"resilient-net-ab {pattern} round {r}", env=env)
        column = [order.index(t) for t in TRANSPORTS]
        for size in report["sizes"]:
            these = [tuple(b[i] for i in column) for b in size["seconds"]]
            blocks.setdefault(size["bytes"], []).extend(these)
            per_round.setdefault(size["bytes"], []).append(
                (statistics.median(b[0] / b[1] for b in these),
                 statistics.median(b[1] / b[2] for b in these)))
    rows = []
    for size, these in sorted(blocks.items()):
        row = {"bytes": size, "blocks": len(these)}
        for i, t in enumerate(TRANSPORTS):
            sec = statistics.median(b[i] for b in these)
            row[f"{t}_time_us"] = sec * 1e6
            row[f"{t}_busbw_gbps"] = size / sec / 1e9
        row["plain_vs_raw_bw"] = statistics.median(b[0] / b[1] for b in these)
        row["resilient_vs_plain_bw"] = statistics.median(b[1] / b[2] for b in these)
        row["resilient_added_us"] = statistics.median((b[2] - b[1]) * 1e6 for b in these)
        row["block_seconds"] = [list(b) for b in these]  # (raw, plain, resilient), to pool runs
        rounds = per_round[size]
        row["plain_vs_raw_bw_rounds"] = [min(x[0] for x in rounds), max(x[0] for x in rounds)]
        row["resilient_vs_plain_bw_rounds"] = [min(x[1] for x in rounds),
                                               max(x[1] for x in rounds)]
        rows.append(row)
    return rows


def print_table(pattern, rows):
    ab = "blocks" in rows[0]
    if ab:
        print(f"\n{pattern}: median over every block of every round ({rows[0]['blocks']} "
              "blocks); time in us, busbw in GB/s; ratios and added time paired per block; "
              "[lowest, highest] of the per-round medians")
    else:
        print(f"\n{pattern}: median of rounds; time in us, busbw in GB/s; "
              "ratios and added time paired per round, then the median")
    print(f"{'size':>6} | {'raw us':>9} {'plain us':>9} {'resil us':>9} | {'raw bw':>7} "
          f"{'plain bw':>8} {'resil bw':>8} | {'plain/raw':>9} {'resil/plain':>11} "
          f"{'added us':>8}" + (" | per round: plain/raw  resil/plain" if ab else ""))
    for r in rows:
        line = (f"{human(r['bytes']):>6} | {r['raw_time_us']:9.2f} {r['plain_time_us']:9.2f} "
                f"{r['resilient_time_us']:9.2f} | {r['raw_busbw_gbps']:7.3f} "
                f"{r['plain_busbw_gbps']:8.3f} {r['resilient_busbw_gbps']:8.3f} | "
                f"{100 * r['plain_vs_raw_bw']:8.1f}% {100 * r['resilient_vs_plain_bw']:10.1f}% "
                f"{r['resilient_added_us']:8.2f}")
        if ab:
            a, b = r["plain_vs_raw_bw_rounds"], r["resilient_vs_plain_bw_rounds"]
            line += (f" | [{100 * a[0]:.1f}, {100 * a[1]:.1f}]%"
                     f"  [{100 * b[0]:.1f}, {100 * b[1]:.1f}]%")
        print(line)


def criteria(result):
    """The acceptance criteria, from this run's paired medians."""
    big = [r for rows in result["patterns"].values() for r in rows if r["bytes"] >= 1 << 20]
    return {
        "resilient_vs_plain_bw_min_at_1MiB_up": min(r["resilient_vs_plain_bw"] for r in big),
        "plain_vs_raw_bw_min_at_1MiB_up": min(r["plain_vs_raw_bw"] for r in big),
        "resilient_added_us_at_8B": result["latency_8B"]["resilient_added_us"],
    }


def print_criteria(c):
    checks = (
        ("resilient/plain bandwidth >= 99 % at >= 1 MiB (lowest row)",
         100 * c["resilient_vs_plain_bw_min_at_1MiB_up"], "%", 100 * 0.99, True),
        ("resilient adds <= 1 us at 8 B (pingpong)", c["resilient_added_us_at_8B"], " us", 1.0,
         False),
        ("plain/raw bandwidth >= 90 % at >= 1 MiB (lowest row)",
         100 * c["plain_vs_raw_bw_min_at_1MiB_up"], "%", 90.0, True),
    )
    print("\ncriteria of this run:")
    for text, value, unit, bound, at_least in checks:
        ok = value >= bound if at_least else value <= bound
        print(f"  {'met' if ok else 'NOT met'}: {text}: {value:.2f}{unit}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--pattern", nargs="+", default=["pingpong", "sendrecv"])
    ap.add_argument("-b", "--minbytes", default="8")
    ap.add_argument("-e", "--maxbytes", default="64M")
    ap.add_argument("-f", "--factor", type=int, default=4)
    ap.add_argument("-n", "--iters", type=int, default=20)
    ap.add_argument("-w", "--warmup", type=int, default=5)
    ap.add_argument("--ab", action="store_true",
                    help="compare the three transports block by block inside one pair of "
                         "processes per round (resilient-net-ab); -n is then the iterations "
                         "per block, and with --latency-iters the 8 B iterations per block")
    ap.add_argument("--blocks", type=int, default=10,
                    help="--ab: blocks per size and round (at least)")
    ap.add_argument("--size-bytes", type=parse_bytes,
                    help="--ab: more blocks for small sizes, so that every transport carries at "
                         "least this many bytes per size and round (e.g. 4G)")
    ap.add_argument("--socket-buffer", type=parse_bytes, default=0,
                    help="--ab: fixed SO_SNDBUF/SO_RCVBUF in bytes for all three transports "
                         "(NCCL_RESILIENT_SOCKET_BUFFER_BYTES, --raw-socket-buffer); 0: the "
                         "kernel's autotuning, which settles differently per connection")
    ap.add_argument("--sample-bytes", type=parse_bytes,
                    help="run each size on its own with at least this many bytes per rank "
                         "(e.g. 1G): iterations = max(-n, SAMPLE_BYTES / size)")
    ap.add_argument("--multi-recv", type=int, default=1,
                    help="grouped receives (the raw pump has none: 1 keeps the messages alike)")
    ap.add_argument("--pin-cpus", action="store_true",
                    help="run rank r on CPU r (resilient-nettest --pin-cpus), for all three")
    ap.add_argument("--latency-iters", type=int, default=0,
                    help="also measure pingpong at 8 B with this many iterations (the latency "
                         "criterion) and print the three criteria of this run")
    ap.add_argument("--json")
    args = ap.parse_args()
    result = {"machine": {"cpus": os.cpu_count(), "kernel": platform.release()},
              "rounds": args.rounds, "iters": args.iters, "sample_bytes": args.sample_bytes,
              "ab": args.ab, "blocks": args.blocks if args.ab else None,
              "size_bytes": args.size_bytes, "socket_buffer": args.socket_buffer,
              "multi_recv": args.multi_recv,
              "pin_cpus": args.pin_cpus,
              "env": {k: v for k, v in os.environ.items() if k.startswith("NCCL_")},
              "patterns": {}}
    sizes = (args.minbytes, args.maxbytes, args.iters, args.warmup)
    run = measure_ab if args.ab else measure
    for pattern in args.pattern:
        rows = run(args, pattern, sizes)
        result["patterns"][pattern] = rows
        print_table(pattern, rows)
    if args.latency_iters > 0:
        if args.ab:
            rows = measure_ab(args, "pingpong", ("8", "8", args.latency_iters,
                                                 max(1, args.latency_iters // 20)), scaled=False)
        else:
            rows = measure(args, "pingpong", ("8", "8", args.latency_iters,
                                              max(1, args.latency_iters // 20)), scaled=False)
        result["latency_8B"] = rows[0]
        print_table("latency (pingpong, 8 B)", rows)
        result["criteria"] = criteria(result)
        print_criteria(result["criteria"])
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)


if __name__ == "__main__":
    main()
