"""nccl_resilient.inprocess in one process: every public name of the
reference restarter (restart-model.md §1.2, seeds/002, seeds/004), its
documented arguments and defaults, hooks, stores, Compose, states,
exceptions and rank assignment (each policy on one rank's context as the
reference documents it, against the library's policies over the whole
World; the documented examples simulated with ranks as threads over one
store); single-process Wrapper runs. Whole jobs: test_inprocess_jobs.py and
test_inprocess_train.py."""

from __future__ import annotations

import datetime
import inspect
import io
import logging
import os
import random
import sys
import threading
import types
import warnings
from typing import Optional

import pytest

import nccl_resilient as nr
import nccl_resilient.inprocess as inprocess
from nccl_resilient import assignment as native
from nccl_resilient.errors import ConfigError
from nccl_resilient.inprocess import rank_assignment as ra
from nccl_resilient.inprocess._exchange import Binding
from nccl_resilient.inprocess.state import FrozenState, Mode, State

td = datetime.timedelta


def frozen(iteration=0, rank=0, world=4, active=None, mode=Mode.ACTIVE, fn_failed=False):
    active = world if active is None else active
    return FrozenState(rank, world, rank, world, rank, active, iteration, mode, fn_failed)


# ---- the Wrapper's arguments ---------------------------------------------------

def test_wrapper_arguments_and_defaults_are_the_references():
    params = inspect.signature(inprocess.Wrapper).parameters
    assert all(p.kind == p.KEYWORD_ONLY for p in params.values())
    expected = dict(
        monitor_thread_interval=td(seconds=1), monitor_process_interval=td(seconds=1),
        heartbeat_interval=td(seconds=1), progress_watchdog_interval=td(seconds=1),
        soft_timeout=td(seconds=60), hard_timeout=td(seconds=90),
        heartbeat_timeout=td(seconds=30), barrier_timeout=td(seconds=120),
        completion_timeout=td(seconds=120), last_call_wait=td(seconds=1),
        termination_grace_time=td(seconds=5), monitor_process_logfile=None,
        monitor_process_pidfile=None, enabled=True, completion=None, terminate=None,
        initialize=None, finalize=None, health_check=None, store_kwargs=None)
    for name, default in expected.items():
        assert params[name].default == default, name
    assert params["store_factory"].default is inprocess.store.TCPStore
    w = inprocess.Wrapper()
    assert isinstance(w.abort, inprocess.abort.AbortTorchDistributed)
    assert [type(p) for p in w.rank_assignment.flatten()] == [ra.ActivateAllRanks, ra.ShiftRanks]
    assert w._options["soft_timeout"] == 60 and w._options["hard_timeout"] == 90
    assert w._options["terminate_culprits"] is False


def test_durations_take_timedeltas_or_seconds_and_knobs_when_not_given(monkeypatch):
    w = inprocess.Wrapper(soft_timeout=td(seconds=2), hard_timeout=3)
    assert (w._options["soft_timeout"], w._options["hard_timeout"]) == (2, 3)
    monkeypatch.setenv("NCCL_RESILIENT_RESTART_SOFT_TIMEOUT_MS", "45000")
    assert "soft_timeout" not in inprocess.Wrapper()._options  # the knob's, not 60 s
    assert inprocess.Wrapper(soft_timeout=td(seconds=50))._options["soft_timeout"] == 50


@pytest.mark.parametrize("kwargs, words", [
    (dict(soft_timeout=td(seconds=95)), "softTimeout"),
    (dict(hard_timeout=td(seconds=200)), "barrierTimeout"),
    (dict(heartbeat_interval=td(seconds=40)), "heartbeat"),
    (dict(monitor_process_interval=td(seconds=70)), "monitorProcessInterval"),
    (dict(last_call_wait=td(seconds=-1)), "last_call_wait"),
    (dict(soft_timeout="soon"), "soft_timeout"),
    (dict(store_factory=dict), "StoreMixin"),
    (dict(initialize=3), "not callable"),
    (dict(resilient_options={"rank": 2}), "resilient_options"),
    (dict(resilient_options={"no_such_option": 1}), "no option"),
])
def test_bad_arguments_are_refused_at_construction(kwargs, words):
    with pytest.raises(ConfigError, match=words):
        inprocess.Wrapper(**kwargs)


# ---- stores --------------------------------------------------------------------

def test_tcp_store_follows_the_references_rules(monkeypatch):
    monkeypatch.delenv("NCCL_RESILIENT_STORE_URL", raising=False)
    monkeypatch.setenv("MASTER_ADDR", "10.1.2.3")
    monkeypatch.setenv("MASTER_PORT", "29500")
    monkeypatch.setenv("WORLD_SIZE", "16")
    s = inprocess.store.TCPStore()
    assert (s.resilient_url, s.hosts, s.world_size) == ("tcp://10.1.2.3:29500", True, 16)
    assert s.timeout == td(seconds=300) and s.wait_for_workers and s.use_libuv
    s = inprocess.store.TCPStore(host_name="h", port=1234, world_size=2, timeout=td(seconds=9))
    assert (s.resilient_url, s.world_size, s.timeout) == ("tcp://h:1234", 2, td(seconds=9))
    with pytest.raises(ConfigError, match="multi_tenant"):
        inprocess.store.TCPStore(multi_tenant=True)
    with pytest.raises(ConfigError, match="not a TCP port"):
        inprocess.store.TCPStore(port=70000)
    monkeypatch.delenv("MASTER_ADDR")
    with pytest.raises(ConfigError, match="MASTER_ADDR"):
        inprocess.store.TCPStore()
    # Beyond the reference: a store of the library's named in the
    # environment is used when no address is given.
    monkeypatch.setenv("NCCL_RESILIENT_STORE_URL", "etcd://a:2379,b:2379")
    s = inprocess.store.TCPStore()
    assert (s.resilient_url, s.hosts) == ("etcd://a:2379,b:2379", False)


def test_file_store_and_unknown_stores_are_refused():
    with pytest.raises(ConfigError, match="no file store"):
        inprocess.store.FileStore("/tmp/x", 2)

    class TorchLike:
        pass
    with pytest.raises(ConfigError, match="StoreMixin"):
        inprocess.Wrapper(store_factory=TorchLike)


def test_store_calls_of_torch_over_the_librarys_store():
    s = inprocess.store.ResilientStore("memory", timeout=td(seconds=2))
    s.set("a", "1")
    assert s.get("a") == b"1"
    assert s.add("n", 5) == 5 and s.add("n", 2) == 7
    assert s.check(["a", "n"]) and not s.check(["missing"])
    assert s.compare_set("c", "", "x") == b"x"      # absent: stored
    assert s.compare_set("c", "y", "z") == b"x"     # mismatch: the value in place
    assert s.compare_set("c", "x", "z") == b"z"
    s.multi_set(["k1", "k2"], [b"v1", b"v2"])
    assert s.multi_get(["k1", "k2"]) == [b"v1", b"v2"]
    view = s.prefixed("iteration-1")
    view.set("a", "inner")
    assert view.get("a") == b"inner" and s.get("a") == b"1"
    assert s.get("iteration-1/a") == b"inner"
    assert s.delete_key("a") and not s.check(["a"])
    with pytest.raises(inprocess.exception.TimeoutError):
        s.wait(["never"], td(seconds=0.1))



def test_resilient_store_needs_a_url(monkeypatch):
    monkeypatch.delenv("NCCL_RESILIENT_STORE_URL", raising=False)
    with pytest.raises(ConfigError, match="no URL"):
        inprocess.store.ResilientStore()
    monkeypatch.setenv("NCCL_RESILIENT_STORE_URL", "tcp://h:1")
    assert inprocess.store.ResilientStore().resilient_url == "tcp://h:1"


# ---- Compose, state, exceptions --------------------------------------------------

def test_compose_is_function_composition_and_keeps_the_common_base():
    order = []

    class A(inprocess.abort.Abort):
        def __init__(self, name):
            self.name = name

        def __call__(self, state):
            order.append(self.name)
            return state

    c = inprocess.Compose(A("first listed"), A("last listed"))
    assert isinstance(c, inprocess.abort.Abort) and isinstance(c, inprocess.compose.Compose)
    assert c(frozen()) == frozen() and order == ["last listed", "first listed"]
    # A result feeds the next; None passes the input on.
    f = inprocess.Compose(lambda x: x * 10, lambda x: None, lambda x: x + 1)
    assert f(1) == 20
    nested = inprocess.Compose(ra.ShiftRanks(), inprocess.Compose(ra.FillGaps(),
                                                                  ra.ActivateAllRanks()))
    assert isinstance(nested, ra.RankAssignment)
    assert [type(p) for p in nested.flatten()] == [ra.ShiftRanks, ra.FillGaps,
                                                   ra.ActivateAllRanks]
    assert isinstance(inprocess.Compose(ra.MaxActiveWorldSize(2), ra.ActivateAllRanks()),
                      ra.RankFilter)
    with pytest.raises(TypeError):
        inprocess.Compose()
    with pytest.raises(TypeError):
        inprocess.Compose(1)


def test_state_frozen_state_mode_and_set_distributed_vars(monkeypatch):
    assert [m.name for m in Mode] == ["ACTIVE", "INACTIVE", "TERMINATED", "INITIALIZED"]
    assert inprocess.Mode is Mode and inprocess.FrozenState is nr.State
    s = State(rank=2, world_size=4, active_rank=1, active_world_size=3, initial_rank=5,
              initial_world_size=8, iteration=3, mode=Mode.ACTIVE)
    f = s.freeze()
    assert (f.rank, f.world_size, f.active_rank, f.active_world_size, f.initial_rank,
            f.initial_world_size, f.iteration, f.mode) == (2, 4, 1, 3, 5, 8, 3, Mode.ACTIVE)
    with pytest.raises(Exception):
        f.rank = 1  # frozen
    assert State.from_frozen(f) == s
    monkeypatch.setenv("RANK", "9")
    s.set_distributed_vars()
    assert (os.environ["RANK"], os.environ["WORLD_SIZE"]) == ("1", "3")
    s.mode = Mode.INACTIVE
    os.environ["RANK"] = "9"
    s.set_distributed_vars()
    assert os.environ["RANK"] == "9"  # a reserve's environment is left alone


def test_exceptions():
    e = inprocess.exception
    assert issubclass(e.RestartAbort, BaseException) and not issubclass(e.RestartAbort, Exception)
    assert issubclass(e.RankShouldRestart, BaseException)
    assert not issubclass(e.RankShouldRestart, Exception)
    for cls in (e.HealthCheckError, e.InternalError, e.TimeoutError, ra.RankDiscarded,
                inprocess.store.BarrierError):
        assert issubclass(cls, e.RestartError) and issubclass(cls, Exception), cls
    assert issubclass(inprocess.store.BarrierTimeout, inprocess.store.BarrierError)
    assert issubclass(inprocess.store.BarrierOverflow, inprocess.store.BarrierError)
    assert issubclass(inprocess.health_check.FaultCounterExceeded, e.HealthCheckError)


# ---- hooks -----------------------------------------------------------------------

def test_retry_controller():
    rc = inprocess.initialize.RetryController(max_iterations=3, min_world_size=2,
                                              min_active_world_size=2)
    assert isinstance(rc, inprocess.initialize.Initialize)
    assert rc(frozen(iteration=2)) == frozen(iteration=2)
    with pytest.raises(inprocess.exception.RestartAbort, match="maxIterations 3"):
        rc(frozen(iteration=3))
    with pytest.raises(inprocess.exception.RestartAbort, match="minWorldSize 2"):
        rc(frozen(world=1, active=1))
    with pytest.raises(inprocess.exception.RestartAbort, match="minActiveWorldSize 2"):
        rc(frozen(world=4, active=1))
    unlimited = inprocess.initialize.RetryController()
    assert unlimited(frozen(iteration=10 ** 6, world=1, active=1))
    with pytest.raises(ConfigError):
        inprocess.initialize.RetryController(max_iterations=0)


def test_health_checks():
    hc = inprocess.health_check
    assert hc.CudaHealthCheck().timeout == td(seconds=30)
    # No CUDA initialized by torch in this process: nothing queued, passes.
    assert hc.CudaHealthCheck(td(seconds=1))(frozen()) == frozen()
    counter = hc.FaultCounter(max_rank_faults=1)
    counter(frozen(iteration=1, fn_failed=True))
    with pytest.raises(hc.FaultCounterExceeded, match="maxRankFaults 1"):
        counter(frozen(iteration=2, fn_failed=True))
    never = hc.FaultCounter()
    for i in range(1, 20):
        never(frozen(iteration=i, fn_failed=True))
    assert hc.ChainedNicHealthCheck()(frozen()) == frozen()
    nvl = hc.ChainedNVLHealthCheck()
    assert nvl(frozen()) == frozen()  # reported, never failing
    gpu = hc.ChainedGPUHealthCheck()
    if nvl.last and "libnvidia-ml" in nvl.last:  # this machine has no NVML
        with pytest.raises(inprocess.exception.HealthCheckError, match="libnvidia-ml"):
            gpu(frozen())
    for cls in (hc.CudaHealthCheck, hc.FaultCounter, hc.ChainedGPUHealthCheck,
                hc.ChainedNVLHealthCheck, hc.ChainedNicHealthCheck):
        assert issubclass(cls, hc.HealthCheck)


def test_threaded_finalize():
    fin = inprocess.finalize
    got = []
    f = fin.ThreadedFinalize(timeout=td(seconds=2), fn=lambda a, b=0: got.append((a, b)),
                             args=(1,), kwargs={"b": 2})
    assert isinstance(f, fin.Finalize) and f(frozen()) == frozen() and got == [(1, 2)]
    slow = fin.ThreadedFinalize(timeout=td(seconds=0.2), fn=lambda: threading.Event().wait(3))
    with pytest.raises(inprocess.exception.TimeoutError):
        slow(frozen())
    with pytest.raises(KeyError):
        fin.ThreadedFinalize(timeout=td(seconds=2), fn=lambda: {}["x"])(frozen())


def test_abort_torch_distributed_forgets_the_groups_and_dumps_the_flight_recorder(
        tmp_path, monkeypatch):
    import torch
    import torch.distributed as dist
    abort = inprocess.abort.AbortTorchDistributed()
    assert abort(frozen()) == frozen()  # no group: nothing to do
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    assert dist.is_initialized()
    abort(frozen())
    assert not dist.is_initialized()  # the next iteration may initialize again
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    # The Flight Recorder: torch 1.13 has none, so a path is refused ...
    c10d = torch._C._distributed_c10d
    if not hasattr(c10d, "_dump_nccl_trace"):
        with pytest.raises(ConfigError, match="Flight Recorder"):
            inprocess.abort.AbortTorchDistributed(torch_fr_trace_path=str(tmp_path))
        monkeypatch.setattr(c10d, "_dump_nccl_trace", lambda: b"trace", raising=False)
    # ... and where torch has it, the dump goes to the path ({rank}) when a
    # buffer is configured.
    monkeypatch.setenv("TORCH_NCCL_TRACE_BUFFER_SIZE", "100")
    with_trace = inprocess.abort.AbortTorchDistributed(
        torch_fr_trace_path=str(tmp_path / "fr-{rank}.bin"))
    with_trace(frozen(rank=3))
    assert (tmp_path / "fr-3.bin").read_bytes() == c10d._dump_nccl_trace()
    assert not dist.is_initialized()


def test_abort_transformer_engine_and_the_refused_checkpoint_abort(monkeypatch):
    te = inprocess.abort.AbortTransformerEngine()
    assert te(frozen()) == frozen()  # no Transformer Engine in the process
    called = []
    pytorch = types.ModuleType("transformer_engine.pytorch")
    pytorch.module = types.SimpleNamespace(
        base=types.SimpleNamespace(destroy_ub=lambda: called.append("destroy_ub")))
    pytorch.fp8 = types.SimpleNamespace(FP8GlobalStateManager=types.SimpleNamespace(
        reset=lambda: called.append("reset")))
    package = types.ModuleType("transformer_engine")
    package.pytorch = pytorch
    monkeypatch.setitem(sys.modules, "transformer_engine", package)
    monkeypatch.setitem(sys.modules, "transformer_engine.pytorch", pytorch)
    te(frozen())
    assert called == ["destroy_ub", "reset"]
    with pytest.raises(ConfigError, match="asynchronous checkpointing"):
        inprocess.abort.AbortPersistentCheckpointProcesses()


def test_nested_restarter_hooks_log_their_state_lines():
    n = inprocess.nested_restarter
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    log = logging.getLogger("nccl_resilient.inprocess")
    log.addHandler(handler)
    try:
        n.NestedRestarterHandlingCompleted()(frozen(iteration=0))  # nothing handled yet
        n.NestedRestarterHandlingStarting()(frozen())
        n.NestedRestarterHandlingCompleted()(frozen(iteration=1))
        n.NestedRestarterFinalized()(frozen())
        n.NestedRestarterAborted()(frozen())
    finally:
        log.removeHandler(handler)
    assert stream.getvalue().splitlines() == [
        f"[NestedRestarter] name=[InProcess] state={a} stage={b}"
        for a, b in [("handling", "starting"), ("handling", "completed"),
                     ("finalized", "completed"), ("aborted", "completed")]]
    assert isinstance(n.NestedRestarterHandlingCompleted(), inprocess.initialize.Initialize)
    assert isinstance(n.NestedRestarterHandlingStarting(), inprocess.abort.Abort)
    assert isinstance(n.NestedRestarterFinalized(), inprocess.completion.Completion)
    assert isinstance(n.NestedRestarterAborted(), inprocess.terminate.Terminate)
    assert not log.propagate  # the reference's logging: its own handler, not propagated


# ---- rank assignment ---------------------------------------------------------------

def per_rank(make, states, dying):
    """Each live rank runs the composition on its own context."""
    holes = {states[i].rank for i in dying}
    out = {}
    for i, st in states.items():
        if i in dying:
            continue
        ctx = ra.RankAssignmentCtx(State(**vars(st)), None, set(holes))
        try:
            out[i] = make()(ctx).state
        except ra.RankDiscarded:
            pass
    return out


def same(world, states):
    for s in world:
        if s.mode == Mode.TERMINATED:
            assert s.initial_rank not in states
            continue
        st = states[s.initial_rank]
        got = (st.rank, Mode(st.mode), st.active_rank if st.mode == Mode.ACTIVE else -1)
        assert got == (s.rank, s.mode, s.active_rank), (s, st)


@pytest.mark.parametrize("make", [
    lambda: inprocess.Compose(ra.ActivateAllRanks(), ra.ShiftRanks()),
    lambda: inprocess.Compose(ra.ActivateAllRanks(), ra.FillGaps()),
    lambda: inprocess.Compose(ra.MaxActiveWorldSize(5), ra.ShiftRanks()),
    lambda: inprocess.Compose(ra.ActiveWorldSizeDivisibleBy(3), ra.MaxActiveWorldSize(7),
                              ra.ShiftRanks()),
    lambda: inprocess.Compose(ra.ActiveWorldSizeDivisibleBy(2), ra.FillGaps()),
    lambda: inprocess.Compose(ra.MaxActiveWorldSize(4), ra.ActivateAllRanks(), ra.ShiftRanks()),
    lambda: inprocess.Compose(ra.MaxActiveWorldSize(None), ra.ShiftRanks()),
])
def test_each_rank_computes_what_the_library_computes_for_the_world(make):
    rng = random.Random(7)
    binding = Binding(None, 0, 1, 1.0, lambda: None)
    for _ in range(25):
        n = rng.randint(2, 12)
        world = native.assign(ra.library_policies(make(), binding), initial_world_size=n)
        states = per_rank(make, {i: State(rank=i, world_size=n, active_rank=i,
                                          active_world_size=n, initial_rank=i,
                                          initial_world_size=n, mode=Mode.ACTIVE)
                                 for i in range(n)}, set())
        for _round in range(4):
            same(world, states)
            if len(states) <= 1:
                break
            dying = set(rng.sample(sorted(states), rng.randint(1, max(1, len(states) // 3))))
            world = native.assign(ra.library_policies(make(), binding), world, sorted(dying))
            states = per_rank(make, states, dying)
        same(world, states)


def test_the_documented_diagrams_of_shift_ranks_and_fill_gaps():
    # seeds/004: 8 ranks, 1, 4 and 5 terminated.
    first = native.assign([], initial_world_size=8)
    shifted = native.assign(ra.library_policies(
        inprocess.Compose(ra.ActivateAllRanks(), ra.ShiftRanks()), None), first, [1, 4, 5])
    assert {s.initial_rank: s.rank for s in shifted if s.rank >= 0} == {0: 0, 2: 1, 3: 2, 6: 3,
                                                                       7: 4}
    filled = native.assign(ra.library_policies(
        inprocess.Compose(ra.ActivateAllRanks(), ra.FillGaps()), None), first, [1, 4, 5])
    assert {s.initial_rank: s.rank for s in filled if s.rank >= 0} == {0: 0, 6: 1, 2: 2, 3: 3,
                                                                      7: 4}
    ctx = ra.RankAssignmentCtx(State(rank=6, world_size=8), None, {1, 4, 5})
    assert ra.FillGaps()(ctx).state.rank == 1
    ctx = ra.RankAssignmentCtx(State(rank=4, world_size=8), None, {1, 4, 5})
    with pytest.raises(ra.RankDiscarded):
        ra.ShiftRanks()(ctx)


def threads_as_ranks(n, body):
    """Runs body(rank, store) on n threads sharing one store; returns {rank: result}."""
    store = inprocess.store.ResilientStore("memory", timeout=td(seconds=10))
    out, errors = {}, []

    def run(r):
        try:
            out[r] = body(r, store.prefixed("sim"))
        except BaseException as e:  # reported below
            errors.append(e)
    threads = [threading.Thread(target=run, args=(r,)) for r in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    if errors:
        raise errors[0]
    return out


def test_the_documented_diagram_of_filter_count_grouped_by_key():
    # seeds/004: 8 ranks, 1, 4 and 5 terminated, groups of 2, count == 2:
    # the healthy ranks of groups 0 and 2 are marked terminated too.
    dead = {1, 4, 5}

    def rank(r, store):
        ctx = ra.RankAssignmentCtx(State(rank=r, world_size=8, iteration=0), store, set(dead))
        f = ra.FilterCountGroupedByKey(key_or_fn=lambda s: str(s.rank // 2),
                                       condition=lambda count: count == 2)
        return f(ctx).terminated_ranks
    results = threads_as_ranks(8, lambda r, s: None if r in dead else rank(r, s))
    for r in (0, 2, 3, 6, 7):
        assert results[r] == {0, 1, 4, 5}, (r, results[r])
    # Inside the Wrapper: the marked ranks are terminated and ShiftRanks closes the holes.

    def policy(r, store):
        binding = Binding(store, r, 8, 10.0, lambda: frozen(world=8))
        policies = ra.library_policies(inprocess.Compose(
            ra.ActivateAllRanks(), ra.ShiftRanks(),
            ra.FilterCountGroupedByKey(lambda s: str(s.rank // 2), lambda c: c == 2)), binding)
        return native.assign(policies, native.assign([], initial_world_size=8), sorted(dead))
    worlds = threads_as_ranks(8, lambda r, s: None if r in dead else policy(r, s))
    for r in (0, 2, 3, 6, 7):
        assert {s.initial_rank: s.rank for s in worlds[r] if s.rank >= 0} == {2: 0, 3: 1, 6: 2,
                                                                             7: 3}
    with pytest.raises(inprocess.store.BarrierTimeout, match="did not arrive"):
        # a healthy rank that never comes: the key exchange times out
        ctx = ra.RankAssignmentCtx(State(rank=0, world_size=2), inprocess.store.ResilientStore(
            "memory"), set())
        ra.FilterCountGroupedByKey("k", lambda c: True, timeout=td(seconds=0.2))(ctx)


def tree_worlds(n, make_tree, dead, key_states=None):
    """The Tree of each rank (a thread) over one store: the first World and
    the World after ``dead`` die; every rank must agree."""
    def rank(r, store):
        binding = Binding(store, r, n, 10.0, lambda: frozen(world=n))
        policies = ra.library_policies(make_tree(), binding)
        first = native.assign(policies, initial_world_size=n)
        return first, (native.assign(policies, first, dead) if dead else None)
    results = threads_as_ranks(n, rank)
    firsts = {tuple((s.rank, s.mode) for s in f) for f, _ in results.values()}
    assert len(firsts) == 1, "the ranks disagree"
    return results[0]


def test_the_documented_tree_example_in_small():
    # seeds/004's example in small: the root keeps at least 4 and at most 6
    # active ranks, a host (4 ranks) at least 4 healthy ranks (else it is
    # dropped whole) and at most 3 active; reserves are searched inside the
    # host, then across hosts through the root (both RESERVE).
    def make():
        return ra.Tree([
            ra.Layer(min_ranks=4, max_ranks=6, key_or_fn="root", flag=ra.LayerFlag.RESERVE),
            ra.Layer(min_ranks=4, max_ranks=3, key_or_fn=lambda s: f"host{s.rank // 4}",
                     flag=ra.LayerFlag.RESERVE)])
    first, after = tree_worlds(12, make, dead=[1])
    # Depth first: three per host until the root's six.
    assert sorted(s.initial_rank for s in first if s.mode == Mode.ACTIVE) == [0, 1, 2, 4, 5, 6]
    # Rank 1 died: host 0 falls below 4 healthy ranks and is dropped whole;
    # its three active ranks are replaced by reserves of host 2, reached
    # through the root (host 1 has no room: three active already).
    assert all(after[i].mode == Mode.TERMINATED for i in range(4))
    assert sorted(s.initial_rank for s in after if s.mode == Mode.ACTIVE) == [4, 5, 6, 8, 9, 10]
    # The replacements take the holes' ranks (0, 1, 2 of the shifted world).
    assert [after[i].active_rank for i in (8, 9, 10)] == [0, 1, 2]


def test_tree_reserve_search_stops_at_a_layer_without_reserve():
    # root (RESERVE) > rack (no flag, at most 2 active) > host (RESERVE):
    # racks {0..3} and {4..7}, hosts of 2. Active first: 0, 1 and 4, 5;
    # 2, 3, 6, 7 wait. Host 0 (ranks 0 and 1) dies: the reference looks for
    # reserves in the host, then stops at the rack, which has no RESERVE
    # flag: nobody replaces them. The library's own search passes over the
    # rack to the root and would take 2 and 3.
    def make():
        return ra.Tree([
            ra.Layer(key_or_fn="root", flag=ra.LayerFlag.RESERVE),
            ra.Layer(max_ranks=2, key_or_fn=lambda s: f"rack{s.rank // 4}"),
            ra.Layer(key_or_fn=lambda s: f"host{s.rank // 2}", flag=ra.LayerFlag.RESERVE)])
    first, after = tree_worlds(8, make, dead=[0, 1])
    assert sorted(s.initial_rank for s in first if s.mode == Mode.ACTIVE) == [0, 1, 4, 5]
    assert sorted(s.initial_rank for s in after if s.mode == Mode.ACTIVE) == [4, 5]
    assert ra._reserve_flags(make().layers) == [0, 0, int(ra.LayerFlag.RESERVE)]
    lib = native.Tree([native.Layer(), native.Layer(key="root", flags=native.LayerFlag.RESERVE),
                       native.Layer(max_ranks=2, key=lambda i: f"rack{i // 4}"),
                       native.Layer(key=lambda i: f"host{i // 2}",
                                    flags=native.LayerFlag.RESERVE)])
    w = native.assign([lib], native.assign([lib], initial_world_size=8), [0, 1])
    assert sorted(s.initial_rank for s in w if s.mode == Mode.ACTIVE) == [2, 3, 4, 5]


def test_tree_world_size_filter_and_refusals():
    def make():
        return ra.Tree([ra.Layer(key_or_fn="root")], world_size_filter=lambda n: n - n % 4)
    first, _ = tree_worlds(6, make, dead=[])
    assert len([s for s in first if s.mode == Mode.ACTIVE]) == 4
    with pytest.raises(ConfigError, match="cannot be composed"):
        ra.library_policies(inprocess.Compose(make(), ra.ShiftRanks()), None)
    with pytest.raises(nr.RestartError, match="whole World"):
        make()(ra.RankAssignmentCtx(State(rank=0, world_size=1), None, set()))
    with pytest.raises(ConfigError):
        ra.Tree([])
    with pytest.raises(ConfigError, match="not a RankAssignment"):
        ra.library_policies(inprocess.Compose(lambda ctx: ctx, ra.ShiftRanks()), None)
    assert ra.Layer() == ra.Layer(min_ranks=1, max_ranks=None, key_or_fn="", flag=None)
    assert {f.name for f in ra.LayerFlag} == {"RESERVE", "BACKFILL"}


def test_the_deprecated_rank_filter_module():
    sys.modules.pop("nccl_resilient.inprocess.rank_filter", None)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        module = inprocess.rank_filter
    assert any(issubclass(w.category, DeprecationWarning) for w in caught)
    assert module.MaxActiveWorldSize is ra.MaxActiveWorldSize
    assert module.RankFilter is ra.RankFilter


# ---- the Wrapper in one process -------------------------------------------------

ONE = dict(store_factory=inprocess.store.ResilientStore, store_kwargs={"url": "memory"},
           monitor_thread_interval=td(seconds=0.05),
           progress_watchdog_interval=td(seconds=0.05),
           resilient_options={"use_monitor_process": False, "restart_backoff": 0.01})


@pytest.fixture
def one_rank(monkeypatch):
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "1")


def test_call_wrapper_is_injected_where_annotated(one_rank):
    seen = []
    w = inprocess.Wrapper(**ONE)

    @w
    def plain(a, cw: inprocess.CallWrapper, b=0):
        seen.append(("plain", a, b, cw.iteration))
        return a + b

    @w
    def optional(call_wrapper: Optional[inprocess.CallWrapper] = None):
        seen.append(("optional", type(call_wrapper).__name__))

    @w
    def string(call_wrapper: "Optional[inprocess.CallWrapper]" = None):
        seen.append(("string", type(call_wrapper).__name__))

    @w
    def none_of_it(x=None):
        seen.append(("none", x))

    assert plain(1, b=2) == 3
    optional()
    string()  # this module has `from __future__ import annotations` too
    none_of_it()
    assert seen == [("plain", 1, 2, 0), ("optional", "CallWrapper"), ("string", "CallWrapper"),
                    ("none", None)]


def test_an_exception_restarts_and_the_hooks_run_in_order(one_rank):
    order = []

    def hook(name):
        def run(state):
            order.append((name, state.iteration))
            return state
        return run

    w = inprocess.Wrapper(initialize=hook("initialize"), abort=hook("abort"),
                          finalize=hook("finalize"), health_check=hook("health_check"),
                          completion=hook("completion"), terminate=hook("terminate"), **ONE)

    @w
    def fn(call_wrapper: inprocess.CallWrapper):
        order.append(("fn", call_wrapper.iteration))
        with call_wrapper.atomic():
            call_wrapper.ping()
        with call_wrapper.disable_hang_protection():
            pass
        if call_wrapper.iteration == 0:
            raise ValueError("first call")
        assert isinstance(call_wrapper.state.fn_exception, ValueError)
        return "done"

    assert fn() == "done"
    assert order == [("initialize", 0), ("health_check", 0), ("fn", 0), ("abort", 0),
                     ("finalize", 0), ("health_check", 0), ("initialize", 1),
                     ("health_check", 1), ("fn", 1), ("completion", 1)]
    assert w.state.iteration == 1 and w.timeline()[-1]["phase"] == "completed"


def test_base_exceptions_end_the_wrapper_and_hook_failures_are_reraised(one_rank):
    ended = []
    w = inprocess.Wrapper(terminate=lambda s: ended.append(s.iteration), **ONE)

    @w
    def gives_up():
        raise inprocess.exception.RestartAbort("no more")

    with pytest.raises(inprocess.exception.RestartAbort, match="no more"):
        gives_up()
    assert ended == [0]

    class Broken(Exception):
        pass

    def check(state):
        if state.iteration == 0 and state.fn_exception is not None:
            raise Broken("unfit")
    w = inprocess.Wrapper(health_check=check, **ONE)
    with pytest.raises(Broken, match="unfit"):
        w(lambda: (_ for _ in ()).throw(ValueError("x")))()

    def finalize(state):
        raise KeyError("finalize failed")
    w = inprocess.Wrapper(finalize=finalize, **ONE)
    with pytest.raises(KeyError):
        w(lambda: (_ for _ in ()).throw(ValueError("x")))()

    w = inprocess.Wrapper(initialize=inprocess.initialize.RetryController(max_iterations=2),
                          **ONE)
    with pytest.raises(inprocess.exception.RestartAbort, match="maxIterations 2"):
        w(lambda: (_ for _ in ()).throw(ValueError("always")))()


def test_a_store_must_name_a_store_of_the_library(one_rank, monkeypatch):
    class Nameless(inprocess.store.StoreMixin):
        pass
    with pytest.raises(ConfigError, match="resilient_url"):
        inprocess.Wrapper(**dict(ONE, store_factory=Nameless, store_kwargs={}))(lambda: 0)()
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("MASTER_PORT", "1")
    with pytest.raises(ConfigError, match="world_size=3"):
        inprocess.Wrapper(**dict(ONE, store_factory=inprocess.store.TCPStore,
                                 store_kwargs={"world_size": 3}))(lambda: 0)()


def test_torch_distributed_must_not_be_initialized_at_entry(one_rank):
    import torch.distributed as dist
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        with pytest.raises(ConfigError, match="initialize it inside the function"):
            inprocess.Wrapper(**ONE)(lambda: None)()
    finally:
        dist.destroy_process_group()


def test_disabled_wrapper_calls_once_and_a_function_may_be_called_again(one_rank):
    calls = []
    w = inprocess.Wrapper(enabled=False, **ONE)

    @w
    def fn(cw: inprocess.CallWrapper):
        calls.append(cw.iteration)
        return len(calls)

    assert fn() == 1 and fn() == 2 and calls == [0, 0]
    w = inprocess.Wrapper(**ONE)
    kept = []

    @w
    def again(cw: inprocess.CallWrapper):
        kept.append(cw)
        return cw.iteration
    assert again() == 0 and again() == 0  # each call a job of its own
    with pytest.raises(nr.RestartError, match="has ended"):
        kept[0].ping()
