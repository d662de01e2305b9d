#!/usr/bin/python3
"""resilient-report on real records (fixtures.py): one format per run.

Each format is checked on the demo job, the replayed NCCL job and the health
job (a straggler named by the restart library and by resilient-inspect --job
--json, whose JSON lines are an input too).

  --check chrome-trace  strict Trace Event Format check of what we write (keys and
                        types per phase, metadata, every rank, faults, restarts,
                        NCCL operations, the hung one flagged); Perfetto's trace
                        processor too when the `perfetto` package imports
  --check prometheus    parses with prometheus_client (Debian python3-prometheus-client),
                        families, label sets, values; the atomic write; --listen
  --check fr-dump       the pickles against what PyTorch's flight-recorder analyzer
                        reads (torch/distributed/flight_recorder: loader, builder,
                        types, utils); the analyzer itself when torch has it
  --check html          renders in headless Chromium (Debian chromium); the
                        screenshot is not blank; --screenshot keeps a copy
  --check stuck-rank    the replayed NCCL job's stuck rank (rank 1 never enters the
                        all-reduce rank 0 waits in), as resilient-inspect --job --json
                        names it and as its fault-ring record states it: every output
                        names the rank, communicator, collective and time waited

Exit status 77 (skipped) when the package a check needs is missing or the
build lacks a program the fixtures need.
"""

import argparse
import ast
import json
import math
import os
import pickle
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import urllib.request
import zlib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fixtures  # noqa: E402

SKIP = 77
CHECKS = []


class Failure(Exception):
    pass


def expect(cond, what):
    if not cond:
        raise Failure(what)


def check(name):
    def register(fn):
        CHECKS.append((name, fn))
        return fn
    return register


def run_report(args, *extra, ok=True):
    argv = [sys.executable, args.report, "--inspect", fixtures.binaries(args.build)["inspect"]]
    argv += list(extra)
    p = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    if ok and p.returncode != 0:
        raise Failure(f"{' '.join(argv)} exited with {p.returncode}:\n{p.stderr}{p.stdout}")
    return p


def frozen_rank_reason(demo):
    """Why the demo's monitor ended its frozen rank 4 (its post-mortem dump's reason:
    `unresponsive` since the liveness link, `hard-timeout` before)."""
    names = [n for n in os.listdir(demo)
             if re.match(r"^resilient-monitor-4-\d+\.postmortem\.json$", n)]
    expect(len(names) == 1, f"demo: rank 4's post-mortem dump: {names}")
    with open(os.path.join(demo, names[0])) as f:
        reason = json.load(f).get("reason")
    expect(reason in ("unresponsive", "hard-timeout"), f"demo: rank 4 ended {reason!r}")
    return reason


def info_of(job_dir):
    with open(os.path.join(os.path.dirname(job_dir), "info.json")) as f:
        return json.load(f)


# ---------------------------------------------------------------------------
# Chrome trace
# ---------------------------------------------------------------------------

# Every phase letter of the Trace Event Format; we write X, i and M only.
ALL_PHASES = set("BEXiICbnesftPONDMRc") | {"(", ")"}
OUR_PHASES = {"X", "i", "M"}
METADATA = {"process_name": ("name", str), "process_labels": ("labels", str),
            "process_sort_index": ("sort_index", int), "thread_name": ("name", str),
            "thread_sort_index": ("sort_index", int)}
# The trace viewer's reserved color names.
CNAMES = {"good", "bad", "terrible", "yellow", "olive", "generic_work", "grey", "white", "black",
          "thread_state_uninterruptible", "thread_state_iowait", "thread_state_running",
          "thread_state_runnable", "thread_state_sleeping", "thread_state_unknown",
          "background_memory_dump", "light_memory_dump", "detailed_memory_dump",
          "vsync_highlight_color", "rail_response", "rail_animation", "rail_idle", "rail_load",
          "startup", "heap_dump_stack_frame", "heap_dump_object_type",
          "heap_dump_child_node_highlight",
          "cq_build_running", "cq_build_passed", "cq_build_failed", "cq_build_abandoned",
          "cq_build_attempt_runnig", "cq_build_attempt_passed", "cq_build_attempt_failed"}


def is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


def is_num(v):
    return (isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v))


def validate_trace(trace):
    """Strict schema check; returns the events."""
    expect(isinstance(trace, dict), "the trace is not a JSON object")
    expect(set(trace) <= {"traceEvents", "displayTimeUnit", "otherData", "metadata",
                          "systemTraceEvents", "stackFrames", "samples"},
           f"unexpected top-level keys {sorted(trace)}")
    expect(trace.get("displayTimeUnit") in ("ms", "ns"), "displayTimeUnit is not ms or ns")
    expect(isinstance(trace.get("otherData", {}), dict), "otherData is not an object")
    events = trace.get("traceEvents")
    expect(isinstance(events, list) and events, "traceEvents is not a non-empty list")
    names = {}
    for i, e in enumerate(events):
        where = f"event {i} {json.dumps(e)[:200]}"
        expect(isinstance(e, dict), f"{where}: not an object")
        ph = e.get("ph")
        expect(ph in ALL_PHASES, f"{where}: ph {ph!r} is not a Trace Event Format phase")
        expect(ph in OUR_PHASES, f"{where}: ph {ph!r} is not one we write")
        expect(isinstance(e.get("name"), str) and e["name"], f"{where}: name")
        expect(is_int(e.get("pid")) and e["pid"] >= 0, f"{where}: pid is not an int")
        expect(is_int(e.get("tid")) and e["tid"] >= 0, f"{where}: tid is not an int")
        if "cat" in e:
            expect(isinstance(e["cat"], str), f"{where}: cat")
        if "args" in e:
            expect(isinstance(e["args"], dict), f"{where}: args")
        if "cname" in e:
            expect(e["cname"] in CNAMES, f"{where}: cname {e['cname']!r} is not reserved")
        if ph == "M":
            expect(e["name"] in METADATA, f"{where}: unknown metadata event")
            key, typ = METADATA[e["name"]]
            args = e.get("args")
            expect(isinstance(args, dict) and set(args) == {key}, f"{where}: metadata args")
            expect(isinstance(args[key], typ) and not isinstance(args[key], bool),
                   f"{where}: metadata {key} type")
            k = (e["pid"], e["tid"] if e["name"].startswith("thread") else 0, e["name"])
            expect(k not in names, f"{where}: metadata {k} given twice")
            names[k] = args[key]
            expect(set(e) <= {"name", "ph", "pid", "tid", "args", "ts"}, f"{where}: keys")
            continue
        expect(is_num(e.get("ts")) and e["ts"] >= 0, f"{where}: ts is not a number >= 0")
        if ph == "X":
            expect(is_num(e.get("dur")) and e["dur"] >= 0, f"{where}: dur is not a number >= 0")
            expect(set(e) <= {"name", "cat", "ph", "ts", "dur", "pid", "tid", "args", "cname"},
                   f"{where}: keys")
        if ph == "i":
            expect(e.get("s", "t") in ("g", "p", "t"), f"{where}: instant scope")
            expect(set(e) <= {"name", "cat", "ph", "ts", "s", "pid", "tid", "args", "cname"},
                   f"{where}: keys")
    for (pid, tid, kind), _ in names.items():
        if kind == "thread_name":
            expect((pid, 0, "process_name") in names, f"thread {tid} of pid {pid} has no process")
    check_nesting(events)
    return events, names


def check_nesting(events):
    """Complete events of one thread nest or follow each other (trace viewers
    drop slices that overlap partially)."""
    tracks = {}
    for e in events:
        if e["ph"] == "X":
            tracks.setdefault((e["pid"], e["tid"]), []).append(e)
    slack = 0.002  # microseconds: ts and dur are rounded to nanoseconds each
    for key, slices in tracks.items():
        slices.sort(key=lambda e: (e["ts"], -e["dur"]))
        stack = []
        for e in slices:
            while stack and stack[-1]["ts"] + stack[-1]["dur"] <= e["ts"] + slack:
                stack.pop()
            if stack:
                top = stack[-1]
                expect(e["ts"] + e["dur"] <= top["ts"] + top["dur"] + slack,
                       f"thread {key}: {e['name']} at {e['ts']} overlaps {top['name']} "
                       f"at {top['ts']} partially")
            stack.append(e)


def process_of(names, rank):
    for (pid, _, kind), value in names.items():
        if kind == "process_name" and value.startswith(f"rank {rank} ("):
            return pid
    return None


def try_perfetto(path):
    try:
        from perfetto.trace_processor import TraceProcessor  # noqa: F401
    except ImportError:
        print("perfetto: the Python package is not importable here; its trace processor "
              "check is skipped (the schema check stands)")
        return
    tp = TraceProcessor(trace=path)
    n = next(iter(tp.query("select count(*) as n from slice"))).n
    expect(n > 0, "Perfetto's trace processor found no slice")
    print(f"perfetto: trace processor loaded {n} slices")


@check("chrome-trace")
def check_chrome_trace(args, out):
    demo = fixtures.demo_job(args.build)
    path = os.path.join(out, "demo.trace.json")
    run_report(args, demo, "--chrome-trace", path)
    with open(path) as f:
        trace = json.load(f)
    events, names = validate_trace(trace)
    for rank in range(8):
        expect(process_of(names, rank) is not None, f"demo: rank {rank} has no process")
    restarts = [e for e in events if e.get("cat") == "restart" and e["ph"] == "i"
                and e.get("s") == "g"]
    expect({e["name"] for e in restarts} >= {"restart: iteration 1", "restart: iteration 2"},
           f"demo: restarts missing: {[e['name'] for e in restarts]}")
    ended = {e["pid"] for e in events if e.get("cat") == "fault" and
             e["name"].startswith("rank ended")}
    expect({process_of(names, 2), process_of(names, 4)} <= ended,
           "demo: the killed ranks 2 and 4 have no 'rank ended' fault event")
    detected = [e for e in events if e.get("cat") == "fault" and e["name"] == "fault detected"]
    expect(len({e["pid"] for e in detected}) >= 6, "demo: fault detections missing")
    spans = [e for e in events if e["ph"] == "X" and e.get("cat", "").startswith("restart.")]
    expect(len({e["pid"] for e in spans}) >= 6, "demo: restart-loop spans missing")
    running = [e for e in spans if e["name"] == "running"]
    expect(running and all(e["dur"] > 0 for e in running), "demo: no running span")
    # One clock: every rank's first iteration-1 phase lies within a second of the others'.
    firsts = {}
    for e in events:
        if e.get("cat") == "restart.phase" and e["args"].get("iteration") == 1:
            firsts.setdefault(e["pid"], e["ts"])
    expect(len(firsts) >= 5 and max(firsts.values()) - min(firsts.values()) < 1e6,
           f"demo: iteration 1 begins far apart on the ranks: {firsts}")
    try_perfetto(path)

    nccl = fixtures.nccl_job(args.build)
    path = os.path.join(out, "nccl.trace.json")
    run_report(args, nccl, "--chrome-trace", path)
    with open(path) as f:
        events, names = validate_trace(json.load(f))
    p0, p1 = process_of(names, 0), process_of(names, 1)
    expect(p0 is not None and p1 is not None, "nccl: ranks 0 and 1 missing")
    ops0 = [e for e in events if e["pid"] == p0 and e["ph"] == "X" and
            e.get("cat", "").startswith("nccl.")]
    ops1 = [e for e in events if e["pid"] == p1 and e["ph"] == "X" and
            e.get("cat", "").startswith("nccl.")]
    expect(len(ops0) == 19, f"nccl: rank 0 has {len(ops0)} operations, expected 19")
    expect(len(ops1) == 18, f"nccl: rank 1 has {len(ops1)} operations, expected 18")
    hung = [e for e in ops0 if e["args"].get("in_flight_at_snapshot")]
    expect(len(hung) == 1 and hung[0].get("cname") == "terrible" and
           hung[0]["args"].get("state") == "hung", f"nccl: the hung all-reduce: {hung}")
    expect(all(e["ts"] >= o["ts"] for o in ops0 if o is not hung[0] for e in hung),
           "nccl: the hung operation is not the last one")
    faults = [e for e in events if e["pid"] == p0 and e.get("cat") == "fault"]
    expect(any(e["name"] == "fault: collective hung" for e in faults),
           "nccl: rank 0's hung-collective fault is missing")
    threads = [v for (pid, _, k), v in names.items() if k == "thread_name" and pid == p0]
    expect(any(t.startswith("NCCL 0x482c0bce0e10a38a") for t in threads),
           f"nccl: no thread for the communicator: {threads}")
    try_perfetto(path)

    health = fixtures.health_job(args.build)
    straggler = info_of(health)["straggler"]
    path = os.path.join(out, "health.trace.json")
    run_report(args, health, "--chrome-trace", path)
    with open(path) as f:
        events, names = validate_trace(json.load(f))
    reports = [e for e in events if e.get("cat") == "report"]
    expect(len(reports) == 1, f"health: {len(reports)} report events, expected the straggler "
           f"once: {[e['name'] for e in reports]}")
    rep = reports[0]
    expect(rep["ph"] == "i" and rep.get("s") == "g", f"health: not a global instant: {rep}")
    expect(rep["pid"] == process_of(names, straggler) and rep["args"]["kind"] == "straggler"
           and rep["args"]["ranks"] == [straggler], f"health: the report is not on rank "
           f"{straggler}'s process: {rep}")
    expect(rep["args"]["text"].startswith(f"straggler rank {straggler} ("),
           f"health: the report's text {rep['args']['text']!r}")
    records = rep["args"]["records"]
    expect(len(records) == 3 and any(r.endswith("health.jsonl") for r in records),
           f"health: the report of the inspect output, the blackbox and the timeline are "
           f"not one: {records}")
    p0, ps = process_of(names, 0), process_of(names, straggler)
    expect(any(e["name"] == "health compared" and e["pid"] == p0 and
               e.get("cat") == "restart.phase" for e in events),
           "health: rank 0's 'health compared' phase is missing")
    expect(not any(e["name"] == "health report" and e.get("cat") == "restart.phase"
                   for e in events), "health: a 'health report' entry shown as a phase")
    running = [e for e in events if e["pid"] == ps and e.get("cat") == "restart.running"]
    expect(len(running) == 1, f"health: rank {straggler}'s running span is cut in "
           f"{len(running)} by its report")
    try_perfetto(path)


# ---------------------------------------------------------------------------
# Prometheus
# ---------------------------------------------------------------------------

NAME_RE = re.compile(r"^[a-z_:][a-z0-9_:]*$")


def parse_exposition(text):
    try:
        from prometheus_client.parser import text_string_to_metric_families
    except ImportError:
        raise SystemExit(SKIP)
    families = {}
    for fam in text_string_to_metric_families(text):
        families[fam.name] = fam
    return families


def family(families, name):
    """The family of `name`; the parser drops a counter's _total from the family name."""
    fam = families.get(name) or families.get(re.sub(r"_total$", "", name))
    expect(fam is not None, f"family {name} missing")
    return fam


def samples(fam, name=None):
    return [s for s in fam.samples if name is None or s.name == name]


def check_exposition_text(text):
    """What the parser forgives: HELP and TYPE per family, names, no duplicate series."""
    helps, types, seen = set(), {}, set()
    for line in text.splitlines():
        if line.startswith("# HELP "):
            helps.add(line.split()[2])
        elif line.startswith("# TYPE "):
            _, _, name, kind = line.split(maxsplit=3)
            expect(kind in ("counter", "gauge"), f"{name}: type {kind}")
            expect(name not in types, f"{name}: TYPE twice")
            types[name] = kind
        elif line and not line.startswith("#"):
            series = line.rsplit(" ", 1)[0]
            expect(series not in seen, f"duplicate series {series}")
            seen.add(series)
            name = re.split(r"[{ ]", line, 1)[0]
            expect(name in types, f"{name}: sample before its TYPE")
    for name, kind in types.items():
        expect(name in helps, f"{name}: no HELP")
        expect(NAME_RE.match(name), f"{name}: not snake_case")
        expect(name.startswith("nccl_resilient_"), f"{name}: not in our namespace")
        if kind == "counter":
            expect(name.endswith("_total"), f"counter {name} does not end in _total")
        expect(not re.search(r"_(ms|ns|us|milliseconds|nanoseconds)(_|$)", name),
               f"{name}: times are in seconds")


@check("prometheus")
def check_prometheus(args, out):
    parse_exposition("")  # exits 77 without prometheus_client
    demo = fixtures.demo_job(args.build)
    path = os.path.join(out, "demo.prom")
    run_report(args, demo, "--prometheus", path)
    leftovers = [f for f in os.listdir(out) if f.startswith(".demo.prom")]
    expect(not leftovers, f"temporary files left: {leftovers}")
    with open(path) as f:
        text = f.read()
    check_exposition_text(text)
    fams = parse_exposition(text)
    conn = family(fams, "nccl_resilient_connection_bytes_total")
    expect(conn.type == "counter", "connection bytes is not a counter")
    labelsets = {tuple(sorted(s.labels)) for s in conn.samples}
    expect(labelsets == {("comm", "direction", "peer", "rank")},
           f"connection bytes labels: {labelsets}")
    ranks = {s.labels["rank"] for s in conn.samples}
    expect(len(ranks) >= 6, f"connection bytes of only ranks {sorted(ranks)}")
    expect(all(s.labels["direction"] in ("send", "recv") for s in conn.samples), "direction")
    # A peer is named by its rank, unless the snapshot caught the connection
    # before the peer introduced itself (peer pid 0): then by its address.
    unintroduced = {c.get("peer") for c in demo_connections(demo) if not c.get("peer_pid")}
    unnamed = [s.labels["peer"] for s in conn.samples
               if not re.match(r"^\d+$", s.labels["peer"])]
    expect(all(p in unintroduced for p in unnamed),
           f"peers not named by their rank: {[p for p in unnamed if p not in unintroduced]}")
    expect(len(unnamed) < len(conn.samples) / 2, f"most peers not named by rank: {unnamed}")
    expect(sum(s.value for s in samples(conn, "nccl_resilient_connection_bytes_total")) > 0,
           "no byte counted")
    for name in ("nccl_resilient_connection_outstanding_requests",
                 "nccl_resilient_connection_requests_total", "nccl_resilient_faults_total",
                 "nccl_resilient_operations_completed_total",
                 "nccl_resilient_operations_in_flight", "nccl_resilient_process_alive"):
        family(fams, name)
    ended = family(fams, "nccl_resilient_rank_ended")
    expect({s.labels["rank"] for s in ended.samples} == {"2", "4"},
           f"ranks ended: {[s.labels for s in ended.samples]}")
    faults = family(fams, "nccl_resilient_faults_total")
    expect(all(set(s.labels) == {"rank", "class"} for s in faults.samples), "fault labels")
    restarts = family(fams, "nccl_resilient_restarts_total")
    expect(any(s.value == 2 for s in restarts.samples), "no rank saw 2 restarts")
    if any("busy_ns" in c for c in demo_connections(demo)):
        family(fams, "nccl_resilient_connection_busy_seconds_total")

    nccl = fixtures.nccl_job(args.build)
    path = os.path.join(out, "nccl.prom")
    run_report(args, nccl, "--prometheus", path)
    with open(path) as f:
        text = f.read()
    check_exposition_text(text)
    fams = parse_exposition(text)
    done = family(fams, "nccl_resilient_operations_completed_total")
    got = {(s.labels["rank"], s.labels["kind"]): s.value for s in done.samples
           if s.name.endswith("_total")}
    expect(got == {("0", "collective"): 12, ("0", "p2p"): 6, ("1", "collective"): 12,
                   ("1", "p2p"): 6}, f"nccl: operations completed {got}")
    flight = {s.labels["rank"]: s.value
              for s in family(fams, "nccl_resilient_operations_in_flight").samples}
    expect(flight == {"0": 1, "1": 0}, f"nccl: in flight {flight}")
    hung = [s for s in family(fams, "nccl_resilient_faults_total").samples
            if s.labels == {"rank": "0", "class": "collective hung"} and s.value == 1]
    expect(hung, "nccl: rank 0's hung collective is not counted")
    check_listen(args, [nccl], text)
    check_prometheus_health(args, out)


def last_standings(path):
    with open(path) as f:
        rounds = [json.loads(line) for line in f if '"standings"' in line]
    expect(rounds, f"{path}: no standings round")
    return rounds[-1]


def gauge_values(fams, name):
    fam = family(fams, name)
    expect(fam.type == "gauge", f"{name} is not a gauge")
    return {tuple(sorted(s.labels.items())): s.value for s in fam.samples}


def check_prometheus_health(args, out):
    """The straggler job: its report counted once, the last standings as gauges; then a
    later round with measured links (the demo's links are seldom busy long enough to be
    measured), named beside the directory as in the live recipe."""
    health = fixtures.health_job(args.build)
    info = info_of(health)
    straggler, pids = str(info["straggler"]), info["pids"]
    path = os.path.join(out, "health.prom")
    run_report(args, health, "--prometheus", path)
    with open(path) as f:
        text = f.read()
    check_exposition_text(text)
    fams = parse_exposition(text)
    reports = {(s.labels["kind"], s.labels["rank"]): s.value
               for s in family(fams, "nccl_resilient_reports_total").samples
               if s.name.endswith("_total")}
    expect(reports == {("straggler", straggler): 1}, f"health: reports {reports}")
    last = last_standings(os.path.join(health, "health.jsonl"))
    stamp = gauge_values(fams, "nccl_resilient_standings_timestamp_seconds")
    expect(len(stamp) == 1 and abs(list(stamp.values())[0] - last["wall_ns"] / 1e9) < 1e-3,
           f"health: standings time {stamp} is not the last round's {last['wall_ns']}")
    score = gauge_values(fams, "nccl_resilient_straggler_score")
    lag = gauge_values(fams, "nccl_resilient_straggler_lag_seconds")
    expect(last["standings"]["ranks"], "health: the last round has no rank standing")
    for r in last["standings"]["ranks"]:
        rank = [k for k, v in pids.items() if v == r["rank"]["pid"]]
        expect(len(rank) == 1, f"health: standing of an unknown pid {r['rank']}")
        key = (("comm", f"0x{r['comm_id']:016x}"), ("rank", rank[0]))
        want = r.get("score", r["last_count"] / r["collectives"])
        expect(key in score and abs(score[key] - want) < 1e-9,
               f"health: straggler score {score} for {r}")
        expect(key in lag and abs(lag[key] - r["lag_ns"] / 1e9) < 1e-9,
               f"health: straggler lag {lag} for {r}")
    expect((("comm", f"0x{last['standings']['ranks'][0]['comm_id']:016x}"),
            ("rank", straggler)) in score, f"health: no score of rank {straggler}: {score}")
    # The job's links, when its round lists them (the demo's all-reduce may carry too
    # little for a link to be busy: then no throughput and no ratio).
    if last["standings"]["links"]:
        busy = gauge_values(fams, "nccl_resilient_link_busy_ratio")
        rank_of = {v: k for k, v in pids.items()}
        for link in last["standings"]["links"]:
            key = (("comm", f"0x{link['comm_id']:016x}"),
                   ("from_address", link["from"]["address"]),
                   ("from_rank", rank_of[link["from"]["pid"]]),
                   ("to_address", link["to"]["address"]), ("to_rank", rank_of[link["to"]["pid"]]))
            expect(busy.get(key) == link["busy_fraction"], f"health: link busy {busy} for {link}")
        expect(len(busy) == len(last["standings"]["links"]), f"health: link busy {busy}")

    # A later round with links (the ends as resilient-inspect names them: their
    # communicator rank, pid, host), as a file named beside the directory.
    with open(os.path.join(health, f"bb-{pids['1']}.json")) as f:
        host = json.load(f)["host"]
    comm = last["standings"]["ranks"][0]["comm_id"]

    def end(rank, port):
        return {"rank": rank, "host": host, "pid": pids[str(rank)],
                "address": f"127.0.0.1:{port}"}
    links = [{"comm_id": comm, "from": end(1, 4001), "to": end(2, 4002), "bytes_per_s": 2.5e8,
              "busy_fraction": 0.25, "ratio": 1.0, "slow": False},
             {"comm_id": comm, "from": end(2, 4002), "to": end(3, 4003), "bytes_per_s": 5e7,
              "busy_fraction": 0.9, "ratio": 0.2, "slow": True},
             {"comm_id": comm, "from": end(3, 4003), "to": end(4, 4004), "bytes_per_s": 0,
              "busy_fraction": 0.0, "ratio": 0, "slow": False}]
    later = dict(last, wall_ns=last["wall_ns"] + 10 ** 9,
                 standings={"links": links, "ranks": last["standings"]["ranks"]})
    extra = os.path.join(out, "later.jsonl")
    with open(extra, "w") as f:
        f.write(json.dumps(later) + "\n")
    path = os.path.join(out, "links.prom")
    run_report(args, health, extra, "--prometheus", path)
    with open(path) as f:
        text = f.read()
    check_exposition_text(text)
    fams = parse_exposition(text)
    throughput = gauge_values(fams, "nccl_resilient_link_busy_throughput_bytes_per_second")
    busy = gauge_values(fams, "nccl_resilient_link_busy_ratio")
    ratio = gauge_values(fams, "nccl_resilient_link_peer_ratio")

    def key(a, b):
        return (("comm", f"0x{comm:016x}"), ("from_address", f"127.0.0.1:400{a}"),
                ("from_rank", str(a)), ("to_address", f"127.0.0.1:400{b}"), ("to_rank", str(b)))
    expect(throughput == {key(1, 2): 2.5e8, key(2, 3): 5e7},
           f"links: busy throughput {throughput} (a link not measured has none)")
    expect(busy == {key(1, 2): 0.25, key(2, 3): 0.9, key(3, 4): 0.0}, f"links: busy {busy}")
    expect(ratio == {key(1, 2): 1.0, key(2, 3): 0.2}, f"links: ratio {ratio}")
    slow = gauge_values(fams, "nccl_resilient_link_slow")
    expect(slow.get(key(2, 3)) == 1 and slow.get(key(1, 2)) == 0, f"links: slow {slow}")
    stamp = gauge_values(fams, "nccl_resilient_standings_timestamp_seconds")
    expect(len(stamp) == 1 and abs(list(stamp.values())[0] - later["wall_ns"] / 1e9) < 1e-3,
           "links: the later round is not the one used")
    # The live recipe: the metrics served are the file's.
    check_listen(args, [health, extra], text)


def demo_connections(job_dir):
    out = []
    for name in os.listdir(job_dir):
        if name.startswith("bb-"):
            with open(os.path.join(job_dir, name)) as f:
                out += json.load(f).get("connections", [])
    return out


def check_listen(args, inputs, file_text):
    argv = [sys.executable, args.report, "--inspect", fixtures.binaries(args.build)["inspect"],
            *inputs, "--listen", "0", "--quiet"]
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = p.stdout.readline()
        m = re.search(r"(http://127\.0\.0\.1:\d+/metrics)", line)
        expect(m, f"--listen printed {line!r}")
        with urllib.request.urlopen(m.group(1), timeout=30) as r:
            expect(r.headers.get("Content-Type", "").startswith("text/plain; version=0.0.4"),
                   "--listen: content type")
            body = r.read().decode()
        strip = lambda t: [l for l in t.splitlines() if "generated_timestamp" not in l]  # noqa
        expect(strip(body) == strip(file_text), "--listen serves other metrics than the file")
    finally:
        p.terminate()
        p.wait(timeout=10)


# ---------------------------------------------------------------------------
# PyTorch flight-recorder dump
# ---------------------------------------------------------------------------

# The operation names the analyzer accepts (types.py COLLECTIVES, P2P).
FR_NAMES = {"broadcast", "_broadcast_oop", "reduce", "_reduce_oop", "all_gather",
            "all_gather_single", "all_gather_v", "all_reduce", "_all_gather_base",
            "all_gather_into_tensor_coalesced", "reduce_scatter", "reduce_scatter_single",
            "reduce_scatter_v", "reduce_scatter_tensor_coalesced", "_reduce_scatter_base",
            "gather", "scatter", "all_to_all", "all_to_all_single", "all_to_all_v_single",
            "all_reduce_barrier", "barrier", "split", "new_window", "allreduce_coalesced",
            "ALLGATHER_coalesced", "REDUCE_SCATTER_coalesced", "send", "recv", "coalesced"}
FR_TOP = {"version": str, "pg_config": dict, "pg_status": dict, "entries": list}
FR_ENTRY = {"record_id": int, "pg_id": int, "process_group": tuple, "collective_seq_id": int,
            "p2p_seq_id": int, "op_id": int, "profiling_name": str, "time_created_ns": int,
            "input_sizes": list, "input_dtypes": list, "output_sizes": list,
            "output_dtypes": list, "state": str, "retired": bool, "timeout_ms": int,
            "is_p2p": bool, "frames": list, "time_discovered_started_ns": (int, type(None)),
            "time_discovered_completed_ns": (int, type(None))}
FR_OPTIONAL = {"duration_ms": float, "thread_name": str, "thread_id": str}


def type_ok(value, t):
    """isinstance, where a bool is no int."""
    types = t if isinstance(t, tuple) else (t,)
    if isinstance(value, bool):
        return bool in types
    return isinstance(value, types)


def load_dumps(directory, prefix):
    dumps = {}
    for name in sorted(os.listdir(directory)):
        expect(name.startswith(prefix), f"{name}: not named {prefix}<rank>")
        rank = name[len(prefix):]
        expect(rank.isdigit(), f"{name}: the rest of the name is not a rank")
        with open(os.path.join(directory, name), "rb") as f:
            dumps[int(rank)] = pickle.load(f)
    return dumps


def check_entry(rank, e, groups):
    where = f"rank {rank} record {e.get('record_id')}"
    for k, t in FR_ENTRY.items():
        expect(k in e, f"{where}: key {k} missing")
        expect(type_ok(e[k], t), f"{where}: {k} is {type(e[k]).__name__}, not {t}")
    for k, t in FR_OPTIONAL.items():
        if k in e:
            expect(type_ok(e[k], t), f"{where}: {k} type")
    pg = e["process_group"]
    expect(len(pg) == 2 and all(isinstance(x, str) for x in pg), f"{where}: process_group")
    expect(pg[0] in groups, f"{where}: process group {pg[0]} not in pg_config")
    backend, _, rest = e["profiling_name"].partition(":")
    expect(backend == "nccl", f"{where}: profiling name {e['profiling_name']}")
    parts = rest.split(" ")
    expect(parts[0] in FR_NAMES and len(parts) <= 2, f"{where}: {e['profiling_name']}")
    if parts[0] == "send":
        expect(re.match(r"^\d+->\d+$", parts[1]), f"{where}: send needs src->dst")
    if parts[0] == "recv":
        expect(re.match(r"^\d+<-\d+$", parts[1]), f"{where}: recv needs dst<-src")
    expect(e["is_p2p"] == (parts[0] in ("send", "recv")), f"{where}: is_p2p")
    for k in ("input_sizes", "output_sizes"):
        expect(all(isinstance(s, list) and all(isinstance(d, int) for d in s) for s in e[k]),
               f"{where}: {k}")
    for k in ("input_dtypes", "output_dtypes"):
        expect(all(isinstance(d, str) and d for d in e[k]), f"{where}: {k}")
    expect(e["state"] in ("scheduled", "started", "completed"), f"{where}: state {e['state']}")
    if e["state"] == "completed":
        expect(e["time_discovered_completed_ns"] and e["time_discovered_started_ns"],
               f"{where}: completed without times")
        expect(e["time_created_ns"] <= e["time_discovered_started_ns"] <=
               e["time_discovered_completed_ns"], f"{where}: times out of order")
    numel = lambda sizes: math.prod(sizes[0]) if sizes and sizes[0] else 0  # noqa: E731
    size = len(groups[pg[0]])
    if parts[0] == "all_gather":
        expect(numel(e["output_sizes"]) == numel(e["input_sizes"]) * size,
               f"{where}: all_gather output numel is not input numel x group size")
    if parts[0] == "reduce_scatter":
        expect(numel(e["input_sizes"]) == numel(e["output_sizes"]) * size,
               f"{where}: reduce_scatter input numel is not output numel x group size")


def check_dumps(dumps):
    versions = set()
    for rank, d in dumps.items():
        expect(isinstance(d, dict), f"rank {rank}: the dump is not a dict")
        for k, t in FR_TOP.items():
            expect(isinstance(d.get(k), t), f"rank {rank}: {k} missing or not {t.__name__}")
        expect(re.match(r"^\d+\.\d+$", d["version"]), f"rank {rank}: version {d['version']}")
        versions.add(d["version"])
        groups = {}
        for uid, pg in d["pg_config"].items():
            expect(isinstance(pg, dict) and {"name", "desc", "ranks"} <= set(pg),
                   f"rank {rank}: pg_config {uid}")
            ranks = ast.literal_eval(pg["ranks"])
            expect(isinstance(ranks, list) and all(isinstance(r, int) for r in ranks),
                   f"rank {rank}: pg {uid} ranks {pg['ranks']!r}")
            groups[uid] = ranks
        for pg_id, st in d["pg_status"].items():
            expect(isinstance(pg_id, str) and set(st) == {
                "last_enqueued_collective", "last_started_collective",
                "last_completed_collective"} and all(isinstance(v, int) for v in st.values()),
                f"rank {rank}: pg_status {pg_id}")
        previous = -1
        for e in d["entries"]:
            check_entry(rank, e, groups)
            expect(e["record_id"] > previous, f"rank {rank}: record ids not increasing")
            previous = e["record_id"]
            expect(rank in groups[e["process_group"][0]],
                   f"rank {rank}: not a member of its entry's group")
    expect(len(versions) == 1, f"versions differ across ranks: {versions}")


def analyzer_findings(dumps):
    """What PyTorch's analyzer (fr_trace) would find, by its matching rule written
    here (its code is not ours to copy, nor installed: Debian's torch predates
    it): per process group, the first rank's first entry is compared with, on
    every other member, that member's first unmatched entry of the group with
    the same collective_seq_id; a collective must meet the same collective with
    the same sizes and dtypes, a send the peer's receive from it and a receive
    the peer's send to it, with the same sizes. Returns (mismatches, missing):
    mismatches as text, missing as {(group, seq, name, state): {members}}."""
    groups = {}
    for d in dumps.values():
        for uid, pg in d["pg_config"].items():
            groups[uid] = ast.literal_eval(pg["ranks"])
    mismatches, missing = [], {}
    for uid, members in groups.items():
        queues = {r: [e for e in dumps[r]["entries"] if e["process_group"][0] == uid]
                  for r in members if r in dumps}
        while any(queues.values()):
            first = next(r for r in members if queues.get(r))
            e = queues[first].pop(0)
            kind, _, ends = e["profiling_name"][len("nccl:"):].partition(" ")
            others = [m for m in members if m != first]
            if e["is_p2p"]:
                me, peer = (int(x) for x in ends.split("->" if kind == "send" else "<-"))
                others = [members[peer]]
                want = (f"nccl:recv {peer}<-{me}" if kind == "send" else f"nccl:send {peer}->{me}")
            else:
                want = e["profiling_name"]
            for m in others:
                q = queues.get(m, [])
                i = next((i for i, o in enumerate(q)
                          if o["collective_seq_id"] == e["collective_seq_id"]), None)
                if i is None:
                    key = (uid, e["collective_seq_id"], e["profiling_name"], e["state"])
                    missing.setdefault(key, set()).add(m)
                    continue
                o = q.pop(i)
                sizes = ((e["input_sizes"], e["output_sizes"], e["input_dtypes"])
                         if not e["is_p2p"] else (e["input_sizes"],))
                theirs = ((o["input_sizes"], o["output_sizes"], o["input_dtypes"])
                          if not e["is_p2p"] else (o["input_sizes"],))
                if o["profiling_name"] != want or sizes != theirs:
                    mismatches.append(f"group {uid} seq {e['collective_seq_id']}: rank {first}'s "
                                      f"{e['profiling_name']} {sizes} met rank {m}'s "
                                      f"{o['profiling_name']} {theirs}")
    return mismatches, missing


def check_analyzer_findings(dumps, where, expected_missing=None):
    """No mismatch; no completed operation missing on a member (every member
    joined it: its records just end earlier); the missing ones as expected."""
    mismatches, missing = analyzer_findings(dumps)
    expect(not mismatches, f"{where}: the analyzer would report mismatches: {mismatches[:3]}")
    completed = {k: v for k, v in missing.items() if k[3] == "completed"}
    expect(not completed, f"{where}: completed operations missing on members: {completed}")
    if expected_missing is not None:
        found = {(k[1], k[2]): v for k, v in missing.items()}
        expect(found == expected_missing, f"{where}: missing {found}, not {expected_missing}")
    return missing


def run_real_analyzer(directory, prefix):
    python = "/usr/bin/python3"
    probe = subprocess.run([python, "-c", "import torch.distributed.flight_recorder.fr_trace"],
                           capture_output=True, text=True)
    if probe.returncode != 0:
        print("PyTorch's flight-recorder analyzer is not importable here (Debian's torch "
              "predates it): the key and type check stands in for it")
        return
    p = subprocess.run([python, "-m", "torch.distributed.flight_recorder.fr_trace", directory,
                        "--prefix", prefix], capture_output=True, text=True, timeout=120)
    print(p.stdout[-3000:], p.stderr[-3000:])
    expect(p.returncode == 0, f"fr_trace exited with {p.returncode}")
    # It exits 0 whatever it finds: its findings are in its words.
    text = p.stdout + p.stderr
    expect("has errors" not in text and "MISMATCH" not in text,
           "fr_trace reports errors in our dumps")


@check("fr-dump")
def check_fr_dump(args, out):
    demo = fixtures.demo_job(args.build)
    d = os.path.join(out, "demo-fr")
    run_report(args, demo, "--fr-dump", d)
    dumps = load_dumps(d, "nccl_trace_rank_")
    # The 8 ranks, and the processes their agents started in place of the
    # two broken ones (initial ranks 8 and 9 once they joined).
    expect(sorted(dumps)[:8] == list(range(8)) and set(sorted(dumps)[8:]) <= {8, 9},
           f"demo: dumps of ranks {sorted(dumps)}")
    check_dumps(dumps)
    missing = check_analyzer_findings(dumps, "demo")
    # The faults: rank 2 killed, rank 4 frozen. Where one stopped before
    # enqueuing its generation's next collective, that collective lacks it;
    # where it stopped inside it, every rank joined it (no finding). Never a
    # rank that did its work -- but the collective a restart cut, each
    # communicator's last: the abort follows a fault at once (issue 34: no
    # window), so a healthy rank may abort before it enqueues the collective
    # that others entered just before the fault reached them.
    last = {}
    for dump in dumps.values():
        for e in dump["entries"]:
            group = e["process_group"][0]
            last[group] = max(last.get(group, -1), e["collective_seq_id"])
    expect(all(v <= {2, 4} or key[1] == last.get(key[0]) for key, v in missing.items()),
           f"demo: the analyzer would name healthy ranks missing: {missing}")
    run_real_analyzer(d, "nccl_trace_rank_")

    nccl = fixtures.nccl_job(args.build)
    d = os.path.join(out, "nccl-fr")
    run_report(args, nccl, "--fr-dump", d, "--fr-prefix", "trace_", "--fr-timeout-ms", "600000")
    dumps = load_dumps(d, "trace_")
    expect(sorted(dumps) == [0, 1], f"nccl: dumps of ranks {sorted(dumps)}")
    check_dumps(dumps)
    e0, e1 = dumps[0]["entries"], dumps[1]["entries"]
    expect(len(e0) == 19 and len(e1) == 18, f"nccl: {len(e0)} and {len(e1)} entries")
    expect([e["record_id"] for e in e0] == list(range(19)), "nccl: rank 0 record ids")
    expect(e0[-1]["profiling_name"] == "nccl:all_reduce" and e0[-1]["state"] == "started"
           and not e0[-1]["retired"] and e0[-1]["collective_seq_id"] == 13,
           f"nccl: rank 0's last entry {e0[-1]}")
    expect(all(e["state"] == "completed" and e["retired"] for e in e0[:-1] + e1),
           "nccl: the other entries are not completed")
    expect(all(e["timeout_ms"] == 600000 for e in e0 + e1), "nccl: --fr-timeout-ms")
    pg = dumps[0]["pg_config"]
    expect(list(pg) == ["0x482c0bce0e10a38a"] and ast.literal_eval(
        pg["0x482c0bce0e10a38a"]["ranks"]) == [0, 1], f"nccl: pg_config {pg}")
    st0 = dumps[0]["pg_status"]["0"]
    st1 = dumps[1]["pg_status"]["0"]
    expect(st0["last_enqueued_collective"] == 13 and st0["last_completed_collective"] == 12
           and st1["last_enqueued_collective"] == 12, f"nccl: pg_status {st0} {st1}")
    # The analyzer pairs entries by group and collective_seq_id, each with the
    # peer's first of the same seq: in each exchange rank 0 sends first and
    # rank 1 receives first (they were called send, then recv, on both).
    pairs = {"nccl:send 0->1": "nccl:recv 1<-0", "nccl:recv 0<-1": "nccl:send 1->0"}
    for a, b in zip(e0, e1):
        expect(a["collective_seq_id"] == b["collective_seq_id"] and
               a["p2p_seq_id"] == b["p2p_seq_id"], f"nccl: {a} does not pair with {b}")
        if a["is_p2p"]:
            expect(pairs.get(a["profiling_name"]) == b["profiling_name"],
                   f"nccl: rank 0's {a['profiling_name']} faces rank 1's {b['profiling_name']}")
        else:
            expect(a["input_sizes"] == b["input_sizes"] and
                   a["output_sizes"] == b["output_sizes"] and
                   a["input_dtypes"] == b["input_dtypes"], f"nccl: sizes {a} {b}")
    sends = [e for e in e0 if e["profiling_name"] == "nccl:send 0->1"]
    recvs = [e for e in e1 if e["profiling_name"] == "nccl:recv 1<-0"]
    expect(len(sends) == 3 and [s["input_sizes"] for s in sends] ==
           [r["output_sizes"] for r in recvs], "nccl: sends and receives do not match")
    # Found: rank 0 hung in collective 13, which rank 1 never enqueued.
    check_analyzer_findings(dumps, "nccl", {(13, "nccl:all_reduce"): {1}})
    run_real_analyzer(d, "trace_")

    # A healthy job read live: each rank's records end at its own moment; no
    # finding (the spares' dumps are empty).
    d = os.path.join(out, "health-fr")
    run_report(args, fixtures.health_job(args.build), "--fr-dump", d)
    dumps = load_dumps(d, "nccl_trace_rank_")
    check_dumps(dumps)
    check_analyzer_findings(dumps, "health", {})
    run_real_analyzer(d, "nccl_trace_rank_")

    # Rings read at different moments: every rank's ring but the highest
    # active one's has wrapped past its first two collectives (a later
    # snapshot of a full ring). Those two, held only by that rank, are no
    # finding; the rest of the job reads the same.
    job = os.path.join(out, "health-wrapped")
    shutil.copytree(fixtures.health_job(args.build), job)
    snaps = {}
    for name in sorted(os.listdir(job)):
        if name.startswith("bb-") and name.endswith(".json"):
            with open(os.path.join(job, name)) as f:
                snaps[name] = json.load(f)
    ring_ranks = {n: [c for c in s.get("communicators") or [] if c.get("flight_recorder")]
                  for n, s in snaps.items()}
    holders = sorted((max(c["rank"] for c in cs), n) for n, cs in ring_ranks.items() if cs)
    expect(len(holders) >= 2, f"health: {len(holders)} snapshots with flight records")
    cut = 0
    for _, name in holders[:-1]:
        for c in ring_ranks[name]:
            ring = sorted(c["flight_recorder"], key=lambda op: op.get("op_index") or 0)
            colls = sorted({op["coll_index"] for op in ring if op.get("coll_index")})[:2]
            kept = [op for op in ring if (op.get("coll_index") or 0) > colls[-1]]
            cut += len(ring) - len(kept)
            c["flight_recorder"] = kept
        with open(os.path.join(job, name), "w") as f:
            json.dump(snaps[name], f)
    expect(cut > 0, "health: no ring entry to cut")
    d = os.path.join(out, "health-wrapped-fr")
    p = run_report(args, job, "--fr-dump", d)
    expect("no longer hold them" in p.stderr + p.stdout,
           f"health-wrapped: no note of the entries left out:\n{p.stderr}")
    dumps = load_dumps(d, "nccl_trace_rank_")
    check_dumps(dumps)
    check_analyzer_findings(dumps, "health-wrapped", {})


# ---------------------------------------------------------------------------
# HTML
# ---------------------------------------------------------------------------

def png_pixels(path):
    """(width, height, rows of RGB(A) bytes) of a non-interlaced 8-bit PNG."""
    with open(path, "rb") as f:
        data = f.read()
    expect(data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG")
    pos, idat, width = 8, b"", None
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        chunk = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, color, _, _, interlace = struct.unpack(">IIBBBBB", chunk)
            expect(depth == 8 and color in (2, 6) and interlace == 0, "unexpected PNG format")
            bpp = 3 if color == 2 else 4
        elif kind == b"IDAT":
            idat += chunk
        pos += 12 + length
    raw = zlib.decompress(idat)
    stride = width * bpp
    rows, prev, i = [], bytearray(stride), 0
    for _ in range(height):
        ftype, line = raw[i], bytearray(raw[i + 1:i + 1 + stride])
        i += 1 + stride
        for x in range(stride):
            a = line[x - bpp] if x >= bpp else 0
            b = prev[x]
            c = prev[x - bpp] if x >= bpp else 0
            if ftype == 1:
                line[x] = (line[x] + a) & 255
            elif ftype == 2:
                line[x] = (line[x] + b) & 255
            elif ftype == 3:
                line[x] = (line[x] + (a + b) // 2) & 255
            elif ftype == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[x] = (line[x] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(bytes(line))
        prev = line
    return width, height, bpp, rows


def screenshot(html_path, png_path):
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        print("chromium is not installed (Debian package chromium)")
        raise SystemExit(SKIP)
    profile = tempfile.mkdtemp(prefix="report-chromium-")
    try:
        p = subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu",
                            f"--user-data-dir={profile}", f"--screenshot={png_path}",
                            "--window-size=1400,900", "file://" + os.path.abspath(html_path)],
                           capture_output=True, text=True, timeout=120)
    finally:
        shutil.rmtree(profile, ignore_errors=True)
    expect(os.path.exists(png_path), f"chromium wrote no screenshot ({p.returncode}):\n"
           f"{p.stderr[-2000:]}")


def check_png(path):
    size = os.path.getsize(path)
    expect(size > 20000, f"{path}: {size} bytes, an almost empty page")
    width, height, bpp, rows = png_pixels(path)
    expect((width, height) == (1400, 900), f"{path}: {width}x{height}")
    colors = set()
    nonwhite = 0
    for row in rows[::3]:
        for x in range(0, width * bpp, bpp * 3):
            px = row[x:x + 3]
            colors.add(px)
            nonwhite += px != b"\xff\xff\xff"
    total = len(rows[::3]) * len(range(0, width * bpp, bpp * 3))
    expect(len(colors) >= 12, f"{path}: {len(colors)} colors: blank?")
    expect(0.03 < nonwhite / total < 0.97, f"{path}: {nonwhite / total:.1%} not white")
    # The timeline's bars: the running (green) and recovery (orange) fills.
    expect(any(abs(px[0] - 0x7c) < 8 and abs(px[1] - 0xc5) < 8 and abs(px[2] - 0x76) < 8
               for px in colors), f"{path}: no running bar drawn")


def check_html_text(page, expects):
    expect(page.startswith("<!DOCTYPE html>"), "no doctype")
    expect(not re.search(r"""(src|href)\s*=\s*["']?(https?:|//)""", page, re.I),
           "the page loads an external resource")
    expect("<link" not in page and "@import" not in page, "the page links a resource")
    for e in expects:
        expect(e in page, f"the page lacks {e!r}")


@check("html")
def check_html(args, out):
    demo = fixtures.demo_job(args.build)
    page_path = os.path.join(out, "demo.html")
    run_report(args, demo, "--html", page_path)
    with open(page_path) as f:
        page = f.read()
    check_html_text(page, ["<svg", "restart \u2192 iteration 1", "restart \u2192 iteration 2",
                           frozen_rank_reason(demo), "<h2>Faults</h2>", "<h2>Ranks</h2>"])
    png = os.path.join(out, "demo.png")
    screenshot(page_path, png)
    check_png(png)
    if args.screenshot:
        shutil.copyfile(png, args.screenshot)
        print(f"screenshot of the demo job's page: {args.screenshot}")
    nccl = fixtures.nccl_job(args.build)
    page_path = os.path.join(out, "nccl.html")
    run_report(args, nccl, "--html", page_path)
    with open(page_path) as f:
        page = f.read()
    check_html_text(page, ["collective hung", "0x482c0bce0e10a38a", "Who is behind",
                           "AllReduce #13 hung"])
    png = os.path.join(out, "nccl.png")
    screenshot(page_path, png)
    check_png(png)
    health = fixtures.health_job(args.build)
    straggler = str(info_of(health)["straggler"])
    page_path = os.path.join(out, "health.html")
    run_report(args, health, "--html", page_path)
    with open(page_path) as f:
        page = f.read()
    check_html_text(page, ["<h2>Slow links, stragglers and stuck ranks</h2>", "Last standings",
                           f"straggler rank {straggler} (", "median lag"])
    rows = re.findall(r'<tr class="report" data-kind="([^"]*)" data-subject="([^"]*)"', page)
    expect(rows == [("straggler", straggler)], f"health: report rows {rows}")
    marks = re.findall(r'<path class="report" data-kind="([^"]*)"', page)
    expect(marks == ["straggler"], f"health: timeline marks {marks}")
    png = os.path.join(out, "health.png")
    screenshot(page_path, png)
    check_png(png)


# ---------------------------------------------------------------------------
# Stuck ranks
# ---------------------------------------------------------------------------

@check("stuck-rank")
def check_stuck_rank(args, out):
    """The replayed NCCL job (fixtures.py): rank 1, alive, never enqueues the all-reduce
    rank 0 waits in; resilient-inspect --job --json --record named it a stuck rank
    (stuck.jsonl) and appended the report to rank 1's fault ring. One finding, on rank
    1, not a fault; each output names the rank, the communicator, the collective and how
    long rank 0 waited: first from both records (the report object), then from the
    fault-ring record alone (its text parsed back)."""
    nccl = fixtures.nccl_job(args.build)
    info = info_of(nccl)
    with open(os.path.join(nccl, "stuck.jsonl")) as f:
        reports = [json.loads(line)["report"] for line in f.read().splitlines()
                   if line.startswith('{"report"')]
    expect(len(reports) == 1, f"stuck.jsonl: {len(reports)} reports")
    rep = reports[0]
    expect(rep["kind"] == "stuck rank" and rep["subject"]["rank"] == 1 and
           rep["subject"]["pid"] == info["pids"][1] and rep["coll_index"] == 13 and
           rep["function"] == "AllReduce" and rep["waiting_ranks"] == 1 and
           rep["min_lag_ns"] == info["stuck_rank_timeout_ms"] * 10 ** 6 and
           rep["waited_ns"] >= rep["min_lag_ns"], f"the stuck-rank report: {rep}")
    check_stuck_rank_outputs(args, out, nccl, rep, "both", 2, rep["waited_ns"] / 1e9)
    # The fault-ring record alone: the numbers are its text's (the wait to 0.1 s).
    ring = os.path.join(out, "stuck-ring")
    shutil.rmtree(ring, ignore_errors=True)
    shutil.copytree(nccl, ring)
    os.remove(os.path.join(ring, "stuck.jsonl"))
    check_stuck_rank_outputs(args, out, ring, rep, "ring", 1,
                             float(f"{rep['waited_ns'] / 1e9:.1f}"))


def check_stuck_rank_outputs(args, out, job, rep, tag, records, waited_s):
    comm = f"0x{rep['comm_id']:016x}"
    waited_text = f"{waited_s:.1f} s"
    where = f"stuck rank ({tag})"
    trace, prom, page = (os.path.join(out, f"stuck-{tag}{ext}")
                         for ext in (".trace.json", ".prom", ".html"))
    run_report(args, job, "--chrome-trace", trace, "--prometheus", prom, "--html", page)

    with open(trace) as f:
        events, names = validate_trace(json.load(f))
    found = [e for e in events if e.get("cat") == "report"]
    expect(len(found) == 1, f"{where}: {len(found)} report events: {found}")
    e, a = found[0], found[0]["args"]
    expect(e["pid"] == process_of(names, 1) and a["kind"] == "stuck rank" and
           a["ranks"] == [1], f"{where}: not on rank 1's process: {e}")
    expect(e["name"] == "stuck rank: rank 1 not in collective 13 (AllReduce)",
           f"{where}: event name {e['name']!r}")
    expect(a["communicator"] == comm and a.get("coll_index") == 13 and
           a.get("function") == "AllReduce" and a.get("waiting_ranks") == 1 and
           abs(a.get("waited_ns", 0) / 1e9 - waited_s) < 1e-6, f"{where}: args {a}")
    expect(f"has not entered collective 13 (AllReduce), in which 1 rank waited {waited_text}"
           in a["measure"], f"{where}: measure {a['measure']!r}")
    expect(len(a["records"]) == records, f"{where}: records {a['records']}")
    expect(tag != "both" or e["ts"] == rep["wall_ns"] // 1000, f"{where}: ts {e['ts']}")
    expect(not any(x.get("cat") == "fault" and "stuck rank" in x["name"] for x in events),
           f"{where}: shown as a fault")

    with open(prom) as f:
        text = f.read()
    check_exposition_text(text)
    for needle in ('nccl_resilient_reports_total{kind="stuck rank",rank="1"} 1\n',
                   f'nccl_resilient_stuck_rank_reports_total{{comm="{comm}",rank="1"}} 1\n'):
        expect(needle in text, f"{where}: {needle.strip()} missing")
    gauge = re.search(r'nccl_resilient_stuck_rank_waited_seconds\{collective="13",'
                      rf'comm="{comm}",function="AllReduce",rank="1"\}} (\S+)\n', text)
    expect(gauge and abs(float(gauge.group(1)) - waited_s) < 1e-6,
           f"{where}: waited gauge {gauge.group(0) if gauge else None}, not {waited_s}")
    expect(text.count("nccl_resilient_stuck_rank_reports_total{") == 1,
           f"{where}: counted for more than its subject")
    expect('class="stuck rank"' not in text, f"{where}: counted as a fault")

    with open(page) as f:
        html_text = f.read()
    check_html_text(html_text, ["<h2>Slow links, stragglers and stuck ranks</h2>", comm,
                                "has not entered collective 13 (AllReduce), in which 1 rank "
                                f"waited {waited_text}", "stuck rank rank 1 ("])
    rows = re.findall(r'<tr class="report" data-kind="([^"]*)" data-subject="([^"]*)"',
                      html_text)
    expect(rows == [("stuck rank", "1")], f"{where}: report rows {rows}")
    marks = re.findall(r'<path class="report" data-kind="([^"]*)"', html_text)
    expect(marks == ["stuck rank"], f"{where}: timeline marks {marks}")
    expect(html_text.count("<td>stuck rank</td>") == 1, f"{where}: also in the faults table")

    summary = run_report(args, job).stdout
    line = next((x for x in summary.splitlines() if "stuck rank:" in x), "")
    expect("stuck rank: rank 1 (" in line and f"on communicator {comm}" in line and
           f"has not entered collective 13 (AllReduce), in which 1 rank waited {waited_text}"
           in line, f"{where}: summary {summary}")


# ---------------------------------------------------------------------------
# The other input shapes
# ---------------------------------------------------------------------------

@check("inputs")
def check_inputs(args, out):
    """A bare timeline array (include/resilient/restart/timeline.hpp), report lists and
    report records of the fault ring, several jobs in one directory, bad input."""
    demo = fixtures.demo_job(args.build)
    with open(os.path.join(demo, "rank-0.json")) as f:
        report0 = json.load(f)
    pid0 = report0["pid"]
    with open(os.path.join(demo, f"bb-{pid0}.json")) as f:
        snap0 = json.load(f)
    d = os.path.join(out, "bare")
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    with open(os.path.join(d, "timeline-0.json"), "w") as f:
        json.dump(report0["timeline"], f)
    wall = snap0["heartbeat_wall_ns"]
    # A report list (the shape of jobhealth/json.cc's reports) and a
    # report record in the fault ring: findings, not faults.
    snap0["reports"] = [{"kind": "straggler", "comm_id": 1, "wall_ns": wall,
                         "subject": {"rank": 3, "host": "vm", "pid": 3, "address": ""},
                         "window_ns": 10 ** 9, "text": "rank 3 last to 9 of 10 collectives",
                         "collectives": 9, "last_count": 9, "lag_ns": 2500000}]
    snap0["faults"].append({"number": 999, "class": "slow link", "report": True,
                            "wall_ns": wall, "mono_ns": snap0["heartbeat_mono_ns"],
                            "text": "link to rank 4 at 10% of its peers' throughput"})
    with open(os.path.join(d, f"bb-{pid0}.json"), "w") as f:
        json.dump(snap0, f)
    with open(os.path.join(d, "job-reports.json"), "w") as f:
        json.dump({"reports": [{"kind": "slow link", "wall_ns": wall, "ratio": 0.1,
                                "subject": {"rank": 1}, "peer": {"rank": 4},
                                "text": "rank 1 to rank 4: 0.1 of the reference"}]}, f)
    trace, prom, page = (os.path.join(out, n) for n in ("b.json", "b.prom", "b.html"))
    run_report(args, d, "--chrome-trace", trace, "--prometheus", prom, "--html", page)
    with open(trace) as f:
        events, names = validate_trace(json.load(f))
    expect(len([k for k in names if k[2] == "process_name"]) == 2, "bare: one rank expected")
    p0 = process_of(names, 0)
    expect(p0 is not None, "bare: the timeline and the snapshot are not one rank 0")
    cats = {e.get("cat") for e in events if e["pid"] == p0}
    expect({"restart.running", "nccl.coll", "report"} <= cats, f"bare: categories {cats}")
    expect(not any(e["name"] == "fault: slow link" for e in events),
           "bare: a report record shown as a fault")
    with open(prom) as f:
        text = f.read()
    check_exposition_text(text)
    # Without standings, the straggler gauges are the report's (with its communicator,
    # as the standings' are).
    for needle in ('nccl_resilient_reports_total{kind="straggler",rank="3"} 1',
                   'nccl_resilient_reports_total{kind="slow link",rank="0"} 1',
                   'nccl_resilient_reports_total{kind="slow link",rank="1"} 1',
                   'nccl_resilient_straggler_lag_seconds{comm="0x0000000000000001",rank="3"} '
                   '0.0025',
                   'nccl_resilient_slow_link_ratio{peer="4",rank="1"} 0.1'):
        expect(needle in text, f"bare: {needle} missing")
    expect('class="slow link"' not in text, "bare: a report counted as a fault")
    with open(page) as f:
        page_text = f.read()
    for needle in ("rank 3 last to 9 of 10 collectives", "0.1 of the reference",
                   "link to rank 4 at 10%"):
        expect(needle in page_text, f"bare: the page lacks {needle!r}")
    # The run directory of the demo holds two jobs: a directory of jobs is refused.
    both = os.path.join(out, "run")
    shutil.rmtree(both, ignore_errors=True)
    for job in ("reference", "faulty"):
        os.makedirs(os.path.join(both, job))
        shutil.copy(os.path.join(demo, "rank-0.json"), os.path.join(both, job))
    p = run_report(args, both, "--html", page, ok=False)
    expect(p.returncode == 2 and "several jobs" in p.stderr, f"two jobs: {p.stderr}")
    p = run_report(args, os.path.join(out, "missing"), ok=False)
    expect(p.returncode == 2, "a missing input is not an error")
    bad = os.path.join(out, "bad.json")
    with open(bad, "w") as f:
        f.write('{"something": "else"}')
    p = run_report(args, bad, ok=False)
    expect(p.returncode == 2 and "not a record" in p.stderr, f"unknown JSON: {p.stderr}")
    p = run_report(args, demo, ok=True)
    expect("rank 4" in p.stdout and frozen_rank_reason(demo) in p.stdout, f"summary: {p.stdout}")
    check_inputs_health(args, out)


def check_inputs_health(args, out):
    """resilient-inspect --job --json lines: malformed ones refused naming the file and
    line, an incomplete last line (a file still written) left out; a report is mapped
    onto the job's process by pid; the report of a timeline alone."""
    health = fixtures.health_job(args.build)
    info = info_of(health)
    straggler, pids = info["straggler"], info["pids"]
    with open(os.path.join(health, "health.jsonl")) as f:
        lines = f.read().splitlines()
    expect(len(lines) >= 3, f"health.jsonl: {len(lines)} lines")
    report_line = next((line for line in lines if line.startswith('{"report"')), None)
    expect(report_line is not None, "health.jsonl holds no report")
    bad = os.path.join(out, "bad.jsonl")
    with open(bad, "w") as f:
        f.write(lines[0] + "\n" + lines[1][:40] + "\n" + lines[2] + "\n")
    p = run_report(args, health, bad, ok=False)
    expect(p.returncode == 2 and f"{bad}: line 2: not JSON" in p.stderr,
           f"a malformed line: exit {p.returncode}: {p.stderr}")
    other = os.path.join(out, "other.txt")
    with open(other, "w") as f:
        f.write(lines[0] + "\n" + '{"wall_ns": 1}' + "\n")
    p = run_report(args, other, ok=False)
    expect(p.returncode == 2 and f"{other}: line 2: not a resilient-inspect --job --json record"
           in p.stderr, f"a line of another shape: exit {p.returncode}: {p.stderr}")
    # In a directory, the file is passed over with the same words.
    d = os.path.join(out, "bad-dir")
    shutil.rmtree(d, ignore_errors=True)
    shutil.copytree(health, d)
    shutil.copy(bad, d)
    p = run_report(args, d, "--prometheus", os.path.join(out, "bad-dir.prom"))
    expect("bad.jsonl: line 2: not JSON" in p.stderr, f"a directory's bad file: {p.stderr}")
    partial = os.path.join(out, "partial.jsonl")
    with open(partial, "w") as f:
        f.write("\n".join(lines) + "\n" + lines[-1][:30])
    p = run_report(args, health, partial)
    expect(f"line {len(lines) + 1} is incomplete" in p.stderr, f"partial: {p.stderr}")
    # The report alone, its subject's rank not the process's: mapped by pid.
    moved = json.loads(report_line)
    moved["report"]["subject"]["rank"] = 7
    only = os.path.join(out, "moved.jsonl")
    with open(only, "w") as f:
        f.write(json.dumps(moved) + "\n")
    trace = os.path.join(out, "moved.trace.json")
    run_report(args, os.path.join(health, f"rank-{straggler}.json"), only, "--chrome-trace", trace)
    with open(trace) as f:
        events, names = validate_trace(json.load(f))
    reps = [e for e in events if e.get("cat") == "report"]
    expect(len(reps) == 1 and reps[0]["pid"] == process_of(names, straggler) and
           reps[0]["args"]["ranks"] == [straggler],
           f"a report naming pid {pids[str(straggler)]} as rank 7: {reps}")
    check_slow_link_records(args, out, health, pids)
    # The timeline alone: its "health report" entry is the report.
    prom = os.path.join(out, "timeline.prom")
    run_report(args, os.path.join(health, f"rank-{straggler}.json"), "--prometheus", prom)
    with open(prom) as f:
        text = f.read()
    check_exposition_text(text)
    expect(f'nccl_resilient_reports_total{{kind="straggler",rank="{straggler}"}} 1' in text,
           "the timeline's health report is not counted")
    with open(os.path.join(health, f"rank-{straggler}.json")) as f:
        said = [e["detail"] for e in json.load(f)["timeline"] if e["phase"] == "health report"]
    lag_ms = re.search(r"([\d.]+) ms \(median\)", said[0] if said else "")
    expect(lag_ms, f"rank {straggler}'s timeline states no lag: {said}")
    gauge = re.search(rf'nccl_resilient_straggler_lag_seconds\{{comm="0x[0-9a-f]{{16}}",'
                      rf'rank="{straggler}"\}} (\S+)', text)
    expect(gauge and abs(float(gauge.group(1)) - float(lag_ms.group(1)) / 1e3) < 1e-9,
           f"the lag stated by the timeline's text ({lag_ms.group(1)} ms) is not the gauge: "
           f"{gauge.group(0) if gauge else None}")


def check_slow_link_records(args, out, health, pids):
    """One slow link as resilient-inspect --job --json reports it and as both its ends
    record it in their fault rings (jobhealth/report.cc's text): one finding, on
    its subject (the inspect's rank for it is its communicator rank: mapped by pid)."""
    d = os.path.join(out, "slow-link")
    shutil.rmtree(d, ignore_errors=True)
    shutil.copytree(health, d)
    snaps = {}
    for rank in ("1", "2"):
        with open(os.path.join(d, f"bb-{pids[rank]}.json")) as f:
            snaps[rank] = json.load(f)
    host = snaps["1"]["host"]
    comm = snaps["1"]["communicators"][0]["comm_id"]
    wall, mono = snaps["1"]["heartbeat_wall_ns"], snaps["1"]["heartbeat_mono_ns"]
    text = (f"slow link from rank 1 ({host} pid {pids['1']} 127.0.0.1:4001) to rank 2 "
            f"({host} pid {pids['2']} 127.0.0.1:4002) on communicator 0x{comm:016x}: 65.5 MB/s "
            "while busy over 4.0 s, 26% of the median of the job's other links (251.0 MB/s); "
            "not a fault, nothing aborted")
    report = {"kind": "slow link", "comm_id": comm, "wall_ns": wall,
              "subject": {"rank": 5, "host": host, "pid": pids["1"], "address": "127.0.0.1:4001"},
              "peer": {"rank": 0, "host": host, "pid": pids["2"], "address": "127.0.0.1:4002"},
              "window_ns": 4 * 10 ** 9, "text": text, "bytes_per_s": 6.55e7,
              "reference_bytes_per_s": 2.51e8, "ratio": 0.26, "against_history": False}
    with open(os.path.join(d, "slow.jsonl"), "w") as f:
        f.write(json.dumps({"report": report}) + "\n")
    for rank, snap in snaps.items():
        snap["faults"].append({"number": 900, "class": "slow link", "report": True,
                               "remote": False, "comm_id": comm, "wall_ns": wall + 10 ** 9,
                               "mono_ns": mono + 10 ** 9, "peer": "127.0.0.1:4001",
                               "peer_host": host, "peer_pid": pids["1"], "text": text})
        with open(os.path.join(d, f"bb-{pids[rank]}.json"), "w") as f:
            json.dump(snap, f)
    trace, prom = os.path.join(out, "slow.trace.json"), os.path.join(out, "slow.prom")
    run_report(args, d, "--chrome-trace", trace, "--prometheus", prom)
    with open(trace) as f:
        events, names = validate_trace(json.load(f))
    slow = [e for e in events if e.get("cat") == "report" and e["args"]["kind"] == "slow link"]
    expect(len(slow) == 1, f"slow link: {len(slow)} report events: {slow}")
    expect(slow[0]["name"] == "slow link: rank 1 \u2192 2" and
           slow[0]["pid"] == process_of(names, 1) and slow[0]["ts"] == wall // 1000,
           f"slow link: {slow[0]}")
    expect(len(slow[0]["args"]["records"]) == 3, f"slow link: records {slow[0]['args']}")
    with open(prom) as f:
        text = f.read()
    check_exposition_text(text)
    for needle in ('nccl_resilient_reports_total{kind="slow link",rank="1"} 1\n',
                   'nccl_resilient_slow_link_ratio{peer="2",rank="1"} 0.26\n'):
        expect(needle in text, f"slow link: {needle.strip()} missing")
    expect(text.count('nccl_resilient_reports_total{kind="slow link"') == 1,
           "slow link: counted for more than its subject")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--check", required=True, choices=[n for n, _ in CHECKS])
    p.add_argument("--build", required=True, help="the meson build directory")
    p.add_argument("--report", required=True, help="tools/report/resilient_report.py")
    p.add_argument("--screenshot", help="--check html: keep the demo page's screenshot here")
    p.add_argument("--keep", help="write the outputs here instead of a temporary directory")
    args = p.parse_args()
    args.build = os.path.abspath(args.build)
    missing = fixtures.missing_binaries(args.build)
    if missing:
        print("not built: " + ", ".join(missing))
        return SKIP
    out = args.keep or tempfile.mkdtemp(prefix=f"report-{args.check}-")
    os.makedirs(out, exist_ok=True)
    try:
        dict(CHECKS)[args.check](args, out)
    except Failure as e:
        print(f"FAIL ({args.check}): {e}\noutputs in {out}")
        return 1
    except fixtures.FixtureError as e:
        print(f"FAIL ({args.check}): making the inputs: {e}")
        return 1
    if not args.keep:
        shutil.rmtree(out, ignore_errors=True)
    print(f"PASS ({args.check})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
