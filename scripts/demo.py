#!/usr/bin/env python3
"""The demo of a resilient multi-rank job (docs/demo.md).

Starts a `resilient-store` on loopback and two `resilient-run` agents (two
simulated nodes of 4 ranks), which run 8 ranks of `resilient-demo-train` (6
active + 2 spares, the host engine through libnccl-net-resilient.so) once
without faults as the reference, then again while it SIGKILLs one active rank
and later SIGSTOPs another; each broken process is replaced by its agent with a
new one that joins the running job as a spare, the others are never restarted.
Prints the timeline of each fault (measured: the injection on this script's
CLOCK_MONOTONIC, every other point from the ranks' Wrapper::timeline() on the
same clock), the replacements, and checks that the faulty run's final weights
are bitwise equal to the reference's.

With --nccl the communicator is NCCL's (ncclCommunicatorFactory) and the
all-reduce runs on GPU 0, which every rank shares: each rank gets its own
NCCL_HOSTID (resilient-run --rank-env), so that NCCL sees 8 one-GPU hosts and
all traffic goes through
NCCL_NET_PLUGIN=libnccl-net-resilient.so (docs/demo.md, "NCCL mode").

Exit status: 0 PASS; 1 FAIL (weights differ, a rank ended unexpectedly, a
timeout); 2 bad usage or missing binaries; 77 --nccl without a CUDA runtime or
device (skipped: nothing was started); 130 interrupted.
"""

import argparse
import hashlib
import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time

NODES = 2           # resilient-run agents
PER_NODE = 4        # ranks per agent
WORLD_SIZE = NODES * PER_NODE
ACTIVE = 6
AGENT_RE = re.compile(r"rank (\d+) \(local \d+\): (started,|replacement process.*:) pid (\d+)")
ENDED_RE = re.compile(r"pid (\d+) ended: (.*)$")
SKIPPED = 77
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TORCH_EXAMPLE = os.path.join(REPO, "examples", "pytorch", "train.py")
# The net plugin's name (plugin/net/abi/adapter.h): NCCL_NET makes NCCL use it or fail.
PLUGIN_NET_NAME = "Resilient"
STEP_RE = re.compile(r"^step iteration=(\d+) rank=(\d+) active=(\d+) step=(\d+) loss=(\S+) mono_ns=(\d+)$")


class DemoFailure(Exception):
    pass


def ms(ns):
    return ns / 1e6


class Processes:
    """Every process the demo starts, and how to stop them all."""

    def __init__(self, run_dir, blackbox_dir):
        self.run_dir = run_dir
        self.blackbox_dir = blackbox_dir
        self.popens = []

    def start(self, argv, log_path, env):
        log = open(log_path, "ab")
        try:
            p = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env,
                                 stdin=subprocess.DEVNULL, start_new_session=True)
        finally:
            log.close()
        self.popens.append(p)
        return p

    def leftovers(self):
        """Processes started by the ranks (the monitor daemons) that still run:
        every process whose command line names this run's directory."""
        found = []
        me = os.getpid()
        for entry in os.listdir("/proc"):
            if not entry.isdigit() or int(entry) == me:
                continue
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as f:
                    cmdline = f.read().replace(b"\0", b" ").decode(errors="replace")
                with open(f"/proc/{entry}/stat") as f:
                    state = f.read().rsplit(")", 1)[1].split()[0]
            except OSError:
                continue
            if self.run_dir in cmdline and state != "Z":
                found.append((int(entry), cmdline.strip()))
        return found

    def monitor_pids(self):
        pids = []
        for name in sorted(os.listdir(self.run_dir)):
            job_dir = os.path.join(self.run_dir, name)
            if not os.path.isdir(job_dir):
                continue
            for f in os.listdir(job_dir):
                if f.startswith("monitor-") and f.endswith(".pid"):
                    try:
                        pids.append(int(open(os.path.join(job_dir, f)).read().strip()))
                    except (OSError, ValueError):
                        pass
        return pids

    def stop_all(self):
        """Stops everything that still runs; returns the leftover monitor
        processes that had to be killed (a clean run has none)."""
        for p in self.popens:
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        for p in self.popens:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
        killed = []
        for pid, cmdline in self.leftovers():
            try:
                os.kill(pid, signal.SIGKILL)
                killed.append((pid, cmdline))
            except ProcessLookupError:
                pass
        shutil.rmtree(self.blackbox_dir, ignore_errors=True)
        return killed


def start_store(procs, binary, run_dir, env):
    log_path = os.path.join(run_dir, "store.log")
    p = procs.start([binary, "--listen", "127.0.0.1:0"], log_path, env)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        text = open(log_path).read()
        m = re.search(r"resilient-store serving (tcp://\S+)", text)
        if m:
            return p, m.group(1)
        if p.poll() is not None:
            raise DemoFailure(f"resilient-store exited with {p.returncode}: {text.strip()}")
        time.sleep(0.02)
    raise DemoFailure("resilient-store did not start within 20 s")


class LogFollower:
    """Reads the ranks' step lines as they are written."""

    def __init__(self, path):
        self.path = path
        self.offset = 0
        self.partial = b""
        self.iteration = -1
        self.step = 0

    def poll(self):
        try:
            with open(self.path, "rb") as f:
                f.seek(self.offset)
                data = f.read()
        except OSError:
            return
        self.offset += len(data)
        lines = (self.partial + data).split(b"\n")
        self.partial = lines.pop()
        for line in lines:
            self.on_line(line.decode(errors="replace"))

    def on_line(self, line):
        m = STEP_RE.match(line)
        if m:
            self.iteration = int(m.group(1))
            self.step = int(m.group(4))


def agent_processes(job_dir):
    """{rank: [(pid, ending)]}: each rank's processes in the order its agent
    started them (the first, then its replacements), from the agents' logs;
    ending is the agent's "exit 0", "signal 9 (Killed)", ... or None."""
    procs, endings = {}, {}
    for node in range(NODES):
        path = os.path.join(job_dir, f"agent{node}.log")
        if not os.path.exists(path):
            continue
        for line in open(path, errors="replace"):
            m = AGENT_RE.search(line)
            if m:
                procs.setdefault(int(m.group(1)), []).append(int(m.group(3)))
            m = ENDED_RE.search(line)
            if m:
                endings[int(m.group(1))] = m.group(2).strip()
    return {r: [(pid, endings.get(pid)) for pid in pids] for r, pids in procs.items()}


def run_job(args, name, procs, store_url, base_env, faults, extra_argv=()):
    """Runs the 8 ranks through two resilient-run agents (each rank with
    `extra_argv` too); injects `faults` (dicts with signal, rank, iteration,
    step) into a rank's first process when its log shows that step. Returns
    the job's data."""
    job_dir = os.path.join(procs.run_dir, name)
    os.makedirs(job_dir)
    common = [f"--run-dir={job_dir}", f"--steps={args.steps}",
              f"--checkpoint-every={args.checkpoint_every}", f"--step-ms={args.step_ms}",
              f"--shards={ACTIVE}"]
    if args.pytorch:
        argv = [args.python, TORCH_EXAMPLE] + common + [
            "--backend=" + ("nccl" if args.nccl else "gloo"),
            "--monitor=" + os.path.join(args.build, "restart", "monitor", "resilient-monitor")]
    else:
        binary = os.path.join(args.build, "demo", "resilient-demo-train")
        argv = [binary] + common + [
            "--plugin=" + plugin_path(args),
            "--monitor=" + os.path.join(args.build, "restart", "monitor", "resilient-monitor")]
        if args.nccl:
            argv += ["--nccl"] + cuda_library_args(args)
    argv += list(extra_argv)
    agent = [os.path.join(args.build, "tools", "run", "resilient-run"),
             "--nproc-per-node", str(PER_NODE), "--nnodes", str(NODES), "--store", store_url,
             "--job", name, "--log-dir", job_dir, "--no-python"]
    if args.nccl:
        # Its own "host" per rank: NCCL then accepts 8 ranks on one GPU and
        # connects them all through the net plugin.
        agent += ["--rank-env", "NCCL_HOSTID=demo-host-{rank}"]
    started = time.monotonic()
    agents = []
    for node in range(NODES):
        agents.append(procs.start(agent + ["--node-rank", str(node), "--"] + argv,
                                  os.path.join(job_dir, f"agent{node}.log"), base_env))
    followers = [LogFollower(os.path.join(job_dir, f"rank{r}.0.log")) for r in range(WORLD_SIZE)]
    pending = list(faults)
    injected = []
    deadline = started + args.job_timeout
    while any(a.poll() is None for a in agents):
        if time.monotonic() > deadline:
            raise DemoFailure(f"job {name} still running after {args.job_timeout} s "
                              f"(logs in {job_dir})")
        for f in followers:
            f.poll()
        while pending:
            fault = pending[0]
            victim = followers[fault["rank"]]
            if victim.iteration < fault["iteration"] or victim.step < fault["step"]:
                break
            pid, end = agent_processes(job_dir)[fault["rank"]][0]
            if end is not None:
                raise DemoFailure(f"rank {fault['rank']} ended ({end}) before its fault was "
                                  f"injected")
            at_wall_ns = time.time_ns()
            at_ns = time.monotonic_ns()
            os.kill(pid, fault["signal"])
            injected.append(dict(fault, pid=pid, at_ns=at_ns, at_wall_ns=at_wall_ns,
                                 at_iteration=victim.iteration, at_step=victim.step))
            print(f"  [{name}] {signal.Signals(fault['signal']).name} rank {fault['rank']} "
                  f"(pid {pid}) after its step {victim.step} (iteration {victim.iteration})",
                  flush=True)
            pending.pop(0)
        time.sleep(0.01)
    for f in followers:
        f.poll()
    ranks = agent_processes(job_dir)
    if pending:
        raise DemoFailure(f"job {name} ended before the fault on rank {pending[0]['rank']} "
                          f"({ending_summary(ranks)}; logs in {job_dir})")
    return {"name": name, "dir": job_dir, "agents": agents, "ranks": ranks, "faults": injected,
            "seconds": time.monotonic() - started, "reports": load_reports(job_dir)}


def ending_summary(ranks):
    """How each rank's first process ended: 'rank 0 exit 4, rank 2 signal 9 (Killed), ...'."""
    return ", ".join(f"rank {r} {ranks[r][0][1] or 'running'}" for r in sorted(ranks))


def load_reports(job_dir):
    """{rank: report} of each rank's first process, {(rank, n): report} of its
    n-th replacement (rank-R.N.json)."""
    reports = {}
    for name in os.listdir(job_dir):
        m = re.fullmatch(r"rank-(\d+)(?:\.(\d+))?\.json", name)
        if m:
            with open(os.path.join(job_dir, name)) as f:
                key = int(m.group(1)) if m.group(2) is None else (int(m.group(1)), int(m.group(2)))
                reports[key] = json.load(f)
    return reports


def check_endings(job):
    """Victims died by a signal and were replaced once, by a process that
    completed; every other rank completed in its first process."""
    problems = []
    victims = {f["rank"]: f for f in job["faults"]}
    for a, agent in enumerate(job["agents"]):
        if agent.returncode != 0:
            problems.append(f"agent {a} exited with {agent.returncode}")
    for r in range(WORLD_SIZE):
        processes = job["ranks"].get(r, [])
        if not processes:
            problems.append(f"rank {r} was never started")
            continue
        pid, end = processes[0]
        report = job["reports"].get(r)
        if r in victims:
            if not (end or "").startswith("signal"):
                problems.append(f"rank {r} ({victims[r]['name']} victim, pid {pid}) ended with "
                                f"{end} instead of dying by a signal")
            if len(processes) != 2:
                problems.append(f"rank {r} had {len(processes) - 1} replacements, not 1")
                continue
            new_pid, new_end = processes[1]
            rep = job["reports"].get((r, 1))
            if new_end != "exit 0" or rep is None or rep["outcome"] != "completed":
                what = (f"{rep['outcome']}: {rep['message']}" if rep else "no report")
                problems.append(f"rank {r}'s replacement (pid {new_pid}) ended with {new_end} "
                                f"({what})")
        elif len(processes) != 1 or end != "exit 0" or report is None or \
                report["outcome"] != "completed":
            what = (f"{report['outcome']}: {report['message']}" if report else "no report")
            problems.append(f"rank {r} ended with {end} ({what}) in {len(processes)} processes")
    return problems


def check_health(job, expect_collectives):
    """A healthy job's health comparison (docs/observability.md) named
    nothing: no rank recorded a slow-link or straggler report; and, where
    the collectives go through our plugin and profiler (not torch's gloo),
    active rank 0 compared some."""
    problems = []
    compared = []
    for r, rep in job["reports"].items():
        for e in rep.get("timeline", []):
            if e["phase"] == "health report":
                problems.append(f"rank {r}: a false report: {e['detail']}")
            elif e["phase"] == "health compared":
                compared.append(e["detail"])
    print("health comparison: " + ("; ".join(compared) if compared else "nothing compared"),
          flush=True)
    if expect_collectives and not any(re.search(r" [1-9]\d* collectives", c) for c in compared):
        problems.append("the health comparison compared no collective")
    return problems


def check_culprits(job):
    """The culprit every survivor names is the rank the demo broke, never a
    neighbour that only saw the fault (the plugins' goodbye reasons carry the
    root cause along the ring)."""
    problems = []
    gone = set()
    for fault in job["faults"]:
        gone.add(fault["rank"])
        k = fault["at_iteration"]
        want = f"ranks {fault['rank']}"
        seen = 0
        for r in range(WORLD_SIZE):
            if r in gone:
                continue
            named = [e["detail"] for e in job["reports"].get(r, {}).get("timeline", [])
                     if e["iteration"] == k and e["phase"] == "culprits"]
            seen += bool(named)
            if named and named[0] != want:
                problems.append(f"rank {r} named {named[0]} for the {fault['name']} of rank "
                                f"{fault['rank']}")
        if not seen:
            problems.append(f"no survivor named a culprit for the {fault['name']} of rank "
                            f"{fault['rank']}")
    return problems


def step_losses(job_dir):
    """{step: set of loss texts} over every process and iteration of a job."""
    losses = {}
    for name in sorted(os.listdir(job_dir)):
        if not re.fullmatch(r"rank\d+\.\d+\.log", name):
            continue
        with open(os.path.join(job_dir, name), errors="replace") as f:
            for line in f:
                m = STEP_RE.match(line.rstrip("\n"))
                if m:
                    losses.setdefault(int(m.group(4)), set()).add(m.group(5))
    return losses


def phase_times(reports, ranks, iteration, phase, source="timeline"):
    """(first, last, detail of the first) mono_ns of `phase` among `ranks`."""
    hits = []
    for r in ranks:
        for e in reports.get(r, {}).get(source, []):
            key = e.get("phase") if source == "timeline" else e.get("event")
            if e["iteration"] == iteration and key == phase:
                hits.append((e["mono_ns"], r, e))
                break
    if not hits:
        return None
    hits.sort(key=lambda h: h[0])
    return hits[0][0], hits[-1][0], hits[0][1], hits[0][2], len(hits)


def print_fault_timeline(job, index, fault, gone):
    reports = job["reports"]
    k = fault["at_iteration"]
    survivors = [r for r in range(WORLD_SIZE) if r not in gone]
    sig = signal.Signals(fault["signal"]).name
    print(f"\nfault {index}: {sig} of rank {fault['rank']} ({fault['name']}) after its step "
          f"{fault['at_step']}, iteration {k}")
    print(f"  {'point (ranks that reached it)':38} {'first':>9} {'last':>9} {'phase':>9}   detail")
    t0 = fault["at_ns"]
    print(f"  {'injected (demo.py, CLOCK_MONOTONIC)':38} {0.0:9.1f} {'':>9} {'':>9}")
    rows = [
        ("fault detected", k, "fault detected", "timeline"),
        ("abort done", k, "abort done", "timeline"),
        ("iteration barrier", k, "iteration barrier", "timeline"),
        ("culprit named", k, "culprits", "timeline"),
        ("reassigned", k + 1, "reassigned", "timeline"),
        ("communicators ready", k + 1, "communicators ready", "timeline"),
        ("function re-entered", k + 1, "function entered", "timeline"),
        ("checkpoint loaded", k + 1, "entered", "events"),
        ("first step done", k + 1, "first step", "events"),
    ]
    previous_last = t0
    measured = {}
    for label, iteration, phase, source in rows:
        t = phase_times(reports, survivors, iteration, phase, source)
        if t is None:
            print(f"  {label:38} {'-':>9} {'-':>9} {'-':>9}   not reached")
            continue
        first, last, who, event, count = t
        if source == "timeline":
            detail = f"rank {who}: {event['detail']}" if event["detail"] else ""
        else:
            detail = f"step {event['step']}"
            if phase == "entered":
                detail = (f"resumed at step {event['step']} "
                          f"({fault['at_step'] - event['step']} steps redone)")
        if len(detail) > 110:
            detail = detail[:107] + "..."
        print(f"  {label + f' ({count})':38} {ms(first - t0):9.1f} {ms(last - t0):9.1f} "
              f"{ms(last - previous_last):9.1f}   {detail}")
        measured[label] = (first - t0, last - t0)
        previous_last = last
    return measured


def print_replacements(job):
    """Each broken process and the one its agent started in its place: when
    it had joined the running job (registered, health-checked, waiting: a
    spare again) and when a restart admitted it."""
    print("\nreplaced processes (the others were never restarted):")
    for fault in job["faults"]:
        r = fault["rank"]
        processes = job["ranks"].get(r, [])
        if len(processes) < 2:
            print(f"  rank {r}: pid {fault['pid']} not replaced")
            continue
        rep = job["reports"].get((r, 1), {})
        events = {e["phase"]: e for e in rep.get("timeline", [])}
        joining, admitted = events.get("joining"), events.get("admitted")
        text = f"  rank {r}: pid {fault['pid']} ({fault['name']}) -> new process pid {processes[1][0]}"
        if joining:
            text += (f", joined as a spare {ms(joining['mono_ns'] - fault['at_ns']):.1f} ms after "
                     f"the fault ({joining['detail'].split(';')[0]})")
        if admitted:
            text += (f", admitted into iteration {admitted['iteration']} at "
                     f"{ms(admitted['mono_ns'] - fault['at_ns']):.1f} ms")
        print(text + f"; {rep.get('outcome', 'no report')}")


def plugin_path(args):
    return os.path.join(args.build, "plugin", "net", "abi", "libnccl-net-resilient.so")


def cuda_library_args(args):
    return [f"--cuda-library={args.cuda_library}"] if args.cuda_library else []


def nccl_env(args):
    """What NCCL needs for the --nccl job (besides NCCL_HOSTID per rank)."""
    return {
        # A path works: NCCL dlopens each NCCL_NET_PLUGIN entry as given first.
        "NCCL_NET_PLUGIN": plugin_path(args),
        # Use our plugin or fail; no silent fallback to NCCL's IB or Socket.
        "NCCL_NET": PLUGIN_NET_NAME,
        # NCCL's bootstrap on loopback, like the store and our TCP transport.
        "NCCL_SOCKET_IFNAME": "lo",
        "NCCL_DEBUG": os.environ.get("NCCL_DEBUG", "WARN"),
    }


def check_cuda(args, binary):
    """None when --nccl can run here, else the reason (resilient-demo-train
    --check-cuda: a CUDA runtime and a device)."""
    try:
        p = subprocess.run([binary, "--check-cuda"] + cuda_library_args(args),
                           stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired:
        raise DemoFailure("resilient-demo-train --check-cuda did not answer within 60 s")
    if p.returncode == 0:
        print(p.stdout.strip(), flush=True)
        return None
    text = (p.stderr or p.stdout).strip()
    if p.returncode == SKIPPED:
        return text.removeprefix("resilient-demo-train: ")
    raise DemoFailure(f"resilient-demo-train --check-cuda exited with {p.returncode}: {text}")


def weights_digest(path):
    with open(path, "rb") as f:
        data = f.read()
    return data, hashlib.sha256(data).hexdigest()[:16]


def interrupted(signum, frame):
    raise KeyboardInterrupt()


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--build", default="build", help="meson build directory (default: build)")
    p.add_argument("--steps", type=int, default=200, help="training steps (default 200)")
    p.add_argument("--checkpoint-every", type=int, default=20)
    p.add_argument("--step-ms", type=int, default=20, help="simulated compute per step (ms)")
    p.add_argument("--kill-at", type=int,
                   help="SIGKILL an active rank after this step of the first iteration "
                        "(default: a quarter of the steps)")
    p.add_argument("--stop-at", type=int,
                   help="SIGSTOP another active rank after this step of the second iteration "
                        "(default: 65%% of the steps)")
    p.add_argument("--kill-rank", type=int, default=2)
    p.add_argument("--stop-rank", type=int, default=4)
    p.add_argument("--job-timeout", type=float,
                   help="seconds per job (default 60, with --nccl 300)")
    p.add_argument("--nccl", action="store_true",
                   help="run the job on real NCCL: every rank on GPU 0, with its own "
                        "NCCL_HOSTID, through NCCL_NET_PLUGIN=libnccl-net-resilient.so; "
                        "exits 77 without a CUDA runtime or device")
    p.add_argument("--cuda-library", metavar="PATH",
                   help="with --nccl: the CUDA runtime the ranks dlopen "
                        "(default libcudart.so.13, .so.12, then .so)")
    p.add_argument("--keep", action="store_true", help="keep the run directory after a PASS")
    p.add_argument("--pytorch", action="store_true",
                   help="the ranks run examples/pytorch/train.py (torch.distributed, gloo; "
                        "NCCL with --nccl) under the Python package nccl_resilient")
    p.add_argument("--python", default="/usr/bin/python3",
                   help="the interpreter of the --pytorch ranks, one that imports torch "
                        "(default /usr/bin/python3: Debian's python3-torch)")
    a = p.parse_args()
    if a.job_timeout is None:
        a.job_timeout = 300 if a.nccl else 60
    if a.cuda_library and not a.nccl:
        p.error("--cuda-library needs --nccl")
    if a.kill_at is None:
        a.kill_at = max(1, a.steps // 4)
    if a.stop_at is None:
        a.stop_at = a.steps * 13 // 20
    if not 0 < a.kill_at < a.stop_at < a.steps:
        p.error("need 0 < --kill-at < --stop-at < --steps")
    if a.kill_rank == a.stop_rank or not all(0 <= r < ACTIVE for r in (a.kill_rank, a.stop_rank)):
        p.error("--kill-rank and --stop-rank must be two different active ranks (0-5)")
    a.build = os.path.abspath(a.build)
    return a


def main():
    args = parse_args()
    binaries = [os.path.join(args.build, *p) for p in (
        ("demo", "resilient-demo-train"), ("tools", "store", "resilient-store"),
        ("restart", "monitor", "resilient-monitor"), ("plugin", "net", "abi", "libnccl-net-resilient.so"),
        ("tools", "run", "resilient-run"))]
    missing = [b for b in binaries if not os.path.exists(b)]
    if missing:
        print("demo: missing " + ", ".join(missing) + " (run scripts/demo.sh)", file=sys.stderr)
        return 2
    if args.pytorch:
        probe = subprocess.run([args.python, "-c", "import torch.distributed as d; "
                                "assert d.is_available() and d.is_gloo_available()"],
                               capture_output=True, text=True)
        if probe.returncode != 0:
            print(f"demo: {args.python} cannot use torch.distributed with gloo "
                  f"({probe.stderr.strip().splitlines()[-1] if probe.stderr.strip() else 'no torch'}); "
                  "scripts/demo.sh --pytorch installs Debian's python3-torch", file=sys.stderr)
            return 2
    if args.nccl:
        # Before anything starts: without a GPU NCCL cannot make a communicator.
        try:
            why = check_cuda(args, binaries[0])
        except DemoFailure as e:
            print(f"demo: {e}", file=sys.stderr)
            return 1
        if why is not None:
            print(f"demo: skipped: {why}", file=sys.stderr)
            return SKIPPED
    run_dir = tempfile.mkdtemp(prefix="resilient-demo-")
    blackbox_dir = tempfile.mkdtemp(prefix="resilient-demo-bb-", dir="/dev/shm")
    procs = Processes(run_dir, blackbox_dir)
    signal.signal(signal.SIGTERM, interrupted)
    signal.signal(signal.SIGINT, interrupted)
    base_env = dict(os.environ,
                    NCCL_RESILIENT_JOB_TOKEN=os.environ.get("NCCL_RESILIENT_JOB_TOKEN") or secrets.token_hex(16),
                    NCCL_RESILIENT_SOCKET_IFNAME="lo",
                    NCCL_RESILIENT_BLACKBOX_DIR=blackbox_dir)
    if args.nccl:
        base_env.update(nccl_env(args))
    if args.pytorch:
        # The package from this checkout, over this build's library.
        base_env["PYTHONPATH"] = os.pathsep.join(
            [os.path.join(REPO, "python")] + ([base_env["PYTHONPATH"]]
                                              if base_env.get("PYTHONPATH") else []))
        base_env["BUILD_DIR"] = os.path.abspath(args.build)
    ok = False
    try:
        print(f"demo: {WORLD_SIZE} ranks ({ACTIVE} active + {WORLD_SIZE - ACTIVE} spares), "
              f"{args.steps} steps, checkpoint every {args.checkpoint_every}, "
              + ("torch.distributed (examples/pytorch/train.py, nccl_resilient), " if args.pytorch
                 else "")
              + ("NCCL on GPU 0 (NCCL_HOSTID per rank, NCCL_NET_PLUGIN="
                 f"{base_env['NCCL_NET_PLUGIN']})" if args.nccl
                 else "gloo" if args.pytorch else "host engine")
              + f"; files in {run_dir}", flush=True)
        store, store_url = start_store(procs, binaries[1], run_dir, base_env)
        print(f"store: resilient-store pid {store.pid} at {store_url}", flush=True)

        reference = run_job(args, "reference", procs, store_url, base_env, [])
        problems = check_endings(reference) + check_health(
            reference, expect_collectives=not args.pytorch or args.nccl)
        print(f"reference run: {reference['seconds']:.1f} s, "
              f"{'all ranks completed' if not problems else '; '.join(problems)}", flush=True)
        if problems:
            raise DemoFailure("the reference run failed")

        faults = [
            {"name": "crash", "signal": signal.SIGKILL, "rank": args.kill_rank, "iteration": 0,
             "step": args.kill_at},
            {"name": "freeze", "signal": signal.SIGSTOP, "rank": args.stop_rank, "iteration": 1,
             "step": args.stop_at},
        ]
        faulty = run_job(args, "faulty", procs, store_url, base_env, faults)
        problems = check_endings(faulty)
        print(f"faulty run: {faulty['seconds']:.1f} s, "
              f"{'ranks ended as expected' if not problems else '; '.join(problems)}", flush=True)
        wrong_culprits = check_culprits(faulty)
        print("culprits: " + ("every survivor named the rank that was broken, each time"
                              if not wrong_culprits else "; ".join(wrong_culprits)), flush=True)
        problems += wrong_culprits

        gone = set()
        for i, fault in enumerate(faulty["faults"], 1):
            gone.add(fault["rank"])
            print_fault_timeline(faulty, i, fault, gone)

        print_replacements(faulty)
        print("\nranks at the end of the faulty run:")
        for r in range(WORLD_SIZE):
            for n, (pid, end) in enumerate(faulty["ranks"].get(r, [])):
                rep = faulty["reports"].get(r if n == 0 else (r, n))
                print(f"  rank {r}{' (new process)' if n else '':14} pid {pid:<7} {end or 'running':18} "
                      + (f"{rep['outcome']}, {rep['final_state']}" if rep else "(no report)"))

        ref_path = os.path.join(reference["dir"], "weights.bin")
        got_path = os.path.join(faulty["dir"], "weights.bin")
        ref_bytes, ref_hash = weights_digest(ref_path)
        weights_ok = os.path.exists(got_path)
        got_hash = "missing"
        if weights_ok:
            got_bytes, got_hash = weights_digest(got_path)
            weights_ok = got_bytes == ref_bytes
        ref_losses, got_losses = step_losses(reference["dir"]), step_losses(faulty["dir"])
        loss_mismatch = [s for s, v in got_losses.items() if v != ref_losses.get(s)]
        print(f"\nweights: reference sha256 {ref_hash}, faulty run sha256 {got_hash}: "
              f"{'bitwise equal' if weights_ok else 'DIFFERENT'}")
        print(f"losses: {len(got_losses)} steps logged in the faulty run (redone ones included), "
              f"{len(loss_mismatch)} differ from the reference"
              + (f" (first: step {min(loss_mismatch)})" if loss_mismatch else ""))
        ok = weights_ok and not problems and not loss_mismatch
    except DemoFailure as e:
        print(f"demo: {e}", file=sys.stderr)
    except KeyboardInterrupt:
        print(f"demo: interrupted; stopping every process (files kept in {run_dir})", file=sys.stderr)
        procs.stop_all()
        return 130
    finally:
        # The monitors leave on their own once their rank is done or dead;
        # give them a moment, then stop what is left.
        deadline = time.monotonic() + 5
        while procs.leftovers() and time.monotonic() < deadline:
            time.sleep(0.05)
        if procs.popens and procs.popens[0].poll() is None:
            procs.popens[0].send_signal(signal.SIGTERM)  # the store: stop it cleanly
            try:
                procs.popens[0].wait(timeout=3)
            except subprocess.TimeoutExpired:
                pass
        killed = procs.stop_all()
        for pid, cmdline in killed:
            print(f"demo: killed leftover process {pid}: {cmdline[:120]}", file=sys.stderr)
    print("\nPASS: the faulty run's final weights equal the fault-free run's" if ok else
          f"\nFAIL (files kept in {run_dir})")
    if ok and not args.keep:
        shutil.rmtree(run_dir, ignore_errors=True)
    elif ok:
        print(f"files kept in {run_dir}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
