"""Rank assignment policies (the C++ rank_assignment.hpp).

A Wrapper takes a list of policies, applied from the last to the first (the
reference's ``Compose``). The stock ones run inside the library; a
``Policy`` subclass is Python, called with the World's slots to edit. Every
rank runs the same policies on the same inputs: policies must be
deterministic.
"""

from __future__ import annotations

import ctypes
import enum
from dataclasses import dataclass
from typing import Callable, List, Optional, Sequence, Union

from . import _native
from .errors import ConfigError
from .state import Mode


@dataclass
class Slot:
    """One initial rank in the World being assigned: its rank (-1 once
    terminated) and mode; ``active_rank`` is as before this iteration."""

    initial_rank: int
    rank: int
    mode: Mode
    active_rank: int


class Policy:
    """A policy written in Python: override ``__call__``."""

    def __call__(self, world: List[Slot], terminated: Sequence[int], first_iteration: bool) -> None:
        """Edit ``world`` in place: modes (make spares, activate, terminate)
        and ranks. ``terminated``: initial ranks terminated since the previous
        iteration (already marked). Active ranks are renumbered afterwards."""
        raise NotImplementedError

    def describe(self) -> str:
        return type(self).__name__

    def _make(self) -> int:
        def trampoline(slots, n, terminated, count, first, _user):
            try:
                world = [Slot(i, slots[i].rank, Mode(slots[i].mode), slots[i].active_rank)
                         for i in range(n)]
                self(world, [terminated[i] for i in range(count)], bool(first))
                for i, s in enumerate(world):
                    slots[i].rank = int(s.rank)
                    slots[i].mode = int(s.mode)
                return 0
            except BaseException as e:  # never across the C ABI
                return _native.callback_failed(e, 1)

        self._callback = _native.POLICY(trampoline)  # kept alive with the policy
        handle = _native.library().resilient_restart_policy_callback(
            self.describe().encode(), self._callback, None)
        if not handle:
            raise ConfigError(_native.last_error())
        return handle


class _Stock(Policy):
    _name = ""

    def __init__(self, argument: int = 0) -> None:
        self.argument = argument

    def describe(self) -> str:
        return type(self).__name__ + (f"({self.argument})" if self.argument else "")

    def _make(self) -> int:
        handle = _native.library().resilient_restart_policy_stock(self._name.encode(),
                                                                 self.argument)
        if not handle:
            raise ConfigError(_native.last_error())
        return handle


class ShiftRanks(_Stock):
    """Survivors keep their order and slide down to 0..n-1."""
    _name = "shift_ranks"


class FillGaps(_Stock):
    """Survivors below the new world size keep their rank; those above fill the holes."""
    _name = "fill_gaps"


class ActivateAllRanks(_Stock):
    """Every live rank becomes active."""
    _name = "activate_all_ranks"


class MaxActiveWorldSize(_Stock):
    """At most ``n`` active ranks: the lowest-ranked stay active, the rest are spares."""
    _name = "max_active_world_size"

    def __init__(self, n: int) -> None:
        super().__init__(n)


class ActiveWorldSizeDivisibleBy(_Stock):
    """The active count is cut down to a multiple of ``n``."""
    _name = "active_world_size_divisible_by"

    def __init__(self, n: int) -> None:
        super().__init__(n)


class LayerFlag(enum.IntFlag):
    """resilient_restart_layer_flag (the library's values, checked when it is loaded)."""

    RESERVE = 1   # spares of a domain replace its failed active ranks
    BACKFILL = 2  # else the domain's highest-ranked active rank moves into the hole


@dataclass
class Layer:
    """One level of a Tree (the C++ Layer). ``key``: the domain of an initial
    rank at this layer, a function of the initial rank (evaluated once per
    job size, for every initial rank, on every rank: it must give the same
    answer everywhere), or one string for all; unused for the root.
    ``max_ranks`` None: no limit."""

    min_ranks: int = 1
    max_ranks: Optional[int] = None
    key: Union[None, str, Callable[[int], str]] = None
    flags: LayerFlag = LayerFlag(0)


class Tree(Policy):
    """Topology-aware assignment, run natively (the C++ tree(), the
    reference's Tree; docs/restart.md "Tree"): ``layers[0]`` is the whole
    job, each further layer splits its parent's domains by its key. First
    iteration: ranks activated depth-first, at most each layer's
    ``max_ranks`` per domain; after failures: domains below ``min_ranks``
    terminated, failed active ranks replaced by spares of the nearest
    enclosing RESERVE domain, else backfilled in a BACKFILL domain, the rest
    shifted, then ``world_size_filter(active_count)`` (the active ranks to
    keep). A whole policy: it is not composed with others."""

    def __init__(self, layers: Sequence[Layer],
                 world_size_filter: Optional[Callable[[int], int]] = None) -> None:
        self.layers = list(layers)
        self.world_size_filter = world_size_filter
        if not self.layers:
            raise ConfigError("Tree: at least the root layer")
        for i, layer in enumerate(self.layers):
            if not isinstance(layer, Layer):
                raise ConfigError(f"Tree: layer {i} is {layer!r}, not a nccl_resilient Layer")
            if i > 0 and layer.key is None:
                raise ConfigError(f"Tree: layer {i} has no key")

    def describe(self) -> str:
        return f"Tree({len(self.layers)} layers)"

    def _key(self, layer: int, initial_rank: int) -> bytes:
        key = self.layers[layer].key
        return (key if isinstance(key, str) else str(key(initial_rank))).encode()

    def _make(self) -> int:
        def key(layer, initial_rank, buffer, size, length, _user):
            try:
                data = self._key(layer, initial_rank)
                length[0] = len(data)
                if len(data) <= size:
                    ctypes.memmove(buffer, data, len(data))
                return 0
            except BaseException as e:  # never across the C ABI
                return _native.callback_failed(e, 1)

        def cut(active, keep, _user):
            try:
                keep[0] = int(self.world_size_filter(int(active)))
                return 0
            except BaseException as e:  # never across the C ABI
                return _native.callback_failed(e, 1)

        # Kept alive with the policy, which the Wrapper keeps.
        self._callbacks = (_native.LAYER_KEY(key),
                           _native.WORLD_SIZE_FILTER(cut) if self.world_size_filter
                           else ctypes.cast(None, _native.WORLD_SIZE_FILTER))
        layers = (_native.CLayer * len(self.layers))()
        for i, layer in enumerate(self.layers):
            layers[i].min_ranks = int(layer.min_ranks)
            layers[i].max_ranks = -1 if layer.max_ranks is None else int(layer.max_ranks)
            layers[i].flags = int(layer.flags)
        handle = _native.library().resilient_restart_policy_tree(
            layers, len(self.layers), self._callbacks[0], self._callbacks[1], None)
        if not handle:
            raise ConfigError(_native.last_error())
        return handle


def _handles(policies: Sequence[Policy], what: str) -> List[int]:
    for p in policies:
        if not isinstance(p, Policy):
            raise ConfigError(f"{what}: {p!r} is not a nccl_resilient Policy")
    if len(policies) > 1 and any(isinstance(p, Tree) for p in policies):
        raise ConfigError(f"{what}: a Tree is a whole policy and cannot be composed with others")
    handles: List[int] = []
    try:
        for p in policies:
            handles.append(p._make())
    except BaseException:
        _destroy(handles)
        raise
    return handles


def _destroy(handles: Sequence[int]) -> None:
    for h in handles:
        _native.library().resilient_restart_policy_destroy(h)


def install(options: int, policies: Sequence[Policy]) -> List[Policy]:
    """Sets `policies` on a C options object; returns what must stay alive."""
    lib = _native.library()
    handles = _handles(policies, "rank_assignment")
    try:
        array = (ctypes.c_void_p * max(len(handles), 1))(*handles)
        if lib.resilient_restart_options_set_rank_assignment(options, array, len(handles)) != 0:
            raise ConfigError(_native.last_error())
    finally:
        _destroy(handles)
    return list(policies)


def assign(policies: Sequence[Policy], world: Optional[Sequence[Slot]] = None,
           terminated: Sequence[int] = (), initial_world_size: Optional[int] = None) -> List[Slot]:
    """One assignment as the loop makes it, outside a job (what-if studies,
    tests): the World after ``terminated`` (initial ranks) are terminated in
    ``world`` and ``policies`` ran (none: the default). ``world`` None: the
    job's first assignment, of ``initial_world_size`` ranks. Raises
    RestartError naming what is wrong when the result is inconsistent."""
    from .errors import check  # noqa: PLC0415 - errors imports nothing of this module
    lib = _native.library()
    first = world is None
    n = int(initial_world_size) if first else len(world)
    if first and initial_world_size is None:
        raise ConfigError("assign: the first assignment needs initial_world_size")
    slots = (_native.Slot * n)()
    if not first:
        for i, s in enumerate(world):
            slots[i].rank, slots[i].mode, slots[i].active_rank = (int(s.rank), int(s.mode),
                                                                  int(s.active_rank))
    dead = (ctypes.c_int * max(len(terminated), 1))(*[int(t) for t in terminated])
    handles = _handles(policies, "assign")
    try:
        array = (ctypes.c_void_p * max(len(handles), 1))(*handles)
        check(lib.resilient_restart_policy_apply(array, len(handles), slots, n, dead,
                                                 len(terminated), 1 if first else 0))
    finally:
        _destroy(handles)
    return [Slot(i, slots[i].rank, Mode(slots[i].mode), slots[i].active_rank) for i in range(n)]


