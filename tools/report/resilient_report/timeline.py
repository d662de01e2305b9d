"""What the formats share: operations, phases, restarts, faults."""

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
