"""Does PyTorch's NCCL watchdog kill the survivors of a dead rank? 4
torch.distributed NCCL ranks on the one GPU (each its own NCCL host, through
our plugin), a loop of 1 MiB all-reduces, rank 2 SIGKILLed mid-loop; twice,
at the same time, in two separate jobs:

  torch-defaults  no TORCH_NCCL_* variable set: torch's own defaults
                  (TORCH_NCCL_ASYNC_ERROR_HANDLING=3, "SkipCleanUp": tear
                  the process down without aborting NCCL; ProcessGroupNCCL's
                  constructor, `getCvarInt(TORCH_NCCL_ASYNC_ERROR_HANDLING,
                  3 /*SkipCleanUp*/)`);
  package         what the Python package applies before its
                  init_process_group (nccl_resilient.distributed's NCCL
                  environment, imported from the package, never copied).

Every survivor notes the error its all-reduce ended with (torch's work, or
ncclCommGetAsyncError on torch's communicator), then stays alive for
--window seconds doing nothing; a survivor still alive then aborts its
process group as the package's restart does (AbortTorchDistributed) and
reports. One that torch killed instead shows it in its exit status (SIGABRT
from std::terminate) and its output ("taking the entire process down",
ProcessGroupNCCL's WorkNCCL::handleException).

Why the window can be short: ProcessGroupNCCL::Watchdog::runLoop (PyTorch
torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp, 2.8 and later) sleeps
4 x TORCH_NCCL_WAIT_TIMEOUT_DUMP_MILSEC (15000 by default: a minute) between
seeing the error and work.handleException(asyncErrorHandling_), which
rethrows on the watchdog's thread when SHOULD_TEAR_DOWN (modes 1 and 3). Both
jobs here set it to DUMP_WAIT_MS, which shortens that sleep and decides
nothing (the package may set its own). The heartbeat monitor's end of the
process (TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC, 480 s by default, after a dump
signal: HeartbeatMonitor::runLoop) comes after any window and is not
observed here; the survivors end by aborting their process group the way the
package's restart does.

It passes when, with the package's settings, every survivor saw the error
and was alive at the end of the window. The defaults' outcome is recorded,
not judged (it shows what the package's settings prevent).

Launcher: `python3 torch_watchdog.py --kit DIR --env-json FILE --out DIR`
Worker:   `python3 torch_watchdog.py --worker ...` (started by the launcher)
"""

import datetime
import json
import os
import secrets
import signal
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
import kit as kitlib  # noqa: E402

NRANKS = 4
VICTIM = 2
COUNT = 256 * 1024  # floats: 1 MiB
WARMUP = 20
DUMP_WAIT_MS = 500
CONFIGS = ("torch-defaults", "package")
# What torch prints when its watchdog ends the process
# (ProcessGroupNCCL.cpp: WorkNCCL::handleException, Watchdog::run).
TORCH_KILL_MARKERS = ("taking the entire process down", "watchdog thread terminated with exception")


def package_environment():
    """Applies the Python package's NCCL settings to this process's
    environment, through the package itself (what its init_process_group
    does first: nccl_resilient.distributed.prepare_nccl_environment);
    returns what changed."""
    sys.path.insert(0, os.path.join(REPO, "python"))
    from nccl_resilient import distributed as rdist
    before = dict(os.environ)
    rdist.prepare_nccl_environment()
    return {k: v for k, v in os.environ.items() if before.get(k) != v}


def comm_handle(dist, torch):
    """torch's ncclComm_t of the default group (ProcessGroupNCCL's
    _comm_ptr, torch 2.x with an eager communicator), or 0."""
    try:
        pg = dist.distributed_c10d._get_default_group()
        return int(pg._get_backend(torch.device("cuda"))._comm_ptr())
    except Exception:
        return 0


def abort_like_the_package(seconds):
    """The package's abort hook (nccl_resilient.distributed.AbortTorchDistributed)
    on a thread, bounded: (what it did, ms) or an explanation."""
    try:
        sys.path.insert(0, os.path.join(REPO, "python"))
        from nccl_resilient import distributed as rdist
    except Exception as e:
        return {"error": f"cannot import nccl_resilient.distributed: {e}"}
    try:
        hook = rdist.AbortTorchDistributed(timeout=seconds)
    except TypeError:  # a package whose hook takes no bound
        hook = rdist.AbortTorchDistributed()
    failed = []

    def run():
        try:
            hook(None)
        except BaseException as e:  # reported in the result
            failed.append(f"{type(e).__name__}: {e}")

    t0 = time.monotonic()
    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(seconds + 1)
    if t.is_alive():
        return {"error": f"did not return within {seconds} s"}
    if failed:
        return {"error": failed[0][:300]}
    return {"did": {str(k): v for k, v in hook.last.items()}, "ms": round((time.monotonic() - t0) * 1000, 1)}


def worker(a):
    applied = package_environment() if a.config == "package" else {}
    import torch
    import torch.distributed as dist
    import nccl_ctypes
    survivor(a, torch, dist, nccl_ctypes.Nccl(a.nccl_lib), applied)
    kitlib.worker_exit(0)


def survivor(a, torch, dist, nccl, applied, abort=abort_like_the_package):
    """One rank: the loop until an error, then the window and the abort.
    Writes `<result>.error` when the error comes and `<result>` at the end
    (test_kit.py passes stand-ins for torch, dist and NCCL)."""
    import nccl_ctypes

    torch.cuda.set_device(0)
    store = dist.FileStore(os.path.join(a.run_dir, "store"), NRANKS)
    dist.init_process_group("nccl", store=store, rank=a.rank, world_size=NRANKS,
                            timeout=datetime.timedelta(seconds=60), device_id=torch.device("cuda", 0))
    handle = comm_handle(dist, torch)
    t = torch.ones(COUNT, device="cuda")
    out = {"rank": a.rank, "pid": os.getpid(), "config": a.config, "applied": applied,
           "torch": torch.__version__, "comm_handle": bool(handle),
           "torch_nccl_env": {k: v for k, v in os.environ.items() if k.startswith("TORCH_NCCL_")}}
    it = 0
    error = None
    deadline = a.deadline

    def nccl_error():
        if handle:
            code = nccl.async_error(handle)
            if code not in (nccl_ctypes.SUCCESS, nccl_ctypes.IN_PROGRESS):
                return f"ncclCommGetAsyncError: {nccl_ctypes.result_name(code)}"
        return None

    while error is None and time.monotonic() < deadline:
        t.fill_(1.0)
        work = dist.all_reduce(t, async_op=True)
        # is_completed() is also true once the work holds an exception
        # (WorkNCCL::isCompleted); wait() may then return without raising
        # (modes that do not tear down), and the GPU's part may never end:
        # nothing here blocks on the stream, an event is polled instead.
        while not work.is_completed() and error is None:
            error = nccl_error()
            if time.monotonic() > deadline:
                error = "no error and no completion before the deadline"
            time.sleep(0.0002)
        if error is not None:
            break
        try:
            work.wait()
        except Exception as e:
            error = f"{type(e).__name__}: {str(e)[:300]}"
            break
        done = torch.cuda.Event()
        done.record()
        while not done.query() and error is None:
            error = nccl_error()
            if error is None and time.monotonic() > deadline:
                error = "the all-reduce's stream never finished"
            time.sleep(0.0002)
        if error is not None:
            break
        if it == 0 and float(t[0].item()) != float(NRANKS):
            out["wrong_value"] = float(t[0].item())
        it += 1
        if it == WARMUP:
            kitlib.worker_ready(a.result)
    out["iterations"] = it
    out["error"] = error
    out["error_mono"] = time.monotonic()
    kitlib.worker_result(a.result + ".error", out)  # what is known if torch kills this process
    end = out["error_mono"] + a.window
    while time.monotonic() < end:
        time.sleep(0.05)
    out["alive_after_s"] = round(time.monotonic() - out["error_mono"], 2)
    out["abort"] = abort(5)
    kitlib.worker_result(a.result, out)


def scan_markers(text):
    low = text.lower()
    return [m for m in TORCH_KILL_MARKERS if m in low]


def judge_survivor(rank, code, error_report, final, log_text):
    """One survivor's row: what ended it (or that it lived)."""
    row = {"rank": rank, "exit": code, "markers": scan_markers(log_text)}
    if error_report is not None:
        row["error"] = error_report.get("error")
        if error_report.get("failed"):
            row["failed"] = error_report["failed"]
    if final is not None:
        row["outcome"] = "survived"
        row["alive_after_s"] = final.get("alive_after_s")
        row["abort"] = final.get("abort")
    elif code is not None and code < 0:
        name = signal.Signals(-code).name if -code in signal.Signals._value2member_map_ else str(-code)
        row["outcome"] = f"killed by torch ({name})" if row["markers"] else f"killed ({name})"
    elif code is None:
        row["outcome"] = "still running at the deadline"
    else:
        row["outcome"] = f"exited {code}"
    return row


def judge(config, rows):
    """(verdict, problems) of one job's survivors."""
    outcomes = {r["outcome"] for r in rows}
    if len(outcomes) == 1:
        verdict = outcomes.pop()
    else:
        verdict = "mixed: " + ", ".join(f"rank {r['rank']} {r['outcome']}" for r in rows)
    problems = []
    if config == "package":
        no_error = [r["rank"] for r in rows if not r.get("error")]
        if no_error:
            problems.append(f"{config}: ranks {no_error} never saw an error from their all-reduce"
                            + "".join(f" (rank {r['rank']}: {r['failed']})" for r in rows if r.get("failed")))
        dead = [f"rank {r['rank']}: {r['outcome']}" for r in rows if r["outcome"] != "survived"]
        if dead:
            problems.append("with the package's settings, survivors did not survive: " + "; ".join(dead))
    return verdict, problems


def launch(a):
    k = kitlib.Kit(a.kit)
    with open(a.env_json) as f:
        envinfo = json.load(f)
    t_end = time.monotonic() + a.max_seconds
    jobs = {}
    with kitlib.Ranks(tempfile.mkdtemp(prefix="torch-watchdog-", dir=a.out)) as ranks:
        for config in CONFIGS:
            run_dir = tempfile.mkdtemp(prefix=f"{config}-", dir=ranks.run_dir)
            bb_dir = tempfile.mkdtemp(prefix="resilient-gpukit-bb-", dir="/dev/shm")
            base = kitlib.nccl_environment(os.environ, kit=k, log_dir=run_dir)
            # torch's own defaults: nothing of ours or of the machine's
            for key in [key for key in base if key.startswith("TORCH_NCCL_") or key == "NCCL_ASYNC_ERROR_HANDLING"]:
                del base[key]
            base.update({"NCCL_RESILIENT_JOB_TOKEN": secrets.token_hex(16), "NCCL_RESILIENT_BLACKBOX_DIR": bb_dir,
                         "PYTHONUNBUFFERED": "1", "TORCH_NCCL_WAIT_TIMEOUT_DUMP_MILSEC": str(DUMP_WAIT_MS),
                         "TORCH_FR_DUMP_TEMP_FILE": os.path.join(run_dir, "fr-"),
                         "TORCH_NCCL_DEBUG_INFO_TEMP_FILE": os.path.join(run_dir, "fr-"),
                         "BUILD_DIR": k.build_dir})
            base["PYTHONPATH"] = os.pathsep.join([os.path.join(REPO, "python")]
                                                 + ([base["PYTHONPATH"]] if base.get("PYTHONPATH") else []))
            argv = [sys.executable, os.path.abspath(__file__), "--worker", "--config", config,
                    "--run-dir", run_dir, "--nccl-lib", envinfo["nccl_library"],
                    "--window", str(a.window), "--deadline", repr(t_end - 1)]
            procs = {}
            for r in range(NRANKS):
                env = kitlib.rank_environment(base, r, host_prefix=config)
                procs[r] = ranks.start(r, argv + ["--rank", str(r)], env, config)
            jobs[config] = {"run_dir": run_dir, "procs": procs}
        kills = {}
        pending = list(CONFIGS)
        while pending and time.monotonic() < t_end:
            for config in list(pending):
                job = jobs[config]
                ready = [os.path.join(ranks.run_dir, f"{config}-rank{r}.json.ready") for r in range(NRANKS)]
                if all(os.path.exists(p) for p in ready):
                    kills[config] = time.monotonic()
                    os.kill(job["procs"][VICTIM].pid, signal.SIGKILL)
                    pending.remove(config)
                elif any(p.poll() is not None for p in job["procs"].values()):
                    pending.remove(config)
            time.sleep(0.02)
        survivors = [r for r in range(NRANKS) if r != VICTIM]
        last = max(kills.values(), default=time.monotonic()) + a.window + 8
        while time.monotonic() < min(t_end, last):
            if all(jobs[c]["procs"][r].poll() is not None for c in kills for r in survivors):
                break
            time.sleep(0.05)
        codes = {c: {r: jobs[c]["procs"][r].poll() for r in range(NRANKS)} for c in CONFIGS}
    report = {"ok": True, "problems": [], "window_s": a.window, "dump_wait_ms": DUMP_WAIT_MS, "jobs": {}}
    for config in CONFIGS:
        if config not in kills:
            report["problems"].append(f"{config}: the ranks did not complete {WARMUP} all-reduces "
                                      f"(exit codes {codes[config]}; logs in {jobs[config]['run_dir']})")
            continue
        rows = []
        for r in survivors:
            base = os.path.join(ranks.run_dir, f"{config}-rank{r}")
            with open(base + ".log", errors="replace") as f:
                log_text = f.read()
            err = kitlib.read_json(base + ".json.error")
            final = kitlib.read_json(base + ".json")
            row = judge_survivor(r, codes[config][r], err, final, log_text)
            if err is not None and err.get("error_mono") is not None:
                row["error_ms"] = round((err["error_mono"] - kills[config]) * 1000, 1)
            rows.append(row)
        verdict, problems = judge(config, rows)
        applied = next((x.get("applied") for x in (kitlib.read_json(os.path.join(ranks.run_dir, f"{config}-rank{r}.json.error"))
                                                   for r in survivors) if x), None)
        report["jobs"][config] = {"verdict": verdict, "survivors": rows, "applied": applied,
                                  "run_dir": jobs[config]["run_dir"]}
        report["problems"] += problems
    report["ok"] = not report["problems"]
    report["table"] = table(report)
    return report


def table(report):
    lines = [f"Rank {VICTIM} of {NRANKS} SIGKILLed mid all-reduce; each survivor then waits {report['window_s']} s "
             f"(TORCH_NCCL_WAIT_TIMEOUT_DUMP_MILSEC={report['dump_wait_ms']} in both jobs).", "",
             "| settings | rank | error seen (ms after the kill) | outcome | exit | torch's words | abort of the group |",
             "|---|---:|---|---|---:|---|---|"]
    for config, job in report["jobs"].items():
        for r in job["survivors"]:
            abort = r.get("abort") or {}
            lines.append(f"| {config} | {r['rank']} | {(r.get('error') or '-')[:80]} ({r.get('error_ms', '-')}) | "
                         f"{r['outcome']} | {r['exit']} | {', '.join(r['markers']) or '-'} | "
                         f"{abort.get('error') or (str(abort.get('ms')) + ' ms' if abort else '-')} |")
    for config, job in report["jobs"].items():
        lines.append("")
        lines.append(f"{config}: {job['verdict']}; variables the package applied: "
                     + (", ".join(f"{k}={v}" for k, v in sorted((job.get('applied') or {}).items())) or "none"))
    return "\n".join(lines)


def parser():
    p = kitlib.step_parser(__doc__.split("\n")[0], 30)
    p.add_argument("--config", choices=CONFIGS)
    p.add_argument("--window", type=float, default=6)
    return p


def main():
    return kitlib.launcher_or_worker(parser(), worker, launch, lambda a, text: kitlib.worker_result(
        a.result + ".error", {"rank": a.rank, "error": None, "failed": text}))


if __name__ == "__main__":
    sys.exit(main())
