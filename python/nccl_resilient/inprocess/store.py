"""The Wrapper's store (the reference's ``inprocess.store``).

nccl_resilient's restart loop, its monitor process and its barriers speak
to their store natively, so a store here names a store the library can
reach: ``resilient_url`` (tcp://host:port, etcd://host:port,...) and
whether this process serves it (``hosts``). ``TCPStore`` follows the
reference's rules: MASTER_ADDR and MASTER_PORT (or its arguments), served
by rank 0. ``ResilientStore`` names any store of the library (a
standalone resilient-store, etcd: no single point of failure). On top,
each is a client with torch's Store calls (set, get, add, wait, check,
compare_set, delete_key, multi_get, multi_set), which rank assignments use
through ``RankAssignmentCtx.store``.
"""

from __future__ import annotations

import datetime
import os
import threading
from typing import List, Optional, Sequence, Union

from .. import errors as _errors
from ..errors import ConfigError
from ..store import Store as _Client

Timeout = Union[None, int, float, datetime.timedelta]
_opening = threading.Lock()  # one connection per store and its views


class BarrierError(_errors.RestartError):
    """A distributed barrier of a rank assignment failed."""


class BarrierTimeout(BarrierError):
    """Not every rank arrived at a barrier within its timeout."""


class BarrierOverflow(BarrierError):
    """More ranks arrived at a barrier than it expects."""


def _seconds(value: Timeout) -> Optional[float]:
    if value is None:
        return None
    if isinstance(value, datetime.timedelta):
        return value.total_seconds()
    return float(value)


class StoreMixin:
    """Base of every store a Wrapper takes as ``store_factory``: a store of
    the library's (``resilient_url``), served by the job's initial rank 0
    when ``hosts`` (the loop starts the server there; a tcp:// URL), with
    torch's Store calls as a client of it. A subclass sets
    ``resilient_url``, ``hosts`` and ``timeout`` in its constructor."""

    resilient_url: str = ""
    hosts: bool = False
    timeout: datetime.timedelta = datetime.timedelta(seconds=300)
    _prefix: str = ""
    _shared: Optional[dict] = None  # {"client": the connection}, shared by the views

    def _client(self) -> _Client:
        """The client, opened at first use (rank 0's server exists once the
        Wrapper runs), shared with the views made by ``prefixed``."""
        with _opening:
            if self._shared is None:
                self._shared = {}
            if self._shared.get("client") is None:
                self._shared["client"] = _Client(self.resilient_url, self.timeout)
            client = self._shared["client"]
        return client.view(self._prefix) if self._prefix else client

    def prefixed(self, prefix: str) -> "StoreMixin":
        """A view of the keys under ``prefix`` (torch's PrefixStore)."""
        with _opening:
            if self._shared is None:
                self._shared = {}
        view = object.__new__(type(self))
        view.__dict__.update(self.__dict__)
        view._prefix = self._prefix + prefix.rstrip("/") + "/"
        return view

    def set(self, key: str, value) -> None:
        self._client().set(key, value)

    def get(self, key: str) -> bytes:
        """The value, waiting for the key as torch's stores do (TimeoutError)."""
        self.wait([key])
        value = self._client().get(key)
        return b"" if value is None else value

    def add(self, key: str, amount: int) -> int:
        return self._client().add(key, int(amount))

    def compare_set(self, key: str, expected_value, desired_value) -> bytes:
        """torch's compare_set: the desired value when it was stored, else
        the value in place (expected empty: the key must be absent)."""
        expected = None if expected_value in (b"", "") else expected_value
        swapped, current = self._client().compare_set(key, expected, desired_value)
        if swapped:
            return desired_value.encode() if isinstance(desired_value, str) else bytes(
                desired_value)
        return current if current is not None else (
            expected_value.encode() if isinstance(expected_value, str) else bytes(expected_value))

    def wait(self, keys: Sequence[str], timeout: Timeout = None) -> None:
        seconds = _seconds(timeout)
        self._client().wait(list(keys), self.timeout.total_seconds() if seconds is None
                            else seconds)

    def check(self, keys: Sequence[str]) -> bool:
        return self._client().check(list(keys))

    def delete_key(self, key: str) -> bool:
        return self._client().delete(key)

    def multi_get(self, keys: Sequence[str]) -> List[bytes]:
        return [self.get(k) for k in keys]

    def multi_set(self, keys: Sequence[str], values: Sequence) -> None:
        for k, v in zip(keys, values):
            self.set(k, v)


def _env(name: str) -> str:
    value = os.environ.get(name)
    if not value:
        raise ConfigError(f"TCPStore: {name} is not set (give it in the environment, as torchrun "
                          "does, or as a store_kwargs argument)")
    return value


class TCPStore(StoreMixin):
    """The reference's default store: served by rank 0 at ``host_name``:
    ``port`` (MASTER_ADDR, MASTER_PORT when not given), the job's
    ``world_size`` ranks (WORLD_SIZE). It is nccl_resilient's own TCP store
    (the same protocol as resilient-store), not torch's: ``multi_tenant``
    (sharing the port with torch TCPStores of this process) is refused, and
    ``use_libuv`` (torch's server backend) has no meaning here.
    ``wait_for_workers``: the Wrapper's initial barrier waits for every
    rank either way. With neither ``host_name`` nor ``port`` given and
    NCCL_RESILIENT_STORE_URL set, that store is used instead (a
    resilient-store or etcd that outlives rank 0)."""

    def __init__(self, host_name: Optional[str] = None, port: Optional[int] = None,
                 world_size: Optional[int] = None,
                 timeout: datetime.timedelta = datetime.timedelta(seconds=300),
                 wait_for_workers: bool = True, multi_tenant: bool = False,
                 use_libuv: bool = True) -> None:
        if multi_tenant:
            raise ConfigError(
                "TCPStore(multi_tenant=True): the Wrapper's store is nccl_resilient's own TCP "
                "store, served by the restart library, not a torch TCPStore, so torch's stores "
                "of this process cannot share its port; give torch's store another port "
                "(or pass it a PrefixStore over a store of its own)")
        self.timeout = (timeout if isinstance(timeout, datetime.timedelta)
                        else datetime.timedelta(seconds=float(timeout)))
        self.wait_for_workers = bool(wait_for_workers)
        self.use_libuv = bool(use_libuv)
        shared = os.environ.get("NCCL_RESILIENT_STORE_URL", "")
        if host_name is None and port is None and shared:
            self.host_name, self.port = None, None
            self.resilient_url, self.hosts = shared, False
        else:
            self.host_name = host_name if host_name is not None else _env("MASTER_ADDR")
            self.port = int(port if port is not None else _env("MASTER_PORT"))
            if not 0 < self.port < 65536:
                raise ConfigError(f"TCPStore: port {self.port} is not a TCP port")
            self.resilient_url = f"tcp://{self.host_name}:{self.port}"
            self.hosts = True  # by the job's initial rank 0 (the loop serves it there)
        self.world_size = int(world_size if world_size is not None
                              else os.environ.get("WORLD_SIZE", "0"))

    def __repr__(self) -> str:
        return f"TCPStore({self.resilient_url}{', served here' if self.hosts else ''})"


class FileStore(StoreMixin):
    """Refused: the restart loop's coordination (barriers with timeouts,
    store watches, a monitor process in a session of its own that outlives
    the rank) runs over a store server, and nccl_resilient has no file
    store. Use TCPStore (rank 0 serves it) or ResilientStore (a
    resilient-store or etcd)."""

    def __init__(self, *args, **kwargs) -> None:
        raise ConfigError(
            "FileStore: nccl_resilient's restart loop has no file store: its barriers, watches "
            "and monitor process need a store server; use inprocess.store.TCPStore (rank 0 "
            "serves it, the default) or inprocess.store.ResilientStore(url) for a "
            "resilient-store or etcd (docs/python.md, Coming from nvidia-resiliency-ext)")


class ResilientStore(StoreMixin):
    """Beyond the reference: any store of the library by URL (``url`` None:
    NCCL_RESILIENT_STORE_URL): a standalone resilient-store (tcp://), etcd
    (etcd://a:2379,b:2379: no single point of failure), or ``memory`` (one
    process, without a monitor process: tests)."""

    def __init__(self, url: Optional[str] = None,
                 timeout: datetime.timedelta = datetime.timedelta(seconds=300)) -> None:
        self.resilient_url = url or os.environ.get("NCCL_RESILIENT_STORE_URL", "")
        if not self.resilient_url:
            raise ConfigError("ResilientStore: no URL given and NCCL_RESILIENT_STORE_URL is unset")
        self.hosts = False
        self.timeout = (timeout if isinstance(timeout, datetime.timedelta)
                        else datetime.timedelta(seconds=float(timeout)))

    def __repr__(self) -> str:
        return f"ResilientStore({self.resilient_url})"


__all__ = ["BarrierError", "BarrierOverflow", "BarrierTimeout", "FileStore", "ResilientStore",
           "StoreMixin", "TCPStore"]
