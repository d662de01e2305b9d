#!/usr/bin/env python3
"""Restart latency of the restart library after a rank crash, per phase.

N rank processes (resilient-restart-bench-rank, bench/restart/) run on a
standalone resilient-store on loopback, each a Wrapper around a loop of small
sum all-reduces on a HostCommunicator through libnccl-net-resilient.so
(NCCL_RESILIENT_SOCKET_IFNAME=lo), ping() each step, with a monitor process per
rank. Once every rank has done --ready-steps steps the driver SIGKILLs one rank
(never the store), reading CLOCK_MONOTONIC (time.monotonic_ns()) just before
the kill, the clock of the ranks' timelines (TimelineEvent::monoNs, "mono_ns" in the JSON). Each
survivor writes its timeline at exit; for each survivor the script takes the
time from the kill to:

  detected     "fault detected" (iteration 0): the interruption was raised
  abort done   "abort done" (the communicators aborted)
  barrier      "iteration barrier" left (every live rank arrived)
  reassigned   "reassigned" (culprits read, new World computed)
  comms ready  "communicators ready" (iteration 1: host communicator rebuilt)
  re-entered   "function entered" (iteration 1)

and reports, per trial, the median over the survivors (and the slowest
survivor's re-entry), then for each size the median over all survivors of all
trials. Prints a table and writes JSON (--json FILE).

The ranks run at the library's default settings (Options::fromEnvironment():
the defaults and any NCCL_RESILIENT_* in the environment) unless an interval
option is given: a run without options measures what a user gets. The script
first builds what it runs (ninja -C BUILD <targets>), so a fresh clone needs
only `meson setup` (the benchmark rank is not built by default).

A trial in which a survivor was killed by its own monitor (a liveness
timeout of a rank starved of CPU) is reported as lost, the others measured,
and the script exits with status 3.

usage: bench_restart.py [--build DIR] [--ranks 8 64] [--trials 5] [--json FILE]
                        [--monitor-thread-interval-ms MS] [...]
"""
import argparse
import json
import os
import platform
import signal
import statistics
import subprocess
import sys
import tempfile
import time

PHASES = [
    # (column, phase, iteration)
    ("detected", "fault detected", 0),
    ("abort done", "abort done", 0),
    ("barrier", "iteration barrier", 0),
    ("reassigned", "reassigned", 1),
    ("comms ready", "communicators ready", 1),
    ("re-entered", "function entered", 1),
]


def loadavg():
    with open("/proc/loadavg") as f:
        return [float(x) for x in f.read().split()[:3]]


def start_store(exe, tmp):
    log = open(os.path.join(tmp, "store.err"), "w")
    proc = subprocess.Popen([exe, "--listen", "127.0.0.1:0"], stdout=subprocess.PIPE,
                            stderr=log, text=True)
    line = proc.stdout.readline()
    # "resilient-store serving tcp://127.0.0.1:PORT (bound ..., token ...)"
    url = next((w for w in line.split() if w.startswith("tcp://")), None)
    if url is None:
        proc.kill()
        raise RuntimeError(f"resilient-store did not start: {line!r}")
    return proc, url


def kill_pidfiles(logdir):
    """Monitor processes the ranks started, by the pid files they wrote."""
    for name in os.listdir(logdir):
        if name.endswith(".pid"):
            try:
                pid = int(open(os.path.join(logdir, name)).read().split()[0])
                os.kill(pid, signal.SIGKILL)
            except (ValueError, IndexError, ProcessLookupError, PermissionError, OSError):
                pass


INTERVALS = ["monitor_thread_interval_ms", "monitor_process_interval_ms", "heartbeat_interval_ms",
             "heartbeat_timeout_ms", "progress_interval_ms"]

# What the benchmark runs (bench/restart/meson.build: the rank names the
# plugin and the monitor by their paths in the build).
TARGETS = ["bench/restart/resilient-restart-bench-rank", "tools/store/resilient-store",
           "restart/monitor/resilient-monitor", "plugin/net/abi/libnccl-net-resilient.so"]


def interval_args(args):
    """The interval options given; the others stay the library's defaults."""
    out = []
    for k in INTERVALS:
        v = getattr(args, k)
        if v is not None:
            out += ["--" + k.replace("_", "-"), str(v)]
    return out


def build(builddir):
    """Builds the benchmark's targets: a stale rank binary (built against an
    older Options) crashed rather than measured."""
    r = subprocess.run(["ninja", "-C", builddir] + TARGETS, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True)
    if r.returncode != 0:
        sys.stderr.write(r.stdout)
        raise SystemExit(f"building the benchmark failed (ninja -C {builddir} {' '.join(TARGETS)})")


class SurvivorLost(RuntimeError):
    """A survivor was killed by its own monitor during the trial: reported as a
    lost trial, the others still measured. On the 2-vCPU development VM, about
    1 trial in 15 at 64 ranks: the kernel's DAMON thread (kdamond), starved by
    128 busy processes, held a shared file's i_mmap lock for ~1 s, and a rank
    whose unmap waited for it answered no liveness heartbeat for 1 s."""


def trial(args, n, victim, index, keep):
    tmp = tempfile.mkdtemp(prefix=f"rbench-{n}-{index}-", dir=keep)
    ready = os.path.join(tmp, "ready")
    logdir = os.path.join(tmp, "log")
    os.makedirs(ready)
    os.makedirs(logdir)
    rank_exe = os.path.join(args.build, "bench", "restart", "resilient-restart-bench-rank")
    store_exe = os.path.join(args.build, "tools", "store", "resilient-store")
    env = dict(os.environ, NCCL_RESILIENT_SOCKET_IFNAME="lo")
    store, url = start_store(store_exe, tmp)
    procs = []
    try:
        for r in range(n):
            cmd = [rank_exe, "--store", url, "--job", f"bench{index}", "--rank", str(r),
                   "--world", str(n), "--out", os.path.join(tmp, f"rank{r}.json"),
                   "--ready-dir", ready, "--log-dir", logdir,
                   "--ready-steps", str(args.ready_steps), "--steps-after", str(args.steps_after),
                   "--count", str(args.count), "--compute-us", str(args.compute_us),
                   ] + interval_args(args)
            out = open(os.path.join(tmp, f"rank{r}.log"), "w")
            procs.append(subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT))
        deadline = time.monotonic() + args.start_timeout
        while len(os.listdir(ready)) < n:
            dead = [r for r, p in enumerate(procs) if p.poll() is not None]
            if dead:
                raise RuntimeError(f"rank {dead[0]} exited before the kill (see {tmp})")
            if time.monotonic() > deadline:
                raise RuntimeError(f"only {len(os.listdir(ready))} of {n} ranks ready after "
                                   f"{args.start_timeout} s (see {tmp})")
            time.sleep(0.01)
        load = loadavg()
        kill_ns = time.monotonic_ns()
        os.kill(procs[victim].pid, signal.SIGKILL)
        kill_done_ns = time.monotonic_ns()
        deadline = time.monotonic() + args.end_timeout
        for r, p in enumerate(procs):
            left = max(0.1, deadline - time.monotonic())
            try:
                p.wait(timeout=left)
            except subprocess.TimeoutExpired:
                raise RuntimeError(f"rank {r} still running {args.end_timeout} s after the kill "
                                   f"(see {tmp})")
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        store.terminate()
        store.wait()
        kill_pidfiles(logdir)

    ranks = []
    for r in range(n):
        if r == victim:
            continue
        report = os.path.join(tmp, f"rank{r}.json")
        if not os.path.exists(report):
            # Killed before it could write one: its monitor says why (on an
            # oversubscribed host, e.g. a liveness timeout of a starved rank).
            why = ""
            mlog = os.path.join(logdir, f"monitor-{r}.log")
            if os.path.exists(mlog):
                lines = [ln for ln in open(mlog).read().splitlines() if " ended " in ln
                         or "timeout" in ln]
                why = ": " + lines[-1] if lines else ""
            error = SurvivorLost if "killed by its monitor" in why else RuntimeError
            raise error(f"rank {r} wrote no report (exit status {procs[r].returncode})"
                        f"{why} (see {tmp})")
        tl = json.load(open(report))
        if not tl["ok"]:
            raise RuntimeError(f"rank {r} failed: {tl['error']} (see {tmp})")
        ms = {}
        for col, phase, it in PHASES:
            t = next((e["mono_ns"] for e in tl["timeline"]
                      if e["phase"] == phase and e["iteration"] == it), None)
            if t is None:
                raise RuntimeError(f"rank {r}: no '{phase}' in iteration {it} (see {tmp})")
            ms[col] = (t - kill_ns) / 1e6
        detected = next(e["detail"] for e in tl["timeline"] if e["phase"] == "fault detected")
        culprits = next(e["detail"] for e in tl["timeline"] if e["phase"] == "culprits")
        if culprits != f"ranks {victim}":
            raise RuntimeError(f"rank {r}: culprits '{culprits}', expected rank {victim} "
                               f"(see {tmp})")
        ranks.append({"rank": r, "ms": ms, "signal": detected, "culprits": culprits,
                      "steps": tl["steps"], "settings": tl.get("settings")})
    if not args.keep:
        subprocess.run(["rm", "-rf", tmp], check=False)
    return {"ranks": n, "trial": index, "victim": victim, "load": load,
            "kill_syscall_us": (kill_done_ns - kill_ns) / 1e3, "survivors": ranks,
            "dir": tmp if args.keep else None}


def first_signal(text):
    """How the rank first heard of the fault (the "fault detected" detail)."""
    if text.startswith("a fault was published"):
        return "store"
    if "exception" in text:
        return "own exception"
    return "own plugin"


def fmt(v):
    return f"{v:9.1f}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--ranks", type=int, nargs="+", default=[8, 64])
    ap.add_argument("--trials", type=int, default=5)
    ap.add_argument("--json")
    ap.add_argument("--keep", help="keep each trial's logs and timelines under this directory")
    ap.add_argument("--ready-steps", type=int, default=10)
    ap.add_argument("--steps-after", type=int, default=20)
    ap.add_argument("--count", type=int, default=1024, help="floats per all-reduce")
    ap.add_argument("--compute-us", type=int, default=0, help="sleep per step")
    for k in INTERVALS:
        ap.add_argument("--" + k.replace("_", "-"), type=int,
                        help="default: the library's (Options::fromEnvironment())")
    ap.add_argument("--no-build", action="store_true", help="run the binaries as they are")
    ap.add_argument("--start-timeout", type=float, default=180)
    ap.add_argument("--end-timeout", type=float, default=120)
    args = ap.parse_args()
    if args.keep:
        os.makedirs(args.keep, exist_ok=True)

    if not args.no_build:
        build(args.build)
    settings = {k: getattr(args, k) for k in
                ["count", "compute_us", "ready_steps", "steps_after"]}
    given = {k: getattr(args, k) for k in INTERVALS if getattr(args, k) is not None}
    settings["given"] = given
    settings["NCCL_RESILIENT_SOCKET_IFNAME"] = "lo"
    for k in sorted(os.environ):
        if k.startswith("NCCL_RESILIENT_") and k != "NCCL_RESILIENT_SOCKET_IFNAME":
            settings[k] = os.environ[k]
    try:
        commit = subprocess.run(["git", "-C", os.path.dirname(os.path.abspath(__file__)),
                                 "describe", "--always", "--dirty"], capture_output=True,
                                text=True).stdout.strip()
    except OSError:
        commit = "?"
    machine = {"kernel": platform.release(), "cpus": os.cpu_count(), "load_start": loadavg(),
               "commit": commit, "date": time.strftime("%Y-%m-%d %H:%M")}
    print(f"restart latency after SIGKILL of one rank; {platform.system()} {machine['kernel']}, "
          f"{machine['cpus']} cpus, load average "
          + " ".join(f"{x:.2f}" for x in machine["load_start"]) + f"; {commit}")
    print("settings: " + ("the library's defaults" if not given else "the library's defaults but "
                          + ", ".join(f"{k} {v}" for k, v in given.items()))
          + "; monitor process per rank; all-reduce of %d floats, compute sleep %d us per step"
          % (args.count, args.compute_us))
    extra = {k: v for k, v in settings.items() if k.startswith("NCCL_RESILIENT_")}
    print("environment: " + ", ".join(f"{k}={v}" for k, v in extra.items()))
    print("ms from the kill (CLOCK_MONOTONIC); per trial the median over the survivors")
    cols = [c for c, _, _ in PHASES]
    header = (f"{'ranks':>5} {'trial':>5} {'victim':>6} {'load1':>6} |"
              + "".join(f"{c:>12}" for c in cols) + f" | {'slowest':>8} | first signal")
    results = []
    summary = []
    lost = 0
    for n in args.ranks:
        print()
        print(header)
        trials = []
        for t in range(args.trials):
            victim = (n // 2 + 3 * t) % n
            try:
                res = trial(args, n, victim, t, args.keep)
            except SurvivorLost as e:
                lost += 1
                results.append({"ranks": n, "trial": t, "victim": victim, "lost": str(e)})
                print(f"{n:>5} {t:>5} {victim:>6} {'':>6} | not measured: {e}", flush=True)
                continue
            trials.append(res)
            meds = {c: statistics.median(s["ms"][c] for s in res["survivors"]) for c in cols}
            slowest = max(s["ms"]["re-entered"] for s in res["survivors"])
            signals = {}
            for s in res["survivors"]:
                k = first_signal(s["signal"])
                signals[k] = signals.get(k, 0) + 1
            res["median_ms"] = meds
            res["slowest_reentry_ms"] = slowest
            res["first_signals"] = signals
            if t == 0:
                used = res["survivors"][0]["settings"] or {}
                print("in effect: " + ", ".join(f"{k} {v}" for k, v in used.items()))
            print(f"{n:>5} {t:>5} {victim:>6} {res['load'][0]:>6.1f} |"
                  + "".join(f"{meds[c]:>12.1f}" for c in cols) + f" | {slowest:>8.1f} | "
                  + ", ".join(f"{k} {v}" for k, v in sorted(signals.items())), flush=True)
        if not trials:
            continue
        allsurv = [s for r in trials for s in r["survivors"]]
        med = {c: statistics.median(s["ms"][c] for s in allsurv) for c in cols}
        reentry = sorted(s["ms"]["re-entered"] for s in allsurv)
        p90 = reentry[min(len(reentry) - 1, int(0.9 * len(reentry)))]
        print(f"{n:>5} {'all':>5} {'':>6} {'':>6} |" + "".join(f"{med[c]:>12.1f}" for c in cols)
              + f" | {reentry[-1]:>8.1f} | median of {len(allsurv)} survivors x trials; "
              f"re-entry p90 {p90:.1f}")
        culprits = sorted({s["culprits"] for s in allsurv})
        print(f"      culprits named: {'; '.join(culprits)}")
        summary.append({"ranks": n, "samples": len(allsurv), "median_ms": med,
                        "reentry_p90_ms": p90, "reentry_max_ms": reentry[-1]})
        results.extend(trials)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"machine": machine, "settings": settings, "summary": summary,
                       "trials": results}, f, indent=1)
    if lost:
        print(f"{lost} trial(s) lost a survivor to its monitor (see above): exit status 3")
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(main())
