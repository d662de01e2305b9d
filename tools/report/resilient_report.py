#!/usr/bin/env python3
"""resilient-report: a job's records in the formats people already use.

Reads what a job left behind -- blackbox snapshots (`resilient-inspect --json`
output, or raw `resilient-blackbox-<pid>` regions, read through
resilient-inspect), the restart loop's per-rank timelines (the demo's
`rank-<n>.json` or a bare timeline array), the monitor processes'
post-mortem dumps and their logs, the JSON lines of `resilient-inspect --job
--json` (slow-link, straggler and stuck-rank reports, each round's
standings) -- and writes:

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
JSON_LINES_SUFFIXES = (".jsonl", ".ndjson")


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
    """Report records in the fault ring (slow link, straggler, stuck rank) are findings,
    not faults."""
    return bool(f.get("report")) or f.get("class") in REPORT_KINDS


class Job:
    def __init__(self, name):
        self.name = name
        self.processes = {}   # pid -> Process
        self.reports = []     # slow links, stragglers, stuck ranks as the inputs state them
        #                       (make_report)
        self.standings = None  # the last round of resilient-inspect --job --json
        self.findings = None  # the reports of every record, one per finding (all_reports)
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
    if is_watch_record(data):
        return "job-watch"
    return None


def is_watch_record(obj):
    """A line of `resilient-inspect --job --json` (tools/inspect/resilient_inspect.cc,
    watchJob): a report, {"report": {...}}, or a round's standings,
    {"wall_ns": N, "processes": K, "standings": {"links": [...], "ranks": [...]}}."""
    if not isinstance(obj, dict):
        return False
    if set(obj) == {"report"}:
        return isinstance(obj["report"], dict) and isinstance(obj["report"].get("kind"), str)
    st = obj.get("standings")
    return (isinstance(st, dict) and isinstance(obj.get("wall_ns"), int)
            and isinstance(st.get("links", []), list) and isinstance(st.get("ranks", []), list))


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
            add_report(job, make_report(r, origin=("file", source), source=source,
                                        reporter_pid=proc.pid if proc is not None else None))


def add_report(job, r):
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


def add_watch_lines(job, path, records):
    """The lines of `resilient-inspect --job --json`: its reports, and the last round's
    standings (the newest over every such input)."""
    for rec in records:
        if "report" in rec:
            add_report(job, make_report(rec["report"], origin=("file", path), source=path))
            continue
        st = rec["standings"]
        if job.standings is None or rec["wall_ns"] >= job.standings["wall_ns"]:
            job.standings = {"wall_ns": rec["wall_ns"], "processes": rec.get("processes"),
                             "links": [x for x in st.get("links") or [] if isinstance(x, dict)],
                             "ranks": [x for x in st.get("ranks") or [] if isinstance(x, dict)],
                             "source": path}


def read_json_lines(job, path, text):
    """Every line of a JSON-lines file as a resilient-inspect --job --json record, or an
    InputError naming the file and the line. A last line without its newline that does
    not parse is one still being written (the file of a running resilient-inspect): it is
    left out, with a note."""
    records = []
    lines = text.split("\n")
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except ValueError as e:
            if number == len(lines):
                job.warn(f"{path}: line {number} is incomplete (still being written?); "
                         "left out")
                continue
            raise InputError(f"{path}: line {number}: not JSON ({e.msg} at column {e.colno})")
        if not is_watch_record(obj):
            raise InputError(f"{path}: line {number}: not a resilient-inspect --job --json "
                             "record (a {\"report\": ...} or a round with \"standings\")")
        records.append(obj)
    if not records:
        job.warn(f"{path}: no resilient-inspect --job --json record yet")
    return records


def looks_like_json_lines(name, text):
    """A .jsonl/.ndjson file, or one whose first line is a resilient-inspect --job --json
    record."""
    if name.endswith(JSON_LINES_SUFFIXES):
        return True
    first = next((line for line in text.split("\n") if line.strip()), "")
    try:
        return is_watch_record(json.loads(first))
    except ValueError:
        return False


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
    if not name.endswith((".json",) + JSON_LINES_SUFFIXES) and not explicit:
        return False
    try:
        with open(path, errors="replace") as f:
            text = f.read()
    except OSError as e:
        if explicit:
            raise InputError(f"{path}: not readable ({e})")
        job.warn(f"{path}: not readable ({e}); skipped")
        return False
    try:
        data = json.loads(text)
    except ValueError as e:
        if looks_like_json_lines(name, text):
            # A directory's file is skipped with a note, as any unreadable one
            # (load_job); a file named on the command line is refused.
            records = read_json_lines(job, path, text)
            job.sources.append(path)
            add_watch_lines(job, path, records)
            return True
        if explicit:
            raise InputError(f"{path}: not readable JSON ({e})")
        job.warn(f"{path}: not readable JSON ({e}); skipped")
        return False
    kind = classify(data)
    if kind is None:
        if explicit:
            raise InputError(f"{path}: not a record {PROGRAM} knows (rank report, timeline, "
                             "blackbox snapshot, post-mortem, comparison, reports, "
                             "resilient-inspect --job --json lines)")
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
    elif kind == "job-watch":
        add_watch_lines(job, path, [data])
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
# Timeline entries that are no phase of the loop: a report the process was named in
# (restart/loop/job/health_exchange.cc), shown as a report. ("health compared", active rank
# 0's summary at the end of an iteration, is a phase.)
HEALTH_REPORT_PHASE = "health report"


def phases(proc):
    """The timeline's phases: its entries less the reports."""
    return [e for e in proc.timeline if e.get("phase") != HEALTH_REPORT_PHASE]


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
    tl = [e for e in phases(proc) if e.get("wall_ns")]
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


# ---------------------------------------------------------------------------
# Slow-link, straggler and stuck-rank reports
# ---------------------------------------------------------------------------

REPORT_KINDS = ("slow link", "straggler", "stuck rank")
REPORT_NUMBERS = ("window_ns", "bytes_per_s", "reference_bytes_per_s", "ratio",
                  "against_history", "collectives", "waited", "min_lag_ns", "last_count",
                  "lag_ns", "score", "coll_index", "waiting_ranks", "waited_ns", "restarts")
REPORT_FLAGS = ("against_history", "restarts")
REPORT_STRINGS = ("function",)


def _end_re(p):
    """One end of a report's text (blackbox/health_report.cc, endText):
    `rank R (host pid P address)`, `?` for what is unknown."""
    return (rf"rank (?P<{p}rank>\d+|\?) \((?P<{p}host>\S+) pid (?P<{p}pid>\d+|\?)"
            rf"(?: (?P<{p}address>[^)]*))?\)")


_COMM_RE = r"(?: on communicator 0x(?P<comm>[0-9a-fA-F]+))?"
# The head of a report's text: who and where; the numbers are read from the rest
# one by one (their wording has changed, older records hold the older one).
STRAGGLER_TEXT_RE = re.compile(r"^straggler " + _end_re("s") + _COMM_RE)
SLOW_LINK_TEXT_RE = re.compile(r"^slow link from " + _end_re("s") + " to " + _end_re("p") +
                               _COMM_RE)
STUCK_RANK_TEXT_RE = re.compile(r"^stuck rank " + _end_re("s") + _COMM_RE)
STUCK_RANK_COLL_RE = re.compile(r"has not entered collective (\d+) \(([^)]*)\)")
STUCK_RANK_WAITED_RE = re.compile(
    r"in which (\d+) of its ranks have waited for ([\d.]+) s \(threshold ([\d.]+) s\)")
STUCK_RANK_NO_FUNCTION = "function unknown"
STRAGGLER_WAITED_RE = re.compile(
    r"last to enqueue (\d+) of the (\d+) collectives that waited ([\d.]+) ms or more for "
    r"their last rank \(of (\d+) over ([\d.]+) s\)")
STRAGGLER_OF_RE = re.compile(r"last to enqueue (\d+) of (\d+) collectives over ([\d.]+) s")
STRAGGLER_LAG_RE = re.compile(r"([\d.]+) ms \(median\)")
SLOW_LINK_RATE_RE = re.compile(r": ([\d.]+) ([kMG])B/s while busy over ([\d.]+) s, ")
SLOW_LINK_RATIO_RE = re.compile(r"([\d.]+)% of (its own best window|the median)")
RATE_RE = re.compile(r"\(([\d.]+) ([kMG])B/s\)")
RATE_UNIT = {"k": 1e3, "M": 1e6, "G": 1e9}
RESTARTS_TEXT = "the job restarts without it"


def parse_comm_id(value):
    """A communicator id as the records give it (a number, or a hex string), or None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        try:
            return int(value, 16) if value.lower().startswith("0x") else int(value)
        except ValueError:
            return None
    return None


def comm_label(comm_id):
    return f"0x{comm_id:016x}" if comm_id is not None else "?"


def end_of(value):
    """One end of a report or standing ({rank, host, pid, address}), or None."""
    if not isinstance(value, dict):
        return None
    end = {}
    if isinstance(value.get("rank"), int) and not isinstance(value["rank"], bool):
        end["rank"] = value["rank"]
    if isinstance(value.get("pid"), int) and not isinstance(value["pid"], bool):
        end["pid"] = value["pid"]
    for k in ("host", "address"):
        if isinstance(value.get(k), str):
            end[k] = value[k]
    return end


def _text_end(m, p):
    end = {}
    if m.group(p + "rank") != "?":
        end["rank"] = int(m.group(p + "rank"))
    if m.group(p + "pid") != "?":
        end["pid"] = int(m.group(p + "pid"))
    if m.group(p + "host") != "?":
        end["host"] = m.group(p + "host")
    end["address"] = m.group(p + "address") or ""
    return end


def parse_report_text(text):
    """What a report's text (blackbox/health_report.cc, describe) states, for the records
    that hold only the text: the timeline's "health report" entries, the fault ring."""
    text = text or ""
    out = {}
    m = STRAGGLER_TEXT_RE.match(text)
    if m:
        out = {"kind": "straggler", "subject": _text_end(m, "s")}
        w = STRAGGLER_WAITED_RE.search(text)
        if w:
            out.update(last_count=int(w.group(1)), waited=int(w.group(2)),
                       min_lag_ns=int(float(w.group(3)) * 1e6), collectives=int(w.group(4)),
                       window_ns=int(float(w.group(5)) * 1e9))
        else:
            w = STRAGGLER_OF_RE.search(text)
            if w:
                out.update(last_count=int(w.group(1)), collectives=int(w.group(2)),
                           window_ns=int(float(w.group(3)) * 1e9))
        lag = STRAGGLER_LAG_RE.search(text)
        if lag:
            out["lag_ns"] = int(float(lag.group(1)) * 1e6)
    elif STUCK_RANK_TEXT_RE.match(text):
        m = STUCK_RANK_TEXT_RE.match(text)
        out = {"kind": "stuck rank", "subject": _text_end(m, "s")}
        c = STUCK_RANK_COLL_RE.search(text)
        if c:
            out["coll_index"] = int(c.group(1))
            out["function"] = "" if c.group(2) == STUCK_RANK_NO_FUNCTION else c.group(2)
        w = STUCK_RANK_WAITED_RE.search(text)
        if w:
            out.update(waiting_ranks=int(w.group(1)), waited_ns=int(float(w.group(2)) * 1e9),
                       min_lag_ns=int(float(w.group(3)) * 1e9))
    else:
        m = SLOW_LINK_TEXT_RE.match(text)
        if m:
            out = {"kind": "slow link", "subject": _text_end(m, "s"), "peer": _text_end(m, "p")}
            rate = SLOW_LINK_RATE_RE.search(text)
            if rate:
                out["bytes_per_s"] = float(rate.group(1)) * RATE_UNIT[rate.group(2)]
                out["window_ns"] = int(float(rate.group(3)) * 1e9)
                rest = text[rate.end():]
                ratio = SLOW_LINK_RATIO_RE.match(rest)
                if ratio:
                    out["ratio"] = float(ratio.group(1)) / 100
                    out["against_history"] = ratio.group(2) == "its own best window"
                    ref = RATE_RE.search(rest)
                    if ref:
                        out["reference_bytes_per_s"] = float(ref.group(1)) * RATE_UNIT[ref.group(2)]
                elif "never busy" in rest:
                    out["reference_bytes_per_s"] = 0
                    out["against_history"] = False
    if m:
        if m.group("comm"):
            out["comm_id"] = int(m.group("comm"), 16)
        out["restarts"] = RESTARTS_TEXT in text
        return out
    for kind in REPORT_KINDS:
        if text.startswith(kind):
            return {"kind": kind}
    return {}


def make_report(raw, origin, source, reporter_pid=None):
    """A report as one input states it: kind, text, wall_ns, comm_id, subject and peer
    ({rank, host, pid, address}) and the numbers of blackbox/health_json.cc's report
    objects; what the object lacks is taken from its text. `origin` names the record
    that holds it (a file, a process's fault ring or timeline): all_reports merges the
    same finding's reports from several records."""
    parsed = parse_report_text(raw.get("text") or "")
    kind = raw.get("kind") if isinstance(raw.get("kind"), str) else None
    r = {"kind": kind or parsed.get("kind") or "report",
         "text": str(raw.get("text") or ""),
         "wall_ns": raw.get("wall_ns") if isinstance(raw.get("wall_ns"), int) and
         raw.get("wall_ns") > 0 else None,
         "comm_id": parse_comm_id(raw.get("comm_id")),
         "subject": end_of(raw.get("subject")),
         "peer": end_of(raw.get("peer"))}
    if r["comm_id"] is None:
        r["comm_id"] = parsed.get("comm_id")
    for k in REPORT_NUMBERS:
        v = raw.get(k)
        stated = isinstance(v, bool) if k in REPORT_FLAGS else number(v) is not None
        if stated:
            r[k] = v
        elif k in parsed:
            r[k] = parsed[k]
    for k in REPORT_STRINGS:
        if isinstance(raw.get(k), str):
            r[k] = raw[k]
        elif k in parsed:
            r[k] = parsed[k]
    if isinstance(raw.get("ranks"), list):
        # An older shape: the ranks a report is about.
        r["ranks"] = [x for x in raw["ranks"] if isinstance(x, int) and not isinstance(x, bool)]
    elif r["subject"] is None and isinstance(raw.get("rank"), int):
        r["subject"] = {"rank": raw["rank"]}
    if r["subject"] is None:
        r["subject"] = parsed.get("subject")
    if r["peer"] is None:
        r["peer"] = parsed.get("peer")
    if r["subject"] is None and "ranks" not in r and reporter_pid is not None:
        # A report that names no one is about the process that recorded it (a
        # record without a pid stands for its rank: Job.process(-(rank + 1))).
        r["subject"] = {"pid": reporter_pid} if reporter_pid > 0 else {"rank": -reporter_pid - 1}
    r["_origin"] = origin
    r["_source"] = source
    r["_reporter_pid"] = reporter_pid
    return r


def end_process(job, end):
    """The job's process an end names: by pid (and host, when both records state one);
    by rank when the end has no pid and one process has that rank."""
    if not end:
        return None
    pid = end.get("pid")
    if isinstance(pid, int) and pid > 0:
        proc = job.by_pid(pid)
        host = end.get("host")
        if proc is not None and (not host or not proc.host or host == proc.host):
            return proc
        return None
    rank = end.get("rank")
    if isinstance(rank, int) and rank >= 0:
        same = [p for p in job.processes.values() if p.rank == rank]
        if len(same) == 1:
            return same[0]
    return None


def end_rank(job, end):
    """The rank of an end: its process's rank when the job knows the process (the
    records' rank, the one every other format uses), else the rank it states."""
    proc = end_process(job, end)
    if proc is not None and proc.rank is not None:
        return proc.rank
    rank = (end or {}).get("rank")
    return rank if isinstance(rank, int) and rank >= 0 else None


def end_label(job, end):
    """An end as a label value: its rank, else pid:N, else ?."""
    rank = end_rank(job, end)
    if rank is not None:
        return str(rank)
    proc = end_process(job, end)
    if proc is not None:
        return rank_label(proc)
    pid = (end or {}).get("pid")
    return f"pid:{pid}" if pid else "?"


def end_text(job, end):
    if not end:
        return "?"
    rank = end_rank(job, end)
    proc = end_process(job, end)
    host = (proc.host if proc else None) or end.get("host") or "?"
    pid = (proc.pid if proc and proc.pid > 0 else None) or end.get("pid") or "?"
    return f"rank {rank if rank is not None else '?'} ({host} pid {pid})"


def _end_key(job, end):
    proc = end_process(job, end)
    if proc is not None:
        return ("process", proc.pid)
    if not end:
        return None
    if end.get("pid"):
        return ("pid", end.get("host") or "", end["pid"])
    if end.get("rank") is not None:
        return ("rank", end["rank"])
    return None


def ring_reports(job):
    """The report records of the fault rings (class slow link, straggler or stuck rank):
    the subject is the record's rank and peer_pid (its text names both ends of a slow
    link)."""
    out = []
    for proc in job.processes.values():
        for f in sorted(proc.faults.values(), key=lambda f: f.get("number", 0)):
            if not is_report_fault(f):
                continue
            raw = {"kind": f.get("class"), "text": f.get("text", ""),
                   "wall_ns": f.get("wall_ns") or proc.wall(f.get("mono_ns")),
                   "comm_id": f.get("comm_id")}
            if f.get("peer_pid"):
                raw["subject"] = {"pid": f["peer_pid"], "host": f.get("peer_host") or "",
                                  "address": f.get("peer") or ""}
                if isinstance(f.get("rank"), int) and f["rank"] >= 0:
                    raw["subject"]["rank"] = f["rank"]
            out.append(make_report(raw, origin=("fault ring", proc.pid),
                                   source=f"{proc.label}'s blackbox", reporter_pid=proc.pid))
    return out


def timeline_reports(job):
    """The timelines' "health report" entries (restart/loop/job/health_exchange.cc: each
    process a report names records it, its text as the detail)."""
    out = []
    for proc in job.processes.values():
        for e in proc.timeline:
            if e.get("phase") == HEALTH_REPORT_PHASE:
                out.append(make_report({"text": e.get("detail", ""), "wall_ns": e.get("wall_ns")},
                                       origin=("timeline", proc.pid),
                                       source=f"{proc.label}'s timeline",
                                       reporter_pid=proc.pid))
    return out


def all_reports(job):
    """Every slow-link, straggler and stuck-rank finding of the job, by time: the reports
    of the inputs' report lists, of resilient-inspect --job --json, of the fault rings and
    of the timelines, one per kind, subject, peer (slow links), collective (stuck ranks:
    each is named once per collective) and communicator. A report without a
    communicator, peer or collective joins the finding it fits. `_times`: the most times
    one record holds it (a finding reported again later); `_sources`: which records."""
    if job.findings is not None:
        return job.findings
    reports = list(job.reports) + ring_reports(job) + timeline_reports(job)
    # The fullest first: they make the findings the others join.
    reports.sort(key=lambda r: (r["comm_id"] is None, r.get("peer") is None,
                                r["wall_ns"] is None, r["wall_ns"] or 0))
    groups = []
    for r in reports:
        subject = (("ranks", tuple(r["ranks"])) if "ranks" in r
                   else _end_key(job, r.get("subject")))
        peer = _end_key(job, r.get("peer")) if r["kind"] == "slow link" else None
        coll = r.get("coll_index") if r["kind"] == "stuck rank" else None
        comm = r["comm_id"]
        for g in groups:
            if (g["kind"] == r["kind"] and g["subject"] == subject
                    and (None in (g["comm"], comm) or g["comm"] == comm)
                    and (None in (g["peer"], peer) or g["peer"] == peer)
                    and (None in (g["coll"], coll) or g["coll"] == coll)):
                g["members"].append(r)
                g["comm"] = g["comm"] if g["comm"] is not None else comm
                g["peer"] = g["peer"] if g["peer"] is not None else peer
                g["coll"] = g["coll"] if g["coll"] is not None else coll
                break
        else:
            groups.append({"kind": r["kind"], "subject": subject, "comm": comm, "peer": peer,
                           "coll": coll, "members": [r]})
    findings = []
    for g in groups:
        members = g["members"]
        # The richest statement first (the report objects), the parsed texts after.
        members.sort(key=lambda r: -sum(1 for k in REPORT_NUMBERS if k in r))
        merged = dict(members[0])
        for r in members[1:]:
            for k, v in r.items():
                if merged.get(k) is None and v is not None:
                    merged[k] = v
        walls = [r["wall_ns"] for r in members if r["wall_ns"]]
        merged["wall_ns"] = min(walls) if walls else None
        merged["comm_id"] = g["comm"]
        per_origin = {}
        for r in members:
            per_origin[r["_origin"]] = per_origin.get(r["_origin"], 0) + 1
        merged["_times"] = max(per_origin.values())
        sources = []
        for r in members:
            if r["_source"] not in sources:
                sources.append(r["_source"])
        merged["_sources"] = sources
        findings.append(merged)
    findings.sort(key=lambda r: (r["wall_ns"] is None, r["wall_ns"] or 0))
    job.findings = findings
    return findings


def report_ranks(job, r):
    """The ranks a report is about: its subject's (mapped onto the job's processes)."""
    if "ranks" in r:
        return list(r["ranks"])
    rank = end_rank(job, r.get("subject"))
    if rank is not None:
        return [rank]
    proc = end_process(job, r.get("subject"))
    return [rank_label(proc)] if proc is not None else []


def report_who(job, r):
    """`rank 1 (host pid 2) -> rank 2 (...)` for a slow link, `rank 2 (...)` else."""
    if "ranks" in r:
        who = ", ".join(f"rank {x}" for x in r["ranks"]) or "?"
    else:
        who = end_text(job, r.get("subject"))
    if r["kind"] == "slow link" and r.get("peer"):
        who += " \u2192 " + end_text(job, r["peer"])
    return who


def rate_text(bytes_per_s):
    if not bytes_per_s:
        return "-"
    for unit, scale in (("GB/s", 1e9), ("MB/s", 1e6)):
        if bytes_per_s >= scale:
            return f"{bytes_per_s / scale:.{2 if unit == 'GB/s' else 1}f} {unit}"
    return f"{bytes_per_s / 1e3:.0f} kB/s"


def collective_text(r):
    """`collective 13 (AllReduce)`: the collective a stuck rank has not entered."""
    if number(r.get("coll_index")) is None:
        return "a collective"
    return f"collective {r['coll_index']}" + (f" ({r['function']})" if r.get("function")
                                               else "")


def report_measure(r):
    """A report's ratio (slow link), lag (straggler) or wait (stuck rank), in words."""
    if r["kind"] == "slow link" and (number(r.get("ratio")) or
                                     number(r.get("reference_bytes_per_s")) == 0):
        against = ("its own best window" if r.get("against_history")
                   else "the median of the other links")
        out = (f"{r['ratio'] * 100:.0f}% of {against}" if number(r.get("ratio"))
               else "the other links never busy (far faster)")
        if r.get("bytes_per_s"):
            out += f" ({rate_text(r['bytes_per_s'])} while busy"
            if r.get("reference_bytes_per_s"):
                out += f", reference {rate_text(r['reference_bytes_per_s'])}"
            out += ")"
        return out + ("; the job restarts without it" if r.get("restarts") else "")
    if r["kind"] == "straggler" and number(r.get("lag_ns")) is not None:
        out = f"{r['lag_ns'] / 1e6:.1f} ms median lag"
        if r.get("waited"):
            out += (f", last in {r.get('last_count', '?')} of the {r['waited']} collectives "
                    f"that waited (of {r.get('collectives', '?')})")
        elif r.get("collectives"):
            out += f", last in {r.get('last_count', '?')} of {r['collectives']}"
        return out + ("; the job restarts without it" if r.get("restarts") else "")
    if r["kind"] == "stuck rank" and (number(r.get("waited_ns")) is not None or
                                      number(r.get("coll_index")) is not None):
        out = f"has not entered {collective_text(r)}"
        if number(r.get("waited_ns")) is not None:
            n = r.get("waiting_ranks")
            out += (f", in which {n if number(n) is not None else 'the other'} "
                    f"rank{'' if n == 1 else 's'} waited {r['waited_ns'] / 1e9:.1f} s")
        if number(r.get("min_lag_ns")):
            out += f" (threshold {r['min_lag_ns'] / 1e9:.1f} s)"
        return out + ("; the job restarts without it" if r.get("restarts") else "")
    return "-"


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
    pids = {}
    for proc in job.ordered():
        pid = trace_pid(proc, unknown)
        pids[proc.pid] = pid
        if proc.rank is None:
            unknown += 1
        ev.extend(process_events(job, proc, pid))
    ev.extend(report_events(job, pids))
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


def report_events(job, pids):
    """Each slow-link, straggler or stuck-rank finding: a global instant at its time, on the
    faults thread of its subject's process (the job's own track when the records do not
    hold that process)."""
    ev = []
    for r in all_reports(job):
        if not r.get("wall_ns"):
            continue
        proc = end_process(job, r.get("subject")) if "ranks" not in r else None
        if proc is None and "ranks" in r and len(r["ranks"]) == 1:
            proc = end_process(job, {"rank": r["ranks"][0]})
        pid, tid = (pids[proc.pid], TID_FAULTS) if proc is not None else (JOB_PID, 2)
        args = {"kind": r["kind"], "text": r["text"], "ranks": report_ranks(job, r),
                "subject": report_who(job, r), "measure": report_measure(r),
                "communicator": comm_label(r["comm_id"]), "reported": r["_times"],
                "records": r["_sources"]}
        for k in REPORT_NUMBERS + REPORT_STRINGS:
            if k in r:
                args[k] = r[k]
        who = ", ".join(str(x) for x in report_ranks(job, r)) or "?"
        if r["kind"] == "slow link" and r.get("peer"):
            who += " \u2192 " + end_label(job, r["peer"])
        if r["kind"] == "stuck rank" and number(r.get("coll_index")) is not None:
            who += f" not in {collective_text(r)}"
        ev.append({"name": f"{r['kind']}: rank {who}", "cat": "report", "ph": "i", "s": "g",
                   "ts": us(r["wall_ns"]), "pid": pid, "tid": tid, "args": args})
    if any(e["pid"] == JOB_PID for e in ev):
        ev.append(meta(JOB_PID, 2, "thread_name", {"name": "reports"}))
    return ev


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
    for e in phases(proc):
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
    """(entries, wrapped): the process's operations as flight-recorder entries,
    oldest first, and the communicators (hex) whose ring no longer holds their
    first operations (the ring wrapped)."""
    rows = []
    skipped = set()
    wrapped = set()
    dropped_before = 0
    for c in proc.communicators():
        ops = sorted([(op, fl) for cc, op, fl in operations(proc) if cc is c],
                     key=lambda x: x[0].get("op_index", 0))
        if not ops:
            continue
        dropped = max(0, ops[0][0].get("op_index", 1) - 1)
        dropped_before += dropped
        if dropped:
            wrapped.add(comm_hex(c))
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
            # An exchange's side: (Send or Recv, own rank, peer), for fr_order_exchanges.
            side = (func, c.get("rank"), op.get("peer")) if entry["is_p2p"] else None
            rows.append((op.get("enqueue_mono_ns") or 0, entry, side))
    if skipped:
        job.warn(f"{proc.label}: operations of {', '.join(sorted(skipped))} have no PyTorch "
                 "flight-recorder name; left out of its dump")
    rows.sort(key=lambda r: r[0])
    entries = fr_order_exchanges([(e, side) for _, e, side in rows])
    for i, e in enumerate(entries):
        e["record_id"] = dropped_before + i
    return entries, wrapped


def fr_order_exchanges(rows):
    """The entries of (entry, side) rows, an exchange (a send to a peer and a
    receive from it, next to each other on their communicator) in the order
    PyTorch's analyzer pairs: it compares each entry with the first of the
    peer's with the same collective_seq_id, so the lower rank's send comes first
    and the higher rank's receive, as deadlock-free sequential code posts them.
    NCCL runs a group's operations together; their order in the records is the
    order of the calls. The ids (p2p_seq_id, op_id) stay increasing in the new
    order; the times are each operation's own."""
    entries = [e for e, _ in rows]
    last = {}  # communicator -> index of its previous entry
    for i, (e, b) in enumerate(rows):
        cid = e["process_group"][0]
        j = last.get(cid)
        last[cid] = i
        a = rows[j][1] if j is not None else None
        if not a or not b or entries[j]["collective_seq_id"] != e["collective_seq_id"]:
            continue
        if {a[0], b[0]} != {"Send", "Recv"} or a[2] != b[2]:
            continue
        last[cid] = None  # an exchange is two entries: the next one starts afresh
        if a[0] != ("Send" if a[1] < a[2] else "Recv"):
            for k in ("p2p_seq_id", "op_id"):
                entries[j][k], e[k] = e[k], entries[j][k]
            entries[j], entries[i] = e, entries[j]
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


def fr_collectives(entries, cid):
    """The collective entries of communicator `cid`."""
    return [e for e in entries if e["process_group"][0] == cid and not e["is_p2p"]]


def fr_status(c, entries):
    """pg_status of one communicator: its counters, or what its entries show when
    they are newer (the counters and the ring come from one snapshot, but the
    ring may hold an operation the counters did not count yet)."""
    mine = fr_collectives(entries, comm_hex(c))

    def last(counter, states):
        seqs = [e["collective_seq_id"] for e in mine if e["state"] in states]
        return max([c.get(counter) or -1] + seqs)
    return {
        "last_enqueued_collective": last("coll_enqueued", ("scheduled", "started", "completed")),
        "last_started_collective": last("coll_started", ("started", "completed")),
        "last_completed_collective": last("coll_completed", ("completed",)),
    }


def fr_collective_bounds(entries, cid, members, pick):
    """{member: pick (min or max) of the collective_seq_ids its entries of
    communicator `cid` hold}, for the members holding any."""
    return {r: pick(e["collective_seq_id"] for e in colls) for r, colls in (
        (r, fr_collectives(entries.get(r, []), cid)) for r in members) if colls}


def fr_leave_out(entries, ranks, unknowable):
    """Removes the entries `unknowable` says of from those of `ranks`; how many."""
    left = 0
    for r in ranks:
        kept = [e for e in entries[r] if not unknowable(e)]
        left += len(entries[r]) - len(kept)
        entries[r] = kept
    return left


def fr_trim_tails(job, entries, groups, finished):
    """Each rank's records end at its own moment (its last snapshot, its death),
    and the analyzer takes a collective one member's records lack for one that
    member never joined. Per communicator, entries after the last collective
    every member's records hold are left out (with a note) when their absence
    says nothing: a completed one (every member joined it), or one whose
    lacking members all finished their work (`finished`: their rank reports
    say completed; their records just end before they did). The rest stays:
    that is what a hang looks like."""
    for cid, (_, _, members) in groups.items():
        ends = fr_collective_bounds(entries, cid, members, max)
        if len(ends) < 2:
            continue
        common = min(ends.values())

        def unknowable(e):
            if e["process_group"][0] != cid or e["collective_seq_id"] <= common:
                return False
            lacking = [r for r, end in ends.items() if end < e["collective_seq_id"]]
            return e["state"] == "completed" or all(r in finished for r in lacking)
        left = fr_leave_out(entries, ends, unknowable)
        if left:
            job.warn(f"communicator {cid}: {left} entries after collective {common} (the last "
                     "one every member's records hold) left out of the flight-recorder dumps: "
                     "completed, or lacking only on ranks that finished (their records end "
                     "earlier)")


def fr_trim_heads(job, entries, groups, wrapped):
    """Each rank's ring wraps at its own moment (its snapshot's), so a rank read
    earlier may still hold collectives that another's ring no longer does, and
    the analyzer takes them for collectives that member never joined. Per
    communicator, entries before the first collective a member's records hold
    are left out (with a note) when every member lacking them has a ring that
    wrapped (`wrapped`: {rank: communicators}): their absence says nothing.
    Where a lacking member's ring never wrapped, they stay: it did not join."""
    for cid, (_, _, members) in groups.items():
        starts = fr_collective_bounds(entries, cid, members, min)
        if len(starts) < 2:
            continue

        def unknowable(e):
            if e["process_group"][0] != cid:
                return False
            lacking = [r for r, start in starts.items() if start > e["collective_seq_id"]]
            return bool(lacking) and all(cid in wrapped.get(r, ()) for r in lacking)
        left = fr_leave_out(entries, starts, unknowable)
        if left:
            job.warn(f"communicator {cid}: {left} entries before collective "
                     f"{max(starts.values())} (the first one every member's records hold) left "
                     "out of the flight-recorder dumps: lacking only on ranks whose rings no "
                     "longer hold them")


def fr_dumps(job, timeout_ms=0, version=FR_VERSION):
    """{dump rank: the dump dict} for every process with a rank."""
    groups = fr_groups(job)
    pg_config = {cid: {"name": cid, "desc": desc, "ranks": str(ranks)}
                 for cid, (_, desc, ranks) in groups.items()}
    entries, status, wrapped = {}, {}, {}
    for proc in job.ordered():
        if proc.rank is None:
            job.warn(f"pid {proc.pid}: no rank known; no flight-recorder dump")
            continue
        entries[proc.rank], wrapped[proc.rank] = fr_entries(job, proc, groups, timeout_ms)
        status[proc.rank] = {
            str(groups[comm_hex(c)][0]): fr_status(c, entries[proc.rank])
            for c in sorted(proc.communicators(), key=lambda c: groups[comm_hex(c)][0])}
    finished = {p.rank for p in job.processes.values() if p.outcome == "completed"}
    fr_trim_tails(job, entries, groups, finished)
    fr_trim_heads(job, entries, groups, wrapped)
    return {rank: {"version": version, "comm_lib_version": "", "pg_config": pg_config,
                   "pg_status": status[rank], "entries": entries[rank]} for rank in entries}


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

    def set(self, name, kind, help_, labels, value):
        """A gauge's value (not added up: a ratio of two samples is no sum)."""
        fam = self.families.setdefault(name, {"kind": kind, "help": help_, "samples": {}})
        fam["samples"][tuple(sorted(labels.items()))] = value

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
    reports = all_reports(job)
    for rep in reports:
        kind = rep["kind"]
        for rk in report_ranks(job, rep) or ["?"]:
            lab = {"kind": kind, "rank": str(rk)}
            m.add(P + "reports_total", "counter",
                  "Slow-link, straggler and stuck-rank reports about a rank (the subject), by "
                  "kind.", lab, rep["_times"])
            if isinstance(rep.get("score"), (int, float)):
                m.set(P + "report_score", "gauge",
                      "The score a report gives a rank (as the report states it).", lab,
                      rep["score"])
            if kind == "slow link" and number(rep.get("ratio")):  # 0: no peer measured
                m.set(P + "slow_link_ratio", "gauge",
                      "A reported slow link's busy throughput over its reference (the "
                      "median of the other links, or its own best window), when reported.",
                      {"rank": str(rk), "peer": end_label(job, rep.get("peer"))}, rep["ratio"])
            if kind == "stuck rank":
                stuck_rank_metrics(m, P, rep, str(rk))
    standings_metrics(job, m, P, reports)
    m.add(P + "report_generated_timestamp_seconds", "gauge",
          "When resilient-report read the records.", {}, time.time())
    return m.text()


def stuck_rank_metrics(m, P, rep, rank):
    """A stuck rank: counted per subject rank and communicator; how long the others had
    waited in the collective it did not enter, when reported."""
    comm = comm_label(rep["comm_id"])
    m.add(P + "stuck_rank_reports_total", "counter",
          "Stuck-rank reports about a rank (the subject: alive, inside no collective, but "
          "not entering one the other ranks of the communicator waited in past "
          "NCCL_RESILIENT_STUCK_RANK_TIMEOUT_MS), by communicator; one per collective.",
          {"rank": rank, "comm": comm}, 1)
    if number(rep.get("waited_ns")) is not None:
        coll = rep.get("coll_index")
        m.set(P + "stuck_rank_waited_seconds", "gauge",
              "How long the other ranks of the communicator had waited in the collective a "
              "stuck rank had not entered, when it was reported (by collective index and "
              "function).",
              {"rank": rank, "comm": comm,
               "collective": str(coll) if number(coll) is not None else "?",
               "function": rep.get("function") or "?"}, rep["waited_ns"] / 1e9)


def standings_metrics(job, m, P, reports):
    """The last round of resilient-inspect --job --json: every link's busy throughput,
    busy share and ratio, every rank's lateness. Without one, the straggler gauges come
    from the reports (their values when reported)."""
    st = job.standings
    if st is not None:
        m.add(P + "standings_timestamp_seconds", "gauge",
              "When resilient-inspect --job computed the last standings round read.", {},
              st["wall_ns"] / 1e9)
        if isinstance(st.get("processes"), int):
            m.add(P + "standings_processes", "gauge",
                  "Processes the last standings round of resilient-inspect --job read.", {},
                  st["processes"])
        for link in st["links"]:
            frm, to = end_of(link.get("from")) or {}, end_of(link.get("to")) or {}
            lab = {"comm": comm_label(parse_comm_id(link.get("comm_id"))),
                   "from_rank": end_label(job, frm), "to_rank": end_label(job, to),
                   "from_address": frm.get("address", ""), "to_address": to.get("address", "")}
            if number(link.get("bytes_per_s")):  # 0: not measured
                m.set(P + "link_busy_throughput_bytes_per_second", "gauge",
                      "A sending link's bytes over the time it was busy in the last window "
                      "(resilient-inspect --job, last round).", lab, link["bytes_per_s"])
            if number(link.get("busy_fraction")) is not None:
                m.set(P + "link_busy_ratio", "gauge",
                      "The fraction of the last window a sending link was busy "
                      "(resilient-inspect --job, last round).", lab, link["busy_fraction"])
            if number(link.get("ratio")):  # 0: not compared
                m.set(P + "link_peer_ratio", "gauge",
                      "A link's busy throughput over the median of the job's other sending "
                      "links (over its own best window when that is the lower one; "
                      "resilient-inspect --job, last round).", lab, link["ratio"])
            if isinstance(link.get("slow"), bool):
                m.set(P + "link_slow", "gauge",
                      "1 while a link is below the slow-link threshold (resilient-inspect "
                      "--job, last round).", lab, link["slow"])
        for rank in st["ranks"]:
            who = end_of(rank.get("rank")) or {}
            lab = {"comm": comm_label(parse_comm_id(rank.get("comm_id"))),
                   "rank": end_label(job, who)}
            n, last = number(rank.get("collectives")), number(rank.get("last_count"))
            waited = number(rank.get("waited"))
            score = number(rank.get("score"))
            if score is None and (waited or n):
                score = (last or 0) / (waited or n)
            if score is not None:
                m.set(P + "straggler_score", "gauge",
                      "The standings' score of a rank: of the window's collectives that waited "
                      "for their last rank (all of them, before waiting was counted), the "
                      "share it was last to (resilient-inspect --job, last round).", lab, score)
            if waited is not None:
                m.set(P + "straggler_waited_collectives", "gauge",
                      "Collectives of the window that waited for their last rank by the "
                      "straggler threshold or more (resilient-inspect --job, last round).", lab,
                      waited)
            straggler_gauges(m, P, lab, rank.get("lag_ns"), n, rank.get("straggler"))
        return
    for rep in reports:
        if rep["kind"] != "straggler":
            continue
        for rk in report_ranks(job, rep):
            lab = {"comm": comm_label(rep["comm_id"]), "rank": str(rk)}
            straggler_gauges(m, P, lab, rep.get("lag_ns"), number(rep.get("collectives")),
                             None)


def straggler_gauges(m, P, lab, lag_ns, collectives, straggler):
    if number(lag_ns) is not None:
        m.set(P + "straggler_lag_seconds", "gauge",
              "A rank's median lag behind the median rank at the collectives it was last to "
              "(the last standings round; without one, the straggler report's).", lab,
              lag_ns / 1e9)
    if collectives is not None:
        m.set(P + "straggler_collectives", "gauge",
              "Collectives of the communicator compared over the window (the last standings "
              "round; without one, the straggler report's).", lab, collectives)
    if isinstance(straggler, bool):
        m.set(P + "rank_straggling", "gauge",
              "1 while a rank meets the straggler thresholds (resilient-inspect --job, last "
              "round).", lab, straggler)


def number(v):
    """v when it is a number (not a bool), else None."""
    return v if isinstance(v, (int, float)) and not isinstance(v, bool) else None


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
HTML_REPORT_FILL = "#ffb000"
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
    stamps += [r["wall_ns"] for r in all_reports(job) if r.get("wall_ns")]
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
    row_of = {proc.pid: i for i, proc in enumerate(procs)}
    for r in all_reports(job):
        if not r.get("wall_ns"):
            continue
        proc = end_process(job, r.get("subject")) if "ranks" not in r else None
        # On its subject's row; above the rows when the records do not hold it.
        y = top + row_of[proc.pid] * row_h + 26 if proc is not None else top - 10
        title = f"{r['kind']}: {report_who(job, r)}: {report_measure(r)}\n{r['text']}"
        out.append(f'<path class="report" data-kind="{h(r["kind"])}" '
                   f'd="M{x(r["wall_ns"]):.1f},{y - 7} l6,7 l-6,7 l-6,-7 z" '
                   f'fill="{HTML_REPORT_FILL}" stroke="#000" stroke-width="0.8">'
                   f'<title>{h(title)}</title></path>')
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
               f"slow-link, straggler and stuck-rank reports: {len(reps)}")
    if rng:
        summary += f"; from {h(iso(rng[0]))} for {(rng[1] - rng[0]) / 1e9:.3f} s"
    parts.append(f'<p class="meta">{summary}.</p>')
    parts.append("<h2>Timeline</h2>")
    legend = "".join(f'<span><i class="sw" style="background:{c}"></i>{h(k)}</span>'
                     for k, c in HTML_PHASE_FILL.items())
    legend += "".join(f'<span><i class="sw" style="background:{c}"></i>NCCL op {h(k)}</span>'
                      for k, c in HTML_OP_FILL.items())
    legend += ('<span><i class="sw" style="background:#d0021b"></i>fault</span>'
               f'<span><i class="sw" style="background:{HTML_REPORT_FILL}"></i>slow link, '
               'straggler or stuck rank (on its subject\'s row)</span>'
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
    parts.append("<h2>Slow links, stragglers and stuck ranks</h2>")
    parts.append(reports_html(job, reps, t0))
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


def reports_html(job, reps, t0):
    """The findings (one row each, with the records that hold it), then the last
    standings round of resilient-inspect --job."""
    parts = []
    if reps:
        head = ["time", "wall clock", "kind", "subject \u2192 peer", "ratio, lag or wait",
                "communicator", "reported", "records", "text"]
        out = ["<table><thead><tr>" + "".join(f"<th>{h(x)}</th>" for x in head) +
               "</tr></thead>", "<tbody>"]
        for r in reps:
            ranks = ",".join(str(x) for x in report_ranks(job, r)) or "?"
            cells = [(h(rel(r.get("wall_ns"), t0)), True), (h(iso(r.get("wall_ns"))), False),
                     (h(r["kind"]), False), (h(report_who(job, r)), False),
                     (h(report_measure(r)), False), (h(comm_label(r["comm_id"])), False),
                     (h(r["_times"]), True), (h("; ".join(r["_sources"])), False),
                     (h(r["text"]), False)]
            out.append(f'<tr class="report" data-kind="{h(r["kind"])}" '
                       f'data-subject="{h(ranks)}">' +
                       "".join(('<td class="n">' if n else "<td>") + f"{v}</td>"
                               for v, n in cells) +
                       "</tr>")
        out.append("</tbody></table>")
        parts.append("\n".join(out))
    else:
        parts.append("<p>No report in the records.</p>")
    st = job.standings
    if st is not None:
        parts.append(f"<h3>Last standings (resilient-inspect --job at {h(iso(st['wall_ns']))}, "
                     f"{h(st.get('processes', '?'))} processes)</h3>")
        if st["links"]:
            rows = []
            for link in st["links"]:
                frm, to = end_of(link.get("from")) or {}, end_of(link.get("to")) or {}
                ratio = number(link.get("ratio"))
                rows.append([h(comm_label(parse_comm_id(link.get("comm_id")))),
                             h(f"{end_text(job, frm)} {frm.get('address', '')}"),
                             h(f"{end_text(job, to)} {to.get('address', '')}"),
                             h(rate_text(number(link.get("bytes_per_s")))),
                             h(f"{(number(link.get('busy_fraction')) or 0) * 100:.0f}%"),
                             h(f"{ratio * 100:.0f}%" if ratio else "-"),
                             '<span class="bad">slow</span>' if link.get("slow") else ""])
            parts.append(html_table(["communicator", "from", "to", "throughput while busy",
                                     "busy", "ratio", ""], rows, numeric=(3, 4, 5)))
        else:
            parts.append("<p>No sending link measured in the last window.</p>")
        if st["ranks"]:
            rows = []
            for rank in st["ranks"]:
                who = end_of(rank.get("rank")) or {}
                lag = number(rank.get("lag_ns"))
                last_in = f"{rank.get('last_count', '?')} of {rank.get('collectives', '?')}"
                if number(rank.get("waited")) is not None:
                    last_in = (f"{rank.get('last_count', '?')} of the {rank['waited']} that "
                               f"waited (of {rank.get('collectives', '?')})")
                rows.append([h(comm_label(parse_comm_id(rank.get("comm_id")))),
                             h(end_text(job, who)), h(last_in),
                             h(f"{lag / 1e6:.1f} ms" if lag is not None else "-"),
                             h(f"{number(rank.get('score')) or 0:.2f}"),
                             '<span class="bad">straggler</span>' if rank.get("straggler")
                             else ""])
            parts.append(html_table(["communicator", "rank", "last in", "median lag", "score",
                                     ""], rows, numeric=(3, 4)))
        else:
            parts.append("<p>The last round lists no rank (none was last to a collective "
                         "judged).</p>")
    return "\n".join(parts)


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
    for r in all_reports(job):
        comm = f" on communicator {comm_label(r['comm_id'])}" if r["comm_id"] is not None else ""
        lines.append(f"  report {iso(r.get('wall_ns'))} {r['kind']}: {report_who(job, r)}{comm}: "
                     f"{report_measure(r)}")
    if job.standings is not None:
        st = job.standings
        lines.append(f"  standings at {iso(st['wall_ns'])}: {len(st['links'])} links, "
                     f"{len(st['ranks'])} ranks")
    return "\n".join(lines)


def parse_args(argv):
    p = argparse.ArgumentParser(
        prog=PROGRAM,
        description="Turns a job's records (blackbox snapshots or regions, rank timelines, "
                    "post-mortem dumps, resilient-inspect --job --json lines) into a Chrome "
                    "trace, PyTorch flight-recorder dumps, an HTML page and Prometheus metrics "
                    "(docs/observability.md).")
    p.add_argument("inputs", nargs="*",
                   help="files or directories (a directory is scanned, not recursively); "
                        "e.g. the job's blackbox directory and the output of "
                        "resilient-inspect --job --json")
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
