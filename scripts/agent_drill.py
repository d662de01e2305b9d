#!/usr/bin/env python3
"""The agent drill: one process replaced at a time, the others never touched.

Runs the demo's training job (resilient-demo-train: 6 active ranks + 2 spares,
the host engine through libnccl-net-resilient.so; with --pytorch the torch
demo's, examples/pytorch/train.py over gloo) on two simulated nodes: two
`resilient-run` agents on this machine, 4 ranks each, the first serving the
job's store. Once without faults (the reference), then again while it injects
--kills SIGKILLs of random live processes (active ranks or spares) and
--poisons poisoned GPU contexts of random active ranks (SIGUSR1: the rank's
next step fails as a sticky CUDA error would and its health check then asks
for a new process, so it leaves with exit 75), and
--store-kills SIGKILLs of the job's store (agent 0 serves it from a process of
its own and starts it again), one at a time, spread over the run; with
--store-after-kill-ms MS the store is also killed MS after each SIGKILL, in
the restart (or the spare's replacement) that kill starts.

After each fault of an active rank it waits for the job to be back at its
target (6 active ranks entered the function in a new iteration); after a
spare's kill, for its agent to start a new process; after a store kill, for
every active rank to be 10 steps further in the same iteration (no restart, no
step lost). A fault of a rank comes only once every replacement so far is a
spare again (registered as a joiner): one fault at a time, on a whole job. It checks at the end:
  - each fault's process was replaced by its agent, and no other process was
    ever restarted (every other process of the first start exited 0 at the end,
    with the pid it started with);
  - the final weights are bitwise equal to the reference's;
  - the agents exited 0, and agent 0 served the store again after each kill.
It prints a table per fault (ms from the injection, CLOCK_MONOTONIC: the
survivors' re-entry, the replacement registered as a joiner -- a spare again,
waiting -- and admitted) and writes JSON (--json).

Exit status: 0 PASS; 1 FAIL; 2 missing binaries.

usage: agent_drill.py [--build build] [--kills 10] [--poisons 2] [--store-kills 2]
                      [--store-after-kill-ms MS]
                      [--steps 200] [--step-ms 30] [--seed N] [--json FILE] [--keep]
                      [--pytorch [--python /usr/bin/python3]]
"""
import argparse
import hashlib
import json
import os
import random
import re
import secrets
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NPROC = 4
NNODES = 2
ACTIVE = 6
STEP_RE = re.compile(r"^step iteration=(\d+) rank=(\d+) active=(\d+) step=(\d+) ")
ENTER_RE = re.compile(r"^enter iteration=(\d+) rank=(\d+) active=(\d+)/(\d+) .*mono_ns=(\d+)")
WATCH_RE = re.compile(r"watching rank (\d+) \(pid (\d+)")
AGENT_RE = re.compile(r"rank (\d+) \(local (\d+)\): (started,|replacement process.*:) pid (\d+)")


class DrillFailure(Exception):
    pass


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Job:
    """Two agents and what their processes print."""

    def __init__(self, args, name, root, env):
        self.dir = os.path.join(root, name)
        self.logs = os.path.join(self.dir, "log")
        os.makedirs(self.logs)
        port = free_port()
        store = f"tcp://127.0.0.1:{port}"
        run = os.path.join(args.build, "tools", "run", "resilient-run")
        common = [f"--run-dir={self.dir}", f"--steps={args.steps}", "--checkpoint-every=20",
                  f"--step-ms={args.step_ms}", f"--shards={ACTIVE}",
                  "--monitor=" + os.path.join(args.build, "restart", "monitor",
                                              "resilient-monitor")]
        if args.pytorch:
            train = ["--no-python", "--", args.python,
                     os.path.join(REPO, "examples", "pytorch", "train.py")] + common
        else:
            train = ["--", os.path.join(args.build, "demo", "resilient-demo-train")] + common + [
                "--plugin=" + os.path.join(args.build, "plugin", "net", "abi",
                                           "libnccl-net-resilient.so")]
        self.agents = []
        self.agent_logs = []
        for node in range(NNODES):
            cmd = [run, "--nproc-per-node", str(NPROC), "--nnodes", str(NNODES), "--node-rank",
                   str(node), "--store", store, "--job", name, "--log-dir", self.logs,
                   "--max-restarts", str(args.kills + args.poisons),
                   "--node-max-restarts", str(args.kills + args.poisons)]
            if node == 0:
                cmd.append("--host-store")
            log = os.path.join(self.dir, f"agent{node}.log")
            self.agent_logs.append(log)
            self.agents.append(subprocess.Popen(cmd + train, env=env, stdout=open(log, "w"),
                                                stderr=subprocess.STDOUT))
            if node == 0:
                # The store is served before the second agent's ranks need it.
                deadline = time.monotonic() + 10
                while "serving the job's store" not in open(log).read():
                    if time.monotonic() > deadline or self.agents[0].poll() is not None:
                        raise DrillFailure(f"agent 0 did not serve the store (see {log})")
                    time.sleep(0.01)
        self.offsets = {}
        self.lines = {}  # log name -> its lines so far

    def processes(self):
        """(rank, process number) -> pid, from the agents' logs."""
        out = {}
        for log in self.agent_logs:
            counts = {}
            for line in open(log):
                m = AGENT_RE.search(line)
                if m:
                    rank = int(m.group(1))
                    n = counts.get(rank, 0)
                    counts[rank] = n + 1
                    out[(rank, n)] = int(m.group(4))
        return out

    def ended(self):
        """The pids whose end the agents logged."""
        pids = set()
        for log in self.agent_logs:
            pids.update(int(p) for p in re.findall(r"pid (\d+) ended:", open(log).read()))
        return pids

    def unregistered_replacements(self):
        """Replacement processes alive and not yet registered as joiners (a
        joiner's monitor, started once it registered, logs "watching rank N
        (pid P" with N past the first world; two processes may share N's log)."""
        registered = set()
        for name in os.listdir(self.dir):
            m = re.match(r"monitor-(\d+)\.log$", name)
            if m and int(m.group(1)) >= NPROC * NNODES:
                # Every process that registered as that rank: one that drew a
                # number in use on a restarted store withdraws, and another
                # registers the same rank after it.
                with open(os.path.join(self.dir, name)) as f:
                    registered.update(int(w.group(2)) for w in WATCH_RE.finditer(f.read()))
        ended = self.ended()
        return [pid for (_, n), pid in self.processes().items()
                if n > 0 and pid not in ended and pid not in registered]

    def poll(self):
        """Reads what the rank logs added; returns {log name: new lines}."""
        new = {}
        for name in os.listdir(self.logs):
            path = os.path.join(self.logs, name)
            with open(path, "rb") as f:
                f.seek(self.offsets.get(name, 0))
                data = f.read()
            cut = data.rfind(b"\n") + 1
            self.offsets[name] = self.offsets.get(name, 0) + cut
            lines = data[:cut].decode(errors="replace").splitlines()
            self.lines.setdefault(name, []).extend(lines)
            if lines:
                new[name] = lines
        return new

    def store_pid(self):
        """The pid of the store agent 0 serves now."""
        pids = re.findall(r"store .*\(pid (\d+)\)", open(self.agent_logs[0]).read())
        if not pids:
            raise DrillFailure(f"agent 0 serves no store (see {self.agent_logs[0]})")
        return int(pids[-1])

    def running(self):
        return any(a.poll() is None for a in self.agents)

    def stop(self):
        for a in self.agents:
            if a.poll() is None:
                a.send_signal(signal.SIGTERM)
        for a in self.agents:
            try:
                a.wait(timeout=20)
            except subprocess.TimeoutExpired:
                a.kill()
                a.wait()


def log_name(rank, n):
    return f"rank{rank}.{n}.log"


def run_reference(args, root, env):
    job = Job(args, "reference", root, env)
    deadline = time.monotonic() + args.job_timeout
    while job.running():
        if time.monotonic() > deadline:
            job.stop()
            raise DrillFailure(f"the reference job still runs after {args.job_timeout} s")
        time.sleep(0.1)
    if any(a.returncode != 0 for a in job.agents):
        raise DrillFailure(f"the reference job failed (see {job.dir})")
    return job


def run_faulty(args, root, env, rng):
    job = Job(args, "faulty", root, env)
    kinds = ["kill"] * args.kills + ["poison"] * args.poisons + ["store"] * args.store_kills
    rng.shuffle(kinds)
    targets = [int((i + 1) * args.steps * 0.85 / (len(kinds) + 1)) for i in range(len(kinds))]
    faults = []
    last_step = {}    # log name -> (iteration, step, when)
    entered = {}      # iteration -> {log name: (active, active world size, mono_ns)}
    deadline = time.monotonic() + args.job_timeout
    pending = list(zip(kinds, targets))
    current = None    # the fault whose recovery is awaited
    settled = 0.0     # when the latest fault's recovery was seen complete
    while job.running():
        if time.monotonic() > deadline:
            job.stop()
            raise DrillFailure(f"the faulty job still runs after {args.job_timeout} s "
                               f"(see {job.dir})")
        now = time.monotonic()
        for name, lines in job.poll().items():
            for line in lines:
                m = STEP_RE.match(line)
                if m:
                    last_step[name] = (int(m.group(1)), int(m.group(4)), now)
                    continue
                m = ENTER_RE.match(line)
                if m:
                    entered.setdefault(int(m.group(1)), {})[name] = (
                        int(m.group(3)), int(m.group(4)), int(m.group(5)))
        if current is not None and current["kind"] == "store":
            # The store's loss costs no step: the iteration goes on (no rank
            # enters another) and every active rank steps on.
            if any(it > current["iteration"] for it in entered):
                raise DrillFailure(f"the store's loss restarted the job (see {job.dir})")
            # 10 steps on, or to the job's last step (a store kill comes a
            # second after the latest recovery: late in the run when faults
            # came fast).
            goal = min(current["step"] + 10, args.steps)
            current["steps_on"] = goal - current["step"]
            after = {n: v for n, v in last_step.items()
                     if v[0] == current["iteration"] and v[1] >= goal}
            for n, v in after.items():
                current["stepped"].setdefault(n, (time.monotonic_ns() - current["ns"]) / 1e6)
            if len(after) >= ACTIVE:
                current["steps_on_ms"] = max(current["stepped"].values())
                current = None
                settled = time.monotonic()
        elif current is not None and current.get("spare"):
            # A spare's end interrupts nobody: its agent starts a new process
            # (the next restart admits it); the active ranks step on.
            if (current["rank"], current["process"] + 1) in job.processes():
                current["replaced_ms"] = (time.monotonic_ns() - current["ns"]) / 1e6
                current = None
                settled = time.monotonic()
        elif current is not None:
            # Back at the target: ACTIVE processes entered one later iteration.
            for it in sorted(entered):
                if it > current["iteration"] and len(entered[it]) == ACTIVE and all(
                        w == ACTIVE for _, w, _ in entered[it].values()):
                    current["reentry_ms"] = (min(t for _, _, t in entered[it].values())
                                             - current["ns"]) / 1e6
                    current["reentry_max_ms"] = (max(t for _, _, t in entered[it].values())
                                                 - current["ns"]) / 1e6
                    current["back_in_iteration"] = it
                    current = None
                    settled = time.monotonic()
                    break
        elif pending:
            kind, target = pending[0]
            # The latest iteration any rank entered, not only the latest one
            # a step was printed in: a fault injected right after a restart,
            # before the first step of its iteration, belongs to that
            # iteration (a drill counted the previous restart's re-entry as
            # this fault's, -20.6 ms after it).
            top = max([it for it, _, _ in last_step.values()] + list(entered), default=0)
            live = {n: v for n, v in last_step.items()
                    if v[0] == top and now - v[2] < 0.5}
            # A store kill comes in steady training: a second after the latest
            # recovery (the active ranks are back first; spares and joiners
            # finish theirs just after, and a restart's verdict lives in the
            # store until every rank has read it).
            if (live and kind == "store" and now - settled >= 1.0
                    and max(s for _, s, _ in live.values()) >= target):
                pid = job.store_pid()
                ns = time.monotonic_ns()
                os.kill(pid, signal.SIGKILL)
                current = {"kind": kind, "rank": -1, "process": -1, "pid": pid,
                           "iteration": top, "step": max(s for _, s, _ in live.values()),
                           "ns": ns, "stepped": {}}
                faults.append(current)
                pending.pop(0)
            elif (live and kind != "store" and max(s for _, s, _ in live.values()) >= target
                  and not job.unregistered_replacements()):
                # A fault of a rank comes when the job is whole again: back at
                # its target and every replacement a spare (a torch process
                # takes seconds to start; faults faster than that empty the
                # spare pool, and a job below its minimum world ends).
                # A SIGKILL hits any live process (an active rank or a spare), a
                # poison an active rank (a spare runs no step to fail).
                procs = job.processes()
                ended = job.ended()
                alive = {f"rank{r}.{n}.log" for (r, n), pid in procs.items()
                         if pid not in ended and (r, n + 1) not in procs}
                victim = rng.choice(sorted(alive if kind == "kill" else live))
                rank, n = (int(x) for x in victim[4:-4].split("."))
                pid = procs[(rank, n)]
                ns = time.monotonic_ns()
                os.kill(pid, signal.SIGKILL if kind == "kill" else signal.SIGUSR1)
                store_killed = False
                if kind == "kill" and args.store_after_kill_ms > 0:
                    # The store lost during the restart this kill starts (a
                    # spare's kill: just after its death was recorded).
                    time.sleep(args.store_after_kill_ms / 1000)
                    os.kill(job.store_pid(), signal.SIGKILL)
                    store_killed = True
                current = {"kind": kind, "rank": rank, "process": n, "pid": pid,
                           "iteration": top, "step": max(s for _, s, _ in live.values()),
                           "ns": ns, "spare": victim not in live, "store_killed": store_killed}
                faults.append(current)
                pending.pop(0)
        time.sleep(0.005)
    job.poll()
    if pending or current is not None:
        awaiting = (f"one awaiting recovery ({current['kind']} of rank {current['rank']} at "
                    f"step {current['step']} of iteration {current['iteration']})"
                    if current else "none awaiting recovery")
        raise DrillFailure(f"the job ended with {len(pending)} faults not injected and "
                           f"{awaiting} (see {job.dir})")
    return job, faults


def reports(job):
    out = {}
    for name in os.listdir(job.dir):
        if name.startswith("rank-") and name.endswith(".json"):
            out[name] = json.load(open(os.path.join(job.dir, name)))
    return out


def event_ns(report, phase):
    return next((e["mono_ns"] for e in report.get("timeline", []) if e["phase"] == phase), None)


def check(job, faults, reference):
    problems = []
    for i, a in enumerate(job.agents):
        if a.returncode != 0:
            problems.append(f"agent {i} exited {a.returncode}")
    procs = job.processes()
    ends = {}
    for log in job.agent_logs:
        for line in open(log):
            m = re.search(r"pid (\d+) ended: (.*)$", line)
            if m:
                ends[int(m.group(1))] = m.group(2).strip()
    store_kills = [f for f in faults if f["kind"] == "store"]
    faults = [f for f in faults if f["kind"] != "store"]
    victims = {f["pid"] for f in faults}
    # A replacement that drew a joiner's number already in use (it registered
    # on a restarted store before the ranks put the queue back) withdraws, and
    # its agent starts another: only where the store was killed.
    withdrawn = set()
    for (rank, n), pid in procs.items():
        path = os.path.join(job.logs, f"rank{rank}.{n}.log")
        if (pid not in victims and (ends.get(pid) or "").startswith("exit 76 (a joiner withdrew")
                and os.path.exists(path) and "a joiner withdraws" in open(path).read()):
            withdrawn.add(pid)
    if withdrawn and not store_kills and not any(f.get("store_killed") for f in faults):
        problems.append(f"{len(withdrawn)} joiners withdrew, and the store was never killed")
    replaced = [k for k in procs if k[1] > 0]
    if len(replaced) != len(faults) + len(withdrawn):
        problems.append(f"{len(replaced)} processes started in place of others, "
                        f"{len(faults)} faults of ranks injected, {len(withdrawn)} joiners withdrew")
    served_again = open(job.agent_logs[0]).read().count("serves again")
    killed = len(store_kills) + sum(1 for f in faults if f.get("store_killed"))
    if served_again != killed:
        problems.append(f"the store was served again {served_again} times after "
                        f"{killed} kills")
    for (rank, n), pid in procs.items():
        if pid not in victims and pid not in withdrawn and ends.get(pid) != "exit 0":
            problems.append(f"rank {rank} process {n} (pid {pid}) ended: {ends.get(pid)}")
    for f in faults:
        want = "signal 9 (Killed)" if f["kind"] == "kill" else "exit 75 (left for a new process)"
        if ends.get(f["pid"]) != want:
            problems.append(f"victim pid {f['pid']} ({f['kind']}) ended: {ends.get(f['pid'])}, "
                            f"not {want}")
    # The replacement of each victim: the next process of its rank that did
    # not withdraw.
    rep = reports(job)
    for f in faults:
        n = f["process"] + 1
        while procs.get((f["rank"], n)) in withdrawn:
            n += 1
        f["withdrawn_before"] = n - f["process"] - 1
        r = rep.get(f"rank-{f['rank']}.{n}.json")
        f["joining_ms"] = f["admitted_ms"] = None
        if r is None:
            # A replacement that was a later fault's victim wrote none.
            if procs.get((f["rank"], n)) not in victims:
                problems.append(f"no report of rank {f['rank']}'s process {n}")
            continue
        joining, admitted = event_ns(r, "joining"), event_ns(r, "admitted")
        f["joining_ms"] = (joining - f["ns"]) / 1e6 if joining else None
        f["admitted_ms"] = (admitted - f["ns"]) / 1e6 if admitted else None
        f["replacement_outcome"] = r.get("outcome")
    ref = open(os.path.join(reference.dir, "weights.bin"), "rb").read()
    got_path = os.path.join(job.dir, "weights.bin")
    got = open(got_path, "rb").read() if os.path.exists(got_path) else b""
    weights = {"reference": hashlib.sha256(ref).hexdigest()[:16],
               "faulty": hashlib.sha256(got).hexdigest()[:16], "equal": got == ref}
    if not weights["equal"]:
        problems.append("the final weights differ from the reference's")
    return problems, weights, len(withdrawn)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--kills", type=int, default=10)
    ap.add_argument("--poisons", type=int, default=2)
    ap.add_argument("--store-kills", type=int, default=2,
                    help="SIGKILLs of the job's store (agent 0 serves it again) in steady training")
    ap.add_argument("--store-after-kill-ms", type=float, default=0,
                    help="after each SIGKILL of a process, SIGKILL the job's store this many ms "
                         "later: the store lost during the restart the kill starts (0: never)")
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--step-ms", type=int, default=30)
    ap.add_argument("--seed", type=int)
    ap.add_argument("--job-timeout", type=float, default=300)
    ap.add_argument("--json")
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--pytorch", action="store_true",
                    help="the torch demo's job (examples/pytorch/train.py, gloo) instead")
    ap.add_argument("--python", default="/usr/bin/python3",
                    help="with --pytorch: the interpreter (one that has torch)")
    args = ap.parse_args()
    for exe in [("tools", "run", "resilient-run"), ("demo", "resilient-demo-train"),
                ("restart", "monitor", "resilient-monitor")]:
        if not os.access(os.path.join(args.build, *exe), os.X_OK):
            print(f"agent_drill: {os.path.join(args.build, *exe)} is missing "
                  f"(build with: ninja -C {args.build})", file=sys.stderr)
            return 2
    seed = args.seed if args.seed is not None else secrets.randbits(32)
    rng = random.Random(seed)
    root = tempfile.mkdtemp(prefix="resilient-agent-drill-")
    blackbox = tempfile.mkdtemp(prefix="resilient-drill-bb-", dir="/dev/shm")
    # A drill injects a dozen independent faults within seconds, which the
    # default storm policy (10 restarts within 10 min, a doubling back-off)
    # rightly takes for a storm: off here, the library's defaults otherwise.
    env = dict(os.environ, NCCL_RESILIENT_JOB_TOKEN=secrets.token_hex(16),
               NCCL_RESILIENT_SOCKET_IFNAME="lo", NCCL_RESILIENT_BLACKBOX_DIR=blackbox,
               NCCL_RESILIENT_RESTART_STORM_LIMIT="0", NCCL_RESILIENT_RESTART_BACKOFF_MS="0")
    if args.pytorch:
        env["PYTHONPATH"] = os.pathsep.join([os.path.join(REPO, "python")]
                                            + ([env["PYTHONPATH"]] if env.get("PYTHONPATH")
                                               else []))
        env["BUILD_DIR"] = os.path.abspath(args.build)
    print(f"agent drill, {'the torch job (gloo)' if args.pytorch else 'the host engine job'}: "
          f"{NNODES} agents x {NPROC} ranks ({ACTIVE} active + "
          f"{NNODES * NPROC - ACTIVE} spares), {args.steps} steps of {args.step_ms} ms; "
          f"{args.kills} SIGKILLs, {args.poisons} poisoned contexts, {args.store_kills} store "
          f"kills; seed {seed}; {root}",
          flush=True)
    ok = False
    try:
        reference = run_reference(args, root, env)
        job, faults = run_faulty(args, root, env, rng)
        problems, weights, withdrawals = check(job, faults, reference)
        print(f"\n{'#':>2} {'kind':>6} {'rank':>4} {'proc':>4} {'step':>4} | "
              f"{'re-entry':>9} {'slowest':>8} | {'joining':>8} {'admitted':>9} | replacement")
        def ms(v):
            return f"{v:9.1f}" if v is not None else f"{'-':>9}"
        for i, f in enumerate(faults):
            if f["kind"] == "store":
                print(f"{i + 1:>2} {'store':>6} {'-':>4} {'-':>4} {f['step']:>4} | "
                      f"no restart; every active rank {f['steps_on']} steps on at {f['steps_on_ms']:.1f} ms "
                      f"(store pid {f['pid']} killed, served again by agent 0)")
                continue
            if f.get("spare"):
                print(f"{i + 1:>2} {'kill':>6} {f['rank']:>4} {f['process']:>4} {f['step']:>4} | "
                      f"a spare: no restart; its agent started a new process at "
                      f"{f['replaced_ms']:.1f} ms | {ms(f['joining_ms'])[1:]} {ms(f['admitted_ms'])} | "
                      f"{f.get('replacement_outcome')}")
                continue
            print(f"{i + 1:>2} {f['kind']:>6} {f['rank']:>4} {f['process']:>4} {f['step']:>4} | "
                  f"{ms(f.get('reentry_ms'))} {ms(f.get('reentry_max_ms'))[1:]} | "
                  f"{ms(f['joining_ms'])[1:]} {ms(f['admitted_ms'])} | "
                  f"{f.get('replacement_outcome')}")
        joins = [f["joining_ms"] for f in faults if f.get("joining_ms") is not None]
        reentries = [f["reentry_ms"] for f in faults if f.get("reentry_ms") is not None]
        summary = {"faults": len(faults), "joiners_withdrawn": withdrawals,
                   "reentry_median_ms": statistics.median(reentries) if reentries else None,
                   "joining_median_ms": statistics.median(joins) if joins else None,
                   "joining_max_ms": max(joins) if joins else None}
        print(f"\nmedians: survivors' re-entry {summary['reentry_median_ms']} ms; replacement "
              f"a spare again (registered, waiting) {summary['joining_median_ms']} ms "
              f"(max {summary['joining_max_ms']})")
        if withdrawals:
            print(f"joiners withdrawn (a number in use drawn from a restarted store; each "
                  f"replaced by a new process): {withdrawals}")
        print(f"weights: reference sha256 {weights['reference']}, faulty run sha256 "
              f"{weights['faulty']}: {'bitwise equal' if weights['equal'] else 'DIFFERENT'}")
        if args.json:
            with open(args.json, "w") as out:
                json.dump({"seed": seed, "args": vars(args), "faults": faults,
                           "summary": summary, "weights": weights, "problems": problems},
                          out, indent=1)
        for p in problems:
            print(f"FAIL: {p}")
        ok = not problems
        print("\nPASS: every fault replaced one process, the others untouched, weights equal"
              if ok else "\nFAIL")
    except DrillFailure as e:
        print(f"FAIL: {e}")
    finally:
        if ok and not args.keep:
            shutil.rmtree(root, ignore_errors=True)
        else:
            print(f"logs: {root}")
        shutil.rmtree(blackbox, ignore_errors=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
