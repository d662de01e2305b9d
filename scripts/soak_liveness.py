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

Prints a summary and, with --json FILE, every job. Exit status: 0 no false
alarm and every stop detected; 1 otherwise; 2 bad usage.

usage: soak_liveness.py [--build DIR] [--minutes M] [--hogs N] [--timeout-ms T]
                        [--stop-every K] [--json FILE]
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


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--minutes", type=float, default=30)
    ap.add_argument("--hogs", type=int, default=8, help="CPU-bound processes (0: a quiet machine)")
    ap.add_argument("--timeout-ms", type=int, default=None,
                    help="NCCL_RESILIENT_LIVENESS_TIMEOUT_MS (default: the plugin's default)")
    ap.add_argument("--stop-every", type=int, default=5, help="every K-th job is a SIGSTOP (0: none)")
    ap.add_argument("--json")
    a = ap.parse_args()
    nettest = os.path.join(a.build, "tools", "nettest", "resilient-nettest")
    plugin = os.path.join(a.build, "plugin", "net", "abi", "libnccl-net-resilient.so")
    for path in (nettest, plugin):
        if not os.path.exists(path):
            sys.exit(f"soak_liveness: {path} is missing (build first)")
    env = dict(os.environ, NCCL_RESILIENT_SOCKET_IFNAME="lo")
    if a.timeout_ms is not None:
        env["NCCL_RESILIENT_LIVENESS_TIMEOUT_MS"] = str(a.timeout_ms)
    timeout_text = f"{a.timeout_ms} ms" if a.timeout_ms is not None else "the default"
    print(f"soak: {a.minutes:g} min, {a.hogs} CPU hogs on {os.cpu_count()} CPUs, liveness timeout "
          f"{timeout_text}, a SIGSTOP every {a.stop_every} jobs", flush=True)
    hogs = start_hogs(a.hogs)
    jobs = []
    deadline = time.monotonic() + a.minutes * 60
    try:
        n = 0
        while time.monotonic() < deadline:
            n += 1
            if a.stop_every and n % a.stop_every == 0:
                job = stop_job(nettest, plugin, env, limit_s=120)
            else:
                job = clean_job(nettest, plugin, env, "allreduce" if n % 2 else "pingpong", limit_s=600)
            job["n"] = n
            job["load"] = os.getloadavg()[0]
            jobs.append(job)
            if job["kind"] == "clean" and (job["alarm"] or job["rc"] != 0):
                print(f"job {n}: FALSE ALARM or failure (rc {job['rc']}): {job['alarm'] or job['tail']}",
                      flush=True)
            elif job["kind"] == "stop" and not job["detected"]:
                print(f"job {n}: SIGSTOP NOT DETECTED: {job['why']}", flush=True)
    finally:
        stop_hogs(hogs)
    clean = [j for j in jobs if j["kind"] == "clean"]
    alarms = [j for j in clean if j["alarm"] or j["rc"] != 0]
    stops = [j for j in jobs if j["kind"] == "stop"]
    detected = [j["ms"] for j in stops if j["detected"]]
    loads = [j["load"] for j in jobs]
    summary = {
        "minutes": a.minutes, "hogs": a.hogs, "timeout_ms": a.timeout_ms,
        "clean_jobs": len(clean), "false_alarms": len(alarms),
        "stop_jobs": len(stops), "stops_detected": len(detected),
        "detect_ms_median": round(statistics.median(detected), 1) if detected else None,
        "detect_ms_min": round(min(detected), 1) if detected else None,
        "detect_ms_max": round(max(detected), 1) if detected else None,
        "load_median": round(statistics.median(loads), 1) if loads else None,
    }
    print(json.dumps(summary))
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"summary": summary, "jobs": jobs}, f, indent=1)
    sys.exit(0 if not alarms and len(detected) == len(stops) else 1)


if __name__ == "__main__":
    main()
