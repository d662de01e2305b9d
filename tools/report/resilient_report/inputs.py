"""What a job left behind, read: blackbox snapshots and regions, rank timelines,
post-mortem dumps, monitor logs, resilient-inspect --job --json lines; one Job
of Processes, their clocks merged."""

import json
import os
import re
import shutil
import socket
import statistics
import subprocess
import time

from .values import PROGRAM, number
from .findings import is_report_fault, make_report

INSPECT = "resilient-inspect"


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


def find_inspect(explicit, here=None):
    """resilient-inspect: --inspect, $RESILIENT_INSPECT, beside the resilient-report script
    (here: its directory; by default the folder that holds this package, as in the source
    tree), on PATH."""
    candidates = []
    if explicit:
        candidates.append(explicit)
    if os.environ.get("RESILIENT_INSPECT"):
        candidates.append(os.environ["RESILIENT_INSPECT"])
    if here is None:
        here = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))
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


def record_process(job, data, source, what):
    """The process a record names by its pid, with the record's source noted; None
    (and a warning) when it names none."""
    pid = data.get("pid")
    if not isinstance(pid, int) or pid <= 0:
        job.warn(f"{source}: {what} without a pid; skipped")
        return None
    proc = job.process(pid)
    proc.sources.append(source)
    return proc


def add_snapshot(job, snap, source):
    proc = record_process(job, snap, source, "blackbox snapshot")
    if proc is None:
        return
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
    proc = record_process(job, data, source, "post-mortem")
    if proc is None:
        return
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
