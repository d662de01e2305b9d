"""How values are written in every format: ranks, peers, communicators, times,
numbers."""

import datetime

PROGRAM = "resilient-report"


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


def rank_label(proc):
    return str(proc.rank) if proc.rank is not None else f"pid:{proc.pid}"


def number(v):
    """v when it is a number (not a bool), else None."""
    return v if isinstance(v, (int, float)) and not isinstance(v, bool) else None
