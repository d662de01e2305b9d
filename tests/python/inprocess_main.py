"""One rank of the jobs of test_inprocess.py: scenarios written against the
reference restarter's documented API (seeds/002, seeds/004,
restart-model.md §1.2), run through ``nccl_resilient.inprocess``.

Environment: RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT (set by the test),
SCENARIO (a function below), OUT_DIR. Writes OUT_DIR/rank-<RANK>.json: how
the Wrapper ended on this rank, what the function saw in each call, the
hooks that ran.
"""

import ctypes
import datetime
import json
import os
import signal
import sys
import threading
import time
from typing import Optional

import nccl_resilient.inprocess as inprocess
from nccl_resilient.inprocess import rank_assignment as ra

RANK = int(os.environ["RANK"])
OUT = os.environ["OUT_DIR"]
calls = []   # one dict per call of the wrapped function
hooks = []   # (hook, iteration) in the order they ran
result = {"rank": RANK, "calls": calls, "hooks": hooks}
seconds = datetime.timedelta


def fast(**extra):
    """Short intervals and timeouts (the reference's tests do the same)."""
    base = dict(monitor_thread_interval=seconds(seconds=0.05),
                monitor_process_interval=seconds(seconds=0.05),
                progress_watchdog_interval=seconds(seconds=0.05),
                heartbeat_interval=seconds(seconds=0.5), heartbeat_timeout=seconds(seconds=3),
                soft_timeout=seconds(seconds=1.5), hard_timeout=seconds(seconds=2.5),
                barrier_timeout=seconds(seconds=20), completion_timeout=seconds(seconds=20),
                termination_grace_time=seconds(seconds=0.5),
                resilient_options=dict(finalize_timeout=5, health_check_timeout=5,
                                       restart_backoff=0.01))
    base.update(extra)
    return base


def record(call_wrapper):
    s = call_wrapper.state
    entry = {"iteration": call_wrapper.iteration, "rank": s.rank, "world_size": s.world_size,
             "active_rank": s.active_rank, "active_world_size": s.active_world_size,
             "initial_rank": s.initial_rank,
             "fn_exception": type(s.fn_exception).__name__ if s.fn_exception else None,
             "env": [os.environ.get("RANK"), os.environ.get("WORLD_SIZE")],
             # CLOCK_MONOTONIC is one clock for every process of the machine:
             # the tests time one rank's interruption from another's event.
             "entered_at": time.monotonic()}
    calls.append(entry)
    return entry


def spin(seconds_=30.0):
    """Pure Python, no library call: only the asynchronous RankShouldRestart
    ends it early."""
    start = time.monotonic()
    try:
        while time.monotonic() - start < seconds_:
            pass
    except inprocess.exception.RankShouldRestart:
        calls[-1]["interrupted_at"] = time.monotonic()
        calls[-1]["interrupted_after_s"] = round(calls[-1]["interrupted_at"] - start, 3)
        raise
    calls[-1]["spun_out"] = True


class Log:
    """A hook that records itself, of the reference's hook classes."""

    def __init__(self, name):
        self.name = name

    def __call__(self, state):
        hooks.append([self.name, state.iteration])
        return state


class LogAbort(Log, inprocess.abort.Abort):
    pass


class LogInitialize(Log, inprocess.initialize.Initialize):
    pass


class LogFinalize(Log, inprocess.finalize.Finalize):
    pass


class LogCompletion(Log, inprocess.completion.Completion):
    pass


class LogTerminate(Log, inprocess.terminate.Terminate):
    pass


# ---- scenarios: each returns (Wrapper, function) -------------------------------

def exception():
    """Rank 1 raises in iteration 0 while the others spin in pure Python;
    rank 0 is inside CallWrapper.atomic() when it happens, writing a file
    the restart must not cut short. Hooks of every kind record themselves;
    the store is named by store_kwargs; the monitor process writes its log
    and pid files."""
    marker = os.path.join(OUT, f"atomic-{RANK}")
    logdir = os.path.join(OUT, "monitor")
    os.makedirs(logdir, exist_ok=True)
    wrapper = inprocess.Wrapper(
        store_kwargs=dict(host_name=os.environ["MASTER_ADDR"],
                          port=int(os.environ["MASTER_PORT"])),
        initialize=LogInitialize("initialize"),
        abort=inprocess.Compose(inprocess.abort.AbortTorchDistributed(), LogAbort("abort")),
        finalize=LogFinalize("finalize"), health_check=None,
        completion=LogCompletion("completion"), terminate=LogTerminate("terminate"),
        monitor_process_logfile=os.path.join(logdir, "monitor-{rank}.log"),
        monitor_process_pidfile=os.path.join(logdir, "monitor-{rank}.pid"),
        **fast())

    @wrapper
    def train(step: int, call_wrapper: Optional[inprocess.CallWrapper] = None):
        entry = record(call_wrapper)
        if call_wrapper.iteration == 1:  # the monitor writes its pid file as it starts
            with open(os.path.join(logdir, f"monitor-{RANK}.pid")) as f:
                entry["monitor_pid"] = int(f.read().split()[0])
        if call_wrapper.iteration == 0:
            if RANK == 1:
                time.sleep(0.5)
                raise ValueError("injected by rank 1")
            if RANK == 0:
                with call_wrapper.atomic():
                    time.sleep(1.0)  # the fault comes meanwhile
                    with open(marker, "w") as f:
                        f.write("whole")
                    entry["atomic_done"] = time.monotonic()
            spin()
        return step * 10 + call_wrapper.iteration

    return wrapper, lambda: train(4)


def sigkill():
    """Rank 2 dies by SIGKILL in iteration 0; the default rank assignment
    (ActivateAllRanks, ShiftRanks) shifts the survivors."""
    wrapper = inprocess.Wrapper(**fast())

    @wrapper
    def train(call_wrapper: inprocess.CallWrapper):
        record(call_wrapper)
        if call_wrapper.iteration == 0:
            if RANK == 2:
                time.sleep(0.3)
                os.kill(os.getpid(), signal.SIGKILL)
            spin()
        return os.environ["RANK"]

    return wrapper, train


def soft_timeout():
    """The automatic and the manual heartbeat (usage guide, Reporting
    progress). Iteration 0: rank 1 waits (GIL released) on an event only
    its Abort sets, running no Python code: no heartbeat, so the soft
    timeout restarts every rank, cooperatively (rank 1 too). Iteration 1:
    every rank computes in pure Python past the soft timeout without a
    ping (the automatic heartbeat keeps it alive), then rank 0 pings once
    and keeps computing without pinging again: the manual heartbeat, armed,
    runs out and the soft timeout restarts. Iteration 2: rank 2 sleeps past
    the soft timeout with hang protection disabled: no restart."""
    release = threading.Event()

    class ReleaseWait(inprocess.abort.Abort):
        def __call__(self, state):
            hooks.append(["abort", state.iteration])
            release.set()
            return state

    wrapper = inprocess.Wrapper(abort=inprocess.Compose(ReleaseWait(),
                                                        inprocess.abort.AbortTorchDistributed()),
                                **fast())

    @wrapper
    def train(call_wrapper: Optional["inprocess.CallWrapper"] = None):
        entry = record(call_wrapper)
        it = call_wrapper.iteration
        if it == 0:
            if RANK == 1:
                start = time.monotonic()
                try:
                    release.wait()
                    spin(10)
                except inprocess.exception.RankShouldRestart:
                    entry["released_at"] = time.monotonic()
                    entry["released_after_s"] = round(entry["released_at"] - start, 3)
                    raise
            spin()
        if it == 1:
            spin(2.5)  # no ping: alive by the automatic heartbeat alone
            if RANK == 0:
                entry["pinged_at"] = time.monotonic()
                call_wrapper.ping()
            spin()
        if RANK == 2:
            with call_wrapper.disable_hang_protection():
                time.sleep(2.5)
        return it

    return wrapper, train


def hard_timeout():
    """Rank 1 holds the GIL in C (libc's sleep through PyDLL) for 60 s: no
    thread of it runs Python code, the soft timeout cannot interrupt it, the
    hard timeout ends it (SIGCONT, SIGTERM, then SIGKILL) and the others go
    on without it."""
    wrapper = inprocess.Wrapper(**fast())

    @wrapper
    def train(call_wrapper: inprocess.CallWrapper):
        record(call_wrapper)
        if call_wrapper.iteration == 0:
            if RANK == 1:
                with open(os.path.join(OUT, "silent-at-1"), "w") as f:
                    f.write(repr(time.monotonic()))  # no Python code from here on
                time.sleep(0.2)
                ctypes.PyDLL(None).sleep(60)
            spin()
        return call_wrapper.iteration

    return wrapper, train


class Unfit(Exception):
    pass


def health_check():
    """Rank 1 raises in iteration 0; at the restart its FaultCounter
    (max_rank_faults=0) fails, and rank 2's own health check fails: both
    Wrappers re-raise, the others go on."""
    runs = []

    class Rank2Check(inprocess.health_check.HealthCheck):
        def __call__(self, state):
            runs.append(state.iteration)
            if RANK == 2 and len(runs) == 2:  # the check at the restart
                raise Unfit("rank 2 is unfit")
            return state

    wrapper = inprocess.Wrapper(
        health_check=inprocess.Compose(inprocess.health_check.CudaHealthCheck(),
                                       inprocess.health_check.FaultCounter(max_rank_faults=0),
                                       Rank2Check()),
        terminate=LogTerminate("terminate"), **fast())

    @wrapper
    def train(call_wrapper: inprocess.CallWrapper):
        record(call_wrapper)
        if call_wrapper.iteration == 0:
            if RANK == 1:
                time.sleep(0.3)
                raise ValueError("injected by rank 1")
            spin()
        return call_wrapper.state.active_world_size

    return wrapper, train


def tree_reserve():
    """Two 'hosts' of two ranks (key: initial rank // 2), one active rank
    per host, the other a reserve (LayerFlag.RESERVE): initial ranks 0 and 2
    compute, 1 and 3 wait. Initial rank 2 dies: the reserve of its host,
    initial rank 3, takes its place and rank."""
    tree = ra.Tree([
        ra.Layer(min_ranks=1, key_or_fn="root", flag=ra.LayerFlag.RESERVE),
        ra.Layer(min_ranks=1, max_ranks=1, key_or_fn=lambda state: f"host{state.rank // 2}",
                 flag=ra.LayerFlag.RESERVE),
    ])
    wrapper = inprocess.Wrapper(rank_assignment=tree, **fast())

    @wrapper
    def train(call_wrapper: inprocess.CallWrapper):
        record(call_wrapper)
        if call_wrapper.iteration == 0:
            if RANK == 2:
                time.sleep(0.3)
                os.kill(os.getpid(), signal.SIGKILL)
            spin()
        return call_wrapper.state.active_rank

    return wrapper, train


def filter_count():
    """Pairs of ranks (key: rank // 2) must stay whole (count == 2):
    initial rank 3 dies, so its partner, initial rank 2, is discarded
    (RankDiscarded) and the first pair goes on (seeds/002, seeds/004)."""
    wrapper = inprocess.Wrapper(
        rank_assignment=inprocess.Compose(
            ra.ActivateAllRanks(), ra.ShiftRanks(),
            ra.FilterCountGroupedByKey(key_or_fn=lambda state: str(state.rank // 2),
                                       condition=lambda count: count == 2,
                                       timeout=seconds(seconds=10))),
        **fast())

    @wrapper
    def train(call_wrapper: inprocess.CallWrapper):
        record(call_wrapper)
        if call_wrapper.iteration == 0:
            if RANK == 3:
                time.sleep(0.3)
                os.kill(os.getpid(), signal.SIGKILL)
            spin()
        return call_wrapper.state.world_size

    return wrapper, train


def nested():
    """The nested restarter's hooks: rank 1 raises in iteration 0 (handling
    starts, then completes), rank 2 exits (SystemExit) in iteration 1 (its
    Wrapper ends: aborted), the others complete (finalized)."""
    nr_ = inprocess.nested_restarter
    wrapper = inprocess.Wrapper(
        initialize=inprocess.Compose(nr_.NestedRestarterHandlingCompleted(),
                                     inprocess.initialize.RetryController(max_iterations=5)),
        abort=inprocess.Compose(inprocess.abort.AbortTorchDistributed(),
                                nr_.NestedRestarterHandlingStarting()),
        completion=nr_.NestedRestarterFinalized(), terminate=nr_.NestedRestarterAborted(),
        **fast())

    @wrapper
    def train(call_wrapper: inprocess.CallWrapper):
        record(call_wrapper)
        it = call_wrapper.iteration
        if it == 0 and RANK == 1:
            time.sleep(0.3)
            raise ValueError("injected by rank 1")
        if it == 1 and RANK == 2:
            time.sleep(0.3)
            sys.exit(3)
        if it < 2:
            spin()
        return it

    return wrapper, train


def retry_limit():
    """A fault in every iteration: RetryController(max_iterations=2) raises
    RestartAbort in iteration 2's initialize, on every rank."""
    wrapper = inprocess.Wrapper(initialize=inprocess.initialize.RetryController(max_iterations=2),
                                terminate=LogTerminate("terminate"), **fast())

    @wrapper
    def train(call_wrapper: inprocess.CallWrapper):
        record(call_wrapper)
        if RANK == 0:
            time.sleep(0.2)
            raise ValueError(f"injected in iteration {call_wrapper.iteration}")
        spin()

    return wrapper, train


def base_exception():
    """Rank 1 raises RestartAbort (a BaseException) in iteration 0: its
    Wrapper ends with it; the others restart without it (restart-model.md
    §1.1, step 5)."""
    wrapper = inprocess.Wrapper(terminate=LogTerminate("terminate"), **fast())

    @wrapper
    def train(call_wrapper: inprocess.CallWrapper):
        record(call_wrapper)
        if call_wrapper.iteration == 0:
            if RANK == 1:
                time.sleep(0.3)
                raise inprocess.exception.RestartAbort("rank 1 gives up")
            spin()
        return call_wrapper.state.world_size

    return wrapper, train


def finalize():
    """Rank 1 raises in iteration 0; at the restart its ThreadedFinalize
    overruns its timeout (TimeoutError, re-raised by its Wrapper) while the
    others' finalize completes: they go on without it."""
    def slow():
        if RANK == 1:
            time.sleep(5)
        hooks.append(["finalize", 0])

    wrapper = inprocess.Wrapper(
        finalize=inprocess.finalize.ThreadedFinalize(timeout=seconds(seconds=1), fn=slow),
        **fast())

    @wrapper
    def train(call_wrapper: inprocess.CallWrapper):
        record(call_wrapper)
        if call_wrapper.iteration == 0:
            if RANK == 1:
                time.sleep(0.3)
                raise ValueError("injected by rank 1")
            spin()
        return call_wrapper.state.world_size

    return wrapper, train


class HighestRankSpare(ra.RankFilter):
    """A RankFilter of the user's: the highest rank waits as a reserve."""

    def __call__(self, ctx):
        if ctx.state.rank == ctx.state.world_size - 1:
            ctx.state.mode = inprocess.Mode.INACTIVE
        return ctx


def custom_assignment():
    """A RankFilter of the user's after the stock ones; MaxActiveWorldSize
    through the deprecated rank_filter argument. Four ranks: initial 3 is a
    reserve; initial 1 dies; then 0, 2 (shifted to 1) compute and 3
    (shifted to 2) is still the reserve."""
    with __import__("warnings").catch_warnings(record=True) as caught:
        __import__("warnings").simplefilter("always")
        wrapper = inprocess.Wrapper(
            rank_assignment=inprocess.Compose(HighestRankSpare(), ra.ActivateAllRanks(),
                                              ra.ShiftRanks()),
            rank_filter=ra.MaxActiveWorldSize(3), **fast())
    result["deprecation"] = [str(w.message) for w in caught
                             if issubclass(w.category, DeprecationWarning)]

    @wrapper
    def train(call_wrapper: inprocess.CallWrapper):
        record(call_wrapper)
        if call_wrapper.iteration == 0:
            if RANK == 1:
                time.sleep(0.3)
                os.kill(os.getpid(), signal.SIGKILL)
            spin()
        return call_wrapper.state.active_rank

    return wrapper, train


def main():
    if os.environ.get("DEBUG_DUMP") and RANK == 1:
        import faulthandler
        faulthandler.dump_traceback_later(float(os.environ["DEBUG_DUMP"]), exit=False)
    scenario = globals()[os.environ["SCENARIO"]]
    result.update(outcome="error", message="")
    try:
        wrapper, fn = scenario()
        result["returned"] = fn()
        result["outcome"] = "completed"
    except BaseException as e:  # every way the Wrapper can end, recorded
        result.update(outcome=type(e).__name__, message=str(e))
    path = os.path.join(OUT, f"rank-{RANK}.json")
    with open(path + ".tmp", "w") as f:
        json.dump(result, f)
    os.replace(path + ".tmp", path)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
