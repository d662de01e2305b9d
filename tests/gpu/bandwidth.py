"""Bandwidth, one run: 2 ranks on the one GPU (each its own NCCL host), an
all-reduce of 1 MiB to 256 MiB, through NCCL's internal Socket transport (no
plugin), our plain TCP plugin (libnccl-net-tcp-plain.so) and the resilient
plugin over the same TCP transport. Times come from CUDA events around
ITERATIONS all-reduces after WARMUP; busbw = bytes / time * 2 (n - 1) / n
(nccl-tests' definition for all-reduce).

Launcher: `python3 bandwidth.py --kit DIR --env-json FILE --out DIR`
Worker:   `python3 bandwidth.py --worker ...` (started by the launcher)
"""

import argparse
import json
import os
import secrets
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kit as kitlib  # noqa: E402

NRANKS = 2
SIZES_MIB = [1, 4, 16, 64, 256]
WARMUP = 2
ITERATIONS = 5
# (label, net role in the kit, or None for NCCL's own Socket transport)
TRANSPORTS = [("NCCL Socket", None), ("plain TCP plugin", "plain_plugin"), ("resilient(TCP)", "net_plugin")]


def bus_bandwidth(nbytes, seconds, nranks=NRANKS):
    """GB/s on the bus for one all-reduce of nbytes taking seconds."""
    return nbytes / seconds * 2 * (nranks - 1) / nranks / 1e9


def worker(a):
    import torch
    import nccl_ctypes

    nccl, comm = nccl_ctypes.join_communicator(a.nccl_lib, a.run_dir, a.rank, a.nranks)
    stream = torch.cuda.current_stream()
    rows = []
    for mib in SIZES_MIB:
        count = mib * 1024 * 1024 // 4
        x = torch.full((count,), float(a.rank + 1), device="cuda")
        y = torch.empty(count, device="cuda")
        for _ in range(WARMUP):
            nccl.all_reduce(comm, x.data_ptr(), y.data_ptr(), count, stream.cuda_stream)
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record(stream)
        for _ in range(ITERATIONS):
            nccl.all_reduce(comm, x.data_ptr(), y.data_ptr(), count, stream.cuda_stream)
        stop.record(stream)
        stop.synchronize()
        seconds = start.elapsed_time(stop) / 1000 / ITERATIONS
        expected = float(sum(range(1, a.nranks + 1)))
        ok = bool(torch.all(y == expected).item())
        rows.append({"bytes": count * 4, "seconds": seconds,
                     "busbw_gbs": bus_bandwidth(count * 4, seconds, a.nranks), "values_ok": ok})
        del x, y
    nccl.destroy(comm)
    kitlib.worker_result(a.result, {"rank": a.rank, "rows": rows})
    kitlib.worker_exit(0)


def table(results):
    """Markdown: one row per size, one busbw column per transport."""
    labels = [label for label, _ in TRANSPORTS if results.get(label)]
    lines = ["| size | " + " | ".join(f"{l} busbw GB/s" for l in labels) + " |",
             "|---:|" + "---:|" * len(labels)]
    for i, mib in enumerate(SIZES_MIB):
        cells = []
        for l in labels:
            rows = results[l]
            cells.append(f"{rows[i]['busbw_gbs']:.2f}" if i < len(rows) else "–")
        lines.append(f"| {mib} MiB | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def launch(a):
    k = kitlib.Kit(a.kit)
    with open(a.env_json) as f:
        envinfo = json.load(f)
    results, problems = {}, []
    for label, role in TRANSPORTS:
        run_dir = tempfile.mkdtemp(prefix="bandwidth-", dir=a.out)
        base = kitlib.nccl_environment(os.environ, net_role=role, kit=k, log_dir=run_dir)
        base.update({"NCCL_RESILIENT_JOB_TOKEN": secrets.token_hex(16), "PYTHONUNBUFFERED": "1",
                     "NCCL_RESILIENT_BLACKBOX_DIR": ""})
        argv = [sys.executable, os.path.abspath(__file__), "--worker", "--nranks", str(NRANKS),
                "--run-dir", run_dir, "--nccl-lib", envinfo["nccl_library"]]
        with kitlib.Ranks(run_dir) as ranks:
            for r in range(NRANKS):
                ranks.start(r, argv + ["--rank", str(r)], kitlib.rank_environment(base, r), "worker")
            got = ranks.wait_results(time.monotonic() + a.seconds_per_transport)
        if got.get(0) is None:
            problems.append(f"{label}: rank 0 reported nothing (logs in {run_dir})")
            continue
        rows = got[0]["rows"]
        bad = [r["bytes"] for r in rows if not r["values_ok"]]
        if bad:
            problems.append(f"{label}: wrong values at {bad} bytes")
        results[label] = rows
    return {"ok": not problems, "problems": problems, "results": results, "table": table(results)}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--worker", action="store_true")
    p.add_argument("--kit")
    p.add_argument("--env-json")
    p.add_argument("--out")
    p.add_argument("--result")
    p.add_argument("--rank", type=int)
    p.add_argument("--nranks", type=int, default=NRANKS)
    p.add_argument("--run-dir")
    p.add_argument("--nccl-lib")
    p.add_argument("--seconds-per-transport", type=float, default=15)
    a = p.parse_args()
    if a.worker:
        worker(a)
        return 0
    if not (a.kit and a.env_json and a.out):
        p.error("--kit, --env-json and --out are needed")
    report = launch(a)
    print(json.dumps(report))
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
