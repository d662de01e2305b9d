#!/usr/bin/env python3
"""Liveness soak: false alarms and detection times of the resilient plugin
under CPU oversubscription (issue 18, finding 3).

For --minutes, runs resilient-nettest jobs back to back through the plugin
(4 ranks on loopback, ring all-reduce and pingpong, 8 B to 4 MiB) with
NCCL_RESILIENT_LIVENESS_TIMEOUT_MS set to --timeout-ms, while --hogs
processes spin on the CPUs. Nothing is injected into those jobs: any fault
the plugin reports in them is a false alarm. Every --stop-every-th job
instead SIGSTOPs rank 2 in a 1 MiB all-reduce loop and records how long its
receiving neighbour took to report it (the detection time under the same
load; it must be the timeout plus at most a tick or two).

Every --torch-every-th job is instead the torch demo's job
(examples/pytorch/train.py over gloo, 8 ranks with 2 spares, through
scripts/demo.py's runner) at the library's default timeouts, where no byte
crosses the net plugin: its monitors' liveness links, the pidfds and the
stuck-rank comparison watch it. A fault record in a clean one is a false
alarm, a stuck-rank report in any is a false name (none is stuck); the
torch jobs among the SIGSTOP ones stop active rank 2 after its step 30 and
record how long the survivors took to detect it (the liveness link:
NCCL_RESILIENT_LIVENESS_TIMEOUT_MS plus a ping interval).

Prints a summary and, with --json FILE, every job. Exit status: 0 no false
alarm, no false name and every stop detected; 1 otherwise; 2 bad usage.

usage: soak_liveness.py [--build DIR] [--minutes M] [--hogs N] [--timeout-ms T]
                        [--stop-every K] [--torch-every K] [--json FILE]
"""
import argparse
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time

HOG = "while True:\n    pass\n"
WARN = re.compile(r"NET/Resilient: (peer unresponsive|peer stuck|peer process exited|peer closed|"
                  r"link down|transport error)[^\n]*")


def start_hogs(n):
    return [subprocess.Popen([sys.executable, "-c", HOG], stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL, start_new_session=True) for _ in range(n)]


def stop_hogs(hogs):
    for h in hogs:
        try:
            os.killpg(h.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        h.wait()


def clean_job(nettest, plugin, env, pattern, limit_s):
    """A job with nothing injected: {'ok', 'seconds', 'alarm'} (alarm: the
    plugin's first fault WARN, if any)."""
    cmd = [nettest, "--plugin", plugin, "--ranks", "4" if pattern == "allreduce" else "2",
           "--pattern", pattern, "-b", "8", "-e", "4M", "-f", "4", "-n", "20", "-w", "2",
           "--timeout", "60"]
    t0 = time.monotonic()
    try:
        p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=limit_s)
        out, rc = p.stdout + p.stderr, p.returncode
    except subprocess.TimeoutExpired as e:
        out, rc = (e.stdout or b"").decode(errors="replace"), "timeout"
    m = WARN.search(out)
    return {"kind": "clean", "pattern": pattern, "rc": rc, "seconds": round(time.monotonic() - t0, 2),
            "alarm": m.group(0)[:400] if m else None,
            "tail": None if rc == 0 else out[-1500:]}


def stop_job(nettest, plugin, env, limit_s, victim=2, ranks=4):
    """Rank `victim` SIGSTOPped 500 ms into a 1 MiB all-reduce loop: the
    receiving neighbour's detection time and whether it blamed the victim."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "r.json")
        cmd = [nettest, "--plugin", plugin, "--ranks", str(ranks), "--pattern", "allreduce",
               "-b", "1M", "-e", "1M", "-n", "100000", "-w", "1", "--stop", f"{victim}@500",
               "--timeout", "30", "--json", out]
        try:
            p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=limit_s)
        except subprocess.TimeoutExpired:
            return {"kind": "stop", "detected": False, "why": "hang"}
        if not os.path.exists(out):
            return {"kind": "stop", "detected": False, "why": f"exit {p.returncode}: {p.stdout[-800:]}"}
        faults = json.load(open(out))["faults"]
    reader = next((f for f in faults if f["rank"] == (victim + 1) % ranks), None)
    if reader is None or reader.get("outcome") != "detected":
        return {"kind": "stop", "detected": False, "why": str(reader)[:400]}
    return {"kind": "stop", "detected": True, "ms": reader["since_injection_ms"],
            "blamed": reader.get("peer"), "warning": reader.get("plugin_warning", "")[:300]}


def torch_job(runner, n, stop):
    """The torch demo's job, clean or with active rank 2 SIGSTOPped after its
    step 30: false alarms (fault records of a clean job, or about another
    rank), false names (stuck-rank reports), the survivors' detection."""
    demo, args, procs, store, url, env = runner
    name = f"soak-{n}"
    faults = [{"name": "freeze", "signal": signal.SIGSTOP, "rank": 2, "iteration": 0,
               "step": 30}] if stop else []
    t0 = time.monotonic()
    try:
        job = demo.run_job(args, name, procs, url, env, faults)
    except demo.DemoFailure as e:
        return {"kind": "torch-stop" if stop else "torch-clean", "rc": "failed",
                "alarm": str(e)[:400], "false_names": 0, "detected": False, "why": str(e)[:400]}
    records = []
    count = store.get(f"resilient/{name}/faults/count")
    for i in range(1, int(count or 0) + 1):
        v = store.get(f"resilient/{name}/faults/{i}")
        if v:
            records.append(json.loads(v))
    names = 0
    count = store.get(f"resilient/{name}/health/reports")
    for i in range(1, int(count or 0) + 1):
        v = store.get(f"resilient/{name}/health/report/{i}")
        if v and json.loads(v).get("kind") == "stuck rank":
            names += 1
    wrong = [r for r in records if not stop or r.get("culprit") not in (2, -1)]
    problems = demo.check_endings(job)
    out = {"kind": "torch-stop" if stop else "torch-clean", "seconds": round(time.monotonic() - t0, 2),
           "rc": 0 if not problems else "; ".join(problems)[:400],
           "alarm": json.dumps(wrong[0])[:400] if wrong else None, "false_names": names}
    if stop:
        at = job["faults"][0]["at_ns"]
        seen = [e["mono_ns"] - at for r, rep in job["reports"].items() if r != 2
                for e in rep.get("timeline", []) if e["phase"] == "fault detected"
                and e["iteration"] == 0]
        out["detected"] = bool(seen) and any(r.get("culprit") == 2 for r in records)
        out["ms"] = round(min(seen) / 1e6, 1) if seen else None
        out["why"] = None if out["detected"] else f"records {records}"[:400]
    return out


def torch_runner(build, run_dir, env):
    """What torch_job needs (scripts/demo.py's runner and a store), or None
    without Debian's torch."""
    probe = subprocess.run(["/usr/bin/python3", "-c", "import torch.distributed"],
                           capture_output=True)
    if probe.returncode != 0:
        return None
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path.insert(0, here)
    sys.path.insert(0, os.path.join(os.path.dirname(here), "python"))
    import demo
    import nccl_resilient
    args = argparse.Namespace(build=os.path.abspath(build), python="/usr/bin/python3",
                              pytorch=True, nccl=False, steps=60, checkpoint_every=20,
                              step_ms=20, job_timeout=900)
    blackbox_dir = tempfile.mkdtemp(prefix="resilient-soak-bb-", dir="/dev/shm")
    procs = demo.Processes(run_dir, blackbox_dir)
    env = dict(env, NCCL_RESILIENT_BLACKBOX_DIR=blackbox_dir, BUILD_DIR=args.build,
               PYTHONPATH=os.path.join(os.path.dirname(here), "python"))
    os.environ["BUILD_DIR"] = args.build
    _, url = demo.start_store(procs, os.path.join(args.build, "tools", "store",
                                                  "resilient-store"), run_dir, env)
    return demo, args, procs, nccl_resilient.Store(url), url, env


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--minutes", type=float, default=30)
    ap.add_argument("--hogs", type=int, default=8, help="CPU-bound processes (0: a quiet machine)")
    ap.add_argument("--timeout-ms", type=int, default=None,
                    help="NCCL_RESILIENT_LIVENESS_TIMEOUT_MS (default: the plugin's default)")
    ap.add_argument("--stop-every", type=int, default=5, help="every K-th job is a SIGSTOP (0: none)")
    ap.add_argument("--torch-every", type=int, default=3,
                    help="every K-th job is the torch demo's job (0: none)")
    ap.add_argument("--json")
    a = ap.parse_args()
    nettest = os.path.join(a.build, "tools", "nettest", "resilient-nettest")
    plugin = os.path.join(a.build, "plugin", "net", "abi", "libnccl-net-resilient.so")
    for path in (nettest, plugin):
        if not os.path.exists(path):
            sys.exit(f"soak_liveness: {path} is missing (build first)")
    import secrets
    os.environ.setdefault("NCCL_RESILIENT_JOB_TOKEN", secrets.token_hex(16))
    env = dict(os.environ, NCCL_RESILIENT_SOCKET_IFNAME="lo")
    if a.timeout_ms is not None:
        env["NCCL_RESILIENT_LIVENESS_TIMEOUT_MS"] = str(a.timeout_ms)
    timeout_text = f"{a.timeout_ms} ms" if a.timeout_ms is not None else "the default"
    print(f"soak: {a.minutes:g} min, {a.hogs} CPU hogs on {os.cpu_count()} CPUs, liveness timeout "
          f"{timeout_text}, a SIGSTOP every {a.stop_every} jobs", flush=True)
    runner = None
    if a.torch_every:
        runner = torch_runner(a.build, tempfile.mkdtemp(prefix="resilient-soak-"), env)
        print("torch jobs: " + ("every %d-th job" % a.torch_every if runner else
                                "none (/usr/bin/python3 cannot import torch)"), flush=True)
    hogs = start_hogs(a.hogs)
    jobs = []
    deadline = time.monotonic() + a.minutes * 60
    try:
        n = 0
        while time.monotonic() < deadline:
            n += 1
            torch = runner is not None and n % a.torch_every == 0
            if torch:
                job = torch_job(runner, n, stop=bool(a.stop_every) and (n // a.torch_every) % 2 == 0)
            elif a.stop_every and n % a.stop_every == 0:
                job = stop_job(nettest, plugin, env, limit_s=120)
            else:
                job = clean_job(nettest, plugin, env, "allreduce" if n % 2 else "pingpong", limit_s=600)
            job["n"] = n
            job["load"] = os.getloadavg()[0]
            jobs.append(job)
            if job["kind"] in ("clean", "torch-clean") and (job["alarm"] or job["rc"] != 0):
                print(f"job {n} ({job['kind']}): FALSE ALARM or failure (rc {job['rc']}): "
                      f"{job['alarm'] or job.get('tail')}", flush=True)
            elif job["kind"] in ("stop", "torch-stop") and not job["detected"]:
                print(f"job {n} ({job['kind']}): SIGSTOP NOT DETECTED: {job['why']}", flush=True)
            if job.get("false_names"):
                print(f"job {n} ({job['kind']}): {job['false_names']} FALSE stuck-rank names",
                      flush=True)
            print(f"job {n}: {job['kind']} " + ("ok" if not job.get("alarm") else "ALARM")
                  + (f", detected in {job['ms']} ms" if job.get("ms") is not None else ""),
                  flush=True)
    finally:
        stop_hogs(hogs)
        if runner is not None:
            runner[2].stop_all()
    clean = [j for j in jobs if j["kind"] in ("clean", "torch-clean")]
    alarms = [j for j in clean if j["alarm"] or j["rc"] != 0]
    alarms += [j for j in jobs if j["kind"] == "torch-stop" and j.get("alarm")]
    false_names = sum(j.get("false_names", 0) for j in jobs)
    stops = [j for j in jobs if j["kind"] in ("stop", "torch-stop")]
    detected = [j["ms"] for j in stops if j["detected"]]
    torch_detected = [j["ms"] for j in stops if j["kind"] == "torch-stop" and j["detected"]]
    loads = [j["load"] for j in jobs]
    summary = {
        "minutes": a.minutes, "hogs": a.hogs, "timeout_ms": a.timeout_ms,
        "clean_jobs": len(clean), "false_alarms": len(alarms),
        "stop_jobs": len(stops), "stops_detected": len(detected),
        "detect_ms_median": round(statistics.median(detected), 1) if detected else None,
        "detect_ms_min": round(min(detected), 1) if detected else None,
        "detect_ms_max": round(max(detected), 1) if detected else None,
        "load_median": round(statistics.median(loads), 1) if loads else None,
        "torch_jobs": len([j for j in jobs if j["kind"].startswith("torch")]),
        "torch_stops_detected": len(torch_detected),
        "torch_detect_ms_median": round(statistics.median(torch_detected), 1) if torch_detected else None,
        "torch_detect_ms_max": round(max(torch_detected), 1) if torch_detected else None,
        "false_stuck_names": false_names,
    }
    print(json.dumps(summary))
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"summary": summary, "jobs": jobs}, f, indent=1)
    sys.exit(0 if not alarms and not false_names and len(detected) == len(stops) else 1)


if __name__ == "__main__":
    main()
