"""What a rank knows about itself in one iteration (the C++ state.hpp)."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Optional


class Mode(enum.IntEnum):
    """resilient_restart_mode."""

    ACTIVE = 0        # runs the wrapped function
    INACTIVE = 1      # a spare: alive, waits, may be activated later
    TERMINATED = 2    # gone for good
    INITIALIZED = 3   # before the first rank assignment


@dataclass(frozen=True)
class State:
    """One iteration's view of this rank. ``fn_exception`` is the exception
    that ended this rank's previous call of the wrapped function (None on the
    first iteration or when it did not raise)."""

    initial_rank: int
    initial_world_size: int
    rank: int
    world_size: int
    active_rank: int
    active_world_size: int
    iteration: int
    mode: Mode
    fn_failed: bool = False
    culprit: bool = False
    fn_exception: Optional[BaseException] = field(default=None, compare=False)

    @property
    def active(self) -> bool:
        return self.mode == Mode.ACTIVE

    def describe(self) -> str:
        """'iteration 3: rank 2/7 (initial 4/8), active 2/6' (as the C++ State)."""
        return (f"iteration {self.iteration}: rank {self.rank}/{self.world_size} "
                f"(initial {self.initial_rank}/{self.initial_world_size}), "
                + (f"active {self.active_rank}/{self.active_world_size}" if self.active
                   else self.mode.name.lower()))

    @classmethod
    def _from_c(cls, c, fn_exception: Optional[BaseException] = None) -> "State":
        return cls(c.initial_rank, c.initial_world_size, c.rank, c.world_size, c.active_rank,
                   c.active_world_size, c.iteration, Mode(c.mode), bool(c.fn_failed),
                   bool(c.culprit), fn_exception)
