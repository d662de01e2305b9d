"""PyTorch flight-recorder dumps, one pickle per rank."""

import os
import pickle

from .values import comm_hex
from .output import write_atomically
from .timeline import operations

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
