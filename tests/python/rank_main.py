"""One rank of the Python package's test jobs (test_wrapper.py starts them).

Environment: RANK, WORLD_SIZE, NCCL_RESILIENT_STORE_URL (set by the test),
SCENARIO (a function below), OUT_DIR. Writes OUT_DIR/rank-<RANK>.json:
outcome, exception text, the calls it saw, the timeline's phases.
"""

import json
import os
import signal
import sys
import threading
import time

import nccl_resilient as nr

RANK = int(os.environ["RANK"])
OUT = os.environ["OUT_DIR"]
calls = []  # one dict per call of the wrapped function


def busy_until_interrupted(ctx, seconds=30.0):
    """A pure-Python loop that makes no library call: only the asynchronous
    interruption can end it early."""
    start = time.monotonic()
    try:
        n = 0
        while time.monotonic() - start < seconds:
            n += 1
    except nr.RankShouldRestart:
        calls[-1]["interrupted_after_s"] = time.monotonic() - start
        raise
    calls[-1]["busy_timed_out"] = True


def record(ctx):
    s = ctx.state
    calls.append({"iteration": s.iteration, "rank": s.rank, "active_rank": s.active_rank,
                  "active_world_size": s.active_world_size, "mode": s.mode.name,
                  "fn_exception": type(s.fn_exception).__name__ if s.fn_exception else None,
                  "env_rank": os.environ.get("RANK"), "env_world": os.environ.get("WORLD_SIZE")})
    return s


def fast_options(**extra):
    base = dict(monitor_thread_interval=0.05, monitor_process_interval=0.05,
                progress_watchdog_interval=0.05, soft_timeout=1.5, hard_timeout=2.5,
                heartbeat_interval=0.5, heartbeat_timeout=3, barrier_timeout=20,
                completion_timeout=20, termination_grace_time=0.5,
                finalize_timeout=5, health_check_timeout=5, communicator_timeout=10,
                restart_backoff=0.01)
    base.update(extra)
    return base


def fault_in_first_call(culprit, fault, others=None):
    """The wrapped function: in iteration 0 initial rank `culprit` runs
    `fault()` 0.3 s in, while the others run `others(ctx)` (default: spin in
    pure Python until interrupted); later calls return the iteration."""
    def fn(ctx: nr.CallContext):
        s = record(ctx)
        ctx.ping()
        if s.iteration == 0:
            if s.initial_rank == culprit:
                time.sleep(0.3)
                fault()
            (others or busy_until_interrupted)(ctx)
        return s.iteration
    return fn


def raise_value_error(rank):
    def fault():
        raise ValueError(f"injected by rank {rank}")
    return fault


# ---- scenarios: each returns (Wrapper, function) ----------------------------

def exception():
    """Rank 1 raises in iteration 0 while the others spin in pure Python."""
    return nr.Wrapper(**fast_options()), fault_in_first_call(1, raise_value_error(1))


def sigkill():
    """Initial rank 2 dies by SIGKILL in iteration 0; the spare (initial 3) takes its place."""
    fn = fault_in_first_call(2, lambda: os.kill(os.getpid(), signal.SIGKILL))
    policies = [nr.MaxActiveWorldSize(3), nr.ActivateAllRanks(), nr.ShiftRanks()]
    return nr.Wrapper(rank_assignment=policies, **fast_options()), fn


def sigstop():
    """Initial rank 1 freezes (SIGSTOP) in iteration 0 after its first ping:
    its monitor's liveness link finds it silent (NCCL_RESILIENT_LIVENESS_TIMEOUT_MS,
    1 s) before the soft timeout (1.5 s) and kills it (SIGKILL)."""
    def alive_and_showing_it(ctx):
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            ctx.ping()
            time.sleep(0.01)
    fn = fault_in_first_call(1, lambda: os.kill(os.getpid(), signal.SIGSTOP),
                             alive_and_showing_it)
    return nr.Wrapper(**fast_options()), fn


def unfit_rank_1(error):
    """Initial rank 1's health check raises `error` in iteration 0: it leaves;
    the spare becomes active."""
    def health(state: nr.State):
        if state.initial_rank == 1 and state.iteration == 0:
            raise error

    def fn(ctx: nr.CallContext):
        s = record(ctx)
        return s.iteration
    policies = [nr.MaxActiveWorldSize(3), nr.ActivateAllRanks(), nr.ShiftRanks()]
    return nr.Wrapper(rank_assignment=policies, health_check=health, **fast_options()), fn


def health_check_fault():
    """Rank 1 is unfit: terminated, it leaves (RankDiscarded)."""
    return unfit_rank_1(nr.HealthCheckError("injected: rank 1 is unfit"))


def needs_new_process():
    """Rank 1's GPU is unusable in this process (RankNeedsNewProcess): it
    leaves for a new process (under resilient-run,
    NCCL_RESILIENT_RESTART_EXIT_FOR_NEW_PROCESS=1: exit 75)."""
    return unfit_rank_1(nr.RankNeedsNewProcess("injected: rank 1's CUDA context is poisoned"))


def abort_hook_fault():
    """Rank 0 raises in iteration 0; every abort hook raises too: the restart
    happens all the same (the interruption still follows the hook)."""
    def abort(state: nr.State):
        raise RuntimeError("injected: abort hook failure")
    return nr.Wrapper(abort=abort, **fast_options()), fault_in_first_call(0, raise_value_error(0))


def abort_completes_the_collective():
    """Rank 1 raises in iteration 0 while the others wait for a 'collective'
    that only the abort completes, as ncclCommAbort completes a torch work
    whose buffer is then half summed (the package's settings make torch raise
    nothing). The abort hook completes it and then takes its time, as NCCL's
    abort does (0.5 s on the GPU machine). A rank must never use the result:
    RankShouldRestart must reach it first."""
    import threading
    done = threading.Event()

    def abort(state: nr.State):
        done.set()        # the collective's work completes, with partial sums
        time.sleep(0.5)   # the rest of the abort

    def wait_for_the_collective(ctx):
        while not done.is_set():  # rdist.wait's polling loop
            time.sleep(0.0002)
        calls[-1]["used_a_result_of_the_abort"] = True
        busy_until_interrupted(ctx)
    return (nr.Wrapper(abort=abort, **fast_options()),
            fault_in_first_call(1, raise_value_error(1), wait_for_the_collective))


def initialize_abort():
    """The initialize hook raises RestartAbort in iteration 1: the job ends on every rank."""
    def initialize(state: nr.State):
        if state.iteration == 1:
            raise nr.RestartAbort("injected: stop at iteration 1")

    def fn(ctx: nr.CallContext):
        s = record(ctx)
        if s.initial_rank == 0:
            raise ValueError("injected: rank 0 always fails")
        busy_until_interrupted(ctx)
    return nr.Wrapper(initialize=initialize, **fast_options()), fn


def interrupt_before_entry(where):
    """Rank 0 raises at once in iteration 0; rank 1 reaches its function only
    after its interrupt hook has run, held in `where` ("initialize": its
    initialize hook; "enter": between the library's call and the function).
    A CI run had such a rank spin on, uninterrupted, until its hard timeout
    killed it: the function must not run in that iteration."""
    wrapper = nr.Wrapper(initialize=lambda state: hold(state), **fast_options())
    interrupted = threading.Event()
    interrupter = wrapper._interrupter
    interrupt, enter = interrupter.interrupt, interrupter.enter

    def interrupt_seen():
        interrupted.set()
        return interrupt()

    def held(state_iteration):
        return RANK == 1 and state_iteration == 0 and not interrupted.wait(20)

    def hold(state):
        if where == "initialize" and held(state.iteration):
            raise RuntimeError("rank 1's restart never began")

    def late_enter():
        if where == "enter" and not calls and held(0):
            raise RuntimeError("rank 1's restart never began")
        enter()

    interrupter.interrupt, interrupter.enter = interrupt_seen, late_enter

    def fn(ctx: nr.CallContext):
        s = record(ctx)
        if s.iteration == 0:
            if s.initial_rank == 0:
                raise ValueError("injected: rank 0 fails at once")
            busy_until_interrupted(ctx)
        return s.iteration
    return wrapper, fn


def interrupt_before_initialize_returns():
    return interrupt_before_entry("initialize")


def interrupt_before_function_starts():
    return interrupt_before_entry("enter")


def retry_limit():
    """A fault in every iteration; max_iterations=3 ends the job."""
    def fn(ctx: nr.CallContext):
        s = record(ctx)
        if s.initial_rank == 0:
            time.sleep(0.1)
            raise ValueError(f"injected: iteration {s.iteration}")
        busy_until_interrupted(ctx)
    return nr.Wrapper(max_iterations=3, **fast_options()), fn


class LastRankSpare(nr.Policy):
    """A Python policy: the highest live initial rank is a spare."""

    def __call__(self, world, terminated, first_iteration):
        live = [s for s in world if s.mode != nr.Mode.TERMINATED]
        for s in live:
            s.mode = nr.Mode.ACTIVE
        live[-1].mode = nr.Mode.INACTIVE


def python_policy():
    def fn(ctx: nr.CallContext):
        s = record(ctx)
        return s.active_rank
    return nr.Wrapper(rank_assignment=[LastRankSpare()], **fast_options()), fn


def torch_restart():
    """A gloo process group per iteration: in iteration 0 initial rank 1
    raises while rank 0 waits in an all_reduce that cannot complete (gloo has
    no abort): the interruptible wait releases it; iteration 1's group (new
    store prefix, the old group retired) sums correctly."""
    import torch
    import torch.distributed as dist
    from nccl_resilient import distributed as rdist

    def fn(ctx: nr.CallContext):
        s = record(ctx)
        rdist.init_process_group(ctx, "gloo")
        t = torch.full((4,), float(s.active_rank + 1))
        if s.iteration == 0:
            if s.initial_rank == 1:
                time.sleep(0.3)
                raise ValueError("injected by rank 1")
            start = time.monotonic()
            try:
                rdist.wait(dist.all_reduce(t, async_op=True))
            except nr.RankShouldRestart:
                calls[-1]["interrupted_after_s"] = time.monotonic() - start
                raise
        rdist.wait(dist.all_reduce(t, async_op=True))
        return t.tolist()
    return nr.Wrapper(abort=__import__("nccl_resilient.distributed").distributed
                      .AbortTorchDistributed(), **fast_options()), fn


def torch_stuck(how):
    """A gloo group; at its 4th all_reduce initial rank 1 does not come for
    5 s: it spins in pure Python ("busy") or sleeps in C holding the GIL
    ("gil": libc's sleep through ctypes.PyDLL, which keeps the GIL). The
    others wait in the all_reduce. The stuck-rank comparison (timeout 1.5 s
    by the test's environment) must name rank 1; its monitor's liveness link
    must not take it for frozen (its answering thread is native); the job
    completes."""
    import ctypes

    import torch
    import torch.distributed as dist
    from nccl_resilient import distributed as rdist

    def fn(ctx: nr.CallContext):
        s = record(ctx)
        rdist.init_process_group(ctx, "gloo")
        t = torch.ones(4)
        for step in range(6):
            if s.iteration == 0 and step == 3 and s.initial_rank == 1:
                if how == "busy":
                    end = time.monotonic() + 5
                    while time.monotonic() < end:
                        pass
                else:
                    ctypes.PyDLL(None).sleep(5)
            rdist.wait(dist.all_reduce(t, async_op=True), op="all_reduce")
            ctx.ping()
        return t.tolist()
    return nr.Wrapper(abort=__import__("nccl_resilient.distributed").distributed
                      .AbortTorchDistributed(),
                      **fast_options(soft_timeout=20, hard_timeout=30, barrier_timeout=60,
                                     completion_timeout=60)), fn


def torch_stuck_busy():
    return torch_stuck("busy")


def torch_stuck_gil():
    return torch_stuck("gil")


def main():
    scenario = globals()[os.environ["SCENARIO"]]
    result = {"rank": RANK, "outcome": "error", "message": "", "calls": calls}
    wrapper = None
    try:
        wrapper, fn = scenario()
        result["returned"] = wrapper.run(fn)
        result["outcome"] = "completed"
    except nr.RankDiscarded as e:
        result.update(outcome="discarded", message=str(e))
    except nr.RestartAbort as e:
        result.update(outcome="aborted", message=str(e))
    except nr.RankNeedsNewProcess as e:
        result.update(outcome="needs_new_process", message=str(e))
    except nr.HealthCheckError as e:
        result.update(outcome="unhealthy", message=str(e))
    except Exception as e:
        result.update(outcome="error", message=f"{type(e).__name__}: {e}")
    if wrapper is not None:
        result["final_state"] = wrapper.state.describe()
        result["phases"] = [(e["iteration"], e["phase"]) for e in wrapper.timeline()]
    path = os.path.join(OUT, f"rank-{RANK}.json")
    with open(path + ".tmp", "w") as f:
        json.dump(result, f)
    os.replace(path + ".tmp", path)
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
