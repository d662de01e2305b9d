"""Chrome trace (Trace Event Format): chrome://tracing, Perfetto."""

from .values import PROGRAM, comm_hex, number, us
from .timeline import op_end_mono, operations, phase_spans, phases, restarts
from .findings import (REPORT_NUMBERS, REPORT_STRINGS, all_reports, collective_text, comm_label,
    end_label, end_process, report_measure, report_ranks, report_who)

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
