"""Initialize hooks (the reference's ``inprocess.initialize``): at the start
of every iteration; an Exception restarts, a BaseException ends the
Wrapper (RestartAbort ends the job on every rank)."""

from __future__ import annotations

import abc
from typing import Optional

from .. import _native
from ..errors import ConfigError
from ..health import _NativeCheck
from .exception import RestartAbort
from .state import FrozenState


class Initialize(abc.ABC):
    """An initialize hook: ``__call__(state)`` returns the state."""

    @abc.abstractmethod
    def __call__(self, state: FrozenState) -> FrozenState:
        raise NotImplementedError


class RetryController(Initialize, _NativeCheck):
    """RestartAbort once the iteration reaches ``max_iterations`` (None: no
    limit), the world size falls below ``min_world_size`` or the active
    world size below ``min_active_world_size``: the library's retry
    controller."""

    def __init__(self, max_iterations: Optional[int] = None, min_world_size: int = 1,
                 min_active_world_size: int = 1) -> None:
        self.max_iterations = max_iterations
        self.min_world_size = min_world_size
        self.min_active_world_size = min_active_world_size
        _NativeCheck.__init__(self, _native.library().resilient_restart_retry_controller(
            -1 if max_iterations is None else int(max_iterations), int(min_world_size),
            int(min_active_world_size)))

    def __call__(self, state: FrozenState) -> FrozenState:
        status = self._run(state)
        if status == _native.status("aborted"):
            raise RestartAbort(_native.last_error())
        if status != _native.status("ok"):
            raise ConfigError(_native.last_error())
        return state


__all__ = ["Initialize", "RetryController"]
