"""Hooks for a restarter that nests this one (the reference's
``inprocess.nested_restarter``, for nvidia-resiliency-ext's ft_launcher):
each logs one state line, ``[NestedRestarter] name=[InProcess] state=...
stage=...``, so that the outer layer knows the in-process layer is
handling a fault, has handled it, has finished or has given up. The
values are this package's (the fact sheets give the line's shape only):

- NestedRestarterHandlingStarting (an Abort): ``state=handling stage=starting``
- NestedRestarterHandlingCompleted (an Initialize, after a restart):
  ``state=handling stage=completed``; list it first in a Compose, so that it
  runs after the other initializers
- NestedRestarterFinalized (a Completion): ``state=finalized stage=completed``
- NestedRestarterAborted (a Terminate): ``state=aborted stage=completed``
"""

from __future__ import annotations

from ._log import logger
from .abort import Abort
from .completion import Completion
from .initialize import Initialize
from .state import FrozenState
from .terminate import Terminate


def _line(state: str, stage: str) -> None:
    logger().info("[NestedRestarter] name=[InProcess] state=%s stage=%s", state, stage)


class NestedRestarterHandlingStarting(Abort):
    def __call__(self, state: FrozenState) -> FrozenState:
        _line("handling", "starting")
        return state


class NestedRestarterHandlingCompleted(Initialize):
    def __call__(self, state: FrozenState) -> FrozenState:
        if state.iteration > 0:  # a restart was handled
            _line("handling", "completed")
        return state


class NestedRestarterFinalized(Completion):
    def __call__(self, state: FrozenState) -> FrozenState:
        _line("finalized", "completed")
        return state


class NestedRestarterAborted(Terminate):
    def __call__(self, state: FrozenState) -> FrozenState:
        _line("aborted", "completed")
        return state


__all__ = ["NestedRestarterAborted", "NestedRestarterFinalized",
           "NestedRestarterHandlingCompleted", "NestedRestarterHandlingStarting"]
