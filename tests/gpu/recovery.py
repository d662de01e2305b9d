"""Recovery by NCCL's own fault APIs against abort + full re-init, timed on
the one GPU (issue: NCCL currency). For N = 2, 4 and 8 members (each its own
NCCL host through libnccl-net-resilient.so, plus one spare process), after a
warm-up all-reduce one member is taken as lost and the others recover:

  abort+init    every survivor ncclCommAbort; survivor 0 makes a new unique
                id; the survivors and the spare ncclCommInitRankConfig a new
                N-member communicator; its first all-reduce.
  revoke+shrink every survivor ncclCommRevoke (polled until settled) and
                ncclCommShrink(lost member, NCCL_SHRINK_ABORT); the first
                all-reduce of the N-1 members.
  +grow         then survivor 0's ncclCommGetUniqueId, ncclCommGrow of the
                survivors and the spare (N members); its first all-reduce.

Every communicator is non-blocking (polled with ncclCommGetAsyncError, as
the restart library does). Times are the slowest survivor's, from its first
recovery call to its first all-reduce done. Paths the NCCL there lacks
(revoke < 2.28.7, grow < 2.29) are reported as such, not failed.

Launcher: `python3 recovery.py --kit DIR --env-json FILE --out DIR [--sizes 2,4,8]`
Worker:   `python3 recovery.py --worker ...` (started by the launcher)
"""

import argparse
import ctypes
import json
import os
import secrets
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kit as kitlib  # noqa: E402

COUNT = 256 * 1024  # floats: 1 MiB
SHRINK_ABORT = 1
CONFIG_MAGIC = 0xCAFEBEEF
UNDEF_INT = -2147483648


class Config(ctypes.Structure):
    """ncclConfig_t as NCCL 2.28 lays it out (80 bytes); `version` tells a
    newer NCCL which fields there are."""

    _fields_ = [("size", ctypes.c_size_t), ("magic", ctypes.c_uint), ("version", ctypes.c_uint),
                ("blocking", ctypes.c_int), ("cgaClusterSize", ctypes.c_int),
                ("minCTAs", ctypes.c_int), ("maxCTAs", ctypes.c_int),
                ("netName", ctypes.c_char_p), ("splitShare", ctypes.c_int),
                ("trafficClass", ctypes.c_int), ("commName", ctypes.c_char_p),
                ("collnetEnable", ctypes.c_int), ("CTAPolicy", ctypes.c_int),
                ("shrinkShare", ctypes.c_int), ("nvlsCTAs", ctypes.c_int),
                ("nChannelsPerNetPeer", ctypes.c_int), ("nvlinkCentricSched", ctypes.c_int)]


def non_blocking_config():
    c = Config()
    c.size = ctypes.sizeof(Config)
    c.magic = CONFIG_MAGIC
    c.version = 22800
    c.blocking = 0
    for name in ("cgaClusterSize", "minCTAs", "maxCTAs", "splitShare", "trafficClass",
                 "collnetEnable", "CTAPolicy", "shrinkShare", "nvlsCTAs", "nChannelsPerNetPeer",
                 "nvlinkCentricSched"):
        setattr(c, name, UNDEF_INT)
    return c


class Api:
    """The calls of this step on the libnccl torch loaded; None where absent."""

    def __init__(self, nccl):
        self.nccl = nccl
        L = nccl.lib
        self.version = nccl.version()[0]
        L.ncclCommInitRankConfig.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_int,
                                            nccl_uid_type(), ctypes.c_int, ctypes.POINTER(Config)]
        self.revoke = getattr(L, "ncclCommRevoke", None) if self.version >= 22807 else None
        if self.revoke is not None:
            self.revoke.argtypes = [ctypes.c_void_p, ctypes.c_int]
        self.shrink = getattr(L, "ncclCommShrink", None) if self.version >= 22700 else None
        if self.shrink is not None:
            self.shrink.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_int), ctypes.c_int,
                                    ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(Config),
                                    ctypes.c_int]
        grow_ok = self.version >= 22900
        self.grow = getattr(L, "ncclCommGrow", None) if grow_ok else None
        self.grow_id = getattr(L, "ncclCommGetUniqueId", None) if grow_ok else None
        if self.grow is not None and self.grow_id is not None:
            self.grow.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p, ctypes.c_int,
                                  ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(Config)]
            self.grow_id.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
        else:
            self.grow = self.grow_id = None

    def check(self, call, code, comm=None):
        import nccl_ctypes
        if code not in (nccl_ctypes.SUCCESS, nccl_ctypes.IN_PROGRESS):
            raise nccl_ctypes.NcclError(call, code, self.nccl.last_error(comm))

    def ready(self, comm, call, deadline):
        """Polls until the communicator's pending work is done."""
        import nccl_ctypes
        while True:
            code = self.nccl.async_error(comm)
            if code == nccl_ctypes.SUCCESS:
                return
            if code != nccl_ctypes.IN_PROGRESS:
                raise nccl_ctypes.NcclError(call, code, self.nccl.last_error(comm))
            if time.monotonic() > deadline:
                raise TimeoutError(f"{call} did not complete")
            time.sleep(0.0002)

    def init(self, nranks, uid_hex, rank, deadline):
        import nccl_ctypes
        uid = nccl_ctypes.UniqueId()
        ctypes.memmove(ctypes.addressof(uid), bytes.fromhex(uid_hex), ctypes.sizeof(uid))
        comm = ctypes.c_void_p()
        cfg = non_blocking_config()
        self.check("ncclCommInitRankConfig", self.nccl.lib.ncclCommInitRankConfig(
            ctypes.byref(comm), nranks, uid, rank, ctypes.byref(cfg)))
        self.ready(comm, "ncclCommInitRankConfig", deadline)
        return comm


def nccl_uid_type():
    import nccl_ctypes
    return nccl_ctypes.UniqueId


def all_reduce(api, comm, x, y, stream, deadline):
    api.nccl.all_reduce(comm, x.data_ptr(), y.data_ptr(), COUNT, stream.cuda_stream)
    while not stream.query():
        code = api.nccl.async_error(comm)
        if code not in (0, 7):
            api.check("ncclAllReduce", code, comm)
        if time.monotonic() > deadline:
            raise TimeoutError("an all-reduce did not complete")
        time.sleep(0.0002)
    return float(y[0].item())


def worker(a):
    import torch
    import nccl_ctypes

    torch.cuda.set_device(0)
    torch.cuda.init()
    nccl = nccl_ctypes.Nccl(a.nccl_lib)
    api = Api(nccl)
    n, r, spare = a.members, a.rank, a.rank == a.members
    lost = n - 1
    deadline = time.monotonic() + a.max_seconds
    x = torch.ones(COUNT, device="cuda")
    y = torch.empty(COUNT, device="cuda")
    stream = torch.cuda.current_stream()
    out = {"rank": r, "members": n, "nccl_version": api.version,
           "has": {"revoke": api.revoke is not None, "shrink": api.shrink is not None,
                   "grow": api.grow is not None}}

    def members_exchange(name, value):
        return kitlib.exchange(a.run_dir, name, r, value, n, deadline)

    def next_exchange(name, value):
        # The survivors (ranks 0..n-2) and the spare (as rank n-1).
        rank = n - 1 if spare else r
        return kitlib.exchange(a.run_dir, name, rank, value, n, deadline)

    # ---- abort + re-init ----
    if not spare:
        uid = members_exchange("a-uid", nccl.unique_id() if r == 0 else None)[0]
        comm = api.init(n, uid, r, deadline)
        all_reduce(api, comm, x, y, stream, deadline)
        members_exchange("a-warm", True)
    if spare or r != lost:
        t0 = time.monotonic()
        if not spare:
            nccl.abort(comm)
        uid2 = next_exchange("a-uid2", nccl.unique_id() if (r == 0 and not spare) else None)[0]
        comm2 = api.init(n, uid2, n - 1 if spare else r, deadline)
        value = all_reduce(api, comm2, x, y, stream, deadline)
        if not spare:
            out["abort_init_ms"] = (time.monotonic() - t0) * 1000
        out["abort_init_value"] = value
        next_exchange("a-done", True)
        nccl.abort(comm2)
    else:
        nccl.abort(comm)  # the lost member leaves
    # ---- revoke + shrink (+ grow) ----
    if api.revoke is None or api.shrink is None:
        out["shrink"] = "not in this NCCL"
        kitlib.worker_result(a.result, out)
        os._exit(0)
    if not spare:
        uid = members_exchange("b-uid", nccl.unique_id() if r == 0 else None)[0]
        comm = api.init(n, uid, r, deadline)
        all_reduce(api, comm, x, y, stream, deadline)
        members_exchange("b-warm", True)
    if not spare and r == lost:
        nccl.abort(comm)  # lost: it takes no part (shrink is not collective over it)
        kitlib.worker_result(a.result, out)
        os._exit(0)
    if not spare:
        t0 = time.monotonic()
        api.check("ncclCommRevoke", api.revoke(comm, 0), comm)
        api.ready(comm, "ncclCommRevoke", deadline)
        out["revoke_ms"] = (time.monotonic() - t0) * 1000
        shrunk = ctypes.c_void_p()
        excluded = (ctypes.c_int * 1)(lost)
        cfg = non_blocking_config()
        api.check("ncclCommShrink", api.shrink(comm, excluded, 1, ctypes.byref(shrunk),
                                               ctypes.byref(cfg), SHRINK_ABORT), comm)
        api.ready(shrunk, "ncclCommShrink", deadline)
        out["shrink_value"] = all_reduce(api, shrunk, x, y, stream, deadline)
        out["revoke_shrink_ms"] = (time.monotonic() - t0) * 1000
    if api.grow is None:
        out["grow"] = "not in this NCCL"
        if not spare:
            nccl.abort(shrunk)
            nccl.abort(comm)
        kitlib.worker_result(a.result, out)
        os._exit(0)
    gid = ctypes.create_string_buffer(128)
    if r == 0 and not spare:
        api.check("ncclCommGetUniqueId", api.grow_id(shrunk, ctypes.cast(gid, ctypes.c_void_p)),
                  shrunk)
    ids = next_exchange("b-gid", gid.raw.hex() if (r == 0 and not spare) else None)
    ctypes.memmove(gid, bytes.fromhex(ids[0]), 128)
    grown = ctypes.c_void_p()
    cfg = non_blocking_config()
    if spare:
        api.check("ncclCommGrow", api.grow(None, n, ctypes.cast(gid, ctypes.c_void_p), n - 1,
                                           ctypes.byref(grown), ctypes.byref(cfg)))
    else:
        root_id = ctypes.cast(gid, ctypes.c_void_p) if r == 0 else None
        api.check("ncclCommGrow", api.grow(shrunk, n, root_id, -1, ctypes.byref(grown),
                                           ctypes.byref(cfg)), shrunk)
    api.ready(grown, "ncclCommGrow", deadline)
    out["grow_value"] = all_reduce(api, grown, x, y, stream, deadline)
    if not spare:
        out["revoke_shrink_grow_ms"] = (time.monotonic() - t0) * 1000
    next_exchange("b-done", True)
    nccl.abort(grown)
    if not spare:
        nccl.abort(shrunk)
        nccl.abort(comm)  # the revoked parent of an abortive shrink: abort, never destroy
    kitlib.worker_result(a.result, out)
    os._exit(0)


def launch(a):
    k = kitlib.Kit(a.kit)
    with open(a.env_json) as f:
        envinfo = json.load(f)
    rows, problems = [], []
    for n in [int(s) for s in a.sizes.split(",")]:
        run_dir = tempfile.mkdtemp(prefix=f"recovery-{n}-", dir=a.out)
        bb_dir = tempfile.mkdtemp(prefix="resilient-gpukit-bb-", dir="/dev/shm")
        base = kitlib.nccl_environment(os.environ, kit=k, log_dir=run_dir)
        base.update({"NCCL_RESILIENT_JOB_TOKEN": secrets.token_hex(16),
                     "NCCL_RESILIENT_BLACKBOX_DIR": bb_dir, "PYTHONUNBUFFERED": "1"})
        argv = [sys.executable, os.path.abspath(__file__), "--worker", "--members", str(n),
                "--run-dir", run_dir, "--nccl-lib", envinfo["nccl_library"],
                "--max-seconds", str(a.max_seconds)]
        with kitlib.Ranks(run_dir) as ranks:
            for r in range(n + 1):  # n members and one spare
                ranks.start(r, argv + ["--rank", str(r)], kitlib.rank_environment(base, r), "worker")
            results = ranks.wait_results(time.monotonic() + a.max_seconds + 10)
        survivors = [results.get(r) for r in range(n - 1)]
        if any(s is None for s in survivors) or results.get(n) is None:
            problems.append(f"{n} members: a worker reported nothing (logs in {run_dir})")
            continue
        errors = [f"rank {s['rank']}: {s['error']}" for s in results.values()
                  if s is not None and "error" in s]
        if errors:
            problems.append(f"{n} members: " + "; ".join(errors)[:400])
            continue

        def slowest(key):
            values = [s[key] for s in survivors if key in s]
            return round(max(values), 1) if len(values) == n - 1 else None

        row = {"members": n, "nccl": survivors[0]["nccl_version"],
               "abort_init_ms": slowest("abort_init_ms"),
               "revoke_ms": slowest("revoke_ms"),
               "revoke_shrink_ms": slowest("revoke_shrink_ms"),
               "revoke_shrink_grow_ms": slowest("revoke_shrink_grow_ms"),
               "shrink": survivors[0].get("shrink", "timed"), "grow": survivors[0].get("grow", "timed")}
        for key, want in (("abort_init_value", float(n)), ("shrink_value", float(n - 1)),
                          ("grow_value", float(n))):
            for s in survivors + [results[n]]:
                if key in s and s[key] != want:
                    problems.append(f"{n} members: rank {s['rank']} {key} {s[key]}, not {want}")
        if row["abort_init_ms"] is None:
            problems.append(f"{n} members: abort+init not timed on every survivor")
        rows.append(row)
    return {"ok": not problems, "rows": rows, "problems": problems}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--worker", action="store_true")
    p.add_argument("--kit")
    p.add_argument("--env-json")
    p.add_argument("--out")
    p.add_argument("--sizes", default="2,4,8")
    p.add_argument("--result")
    p.add_argument("--rank", type=int)
    p.add_argument("--members", type=int)
    p.add_argument("--run-dir")
    p.add_argument("--nccl-lib")
    p.add_argument("--max-seconds", type=float, default=25)
    a = p.parse_args()
    if a.worker:
        try:
            worker(a)
        except Exception as e:  # reported, never a hang
            kitlib.worker_result(a.result, {"rank": a.rank, "error": f"{type(e).__name__}: {e}"})
            os._exit(1)
        return 0
    if not (a.kit and a.env_json and a.out):
        p.error("--kit, --env-json and --out are needed")
    report = launch(a)
    print(json.dumps(report))
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
