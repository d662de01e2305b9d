"""Faults under real NCCL: 4 ranks on the one GPU, each its own NCCL host,
all traffic through libnccl-net-resilient.so, a loop of 1 MiB all-reduces;
then one rank is SIGKILLed, SIGSTOPped, or has a stall or an error injected
(NCCL_RESILIENT_FAULT). Each survivor polls ncclCommGetAsyncError while its
all-reduce runs and, on an error, reads ncclGetLastError and times
ncclCommAbort.

A case passes when every survivor gets an error within the case's bound (the
documented detection bound plus SURFACE_ALLOWANCE_S for NCCL's proxy thread to
hand the error to the communicator), the WARN names the culprit's pid, and
ncclCommAbort returns within 1 s. A survivor whose NCCL reports nothing while
our blackbox holds the fault proves that this NCCL drops a plugin's test()
error: the report says so in capitals (the restart library's blackbox watch is
then the fallback that still sees the fault).

Launcher: `python3 faults.py --case NAME --kit DIR --env-json FILE --out DIR`
Worker:   `python3 faults.py --worker ...` (started by the launcher)
"""

import argparse
import json
import os
import re
import secrets
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kit as kitlib  # noqa: E402

NRANKS = 4
COUNT = 256 * 1024  # floats: 1 MiB
SURFACE_ALLOWANCE_S = 1.0
ABORT_BOUND_S = 1.0
LIVENESS_TIMEOUT_MS = 1000  # the default
PROGRESS_TIMEOUT_MS = 3000
INJECT_AFTER = 400  # the culprit's 401st isend on each comm

# name: (culprit rank, signal or None, NCCL_RESILIENT_FAULT for the culprit, documented bound in s)
CASES = {
    "sigkill": (2, signal.SIGKILL, None, 0.0),
    "sigstop": (2, signal.SIGSTOP, None, LIVENESS_TIMEOUT_MS / 1000),
    "stall": (1, None, f"kind=stall,op=isend,after={INJECT_AFTER}", PROGRESS_TIMEOUT_MS / 1000),
    # error=system: the inner transport fails on the culprit's side (a remote
    # error would make its peer the culprit, by definition).
    "error": (1, None, f"kind=error,op=isend,after={INJECT_AFTER},error=system", 0.0),
}


def worker(a):
    import torch  # noqa: F401 (the GPU machine's python3 has it)
    import nccl_ctypes

    pids = kitlib.exchange(a.run_dir, "pid", a.rank, os.getpid(), a.nranks, time.monotonic() + 60)
    nccl, comm = nccl_ctypes.join_communicator(a.nccl_lib, a.run_dir, a.rank, a.nranks)
    x = torch.ones(COUNT, device="cuda")
    y = torch.empty(COUNT, device="cuda")
    stream = torch.cuda.current_stream()
    result = {"rank": a.rank, "pid": os.getpid(), "pids": pids, "iterations": 0, "hung": False,
              "error_mono": None, "error_code": None, "last_error": "", "abort_s": None}
    last_ok = time.monotonic()
    stop_at = time.monotonic() + a.max_seconds
    error = None
    while error is None and time.monotonic() < stop_at:
        try:
            nccl.all_reduce(comm, x.data_ptr(), y.data_ptr(), COUNT, stream.cuda_stream)
        except nccl_ctypes.NcclError as e:
            error = e.code
            break
        while not stream.query():
            code = nccl.async_error(comm)
            if code not in (nccl_ctypes.SUCCESS, nccl_ctypes.IN_PROGRESS):
                error = code
                break
            if time.monotonic() - last_ok > a.stall_limit:
                result["hung"] = True
                break
            time.sleep(0.0002)
        if error is not None or result["hung"]:
            break
        if result["iterations"] == 0 and float(y[0].item()) != float(a.nranks):
            result["wrong_value"] = float(y[0].item())
        result["iterations"] += 1
        last_ok = time.monotonic()
        if result["iterations"] == a.warmup:
            kitlib.worker_ready(a.result)
    result["last_ok_mono"] = last_ok
    if error is not None:
        result["error_mono"] = time.monotonic()
        result["error_code"] = nccl_ctypes.RESULT_NAMES.get(error, error)
    result["last_error"] = nccl.last_error(comm)
    if result["hung"]:
        # Did our plugin see a fault that NCCL did not pass on?
        p = subprocess.run([a.inspect, "--json", "--dir", os.environ["NCCL_RESILIENT_BLACKBOX_DIR"],
                            str(os.getpid())], capture_output=True, text=True, timeout=10)
        try:
            faults = json.loads(p.stdout).get("faults", [])
        except ValueError:
            faults = []
        result["blackbox_faults"] = [f.get("text", "") for f in faults]
    t0 = time.monotonic()
    result["abort_code"] = nccl.abort(comm)
    result["abort_s"] = time.monotonic() - t0
    kitlib.worker_result(a.result, result)
    kitlib.worker_exit(0)


def judge(case, results, pids, t_fault):
    """One row per survivor and the case's verdict."""
    culprit, sig, spec, documented = CASES[case]
    bound = documented + SURFACE_ALLOWANCE_S
    rows, problems = [], []
    culprit_pid = pids.get(culprit)
    for rank in sorted(results):
        if sig is not None and rank == culprit:
            continue
        r = results[rank]
        if r is None:
            problems.append(f"rank {rank} reported nothing")
            rows.append({"rank": rank, "verdict": "no report"})
            continue
        row = {"rank": rank, "iterations": r["iterations"], "error": r["error_code"],
               "abort_ms": None if r["abort_s"] is None else round(r["abort_s"] * 1000, 1)}
        if r["error_mono"] is None:
            row["detect_ms"] = None
            if r.get("blackbox_faults"):
                problems.append(f"rank {rank}: NCCL DID NOT PROPAGATE THE PLUGIN'S ERROR: our blackbox "
                                f"holds '{r['blackbox_faults'][0][:160]}' but ncclCommGetAsyncError "
                                "stayed ncclSuccess (fallback: the restart library's blackbox watch)")
            else:
                problems.append(f"rank {rank}: no error within {r.get('stall_limit', '?')} s of its last "
                                "completed all-reduce")
        else:
            detect = r["error_mono"] - t_fault if t_fault is not None else None
            row["detect_ms"] = None if detect is None else round(detect * 1000, 1)
            if detect is not None and detect > bound:
                problems.append(f"rank {rank}: error after {detect * 1000:.0f} ms, bound {bound * 1000:.0f} ms")
        row["warn"] = r["last_error"][:300]
        if rank != culprit and culprit_pid is not None and r["error_mono"] is not None:
            named = re.search(rf"\bpid {culprit_pid}\b", r["last_error"]) is not None
            row["names_culprit"] = named
            # A stall stops every connection of the ring within one watchdog
            # tick: each rank's progress timeout expires before any notice
            # arrives, and each names the peer it waits for. Only the rank
            # that receives from the culprit must name it (docs/gpu-validation.md).
            must_name = case != "stall" or rank == (culprit + 1) % NRANKS
            if not named and must_name:
                problems.append(f"rank {rank}: the WARN does not name pid {culprit_pid}: {r['last_error'][:200]!r}")
        if r["abort_s"] is not None and r["abort_s"] > ABORT_BOUND_S:
            problems.append(f"rank {rank}: ncclCommAbort took {r['abort_s']:.2f} s")
        if r.get("wrong_value") is not None:
            problems.append(f"rank {rank}: the first all-reduce gave {r['wrong_value']}, not {NRANKS}")
        rows.append(row)
    return rows, problems, bound


def launch(a):
    culprit, sig, spec, documented = CASES[a.case]
    k = kitlib.Kit(a.kit)
    with open(a.env_json) as f:
        envinfo = json.load(f)
    run_dir = tempfile.mkdtemp(prefix=f"faults-{a.case}-", dir=a.out)
    bb_dir = tempfile.mkdtemp(prefix="resilient-gpukit-bb-", dir="/dev/shm")
    base = kitlib.nccl_environment(os.environ, kit=k, log_dir=run_dir)
    base.update({
        "NCCL_RESILIENT_JOB_TOKEN": secrets.token_hex(16),
        "NCCL_RESILIENT_BLACKBOX_DIR": bb_dir,
        "NCCL_RESILIENT_LIVENESS_TIMEOUT_MS": str(LIVENESS_TIMEOUT_MS),
        "NCCL_RESILIENT_PROGRESS_TIMEOUT_MS": str(PROGRESS_TIMEOUT_MS),
        "PYTHONUNBUFFERED": "1",
    })
    stall_limit = documented + SURFACE_ALLOWANCE_S + 8
    argv = [sys.executable, os.path.abspath(__file__), "--worker", "--nranks", str(NRANKS),
            "--run-dir", run_dir, "--nccl-lib", envinfo["nccl_library"], "--inspect", k.path("inspect"),
            "--stall-limit", str(stall_limit), "--max-seconds", str(a.max_seconds), "--warmup", "20"]
    with kitlib.Ranks(run_dir) as ranks:
        for r in range(NRANKS):
            env = kitlib.rank_environment(base, r)
            if spec is not None and r == culprit:
                env["NCCL_RESILIENT_FAULT"] = spec
            ranks.start(r, argv + ["--rank", str(r)], env, "worker")
        deadline = time.monotonic() + a.max_seconds
        t_fault = None
        if sig is not None:
            if not ranks.wait_ready(time.monotonic() + 60):
                return {"ok": False, "problems": ["the ranks did not complete 20 all-reduces"],
                        "exit_codes": ranks.exit_codes(), "run_dir": run_dir}
            victim = ranks.procs[culprit][1]
            t_fault = time.monotonic()
            os.kill(victim.pid, sig)
        survivors = [r for r in range(NRANKS) if sig is None or r != culprit]
        results = ranks.wait_results(deadline + stall_limit + 5, survivors)
    pids = {}
    for r in results.values():
        if r is not None:
            pids = {int(i): p for i, p in enumerate(r["pids"])}
            break
    if sig is None:
        culprit_result = results.get(culprit)
        if culprit_result is not None:
            t_fault = culprit_result["last_ok_mono"]  # the stall or error began after it
    for r in results.values():
        if r is not None:
            r["stall_limit"] = stall_limit
    rows, problems, bound = judge(a.case, results, pids, t_fault)
    return {"ok": not problems, "case": a.case, "culprit": culprit, "culprit_pid": pids.get(culprit),
            "bound_ms": round(bound * 1000), "documented_ms": round(documented * 1000),
            "rows": rows, "problems": problems, "run_dir": run_dir}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--worker", action="store_true")
    p.add_argument("--case", choices=sorted(CASES))
    p.add_argument("--kit")
    p.add_argument("--env-json")
    p.add_argument("--out")
    p.add_argument("--result")
    p.add_argument("--rank", type=int)
    p.add_argument("--nranks", type=int, default=NRANKS)
    p.add_argument("--run-dir")
    p.add_argument("--nccl-lib")
    p.add_argument("--inspect")
    p.add_argument("--stall-limit", type=float, default=10)
    p.add_argument("--max-seconds", type=float, default=20)
    p.add_argument("--warmup", type=int, default=20)
    a = p.parse_args()
    if a.worker:
        worker(a)
        return 0
    if not (a.case and a.kit and a.env_json and a.out):
        p.error("--case, --kit, --env-json and --out are needed")
    report = launch(a)
    print(json.dumps(report))
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
