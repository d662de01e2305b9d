"""A rank's state in one restart iteration (the reference's ``inprocess.state``).

``FrozenState`` is what hooks receive: nccl_resilient's State (frozen, the
reference's fields ``rank``, ``world_size``, ``active_rank``,
``active_world_size``, ``initial_rank``, ``initial_world_size``,
``iteration``, ``mode``, ``fn_exception``, plus ``fn_failed`` and
``culprit``). ``State`` is its mutable form, which a RankAssignment edits
through ``RankAssignmentCtx.state``.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Optional

from ..state import Mode
from ..state import State as FrozenState


@dataclasses.dataclass
class State:
    """The mutable state of one rank (``freeze()`` gives the FrozenState)."""

    rank: int
    world_size: int
    active_rank: Optional[int] = None
    active_world_size: Optional[int] = None
    initial_rank: Optional[int] = None
    initial_world_size: Optional[int] = None
    iteration: int = 0
    mode: Mode = Mode.INITIALIZED
    fn_exception: Optional[BaseException] = None

    @classmethod
    def from_frozen(cls, state: FrozenState) -> "State":
        return cls(state.rank, state.world_size, state.active_rank, state.active_world_size,
                   state.initial_rank, state.initial_world_size, state.iteration, state.mode,
                   state.fn_exception)

    def freeze(self) -> FrozenState:
        def number(value, default):
            return default if value is None else int(value)
        return FrozenState(number(self.initial_rank, self.rank),
                           number(self.initial_world_size, self.world_size), int(self.rank),
                           int(self.world_size), number(self.active_rank, -1),
                           number(self.active_world_size, 0), int(self.iteration),
                           Mode(self.mode), fn_exception=self.fn_exception)

    def set_distributed_vars(self) -> None:
        """RANK and WORLD_SIZE as torch.distributed should see this rank: its
        active rank and the active world size (the Wrapper does it before
        every call of the wrapped function)."""
        set_distributed_vars(self)


def set_distributed_vars(state) -> None:
    """RANK and WORLD_SIZE of ``state`` (a State or FrozenState) in the
    environment, when it is an active rank."""
    if Mode(state.mode) == Mode.ACTIVE:
        os.environ["RANK"] = str(state.active_rank)
        os.environ["WORLD_SIZE"] = str(state.active_world_size)


__all__ = ["FrozenState", "Mode", "State", "set_distributed_vars"]
