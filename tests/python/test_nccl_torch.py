"""Running under NCCL with torch (docs/python.md, "Running under NCCL"),
with Debian's CPU-only torch: NCCL cannot run here, so what torch and NCCL
would do is modelled by small fakes, each after the source it cites.

- the environment: what the package sets where it is unset, what it leaves
  when the user set a safe value, what it refuses (and the message);
- init_process_group on NCCL: the environment first, device_id for an eager
  communicator and the handle that watch_nccl then gets, the refusal inside
  a CUDA graph capture;
- the teardown: torch never destroys an NCCL communicator that was not
  aborted (from torch 2.6 destroy_process_group ends an NCCL group with
  ncclCommDestroy, which leaves the calling thread's NCCL group depth at one
  on a communicator that carries an error), and what torch opens around its
  aborts is never left open on the training thread."""

import datetime
import os
import threading

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torch.distributed")

import nccl_resilient as nr  # noqa: E402
from nccl_resilient import distributed as rdist  # noqa: E402
from nccl_resilient.state import Mode  # noqa: E402

TORCH_2 = "2.11.0+cu130"   # the GPU machine's
TORCH_1 = "1.13.1"         # Debian's

VARIABLES = ("TORCH_NCCL_ASYNC_ERROR_HANDLING", "NCCL_ASYNC_ERROR_HANDLING",
             "TORCH_NCCL_ENABLE_MONITORING", "TORCH_NCCL_RETHROW_CUDA_ERRORS",
             "NCCL_NET_PLUGIN_REF_COUNT", "NCCL_NVLS_ENABLE", "NCCL_NET_PLUGIN",
             "NCCL_PROFILER_PLUGIN", "TORCHELASTIC_RUN_ID")


@pytest.fixture
def environ():
    """os.environ without any of the variables, restored afterwards (the
    package writes os.environ itself, not through monkeypatch)."""
    saved = dict(os.environ)
    for name in VARIABLES:
        os.environ.pop(name, None)
    yield os.environ
    os.environ.clear()
    os.environ.update(saved)


# ---- the environment -------------------------------------------------------

def test_torch_2_settings_applied_where_unset():
    env = {}
    applied = rdist.prepare_nccl_environment(environ=env, torch_version=TORCH_2)
    expected = {"TORCH_NCCL_ASYNC_ERROR_HANDLING": "0", "TORCH_NCCL_ENABLE_MONITORING": "0",
                "TORCH_NCCL_RETHROW_CUDA_ERRORS": "0", "NCCL_NET_PLUGIN_REF_COUNT": "1",
                "NCCL_NVLS_ENABLE": "0"}
    for name, value in expected.items():
        assert env[name] == value and applied[name] == value, name
    assert rdist.nccl_settings(TORCH_2) == expected
    # torch 2.x reads the new name first: the old one is not set beside it.
    assert "NCCL_ASYNC_ERROR_HANDLING" not in env


def test_torch_1_settings_use_the_old_name():
    env = {}
    applied = rdist.prepare_nccl_environment(environ=env, torch_version=TORCH_1)
    assert env["NCCL_ASYNC_ERROR_HANDLING"] == "2" == applied["NCCL_ASYNC_ERROR_HANDLING"]
    assert not any(name.startswith("TORCH_NCCL_") for name in env), env
    assert env["NCCL_NET_PLUGIN_REF_COUNT"] == "1" and env["NCCL_NVLS_ENABLE"] == "0"
    assert rdist.nccl_settings(TORCH_1) == {"NCCL_ASYNC_ERROR_HANDLING": "2",
                                            "NCCL_NET_PLUGIN_REF_COUNT": "1",
                                            "NCCL_NVLS_ENABLE": "0"}


def test_the_running_torchs_rules_by_default():
    expected = rdist.nccl_settings(torch.__version__)
    assert rdist.nccl_settings() == expected
    env = {}
    rdist.prepare_nccl_environment(environ=env)
    assert all(env[name] == value for name, value in expected.items())


def test_safe_user_values_are_left():
    user = {"TORCH_NCCL_ASYNC_ERROR_HANDLING": "0", "TORCH_NCCL_ENABLE_MONITORING": "1",
            "TORCH_NCCL_RETHROW_CUDA_ERRORS": "1", "NCCL_NET_PLUGIN_REF_COUNT": "4",
            "NCCL_NVLS_ENABLE": "0", "NCCL_NET_PLUGIN": "/opt/other/libnccl-net.so",
            "NCCL_PROFILER_PLUGIN": "/opt/other/libnccl-profiler.so"}
    env = dict(user)
    applied = rdist.prepare_nccl_environment(environ=env, torch_version=TORCH_2)
    assert env == user and applied == {}
    # The old name, set by the user, counts as set on torch 2.x.
    env = {"NCCL_ASYNC_ERROR_HANDLING": "0"}
    rdist.prepare_nccl_environment(environ=env, torch_version=TORCH_2)
    assert "TORCH_NCCL_ASYNC_ERROR_HANDLING" not in env
    # torch 1.13: 0 (never abort) is the user's choice to make.
    env = {"NCCL_ASYNC_ERROR_HANDLING": "0"}
    rdist.prepare_nccl_environment(environ=env, torch_version=TORCH_1)
    assert env["NCCL_ASYNC_ERROR_HANDLING"] == "0"
    # Another plugin than ours may be unloaded.
    env = {"NCCL_NET_PLUGIN_REF_COUNT": "0", "NCCL_NET_PLUGIN": "libnccl-net-ofi.so"}
    rdist.prepare_nccl_environment(environ=env, torch_version=TORCH_2)
    assert env["NCCL_NET_PLUGIN_REF_COUNT"] == "0"


@pytest.mark.parametrize("version,variable,value,why", [
    (TORCH_2, "TORCH_NCCL_ASYNC_ERROR_HANDLING", "3", "tears the process down"),
    (TORCH_2, "TORCH_NCCL_ASYNC_ERROR_HANDLING", "1", "tears the process down"),
    (TORCH_2, "TORCH_NCCL_ASYNC_ERROR_HANDLING", "2", "frees, a failed communicator"),
    (TORCH_2, "TORCH_NCCL_ASYNC_ERROR_HANDLING", "yes", "not a mode"),
    (TORCH_2, "NCCL_ASYNC_ERROR_HANDLING", "1", "tears the process down"),
    (TORCH_1, "NCCL_ASYNC_ERROR_HANDLING", "1", "tears the process down"),
    (TORCH_2, "NCCL_NVLS_ENABLE", "1", "NVLS"),
    (TORCH_2, "NCCL_NVLS_ENABLE", "2", "NVLS"),
    (TORCH_1, "NCCL_NVLS_ENABLE", "", "NVLS"),       # empty: NCCL's default, 2
    (TORCH_2, "NCCL_NVLS_ENABLE", "0x1", "NVLS"),    # strtoll(.., 0) reads hex
])
def test_unsafe_user_values_are_refused(version, variable, value, why):
    env = {variable: value}
    with pytest.raises(rdist.UnsafeNcclEnvironment) as refused:
        rdist.prepare_nccl_environment(environ=env, torch_version=version)
    message = str(refused.value)
    assert f"{variable}={value!r}" in message and why in message, message
    assert env[variable] == value  # left as the user set it
    # It ends the job on every rank rather than restarting into the same refusal.
    assert isinstance(refused.value, nr.RestartAbort)
    assert isinstance(refused.value, nr.ConfigError)


def test_plugin_unload_refused_with_our_plugin():
    for plugin in ("resilient", "/x/lib/libnccl-net-resilient.so", "libnccl-net-ofi.so,resilient"):
        env = {"NCCL_NET_PLUGIN_REF_COUNT": "0", "NCCL_NET_PLUGIN": plugin}
        with pytest.raises(rdist.UnsafeNcclEnvironment, match="NCCL_NET_PLUGIN_REF_COUNT='0'"):
            rdist.prepare_nccl_environment(environ=env, torch_version=TORCH_2)


def test_every_problem_is_named_and_torchrun_explained():
    env = {"TORCH_NCCL_ASYNC_ERROR_HANDLING": "1", "NCCL_NVLS_ENABLE": "1",
           "TORCHELASTIC_RUN_ID": "job"}
    with pytest.raises(rdist.UnsafeNcclEnvironment) as refused:
        rdist.check_nccl_environment(env, torch_version=TORCH_2)
    message = str(refused.value)
    assert "TORCH_NCCL_ASYNC_ERROR_HANDLING='1'" in message
    assert "NCCL_NVLS_ENABLE='1'" in message
    assert "torchrun sets it to 1" in message
    assert "allow_unsafe_environment" in message


def test_allow_unsafe_sets_the_rest_and_refuses_nothing():
    env = {"TORCH_NCCL_ASYNC_ERROR_HANDLING": "3"}
    applied = rdist.prepare_nccl_environment(environ=env, torch_version=TORCH_2, allow_unsafe=True)
    assert env["TORCH_NCCL_ASYNC_ERROR_HANDLING"] == "3"
    assert applied["NCCL_NVLS_ENABLE"] == "0"


# ---- fakes of torch.distributed, after torch's source ----------------------

class FakeComm:
    """A communicator: ``aborted`` as NCCLComm::aborted_; ``error`` as one
    that carries an asynchronous error."""

    def __init__(self, error=True):
        self.aborted = False
        self.error = error


class FakeNcclBackend:
    """ProcessGroupNCCL as torch 2.6 and later: abort() aborts every
    communicator; shutdown() is graceful (finalize, then NCCLComm::destroy,
    which calls ncclCommDestroy unless the communicator was aborted).
    ncclCommDestroy on a communicator that carries an error returns early
    from inside a group (NCCL src/init.cc), so it records the thread whose
    group depth it leaves raised."""

    def __init__(self, log, graceful_shutdown_only=False):
        self.log = log
        self.comm = FakeComm()
        if graceful_shutdown_only:
            self.abort = None

    def _comm_ptr(self):
        return 0 if self.comm.aborted else 0x5eed

    def abort(self):
        self.comm.aborted = True
        self.log.append(("abort", threading.get_ident()))

    def _shutdown(self):
        self.shutdown()

    def shutdown(self):
        if not self.comm.aborted:
            self.log.append(("ncclCommDestroy on a communicator not aborted",
                             threading.get_ident()))
            if self.comm.error:
                self.log.append(("group depth left at 1", threading.get_ident()))

    def _group_start(self):
        self.log.append(("ncclGroupStart", threading.get_ident()))

    def _group_end(self):
        self.log.append(("ncclGroupEnd", threading.get_ident()))


class FakeGroup:
    def __init__(self, backend, name):
        self.backend = backend
        self.name = name

    def _get_backend(self, device):
        return self.backend

    def abort(self):
        self.backend.abort()

    def shutdown(self):
        self.backend.shutdown()

    def __repr__(self):
        return f"FakeGroup({self.name})"


class FakeWorld:
    def __init__(self):
        self.pg_map = {}
        self.default_pg = None


class FakeC10d:
    """distributed_c10d: ``_abort_process_group`` where ``new`` (as torch 2.5
    and later: every group aborted between _group_start and _group_end on
    the default group's backend, then the global state cleared)."""

    def __init__(self, new=True):
        self._world = FakeWorld()
        self.log = []
        if new:
            self._abort_process_group = self._abort_all

    def _abort_all(self):
        self.log.append(("_abort_process_group", threading.get_ident()))
        backend = self._world.default_pg._get_backend(torch.device("cuda"))
        backend._group_start()
        for pg in list(self._world.pg_map)[::-1]:
            pg.abort()
        backend._group_end()
        self._clear()

    def _clear(self):
        self._world.pg_map.clear()
        self._world.default_pg = None

    def _get_default_group(self):
        return self._world.default_pg


class FakeDist:
    """torch.distributed: destroy_process_group as torch 2.6 and later (every
    group's shutdown(), then the global state cleared) or, with
    ``drops_only``, as 1.13 (the global state cleared, nothing called)."""

    Store = torch.distributed.Store

    def __init__(self, c10d, drops_only=False, eager_api=True):
        self.distributed_c10d = c10d
        self.drops_only = drops_only
        self.init_calls = []
        if not eager_api:
            self.init_process_group = self._init_without_device_id

    def is_available(self):
        return True

    def is_initialized(self):
        return self.distributed_c10d._world.default_pg is not None

    def get_backend(self, pg):
        return self.distributed_c10d._world.pg_map[pg]

    def destroy_process_group(self):
        self.distributed_c10d.log.append(("destroy_process_group", threading.get_ident()))
        if not self.drops_only:
            for pg in list(self.distributed_c10d._world.pg_map)[::-1]:
                pg.shutdown()
        self.distributed_c10d._clear()

    def add_group(self, backend_name, backend, name="0"):
        pg = FakeGroup(backend, name)
        world = self.distributed_c10d._world
        world.pg_map[pg] = backend_name
        if world.default_pg is None:
            world.default_pg = pg
        return pg

    def init_process_group(self, backend, init_method=None, timeout=None, world_size=-1,
                           rank=-1, store=None, group_name="", pg_options=None,
                           device_id=None):
        self.init_calls.append(dict(backend=backend, rank=rank, world_size=world_size,
                                    device_id=device_id))
        self.add_group(backend, FakeNcclBackend(self.distributed_c10d.log))

    def _init_without_device_id(self, backend, init_method=None, timeout=None, world_size=-1,
                                rank=-1, store=None, group_name="", pg_options=None):
        self.init_calls.append(dict(backend=backend, rank=rank, world_size=world_size))
        self.add_group(backend, FakeNcclBackend(self.distributed_c10d.log))


def _unaborted_destroys(log):
    return [entry for entry in log if entry[0].startswith("ncclCommDestroy")
            or entry[0].startswith("group depth")]


@pytest.fixture
def fake_torch(monkeypatch):
    def make(**kwargs):
        new = kwargs.pop("new", True)
        fake = FakeDist(FakeC10d(new=new), **kwargs)
        monkeypatch.setattr(rdist, "_dist", lambda: fake)
        monkeypatch.setattr(rdist, "_retired", [])
        return fake
    return make


# ---- the teardown ----------------------------------------------------------

def test_retire_never_lets_torch_destroy_a_communicator_not_aborted(fake_torch):
    dist = fake_torch()
    log = dist.distributed_c10d.log
    backend = FakeNcclBackend(log)
    pg = dist.add_group("nccl", backend)
    sub = dist.add_group("nccl", FakeNcclBackend(log), name="1")
    caller = threading.get_ident()
    rdist.retire_process_groups()
    assert _unaborted_destroys(log) == [], log
    assert backend.comm.aborted and sub.backend.comm.aborted
    assert not dist.is_initialized()            # a new default group can be made
    assert rdist._retired == [pg, sub]          # kept referenced, never destructed
    # Torch's NCCL group around the aborts ran on a thread of its own: a
    # raise between its start and end cannot leave the training thread's
    # group depth at one.
    threads = {ident for name, ident in log if name in ("ncclGroupStart", "ncclGroupEnd")}
    assert threads and caller not in threads, log


def test_retire_after_the_abort_hook(fake_torch):
    dist = fake_torch()
    log = dist.distributed_c10d.log
    pg = dist.add_group("nccl", FakeNcclBackend(log))
    hook = rdist.AbortTorchDistributed()
    hook(None)
    assert hook.last == {pg: "abort"}
    rdist.retire_process_groups()
    assert _unaborted_destroys(log) == [] and not dist.is_initialized()


def test_retire_of_gloo_groups_is_torchs_destroy(fake_torch):
    dist = fake_torch()
    dist.add_group("gloo", FakeNcclBackend(dist.distributed_c10d.log))
    rdist.retire_process_groups()
    assert [name for name, _ in dist.distributed_c10d.log][0] == "destroy_process_group"
    assert not dist.is_initialized()


def test_retire_on_a_torch_whose_destroy_only_drops_references(fake_torch):
    # torch 1.13: destroy_process_group clears the maps and calls nothing
    # (the group's last reference would abort; the package keeps one).
    dist = fake_torch(new=False, drops_only=True)
    pg = dist.add_group("nccl", FakeNcclBackend(dist.distributed_c10d.log))
    rdist.retire_process_groups()
    assert [name for name, _ in dist.distributed_c10d.log] == ["destroy_process_group"]
    assert rdist._retired == [pg] and not dist.is_initialized()


def test_retire_that_does_not_return_is_bounded(fake_torch):
    dist = fake_torch()
    dist.add_group("nccl", FakeNcclBackend(dist.distributed_c10d.log))
    release = threading.Event()
    hung = threading.Event()

    def abort_all():
        hung.set()
        release.wait(30)

    dist.distributed_c10d._abort_process_group = abort_all
    try:
        with pytest.raises(nr.TimeoutError, match="did not return within 0.3 s"):
            rdist.retire_process_groups(timeout=0.3)
        assert hung.wait(10)  # it was torch's call that did not return
    finally:
        release.set()


def test_abort_hook_never_calls_a_graceful_shutdown(fake_torch):
    # A torch with _abort_process_group (2.5 and later) may shut an NCCL group
    # down gracefully (2.6 and later: ncclCommDestroy): _shutdown is no abort there.
    dist = fake_torch(new=True)
    log = dist.distributed_c10d.log
    pg = dist.add_group("nccl", FakeNcclBackend(log, graceful_shutdown_only=True))
    pg.abort = None  # neither the group nor its backend can abort
    assert rdist._abort_group(pg) == ""
    assert _unaborted_destroys(log) == []


def test_abort_hook_uses_shutdown_where_it_aborts(fake_torch):
    # Before _abort_process_group, ProcessGroupNCCL::shutdown called abort().
    dist = fake_torch(new=False)
    backend = FakeNcclBackend(dist.distributed_c10d.log, graceful_shutdown_only=True)
    backend.shutdown = lambda: setattr(backend.comm, "aborted", True)
    pg = dist.add_group("nccl", backend)
    pg.abort = None
    assert rdist._abort_group(pg) == "backend _shutdown" and backend.comm.aborted


def test_abort_hook_reports_an_abort_that_hangs(fake_torch):
    dist = fake_torch()
    release = threading.Event()
    pg = dist.add_group("nccl", FakeNcclBackend(dist.distributed_c10d.log))
    pg.abort = lambda: release.wait(30)
    hook = rdist.AbortTorchDistributed(timeout=0.2)
    try:
        with pytest.warns(RuntimeWarning, match="CUDA graph"):
            hook(None)
        assert hook.last[pg].startswith("did not return within 0.2 s")
    finally:
        release.set()


# ---- init_process_group on NCCL --------------------------------------------

class FakeContext:
    """What init_process_group reads of a CallContext, and the handles
    watch_nccl hands to the library."""

    def __init__(self, iteration=0):
        self.watched = []
        self.state = type("S", (), dict(active=True, iteration=iteration, active_rank=0,
                                         active_world_size=1, mode=Mode.ACTIVE))()

    def watch_nccl_communicator(self, handle, library=None):
        self.watched.append(handle)


@pytest.fixture
def cuda_device(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 3)
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: False)


def _init(ctx, **kwargs):
    rdist.init_process_group(ctx, "nccl", timeout=datetime.timedelta(seconds=5),
                             store_url="memory", **kwargs)


def test_init_on_nccl_prepares_the_environment_and_creates_the_comm_eagerly(
        fake_torch, cuda_device, environ):
    dist = fake_torch()
    ctx = FakeContext()
    _init(ctx)
    for name, value in rdist.nccl_settings().items():
        assert environ[name] == value, name
    assert dist.init_calls[0]["device_id"] == torch.device("cuda", 3)
    assert ctx.watched == [0x5eed]  # the communicator existed when init returned
    # The next iteration retires this group by aborting it, and makes its own.
    dist.distributed_c10d.log.clear()
    _init(FakeContext(iteration=1))
    assert _unaborted_destroys(dist.distributed_c10d.log) == []
    assert len(dist.init_calls) == 2 and len(rdist._retired) == 1


def test_init_keeps_the_users_device_and_older_torch_stays_lazy(
        fake_torch, cuda_device, environ):
    dist = fake_torch()
    _init(FakeContext(), device_id=torch.device("cuda", 1))
    assert dist.init_calls[0]["device_id"] == torch.device("cuda", 1)
    old = fake_torch(eager_api=False)  # 1.13: no device_id parameter
    _init(FakeContext())
    assert "device_id" not in old.init_calls[0]


def test_init_refuses_an_unsafe_environment_before_anything(fake_torch, cuda_device, environ):
    dist = fake_torch()
    # The old name: read by 1.13 and, where the new one is unset, by 2.x.
    environ["NCCL_ASYNC_ERROR_HANDLING"] = "1"
    ctx = FakeContext()
    with pytest.raises(rdist.UnsafeNcclEnvironment, match="NCCL_ASYNC_ERROR_HANDLING='1'"):
        rdist.init_process_group(ctx, "nccl", store_url="memory")
    assert dist.init_calls == [] and ctx.watched == []
    _init(ctx, allow_unsafe_environment=True)
    assert len(dist.init_calls) == 1


def test_init_refuses_inside_a_cuda_graph_capture(fake_torch, cuda_device, monkeypatch, environ):
    dist = fake_torch()
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: True)
    with pytest.raises(rdist.UnsafeNcclEnvironment, match="CUDA graph capture"):
        _init(FakeContext())
    assert dist.init_calls == []
