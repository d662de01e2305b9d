"""Rank assignment policies (the C++ rank_assignment.hpp).

A Wrapper takes a list of policies, applied from the last to the first (the
reference's ``Compose``). The stock ones run inside the library; a
``Policy`` subclass is Python, called with the World's slots to edit. Every
rank runs the same policies on the same inputs: policies must be
deterministic.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from typing import List, Sequence

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


def install(options: int, policies: Sequence[Policy]) -> List[Policy]:
    """Sets `policies` on a C options object; returns what must stay alive."""
    lib = _native.library()
    handles = []
    try:
        for p in policies:
            if not isinstance(p, Policy):
                raise ConfigError(f"rank_assignment: {p!r} is not a nccl_resilient Policy")
            handles.append(p._make())
        array = (ctypes.c_void_p * max(len(handles), 1))(*handles)
        if lib.resilient_restart_options_set_rank_assignment(options, array, len(handles)) != 0:
            raise ConfigError(_native.last_error())
    finally:
        for h in handles:
            lib.resilient_restart_policy_destroy(h)
    return list(policies)


