"""The NCCL probe: what real NCCL does in the four places the restart library
relies on (issue 31; ../shared/reference/nccl-lifecycle.md R1-R4), measured
on the one GPU through our net plugin (ctypes on the libnccl torch loaded,
nccl_ctypes.py). Nothing here judges our code: it records NCCL.

(i)   group depth after a destroy. A throwaway pair (probe, victim) runs
      1 MiB all-reduces on a non-blocking communicator; the victim is
      SIGKILLed mid-loop; the probe revokes the communicator (it now carries
      the proxy's error), calls ncclCommDestroy on it, then ncclGroupEnd()
      twice on the same thread. ncclInvalidUsage from the first proves the
      thread's group depth was 0; anything else proves the destroy left the
      thread inside a group (v2.28.9-1 src/init.cc ncclCommDestroy:
      ncclGroupStartInternal, then NCCLCHECK(ncclCommEnsureReady) returns
      without ncclGroupEndInternal).
(ii)  shrink after a real fault. 4 members, non-blocking; member 3 is
      SIGKILLed mid all-reduce; the survivors ncclCommRevoke (polled until
      settled), then ncclCommShrink(exclude 3, NCCL_SHRINK_ABORT): its
      return code, whether *newcomm was NULL right after the call
      (ncclCommInitChildComm sets it NULL; the async job stores the child
      later, init.cc ncclCommInitRankFunc), the time until the child pointer
      appeared and until the PARENT left ncclInProgress (NCCL's documented
      recipe polls the parent: v2.30.7-1 docs/userguide/source/usage/communicators.rst,
      "nonblocking communicator split"), and the child's own state.
      ncclCommInitChildComm calls ncclCommEnsureReady(parent) first, which
      returns the parent's persisted proxy error after a real fault.
(iii) abort cost, fault-free: ncclCommAbort alone; ncclCommRevoke (settled)
      then ncclCommAbort; 4 communicators aborted on 4 threads at once.
(iv)  8-byte all-reduce latency, 1000 iterations, blocking vs non-blocking
      communicator (a non-blocking call may return ncclInProgress, polled to
      ncclSuccess before the stream is waited for).

Writes probe.json and probe.md into its run folder; the last line of stdout
is the JSON summary (with the markdown table).

Launcher: `python3 nccl_probe.py --kit DIR --env-json FILE --out DIR`
Worker:   `python3 nccl_probe.py --worker --role member|probe|victim ...`
"""

import json
import os
import secrets
import signal
import statistics
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kit as kitlib  # noqa: E402

MEMBERS = 4
LOST = 3  # the member SIGKILLed in (ii)
COUNT = 256 * 1024  # floats: 1 MiB, the fault loops' all-reduce
LATENCY_COUNT = 2  # floats: 8 bytes
LATENCY_WARMUP = 20
LATENCY_ITERATIONS = 1000
PARALLEL_COMMS = 4
WARMUP = 20  # all-reduces before a kill
PROBE_RANK, VICTIM_RANK = 10, 11  # the throwaway pair of (i), as the launcher numbers its workers


# ---------------------------------------------------------------- workers

class Worker:
    """A rank's torch and NCCL (test_kit.py passes stand-ins for both)."""

    def __init__(self, a, torch=None, nccl=None):
        import nccl_ctypes
        if torch is None:
            import torch
        self.a = a
        self.torch = torch
        self.nc = nccl_ctypes
        torch.cuda.set_device(0)
        torch.cuda.init()
        self.nccl = nccl if nccl is not None else nccl_ctypes.Nccl(a.nccl_lib)
        self.stream = torch.cuda.current_stream()
        self.deadline = a.deadline

    def exchange(self, name, value, index, n):
        return kitlib.exchange(self.a.run_dir, name, index, value, n, self.deadline)

    def settled(self, comm, what):
        state, seconds = self.nccl.settle(comm, self.deadline)
        if state != self.nc.SUCCESS:
            raise RuntimeError(f"{what}: {self.nc.result_name(state) if state is not None else 'still in progress'}"
                               f" ({self.nccl.last_error(comm)[:200]})")
        return seconds

    def non_blocking(self, uid, n, rank, what):
        code, comm = self.nccl.init_rank_config(n, uid, rank, blocking=False)
        self.settled(comm, what)
        return comm

    def all_reduce(self, comm, x, y, count, non_blocking):
        """One all-reduce to its end: (ncclAllReduce's code, polls in progress)."""
        code = self.nccl.lib.ncclAllReduce(x.data_ptr(), y.data_ptr(), count, self.nc.FLOAT32, self.nc.SUM,
                                           comm, self.stream.cuda_stream)
        polls = 0
        state = code
        if non_blocking:
            while (state := self.nccl.async_error(comm)) == self.nc.IN_PROGRESS:
                polls += 1
                if time.monotonic() > self.deadline:
                    raise TimeoutError("an all-reduce stayed in progress")
        if code not in (self.nc.SUCCESS, self.nc.IN_PROGRESS) or state != self.nc.SUCCESS:
            raise self.nc.NcclError("ncclAllReduce", code if code not in (self.nc.SUCCESS, self.nc.IN_PROGRESS)
                                    else state, self.nccl.last_error(comm))
        self.stream.synchronize()
        return code, polls

    def loop_until_error(self, comm, n, ready_path):
        """1 MiB all-reduces until NCCL reports an error (a peer was killed):
        {"error", "error_mono", "iterations"} or {"hung": True}."""
        torch, nc = self.torch, self.nc
        x = torch.ones(COUNT, device="cuda")
        y = torch.empty(COUNT, device="cuda")
        it = 0
        while time.monotonic() < self.deadline:
            code = self.nccl.lib.ncclAllReduce(x.data_ptr(), y.data_ptr(), COUNT, nc.FLOAT32, nc.SUM, comm,
                                               self.stream.cuda_stream)
            if code == nc.IN_PROGRESS:
                code, _ = self.nccl.settle(comm, self.deadline)
            if code != nc.SUCCESS:
                return {"error": nc.result_name(code), "error_mono": time.monotonic(), "iterations": it,
                        "at": "ncclAllReduce", "last_error": self.nccl.last_error(comm)[:300]}
            while not self.stream.query():
                state = self.nccl.async_error(comm)
                if state not in (nc.SUCCESS, nc.IN_PROGRESS):
                    return {"error": nc.result_name(state), "error_mono": time.monotonic(), "iterations": it,
                            "at": "ncclCommGetAsyncError", "last_error": self.nccl.last_error(comm)[:300]}
                if time.monotonic() > self.deadline:
                    return {"hung": True, "iterations": it}
                time.sleep(0.0002)
            it += 1
            if it == 1 and float(y[0].item()) != float(n):
                return {"wrong_value": float(y[0].item()), "iterations": it}
            if it == WARMUP:
                kitlib.worker_ready(ready_path)
        return {"hung": True, "iterations": it}

    def revoke(self, comm):
        """{rc, state, ms}: ncclCommRevoke, then the communicator polled
        until it leaves ncclInProgress (its state then: after a real fault
        the proxy's persisted error, init.cc ncclCommGetAsyncError reads
        proxyState->asyncResult)."""
        nc = self.nc
        if self.nccl.revoke_fn is None:
            return {"rc": None, "note": "ncclCommRevoke is not in this NCCL (< 2.28.7)"}
        t0 = time.monotonic()
        rc = self.nccl.revoke(comm)
        state, _ = self.nccl.settle(comm, self.deadline)
        return {"rc": nc.result_name(rc), "state": nc.result_name(state) if state is not None else "timeout",
                "ms": round((time.monotonic() - t0) * 1000, 2)}


def timed_abort(nccl, comm):
    t0 = time.monotonic()
    rc = nccl.abort(comm)
    return rc, round((time.monotonic() - t0) * 1000, 2)


def probe_worker(a, w, index):
    """(i) The throwaway pair: index 0 the probe, 1 the victim."""
    nc, nccl = w.nc, w.nccl
    out = {"role": a.role, "pid": os.getpid(), "nccl_version": nccl.version()[1]}
    uid = w.exchange("d-uid", nccl.unique_id() if index == 0 else None, index, 2)[0]
    comm = w.non_blocking(uid, 2, index, "ncclCommInitRankConfig (pair)")
    loop = w.loop_until_error(comm, 2, a.result)
    out.update(loop)
    if "error" not in loop:
        raise RuntimeError(f"the pair's loop ended without an error: {loop}")
    out["revoke"] = w.revoke(comm)
    out["destroy"] = "did not return"
    kitlib.worker_result(a.result, out)  # what is known if the destroy hangs
    t0 = time.monotonic()
    rc = nccl.destroy(comm)
    out["destroy"] = {"rc": nc.result_name(rc), "ms": round((time.monotonic() - t0) * 1000, 2)}
    # On the destroying thread (ncclGroupDepth is __thread, src/group.cc).
    first = nccl.group_end()
    second = nccl.group_end()
    out["group_end"] = [nc.result_name(first), nc.result_name(second)]
    out["group_depth_after_destroy"] = group_depth_verdict(first, second)
    out["destroy_last_error"] = nccl.last_error()[:300]
    return out


def group_depth_verdict(first, second):
    """What two ncclGroupEnd() calls in a row say about the depth before."""
    import nccl_ctypes as nc
    if first == nc.INVALID_USAGE:
        return "0 (ncclGroupEnd: not in a group call)"
    if second == nc.INVALID_USAGE:
        return f"1: left inside a group (the first ncclGroupEnd gave {nc.result_name(first)})"
    return (f"2 or more: left inside groups (ncclGroupEnd gave {nc.result_name(first)}, "
            f"then {nc.result_name(second)})")


def latency(w, comm, non_blocking):
    torch = w.torch
    x = torch.ones(LATENCY_COUNT, device="cuda")
    y = torch.empty(LATENCY_COUNT, device="cuda")
    for _ in range(LATENCY_WARMUP):
        w.all_reduce(comm, x, y, LATENCY_COUNT, non_blocking)
    samples, in_progress, polls = [], 0, 0
    for _ in range(LATENCY_ITERATIONS):
        t0 = time.perf_counter()
        code, p = w.all_reduce(comm, x, y, LATENCY_COUNT, non_blocking)
        samples.append((time.perf_counter() - t0) * 1e6)
        in_progress += code == w.nc.IN_PROGRESS
        polls += p
    return {"median_us": round(statistics.median(samples), 1),
            "p99_us": round(sorted(samples)[int(len(samples) * 0.99) - 1], 1),
            "mean_us": round(statistics.fmean(samples), 1), "iterations": len(samples),
            "in_progress_returns": in_progress, "polls": polls, "value": float(y[0].item())}


def member_worker(a, w):
    nc, nccl, torch = w.nc, w.nccl, w.torch
    r = a.rank
    out = {"role": "member", "rank": r, "pid": os.getpid(), "nccl_version": nccl.version()[1]}

    def members(name, value):
        return w.exchange(name, value, r, MEMBERS)

    # Start once the throwaway pair is done (a concurrent job would skew the times).
    go = os.path.join(a.run_dir, "go")
    while not os.path.exists(go):
        if time.monotonic() > w.deadline:
            raise TimeoutError("the launcher never said go")
        time.sleep(0.01)

    # (iv) latency: a blocking and a non-blocking communicator.
    ids = members("a-uid", [nccl.unique_id(), nccl.unique_id()] if r == 0 else None)[0]
    blocking = nccl.init_rank(MEMBERS, ids[0], r)
    nonblocking = w.non_blocking(ids[1], MEMBERS, r, "ncclCommInitRankConfig (latency)")
    out["latency"] = {"blocking": latency(w, blocking, False), "non-blocking": latency(w, nonblocking, True)}
    members("a-done", True)
    for c in (blocking, nonblocking):
        nccl.abort(c)

    # (iii) abort cost, fault-free, non-blocking communicators (as the library makes them).
    x = torch.ones(LATENCY_COUNT, device="cuda")
    y = torch.empty(LATENCY_COUNT, device="cuda")
    uid = members("b1-uid", nccl.unique_id() if r == 0 else None)[0]
    comm = w.non_blocking(uid, MEMBERS, r, "ncclCommInitRankConfig (b1)")
    w.all_reduce(comm, x, y, LATENCY_COUNT, True)
    members("b1-warm", True)
    rc, ms = timed_abort(nccl, comm)
    out["abort"] = {"rc": nc.result_name(rc), "ms": ms}

    uid = members("b2-uid", nccl.unique_id() if r == 0 else None)[0]
    comm = w.non_blocking(uid, MEMBERS, r, "ncclCommInitRankConfig (b2)")
    w.all_reduce(comm, x, y, LATENCY_COUNT, True)
    members("b2-warm", True)
    t0 = time.monotonic()
    rev = w.revoke(comm)
    rc, ms = timed_abort(nccl, comm)
    out["revoke_then_abort"] = {"revoke": rev, "abort_rc": nc.result_name(rc), "abort_ms": ms,
                                "total_ms": round((time.monotonic() - t0) * 1000, 2)}

    uids = members("b3-uid", [nccl.unique_id() for _ in range(PARALLEL_COMMS)] if r == 0 else None)[0]
    comms = []
    for u in uids:  # non-blocking: the inits run on NCCL's threads together
        _, c = nccl.init_rank_config(MEMBERS, u, r, blocking=False)
        comms.append(c)
    for c in comms:
        w.settled(c, "ncclCommInitRankConfig (b3)")
    for c in comms:
        w.all_reduce(c, x, y, LATENCY_COUNT, True)
    members("b3-warm", True)
    start = threading.Barrier(PARALLEL_COMMS + 1)
    each = [None] * PARALLEL_COMMS

    def abort_one(i):
        start.wait()
        each[i] = timed_abort(nccl, comms[i])

    threads = [threading.Thread(target=abort_one, args=(i,)) for i in range(PARALLEL_COMMS)]
    for t in threads:
        t.start()
    start.wait()
    t0 = time.monotonic()
    for t in threads:
        t.join()
    out["parallel_abort"] = {"communicators": PARALLEL_COMMS, "wall_ms": round((time.monotonic() - t0) * 1000, 2),
                             "each_ms": [e[1] for e in each], "rc": sorted({nc.result_name(e[0]) for e in each})}

    # (ii) SIGKILL of member LOST mid all-reduce, then revoke and shrink.
    uid = members("c-uid", nccl.unique_id() if r == 0 else None)[0]
    comm = w.non_blocking(uid, MEMBERS, r, "ncclCommInitRankConfig (c)")
    loop = w.loop_until_error(comm, MEMBERS, a.result)
    out["fault"] = loop
    if "error" not in loop:
        raise RuntimeError(f"the loop ended without an error: {loop}")
    out["shrink"] = shrink_after_fault(w, comm, r)
    return out


def shrink_after_fault(w, comm, rank):
    nc, nccl = w.nc, w.nccl
    out = {"revoke": w.revoke(comm)}
    if nccl.shrink_fn is None:
        out["note"] = "ncclCommShrink is not in this NCCL (< 2.27)"
        out["abort_parent"] = timed_abort(nccl, comm)[1]
        return out
    child = nc.comm_slot()  # NCCL stores the child here later: it must outlive the job
    t0 = time.monotonic()
    rc = nccl.shrink(comm, [LOST], child, nc.non_blocking_config(), nc.SHRINK_ABORT)
    out["rc"] = nc.result_name(rc)
    out["call_ms"] = round((time.monotonic() - t0) * 1000, 2)
    out["newcomm_null_after_call"] = child.value is None
    out["last_error"] = nccl.last_error(comm)[:300]
    outcome = os.path.join(w.a.run_dir, "c-outcome.{}")
    survivors = [i for i in range(MEMBERS) if i != LOST]

    def a_peer_failed():
        for i in survivors:
            if i == rank:
                continue
            try:
                with open(outcome.format(i)) as f:
                    if not json.load(f)["ready"]:
                        return True
            except (OSError, ValueError, KeyError):
                pass
        return False

    ready = False
    if rc in (nc.SUCCESS, nc.IN_PROGRESS):
        # NCCL's recipe: poll the PARENT until it leaves ncclInProgress; note
        # when the child pointer appears.
        appeared = None
        while True:
            state = nccl.async_error(comm)
            if appeared is None and child.value is not None:
                appeared = time.monotonic() - t0
            if state != nc.IN_PROGRESS:
                break
            if time.monotonic() > w.deadline:
                state = None
                break
            if a_peer_failed():
                state = "abandoned: another survivor's shrink failed"
                break
            time.sleep(0.0002)
        if appeared is None and child.value is not None:
            appeared = time.monotonic() - t0
        out["parent_state"] = nc.result_name(state) if isinstance(state, int) else (state or "timeout")
        out["parent_settled_ms"] = round((time.monotonic() - t0) * 1000, 2)
        out["child_appeared_ms"] = None if appeared is None else round(appeared * 1000, 2)
        if child.value is not None and isinstance(state, int):
            cstate, cs = nccl.settle(child, w.deadline)
            out["child_state"] = nc.result_name(cstate) if cstate is not None else "timeout"
            if cstate == nc.SUCCESS:
                x = w.torch.ones(LATENCY_COUNT, device="cuda")
                y = w.torch.empty(LATENCY_COUNT, device="cuda")
                w.all_reduce(child, x, y, LATENCY_COUNT, True)
                out["child_all_reduce"] = float(y[0].item())
                ready = True
    kitlib.worker_result(outcome.format(rank), {"ready": ready})
    out["ready"] = ready
    if child.value is not None:
        out["abort_child_ms"] = timed_abort(nccl, child)[1]
    out["abort_parent_ms"] = timed_abort(nccl, comm)[1]
    return out


def worker(a):
    w = Worker(a)
    if a.role == "member":
        out = member_worker(a, w)
    elif a.role == "probe":
        out = probe_worker(a, w, 0)
    else:  # the victim: runs the loop until the launcher kills it
        probe_worker(a, w, 1)
        raise RuntimeError("the victim outlived its kill")
    kitlib.worker_result(a.result, out)
    kitlib.worker_exit(0)


# ---------------------------------------------------------------- launcher

def wait_path(path, proc, deadline):
    while time.monotonic() < deadline:
        if os.path.exists(path):
            return True
        if proc.poll() is not None:
            return os.path.exists(path)
        time.sleep(0.02)
    return False


def summarize(probe, members, t_kill_pair, t_kill_member):
    """(problems, findings): what every part measured, and why a part is
    missing. NCCL's behaviour is recorded, never judged."""
    problems, f = [], {}
    if probe is None:
        problems.append("(i) the probe reported nothing")
    elif "error" in probe and "role" not in probe:
        problems.append(f"(i) the probe failed: {probe['error']}")
    else:
        f["group_depth"] = {k: probe.get(k) for k in ("error", "revoke", "destroy", "group_end",
                                                      "group_depth_after_destroy", "destroy_last_error")}
        if t_kill_pair is not None and probe.get("error_mono") is not None:
            f["group_depth"]["detect_ms"] = round((probe["error_mono"] - t_kill_pair) * 1000, 1)
        if probe.get("destroy") == "did not return":
            problems.append("(i) ncclCommDestroy of the revoked, errored communicator did not return")
    for r in range(MEMBERS):
        m = members.get(r)
        if r == LOST:
            continue
        if m is None:
            problems.append(f"member {r} reported nothing")
            continue
        if "role" not in m:
            problems.append(f"member {r} failed: {m.get('error')}")
            continue
        for kind, lat in m["latency"].items():
            if lat["value"] != float(MEMBERS):
                problems.append(f"member {r}: the {kind} 8 B all-reduce gave {lat['value']}, not {MEMBERS}")
        fault = m.get("fault", {})
        if t_kill_member is not None and fault.get("error_mono") is not None:
            fault["detect_ms"] = round((fault["error_mono"] - t_kill_member) * 1000, 1)
        sh = m.get("shrink", {})
        if sh.get("child_all_reduce") is not None and sh["child_all_reduce"] != float(MEMBERS - 1):
            problems.append(f"member {r}: the shrunk communicator's all-reduce gave {sh['child_all_reduce']}")
    f["members"] = {r: m for r, m in members.items() if m is not None and "role" in m}
    return problems, f


def ms_range(values):
    """'lo-hi' of the values (one decimal for times, none for counts)."""
    values = [v for v in values if v is not None]
    if not values:
        return "-"
    lo, hi = min(values), max(values)
    fmt = "{:.1f}" if any(isinstance(v, float) for v in values) else "{}"
    return fmt.format(lo) if lo == hi else f"{fmt.format(lo)}-{fmt.format(hi)}"


def table(findings):
    """The markdown of the four probes."""
    lines = []
    g = findings.get("group_depth")
    if g:
        d = g.get("destroy")
        lines += ["**(i) group depth after ncclCommDestroy of a revoked communicator carrying a fault**", "",
                  "| error seen | revoke (rc, state, ms) | destroy (rc, ms) | ncclGroupEnd x2 | depth before |",
                  "|---|---|---|---|---|",
                  f"| {g.get('error')} ({g.get('detect_ms', '-')} ms) | {fmt_revoke(g.get('revoke'))} | "
                  f"{fmt_destroy(d)} | "
                  f"{', '.join(g.get('group_end') or [])} | {g.get('group_depth_after_destroy')} |", ""]
    members = findings.get("members", {})
    if members:
        lines += ["**(ii) SIGKILL of member 3 mid all-reduce, then revoke and ncclCommShrink (non-blocking)**", "",
                  "| member | error (detect ms) | revoke (rc, state, ms) | shrink rc | newcomm NULL after call | "
                  "parent settled (state, ms) | child appeared ms | child state | child all-reduce | "
                  "abort ms (child, parent) |",
                  "|---:|---|---|---|---|---|---:|---|---|---|"]
        for r, m in sorted(members.items()):
            fl, sh = m.get("fault", {}), m.get("shrink", {})
            lines.append(f"| {r} | {fl.get('error')} ({fl.get('detect_ms', '-')}) | {fmt_revoke(sh.get('revoke'))} | "
                         f"{sh.get('rc', sh.get('note', '-'))} | {sh.get('newcomm_null_after_call', '-')} | "
                         f"{sh.get('parent_state', '-')}, {sh.get('parent_settled_ms', '-')} | "
                         f"{sh.get('child_appeared_ms', '-')} | {sh.get('child_state', '-')} | "
                         f"{sh.get('child_all_reduce', '-')} | {sh.get('abort_child_ms', '-')}, "
                         f"{sh.get('abort_parent_ms', '-')} |")
        ms = list(members.values())
        lines += ["", "**(iii) teardown, fault-free (range over the members, ms)**", "",
                  "| path | ms |", "|---|---:|",
                  f"| ncclCommAbort alone | {ms_range([m['abort']['ms'] for m in ms])} |",
                  f"| ncclCommRevoke until settled | "
                  f"{ms_range([m['revoke_then_abort']['revoke'].get('ms') for m in ms])} |",
                  f"| then ncclCommAbort | {ms_range([m['revoke_then_abort']['abort_ms'] for m in ms])} |",
                  f"| revoke + abort in all | {ms_range([m['revoke_then_abort']['total_ms'] for m in ms])} |",
                  f"| {PARALLEL_COMMS} communicators aborted on {PARALLEL_COMMS} threads (wall) | "
                  f"{ms_range([m['parallel_abort']['wall_ms'] for m in ms])} |",
                  f"| ... each of them | {ms_range([x for m in ms for x in m['parallel_abort']['each_ms']])} |",
                  "", f"**(iv) 8-byte all-reduce, {LATENCY_ITERATIONS} iterations (range over the members)**", "",
                  "| communicator | median us | p99 us | mean us | calls returning ncclInProgress |",
                  "|---|---:|---:|---:|---:|"]
        for kind in ("blocking", "non-blocking"):
            lat = [m["latency"][kind] for m in ms]
            lines.append(f"| {kind} | {ms_range([x['median_us'] for x in lat])} | "
                         f"{ms_range([x['p99_us'] for x in lat])} | {ms_range([x['mean_us'] for x in lat])} | "
                         f"{ms_range([x['in_progress_returns'] for x in lat])} |")
    return "\n".join(lines)


def fmt_destroy(d):
    if not isinstance(d, dict):
        return str(d)
    return f"{d.get('rc')}, {d.get('ms')}"


def fmt_revoke(rev):
    if not rev:
        return "-"
    if rev.get("rc") is None:
        return rev.get("note", "-")
    return f"{rev['rc']}, {rev.get('state')}, {rev.get('ms')}"


def launch(a):
    k = kitlib.Kit(a.kit)
    with open(a.env_json) as f:
        envinfo = json.load(f)
    run_dir = tempfile.mkdtemp(prefix="nccl-probe-", dir=a.out)
    bb_dir = tempfile.mkdtemp(prefix="resilient-gpukit-bb-", dir="/dev/shm")
    base = kitlib.nccl_environment(os.environ, kit=k, log_dir=run_dir)
    base.update({"NCCL_RESILIENT_JOB_TOKEN": secrets.token_hex(16), "NCCL_RESILIENT_BLACKBOX_DIR": bb_dir,
                 "PYTHONUNBUFFERED": "1"})
    t_end = time.monotonic() + a.max_seconds
    argv = [sys.executable, os.path.abspath(__file__), "--worker", "--run-dir", run_dir,
            "--nccl-lib", envinfo["nccl_library"], "--deadline", repr(t_end - 1)]
    problems = []
    t_kill_pair = t_kill_member = None
    with kitlib.Ranks(run_dir) as ranks:
        members = {r: ranks.start(r, argv + ["--role", "member", "--rank", str(r)],
                                  kitlib.rank_environment(base, r), "member") for r in range(MEMBERS)}
        # The pair's numbers differ from the members' (Ranks keys its workers by them).
        probe = ranks.start(PROBE_RANK, argv + ["--role", "probe", "--rank", str(PROBE_RANK)],
                            kitlib.rank_environment(base, 0, host_prefix="probe"), "probe")
        victim = ranks.start(VICTIM_RANK, argv + ["--role", "victim", "--rank", str(VICTIM_RANK)],
                             kitlib.rank_environment(base, 1, host_prefix="probe"), "victim")
        probe_result = os.path.join(run_dir, f"probe-rank{PROBE_RANK}.json")
        if wait_path(probe_result + ".ready", probe, time.monotonic() + a.max_seconds / 2):
            t_kill_pair = time.monotonic()
            os.kill(victim.pid, signal.SIGKILL)
            wait_path(probe_result, probe, time.monotonic() + 10)
            # The probe's last write comes after ncclGroupEnd; give it a moment
            # to exit (a destroy that hangs keeps it: reported from its first write).
            try:
                probe.wait(timeout=3)
            except Exception:
                pass
        else:
            problems.append("(i) the probe pair did not complete its warm-up all-reduces")
        with open(os.path.join(run_dir, "go"), "w"):
            pass
        ready = [os.path.join(run_dir, f"member-rank{r}.json.ready") for r in range(MEMBERS)]
        while time.monotonic() < t_end and not all(os.path.exists(p) for p in ready):
            if any(members[r].poll() is not None and not os.path.exists(ready[r]) for r in range(MEMBERS)):
                break
            time.sleep(0.02)
        if all(os.path.exists(p) for p in ready):
            t_kill_member = time.monotonic()
            os.kill(members[LOST].pid, signal.SIGKILL)
        else:
            problems.append("(ii) the members did not reach the kill (see member-rank*.log)")
        survivors = [r for r in range(MEMBERS) if r != LOST]
        got = ranks.wait_results(t_end, survivors)
        codes = {os.path.basename(path)[:-len(".json")]: p.poll() for _, p, path in ranks.procs}
    probe_out = kitlib.read_json(probe_result)
    more, findings = summarize(probe_out, got, t_kill_pair, t_kill_member)
    problems += more
    report = {"ok": not problems, "problems": problems, "run_dir": run_dir,
              "nccl_version": envinfo.get("nccl_version"), "findings": findings,
              "exit_codes": codes}
    report["table"] = table(findings)
    with open(os.path.join(run_dir, "probe.json"), "w") as f:
        json.dump(report, f, indent=1, default=str)
    with open(os.path.join(run_dir, "probe.md"), "w") as f:
        f.write(f"# NCCL probe (NCCL {envinfo.get('nccl_version')})\n\n" + report["table"] + "\n")
    return report


def parser():
    p = kitlib.step_parser(__doc__.split("\n")[0], 38)
    p.add_argument("--role", choices=("member", "probe", "victim"))
    return p


def main():
    return kitlib.launcher_or_worker(parser(), worker, launch)


if __name__ == "__main__":
    sys.exit(main())
