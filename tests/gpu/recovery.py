"""Recovery by NCCL's own fault APIs against abort + full re-init, timed on
the one GPU (issue 31). For N members (each its own NCCL host through
libnccl-net-resilient.so) plus one spare process, every communicator
non-blocking and polled (as the restart library makes them):

  a. abort+init     fault-free: member N-1 leaves (aborts) after a warm-up
                    all-reduce; every survivor ncclCommAbort, survivor 0 makes
                    a new unique id, the survivors and the spare
                    ncclCommInitRankConfig a new N-member communicator; its
                    first all-reduce.
  b. revoke+shrink  fault-free: member N-1 leaves (idle, its communicator
                    kept until they are done); the survivors
                    ncclCommRevoke (polled until settled) and ncclCommShrink
                    (exclude N-1, NCCL_SHRINK_ABORT), polling the PARENT until
                    it leaves ncclInProgress and only then reading the child
                    (below); its first all-reduce.
     +grow          then survivor 0's ncclCommGetUniqueId, ncclCommGrow of the
                    survivors and the spare (N members), polled on the grown
                    communicator (ncclCommGrow stores it before its job starts
                    and attaches the job to it: v2.29.7-1 src/init.cc
                    ncclCommGrow, `*newcomm = newComm` then
                    ncclAsyncLaunch(..., newComm)); its first all-reduce.
  c. after a SIGKILL member N-1 is SIGKILLed mid all-reduce. The survivors
                    revoke, then shrink; each records the result code. NCCL's
                    ncclCommInitChildComm calls ncclCommEnsureReady(parent),
                    which returns the parent's persisted proxy error after a
                    real fault (v2.28.9-1 src/init.cc; ncclCommGetAsyncError
                    reads proxyState->asyncResult, which nothing clears), so
                    the shrink is expected to fail there. When any survivor's
                    shrink fails, all fall back: abort the child (if any) and
                    the parent, a full re-init with the spare, its first
                    all-reduce, timed.

The child of a non-blocking ncclCommShrink is NULL when the call returns
(ncclCommInitChildComm: `*newcomm = NCCL_COMM_NULL`); NCCL's async job stores
it later through the caller's pointer (ncclCommInitRankFunc, label exit:
`__atomic_store_n(job->newcomm, comm, ...)`), so that pointer lives as long
as the process (nccl_ctypes.comm_slot) and the parent is what is polled
(NCCL's documented recipe: v2.30.7-1 docs/userguide/source/usage/communicators.rst).

Times are the slowest survivor's. Paths the NCCL there lacks (revoke
< 2.28.7, grow < 2.29) are reported as such, not failed. The last line of
stdout is the JSON summary with a markdown table (for docs/performance.md).

Launcher: `python3 recovery.py --kit DIR --env-json FILE --out DIR [--sizes 4,8]`
Worker:   `python3 recovery.py --worker ...` (started by the launcher)
"""

import ctypes
import json
import os
import secrets
import signal
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kit as kitlib  # noqa: E402

COUNT = 256 * 1024  # floats: 1 MiB
WARMUP = 20  # all-reduces before the kill of phase c


class Worker:
    """A rank's torch and NCCL (test_kit.py passes stand-ins for both)."""

    def __init__(self, a, torch=None, nccl=None):
        import nccl_ctypes
        if torch is None:
            import torch
        torch.cuda.set_device(0)
        torch.cuda.init()
        self.a = a
        self.torch = torch
        self.nc = nccl_ctypes
        self.nccl = nccl if nccl is not None else nccl_ctypes.Nccl(a.nccl_lib)
        self.n = a.members
        self.spare = a.rank == a.members
        self.lost = a.members - 1
        self.deadline = a.deadline
        self.x = torch.ones(COUNT, device="cuda")
        self.y = torch.empty(COUNT, device="cuda")
        self.stream = torch.cuda.current_stream()

    def members_exchange(self, name, value):
        return kitlib.exchange(self.a.run_dir, name, self.a.rank, value, self.n, self.deadline)

    def next_exchange(self, name, value):
        """The survivors (ranks 0..N-2) and the spare (as rank N-1)."""
        rank = self.n - 1 if self.spare else self.a.rank
        return kitlib.exchange(self.a.run_dir, name, rank, value, self.n, self.deadline)

    def survivors_exchange(self, name, value):
        return kitlib.exchange(self.a.run_dir, name, self.a.rank, value, self.n - 1, self.deadline)

    def ready(self, comm, call):
        state, seconds = self.nccl.settle(comm, self.deadline)
        if state != self.nc.SUCCESS:
            raise self.nc.NcclError(call, state if state is not None else self.nc.IN_PROGRESS,
                                    self.nccl.last_error(comm) if state is not None else "did not settle")
        return seconds

    def init(self, nranks, uid, rank):
        _, comm = self.nccl.init_rank_config(nranks, uid, rank, blocking=False)
        self.ready(comm, "ncclCommInitRankConfig")
        return comm

    def all_reduce(self, comm):
        """One 1 MiB all-reduce to its end: its value (every input is 1)."""
        nc = self.nc
        code = self.nccl.all_reduce(comm, self.x.data_ptr(), self.y.data_ptr(), COUNT, self.stream.cuda_stream)
        if code == nc.IN_PROGRESS:
            self.ready(comm, "ncclAllReduce")
        while not self.stream.query():
            state = self.nccl.async_error(comm)
            if state not in (nc.SUCCESS, nc.IN_PROGRESS):
                raise nc.NcclError("ncclAllReduce", state, self.nccl.last_error(comm))
            if time.monotonic() > self.deadline:
                raise TimeoutError("an all-reduce did not complete")
            time.sleep(0.0002)
        return float(self.y[0].item())

    def loop_until_error(self, comm, ready_path):
        """1 MiB all-reduces until NCCL reports an error: its name, or raises."""
        nc = self.nc
        it = 0
        while time.monotonic() < self.deadline:
            code = self.nccl.lib.ncclAllReduce(self.x.data_ptr(), self.y.data_ptr(), COUNT, nc.FLOAT32, nc.SUM,
                                               comm, self.stream.cuda_stream)
            if code == nc.IN_PROGRESS:
                code, _ = self.nccl.settle(comm, self.deadline)
            if code not in (nc.SUCCESS, None):
                return nc.result_name(code)
            while not self.stream.query():
                state = self.nccl.async_error(comm)
                if state not in (nc.SUCCESS, nc.IN_PROGRESS):
                    return nc.result_name(state)
                if time.monotonic() > self.deadline:
                    raise TimeoutError("no error after the kill")
                time.sleep(0.0002)
            it += 1
            if it == WARMUP:
                kitlib.worker_ready(ready_path)
        raise TimeoutError("no error before the deadline")

    def revoke(self, comm):
        """(rc, state once settled, ms)."""
        nc = self.nc
        t0 = time.monotonic()
        rc = self.nccl.revoke(comm)
        state, _ = self.nccl.settle(comm, self.deadline)
        return (nc.result_name(rc), nc.result_name(state) if state is not None else "timeout",
                (time.monotonic() - t0) * 1000)

    def shrink(self, comm, give_up=None):
        """ncclCommShrink of `comm` without the lost member, non-blocking:
        {rc, newcomm_null_after_call, parent_state, child_state, child (the
        slot, or None)}. The parent is polled until it leaves ncclInProgress
        (or give_up() says a peer failed); the child is read only then."""
        nc = self.nc
        child = nc.comm_slot()  # NCCL stores the child here later: it must outlive the job
        rc = self.nccl.shrink(comm, [self.lost], child, nc.non_blocking_config(), nc.SHRINK_ABORT)
        out = {"rc": nc.result_name(rc), "newcomm_null_after_call": child.value is None, "child": None}
        if rc not in (nc.SUCCESS, nc.IN_PROGRESS):
            out["last_error"] = self.nccl.last_error(comm)[:300]
            return out
        state, _ = self.nccl.settle(comm, self.deadline, give_up=give_up)
        out["parent_state"] = nc.result_name(state) if state is not None else "gave up or timed out"
        if state is None and child.value is None:
            return out
        if child.value is not None:
            out["child"] = child
            cstate, _ = self.nccl.settle(child, self.deadline, give_up=give_up)
            out["child_state"] = nc.result_name(cstate) if cstate is not None else "gave up or timed out"
        return out


def phase_abort_init(w, out):
    nccl, r = w.nccl, w.a.rank
    if not w.spare:
        uid = w.members_exchange("a-uid", nccl.unique_id() if r == 0 else None)[0]
        comm = w.init(w.n, uid, r)
        w.all_reduce(comm)
        w.members_exchange("a-warm", True)
        if r == w.lost:
            nccl.abort(comm)  # it leaves
            return
    t0 = time.monotonic()
    if not w.spare:
        nccl.abort(comm)
    uid2 = w.next_exchange("a-uid2", nccl.unique_id() if (r == 0 and not w.spare) else None)[0]
    comm2 = w.init(w.n, uid2, w.n - 1 if w.spare else r)
    out["abort_init_value"] = w.all_reduce(comm2)
    if not w.spare:
        out["abort_init_ms"] = (time.monotonic() - t0) * 1000
    w.next_exchange("a-done", True)
    nccl.abort(comm2)


def phase_shrink_grow(w, out):
    nccl, nc, r = w.nccl, w.nc, w.a.rank
    if not w.spare:
        uid = w.members_exchange("b-uid", nccl.unique_id() if r == 0 else None)[0]
        comm = w.init(w.n, uid, r)
        w.all_reduce(comm)
        w.members_exchange("b-warm", True)
        if r == w.lost:
            # It leaves without a word: a shrink is not collective over it. It
            # keeps its communicator until the survivors have shrunk, so that
            # no connection it closes can look like a fault to them.
            read_json_wait(os.path.join(w.a.run_dir, "b-shrunk"), w.deadline)
            nccl.abort(comm)
            return
        t0 = time.monotonic()
        rc, state, ms = w.revoke(comm)
        out["revoke_ms"] = ms
        out["b_revoke"] = [rc, state]
        sh = w.shrink(comm)
        out["b_shrink"] = {k: v for k, v in sh.items() if k != "child"}
        shrunk = sh["child"]
        if shrunk is None or sh.get("child_state") != "ncclSuccess":
            raise nc.NcclError("ncclCommShrink", nc.INVALID_USAGE, f"fault-free shrink failed: {out['b_shrink']}")
        out["shrink_value"] = w.all_reduce(shrunk)
        out["revoke_shrink_ms"] = (time.monotonic() - t0) * 1000
        if r == 0:
            kitlib.worker_result(os.path.join(w.a.run_dir, "b-shrunk"), True)
    if nccl.grow_fn is None:
        out["grow"] = "not in this NCCL"
        if not w.spare:
            nccl.abort(shrunk)
            nccl.abort(comm)
        return
    gid = ctypes.create_string_buffer(128)
    if r == 0 and not w.spare:
        rc = nccl.grow_id_fn(shrunk, ctypes.cast(gid, ctypes.c_void_p))
        if rc != nc.SUCCESS:
            raise nc.NcclError("ncclCommGetUniqueId", rc, nccl.last_error(shrunk))
    ids = w.next_exchange("b-gid", gid.raw.hex() if (r == 0 and not w.spare) else None)
    ctypes.memmove(gid, bytes.fromhex(ids[0]), 128)
    grown = nc.comm_slot()  # written again by the grow's job: it must outlive it
    cfg = nc.non_blocking_config()
    if w.spare:
        rc = nccl.grow_fn(None, w.n, ctypes.cast(gid, ctypes.c_void_p), w.n - 1, ctypes.byref(grown),
                          ctypes.byref(cfg))
    else:
        root_id = ctypes.cast(gid, ctypes.c_void_p) if r == 0 else None
        rc = nccl.grow_fn(shrunk, w.n, root_id, -1, ctypes.byref(grown), ctypes.byref(cfg))
    if rc not in (nc.SUCCESS, nc.IN_PROGRESS):
        raise nc.NcclError("ncclCommGrow", rc, nccl.last_error(None))
    if grown.value is None:
        raise nc.NcclError("ncclCommGrow", rc, "returned no communicator")
    w.ready(grown, "ncclCommGrow")
    out["grow_value"] = w.all_reduce(grown)
    if not w.spare:
        out["revoke_shrink_grow_ms"] = (time.monotonic() - t0) * 1000
    w.next_exchange("b-done", True)
    nccl.abort(grown)
    if not w.spare:
        nccl.abort(shrunk)
        nccl.abort(comm)  # the revoked parent of an abortive shrink: abort, never destroy


def phase_after_kill(w, out):
    """c: the lost member is SIGKILLed by the launcher mid all-reduce."""
    nccl, r = w.nccl, w.a.rank
    run_dir = w.a.run_dir
    decision_path = os.path.join(run_dir, "c-decision")
    if not w.spare:
        uid = w.members_exchange("c-uid", nccl.unique_id() if r == 0 else None)[0]
        comm = w.init(w.n, uid, r)
        out["c_error"] = w.loop_until_error(comm, w.a.result)
        t0 = time.monotonic()
        out["c_error_mono"] = t0
        rc, state, ms = w.revoke(comm)
        out["c_revoke"] = {"rc": rc, "state": state, "ms": ms}
        outcome = os.path.join(run_dir, "c-outcome.{}")

        def a_peer_failed():
            for i in range(w.n - 1):
                if i != r:
                    done = kitlib.read_json(outcome.format(i))
                    if done is not None and not done["ready"]:
                        return True
            return False

        t1 = time.monotonic()
        sh = w.shrink(comm, give_up=a_peer_failed)
        out["c_shrink"] = {k: v for k, v in sh.items() if k != "child"}
        out["c_shrink"]["ms"] = (time.monotonic() - t1) * 1000
        child = sh["child"]
        ready = child is not None and sh.get("child_state") == "ncclSuccess"
        kitlib.worker_result(outcome.format(r), {"ready": ready})
        if r == 0:
            outcomes = [read_json_wait(outcome.format(i), w.deadline) for i in range(w.n - 1)]
            fallback = not all(o is not None and o["ready"] for o in outcomes)
            kitlib.worker_result(decision_path, {"fallback": fallback,
                                                 "uid": nccl.unique_id() if fallback else None})
    decision = read_json_wait(decision_path, w.deadline)
    if decision is None:
        raise TimeoutError("survivor 0 decided nothing")
    out["c_fallback"] = decision["fallback"]
    if not decision["fallback"]:
        if not w.spare:
            out["c_shrink_value"] = w.all_reduce(child)
            out["c_shrink_total_ms"] = (time.monotonic() - t0) * 1000
            w.survivors_exchange("c-done", True)
            nccl.abort(child)
            nccl.abort(comm)
        return
    if not w.spare:
        t2 = time.monotonic()
        if child is not None:
            nccl.abort(child)
        nccl.abort(comm)
        out["c_abort_ms"] = (time.monotonic() - t2) * 1000
    comm2 = w.init(w.n, decision["uid"], w.n - 1 if w.spare else r)
    out["c_reinit_value"] = w.all_reduce(comm2)
    if not w.spare:
        out["c_reinit_ms"] = (time.monotonic() - t2) * 1000
        out["c_total_ms"] = (time.monotonic() - t0) * 1000
    w.next_exchange("c-done", True)
    nccl.abort(comm2)


def read_json_wait(path, deadline):
    while time.monotonic() < deadline:
        value = kitlib.read_json(path)
        if value is not None:
            return value
        time.sleep(0.01)
    return None


def run_phases(w):
    """Every phase of one worker: its result."""
    a = w.a
    out = {"rank": a.rank, "members": w.n, "nccl_version": w.nccl.version()[1],
           "has": {"revoke": w.nccl.revoke_fn is not None, "shrink": w.nccl.shrink_fn is not None,
                   "grow": w.nccl.grow_fn is not None}}
    phase_abort_init(w, out)
    if w.nccl.revoke_fn is None or w.nccl.shrink_fn is None:
        out["shrink"] = "not in this NCCL"
    else:
        phase_shrink_grow(w, out)
        kitlib.worker_result(a.result + ".partial", out)
        phase_after_kill(w, out)
    return out


def worker(a):
    kitlib.worker_result(a.result, run_phases(Worker(a)))
    kitlib.worker_exit(0)


# ---------------------------------------------------------------- launcher

def slowest(survivors, key):
    values = [s[key] for s in survivors if key in s]
    return round(max(values), 1) if values and len(values) == len(survivors) else None


def row_of(n, results):
    """(row, problems) of one size from its workers' results."""
    problems = []
    survivors = [results.get(r) for r in range(n - 1)]
    spare = results.get(n)
    if any(s is None for s in survivors) or spare is None:
        missing = [r for r in range(n - 1) if results.get(r) is None] + ([n] if spare is None else [])
        return None, [f"{n} members: workers {missing} reported nothing"]
    errors = [f"rank {s['rank']}: {s['error']}" for s in survivors + [spare] if "error" in s]
    if errors:
        return None, [f"{n} members: " + "; ".join(errors)[:500]]
    s0 = survivors[0]
    row = {"members": n, "nccl": s0["nccl_version"],
           "abort_init_ms": slowest(survivors, "abort_init_ms"),
           "revoke_ms": slowest(survivors, "revoke_ms"),
           "revoke_shrink_ms": slowest(survivors, "revoke_shrink_ms"),
           "revoke_shrink_grow_ms": slowest(survivors, "revoke_shrink_grow_ms"),
           "shrink": s0.get("shrink", "timed"), "grow": s0.get("grow", "timed")}
    if "c_error" in s0:
        row["kill"] = {
            "errors": sorted({s.get("c_error") for s in survivors}),
            "revoke": sorted({f"{s['c_revoke']['rc']}/{s['c_revoke']['state']}" for s in survivors}),
            "revoke_ms": slowest([s["c_revoke"] for s in survivors], "ms"),
            "shrink_rc": sorted({s["c_shrink"]["rc"] for s in survivors}),
            "newcomm_null_after_call": sorted({s["c_shrink"]["newcomm_null_after_call"] for s in survivors}),
            "parent_state": sorted({s["c_shrink"].get("parent_state", "-") for s in survivors}),
            "child_state": sorted({s["c_shrink"].get("child_state", "-") for s in survivors}),
            "fallback": s0.get("c_fallback"),
            "abort_ms": slowest(survivors, "c_abort_ms"),
            "reinit_ms": slowest(survivors, "c_reinit_ms"),
            "total_ms": slowest(survivors, "c_total_ms") if s0.get("c_fallback") else slowest(survivors, "c_shrink_total_ms"),
        }
    for key, want in (("abort_init_value", float(n)), ("shrink_value", float(n - 1)), ("grow_value", float(n)),
                      ("c_reinit_value", float(n)), ("c_shrink_value", float(n - 1))):
        for s in survivors + [spare]:
            if key in s and s[key] != want:
                problems.append(f"{n} members: rank {s['rank']} {key} {s[key]}, not {want}")
    if row["abort_init_ms"] is None:
        problems.append(f"{n} members: abort+init not timed on every survivor")
    if "c_error" in s0 and row["kill"]["total_ms"] is None:
        problems.append(f"{n} members: the recovery after the SIGKILL was not timed on every survivor")
    return row, problems


def table(rows):
    lines = ["Fault-free (a member leaves cleanly), slowest survivor, ms:", "",
             "| members | NCCL | abort + init | revoke | revoke + shrink | + grow |",
             "|---:|---|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r['members']} | {r['nccl']} | {r['abort_init_ms']} | {r['revoke_ms']} | "
                     f"{r['revoke_shrink_ms'] if r['shrink'] == 'timed' else r['shrink']} | "
                     f"{r['revoke_shrink_grow_ms'] if r['grow'] == 'timed' else r['grow']} |")
    kills = [r for r in rows if "kill" in r]
    if kills:
        lines += ["", "After a SIGKILL of a member mid all-reduce (revoke, shrink; on a failed shrink the "
                  "fallback: abort, full re-init with the spare), slowest survivor, ms:", "",
                  "| members | error | revoke (rc/state) | revoke ms | shrink rc | newcomm NULL after call | "
                  "parent | child | fallback | abort | re-init to first all-reduce | from the error |",
                  "|---:|---|---|---:|---|---|---|---|---|---:|---:|---:|"]
        for r in kills:
            k = r["kill"]
            lines.append(f"| {r['members']} | {', '.join(k['errors'])} | {', '.join(k['revoke'])} | {k['revoke_ms']} | "
                         f"{', '.join(k['shrink_rc'])} | {', '.join(map(str, k['newcomm_null_after_call']))} | "
                         f"{', '.join(k['parent_state'])} | {', '.join(k['child_state'])} | {k['fallback']} | "
                         f"{k['abort_ms']} | {k['reinit_ms']} | {k['total_ms']} |")
    return "\n".join(lines)


def launch(a):
    k = kitlib.Kit(a.kit)
    with open(a.env_json) as f:
        envinfo = json.load(f)
    rows, problems = [], []
    sizes = [int(s) for s in a.sizes.split(",")]
    t_end = time.monotonic() + a.max_seconds
    for i, n in enumerate(sizes):
        # The time left, shared evenly by the sizes still to run.
        size_end = time.monotonic() + (t_end - time.monotonic()) / (len(sizes) - i)
        run_dir = tempfile.mkdtemp(prefix=f"recovery-{n}-", dir=a.out)
        bb_dir = tempfile.mkdtemp(prefix="resilient-gpukit-bb-", dir="/dev/shm")
        base = kitlib.nccl_environment(os.environ, kit=k, log_dir=run_dir)
        base.update({"NCCL_RESILIENT_JOB_TOKEN": secrets.token_hex(16),
                     "NCCL_RESILIENT_BLACKBOX_DIR": bb_dir, "PYTHONUNBUFFERED": "1"})
        argv = [sys.executable, os.path.abspath(__file__), "--worker", "--members", str(n),
                "--run-dir", run_dir, "--nccl-lib", envinfo["nccl_library"], "--deadline", repr(size_end - 0.5)]
        with kitlib.Ranks(run_dir) as ranks:
            procs = {}
            for r in range(n + 1):  # n members and one spare
                procs[r] = ranks.start(r, argv + ["--rank", str(r)], kitlib.rank_environment(base, r), "worker")
            lost = n - 1
            ready = os.path.join(run_dir, f"worker-rank{lost}.json.ready")
            others = [os.path.join(run_dir, f"worker-rank{r}.json.ready") for r in range(n - 1)]
            killed = False
            while time.monotonic() < size_end:
                if os.path.exists(ready) and all(os.path.exists(p) for p in others):
                    os.kill(procs[lost].pid, signal.SIGKILL)
                    killed = True
                    break
                if any(p.poll() is not None for p in procs.values()):
                    break
                time.sleep(0.02)
            results = ranks.wait_results(size_end, [r for r in range(n + 1) if r != lost])
        if not killed:
            # Without revoke/shrink there is no phase c; otherwise a worker failed first.
            partial = {r: kitlib.read_json(os.path.join(run_dir, f"worker-rank{r}.json.partial")) for r in range(n + 1)}
            if any(p is not None for p in partial.values()) or all(v is None for v in results.values()):
                problems.append(f"{n} members: member {lost} was never killed (logs in {run_dir})")
        row, more = row_of(n, results)
        problems += more
        if row is not None:
            rows.append(row)
    return {"ok": not problems, "rows": rows, "problems": problems, "table": table(rows)}


def parser():
    p = kitlib.step_parser(__doc__.split("\n")[0], 48)
    p.add_argument("--sizes", default="4,8")
    p.add_argument("--members", type=int)
    return p


def main():
    return kitlib.launcher_or_worker(parser(), worker, launch)


if __name__ == "__main__":
    sys.exit(main())
