"""torch.distributed with the restart library.

- ``init_process_group(ctx, backend)``: a process group of this iteration's
  active ranks, through the library's store (``TorchStore``, a
  ``torch.distributed.Store``) under a prefix of its own per iteration, so
  that no key of an earlier iteration is seen again; the group an aborted
  iteration left is retired first (see below). Sets RANK, WORLD_SIZE,
  LOCAL_RANK, MASTER_ADDR and MASTER_PORT as torchrun would for the
  iteration, and with an NCCL backend points NCCL_NET_PLUGIN and
  NCCL_PROFILER_PLUGIN at this package's plugin unless they are set.
- ``AbortTorchDistributed()``: the abort hook. It aborts every process group
  with what the running torch offers (``ProcessGroup.abort()``, NCCL's
  ``_shutdown``/``abort`` on older 2.x); gloo before torch 2.6 has no abort
  (pytorch#130345): a thread blocked in a gloo collective stays there until
  gloo's own timeout, so wait for gloo work with ``wait()``, which polls and
  is interrupted at once.
- Retired groups are kept referenced, never destroyed while work may be in
  flight: in torch 1.13 the last reference to a gloo group joins its worker
  threads, which blocks until a collective stuck on a dead peer times out.
"""

from __future__ import annotations

import datetime
import os
import socket
import threading
import time
from typing import Any, List, Optional, Sequence

from . import _native
from .errors import TimeoutError
from .store import Store, _bytes, keys_list
from .wrapper import CallContext, current_context, set_distributed_env

_retired: List[Any] = []  # process groups of aborted iterations (see the module's text)
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


def _abort_group(pg) -> str:
    for name in ("abort", "_shutdown"):
        fn = getattr(pg, name, None)
        if callable(fn):
            fn()
            return name
    try:  # 2.x: the backends of a ProcessGroup
        import torch
        backend = pg._get_backend(torch.device("cuda"))
        for name in ("abort", "_shutdown"):
            fn = getattr(backend, name, None)
            if callable(fn):
                fn()
                return "backend " + name
    except Exception:  # no CUDA backend in this group
        pass
    return ""


class AbortTorchDistributed:
    """The abort hook for torch.distributed: aborts every process group with
    the API the running torch has (one thread per group, as an abort must
    not wait on one group before the next). What it did per group is in
    ``last`` ({group: "abort" | "_shutdown" | "" (none: gloo before 2.6)})."""

    def __init__(self) -> None:
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

        threads = [threading.Thread(target=one, args=(pg,), daemon=True) for pg in _all_groups()]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=10)
        self.last = done


def retire_process_groups() -> None:
    """Forgets every process group without destroying any (they stay
    referenced: see the module's text), so that a new default group can be
    made."""
    dist = _dist()
    if not dist.is_initialized():
        return
    _retired.extend(_all_groups())
    dist.destroy_process_group()


def _nccl_environment() -> None:
    where = _native.library_dir()
    if where is None:
        return
    net = where / _native.NET_PLUGIN
    profiler = where / _native.PROFILER_PLUGIN
    for variable, path in (("NCCL_NET_PLUGIN", net),
                           # The net plugin's .so carries the profiler plugin too.
                           ("NCCL_PROFILER_PLUGIN", profiler if profiler.exists() else net)):
        if variable not in os.environ and path.exists():
            os.environ[variable] = str(path)


def init_process_group(ctx: CallContext, backend: str = "gloo",
                       timeout: datetime.timedelta = datetime.timedelta(seconds=60),
                       store_url: Optional[str] = None, **kwargs: Any) -> None:
    """torch.distributed.init_process_group for this iteration's active ranks
    (see the module's text). ``timeout`` is the group's own (gloo's wait for
    a silent peer, NCCL's watchdog): keep it above the hard timeout."""
    dist = _dist()
    state = ctx.state
    if not state.active:
        raise RuntimeError("init_process_group on a spare rank (State.active is False)")
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
    if "nccl" in backend.lower():
        _nccl_environment()
    dist.init_process_group(backend, store=TorchStore(store.view("pg"), timeout),
                            rank=state.active_rank, world_size=state.active_world_size,
                            timeout=timeout, **kwargs)
    if "nccl" in backend.lower():
        watch_nccl(ctx)


def watch_nccl(ctx: CallContext, group=None) -> bool:
    """Has the library watch the NCCL communicator of a process group (the
    default one: None) when the running torch exposes it (ProcessGroupNCCL's
    ``_comm_ptr``, torch 2.x, once the communicator exists: pass
    ``device_id`` to init_process_group for an eager one). Returns whether
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


def wait(work, poll_seconds: float = 0.0002, ping_seconds: float = 0.05) -> None:
    """Waits for an async torch work (``all_reduce(..., async_op=True)``)
    while staying interruptible: a restart's RankShouldRestart arrives at
    once, even where the backend cannot be aborted (gloo before 2.6). Then
    ``work.wait()`` surfaces the work's own error.

    A rank waiting here for its peers is alive: it pings the running
    CallContext every ``ping_seconds``, so that the soft timeout names the
    rank that stopped (a frozen peer), not the ones waiting for it."""
    ctx = current_context()
    next_ping = time.monotonic() + ping_seconds
    while not work.is_completed():
        time.sleep(poll_seconds)
        if ctx is not None and time.monotonic() >= next_ping:
            ctx.ping()
            next_ping = time.monotonic() + ping_seconds
    work.wait()


__all__ = ["AbortTorchDistributed", "StoreTimeout", "TorchStore", "init_process_group",
           "job_store", "retire_process_groups", "wait", "watch_nccl"]
