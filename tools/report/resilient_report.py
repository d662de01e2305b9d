#!/usr/bin/env python3
"""resilient-report: a job's records in the formats people already use.

Reads what a job left behind -- blackbox snapshots (`resilient-inspect --json`
output, or raw `resilient-blackbox-<pid>` regions, read through
resilient-inspect), the restart loop's per-rank timelines (the demo's
`rank-<n>.json` or a bare timeline array), the monitor processes'
post-mortem dumps and their logs -- and writes:

  --chrome-trace FILE  one Trace Event Format file (chrome://tracing, Perfetto)
  --fr-dump DIR        PyTorch flight-recorder dumps, one pickle per rank
  --html FILE          one self-contained HTML page: timeline, faults, ranks
  --prometheus FILE    Prometheus text exposition (node-exporter textfile)
  --listen PORT        the same metrics on http://127.0.0.1:PORT/metrics

Without an output option it prints a summary. docs/observability.md says what
each format holds and how the clocks are merged. Python standard library
only.
"""

import argparse
import datetime
import html
import http.server
import json
import os
import pickle
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

PROGRAM = "resilient-report"
INSPECT = "resilient-inspect"

# ---------------------------------------------------------------------------
# Inputs
# ---------------------------------------------------------------------------

RAW_REGION_RE = re.compile(r"^resilient-blackbox-(\d+)$")
MONITOR_WATCH_RE = re.compile(r"rank (\d+): watching rank (\d+) \(pid (\d+)")
POST_MORTEM_RE = re.compile(r"^resilient-monitor-(-?\d+)-(\d+)\.postmortem\.json$")
LAST_NUMBER_RE = re.compile(r"(\d+)(?!.*\d)")


class InputError(Exception):
    """An input that cannot be used as asked (exit status 2)."""


class Process:
    """One process of the job (one rank): everything the inputs say about it."""

    def __init__(self, pid):
        self.pid = pid
        self.rank = None          # the rank it started with (the restart loop's initial rank)
        self.rank_source = None   # what told us the rank
        self.host = None
        self.outcome = None       # rank report: completed, discarded, aborted, error
        self.message = ""
        self.final_state = ""
        self.timeline = []        # [{iteration, phase, mono_ns, wall_ns, detail}], by time
        self.trainer_events = []  # [{iteration, event, step, mono_ns}]
        self.snapshot = None      # the newest blackbox snapshot
        self.faults = {}          # number -> fault (union over the snapshots read)
        self.post_mortem = None   # the monitor's dump, without its blackbox
        self.post_mortem_wall_ns = None  # when it was written (the file's time)
        self.sources = []
        self.offset_ns = None     # wall - mono, this process's clocks
        self.offset_source = None

    @property
    def label(self):
        return f"rank {self.rank}" if self.rank is not None else f"pid {self.pid}"

    def wall(self, mono_ns):
        """The wall-clock time of a CLOCK_MONOTONIC stamp of this process, or None."""
        if not mono_ns or self.offset_ns is None:
            return None
        return mono_ns + self.offset_ns

    def communicators(self):
        return (self.snapshot or {}).get("communicators") or []

    def connections(self):
        return (self.snapshot or {}).get("connections") or []

    def snapshot_mono_ns(self):
        """When the snapshot was current: the last heartbeat or communicator update."""
        s = self.snapshot or {}
        stamps = [s.get("heartbeat_mono_ns") or 0]
        stamps += [c.get("updated_mono_ns") or 0 for c in self.communicators()]
        return max(stamps) or None

    def real_faults(self):
        return [f for f in sorted(self.faults.values(), key=lambda f: f.get("number", 0))
                if not is_report_fault(f)]


def is_report_fault(f):
    """Report records in the fault ring (slow link, straggler) are findings, not faults."""
    return bool(f.get("report")) or f.get("class") in ("slow link", "straggler")


class Job:
    def __init__(self, name):
        self.name = name
        self.processes = {}   # pid -> Process
        self.reports = []     # slow links, stragglers: dicts with kind, text, ranks...
        self.comparisons = []  # resilient-inspect --compare --json communicators
        self.warnings = []
        self.sources = []

    def process(self, pid):
        if pid not in self.processes:
            self.processes[pid] = Process(pid)
        return self.processes[pid]

    def ordered(self):
        """Processes by rank (unknown ranks last, by pid)."""
        return sorted(self.processes.values(),
                      key=lambda p: (p.rank is None, p.rank if p.rank is not None else 0, p.pid))

    def by_pid(self, pid):
        return self.processes.get(pid)

    def warn(self, text):
        if text not in self.warnings:
            self.warnings.append(text)


def find_inspect(explicit):
    """resilient-inspect: --inspect, $RESILIENT_INSPECT, beside this script, on PATH."""
    candidates = []
    if explicit:
        candidates.append(explicit)
    if os.environ.get("RESILIENT_INSPECT"):
        candidates.append(os.environ["RESILIENT_INSPECT"])
    here = os.path.dirname(os.path.realpath(__file__))
    candidates.append(os.path.join(here, INSPECT))
    candidates.append(os.path.join(os.path.dirname(here), "inspect", INSPECT))
    for c in candidates:
        if os.path.isfile(c) and os.access(c, os.X_OK):
            return c
    found = shutil.which(INSPECT)
    if found:
        return found
    if explicit:
        raise InputError(f"--inspect {explicit}: not an executable file")
    return None


def read_raw_region(path, inspect):
    """A raw blackbox region as resilient-inspect --json renders it."""
    if inspect is None:
        raise InputError(f"{path} is a raw blackbox region: reading it needs {INSPECT} "
                         "(--inspect PATH, $RESILIENT_INSPECT or PATH)")
    try:
        p = subprocess.run([inspect, "--json", path], capture_output=True, text=True,
                           timeout=60, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise InputError(f"{inspect} --json {path}: {e}")
    if p.returncode != 0:
        raise InputError(f"{inspect} --json {path} exited with {p.returncode}: "
                         f"{(p.stderr or p.stdout).strip()}")
    try:
        return json.loads(p.stdout)
    except ValueError as e:
        raise InputError(f"{inspect} --json {path}: not JSON ({e})")


def classify(data):
    """What a parsed JSON input is."""
    if isinstance(data, list):
        if data and all(isinstance(e, dict) and "phase" in e and "mono_ns" in e for e in data):
            return "timeline"
        return None
    if not isinstance(data, dict):
        return None
    if "timeline" in data and "rank" in data:
        return "rank-report"
    if "blackbox" in data and "reason" in data and "rank" in data:
        return "post-mortem"
    if "connections" in data and "heartbeat_mono_ns" in data:
        return "snapshot"
    comms = data.get("communicators")
    if isinstance(comms, list) and comms and all(
            isinstance(c, dict) and "ranks" in c and "behind" in c for c in comms):
        return "comparison"
    if isinstance(data.get("reports"), list):
        return "reports"
    return None


def set_rank(proc, rank, source, job):
    if rank is None or rank < 0:
        return
    if proc.rank is not None and proc.rank != rank and proc.rank_source != "communicator":
        job.warn(f"pid {proc.pid}: {source} says rank {rank}, {proc.rank_source} said "
                 f"rank {proc.rank}; kept {proc.rank}")
        return
    proc.rank = rank
    proc.rank_source = source


def add_snapshot(job, snap, source):
    pid = snap.get("pid")
    if not isinstance(pid, int) or pid <= 0:
        job.warn(f"{source}: blackbox snapshot without a pid; skipped")
        return
    proc = job.process(pid)
    proc.sources.append(source)
    proc.host = proc.host or snap.get("host")
    for f in snap.get("faults") or []:
        key = f.get("number", len(proc.faults) + 1)
        proc.faults.setdefault(key, f)
    newer = proc.snapshot is None or snapshot_age_key(snap) >= snapshot_age_key(proc.snapshot)
    if newer:
        proc.snapshot = snap
    collect_reports(job, snap, source, proc)
    for c in snap.get("communicators") or []:
        collect_reports(job, c, source, proc)


def snapshot_age_key(snap):
    stamps = [snap.get("heartbeat_mono_ns") or 0]
    stamps += [c.get("updated_mono_ns") or 0 for c in snap.get("communicators") or []]
    return (max(stamps), len(snap.get("faults") or []))


def collect_reports(job, holder, source, proc=None):
    for r in holder.get("reports") or []:
        if isinstance(r, dict):
            r = dict(r)
            r.setdefault("_source", source)
            if proc is not None:
                r.setdefault("_reporter_pid", proc.pid)
            if r not in job.reports:
                job.reports.append(r)


def add_rank_report(job, data, source):
    rank = data.get("rank")
    pid = data.get("pid")
    if not isinstance(pid, int) or pid <= 0:
        # Older reports carry no pid: the rank stands for the process.
        pid = -(int(rank) + 1) if isinstance(rank, int) else None
    if pid is None:
        job.warn(f"{source}: rank report without rank or pid; skipped")
        return
    proc = job.process(pid)
    proc.sources.append(source)
    set_rank(proc, rank, "rank report", job)
    proc.outcome = data.get("outcome")
    proc.message = data.get("message") or ""
    proc.final_state = data.get("final_state") or ""
    proc.timeline = list(data.get("timeline") or [])
    proc.trainer_events = list(data.get("events") or [])
    collect_reports(job, data, source, proc)


def add_timeline(job, events, source):
    m = LAST_NUMBER_RE.search(os.path.basename(source))
    if not m:
        job.warn(f"{source}: a timeline without a rank in its file name; skipped")
        return
    rank = int(m.group(1))
    # A bare timeline names no process: its rank stands for it until a
    # record with a pid says more.
    proc = job.process(-(rank + 1))
    proc.sources.append(source)
    set_rank(proc, rank, "timeline file name", job)
    proc.timeline = list(events)


def add_post_mortem(job, data, source):
    pid = data.get("pid")
    if not isinstance(pid, int) or pid <= 0:
        job.warn(f"{source}: post-mortem without a pid; skipped")
        return
    proc = job.process(pid)
    proc.sources.append(source)
    set_rank(proc, data.get("rank"), "post-mortem", job)
    proc.post_mortem = {k: v for k, v in data.items() if k != "blackbox"}
    try:
        proc.post_mortem_wall_ns = int(os.stat(source).st_mtime_ns)
    except OSError:
        pass
    if isinstance(data.get("blackbox"), dict):
        add_snapshot(job, data["blackbox"], source)


def add_monitor_log(job, path):
    try:
        with open(path, errors="replace") as f:
            text = f.read()
    except OSError as e:
        job.warn(f"{path}: {e}")
        return
    for m in MONITOR_WATCH_RE.finditer(text):
        rank, pid = int(m.group(2)), int(m.group(3))
        proc = job.process(pid)
        set_rank(proc, rank, "monitor log", job)
        if path not in proc.sources:
            proc.sources.append(path)


def add_file(job, path, inspect, explicit):
    name = os.path.basename(path)
    if RAW_REGION_RE.match(name):
        add_snapshot(job, read_raw_region(path, inspect), path)
        job.sources.append(path)
        return True
    if name.startswith("monitor-") and name.endswith(".log"):
        add_monitor_log(job, path)
        job.sources.append(path)
        return True
    if not name.endswith(".json") and not explicit:
        return False
    try:
        with open(path, errors="replace") as f:
            data = json.load(f)
    except (OSError, ValueError) as e:
        if explicit:
            raise InputError(f"{path}: not readable JSON ({e})")
        job.warn(f"{path}: not readable JSON ({e}); skipped")
        return False
    kind = classify(data)
    if kind is None:
        if explicit:
            raise InputError(f"{path}: not a record {PROGRAM} knows (rank report, timeline, "
                             "blackbox snapshot, post-mortem, comparison, reports)")
        return False
    job.sources.append(path)
    if kind == "rank-report":
        add_rank_report(job, data, path)
    elif kind == "timeline":
        add_timeline(job, data, path)
    elif kind == "post-mortem":
        add_post_mortem(job, data, path)
    elif kind == "snapshot":
        add_snapshot(job, data, path)
    elif kind == "comparison":
        job.comparisons.extend(data["communicators"])
        collect_reports(job, data, path)
    elif kind == "reports":
        collect_reports(job, data, path)
    return True


def job_dirs_below(path):
    """Subdirectories of `path` that hold records of a job of their own."""
    found = []
    for name in sorted(os.listdir(path)):
        sub = os.path.join(path, name)
        if os.path.isdir(sub) and any(
                re.match(r"^rank-\d+\.json$", f) or POST_MORTEM_RE.match(f)
                for f in os.listdir(sub)):
            found.append(name)
    return found


def load_job(paths, inspect=None, name=None):
    """Reads every input into one Job."""
    if not paths:
        raise InputError("no input: name files or directories of a job's records")
    job = Job(name or job_name(paths))
    for path in paths:
        if os.path.isdir(path):
            used = 0
            for entry in sorted(os.listdir(path)):
                full = os.path.join(path, entry)
                if os.path.isfile(full):
                    try:
                        used += add_file(job, full, inspect, explicit=False)
                    except InputError as e:
                        job.warn(str(e))
            if used == 0:
                below = job_dirs_below(path)
                if len(below) > 1:
                    raise InputError(f"{path} holds the records of several jobs "
                                     f"({', '.join(below)}): name one")
                if len(below) == 1:
                    return load_job([os.path.join(path, below[0])] + [
                        p for p in paths if p != path], inspect, name)
                job.warn(f"{path}: no records found")
        elif os.path.exists(path):
            add_file(job, path, inspect, explicit=True)
        else:
            raise InputError(f"{path}: no such file or directory")
    infer_ranks(job)
    merge_pidless(job)
    check_ranks(job)
    for proc in job.processes.values():
        proc.timeline.sort(key=lambda e: (e.get("mono_ns") or 0))
        estimate_offset(job, proc)
        # One clock per process: its phases placed like its operations, by
        # their monotonic stamps (a wall-clock step cannot reorder them).
        for e in proc.timeline:
            if e.get("mono_ns") and proc.offset_ns is not None:
                e["wall_ns_recorded"] = e.get("wall_ns")
                e["wall_ns"] = proc.wall(e["mono_ns"])
    if not job.processes:
        job.warn("no process found in the inputs")
    return job


def job_name(paths):
    for p in paths:
        if os.path.isdir(p):
            return os.path.basename(os.path.normpath(os.path.abspath(p)))
    return "job"


def merge_pidless(job):
    """A timeline or report without a pid joins the process of the same rank."""
    for key in [k for k in job.processes if k < 0]:
        stub = job.processes[key]
        real = [p for p in job.processes.values()
                if p.pid > 0 and p.rank is not None and p.rank == stub.rank]
        if len(real) == 1 and real[0].rank_source == "communicator":
            # The rank the stub's record states is the process's rank: it was
            # only its communicator's rank so far.
            real[0].rank_source = stub.rank_source
        if len(real) != 1:
            continue
        target = real[0]
        target.timeline = target.timeline or stub.timeline
        target.trainer_events = target.trainer_events or stub.trainer_events
        target.outcome = target.outcome or stub.outcome
        target.message = target.message or stub.message
        target.final_state = target.final_state or stub.final_state
        target.sources.extend(stub.sources)
        del job.processes[key]


def infer_ranks(job):
    """A process no record gave a rank: its rank in its (first) communicator."""
    for proc in job.processes.values():
        if proc.rank is not None:
            continue
        comms = sorted(proc.communicators(), key=lambda c: c.get("init_wall_ns") or 0)
        for c in comms:
            if isinstance(c.get("rank"), int) and c["rank"] >= 0:
                proc.rank = c["rank"]
                proc.rank_source = "communicator"
                break


def check_ranks(job):
    seen = {}
    for proc in job.processes.values():
        if proc.rank is None:
            continue
        if proc.rank in seen:
            job.warn(f"rank {proc.rank} names two processes (pids {seen[proc.rank]} and "
                     f"{proc.pid}): are these records of one job?")
        seen[proc.rank] = proc.pid


def estimate_offset(job, proc):
    """wall - mono for this process, from every (mono, wall) pair its records hold."""
    pairs = []
    for e in proc.timeline:
        if e.get("mono_ns") and e.get("wall_ns"):
            pairs.append(e["wall_ns"] - e["mono_ns"])
    s = proc.snapshot or {}
    if s.get("heartbeat_mono_ns") and s.get("heartbeat_wall_ns"):
        pairs.append(s["heartbeat_wall_ns"] - s["heartbeat_mono_ns"])
    for f in proc.faults.values():
        if f.get("mono_ns") and f.get("wall_ns"):
            pairs.append(f["wall_ns"] - f["mono_ns"])
    if pairs:
        proc.offset_ns = int(statistics.median(pairs))
        proc.offset_source = f"median of {len(pairs)} (mono, wall) pairs of its records"
        return
    needs = bool(proc.trainer_events) or any(
        c.get("flight_recorder") or c.get("oldest_in_flight") for c in proc.communicators())
    if not needs:
        return
    if proc.host and proc.host == socket.gethostname():
        # CLOCK_MONOTONIC counts from this host's boot: the reader's own
        # offset holds unless the host rebooted or its wall clock was stepped.
        proc.offset_ns = time.time_ns() - time.monotonic_ns()
        proc.offset_source = "this host's clocks now (the records hold no (mono, wall) pair)"
        job.warn(f"{proc.label} (pid {proc.pid}): no (mono, wall) pair in its records; "
                 "its monotonic times were converted with this host's clocks now")
    else:
        job.warn(f"{proc.label} (pid {proc.pid}): no (mono, wall) pair in its records and "
                 "another host: its operations and trainer events are left out of the timelines")


# ---------------------------------------------------------------------------
# What the formats share: operations, phases, restarts
# ---------------------------------------------------------------------------

SETUP_PHASES = {"monitor process", "started", "initial barrier", "assigned",
                "communicators ready", "reassigned"}
RECOVERY_PHASES = {"fault detected", "abort begun", "abort done", "finalized", "health checked",
                   "iteration barrier", "culprits", "back-off"}
END_PHASES = {"function returned", "completion decided", "completed", "terminated"}


def phase_category(frm, to, detail=""):
    if frm == "function entered":
        return "running"
    if frm == "assigned" and "inactive" in (detail or ""):
        return "spare"
    if to in RECOVERY_PHASES or frm in RECOVERY_PHASES:
        return "recovery"
    if to in END_PHASES or frm in END_PHASES:
        return "ending"
    return "setup"


def phase_spans(proc):
    """(from event, to event, category) between consecutive phases, by time."""
    tl = [e for e in proc.timeline if e.get("wall_ns")]
    return [(a, b, phase_category(a.get("phase"), b.get("phase"), a.get("detail")))
            for a, b in zip(tl, tl[1:])]


def operations(proc):
    """(communicator, op, in_flight) for every operation the blackbox holds: the flight
    recorder's entries, then the oldest operation in flight when the ring lacks it."""
    out = []
    for c in proc.communicators():
        ring = list(c.get("flight_recorder") or [])
        indices = {op.get("op_index") for op in ring}
        for op in ring:
            out.append((c, op, op.get("state") not in ("completed", "abandoned")))
        oldest = c.get("oldest_in_flight")
        if isinstance(oldest, dict) and oldest.get("op_index") not in indices:
            out.append((c, oldest, True))
    return out


def op_end_mono(proc, c, op):
    """(end, why) of an operation on the CLOCK_MONOTONIC: its completion; for an operation
    abandoned with its communicator, the communicator's last update (its finalization);
    for one still in flight, the snapshot's time."""
    begin = op.get("enqueue_mono_ns") or 0
    if op.get("end_mono_ns"):
        return op["end_mono_ns"], "completed"
    if op.get("state") == "abandoned":
        updated = c.get("updated_mono_ns") or 0
        return max(begin, updated), "abandoned: until its communicator's last update"
    return max(begin, proc.snapshot_mono_ns() or 0), "snapshot time (still in flight)"


def restarts(job):
    """Iteration boundaries: [{iteration, wall_ns, culprits, detected_wall_ns, detected}]."""
    first = {}
    culprits = {}
    detected = {}
    for proc in job.processes.values():
        for e in proc.timeline:
            it, wall = e.get("iteration", 0), e.get("wall_ns")
            if not wall:
                continue
            if it not in first or wall < first[it]:
                first[it] = wall
            if e.get("phase") == "culprits" and e.get("detail"):
                culprits.setdefault(it, e["detail"])
            if e.get("phase") == "fault detected":
                if it not in detected or wall < detected[it][0]:
                    detected[it] = (wall, f"{proc.label}: {e.get('detail', '')}")
    out = []
    for it in sorted(first):
        if it == 0:
            continue
        d = detected.get(it - 1)
        out.append({"iteration": it, "wall_ns": first[it], "culprits": culprits.get(it - 1, ""),
                    "detected_wall_ns": d[0] if d else None, "detected": d[1] if d else ""})
    return out


def fault_rows(job):
    """Every fault of the job by time: (wall_ns or None, process, kind, class, text)."""
    rows = []
    for proc in job.processes.values():
        for f in proc.real_faults():
            wall = f.get("wall_ns") or proc.wall(f.get("mono_ns"))
            rows.append((wall, proc, "blackbox", f.get("class", "?"), f.get("text", "")))
        if proc.post_mortem:
            pm = proc.post_mortem
            text = (f"{pm.get('reason', '')}: {pm.get('detail', '')} "
                    f"(iteration {pm.get('iteration')}, phase {pm.get('phase')})")
            rows.append((proc.post_mortem_wall_ns, proc, "monitor", "rank ended", text))
    rows.sort(key=lambda r: (r[0] is None, r[0] or 0))
    return rows


def report_ranks(job, r):
    """The ranks a report names."""
    ranks = []
    if isinstance(r.get("ranks"), list):
        ranks = [x for x in r["ranks"] if isinstance(x, int)]
    elif isinstance(r.get("rank"), int):
        ranks = [r["rank"]]
    elif isinstance(r.get("subject"), dict) and isinstance(r["subject"].get("rank"), int):
        ranks = [r["subject"]["rank"]]
    elif r.get("_reporter_pid") is not None:
        proc = job.by_pid(r["_reporter_pid"])
        if proc is not None and proc.rank is not None:
            ranks = [proc.rank]
    return ranks


def all_reports(job):
    """Reports from the inputs' report lists and from the fault rings (report records)."""
    out = list(job.reports)
    for proc in job.processes.values():
        for f in sorted(proc.faults.values(), key=lambda f: f.get("number", 0)):
            if is_report_fault(f):
                out.append({"kind": f.get("class"), "text": f.get("text", ""),
                            "wall_ns": f.get("wall_ns"), "comm_id": f.get("comm_id"),
                            "_reporter_pid": proc.pid})
    return out


def peer_name(job, conn):
    """The peer of a connection: its rank when the job knows its process."""
    peer_pid = conn.get("peer_pid")
    proc = job.by_pid(peer_pid) if peer_pid else None
    if proc is not None and proc.rank is not None:
        return str(proc.rank)
    if peer_pid:
        return f"{conn.get('peer_host') or '?'}:{peer_pid}"
    return conn.get("peer") or "?"


def comm_hex(c):
    return c.get("comm_hex") or f"0x{int(c.get('comm_id', 0)):016x}"


def us(ns):
    """Wall-clock nanoseconds to the Trace Event Format's microseconds: whole ones,
    since a double holds an epoch time to a quarter microsecond only; a duration is
    the difference of two such stamps, so that slices that touch still touch."""
    return int(ns) // 1000


def iso(wall_ns):
    if not wall_ns:
        return "-"
    dt = datetime.datetime.fromtimestamp(wall_ns / 1e9, tz=datetime.timezone.utc)
    return dt.strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + " UTC"


# ---------------------------------------------------------------------------
# Chrome trace (Trace Event Format)
# ---------------------------------------------------------------------------

TID_LOOP, TID_TRAINER, TID_FAULTS, TID_PROCESS, TID_COMM0 = 1, 2, 3, 4, 100
JOB_PID = 0
UNKNOWN_RANK_PID0 = 100000
PHASE_COLOR = {"running": "good", "recovery": "bad", "setup": "grey", "ending": "olive",
               "spare": "white"}
OP_STATE_COLOR = {"hung": "terrible", "running": "bad", "enqueued": "yellow",
                  "abandoned": "black"}


def trace_pid(proc, unknown_index):
    if proc.rank is not None:
        return proc.rank + 1  # pid 0 is the job's own track
    return UNKNOWN_RANK_PID0 + unknown_index


def meta(pid, tid, name, args):
    return {"name": name, "ph": "M", "pid": pid, "tid": tid, "args": args}


def op_args(c, op, in_flight):
    args = {k: op.get(k) for k in (
        "op_index", "coll_index", "seq_number", "kind", "state", "datatype", "count", "bytes",
        "algo", "proto", "n_channels", "channels_started", "channels_done", "stuck_channels",
        "proxy_ops", "last_step_state", "queued_us", "run_us", "gpu_us") if k in op}
    if "root" in op:
        args["root"] = op["root"]
    if "peer" in op:
        args["peer"] = op["peer"]
    args["communicator"] = comm_hex(c)
    if in_flight:
        args["in_flight_at_snapshot"] = True
    return args


def chrome_trace(job):
    ev = []
    restart_list = restarts(job)
    ev.append(meta(JOB_PID, 0, "process_name", {"name": f"job {job.name}"}))
    ev.append(meta(JOB_PID, 0, "process_sort_index", {"sort_index": -1}))
    ev.append(meta(JOB_PID, 1, "thread_name", {"name": "restarts"}))
    for r in restart_list:
        args = {"iteration": r["iteration"], "culprits": r["culprits"],
                "first fault detected": r["detected"]}
        ev.append({"name": f"restart: iteration {r['iteration']}", "cat": "restart", "ph": "i",
                   "s": "g", "ts": us(r["wall_ns"]), "pid": JOB_PID, "tid": 1, "args": args})
        if r["detected_wall_ns"]:
            ev.append({"name": f"fault detected (iteration {r['iteration'] - 1})",
                       "cat": "fault", "ph": "i", "s": "g", "ts": us(r["detected_wall_ns"]),
                       "pid": JOB_PID, "tid": 1, "args": {"detail": r["detected"]}})
    unknown = 0
    for proc in job.ordered():
        pid = trace_pid(proc, unknown)
        if proc.rank is None:
            unknown += 1
        ev.extend(process_events(job, proc, pid))
    ev.sort(key=lambda e: (e["ph"] != "M", e.get("ts", 0)))
    return {
        "traceEvents": ev,
        "displayTimeUnit": "ms",
        "otherData": {
            "generator": PROGRAM,
            "job": job.name,
            "clock": "CLOCK_REALTIME of each host, microseconds since the Unix epoch; "
                     "CLOCK_MONOTONIC stamps converted per process with its (mono, wall) pairs",
            "processes": len(job.processes),
            "warnings": job.warnings,
        },
    }


def process_events(job, proc, pid):
    ev = []
    name = f"{proc.label} ({proc.host or '?'}, {proc.pid if proc.pid > 0 else '?'})"
    ev.append(meta(pid, 0, "process_name", {"name": name}))
    ev.append(meta(pid, 0, "process_sort_index",
                   {"sort_index": proc.rank if proc.rank is not None else 10 ** 6 + proc.pid}))
    labels = {"outcome": proc.outcome or "", "final state": proc.final_state or ""}
    text = ", ".join(f"{k}: {v}" for k, v in labels.items() if v)
    if text:
        ev.append(meta(pid, 0, "process_labels", {"labels": text}))
    threads = [(TID_LOOP, "restart loop"), (TID_TRAINER, "trainer"), (TID_FAULTS, "faults"),
               (TID_PROCESS, "process")]
    for i, (tid, tname) in enumerate(threads):
        ev.append(meta(pid, tid, "thread_name", {"name": tname}))
        ev.append(meta(pid, tid, "thread_sort_index", {"sort_index": i}))
    # The restart loop: spans between consecutive phases, an instant at each.
    for a, b, cat in phase_spans(proc):
        name_ = "running" if cat == "running" else f"{a['phase']} \u2192 {b['phase']}"
        ev.append({"name": name_, "cat": f"restart.{cat}", "ph": "X", "ts": us(a["wall_ns"]),
                   "dur": max(0, us(b["wall_ns"]) - us(a["wall_ns"])), "pid": pid, "tid": TID_LOOP,
                   "cname": PHASE_COLOR[cat],
                   "args": {"iteration": a.get("iteration"), "from": a.get("phase"),
                            "to": b.get("phase"), "detail": b.get("detail", "")}})
    previous_iteration = None
    for e in proc.timeline:
        if not e.get("wall_ns"):
            continue
        it = e.get("iteration", 0)
        if previous_iteration is not None and it != previous_iteration:
            ev.append({"name": f"iteration {it}", "cat": "restart", "ph": "i", "s": "p",
                       "ts": us(e["wall_ns"]), "pid": pid, "tid": TID_LOOP,
                       "args": {"iteration": it}})
        previous_iteration = it
        ev.append({"name": e.get("phase", "?"), "cat": "restart.phase", "ph": "i", "s": "t",
                   "ts": us(e["wall_ns"]), "pid": pid, "tid": TID_LOOP,
                   "args": {"iteration": it, "detail": e.get("detail", "")}})
        if e.get("phase") == "fault detected":
            ev.append({"name": "fault detected", "cat": "fault", "ph": "i", "s": "p",
                       "ts": us(e["wall_ns"]), "pid": pid, "tid": TID_FAULTS,
                       "args": {"iteration": it, "detail": e.get("detail", "")}})
    for t in proc.trainer_events:
        wall = proc.wall(t.get("mono_ns"))
        if wall:
            ev.append({"name": t.get("event", "?"), "cat": "trainer", "ph": "i", "s": "t",
                       "ts": us(wall), "pid": pid, "tid": TID_TRAINER,
                       "args": {"iteration": t.get("iteration"), "step": t.get("step")}})
    for f in proc.real_faults():
        wall = f.get("wall_ns") or proc.wall(f.get("mono_ns"))
        if not wall:
            continue
        args = {k: v for k, v in f.items() if k not in ("wall_ns", "mono_ns")}
        ev.append({"name": f"fault: {f.get('class', '?')}", "cat": "fault", "ph": "i", "s": "p",
                   "ts": us(wall), "pid": pid, "tid": TID_FAULTS, "args": args})
    for r in all_reports(job):
        if r.get("_reporter_pid") == proc.pid and r.get("wall_ns"):
            ev.append({"name": f"report: {r.get('kind', '?')}", "cat": "report", "ph": "i",
                       "s": "p", "ts": us(r["wall_ns"]), "pid": pid, "tid": TID_FAULTS,
                       "args": {"text": r.get("text", ""), "ranks": report_ranks(job, r)}})
    s = proc.snapshot or {}
    if s.get("start_wall_ns"):
        ev.append({"name": "blackbox created", "cat": "process", "ph": "i", "s": "t",
                   "ts": us(s["start_wall_ns"]), "pid": pid, "tid": TID_PROCESS,
                   "args": {"path": s.get("path", "")}})
    if s.get("heartbeat_wall_ns"):
        ev.append({"name": "last heartbeat", "cat": "process", "ph": "i", "s": "t",
                   "ts": us(s["heartbeat_wall_ns"]), "pid": pid, "tid": TID_PROCESS,
                   "args": {"process_alive": s.get("process_alive")}})
    if proc.post_mortem and proc.post_mortem_wall_ns:
        pm = proc.post_mortem
        ev.append({"name": f"rank ended: {pm.get('reason', '?')}", "cat": "fault", "ph": "i",
                   "s": "p", "ts": us(proc.post_mortem_wall_ns), "pid": pid, "tid": TID_FAULTS,
                   "args": {"detail": pm.get("detail", ""), "iteration": pm.get("iteration"),
                            "phase": pm.get("phase"),
                            "time": "when the monitor wrote its post-mortem dump"}})
    ev.extend(op_events(proc, pid))
    return ev


def op_events(proc, pid):
    """The operations as X events, one thread per communicator; operations that
    overlap (a grouped send and receive, work enqueued ahead) go to further
    lanes of their communicator, since slices on one thread must nest."""
    by_comm = {}
    for c, op, in_flight in operations(proc):
        begin = proc.wall(op.get("enqueue_mono_ns"))
        if not begin:
            continue
        end = proc.wall(op_end_mono(proc, c, op)[0])
        by_comm.setdefault(comm_hex(c), []).append((begin, max(begin, end), c, op, in_flight))
    ev = []
    next_tid = TID_COMM0
    for cid, ops in by_comm.items():
        ops.sort(key=lambda o: (o[0], -o[1]))
        lanes = []  # [tid, end of its last slice]
        for begin, end, c, op, in_flight in ops:
            lane = next((ln for ln in lanes if ln[1] <= begin), None)
            if lane is None:
                tid = next_tid
                next_tid += 1
                label = f"NCCL {cid}" + (f" {c['name']}" if c.get("name") else "")
                label += f" (rank {c.get('rank')}/{c.get('nranks')})"
                if lanes:
                    label += f" lane {len(lanes) + 1}"
                ev.append(meta(pid, tid, "thread_name", {"name": label}))
                ev.append(meta(pid, tid, "thread_sort_index", {"sort_index": tid}))
                lane = [tid, end]
                lanes.append(lane)
            lane[1] = end
            ev.extend(op_event(proc, pid, lane[0], c, op, in_flight, begin, end))
    return ev


def op_event(proc, pid, tid, c, op, in_flight, begin, end):
    args = op_args(c, op, in_flight)
    name = op.get("func", "?")
    cat = "nccl." + op.get("kind", "op")
    x = {"name": name, "cat": cat, "ph": "X", "ts": us(begin), "dur": us(end) - us(begin),
         "pid": pid, "tid": tid, "args": args}
    if op.get("end_mono_ns"):
        return [x]
    args["until"] = op_end_mono(proc, c, op)[1]
    x["name"] = f"{name} ({op.get('state', 'in flight')})"
    x["cname"] = OP_STATE_COLOR.get(op.get("state"), "bad")
    out = [x]
    if in_flight:
        out.append({"name": f"in flight: {name} #{op.get('coll_index') or op.get('op_index')}",
                    "cat": cat, "ph": "i", "s": "t", "ts": us(begin), "pid": pid, "tid": tid,
                    "args": {"state": op.get("state")}})
    return out


# ---------------------------------------------------------------------------
# PyTorch flight-recorder dump
# ---------------------------------------------------------------------------

FR_VERSION = "2.10"
FR_PREFIX = "nccl_trace_rank_"
FR_COLLECTIVES = {"Broadcast": "broadcast", "Reduce": "reduce", "AllGather": "all_gather",
                  "ReduceScatter": "reduce_scatter", "AllReduce": "all_reduce",
                  "AlltoAll": "all_to_all", "Scatter": "scatter", "Gather": "gather"}
FR_DTYPES = {"ncclInt8": "Char", "ncclChar": "Char", "ncclUint8": "Byte", "ncclInt32": "Int",
             "ncclInt": "Int", "ncclUint32": "UInt32", "ncclInt64": "Long",
             "ncclUint64": "UInt64", "ncclFloat16": "Half", "ncclHalf": "Half",
             "ncclFloat32": "Float", "ncclFloat": "Float", "ncclFloat64": "Double",
             "ncclDouble": "Double", "ncclBfloat16": "BFloat16",
             "ncclFloat8e4m3": "Float8_e4m3fn", "ncclFloat8e5m2": "Float8_e5m2"}


def fr_sizes(func, count, nranks):
    """(input_sizes, output_sizes) of one tensor each, as PyTorch records them."""
    n = max(1, nranks or 1)
    if func == "AllGather":
        return [[count]], [[count * n]]
    if func == "ReduceScatter":
        return [[count * n]], [[count]]
    if func == "Scatter":
        return [[count * n]], [[count]]
    if func == "Gather":
        return [[count]], [[count * n]]
    return [[count]], [[count]]


def fr_groups(job):
    """Every communicator of the job as a process group: comm hex -> (pg_id, desc, ranks),
    ranks being the dump ranks (the processes' ranks) ordered by communicator rank."""
    comms = {}
    for proc in job.processes.values():
        for c in proc.communicators():
            cid = comm_hex(c)
            entry = comms.setdefault(cid, {"init": c.get("init_wall_ns") or 0, "members": {},
                                           "nranks": c.get("nranks") or 0,
                                           "name": c.get("name") or ""})
            stamps = [v for v in (entry["init"], c.get("init_wall_ns")) if v]
            entry["init"] = min(stamps) if stamps else 0
            if isinstance(c.get("rank"), int) and c["rank"] >= 0 and proc.rank is not None:
                entry["members"][c["rank"]] = proc.rank
    groups = {}
    for i, (cid, e) in enumerate(sorted(comms.items(), key=lambda kv: (kv[1]["init"], kv[0]))):
        ranks = [e["members"][r] for r in sorted(e["members"])]
        if len(ranks) < e["nranks"]:
            job.warn(f"communicator {cid}: records of {len(ranks)} of its {e['nranks']} ranks; "
                     "its process group lists only those")
        if ranks != sorted(ranks):
            job.warn(f"communicator {cid}: its ranks are not in the order of the processes' "
                     "ranks; the analyzer's peer numbering of send/recv will not match")
        groups[cid] = (i, e["name"] or "undefined", ranks)
    return groups


def fr_entries(job, proc, groups, timeout_ms):
    """The process's operations as flight-recorder entries, oldest first."""
    rows = []
    skipped = set()
    dropped_before = 0
    for c in proc.communicators():
        ops = sorted([(op, fl) for cc, op, fl in operations(proc) if cc is c],
                     key=lambda x: x[0].get("op_index", 0))
        if not ops:
            continue
        dropped_before += max(0, ops[0][0].get("op_index", 1) - 1)
        first_coll = next((op.get("coll_index") for op, _ in ops if op.get("coll_index")), None)
        colls_before = (first_coll - 1) if first_coll else (c.get("coll_enqueued") or 0)
        for op, in_flight in ops:
            func = op.get("func", "")
            if op.get("kind") == "coll" and op.get("coll_index"):
                colls_before = op["coll_index"]
            entry = fr_entry(proc, c, op, in_flight, groups, colls_before, timeout_ms)
            if entry is None:
                skipped.add(func)
                continue
            rows.append((op.get("enqueue_mono_ns") or 0, entry))
    if skipped:
        job.warn(f"{proc.label}: operations of {', '.join(sorted(skipped))} have no PyTorch "
                 "flight-recorder name; left out of its dump")
    rows.sort(key=lambda r: r[0])
    entries = [e for _, e in rows]
    for i, e in enumerate(entries):
        e["record_id"] = dropped_before + i
    return entries


def fr_entry(proc, c, op, in_flight, groups, colls_before, timeout_ms):
    func = op.get("func", "")
    cid = comm_hex(c)
    pg_id, desc, _ = groups[cid]
    rank, nranks = c.get("rank"), c.get("nranks") or 0
    is_p2p = op.get("kind") == "p2p"
    if is_p2p:
        peer = op.get("peer")
        if func == "Send":
            name = f"nccl:send {rank}->{peer}"
        elif func == "Recv":
            name = f"nccl:recv {rank}<-{peer}"
        else:
            return None
        p2p_seq = (op.get("op_index") or 0) - colls_before
        coll_seq = colls_before
    else:
        if func not in FR_COLLECTIVES:
            return None
        name = "nccl:" + FR_COLLECTIVES[func]
        coll_seq = op.get("coll_index") or 0
        p2p_seq = (op.get("op_index") or 0) - coll_seq
    count = op.get("count") or 0
    inputs, outputs = fr_sizes(func, count, nranks)
    dtype = FR_DTYPES.get(op.get("datatype", ""), op.get("datatype", "") or "Byte")
    created = proc.wall(op.get("enqueue_mono_ns"))
    started = proc.wall(op.get("start_mono_ns"))
    completed = proc.wall(op.get("end_mono_ns"))
    state = op.get("state")
    if state == "completed" and completed:
        fr_state = "completed"
    elif started:
        fr_state = "started"
    else:
        fr_state = "scheduled"
    entry = {
        "record_id": 0,  # set by the caller: the order over all communicators
        "pg_id": pg_id,
        "process_group": (cid, desc),
        "thread_name": "",
        "thread_id": "",
        "collective_seq_id": coll_seq,
        "p2p_seq_id": p2p_seq,
        "op_id": op.get("op_index") or 0,
        "profiling_name": name,
        "time_created_ns": int(created or 0),
        "input_sizes": inputs,
        "input_dtypes": [dtype],
        "output_sizes": outputs,
        "output_dtypes": [dtype],
        "state": fr_state,
        "time_discovered_started_ns": int(started) if started else None,
        "time_discovered_completed_ns": int(completed) if fr_state == "completed" else None,
        "retired": state in ("completed", "abandoned"),
        "timeout_ms": timeout_ms,
        "is_p2p": is_p2p,
        "frames": [],
    }
    gpu_us, run_us = op.get("gpu_us"), op.get("run_us")
    if fr_state == "completed" and (gpu_us or run_us) is not None:
        entry["duration_ms"] = float(gpu_us if gpu_us else run_us) / 1000.0
    return entry


def fr_dumps(job, timeout_ms=0, version=FR_VERSION):
    """{dump rank: the dump dict} for every process with a rank."""
    groups = fr_groups(job)
    pg_config = {cid: {"name": cid, "desc": desc, "ranks": str(ranks)}
                 for cid, (_, desc, ranks) in groups.items()}
    dumps = {}
    for proc in job.ordered():
        if proc.rank is None:
            job.warn(f"pid {proc.pid}: no rank known; no flight-recorder dump")
            continue
        status = {}
        for c in sorted(proc.communicators(), key=lambda c: groups[comm_hex(c)][0]):
            pg_id = groups[comm_hex(c)][0]
            status[str(pg_id)] = {
                "last_enqueued_collective": c.get("coll_enqueued") or -1,
                "last_started_collective": c.get("coll_started") or -1,
                "last_completed_collective": c.get("coll_completed") or -1,
            }
        dumps[proc.rank] = {
            "version": version,
            "comm_lib_version": "",
            "pg_config": pg_config,
            "pg_status": status,
            "entries": fr_entries(job, proc, groups, timeout_ms),
        }
    return dumps


def write_fr_dumps(job, directory, prefix=FR_PREFIX, timeout_ms=0, version=FR_VERSION):
    os.makedirs(directory, exist_ok=True)
    written = []
    for rank, dump in fr_dumps(job, timeout_ms, version).items():
        path = os.path.join(directory, f"{prefix}{rank}")
        write_atomically(path, pickle.dumps(dump, protocol=2))
        written.append(path)
    return written


# ---------------------------------------------------------------------------
# Prometheus text exposition
# ---------------------------------------------------------------------------

def prom_escape(value):
    return str(value).replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def prom_help(text):
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def prom_number(v):
    if isinstance(v, bool):
        return "1" if v else "0"
    if isinstance(v, int):
        return str(v)
    return repr(float(v))


class Families:
    """Metric families in the order first declared; samples with equal labels add up."""

    def __init__(self):
        self.families = {}

    def add(self, name, kind, help_, labels, value):
        fam = self.families.setdefault(name, {"kind": kind, "help": help_, "samples": {}})
        key = tuple(sorted(labels.items()))
        fam["samples"][key] = fam["samples"].get(key, 0) + value

    def declare(self, name, kind, help_):
        self.families.setdefault(name, {"kind": kind, "help": help_, "samples": {}})

    def text(self):
        out = []
        for name, fam in self.families.items():
            out.append(f"# HELP {name} {prom_help(fam['help'])}")
            out.append(f"# TYPE {name} {fam['kind']}")
            sample_name = name
            for key, value in fam["samples"].items():
                labels = ",".join(f'{k}="{prom_escape(v)}"' for k, v in key)
                out.append(f"{sample_name}{{{labels}}} {prom_number(value)}" if labels
                           else f"{sample_name} {prom_number(value)}")
        return "\n".join(out) + "\n"


def rank_label(proc):
    return str(proc.rank) if proc.rank is not None else f"pid:{proc.pid}"


def prometheus_text(job):
    m = Families()
    P = "nccl_resilient_"
    m.declare(P + "process_alive", "gauge",
              "1 while the rank's process runs (as its blackbox snapshot says), else 0.")
    m.declare(P + "connection_bytes_total", "counter",
              "Bytes the net plugin completed on the connections to a peer.")
    m.declare(P + "connection_requests_total", "counter",
              "Requests the net plugin completed on the connections to a peer.")
    m.declare(P + "connection_outstanding_requests", "gauge",
              "Requests posted to a peer and not completed at the snapshot.")
    m.declare(P + "connection_outstanding_bytes", "gauge",
              "Bytes of the requests posted to a peer and not completed at the snapshot.")
    m.declare(P + "faults_total", "counter",
              "Faults the rank's plugins recorded, by fault class (the blackbox's fault ring).")
    m.declare(P + "operations_completed_total", "counter",
              "NCCL operations completed on a communicator (profiler), by kind.")
    m.declare(P + "operations_in_flight", "gauge",
              "NCCL operations enqueued and not completed on a communicator at the snapshot.")
    for proc in job.ordered():
        r = rank_label(proc)
        s = proc.snapshot
        if s is not None:
            # A post-mortem dump says the process ended, whatever its last snapshot said.
            alive = bool(s.get("process_alive")) and proc.post_mortem is None
            m.add(P + "process_alive", "gauge", "", {"rank": r, "host": proc.host or "",
                                                     "pid": str(proc.pid)}, 1 if alive else 0)
            if s.get("heartbeat_wall_ns"):
                m.add(P + "heartbeat_timestamp_seconds", "gauge",
                      "Wall-clock time of the rank's last plugin heartbeat.", {"rank": r},
                      s["heartbeat_wall_ns"] / 1e9)
            m.add(P + "faults_recorded_total", "counter",
                  "Faults and reports the rank's plugins numbered (the ring keeps the last ones).",
                  {"rank": r}, s.get("fault_count") or 0)
        for c in proc.connections():
            lab = {"rank": r, "peer": peer_name(job, c), "direction": c.get("direction", "?"),
                   "comm": comm_hex(c)}
            m.add(P + "connection_bytes_total", "counter", "", lab, c.get("completed_bytes") or 0)
            m.add(P + "connection_requests_total", "counter", "", lab,
                  c.get("completed_requests") or 0)
            m.add(P + "connection_outstanding_requests", "gauge", "", lab,
                  c.get("outstanding_requests") or 0)
            m.add(P + "connection_outstanding_bytes", "gauge", "", lab,
                  c.get("outstanding_bytes") or 0)
            if c.get("busy_ns") is not None:
                m.add(P + "connection_busy_seconds_total", "counter",
                      "Time requests to the peer were outstanding, as the watchdog samples it.",
                      lab, c["busy_ns"] / 1e9)
            if c.get("rtt_ns"):
                m.add(P + "connection_rtt_seconds", "gauge",
                      "The last liveness heartbeat round trip to the peer process.", lab,
                      c["rtt_ns"] / 1e9)
        for f in proc.real_faults():
            m.add(P + "faults_total", "counter", "", {"rank": r, "class": f.get("class", "?")}, 1)
        for c in proc.communicators():
            lab = {"rank": r, "comm": comm_hex(c)}
            m.add(P + "operations_completed_total", "counter", "", dict(lab, kind="collective"),
                  c.get("coll_completed") or 0)
            m.add(P + "operations_completed_total", "counter", "", dict(lab, kind="p2p"),
                  c.get("p2p_completed") or 0)
            m.add(P + "operations_in_flight", "gauge", "", lab, c.get("in_flight") or 0)
            m.add(P + "communicator_dropped_events_total", "counter",
                  "Profiler events the plugin could not track on the communicator.", lab,
                  c.get("dropped_events") or 0)
        if proc.timeline:
            iterations = max(e.get("iteration", 0) for e in proc.timeline)
            m.add(P + "restarts_total", "counter",
                  "Restarts of the job the rank took part in (its last iteration).",
                  {"rank": r}, iterations)
        if proc.outcome:
            m.add(P + "rank_outcome", "gauge",
                  "1 for how the rank's restart loop ended (rank report).",
                  {"rank": r, "outcome": proc.outcome}, 1)
        if proc.post_mortem:
            m.add(P + "rank_ended", "gauge",
                  "1 for a rank whose monitor recorded its end (post-mortem dump), by reason.",
                  {"rank": r, "reason": proc.post_mortem.get("reason", "")}, 1)
    for rep in all_reports(job):
        kind = rep.get("kind") or "report"
        ranks = report_ranks(job, rep) or ["?"]
        for rk in ranks:
            lab = {"kind": kind, "rank": str(rk)}
            m.add(P + "reports_total", "counter",
                  "Slow-link and straggler reports about a rank, by kind.", lab, 1)
            if isinstance(rep.get("score"), (int, float)):
                m.add(P + "report_score", "gauge",
                      "The score a report gives a rank (as the report states it).", lab,
                      rep["score"])
            if kind == "straggler" and isinstance(rep.get("lag_ns"), (int, float)):
                m.add(P + "straggler_lag_seconds", "gauge",
                      "How far behind the others a straggler arrived at its collectives.",
                      {"rank": str(rk)}, rep["lag_ns"] / 1e9)
            if kind == "straggler" and isinstance(rep.get("collectives"), (int, float)):
                m.add(P + "straggler_collectives", "gauge",
                      "Collectives of the window the straggler was last to.",
                      {"rank": str(rk)}, rep["collectives"])
            if kind == "slow link" and isinstance(rep.get("ratio"), (int, float)):
                peer = rep.get("peer") if isinstance(rep.get("peer"), dict) else {}
                m.add(P + "slow_link_ratio", "gauge",
                      "A slow link's throughput over the reference throughput.",
                      {"rank": str(rk), "peer": str(peer.get("rank", "?"))}, rep["ratio"])
    m.add(P + "report_generated_timestamp_seconds", "gauge",
          "When resilient-report read the records.", {}, time.time())
    return m.text()


def write_atomically(path, data):
    """Temporary file in the same directory, then rename: readers see all or nothing."""
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(path) + ".", dir=directory)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data if isinstance(data, bytes) else data.encode())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def serve_metrics(port, load):
    """http://127.0.0.1:PORT/metrics, the inputs read again at each scrape."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            if self.path.split("?")[0] != "/metrics":
                self.send_error(404, "only /metrics is served")
                return
            try:
                body = prometheus_text(load()).encode()
                code = 200
            except (InputError, OSError) as e:
                body = f"# {PROGRAM}: {e}\n".encode()
                code = 500
            self.send_response(code)
            self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, fmt, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler)
    print(f"{PROGRAM}: serving http://127.0.0.1:{server.server_address[1]}/metrics", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


# ---------------------------------------------------------------------------
# HTML page
# ---------------------------------------------------------------------------

HTML_CSS = """
body{font:13px/1.4 system-ui,-apple-system,'Segoe UI',sans-serif;margin:18px;color:#222}
h1{font-size:20px;margin:0 0 4px}h2{font-size:16px;margin:22px 0 6px}
.meta{color:#555}.warn{color:#8a5a00}
table{border-collapse:collapse;margin:4px 0 10px}
th,td{border:1px solid #ccc;padding:3px 7px;text-align:left;vertical-align:top}
th{background:#f1f1f1}td.n{text-align:right;font-variant-numeric:tabular-nums}
tr:hover td{background:#fafae6}
.legend span{display:inline-block;margin-right:14px}
.sw{display:inline-block;width:12px;height:10px;margin-right:4px;vertical-align:middle}
svg text{font:11px system-ui,sans-serif}
svg .op:hover,svg .ph:hover{stroke:#000;stroke-width:1}
.bad{color:#b00020;font-weight:600}.ok{color:#1b7a1b}
"""
HTML_PHASE_FILL = {"running": "#7cc576", "recovery": "#f0a04b", "setup": "#b8c4d6",
                   "ending": "#9a9a9a", "spare": "#dcdcdc"}
HTML_OP_FILL = {"completed": "#4a7fd0", "hung": "#d0021b", "running": "#e8743b",
                "enqueued": "#f5c342", "abandoned": "#555555"}


def h(text):
    return html.escape(str(text), quote=True)


def nice_step(span_s):
    for step in (0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 20, 30, 60,
                 120, 300, 600, 1800, 3600):
        if span_s / step <= 12:
            return step
    return 7200


def time_range(job):
    stamps = []
    for proc in job.processes.values():
        stamps += [e["wall_ns"] for e in proc.timeline if e.get("wall_ns")]
        for c, op, _ in operations(proc):
            w = proc.wall(op.get("enqueue_mono_ns"))
            if w:
                stamps.append(w)
                stamps.append(proc.wall(op_end_mono(proc, c, op)[0]))
        for f in proc.real_faults():
            w = f.get("wall_ns") or proc.wall(f.get("mono_ns"))
            if w:
                stamps.append(w)
        if proc.post_mortem_wall_ns:
            stamps.append(proc.post_mortem_wall_ns)
        s = proc.snapshot or {}
        if s.get("heartbeat_wall_ns"):
            stamps.append(s["heartbeat_wall_ns"])
    if not stamps:
        return None
    t0, t1 = min(stamps), max(stamps)
    return t0, max(t1, t0 + 1000)


def svg_timeline(job):
    rng = time_range(job)
    procs = job.ordered()
    if rng is None or not procs:
        return "<p>No timed records: nothing to draw.</p>"
    t0, t1 = rng
    left, right, top, row_h = 150, 20, 30, 44
    width = 1320
    plot_w = width - left - right
    height = top + row_h * len(procs) + 30

    def x(wall):
        return left + (wall - t0) / (t1 - t0) * plot_w

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" role="img" aria-label="job timeline">',
           f'<rect x="0" y="0" width="{width}" height="{height}" fill="#ffffff"/>']
    span_s = (t1 - t0) / 1e9
    step = nice_step(span_s)
    k = 0
    while k * step <= span_s + 1e-9:
        xx = x(t0 + k * step * 1e9)
        out.append(f'<line x1="{xx:.1f}" y1="{top - 6}" x2="{xx:.1f}" y2="{height - 24}" '
                   'stroke="#e4e4e4"/>')
        label = f"{k * step:g} s"
        out.append(f'<text x="{xx:.1f}" y="{height - 10}" text-anchor="middle" fill="#555">'
                   f'{h(label)}</text>')
        k += 1
    for i, proc in enumerate(procs):
        y = top + i * row_h
        fill = "#f7f7f7" if i % 2 == 0 else "#ffffff"
        out.append(f'<rect x="0" y="{y}" width="{width}" height="{row_h}" fill="{fill}"/>')
        out.append(f'<text x="8" y="{y + 17}" fill="#222">{h(proc.label)}</text>')
        sub = f"{proc.host or '?'} pid {proc.pid if proc.pid > 0 else '?'}"
        out.append(f'<text x="8" y="{y + 32}" fill="#777">{h(sub)}</text>')
        for a, b, cat in phase_spans(proc):
            x0, x1 = x(a["wall_ns"]), x(b["wall_ns"])
            title = (f"{proc.label} iteration {a.get('iteration')}: {a.get('phase')} \u2192 "
                     f"{b.get('phase')} ({(b['wall_ns'] - a['wall_ns']) / 1e6:.1f} ms)"
                     + (f"\n{b.get('detail')}" if b.get("detail") else ""))
            out.append(f'<rect class="ph" x="{x0:.1f}" y="{y + 5}" '
                       f'width="{max(0.8, x1 - x0):.1f}" height="14" '
                       f'fill="{HTML_PHASE_FILL[cat]}"><title>{h(title)}</title></rect>')
        s = proc.snapshot or {}
        life_end = proc.post_mortem_wall_ns or s.get("heartbeat_wall_ns")
        if s.get("start_wall_ns") and life_end and life_end > s["start_wall_ns"]:
            out.append(f'<line x1="{x(s["start_wall_ns"]):.1f}" y1="{y + 40}" '
                       f'x2="{x(life_end):.1f}" y2="{y + 40}" stroke="#888" stroke-width="2">'
                       f'<title>{h(proc.label)}: its blackbox, from creation to the last '
                       'heartbeat or post-mortem</title></line>')
        for c, op, in_flight in operations(proc):
            b0 = proc.wall(op.get("enqueue_mono_ns"))
            if not b0:
                continue
            b1 = proc.wall(op_end_mono(proc, c, op)[0])
            state = op.get("state", "")
            fill = HTML_OP_FILL.get(state, "#888")
            title = (f"{op.get('func')} #{op.get('coll_index') or op.get('op_index')} on "
                     f"{comm_hex(c)}: {state}, {op.get('bytes', 0)} bytes"
                     + (" (in flight at the snapshot)" if in_flight else ""))
            out.append(f'<rect class="op" x="{x(b0):.1f}" y="{y + 22}" '
                       f'width="{max(1.5, x(b1) - x(b0)):.1f}" height="9" fill="{fill}">'
                       f'<title>{h(title)}</title></rect>')
        for f in proc.real_faults():
            w = f.get("wall_ns") or proc.wall(f.get("mono_ns"))
            if not w:
                continue
            title = f"fault: {f.get('class', '?')}: {f.get('text', '')}"
            out.append(f'<path d="M{x(w):.1f},{y + 21} l6,11 l-12,0 z" fill="#d0021b" '
                       'stroke="#fff" stroke-width="0.8">'
                       f'<title>{h(title)}</title></path>')
        if proc.post_mortem and proc.post_mortem_wall_ns:
            cx = x(proc.post_mortem_wall_ns)
            pm = proc.post_mortem
            out.append(f'<g stroke="#000" stroke-width="2"><line x1="{cx - 5:.1f}" y1="{y + 4}" '
                       f'x2="{cx + 5:.1f}" y2="{y + 18}"/><line x1="{cx + 5:.1f}" y1="{y + 4}" '
                       f'x2="{cx - 5:.1f}" y2="{y + 18}"/><title>{h(proc.label)} ended: '
                       f'{h(pm.get("reason", ""))}: {h(pm.get("detail", ""))}</title></g>')
        if s.get("heartbeat_wall_ns") and not s.get("process_alive"):
            cx = x(s["heartbeat_wall_ns"])
            out.append(f'<circle cx="{cx:.1f}" cy="{y + 12}" r="3" fill="none" stroke="#000">'
                       f'<title>{h(proc.label)}: last heartbeat</title></circle>')
    for r in restarts(job):
        xx = x(r["wall_ns"])
        out.append(f'<line x1="{xx:.1f}" y1="{top - 8}" x2="{xx:.1f}" y2="{height - 24}" '
                   'stroke="#6a1b9a" stroke-width="1.5" stroke-dasharray="5,3"/>')
        out.append(f'<text x="{xx + 3:.1f}" y="{top - 12}" fill="#6a1b9a">'
                   f'restart \u2192 iteration {r["iteration"]}'
                   f'<title>{h("culprits: " + (r["culprits"] or "?"))}</title></text>')
    out.append("</svg>")
    return "\n".join(out)


def html_table(headers, rows, numeric=()):
    out = ["<table><thead><tr>" + "".join(f"<th>{h(x)}</th>" for x in headers) + "</tr></thead>",
           "<tbody>"]
    for row in rows:
        cells = []
        for i, v in enumerate(row):
            cls = ' class="n"' if i in numeric else ""
            cells.append(f"<td{cls}>{v}</td>")
        out.append("<tr>" + "".join(cells) + "</tr>")
    out.append("</tbody></table>")
    return "\n".join(out)


def rel(wall, t0):
    return f"{(wall - t0) / 1e9:+.3f} s" if wall and t0 else "-"


def html_page(job):
    rng = time_range(job)
    t0 = rng[0] if rng else None
    procs = job.ordered()
    faults = fault_rows(job)
    reps = all_reports(job)
    rsts = restarts(job)
    parts = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
             f"<title>{h(PROGRAM)}: job {h(job.name)}</title>", f"<style>{HTML_CSS}</style>",
             "</head><body>", f"<h1>Job {h(job.name)}</h1>"]
    summary = (f"ranks: {len(procs)}; faults the plugins recorded: "
               f"{sum(len(p.real_faults()) for p in procs)}; ranks ended (post-mortem): "
               f"{sum(1 for p in procs if p.post_mortem)}; restarts: {len(rsts)}; "
               f"slow-link and straggler reports: {len(reps)}")
    if rng:
        summary += f"; from {h(iso(rng[0]))} for {(rng[1] - rng[0]) / 1e9:.3f} s"
    parts.append(f'<p class="meta">{summary}.</p>')
    parts.append("<h2>Timeline</h2>")
    legend = "".join(f'<span><i class="sw" style="background:{c}"></i>{h(k)}</span>'
                     for k, c in HTML_PHASE_FILL.items())
    legend += "".join(f'<span><i class="sw" style="background:{c}"></i>NCCL op {h(k)}</span>'
                      for k, c in HTML_OP_FILL.items())
    legend += ('<span><i class="sw" style="background:#d0021b"></i>fault</span>'
               "<span>\u2716 rank ended (post-mortem)</span>"
               '<span><i class="sw" style="background:#888;height:2px"></i>process (blackbox)'
               "</span>"
               '<span style="color:#6a1b9a">- - restart</span>')
    parts.append(f'<p class="legend">{legend}</p>')
    parts.append(svg_timeline(job))
    parts.append("<h2>Faults</h2>")
    if faults:
        rows = [[h(rel(w, t0)), h(iso(w)), h(p.label), h(src), h(cls), h(text)]
                for w, p, src, cls, text in faults]
        parts.append(html_table(["time", "wall clock", "rank", "recorded by", "class", "text"],
                                rows, numeric=(0,)))
    else:
        parts.append("<p>No fault recorded.</p>")
    if rsts:
        parts.append("<h2>Restarts</h2>")
        rows = [[h(r["iteration"]), h(rel(r["wall_ns"], t0)), h(r["culprits"] or "-"),
                 h(rel(r["detected_wall_ns"], t0)), h(r["detected"] or "-")] for r in rsts]
        parts.append(html_table(["iteration", "began", "culprits", "first detection",
                                 "detected by"], rows, numeric=(0, 1, 3)))
    parts.append("<h2>Ranks</h2>")
    rows = []
    for p in procs:
        sent = sum(c.get("completed_bytes") or 0 for c in p.connections()
                   if c.get("direction") == "send")
        recv = sum(c.get("completed_bytes") or 0 for c in p.connections()
                   if c.get("direction") == "recv")
        out_req = sum(c.get("outstanding_requests") or 0 for c in p.connections())
        done = sum((c.get("coll_completed") or 0) + (c.get("p2p_completed") or 0)
                   for c in p.communicators())
        flight = sum(c.get("in_flight") or 0 for c in p.communicators())
        iters = max([e.get("iteration", 0) for e in p.timeline], default=None)
        if p.outcome:
            outcome = p.outcome
        elif p.post_mortem:
            outcome = "ended: " + p.post_mortem.get("reason", "")
        else:
            outcome = "-"
        css = "ok" if outcome == "completed" else "bad" if outcome != "-" else ""
        alive = (p.snapshot or {}).get("process_alive")
        if p.post_mortem is not None:
            alive = False
        rows.append([h(p.rank if p.rank is not None else "?"), h(p.host or "?"),
                     h(p.pid if p.pid > 0 else "?"), f'<span class="{css}">{h(outcome)}</span>',
                     h(p.final_state or "-"), h(iters if iters is not None else "-"),
                     h(len(p.real_faults())), h(sent), h(recv), h(out_req), h(done), h(flight),
                     h("-" if alive is None else "yes" if alive else "no")])
    parts.append(html_table(["rank", "host", "pid", "outcome", "final state", "last iteration",
                             "faults", "bytes sent", "bytes received", "outstanding requests",
                             "ops completed", "ops in flight", "process alive"], rows,
                            numeric=(0, 2, 5, 6, 7, 8, 9, 10, 11)))
    comm_rows = communicator_rows(job)
    if comm_rows:
        parts.append("<h2>Communicators</h2>")
        parts.append(html_table(["communicator", "rank", "comm rank", "state", "coll enqueued",
                                 "coll completed", "p2p completed", "in flight",
                                 "oldest in flight"], comm_rows, numeric=(1, 2, 4, 5, 6, 7)))
    if job.comparisons:
        parts.append("<h2>Who is behind (resilient-inspect --compare)</h2>")
        rows = [[h(comm_hex(c)), h(", ".join(str(b) for b in c.get("behind") or []) or "-"),
                 h(c.get("summary", ""))] for c in job.comparisons]
        parts.append(html_table(["communicator", "ranks behind", "summary"], rows))
    parts.append("<h2>Slow links and stragglers</h2>")
    if reps:
        rows = [[h(r.get("kind", "?")), h(", ".join(str(x) for x in report_ranks(job, r)) or "?"),
                 h(rel(r.get("wall_ns"), t0)), h(r.get("text", ""))] for r in reps]
        parts.append(html_table(["kind", "ranks", "time", "text"], rows, numeric=(2,)))
    else:
        parts.append("<p>No report in the records.</p>")
    if job.warnings:
        parts.append("<h2>Notes on the records</h2><ul>" +
                     "".join(f'<li class="warn">{h(w)}</li>' for w in job.warnings) + "</ul>")
    parts.append("<h2>Sources</h2><ul>" + "".join(f"<li>{h(s)}</li>" for s in job.sources) +
                 "</ul>")
    parts.append(f'<p class="meta">Written by {h(PROGRAM)} at {h(iso(time.time_ns()))}. '
                 "Times: wall clock (UTC); each process's monotonic stamps converted with its "
                 "own (mono, wall) pairs.</p>")
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


def communicator_rows(job):
    rows = []
    entries = []
    for p in job.ordered():
        for c in p.communicators():
            entries.append((comm_hex(c), p, c))
    entries.sort(key=lambda e: (e[0], e[1].rank if e[1].rank is not None else 10 ** 9))
    for cid, p, c in entries:
        oldest = c.get("oldest_in_flight")
        desc = "-"
        if isinstance(oldest, dict):
            desc = (f"{oldest.get('func')} #{oldest.get('coll_index') or oldest.get('op_index')} "
                    f"{oldest.get('state')}")
        rows.append([h(cid), h(p.rank if p.rank is not None else "?"),
                     h(f"{c.get('rank')}/{c.get('nranks')}"), h(c.get("state", "?")),
                     h(c.get("coll_enqueued", 0)), h(c.get("coll_completed", 0)),
                     h(c.get("p2p_completed", 0)), h(c.get("in_flight", 0)), h(desc)])
    return rows


# ---------------------------------------------------------------------------
# Summary and command line
# ---------------------------------------------------------------------------

def summary_text(job):
    lines = [f"job {job.name}: {len(job.processes)} processes"]
    for p in job.ordered():
        what = p.outcome or (("ended: " + p.post_mortem.get("reason", "")) if p.post_mortem
                             else "-")
        lines.append(f"  {p.label:10} pid {p.pid if p.pid > 0 else '?':<8} {what:22} "
                     f"faults {len(p.real_faults()):<3} communicators {len(p.communicators())}")
    for w, p, src, cls, text in fault_rows(job):
        lines.append(f"  fault {iso(w)} {p.label}: {cls}: {text[:140]}")
    for r in restarts(job):
        lines.append(f"  restart -> iteration {r['iteration']} at {iso(r['wall_ns'])}"
                     + (f", culprits {r['culprits']}" if r["culprits"] else ""))
    return "\n".join(lines)


def parse_args(argv):
    p = argparse.ArgumentParser(
        prog=PROGRAM,
        description="Turns a job's records (blackbox snapshots or regions, rank timelines, "
                    "post-mortem dumps) into a Chrome trace, PyTorch flight-recorder dumps, an "
                    "HTML page and Prometheus metrics (docs/observability.md).")
    p.add_argument("inputs", nargs="*",
                   help="files or directories (a directory is scanned, not recursively)")
    p.add_argument("--chrome-trace", metavar="FILE", help="write a Trace Event Format JSON file")
    p.add_argument("--fr-dump", metavar="DIR",
                   help="write PyTorch flight-recorder dumps, one file per rank")
    p.add_argument("--fr-prefix", default=FR_PREFIX,
                   help=f"file name prefix of the dumps (default {FR_PREFIX})")
    p.add_argument("--fr-version", default=FR_VERSION,
                   help=f"the dumps' format version (default {FR_VERSION})")
    p.add_argument("--fr-timeout-ms", type=int, default=0,
                   help="timeout_ms of every entry (the records hold none; default 0)")
    p.add_argument("--html", metavar="FILE", help="write a self-contained HTML page")
    p.add_argument("--prometheus", metavar="FILE",
                   help="write Prometheus text exposition (atomically)")
    p.add_argument("--listen", metavar="PORT", type=int,
                   help="serve the metrics on http://127.0.0.1:PORT/metrics, reading the inputs "
                        "at each scrape")
    p.add_argument("--inspect", metavar="PATH",
                   help=f"the {INSPECT} that reads raw blackbox regions (default: "
                        "$RESILIENT_INSPECT, beside this script, then PATH)")
    p.add_argument("--job", metavar="NAME", help="the job's name (default: the directory's)")
    p.add_argument("-q", "--quiet", action="store_true", help="no notes on stderr")
    return p.parse_args(argv)


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    try:
        inspect = find_inspect(args.inspect)

        def load():
            return load_job(args.inputs, inspect, args.job)

        job = load()
        wrote = []
        if args.chrome_trace:
            text = json.dumps(chrome_trace(job), separators=(",", ":"))
            write_atomically(args.chrome_trace, text + "\n")
            wrote.append(args.chrome_trace)
        if args.fr_dump:
            wrote += write_fr_dumps(job, args.fr_dump, args.fr_prefix, args.fr_timeout_ms,
                                    args.fr_version)
        if args.html:
            write_atomically(args.html, html_page(job))
            wrote.append(args.html)
        if args.prometheus:
            write_atomically(args.prometheus, prometheus_text(job))
            wrote.append(args.prometheus)
        if not args.quiet:
            for w in job.warnings:
                print(f"{PROGRAM}: note: {w}", file=sys.stderr)
        if not wrote and args.listen is None:
            print(summary_text(job))
        elif not args.quiet and wrote:
            print(f"{PROGRAM}: job {job.name}, {len(job.processes)} processes: wrote "
                  + ", ".join(wrote), file=sys.stderr)
        if args.listen is not None:
            serve_metrics(args.listen, load)
    except InputError as e:
        print(f"{PROGRAM}: {e}", file=sys.stderr)
        return 2
    except OSError as e:
        print(f"{PROGRAM}: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
