#!/usr/bin/env python3
"""The reliability matrix of the restart library (docs/reliability.md).

Runs the demo's job (resilient-demo-train: 8 ranks, 6 active + 2 spares, the
host engine through libnccl-net-resilient.so) once without faults as the
reference, then once per cell of faults x phases, each with one fault injected
at one phase (demo/chaos.h says where each phase is). Every cell must end
either with final weights bitwise equal to the reference's and every other
rank completed ("recovered"), or with a clear error on every rank within the
cell's bound ("clear error"); in both cases with no process left behind and,
in every rank that ended by itself, no descriptor or thread more than before
its Wrapper existed.

The recovery phases need a recovery: the driver SIGKILLs active rank 1 at its
step 40 (the trigger), and the cell's fault hits during the recovery from it,
a second fault. Faults of rank 3 (the victim) it injects itself; the store's,
the etcd member's and the spare's (rank 7) the driver injects when rank 3
prints the phase's marker line.

  scripts/chaos_matrix.py                    every cell; writes docs/reliability.md
  scripts/chaos_matrix.py --sample 4         4 cells drawn with a printed seed (CI)
  scripts/chaos_matrix.py --cells sigkill@steady,store-sigstop@completion

Exit status: 0 every cell run passed, 1 a cell failed, 2 bad usage or missing
binaries.
"""

import argparse
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import demo  # noqa: E402  (scripts/demo.py: the processes, the store, the reports)

PHASES = ["startup", "steady", "recovery-barrier", "recovery-comms", "completion"]
EVERY_PHASE = set(PHASES)
# fault -> the phases it can happen in (a hook fails only where it runs).
FAULTS = {
    "exception": EVERY_PHASE,
    "sigkill": EVERY_PHASE,
    "sigstop": EVERY_PHASE,
    "store-sigstop": EVERY_PHASE,
    "store-sigkill": EVERY_PHASE,
    "etcd-member-kill": EVERY_PHASE,
    "spare-death": EVERY_PHASE,
    "hook-initialize": {"startup", "recovery-comms"},
    "hook-health": {"startup", "recovery-barrier", "recovery-comms"},
    "hook-finalize": {"recovery-barrier"},
    "hook-abort": {"recovery-barrier"},
    "hook-completion": {"completion"},
}
VICTIM = 3          # the rank that injects the cell's fault, or prints the marker for the driver
TRIGGER = 1         # the rank the driver kills to start a recovery
SPARE = 7           # the spare that dies in spare-death cells
TRIGGER_STEP = 40   # demo/chaos.h kSteadyStep
STEPS = 100
STEP_MS = 20
CHECKPOINT_EVERY = 20
# Timeouts the cells run with (environment knobs the demo honours), and each
# cell's bound: every rank has ended this long after the fault at the latest.
TIMEOUTS = {
    "NCCL_RESILIENT_RESTART_BARRIER_TIMEOUT_MS": 10000,
    "NCCL_RESILIENT_RESTART_COMPLETION_TIMEOUT_MS": 12000,
    "NCCL_RESILIENT_STORE_TIMEOUT_MS": 8000,
    "NCCL_RESILIENT_STORE_CONNECT_TIMEOUT_MS": 8000,
}
BOUND_S = 45.0  # the barrier and completion timeouts, the monitors' hard timeout, a margin
MARKER_RE = re.compile(r"^chaos phase=(\S+) iteration=(\d+) kind=(\S+) mono_ns=(\d+)$")


def applicable(fault, phase):
    return phase in FAULTS[fault]


def every_cell():
    return [(f, p) for f in FAULTS for p in PHASES if applicable(f, p)]


class Lines(demo.LogFollower):
    """Follows one rank's log: its step lines and its chaos markers."""

    def __init__(self, path):
        super().__init__(path)
        self.markers = []

    def on_line(self, line):
        super().on_line(line)
        m = MARKER_RE.match(line)
        if m:
            self.markers.append((m.group(1), int(m.group(4))))


def free_ports(n):
    socks, ports = [], []
    for _ in range(n):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        socks.append(s)
        ports.append(s.getsockname()[1])
    for s in socks:
        s.close()
    return ports


class EtcdCluster:
    """Three etcd members on loopback (etcd-server), for the etcd cells."""

    def __init__(self, procs, run_dir):
        etcd = shutil.which("etcd") or "/usr/bin/etcd"
        if not os.path.exists(etcd):
            raise demo.DemoFailure("etcd is not installed (Debian's etcd-server)")
        ports = free_ports(6)
        names = [f"m{i}" for i in range(3)]
        initial = ",".join(f"{n}=http://127.0.0.1:{ports[2 * i + 1]}" for i, n in enumerate(names))
        self.members, self.endpoints = [], []
        for i, n in enumerate(names):
            client, peer = f"http://127.0.0.1:{ports[2 * i]}", f"http://127.0.0.1:{ports[2 * i + 1]}"
            argv = [etcd, "--name", n, "--data-dir", os.path.join(run_dir, "etcd-" + n),
                    "--listen-client-urls", client, "--advertise-client-urls", client,
                    "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
                    "--initial-cluster", initial, "--initial-cluster-state", "new",
                    "--initial-cluster-token", os.path.basename(run_dir),
                    "--heartbeat-interval", "50", "--election-timeout", "500",
                    "--log-level", "error"]
            self.members.append(procs.start(argv, os.path.join(run_dir, f"etcd-{n}.log"), os.environ))
            self.endpoints.append(f"127.0.0.1:{ports[2 * i]}")
        deadline = time.monotonic() + 20
        for i in range(3):
            while True:
                try:
                    with socket.create_connection(("127.0.0.1", ports[2 * i]), timeout=1):
                        break
                except OSError:
                    if time.monotonic() > deadline:
                        raise demo.DemoFailure("the etcd cluster did not start within 20 s")
                    time.sleep(0.05)  # polling the member's port until it listens
        self.url = "etcd://" + ",".join(self.endpoints)


def start_ranks(args, procs, job_dir, env, url, job):
    """The job's 8 ranks, each logging to job_dir/rank-N.log."""
    argv = [args.binaries["demo"], f"--run-dir={job_dir}", f"--steps={STEPS}",
            f"--checkpoint-every={CHECKPOINT_EVERY}", f"--step-ms={STEP_MS}",
            f"--shards={demo.ACTIVE}", "--plugin=" + args.binaries["plugin"],
            "--monitor=" + args.binaries["monitor"]]
    return [procs.start(argv, os.path.join(job_dir, f"rank-{r}.log"),
                        dict(env, RANK=str(r), WORLD_SIZE=str(demo.WORLD_SIZE), LOCAL_RANK=str(r),
                             NCCL_RESILIENT_STORE_URL=url, NCCL_RESILIENT_RESTART_JOB=job))
            for r in range(demo.WORLD_SIZE)]


def run_cell(args, fault, phase, cell_dir, reference_weights, base_env):
    """Runs one cell; returns its row: outcome, seconds, problems."""
    os.makedirs(cell_dir)
    procs = demo.Processes(cell_dir, tempfile.mkdtemp(prefix="resilient-matrix-bb-", dir="/dev/shm"))
    env = dict(base_env, NCCL_RESILIENT_BLACKBOX_DIR=procs.blackbox_dir,
               RESILIENT_DEMO_CHAOS=f"{fault}@{phase}", RESILIENT_DEMO_CHAOS_RANK=str(VICTIM))
    env.update({k: str(v) for k, v in TIMEOUTS.items()})
    row = {"fault": fault, "phase": phase, "outcome": "FAIL", "seconds": None, "problems": []}
    etcd = None
    try:
        if fault == "etcd-member-kill":
            etcd = EtcdCluster(procs, cell_dir)
            store, url = None, etcd.url
            # A call fails over to the next member within the hard timeout's half.
            env["NCCL_RESILIENT_STORE_MEMBER_TIMEOUT_MS"] = "400"
        else:
            store, url = demo.start_store(procs, args.binaries["store"], cell_dir, env)
        job_dir = os.path.join(cell_dir, "job")
        os.makedirs(job_dir)
        ranks = start_ranks(args, procs, job_dir, env, url, "matrix")
        lines = [Lines(os.path.join(job_dir, f"rank-{r}.log")) for r in range(demo.WORLD_SIZE)]
        needs_trigger = phase.startswith("recovery")
        driver_fault = fault in ("store-sigstop", "store-sigkill", "etcd-member-kill", "spare-death")
        fault_ns = None
        triggered = False
        started = time.monotonic()
        # A victim frozen by the cell is waited for only as long as the others.
        frozen = {VICTIM} if fault == "sigstop" else set()
        while any(p.poll() is None for r, p in enumerate(ranks) if r not in frozen):
            for f in lines:
                f.poll()
            if (needs_trigger and not triggered and lines[TRIGGER].iteration == 0
                    and lines[TRIGGER].step >= TRIGGER_STEP):
                os.kill(ranks[TRIGGER].pid, signal.SIGKILL)
                triggered = True
            markers = [m for m in lines[VICTIM].markers if m[0] == phase]
            if markers and fault_ns is None:
                fault_ns = markers[0][1]
                if driver_fault:
                    if fault == "store-sigstop":
                        store.send_signal(signal.SIGSTOP)
                    elif fault == "store-sigkill":
                        store.kill()
                    elif fault == "etcd-member-kill":
                        etcd.members[0].kill()
                    else:
                        os.kill(ranks[SPARE].pid, signal.SIGKILL)
            if fault_ns is None and time.monotonic() - started > BOUND_S + 60:
                row["problems"].append(f"phase {phase} never reached on rank {VICTIM}")
                break
            if fault_ns is not None and time.monotonic_ns() - fault_ns > BOUND_S * 1e9:
                running = [r for r, p in enumerate(ranks) if p.poll() is None]
                if set(running) - {VICTIM if fault == "sigstop" else -1}:
                    row["problems"].append(f"ranks {running} still running {BOUND_S:.0f} s after "
                                           f"the fault")
                    break
            time.sleep(0.01)
        end_ns = time.monotonic_ns()
        if fault_ns is not None:
            row["seconds"] = (end_ns - fault_ns) / 1e9
        if store is not None and fault == "store-sigstop":
            store.send_signal(signal.SIGCONT)
        row["problems"] += judge(fault, ranks, job_dir, reference_weights, row)
        # The monitors leave by themselves once their rank ended (and the
        # store answered, or their bounded tries for it ended).
        deadline = time.monotonic() + 20
        while procs.leftovers() and time.monotonic() < deadline:
            time.sleep(0.05)
        # The ranks are the driver's (a victim frozen before its monitor
        # existed stays frozen); what they started must be gone.
        own = {p.pid for p in procs.popens}
        left = [(pid, cmd) for pid, cmd in procs.leftovers() if pid not in own]
        if left:
            row["problems"].append(f"left behind: {', '.join(str(pid) for pid, _ in left)}")
    except demo.DemoFailure as e:
        row["problems"].append(str(e))
    finally:
        procs.stop_all()  # SIGKILL: frozen processes too
    if not row["problems"] and row["outcome"] == "FAIL":
        row["problems"].append("no outcome")
    return row


def judge(fault, ranks, job_dir, reference_weights, row):
    """The cell's outcome (into row) and what is wrong with it."""
    reports = demo.load_reports(job_dir)
    victims = {TRIGGER, VICTIM} | ({SPARE} if fault == "spare-death" else set())
    others = [r for r in range(demo.WORLD_SIZE) if r not in victims]
    problems = []
    for r, p in enumerate(ranks):
        rep = reports.get(r)
        if rep is None or p.returncode is None or p.returncode < 0:
            continue
        res = rep.get("resources", {})
        before, after = res.get("before", {}), res.get("after", {})
        if before and (after.get("descriptors") != before.get("descriptors")
                       or after.get("threads") != before.get("threads")):
            problems.append(f"rank {r} leaked: {before} before its Wrapper, {after} after")
    completed = [r for r in others if reports.get(r, {}).get("outcome") == "completed"
                 and ranks[r].returncode == 0]
    errored = [r for r in others if reports.get(r, {}).get("outcome") in ("error", "aborted", "discarded")
               and reports[r].get("message")]
    # With the store frozen or gone nothing can be coordinated: a rank blocked
    # in a collective on peers that wait for the store shows no progress, and
    # its monitor ends it at the hard timeout (its log says so). That is the
    # library's designed end for it, a clear one, not an inconsistency.
    if fault.startswith("store-"):
        for r in others:
            if r in errored or reports.get(r) is not None or ranks[r].returncode is None \
                    or ranks[r].returncode >= 0:
                continue
            log = os.path.join(job_dir, f"monitor-{r}.log")
            text = open(log, errors="replace").read() if os.path.exists(log) else ""
            if "killed by its monitor after the hard timeout" in text:
                errored.append(r)
                row["monitor_ended"] = row.get("monitor_ended", 0) + 1
    weights = os.path.join(job_dir, "weights.bin")
    if len(completed) == len(others):
        if not os.path.exists(weights):
            problems.append("every rank completed, but no weights were saved")
        elif open(weights, "rb").read() != reference_weights:
            problems.append("the final weights differ from the reference's")
        else:
            row["outcome"] = "recovered"
    elif len(errored) == len(others):
        row["outcome"] = "clear error"
        first = next((r for r in others if reports.get(r)), None)
        row["error"] = reports[first]["message"] if first is not None else "ended by their monitors"
        if row.get("monitor_ended"):
            row["error"] += (f" ({row['monitor_ended']} ranks blocked in a collective ended by their "
                             "monitors' hard timeout)")
    else:
        how = ", ".join(f"rank {r} {ending(ranks[r].returncode)} "
                        f"({reports.get(r, {}).get('outcome', 'no report')})" for r in others)
        problems.append(f"ranks ended inconsistently: {how}")
    if problems:
        row["outcome"] = "FAIL"
    return problems


def write_table(path, rows, args, seconds):
    by = {(r["fault"], r["phase"]): r for r in rows}
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True, cwd=os.path.dirname(os.path.abspath(__file__))).stdout.strip()
    out = ["# Reliability matrix", "",
           "<!-- Generated by scripts/chaos_matrix.py; do not edit by hand. -->", "",
           "The demo's job (8 ranks: 6 active, 2 spares; host engine through "
           "libnccl-net-resilient.so; a fresh `resilient-store`, or a 3-member etcd cluster for "
           "the etcd column) with one fault per cell. A cell passes when every rank other than "
           "the fault's victims completed with final weights bitwise equal to the fault-free "
           f"run's (**recovered**), or every such rank ended with a clear error within {BOUND_S:.0f} s "
           "of the fault (**error**; with the store frozen or killed, a rank blocked in a "
           "collective on peers that wait for the store is ended by its monitor's hard timeout, "
           "which its monitor log states: that counts as its clear end); and no process was left "
           "behind, and no rank that ended by "
           "itself held a descriptor or thread more than before its `Wrapper` existed.", "",
           "Phases (`demo/chaos.h`): **startup** before the initial barrier; **steady** step 40 "
           "of iteration 0; **recovery-barrier** entering the iteration barrier of a recovery, "
           "**recovery-comms** creating the communicators after it (both: a second fault, the "
           "first being a SIGKILL of active rank 1 at its step 40); **completion** entering the "
           "completion barrier. Rank 3 injects its own faults; the driver freezes or kills the "
           "store, kills an etcd member or kills spare rank 7 when rank 3 reaches the phase. "
           "Times: from the fault to the last rank's end.", "",
           f"Timeouts: barrier {TIMEOUTS['NCCL_RESILIENT_RESTART_BARRIER_TIMEOUT_MS']} ms, "
           f"completion {TIMEOUTS['NCCL_RESILIENT_RESTART_COMPLETION_TIMEOUT_MS']} ms, store call "
           f"{TIMEOUTS['NCCL_RESILIENT_STORE_TIMEOUT_MS']} ms; the demo's others (docs/demo.md).", "",
           f"Command: `python3 scripts/chaos_matrix.py`; commit {commit}; {os.cpu_count()} cores, "
           f"{time.strftime('%Y-%m-%d')}; {len(rows)} cells in {seconds / 60:.1f} min.", "",
           "| fault | " + " | ".join(PHASES) + " |",
           "|---|" + "---|" * len(PHASES)]
    for f in FAULTS:
        cells = []
        for p in PHASES:
            r = by.get((f, p))
            if not applicable(f, p):
                cells.append("n/a")
            elif r is None:
                cells.append("not run")
            elif r["outcome"] == "FAIL":
                cells.append("**FAIL**")
            else:
                word = "recovered" if r["outcome"] == "recovered" else "error"
                cells.append(f"{word} {r['seconds']:.1f} s" if r["seconds"] is not None else word)
        out.append(f"| {f} | " + " | ".join(cells) + " |")
    errors = [r for r in rows if r["outcome"] == "clear error"]
    if errors:
        out += ["", "The clear errors, as the first surviving rank reported them:", ""]
        for r in errors:
            msg = r["error"].replace("|", "/")
            out.append(f"- {r['fault']}@{r['phase']}: {msg[:300]}")
    failed = [r for r in rows if r["outcome"] == "FAIL"]
    if failed:
        out += ["", "Failures:", ""]
        for r in failed:
            out.append(f"- {r['fault']}@{r['phase']}: {'; '.join(r['problems'])[:400]}")
    out += ["", "n/a: a hook fails only in the phases where it runs."]
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--build", default="build")
    p.add_argument("--cells", help="comma list of fault@phase (default: every cell)")
    p.add_argument("--sample", type=int, help="run this many cells drawn at random")
    p.add_argument("--seed", type=int, help="the draw's seed (default: from the clock)")
    p.add_argument("--table", help="write the table here (default with every cell: "
                                   "docs/reliability.md)")
    p.add_argument("--keep", action="store_true", help="keep the run directory")
    a = p.parse_args()
    a.build = os.path.abspath(a.build)
    a.binaries = {
        "demo": os.path.join(a.build, "demo", "resilient-demo-train"),
        "store": os.path.join(a.build, "tools", "store", "resilient-store"),
        "monitor": os.path.join(a.build, "restart", "monitor", "resilient-monitor"),
        "plugin": os.path.join(a.build, "plugin", "net", "abi", "libnccl-net-resilient.so"),
    }
    cells = every_cell()
    if a.cells:
        cells = []
        for c in a.cells.split(","):
            f, _, ph = c.partition("@")
            if f not in FAULTS or ph not in PHASES or not applicable(f, ph):
                p.error(f"no such cell: {c}")
            cells.append((f, ph))
    if a.sample:
        a.seed = a.seed if a.seed is not None else int(time.time())
        cells = random.Random(a.seed).sample(cells, min(a.sample, len(cells)))
    a.selected = cells
    if a.table is None and not a.cells and not a.sample:
        a.table = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "docs",
                               "reliability.md")
    return a


def main():
    args = parse_args()
    missing = [b for b in args.binaries.values() if not os.path.exists(b)]
    if missing:
        print("chaos_matrix: missing " + ", ".join(missing) + " (build first)", file=sys.stderr)
        return 2
    if args.seed is not None:
        print(f"chaos_matrix: seed {args.seed}", flush=True)
    run_dir = tempfile.mkdtemp(prefix="resilient-matrix-")
    base_env = dict(os.environ, NCCL_RESILIENT_JOB_TOKEN=os.urandom(16).hex(),
                    NCCL_RESILIENT_SOCKET_IFNAME="lo")
    started = time.monotonic()
    rows = []
    try:
        reference_weights = reference_run(args, run_dir, base_env)
        for i, (f, ph) in enumerate(args.selected, 1):
            row = run_cell(args, f, ph, os.path.join(run_dir, f"{f}@{ph}"), reference_weights,
                           base_env)
            rows.append(row)
            took = f"{row['seconds']:.1f} s" if row["seconds"] is not None else "-"
            print(f"[{i}/{len(args.selected)}] {f}@{ph}: {row['outcome']} ({took})"
                  + (f": {'; '.join(row['problems'])}" if row["problems"] else ""), flush=True)
    except demo.DemoFailure as e:
        print(f"chaos_matrix: {e}", file=sys.stderr)
        return 1
    failed = [r for r in rows if r["outcome"] == "FAIL"]
    if args.table:
        write_table(args.table, rows, args, time.monotonic() - started)
        print(f"table written to {args.table}")
    print(f"{len(rows) - len(failed)} of {len(rows)} cells passed; files in {run_dir}")
    if not failed and not args.keep:
        shutil.rmtree(run_dir, ignore_errors=True)
    return 1 if failed else 0


def ending(code):
    """How a rank's process ended, from its return code ("exit 4", "signal 9
    (SIGKILL)"; "running" before its end)."""
    if code is None:
        return "running"
    if code < 0:
        try:
            return f"signal {-code} ({signal.Signals(-code).name})"
        except ValueError:
            return f"signal {-code}"
    return f"exit {code}"


def endings(ranks):
    return ", ".join(f"rank {r} {ending(p.returncode)}" for r, p in enumerate(ranks))


def reference_run(args, run_dir, base_env):
    """The fault-free job: its weights."""
    cell_dir = os.path.join(run_dir, "reference")
    os.makedirs(cell_dir)
    procs = demo.Processes(cell_dir, tempfile.mkdtemp(prefix="resilient-matrix-bb-", dir="/dev/shm"))
    env = dict(base_env, NCCL_RESILIENT_BLACKBOX_DIR=procs.blackbox_dir)
    env.update({k: str(v) for k, v in TIMEOUTS.items()})
    try:
        store, url = demo.start_store(procs, args.binaries["store"], cell_dir, env)
        job_dir = os.path.join(cell_dir, "job")
        os.makedirs(job_dir)
        ranks = start_ranks(args, procs, job_dir, env, url, "reference")
        for p in ranks:
            p.wait(timeout=120)
        if any(p.returncode != 0 for p in ranks):
            raise demo.DemoFailure(f"the reference run failed: {endings(ranks)} "
                                   f"(logs in {job_dir})")
        with open(os.path.join(job_dir, "weights.bin"), "rb") as f:
            return f.read()
    finally:
        procs.stop_all()


if __name__ == "__main__":
    sys.exit(main())
