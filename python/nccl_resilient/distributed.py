"""torch.distributed with the restart library.

- ``init_process_group(ctx, backend)``: a process group of this iteration's
  active ranks, through the library's store (``TorchStore``, a
  ``torch.distributed.Store``) under a prefix of its own per iteration, so
  that no key of an earlier iteration is seen again; the group an aborted
  iteration left is retired first (see below). Sets RANK, WORLD_SIZE,
  LOCAL_RANK, MASTER_ADDR and MASTER_PORT as torchrun would for the
  iteration. With an NCCL backend it first prepares the environment
  (``prepare_nccl_environment``: NCCL_NET_PLUGIN and NCCL_PROFILER_PLUGIN at this
  package's plugin, and what torch and NCCL need for the survivors of a
  fault to live, ``nccl_settings()``; each only where unset), refuses a
  value that makes a restart unsafe (``UnsafeNcclEnvironment``), and passes
  ``device_id`` so that the communicator exists when init returns and
  ``watch_nccl`` gets its handle.
- ``AbortTorchDistributed()``: the abort hook. It aborts every process group
  with what the running torch offers (``ProcessGroup.abort()``, NCCL's
  ``_shutdown`` on the 2.x releases whose shutdown is an abort); gloo before
  torch 2.6 has no abort (pytorch#130345): a thread blocked in a gloo
  collective stays there until gloo's own timeout, so wait for gloo work
  with ``wait()``, which polls and is interrupted at once.
- Retired groups are kept referenced, never destroyed while work may be in
  flight: in torch 1.13 the last reference to a gloo group joins its worker
  threads, which blocks until a collective stuck on a dead peer times out.
  Torch is never let to destroy an NCCL communicator that was not aborted:
  from torch 2.6 ``destroy_process_group`` ends each NCCL group with
  ``ncclCommDestroy``, which on a communicator that carries an error returns
  early with the calling thread's NCCL group depth left at one (NCCL
  v2.28.9-1 src/init.cc ncclCommDestroy), and every later collective of that
  thread then only joins a group and never launches. NCCL groups are retired
  with torch's ``_abort_process_group`` instead, on a short-lived thread
  (``retire_process_groups``).
"""

from __future__ import annotations

import datetime
import inspect
import os
import re
import socket
import threading
import time
import warnings
from typing import (Any, Dict, List, Mapping, MutableMapping, NamedTuple, Optional,
                    Tuple)

from . import _native
from .errors import ConfigError, RestartAbort, TimeoutError
from .store import Store, _bytes, keys_list
from .wrapper import CallContext, current_context, set_distributed_env

_retired: List[Any] = []  # process groups of aborted iterations (see the module's text)
# The group init_process_group made last, as wait() names it to the library:
# (name, rank, size), or None for an NCCL group (its profiler sees it).
_default_group: Optional[Tuple[str, int, int]] = None
_lock = threading.Lock()
_stores = {}
_master_port_base: Optional[int] = None


def _dist():
    import torch.distributed as dist  # imported when used: torch is optional
    return dist


def _store_class():
    dist = _dist()

    class TorchStore(dist.Store):
        """The library's store as a torch.distributed.Store (get waits for
        its key, as TCPStore's; timeouts raise TimeoutError, a RuntimeError
        too, as torch's stores do)."""

        def __init__(self, store: Store, timeout: datetime.timedelta) -> None:
            super().__init__()
            self._store = store
            self._timeout = timeout

        def _wait_seconds(self, timeout=None) -> float:
            if isinstance(timeout, datetime.timedelta):
                return timeout.total_seconds()
            base = getattr(self, "timeout", None) or self._timeout
            return base.total_seconds() if isinstance(base, datetime.timedelta) else float(base)

        def _guard(self, fn, *args):
            try:
                return fn(*args)
            except TimeoutError as e:
                raise StoreTimeout(str(e)) from None

        def set(self, key, value) -> None:
            self._guard(self._store.set, key, value)

        def get(self, key) -> bytes:
            def run():
                self._store.wait([key], self._wait_seconds())
                value = self._store.get(key)
                return b"" if value is None else value
            return self._guard(run)

        def add(self, key, amount) -> int:
            return self._guard(self._store.add, key, int(amount))

        def compare_set(self, key, expected_value, desired_value) -> bytes:
            expected, desired = _bytes(expected_value), _bytes(desired_value)

            def run():
                if expected == b"":
                    swapped, current = self._store.compare_set(key, None, desired)
                    if swapped:
                        return desired
                    if current == b"":
                        swapped, current = self._store.compare_set(key, b"", desired)
                        return desired if swapped else (current or b"")
                    return current or b""
                swapped, current = self._store.compare_set(key, expected, desired)
                if swapped:
                    return desired
                return expected if current is None else current
            return self._guard(run)

        def wait(self, keys, timeout=None) -> None:
            self._guard(self._store.wait, keys_list(keys), self._wait_seconds(timeout))

        def check(self, keys) -> bool:
            return self._guard(self._store.check, keys_list(keys))

        def delete_key(self, key) -> bool:
            return self._guard(self._store.delete, key)

        deleteKey = delete_key  # the name torch's C++ trampoline calls

        def clone(self):
            """torch 2.x: a store for another thread (process group splits)."""
            return TorchStore(self._store, self._timeout)

        def num_keys(self) -> int:
            raise RuntimeError("nccl_resilient.TorchStore cannot count its keys")

        getNumKeys = num_keys

    return TorchStore


class StoreTimeout(TimeoutError, RuntimeError):
    """A store wait ran out of time (torch's callers expect a RuntimeError)."""


_torch_store_class = None


def TorchStore(store: Store, timeout: datetime.timedelta = datetime.timedelta(seconds=300)):
    """A torch.distributed.Store over ``store`` (a nccl_resilient.Store)."""
    global _torch_store_class
    if _torch_store_class is None:
        _torch_store_class = _store_class()
    return _torch_store_class(store, timeout)


def job_store(url: Optional[str] = None) -> Store:
    """One connection per process to the job's store (NCCL_RESILIENT_STORE_URL)."""
    url = url or os.environ.get("NCCL_RESILIENT_STORE_URL", "")
    with _lock:
        if url not in _stores:
            _stores[url] = Store(url)
        return _stores[url]


def _all_groups() -> list:
    c10d = _dist().distributed_c10d
    world = getattr(c10d, "_world", None)
    pg_map = getattr(world, "pg_map", None) if world is not None else getattr(c10d, "_pg_map", None)
    groups = list(pg_map.keys()) if pg_map else []
    default = getattr(c10d, "_default_pg", None) or (world.default_pg if world else None)
    if default is not None and default not in groups:
        groups.insert(0, default)
    return groups


def _nccl_groups_are_destroyed(c10d) -> bool:
    """Whether the running torch may end an NCCL group with ncclCommDestroy.
    ``_abort_process_group`` (pytorch#132291) came before the graceful
    ``ProcessGroupNCCL::shutdown`` (finalize, then ``NCCLComm::destroy`` ->
    ``ncclCommDestroy``, pytorch#141510); in the releases without it,
    ``shutdown`` aborts (ProcessGroupNCCL::shutdown calls ``abort()``) and
    1.13's ``destroy_process_group`` only drops references (its
    distributed_c10d.py), the last of which aborts (1.13
    ProcessGroupNCCL::~ProcessGroupNCCL -> NCCLComm::ncclCommAbort)."""
    return hasattr(c10d, "_abort_process_group")


def _abort_group(pg) -> str:
    """Aborts one process group with what the running torch has. Returns
    what it called ("abort", "_shutdown", "backend abort", "backend
    _shutdown") or "" (none: gloo before 2.6, NCCL on 1.13). ``_shutdown``
    only where it is an abort (see _nccl_groups_are_destroyed): from torch
    2.6 it finalizes and destroys, the trap this module avoids."""
    names = ("abort",) if _nccl_groups_are_destroyed(_dist().distributed_c10d) else (
        "abort", "_shutdown")
    candidates = [("", pg)]
    try:  # 2.x: the backends of a ProcessGroup
        import torch
        candidates.append(("backend ", pg._get_backend(torch.device("cuda"))))
    except Exception:  # no CUDA backend in this group
        pass
    for prefix, target in candidates:
        for name in names:
            fn = getattr(target, name, None)
            if callable(fn):
                fn()
                return prefix + name
    return ""


class AbortTorchDistributed:
    """The abort hook for torch.distributed: aborts every process group with
    the API the running torch has (one thread per group, as an abort must
    not wait on one group before the next). What it did per group is in
    ``last`` ({group: "abort" | "_shutdown" | "" (none: gloo before 2.6) |
    "failed: ..." | "did not return ..."}).

    An abort still running after ``timeout`` seconds is left to finish on
    its thread and reported (a RuntimeWarning and ``last``): NCCL's abort
    waits until every CUDA graph that captured a collective of the
    communicator is destroyed (NCCL v2.28.9-1 src/init.cc commDestroySync:
    ``while (comm->localPersistentRefs != 0)``), so a live graph holds it
    forever (docs/python.md, Running under NCCL)."""

    def __init__(self, timeout: float = 10.0) -> None:
        self.timeout = float(timeout)
        self.last: dict = {}

    def __call__(self, state) -> None:
        dist = _dist()
        if not dist.is_available() or not dist.is_initialized():
            return
        done: dict = {}

        def one(pg):
            try:
                done[pg] = _abort_group(pg)
            except Exception as e:  # an abort must not stop the others
                done[pg] = f"failed: {e}"

        threads = [(pg, threading.Thread(target=one, args=(pg,), daemon=True,
                                         name="nccl_resilient-abort"))
                   for pg in _all_groups()]
        for _, t in threads:
            t.start()
        deadline = time.monotonic() + self.timeout
        for _, t in threads:
            t.join(timeout=max(0.0, deadline - time.monotonic()))
        last = dict(done)
        for pg, t in threads:
            if t.is_alive():
                last[pg] = (f"did not return within {self.timeout:g} s (a CUDA graph that "
                            "captured its collectives keeps NCCL's abort waiting)")
                warnings.warn(f"nccl_resilient: the abort of process group {pg!r} "
                              f"{last[pg]}", RuntimeWarning, stacklevel=2)
        self.last = last


def _has_nccl(dist, pg) -> bool:
    try:
        return "nccl" in str(dist.get_backend(pg)).lower()
    except Exception:
        return False


def _run_on_own_thread(fn, timeout: float, what: str) -> None:
    """Runs ``fn`` on a short-lived thread and waits for it (polling, so that
    a restart's RankShouldRestart reaches the caller at once). NCCL's group
    depth is thread-local (NCCL v2.28.9-1 src/group.cc ``__thread int
    ncclGroupDepth``): a teardown that leaves it raised leaves it on a
    thread that then ends, never on the training thread."""
    failure: List[BaseException] = []

    def run() -> None:
        try:
            fn()
        except BaseException as e:  # reported in the caller's thread
            failure.append(e)

    t = threading.Thread(target=run, name="nccl_resilient-retire", daemon=True)
    t.start()
    deadline = time.monotonic() + timeout
    while t.is_alive() and time.monotonic() < deadline:
        t.join(timeout=min(0.05, max(0.0, deadline - time.monotonic())))
    if t.is_alive():
        raise TimeoutError(
            f"{what} did not return within {timeout:g} s: an NCCL abort waits for every CUDA "
            "graph that captured a collective of its communicator to be destroyed (NCCL "
            "src/init.cc commDestroySync), or the driver is wedged; the groups stay referenced")
    if failure:
        raise failure[0]


def retire_process_groups(timeout: float = 60.0) -> None:
    """Forgets every process group without destroying any (they stay
    referenced: see the module's text), so that a new default group can be
    made. Where the running torch would end NCCL groups with
    ``ncclCommDestroy`` (2.6 and later: ``destroy_process_group`` ->
    ``ProcessGroupNCCL::shutdown`` -> ``NCCLComm::destroy``, skipped only
    for a communicator already aborted), the groups are forgotten by
    torch's ``_abort_process_group`` instead (every group aborted, the
    global state cleared, no shutdown), on a thread of its own: it opens an
    NCCL group around the aborts (``_group_start``/``_group_end``), and an
    abort that raises between the two must not leave that group open on the
    training thread. Elsewhere ``destroy_process_group`` (which aborts, or
    only drops references: see _nccl_groups_are_destroyed). Raises
    TimeoutError when the aborts do not return within ``timeout``."""
    dist = _dist()
    if not dist.is_initialized():
        return
    groups = _all_groups()
    _retired.extend(groups)
    c10d = dist.distributed_c10d
    if _nccl_groups_are_destroyed(c10d) and any(_has_nccl(dist, pg) for pg in groups):
        _run_on_own_thread(c10d._abort_process_group, timeout,
                           "torch's _abort_process_group (retiring the NCCL process groups)")
    else:
        dist.destroy_process_group()


# ---- Running under NCCL: what the survivors of a fault need ----------------


class UnsafeNcclEnvironment(RestartAbort, ConfigError):
    """The environment asks torch or NCCL for something an in-process restart
    cannot survive; the message names each variable, its value and why. A
    RestartAbort: raised in the wrapped function it ends the job on every
    rank instead of restarting into the same refusal."""


class NcclSetting(NamedTuple):
    """One variable the package sets where it is unset (``aliases``: older
    names torch also reads; a set alias counts as set)."""
    name: str
    value: str
    why: str
    aliases: Tuple[str, ...] = ()


# torch 2.2 renamed NCCL_ASYNC_ERROR_HANDLING to TORCH_NCCL_ASYNC_ERROR_HANDLING
# and added the heartbeat monitor; ProcessGroupNCCL.hpp lists the new name
# first ({"TORCH_NCCL_ASYNC_ERROR_HANDLING", "NCCL_ASYNC_ERROR_HANDLING"}) and
# getCvarInt reads the list backwards, so the first name set wins.
_TORCH_NAMES_FROM = (2, 2)

_TORCH_SETTINGS = (
    NcclSetting(
        "TORCH_NCCL_ASYNC_ERROR_HANDLING", "0",
        "torch's default (3) and torchrun's (1) have the watchdog rethrow a collective's "
        "error in its own thread, which ends the process (ProcessGroupNCCL::Watchdog::runLoop "
        "-> WorkNCCL::handleException under SHOULD_TEAR_DOWN); 0 leaves the abort to the "
        "abort hook, as torch's _abort_process_group asks",
        aliases=("NCCL_ASYNC_ERROR_HANDLING",)),
    NcclSetting(
        "TORCH_NCCL_ENABLE_MONITORING", "0",
        "after a collective error on any rank (the exception_dump key) or a watchdog stuck "
        "for TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC, the heartbeat monitor dumps, sleeps that "
        "timeout and ends the process unless the group was aborted first "
        "(ProcessGroupNCCL::HeartbeatMonitor::runLoop -> terminateProcess, LOG(FATAL)); "
        "with 0 it only logs"),
    NcclSetting(
        "TORCH_NCCL_RETHROW_CUDA_ERRORS", "0",
        "with 1, the default, an exception in the watchdog is rethrown in its std::thread "
        "(ProcessGroupNCCL::Watchdog::run), which ends the process"),
)

_TORCH_1_SETTINGS = (
    NcclSetting(
        "NCCL_ASYNC_ERROR_HANDLING", "2",
        "torch 1.13 has no abort to call for an NCCL group and by default (0) never aborts "
        "a failed communicator; 2 (CleanUpOnly) has the watchdog abort it "
        "(ProcessGroupNCCL::ncclCommWatchdogInternal -> NCCLComm::ncclCommAbort) without "
        "the teardown of 1 (WorkNCCL::handleNCCLGuard rethrows in the cleanup thread)"),
)

_NCCL_SETTINGS = (
    NcclSetting(
        "NCCL_NET_PLUGIN_REF_COUNT", "1",
        "a net plugin's count starts at this value (default 0), every communicator's "
        "finalize takes one off and at 0 NCCL dlcloses the plugin (v2.28.9-1 "
        "src/plugin/net.cc NCCL_PARAM(NetPluginRefCount), ncclNetPluginFinalize -> "
        "ncclNetPluginUnload); torch frees every communicator before the next group "
        "exists, so our plugin and its blackbox would be unloaded between two iterations"),
    NcclSetting(
        "NCCL_NVLS_ENABLE", "0",
        "NVLS (default 2: on wherever the GPUs support multicast, src/transport/nvls.cc "
        "ncclNvlsInit) binds every local rank's buffers into one multicast object, with "
        "intra-node barriers at setup and at buffer registration that NCCL itself notes "
        "can hang in abort (nvlsAllocateMem); the reference restarter requires it off"),
)


def _torch_version(given: Optional[str] = None) -> Tuple[int, int]:
    text = given
    if text is None:
        try:
            import torch
            text = torch.__version__
        except ImportError:  # no torch: the newest rules
            return (99, 0)
    m = re.match(r"\s*(\d+)\.(\d+)", str(text))
    return (int(m.group(1)), int(m.group(2))) if m else (99, 0)


def _settings(torch_version: Optional[str] = None) -> Tuple[NcclSetting, ...]:
    torch_part = (_TORCH_SETTINGS if _torch_version(torch_version) >= _TORCH_NAMES_FROM
                  else _TORCH_1_SETTINGS)
    return torch_part + _NCCL_SETTINGS


def nccl_settings(torch_version: Optional[str] = None) -> Dict[str, str]:
    """{variable: value} that the package sets for a torch job on NCCL, each
    only where the user has not set it (``torch_version``: the running
    torch's by default). The reasons are in docs/python.md."""
    return {s.name: s.value for s in _settings(torch_version)}


def _stoi(text: str) -> Optional[int]:
    """An integer as std::stoi reads it (torch's getCvarInt), None where it
    throws."""
    m = re.match(r"\s*([+-]?\d+)", text)
    return int(m.group(1)) if m else None


def _nccl_int(text: str, default: int) -> int:
    """An integer parameter as NCCL reads it (src/misc/param.cc
    ncclLoadParam: empty means the default, else strtoll(str, NULL, 0),
    which stops at the first character it cannot use)."""
    if text == "":
        return default
    m = re.match(r"\s*([+-]?)(0[xX][0-9a-fA-F]+|0[0-7]*|[1-9]\d*)", text)
    if not m:
        return 0
    digits = m.group(2)
    base = 16 if digits[:2].lower() == "0x" else 8 if digits.startswith("0") and len(digits) > 1 \
        else 10
    value = int(digits, base)
    value = -value if m.group(1) == "-" else value
    return value if -(1 << 63) <= value < (1 << 63) else default


def _names_our_plugin(value: str) -> bool:
    for entry in value.split(","):
        entry = entry.strip()
        if entry.lower() == "resilient" or os.path.basename(entry) == _native.NET_PLUGIN:
            return True
    return False


def _problems(env: Mapping[str, str], torch_version: Optional[str] = None) -> List[str]:
    """What in ``env`` makes an in-process restart under NCCL unsafe, one line each."""
    problems = []
    torchrun = ("; torchrun sets it to 1 where it is unset, so export {name}=0 before torchrun"
                if "TORCHELASTIC_RUN_ID" in env else "")
    if _torch_version(torch_version) >= _TORCH_NAMES_FROM:
        name = next((n for n in ("TORCH_NCCL_ASYNC_ERROR_HANDLING", "NCCL_ASYNC_ERROR_HANDLING")
                     if n in env), None)
        if name is not None:
            value = env[name]
            mode = _stoi(value)
            if mode in (1, 3):
                problems.append(
                    f"{name}={value!r}: torch's watchdog tears the process down on a "
                    "collective's error (mode 1 or 3: ProcessGroupNCCL::Watchdog::runLoop -> "
                    "WorkNCCL::handleException), so every survivor of a fault dies with the "
                    "faulty rank; set it to 0" + torchrun.format(name=name))
            elif mode == 2:
                problems.append(
                    f"{name}={value!r}: torch's watchdog then aborts, and so frees, a failed "
                    "communicator by itself (ProcessGroupNCCL::abortComms) while the restart "
                    "library still polls its handle (watch_nccl); torch's "
                    "_abort_process_group asks for 0; set it to 0")
            elif mode != 0:
                problems.append(f"{name}={value!r}: not a mode torch knows (0 to 3); set it to 0")
    elif "NCCL_ASYNC_ERROR_HANDLING" in env:
        value = env["NCCL_ASYNC_ERROR_HANDLING"]
        mode = _stoi(value)
        if mode == 1:
            problems.append(
                f"NCCL_ASYNC_ERROR_HANDLING={value!r}: torch's cleanup thread tears the process "
                "down on a collective's error (TearDown: WorkNCCL::handleNCCLGuard), so every "
                "survivor of a fault dies with the faulty rank; set it to 2 (or 0)"
                + torchrun.format(name="NCCL_ASYNC_ERROR_HANDLING"))
        elif mode not in (0, 2):
            problems.append(f"NCCL_ASYNC_ERROR_HANDLING={value!r}: not a mode torch 1.13 knows "
                            "(0 to 2); set it to 2")
    if "NCCL_NVLS_ENABLE" in env and _nccl_int(env["NCCL_NVLS_ENABLE"], 2) != 0:
        value = env["NCCL_NVLS_ENABLE"]
        problems.append(
            f"NCCL_NVLS_ENABLE={value!r}: NVLS (NVLink SHARP) stays on where the GPUs support "
            "it; its multicast buffers are bound by every local rank behind intra-node "
            "barriers (NCCL src/transport/nvls.cc) and the reference restarter requires "
            "NCCL_NVLS_ENABLE=0 for an in-process restart; set it to 0")
    if ("NCCL_NET_PLUGIN_REF_COUNT" in env and _names_our_plugin(env.get("NCCL_NET_PLUGIN", ""))
            and _nccl_int(env["NCCL_NET_PLUGIN_REF_COUNT"], 0) < 1):
        value = env["NCCL_NET_PLUGIN_REF_COUNT"]
        problems.append(
            f"NCCL_NET_PLUGIN_REF_COUNT={value!r}: NCCL unloads the net plugin when the last "
            "communicator is freed (src/plugin/net.cc ncclNetPluginFinalize), which torch "
            "does between two iterations: our plugin and its blackbox would go; set it to 1")
    return problems


def check_nccl_environment(environ: Optional[Mapping[str, str]] = None,
                           torch_version: Optional[str] = None) -> None:
    """Raises UnsafeNcclEnvironment, naming every variable, its value and why,
    when ``environ`` (os.environ by default) makes an in-process restart
    under NCCL unsafe."""
    env = os.environ if environ is None else environ
    problems = _problems(env, torch_version)
    if problems:
        raise UnsafeNcclEnvironment(
            "nccl_resilient refuses this environment for an in-process restart under NCCL:\n"
            + "\n".join("  - " + p for p in problems)
            + "\n(docs/python.md, Running under NCCL; "
              "init_process_group(..., allow_unsafe_environment=True) skips this check)")


def prepare_nccl_environment(environ: Optional[MutableMapping[str, str]] = None,
                             torch_version: Optional[str] = None,
                             allow_unsafe: bool = False) -> Dict[str, str]:
    """Prepares ``environ`` (os.environ by default) for a torch job on NCCL
    under the restart loop: NCCL_NET_PLUGIN and NCCL_PROFILER_PLUGIN at this
    package's plugin where it has one, and every ``nccl_settings()``
    variable, each only where unset; then refuses (UnsafeNcclEnvironment) a
    value the user set that makes a restart unsafe, unless
    ``allow_unsafe``. Returns {variable: value} of what it set. Call it
    before the process's first NCCL communicator: NCCL reads its
    parameters once (src/misc/param.cc ncclLoadParam), torch each time it
    makes a process group."""
    env = os.environ if environ is None else environ
    applied: Dict[str, str] = {}
    try:
        where = _native.library_dir()
    except _native.LibraryNotFound:
        where = None
    if where is not None:
        net = where / _native.NET_PLUGIN
        profiler = where / _native.PROFILER_PLUGIN
        for variable, path in (("NCCL_NET_PLUGIN", net),
                               # The net plugin's .so carries the profiler plugin too.
                               ("NCCL_PROFILER_PLUGIN", profiler if profiler.exists() else net)):
            if variable not in env and path.exists():
                env[variable] = applied[variable] = str(path)
    for setting in _settings(torch_version):
        if setting.name in env or any(alias in env for alias in setting.aliases):
            continue
        env[setting.name] = applied[setting.name] = setting.value
    if not allow_unsafe:
        check_nccl_environment(env, torch_version)
    return applied


def _refuse_capture() -> None:
    """init_process_group inside a CUDA graph capture cannot be restarted: the
    group's collectives would be captured (see AbortTorchDistributed)."""
    try:
        import torch
        capturing = bool(torch.cuda.is_available() and torch.cuda.is_current_stream_capturing())
    except Exception:  # no CUDA
        capturing = False
    if capturing:
        raise UnsafeNcclEnvironment(
            "init_process_group inside a CUDA graph capture: an NCCL communicator whose "
            "collectives are captured cannot be aborted while the graph lives (NCCL "
            "src/init.cc commDestroySync waits for localPersistentRefs to reach 0), so a "
            "restart would hang; capture outside the restart loop (docs/python.md)")


def _eager_device(dist) -> Optional[Any]:
    """The device_id that makes torch create the NCCL communicator inside
    init_process_group (torch 2.3 and later have the parameter; recent
    releases call ``eager_connect_single_device(device_id)`` in
    ``_new_process_group_helper`` when it is given), so that watch_nccl gets
    its handle at once: this process's current CUDA device (call
    torch.cuda.set_device first, as torch asks). None where the running
    torch has no such parameter (1.13: the communicator is made lazily, by
    the first collective) or no CUDA."""
    try:
        if "device_id" not in inspect.signature(dist.init_process_group).parameters:
            return None
        import torch
        if not torch.cuda.is_available():
            return None
        # A torch.device, not an int: recent releases test ``if device_id``.
        return torch.device("cuda", torch.cuda.current_device())
    except (TypeError, ValueError):
        return None


def init_process_group(ctx: CallContext, backend: str = "gloo",
                       timeout: datetime.timedelta = datetime.timedelta(seconds=60),
                       store_url: Optional[str] = None, allow_unsafe_environment: bool = False,
                       **kwargs: Any) -> None:
    """torch.distributed.init_process_group for this iteration's active ranks
    (see the module's text). ``timeout`` is the group's own (gloo's wait for
    a silent peer, NCCL's watchdog): keep it above the hard timeout. With
    NCCL: prepare_nccl_environment (``allow_unsafe_environment`` skips its
    refusal), a refusal inside a CUDA graph capture, and ``device_id`` (the
    current CUDA device, unless given) for an eager communicator."""
    dist = _dist()
    state = ctx.state
    if not state.active:
        raise RuntimeError("init_process_group on a spare rank (State.active is False)")
    nccl = "nccl" in backend.lower()
    if nccl:
        _refuse_capture()
        prepare_nccl_environment(allow_unsafe=allow_unsafe_environment)
    retire_process_groups()
    job = os.environ.get("NCCL_RESILIENT_RESTART_JOB", "default")
    base = job_store(store_url)
    prefix = f"nccl_resilient/torch/{job}/{state.iteration}/"
    store = base.view(prefix)
    if state.active_rank == 0 and state.iteration >= 2:
        base.delete_prefix(f"nccl_resilient/torch/{job}/{state.iteration - 2}/")
    # What torchrun would give this iteration: the host of active rank 0,
    # and a port of its own per iteration.
    if state.active_rank == 0:
        store.set("master_addr", socket.gethostname())
    store.wait(["master_addr"], timeout.total_seconds())
    os.environ["MASTER_ADDR"] = (store.get("master_addr") or b"").decode()
    global _master_port_base
    if _master_port_base is None:  # the user's MASTER_PORT is iteration 0's
        _master_port_base = int(os.environ.get("MASTER_PORT", "29500"))
    os.environ["MASTER_PORT"] = str(_master_port_base + state.iteration)
    set_distributed_env(state)
    if nccl and "device_id" not in kwargs:
        device = _eager_device(dist)
        if device is not None:
            kwargs["device_id"] = device
    dist.init_process_group(backend, store=TorchStore(store.view("pg"), timeout),
                            rank=state.active_rank, world_size=state.active_world_size,
                            timeout=timeout, **kwargs)
    global _default_group
    _default_group = None if nccl else (f"torch/{job}/{state.iteration}", state.active_rank,
                                        state.active_world_size)
    if nccl:
        watch_nccl(ctx)


def watch_nccl(ctx: CallContext, group=None) -> bool:
    """Has the library watch the NCCL communicator of a process group (the
    default one: None) when the running torch exposes it (ProcessGroupNCCL's
    ``_comm_ptr``, torch 2.x, once the communicator exists:
    ``init_process_group`` passes ``device_id`` for an eager one). Returns whether
    it could: an error NCCL or our plugin finds on it then starts the
    restart at once."""
    try:
        import torch
        dist = _dist()
        pg = group or dist.distributed_c10d._get_default_group()
        backend = pg._get_backend(torch.device("cuda"))
        handle = int(backend._comm_ptr())
    except Exception:  # an older torch, another backend, or no communicator yet
        return False
    if handle == 0:
        return False
    ctx.watch_nccl_communicator(handle)  # "libnccl.so.2": the one torch loaded
    return True


def _marked_group(group) -> Optional[Tuple[str, int, int]]:
    """(name, rank, size) under which wait() marks a collective of ``group``
    (None: init_process_group's group), or None: not marked (an NCCL group,
    whose profiler sees it; a group without a name every rank shares)."""
    if _default_group is None:
        return None
    if group is None:
        return _default_group
    # The group's name, the same on every rank of it, where the running torch
    # keeps it: ProcessGroup.group_name (torch >= 2.2: c10d ProcessGroup's
    # getGroupName, bound in torch/csrc/distributed/c10d/init.cpp);
    # distributed_c10d._get_process_group_name (torch 2.x:
    # _world.pg_names.get(pg, "None")); distributed_c10d._pg_names (torch
    # 1.13: the dict new_group fills). Unnamed: not marked.
    dist = _dist()
    c10d = dist.distributed_c10d
    name = getattr(group, "group_name", None)
    if not name and hasattr(c10d, "_get_process_group_name"):
        name = c10d._get_process_group_name(group)
    if not name and hasattr(c10d, "_pg_names"):
        name = c10d._pg_names.get(group)
    if not name or name == "None":
        return None
    return (f"{_default_group[0]}/{name}", dist.get_rank(group), dist.get_world_size(group))


def wait(work, poll_seconds: float = 0.0002, ping_seconds: float = 0.05,
         op: Optional[str] = None, group=None) -> None:
    """Waits for an async torch work (``all_reduce(..., async_op=True)``)
    while staying interruptible: a restart's RankShouldRestart arrives at
    once, even where the backend cannot be aborted (gloo before 2.6). Then
    ``work.wait()`` surfaces the work's own error.

    A rank waiting here for its peers is alive: it pings the running
    CallContext every ``ping_seconds``, so that the soft timeout names the
    rank that stopped (a frozen peer), not the ones waiting for it.

    With ``op`` (the collective's name, e.g. "all_reduce"), on a group no
    NCCL profiler sees (gloo), the work is also its group's next collective
    for the library's health comparison (``CallContext.enter_collective``):
    a rank that never comes to one its peers wait in is named a stuck rank.
    ``group``: the work's process group when it is not init_process_group's
    (every rank of it must mark the same collectives in the same order, as
    torch requires of the calls themselves)."""
    ctx = current_context()
    group = _marked_group(group) if ctx is not None and op else None
    if group is not None:
        ctx.enter_collective(group[0], op, group[1], group[2])
    try:
        next_ping = time.monotonic() + ping_seconds
        # Work.is_completed() polls without blocking (torch 1.13 and 2.x:
        # c10d Work::isCompleted, ProcessGroupGloo's AsyncWork sets it when
        # its thread finishes the collective).
        while not work.is_completed():
            time.sleep(poll_seconds)
            if ctx is not None and time.monotonic() >= next_ping:
                ctx.ping()
                next_ping = time.monotonic() + ping_seconds
    finally:
        if group is not None:
            ctx.leave_collective(group[0])
    work.wait()


__all__ = ["AbortTorchDistributed", "NcclSetting", "StoreTimeout", "TorchStore",
           "UnsafeNcclEnvironment", "check_nccl_environment", "init_process_group", "job_store",
           "nccl_settings", "prepare_nccl_environment", "retire_process_groups", "wait",
           "watch_nccl"]
