"""Slow-link, straggler and stuck-rank reports (findings): parsed from the fault
rings, the timelines and resilient-inspect --job --json, merged, described."""

import re

from .values import number, rank_label
from .timeline import HEALTH_REPORT_PHASE


def is_report_fault(f):
    """Report records in the fault ring (slow link, straggler, stuck rank) are findings,
    not faults."""
    return bool(f.get("report")) or f.get("class") in REPORT_KINDS


REPORT_KINDS = ("slow link", "straggler", "stuck rank")


REPORT_NUMBERS = ("window_ns", "bytes_per_s", "reference_bytes_per_s", "ratio",
                  "against_history", "collectives", "waited", "min_lag_ns", "last_count",
                  "lag_ns", "score", "coll_index", "waiting_ranks", "waited_ns", "restarts")


REPORT_FLAGS = ("against_history", "restarts")


REPORT_STRINGS = ("function",)


def _end_re(p):
    """One end of a report's text (jobhealth/report.cc, endText):
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
    """What a report's text (jobhealth/report.cc, describe) states, for the records
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
    ({rank, host, pid, address}) and the numbers of jobhealth/json.cc's report
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
