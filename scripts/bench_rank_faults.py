#!/usr/bin/env python3
"""Detection of a dead, frozen or stuck rank where no byte crosses the net
plugin: the torch demo's job (examples/pytorch/train.py, torch.distributed
over gloo, 8 ranks of which 6 active and 2 spares, on loopback) at the
library's default timeouts, one fault per trial on active rank 2:

  kill   SIGKILL after its step 30: its monitor's pidfd; the death record
  stop   SIGSTOP after its step 30: its monitor's liveness link
         (NCCL_RESILIENT_LIVENESS_TIMEOUT_MS, 1 s)
  busy   before the all_reduce of its step 30 it spins in Python for 15 s
  gil    ... it sleeps 15 s in C holding the GIL (ctypes.PyDLL)
         busy and gil are stuck ranks: named by the health comparison
         (NCCL_RESILIENT_STUCK_RANK_TIMEOUT_MS, 8 s), not faults

For kill and stop, from the signal (CLOCK_MONOTONIC and wall clock read just
before os.kill) to: the fault record in the store (its wall time: the
monitor publishing it), the survivors' "fault detected" (first and last of
them) and their re-entry in iteration 1. For busy and gil, from the stall's
start (the rank's log line) to the stuck-rank report (the store record's
time: the named rank's sample that proved it) and to the named rank's own
timeline entry. Prints a table and writes JSON (--json FILE).

With --nccl (a GPU; the GPU kit's rank-faults-nccl step) the backend is NCCL
through our plugins on GPU 0 (scripts/demo.py --pytorch --nccl's settings):
the collectives cross our net plugin, and the stuck rank is named from the
profiler's in-flight operations.

usage: bench_rank_faults.py [--build DIR] [--trials N] [--faults F ...] [--json FILE]
                            [--nccl [--python PY] [--cuda-library PATH]]
"""
import argparse
import json
import os
import platform
import re
import secrets
import signal
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(REPO, "python"))
import demo  # noqa: E402  (the demo's job runner and store)

VICTIM = 2
AT_STEP = 30
STALL_S = 15
STALL_RE = re.compile(r"^stall begin kind=\S+ seconds=\S+ wall_ns=(\d+) mono_ns=(\d+)$", re.M)


def ms(ns):
    return ns / 1e6


def events(report, phase, iteration):
    return [e for e in report.get("timeline", []) if e["phase"] == phase
            and e["iteration"] == iteration]


def store_records(store, job, kind):
    """The job's fault records (kind "faults") or health reports ("reports")."""
    if kind == "faults":
        count_key, item = f"resilient/{job}/faults/count", f"resilient/{job}/faults/{{}}"
    else:
        count_key, item = f"resilient/{job}/health/reports", f"resilient/{job}/health/report/{{}}"
    count = store.get(count_key)
    out = []
    for i in range(1, int(count or 0) + 1):
        v = store.get(item.format(i))
        if v:
            out.append(json.loads(v))
    return out


def intervals_argv(args):
    return ["--library-intervals"] if args.library_intervals else []


def trial(args, procs, store, store_url, base_env, fault, n):
    name = f"{fault}-{n}"
    if fault in ("kill", "stop"):
        sig = signal.SIGKILL if fault == "kill" else signal.SIGSTOP
        job = demo.run_job(args, name, procs, store_url, base_env,
                           [{"name": fault, "signal": sig, "rank": VICTIM, "iteration": 0,
                             "step": AT_STEP}], extra_argv=intervals_argv(args))
        inj = job["faults"][0]
        records = [f for f in store_records(store, name, "faults")
                   if f.get("subject") == VICTIM and f.get("iteration") == 0]
        if not records:
            raise RuntimeError(f"{name}: no fault record about rank {VICTIM}")
        published = min(r["wall_ns"] for r in records) - inj["at_wall_ns"]
        survivors = [r for r in job["reports"] if r != VICTIM]
        detected = [events(job["reports"][r], "fault detected", 0)[0]["mono_ns"] - inj["at_ns"]
                    for r in survivors if events(job["reports"][r], "fault detected", 0)]
        entered = [events(job["reports"][r], "function entered", 1)[0]["mono_ns"] - inj["at_ns"]
                   for r in survivors if events(job["reports"][r], "function entered", 1)]
        return {"fault": fault, "published_ms": ms(published),
                "reason": sorted({r["reason"] for r in records}),
                "detected_first_ms": ms(min(detected)), "detected_last_ms": ms(max(detected)),
                "reentered_last_ms": ms(max(entered)) if entered else None}
    job = demo.run_job(args, name, procs, store_url, base_env, [],
                       extra_argv=[f"--stall={VICTIM}@{AT_STEP}:{fault}:{STALL_S}"]
                       + intervals_argv(args))
    log = open(os.path.join(job["dir"], f"rank-{VICTIM}.log")).read()
    m = STALL_RE.search(log)
    if not m:
        raise RuntimeError(f"{name}: rank {VICTIM} logged no stall")
    wall0, mono0 = int(m.group(1)), int(m.group(2))
    reports = [r for r in store_records(store, name, "reports") if r["kind"] == "stuck rank"]
    named = [r for r in reports if r["subject"]["pid"] == job["ranks"][VICTIM].pid]
    others = [r for r in reports if r not in named]
    if not named:
        raise RuntimeError(f"{name}: rank {VICTIM} was not named a stuck rank")
    learnt = [e["mono_ns"] for e in job["reports"][VICTIM].get("timeline", [])
              if e["phase"] == "health report" and "stuck rank" in e["detail"]]
    problems = demo.check_endings(job)
    return {"fault": fault, "named_ms": ms(named[0]["wall_ns"] - wall0),
            "learnt_ms": ms(min(learnt) - mono0) if learnt else None,
            "text": named[0]["text"], "false_names": len(others), "problems": problems}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--build", default=os.path.join(REPO, "build"))
    p.add_argument("--trials", type=int, default=3)
    p.add_argument("--faults", nargs="+", default=["kill", "stop", "busy", "gil"],
                   choices=["kill", "stop", "busy", "gil"])
    p.add_argument("--python", default="/usr/bin/python3")
    p.add_argument("--nccl", action="store_true", help="NCCL on GPU 0 instead of gloo")
    p.add_argument("--cuda-library", default=None, help="the CUDA runtime (with --nccl)")
    p.add_argument("--library-intervals", action="store_true",
                   help="the ranks at the library's default intervals too (1 s; the demo's "
                        "are 100 ms): every setting a user gets")
    p.add_argument("--json")
    a = p.parse_args()
    args = argparse.Namespace(build=os.path.abspath(a.build), python=a.python, pytorch=True,
                              nccl=a.nccl, cuda_library=a.cuda_library, steps=60,
                              checkpoint_every=20, step_ms=20, job_timeout=180,
                              library_intervals=a.library_intervals)
    run_dir = tempfile.mkdtemp(prefix="resilient-bench-faults-")
    blackbox_dir = tempfile.mkdtemp(prefix="resilient-bench-bb-", dir="/dev/shm")
    procs = demo.Processes(run_dir, blackbox_dir)
    token = os.environ.get("NCCL_RESILIENT_JOB_TOKEN") or secrets.token_hex(16)
    os.environ["NCCL_RESILIENT_JOB_TOKEN"] = token
    os.environ["BUILD_DIR"] = args.build
    base_env = dict(os.environ, NCCL_RESILIENT_SOCKET_IFNAME="lo",
                    NCCL_RESILIENT_BLACKBOX_DIR=blackbox_dir,
                    PYTHONPATH=os.path.join(REPO, "python"), BUILD_DIR=args.build)
    if args.nccl:
        base_env.update(demo.nccl_env(args))
    rows = []
    try:
        _, url = demo.start_store(procs, os.path.join(args.build, "tools", "store",
                                                      "resilient-store"), run_dir, base_env)
        import nccl_resilient
        store = nccl_resilient.Store(url)
        for fault in a.faults:
            for n in range(a.trials):
                row = trial(args, procs, store, url, base_env, fault, n)
                print(json.dumps(row), flush=True)
                rows.append(row)
    finally:
        procs.stop_all()
    print(f"\n{platform.node()}, {os.cpu_count()} CPUs; torch demo "
          f"({'NCCL on GPU 0' if args.nccl else 'gloo'}, 8 ranks: 6 active, "
          f"2 spares), library defaults"
          f"{' (the intervals too)' if a.library_intervals else ' (demo-sized intervals, 100 ms)'}; "
          f"{a.trials} trials each; median (max)\n")
    print("| fault | first signal | published / named | survivors detect (first-last) | "
          "survivors re-enter |")
    print("|---|---|---|---|---|")
    med = lambda v: f"{statistics.median(v):.1f} ({max(v):.1f})"  # noqa: E731
    for fault in a.faults:
        rs = [r for r in rows if r["fault"] == fault]
        if fault in ("kill", "stop"):
            print(f"| {fault} | {'pidfd' if fault == 'kill' else 'liveness link'} "
                  f"({', '.join(rs[0]['reason'])}) | {med([r['published_ms'] for r in rs])} ms | "
                  f"{med([r['detected_first_ms'] for r in rs])} - "
                  f"{med([r['detected_last_ms'] for r in rs])} ms | "
                  f"{med([r['reentered_last_ms'] for r in rs if r['reentered_last_ms']])} ms |")
        else:
            print(f"| {fault} | stuck-rank comparison | {med([r['named_ms'] for r in rs])} ms "
                  f"(the rank learns it: {med([r['learnt_ms'] for r in rs if r['learnt_ms']])} ms)"
                  f" | - | - (a report; {sum(r['false_names'] for r in rs)} other names) |")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"machine": platform.node(), "cpus": os.cpu_count(), "rows": rows}, f,
                      indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
