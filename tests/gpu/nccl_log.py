"""What NCCL's INFO log (NCCL_DEBUG=INFO, NCCL_DEBUG_SUBSYS=INIT,NET) says
about the net plugin a process used: the network each communicator chose
("Using network <name>", init.cc) and the transport of every channel
connection ("Channel 00/0 : 0[0] -> 1[0] [send] via NET/<name>/0",
transport/net.cc; P2P and SHM connections name their own transport), and the
communicators it created ("... commId 0x... - Init COMPLETE").
"""

import re

_USING = re.compile(r"Using network (\S+)")
_VIA = re.compile(r"\[(send|receive)\] via (\S+)")
_COMM = re.compile(r"commId (0x[0-9a-fA-F]+)[^\n]*Init COMPLETE")


def networks(text):
    return set(_USING.findall(text))


def connections(text):
    """[(direction, transport text)], e.g. ("send", "NET/Resilient/0")."""
    return _VIA.findall(text)


def comm_ids(text):
    return {int(h, 16) for h in _COMM.findall(text)}


def plugin_problems(text, net_name):
    """Why the log does not prove that every connection went through the net
    plugin called net_name (empty: it does)."""
    problems = []
    used = networks(text)
    if not used:
        problems.append("no 'Using network' line: is NCCL_DEBUG=INFO with INIT on?")
    elif used != {net_name}:
        problems.append(f"NCCL used the network(s) {sorted(used)}, not {net_name}")
    conns = connections(text)
    if not conns:
        problems.append("no channel connection line ('[send] via ...')")
    other = sorted({t for _, t in conns if not t.startswith(f"NET/{net_name}/")})
    if other:
        problems.append(f"connections through {other}, not NET/{net_name}")
    return problems


# ---- Did each communicator's collectives launch? (NCCL_DEBUG_SUBSYS=INIT,COLL)
#
# NCCL logs every collective call, before it is enqueued, with the
# communicator's opCount (v2.28.9-1 src/enqueue.cc ncclEnqueueCheck:
# "%s: opCount %lx sendbuff %p ... comm %p [nranks=%d] stream %p"); opCount
# grows only when a launched plan's proxy operations start (src/proxy.cc
# ncclProxyStart, `comm->opCount++`, called from enqueue.cc
# hostStreamPlanTask). A communicator's first call logs opCount 0 whatever
# happens; if every later call logs 0 too, nothing was ever launched: the
# thread was left inside a group (ncclGroupEndInternal's
# `if ((--ncclGroupDepth) > 0) goto exit;`, src/group.cc), the first GPU
# machine's symptom (docs/gpu-validation.md, runs 6 and 7).
_INIT_DONE = re.compile(r"\bcomm (0x[0-9a-fA-F]+) rank (\d+) nranks (\d+) .*- Init COMPLETE")
_COLL_CALL = re.compile(r"\b(\w+): opCount ([0-9a-fA-F]+) sendbuff \S+ recvbuff \S+ count \d+ "
                        r"datatype \d+ op \d+ root -?\d+ comm (0x[0-9a-fA-F]+|\(nil\))")
_BACKTRACE = re.compile(r"\b([\w.]+\.cc):(\d+) -> (\d+)")

# The line of ncclCommDestroy's `NCCLCHECK(ncclCommEnsureReady(comm))` in
# src/init.cc of each NCCL tag: NCCLCHECK logs "init.cc:<line> -> <code>"
# (src/include/checks.h) when it returns early there, after
# ncclGroupStartInternal() and without the matching end: the trap that
# leaves the thread's group depth at one. Read from NVIDIA/nccl's tags (the
# line inside ncclCommDestroy that calls ncclCommEnsureReady).
DESTROY_ENSURE_READY_LINE = {
    "2.26.2": 2054, "2.26.3": 2054, "2.26.5": 2064, "2.26.6": 2064,
    "2.27.3": 2175, "2.27.5": 2181, "2.27.6": 2182, "2.27.7": 2182,
    "2.28.3": 2307, "2.28.7": 2381, "2.28.9": 2381,
    "2.29.2": 2526, "2.29.3": 2526, "2.29.7": 2578,
    "2.30.3": 2740, "2.30.4": 2740, "2.30.7": 2901,
}


def communicators(text):
    """Every communicator one process's log shows, in order of creation:
    [{"comm", "rank", "nranks", "calls": [(name, opCount)]}]. A pointer
    NCCL reuses for a later communicator starts a new entry at its Init
    COMPLETE line; calls on a pointer never seen completing get an entry
    with rank None."""
    out, current = [], {}
    for line in text.splitlines():
        m = _INIT_DONE.search(line)
        if m:
            entry = {"comm": m.group(1).lower(), "rank": int(m.group(2)), "nranks": int(m.group(3)),
                     "calls": []}
            out.append(entry)
            current[entry["comm"]] = entry
            continue
        m = _COLL_CALL.search(line)
        if m:
            comm = m.group(3).lower()
            entry = current.get(comm)
            if entry is None:
                entry = {"comm": comm, "rank": None, "nranks": None, "calls": []}
                out.append(entry)
                current[comm] = entry
            entry["calls"].append((m.group(1), int(m.group(2), 16)))
    return out


def launch_verdict(calls):
    """'launched' (a call after the first logged a non-zero opCount),
    'never launched' (two calls or more, every opCount 0), 'one call' (not
    enough to tell) or 'no calls'."""
    if not calls:
        return "no calls"
    if len(calls) == 1:
        return "one call"
    return "launched" if any(op != 0 for _, op in calls[1:]) else "never launched"


def destroy_trap_lines(text, nccl_version):
    """The log lines of ncclCommDestroy returning early from
    ncclCommEnsureReady (the group-depth trap) for this NCCL version; None
    when the version's line is not known."""
    line = DESTROY_ENSURE_READY_LINE.get(nccl_version)
    if line is None:
        return None
    return [t for t in text.splitlines()
            if any(f == "init.cc" and int(n) == line for f, n, _ in _BACKTRACE.findall(t))]


def launch_problems(logs, nccl_version):
    """(problems, summary) over {name: log text} of the processes of a job:
    every communicator with two collective calls or more must have launched
    them, and no ncclCommDestroy may have returned early from
    ncclCommEnsureReady."""
    problems = []
    summary = {"processes": len(logs), "communicators": 0, "launched": 0, "one_call": 0,
               "never_launched": 0, "no_calls": 0, "destroy_trap_lines": 0, "after_first": []}
    calls_seen = False
    for name, text in sorted(logs.items()):
        comms = communicators(text)
        for i, c in enumerate(comms):
            verdict = launch_verdict(c["calls"])
            calls_seen = calls_seen or bool(c["calls"])
            summary["communicators"] += 1
            summary[verdict.replace(" ", "_")] += 1
            if i > 0:  # made after this process's first: by a restart
                summary["after_first"].append({"log": name, "comm": c["comm"], "rank": c["rank"],
                                               "nranks": c["nranks"], "calls": len(c["calls"]),
                                               "max_op_count": max((op for _, op in c["calls"]), default=None),
                                               "verdict": verdict})
            if verdict == "never launched":
                problems.append(f"{name}: communicator {c['comm']} (rank {c['rank']} of {c['nranks']}): "
                                f"{len(c['calls'])} collective calls, every one logged opCount 0: "
                                "none was launched (the thread was left inside a group)")
        trap = destroy_trap_lines(text, nccl_version)
        if trap is None:
            summary["destroy_trap_lines"] = None
        elif trap:
            summary["destroy_trap_lines"] += len(trap)
            problems.append(f"{name}: ncclCommDestroy returned early from ncclCommEnsureReady "
                            f"(init.cc:{DESTROY_ENSURE_READY_LINE[nccl_version]}), leaving the thread's "
                            f"group depth at one: {trap[0].strip()[:200]}")
    if logs and not calls_seen:
        problems.append("no collective call in NCCL's logs: was NCCL_DEBUG_SUBSYS=COLL set?")
    if not logs:
        problems.append("no NCCL log (NCCL_DEBUG_FILE)")
    return problems, summary
